"""Stochastic-gradient chains on GLM minibatches (csrc/fs_sg.c): SGLD and
SGHMC, the whole update loop in C without the GIL, one call per chunk.

``minibatch_value_and_grad`` exposes the row-list kernel (csrc/fs_glm.c,
``fs_glm_eval_rows``) for tests and for users who write their own loop.
"""
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport int8_t, int32_t
from libc.math cimport NAN

import numpy as np
cimport numpy as cnp
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal

from fastsurrogate.core._common cimport fs_rng, FS_OK, FS_EINTERRUPT
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.core._hmc import TRACE_FIELDS, STATUS_INTERRUPTED
from fastsurrogate.models._glm cimport GeneralizedLinearModel, fs_glm

cnp.import_array()

cdef extern from "fs_glm.h" nogil:
    int fs_glm_eval_rows(const fs_glm *m, const size_t *rows, size_t k, double scale,
                         const double *beta, double *value, double *grad, double *grad_sq)

cdef extern from "fs_sg.h" nogil:
    enum:
        FS_SG_SGLD
        FS_SG_SGHMC
        FS_SG_NOISE_ZERO
        FS_SG_NOISE_FISHER
    ctypedef struct fs_sg_config:
        int algorithm
        size_t batch_size
        double a, b, delta
        double friction
        int noise_estimate
        int n_steps
        int mh
        const double *l1_scale
        const double *l1_loc
        double l1_log_norm
    ctypedef struct fs_sg_trace:
        double *draws
        double *potential
        double *accept_prob
        double *energy_error
        double *energy
        double *step_size
        int8_t *accepted
        int8_t *divergent
        int32_t *n_steps
        int8_t *judge_evaluated
        int32_t *noise_clipped
    ctypedef struct fs_sg_state:
        double *q
        double u
        long t
        size_t *perm
    int fs_sg_workspace_size(size_t n, size_t d, size_t *doubles)
    int fs_sg_check(const fs_sg_config *cfg, const fs_glm *m)
    int fs_sg_run(const fs_sg_config *cfg, const fs_glm *m, fs_rng *rng, fs_sg_state *st,
                  long n_iter, const int *stop, const fs_sg_trace *tr, double *work,
                  long *n_done)

ALGORITHMS = {"sgld": FS_SG_SGLD, "sghmc": FS_SG_SGHMC}
NOISE_ESTIMATES = {"zero": FS_SG_NOISE_ZERO, "fisher": FS_SG_NOISE_FISHER}


cdef double _rng_normal(void *s) noexcept nogil:
    return random_standard_normal(<bitgen_t *>s)


cdef double _rng_uniform(void *s) noexcept nogil:
    cdef bitgen_t *b = <bitgen_t *>s
    return b.next_double(b.state)


cdef GeneralizedLinearModel _check_model(model):
    if not isinstance(model, GeneralizedLinearModel):
        raise TypeError("stochastic-gradient samplers need a data-sum GLM "
                        "(fs.models.LogisticRegression, ProbitRegression, "
                        f"PoissonRegression, LinearRegression); got {type(model).__name__}")
    return <GeneralizedLinearModel>model


def minibatch_value_and_grad(model, beta, rows, scale=None, bint grad_sq=False):
    """The minibatch estimate of U and grad U on the given rows, X read in place.

    ``value = scale * sum_{i in rows} loss_i + prior``, ``grad`` likewise
    (the prior in full), with ``scale = n / len(rows)`` by default: an
    unbiased estimate when ``rows`` is a uniform draw.

    Parameters
    ----------
    model : GeneralizedLinearModel
    beta : array_like, shape (dim,)
    rows : array_like of int, shape (k,)
        Row indices in 0..n-1 (repeats allowed).
    scale : float, optional
    grad_sq : bool
        Also return ``sum_i (r_i x_i)**2`` (shape (dim,), unscaled): the
        diagonal of the batch's empirical Fisher information.

    Returns
    -------
    (value, grad) or (value, grad, grad_sq)

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> from fastsurrogate.core._sg import minibatch_value_and_grad
    >>> X, y, _ = fs.datasets.simulate_logistic(n=100, d=3, seed=0)
    >>> m = fs.models.LogisticRegression(X, y)
    >>> v, g = minibatch_value_and_grad(m, np.zeros(3), np.arange(100))
    >>> bool(np.isclose(v, m.value(np.zeros(3))))
    True
    """
    cdef GeneralizedLinearModel mod = _check_model(model)
    mod._require_ready()
    cdef Py_ssize_t d = mod.pot.dim
    b = np.ascontiguousarray(beta, dtype=np.float64)
    if b.shape != (d,):
        raise ValueError(f"beta must have shape ({d},), got {b.shape}")
    r = np.asarray(rows)
    if r.ndim != 1 or r.shape[0] < 1:
        raise ValueError("rows must be a non-empty 1-d array of row indices")
    if not np.issubdtype(r.dtype, np.integer):
        raise TypeError(f"rows must be integers, got dtype {r.dtype}")
    if r.min() < 0 or r.max() >= <Py_ssize_t>mod.model.n:
        raise ValueError(f"row indices must be in 0..{mod.model.n - 1}")
    cdef cnp.ndarray rc = np.ascontiguousarray(r, dtype=np.uintp)
    cdef cnp.ndarray bc = b
    cdef double sc = mod.model.n / float(r.shape[0]) if scale is None else float(scale)
    cdef cnp.ndarray g = np.empty(d, dtype=np.float64)
    cdef cnp.ndarray gs = np.empty(d, dtype=np.float64)
    cdef double value = 0.0
    cdef size_t k = <size_t>r.shape[0]
    cdef int status
    cdef double *gsp = <double *>cnp.PyArray_DATA(gs) if grad_sq else NULL
    with nogil:
        status = fs_glm_eval_rows(&mod.model, <const size_t *>cnp.PyArray_DATA(rc), k, sc,
                                  <const double *>cnp.PyArray_DATA(bc), &value,
                                  <double *>cnp.PyArray_DATA(g), gsp)
    raise_for_status(status, "minibatch_value_and_grad")
    if grad_sq:
        return value, g, gs
    return value, g


cdef class SGChain:
    """One SGLD or SGHMC chain on a GLM's minibatches (csrc/fs_sg.h).

    Parameters
    ----------
    model : GeneralizedLinearModel
    q0 : array_like, shape (dim,)
    generator : numpy.random.Generator
        Batches, noise and momenta.
    algorithm : {"sgld", "sghmc"}
    batch_size : int
        Rows per gradient, 1..n.
    a, b, delta : float
        Step-size schedule eps_t = a (b + t)^(-delta), t the number of
        gradient steps taken.
    friction : float
        SGHMC's C.
    noise_estimate : {"zero", "fisher"}
        SGHMC's B_hat: 0, or (eps / 2) times the diagonal of the batch's
        empirical gradient covariance.
    n_steps : int
        SGHMC steps per stored draw.
    mh : bool
        SGHMC: leapfrog steps with a fresh batch each and a
        Metropolis-Hastings test with the full U (exact chain).
    l1_scale, l1_loc : array_like (dim,), optional
        An independent Laplace prior sum_j |q_j - loc_j| / scale_j (+ its
        log normaliser) added to the model's U and to every gradient (the
        model should then have a flat prior): the target of
        :class:`fastsurrogate.models.LaplaceLogisticRegression`.

    ``run(trace, start, n_iter, stop)`` fills rows of a trace from
    :func:`~fastsurrogate.core.new_trace` (plus ``noise_clipped``, int32,
    when present), like :class:`~fastsurrogate.core.Chain`.
    """
    cdef GeneralizedLinearModel model
    cdef fs_sg_config cfg
    cdef fs_sg_state st
    cdef fs_rng rng
    cdef object generator
    cdef object lock
    cdef cnp.ndarray _q, _perm, _work, _l1_scale, _l1_loc

    def __init__(self, model, q0, generator, algorithm="sgld", batch_size=100,
                 double a=1e-3, double b=1.0, double delta=0.0, double friction=1.0,
                 noise_estimate="zero", int n_steps=1, bint mh=False, l1_scale=None,
                 l1_loc=None):
        self.model = _check_model(model)
        self.model._require_ready()
        cdef Py_ssize_t d = self.model.pot.dim
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
        if noise_estimate not in NOISE_ESTIMATES:
            raise ValueError(f"noise_estimate must be one of {sorted(NOISE_ESTIMATES)}, "
                             f"got {noise_estimate!r}")
        if not isinstance(generator, np.random.Generator):
            raise TypeError("generator must be a numpy.random.Generator")
        q = np.array(q0, dtype=np.float64, copy=True).ravel()
        if q.shape != (d,) or not np.all(np.isfinite(q)):
            raise ValueError(f"q0 must be a finite array of shape ({d},)")
        self.cfg.algorithm = ALGORITHMS[algorithm]
        self.cfg.batch_size = <size_t>int(batch_size)
        self.cfg.a, self.cfg.b, self.cfg.delta = a, b, delta
        self.cfg.friction = friction
        self.cfg.noise_estimate = NOISE_ESTIMATES[noise_estimate]
        self.cfg.n_steps = n_steps
        self.cfg.mh = mh
        self.cfg.l1_scale = NULL
        self.cfg.l1_loc = NULL
        self.cfg.l1_log_norm = 0.0
        if l1_scale is not None:
            sc = np.array(np.broadcast_to(np.asarray(l1_scale, dtype=np.float64), (d,)))
            lo = np.array(np.broadcast_to(np.asarray(0.0 if l1_loc is None else l1_loc,
                                                     dtype=np.float64), (d,)))
            if not (np.all(np.isfinite(sc)) and np.all(sc > 0) and np.all(np.isfinite(lo))):
                raise ValueError("l1_scale must be positive and finite and l1_loc finite")
            self._l1_scale, self._l1_loc = sc, lo
            self.cfg.l1_scale = <const double *>cnp.PyArray_DATA(self._l1_scale)
            self.cfg.l1_loc = <const double *>cnp.PyArray_DATA(self._l1_loc)
            self.cfg.l1_log_norm = float(np.sum(np.log(2.0 * sc)))
        if int(batch_size) < 1 or fs_sg_check(&self.cfg, &self.model.model) != FS_OK:
            raise ValueError("invalid stochastic-gradient configuration (batch_size in "
                             "1..n, a > 0, b > 0, delta >= 0, friction >= 0, n_steps >= 1)")
        cdef size_t ws = 0
        raise_for_status(fs_sg_workspace_size(self.model.model.n, d, &ws))
        self._q = q
        self._perm = np.arange(self.model.model.n, dtype=np.uintp)
        self._work = np.empty(ws, dtype=np.float64)
        self.st.q = <double *>cnp.PyArray_DATA(self._q)
        self.st.u = NAN
        self.st.t = 0
        self.st.perm = <size_t *>cnp.PyArray_DATA(self._perm)
        self.generator = generator
        bg = generator.bit_generator
        self.lock = bg.lock
        self.rng.state = PyCapsule_GetPointer(bg.capsule, "BitGenerator")
        self.rng.normal = _rng_normal
        self.rng.uniform = _rng_uniform

    @property
    def q(self):
        """Current position (a copy)."""
        return self._q.copy()

    @property
    def t(self):
        """Gradient steps taken so far (the schedule's t)."""
        return self.st.t

    @property
    def step_size(self):
        """The schedule's current step eps_t = a (b + t)^(-delta)."""
        return self.cfg.a * (self.cfg.b + self.st.t) ** (-self.cfg.delta)

    @property
    def inv_metric(self):
        """None: the identity (these samplers have no mass matrix)."""
        return None

    def run(self, dict trace, long start, long n_iter, stop=None, hook=None):
        """Run n_iter iterations into rows start .. start+n_iter-1 of `trace`.

        Returns ``(n_done, status)`` (status 0 or STATUS_INTERRUPTED).
        Raises FloatingPointError when the chain leaves the finite numbers
        (the step size is too large), with the rows before filled.
        """
        if hook is not None:
            raise ValueError("stochastic-gradient chains take no hook")
        cdef Py_ssize_t d = self.model.pot.dim
        draws = trace["draws"]
        if (draws.ndim != 2 or draws.shape[1] != d or start < 0 or n_iter < 0
                or start + n_iter > draws.shape[0]):
            raise ValueError("trace arrays do not fit the requested rows")
        if not draws.flags.c_contiguous or draws.dtype != np.float64:
            raise ValueError("trace['draws'] must be a C-contiguous float64 array")
        for key, dt in TRACE_FIELDS.items():
            a = trace[key]
            if a.dtype != dt or not a.flags.c_contiguous or a.shape[0] != draws.shape[0]:
                raise ValueError(f"trace[{key!r}] must be a contiguous {np.dtype(dt)} array")
        cdef fs_sg_trace tr
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
        tr.noise_clipped = NULL
        if "noise_clipped" in trace:
            nc = trace["noise_clipped"]
            if nc.dtype != np.int32 or not nc.flags.c_contiguous or nc.shape[0] != draws.shape[0]:
                raise ValueError("trace['noise_clipped'] must be a contiguous int32 array")
            tr.noise_clipped = <int32_t *>cnp.PyArray_DATA(nc) + start
        cdef const int *stop_ptr = NULL
        cdef cnp.ndarray stop_arr
        if stop is not None:
            stop_arr = stop
            if stop_arr.dtype != np.int32 or stop_arr.size < 1:
                raise ValueError("stop must be an int32 array with one element")
            stop_ptr = <const int *>cnp.PyArray_DATA(stop_arr)
        cdef long n_done = 0
        cdef int status
        with self.lock:
            with nogil:
                status = fs_sg_run(&self.cfg, &self.model.model, &self.rng, &self.st, n_iter,
                                   stop_ptr, &tr, <double *>cnp.PyArray_DATA(self._work),
                                   &n_done)
        if status == FS_EINTERRUPT:
            return n_done, STATUS_INTERRUPTED
        if status != FS_OK:
            if status == -2:
                raise FloatingPointError(
                    f"iteration {start + n_done}: the chain left the finite numbers "
                    f"(step size {self.step_size:.3g} too large for this posterior)")
            raise_for_status(status, f"iteration {start + n_done}")
        return n_done, FS_OK
