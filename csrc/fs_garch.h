/* fs_garch.h: the GARCH(m, r) posterior with Gaussian innovations
 * (NNgHMC paper, Li et al. 2019, section 4.3) as an fs_potential.
 *
 * Model, for t = 1..T:
 *   y_t = sigma_t eps_t,  eps_t ~ N(0, 1),
 *   h_t = sigma_t^2 = alpha0 + sum_{i=1..m} alpha_i y_{t-i}^2
 *                            + sum_{j=1..r} beta_j h_{t-j}.
 * m counts the ARCH terms (lagged squared observations), r the GARCH terms
 * (lagged variances).  Pre-sample values: y_{t}^2 = h_{t} = h0 for t <= 0,
 * with h0 a fixed constant chosen by the caller (the Python layer uses the
 * sample mean of y^2), so every observation enters the likelihood.
 *
 * Unconstrained parameters q (dim = 1 + m + r):
 *   q[0]       = log alpha0,
 *   q[1..m+r]  = z, with (alpha_1..alpha_m, beta_1..beta_r, s) =
 *                softmax(z_1, ..., z_{m+r}, 0)   (additive logistic map),
 * so alpha_i, beta_j > 0 and s = 1 - sum alpha - sum beta > 0 (covariance
 * stationarity).  Priors: log alpha0 ~ N(mu0, sd0^2); (alpha, beta, s)
 * uniform on the open k-simplex, k = m + r (density k!).  The log-Jacobian of
 * the additive logistic map is sum_{i=1..k+1} log phi_i, phi = (alpha, beta, s).
 *
 * U(q) = sum_t 0.5 (log 2 pi + log h_t + y_t^2 / h_t)
 *        + 0.5 ((q0 - mu0) / sd0)^2 + log(sd0 sqrt(2 pi))
 *        - log k! - sum_{i=1..k+1} log phi_i,
 * the negative log joint density of (y, q), constants included.
 */
#ifndef FS_GARCH_H
#define FS_GARCH_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fs_garch {
    int T, m, r;          /* series length, ARCH order, GARCH order           */
    int pad;              /* max(m, r): pre-sample slots in front of x        */
    const double *y;      /* T observations (not owned)                        */
    double *x;            /* pad + T: h0 (pre-sample), then y_t^2 (owned)     */
    double h0;            /* pre-sample y^2 and h                              */
    double prior_mean, prior_sd;  /* of log alpha0                             */
    double log_const;     /* constants of U (see above)                        */
    fs_pool pool;         /* per-call scratch                                  */
} fs_garch;

/* Fills g (copies y^2 into owned storage, allocates the scratch pool).
   Requires T >= 1, m >= 0, r >= 0, m + r >= 1, h0 > 0 finite, prior_sd > 0
   finite; returns FS_EINVAL otherwise, FS_ENOMEM on allocation failure.
   y must stay alive (and unchanged) while g is used. */
int fs_garch_init(fs_garch *g, const double *y, int T, int m, int r, double h0,
                  double prior_mean, double prior_sd);
void fs_garch_free(fs_garch *g);

/* The fs_potential_fn of the model above: one forward pass over the series
   (O(T (m + r))), and for the gradient one backward (adjoint) pass:
   hbar_t = dU/dh_t + sum_j beta_j hbar_{t+j}.  Thread-safe.  A q that is not
   finite gives U = NaN (gradient NaN) with FS_OK. */
int fs_garch_eval(void *state, const double *q, double *value, double *grad);

#ifdef __cplusplus
}
#endif
#endif /* FS_GARCH_H */
