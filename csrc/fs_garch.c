#include "fs_garch.h"

#include <math.h>
#include <stdlib.h>

#define FS_LOG_2PI 1.8378770664093454836

int fs_garch_init(fs_garch *g, const double *y, int T, int m, int r, double h0,
                  double prior_mean, double prior_sd)
{
    int t, k;
    size_t slot;
    g->x = NULL;
    g->pool.mem = NULL;
    if (y == NULL || T < 1 || m < 0 || r < 0 || m + r < 1) return FS_EINVAL;
    if (!(h0 > 0.0) || !fs_isfinite(h0)) return FS_EINVAL;
    if (!(prior_sd > 0.0) || !fs_isfinite(prior_sd) || !fs_isfinite(prior_mean))
        return FS_EINVAL;
    k = m + r;
    g->T = T;
    g->m = m;
    g->r = r;
    g->pad = m > r ? m : r;
    g->y = y;
    g->h0 = h0;
    g->prior_mean = prior_mean;
    g->prior_sd = prior_sd;
    g->log_const = 0.5 * FS_LOG_2PI * (double)(T + 1) + log(prior_sd) - lgamma((double)k + 1.0);
    g->x = (double *)malloc(sizeof(double) * ((size_t)g->pad + (size_t)T));
    if (g->x == NULL) return FS_ENOMEM;
    for (t = 0; t < g->pad; t++) g->x[t] = h0;
    for (t = 0; t < T; t++) g->x[g->pad + t] = y[t] * y[t];
    /* H (pad + T), hbar (T + r), phi (k), dU/dphi (k) */
    slot = (size_t)g->pad + 2 * (size_t)T + (size_t)r + 2 * (size_t)k;
    if (fs_pool_init(&g->pool, slot) != FS_OK) {
        fs_pool_free(&g->pool);
        free(g->x);
        g->x = NULL;
        return FS_ENOMEM;
    }
    return FS_OK;
}

void fs_garch_free(fs_garch *g)
{
    if (g == NULL) return;
    fs_pool_free(&g->pool);
    free(g->x);
    g->x = NULL;
}

static int garch_nan(const fs_garch *g, double *value, double *grad)
{
    int i;
    if (value) *value = NAN;
    if (grad)
        for (i = 0; i < 1 + g->m + g->r; i++) grad[i] = NAN;
    return FS_OK;
}

int fs_garch_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_garch *g = (const fs_garch *)state;
    const int T = g->T, m = g->m, r = g->r, pad = g->pad, k = m + r;
    const double *x = g->x;
    double *work, *H, *hb, *phi, *G;
    double zmax, ssum, lse, a0, sum_z, sum_log_h, sum_quad, u0;
    int i, j, t;

    if (value == NULL && grad == NULL) return FS_OK;
    for (i = 0; i <= k; i++)
        if (!fs_isfinite(q[i])) return garch_nan(g, value, grad);

    work = fs_pool_take((fs_pool *)&g->pool);
    if (work == NULL) return FS_ENOMEM;
    H = work;                         /* pad + T */
    hb = H + pad + T;                 /* T + r   */
    phi = hb + T + r;                 /* k       */
    G = phi + k;                      /* k       */

    /* (alpha, beta, s) = softmax(z, 0), computed with the maximum shifted out */
    zmax = 0.0;
    for (i = 0; i < k; i++) zmax = q[1 + i] > zmax ? q[1 + i] : zmax;
    ssum = exp(-zmax);
    sum_z = 0.0;
    for (i = 0; i < k; i++) {
        phi[i] = exp(q[1 + i] - zmax);
        ssum += phi[i];
        sum_z += q[1 + i];
    }
    for (i = 0; i < k; i++) phi[i] /= ssum;
    lse = zmax + log(ssum);
    a0 = exp(q[0]);

    /* forward pass: h_t and the likelihood.  sum log h_t is taken as the log
       of running products (renormalised before they leave [1e-200, 1e200];
       factors outside [1e-100, 1e100] are logged on their own): one log per
       few hundred steps instead of one per step. */
    for (t = 0; t < pad; t++) H[t] = g->h0;
    sum_log_h = 0.0;
    sum_quad = 0.0;
    {
        double prod = 1.0;
        for (t = pad; t < pad + T; t++) {
            double h = a0;
            for (i = 1; i <= m; i++) h += phi[i - 1] * x[t - i];
            for (j = 1; j <= r; j++) h += phi[m + j - 1] * H[t - j];
            H[t] = h;
            sum_quad += x[t] / h;
            if (h > 1e-100 && h < 1e100) {
                prod *= h;
                if (!(prod > 1e-200 && prod < 1e200)) {
                    sum_log_h += log(prod);
                    prod = 1.0;
                }
            } else {
                sum_log_h += log(h);
            }
        }
        sum_log_h += log(prod);
    }

    u0 = (q[0] - g->prior_mean) / g->prior_sd;
    if (value)
        *value = 0.5 * (sum_log_h + sum_quad) + 0.5 * u0 * u0 + g->log_const
                 - (sum_z - (double)(k + 1) * lse);

    if (grad) {
        /* adjoint pass: hbar_t = dU/dh_t + sum_j beta_j hbar_{t+j} */
        double G0 = 0.0, pg = 0.0;
        for (i = 0; i < k; i++) G[i] = 0.0;
        for (j = 0; j < r; j++) hb[T + j] = 0.0;
        for (t = T - 1; t >= 0; t--) {
            const int s = pad + t;
            const double inv = 1.0 / H[s];
            double b = 0.5 * inv * (1.0 - x[s] * inv);
            for (j = 1; j <= r; j++) b += phi[m + j - 1] * hb[t + j];
            hb[t] = b;
            G0 += b;
            for (i = 1; i <= m; i++) G[i - 1] += b * x[s - i];
            for (j = 1; j <= r; j++) G[m + j - 1] += b * H[s - j];
        }
        grad[0] = a0 * G0 + u0 / g->prior_sd;
        /* d phi_i / d z_j = phi_i (delta_ij - phi_j); the log-Jacobian term
           -sum log phi has derivative (k + 1) phi_j - 1 in z_j. */
        for (i = 0; i < k; i++) pg += phi[i] * G[i];
        for (j = 0; j < k; j++)
            grad[1 + j] = phi[j] * (G[j] - pg) + (double)(k + 1) * phi[j] - 1.0;
    }
    fs_pool_give((fs_pool *)&g->pool, work);
    return FS_OK;
}
