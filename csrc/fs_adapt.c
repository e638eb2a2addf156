/* fs_adapt.c: the metric from draws and gradients (see fs_adapt.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fs_adapt.h"

#define LOWER 1e-20
#define UPPER 1e20
#define RIDGE 1e-3      /* added to both scaled covariances (low rank)      */
#define CUTOFF 2.0      /* eigenvalues outside [1/CUTOFF, CUTOFF] are kept  */

static double clamp_metric(double x)
{
    if (x != x) return 1.0;
    if (x < LOWER) return LOWER;
    return x > UPPER ? UPPER : x;
}

static void set_diag(fs_metric_adapt *a, int j, double inv)
{
    const int d = a->dim;
    inv = clamp_metric(inv);
    if (a->low_rank) {
        a->inv_metric[(size_t)j * d + j] = inv;
        a->metric_chol[(size_t)j * d + j] = 1.0 / sqrt(inv);
    } else {
        a->inv_metric[j] = inv;
        a->metric_chol[j] = 1.0 / sqrt(inv);
    }
}

/* Welford: one state into an estimator of 4 * dim doubles, n states so far. */
static void add_state(double *s, int d, double n, const double *q, const double *g)
{
    double *mq = s, *sq = s + d, *mg = s + 2 * (size_t)d, *sg = s + 3 * (size_t)d;
    const double w = 1.0 / (n + 1.0);
    int j;
    for (j = 0; j < d; j++) {
        double dq = q[j] - mq[j], dg = g[j] - mg[j];
        mq[j] += w * dq;
        sq[j] += dq * (q[j] - mq[j]);
        mg[j] += w * dg;
        sg[j] += dg * (g[j] - mg[j]);
    }
}

static double *window(fs_metric_adapt *a) { return a->stats + 8 * (size_t)a->dim; }

void fs_metric_adapt_init(fs_metric_adapt *a, long n_warmup, const double *q,
                          const double *g)
{
    const int d = a->dim;
    int j;
    memset(a->stats, 0, sizeof(double) * FS_METRIC_ADAPT_STATS(d, a->low_rank));
    if (a->low_rank) {
        memset(a->inv_metric, 0, sizeof(double) * (size_t)d * d);
        memset(a->metric_chol, 0, sizeof(double) * (size_t)d * d);
    }
    a->iteration = 0.0;
    a->early_end = floor(0.3 * (double)n_warmup);
    a->metric_end = (double)n_warmup - floor(0.15 * (double)n_warmup);
    a->early_switch = 10.0;
    a->late_switch = FS_METRIC_ADAPT_WINDOW;
    a->n_updates = 0.0;
    add_state(a->stats, d, 0.0, q, g);
    add_state(a->stats + 4 * (size_t)d, d, 0.0, q, g);
    a->n_fg = a->n_bg = 1.0;
    if (a->low_rank) {
        memcpy(window(a), q, sizeof(double) * (size_t)d);
        memcpy(window(a) + d, g, sizeof(double) * (size_t)d);
    }
    for (j = 0; j < d; j++) {
        double ag = fabs(g[j]);
        set_diag(a, j, ag > 0.0 && fs_isfinite(ag) ? 1.0 / ag : 1.0);
    }
}

/* ---- low rank ------------------------------------------------------------ */

/* S (k x k, symmetric) := V f(w) V^T from its eigenpairs, f = w^power
   (eigenvalues below 1e-300 taken as 1e-300).  V, w, work: scratch. */
static int sym_power(const fs_blas *bl, int k, double *S, double power, double *V,
                     double *w, double *work, int lwork)
{
    int info = 0, i, j, m;
    memcpy(V, S, sizeof(double) * (size_t)k * k);
    bl->dsyev("V", "L", &k, V, &k, w, work, &lwork, &info);
    if (info != 0) return FS_ELAPACK;
    for (i = 0; i < k; i++) w[i] = pow(w[i] > 1e-300 ? w[i] : 1e-300, power);
    for (i = 0; i < k; i++)
        for (j = 0; j <= i; j++) {
            double s = 0.0;
            for (m = 0; m < k; m++) s += V[(size_t)m * k + i] * w[m] * V[(size_t)m * k + j];
            S[(size_t)j * k + i] = S[(size_t)i * k + j] = s;
        }
    return FS_OK;
}

/* C := A B (k x k, column-major). */
static void matmul(int k, const double *A, const double *B, double *C)
{
    int i, j, m;
    for (j = 0; j < k; j++)
        for (i = 0; i < k; i++) {
            double s = 0.0;
            for (m = 0; m < k; m++) s += A[(size_t)m * k + i] * B[(size_t)j * k + m];
            C[(size_t)j * k + i] = s;
        }
}

/* Orthonormal basis (columns of Q, d x *k, column-major) of the span of the
   m columns of Z (d x m): Gram-Schmidt twice per column, a column kept when
   what is left of it is above 1e-8 of its norm; at most d columns. */
static void basis(int d, int m, const double *Z, double *Q, int *k)
{
    int c, i, r, pass, n = 0;
    for (c = 0; c < m && n < d; c++) {
        double *v = Q + (size_t)n * d, norm0 = 0.0, norm = 0.0;
        memcpy(v, Z + (size_t)c * d, sizeof(double) * (size_t)d);
        for (i = 0; i < d; i++) norm0 += v[i] * v[i];
        if (!(norm0 > 0.0)) continue;
        for (pass = 0; pass < 2; pass++)
            for (r = 0; r < n; r++) {
                const double *u = Q + (size_t)r * d;
                double s = 0.0;
                for (i = 0; i < d; i++) s += u[i] * v[i];
                for (i = 0; i < d; i++) v[i] -= s * u[i];
            }
        for (i = 0; i < d; i++) norm += v[i] * v[i];
        if (!(norm > 1e-16 * norm0)) continue;
        norm = 1.0 / sqrt(norm);
        for (i = 0; i < d; i++) v[i] *= norm;
        n++;
    }
    *k = n;
}

/* Lower Cholesky factor of the row-major SPD M (d x d) into L, row-major. */
static int cholesky(int d, const double *M, double *L)
{
    int i, j, m;
    memset(L, 0, sizeof(double) * (size_t)d * d);
    for (i = 0; i < d; i++)
        for (j = 0; j <= i; j++) {
            double s = M[(size_t)i * d + j];
            for (m = 0; m < j; m++) s -= L[(size_t)i * d + m] * L[(size_t)j * d + m];
            if (i == j) {
                if (!(s > 0.0)) return FS_ESINGULAR;
                L[(size_t)i * d + i] = sqrt(s);
            } else {
                L[(size_t)i * d + j] = s / L[(size_t)j * d + j];
            }
        }
    return FS_OK;
}

/* The scaled window: sigma (d), then Z = [scaled q | scaled g] (d x 2n).
   Returns 0 when some coordinate has no spread (the metric is left as is). */
static int scaled_window(const fs_metric_adapt *a, const double *stats, const double *win,
                         int n, double *sigma, double *Z)
{
    const int d = a->dim;
    const double *mq = stats, *sq = stats + d, *mg = stats + 2 * (size_t)d;
    const double *sg = stats + 3 * (size_t)d;
    int i, j;
    for (j = 0; j < d; j++) {
        if (!(sq[j] > 0.0 && sg[j] > 0.0)) return 0;
        sigma[j] = sqrt(clamp_metric(sqrt(sq[j] / sg[j])));
    }
    for (i = 0; i < n; i++) {
        const double *q = win + 2 * (size_t)i * d, *g = q + d;
        double *zq = Z + (size_t)i * d, *zg = Z + (size_t)(n + i) * d;
        for (j = 0; j < d; j++) {
            zq[j] = (q[j] - mq[j]) / sigma[j];
            zg[j] = (g[j] - mg[j]) * sigma[j];
        }
    }
    return 1;
}

/* A = P P^T / n + RIDGE I for P = Q^T Z_cols (k x n). */
static void projected_cov(int d, int k, int n, const double *Q, const double *Z, double *P,
                          double *A)
{
    int i, j, m;
    for (i = 0; i < n; i++)
        for (j = 0; j < k; j++) {
            double s = 0.0;
            for (m = 0; m < d; m++) s += Q[(size_t)j * d + m] * Z[(size_t)i * d + m];
            P[(size_t)i * k + j] = s;
        }
    for (i = 0; i < k; i++)
        for (j = 0; j <= i; j++) {
            double s = 0.0;
            for (m = 0; m < n; m++) s += P[(size_t)m * k + i] * P[(size_t)m * k + j];
            A[(size_t)j * k + i] = A[(size_t)i * k + j] = s / n + (i == j ? RIDGE : 0.0);
        }
}

/* M^{-1} = D (I + sum (l - 1) u u^T) D and chol(M), M = D^{-1} (I + sum (1/l - 1) u u^T) D^{-1},
   over the eigenpairs of S (k x k: vectors V, values w) outside the cutoff. */
static int write_metric(fs_metric_adapt *a, int k, const double *Q, const double *V,
                        const double *w, const double *sigma, double *u, double *M)
{
    const int d = a->dim;
    double *inv = a->inv_metric;
    int r, i, j, m;
    memset(inv, 0, sizeof(double) * (size_t)d * d);
    memset(M, 0, sizeof(double) * (size_t)d * d);
    for (i = 0; i < d; i++) inv[(size_t)i * d + i] = M[(size_t)i * d + i] = 1.0;
    for (r = 0; r < k; r++) {
        const double l = w[r];
        if (!(l > CUTOFF || l < 1.0 / CUTOFF) || !(l > 0.0)) continue;
        for (i = 0; i < d; i++) {
            double s = 0.0;
            for (m = 0; m < k; m++) s += Q[(size_t)m * d + i] * V[(size_t)r * k + m];
            u[i] = s;
        }
        for (i = 0; i < d; i++)
            for (j = 0; j < d; j++) {
                inv[(size_t)i * d + j] += (l - 1.0) * u[i] * u[j];
                M[(size_t)i * d + j] += (1.0 / l - 1.0) * u[i] * u[j];
            }
    }
    for (i = 0; i < d; i++)
        for (j = 0; j < d; j++) {
            inv[(size_t)i * d + j] *= sigma[i] * sigma[j];
            M[(size_t)i * d + j] /= sigma[i] * sigma[j];
        }
    return cholesky(d, M, a->metric_chol);
}

/* The low-rank metric from the window of n states whose sums are `stats`. */
static int low_rank_update(fs_metric_adapt *a, const double *stats, int n)
{
    const int d = a->dim, m2 = 2 * n;
    const int kmax = m2 < d ? m2 : d, lwork = 3 * (kmax > 1 ? kmax : 1);
    const size_t kk = (size_t)kmax * kmax;
    double *mem, *sigma, *Z, *Q, *P, *A, *B, *V, *w, *work, *T, *M;
    int k, status = FS_OK;
    mem = malloc(sizeof(double) * ((size_t)d * (1 + 2 * (size_t)m2 + kmax + 1)
                                   + (size_t)kmax * m2 + 5 * kk + kmax + lwork
                                   + (size_t)d * d));
    if (mem == NULL) return FS_ENOMEM;
    sigma = mem; Z = sigma + d; Q = Z + (size_t)d * m2; P = Q + (size_t)d * kmax;
    A = P + (size_t)kmax * m2; B = A + kk; V = B + kk; T = V + kk; w = T + 2 * kk;
    work = w + kmax; M = work + lwork;
    if (!scaled_window(a, stats, window(a), n, sigma, Z)) goto done;
    basis(d, m2, Z, Q, &k);
    if (k == 0) goto done;
    projected_cov(d, k, n, Q, Z, P, A);               /* draws     */
    projected_cov(d, k, n, Q, Z + (size_t)d * n, P, B);  /* gradients */
    /* S = B^{-1/2} (B^{1/2} A B^{1/2})^{1/2} B^{-1/2} */
    memcpy(T, B, sizeof(double) * (size_t)k * k);
    if ((status = sym_power(a->blas, k, T, 0.5, V, w, work, lwork)) != FS_OK) goto done;
    matmul(k, T, A, T + kk);
    matmul(k, T + kk, T, A);                           /* A := B^1/2 A B^1/2 */
    if ((status = sym_power(a->blas, k, A, 0.5, V, w, work, lwork)) != FS_OK) goto done;
    if ((status = sym_power(a->blas, k, B, -0.5, V, w, work, lwork)) != FS_OK) goto done;
    matmul(k, B, A, T);
    matmul(k, T, B, A);                                /* A := S */
    memcpy(V, A, sizeof(double) * (size_t)k * k);
    {
        int info = 0, lw = lwork;
        a->blas->dsyev("V", "L", &k, V, &k, w, work, &lw, &info);
        if (info != 0) { status = FS_ELAPACK; goto done; }
    }
    status = write_metric(a, k, Q, V, w, sigma, Z, M);
done:
    free(mem);
    return status;
}

/* ---- the update ---------------------------------------------------------- */

static int feed(fs_metric_adapt *a, const double *q, const double *g)
{
    const int d = a->dim;
    int j;
    for (j = 0; j < d; j++)
        if (!fs_isfinite(q[j]) || !fs_isfinite(g[j])) return 0;
    if (a->low_rank && a->n_bg < FS_METRIC_ADAPT_WINDOW) {
        double *row = window(a) + 2 * (size_t)a->n_bg * d;
        memcpy(row, q, sizeof(double) * (size_t)d);
        memcpy(row + d, g, sizeof(double) * (size_t)d);
    }
    add_state(a->stats, d, a->n_fg, q, g);
    add_state(a->stats + 4 * (size_t)d, d, a->n_bg, q, g);
    a->n_fg += 1.0;
    a->n_bg += 1.0;
    return 1;
}

int fs_metric_adapt_update(fs_metric_adapt *a, const double *q, const double *g,
                           int divergent)
{
    const int d = a->dim;
    double *fg = a->stats, *bg = a->stats + 4 * (size_t)d;
    double it = a->iteration, every;
    int j, switched = 0;
    a->iteration += 1.0;
    if (it >= a->metric_end) return 0;
    if (!divergent) feed(a, q, g);
    every = it < a->early_end ? a->early_switch : a->late_switch;
    /* switch when the background holds a window and one more fits before
       the metric freezes */
    if (a->n_bg >= every && it + every <= a->metric_end) {
        if (a->low_rank) {
            int status = low_rank_update(a, bg, (int)a->n_bg);
            if (status != FS_OK) return status;
            switched = 1;
        }
        memcpy(fg, bg, sizeof(double) * 4 * (size_t)d);
        memset(bg, 0, sizeof(double) * 4 * (size_t)d);
        a->n_fg = a->n_bg;
        a->n_bg = 0.0;
    }
    if (a->low_rank) {
        if (!switched) return 0;
    } else {
        if (a->n_fg < 3.0) return 0;
        for (j = 0; j < d; j++) {
            double vq = fg[d + j], vg = fg[3 * d + j];   /* sums: the ratio needs no n */
            if (vq > 0.0 && vg > 0.0) set_diag(a, j, sqrt(vq / vg));
        }
    }
    a->n_updates += 1.0;
    return a->n_updates == 1.0;
}
