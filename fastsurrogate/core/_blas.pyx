"""The BLAS/LAPACK pointer table handed to the C kernels.

Filled once, when this module loads, from scipy.linalg.cython_blas and
cython_lapack: the C code never links a BLAS of its own.
"""
cimport scipy.linalg.cython_blas as cb
cimport scipy.linalg.cython_lapack as cl

from fastsurrogate.core._common cimport (fs_blas, fs_ddot_fn, fs_daxpy_fn, fs_dgemv_fn, fs_dger_fn,
                                    fs_dgemm_fn, fs_dsyrk_fn, fs_dsymv_fn, fs_dtrsv_fn,
                                    fs_dtrsm_fn, fs_dpotrf_fn, fs_dpotrs_fn, fs_dsyev_fn,
                                    fs_dgelsd_fn, fs_dpotri_fn, fs_dtrmm_fn)

cdef fs_blas _TABLE
_TABLE.ddot = <fs_ddot_fn>cb.ddot
_TABLE.daxpy = <fs_daxpy_fn>cb.daxpy
_TABLE.dgemv = <fs_dgemv_fn>cb.dgemv
_TABLE.dger = <fs_dger_fn>cb.dger
_TABLE.dgemm = <fs_dgemm_fn>cb.dgemm
_TABLE.dsyrk = <fs_dsyrk_fn>cb.dsyrk
_TABLE.dsymv = <fs_dsymv_fn>cb.dsymv
_TABLE.dtrsv = <fs_dtrsv_fn>cb.dtrsv
_TABLE.dtrsm = <fs_dtrsm_fn>cb.dtrsm
_TABLE.dpotrf = <fs_dpotrf_fn>cl.dpotrf
_TABLE.dpotrs = <fs_dpotrs_fn>cl.dpotrs
_TABLE.dsyev = <fs_dsyev_fn>cl.dsyev
_TABLE.dgelsd = <fs_dgelsd_fn>cl.dgelsd
_TABLE.dpotri = <fs_dpotri_fn>cl.dpotri
_TABLE.dtrmm = <fs_dtrmm_fn>cb.dtrmm


cdef const fs_blas *blas_table() noexcept nogil:
    return &_TABLE


def _test_ddot(double[::1] x, double[::1] y):
    """Test hook: x . y computed by BLAS ddot through the table."""
    cdef int n = x.shape[0], inc = 1
    if y.shape[0] != x.shape[0]:
        raise ValueError("x and y must have the same length")
    if n == 0:
        return 0.0
    return (<double (*)(int *, double *, int *, double *, int *) noexcept nogil>_TABLE.ddot)(
        &n, &x[0], &inc, &y[0], &inc)
