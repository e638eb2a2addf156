"""Checkpoint and resume (bit for bit), continuing from a Result, saving
surrogates, and pickling a Result without its data set.

A stop is simulated by a callback potential that raises (an exception, or
KeyboardInterrupt) at its k-th call, k chosen inside the phase under test
from the call counts of an uninterrupted run; or, for a phase without
potential calls (training), by a trainer that raises KeyboardInterrupt.
The resumed run must give np.array_equal draws, warm-up draws and
statistics to the uninterrupted run with the same seed.
"""
import os
import pickle
import shutil
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.samplers import _checkpoint

try:
    import arviz  # noqa: F401
    HAVE_ARVIZ = True
except ImportError:
    HAVE_ARVIZ = False

X, Y, _ = fs.datasets.simulate_logistic(400, 3, seed=5)
MODEL = fs.models.LogisticRegression(X, Y, prior_sd=10.0)


class Boom(Exception):
    pass


class Calls:
    """A callback potential equal to MODEL that raises `exc` at call `fail_at`."""

    def __init__(self, fail_at=None, exc=Boom):
        self.n, self.fail_at, self.exc = 0, fail_at, exc

    def __call__(self, q):
        self.n += 1
        if self.fail_at is not None and self.n == self.fail_at:
            raise self.exc("stop here")
        return MODEL.value_and_grad(q)

    def value(self, q):
        self.n += 1
        if self.fail_at is not None and self.n == self.fail_at:
            raise self.exc("stop here")
        return MODEL.value(q)


def potential(calls):
    return fs.Potential.from_callable(calls, MODEL.dim, value=calls.value)


SAMPLERS = {
    "hmc": (fs.HMC, dict(n_steps=5), 200, 150),
    "nuts": (fs.NUTS, dict(max_tree_depth=5, surrogate=False), 150, 100),
    # the metric adapted in C after every iteration: its estimators' state
    # is in the checkpoint
    "nuts-fisher": (fs.NUTS, dict(max_tree_depth=5, surrogate=False, adaptation="fisher"),
                    150, 100),
    "nuts-low-rank": (fs.NUTS, dict(max_tree_depth=5, surrogate=False, adaptation="fisher",
                                    metric="low-rank"), 150, 100),
    # long enough for the warm-up to end on convergence (about 290 rows)
    "nuts-converged": (fs.NUTS, dict(max_tree_depth=5, surrogate=False), 400, 100),
    "rns-hmc": (fs.RNSHMC, dict(n_hidden=30, n_steps=5, guard=0.5, guard_window=40), 150, 150),
    # the exploration's trajectory points, recorded and decimated (capacity
    # 20 per chain at d = 3; 75 x 5 points each)
    "rns-hmc-trajectory": (fs.RNSHMC, dict(n_hidden=30, n_steps=5, guard=None,
                                           training="trajectory"), 150, 150),
    "arns-hmc": (fs.ARNSHMC, dict(n_hidden=30, n_start=60, n_steps=5, update_every=10),
                 150, 150),
    "arns-hmc-greville": (fs.ARNSHMC, dict(n_hidden=20, n_start=60, n_steps=5, update_every=10,
                                           online_ridge=0.0, resync_every=50), 150, 150),
    # started from its own recorded trajectory points (capacity 40 per chain)
    "arns-hmc-trajectory": (fs.ARNSHMC, dict(n_hidden=30, n_start=60, n_steps=5,
                                             update_every=10, training="trajectory"), 150, 150),
    "vhmc": (fs.VHMC, dict(n_hidden=30, n_steps=5, exact=True, n_train=80), 120, 100),
    # approximate, learning the states beyond its training ball between spans
    # of 20 iterations after t0 (learn_outside): its potential calls are
    # outside the chain's spans, so the phase cases below leave it out
    "vhmc-approx": (fs.VHMC, dict(n_hidden=30, n_steps=5, n_train=60, window=20), 120, 200),
    "nnghmc": (fs.NNGHMC, dict(n_hidden=10, n_steps=5, train_every=0.5, trial_length=30),
               150, 100),
}

# the batch training step of each surrogate sampler (no potential calls in it):
# a stop there is a KeyboardInterrupt raised by it
TRAINERS = {"rns-hmc": (fs.RNSHMC, "train"), "arns-hmc": (fs.ARNSHMC, "start_surrogate"),
            "arns-hmc-greville": (fs.ARNSHMC, "start_surrogate"),
            "arns-hmc-trajectory": (fs.ARNSHMC, "start_surrogate"),
            "nnghmc": (fs.NNGHMC, "train")}


def run(method, pot, seed=3, chains=2, **kw):
    cls, opts, n_warmup, n_draws = SAMPLERS[method]
    return cls(pot, **opts).sample(n_draws, n_warmup, chains=chains, seed=seed,
                                   progress=False, **kw)


def bitwise(x, y):
    """Equal bit for bit (NaN where NaN, same dtype and shape)."""
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def assert_same(a, b):
    assert bitwise(a.draws, b.draws)
    assert bitwise(a.warmup_draws, b.warmup_draws)
    assert sorted(a.stats) == sorted(b.stats)
    for k in a.stats:
        assert bitwise(a.stats[k], b.stats[k]), k
    for k in a.warmup_stats:
        assert bitwise(a.warmup_stats[k], b.warmup_stats[k]), k
    assert bitwise(a.step_size, b.step_size)
    assert a.n_done.tolist() == b.n_done.tolist()


def phase_calls(method):
    """The uninterrupted run, and per phase the potential calls made in its
    spans: "warmup" (exact warm-up / exploration), "hook" (VHMC's training
    spans), "sample"."""
    from fastsurrogate.samplers._base import ChainContext
    calls = Calls()
    spans = {}
    original = ChainContext.run_span

    def logged(ctx, chain, trace, start, stop_row, key, hook=None):
        n0 = calls.n
        try:
            return original(ctx, chain, trace, start, stop_row, key, hook)
        finally:
            phase = "hook" if hook is not None and key == "warmup" else key
            spans.setdefault(phase, []).append((n0, calls.n))

    with mock.patch.object(ChainContext, "run_span", logged):
        ref = run(method, potential(calls))
    return ref, spans, calls.n


CASES = [(m, p) for m in SAMPLERS for p in ("warmup", "sample")
         if not (m == "vhmc" and p == "warmup") and m != "vhmc-approx"]
CASES += [("vhmc", "hook")] + [(m, "train") for m in TRAINERS]


@pytest.mark.parametrize("method,phase", CASES)
@pytest.mark.parametrize("exc", [Boom, KeyboardInterrupt])
def test_resume_after_a_stop_is_bit_for_bit(tmp_path, method, phase, exc):
    path = tmp_path / "ck.npz"
    if phase == "train":
        # a Python potential: chains in turn, Ctrl-C reaches the main thread
        ref_calls = Calls()
        ref = run(method, potential(ref_calls))
        n_ref = ref_calls.n
        cls, name = TRAINERS[method]
        with mock.patch.object(cls, name, side_effect=exc("in training")):
            if exc is KeyboardInterrupt:
                part = run(method, potential(Calls()), checkpoint=path, checkpoint_every=25)
            else:
                with pytest.raises(Boom) as info:
                    run(method, potential(Calls()), checkpoint=path, checkpoint_every=25)
                part = info.value.result
        assert part.interrupted and part.n_done.max() == 0
    else:
        ref, spans, n_ref = phase_calls(method)
        # the middle of the phase's last long span (chains run in turn: the
        # last chain's, after the others finished)
        a, b = [ab for ab in spans[phase] if ab[1] - ab[0] > 10][-1]
        k = (a + b) // 2
        if exc is KeyboardInterrupt:
            part = run(method, potential(Calls(k, exc)), checkpoint=path, checkpoint_every=25)
        else:
            with pytest.raises(Boom) as info:
                run(method, potential(Calls(k, exc)), checkpoint=path, checkpoint_every=25)
            part = info.value.result
        assert part.interrupted
    assert path.exists()
    calls = Calls()
    res = run(method, potential(calls), resume=path)
    assert_same(res, ref)
    assert not res.interrupted
    # the checkpointed iterations were copied, not run again
    assert calls.n < 0.8 * n_ref, (calls.n, n_ref)


def test_checkpointing_does_not_change_the_draws_and_threads_resume(tmp_path):
    """Chains in threads (a C potential), a checkpoint copied mid-run, resumed."""
    ref = run("hmc", MODEL)
    path, copy = tmp_path / "ck.npz", tmp_path / "mid.npz"
    write = _checkpoint.Checkpointer.write

    def write_and_copy(self):
        write(self)
        if self.n_writes == 9:
            shutil.copy(path, copy)

    with mock.patch.object(_checkpoint.Checkpointer, "write", write_and_copy):
        full = run("hmc", MODEL, checkpoint=path, checkpoint_every=20)
    assert_same(full, ref)
    assert_same(run("hmc", MODEL, resume=copy), ref)
    # a finished run's checkpoint resumes to the same result too
    assert_same(fs.resume(path, MODEL, n_steps=5, progress=False), ref)


@pytest.mark.parametrize("method", ["rns-hmc", "arns-hmc", "vhmc", "vhmc-approx", "nnghmc"])
def test_surrogate_samplers_resume_from_every_checkpoint(tmp_path, method):
    """A checkpoint copied at several points of a run (threads where the
    potential allows) resumes to the uninterrupted Result."""
    ref = run(method, MODEL)
    path = tmp_path / "ck.npz"
    copies = []
    write = _checkpoint.Checkpointer.write

    def write_and_copy(self):
        write(self)
        if self.n_writes % 3 == 0:
            copies.append(tmp_path / f"c{self.n_writes}.npz")
            shutil.copy(path, copies[-1])

    with mock.patch.object(_checkpoint.Checkpointer, "write", write_and_copy):
        assert_same(run(method, MODEL, checkpoint=path, checkpoint_every=20), ref)
    assert len(copies) >= 3
    for c in copies[::max(len(copies) // 4, 1)]:
        assert_same(run(method, MODEL, resume=c), ref)


@pytest.mark.parametrize("exc", [Boom, KeyboardInterrupt])
def test_vhmc_resumes_bit_for_bit_after_a_stop_while_learning_outside(tmp_path, exc):
    """Approximate VHMC's exact gradients after t0 (learn_outside) come
    between the chain's spans: a stop at one of them (the potential raising
    there) resumes to the uninterrupted run."""
    ref_calls = Calls()
    ref = run("vhmc-approx", potential(ref_calls))
    learnt = ref.info["learnt_outside"]
    assert min(learnt) > 0, learnt          # both chains learnt after t0
    n_ref = ref_calls.n
    k = n_ref - learnt[-1] // 2             # the middle of the last chain's
    path = tmp_path / "ck.npz"
    if exc is KeyboardInterrupt:
        part = run("vhmc-approx", potential(Calls(k, exc)), checkpoint=path,
                   checkpoint_every=25)
    else:
        with pytest.raises(Boom) as info:
            run("vhmc-approx", potential(Calls(k, exc)), checkpoint=path, checkpoint_every=25)
        part = info.value.result
    assert part.interrupted and part.n_done[-1] < 200
    res = run("vhmc-approx", potential(Calls()), resume=path)
    assert_same(res, ref)
    assert res.info["learnt_outside"] == learnt


def test_checkpoint_file_is_versioned_npz_without_pickle(tmp_path):
    path = tmp_path / "ck.npz"
    run("hmc", MODEL, checkpoint=path, checkpoint_every=100)
    with np.load(path, allow_pickle=False) as z:
        import json
        header = json.loads(bytes(z["__header__"]).decode())
        assert all(z[k].dtype != object for k in z.files)
    assert header["format"] == _checkpoint.FORMAT and header["version"] == _checkpoint.VERSION
    assert header["method"] == "hmc" and header["n_warmup"] == 200
    assert not any(f.name.startswith("ck.npz.tmp") for f in tmp_path.iterdir())


def test_resume_refuses_another_run(tmp_path):
    path = tmp_path / "ck.npz"
    run("hmc", MODEL, checkpoint=path, checkpoint_every=100)
    with pytest.raises(ValueError, match="options"):
        fs.HMC(MODEL, n_steps=6).sample(150, 200, chains=2, resume=path, progress=False)
    with pytest.raises(ValueError, match="seed differs"):
        fs.HMC(MODEL, n_steps=5).sample(150, 200, chains=2, seed=4, resume=path, progress=False)
    with pytest.raises(ValueError, match="n_draws"):
        fs.HMC(MODEL, n_steps=5).sample(151, 200, chains=2, resume=path, progress=False)
    with pytest.raises(ValueError, match="not a readable"):
        (tmp_path / "junk.npz").write_bytes(b"junk")
        fs.HMC(MODEL, n_steps=5).sample(150, 200, chains=2, resume=tmp_path / "junk.npz",
                                        progress=False)
    # the messages name what differs: the option and its values, the dimension
    with pytest.raises(ValueError, match="n_steps: 5 there, 6 here"):
        fs.HMC(MODEL, n_steps=6).sample(150, 200, chains=2, resume=path, progress=False)
    other = fs.models.LogisticRegression(np.hstack([X, X[:, :1]]), Y, prior_sd=10.0)
    with pytest.raises(ValueError, match=r"the potential's dim differs .*\(3 there, 4 here\)"):
        fs.HMC(other, n_steps=5).sample(150, 200, chains=2, resume=path, progress=False)


def test_fs_resume_finds_the_sampler_of_a_vhmc_exact_run(tmp_path):
    """VHMC with exact=True names its runs "vhmc-exact", which is no key of
    fs.SAMPLERS: fs.resume raised "unknown method" (sample(..., resume=) worked)."""
    path = tmp_path / "ck.npz"
    ref = run("vhmc", MODEL)
    assert ref.method == "vhmc-exact"
    assert_same(run("vhmc", MODEL, checkpoint=path, checkpoint_every=60), ref)
    assert_same(fs.resume(path, MODEL, progress=False, **SAMPLERS["vhmc"][1]), ref)


def test_a_short_run_still_writes_its_checkpoint(tmp_path):
    """The default interval shrinks to a quarter of a run shorter than it
    (1000 iterations would have written nothing for 200); an explicit
    interval longer than the run warns."""
    path = tmp_path / "ck.npz"
    ref = run("hmc", MODEL)
    assert_same(run("hmc", MODEL, checkpoint=path), ref)
    header, _ = _checkpoint.read_npz(path, _checkpoint.FORMAT, _checkpoint.VERSION)
    assert header["checkpoint_every"] == 88          # (200 + 150) / 4, rounded up
    assert_same(run("hmc", MODEL, resume=path), ref)
    with pytest.warns(UserWarning, match="no checkpoint will be written"):
        run("hmc", MODEL, checkpoint=tmp_path / "b.npz", checkpoint_every=351)


def test_bad_checkpoint_arguments():
    with pytest.raises(ValueError, match="not available"):
        fs.RMHMC(MODEL).sample(10, 30, checkpoint="x.npz")
    with pytest.raises(ValueError, match="checkpoint=path"):
        fs.HMC(MODEL).sample(10, 30, checkpoint_every=5)
    with pytest.raises(ValueError, match="does not exist"):
        fs.HMC(MODEL).sample(10, 30, checkpoint="/no/such/folder/x.npz")
    with pytest.raises(TypeError, match="checkpoint_every"):
        fs.HMC(MODEL).sample(10, 30, checkpoint="x.npz", checkpoint_every=2.5)
    with pytest.raises(TypeError, match="resume"):
        fs.HMC(MODEL).sample(10, 30, resume=3)


# -- continuing from a Result ---------------------------------------------------------

@pytest.mark.parametrize("method", ["hmc", "nuts", "rns-hmc", "vhmc", "vhmc-approx", "nnghmc",
                                    "arns-hmc-stop"])
def test_resume_from_result_equals_one_longer_run(method):
    """sample(m, resume=sample(n)) gives the last m draws of one run of n + m
    draws, bit for bit (RNS-HMC: with guard=None, a guard window that would
    straddle the two calls is judged differently; ARNS-HMC: once max_points
    has stopped the online updates)."""
    if method == "arns-hmc-stop":
        cls, opts, n_warmup = fs.ARNSHMC, dict(n_hidden=30, n_start=60, max_points=80), 150
    elif method == "vhmc-approx":
        cls, opts, n_warmup = fs.VHMC, dict(n_hidden=30, n_train=80), 120
    else:
        cls, opts, n_warmup, _ = SAMPLERS[method]
    opts = dict(opts, guard=None) if method == "rns-hmc" else opts
    n, m = 60, 40
    one = cls(MODEL, **opts).sample(n + m, n_warmup, chains=2, seed=4, progress=False)
    first = cls(MODEL, **opts).sample(n, n_warmup, chains=2, seed=4, progress=False)
    more = cls(MODEL, **opts).sample(m, chains=2, resume=first, progress=False)
    assert np.array_equal(one.draws[:, :n], first.draws)
    assert np.array_equal(one.draws[:, n:], more.draws)
    for k in more.stats:
        assert np.array_equal(one.stats[k][:, n:], more.stats[k]), k
    assert more.warmup_draws.shape[1] == 0
    assert more.surrogate is first.surrogate


def test_resume_from_result_checks():
    res = fs.HMC(MODEL).sample(20, 20, chains=1, seed=1, progress=False)
    with pytest.raises(ValueError, match="nuts"):
        fs.NUTS(MODEL).sample(10, resume=res, progress=False)
    with pytest.raises(ValueError, match="dim"):
        fs.HMC(fs.models.StandardNormal(2)).sample(10, resume=res, progress=False)


# -- surrogates: save / load -----------------------------------------------------------

def _same_surrogate(a, b, dim, seed=0, value=True):
    Q = np.random.default_rng(seed).normal(size=(20, dim))
    for q in Q:
        assert np.array_equal(a.grad(q), b.grad(q))
        if value:
            assert a.value(q) == b.value(q)


def test_random_network_round_trip(tmp_path):
    res = fs.RNSHMC(MODEL, n_hidden=40).sample(20, 100, chains=1, seed=2, progress=False)
    net = res.surrogate
    net.save(tmp_path / "net.npz")
    back = fs.surrogates.RandomNetwork.load(tmp_path / "net.npz")
    assert type(back) is type(net) and back.n_hidden == 40
    _same_surrogate(net, back, 3)
    assert back.info["train_rmse"] == net.info["train_rmse"]
    with np.load(tmp_path / "net.npz", allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)
        # no training data: only the network's arrays
        assert sum(z[k].size for k in z.files if k != "__header__") < 40 * 3 + 40 * 10


def test_rbf_and_weighted_sum_and_gaussian_round_trip(tmp_path):
    net = fs.surrogates.RandomNetwork.random(3, 15, activation="rbf", seed=1,
                                             shift=np.ones(3), scale=2.0 * np.ones(3))
    net.output_weights = np.linspace(-1, 1, 15)
    base = fs.models.Gaussian(np.zeros(3), np.diag([1.0, 2.0, 3.0]))
    ws = fs.WeightedSum([net, base], [0.3, 0.7])
    fs.surrogates.save(ws, tmp_path / "ws.npz")
    back = fs.surrogates.load(tmp_path / "ws.npz")
    assert type(back).__name__ == "WeightedSum"
    _same_surrogate(ws, back, 3)
    # a network's own load takes only its own class
    with pytest.raises(ValueError, match="holds a WeightedSum, not a RandomNetwork"):
        fs.surrogates.RandomNetwork.load(tmp_path / "ws.npz")


def test_gradient_network_round_trip(tmp_path):
    Q = np.random.default_rng(0).normal(size=(200, 3))
    G = np.array([MODEL.grad(q) for q in Q])
    net = fs.surrogates.fit_gradient_network(Q, G, n_hidden=10, seed=0)
    net.save(tmp_path / "g.npz")
    back = fs.surrogates.GradientNetwork.load(tmp_path / "g.npz")
    _same_surrogate(net, back, 3, value=False)      # a gradient network has no value
    assert np.array_equal(back.get_params(), net.get_params())


@pytest.mark.parametrize("ridge, centred", [(0.0, False), (1e-3, False), (1e-3, True)])
def test_online_output_layer_round_trip(tmp_path, ridge, centred):
    """Greville (ridge 0) and SMW layers, rows centred or not: loaded, they
    absorb more points exactly as the saved one does."""
    from fastsurrogate.surrogates.online import OnlineOutputLayer
    rng = np.random.default_rng(0)
    H, y = rng.normal(size=(40, 12)), rng.normal(size=40)
    centre = rng.normal(size=11) if centred else None
    layer = OnlineOutputLayer(H, y, ridge, 5, 0, centre=centre)
    fs.surrogates.save(layer, tmp_path / "layer.npz")
    back = fs.surrogates.load(tmp_path / "layer.npz")
    assert bitwise(back.weights, layer.weights) and back.n_seen == 40
    if centred:
        assert bitwise(back.centre, centre)
        F = rng.normal(size=(3, 11))
        assert bitwise(back.rows(F), layer.rows(F)) and bitwise(layer.rows(F)[:, :-1], F - centre)
    else:
        assert back.centre is None
    H2, y2 = rng.normal(size=(10, 12)), rng.normal(size=10)

    def data():
        return np.vstack([H, H2]), np.concatenate([y, y2])

    layer.absorb(H2, y2, data)
    back.absorb(H2, y2, data)
    assert bitwise(back.weights, layer.weights) and back.n_seen == layer.n_seen == 50


def test_save_refuses_what_it_cannot_store(tmp_path):
    with pytest.raises(TypeError, match="cannot save"):
        fs.surrogates.save(MODEL, tmp_path / "m.npz")
    (tmp_path / "other.npz").write_bytes(b"")
    np.savez(tmp_path / "plain.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="__header__"):
        fs.surrogates.load(tmp_path / "plain.npz")


# -- Result pickles without the data set ----------------------------------------------

def test_result_pickles_without_the_data():
    Xb, yb, _ = fs.datasets.simulate_logistic(100000, 5, seed=1)
    big = fs.models.LogisticRegression(Xb, yb, prior_sd=10.0)
    res = fs.HMC(big, step_size=0.01, adapt=False, n_steps=3).sample(
        30, 0, chains=1, seed=1, progress=False)
    blob = pickle.dumps(res)
    assert Xb.nbytes > 3e6
    assert len(blob) < 100_000, len(blob)
    back = pickle.loads(blob)
    assert np.array_equal(back.draws, res.draws)
    for k in res.stats:
        assert np.array_equal(back.stats[k], res.stats[k])
    assert back.param_names == res.param_names and back.method == res.method
    assert back.potential.dim == 5 and back.potential.kind == "LogisticRegression"
    with pytest.raises(RuntimeError, match="without its LogisticRegression"):
        back.potential.value(np.zeros(5))
    # the model is given again to continue; the continuation is bit for bit
    one = fs.HMC(big, step_size=0.01, adapt=False, n_steps=3).sample(
        50, 0, chains=1, seed=1, progress=False)
    more = fs.HMC(big, step_size=0.01, adapt=False, n_steps=3).sample(
        20, resume=back, progress=False)
    assert np.array_equal(one.draws[:, 30:], more.draws)
    # no transform: the names map the draws, the model is not needed
    c = back.constrained()
    assert list(c) == res.param_names and np.array_equal(c["beta[2]"], res.draws[..., 2])
    if HAVE_ARVIZ:
        assert np.array_equal(back.to_arviz().posterior["beta"].values, res.draws)


def test_an_unpickled_result_keeps_its_model_s_constrained_draws():
    """A model with a transform (BetaBinomial: logit m, log K): the pickle
    keeps the constrained draws and warm-up draws, so the unpickled Result's
    constrained(), summary(constrained=True) and to_arviz() are those of the
    original, and only new draws need the model back."""
    model = fs.models.BetaBinomial([3, 1, 4, 1, 5, 2], [10, 8, 12, 9, 11, 10])
    res = fs.NUTS(model).sample(60, 60, chains=2, seed=1, progress=False)
    back = pickle.loads(pickle.dumps(res))
    assert back.potential.had_constrain
    want, got = res.constrained(), back.constrained()
    assert list(got) == ["m", "K"] and all(np.array_equal(got[k], want[k]) for k in want)
    assert np.array_equal(np.asarray(back.summary(constrained=True)["mean"]),
                          np.asarray(res.summary(constrained=True)["mean"]))
    if HAVE_ARVIZ:
        a, b = res.to_arviz(include_warmup=True), back.to_arviz(include_warmup=True)
        for g in ("posterior", "warmup_posterior"):
            for k in ("m", "K"):
                assert np.array_equal(getattr(a, g)[k].values, getattr(b, g)[k].values)
    with pytest.raises(RuntimeError, match="without its BetaBinomial"):
        back.potential.constrain(np.zeros(2))
    # a ragged Result: the complete block of the kept values
    res.n_done = np.array([60, 40])
    back = pickle.loads(pickle.dumps(res))
    with pytest.warns(RuntimeWarning, match="completed"):
        m = np.asarray(back.summary(constrained=True)["mean"])
    with pytest.warns(RuntimeWarning, match="completed"):
        assert np.array_equal(m, np.asarray(res.summary(constrained=True)["mean"]))


def test_rns_result_pickles_with_its_surrogate():
    res = fs.RNSHMC(MODEL, n_hidden=20, guard=None).sample(20, 60, chains=1, seed=2,
                                                           progress=False)
    back = pickle.loads(pickle.dumps(res))
    _same_surrogate(res.surrogate, back.surrogate, 3)


GAUSS = fs.models.Gaussian(np.array([1.0, -1.0, 0.5]),
                           np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]]))
VARIANTS = {
    "rns-transitions-auto": (fs.RNSHMC, MODEL, dict(n_hidden=30, transitions="auto", guard=None),
                             150),
    "rns-nuts-da-laplace": (fs.RNSHMC, MODEL, dict(n_hidden=30, explore="nuts", base="laplace",
                                                   delayed_acceptance=True), 150),
    "vhmc-auto-exact": (fs.VHMC, GAUSS, dict(n_hidden=30, n_train="auto", exact=True,
                                             window=50), 300),
    "arns-stop-transitions": (fs.ARNSHMC, MODEL, dict(n_hidden=30, n_start=60, max_points=150,
                                                      transitions=2), 150),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants_resume_bit_for_bit(tmp_path, name):
    """Options whose Python between spans does more (tuning k, the Laplace
    base, VHMC's stopping rule, max_points then transitions)."""
    cls, pot, opts, n_warmup = VARIANTS[name]

    def go(**kw):
        return cls(pot, **opts).sample(200, n_warmup, chains=2, seed=1, progress=False, **kw)

    ref = go()
    path = tmp_path / "ck.npz"
    copies = []
    write = _checkpoint.Checkpointer.write

    def write_and_copy(self):
        write(self)
        copies.append(tmp_path / f"c{self.n_writes}.npz")
        shutil.copy(path, copies[-1])

    with mock.patch.object(_checkpoint.Checkpointer, "write", write_and_copy):
        assert_same(go(checkpoint=path, checkpoint_every=40), ref)
    for c in (copies[len(copies) // 3], copies[2 * len(copies) // 3]):
        assert_same(go(resume=c), ref)


@pytest.mark.parametrize("threads", [False, True], ids=["in turn", "threads"])
def test_ctrl_c_during_a_checkpoint_write_returns_the_partial_result(tmp_path, threads):
    """A KeyboardInterrupt inside the write (np.savez) used to escape as
    KeyboardInterrupt (issue 40, failure path 4): the run returns its
    partial Result as after any Ctrl-C, the file on disk is the previous
    write (atomic: no tmp file left), and resuming from it gives the
    uninterrupted draws bit for bit."""
    model = MODEL if threads else potential(Calls())
    ref = run("hmc", model)
    path = tmp_path / "ck.npz"
    savez, n = np.savez, [0]

    def interrupted_savez(*args, **kwargs):
        n[0] += 1
        if n[0] == 4:
            raise KeyboardInterrupt
        return savez(*args, **kwargs)

    with mock.patch.object(np, "savez", interrupted_savez):
        part = run("hmc", model, checkpoint=path, checkpoint_every=20)
    assert part.interrupted
    assert not any(f.name.startswith("ck.npz.tmp") for f in tmp_path.iterdir())
    assert_same(run("hmc", model, resume=path), ref)


def test_a_killed_writers_tmp_file_is_removed_and_a_live_ones_kept(tmp_path):
    """A kill during a write used to leave <ckpt>.tmp<pid> for ever (issue
    40, failure path 5): the next write removes it when that pid is gone."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = tmp_path / "ck.npz"
    stale = tmp_path / f"ck.npz.tmp{dead.pid}"
    live = tmp_path / f"ck.npz.tmp{os.getppid()}"          # a running process's
    other = tmp_path / "other.npz.tmp1"
    for f in (stale, live, other):
        f.write_bytes(b"partial")
    run("hmc", MODEL, checkpoint=path, checkpoint_every=100)
    assert path.exists() and not stale.exists()
    assert live.exists() and other.exists()


def _rewrite_npz(src, dst, change):
    """Copy the .npz at src to dst (a valid zip), its members passed through
    change(name, array) -> array or None (dropped)."""
    with np.load(src, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    out = {}
    for k, a in members.items():
        b = change(k, a)
        if b is not None:
            out[k] = b
    with open(dst, "wb") as f:
        np.savez(f, **out)


def test_a_rewritten_or_damaged_checkpoint_is_refused_with_a_clear_message(tmp_path):
    """A valid zip whose arrays were rewritten used to resume silently with
    other draws; damaged ones gave raw library messages or misleading ones
    (issue 40, failure path 10)."""
    path = tmp_path / "ck.npz"
    run("hmc", MODEL, checkpoint=path, checkpoint_every=50)
    with np.load(path) as z:
        draws = [k for k in z.files if k.endswith("/draws")][0]

    def other_values(k, a):
        return a + 1.0 if k == draws else a

    def dropped(k, a):
        return None if k == draws else a

    def bad_header(k, a):
        return np.frombuffer(b"{not json", dtype=np.uint8) if k == "__header__" else a

    for change, message in ((other_values, "do not match the digest"),
                            (dropped, "do not match the digest"),
                            (bad_header, "header is damaged")):
        bad = tmp_path / f"{change.__name__}.npz"
        _rewrite_npz(path, bad, change)
        with pytest.raises(ValueError, match=message):
            run("hmc", MODEL, resume=bad)
    # a truncated member (the zip's data cut short): a ValueError naming the file
    raw = path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(raw[: len(raw) // 2] + raw[-22:])
    with pytest.raises(ValueError, match="cut.npz"):
        run("hmc", MODEL, resume=cut)
