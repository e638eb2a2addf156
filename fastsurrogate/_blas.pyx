"""The BLAS/LAPACK pointer table handed to the C kernels.

Filled once, when this module loads, from scipy.linalg.cython_blas and
cython_lapack: the C code never links a BLAS of its own.
"""
cimport scipy.linalg.cython_blas as cb
cimport scipy.linalg.cython_lapack as cl

cdef extern from "fs_common.h" nogil:
    ctypedef struct fs_blas_full "fs_blas":
        void *ddot
        void *daxpy
        void *dgemv
        void *dger
        void *dgemm
        void *dsyrk
        void *dsymv
        void *dtrsv
        void *dtrsm
        void *dpotrf
        void *dpotrs
        void *dsyev
        void *dgelsd

cdef fs_blas_full _TABLE
_TABLE.ddot = <void *>cb.ddot
_TABLE.daxpy = <void *>cb.daxpy
_TABLE.dgemv = <void *>cb.dgemv
_TABLE.dger = <void *>cb.dger
_TABLE.dgemm = <void *>cb.dgemm
_TABLE.dsyrk = <void *>cb.dsyrk
_TABLE.dsymv = <void *>cb.dsymv
_TABLE.dtrsv = <void *>cb.dtrsv
_TABLE.dtrsm = <void *>cb.dtrsm
_TABLE.dpotrf = <void *>cl.dpotrf
_TABLE.dpotrs = <void *>cl.dpotrs
_TABLE.dsyev = <void *>cl.dsyev
_TABLE.dgelsd = <void *>cl.dgelsd


cdef const fs_blas *blas_table() noexcept nogil:
    return <const fs_blas *>&_TABLE


def _test_ddot(double[::1] x, double[::1] y):
    """Test hook: x . y through the table."""
    cdef int n = x.shape[0], inc = 1
    if y.shape[0] != x.shape[0]:
        raise ValueError("x and y must have the same length")
    return (<double (*)(int *, double *, int *, double *, int *) noexcept nogil>_TABLE.ddot)(
        &n, &x[0], &inc, &y[0], &inc)
