"""Early stops keep every draw; errors arrive unchanged; bad input is refused;
potentials and results pickle.  Each test fails on the behaviour before
issue 15 was fixed (noted per test)."""
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.samplers.rns_hmc import RNSHMC


def half_sq(q):
    """A module-level potential function (picklable)."""
    return 0.5 * float(q @ q), q.copy()


class Counting:
    """f(q) = (0.5 q.q, q) that raises `exc` at call number `at` (1-based)."""

    def __init__(self, at=None, exc=ValueError("boom")):
        self.at, self.exc, self.calls = at, exc, 0

    def __call__(self, q):
        self.calls += 1
        if self.at is not None and self.calls >= self.at:
            raise self.exc
        return 0.5 * float(q @ q), q.copy()


HMC_OPTS = dict(step_size=0.3, n_steps=4, random_n_steps=False, metric="unit", adapt=False)


def hmc(pot, **kw):
    return fs.HMC(pot, **HMC_OPTS).sample(progress=False, **kw)


def check_padding(res):
    """Rows < n_done are finite, rows >= n_done are NaN, for every chain."""
    for k in range(res.chains):
        n = res.n_done[k]
        assert np.all(np.isfinite(res.draws[k, :n]))
        assert np.all(np.isnan(res.draws[k, n:]))


# -- nothing lost ---------------------------------------------------------------

def test_ctrl_c_in_chain_1_keeps_chain_0():
    # old: draws (2, 0, 3), chain 0's finished draws thrown away
    full = Counting()
    hmc(fs.Potential.from_callable(full, 3), n_draws=60, n_warmup=20, chains=2, seed=3)
    f = Counting(at=full.calls - 30, exc=KeyboardInterrupt())
    with pytest.warns(RuntimeWarning, match=r"interrupted: the chains completed \[60, \d+\] "
                      r"of 60 draws \(warm-up: \[20, 20\] of 20\)"):
        res = hmc(fs.Potential.from_callable(f, 3), n_draws=60, n_warmup=20, chains=2, seed=3)
    assert res.interrupted
    assert res.draws.shape == (2, 60, 3)
    assert res.n_done[0] == 60 and res.n_done[1] < 60
    check_padding(res)
    assert res.warmup_n_done.tolist() == [20, 20]


def _calls_per_iteration():
    f0, f1 = Counting(), Counting()
    hmc(fs.Potential.from_callable(f0, 3), n_draws=0, n_warmup=0, chains=1, seed=1)
    hmc(fs.Potential.from_callable(f1, 3), n_draws=100, n_warmup=0, chains=1, seed=1)
    per = (f1.calls - f0.calls) / 100
    assert per == int(per)
    return f0.calls, int(per)


def test_exception_keeps_every_finished_iteration():
    # old: exc.result.draws held only the rows of the last finished chunk
    setup, per = _calls_per_iteration()
    at = setup + 363 * per + 2             # inside iteration 364
    f = Counting(at=at)
    with pytest.raises(ValueError, match="boom") as info:
        hmc(fs.Potential.from_callable(f, 3), n_draws=1000, n_warmup=0, chains=1, seed=1)
    res = info.value.result
    assert res.interrupted
    assert res.n_done.tolist() == [363]
    assert res.draws.shape == (1, 363, 3)
    check_padding(res)
    # the same draws as an uninterrupted run
    ok = hmc(fs.Potential.from_callable(Counting(), 3), n_draws=363, n_warmup=0, chains=1,
             seed=1)
    np.testing.assert_array_equal(res.draws, ok.draws)


def test_chain_run_counts_rows_before_an_exception():
    f = Counting()
    pot = fs.Potential.from_callable(f, 2)
    chain = fs.core.Chain(pot, pot, np.zeros(2), np.random.default_rng(0), step_size=0.2,
                          n_steps=3)
    trace = fs.core.new_trace(50, 2)
    f.at = f.calls + 3 * 17 + 1
    with pytest.raises(ValueError):
        chain.run(trace, 0, 50)
    assert chain.n_done_last == 17
    assert np.all(np.isfinite(trace["draws"][:17])) and np.isnan(trace["draws"][17, 0])


def test_ctrl_c_during_rns_training_keeps_exploration(monkeypatch):
    def interrupt(self, *a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(RNSHMC, "train", interrupt)
    res = fs.RNSHMC(fs.models.StandardNormal(2), n_hidden=20, step_size=0.5, n_steps=3,
                    adapt=False).sample(n_draws=50, n_warmup=200, chains=1, seed=0, progress=False)
    assert res.interrupted
    assert res.warmup_draws.shape == (1, 200, 2) and res.warmup_n_done.tolist() == [200]
    assert np.all(np.isfinite(res.warmup_draws))
    assert res.draws.shape == (1, 0, 2)


def test_trainer_exception_attaches_result(monkeypatch):
    def fail(self, *a, **k):
        raise RuntimeError("trainer failed")
    monkeypatch.setattr(RNSHMC, "train", fail)
    with pytest.raises(RuntimeError, match="trainer failed") as info:
        fs.RNSHMC(fs.models.StandardNormal(2), n_hidden=20, step_size=0.5, n_steps=3,
                  adapt=False).sample(n_draws=50, n_warmup=100, chains=1, seed=0, progress=False)
    assert info.value.result.warmup_n_done.tolist() == [100]


def test_ctrl_c_during_setup_returns_a_result():
    f = Counting(at=1, exc=KeyboardInterrupt())
    res = hmc(fs.Potential.from_callable(f, 3), n_draws=10, n_warmup=10, chains=2, seed=0)
    assert res.interrupted and res.draws.shape == (2, 0, 3)
    assert res.n_done.tolist() == [0, 0]


def test_failure_of_a_chain_in_threads_keeps_the_others():
    f = Counting(at=None)
    pot = fs.Potential.from_callable(f, 3, thread_safe=True)      # chains in threads
    f.at = 400
    with pytest.raises(ValueError, match="boom") as info:
        hmc(pot, n_draws=500, n_warmup=0, chains=2, seed=0)
    res = info.value.result
    assert res.interrupted and res.draws.shape[0] == 2
    assert res.n_done.sum() > 0
    check_padding(res)


@pytest.mark.parametrize("order", ["bare-first", "user-first"])
def test_chains_in_threads_report_the_callbacks_own_exception(order):
    """Two chains in threads share a thread-safe callback potential and its
    one held error: when both raise, one chain takes the exception and the
    other can only say "a callback raised".  The run reports the user's
    exception whichever chain finishes first (the bare error reached the
    caller once under load, failing the test above)."""
    import time
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace
    from fastsurrogate.core._hmc import STATUS_CALLBACK
    from fastsurrogate.core._potential import PotentialError
    from fastsurrogate.samplers._executors import _local
    bare = PotentialError("iteration 25: a callback raised an error", STATUS_CALLBACK)
    user = ValueError("boom")
    first, second = (bare, user) if order == "bare-first" else (user, bare)

    def worker(ctx):
        time.sleep(0.0 if ctx == 0 else 0.3)
        raise first if ctx == 0 else second

    run = SimpleNamespace(ctxs=[0, 1], stop=[0], error=None, interrupted=False)
    with ThreadPoolExecutor(max_workers=2) as ex:
        _local(run, worker, ex)
    assert run.error is user and run.stop[0] == 1
    # any other error is reported as it came: the first one
    other = PotentialError("iteration 3: non-finite value", -1)
    run = SimpleNamespace(ctxs=[0, 1], stop=[0], error=None, interrupted=False)
    first, second = other, user
    with ThreadPoolExecutor(max_workers=2) as ex:
        _local(run, worker, ex)
    assert run.error is other


@pytest.mark.parametrize("wrap", ["sum", "recorder"])
def test_callback_exception_passes_through_wrappers(wrap):
    # old: a generic PotentialError without __cause__
    f = Counting(at=40, exc=ZeroDivisionError("inner"))
    cb = fs.Potential.from_callable(f, 3)
    pot = (fs.WeightedSum([cb, fs.models.StandardNormal(3)], [1.0, 0.5]) if wrap == "sum"
           else fs.RecordingPotential(cb, 1000))
    with pytest.raises(ZeroDivisionError, match="inner") as info:
        hmc(pot, n_draws=100, n_warmup=0, chains=1, seed=0)
    assert info.value.result.n_done[0] >= 1
    # the error was taken: the wrapper evaluates cleanly afterwards
    f.at = None
    assert np.isfinite(pot.value(np.ones(3)))


def test_nnghmc_exploration_keeps_ctrl_c():
    # old: NNgHMC's recorder turned the KeyboardInterrupt into PotentialError
    f = Counting(at=300, exc=KeyboardInterrupt())
    res = fs.NNGHMC(fs.Potential.from_callable(f, 2), n_hidden=10, step_size=0.3,
                    n_steps=3, adapt=False).sample(n_draws=100, n_warmup=400, chains=1, seed=0,
                                                   progress=False)
    assert res.interrupted
    assert res.warmup_n_done[0] > 0


# -- ragged results ---------------------------------------------------------------

def _ragged():
    full = Counting()
    hmc(fs.Potential.from_callable(full, 2), n_draws=200, n_warmup=0, chains=3, seed=5)
    f = Counting(at=full.calls - 700, exc=KeyboardInterrupt())
    return hmc(fs.Potential.from_callable(f, 2), n_draws=200, n_warmup=0, chains=3, seed=5)


def test_ragged_result_summary_and_arviz():
    res = _ragged()
    assert res.ragged and res.n_done[0] == res.n_done[1] == 200 and res.n_done[2] < 200
    draws, stats, kept = res.complete_draws()
    assert kept.tolist() == [0, 1] and draws.shape == (2, 200, 2)
    assert stats["accept_prob"].shape == (2, 200)
    with pytest.warns(RuntimeWarning, match="chains completed"):
        table = res.summary()
    assert table.overall["n_done"] == res.n_done.tolist()
    assert np.all(np.isfinite(res.acceptance_rate[:2]))
    assert np.isfinite(res.seconds_per_iteration())
    with pytest.raises(ValueError, match="complete_draws"):
        fs.diagnostics.ess_bulk(res.draws)
    assert np.all(np.isfinite(fs.diagnostics.ess_bulk(draws)))
    pytest.importorskip("arviz")
    with pytest.warns(RuntimeWarning):
        idata = res.to_arviz()
    assert idata.posterior.sizes["chain"] == 2 and idata.posterior.sizes["draw"] == 200


def test_full_run_is_not_ragged():
    res = hmc(fs.models.StandardNormal(2), n_draws=50, n_warmup=10, chains=2, seed=0)
    assert not res.ragged and res.n_done.tolist() == [50, 50]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res.summary()


# -- silently accepted input ------------------------------------------------------

def test_bad_sizes_and_seeds():
    with pytest.raises(TypeError, match="integer"):
        fs.models.StandardNormal(2.5)
    with pytest.raises(ValueError, match="dim must be in"):
        fs.models.StandardNormal(2**31)         # old: ~16 GB allocated first
    with pytest.raises(ValueError, match="dim must be in"):
        fs.Potential.from_callable(half_sq, 2**31)
    with pytest.raises(ValueError, match="n_steps must be <="):
        fs.HMC(fs.models.StandardNormal(2), n_steps=2**31)
    with pytest.raises(TypeError, match="bool"):
        fs.sample(fs.models.StandardNormal(2), "hmc", n_draws=10, seed=True, progress=False)
    with pytest.raises(ValueError, match="non-negative"):
        fs.sample(fs.models.StandardNormal(2), "hmc", n_draws=10, seed=-1, progress=False)
    with pytest.raises(MemoryError, match="GB"):
        fs.sample(fs.models.StandardNormal(2000), "hmc", n_draws=2**31 - 1, n_warmup=0,
                  progress=False)


def test_train_from_beyond_the_exploration_is_refused():
    # old: clamped to the last 2 exploration states (acceptance 0.04)
    with pytest.raises(ValueError, match="train_from"):
        fs.RNSHMC(fs.models.StandardNormal(2), train_from=1e6).sample(
            n_draws=10, n_warmup=100, progress=False)
    with pytest.raises(ValueError, match="train_from"):
        fs.RNSHMC(fs.models.StandardNormal(2), train_from=np.inf)


def test_network_on_identical_points_is_refused():
    Q = np.ones((5, 2))
    with pytest.raises(ValueError, match="same point"):
        fs.surrogates.train_random_network(Q, np.zeros(5), n_hidden=10, seed=0)


def test_complex_gradient_is_an_error():
    # old: the imaginary part dropped with only a ComplexWarning
    pot = fs.Potential.from_callable(lambda q: (0.5 * q @ q, q + 1j), 2)
    with pytest.raises(TypeError, match="complex"):
        pot.grad(np.ones(2))
    with pytest.raises(TypeError, match="complex") as info:
        hmc(pot, n_draws=10, n_warmup=0, chains=1, seed=0, init=np.zeros(2))
    assert info.value.result is not None


# -- pickling ---------------------------------------------------------------------

def test_callable_potential_and_its_result_pickle():
    pot = fs.Potential.from_callable(half_sq, 2, names=["a", "b"])
    back = pickle.loads(pickle.dumps(pot))
    assert back.value(np.ones(2)) == 1.0 and back.param_names == ["a", "b"]
    res = hmc(pot, n_draws=20, n_warmup=0, chains=1, seed=0)
    res2 = pickle.loads(pickle.dumps(res))
    np.testing.assert_array_equal(res2.draws, res.draws)
    np.testing.assert_array_equal(res2.n_done, res.n_done)
    ld = fs.Potential.from_callable(lambda q: (-0.5 * q @ q, -q), 2, log_density=True)
    with pytest.raises(Exception):      # a lambda does not pickle; its wrapper follows it
        pickle.dumps(ld)


def test_recording_potential_pickles_with_its_points():
    rec = fs.RecordingPotential(fs.models.StandardNormal(2), 10, every=1)
    rec.value_and_grad(np.ones(2))
    rec.value_and_grad(np.full(2, 2.0))
    back = pickle.loads(pickle.dumps(rec))
    for a, b in zip(rec.points(), back.points()):
        np.testing.assert_array_equal(a, b)
    assert back.capacity == 10 and back.n_seen == rec.n_seen


def test_gp_surrogate_pickles():
    rng = np.random.default_rng(0)
    Q = rng.normal(size=(30, 2))
    gp = fs.surrogates.fit_gp(Q, 0.5 * (Q ** 2).sum(1), seed=0, max_iter=20)
    back = pickle.loads(pickle.dumps(gp))
    Qn = rng.normal(size=(4, 2))
    np.testing.assert_allclose(back.predict(Qn, return_var=True),
                               gp.predict(Qn, return_var=True))


# -- the OpenMP waiting policy ------------------------------------------------------

def _policy_after_import(env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(env_extra)
    code = "import os, fastsurrogate; print(os.environ.get('OMP_WAIT_POLICY'))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True,
                          cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()


def test_passive_wait_policy_unless_the_user_chose():
    assert _policy_after_import({}) == "PASSIVE"
    assert _policy_after_import({"OMP_WAIT_POLICY": "active"}) == "active"
    assert _policy_after_import({"GOMP_SPINCOUNT": "1000"}) == "None"


def test_fs_sample_takes_the_sampler_s_default_warm_up():
    """fs.sample(model, method) runs the warm-up the sampler's own sample()
    does (ARNS-HMC's 400), not a fixed 1000."""
    m = fs.models.StandardNormal(2)
    kw = dict(chains=1, seed=1, progress=False)
    res = fs.sample(m, "arns-hmc", 5, n_hidden=20, **kw)
    assert fs.ARNSHMC.default_warmup == 400 and res.warmup_draws.shape[1] == 400
    res = fs.sample(m, "hmc", 5, warmup_end="fixed", **kw)
    assert res.warmup_draws.shape[1] == fs.HMC.default_warmup == 1000


def test_the_finiteness_check_finds_a_nan_in_any_block():
    """real_array checks finiteness in blocks (no bool copy of a whole data
    matrix): a NaN past the first block is still found and named."""
    from fastsurrogate.core import _checks
    X = np.zeros((3 * _checks._FINITE_BLOCK // 10 + 7, 10))
    X[-1, 9] = np.inf
    with pytest.raises(ValueError, match=rf"X\[{X.shape[0] - 1}, 9\] = inf"):
        fs.models.LogisticRegression(X, np.zeros(X.shape[0]))
    X[-1, 9] = 0.0
    X[_checks._FINITE_BLOCK // 10 + 3, 2] = np.nan
    with pytest.raises(ValueError, match=rf"X\[{_checks._FINITE_BLOCK // 10 + 3}, 2\] = nan"):
        fs.models.LogisticRegression(X, np.zeros(X.shape[0]))
    X[_checks._FINITE_BLOCK // 10 + 3, 2] = 0.0
    assert fs.models.LogisticRegression(X, np.zeros(X.shape[0])).n_obs == X.shape[0]


def test_a_million_chains_are_refused_before_any_work():
    """chains=10**6 used to run for about 7 minutes and 12 GB before failing
    (issue 40, failure path 8): the per-chain state counts in the up-front
    memory check, refused before the potential is evaluated or a chain made."""
    calls = []

    def f(q):
        calls.append(1)
        return 0.5 * q @ q, q

    pot = fs.Potential.from_callable(f, 2)
    with pytest.raises(MemoryError, match="per-chain state"):
        fs.NUTS(pot, surrogate=False).sample(1000, 1000, chains=10**6, progress=False)
    assert not calls


@pytest.mark.parametrize("thread_safe", [False, True], ids=["in turn", "threads"])
@pytest.mark.parametrize("exc_type", [SystemExit, GeneratorExit])
def test_a_base_exception_in_a_potential_keeps_the_rows_made(thread_safe, exc_type):
    """A potential raising SystemExit (or another BaseException that is not
    an Exception) used to lose the rows made so far: no ``e.result`` (issue
    40, failure path 1).  It propagates unchanged, with the partial Result."""
    n = [0]

    def f(q):
        n[0] += 1
        if n[0] > 400:
            raise exc_type("stop here")
        return 0.5 * q @ q, q

    pot = fs.Potential.from_callable(f, 2, thread_safe=thread_safe)
    with pytest.raises(exc_type) as info:
        fs.HMC(pot, step_size=0.5, n_steps=2, adapt=False).sample(
            500, 0, chains=2, seed=1, progress=False, warn=False)
    res = info.value.result
    assert res.n_done.sum() > 50
    for c, k in enumerate(res.n_done):
        assert np.all(np.isfinite(res.draws[c, :k]))
