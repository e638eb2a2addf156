"""Online trainers of a random network's output weights.

* :class:`GrevilleTrainer` -- least squares on function values, one point at a
  time, by Greville's pseudo-inverse recursion (ARNS-HMC; Zhang, Shahbaba and
  Zhao 2017, Algorithm 4 and Proposition 1), or recursive ridge regression.
* :class:`SMWTrainer` -- gradient (score) matching, one point at a time, by
  the Sherman-Morrison-Woodbury identity (VHMC; Zhang, Shahbaba and Zhao
  2018, eq. 3.19-3.21 and Proposition 2).

Both cost O(s^2) memory and, per point, O(s^2) (Greville) or O(d s^2 + d^3)
(SMW) work, whatever the number of points seen.  The work runs in C
(csrc/fs_greville.c, csrc/fs_smw.c) without the GIL; calls on one trainer
from several Python threads are serialised by a lock.
"""
import operator
import threading

import numpy as np
cimport numpy as cnp
from libc.stdlib cimport malloc, free
from libc.math cimport isfinite, pow, sqrt, fmax

from libc.string cimport memcpy

from fastsurrogate.core._blas cimport blas_table
from fastsurrogate.core._common cimport fs_potential, fs_rng, FS_OK, FS_EINVAL
from fastsurrogate.core._potential cimport Potential, WeightedSum, ClampedSum
from fastsurrogate.core._hmc cimport ChainHook, fs_hmc_info, fs_hmc_point, FS_REFRESH_DRIVE
from fastsurrogate.surrogates._network cimport (RandomNetwork, fs_network,
                                                network_features, network_grad_features)
from libc.stdint cimport int64_t
from fastsurrogate.core._potential import raise_for_status, TrainingError
from fastsurrogate.core._checks import real_array

cnp.import_array()


# ---- validation helpers ------------------------------------------------------

cdef object _as_float_array(x, str name, tuple shape):
    """real_array with this module's argument order: C-contiguous float64,
    shape as given (None = any length on that axis), every entry finite."""
    return real_array(name, x, shape=shape, copy=False)


cdef double _as_finite_scalar(x, str name) except? -1.0:
    try:
        val = float(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}") from exc
    if not isfinite(val):
        raise ValueError(f"{name} must be finite, got {val}")
    return val


cdef int _as_count(x, str name, long lowest) except -1:
    try:
        val = operator.index(x)
    except TypeError as exc:
        raise TypeError(f"{name} must be an integer, got {type(x).__name__}") from exc
    if val < lowest or val > 2**31 - 1:
        raise ValueError(f"{name} must be an integer >= {lowest}, got {val}")
    return val


cdef object _sym_full(const double *M, int s):
    """Full symmetric copy of a C matrix whose row-major upper triangle is valid."""
    cdef cnp.ndarray out = np.empty((s, s), dtype=np.float64)
    cdef double *o = <double *>cnp.PyArray_DATA(out)
    cdef Py_ssize_t i, j
    for i in range(s):
        for j in range(i, s):
            o[i * s + j] = M[i * s + j]
            o[j * s + i] = M[i * s + j]
    return out


cdef object _vector_copy(const double *v, int s):
    cdef cnp.ndarray out = np.empty(s, dtype=np.float64)
    cdef double *o = <double *>cnp.PyArray_DATA(out)
    cdef Py_ssize_t i
    for i in range(s):
        o[i] = v[i]
    return out


# ---- Greville / recursive least squares --------------------------------------

# ---- checkpoint state (fastsurrogate.samplers._checkpoint) ------------------
# Each trainer and hook gives its state as (scalars, arrays) and takes it back
# bit for bit: ``_ckpt_state(full)`` (full=False: what Python reads between
# spans; True: everything) and ``_ckpt_restore(scalars, arrays)``.

cdef object _out(const double *p, Py_ssize_t n):
    cdef cnp.ndarray a = np.empty(n, dtype=np.float64)
    if n > 0:
        memcpy(<double *>cnp.PyArray_DATA(a), p, sizeof(double) * n)
    return a


cdef void _in(double *p, object arr, Py_ssize_t n, str name) except *:
    cdef cnp.ndarray a = np.ascontiguousarray(arr, dtype=np.float64).ravel()
    if a.shape[0] < n:
        raise ValueError(f"checkpoint state: {name} has {a.shape[0]} values, needs {n}")
    if n > 0:
        memcpy(p, <const double *>cnp.PyArray_DATA(a), sizeof(double) * n)


cdef class GrevilleTrainer:
    """Output weights v of a random network fitted to function values, online.

    After the rows h_1..h_n (hidden features, length ``n_hidden``) with
    targets y_1..y_n have been absorbed, ``weights`` is

    * ``ridge == 0``: the minimum-norm least-squares solution ``pinv(H) @ y``
      (Greville's recursion, ARNS-HMC Algorithm 4 / Proposition 1);
    * ``ridge > 0``: the ridge solution ``solve(H.T H + ridge I, H.T y)``
      (recursive least squares from ``P = I / ridge``).

    Each update costs O(n_hidden^2) work and memory, independent of n.

    Parameters
    ----------
    n_hidden : int
        Number of hidden units s (length of a feature row).
    ridge : float, default 0.0
        Ridge penalty lambda >= 0; 0 selects the pseudo-inverse recursion.
    tol : float, default 1e-10
        Relative threshold of Greville's "c != 0" test: a row h opens a new
        direction when ``||Phi h|| > tol * ||h||`` (Phi = I - pinv(H) H);
        otherwise it is treated as lying in the row space of H.
    resync_every : int, default 0
        When > 0, :attr:`resync_due` becomes True after this many updates
        since the last (re)initialisation; the caller, who holds the data,
        then calls :meth:`resync`.  The trainer itself keeps no data.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.surrogates._online import GrevilleTrainer
    >>> rng = np.random.default_rng(0)
    >>> H, y = rng.standard_normal((30, 10)), rng.standard_normal(30)
    >>> tr = GrevilleTrainer(10)
    >>> tr.update_many(H, y)
    >>> bool(np.allclose(tr.weights, np.linalg.pinv(H) @ y))
    True
    """

    def __cinit__(self, n_hidden, ridge=0.0, tol=1e-10, resync_every=0):
        cdef int s = _as_count(n_hidden, "n_hidden", 1)
        cdef double lam = _as_finite_scalar(ridge, "ridge")
        cdef double tl = _as_finite_scalar(tol, "tol")
        cdef int every = _as_count(resync_every, "resync_every", 0)
        if lam < 0.0:
            raise ValueError(f"ridge must be >= 0, got {lam}")
        if tl < 0.0:
            raise ValueError(f"tol must be >= 0, got {tl}")
        self._lock = threading.Lock()
        self.work = <double *>malloc(sizeof(double) * fs_greville_workspace_size(s))
        if self.work == NULL:
            raise MemoryError("GrevilleTrainer: cannot allocate the workspace")
        raise_for_status(fs_greville_init(&self.state, blas_table(), s, lam, tl),
                         "GrevilleTrainer", TrainingError)
        self.state.resync_every = every

    def __dealloc__(self):
        fs_greville_free(&self.state)
        free(self.work)
        self.work = NULL

    @classmethod
    def from_batch(cls, H, y, ridge=0.0, tol=1e-10, resync_every=0):
        """A trainer whose state is that of the batch (H, y).

        H : array (n, n_hidden), y : array (n,).  Equivalent to n updates, up
        to rounding (it is computed directly; see :meth:`resync`).
        """
        Ha = np.asarray(H)
        if Ha.ndim != 2:
            raise ValueError(f"H must have shape (n, n_hidden), got {np.shape(H)}")
        tr = cls(Ha.shape[1], ridge=ridge, tol=tol, resync_every=resync_every)
        tr.resync(Ha, y)
        return tr

    def update(self, h, y):
        """Absorb one point: feature row h (n_hidden,) with target y (float)."""
        cdef int s = self.state.s
        h_arr = _as_float_array(h, "h", (s,))
        cdef double yv = _as_finite_scalar(y, "y")
        cdef const double *hp = <const double *>cnp.PyArray_DATA(h_arr)
        cdef int status
        with self._lock:
            with nogil:
                status = fs_greville_update(&self.state, hp, yv, self.work)
        if status != 0:
            raise_for_status(status, f"GrevilleTrainer.update (point {self.state.n_seen})",
                             TrainingError)

    def update_many(self, H, y):
        """Absorb the rows of H (n, n_hidden) with targets y (n,), in order."""
        cdef int s = self.state.s
        H_arr = _as_float_array(H, "H", (None, s))
        cdef long n = H_arr.shape[0]
        y_arr = _as_float_array(y, "y", (n,))
        if n == 0:
            return
        cdef const double *Hp = <const double *>cnp.PyArray_DATA(H_arr)
        cdef const double *yp = <const double *>cnp.PyArray_DATA(y_arr)
        cdef long done = 0
        cdef int status
        with self._lock:
            with nogil:
                status = fs_greville_update_many(&self.state, Hp, yp, n, self.work, &done)
        if status != 0:
            raise_for_status(status, f"GrevilleTrainer.update_many (row {done}; "
                                     f"rows 0..{done - 1} were absorbed)", TrainingError)

    def resync(self, H, y):
        """Replace the state by the batch solution for all the data so far.

        H : array (n, n_hidden), y : array (n,) -- every point the trainer
        should have seen.  Pseudo-inverse mode uses an eigen-decomposition of
        H^T H (accurate while cond(H)^2 * 1e-16 << 1) plus two refinement
        steps; ridge mode a Cholesky factorisation.  Resets the
        :attr:`resync_due` counter; ``n_seen`` becomes n.
        """
        cdef int s = self.state.s
        H_arr = _as_float_array(H, "H", (None, s))
        cdef long n = H_arr.shape[0]
        y_arr = _as_float_array(y, "y", (n,))
        cdef cnp.ndarray work = np.empty(
            max(<size_t>1, fs_greville_batch_workspace_size(&self.state, n)), dtype=np.float64)
        cdef const double *Hp = <const double *>cnp.PyArray_DATA(H_arr)
        cdef const double *yp = <const double *>cnp.PyArray_DATA(y_arr)
        cdef double *wp = <double *>cnp.PyArray_DATA(work)
        cdef int status
        with self._lock:
            with nogil:
                status = fs_greville_resync(&self.state, Hp, yp, n, wp)
        if status != 0:
            raise_for_status(status, "GrevilleTrainer.resync (the state is now empty)",
                             TrainingError)

    def _ckpt_state(self, bint full=True):
        cdef Py_ssize_t s = self.state.s
        sc = {"n_seen": int(self.state.n_seen), "rank": int(self.state.rank),
              "n_new_direction": int(self.state.n_new_direction),
              "n_in_span": int(self.state.n_in_span),
              "resync_every": int(self.state.resync_every),
              "since_resync": int(self.state.since_resync)}
        arr = {"v": _out(self.state.v, s)}
        if full:
            arr["Theta"] = _out(self.state.Theta, s * s)
            if self.state.Phi != NULL:
                arr["Phi"] = _out(self.state.Phi, s * s)
        return sc, arr

    def _ckpt_restore(self, dict sc, dict arr):
        cdef Py_ssize_t s = self.state.s
        with self._lock:
            _in(self.state.v, arr["v"], s, "v")
            if "Theta" in arr:
                _in(self.state.Theta, arr["Theta"], s * s, "Theta")
            if "Phi" in arr and self.state.Phi != NULL:
                _in(self.state.Phi, arr["Phi"], s * s, "Phi")
            self.state.n_seen = sc["n_seen"]
            self.state.rank = sc["rank"]
            self.state.n_new_direction = sc["n_new_direction"]
            self.state.n_in_span = sc["n_in_span"]
            self.state.resync_every = sc["resync_every"]
            self.state.since_resync = sc["since_resync"]

    def reset(self):
        """Forget every point (n_seen = 0)."""
        with self._lock:
            fs_greville_reset(&self.state)

    @property
    def weights(self):
        """Output weights v, shape (n_hidden,): a COPY (later updates do not change it)."""
        return _vector_copy(self.state.v, self.state.s)

    @property
    def n_seen(self):
        """Number of points absorbed (batch rows + updates)."""
        return self.state.n_seen

    @property
    def n_hidden(self):
        return self.state.s

    @property
    def ridge(self):
        return self.state.lambda_

    @property
    def tol(self):
        return self.state.tol

    @property
    def rank(self):
        """Dimension of the row space of H seen so far (pseudo-inverse mode; 0 in ridge mode)."""
        return self.state.rank

    @property
    def n_new_direction(self):
        """Updates that took Greville's c != 0 branch (the row enlarged the row space)."""
        return self.state.n_new_direction

    @property
    def n_in_span(self):
        """Updates that took the c = 0 branch (or the ridge recursion)."""
        return self.state.n_in_span

    @property
    def resync_every(self):
        return self.state.resync_every

    @resync_every.setter
    def resync_every(self, value):
        self.state.resync_every = _as_count(value, "resync_every", 0)

    @property
    def resync_due(self):
        """True when resync_every > 0 updates were made since the last (re)initialisation."""
        return bool(fs_greville_resync_due(&self.state))

    @property
    def Phi(self):
        """I - pinv(H) H, shape (n_hidden, n_hidden): a copy; None in ridge mode."""
        if self.state.ridge:
            return None
        return _sym_full(self.state.Phi, self.state.s)

    @property
    def Theta(self):
        """pinv(H) pinv(H).T (ridge mode: P = inv(H.T H + ridge I)), shape
        (n_hidden, n_hidden): a copy."""
        return _sym_full(self.state.Theta, self.state.s)

    def __repr__(self):
        mode = f"ridge={self.state.lambda_!r}" if self.state.ridge else f"tol={self.state.tol!r}"
        return f"GrevilleTrainer(n_hidden={self.state.s}, {mode}, n_seen={self.state.n_seen})"


# ---- Sherman-Morrison-Woodbury gradient matching ------------------------------

cdef class SMWTrainer:
    """Output weights v of a random network fitted to gradients, online (VHMC).

    After the points t = 1..n, ``weights`` solves eq. (3.19) of the VHMC paper,

        minimise  sum_t ||A_t v - g_t||^2 + ridge * ||v||^2,

    where A_t (dim x n_hidden) has column i equal to the gradient, at q_t, of
    hidden unit i (``a'(w_i . q_t + d_i) w_i``) and g_t = grad U(q_t).  Each
    update is the Sherman-Morrison-Woodbury step (3.20)-(3.21), O(dim
    n_hidden^2 + dim^3) work and O(n_hidden^2) memory.

    Parameters
    ----------
    n_hidden : int
        Number of hidden units s.
    dim : int
        Dimension d of q (rows of A_t).
    ridge : float
        Penalty lambda > 0 (the recursion starts at C = I / ridge).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.surrogates._online import SMWTrainer
    >>> rng = np.random.default_rng(0)
    >>> As, gs = rng.standard_normal((20, 3, 8)), rng.standard_normal((20, 3))
    >>> tr = SMWTrainer(8, 3, ridge=0.5)
    >>> tr.update_many(As, gs)
    >>> G = sum(A.T @ A for A in As) + 0.5 * np.eye(8)
    >>> bool(np.allclose(tr.weights, np.linalg.solve(G, sum(A.T @ g for A, g in zip(As, gs)))))
    True
    """

    def __cinit__(self, n_hidden, dim, ridge):
        cdef int s = _as_count(n_hidden, "n_hidden", 1)
        cdef int d = _as_count(dim, "dim", 1)
        cdef double lam = _as_finite_scalar(ridge, "ridge")
        if not lam > 0.0:
            raise ValueError(f"ridge must be > 0 (the recursion starts at C = I / ridge), got {lam}")
        self._lock = threading.Lock()
        self.work = <double *>malloc(sizeof(double) * fs_smw_workspace_size(s, d))
        if self.work == NULL:
            raise MemoryError("SMWTrainer: cannot allocate the workspace")
        raise_for_status(fs_smw_init(&self.state, blas_table(), s, d, lam), "SMWTrainer",
                         TrainingError)

    def __dealloc__(self):
        fs_smw_free(&self.state)
        free(self.work)
        self.work = NULL

    def update(self, A, g):
        """Absorb one point: A (dim, n_hidden) hidden-unit gradients, g (dim,) grad U."""
        cdef int s = self.state.s, d = self.state.d
        A_arr = _as_float_array(A, "A", (d, s))
        g_arr = _as_float_array(g, "g", (d,))
        cdef const double *Ap = <const double *>cnp.PyArray_DATA(A_arr)
        cdef const double *gp = <const double *>cnp.PyArray_DATA(g_arr)
        cdef int status
        with self._lock:
            with nogil:
                status = fs_smw_update(&self.state, Ap, gp, self.work)
        if status != 0:
            raise_for_status(status, f"SMWTrainer.update (point {self.state.n_seen})",
                             TrainingError)

    def update_many(self, As, gs):
        """Absorb the points As (N, dim, n_hidden), gs (N, dim), in order."""
        cdef int s = self.state.s, d = self.state.d
        A_arr = _as_float_array(As, "As", (None, d, s))
        cdef long N = A_arr.shape[0]
        g_arr = _as_float_array(gs, "gs", (N, d))
        if N == 0:
            return
        cdef const double *Ap = <const double *>cnp.PyArray_DATA(A_arr)
        cdef const double *gp = <const double *>cnp.PyArray_DATA(g_arr)
        cdef long done = 0
        cdef int status
        with self._lock:
            with nogil:
                status = fs_smw_update_many(&self.state, Ap, gp, N, self.work, &done)
        if status != 0:
            raise_for_status(status, f"SMWTrainer.update_many (point {done}; "
                                     f"points 0..{done - 1} were absorbed)", TrainingError)

    def solve_batch(self, As, gs):
        """Solve (3.19) for the points As (N, dim, n_hidden), gs (N, dim) directly.

        Normal equations (sum A_t^T A_t + ridge I) v = sum A_t^T g_t by
        Cholesky.  REPLACES the trainer's state (weights, C, n_seen = N), so
        online updates can continue from it (restart); returns a copy of the
        weights.
        """
        cdef int s = self.state.s, d = self.state.d
        A_arr = _as_float_array(As, "As", (None, d, s))
        cdef long N = A_arr.shape[0]
        g_arr = _as_float_array(gs, "gs", (N, d))
        cdef cnp.ndarray work = np.empty(fs_smw_batch_workspace_size(s), dtype=np.float64)
        cdef const double *Ap = <const double *>cnp.PyArray_DATA(A_arr)
        cdef const double *gp = <const double *>cnp.PyArray_DATA(g_arr)
        cdef double *wp = <double *>cnp.PyArray_DATA(work)
        cdef int status
        with self._lock:
            with nogil:
                status = fs_smw_solve_batch(&self.state, Ap, gp, N, wp)
        if status != 0:
            raise_for_status(status, "SMWTrainer.solve_batch (the state is now empty)",
                             TrainingError)
        return self.weights

    def _ckpt_state(self, bint full=True):
        cdef Py_ssize_t s = self.state.s
        arr = {"v": _out(self.state.v, s)}
        if full:
            arr["C"] = _out(self.state.C, s * s)
        return {"n_seen": int(self.state.n_seen)}, arr

    def _ckpt_restore(self, dict sc, dict arr):
        cdef Py_ssize_t s = self.state.s
        with self._lock:
            _in(self.state.v, arr["v"], s, "v")
            if "C" in arr:
                _in(self.state.C, arr["C"], s * s, "C")
            self.state.n_seen = sc["n_seen"]

    def reset(self):
        """Forget every point: weights 0, C = I / ridge, n_seen = 0."""
        with self._lock:
            fs_smw_reset(&self.state)

    @property
    def weights(self):
        """Output weights v, shape (n_hidden,): a COPY (later updates do not change it)."""
        return _vector_copy(self.state.v, self.state.s)

    @property
    def C(self):
        """(ridge I + sum_t A_t^T A_t)^{-1}, shape (n_hidden, n_hidden): a copy."""
        cdef int s = self.state.s
        cdef cnp.ndarray out = np.empty((s, s), dtype=np.float64)
        cdef double *o = <double *>cnp.PyArray_DATA(out)
        cdef Py_ssize_t i
        for i in range(<Py_ssize_t>s * s):
            o[i] = self.state.C[i]
        return out

    @property
    def n_seen(self):
        """Number of points absorbed (batch points + updates)."""
        return self.state.n_seen

    @property
    def n_hidden(self):
        return self.state.s

    @property
    def dim(self):
        return self.state.d

    @property
    def ridge(self):
        return self.state.lambda_

    def __repr__(self):
        return (f"SMWTrainer(n_hidden={self.state.s}, dim={self.state.d}, "
                f"ridge={self.state.lambda_!r}, n_seen={self.state.n_seen})")


# ---- chain hooks: the online trainers inside the C chain loop -----------------
#
# These run in fs_hmc_run after each iteration (fastsurrogate.core._hmc.ChainHook),
# without the GIL, so a sampler that trains its surrogate while it runs enters
# Python once per chunk of iterations, not once per iteration.

# Positive statuses of the hooks: pauses that Chain.run hands back to Python.
cdef enum:
    _HOOK_RESOLVE = 1    # an online update broke down: re-solve in batch, then finish
HOOK_RESOLVE = _HOOK_RESOLVE

cdef int _all_finite(const double *x, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if not isfinite(x[i]):
            return 0
    return 1


cdef struct _score_state:
    const fs_potential *exact
    fs_network *net
    fs_smw *smw
    double *smw_work
    double *mix            # the two weights of V: (mu, 1 - mu), or (mu, 1) with a base
    const double *mu       # mu[t], t = 1 .. t_max
    const fs_potential *base   # NULL, or the Laplace term: z learns grad U - grad base
    double *gbase          # d: grad base at the state
    double *radius         # NULL, or a ClampedSum V's radius: grown to every training point's
    double base_min        # the base's minimum (with radius)
    long t                 # training iteration the next call completes
    long t_max
    int s, d
    double *A              # d x s gradient features at the state
    double *g              # d: grad U at the state
    long n_points          # training points recorded
    int64_t *iteration     # per point: its iteration
    double *sq_error       # ||A v - g||^2 before the point was absorbed
    double *sq_grad        # ||g||^2
    double *Q              # n_points x d: the points
    double *G              # n_points x d: z's target there (grad U, or grad U - grad base)
    int pending            # 1: paused at iteration t - 1 (HOOK_RESOLVE)


cdef inline void _score_finish(_score_state *st) noexcept nogil:
    cdef double m = st.mu[st.t]
    st.mix[0] = m
    st.mix[1] = 1.0 if st.base != NULL else 1.0 - m
    st.pending = 0


cdef int _score_after(void *state, long iteration, fs_rng *rng, const fs_hmc_info *info,
                      const fs_hmc_point *cur, const double *proposal,
                      int *refresh) noexcept nogil:
    cdef _score_state *st = <_score_state *>state
    cdef int s = st.s, d = st.d, status, k, i
    cdef long n
    cdef double acc, e2, g2, ub, r
    cdef const double *row
    if st.t >= st.t_max or st.pending:
        return FS_EINVAL
    st.t += 1
    if info.accepted:
        status = st.exact.eval(st.exact.state, cur.q, NULL, st.g)
        if status != FS_OK:
            return status
        g2 = 0.0            # ||grad U||^2, before a base is taken off
        for k in range(d):
            g2 = g2 + st.g[k] * st.g[k]
        if st.base != NULL and _all_finite(st.g, d):
            status = st.base.eval(st.base.state, cur.q, &ub, st.gbase)
            if status != FS_OK:
                return status
            for k in range(d):
                st.g[k] = st.g[k] - st.gbase[k]
            if st.radius != NULL and _all_finite(st.g, d):
                # the gate's ball grows to hold every training point
                r = sqrt(2.0 * fmax(ub - st.base_min, 0.0))
                if r > st.radius[0]:
                    st.radius[0] = r
        if _all_finite(st.g, d):
            status = network_grad_features(st.net, cur.q, st.A, NULL)
            if status != FS_OK:
                return status
            # the held-out error of the current weights, before the update
            # (with a base: of grad z + grad base against grad U)
            e2 = 0.0
            for k in range(d):
                row = st.A + <Py_ssize_t>k * s
                acc = 0.0
                for i in range(s):
                    acc = acc + row[i] * st.smw.v[i]
                acc = acc - st.g[k]
                e2 = e2 + acc * acc
            n = st.n_points
            st.iteration[n] = st.t - 1
            st.sq_error[n] = e2
            st.sq_grad[n] = g2
            memcpy(st.Q + n * d, cur.q, sizeof(double) * d)
            memcpy(st.G + n * d, st.g, sizeof(double) * d)
            st.n_points = n + 1
            status = fs_smw_update(st.smw, st.A, st.g, st.smw_work)
            if status != FS_OK:
                # C lost definiteness after many downdates: Python re-solves
                # (3.19) from every point, then calls finish_iteration()
                st.pending = 1
                return _HOOK_RESOLVE
            memcpy(<double *>st.net.v, st.smw.v, sizeof(double) * s)
    _score_finish(st)
    refresh[0] = FS_REFRESH_DRIVE     # V changed: re-evaluate V and grad V at the state
    return FS_OK


cdef class ScoreMatchingHook(ChainHook):
    """VHMC's training step (Algorithm 2) as a chain hook, run in C after each iteration.

    At each accepted state q: g = grad U(q) from the exact potential; if it
    is finite, the gradient features A(q) of the network, the held-out
    error ||A v - g||^2 of the current weights, and the SMW update (3.20)-
    (3.21) of ``trainer``, whose new weights go into the network.  Then
    every iteration t: V's weights become (mu[t], 1 - mu[t]) and the chain
    re-evaluates V at its state.

    With ``residual=True``, z learns grad U - grad L instead (L = V's second
    term, the Laplace approximation) and V's weights become (mu[t], 1):
    V_t = mu_t z + L keeps L's quadratic growth away from the data, so that
    exp(-V) is normalisable whatever z does there (z's slope is bounded).
    When V is a :class:`~fastsurrogate.core.ClampedSum`, its radius grows to
    hold every training point (z counts as it is there, held beyond).

    Parameters
    ----------
    exact : Potential
        U, whose gradient the network learns.
    net : RandomNetwork
        z; its output weights follow the trainer's.
    V : WeightedSum
        ``[net, laplace]``: the chain's drive (and judge) potential.
    trainer : SMWTrainer
        (n_hidden, dim) of the network.
    mu : array (t_max + 1,)
        mu[t] for t = 1 .. t_max (mu[0] unused), in [0, 1].
    start : int
        The iteration the first call completes (0 for a fresh training).
    residual : bool
        Fit grad U - grad L and keep L's weight at 1 (above).

    A breakdown of the SMW recursion pauses the run (``Chain.run`` returns
    status HOOK_RESOLVE with the iteration counted): the owner re-solves the
    trainer from :meth:`points`, writes its weights into the network and
    calls :meth:`finish_iteration`, then re-evaluates the chain's state.
    """

    cdef _score_state st
    cdef readonly Potential exact
    cdef readonly RandomNetwork net
    cdef readonly WeightedSum V
    cdef readonly SMWTrainer trainer
    cdef cnp.ndarray _mu, _A, _g, _gbase, _iteration, _sq_error, _sq_grad, _Q, _G
    cdef readonly bint residual

    def __init__(self, Potential exact not None, RandomNetwork net not None,
                 WeightedSum V not None, SMWTrainer trainer not None, mu, long start=0,
                 bint residual=False):
        cdef int s = net.net.n_hidden, d = net.net.dim
        if exact.pot.eval == NULL:
            raise TypeError("exact is not initialised")
        if exact.pot.dim != d or V.pot.dim != d:
            raise ValueError(f"exact, net and V must have one dim; got {exact.pot.dim}, {d}, "
                             f"{V.pot.dim}")
        if trainer.state.s != s or trainer.state.d != d:
            raise ValueError(f"trainer has (n_hidden, dim) = ({trainer.state.s}, "
                             f"{trainer.state.d}); the network ({s}, {d})")
        if V._weights.shape[0] != 2 or V.potentials[0] is not net:
            raise ValueError("V must be WeightedSum([net, laplace], weights)")
        mu_arr = np.ascontiguousarray(mu, dtype=np.float64)
        if mu_arr.ndim != 1 or mu_arr.shape[0] < 2:
            raise ValueError("mu must be a 1-d array of mu[0 .. t_max], t_max >= 1")
        m = mu_arr[1:]
        if not np.all((m >= 0.0) & (m <= 1.0)):
            bad = int(np.flatnonzero(~((m >= 0.0) & (m <= 1.0)))[0]) + 1
            raise ValueError(f"the mu schedule must return values in [0, 1]; "
                             f"mu({bad}) = {mu_arr[bad]!r}")
        cdef long t_max = mu_arr.shape[0] - 1
        if not 0 <= start <= t_max:
            raise ValueError(f"start must be in [0, {t_max}], got {start}")
        self.exact, self.net, self.V, self.trainer = exact, net, V, trainer
        self.residual = residual
        self._mu = mu_arr
        self._A = np.empty(<Py_ssize_t>d * s)
        self._g = np.empty(d)
        self._gbase = np.empty(d)
        n_cap = t_max - start
        self._iteration = np.empty(n_cap, dtype=np.int64)
        self._sq_error = np.empty(n_cap)
        self._sq_grad = np.empty(n_cap)
        self._Q = np.empty((n_cap, d))
        self._G = np.empty((n_cap, d))
        self.st.exact = &exact.pot
        self.st.net = &net.net
        self.st.smw = &trainer.state
        self.st.smw_work = trainer.work
        self.st.mix = <double *>cnp.PyArray_DATA(V._weights)
        self.st.mu = <const double *>cnp.PyArray_DATA(self._mu)
        self.st.base = &(<Potential>V.potentials[1]).pot if residual else NULL
        self.st.gbase = <double *>cnp.PyArray_DATA(self._gbase)
        self.st.radius = NULL
        self.st.base_min = 0.0
        if residual and isinstance(V, ClampedSum):
            self.st.radius = <double *>cnp.PyArray_DATA((<ClampedSum>V)._radius)
            self.st.base_min = (<ClampedSum>V).gst.base_min
        self.st.t = start
        self.st.t_max = t_max
        self.st.s = s
        self.st.d = d
        self.st.A = <double *>cnp.PyArray_DATA(self._A)
        self.st.g = <double *>cnp.PyArray_DATA(self._g)
        self.st.n_points = 0
        self.st.iteration = <int64_t *>cnp.PyArray_DATA(self._iteration)
        self.st.sq_error = <double *>cnp.PyArray_DATA(self._sq_error)
        self.st.sq_grad = <double *>cnp.PyArray_DATA(self._sq_grad)
        self.st.Q = <double *>cnp.PyArray_DATA(self._Q)
        self.st.G = <double *>cnp.PyArray_DATA(self._G)
        self.st.pending = 0
        self.hook.state = &self.st
        self.hook.after_iteration = _score_after

    def check(self, int status, str where):
        self.exact.check_status(status)
        raise_for_status(status, where)

    def finish_iteration(self):
        """After a HOOK_RESOLVE pause (weights re-solved): set V's weights for the
        next iteration.  The caller then re-evaluates the chain's state."""
        if not self.st.pending:
            raise RuntimeError("finish_iteration: the hook is not paused")
        _score_finish(&self.st)

    @property
    def pending(self):
        """True while paused by a breakdown (until finish_iteration)."""
        return bool(self.st.pending)

    @property
    def iteration(self):
        """The training iteration the next call completes (= iterations done)."""
        return self.st.t

    @property
    def n_points(self):
        return self.st.n_points

    def _ckpt_state(self, bint full=True):
        cdef Py_ssize_t n = self.st.n_points
        sc = {"t": int(self.st.t), "n_points": int(n), "pending": int(self.st.pending),
              "mix": [float(self.st.mix[0]), float(self.st.mix[1])],
              "radius": float(self.st.radius[0]) if self.st.radius != NULL else None}
        arr = {}
        if full:
            arr = {"iteration": self._iteration[:n].copy(), "sq_error": self._sq_error[:n].copy(),
                   "sq_grad": self._sq_grad[:n].copy(), "Q": self._Q[:n].copy(),
                   "G": self._G[:n].copy()}
        return sc, arr

    def _ckpt_restore(self, dict sc, dict arr):
        """The arrays may be longer than n_points (a later state's): the first
        n_points rows are taken (the arrays only grow)."""
        cdef long n = sc["n_points"]
        if n > self._Q.shape[0] or sc["t"] > self.st.t_max:
            raise ValueError("checkpoint state does not fit this ScoreMatchingHook")
        self._iteration[:n] = np.asarray(arr["iteration"])[:n]
        self._sq_error[:n] = arr["sq_error"][:n]
        self._sq_grad[:n] = arr["sq_grad"][:n]
        self._Q[:n] = arr["Q"][:n]
        self._G[:n] = arr["G"][:n]
        self.st.n_points = n
        self.st.t = sc["t"]
        self.st.pending = sc["pending"]
        self.st.mix[0], self.st.mix[1] = sc["mix"]
        if self.st.radius != NULL:
            self.st.radius[0] = sc["radius"]

    def curve(self):
        """(iteration, sq_error, sq_grad) per training point (copies)."""
        n = self.st.n_points
        return self._iteration[:n].copy(), self._sq_error[:n].copy(), self._sq_grad[:n].copy()

    def points(self):
        """(Q (n, dim), G (n, dim)): the training points and z's targets there,
        grad U (grad U - grad L with ``residual``) (views)."""
        n = self.st.n_points
        return self._Q[:n], self._G[:n]


# ---- ARNS-HMC: the output layer's online least squares ----------------------

cdef enum:
    _HOOK_STOPPED = 2    # max_points reached: the surrogate is fixed from here on
HOOK_STOPPED = _HOOK_STOPPED


cdef struct _layer_state:
    fs_network *net
    fs_smw *smw            # ridge > 0: block SMW updates (smw.d == block) ...
    fs_greville *grev      # ... or Greville / recursive point updates
    double *trainer_work
    int s, d, block
    int use_proposals
    double offset, exponent
    const double *centre   # s: the features' centre (rows are h - centre), or NULL
    long max_points        # 0: no limit
    long resync_every
    long n_seen, since
    long t                 # iterations since the start of adaptation
    long row               # trace row the next call completes
    long end_row
    long first             # first row of the current block
    int n_buf
    double *Qbuf           # block x d
    double *ubuf           # block
    double *F              # block x s: hidden features
    double *H              # block x (s + 1), zero-padded
    double *y              # block
    long n_hist, hist_cap
    double *hist_Q         # every point absorbed (start set first)
    double *hist_U
    long n_switches
    long *switches
    long stop_row          # -1 while adapting
    int pending            # paused after an absorb, before the switch coin
    fs_rng *rng


cdef inline double *_layer_weights(_layer_state *st) noexcept nogil:
    return st.smw.v if st.smw != NULL else st.grev.v


cdef inline double _centred_bias(const double *w, const double *centre, int s,
                                 double offset) noexcept nogil:
    """The network's output bias for layer weights w (s + 1: the last is the
    bias) on centred rows (h - centre, 1): w[s] + offset - w[:s] . centre
    (centre NULL: uncentred rows); a plain loop, so that the Python side
    (:func:`centred_bias`) gives the same bits."""
    cdef double acc = 0.0
    cdef int i
    if centre != NULL:
        for i in range(s):
            acc += w[i] * centre[i]
    return (w[s] + offset) - acc


def centred_bias(w, centre, double offset):
    """The network's output bias for online-layer weights w (s + 1,) on rows
    (h - centre, 1), with the targets' offset: w[-1] + offset - w[:-1] . centre
    (centre None: w[-1] + offset).  The same arithmetic as the C hook."""
    cdef cnp.ndarray wa = np.ascontiguousarray(w, dtype=np.float64)
    cdef int s = wa.shape[0] - 1
    cdef cnp.ndarray ca
    if centre is None:
        return _centred_bias(<const double *>cnp.PyArray_DATA(wa), NULL, s, offset)
    ca = np.ascontiguousarray(centre, dtype=np.float64)
    if ca.ndim != 1 or ca.shape[0] != s:
        raise ValueError(f"centre must have shape ({s},), got {np.shape(centre)}")
    return _centred_bias(<const double *>cnp.PyArray_DATA(wa),
                         <const double *>cnp.PyArray_DATA(ca), s, offset)


cdef inline void _layer_switch(_layer_state *st, int *refresh) noexcept nogil:
    cdef const double *w = _layer_weights(st)
    memcpy(<double *>st.net.v, w, sizeof(double) * st.s)
    st.net.out_bias = _centred_bias(w, st.centre, st.s, st.offset)
    st.switches[st.n_switches] = st.row
    st.n_switches += 1
    if refresh != NULL:
        # the chain's state keeps the old network's gradient otherwise, and the
        # next trajectory would start from it: not the reverse of its own reverse
        refresh[0] = FS_REFRESH_DRIVE


cdef int _layer_absorb(_layer_state *st) noexcept nogil:
    """Absorb the block's buffered points; _HOOK_RESOLVE when a batch re-solve is due."""
    cdef int n = st.n_buf, s = st.s, s1 = st.s + 1, d = st.d, j, i, status
    cdef long done = 0
    if n == 0:
        return FS_OK
    status = network_features(st.net, n, st.Qbuf, st.F, NULL)
    if status != FS_OK:
        return status
    for j in range(st.block):
        for i in range(s1):
            st.H[j * s1 + i] = 0.0
        st.y[j] = 0.0
    for j in range(n):
        if st.centre != NULL:
            for i in range(s):
                st.H[j * s1 + i] = st.F[j * s + i] - st.centre[i]
        else:
            memcpy(st.H + j * s1, st.F + j * s, sizeof(double) * s)
        st.H[j * s1 + s] = 1.0
        st.y[j] = st.ubuf[j] - st.offset
    memcpy(st.hist_Q + st.n_hist * d, st.Qbuf, sizeof(double) * n * d)
    memcpy(st.hist_U + st.n_hist, st.ubuf, sizeof(double) * n)
    st.n_hist += n
    if st.smw != NULL:
        status = fs_smw_update(st.smw, st.H, st.y, st.trainer_work)
    else:
        status = fs_greville_update_many(st.grev, st.H, st.y, n, st.trainer_work, &done)
    st.n_seen += n
    st.since += n
    if status != FS_OK or (st.resync_every > 0 and st.since >= st.resync_every):
        return _HOOK_RESOLVE
    return FS_OK


cdef int _layer_finish(_layer_state *st, fs_rng *rng, int *refresh) noexcept nogil:
    """After a block's absorb: the max_points stop or the switch coin."""
    cdef long n = st.row - st.first, j
    cdef double prod = 1.0
    cdef long t0 = st.t
    st.t += n
    st.first = st.row
    st.n_buf = 0
    st.pending = 0
    if st.max_points > 0 and st.n_seen >= st.max_points:
        # finite adaptation: the final weights, from here on fixed
        _layer_switch(st, refresh)
        st.stop_row = st.row
        return _HOOK_STOPPED
    for j in range(1, n + 1):
        prod = prod * (1.0 - pow(<double>(t0 + j), -st.exponent))
    if rng.uniform(rng.state) < 1.0 - prod:
        _layer_switch(st, refresh)
    return FS_OK


cdef int _layer_after(void *state, long iteration, fs_rng *rng, const fs_hmc_info *info,
                      const fs_hmc_point *cur, const double *proposal,
                      int *refresh) noexcept nogil:
    cdef _layer_state *st = <_layer_state *>state
    cdef const double *q
    cdef double u
    cdef int status
    if st.stop_row >= 0:
        return FS_OK
    if st.pending or st.row >= st.end_row:
        return FS_EINVAL
    st.rng = rng
    if st.use_proposals:
        q, u = proposal, info.proposal_u
    else:
        q, u = cur.q, cur.u_judge
    # a divergent proposal (energy error beyond max_energy_error) lies far outside
    # the posterior: its U would dominate the least squares
    if isfinite(u) and not (st.use_proposals and info.divergent) and (
            st.max_points == 0 or st.n_buf < st.max_points - st.n_seen):
        memcpy(st.Qbuf + st.n_buf * st.d, q, sizeof(double) * st.d)
        st.ubuf[st.n_buf] = u
        st.n_buf += 1
    st.row += 1
    if st.row - st.first < st.block and st.row < st.end_row:
        return FS_OK
    status = _layer_absorb(st)
    if status != FS_OK:
        if status == _HOOK_RESOLVE:
            st.pending = 1
        return status
    return _layer_finish(st, rng, refresh)


cdef class OnlineLayerHook(ChainHook):
    """ARNS-HMC's online output layer (Algorithm 4) as a chain hook, run in C.

    Each iteration's proposal (unless divergent) or state with a finite exact U is buffered
    as a point (features(q), U - offset); every ``block`` iterations (and
    at ``end_row``) the buffered points are absorbed by ``trainer`` (an
    :class:`SMWTrainer` with dim = block: one block SMW update of the
    ridge least squares, zero-padded; or a :class:`GrevilleTrainer`: point
    updates), then one coin with probability 1 - prod(1 - t^-exponent) over
    the block's iterations t, drawn from the chain's own stream, decides
    whether the network takes the trainer's weights (v = w[:-1], out_bias =
    w[-1] + offset - v . centre: with ``centre`` (s,) the trainer's rows are
    (h - centre, 1), the features centred on a fixed point, the start set's
    mean, which keeps the normal equations well conditioned; None: (h, 1)).
    With ``max_points`` the updates stop once the trainer
    has seen that many points: the network takes the final weights and the
    run pauses (status HOOK_STOPPED) once, for the caller's records.

    A failed update, or ``resync_every`` points since the last re-solve,
    pauses the run with HOOK_RESOLVE: the caller re-solves the trainer in
    batch from :meth:`history` and calls :meth:`finish_block`.

    After a switch the chain re-evaluates the network (only) at its state,
    before the next trajectory: a trajectory that started from the previous
    weights' gradient would not be reversible (its reverse starts from the
    new weights'), and the Metropolis test would not be exact for that
    iteration.  After :meth:`finish_block` the caller does it (the chain's
    ``refresh_drive``).
    """

    cdef _layer_state st
    cdef readonly RandomNetwork net
    cdef readonly object trainer
    cdef cnp.ndarray _Qbuf, _ubuf, _F, _H, _y, _hist_Q, _hist_U, _switches, _centre

    def __init__(self, RandomNetwork net not None, trainer, double offset, int block,
                 double exponent, long end_row, Q0, U0, max_points=None, long resync_every=0,
                 bint proposals=True, centre=None):
        cdef int s = net.net.n_hidden, d = net.net.dim
        if block < 1 or end_row < 0 or resync_every < 0:
            raise ValueError("block must be >= 1, end_row and resync_every >= 0")
        if not 0.0 < exponent <= 1.0:
            raise ValueError("exponent must be in (0, 1]")
        self.st.smw = NULL
        self.st.grev = NULL
        if isinstance(trainer, SMWTrainer):
            if (<SMWTrainer>trainer).state.s != s + 1 or (<SMWTrainer>trainer).state.d != block:
                raise ValueError("an SMWTrainer must have n_hidden = net.n_hidden + 1, dim = block")
            self.st.smw = &(<SMWTrainer>trainer).state
            self.st.trainer_work = (<SMWTrainer>trainer).work
        elif isinstance(trainer, GrevilleTrainer):
            if (<GrevilleTrainer>trainer).state.s != s + 1:
                raise ValueError("a GrevilleTrainer must have n_hidden = net.n_hidden + 1")
            self.st.grev = &(<GrevilleTrainer>trainer).state
            self.st.trainer_work = (<GrevilleTrainer>trainer).work
        else:
            raise TypeError("trainer must be an SMWTrainer or a GrevilleTrainer")
        Q0 = _as_float_array(Q0, "Q0", (None, d))
        U0 = _as_float_array(U0, "U0", (Q0.shape[0],))
        mp = 0 if max_points is None else int(max_points)
        if mp < 0:
            raise ValueError("max_points must be None or >= 0")
        self.net, self.trainer = net, trainer
        n0 = Q0.shape[0]
        cap = n0 + end_row
        self._Qbuf = np.zeros((block, d))
        self._ubuf = np.zeros(block)
        self._F = np.zeros((block, s))
        self._H = np.zeros((block, s + 1))
        self._y = np.zeros(block)
        self._hist_Q = np.empty((cap, d))
        self._hist_U = np.empty(cap)
        self._hist_Q[:n0] = Q0
        self._hist_U[:n0] = U0
        self._switches = np.empty(-(-end_row // block) + 1, dtype=np.int64)
        self.st.net = &net.net
        self.st.s, self.st.d, self.st.block = s, d, block
        self.st.use_proposals = proposals
        self.st.offset, self.st.exponent = offset, exponent
        self.st.centre = NULL
        if centre is not None:
            self._centre = _as_float_array(centre, "centre", (s,)).copy()
            self.st.centre = <const double *>cnp.PyArray_DATA(self._centre)
        self.st.max_points = mp
        self.st.resync_every = resync_every
        self.st.n_seen = n0
        self.st.since = 0
        self.st.t = 0
        self.st.row = 0
        self.st.end_row = end_row
        self.st.first = 0
        self.st.n_buf = 0
        self.st.Qbuf = <double *>cnp.PyArray_DATA(self._Qbuf)
        self.st.ubuf = <double *>cnp.PyArray_DATA(self._ubuf)
        self.st.F = <double *>cnp.PyArray_DATA(self._F)
        self.st.H = <double *>cnp.PyArray_DATA(self._H)
        self.st.y = <double *>cnp.PyArray_DATA(self._y)
        self.st.n_hist = n0
        self.st.hist_cap = cap
        self.st.hist_Q = <double *>cnp.PyArray_DATA(self._hist_Q)
        self.st.hist_U = <double *>cnp.PyArray_DATA(self._hist_U)
        self.st.n_switches = 0
        self.st.switches = <long *>cnp.PyArray_DATA(self._switches)
        self.st.stop_row = -1
        self.st.pending = 0
        self.st.rng = NULL
        self.hook.state = &self.st
        self.hook.after_iteration = _layer_after

    def finish_block(self):
        """After a HOOK_RESOLVE pause (trainer re-solved): the rest of the block
        (stop or switch coin, from the chain's stream).  Returns True when the
        network's weights changed (re-evaluate the chain's state if needed)."""
        if not self.st.pending:
            raise RuntimeError("finish_block: the hook is not paused")
        self.st.since = 0
        cdef long before = self.st.n_switches
        _layer_finish(&self.st, self.st.rng, NULL)
        return self.st.n_switches > before

    def _ckpt_state(self, bint full=True):
        cdef _layer_state *st = &self.st
        sc = {"n_seen": int(st.n_seen), "since": int(st.since), "t": int(st.t),
              "row": int(st.row), "first": int(st.first), "n_buf": int(st.n_buf),
              "n_hist": int(st.n_hist), "n_switches": int(st.n_switches),
              "stop_row": int(st.stop_row), "pending": int(st.pending)}
        arr = {}
        if full:
            arr = {"Qbuf": self._Qbuf.copy(), "ubuf": self._ubuf.copy(),
                   "hist_Q": self._hist_Q[:st.n_hist].copy(),
                   "hist_U": self._hist_U[:st.n_hist].copy(),
                   "switches": self._switches[:st.n_switches].copy()}
        return sc, arr

    def _ckpt_restore(self, dict sc, dict arr):
        """The arrays may be a later state's: the history and switches only
        grow, so their first n_hist / n_switches rows are this state's."""
        cdef _layer_state *st = &self.st
        cdef long nh = sc["n_hist"], ns = sc["n_switches"]
        if nh > st.hist_cap or ns > self._switches.shape[0]:
            raise ValueError("checkpoint state does not fit this OnlineLayerHook")
        self._hist_Q[:nh] = arr["hist_Q"][:nh]
        self._hist_U[:nh] = arr["hist_U"][:nh]
        self._switches[:ns] = np.asarray(arr["switches"])[:ns]
        self._Qbuf[:] = arr["Qbuf"]
        self._ubuf[:] = arr["ubuf"]
        st.n_seen, st.since, st.t = sc["n_seen"], sc["since"], sc["t"]
        st.row, st.first, st.n_buf = sc["row"], sc["first"], sc["n_buf"]
        st.n_hist, st.n_switches = nh, ns
        st.stop_row, st.pending = sc["stop_row"], sc["pending"]

    def history(self):
        """(Q (n, dim), U (n,)): every point absorbed so far, start set first (views)."""
        n = self.st.n_hist
        return self._hist_Q[:n], self._hist_U[:n]

    @property
    def pending(self):
        return bool(self.st.pending)

    @property
    def n_seen(self):
        return self.st.n_seen

    @property
    def switches(self):
        """Rows after which the network took new weights (list of int)."""
        return self._switches[:self.st.n_switches].tolist()

    @property
    def stopped(self):
        """The row where max_points stopped the updates, or None."""
        return None if self.st.stop_row < 0 else self.st.stop_row
