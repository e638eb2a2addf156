"""The compiled evaluation of the elliptic PDE potential (RNS-HMC paper,
section 5.2): element assembly of the banded stiffness matrix, banded
Cholesky, forward and adjoint solves and the adjoint contraction in one C
call (csrc/fs_pde.c).  ``fastsurrogate.models.pde.EllipticPDE`` builds the
mesh arrays and subclasses :class:`PDEKernel`."""

import numpy as np
cimport numpy as cnp

from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.core._common cimport fs_pool, FS_OK

cnp.import_array()

cdef extern from "fs_pde.h" nogil:
    ctypedef struct fs_pde:
        int n_el, d, nf, p, n_obs
    int fs_pde_init(fs_pde *m, int n_el, int d, int nf, int p, int n_obs,
                    const int *el_free, const double *el_g, const double *k_ref,
                    const double *phi, const int *obs_ptr, const int *obs_idx,
                    const double *obs_val, const double *obs_const, const double *y,
                    double noise_var, double prior_var)
    void fs_pde_free(fs_pde *m)
    int fs_pde_eval(void *state, const double *q, double *value, double *grad)
    int FS_PDE_NB
    int fs_band_cholesky(int n, int p, double *ab)
    void fs_band_cholesky_solve(int n, int p, const double *ab, double *x)


cdef inline const double *_dp(cnp.ndarray a):
    return <const double *>cnp.PyArray_DATA(a)


cdef inline const int *_ip(cnp.ndarray a):
    return <const int *>cnp.PyArray_DATA(a)


cdef class PDEKernel(Potential):
    """Base of ``EllipticPDE``: a Potential whose evaluation is either the C
    kernel fs_pde_eval (:meth:`_init_kernel`) or another Potential's (a
    Python callback, :meth:`_init_delegate`)."""

    cdef fs_pde st
    cdef bint _ready
    cdef readonly bint calls_python

    def __cinit__(self, *args, **kwargs):
        self._ready = False
        self.calls_python = False

    def __dealloc__(self):
        if self._ready:
            fs_pde_free(&self.st)

    def _init_kernel(self, el_free, el_g, k_ref, phi, obs_ptr, obs_idx, obs_val,
                     obs_const, y, int nf, int p, double noise_var, double prior_var):
        """Point the Potential at fs_pde_eval with these mesh arrays (copied)."""
        if self._ready or self.pot.eval != NULL:
            raise TypeError("PDEKernel is already initialised")
        i32 = lambda a: np.array(a, dtype=np.int32, order="C", copy=True)
        f64 = lambda a: np.array(a, dtype=np.float64, order="C", copy=True)
        cdef cnp.ndarray ef = i32(el_free), eg = f64(el_g), kr = f64(k_ref), ph = f64(phi)
        cdef cnp.ndarray op = i32(obs_ptr), oi = i32(obs_idx), ov = f64(obs_val)
        cdef cnp.ndarray oc = f64(obs_const), ya = f64(y)
        n_el, d = ph.shape[0], ph.shape[1]
        n_obs = ya.shape[0]
        if (ef.shape[0] != n_el or ef.shape[1] != 4 or eg.shape[0] != n_el or kr.size != 16
                or op.shape[0] != n_obs + 1 or oc.shape[0] != n_obs
                or oi.shape[0] != ov.shape[0] or op[n_obs] != oi.shape[0]):
            raise ValueError("inconsistent PDE kernel arrays")
        if ef.max() >= nf or (oi.size and (oi.min() < 0 or oi.max() >= nf)):
            raise ValueError("PDE kernel index out of range")
        status = fs_pde_init(&self.st, n_el, d, nf, p, n_obs, _ip(ef), _dp(eg), _dp(kr),
                             _dp(ph), _ip(op), _ip(oi), _dp(ov), _dp(oc), _dp(ya),
                             noise_var, prior_var)
        if status != FS_OK:
            raise_for_status(status, "EllipticPDE")
        self._ready = True
        self._keep = (ef, eg, kr, ph, op, oi, ov, oc, ya)
        self.pot.dim = d
        self.pot.state = <void *>&self.st
        self.pot.eval = fs_pde_eval
        self.thread_safe = True

    def _init_delegate(self, Potential inner):
        """Evaluate through ``inner`` (kept alive; its callback errors are found
        through it)."""
        if self._ready or self.pot.eval != NULL:
            raise TypeError("PDEKernel is already initialised")
        self._keep = (inner,)
        self.pot = inner.pot
        self.thread_safe = inner.thread_safe
        self.calls_python = True


def _to_padded(ab):
    """LAPACK lower band storage (p + 1, n) -> fs_pde's (n, p + FS_PDE_NB) C order."""
    a = np.asarray(ab, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError("ab must be 2-D (p + 1, n)")
    out = np.zeros((a.shape[1], a.shape[0] + FS_PDE_NB - 1))
    out[:, :a.shape[0]] = a.T
    return out


def _band_cholesky(ab):
    """Test hook: fs_band_cholesky on a copy of LAPACK's lower band storage
    ``ab`` (shape (p + 1, n)); returns (factor in the same storage, info)."""
    cdef cnp.ndarray a = _to_padded(ab)
    cdef int n = a.shape[0], p = ab.shape[0] - 1
    info = fs_band_cholesky(n, p, <double *>cnp.PyArray_DATA(a))
    return np.ascontiguousarray(a[:, :p + 1].T), info


def _band_solve(cb, b):
    """Test hook: fs_band_cholesky_solve with the factor ``cb`` (shape (p + 1, n))."""
    cdef cnp.ndarray a = _to_padded(cb)
    cdef cnp.ndarray x = np.array(b, dtype=np.float64, copy=True)
    cdef int n = a.shape[0], p = cb.shape[0] - 1
    if x.ndim != 1 or x.shape[0] != n:
        raise ValueError("b must have shape (n,)")
    fs_band_cholesky_solve(n, p, <const double *>cnp.PyArray_DATA(a),
                           <double *>cnp.PyArray_DATA(x))
    return x
