#include "fs_papers.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- ICA ---------------------------------------------------------------- */

#define FS_ICA_BLOCK_ROWS 1024

/* Per block: d*d gradient partials, 1 value partial, d for y. */
static size_t ica_stride(int d) { return (size_t)d * d + 1 + (size_t)d; }

size_t fs_ica_workspace_size(int n, int d, size_t block_rows)
{
    const size_t nb = ((size_t)n + block_rows - 1) / block_rows;
    /* blocks, then LU (d*d), inverse (d*d), pivots (d), column (d) */
    return nb * ica_stride(d) + 2 * (size_t)d * d + 2 * (size_t)d;
}

int fs_ica_init(fs_ica *m, const double *X, int n, int d, double prior_var,
                int n_threads)
{
    int status;
    memset(m, 0, sizeof(*m));
    if (X == NULL || n < 1 || d < 1 || d > 512 || n_threads < 1
        || !(prior_var > 0.0) || !isfinite(prior_var))
        return FS_EINVAL;
    m->n = n;
    m->d = d;
    m->n_threads = n_threads;
    m->X = X;
    m->prior_var = prior_var;
    m->block_rows = FS_ICA_BLOCK_ROWS;
    m->n_blocks = (int)(((size_t)n + m->block_rows - 1) / m->block_rows);
    status = fs_pool_init(&m->pool, fs_ica_workspace_size(n, d, m->block_rows));
    if (status != FS_OK) {
        fs_pool_free(&m->pool);
        return status;
    }
    return FS_OK;
}

void fs_ica_free(fs_ica *m)
{
    fs_pool_free(&m->pool);
}

/* -log p(y) = |y| + 2 log1p(exp(-|y|)) for the logistic density. */
static inline double ica_neg_logp(double y)
{
    const double a = fabs(y);
    return a + 2.0 * log1p(exp(-a));
}

/* Rows i0..i1 of the data sum: acc[0..d*d) += tanh(y/2) x^T, acc[d*d] +=
   sum -log p(y), with y = W x (scratch ybuf). */
static void ica_block(const fs_ica *m, const double *W, size_t i0, size_t i1,
                      int want_value, int want_grad, double *FS_RESTRICT acc)
{
    const int d = m->d;
    double *G = acc, *v = acc + (size_t)d * d, *y = acc + (size_t)d * d + 1;
    double val = 0.0;
    size_t i;
    int a, b;
    memset(acc, 0, ((size_t)d * d + 1) * sizeof(double));
    for (i = i0; i < i1; i++) {
        const double *x = m->X + i * (size_t)d;
        for (a = 0; a < d; a++) {
            const double *w = W + (size_t)a * d;
            double s = 0.0;
            for (b = 0; b < d; b++) s += w[b] * x[b];
            y[a] = s;
        }
        if (want_value)
            for (a = 0; a < d; a++) val += ica_neg_logp(y[a]);
        if (want_grad)
            for (a = 0; a < d; a++) {
                const double t = tanh(0.5 * y[a]);
                double *g = G + (size_t)a * d;
                for (b = 0; b < d; b++) g[b] += t * x[b];
            }
    }
    *v = val;
}

/* LU with partial pivoting of the d x d matrix in lu (in place); returns
   log|det| (-inf when singular). piv holds the row swaps. */
static double lu_logdet(double *lu, int d, int *piv)
{
    double logdet = 0.0;
    int k, i, j;
    for (k = 0; k < d; k++) {
        int p = k;
        double best = fabs(lu[(size_t)k * d + k]);
        for (i = k + 1; i < d; i++) {
            const double v = fabs(lu[(size_t)i * d + k]);
            if (v > best) { best = v; p = i; }
        }
        piv[k] = p;
        if (best == 0.0) return -INFINITY;
        if (p != k)
            for (j = 0; j < d; j++) {
                const double t = lu[(size_t)k * d + j];
                lu[(size_t)k * d + j] = lu[(size_t)p * d + j];
                lu[(size_t)p * d + j] = t;
            }
        logdet += log(best);
        for (i = k + 1; i < d; i++) {
            const double f = lu[(size_t)i * d + k] / lu[(size_t)k * d + k];
            lu[(size_t)i * d + k] = f;
            for (j = k + 1; j < d; j++) lu[(size_t)i * d + j] -= f * lu[(size_t)k * d + j];
        }
    }
    return logdet;
}

/* inv = W^{-1} (row-major) from the LU factors; col is scratch of d. */
static void lu_inverse(const double *lu, const int *piv, int d, double *FS_RESTRICT inv,
                       double *FS_RESTRICT col)
{
    int c, i, j;
    for (c = 0; c < d; c++) {
        for (i = 0; i < d; i++) col[i] = (i == c) ? 1.0 : 0.0;
        for (i = 0; i < d; i++)          /* apply the row swaps */
            if (piv[i] != i) {
                const double t = col[i];
                col[i] = col[piv[i]];
                col[piv[i]] = t;
            }
        for (i = 0; i < d; i++) {        /* L (unit diagonal) */
            double s = col[i];
            for (j = 0; j < i; j++) s -= lu[(size_t)i * d + j] * col[j];
            col[i] = s;
        }
        for (i = d - 1; i >= 0; i--) {   /* U */
            double s = col[i];
            for (j = i + 1; j < d; j++) s -= lu[(size_t)i * d + j] * col[j];
            col[i] = s / lu[(size_t)i * d + i];
        }
        for (i = 0; i < d; i++) inv[(size_t)i * d + c] = col[i];
    }
}

static int ica_eval_work(const fs_ica *m, const double *W, double *value,
                         double *grad, double *work)
{
    const int d = m->d, dd = d * d, nb = m->n_blocks;
    const size_t stride = ica_stride(d), rows = m->block_rows, n = (size_t)m->n;
    const int want_value = value != NULL, want_grad = grad != NULL;
    double *lu = work + (size_t)nb * stride, *inv = lu + dd;
    int *piv = (int *)(inv + dd);   /* d ints fit in d doubles */
    double *col = inv + dd + d;
    double logdet, v = 0.0, pr = 0.0;
    int b, j, nt;

    nt = m->n_threads < nb ? m->n_threads : nb;
#ifdef _OPENMP
    if (nt > 1 && omp_in_parallel() && omp_get_num_threads() > 1) {
        /* inside a running team: blocks as tasks (as fs_glm_eval does) */
#pragma omp taskloop grainsize(4)
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * rows, i1 = i0 + rows < n ? i0 + rows : n;
            ica_block(m, W, i0, i1, want_value, want_grad, work + (size_t)b * stride);
        }
    } else if (nt > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * rows, i1 = i0 + rows < n ? i0 + rows : n;
            ica_block(m, W, i0, i1, want_value, want_grad, work + (size_t)b * stride);
        }
    } else
#endif
    {
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * rows, i1 = i0 + rows < n ? i0 + rows : n;
            ica_block(m, W, i0, i1, want_value, want_grad, work + (size_t)b * stride);
        }
    }
    (void)nt;

    memcpy(lu, W, (size_t)dd * sizeof(double));
    logdet = lu_logdet(lu, d, piv);
    if (!isfinite(logdet)) {
        if (want_value) *value = INFINITY;
        if (want_grad) for (j = 0; j < dd; j++) grad[j] = NAN;
        return FS_OK;
    }
    for (j = 0; j < dd; j++) pr += W[j] * W[j];
    if (want_value) {
        for (b = 0; b < nb; b++) v += work[(size_t)b * stride + dd];
        *value = v - (double)m->n * logdet + 0.5 * pr / m->prior_var;
    }
    if (want_grad) {
        int a, c;
        for (j = 0; j < dd; j++) grad[j] = work[j];
        for (b = 1; b < nb; b++) {
            const double *p = work + (size_t)b * stride;
            for (j = 0; j < dd; j++) grad[j] += p[j];
        }
        lu_inverse(lu, piv, d, inv, col);
        for (a = 0; a < d; a++)
            for (c = 0; c < d; c++)
                grad[(size_t)a * d + c] += -(double)m->n * inv[(size_t)c * d + a]
                                           + W[(size_t)a * d + c] / m->prior_var;
    }
    return FS_OK;
}

int fs_ica_eval(void *state, const double *q, double *value, double *grad)
{
    fs_ica *m = (fs_ica *)state;
    double *work;
    int status;
    if (value == NULL && grad == NULL) return FS_OK;
    work = fs_pool_take(&m->pool);
    if (work == NULL) return FS_ENOMEM;
    status = ica_eval_work(m, q, value, grad, work);
    fs_pool_give(&m->pool, work);
    return status;
}

/* ---- the NNgHMC banana ---------------------------------------------------- */

int fs_twisted_banana_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_twisted_banana *b = (const fs_twisted_banana *)state;
    const double r = q[1] + b->B * q[0] * q[0] - b->C;
    if (value) *value = 0.5 * q[0] * q[0] / b->A + 0.5 * r * r;
    if (grad) {
        grad[0] = q[0] / b->A + 2.0 * b->B * q[0] * r;
        grad[1] = r;
    }
    return FS_OK;
}

/* ---- Laplace prior ---------------------------------------------------------- */

int fs_laplace_prior_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_laplace_prior *s = (const fs_laplace_prior *)state;
    const int d = s->inner.dim;
    double v = 0.0;
    int j, status;
    status = s->inner.eval(s->inner.state, q, value, grad);
    if (status != FS_OK) return status;
    for (j = 0; j < d; j++) {
        const double u = q[j] - s->loc[j], ib = 1.0 / s->scale[j];
        if (value) v += fabs(u) * ib;
        if (grad) grad[j] += (u > 0.0) ? ib : (u < 0.0) ? -ib : 0.0;
    }
    if (value) *value += v + s->log_norm;
    return FS_OK;
}
