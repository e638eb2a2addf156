"""Fault injection over every sampler: a Python potential that fails at its
k-th call, in each phase of the run (set-up, warm-up / exploration,
training, sampling), in each way a user's code fails.

The documented outcomes (``Sampler.sample``, ``Potential.from_callable``):

- an exception raised by the callback reaches the caller unchanged (the very
  instance), with ``exc.result``: every row each chain completed, NaN-padded
  past ``result.n_done``, ``interrupted=True``;
- a ``KeyboardInterrupt`` returns that partial Result instead;
- a NaN or inf value (or gradient) is a divergence: the proposal is
  rejected, the run goes on and every kept draw is finite;
- a malformed return (not a pair, a gradient of the wrong length, of
  strings, complex) is a TypeError / ValueError from the trampoline, with
  the partial Result attached.

How a scenario finds its call k: one clean run per method records the phase
of every callback call (the innermost ``ctx.phase`` / ``run.phase`` timer
open at that moment, "setup" outside any); the faulty run is the same run
(same seed, same callback outputs up to call k), so up to the fault its draws
must equal the clean run's bit for bit.
"""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.core._rmhmc import CallableMetric
from fastsurrogate.samplers import _base
from fastsurrogate.samplers.rns_hmc import RNSHMC
from fastsurrogate.samplers.nnghmc import NNGHMC


class Fault(Exception):
    """The exception the faulty callback raises."""


# -- the phase tracer ----------------------------------------------------------------

_STACK = []


class _TracedTimer(_base._Timer):
    def __enter__(self):
        _STACK.append(self.name)
        return super().__enter__()

    def __exit__(self, *exc):
        if _STACK and _STACK[-1] == self.name:
            _STACK.pop()
        return super().__exit__(*exc)


@pytest.fixture(autouse=True)
def _trace_phases(monkeypatch):
    _STACK.clear()
    monkeypatch.setattr(_base, "_Timer", _TracedTimer)
    yield
    _STACK.clear()


def _phase():
    return _STACK[-1] if _STACK else "setup"


class Callback:
    """U(q) = 0.5 q'Aq with A = diag(1, 2) (a Gaussian), returning (U, grad U),
    with a fault at calls at .. at + width - 1 (1-based): `kind` says which.
    Every call records the phase it was made in."""

    A = np.array([1.0, 2.0])

    def __init__(self, kind=None, at=None, width=1):
        self.kind, self.at, self.width = kind, at, width
        self.exc = Fault("fault")             # what kind="raise" raises
        self.calls = 0
        self.phases = []

    def __call__(self, q):
        self.calls += 1
        self.phases.append(_phase())
        u, g = 0.5 * float(q @ (self.A * q)), self.A * q
        if self.kind is None or self.calls < self.at:
            return u, g
        if self.calls >= self.at + self.width:
            return u, g
        k = self.kind
        if k == "raise":
            raise self.exc
        if k == "ctrl-c":
            raise KeyboardInterrupt
        if k == "nan-value":
            return np.nan, g
        if k == "inf-value":
            return np.inf, g
        if k == "nan-grad":
            return u, np.full_like(g, np.nan)
        if k == "inf-grad":
            return u, np.array([np.inf, -np.inf])
        if k == "grad-length":
            return u, np.zeros(3)
        if k == "grad-strings":
            return u, np.array(["a", "b"])
        if k == "grad-complex":
            return u, g + 1j
        if k == "not-a-pair":
            return u
        if k == "value-string":
            return "1.5x", g
        raise AssertionError(k)


def _identity_metric(dim):
    return CallableMetric(lambda q: np.eye(dim), lambda q: np.zeros((dim, dim, dim)), dim)


# every method on the callback: constructor options and run sizes (small, fast)
EXACT = dict(step_size=0.4, n_steps=4, random_n_steps=False, metric="unit")
SPECS = {
    "hmc": (fs.HMC, dict(EXACT), dict(n_draws=40, n_warmup=40, chains=2)),
    "nuts": (fs.NUTS, dict(step_size=0.4, metric="unit", max_tree_depth=4),
             dict(n_draws=30, n_warmup=30, chains=2)),
    "rns-hmc": (fs.RNSHMC, dict(EXACT, n_hidden=20, adapt=False),
                dict(n_draws=40, n_warmup=60, chains=1)),
    "arns-hmc": (fs.ARNSHMC, dict(EXACT, n_hidden=20, n_start=30, adapt=False),
                 dict(n_draws=40, n_warmup=60, chains=1)),
    "vhmc": (fs.VHMC, dict(n_hidden=20, step_size=0.4, n_steps=4, random_n_steps=False,
                           exact=True, n_train=30), dict(n_draws=30, n_warmup=60, chains=1)),
    # the affine start: the first trial switches, which this table's map of
    # phases assumes (the faults' handling does not depend on the start)
    "nnghmc": (fs.NNGHMC, dict(EXACT, n_hidden=10, trial_length=10, max_train=200, adapt=False,
                               start="affine"),
               dict(n_draws=30, n_warmup=100, chains=1)),
    "rmhmc": (fs.RMHMC, dict(step_size=0.4, n_steps=3, random_n_steps=False),
              dict(n_draws=30, n_warmup=30, chains=1)),
    "rns-rmhmc": (fs.RNSRMHMC, dict(EXACT, n_hidden=20, rm_step_size=0.4, rm_n_steps=3,
                                    adapt=False),
                  dict(n_draws=30, n_warmup=60, chains=1)),
}


def make(method, pot):
    cls, opts, _ = SPECS[method]
    opts = dict(opts)
    if method in ("rmhmc", "rns-rmhmc"):
        opts["metric"] = _identity_metric(pot.dim)
    return cls(pot, **opts)


def run(method, f, **extra):
    """Run `method` on the callback f with the spec's sizes and seed 7."""
    sizes = dict(SPECS[method][2], **extra)
    return make(method, fs.Potential.from_callable(f, 2)).sample(seed=7, progress=False, **sizes)


_CLEAN = {}


def clean(method):
    """(Result, phase of every call) of the fault-free run (cached per method)."""
    if method not in _CLEAN:
        f = Callback()
        res = run(method, f)
        # the table of phases below follows the code: a phase added or renamed fails here
        assert list(dict.fromkeys(f.phases)) == PHASES[method], (method, f.phases)
        _CLEAN[method] = (res, list(f.phases))
    return _CLEAN[method]


def fault_call(method, phase, where="middle"):
    """The 1-based call number of the fault: the middle (or a quarter) of `phase`'s calls."""
    _, phases = clean(method)
    idx = [i for i, p in enumerate(phases) if p == phase]
    assert idx, f"{method}: no callback call in phase {phase!r} (phases: {sorted(set(phases))})"
    return idx[len(idx) // (2 if where == "middle" else 4)] + 1


def check_partial(res, ref):
    """Every completed row equals the clean run's; rows past n_done are NaN."""
    assert res.interrupted
    for draws, done, full in ((res.draws, res.n_done, ref.draws),
                              (res.warmup_draws, res.warmup_n_done, ref.warmup_draws)):
        assert draws.shape[0] == full.shape[0] and len(done) == full.shape[0]
        for k, n in enumerate(done):
            assert n <= full.shape[1]
            np.testing.assert_array_equal(draws[k, :n], full[k, :n])
            assert np.all(np.isnan(draws[k, n:]))


def check_progress(res, ref, method, phase):
    """What a fault in the middle of `phase` leaves: nothing in the first phase;
    about half of the rows of a phase that writes a whole trace (not 0: no
    truncation to the last finished chunk); at least one row otherwise."""
    if phase == PHASES[method][0]:
        assert res.n_done.sum() == 0 and res.warmup_n_done.sum() == 0
    elif phase == "sample":
        assert res.warmup_n_done.sum() >= 1
        total = ref.n_done.sum()
        assert 0.2 * total <= res.n_done.sum() < total
    elif phase == "warmup" and method not in ("vhmc",):
        # (with chains run in turn, chain 0 may have finished its draws too)
        assert res.n_done.sum() < ref.n_done.sum()
        total = ref.warmup_n_done.sum()
        assert 0.2 * total <= res.warmup_n_done.sum() < total
    else:
        assert res.n_done.sum() == 0 and res.warmup_n_done.sum() >= 1


# The phases in which each method calls the potential (a clean run's map; the
# test fails if a phase is missing, so the table follows the code).  "setup":
# outside any phase timer (initial points, a chain started at a new position).
PHASES = {
    "hmc": ["setup", "warmup", "sample"],
    "nuts": ["setup", "warmup", "sample"],
    "rns-hmc": ["setup", "warmup", "sample"],
    "arns-hmc": ["setup", "warmup", "train", "sample"],
    "vhmc": ["laplace", "train", "setup", "warmup", "sample"],
    "nnghmc": ["setup", "burn_in", "explore", "trial", "sample"],
    "rmhmc": ["setup", "warmup", "sample"],
    "rns-rmhmc": ["setup", "warmup", "sample"],
}
# phases whose Metropolis test uses the exact U (a non-finite U is a divergence)
JUDGE_PHASES = {
    "hmc": ["warmup", "sample"], "nuts": ["warmup", "sample"], "rns-hmc": ["warmup", "sample"],
    "arns-hmc": ["warmup", "sample"], "vhmc": ["warmup", "sample"],
    "nnghmc": ["burn_in", "explore", "sample"], "rmhmc": ["warmup", "sample"],
    "rns-rmhmc": ["warmup", "sample"],
}
# phases whose leapfrog uses the exact gradient (a non-finite one is a divergence)
GRAD_PHASES = {
    "hmc": ["warmup", "sample"], "nuts": ["warmup", "sample"], "rns-hmc": ["warmup"],
    "arns-hmc": ["warmup"], "vhmc": [], "nnghmc": ["burn_in", "explore"],
    "rmhmc": ["warmup", "sample"], "rns-rmhmc": ["warmup"],
}
# phases where a surrogate drives and the exact potential is asked for values only
VALUE_ONLY_PHASES = {
    "hmc": [], "nuts": [], "rns-hmc": ["sample"], "arns-hmc": ["sample"],
    "vhmc": ["warmup", "sample"], "nnghmc": ["trial", "sample"], "rmhmc": [],
    "rns-rmhmc": ["sample"],
}

STOPS = [(m, p) for m in SPECS for p in PHASES[m]]


@pytest.mark.parametrize("method,phase", STOPS)
def test_exception_at_call_k(method, phase):
    ref, _ = clean(method)
    f = Callback("raise", fault_call(method, phase))
    f.exc = Fault(f"fault in {phase}")
    with pytest.raises(Fault) as info:
        run(method, f)
    assert info.value is f.exc                 # unchanged, not wrapped
    res = info.value.result
    check_partial(res, ref)
    check_progress(res, ref, method, phase)


@pytest.mark.parametrize("method,phase", STOPS)
def test_ctrl_c_at_call_k(method, phase):
    ref, _ = clean(method)
    res = run(method, Callback("ctrl-c", fault_call(method, phase)))
    check_partial(res, ref)
    check_progress(res, ref, method, phase)


# -- NaN / inf values and gradients: divergences, never an error ----------------------------

def n_divergent(res):
    return sum(int(np.sum(s["divergent"])) for s in (res.stats, res.warmup_stats)
               if s and "divergent" in s)


def check_divergence_run(res, ref):
    """The run completed; every draw is finite; the faulty calls were divergences."""
    assert not res.interrupted
    np.testing.assert_array_equal(res.n_done, ref.n_done)
    assert np.all(np.isfinite(res.draws)) and np.all(np.isfinite(res.warmup_draws))
    assert n_divergent(res) > n_divergent(ref)


# a window of 10 calls a quarter into the phase (inside one chain's stretch,
# away from the call that starts a chain)
NONFINITE_VALUE = [(m, p, k) for m in SPECS for p in JUDGE_PHASES[m]
                   for k in ("nan-value", "inf-value")]


@pytest.mark.parametrize("method,phase,kind", NONFINITE_VALUE)
def test_nonfinite_value_is_a_divergence(method, phase, kind):
    ref, _ = clean(method)
    res = run(method, Callback(kind, fault_call(method, phase, "quarter"), width=10))
    check_divergence_run(res, ref)


NONFINITE_GRAD = [(m, p, k) for m in SPECS for p in GRAD_PHASES[m]
                  for k in ("nan-grad", "inf-grad")]


@pytest.mark.parametrize("method,phase,kind", NONFINITE_GRAD)
def test_nonfinite_gradient_is_a_divergence(method, phase, kind):
    ref, _ = clean(method)
    res = run(method, Callback(kind, fault_call(method, phase, "quarter"), width=10))
    check_divergence_run(res, ref)


UNUSED_GRAD = [(m, p, k) for m in SPECS for p in VALUE_ONLY_PHASES[m]
               for k in ("nan-grad", "grad-length", "grad-strings")]


@pytest.mark.parametrize("method,phase,kind", UNUSED_GRAD)
def test_gradient_not_asked_for_changes_nothing(method, phase, kind):
    # while a surrogate drives, the exact potential is asked for U only: a bad
    # gradient from the callback is never read, and the draws are the clean run's
    ref, _ = clean(method)
    res = run(method, Callback(kind, fault_call(method, phase, "quarter"), width=10))
    assert not res.interrupted
    np.testing.assert_array_equal(res.draws, ref.draws)


def test_vhmc_training_skips_nonfinite_gradients():
    # score matching (VHMC eq. 3.19) needs grad U at the state: a non-finite one
    # is not absorbed, the run goes on
    ref, _ = clean("vhmc")
    res = run("vhmc", Callback("nan-grad", fault_call("vhmc", "train", "quarter"), width=10))
    assert not res.interrupted and np.all(np.isfinite(res.draws))
    n_points = len(res.info["training_curve"][0]["iteration"])
    assert n_points < len(ref.info["training_curve"][0]["iteration"])


@pytest.mark.parametrize("method", [m for m in SPECS if m != "vhmc"])
def test_nonfinite_everywhere_finds_no_start(method):
    # Stan's initialisation redraws 100 times, then says so
    with pytest.raises(ValueError, match="no finite initial point") as info:
        run(method, Callback("nan-value", 1, width=10**9))
    assert info.value.result.interrupted


@pytest.mark.parametrize("method", ["hmc", "rns-hmc", "nnghmc"])
def test_nonfinite_start_is_redrawn(method):
    res = run(method, Callback("nan-value", 1, width=3))
    assert not res.interrupted and np.all(np.isfinite(res.draws))


# -- malformed returns: a clear error from the trampoline, the partial result attached -----

MALFORMED = [("grad-length", ValueError, "gradient of shape"),
             ("grad-strings", TypeError, "gradient of dtype"),
             ("grad-complex", TypeError, "complex gradient"),
             ("not-a-pair", TypeError, "must return a tuple"),
             ("value-string", TypeError, "value that is not a real number")]


def _reads(method, phase, kind):
    """Whether a call in `phase` reads what `kind` spoils (a pair is always checked)."""
    if kind == "not-a-pair" or phase == PHASES[method][0]:
        return True
    if kind == "value-string":
        return phase in JUDGE_PHASES[method]
    return phase in GRAD_PHASES[method] or (method, phase) == ("vhmc", "train")


def _malformed_phases(m):
    grad = (GRAD_PHASES[m] or ["train"])[-1]
    return list(dict.fromkeys([PHASES[m][0], grad, JUDGE_PHASES[m][-1]]))


MALFORMED_CASES = [(m, p, k, e, msg) for m in SPECS for p in _malformed_phases(m)
                   for k, e, msg in MALFORMED if _reads(m, p, k)]


@pytest.mark.parametrize("method,phase,kind,exc,match", MALFORMED_CASES)
def test_malformed_return_is_a_clear_error(method, phase, kind, exc, match):
    ref, _ = clean(method)
    with pytest.raises(exc, match=match) as info:
        run(method, Callback(kind, fault_call(method, phase, "quarter"), width=10))
    check_partial(info.value.result, ref)


# -- training: the trainer itself fails (no potential call there) -----------------------

def _trainers():
    from fastsurrogate.samplers import vhmc
    # (object, attribute) to replace by a failing function, and whether the
    # exploration rows before it are kept (VHMC trains from its first iteration)
    return {"rns-hmc": (RNSHMC, "train", True), "rns-rmhmc": (fs.RNSRMHMC, "train", True),
            "nnghmc": (NNGHMC, "train", True), "arns-hmc": (fs.ARNSHMC, "start_surrogate", True),
            "vhmc": (vhmc, "SMWTrainer", False)}


@pytest.mark.parametrize("method", ["rns-hmc", "rns-rmhmc", "nnghmc", "arns-hmc", "vhmc"])
@pytest.mark.parametrize("kind", ["raise", "ctrl-c"])
def test_trainer_failure(method, kind, monkeypatch):
    ref, _ = clean(method)
    owner, name, explored = _trainers()[method]
    err = Fault("trainer failed")

    def fail(*a, **k):
        raise (err if kind == "raise" else KeyboardInterrupt())

    monkeypatch.setattr(owner, name, fail)
    if kind == "raise":
        with pytest.raises(Fault) as info:
            run(method, Callback())
        assert info.value is err
        res = info.value.result
    else:
        res = run(method, Callback())
    check_partial(res, ref)
    assert res.n_done.sum() == 0
    if explored:                    # the exploration before training is kept
        assert res.warmup_n_done.sum() >= 1


# -- compiled potentials: Ctrl-C and failures at a chunk boundary -------------------------
# Chains on a compiled potential run in threads; Ctrl-C reaches the main thread
# (simulated with _thread.interrupt_main from a chain's progress report) while a
# failure inside a chain's thread is an exception of that chain.  SGLD / SGHMC
# run on GLMs only, so this is how they are faulted.

def _glm():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (rng.random(200) < 0.5).astype(float)
    return fs.models.LogisticRegression(X, y, prior_sd=2.0)


GLM_SPECS = {"hmc": dict(EXACT), "nuts": dict(step_size=0.3, metric="unit", max_tree_depth=4),
             "sgld": dict(step_size=1e-3, batch_size=20), "sghmc": dict(step_size=1e-3, batch_size=20),
             "rmhmc": dict(step_size=0.3, n_steps=3, random_n_steps=False)}


def glm_run(method, chains, **kw):
    from fastsurrogate import SAMPLERS
    sampler = SAMPLERS[method](_glm(), **GLM_SPECS[method])
    return sampler.sample(n_draws=300, n_warmup=300, chains=chains, seed=3, progress=False, **kw)


@pytest.mark.parametrize("method", sorted(GLM_SPECS))
@pytest.mark.parametrize("kind", ["ctrl-c", "raise"])
def test_fault_at_a_chunk_boundary_of_compiled_chains(method, kind, monkeypatch, sigint_handler):
    import _thread
    ref = glm_run(method, 2)
    err = Fault("report failed")
    state = {"n": 0}
    original = _base.ChainContext.report

    def report(self, n):
        original(self, n)
        state["n"] += 1
        if state["n"] == 3:
            if kind == "ctrl-c":
                _thread.interrupt_main()       # Ctrl-C reaches the main thread
            else:
                raise err

    monkeypatch.setattr(_base.ChainContext, "report", report)
    monkeypatch.setattr(_base.ChainContext, "__init__", _small_chunks(_base.ChainContext.__init__))
    if kind == "raise":
        with pytest.raises(Fault) as info:
            glm_run(method, 2)
        assert info.value is err
        res = info.value.result
    else:
        res = glm_run(method, 2)
        if not res.interrupted:    # pragma: no cover - the signal came after the end
            pytest.fail("Ctrl-C did not interrupt the run")
    check_partial(res, ref)
    assert res.warmup_n_done.sum() + res.n_done.sum() >= 1


@pytest.fixture
def sigint_handler():
    """Python's own SIGINT handler for the test: _thread.interrupt_main only
    raises KeyboardInterrupt through it, and an earlier test (a Dask cluster's
    processes, a library's import) may have left another one installed."""
    import signal
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _small_chunks(init):
    """Chains advance by a first chunk of 20 iterations, then one at a time
    (target_seconds 0: the timing rule picks the smallest chunk), so that the
    third report falls inside the run whatever the machine's speed."""
    def __init__(self, *a, **k):
        init(self, *a, **k)
        self.target_seconds = 0.0
        self.chunk = 20
    return __init__


def scenario_count():
    """The number of fault scenarios this file parametrises."""
    return (2 * len(STOPS) + len(NONFINITE_VALUE) + len(NONFINITE_GRAD) + len(UNUSED_GRAD)
            + 1 + (len(SPECS) - 1) + 3 + len(MALFORMED_CASES) + 2 * 5 + 2 * len(GLM_SPECS))
