# Declarations of csrc/fs_common.h and csrc/fs_potential.h.
# The layouts here must match the C headers.

cdef extern from "fs_common.h" nogil:
    enum:
        FS_OK
        FS_ENOMEM
        FS_ENONFINITE
        FS_ESINGULAR
        FS_ECALLBACK
        FS_EINVAL
        FS_ELAPACK
        FS_EINTERRUPT
        FS_EUNDEFINED
        FS_POOL_SLOTS

    ctypedef struct fs_rng:
        void *state
        double (*normal)(void *state) noexcept nogil
        double (*uniform)(void *state) noexcept nogil

    ctypedef struct fs_pool:
        size_t slot_doubles
        double *mem

    int fs_pool_init(fs_pool *pool, size_t slot_doubles)
    void fs_pool_free(fs_pool *pool)
    double *fs_pool_take(fs_pool *pool)
    void fs_pool_give(fs_pool *pool, double *buf)

    # Function-pointer types, opaque to Cython (their C prototypes are in fs_common.h).
    ctypedef void *fs_ddot_fn
    ctypedef void *fs_daxpy_fn
    ctypedef void *fs_dgemv_fn
    ctypedef void *fs_dger_fn
    ctypedef void *fs_dgemm_fn
    ctypedef void *fs_dsyrk_fn
    ctypedef void *fs_dsymv_fn
    ctypedef void *fs_dtrsv_fn
    ctypedef void *fs_dtrsm_fn
    ctypedef void *fs_dpotrf_fn
    ctypedef void *fs_dpotrs_fn
    ctypedef void *fs_dsyev_fn
    ctypedef void *fs_dgelsd_fn
    ctypedef void *fs_dpotri_fn
    ctypedef void *fs_dtrmm_fn
    ctypedef struct fs_blas:
        fs_ddot_fn ddot
        fs_daxpy_fn daxpy
        fs_dgemv_fn dgemv
        fs_dger_fn dger
        fs_dgemm_fn dgemm
        fs_dsyrk_fn dsyrk
        fs_dsymv_fn dsymv
        fs_dtrsv_fn dtrsv
        fs_dtrsm_fn dtrsm
        fs_dpotrf_fn dpotrf
        fs_dpotrs_fn dpotrs
        fs_dsyev_fn dsyev
        fs_dgelsd_fn dgelsd
        fs_dpotri_fn dpotri
        fs_dtrmm_fn dtrmm

    const char *fs_strerror(int status)
    bint fs_isfinite(double x)

cdef extern from "fs_potential.h" nogil:
    ctypedef int (*fs_potential_fn)(void *state, const double *q, double *value,
                                    double *grad) noexcept nogil

    ctypedef struct fs_potential:
        void *state
        fs_potential_fn eval
        int dim
