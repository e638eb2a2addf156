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
    inv = clamp_metric(inv);
    if (a->low_rank) {          /* sigma_j and 1 / sigma_j (fs_transition.h's layout) */
        a->inv_metric[j] = sqrt(inv);
        a->metric_chol[j] = 1.0 / sqrt(inv);
    } else {
        a->inv_metric[j] = inv;
        a->metric_chol[j] = 1.0 / sqrt(inv);
    }
}

/* The diagonal M^{-1}_jj = sqrt(Var q_j / Var g_j) from an estimator's sums
   (the ratio of the sums of squares needs no n); coordinates without
   spread keep their value. */
static void set_diag_from(fs_metric_adapt *a, const double *sums)
{
    const int d = a->dim;
    int j;
    for (j = 0; j < d; j++) {
        double vq = sums[d + j], vg = sums[3 * d + j];
        if (vq > 0.0 && vg > 0.0) set_diag(a, j, sqrt(vq / vg));
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

/* The foreground's states (low rank), q then g, 2 * dim doubles each. */
static double *window(fs_metric_adapt *a) { return a->stats + 16 * (size_t)a->dim; }

/* The current block's and the previous block's sums; the two blocks' states
   (low rank), the previous block's first. */
static double *block(fs_metric_adapt *a) { return a->stats + 8 * (size_t)a->dim; }
static double *prev_block(fs_metric_adapt *a) { return a->stats + 12 * (size_t)a->dim; }
static double *block_states(fs_metric_adapt *a)
{
    return window(a) + 4 * (size_t)a->dim * FS_METRIC_ADAPT_WINDOW;
}

void fs_metric_adapt_init(fs_metric_adapt *a, long n_warmup, int stop_early,
                          const double *q, const double *g)
{
    const int d = a->dim;
    int j;
    memset(a->stats, 0, sizeof(double) * FS_METRIC_ADAPT_STATS(d, a->low_rank));
    if (a->low_rank) a->inv_metric[d] = 0.0;     /* rank 0: the diagonal alone */
    a->iteration = 0.0;
    a->early_end = floor(0.3 * (double)n_warmup);
    a->metric_end = (double)n_warmup - floor(0.15 * (double)n_warmup);
    a->early_switch = 10.0;
    a->late_switch = FS_METRIC_ADAPT_WINDOW;
    a->n_updates = 0.0;
    a->stop_early = stop_early ? 1.0 : 0.0;
    a->n_block = a->n_prev = 0.0;
    a->warmup_end = (double)n_warmup;
    a->converged_at = -1.0;
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

/* The factored metric (fs_transition.h's layout): sigma, then the eigenpairs of S
   (k x k: vectors V, values w) outside the cutoff, each vector u = Q v. */
static void write_metric(fs_metric_adapt *a, int k, const double *Q, const double *V,
                         double *w, const double *sigma)
{
    const int d = a->dim, rmax = (int)a->inv_metric[d + 1];
    double *lam = a->inv_metric + d + 2, *U = lam + rmax, *f = a->metric_chol + d;
    int r = 0, c, i, m;
    for (i = 0; i < d; i++) {
        a->inv_metric[i] = sigma[i];
        a->metric_chol[i] = 1.0 / sigma[i];
    }
    /* the directions furthest from the diagonal first, at most rmax */
    while (r < rmax) {
        double best = log(CUTOFF), l;
        int pick = -1;
        double *u = U + (size_t)r * d;
        for (c = 0; c < k; c++) {
            double x = w[c] > 0.0 && fs_isfinite(w[c]) ? fabs(log(w[c])) : 0.0;
            if (x > best) { best = x; pick = c; }
        }
        if (pick < 0) break;
        l = w[pick];
        w[pick] = 1.0;                       /* taken */
        for (i = 0; i < d; i++) {
            double s = 0.0;
            for (m = 0; m < k; m++) s += Q[(size_t)m * d + i] * V[(size_t)pick * k + m];
            u[i] = s;
        }
        lam[r] = l;
        f[r] = 1.0 / sqrt(l) - 1.0;
        r++;
    }
    a->inv_metric[d] = (double)r;
}

/* The low-rank metric from the n states `win` whose sums are `stats`. */
static int low_rank_update(fs_metric_adapt *a, const double *stats, const double *win, int n)
{
    const int d = a->dim, m2 = 2 * n;
    const int kmax = m2 < d ? m2 : d, lwork = 3 * (kmax > 1 ? kmax : 1);
    const size_t kk = (size_t)kmax * kmax;
    double *mem, *sigma, *Z, *Q, *P, *A, *B, *V, *w, *work, *T;
    int k, status = FS_OK;
    mem = malloc(sizeof(double) * ((size_t)d * (1 + (size_t)m2 + kmax)
                                   + (size_t)kmax * m2 + 5 * kk + kmax + lwork));
    if (mem == NULL) return FS_ENOMEM;
    sigma = mem; Z = sigma + d; Q = Z + (size_t)d * m2; P = Q + (size_t)d * kmax;
    A = P + (size_t)kmax * m2; B = A + kk; V = B + kk; T = V + kk; w = T + 2 * kk;
    work = w + kmax;
    if (!scaled_window(a, stats, win, n, sigma, Z)) goto done;
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
    write_metric(a, k, Q, V, w, sigma);
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
    if (a->low_rank && a->n_fg < 2 * FS_METRIC_ADAPT_WINDOW) {
        double *row = window(a) + 2 * (size_t)a->n_fg * d;
        memcpy(row, q, sizeof(double) * (size_t)d);
        memcpy(row + d, g, sizeof(double) * (size_t)d);
    }
    add_state(a->stats, d, a->n_fg, q, g);
    add_state(a->stats + 4 * (size_t)d, d, a->n_bg, q, g);
    a->n_fg += 1.0;
    a->n_bg += 1.0;
    if (a->stop_early) {
        if (a->low_rank) {
            double *row = block_states(a)
                          + 2 * (size_t)d * (FS_METRIC_ADAPT_WINDOW + (size_t)a->n_block);
            memcpy(row, q, sizeof(double) * (size_t)d);
            memcpy(row + d, g, sizeof(double) * (size_t)d);
        }
        add_state(block(a), d, a->n_block, q, g);
        a->n_block += 1.0;
    }
    return 1;
}

/* ---- the end of the warm-up ---------------------------------------------- */

/* Do the current and the previous block agree: every coordinate's diagonal
   estimate within a factor FS_METRIC_ADAPT_AGREE?  (The ratio of the sums
   of squares needs no n.) */
static int blocks_agree(fs_metric_adapt *a)
{
    const int d = a->dim;
    const double *c = block(a), *p = prev_block(a);
    const double limit = 2.0 * log(FS_METRIC_ADAPT_AGREE);   /* on the squares */
    int j;
    for (j = 0; j < d; j++) {
        double cq = c[d + j], cg = c[3 * d + j], pq = p[d + j], pg = p[3 * d + j];
        double x;
        if (!(cq > 0.0 && cg > 0.0 && pq > 0.0 && pg > 0.0)) return 0;
        x = log(cq / cg) - log(pq / pg);
        if (!(fabs(x) <= limit)) return 0;
    }
    return 1;
}

/* The two blocks' sums together (Chan et al.'s pairwise update) into `out`. */
static void merge_blocks(fs_metric_adapt *a, double *out)
{
    const int d = a->dim;
    const double *c = block(a), *p = prev_block(a);
    const double nc = a->n_block, np = a->n_prev, n = nc + np;
    int part, j;
    for (part = 0; part < 2; part++) {          /* q, then g */
        const size_t m = 2 * (size_t)part * d, s = m + d;
        for (j = 0; j < d; j++) {
            double delta = c[m + j] - p[m + j];
            out[m + j] = p[m + j] + delta * nc / n;
            out[s + j] = p[s + j] + c[s + j] + delta * delta * np * nc / n;
        }
    }
}

/* At the end of a block: when it agrees with the previous one, the final
   metric from both (1 returned), else the block becomes the previous one. */
static int end_of_block(fs_metric_adapt *a)
{
    const int d = a->dim;
    /* the fixed schedule's last phase (the metric frozen), kept */
    const double last = a->warmup_end - a->metric_end;
    double *fg = a->stats;
    if (a->n_prev > 0.0 && a->iteration < a->metric_end && blocks_agree(a)) {
        merge_blocks(a, fg);           /* the foreground is not used any more */
        if (a->low_rank) {
            int status = low_rank_update(a, fg, block_states(a),
                                         (int)(a->n_prev + a->n_block));
            if (status != FS_OK) return status;
        } else {
            set_diag_from(a, fg);
        }
        a->converged_at = a->iteration;
        a->metric_end = a->iteration;
        a->warmup_end = a->iteration + last;
        a->n_updates += 1.0;
        return 1;
    }
    memcpy(prev_block(a), block(a), sizeof(double) * 4 * (size_t)d);
    memset(block(a), 0, sizeof(double) * 4 * (size_t)d);
    if (a->low_rank)
        memcpy(block_states(a), block_states(a) + 2 * (size_t)d * FS_METRIC_ADAPT_WINDOW,
               sizeof(double) * 2 * (size_t)d * FS_METRIC_ADAPT_WINDOW);
    a->n_prev = a->n_block;
    a->n_block = 0.0;
    return 0;
}

int fs_metric_adapt_update(fs_metric_adapt *a, const double *q, const double *g,
                           int divergent)
{
    const int d = a->dim;
    double *fg = a->stats, *bg = a->stats + 4 * (size_t)d;
    double it = a->iteration, every;
    int switched = 0, fed = 0, result;
    a->iteration += 1.0;
    if (a->converged_at >= 0.0)
        return a->iteration >= a->warmup_end ? FS_METRIC_ADAPT_DONE : 0;
    if (it >= a->metric_end) return 0;
    if (!divergent) fed = feed(a, q, g);
    every = it < a->early_end ? a->early_switch : a->late_switch;
    /* switch when the background holds a window and one more fits before
       the metric freezes */
    if (a->n_bg >= every && it + every <= a->metric_end) {
        if (a->low_rank) {
            /* from the foreground's states: the window just finished and
               the one before it; then the finished one starts the next */
            const int n_fg = (int)a->n_fg, n_bg = (int)a->n_bg;
            int status;
            if (n_fg > 2 * FS_METRIC_ADAPT_WINDOW) return FS_EINVAL;   /* not reached */
            status = low_rank_update(a, fg, window(a), n_fg);
            if (status != FS_OK) return status;
            memmove(window(a), window(a) + 2 * (size_t)(n_fg - n_bg) * d,
                    sizeof(double) * 2 * (size_t)n_bg * d);
            switched = 1;
        }
        memcpy(fg, bg, sizeof(double) * 4 * (size_t)d);
        memset(bg, 0, sizeof(double) * 4 * (size_t)d);
        a->n_fg = a->n_bg;
        a->n_bg = 0.0;
    }
    result = 0;
    if (a->low_rank ? switched : a->n_fg >= 3.0) {
        if (!a->low_rank) set_diag_from(a, fg);
        a->n_updates += 1.0;
        result = a->n_updates == 1.0 ? FS_METRIC_ADAPT_FIRST : 0;
    }
    if (fed && a->stop_early && a->n_block >= FS_METRIC_ADAPT_WINDOW) {
        int status = end_of_block(a);
        if (status < 0) return status;
        if (status == 1) result = FS_METRIC_ADAPT_FINAL_SET;
    }
    return result;
}
