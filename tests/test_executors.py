"""sample(..., executor=): chains on threads, processes and a Dask cluster give
the same draws for the same seed; the merged Result is whole."""
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics


def _quadratic(q):
    """A Python potential (module level, so it pickles): N(1, 0.5^2) per coordinate."""
    r = (q - 1.0) / 0.25
    return 0.5 * float(q @ q - 2 * q.sum() + q.size) / 0.25, r


@pytest.fixture(scope="module")
def model():
    X, y, _ = fs.datasets.simulate_logistic(1500, 4, seed=2)
    return fs.models.LogisticRegression(X, y, prior_sd=10.0)


@pytest.fixture(scope="module")
def processes():
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as ex:
        yield ex


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield client


CASES = [
    ("hmc", dict(n_steps=8), 3),
    ("nuts", dict(max_tree_depth=6), 2),
    ("rns-hmc", dict(n_hidden=60, n_steps=8, guard_window=50), 2),
]


def _run(model, method, kw, chains, executor):
    return fs.sample(model, method=method, n_draws=150, n_warmup=150, chains=chains, seed=11,
                     progress=False, executor=executor, **kw)


def _same(a, b):
    assert np.array_equal(a.draws, b.draws)
    assert np.array_equal(a.warmup_draws, b.warmup_draws, equal_nan=True)
    assert a.stats.keys() == b.stats.keys()
    for k in a.stats:
        assert np.array_equal(a.stats[k], b.stats[k], equal_nan=True), k
    assert np.array_equal(a.step_size, b.step_size)
    for m, n in zip(a.inv_metric, b.inv_metric):
        assert np.array_equal(m, n)
    assert a.timings.keys() == b.timings.keys()


@pytest.mark.parametrize("method, kw, chains", CASES)
def test_threads_and_processes_give_the_default_draws(model, processes, method, kw, chains):
    ref = _run(model, method, kw, chains, None)
    for ex in (ThreadPoolExecutor(max_workers=1), ThreadPoolExecutor(max_workers=3), processes):
        res = _run(model, method, kw, chains, ex)
        _same(res, ref)
        assert res.potential is model
        assert res.info["executor"]["type"] == type(ex).__name__
    if method == "rns-hmc":
        # training pooled both chains' exploration, centrally: the same network
        assert res.info["n_train"] == ref.info["n_train"]
        assert res.info["exact_evaluations"] == ref.info["exact_evaluations"]


def test_a_memory_mapped_x_goes_to_the_processes_as_its_file(model, processes, tmp_path):
    """X from np.load(path, mmap_mode="r"): a ProcessPoolExecutor's workers map
    the file (the pickle holds its name and offset, not X), with the same draws."""
    from fastsurrogate.samplers import _executors
    X, y, _ = fs.datasets.simulate_logistic(1500, 4, seed=2)
    np.save(tmp_path / "X.npy", X)
    Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
    mapped = fs.models.LogisticRegression(Xm, y, prior_sd=10.0)
    ref = _run(model, "nuts", dict(max_tree_depth=6), 2, None)
    _same(_run(mapped, "nuts", dict(max_tree_depth=6), 2, processes), ref)
    small = _executors._dumps(mapped, {}, grow=False, mapped=True)
    whole = _executors._dumps(mapped, {}, grow=False)
    assert len(whole) - len(small) > 0.95 * X.nbytes, (len(whole), len(small))   # y stays
    back = __import__("pickle").loads(small)
    assert np.array_equal(back.X, X) and back.value(np.ones(4)) == model.value(np.ones(4))
    # a view that is not one contiguous block of the file goes by value
    assert _executors._mapped_file(Xm[:, :2]) is None
    assert _executors._mapped_file(Xm[10:20])[1] == _executors._mapped_file(Xm)[1] + 10 * 4 * 8


def test_large_arrays_go_to_the_processes_as_temporary_files(model, processes, tmp_path,
                                                            monkeypatch):
    """With the bar lowered to 1 kB, X and y go to a ProcessPoolExecutor's
    workers as files written once per run (each worker maps them) and the
    draws are the same; the files go with the run."""
    import gc
    import tempfile
    from fastsurrogate.samplers import _executors
    monkeypatch.setattr(_executors, "SPILL_BYTES", 1024)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    written = []
    path = _executors._Spill.path

    def record(self, a):
        p = path(self, a)
        written.append((p, a.nbytes))
        return p

    monkeypatch.setattr(_executors._Spill, "path", record)
    ref = _run(model, "rns-hmc", CASES[2][1], 2, None)
    _same(_run(model, "rns-hmc", CASES[2][1], 2, processes), ref)
    # X and y (and the network's input weights, 1920 bytes), once each
    # however many phases and chains
    sizes = sorted(dict(written).values())
    assert sizes.count(model.X.nbytes) == 1 and sizes.count(model.y.nbytes) == 1, sizes
    assert len(written) > len(sizes)             # later phases found the files
    gc.collect()
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("method, kw, chains", CASES)
def test_dask_cluster_gives_the_default_draws(model, dask_client, method, kw, chains):
    ref = _run(model, method, kw, chains, None)
    res = _run(model, method, kw, chains, dask_client)
    _same(res, ref)
    where = res.info["executor"]["placement"]
    assert all(len(v) == chains for v in where.values())


def test_python_potential_in_processes_matches_in_turn(processes):
    pot = fs.Potential.from_callable(_quadratic, 2)
    ref = fs.sample(pot, method="hmc", n_draws=1500, n_warmup=300, chains=2, seed=4,
                    progress=False, n_steps=5)
    res = fs.sample(pot, method="hmc", n_draws=1500, n_warmup=300, chains=2, seed=4,
                    progress=False, n_steps=5, executor=processes)
    _same(res, ref)
    # and the draws are right: N(1, 0.5^2), within 4 MCSE (mean and sd)
    z = (res.draws.mean(axis=(0, 1)) - 1.0) / diagnostics.mcse_mean(res.draws)
    assert np.all(np.abs(z) < 4), z
    zs = (res.draws.std(axis=(0, 1)) - 0.5) / diagnostics.mcse_sd(res.draws)
    assert np.all(np.abs(zs) < 4), zs


def test_error_in_a_process_chain_comes_back_with_the_partial_result(processes):
    pot = fs.Potential.from_callable(_fails_after_a_while, 2)
    with pytest.raises(FloatingPointError) as info:
        fs.sample(pot, method="hmc", n_draws=500, n_warmup=10, chains=2, seed=1,
                  progress=False, n_steps=3, adapt=False, executor=processes)
    res = info.value.result
    assert res.interrupted


def _fails_after_a_while(q):
    if abs(q[0]) > 1.5:
        raise FloatingPointError("too far")
    return 0.5 * float(q @ q), q


class TwoArgumentError(Exception):
    """Pickles (as the class and its args) but does not unpickle: __init__
    wants two arguments and args holds one message."""

    def __init__(self, where, value):
        super().__init__(f"{where}: {value}")


def _fails_with_an_exception_that_does_not_unpickle(q):
    if abs(q[0]) > 1.5:
        raise TwoArgumentError("q[0]", q[0])
    return 0.5 * float(q @ q), q


def test_an_exception_that_does_not_unpickle_arrives_named(processes):
    """It used to arrive as an unrelated TypeError (from unpickling it;
    issue 40, failure path 3); now as a RuntimeError naming its type and
    text, with the partial result."""
    pot = fs.Potential.from_callable(_fails_with_an_exception_that_does_not_unpickle, 2)
    with pytest.raises(RuntimeError, match="TwoArgumentError: q\\[0\\]") as info:
        fs.sample(pot, method="hmc", n_draws=500, n_warmup=10, chains=2, seed=1,
                  progress=False, n_steps=3, adapt=False, executor=processes)
    assert info.value.result.interrupted


class _KillsItsProcessOnce:
    """A potential (it pickles) that kills the worker process it runs in with
    SIGKILL when q[0] > 1.2: once (a marker file), or ``always``; never in
    the parent process (which evaluates it for the chains' starts)."""

    def __init__(self, marker, always=False):
        self.marker, self.always = str(marker), always

    def __call__(self, q):
        if q[0] > 1.2 and multiprocessing.parent_process() is not None and (
                self.always or not os.path.exists(self.marker)):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return _quadratic(q)


def test_a_killed_worker_process_loses_nothing(tmp_path):
    """One killed ProcessPoolExecutor worker used to lose every chain's work
    (BrokenProcessPool, n_done [0, 0]; issue 40, failure path 2).  The
    broken chains' phase runs again on a new pool from the same state: the
    draws equal a run in threads, as when Dask reschedules a lost task."""
    kw = dict(method="hmc", n_draws=300, n_warmup=100, chains=2, seed=6, progress=False,
              n_steps=5, warn=False)
    ref = fs.sample(fs.Potential.from_callable(_quadratic, 2), **kw)
    pot = fs.Potential.from_callable(_KillsItsProcessOnce(tmp_path / "killed"), 2)
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as ex, \
            pytest.warns(RuntimeWarning, match="worker process of the executor died"):
        res = fs.sample(pot, executor=ex, **kw)
    assert (tmp_path / "killed").exists()           # a worker was killed
    _same(res, ref)


def test_a_potential_that_kills_every_process_it_runs_in_stops_the_run(tmp_path):
    """Lost twice: a RuntimeError with the partial Result, this interpreter intact."""
    pot = fs.Potential.from_callable(_KillsItsProcessOnce(tmp_path / "k", always=True), 2)
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as ex, \
            pytest.warns(RuntimeWarning, match="worker process"), \
            pytest.raises(RuntimeError, match="lost their worker process twice") as info:
        fs.sample(pot, method="hmc", n_draws=300, n_warmup=100, chains=2, seed=6,
                  progress=False, n_steps=5, warn=False, executor=ex)
    assert info.value.result is not None


def test_vhmc_chains_in_processes(model, processes):
    kw = dict(n_draws=100, n_warmup=200, chains=2, seed=1, progress=False, n_hidden=30)
    ref = fs.sample(model, method="vhmc", **kw)
    res = fs.sample(model, method="vhmc", executor=processes, **kw)
    _same(res, ref)


@pytest.mark.parametrize("method, kw", [("nnghmc", {}), ("arns-hmc", {}), ("rmhmc", {}),
                                        ("sgld", {"step_size": 1e-3})])
def test_local_only_samplers_refuse_a_process_pool(model, processes, method, kw):
    with pytest.raises(TypeError, match="cannot leave this process"):
        fs.sample(model, method=method, n_draws=10, n_warmup=500, progress=False,
                  executor=processes, **kw)
    res = fs.sample(model, method="hmc", n_draws=10, n_warmup=10, chains=2, progress=False,
                    executor=ThreadPoolExecutor(2))
    assert res.draws.shape == (2, 10, model.dim)


def test_bad_executor_is_a_type_error(model):
    with pytest.raises(TypeError, match="executor"):
        fs.sample(model, method="hmc", n_draws=10, n_warmup=10, executor="threads",
                  progress=False)


def test_ctrl_c_between_two_chain_submissions_stops_the_running_chain():
    """A Ctrl-C that lands while the chains are being handed to the thread
    pool (the first already running) stops that chain too and marks the run
    interrupted; it used to leave the first chain running to its end (seen
    as a chain of an earlier test still reporting in the next one)."""
    import threading
    import time
    from types import SimpleNamespace
    from fastsurrogate.samplers._executors import _local

    started, finished = threading.Event(), threading.Event()
    seen = {}
    run = SimpleNamespace(ctxs=[0, 1], stop=np.zeros(1, dtype=np.int32), error=None,
                          interrupted=False)

    def worker(ctx):
        started.set()
        t0 = time.perf_counter()
        while not run.stop[0] and time.perf_counter() - t0 < 10.0:
            time.sleep(0.001)
        seen["stopped_by_flag"] = bool(run.stop[0])   # not by its own time limit
        finished.set()

    class Pool(ThreadPoolExecutor):
        def submit(self, fn, ctx):
            if ctx == 1:
                started.wait(5.0)
                raise KeyboardInterrupt      # Ctrl-C reaches the main thread here
            return super().submit(fn, ctx)

    try:
        with Pool(max_workers=2) as ex:
            _local(run, worker, ex)
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped; the running chain was not stopped "
                    f"(stopped by the flag: {seen.get('stopped_by_flag')})")
    assert run.interrupted and run.stop[0] == 1
    assert finished.is_set() and seen["stopped_by_flag"]
