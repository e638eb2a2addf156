"""Progress bars of the surrogate training phases: the same tqdm mechanism as
sampling (progress=True), named after the phase, with the right totals and
updates (captured with a fake tqdm)."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.surrogates.random_network import INPUT_SCALES

tqdm_auto = pytest.importorskip("tqdm.auto")


class FakeBar:
    """Records what a sampler asks of tqdm."""
    made = []

    def __init__(self, total=None, desc=None, **kw):
        self.total, self.desc, self.n, self.closed = total, desc, 0, False
        self.descriptions = [desc]
        FakeBar.made.append(self)

    def update(self, n=1):
        assert not self.closed
        self.n += n

    def set_description_str(self, desc, refresh=True):
        self.descriptions.append(desc)

    def close(self):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    FakeBar.made = []
    monkeypatch.setattr(tqdm_auto, "tqdm", FakeBar)
    return FakeBar.made


def _model():
    return fs.models.Gaussian(np.array([1.0, -1.0]), np.array([[1.0, 0.3], [0.3, 0.5]]))


def _by_desc(bars, start):
    return [b for b in bars if b.desc.startswith(start)]


def test_rns_hmc_random_network_fit_has_a_bar(bars):
    fs.sample(_model(), method="rns-hmc", n_draws=100, n_warmup=200, chains=2, seed=1,
              n_hidden=40)
    (train,) = _by_desc(bars, "train (random network)")
    # one step per candidate input scale, one for the final fit
    assert train.total == len(INPUT_SCALES) + 1 and train.n == train.total and train.closed
    (explore,) = _by_desc(bars, "explore")
    assert explore.total == explore.n == 2 * 200
    (exploit,) = _by_desc(bars, "exploit")
    assert exploit.total == exploit.n == 2 * 100
    assert all(b.closed for b in bars)
    # in order: explore, train, exploit
    assert bars.index(explore) < bars.index(train) < bars.index(exploit)


def test_nnghmc_gradient_network_training_has_a_bar_per_training(bars):
    res = fs.sample(_model(), method="nnghmc", n_draws=100, n_warmup=400, chains=1, seed=2,
                    n_hidden=20, trainer_options={"max_iter": 40})
    trains = [e for e in res.info["events"] if e["event"] == "train"]
    tb = _by_desc(bars, "train (gradient network")
    assert len(tb) == len(trains) >= 1
    for j, (b, e) in enumerate(zip(tb, trains)):
        # training j + 1 of at most the schedule's number (a switch ends them early)
        assert b.desc.startswith(f"train (gradient network {j + 1} of <= ")
        # total: the optimiser's iteration budget; updates: the iterations it ran
        assert b.total == 40 and b.n == e["iterations"] and b.closed
    # the exploration and trial bars name their cycle too; the kept draws'
    # bar says which kernel drew them
    n = len(tb)
    for j in range(n):
        assert len(_by_desc(bars, f"trial ({j + 1} of <= ")) == 1
    assert len(_by_desc(bars, "explore (1 of <= ")) == 1
    (draws,) = [b for b in bars if b.desc in ("nnghmc", "exact")]
    assert draws.desc == ("nnghmc" if res.info["switched"] else "exact")


def test_vhmc_bar_names_the_score_matching_phase(bars):
    fs.sample(_model(), method="vhmc", n_draws=100, n_warmup=200, chains=2, seed=3, n_hidden=30)
    (bar,) = bars
    assert bar.total == bar.n == 2 * (200 + 100)
    assert bar.descriptions == ["vhmc", "vhmc: train (score matching)", "vhmc: warmup and sample"]


def test_no_bars_without_progress(bars):
    fs.sample(_model(), method="rns-hmc", n_draws=50, n_warmup=100, chains=1, seed=4,
              n_hidden=30, progress=False)
    fs.sample(_model(), method="nnghmc", n_draws=50, n_warmup=400, chains=1, seed=4,
              n_hidden=10, trainer_options={"max_iter": 10}, progress=False)
    assert bars == []


def test_trainers_report_progress_directly():
    calls = []
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((300, 2))
    fs.surrogates.train_random_network(Q, 0.5 * np.sum(Q ** 2, axis=1), n_hidden=30, seed=1,
                                       progress=lambda n, t: calls.append((n, t)))
    assert calls == [(k, len(INPUT_SCALES) + 1) for k in range(1, len(INPUT_SCALES) + 2)]
    calls.clear()
    net = fs.surrogates.fit_gradient_network(Q, Q, n_hidden=10, seed=1, max_iter=25,
                                             progress=lambda n, t: calls.append((n, t)))
    assert calls == [(k, 25) for k in range(1, net.info["iterations"] + 1)]
    assert len(net.info["holdout_history"]) == net.info["iterations"]
