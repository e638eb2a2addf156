/* fs_models.h: small analytic potentials (Gaussians, the banana target, the
 * beta-binomial overdispersion model) and the special functions they need.
 * Each has a state struct and an fs_potential_fn; all are thread-safe. */
#ifndef FS_MODELS_H
#define FS_MODELS_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

/* U(q) = 0.5 (q - m)^T P (q - m) with P the precision matrix.
   P is dim*dim row-major symmetric (dense) or dim values (diagonal). */
typedef struct fs_gaussian {
    int dim;
    int diagonal;          /* 1: prec holds dim values                  */
    const double *mean;    /* dim                                       */
    const double *prec;    /* dim*dim or dim                            */
} fs_gaussian;

int fs_gaussian_eval(void *state, const double *q, double *value, double *grad);

/* The banana-shaped target of the RNS-HMC / NNgHMC papers:
   y_i ~ N(q0 + q1^2, sigma_y^2), i = 1..n, q0, q1 ~ N(0, sigma_q^2).
   U = [S2 - 2 m S1 + n m^2] / (2 sigma_y^2) + (q0^2 + q1^2) / (2 sigma_q^2),
   m = q0 + q1^2, S1 = sum y_i, S2 = sum y_i^2 (sufficient statistics). */
typedef struct fs_banana {
    double n, sum_y, sum_y2;
    double sigma_y, sigma_q;
} fs_banana;

int fs_banana_eval(void *state, const double *q, double *value, double *grad);

/* The beta-binomial overdispersion model of the VHMC paper (section 4.1;
   Albert, Bayesian Computation with R, the cancer mortality example):
     y_j ~ BetaBinomial(n_j, K m, K (1 - m)),  j = 1..J,
     p(m, K) proportional to 1 / (m (1 - m)) * 1 / (1 + K)^2,
   on q = (logit m, log K).  The Jacobian m (1 - m) K cancels the 1/(m(1-m))
   factor, so
     U(q) = -sum_j [log B(K m + y_j, K (1-m) + n_j - y_j) - log B(K m, K (1-m))]
            - log K + 2 log(1 + K),
   i.e. -(log posterior density of q) without sum_j log C(n_j, y_j) (the prior
   is improper, so no normalising constant exists).  log-gamma and digamma
   differences at integer offsets are formed without cancellation (finite sums
   for small counts, Stirling / asymptotic differences for large arguments).
   Counts are not checked here: 0 <= y_j <= n_j is the caller's job. */
typedef struct fs_betabinom {
    int J;
    const int64_t *y;      /* J successes  */
    const int64_t *n;      /* J trials     */
} fs_betabinom;

int fs_betabinom_eval(void *state, const double *q, double *value, double *grad);

/* Digamma psi(x) for real x (reflection for x < 0; NaN at the poles
   0, -1, -2, ...).  Measured against 50-digit mpmath: relative error below
   1e-14 for |x - x0| > 0.1, x0 = 1.4616... the positive root, absolute error
   below 1e-15 near x0 (the upward recurrence cancels there). */
double fs_digamma(double x);

/* lgamma(x + c) - lgamma(x) and psi(x + c) - psi(x) for x > 0 and an integer
   c >= 0, without the cancellation of the literal differences. */
double fs_log_rising(double x, int64_t c);
double fs_digamma_diff(double x, int64_t c);

#ifdef __cplusplus
}
#endif
#endif /* FS_MODELS_H */
