# Declarations of csrc/fs_glm.h (fused single-pass GLM potentials).
# The struct layout and the signatures here must match the C header.

from fastsurrogate.core._common cimport fs_pool
from fastsurrogate.core._potential cimport Potential

cdef extern from "fs_glm.h" nogil:
    enum:
        FS_GLM_LOGISTIC
        FS_GLM_PROBIT
        FS_GLM_POISSON
        FS_GLM_GAUSSIAN
        FS_GLM_BLOCK_ROWS
        FS_GLM_MAX_BLOCKS
        FS_GLM_FISHER_MAX_CHUNKS
        FS_GLM_FISHER_MIN_ROWS

    ctypedef struct fs_glm:
        int family
        size_t n
        size_t d
        const double *X
        const double *y
        const double *prior_mean
        double *prior_prec
        double sigma
        double inv_sigma2
        int n_threads
        fs_pool pool

    int fs_glm_workspace_size(size_t n, size_t d, size_t *eval_doubles,
                              size_t *fisher_doubles)
    int fs_glm_init(fs_glm *m, int family, size_t n, size_t d, const double *X,
                    const double *y, const double *prior_mean,
                    const double *prior_sd, double sigma, int n_threads)
    void fs_glm_free(fs_glm *m)
    int fs_glm_eval(const fs_glm *m, const double *beta, double *value,
                    double *grad, double *work)
    int fs_glm_potential_eval(void *state, const double *q, double *value,
                              double *grad)
    int fs_glm_fisher(const fs_glm *m, const double *beta, double *F, double *work)
    int fs_read_floor(const double *X, size_t n, int n_threads, double *out)
    int fs_log_ndtr(double z, double *out)
    int fs_inv_mills(double z, double *out)


cdef class GeneralizedLinearModel(Potential):
    # The C model; self.pot.state points at it.
    cdef fs_glm model
    cdef bint _ready
    cdef object _X
    cdef object _y
    cdef object _prior_sd
    cdef object _prior_mean
    # a DistributedGLM (models/_glm_dask.py) when X, y are Dask arrays; None otherwise
    cdef object _distributed
    # X's column names (a pandas DataFrame's, when unique) or None
    cdef object _names

    cdef _setup(self, int family, X, y, prior_sd, prior_mean, double sigma,
                n_threads, str labels)
    cdef int _require_ready(self) except -1
