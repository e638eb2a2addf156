#include "fs_gpreg.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#define FS_LOG_2PI 1.8378770664093454836
#define FS_SQRT3 1.7320508075688772935

int fs_gpreg_init(fs_gpreg *s, const fs_blas *blas, const double *X, const double *y,
                  int n, int d, int sample_sf2, double signal_variance,
                  const double *prior_mean, const double *prior_sd)
{
    size_t nn, slot;
    int p;
    memset(s, 0, sizeof(*s));
    if (blas == NULL || blas->dpotrf == NULL || blas->dpotri == NULL || blas->dtrsv == NULL)
        return FS_EINVAL;
    if (X == NULL || y == NULL || prior_mean == NULL || prior_sd == NULL) return FS_EINVAL;
    if (n < 1 || d < 1) return FS_EINVAL;
    nn = (size_t)n * (size_t)n;
    if (nn / (size_t)n != (size_t)n || nn > ((size_t)-1) / (2 * sizeof(double)) - 4 * (size_t)n)
        return FS_EINVAL;
    s->dim = sample_sf2 ? 3 : 2;
    if (!sample_sf2 && (!(signal_variance > 0.0) || !fs_isfinite(signal_variance)))
        return FS_EINVAL;
    s->log_const = 0.5 * (double)n * FS_LOG_2PI;
    for (p = 0; p < s->dim; p++) {
        if (!(prior_sd[p] > 0.0) || !fs_isfinite(prior_sd[p]) || !fs_isfinite(prior_mean[p]))
            return FS_EINVAL;
        s->prior_mean[p] = prior_mean[p];
        s->prior_sd[p] = prior_sd[p];
        s->log_const += log(prior_sd[p]) + 0.5 * FS_LOG_2PI;
    }
    s->n = n;
    s->d = d;
    s->X = X;
    s->y = y;
    s->sf2 = sample_sf2 ? 1.0 : signal_variance;
    s->blas = blas;
    /* K (n*n, column-major), dK/dlog l packed below the diagonal, two n-vectors */
    slot = nn + (size_t)n * ((size_t)n - 1) / 2 + 2 * (size_t)n;
    if (fs_pool_init(&s->pool, slot) != FS_OK) {
        fs_pool_free(&s->pool);
        return FS_ENOMEM;
    }
    return FS_OK;
}

void fs_gpreg_free(fs_gpreg *s)
{
    if (s == NULL) return;
    fs_pool_free(&s->pool);
}

static void gpreg_fill(const fs_gpreg *s, double *value, double *grad, double v, double g)
{
    int p;
    if (value) *value = v;
    if (grad)
        for (p = 0; p < s->dim; p++) grad[p] = g;
}

/* K (lower triangle, column-major) and, when dl != NULL, dK/dlog l for i > j
   packed column by column. */
static void gpreg_kernel(const fs_gpreg *s, double ell, double sn2, double sf2,
                         double *FS_RESTRICT K, double *FS_RESTRICT dl)
{
    const int n = s->n, d = s->d;
    const double c = FS_SQRT3 / ell;     /* inf when ell underflows to 0 */
    size_t p = 0;
    int i, j, k;
    for (j = 0; j < n; j++) {
        const double *xj = s->X + (size_t)j * d;
        double *Kj = K + (size_t)j * n;
        Kj[j] = sf2 + sn2;
        for (i = j + 1; i < n; i++) {
            const double *xi = s->X + (size_t)i * d;
            double r2 = 0.0, t, e, kij = 0.0, dij = 0.0;
            for (k = 0; k < d; k++) {
                const double u = xi[k] - xj[k];
                r2 += u * u;
            }
            t = r2 > 0.0 ? c * sqrt(r2) : 0.0;
            if (t < 745.0) {              /* exp(-t) > 0; false for inf */
                e = exp(-t);
                kij = sf2 * (1.0 + t) * e;
                dij = sf2 * t * t * e;
            }
            Kj[i] = kij;
            if (dl) dl[p++] = dij;
        }
    }
}

int fs_gpreg_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_gpreg *s = (const fs_gpreg *)state;
    const fs_blas *B = s->blas;
    const int n = s->n, one = 1;
    const char lower = 'L', notrans = 'N', trans = 'T', nonunit = 'N';
    double *work, *K, *dl, *v;
    double ell, sn2, sf2, half_logdet = 0.0, quad = 0.0, prior = 0.0, u[3];
    int info = 0, i, j, p;
    size_t pk;

    if (value == NULL && grad == NULL) return FS_OK;
    for (p = 0; p < s->dim; p++) {
        if (!fs_isfinite(q[p])) {
            gpreg_fill(s, value, grad, NAN, NAN);
            return FS_OK;
        }
        u[p] = (q[p] - s->prior_mean[p]) / s->prior_sd[p];
        prior += 0.5 * u[p] * u[p];
    }
    ell = exp(q[0]);
    sn2 = exp(q[1]);
    sf2 = s->dim == 3 ? exp(q[2]) : s->sf2;

    work = fs_pool_take((fs_pool *)&s->pool);
    if (work == NULL) return FS_ENOMEM;
    K = work;
    dl = K + (size_t)n * n;
    v = dl + (size_t)n * (n - 1) / 2;

    gpreg_kernel(s, ell, sn2, sf2, K, grad ? dl : NULL);
    ((void (*)(const char *, const int *, double *, const int *, int *))B->dpotrf)(
        &lower, &n, K, &n, &info);
    if (info != 0) {
        fs_pool_give((fs_pool *)&s->pool, work);
        if (info < 0) return FS_ELAPACK;
        gpreg_fill(s, value, grad, INFINITY, NAN);      /* not positive definite */
        return FS_OK;
    }
    for (i = 0; i < n; i++) half_logdet += log(K[(size_t)i * n + i]);
    memcpy(v, s->y, sizeof(double) * (size_t)n);
    ((void (*)(const char *, const char *, const char *, const int *, const double *,
               const int *, double *, const int *))B->dtrsv)(
        &lower, &notrans, &nonunit, &n, K, &n, v, &one);          /* v = L^{-1} y */
    for (i = 0; i < n; i++) quad += v[i] * v[i];
    if (value) *value = 0.5 * quad + half_logdet + s->log_const + prior;

    if (grad) {
        double trW = 0.0, ya = 0.0, gl = 0.0;
        ((void (*)(const char *, const char *, const char *, const int *, const double *,
                   const int *, double *, const int *))B->dtrsv)(
            &lower, &trans, &nonunit, &n, K, &n, v, &one);        /* v = K^{-1} y */
        ((void (*)(const char *, const int *, double *, const int *, int *))B->dpotri)(
            &lower, &n, K, &n, &info);                            /* K^{-1}, lower */
        if (info != 0) {
            fs_pool_give((fs_pool *)&s->pool, work);
            if (info < 0) return FS_ELAPACK;
            gpreg_fill(s, NULL, grad, 0.0, NAN);
            return FS_OK;
        }
        pk = 0;
        for (j = 0; j < n; j++) {
            const double *Kj = K + (size_t)j * n;
            const double aj = v[j];
            double sk = 0.0, sa = 0.0;
            trW += Kj[j] - aj * aj;
            ya += s->y[j] * aj;
            for (i = j + 1; i < n; i++) {
                sk += Kj[i] * dl[pk];
                sa += v[i] * dl[pk];
                pk++;
            }
            gl += sk - aj * sa;
        }
        /* 0.5 tr(W dK/dlog l) with both symmetric and dK zero on the diagonal */
        grad[0] = gl + u[0] / s->prior_sd[0];
        grad[1] = 0.5 * sn2 * trW + u[1] / s->prior_sd[1];
        if (s->dim == 3)
            grad[2] = 0.5 * ((double)n - ya - sn2 * trW) + u[2] / s->prior_sd[2];
    }
    fs_pool_give((fs_pool *)&s->pool, work);
    return FS_OK;
}
