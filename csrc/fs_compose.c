/* fs_compose.c: weighted sums of potentials, the trusted drive and the
 * recording potential. */
#include <math.h>
#include <string.h>
#include "fs_compose.h"

int fs_weighted_sum_init(fs_weighted_sum *st, int dim, int n_terms,
                         const fs_potential *terms, const double *weights)
{
    int k;
    st->pool.mem = NULL;
    if (dim < 1 || n_terms < 1 || terms == NULL || weights == NULL) return FS_EINVAL;
    for (k = 0; k < n_terms; k++)
        if (terms[k].dim != dim || terms[k].eval == NULL) return FS_EINVAL;
    st->dim = dim;
    st->n_terms = n_terms;
    st->terms = terms;
    st->weights = weights;
    return fs_pool_init(&st->pool, (size_t)dim);
}

void fs_weighted_sum_free(fs_weighted_sum *st)
{
    fs_pool_free(&st->pool);
}

int fs_weighted_sum_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_weighted_sum *st = (const fs_weighted_sum *)state;
    const int d = st->dim;
    double total = 0.0, uk, w;
    double *gk = NULL;
    int k, j, status = FS_OK, first = 1;

    if (grad != NULL) {
        gk = fs_pool_take((fs_pool *)&st->pool);
        if (gk == NULL) return FS_ENOMEM;
        memset(grad, 0, sizeof(double) * (size_t)d);
    }
    for (k = 0; k < st->n_terms; k++) {
        w = st->weights[k];
        if (w == 0.0) continue;
        uk = 0.0;
        /* The first term with a gradient writes straight into grad when its
         * weight is one (the common case of a likelihood plus corrections). */
        if (grad != NULL && first && w == 1.0) {
            status = st->terms[k].eval(st->terms[k].state, q, value ? &uk : NULL, grad);
            first = 0;
        } else {
            status = st->terms[k].eval(st->terms[k].state, q, value ? &uk : NULL, gk);
            if (status == FS_OK && grad != NULL) {
                for (j = 0; j < d; j++) grad[j] += w * gk[j];
                first = 0;
            }
        }
        if (status != FS_OK) break;
        total += w * uk;
    }
    if (gk != NULL) fs_pool_give((fs_pool *)&st->pool, gk);
    if (status == FS_OK && value != NULL) *value = total;
    return status;
}

int fs_clamped_sum_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_clamped_sum *st = (const fs_clamped_sum *)state;
    const fs_weighted_sum *sum = st->sum;
    const fs_potential *z = &sum->terms[0], *base = &sum->terms[1];
    const double wz = sum->weights[0], wl = sum->weights[1], R = *st->radius;
    const int d = sum->dim;
    double ul = 0.0, uz = 0.0, r, s = 1.0, t;
    double *gz = NULL, *p = NULL;
    int j, status;

    status = base->eval(base->state, q, &ul, grad);
    if (status != FS_OK || wz == 0.0) {
        if (status == FS_OK && grad != NULL)
            for (j = 0; j < d; j++) grad[j] *= wl;
        if (status == FS_OK && value != NULL) *value = wl * ul;
        return status;
    }
    r = sqrt(2.0 * fmax(ul - st->base_min, 0.0));
    if (grad != NULL) {
        gz = fs_pool_take((fs_pool *)&sum->pool);
        if (gz == NULL) return FS_ENOMEM;
    }
    if (r > R) {
        p = fs_pool_take((fs_pool *)&sum->pool);
        if (p == NULL) {
            if (gz != NULL) fs_pool_give((fs_pool *)&sum->pool, gz);
            return FS_ENOMEM;
        }
        s = R / r;
        for (j = 0; j < d; j++) p[j] = st->centre[j] + s * (q[j] - st->centre[j]);
    }
    status = z->eval(z->state, p != NULL ? p : q, &uz, gz);
    if (status == FS_OK && grad != NULL) {
        if (p == NULL) {
            for (j = 0; j < d; j++) grad[j] = wl * grad[j] + wz * gz[j];
        } else {
            /* d/dq z(p(q)) = s (g - ((q - c) . g / r^2) grad L), grad r = grad L / r */
            t = 0.0;
            for (j = 0; j < d; j++) t += (q[j] - st->centre[j]) * gz[j];
            t /= r * r;
            for (j = 0; j < d; j++) grad[j] = (wl - wz * s * t) * grad[j] + wz * s * gz[j];
        }
    }
    if (p != NULL) fs_pool_give((fs_pool *)&sum->pool, p);
    if (gz != NULL) fs_pool_give((fs_pool *)&sum->pool, gz);
    if (status == FS_OK && value != NULL) *value = wl * ul + wz * uz;
    return status;
}

double fs_trusted_distance2(const fs_trusted *st, const double *q)
{
    const int d = st->surrogate.dim;
    double r2 = 0.0, s;
    int i, j;
    for (i = 0; i < d; i++) {
        const double *w = st->whiten + (size_t)i * (size_t)d;
        s = 0.0;
        for (j = 0; j <= i; j++) s += w[j] * (q[j] - st->centre[j]);
        r2 += s * s;
    }
    return r2;
}

int fs_trusted_eval(void *state, const double *q, double *value, double *grad)
{
    fs_trusted *st = (fs_trusted *)state;
    const double R = *st->radius;
    const double r2 = fs_trusted_distance2(st, q);
    /* a NaN distance (q not finite) goes to the exact potential, which reports it */
    if (r2 <= R * R) {
        st->n_surrogate++;
        return st->surrogate.eval(st->surrogate.state, q, value, grad);
    }
    st->n_exact++;
    return st->exact.eval(st->exact.state, q, value, grad);
}

/* Keeps stored rows 0, 2, 4, ... (stream indices that are multiples of
 * 2 * every) in place, in order, and doubles `every`. */
static void decimate(fs_recorder *st, int d)
{
    long i, k = 0;
    for (i = 0; i < st->count; i += 2, k++) {
        if (i == k) continue;
        memcpy(st->q_buf + (size_t)k * (size_t)d, st->q_buf + (size_t)i * (size_t)d,
               sizeof(double) * (size_t)d);
        memcpy(st->g_buf + (size_t)k * (size_t)d, st->g_buf + (size_t)i * (size_t)d,
               sizeof(double) * (size_t)d);
        st->u_buf[k] = st->u_buf[i];
    }
    st->count = k;
    st->every *= 2;
}

int fs_recorder_eval(void *state, const double *q, double *value, double *grad)
{
    fs_recorder *st = (fs_recorder *)state;
    const int d = st->inner.dim;
    double u = NAN;
    int j, finite, status, stores, want_u, cand, full;

    if (!st->active || (grad == NULL && (st->value_grad == NULL || value == NULL)))
        return st->inner.eval(st->inner.state, q, value, grad);
    if (grad == NULL) grad = st->value_grad;
    /* a counted point whose index is a multiple of `every` is stored; when
     * the buffers are full it first halves them (decimate) and is stored
     * only if it is a multiple of the doubled `every` too */
    full = st->count >= st->capacity;
    cand = (st->seen % st->every == 0) && (!full || (st->decimate && st->capacity >= 2));
    stores = cand && (!full || st->seen % (2 * st->every) == 0);
    want_u = (value != NULL) || (stores && st->need_value);
    status = st->inner.eval(st->inner.state, q, want_u ? &u : NULL, grad);
    if (value != NULL) *value = u;
    if (status != FS_OK) return status;
    finite = !want_u || fs_isfinite(u);
    for (j = 0; j < d && finite; j++) finite = fs_isfinite(grad[j]);
    if (!finite) return status;
    if (cand && full) decimate(st, d);
    st->seen++;
    if (!stores) return status;
    memcpy(st->q_buf + (size_t)st->count * (size_t)d, q, sizeof(double) * (size_t)d);
    memcpy(st->g_buf + (size_t)st->count * (size_t)d, grad, sizeof(double) * (size_t)d);
    st->u_buf[st->count] = u;
    st->count++;
    return status;
}
