# Declarations of csrc/fs_models.h (Gaussian, banana, beta-binomial),
# csrc/fs_garch.h (GARCH(m, r)) and csrc/fs_gpreg.h (GP-regression
# hyper-parameters), used by _models.pyx.  The struct layouts and the
# signatures here must match the C headers.

from libc.stdint cimport int64_t

from fastsurrogate.core._common cimport fs_blas

cdef extern from "fs_models.h" nogil:
    ctypedef struct fs_gaussian:
        int dim
        int diagonal
        const double *mean
        const double *prec
    ctypedef struct fs_banana:
        double n, sum_y, sum_y2, sigma_y, sigma_q
    int fs_gaussian_eval(void *state, const double *q, double *value, double *grad)
    int fs_banana_eval(void *state, const double *q, double *value, double *grad)
    ctypedef struct fs_betabinom:
        int J
        const int64_t *y
        const int64_t *n
    int fs_betabinom_eval(void *state, const double *q, double *value, double *grad)
    double fs_digamma(double x)
    double fs_log_rising(double x, int64_t c)
    double fs_digamma_diff(double x, int64_t c)

cdef extern from "fs_garch.h" nogil:
    ctypedef struct fs_garch:
        int T, m, r
        double h0
    int fs_garch_init(fs_garch *g, const double *y, int T, int m, int r, double h0,
                      double prior_mean, double prior_sd)
    void fs_garch_free(fs_garch *g)
    int fs_garch_eval(void *state, const double *q, double *value, double *grad)

cdef extern from "fs_gpreg.h" nogil:
    ctypedef struct fs_gpreg:
        int n, d, dim
    int fs_gpreg_init(fs_gpreg *s, const fs_blas *blas, const double *X, const double *y,
                      int n, int d, int sample_sf2, double signal_variance,
                      const double *prior_mean, const double *prior_sd)
    void fs_gpreg_free(fs_gpreg *s)
    int fs_gpreg_eval(void *state, const double *q, double *value, double *grad)
