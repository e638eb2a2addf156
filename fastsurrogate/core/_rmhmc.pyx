"""Riemannian-manifold HMC in C: metrics (the fs_metric contract) and the
chain whose whole loop, generalized leapfrog and Metropolis test included,
runs without the GIL (csrc/fs_rmhmc.c, csrc/fs_metrics.c).
"""
from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.string cimport memcpy
from libc.math cimport exp
from libc.stdint cimport int8_t, int32_t

import time

import numpy as np
cimport numpy as cnp
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal

from fastsurrogate.core._common cimport (fs_rng, fs_potential, fs_blas, FS_OK, FS_ENONFINITE,
                                         FS_EINTERRUPT, FS_ECALLBACK, FS_ESINGULAR)
from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.core._blas cimport blas_table
from fastsurrogate.core._hmc cimport fs_hmc_trace, fs_dual_avg, fs_dual_avg_init
from fastsurrogate.core._hmc import TRACE_FIELDS, STATUS_INTERRUPTED
from fastsurrogate.models._glm cimport GeneralizedLinearModel, fs_glm
from fastsurrogate.surrogates._network cimport RandomNetwork, fs_network

cnp.import_array()

cdef extern from "fs_metrics.h" nogil:
    int fs_glm_metric_init(fs_glm_metric *s, const fs_glm *model, const fs_blas *blas)
    int fs_network_metric_init(fs_network_metric *s, const fs_network *net,
                               const fs_blas *blas, int diagonal, double alpha)
    int fs_network_metric_set_offset(fs_network_metric *s, const double *P)


cdef class Metric:
    """A position-dependent metric G(q) for Riemannian-manifold HMC.

    The C face is ``fs_metric`` (csrc/fs_metric.h): G(q) and the two
    contractions of its derivative the generalized leapfrog needs,
    ``tr[k] = tr(G^{-1} dG/dq_k)`` and ``quad[k] = u^T dG/dq_k u``.
    Subclasses: :class:`FisherMetric` (GLMs), :class:`SoftAbsMetric`
    (random-network Hessians), :class:`CallableMetric` (Python functions).
    A metric serves one chain at a time.
    """

    def __cinit__(self, *args, **kwargs):
        self.met.state = NULL
        self.met.eval = NULL
        self.met.contract = NULL
        self.met.matvec = NULL
        self.met.dim = 0
        self._error = None

    @property
    def dim(self):
        return self.met.dim

    cdef int check_status(self, int status) except -1:
        if status == FS_OK:
            return 0
        if status == FS_ECALLBACK and self._error is not None:
            err = self._error
            self._error = None
            raise err
        raise_for_status(status, type(self).__name__)
        return -1

    def _q(self, q):
        if self.met.eval == NULL:
            raise TypeError(f"{type(self).__name__} is not initialised")
        a = np.ascontiguousarray(q, dtype=np.float64)
        if a.ndim != 1 or a.shape[0] != self.met.dim:
            raise ValueError(f"q must have shape ({self.met.dim},), got {np.shape(q)}")
        return a

    def __call__(self, q):
        """G(q): ndarray (dim, dim)."""
        cdef cnp.ndarray qa = self._q(q)
        cdef cnp.ndarray G = np.empty((self.met.dim, self.met.dim))
        cdef int status
        with nogil:
            status = self.met.eval(self.met.state, <const double *>cnp.PyArray_DATA(qa),
                                   <double *>cnp.PyArray_DATA(G))
        self.check_status(status)
        return G

    def contract(self, q, u=None, trace=True, Ginv=None):
        """``(tr, quad)``: tr[k] = tr(G^{-1} dG/dq_k), quad[k] = u^T dG/dq_k u (None without u).

        Both shape ``(dim,)``.  G^{-1} is computed here from G(q) unless
        ``Ginv`` (shape ``(dim, dim)``, symmetric) is given: tr is then
        tr(Ginv dG/dq_k), as the sampler's C code calls it.  With
        ``trace=False`` (u required) only quad is computed, as the fixed-point
        iterations of the momentum update do, and tr is None.
        """
        cdef cnp.ndarray qa = self._q(q)
        if not trace:
            if u is None:
                raise ValueError("trace=False needs u")
            Ginv = np.eye(self.met.dim)
        elif Ginv is None:
            Ginv = np.linalg.inv(self(qa))
        else:
            Ginv = np.asarray(Ginv, dtype=np.float64)
            if Ginv.shape != (self.met.dim, self.met.dim):
                raise ValueError(f"Ginv must have shape ({self.met.dim}, {self.met.dim}), "
                                 f"got {Ginv.shape}")
            if not np.all(np.isfinite(Ginv)) or not np.array_equal(Ginv, Ginv.T):
                raise ValueError("Ginv must be finite and symmetric")
        Ginv = np.ascontiguousarray(Ginv)
        cdef cnp.ndarray Gi = Ginv
        cdef cnp.ndarray tr = np.empty(self.met.dim)
        cdef double *trp = <double *>cnp.PyArray_DATA(tr) if trace else NULL
        cdef cnp.ndarray quad = np.empty(self.met.dim)
        cdef cnp.ndarray ua = None
        cdef const double *up = NULL
        cdef double *qp = NULL
        if u is not None:
            ua = self._q(u)
            up = <const double *>cnp.PyArray_DATA(ua)
            qp = <double *>cnp.PyArray_DATA(quad)
        cdef int status
        with nogil:
            status = self.met.contract(self.met.state, <const double *>cnp.PyArray_DATA(qa),
                                       <const double *>cnp.PyArray_DATA(Gi), up, trp, qp)
        self.check_status(status)
        return (tr if trace else None), (quad if u is not None else None)

    def matvec(self, q, v):
        """G(q) v, shape ``(dim,)``, by the metric's product (one pass over the
        data for :class:`FisherMetric`; O(s d) for a dense :class:`SoftAbsMetric`
        of an additive network where G = H, G(q) @ v elsewhere); TypeError for
        a metric without one.

        Example: ``FisherMetric(model).matvec(q, v)`` equals ``M(q) @ v``.
        """
        cdef cnp.ndarray qa = self._q(q)
        cdef cnp.ndarray va = self._q(v)
        cdef cnp.ndarray out = np.empty(self.met.dim)
        cdef int status
        if self.met.matvec == NULL:
            raise TypeError(f"{type(self).__name__} has no matrix-vector product")
        if self.met.matvec_exact != NULL:
            # the product is G(q) v only where the metric says so after eval at q
            G = self(q)
            if not self.met.matvec_exact(self.met.state, <const double *>cnp.PyArray_DATA(qa)):
                return G @ va
        with nogil:
            status = self.met.matvec(self.met.state, <const double *>cnp.PyArray_DATA(qa),
                                     <const double *>cnp.PyArray_DATA(va),
                                     <double *>cnp.PyArray_DATA(out))
        self.check_status(status)
        return out


cdef class FisherMetric(Metric):
    """Fisher information plus prior precision of a GLM, G = X^T W(X b) X + P.

    Parameters
    ----------
    model : LogisticRegression, ProbitRegression, PoissonRegression or LinearRegression

    G comes from the model's fused Fisher kernel; the leapfrog's derivative
    terms need no dim^3 tensor: tr(G^{-1} dG_k) and u^T dG_k u are sums over
    the rows of X (one pass for both; csrc/fs_metrics.h).

    Examples
    --------
    >>> import fastsurrogate as fs
    >>> X, y, _ = fs.datasets.simulate_logistic(500, 3, seed=0)
    >>> G = FisherMetric(fs.models.LogisticRegression(X, y))([0.1, 0.2, 0.3])
    >>> G.shape
    (3, 3)
    """
    cdef fs_glm_metric gm
    cdef bint ready
    cdef readonly object model

    def __init__(self, GeneralizedLinearModel model not None):
        model._require_ready()
        cdef int status = fs_glm_metric_init(&self.gm, &model.model, blas_table())
        raise_for_status(status, "FisherMetric")
        self.ready = True
        self.model = model
        self.met.state = &self.gm
        self.met.eval = fs_glm_metric_eval
        self.met.contract = fs_glm_metric_contract
        self.met.matvec = fs_glm_metric_matvec
        self.met.dim = model.pot.dim

    def __dealloc__(self):
        if self.ready:
            fs_glm_metric_free(&self.gm)


cdef class SoftAbsMetric(Metric):
    """SoftAbs of a random network's Hessian (Betancourt 2013).

    G = Q diag(l coth(alpha l)) Q^T for the Hessian H = Q diag(l) Q^T of the
    network z(q) (``diagonal=True``: the same map applied to diag H only,
    G = diag(h coth(alpha h)), the paper's choice for non-convex U).
    The map is smooth and tends to |l| for |alpha l| >> 1, with 1/alpha at
    l = 0; eigenvalue clipping was not used because its kink makes G
    non-differentiable, and the generalized leapfrog needs dG.

    Cost (dense, softplus / sigmoid / tanh units; s units, d inputs): G at
    a position O(s d^2) (the Hessian) plus an eigendecomposition, and each
    contraction of the fixed points O(s d) through the rows in the
    eigenbasis.  Where every alpha l > 20 (a Cholesky factor of
    H - (20/alpha) I exists), SoftAbs is l to 1e-17 relative (fs_softabs
    returns l itself) and G is H itself: no eigendecomposition, and ``matvec`` (H v, O(s d))
    solves the position update.  See csrc/fs_metrics.h.

    Parameters
    ----------
    network : RandomNetwork
    alpha : float > 0
        Sharpness; eigenvalues are floored smoothly at about 1/alpha.
    diagonal : bool
    offset : (dim, dim) array, optional
        A constant symmetric matrix P added to the Hessian before the map:
        G = SoftAbs(H_z(q) + P).  With a Gaussian base U0 of precision P
        (the leapfrog driven by z + U0, ``RNSRMHMC(base="laplace")``) this
        is SoftAbs of the drive's Hessian; dG comes from z alone.
    """
    cdef fs_network_metric nm
    cdef bint ready
    cdef readonly object network
    cdef readonly double alpha
    cdef readonly bint diagonal
    cdef readonly object offset

    def __init__(self, RandomNetwork network not None, double alpha=1.0, bint diagonal=False,
                 offset=None):
        if not (alpha > 0 and np.isfinite(alpha)):
            raise ValueError(f"alpha must be positive and finite, got {alpha}")
        cdef cnp.ndarray P = None
        cdef int d = network.pot.dim
        if offset is not None:
            P = np.array(offset, dtype=np.float64, order="C", copy=True)
            if P.ndim != 2 or P.shape[0] != d or P.shape[1] != d:
                raise ValueError(f"offset must have shape ({d}, {d}), got {np.shape(offset)}")
            if not np.all(np.isfinite(P)):
                raise ValueError("offset must be finite")
            if not np.allclose(P, P.T, rtol=1e-10, atol=1e-12 * (np.abs(P).max() + 1e-300)):
                raise ValueError("offset must be symmetric")
            P = np.ascontiguousarray(0.5 * (P + P.T))
            P.setflags(write=False)
        cdef int status = fs_network_metric_init(&self.nm, &network.net, blas_table(),
                                                 diagonal, alpha)
        raise_for_status(status, "SoftAbsMetric")
        self.ready = True
        if P is not None:
            status = fs_network_metric_set_offset(&self.nm, <const double *>cnp.PyArray_DATA(P))
            raise_for_status(status, "SoftAbsMetric")
        self.offset = P
        self.network = network
        self.alpha = alpha
        self.diagonal = diagonal
        self.met.state = &self.nm
        self.met.eval = fs_network_metric_eval
        self.met.contract = fs_network_metric_contract
        self.met.dim = network.pot.dim
        if self.nm.fast:
            # H(q) v in O(s d), exact where G = H (fs_metrics.h): eq. 8 by products
            self.met.matvec = fs_network_metric_matvec
            self.met.matvec_exact = fs_network_metric_matvec_exact

    def __dealloc__(self):
        if self.ready:
            fs_network_metric_free(&self.nm)


def softabs(l, double alpha):
    """``(f, f')`` of the SoftAbs map f(l) = l coth(alpha l), elementwise (for tests)."""
    la = np.ascontiguousarray(l, dtype=np.float64).ravel()
    f = np.empty_like(la)
    fp = np.empty_like(la)
    cdef Py_ssize_t i
    cdef double a, b
    for i in range(la.shape[0]):
        fs_softabs(la[i], alpha, &a, &b)
        f[i] = a
        fp[i] = b
    return f, fp


def glm_weight_deriv(int family, double sigma, t):
    """``(w, dw/dt)`` of a GLM family's expected-information weight (for tests)."""
    ta = np.ascontiguousarray(t, dtype=np.float64).ravel()
    w = np.empty_like(ta)
    dw = np.empty_like(ta)
    cdef Py_ssize_t i
    cdef double a, b
    for i in range(ta.shape[0]):
        raise_for_status(fs_glm_weight_deriv(family, sigma, ta[i], &a, &b))
        w[i] = a
        dw[i] = b
    return w, dw


cdef int _cb_eval(void *state, const double *q, double *G) noexcept nogil:
    with gil:
        return (<CallableMetric>state)._eval(q, G)


cdef int _cb_contract(void *state, const double *q, const double *Ginv, const double *u,
                      double *tr, double *quad) noexcept nogil:
    with gil:
        return (<CallableMetric>state)._contract(q, Ginv, u, tr, quad)


cdef class CallableMetric(Metric):
    """A metric from Python functions.

    Parameters
    ----------
    G : callable
        ``G(q) -> (dim, dim)`` symmetric positive definite.
    dG : callable or None
        ``dG(q) -> (dim, dim, dim)`` with ``dG(q)[k] = dG/dq_k``.  May be
        None when ``contract`` is given.
    dim : int
    contract : callable, optional
        ``contract(q, Ginv, u) -> (tr, quad)``, the two contractions of the
        derivative the generalized leapfrog needs, ``tr[k] = tr(Ginv dG/dq_k)``
        and ``quad[k] = u^T dG/dq_k u`` (each shape (dim,)), without the
        (dim, dim, dim) tensor.  ``Ginv`` is None when ``tr`` is not wanted,
        ``u`` None when ``quad`` is not (return None for it).  Used instead
        of ``dG`` when given (e.g. :meth:`EllipticPDE.fisher_metric
        <fastsurrogate.models.EllipticPDE.fisher_metric>`, by adjoints).

    The functions run under the GIL (chains using this metric run one at a
    time).  An exception inside them stops the sampler and reaches the
    caller; non-finite output is a divergence.

    Examples
    --------
    >>> import numpy as np
    >>> m = CallableMetric(lambda q: np.diag(np.exp(q)),
    ...                    lambda q: np.array([np.diag(np.eye(2)[k] * np.exp(q)) for k in range(2)]), 2)
    >>> m.contract([0.0, 0.0])[0]
    array([1., 1.])
    """
    cdef object G_fn, dG_fn, contract_fn
    cdef object _cq, _cdG

    def __init__(self, G, dG, int dim, contract=None):
        if not callable(G) or not (callable(dG) or (dG is None and contract is not None)):
            raise TypeError("G and dG must be callables (dG may be None when contract is given)")
        if contract is not None and not callable(contract):
            raise TypeError(f"contract must be a callable or None, got {type(contract).__name__}")
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.G_fn = G
        self.dG_fn = dG
        self.contract_fn = contract
        self._cq = None
        self.met.state = <void *>self
        self.met.eval = _cb_eval
        self.met.contract = _cb_contract
        self.met.dim = dim

    cdef int _eval(self, const double *q, double *G):
        cdef int d = self.met.dim
        cdef double[:, ::1] Gv
        try:
            qa = np.array(<double[:d]>q, copy=True)
            Gm = np.ascontiguousarray(self.G_fn(qa), dtype=np.float64)
            if Gm.shape != (d, d):
                raise ValueError(f"metric G(q) must have shape ({d}, {d}), got {Gm.shape}")
            Gv = Gm
            memcpy(G, &Gv[0, 0], sizeof(double) * d * d)
            return FS_OK
        except BaseException as e:
            self._error = e
            return FS_ECALLBACK

    cdef int _contract(self, const double *q, const double *Ginv, const double *u,
                       double *tr, double *quad):
        cdef int d = self.met.dim
        cdef double[::1] ov
        try:
            qa = np.array(<double[:d]>q, copy=True)
            if self.contract_fn is not None:
                return self._user_contract(qa, Ginv, u, tr, quad)
            if self._cq is None or not np.array_equal(qa, self._cq):
                dG = np.ascontiguousarray(self.dG_fn(qa), dtype=np.float64)
                if dG.shape != (d, d, d):
                    raise ValueError(f"metric dG(q) must have shape ({d}, {d}, {d}), got {dG.shape}")
                self._cq, self._cdG = qa, dG
            dG = self._cdG
            if tr != NULL:
                Gi = np.array(<double[:d * d]>Ginv).reshape(d, d)
                ov = np.ascontiguousarray(np.einsum("kij,ij->k", dG, Gi))
                memcpy(tr, &ov[0], sizeof(double) * d)
            if quad != NULL:
                ua = np.array(<double[:d]>u)
                ov = np.ascontiguousarray(np.einsum("kij,i,j->k", dG, ua, ua))
                memcpy(quad, &ov[0], sizeof(double) * d)
            return FS_OK
        except BaseException as e:
            self._error = e
            return FS_ECALLBACK

    cdef int _user_contract(self, qa, const double *Ginv, const double *u, double *tr,
                            double *quad) except -1:
        cdef int d = self.met.dim
        Gi = np.array(<double[:d * d]>Ginv).reshape(d, d) if tr != NULL else None
        ua = np.array(<double[:d]>u) if quad != NULL else None
        out = self.contract_fn(qa, Gi, ua)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError("contract(q, Ginv, u) must return a pair (tr, quad)")
        if tr != NULL:
            _copy_vector(out[0], tr, d, "contract's tr")
        if quad != NULL:
            _copy_vector(out[1], quad, d, "contract's quad")
        return FS_OK


cdef int _copy_vector(arr, double *dst, int d, str name) except -1:
    """Copy a (d,) array_like into dst, or raise ValueError naming it."""
    cdef double[::1] ov
    a = np.ascontiguousarray(arr, dtype=np.float64)
    if a.shape != (d,):
        raise ValueError(f"{name} must have shape ({d},), got {a.shape}")
    ov = a
    memcpy(dst, &ov[0], sizeof(double) * d)
    return 0


cdef double _rng_normal(void *s) noexcept nogil:
    return random_standard_normal(<bitgen_t *>s)


cdef double _rng_uniform(void *s) noexcept nogil:
    cdef bitgen_t *b = <bitgen_t *>s
    return b.next_double(b.state)


cdef class RMChain:
    """One Riemannian-manifold HMC chain (csrc/fs_rmhmc.c), loop in C.

    Parameters
    ----------
    drive, metric : Potential, Metric
        Their gradient and metric move the generalized leapfrog.
    judge, judge_metric : Potential, Metric or None
        The Hamiltonian of the Metropolis test (None: the drive's); the
        momentum is drawn from N(0, G_judge(q)).
    q0 : array (dim,)
    generator : numpy.random.Generator
    step_size, n_steps, random_n_steps, max_energy_error : as for Chain
    max_fixed_point : int
        Fixed-point iterations per implicit update; a trajectory that does not
        converge is a divergence (counted in ``n_not_converged``).
    fixed_point_tol : float
        Converged when an iterate moves by <= tol * (1 + its largest entry).
    overlap : bool or "auto"
        Evaluate the judge's U at each proposal on a second thread while
        this one runs the next trajectory, kept when the proposal is
        accepted (csrc/fs_rmhmc.h).  Used by ``run`` without adaptation,
        with a judge apart from the drive and no judge metric; the draws
        are the same bit for bit as without it, so it only changes the
        speed.  "auto": each ``run`` call goes one way or the other, by
        the seconds per iteration measured so far on this chain (both ways
        are tried first, and the slower one again every eighth call: a
        machine's load changes).  The judge must be safe to call from
        another thread beside the drive and metric (a thread-safe model).
    """
    cdef Potential drive, judge
    cdef Metric metric, judge_metric
    cdef fs_metric *jm
    cdef fs_rmhmc_config cfg
    cdef fs_rmhmc_point cur
    cdef fs_dual_avg da
    cdef bint adapting
    cdef fs_rng rng
    cdef object generator, lock
    cdef cnp.ndarray _pt, _work
    cdef readonly long n_not_converged
    # rows filled by the last run() call, set before it raises (see Chain.n_done_last)
    cdef public long n_done_last
    cdef readonly int last_fixed_point_iterations
    cdef int _ov_mode                   # 0 off, 1 on, 2 auto
    cdef double _ov_sec[2]              # auto: seconds per iteration, serial / overlapped
    cdef long _ov_seen[2]               # auto: run calls measured each way
    cdef long _ov_calls

    def __init__(self, Potential drive not None, Metric metric not None, Potential judge,
                 Metric judge_metric, q0, generator, double step_size=0.1, int n_steps=2,
                 bint random_n_steps=False, double max_energy_error=1000.0,
                 int max_fixed_point=20, double fixed_point_tol=1e-9, overlap=False):
        judge = drive if judge is None else judge
        cdef int d = drive.pot.dim
        if drive.pot.eval == NULL or judge.pot.eval == NULL:
            raise TypeError("drive and judge must be initialised Potentials")
        if judge.pot.dim != d or metric.met.dim != d or (
                judge_metric is not None and judge_metric.met.dim != d):
            raise ValueError("drive, judge and metrics must have the same dim")
        if not isinstance(generator, np.random.Generator):
            raise TypeError("generator must be a numpy.random.Generator")
        if not (step_size > 0 and np.isfinite(step_size)):
            raise ValueError(f"step_size must be positive and finite, got {step_size}")
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        if max_fixed_point < 1:
            raise ValueError(f"max_fixed_point must be >= 1, got {max_fixed_point}")
        if not (fixed_point_tol > 0):
            raise ValueError(f"fixed_point_tol must be > 0, got {fixed_point_tol}")
        if not max_energy_error > 0:
            raise ValueError("max_energy_error must be positive")
        self.drive, self.judge = drive, judge
        self.metric = metric
        self.judge_metric = judge_metric if judge_metric is not metric else None
        self.jm = &self.judge_metric.met if self.judge_metric is not None else NULL
        self.generator = generator
        bg = generator.bit_generator
        self.lock = bg.lock
        self.rng.state = PyCapsule_GetPointer(bg.capsule, "BitGenerator")
        self.rng.normal = _rng_normal
        self.rng.uniform = _rng_uniform
        self.cfg.dim = d
        self.cfg.step_size = step_size
        self.cfg.n_steps = n_steps
        self.cfg.random_n_steps = random_n_steps
        self.cfg.max_energy_error = max_energy_error
        self.cfg.max_fixed_point = max_fixed_point
        self.cfg.fixed_point_tol = fixed_point_tol
        self.overlap = overlap
        self._work = np.zeros(fs_rmhmc_workspace_size(d))
        self._pt = np.zeros(3 * d + 3 * d * d)
        cdef double *b = <double *>cnp.PyArray_DATA(self._pt)
        self.cur.q = b
        self.cur.grad = b + d
        self.cur.tr = b + 2 * d
        self.cur.L = b + 3 * d
        self.cur.Ginv = self.cur.L + d * d
        self.cur.Lj = self.cur.Ginv + d * d
        self.n_not_converged = 0
        self.adapting = False
        self.set_position(q0)

    def set_position(self, q0):
        """Move the chain to q0 (evaluates potentials and metrics there)."""
        cdef int d = self.cfg.dim
        q = np.array(q0, dtype=np.float64, copy=True).ravel()
        if q.shape[0] != d:
            raise ValueError(f"initial position must have shape ({d},), got {np.shape(q0)}")
        if not np.all(np.isfinite(q)):
            raise ValueError("initial position contains NaN or inf")
        self._pt[:d] = q
        cdef int status
        with nogil:
            status = fs_rmhmc_point_init(&self.cfg, &self.drive.pot, &self.metric.met,
                                         &self.judge.pot, self.jm, &self.cur,
                                         <double *>cnp.PyArray_DATA(self._work))
        if status == FS_ENONFINITE:
            raise ValueError("the potential, its gradient or the metric is not finite at the "
                             "initial position")
        if status == FS_ESINGULAR:
            raise ValueError("the metric is not positive definite at the initial position")
        self._raise(status, "initial position")

    @property
    def generator(self):
        return self.generator

    @property
    def drive(self):
        return self.drive

    @property
    def judge(self):
        return self.judge

    @property
    def metric(self):
        return self.metric

    @property
    def drive_is_judge(self):
        return self.drive is self.judge

    @property
    def position(self):
        return self._pt[:self.cfg.dim].copy()

    @property
    def potential(self):
        return self.cur.u_judge

    @property
    def inv_metric(self):
        return None

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

    @n_steps.setter
    def n_steps(self, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"n_steps must be an integer, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"n_steps must be >= 1, got {value}")
        self.cfg.n_steps = value

    @property
    def overlap(self):
        return ("auto" if self._ov_mode == 2 else bool(self._ov_mode))

    @overlap.setter
    def overlap(self, value):
        if isinstance(value, str):
            if value != "auto":
                raise ValueError(f'overlap must be True, False or "auto", got {value!r}')
            self._ov_mode = 2
        elif isinstance(value, (bool, np.bool_)):
            self._ov_mode = int(value)
        else:
            raise TypeError(f'overlap must be True, False or "auto", got {type(value).__name__}')
        self.cfg.overlap = self._ov_mode == 1
        self._ov_sec[0] = self._ov_sec[1] = 0.0
        self._ov_seen[0] = self._ov_seen[1] = 0
        self._ov_calls = 0

    @property
    def overlap_timings(self):
        """With ``overlap="auto"``: (seconds per iteration, run calls measured)
        for the serial and the overlapped loop, as measured so far."""
        return {"serial": (self._ov_sec[0], self._ov_seen[0]),
                "overlapped": (self._ov_sec[1], self._ov_seen[1])}

    cdef int _ov_choose(self):
        # both ways twice first, then the faster, the other every eighth call
        cdef int fast
        self._ov_calls += 1
        if self._ov_seen[0] < 2 or self._ov_seen[1] < 2:
            return 1 if self._ov_seen[1] < self._ov_seen[0] else 0
        fast = 1 if self._ov_sec[1] < self._ov_sec[0] else 0
        return 1 - fast if self._ov_calls % 8 == 0 else fast

    def leapfrog(self, q, p, double step_size, int n_steps=1):
        """``(q', p')`` after n_steps generalized leapfrog steps of the drive (for tests).

        A non-converged fixed point or a divergence raises.  The fixed-point
        iterations of both implicit updates, summed, go to
        ``last_fixed_point_iterations``.
        """
        cdef int d = self.cfg.dim
        cdef cnp.ndarray pt = np.zeros(3 * d + 3 * d * d)
        cdef cnp.ndarray pa = np.array(p, dtype=np.float64, copy=True).ravel()
        cdef cnp.ndarray work = np.zeros(fs_rmhmc_workspace_size(d))
        cdef fs_rmhmc_point P
        cdef double *b = <double *>cnp.PyArray_DATA(pt)
        cdef int fpi = 0
        if pa.shape[0] != d:
            raise ValueError(f"p must have shape ({d},)")
        pt[:d] = np.asarray(q, dtype=np.float64).ravel()
        P.q, P.grad, P.tr = b, b + d, b + 2 * d
        P.L = b + 3 * d
        P.Ginv = P.L + d * d
        P.Lj = P.Ginv + d * d
        cdef int status
        with nogil:
            status = fs_rmhmc_point_init(&self.cfg, &self.drive.pot, &self.metric.met,
                                         &self.drive.pot, NULL, &P,
                                         <double *>cnp.PyArray_DATA(work))
            if status == FS_OK:
                status = fs_rmhmc_leapfrog(&self.cfg, step_size, n_steps, &self.drive.pot,
                                           &self.metric.met, &P,
                                           <double *>cnp.PyArray_DATA(pa),
                                           <double *>cnp.PyArray_DATA(work), &fpi)
        self.last_fixed_point_iterations = fpi
        if status == FS_RMHMC_NOT_CONVERGED:
            raise RuntimeError("the fixed-point iteration did not converge")
        self._raise(status, "leapfrog")
        return pt[:d].copy(), pa

    def hamiltonian(self, q, p):
        """H(q, p) = U + 1/2 log det G + 1/2 p^T G^{-1} p of the drive and its metric (for tests)."""
        q = np.asarray(q, dtype=np.float64)
        p = np.asarray(p, dtype=np.float64)
        G = self.metric(q)
        return (self.drive.value(q) + 0.5 * np.linalg.slogdet(G)[1]
                + 0.5 * p @ np.linalg.solve(G, p))

    def find_step_size(self):
        """Stan's initial step-size heuristic (one generalized leapfrog step); sets and returns it."""
        cdef double eps = self.cfg.step_size
        cdef int status
        with self.lock:
            with nogil:
                status = fs_rmhmc_find_step_size(&self.cfg, &self.drive.pot, &self.metric.met,
                                                 &self.judge.pot, self.jm, &self.rng, &self.cur,
                                                 <double *>cnp.PyArray_DATA(self._work), &eps)
        self._raise(status, "step size search")
        self.cfg.step_size = eps
        return eps

    def start_adaptation(self, double target_accept=0.8):
        if not (0 < target_accept < 1):
            raise ValueError("target_accept must be in (0, 1)")
        fs_dual_avg_init(&self.da, self.cfg.step_size, target_accept)
        self.adapting = True

    def finish_adaptation(self):
        if self.adapting and self.da.count > 0:
            self.cfg.step_size = exp(self.da.log_eps_bar)
        self.adapting = False
        return self.cfg.step_size

    def run(self, dict trace, long start, long n_iter, stop=None, hook=None):
        """Run n_iter iterations into rows start.. of `trace` (see Chain.run).

        Returns ``(n_done, status)``.  ``hook`` must be None (no C hooks here).
        """
        if hook is not None:
            raise ValueError("RMChain takes no hook")
        cdef int d = self.cfg.dim
        cdef fs_hmc_trace tr
        cdef long n_done = 0, nnc = 0
        cdef int status
        cdef double eps_out
        cdef const int *stop_ptr = NULL
        cdef cnp.ndarray stop_arr
        draws = trace["draws"]
        if draws.shape[1] != d or start < 0 or n_iter < 0 or start + n_iter > draws.shape[0]:
            raise ValueError("trace arrays do not fit the requested rows")
        if not draws.flags.c_contiguous or draws.dtype != np.float64:
            raise ValueError("trace['draws'] must be a C-contiguous float64 array")
        for k, dt in TRACE_FIELDS.items():
            a = trace[k]
            if a.dtype != dt or not a.flags.c_contiguous or a.shape[0] != draws.shape[0]:
                raise ValueError(f"trace[{k!r}] must be a contiguous {np.dtype(dt)} array")
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
        if "proposals" in trace:
            tr.proposals = <double *>cnp.PyArray_DATA(trace["proposals"]) + start * d
            tr.proposal_potential = <double *>cnp.PyArray_DATA(trace["proposal_potential"]) + start
        cdef fs_dual_avg *da = &self.da if self.adapting else NULL
        # "auto": time this call one way or the other (the same draws either way)
        cdef int way = -1
        cdef double t0 = 0.0, sec
        if (self._ov_mode == 2 and not self.adapting and self.judge is not self.drive
                and self.jm == NULL and n_iter >= 2):
            way = self._ov_choose()
            self.cfg.overlap = way
            t0 = time.perf_counter()
        self.n_done_last = 0
        with self.lock:
            with nogil:
                status = fs_rmhmc_run(&self.cfg, &self.drive.pot, &self.metric.met,
                                      &self.judge.pot, self.jm, &self.rng, &self.cur, da,
                                      n_iter, &tr, <double *>cnp.PyArray_DATA(self._work),
                                      stop_ptr, &n_done, &eps_out, &nnc)
        if way >= 0 and n_done >= 2 and status == FS_OK:
            sec = (time.perf_counter() - t0) / n_done
            self._ov_sec[way] = (sec if self._ov_seen[way] == 0
                                 else 0.7 * self._ov_sec[way] + 0.3 * sec)
            self._ov_seen[way] += 1
        self.n_not_converged += nnc
        self.n_done_last = n_done
        if self.adapting:
            self.cfg.step_size = eps_out
        if status != FS_EINTERRUPT:
            self._raise(status, f"iteration {start + n_done}")
        return n_done, status

    cdef _raise(self, int status, str where):
        if status == FS_OK:
            return
        for obj in (self.drive, self.judge):
            if (<Potential>obj)._error is not None:
                (<Potential>obj).check_status(status)
        for m in (self.metric, self.judge_metric):
            if m is not None and (<Metric>m)._error is not None:
                (<Metric>m).check_status(status)
        raise_for_status(status, where)
