"""One HMC or NUTS chain whose whole loop runs in C (csrc/fs_hmc.c,
csrc/fs_transition.c, csrc/fs_nuts.c, csrc/fs_surrogate.c) without the GIL.

`Chain` is the building block of every sampler in fastsurrogate: it holds the
current state, the step size and mass matrix, the dual-averaging state and
the chain's random stream (a numpy.random.Generator), and runs chunks of
iterations into caller-provided trace arrays.
"""

from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.math cimport exp

import numpy as np
cimport numpy as cnp
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal

from fastsurrogate.core._common cimport fs_rng, FS_OK, FS_ENONFINITE, FS_EINTERRUPT, FS_ECALLBACK
from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._blas cimport blas_table
from fastsurrogate.core._potential import raise_for_status

cnp.import_array()

STATUS_OK = FS_OK
STATUS_INTERRUPTED = FS_EINTERRUPT
STATUS_CALLBACK = FS_ECALLBACK      # a Python callback raised (the error is held)
STATUS_WARMUP_DONE = FS_WARMUP_DONE  # the warm-up's adaptation converged and ended it

TRACE_FIELDS = {
    "potential": np.float64,
    "accept_prob": np.float64,
    "energy_error": np.float64,
    "energy": np.float64,
    "step_size": np.float64,
    "accepted": np.int8,
    "divergent": np.int8,
    "n_steps": np.int32,
    "judge_evaluated": np.int8,
    "tree_depth": np.int8,
}

ALGORITHMS = {"hmc": FS_ALGORITHM_HMC, "nuts": FS_ALGORITHM_NUTS}
MAX_TREE_DEPTH = FS_NUTS_MAX_TREE_DEPTH


def new_trace(long n, int dim, bint proposals=False, bint inner=False):
    """Arrays for n iterations: ``draws`` (n, dim) and the TRACE_FIELDS (n,).

    With ``proposals``, also ``proposals`` (n, dim) and ``proposal_potential``
    (n,): each iteration's proposal and its judge U (NaN when the judge was
    not evaluated: divergences, delayed-acceptance first-stage rejections).
    With ``inner``, also ``inner_accept_prob`` (n,): with surrogate
    transitions, the inner kernels' mean acceptance (NaN otherwise).
    """
    out = {"draws": np.full((n, dim), np.nan)}
    for k, dt in TRACE_FIELDS.items():
        out[k] = np.zeros(n, dtype=dt)
    if proposals:
        out["proposals"] = np.full((n, dim), np.nan)
        out["proposal_potential"] = np.full(n, np.nan)
    if inner:
        out["inner_accept_prob"] = np.full(n, np.nan)
    return out


class LowRankMetric:
    """A low-rank-plus-diagonal inverse metric, kept factored.

    M^{-1} = D (I + U diag(values - 1) U^T) D with D = diag(sigma) and the
    orthonormal columns U (``vectors``): the diagonal metric sigma^2 except
    along r directions, where (in the coordinates scaled by D) the variance
    is ``values``.  A chain applies it in O(dim r) per leapfrog step
    (csrc/fs_transition.h, FS_METRIC_LOW_RANK); ``adaptation="fisher"`` with
    ``metric="low-rank"`` adapts one, and ``Chain.inv_metric`` and
    ``Result.inv_metric`` return it.

    Parameters
    ----------
    sigma : array (dim,)
        Positive scales.
    values : array (r,)
        Positive eigenvalues, r <= min(dim, 160).
    vectors : array (dim, r)
        Orthonormal columns.
    """

    def __init__(self, sigma, values, vectors):
        sigma = np.array(sigma, dtype=np.float64, copy=True)
        values = np.array(values, dtype=np.float64, copy=True).reshape(-1)
        vectors = np.array(vectors, dtype=np.float64, copy=True)
        d, r = sigma.shape[0] if sigma.ndim == 1 else -1, values.shape[0]
        if sigma.ndim != 1 or vectors.shape != (d, r):
            raise ValueError(f"a low-rank metric needs sigma (dim,), values (r,) and vectors "
                             f"(dim, r); got {sigma.shape}, {values.shape}, {vectors.shape}")
        if not (np.all(np.isfinite(sigma)) and np.all(sigma > 0)
                and np.all(np.isfinite(values)) and np.all(values > 0)):
            raise ValueError("a low-rank metric's sigma and values must be positive and finite")
        if r > min(d, FS_LOW_RANK_MAX):
            raise ValueError(f"a low-rank metric has rank at most min(dim, {FS_LOW_RANK_MAX}), "
                             f"got {r}")
        if r and not np.allclose(vectors.T @ vectors, np.eye(r), atol=1e-8):
            raise ValueError("a low-rank metric's vectors must be orthonormal columns")
        self.sigma, self.values, self.vectors = sigma, values, vectors

    @property
    def dim(self):
        return self.sigma.shape[0]

    @property
    def rank(self):
        return self.values.shape[0]

    def dense(self):
        """The inverse metric as a (dim, dim) array."""
        U = self.vectors
        inner = np.eye(self.dim) + (U * (self.values - 1.0)) @ U.T
        return self.sigma[:, None] * inner * self.sigma[None, :]

    def packed(self):
        """The chain's buffers (FS_LOW_RANK_INV_SIZE / _CHOL_SIZE doubles)."""
        d, r = self.dim, self.rank
        rmax = min(d, FS_LOW_RANK_MAX)
        inv = np.zeros(FS_LOW_RANK_INV_SIZE(d, rmax))
        chol = np.zeros(FS_LOW_RANK_CHOL_SIZE(d, rmax))
        inv[:d] = self.sigma
        inv[d], inv[d + 1] = r, rmax
        inv[d + 2:d + 2 + r] = self.values
        inv[d + 2 + rmax:d + 2 + rmax + r * d] = self.vectors.T.reshape(-1)
        chol[:d] = 1.0 / self.sigma
        chol[d:d + r] = 1.0 / np.sqrt(self.values) - 1.0
        return inv, chol

    @classmethod
    def from_packed(cls, inv, d):
        r, rmax = int(inv[d]), int(inv[d + 1])
        U = np.asarray(inv[d + 2 + rmax:d + 2 + rmax + r * d]).reshape(r, d).T
        out = cls.__new__(cls)
        out.sigma = np.array(inv[:d])
        out.values = np.array(inv[d + 2:d + 2 + r])
        out.vectors = np.ascontiguousarray(U)
        return out

    def __eq__(self, other):
        return (isinstance(other, LowRankMetric) and np.array_equal(self.sigma, other.sigma)
                and np.array_equal(self.values, other.values)
                and np.array_equal(self.vectors, other.vectors))

    def __repr__(self):
        return f"LowRankMetric(dim={self.dim}, rank={self.rank})"


def _unit_low_rank(d):
    return LowRankMetric(np.ones(d), [], np.zeros((d, 0)))


def metric_adaptation_path(q0, g0, Q, G, divergent, long n_warmup, bint low_rank=False,
                           bint stop_early=False):
    """Drives the C metric adaptation (csrc/fs_adapt.h) over given states,
    outside any chain: the start (q0, g0), then rows of Q and G (n, dim)
    with their `divergent` flags (n,).  Returns (inv_metrics, codes):
    the inverse metric after each row ((n, dim) diagonal or (n, dim, dim)
    with ``low_rank``) and each row's result code (n,): 1 the first
    update, 2 two blocks agreed (``stop_early``), 3 the warm-up is over.
    For tests against a NumPy reference."""
    cdef fs_metric_adapt a
    cdef int d, i, r
    cdef object shape
    q0 = np.ascontiguousarray(q0, dtype=np.float64)
    g0 = np.ascontiguousarray(g0, dtype=np.float64)
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    G = np.ascontiguousarray(G, dtype=np.float64)
    div = np.ascontiguousarray(divergent, dtype=np.int32)
    d = q0.shape[0]
    n = Q.shape[0]
    if (g0.shape != (d,) or Q.ndim != 2 or Q.shape[1] != d or G.shape != Q.shape
            or div.shape != (n,) or n_warmup < 1):
        raise ValueError("q0, g0 (dim,), Q, G (n, dim), divergent (n,) and n_warmup >= 1")
    shape = [d, d] if low_rank else [d]
    shape = tuple(shape)
    cdef cnp.ndarray inv, chol
    if low_rank:
        inv, chol = LowRankMetric(np.ones(d), [], np.zeros((d, 0))).packed()
    else:
        inv, chol = np.zeros(d), np.zeros(d)
    cdef cnp.ndarray stats = np.zeros(FS_METRIC_ADAPT_STATS(d, low_rank))
    a.dim = d
    a.low_rank = low_rank
    a.blas = blas_table()
    a.inv_metric = <double *>cnp.PyArray_DATA(inv)
    a.metric_chol = <double *>cnp.PyArray_DATA(chol)
    a.stats = <double *>cnp.PyArray_DATA(stats)
    fs_metric_adapt_init(&a, n_warmup, stop_early, <const double *>cnp.PyArray_DATA(q0),
                         <const double *>cnp.PyArray_DATA(g0))
    out = np.empty((n,) + shape)
    codes = np.zeros(n, dtype=np.int64)
    for i in range(n):
        r = fs_metric_adapt_update(&a, <const double *>cnp.PyArray_DATA(Q) + i * d,
                                   <const double *>cnp.PyArray_DATA(G) + i * d,
                                   (<int *>cnp.PyArray_DATA(div))[i])
        if r < 0:
            raise_for_status(r, f"metric adaptation at row {i}")
        codes[i] = r
        out[i] = LowRankMetric.from_packed(inv, d).dense() if low_rank else inv
    return out, codes


cdef class ChainHook:
    """Base of the C callbacks that :meth:`Chain.run` calls after each iteration.

    A subclass (in Cython) fills ``self.hook``: ``state`` and
    ``after_iteration``, a ``noexcept nogil`` C function with the
    ``fs_hmc_hook_fn`` signature of csrc/fs_hmc.h.  The callback runs inside
    the chain loop without the GIL; it may draw from the chain's random
    stream, change the drive potential (and ask for the current point to be
    re-evaluated), or stop the run with a status: a positive one is a pause
    (``Chain.run`` returns it; the caller does its part and runs on), a
    negative one an error, raised by :meth:`check`.
    """

    def __cinit__(self, *args, **kwargs):
        self.hook.state = NULL
        self.hook.after_iteration = NULL
        self.hook.status = FS_OK

    @property
    def status(self):
        """What the callback returned last (0 when it was not called)."""
        return self.hook.status

    def check(self, int status, str where):
        """Raise the exception for a negative status of the callback."""
        raise_for_status(status, where)


cdef double _rng_normal(void *s) noexcept nogil:
    return random_standard_normal(<bitgen_t *>s)


cdef double _rng_uniform(void *s) noexcept nogil:
    cdef bitgen_t *b = <bitgen_t *>s
    return b.next_double(b.state)


cdef class Chain:
    """State of one HMC (or NUTS) chain driven by `drive` and judged by `judge`.

    Parameters
    ----------
    drive : Potential
        Its gradient moves the leapfrog trajectory.
    judge : Potential
        Its value enters the Metropolis test (pass ``drive`` again for exact HMC).
    q0 : array_like, shape (dim,)
        Initial position; the potentials must be finite there.
    generator : numpy.random.Generator
        The chain's random stream (momenta, uniforms, random path lengths).
    step_size : float
    n_steps : int
        Leapfrog steps per iteration (the maximum when ``random_n_steps``);
        unused by NUTS.
    random_n_steps : bool
        Draw the number of steps uniformly from 1..n_steps each iteration.
    inv_metric : None, array (dim,) or (dim, dim)
        Inverse mass matrix: identity, diagonal or dense.
    max_energy_error : float
        An energy error above this is a divergence.
    delayed_acceptance : bool
        Screen proposals with the drive Hamiltonian before evaluating the judge.
    algorithm : {"hmc", "nuts"}
        The transition: HMC with a fixed (or random) path length, or Stan's
        multinomial No-U-Turn sampler (``drive`` must then be ``judge``, and
        neither ``random_n_steps`` nor ``delayed_acceptance`` applies).
    max_tree_depth : int
        NUTS: at most 2**max_tree_depth - 1 leapfrog steps per iteration
        (1 .. MAX_TREE_DEPTH).
    surrogate_steps : int
        0 (default): each iteration is one transition of ``algorithm``.
        k >= 1: surrogate transitions (csrc/fs_surrogate.h; Liu 2001, sec.
        9.4.3): k transitions of ``algorithm`` with ``drive`` (V) as their
        only potential, then one Metropolis-Hastings test with acceptance
        min(1, exp(-U(q') + U(q) + V(q') - V(q))), U the ``judge``.  Exact
        for ``judge`` for every k; one U value per iteration.  ``drive``
        must differ from ``judge``; ``delayed_acceptance`` does not apply.
        The step size (and its adaptation, fed the inner kernels' mean
        acceptance) is the inner kernel's.
    """

    cdef Potential drive
    cdef Potential judge
    cdef fs_hmc_config cfg
    cdef fs_hmc_point cur
    cdef fs_dual_avg da
    cdef bint adapting
    cdef fs_metric_adapt ma
    cdef bint metric_adapting
    cdef cnp.ndarray _ma_stats
    cdef fs_rng rng
    cdef object generator
    cdef object lock
    cdef public long n_done_last
    cdef cnp.ndarray _q, _grad, _work, _inv_metric, _metric_chol

    def __init__(self, Potential drive not None, Potential judge not None, q0, generator,
                 double step_size=0.1, int n_steps=10, bint random_n_steps=False,
                 inv_metric=None, double max_energy_error=1000.0,
                 bint delayed_acceptance=False, algorithm="hmc", max_tree_depth=10,
                 surrogate_steps=0):
        cdef int d = drive.pot.dim
        if drive.pot.eval == NULL or judge.pot.eval == NULL:
            raise TypeError("drive and judge must be initialised Potentials")
        if judge.pot.dim != d:
            raise ValueError(f"drive has dim {d} but judge has dim {judge.pot.dim}")
        if not isinstance(generator, np.random.Generator):
            raise TypeError("generator must be a numpy.random.Generator")
        if not (step_size > 0 and np.isfinite(step_size)):
            raise ValueError(f"step_size must be positive and finite, got {step_size}")
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        if not max_energy_error > 0:
            raise ValueError("max_energy_error must be positive")
        if not isinstance(algorithm, str):
            raise TypeError(f"algorithm must be a string, got {type(algorithm).__name__}")
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
        if isinstance(max_tree_depth, bool) or not isinstance(max_tree_depth, (int, np.integer)):
            raise TypeError(f"max_tree_depth must be an integer, got {type(max_tree_depth).__name__}")
        if not 1 <= max_tree_depth <= FS_NUTS_MAX_TREE_DEPTH:
            raise ValueError(f"max_tree_depth must be in 1..{FS_NUTS_MAX_TREE_DEPTH}, "
                             f"got {max_tree_depth}")
        if isinstance(surrogate_steps, bool) or not isinstance(surrogate_steps, (int, np.integer)):
            raise TypeError(f"surrogate_steps must be an integer, got "
                            f"{type(surrogate_steps).__name__}")
        if surrogate_steps < 0:
            raise ValueError(f"surrogate_steps must be >= 0, got {surrogate_steps}")
        cdef bint same = drive is judge or (drive.pot.eval == judge.pot.eval
                                            and drive.pot.state == judge.pot.state)
        if surrogate_steps > 0:
            if same:
                raise ValueError("surrogate transitions need a surrogate drive distinct from "
                                 "the exact judge")
            if delayed_acceptance:
                raise ValueError("delayed_acceptance does not apply to surrogate transitions")
            if algorithm == "nuts" and random_n_steps:
                raise ValueError("random_n_steps does not apply to NUTS")
        elif algorithm == "nuts":
            if not (drive is judge or (drive.pot.eval == judge.pot.eval
                                       and drive.pot.state == judge.pot.state)):
                raise ValueError("NUTS takes one potential: pass the same Potential as "
                                 "drive and judge")
            if random_n_steps or delayed_acceptance:
                raise ValueError("random_n_steps and delayed_acceptance do not apply to NUTS")
        self.drive = drive
        self.judge = judge
        self.generator = generator
        bg = generator.bit_generator
        self.lock = bg.lock
        self.rng.state = PyCapsule_GetPointer(bg.capsule, "BitGenerator")
        self.rng.normal = _rng_normal
        self.rng.uniform = _rng_uniform
        self.cfg.algorithm = ALGORITHMS[algorithm]
        self.cfg.max_tree_depth = max_tree_depth
        self.cfg.surrogate_steps = surrogate_steps
        self._work = np.zeros(max(fs_hmc_workspace_size(d),
                                  fs_nuts_workspace_size(d, max_tree_depth)
                                  if algorithm == "nuts" else 0,
                                  fs_surrogate_workspace_size(d, self.cfg.algorithm,
                                                              max_tree_depth)
                                  if surrogate_steps > 0 else 0))
        self.cfg.dim = d
        self.cfg.step_size = step_size
        self.cfg.n_steps = n_steps
        self.cfg.random_n_steps = random_n_steps
        self.cfg.max_energy_error = max_energy_error
        self.cfg.delayed_acceptance = delayed_acceptance
        self.set_inv_metric(inv_metric)
        self._grad = np.zeros(d)
        self.adapting = False
        self.metric_adapting = False
        self.set_position(q0)

    # -- state -----------------------------------------------------------
    def set_position(self, q0):
        """Move the chain to q0 (evaluates the potentials there)."""
        cdef int d = self.cfg.dim
        q = np.array(q0, dtype=np.float64, copy=True).ravel()
        if q.shape[0] != d:
            raise ValueError(f"initial position must have shape ({d},), got {np.shape(q0)}")
        if not np.all(np.isfinite(q)):
            raise ValueError("initial position contains NaN or inf")
        self._q = q
        self.cur.q = <double *>cnp.PyArray_DATA(self._q)
        self.cur.grad = <double *>cnp.PyArray_DATA(self._grad)
        cdef int status
        with nogil:
            status = fs_hmc_point_init(&self.cfg, &self.drive.pot, &self.judge.pot, &self.cur)
        if status == FS_ENONFINITE:
            raise ValueError("the potential or its gradient is not finite at the initial position")
        self._raise(status, "initial position")

    def refresh_drive(self):
        """Re-evaluate the drive potential (only) at the current position,
        after its weights changed: the next trajectory then starts from the
        new drive's gradient (a start from the old one would not be
        reversible).  The judge's U is kept."""
        cdef int status
        with nogil:
            status = fs_hmc_point_refresh_drive(&self.cfg, &self.drive.pot, &self.judge.pot,
                                                &self.cur)
        if status == FS_ENONFINITE:
            raise FloatingPointError("the drive potential or its gradient is not finite at "
                                     "the chain's position")
        self._raise(status, "drive refresh")

    @property
    def generator(self):
        """The chain's numpy Generator."""
        return self.generator

    @property
    def drive(self):
        return self.drive

    @property
    def judge(self):
        return self.judge

    @property
    def drive_is_judge(self):
        """True for exact HMC (one potential both drives and judges)."""
        return self.drive is self.judge

    @property
    def position(self):
        """Current position, shape (dim,) (a copy)."""
        return self._q.copy()

    @property
    def potential(self):
        """Judge U at the current position."""
        return self.cur.u_judge

    @property
    def step_size(self):
        return self.cfg.step_size

    @step_size.setter
    def step_size(self, double value):
        if not (value > 0 and np.isfinite(value)):
            raise ValueError(f"step_size must be positive and finite, got {value}")
        self.cfg.step_size = value

    @property
    def n_steps(self):
        return self.cfg.n_steps

    @property
    def algorithm(self):
        """"hmc" or "nuts"."""
        return "nuts" if self.cfg.algorithm == FS_ALGORITHM_NUTS else "hmc"

    @property
    def max_tree_depth(self):
        return self.cfg.max_tree_depth

    @property
    def surrogate_steps(self):
        """Surrogate transitions per exact test (0: plain transitions)."""
        return self.cfg.surrogate_steps

    @surrogate_steps.setter
    def surrogate_steps(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"surrogate_steps must be an integer, got {type(value).__name__}")
        if self.cfg.surrogate_steps == 0 or value < 1:
            raise ValueError("surrogate_steps can only be changed between values >= 1 "
                             "on a chain built with surrogate_steps >= 1")
        self.cfg.surrogate_steps = value

    @property
    def inv_metric(self):
        """The inverse mass matrix: None (identity), (dim,), (dim, dim) or a
        :class:`LowRankMetric`."""
        if self._inv_metric is None:
            return None
        if self.cfg.metric == FS_METRIC_LOW_RANK:
            return LowRankMetric.from_packed(self._inv_metric, self.cfg.dim)
        return self._inv_metric.copy()

    def set_inv_metric(self, inv_metric):
        """Set the inverse mass matrix: None, a (dim,) diagonal, a (dim, dim)
        SPD matrix or a :class:`LowRankMetric`."""
        cdef int d = self.cfg.dim
        if isinstance(inv_metric, LowRankMetric):
            if inv_metric.dim != d:
                raise ValueError(f"the low-rank metric has dim {inv_metric.dim}, the chain {d}")
            m, chol = inv_metric.packed()
            self.cfg.metric = FS_METRIC_LOW_RANK
            self._use_metric(m, chol)
            return
        if inv_metric is None:
            self.metric_adapting = False
            self._inv_metric = None
            self._metric_chol = None
            self.cfg.metric = FS_METRIC_UNIT
            self.cfg.inv_metric = NULL
            self.cfg.metric_chol = NULL
            return
        m = np.array(inv_metric, dtype=np.float64, copy=True)
        if not np.all(np.isfinite(m)):
            raise ValueError("inv_metric contains NaN or inf")
        if m.shape == (d,):
            if np.any(m <= 0):
                raise ValueError("a diagonal inv_metric must be positive")
            chol = np.ascontiguousarray(1.0 / np.sqrt(m))
            self.cfg.metric = FS_METRIC_DIAG
        elif m.shape == (d, d):
            m = 0.5 * (m + m.T)
            try:
                # M = inv_metric^{-1} = L L^T
                chol = np.ascontiguousarray(np.linalg.cholesky(np.linalg.inv(m)))
            except np.linalg.LinAlgError:
                raise ValueError("inv_metric must be symmetric positive definite") from None
            self.cfg.metric = FS_METRIC_DENSE
        else:
            raise ValueError(f"inv_metric must have shape ({d},) or ({d}, {d}), got {m.shape}")
        self._use_metric(np.ascontiguousarray(m), chol)

    cdef _use_metric(self, cnp.ndarray m, cnp.ndarray chol):
        self._inv_metric = m
        self._metric_chol = chol
        self.cfg.inv_metric = <const double *>cnp.PyArray_DATA(self._inv_metric)
        self.cfg.metric_chol = <const double *>cnp.PyArray_DATA(self._metric_chol)
        # a metric adaptation in progress goes on in the new arrays (a
        # checkpoint restores the metric it had reached), or stops when the
        # metric is no longer diagonal
        self.metric_adapting = self.metric_adapting and self.cfg.metric == (
            FS_METRIC_LOW_RANK if self.ma.low_rank else FS_METRIC_DIAG)
        if self.metric_adapting:
            self.ma.inv_metric = <double *>cnp.PyArray_DATA(self._inv_metric)
            self.ma.metric_chol = <double *>cnp.PyArray_DATA(self._metric_chol)

    # -- checkpoints (fastsurrogate.samplers._checkpoint) ---------------------
    def get_state(self):
        """The chain's dynamic state as plain numbers and arrays: position,
        drive gradient, U values, step size, dual-averaging state, the
        adaptation flag, the surrogate-transition count and the metric
        adaptation's state (:meth:`start_metric_adaptation`).  The random
        stream (``generator``) and the metric are saved separately.
        :meth:`set_state` puts it back without evaluating the potentials."""
        cdef fs_dual_avg *a = &self.da
        return {"q": self._q.copy(), "grad": self._grad.copy(),
                "u_judge": float(self.cur.u_judge), "u_drive": float(self.cur.u_drive),
                "step_size": float(self.cfg.step_size),
                "surrogate_steps": int(self.cfg.surrogate_steps),
                "adapting": bool(self.adapting),
                "dual_avg": np.array([a.mu, a.gamma, a.t0, a.kappa, a.delta, a.h_bar,
                                      a.log_eps, a.log_eps_bar, a.count], dtype=np.float64),
                "metric_adapt": self._metric_adaptation_state()}

    def get_config(self):
        """The constructor's keyword options (step size and metric aside): a
        chain built with them and ``set_state`` continues this one."""
        return {"n_steps": int(self.cfg.n_steps), "random_n_steps": bool(self.cfg.random_n_steps),
                "max_energy_error": float(self.cfg.max_energy_error),
                "delayed_acceptance": bool(self.cfg.delayed_acceptance),
                "algorithm": self.algorithm, "max_tree_depth": int(self.cfg.max_tree_depth),
                "surrogate_steps": int(self.cfg.surrogate_steps)}

    def set_state(self, dict state):
        """Restore what :meth:`get_state` returned (bit for bit, no evaluation)."""
        cdef int d = self.cfg.dim
        q = np.asarray(state["q"], dtype=np.float64)
        g = np.asarray(state["grad"], dtype=np.float64)
        da = np.asarray(state["dual_avg"], dtype=np.float64)
        if q.shape != (d,) or g.shape != (d,) or da.shape != (9,):
            raise ValueError(f"a chain state of dim {d} needs q and grad of shape ({d},) "
                             "and dual_avg of shape (9,)")
        steps = int(state["surrogate_steps"])
        if (steps > 0) != (self.cfg.surrogate_steps > 0):
            raise ValueError("the state's surrogate_steps does not fit this chain")
        self._q[:] = q
        self._grad[:] = g
        self.cur.u_judge = float(state["u_judge"])
        self.cur.u_drive = float(state["u_drive"])
        self.cfg.step_size = float(state["step_size"])
        self.cfg.surrogate_steps = steps
        self.adapting = bool(state["adapting"])
        self.da.mu, self.da.gamma, self.da.t0, self.da.kappa, self.da.delta = da[:5]
        self.da.h_bar, self.da.log_eps, self.da.log_eps_bar, self.da.count = da[5:]
        self._set_metric_adaptation_state(state.get("metric_adapt", np.zeros(0)))

    # -- pickling (chains that leave the process: samplers' executor=) -------
    def __reduce__(self):
        # rebuilt by the constructor (which re-evaluates the potentials at the
        # position: deterministic), then the dual-averaging state
        algorithm = "nuts" if self.cfg.algorithm == FS_ALGORITHM_NUTS else "hmc"
        args = (self.drive, self.judge, self._q.copy(), self.generator, self.cfg.step_size,
                self.cfg.n_steps, bool(self.cfg.random_n_steps), self.inv_metric,
                self.cfg.max_energy_error, bool(self.cfg.delayed_acceptance), algorithm,
                int(self.cfg.max_tree_depth), int(self.cfg.surrogate_steps))
        da = (self.da.mu, self.da.gamma, self.da.t0, self.da.kappa, self.da.delta,
              self.da.h_bar, self.da.log_eps, self.da.log_eps_bar, self.da.count)
        return (Chain, args, (bool(self.adapting), da, int(self.n_done_last),
                              self._metric_adaptation_state()))

    def __setstate__(self, state):
        adapting, da, n_done_last, metric_adapt = state
        self._set_metric_adaptation_state(metric_adapt)
        (self.da.mu, self.da.gamma, self.da.t0, self.da.kappa, self.da.delta,
         self.da.h_bar, self.da.log_eps, self.da.log_eps_bar, self.da.count) = da
        self.adapting = adapting
        self.n_done_last = n_done_last

    # -- adaptation --------------------------------------------------------
    def find_step_size(self):
        """Stan's initial step-size heuristic from the current step size; sets and returns it."""
        cdef double eps = self.cfg.step_size
        cdef int status
        cdef fs_hmc_point pt = self.cur
        cdef Potential judge = self.judge
        if self.cfg.surrogate_steps > 0:
            # the step size is the inner kernel's: search it on V alone
            judge = self.drive
            pt.u_judge = self.cur.u_drive
        with self.lock:
            with nogil:
                status = fs_hmc_find_step_size(&self.cfg, &self.drive.pot, &judge.pot,
                                               &self.rng, &pt,
                                               <double *>cnp.PyArray_DATA(self._work), &eps)
        self._raise(status, "step size search")
        self.cfg.step_size = eps
        return eps

    def start_adaptation(self, double target_accept=0.8):
        """Restart dual averaging of the step size from the current step size."""
        if not (0 < target_accept < 1):
            raise ValueError("target_accept must be in (0, 1)")
        fs_dual_avg_init(&self.da, self.cfg.step_size, target_accept)
        self.adapting = True

    def start_metric_adaptation(self, long n_warmup, bint low_rank=False,
                                bint stop_early=False):
        """Adapt the metric from the states and gradients of the next
        n_warmup iterations (csrc/fs_adapt.h: nutpie's schedule; diagonal,
        sqrt(Var q / Var grad U) after every iteration, or with ``low_rank``
        a dense low-rank-plus-diagonal metric rebuilt at each window
        switch), starting from the diagonal 1 / |grad U| at the current
        point.  Needs an exact chain (drive is judge, no surrogate
        transitions).  Step-size adaptation (:meth:`start_adaptation`) runs
        beside it: the step size is searched again after the first metric
        update.  With ``stop_early`` the warm-up ends when two consecutive
        blocks of 80 states agree (fs_adapt.h): :meth:`run` then returns
        STATUS_WARMUP_DONE after the last warm-up iteration, and
        :attr:`warmup_converged_at` says when they agreed."""
        cdef int d = self.cfg.dim
        if self.cfg.surrogate_steps > 0 or not self.drive_is_judge:
            raise ValueError("metric adaptation from gradients needs an exact chain "
                             "(drive is judge, no surrogate transitions)")
        if n_warmup < 1:
            raise ValueError(f"n_warmup must be >= 1, got {n_warmup}")
        self.set_inv_metric(_unit_low_rank(d) if low_rank else np.ones(d))
        self._ma_stats = np.zeros(FS_METRIC_ADAPT_STATS(d, low_rank))
        self._point_metric_adaptation(low_rank)
        fs_metric_adapt_init(&self.ma, n_warmup, stop_early,
                             <const double *>cnp.PyArray_DATA(self._q),
                             <const double *>cnp.PyArray_DATA(self._grad))
        self.metric_adapting = True

    cdef _point_metric_adaptation(self, bint low_rank):
        self.ma.dim = self.cfg.dim
        self.ma.low_rank = low_rank
        self.ma.blas = blas_table()
        self.ma.inv_metric = <double *>cnp.PyArray_DATA(self._inv_metric)
        self.ma.metric_chol = <double *>cnp.PyArray_DATA(self._metric_chol)
        self.ma.stats = <double *>cnp.PyArray_DATA(self._ma_stats)

    def finish_metric_adaptation(self):
        """Stop adapting the metric (it stays as it is)."""
        self.metric_adapting = False

    @property
    def warmup_converged_at(self):
        """The warm-up iteration (counted from 1) at which the metric
        adaptation's blocks agreed and its final window began; None when
        they have not (or no metric adaptation ran)."""
        if self.ma.converged_at < 0 or self.ma.dim != self.cfg.dim:
            return None
        return int(self.ma.converged_at)

    def _metric_adaptation_state(self):
        """The metric adaptation's state as one array (empty when off): the
        low-rank flag and FS_METRIC_ADAPT_COUNTERS counters, then the
        estimators' running sums."""
        cdef fs_metric_adapt *a = &self.ma
        if not self.metric_adapting:
            return np.zeros(0)
        return np.concatenate([[a.low_rank, a.n_fg, a.n_bg, a.iteration, a.early_end,
                                a.metric_end, a.early_switch, a.late_switch, a.n_updates,
                                a.stop_early, a.n_block, a.n_prev, a.warmup_end,
                                a.converged_at],
                               self._ma_stats])

    def _set_metric_adaptation_state(self, state):
        cdef int d = self.cfg.dim
        state = np.asarray(state, dtype=np.float64)
        if state.size == 0:
            self.metric_adapting = False
            return
        low_rank = state.ndim == 1 and state.size > 0 and state[0] == 1.0
        cdef int k = 1 + FS_METRIC_ADAPT_COUNTERS
        if state.shape != (k + FS_METRIC_ADAPT_STATS(d, low_rank),):
            raise ValueError("the metric adaptation's state does not fit this chain")
        if self.cfg.metric != (FS_METRIC_LOW_RANK if low_rank else FS_METRIC_DIAG):
            # the metric itself is restored apart
            self.set_inv_metric(_unit_low_rank(d) if low_rank else np.ones(d))
        self._ma_stats = np.ascontiguousarray(state[k:])
        self._point_metric_adaptation(low_rank)
        (self.ma.n_fg, self.ma.n_bg, self.ma.iteration, self.ma.early_end, self.ma.metric_end,
         self.ma.early_switch, self.ma.late_switch, self.ma.n_updates, self.ma.stop_early,
         self.ma.n_block, self.ma.n_prev, self.ma.warmup_end,
         self.ma.converged_at) = state[1:k]
        self.metric_adapting = True

    def finish_adaptation(self):
        """Stop adapting; the step size becomes the dual-averaging average. Returns it."""
        if self.adapting and self.da.count > 0:
            self.cfg.step_size = exp(self.da.log_eps_bar)
        self.adapting = False
        return self.cfg.step_size

    # -- running -----------------------------------------------------------
    def run(self, dict trace, long start, long n_iter, stop=None, ChainHook hook=None):
        """Run n_iter iterations, writing rows start .. start+n_iter-1 of `trace`.

        `trace` comes from `new_trace`.  `stop` is an optional int32 array of
        one element; when another thread sets it non-zero, the loop stops
        before its next iteration.  `hook` (a :class:`ChainHook`) runs in C
        after each iteration.  Returns ``(n_done, status)``: status 0, or
        STATUS_INTERRUPTED, or the hook's positive pause code (the paused
        iteration is counted in n_done), or STATUS_WARMUP_DONE when the
        metric adaptation ended the warm-up (:meth:`start_metric_adaptation`); a potential's or the hook's error is
        raised here (the rows before it are filled, and their number is
        :attr:`n_done_last`).
        """
        cdef int d = self.cfg.dim
        cdef fs_hmc_trace tr
        cdef long n_done = 0
        cdef int status
        cdef double eps_out
        cdef const int *stop_ptr = NULL
        cdef cnp.ndarray stop_arr
        self.n_done_last = 0
        draws = trace["draws"]
        if draws.shape[1] != d or start < 0 or n_iter < 0 or start + n_iter > draws.shape[0]:
            raise ValueError("trace arrays do not fit the requested rows")
        for k, dt in TRACE_FIELDS.items():
            a = trace[k]
            if a.dtype != dt or not a.flags.c_contiguous or a.shape[0] != draws.shape[0]:
                raise ValueError(f"trace[{k!r}] must be a contiguous {np.dtype(dt)} array")
        if not draws.flags.c_contiguous or draws.dtype != np.float64:
            raise ValueError("trace['draws'] must be a C-contiguous float64 array")
        if stop is not None:
            stop_arr = stop
            if stop_arr.dtype != np.int32 or stop_arr.size < 1:
                raise ValueError("stop must be an int32 array with one element")
            stop_ptr = <const int *>cnp.PyArray_DATA(stop_arr)
        tr.draws = <double *>cnp.PyArray_DATA(draws) + start * d
        tr.potential = <double *>cnp.PyArray_DATA(trace["potential"]) + start
        tr.accept_prob = <double *>cnp.PyArray_DATA(trace["accept_prob"]) + start
        tr.energy_error = <double *>cnp.PyArray_DATA(trace["energy_error"]) + start
        tr.energy = <double *>cnp.PyArray_DATA(trace["energy"]) + start
        tr.step_size = <double *>cnp.PyArray_DATA(trace["step_size"]) + start
        tr.accepted = <int8_t *>cnp.PyArray_DATA(trace["accepted"]) + start
        tr.divergent = <int8_t *>cnp.PyArray_DATA(trace["divergent"]) + start
        tr.n_steps = <int32_t *>cnp.PyArray_DATA(trace["n_steps"]) + start
        tr.judge_evaluated = <int8_t *>cnp.PyArray_DATA(trace["judge_evaluated"]) + start
        tr.tree_depth = <int8_t *>cnp.PyArray_DATA(trace["tree_depth"]) + start
        tr.proposals = NULL
        tr.proposal_potential = NULL
        tr.inner_accept_prob = NULL
        if "inner_accept_prob" in trace:
            ia = trace["inner_accept_prob"]
            if ia.dtype != np.float64 or not ia.flags.c_contiguous or ia.shape[0] != draws.shape[0]:
                raise ValueError("trace['inner_accept_prob'] must be a contiguous float64 "
                                 "array with one row per draw")
            tr.inner_accept_prob = <double *>cnp.PyArray_DATA(ia) + start
        if "proposals" in trace:
            pa, pu = trace["proposals"], trace["proposal_potential"]
            if (pa.dtype != np.float64 or not pa.flags.c_contiguous or pa.shape != draws.shape
                    or pu.dtype != np.float64 or not pu.flags.c_contiguous
                    or pu.shape[0] != draws.shape[0]):
                raise ValueError("trace['proposals'] / ['proposal_potential'] do not match the draws")
            tr.proposals = <double *>cnp.PyArray_DATA(pa) + start * d
            tr.proposal_potential = <double *>cnp.PyArray_DATA(pu) + start
        cdef fs_dual_avg *da = &self.da if self.adapting else NULL
        cdef fs_metric_adapt *mp = &self.ma if self.metric_adapting else NULL
        cdef fs_hmc_hook *hp = NULL
        if hook is not None:
            if hook.hook.after_iteration == NULL:
                raise TypeError(f"{type(hook).__name__} has no C callback")
            hp = &hook.hook
        with self.lock:
            with nogil:
                status = fs_hmc_run(&self.cfg, &self.drive.pot, &self.judge.pot, &self.rng,
                                    &self.cur, da, n_iter, &tr,
                                    <double *>cnp.PyArray_DATA(self._work), stop_ptr,
                                    &n_done, &eps_out, hp, mp)
        self.n_done_last = n_done
        if self.adapting:
            self.cfg.step_size = eps_out
        if status == FS_WARMUP_DONE and mp != NULL:
            return n_done, status
        if hp != NULL and status != FS_OK and status == hp.status:
            if status > 0:
                return n_done, status
            hook.check(status, f"{type(hook).__name__} at iteration {start + n_done - 1}")
        if status != FS_EINTERRUPT:
            self._raise(status, f"iteration {start + n_done}")
        return n_done, status

    cdef _raise(self, int status, str where):
        if status == FS_OK:
            return
        for pot in (self.drive, self.judge):
            err = pot._take_error()       # a Python callback's exception, unchanged
            if err is not None:
                raise err
        raise_for_status(status, where)
