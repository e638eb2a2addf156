/* fs_gpreg.h: the posterior of Gaussian-process regression hyper-parameters
 * (NNgHMC paper, Li et al. 2019, section 4.4) as an fs_potential.
 *
 * Data: inputs X (n x d, row-major), targets y (n).  Model:
 *   y ~ N(0, K),  K_ij = sf2 (1 + sqrt(3) r_ij / l) exp(-sqrt(3) r_ij / l)
 *                        + sn2 delta_ij,   r_ij = |x_i - x_j|   (Matern 3/2).
 * Unconstrained parameters: q = (log l, log sn2) with sf2 fixed, or
 * q = (log l, log sn2, log sf2).  Prior: q_p ~ N(mu_p, sd_p^2) independently,
 * i.e. log-normal priors on l, sn2, sf2; placed on q directly, the log-Jacobian
 * of the log transform is part of that density.
 *
 * U(q) = 0.5 y^T K^{-1} y + 0.5 log |K| + 0.5 n log 2 pi
 *        + sum_p [0.5 ((q_p - mu_p) / sd_p)^2 + log(sd_p sqrt(2 pi))],
 * the negative log joint density of (y, q), constants included.
 *
 * Gradient: with a = K^{-1} y and W = K^{-1} - a a^T,
 *   dU/dq_p = 0.5 tr(W dK/dq_p) + (q_p - mu_p) / sd_p^2,
 *   dK/dlog l   = sf2 t^2 exp(-t), t = sqrt(3) r / l   (zero on the diagonal),
 *   dK/dlog sn2 = sn2 I,
 *   dK/dlog sf2 = K - sn2 I, whose trace term is n - y^T a - sn2 tr W.
 * Value only: one Cholesky factorisation (dpotrf, n^3/3 flops) and one
 * triangular solve.  Value and gradient: in addition K^{-1} by dpotri
 * (2 n^3 / 3 flops) and O(n^2) traces.  BLAS/LAPACK come from the fs_blas table.
 */
#ifndef FS_GPREG_H
#define FS_GPREG_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fs_gpreg {
    int n, d;
    int dim;                 /* 2 (sf2 fixed) or 3 (sf2 sampled)               */
    const double *X;         /* n*d row-major (not owned)                      */
    const double *y;         /* n (not owned)                                  */
    double sf2;              /* the fixed signal variance when dim == 2        */
    double prior_mean[3], prior_sd[3];
    double log_const;        /* constants of U (see above)                     */
    const fs_blas *blas;
    fs_pool pool;            /* per-call scratch: n*n + n(n-1)/2 + 2n doubles  */
} fs_gpreg;

/* Fills s.  sample_sf2 = 0: dim 2 and sf2 fixed at signal_variance;
   sample_sf2 = 1: dim 3 (signal_variance unused).  prior_mean/prior_sd hold
   dim values.  Requires n >= 1, d >= 1, n*n within int range of BLAS, sd > 0,
   blas->dpotrf/dpotri/dtrsv set.  X, y, blas must outlive s. */
int fs_gpreg_init(fs_gpreg *s, const fs_blas *blas, const double *X, const double *y,
                  int n, int d, int sample_sf2, double signal_variance,
                  const double *prior_mean, const double *prior_sd);
void fs_gpreg_free(fs_gpreg *s);

/* The fs_potential_fn of the model above.  Thread-safe (scratch from the
   pool).  When K is not numerically positive definite, U = +inf and the
   gradient is NaN (FS_OK); a non-finite q gives NaN (FS_OK); a LAPACK
   argument error gives FS_ELAPACK. */
int fs_gpreg_eval(void *state, const double *q, double *value, double *grad);

#ifdef __cplusplus
}
#endif
#endif /* FS_GPREG_H */
