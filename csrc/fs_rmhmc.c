/* fs_rmhmc.c: generalized leapfrog, RMHMC transitions and chain loop (see fs_rmhmc.h). */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "fs_rmhmc.h"

/* ---- small dense linear algebra (dim is tens: dim^3 is cheap) ----------- */

int fs_rmhmc_cholesky(double *A, int d, double *logdet)
{
    int i, j, k;
    double ld = 0.0;
    for (j = 0; j < d; j++) {
        double *rj = A + (size_t)j * d;
        double s = rj[j];
        for (k = 0; k < j; k++) s -= rj[k] * rj[k];
        if (!(s > 0.0) || !fs_isfinite(s)) return FS_ESINGULAR;
        s = sqrt(s);
        rj[j] = s;
        ld += 2.0 * log(s);
        for (i = j + 1; i < d; i++) {
            double *ri = A + (size_t)i * d;
            double t = ri[j];
            for (k = 0; k < j; k++) t -= ri[k] * rj[k];
            ri[j] = t / s;
        }
        for (k = j + 1; k < d; k++) rj[k] = 0.0;
    }
    *logdet = ld;
    return FS_OK;
}

/* Ginv = (L L^T)^{-1} = L^{-T} L^{-1}; tmp: dim*dim. */
static void chol_inverse(const double *L, int d, double *FS_RESTRICT Ginv,
                         double *FS_RESTRICT M)
{
    int i, j, k;
    /* M = L^{-1} (lower), column by column of the identity */
    memset(M, 0, sizeof(double) * (size_t)d * d);
    for (j = 0; j < d; j++) {
        M[(size_t)j * d + j] = 1.0 / L[(size_t)j * d + j];
        for (i = j + 1; i < d; i++) {
            double s = 0.0;
            for (k = j; k < i; k++) s += L[(size_t)i * d + k] * M[(size_t)k * d + j];
            M[(size_t)i * d + j] = -s / L[(size_t)i * d + i];
        }
    }
    /* Ginv_ij = sum_k M_ki M_kj, k >= max(i, j) */
    for (i = 0; i < d; i++)
        for (j = 0; j <= i; j++) {
            double s = 0.0;
            for (k = i; k < d; k++) s += M[(size_t)k * d + i] * M[(size_t)k * d + j];
            Ginv[(size_t)i * d + j] = s;
            Ginv[(size_t)j * d + i] = s;
        }
}

static void symv(const double *A, int d, const double *x, double *FS_RESTRICT y)
{
    int i, j;
    for (i = 0; i < d; i++) {
        const double *r = A + (size_t)i * d;
        double s = 0.0;
        for (j = 0; j < d; j++) s += r[j] * x[j];
        y[i] = s;
    }
}

/* 0.5 ||L^{-1} p||^2 by forward substitution (y: dim scratch). */
static double half_quad_chol(const double *L, int d, const double *p, double *FS_RESTRICT y)
{
    int i, k;
    double s2 = 0.0;
    for (i = 0; i < d; i++) {
        const double *r = L + (size_t)i * d;
        double s = p[i];
        for (k = 0; k < i; k++) s -= r[k] * y[k];
        y[i] = s / r[i];
        s2 += y[i] * y[i];
    }
    return 0.5 * s2;
}

static double max_abs_diff(const double *a, const double *b, int d, double *amax)
{
    double m = 0.0, x = 0.0;
    int i;
    for (i = 0; i < d; i++) {
        const double e = fabs(a[i] - b[i]), v = fabs(a[i]);
        if (e > m || e != e) m = e;
        if (v > x) x = v;
    }
    *amax = x;
    return m;
}

/* ---- Anderson acceleration of the fixed-point iterations ------------------ */
/* x <- g(x) (eq. 7 in the momentum, eq. 8's Richardson step in G(q')^-1 p_h)
   contracts linearly, by a factor O(eps) per iterate, so reaching the
   tolerance takes 7-13 iterates at the paper's steps.  Anderson
   acceleration (Walker & Ni 2011) of depth AA_DEPTH takes
   x_{k+1} = g_k - sum_j gamma_j (g_j - g_{j-1}) with gamma minimising
   |f_k - sum_j gamma_j (f_j - f_{j-1})|, f = g(x) - x.  The convergence test
   is unchanged (|f_k| against the tolerance, then x = g(x_k)), so the
   solution, and the step's reversibility, are those of the plain
   iteration; the iterates are a deterministic function of the step's
   inputs.  An ill-conditioned least-squares system restarts from a plain
   step. */
#define AA_DEPTH 2

typedef struct fs_aa {
    double *dF, *dG, *f0, *g0, *f;
    int n, head, have, d;
} fs_aa;

static void aa_start(fs_aa *a, double *buf, int d)
{
    a->dF = buf;
    a->dG = buf + AA_DEPTH * (size_t)d;
    a->f0 = buf + 2 * AA_DEPTH * (size_t)d;
    a->g0 = a->f0 + d;
    a->f = a->g0 + d;
    a->n = a->head = a->have = 0;
    a->d = d;
}

/* in: x = x_k, g = g(x_k); out: x = x_{k+1} */
static void aa_next(fs_aa *a, double *FS_RESTRICT x, const double *FS_RESTRICT g)
{
    const int d = a->d;
    double A[AA_DEPTH * AA_DEPTH], b[AA_DEPTH], gam[AA_DEPTH];
    double *f = a->f;
    int i, j, l, n;
    for (i = 0; i < d; i++) f[i] = g[i] - x[i];
    if (a->have) {
        double *df = a->dF + (size_t)a->head * d, *dg = a->dG + (size_t)a->head * d;
        for (i = 0; i < d; i++) {
            df[i] = f[i] - a->f0[i];
            dg[i] = g[i] - a->g0[i];
        }
        a->head = (a->head + 1) % AA_DEPTH;
        if (a->n < AA_DEPTH) a->n++;
    }
    memcpy(a->f0, f, sizeof(double) * (size_t)d);
    memcpy(a->g0, g, sizeof(double) * (size_t)d);
    a->have = 1;
    n = a->n;
    /* normal equations of the n <= AA_DEPTH columns, solved by Cholesky */
    for (j = 0; j < n; j++) {
        const double *dj = a->dF + (size_t)j * d;
        double s = 0.0;
        for (i = 0; i < d; i++) s += dj[i] * f[i];
        b[j] = s;
        for (l = 0; l <= j; l++) {
            const double *dl = a->dF + (size_t)l * d;
            double t = 0.0;
            for (i = 0; i < d; i++) t += dj[i] * dl[i];
            A[j * AA_DEPTH + l] = t;
        }
    }
    for (j = 0; j < n; j++) {
        double s = A[j * AA_DEPTH + j] * (1.0 + 1e-10);
        for (l = 0; l < j; l++) s -= A[j * AA_DEPTH + l] * A[j * AA_DEPTH + l];
        if (!(s > 1e-14 * A[j * AA_DEPTH + j]) || !(s > 0.0)) { n = 0; break; }
        A[j * AA_DEPTH + j] = sqrt(s);
        for (i = j + 1; i < n; i++) {
            double t = A[i * AA_DEPTH + j];
            for (l = 0; l < j; l++) t -= A[i * AA_DEPTH + l] * A[j * AA_DEPTH + l];
            A[i * AA_DEPTH + j] = t / A[j * AA_DEPTH + j];
        }
    }
    if (n == 0) {   /* no history, or a degenerate one: a plain step, history reset */
        a->n = a->head = 0;
        memcpy(x, g, sizeof(double) * (size_t)d);
        return;
    }
    for (j = 0; j < n; j++) {
        double t = b[j];
        for (l = 0; l < j; l++) t -= A[j * AA_DEPTH + l] * gam[l];
        gam[j] = t / A[j * AA_DEPTH + j];
    }
    for (j = n - 1; j >= 0; j--) {
        double t = gam[j];
        for (l = j + 1; l < n; l++) t -= A[l * AA_DEPTH + j] * gam[l];
        gam[j] = t / A[j * AA_DEPTH + j];
    }
    for (i = 0; i < d; i++) {
        double t = g[i];
        for (j = 0; j < n; j++) t -= gam[j] * a->dG[(size_t)j * d + i];
        x[i] = t;
    }
}

/* ---- workspace ---------------------------------------------------------- */
/* layout: proposal point (3 dim + 3 dim^2), p, z (2 dim), leapfrog scratch
   (11 dim), tmp (dim^2); twice, the second half for the proposal that the
   overlapped loop pre-fetches. */
size_t fs_rmhmc_workspace_size(int dim)
{
    const size_t d = (size_t)(dim > 0 ? dim : 1);
    return 2 * (4 * d * d + 19 * d + (2 * AA_DEPTH + 3) * d);
}

#define W_PROP(w, d) (w)
#define W_P(w, d) ((w) + 3 * (size_t)(d) + 3 * (size_t)(d) * (d))
#define W_LF(w, d) (W_P(w, d) + 2 * (size_t)(d))
#define W_TMP(w, d) (W_LF(w, d) + 11 * (size_t)(d))
#define W_AA(w, d) (W_TMP(w, d) + (size_t)(d) * (d))

static int same_potential(const fs_potential *a, const fs_potential *b)
{
    return a == b || (a->eval == b->eval && a->state == b->state);
}

static int separate_metric(const fs_metric *dm, const fs_metric *jm)
{
    return jm != NULL && jm != dm && !(jm->eval == dm->eval && jm->state == dm->state);
}

/* G(q) into L (factored in place), Ginv, logdet. */
static int metric_at(const fs_metric *m, const double *q, double *L, double *Ginv,
                     double *logdet, double *tmp, int d)
{
    int status = m->eval(m->state, q, L);
    if (status != FS_OK) return status;
    if (!fs_hmc_all_finite(L, d * d)) return FS_ENONFINITE;
    status = fs_rmhmc_cholesky(L, d, logdet);
    if (status != FS_OK) return status;
    if (Ginv != NULL) chol_inverse(L, d, Ginv, tmp);
    return FS_OK;
}

static void point_view(fs_rmhmc_point *pt, double *w, int d, int with_judge)
{
    pt->q = w;
    pt->grad = w + d;
    pt->tr = w + 2 * (size_t)d;
    pt->L = w + 3 * (size_t)d;
    pt->Ginv = pt->L + (size_t)d * d;
    pt->Lj = with_judge ? pt->Ginv + (size_t)d * d : NULL;
}

static void point_copy(fs_rmhmc_point *dst, const fs_rmhmc_point *src, int d)
{
    const size_t dd = sizeof(double) * (size_t)d * d, dv = sizeof(double) * (size_t)d;
    memcpy(dst->q, src->q, dv);
    memcpy(dst->grad, src->grad, dv);
    memcpy(dst->tr, src->tr, dv);
    memcpy(dst->L, src->L, dd);
    memcpy(dst->Ginv, src->Ginv, dd);
    if (dst->Lj != NULL && src->Lj != NULL) memcpy(dst->Lj, src->Lj, dd);
    dst->logdet = src->logdet;
    dst->u_drive = src->u_drive;
    dst->u_judge = src->u_judge;
    dst->logdet_judge = src->logdet_judge;
}

int fs_rmhmc_point_init(const fs_rmhmc_config *cfg, const fs_potential *drive,
                        const fs_metric *dmetric, const fs_potential *judge,
                        const fs_metric *jmetric, fs_rmhmc_point *cur,
                        double *FS_RESTRICT work)
{
    const int d = cfg->dim;
    double *tmp = W_TMP(work, d);
    double uj = NAN, ud = NAN;
    int status;
    status = drive->eval(drive->state, cur->q, &ud, cur->grad);
    if (status != FS_OK) return status;
    if (!fs_isfinite(ud) || !fs_hmc_all_finite(cur->grad, d)) return FS_ENONFINITE;
    status = metric_at(dmetric, cur->q, cur->L, cur->Ginv, &cur->logdet, tmp, d);
    if (status != FS_OK) return status;
    status = dmetric->contract(dmetric->state, cur->q, cur->Ginv, NULL, cur->tr, NULL);
    if (status != FS_OK) return status;
    if (!fs_hmc_all_finite(cur->tr, d)) return FS_ENONFINITE;
    if (same_potential(drive, judge)) {
        uj = ud;
    } else {
        status = judge->eval(judge->state, cur->q, &uj, NULL);
        if (status != FS_OK) return status;
    }
    if (!fs_isfinite(uj)) return FS_ENONFINITE;
    cur->u_drive = ud;
    cur->u_judge = uj;
    if (separate_metric(dmetric, jmetric)) {
        if (cur->Lj == NULL) return FS_EINVAL;
        status = metric_at(jmetric, cur->q, cur->Lj, NULL, &cur->logdet_judge, tmp, d);
        if (status != FS_OK) return status;
    } else {
        cur->logdet_judge = cur->logdet;
    }
    return FS_OK;
}

/* ---- the generalized leapfrog (eq. 7-9) --------------------------------- */

/* out = p0 - h (grad + 1/2 tr - 1/2 quad) */
static void momentum_update(const double *p0, double h, const double *grad, const double *tr,
                            const double *quad, double *FS_RESTRICT out, int d)
{
    int i;
    for (i = 0; i < d; i++) out[i] = p0[i] - h * (grad[i] + 0.5 * tr[i] - 0.5 * quad[i]);
}

/* eq. 8 by the metric's matrix-vector product (fs_metric.h): the iterate
   q_{k+1} = q + eps/2 (v0 + y_k) with y_k -> G(q_{k+1})^{-1} p_h by one
   preconditioned Richardson step per iterate,
       y_{k+1} = y_k + G(q)^{-1} (p_h - G(q_{k+1}) y_k),
   G(q)^{-1} known from the step's start.  Both equations have the same
   fixed point as eq. 8; the change of q is eps/2 times the change of y, so
   the test on the q-iterate bounds both.  The contraction factor is
   ||I - G(q)^{-1} G(q')||, small when the metric changes little over a step
   (a GLM's posterior: O(eps / sqrt(N))).  One pass over X per iterate
   instead of an O(N d^2) Fisher and a Cholesky factorisation.
   On entry pt->q = q0 + eps v0; on FS_OK pt->q is q' (G not evaluated). */
static int position_matvec(const fs_rmhmc_config *cfg, double eps, const fs_metric *metric,
                           fs_rmhmc_point *pt, const double *x, const double *v0,
                           const double *q0, double *FS_RESTRICT y, double *FS_RESTRICT r,
                           double *FS_RESTRICT dy, double *aa_buf, int *fp_iter)
{
    const int d = cfg->dim, maxit = cfg->max_fixed_point;
    const double half = 0.5 * eps, tol = cfg->fixed_point_tol;
    double diff, amax;
    int k, i, status, conv;
    fs_aa aa;
    aa_start(&aa, aa_buf, d);
    memcpy(y, v0, sizeof(double) * (size_t)d);
    for (k = 0; k < maxit; k++) {
        status = metric->matvec(metric->state, pt->q, y, r);
        if (status != FS_OK) return status;
        if (fp_iter) (*fp_iter)++;
        for (i = 0; i < d; i++) r[i] = x[i] - r[i];
        symv(pt->Ginv, d, r, dy);
        /* dy = g(y) - y; the q of g(y) moves by eps/2 dy from the q of y */
        diff = 0.0;
        amax = 0.0;
        for (i = 0; i < d; i++) {
            const double qn = q0[i] + half * (v0[i] + y[i] + dy[i]);
            const double e = fabs(half * dy[i]), a = fabs(qn);
            if (e > diff || e != e) diff = e;
            if (a > amax) amax = a;
            dy[i] += y[i];                       /* dy is g(y) from here */
        }
        conv = diff <= tol * (1.0 + amax);
        if (conv)                                /* y' = g(y), as the plain iteration */
            memcpy(y, dy, sizeof(double) * (size_t)d);
        else
            aa_next(&aa, y, dy);
        for (i = 0; i < d; i++) pt->q[i] = q0[i] + half * (v0[i] + y[i]);
        if (!fs_hmc_all_finite(pt->q, d)) return FS_ENONFINITE;
        if (conv) return FS_OK;
    }
    return FS_RMHMC_NOT_CONVERGED;
}

/* One generalized leapfrog step (eq. 7-9).  prev: 1 when lf holds the
   previous step's half-step momentum x_prev and its eq. 9 quad at this
   pt->q (steps 2..L): then eq. 7 starts from x0 = p - eps/2 dH/dq(q, x_prev)
   = 2 p - x_prev, the first fixed-point iterate from x_prev, without its
   pass over the data.  The fixed point (and so the step) is the same. */
static int one_step(const fs_rmhmc_config *cfg, double eps, const fs_potential *drive,
                    const fs_metric *metric, fs_rmhmc_point *pt, double *FS_RESTRICT p,
                    double *FS_RESTRICT lf, double *FS_RESTRICT tmp, double *aa_buf,
                    int want_value, int prev, int *fp_iter)
{
    const int d = cfg->dim, maxit = cfg->max_fixed_point;
    const double half = 0.5 * eps, tol = cfg->fixed_point_tol;
    double *u = lf, *quad = lf + d, *x = lf + 2 * (size_t)d, *xn = lf + 3 * (size_t)d;
    double *v0 = lf + 4 * (size_t)d, *v1 = lf + 5 * (size_t)d, *q0 = lf + 6 * (size_t)d;
    double *y = lf + 7 * (size_t)d, *r = lf + 8 * (size_t)d, *dy = lf + 9 * (size_t)d;
    double amax, diff, u_end = NAN;
    int k, status, conv = 0;
    fs_aa aa;

    /* eq. 7: p_h = p - eps/2 dH/dq(q, p_h), by fixed-point iteration */
    if (prev)
        momentum_update(p, half, pt->grad, pt->tr, quad, x, d);
    else
        memcpy(x, p, sizeof(double) * (size_t)d);
    aa_start(&aa, aa_buf, d);
    for (k = 0; k < maxit; k++) {
        symv(pt->Ginv, d, x, u);
        status = metric->contract(metric->state, pt->q, pt->Ginv, u, NULL, quad);
        if (status != FS_OK) return status;
        momentum_update(p, half, pt->grad, pt->tr, quad, xn, d);
        if (fp_iter) (*fp_iter)++;
        diff = max_abs_diff(xn, x, d, &amax);
        conv = diff <= tol * (1.0 + amax);
        if (conv)                                /* x = g(x), as the plain iteration */
            memcpy(x, xn, sizeof(double) * (size_t)d);
        else
            aa_next(&aa, x, xn);
        if (!fs_hmc_all_finite(x, d)) return FS_ENONFINITE;
        if (conv) break;
    }
    if (!conv) return FS_RMHMC_NOT_CONVERGED;

    /* eq. 8: q' = q + eps/2 (G(q)^-1 + G(q')^-1) p_h */
    symv(pt->Ginv, d, x, v0);
    memcpy(q0, pt->q, sizeof(double) * (size_t)d);
    for (k = 0; k < d; k++) pt->q[k] = q0[k] + eps * v0[k];
    conv = 0;
    if (metric->matvec != NULL) {
        status = position_matvec(cfg, eps, metric, pt, x, v0, q0, y, r, dy, aa_buf, fp_iter);
        if (status == FS_OK) {
            status = metric_at(metric, pt->q, pt->L, pt->Ginv, &pt->logdet, tmp, d);
            if (status != FS_OK) return status;
            if (metric->matvec_exact != NULL && !metric->matvec_exact(metric->state, pt->q)) {
                /* the products were not G(q') v at q': whole metrics below,
                   from the products' solution (G at it is known; where G and
                   the product's matrix differ little, one iterate confirms it) */
            } else {
                symv(pt->Ginv, d, x, v1);
                conv = 1;
            }
        } else if (status != FS_RMHMC_NOT_CONVERGED && status != FS_ENONFINITE) {
            return status;
        } else {   /* the Richardson step did not contract: whole metrics below */
            for (k = 0; k < d; k++) pt->q[k] = q0[k] + eps * v0[k];
        }
    }
    /* without a product: the iterate whose own update moved it by less than
       the tolerance is q' (its G is known) */
    for (k = 0; !conv && k < maxit; k++) {
        int i;
        status = metric_at(metric, pt->q, pt->L, pt->Ginv, &pt->logdet, tmp, d);
        if (status != FS_OK) return status;
        symv(pt->Ginv, d, x, v1);
        if (fp_iter) (*fp_iter)++;
        for (i = 0; i < d; i++) xn[i] = q0[i] + half * (v0[i] + v1[i]);
        diff = max_abs_diff(xn, pt->q, d, &amax);
        if (!fs_hmc_all_finite(xn, d)) return FS_ENONFINITE;
        if (diff <= tol * (1.0 + amax)) { conv = 1; break; }
        memcpy(pt->q, xn, sizeof(double) * (size_t)d);
    }
    if (!conv) return FS_RMHMC_NOT_CONVERGED;

    /* eq. 9 at q': gradient, tr(G^-1 dG_k) and u^T dG_k u with u = G(q')^-1 p_h */
    status = drive->eval(drive->state, pt->q, want_value ? &u_end : NULL, pt->grad);
    if (status != FS_OK) return status;
    if (!fs_hmc_all_finite(pt->grad, d)) return FS_ENONFINITE;
    status = metric->contract(metric->state, pt->q, pt->Ginv, v1, pt->tr, quad);
    if (status != FS_OK) return status;
    if (!fs_hmc_all_finite(pt->tr, d)) return FS_ENONFINITE;
    momentum_update(x, half, pt->grad, pt->tr, quad, p, d);
    if (!fs_hmc_all_finite(p, d)) return FS_ENONFINITE;
    if (want_value) {
        if (!fs_isfinite(u_end)) return FS_ENONFINITE;
        pt->u_drive = u_end;
    }
    return FS_OK;
}

int fs_rmhmc_leapfrog(const fs_rmhmc_config *cfg, double eps, int n_steps,
                      const fs_potential *drive, const fs_metric *metric,
                      fs_rmhmc_point *pt, double *FS_RESTRICT p,
                      double *FS_RESTRICT work, int *fp_iter)
{
    const int d = cfg->dim;
    int s, status;
    for (s = 1; s <= n_steps; s++) {
        status = one_step(cfg, eps, drive, metric, pt, p, W_LF(work, d), W_TMP(work, d),
                          W_AA(work, d), s == n_steps, s > 1, fp_iter);
        if (status != FS_OK) return status;
    }
    return FS_OK;
}

/* ---- transition ---------------------------------------------------------- */

/* The random numbers of one transition are drawn in a fixed order whatever
   happens in it: the number of steps (random_n_steps), the dim normals of
   the momentum, then the uniform of the Metropolis test (also when the
   proposal diverged).  So fs_rmhmc_run's overlapped loop, which draws the
   next transition's numbers before this one's test is decided, gives the
   same chain bit for bit as the serial one. */

static int draw_n_steps(const fs_rmhmc_config *cfg, fs_rng *rng)
{
    int n = cfg->n_steps;
    if (cfg->random_n_steps && cfg->n_steps > 1) {
        n = 1 + (int)(rng->uniform(rng->state) * cfg->n_steps);
        if (n > cfg->n_steps) n = cfg->n_steps;
    }
    return n;
}

/* z ~ N(0, I) (dim normals), returns |z|^2. */
static double draw_normals(fs_rng *rng, int d, double *FS_RESTRICT z)
{
    double zz = 0.0;
    int i;
    for (i = 0; i < d; i++) { z[i] = rng->normal(rng->state); zz += z[i] * z[i]; }
    return zz;
}

/* The trajectory of a proposal: p = Lj z ~ N(0, G_judge(q)) into W_P(work),
   cur (without its judge factor) copied into prop (a view of work), then
   n_steps generalized leapfrog steps.  z is read from W_P(work) + dim and
   left there.  Returns what fs_rmhmc_leapfrog returns. */
static int trajectory(const fs_rmhmc_config *cfg, double eps, int n_steps,
                      const fs_potential *drive, const fs_metric *dmetric, const double *Lj,
                      const fs_rmhmc_point *cur, fs_rmhmc_point *prop,
                      double *FS_RESTRICT work, int *fp_iter)
{
    const int d = cfg->dim;
    double *p = W_P(work, d), *z = p + d;
    int i, k;
    for (i = 0; i < d; i++) {
        const double *r = Lj + (size_t)i * d;
        double s = 0.0;
        for (k = 0; k <= i; k++) s += r[k] * z[k];
        p[i] = s;
    }
    point_view(prop, W_PROP(work, d), d, 0);
    prop->Lj = NULL;
    {   /* copy cur without its judge factor */
        fs_rmhmc_point c = *cur;
        c.Lj = NULL;
        point_copy(prop, &c, d);
    }
    return fs_rmhmc_leapfrog(cfg, eps, n_steps, drive, dmetric, prop, p, work, fp_iter);
}

/* The judge's Hamiltonian at the end of a trajectory with judge value uj1
   (status js of its evaluation): *h1 (non-finite when the judge or its
   metric is).  The judge factor at prop is left in W_TMP(work) (sep). */
static int judge_end(const fs_rmhmc_config *cfg, const fs_metric *jmetric, int sep,
                     fs_rmhmc_point *prop, double uj1, int js, double *FS_RESTRICT work,
                     double *h1)
{
    const int d = cfg->dim;
    double *p = W_P(work, d), *z = p + d, *tmp = W_TMP(work, d);
    double kin1, ldj1;
    int status;
    *h1 = NAN;
    prop->u_judge = js == FS_OK ? uj1 : NAN;
    if (js == FS_ENONFINITE) return FS_OK;
    if (js != FS_OK) return js;
    if (sep) {
        status = metric_at(jmetric, prop->q, tmp, NULL, &ldj1, z, d);
        if (status == FS_ESINGULAR || status == FS_ENONFINITE) return FS_OK;
        if (status != FS_OK) return status;
        kin1 = half_quad_chol(tmp, d, p, z);
    } else {
        ldj1 = prop->logdet;
        kin1 = half_quad_chol(prop->L, d, p, z);
    }
    prop->logdet_judge = ldj1;
    *h1 = uj1 + 0.5 * ldj1 + kin1;
    return FS_OK;
}

/* Proposal from cur into prop (a view of the workspace) with its momentum
   drawn here.  Returns FS_OK with *h0, *h1 set (h1 may be non-finite), a
   divergence code, or an error. */
static int propose(const fs_rmhmc_config *cfg, double eps, int n_steps,
                   const fs_potential *drive, const fs_metric *dmetric,
                   const fs_potential *judge, const fs_metric *jmetric, fs_rng *rng,
                   const fs_rmhmc_point *cur, fs_rmhmc_point *prop, double *FS_RESTRICT work,
                   double *h0, double *h1, int *n_judge, int *fp_iter)
{
    const int d = cfg->dim, sep = separate_metric(dmetric, jmetric);
    const double zz = draw_normals(rng, d, W_P(work, d) + d);
    double uj1 = NAN;
    int status, js = FS_OK;

    *h0 = cur->u_judge + 0.5 * cur->logdet_judge + 0.5 * zz;
    *h1 = NAN;
    status = trajectory(cfg, eps, n_steps, drive, dmetric, sep ? cur->Lj : cur->L, cur, prop,
                        work, fp_iter);
    if (status != FS_OK) return status;
    if (same_potential(drive, judge)) {
        uj1 = prop->u_drive;
    } else {
        js = judge->eval(judge->state, prop->q, &uj1, NULL);
        *n_judge = 1;
    }
    return judge_end(cfg, jmetric, sep, prop, uj1, js, work, h1);
}

static int is_divergence(int status)
{
    return status == FS_ENONFINITE || status == FS_ESINGULAR || status == FS_RMHMC_NOT_CONVERGED;
}

static void info_start(fs_rmhmc_info *info, int n_steps)
{
    fs_hmc_info *hi = &info->hmc;
    memset(hi, 0, sizeof(*hi));
    hi->n_steps = n_steps;
    hi->energy_error = NAN;
    hi->proposal_u = NAN;
    info->not_converged = 0;
    info->fixed_point_iterations = 0;
}

/* The Metropolis test of a proposal that ended with status (FS_OK or a
   divergence) and energies h0, h1, with the uniform u: info filled;
   returns 1 when accepted. */
static int decide(const fs_rmhmc_config *cfg, int status, double h0, double h1, double u,
                  fs_rmhmc_info *info)
{
    fs_hmc_info *hi = &info->hmc;
    double dh, a;
    hi->energy = h0;
    if (status != FS_OK) {
        info->not_converged = status == FS_RMHMC_NOT_CONVERGED;
        hi->divergent = 1;
        return 0;
    }
    dh = h1 - h0;
    hi->energy_error = dh;
    if (!fs_isfinite(dh) || dh > cfg->max_energy_error) {
        hi->divergent = 1;
        return 0;
    }
    a = dh > 0 ? exp(-dh) : 1.0;
    hi->accept_prob = a;
    if (u < a) {
        hi->accepted = 1;
        hi->energy = h1;
        return 1;
    }
    return 0;
}

/* cur = prop (accepted), with the judge factor at prop from W_TMP(work) (sep). */
static void move_to(fs_rmhmc_point *cur, const fs_rmhmc_point *prop, int sep,
                    const double *FS_RESTRICT work, int d)
{
    double *Lj = cur->Lj;
    fs_rmhmc_point src = *prop;
    if (sep) memcpy(Lj, W_TMP(work, d), sizeof(double) * (size_t)d * d);
    src.Lj = NULL;
    cur->Lj = NULL;
    point_copy(cur, &src, d);
    cur->Lj = Lj;
}

int fs_rmhmc_transition(const fs_rmhmc_config *cfg, const fs_potential *drive,
                        const fs_metric *dmetric, const fs_potential *judge,
                        const fs_metric *jmetric, fs_rng *rng, fs_rmhmc_point *cur,
                        double *FS_RESTRICT work, fs_rmhmc_info *info)
{
    const int d = cfg->dim, sep = separate_metric(dmetric, jmetric);
    const int n_steps = draw_n_steps(cfg, rng);
    fs_rmhmc_point prop;
    int status, n_judge = 0;
    double h0 = NAN, h1 = NAN, u;

    info_start(info, n_steps);
    status = propose(cfg, cfg->step_size, n_steps, drive, dmetric, judge, jmetric, rng, cur,
                     &prop, work, &h0, &h1, &n_judge, &info->fixed_point_iterations);
    info->hmc.n_judge_evals = n_judge;
    if (status != FS_OK && !is_divergence(status)) return status;
    if (status == FS_OK) info->hmc.proposal_u = prop.u_judge;
    u = rng->uniform(rng->state);     /* drawn whatever happened (see above) */
    if (decide(cfg, status, h0, h1, u, info)) move_to(cur, &prop, sep, work, d);
    return FS_OK;
}

/* ---- chain loop ---------------------------------------------------------- */

static void record(const fs_hmc_trace *tr, long it, const fs_rmhmc_point *cur,
                   const double *prop_q, const fs_rmhmc_info *info, double eps, int d)
{
    if (tr->draws) memcpy(tr->draws + (size_t)it * d, cur->q, sizeof(double) * (size_t)d);
    if (tr->potential) tr->potential[it] = cur->u_judge;
    if (tr->accept_prob) tr->accept_prob[it] = info->hmc.accept_prob;
    if (tr->energy_error) tr->energy_error[it] = info->hmc.energy_error;
    if (tr->energy) tr->energy[it] = info->hmc.energy;
    if (tr->step_size) tr->step_size[it] = eps;
    if (tr->accepted) tr->accepted[it] = (int8_t)info->hmc.accepted;
    if (tr->divergent) tr->divergent[it] = (int8_t)info->hmc.divergent;
    if (tr->n_steps) tr->n_steps[it] = (int32_t)info->hmc.n_steps;
    if (tr->judge_evaluated) tr->judge_evaluated[it] = (int8_t)info->hmc.n_judge_evals;
    if (tr->tree_depth) tr->tree_depth[it] = 0;
    if (tr->proposals) memcpy(tr->proposals + (size_t)it * d, prop_q, sizeof(double) * (size_t)d);
    if (tr->proposal_potential) tr->proposal_potential[it] = info->hmc.proposal_u;
}

/* A proposal in flight (the overlapped loop): its workspace half, the
   point it ends at, its number of steps and |z|^2, and how its trajectory
   ended. */
typedef struct rm_flight {
    double *work;
    fs_rmhmc_point prop;
    int n_steps, status, fp_iter;
    double zz;
} rm_flight;

/* f's random numbers: its number of steps and momentum normals. */
static void flight_draw(const fs_rmhmc_config *cfg, fs_rng *rng, rm_flight *f)
{
    f->n_steps = draw_n_steps(cfg, rng);
    f->zz = draw_normals(rng, cfg->dim, W_P(f->work, cfg->dim) + cfg->dim);
}

/* f's trajectory from pt (the drive's metric judges: its factor draws p). */
static void flight_run(const fs_rmhmc_config *cfg, const fs_potential *drive,
                       const fs_metric *dmetric, const fs_rmhmc_point *pt, rm_flight *f)
{
    f->fp_iter = 0;
    f->status = trajectory(cfg, cfg->step_size, f->n_steps, drive, dmetric, pt->L, pt, &f->prop,
                           f->work, &f->fp_iter);
}

/* The overlapped loop (fs_rmhmc.h, cfg->overlap): while one thread
   evaluates the judge at proposal t, the calling thread draws the test's
   uniform and the numbers of transition t + 1 and runs its trajectory from
   proposal t, as if t were accepted (Brockwell 2006, pre-fetching).  If
   t is rejected that trajectory is run again from the current point with
   the same numbers.  The last transition of a call, and one after a stop
   request, are not pre-fetched, so a call leaves nothing in flight. */
static int run_overlapped(const fs_rmhmc_config *cfg, const fs_potential *drive,
                          const fs_metric *dmetric, const fs_potential *judge,
                          fs_rng *rng, fs_rmhmc_point *cur, long n_iter,
                          const fs_hmc_trace *tr, double *FS_RESTRICT work,
                          volatile const int *stop, long *n_done, long *n_not_converged)
{
    const int d = cfg->dim;
    const double eps = cfg->step_size;
    rm_flight fl[2];
    fs_rmhmc_info info;
    long it;
    int k = 0, status = FS_OK;
    int drawn = 0;      /* fl[k] has its numbers, not its trajectory */
    int ready = 0;      /* fl[k] has its trajectory from cur */
    fl[0].work = work;
    fl[1].work = work + fs_rmhmc_workspace_size(d) / 2;
    for (it = 0; it < n_iter; it++) {
        rm_flight *a = &fl[k], *b = &fl[1 - k];
        double h0, h1 = NAN, uj1 = NAN, u = NAN;
        int js = FS_OK, ahead, acc;
        if (!ready) {
            if (!drawn) {
                if (stop != NULL && *stop) { status = FS_EINTERRUPT; break; }
                flight_draw(cfg, rng, a);
            }
            flight_run(cfg, drive, dmetric, cur, a);
        }
        ready = drawn = 0;
        info_start(&info, a->n_steps);
        info.fixed_point_iterations = a->fp_iter;
        h0 = cur->u_judge + 0.5 * cur->logdet_judge + 0.5 * a->zz;
        if (a->status != FS_OK && !is_divergence(a->status)) { status = a->status; break; }
        ahead = a->status == FS_OK && it + 1 < n_iter && !(stop != NULL && *stop);
        if (a->status == FS_OK) {
            info.hmc.n_judge_evals = 1;
            if (ahead) {
                /* the pre-fetch is a task that one thread of the pair takes;
                   the judge runs on the other, and a judge that cuts its
                   work into tasks when called inside a team (fs_glm_eval)
                   is finished by both once the pre-fetch is done */
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
#pragma omp single
#endif
                {
#ifdef _OPENMP
#pragma omp task default(shared)
#endif
                    {
                        u = rng->uniform(rng->state);
                        flight_draw(cfg, rng, b);
                        flight_run(cfg, drive, dmetric, &a->prop, b);
                    }
                    js = judge->eval(judge->state, a->prop.q, &uj1, NULL);
#ifdef _OPENMP
#pragma omp taskwait
#endif
                }
            } else {
                js = judge->eval(judge->state, a->prop.q, &uj1, NULL);
            }
            status = judge_end(cfg, NULL, 0, &a->prop, uj1, js, a->work, &h1);
            if (status != FS_OK) break;
            info.hmc.proposal_u = a->prop.u_judge;
        }
        if (!ahead) u = rng->uniform(rng->state);
        acc = decide(cfg, a->status, h0, h1, u, &info);
        if (acc) move_to(cur, &a->prop, 0, a->work, d);
        if (ahead) {                  /* b's numbers are drawn; its trajectory */
            ready = acc;              /* holds when it started from cur        */
            drawn = !acc;
            k = 1 - k;
        }
        if (n_not_converged) *n_not_converged += info.not_converged;
        record(tr, it, cur, a->prop.q, &info, eps, d);
    }
    *n_done = it;
    return status;
}

int fs_rmhmc_run(const fs_rmhmc_config *cfg, const fs_potential *drive,
                 const fs_metric *dmetric, const fs_potential *judge,
                 const fs_metric *jmetric, fs_rng *rng, fs_rmhmc_point *cur,
                 fs_dual_avg *adapt, long n_iter, const fs_hmc_trace *tr,
                 double *FS_RESTRICT work, volatile const int *stop, long *n_done,
                 double *step_size_out, long *n_not_converged)
{
    fs_rmhmc_config c = *cfg;
    fs_rmhmc_info info;
    const int d = cfg->dim;
    long it;
    int status = FS_OK;
    if (cfg->overlap && adapt == NULL && !separate_metric(dmetric, jmetric)
            && !same_potential(drive, judge)) {
        status = run_overlapped(cfg, drive, dmetric, judge, rng, cur, n_iter, tr, work, stop,
                                n_done, n_not_converged);
        if (step_size_out) *step_size_out = c.step_size;
        return status;
    }
    for (it = 0; it < n_iter; it++) {
        if (stop != NULL && *stop) { status = FS_EINTERRUPT; break; }
        status = fs_rmhmc_transition(&c, drive, dmetric, judge, jmetric, rng, cur, work, &info);
        if (status != FS_OK) break;
        if (n_not_converged) *n_not_converged += info.not_converged;
        record(tr, it, cur, W_PROP(work, d), &info, c.step_size, d);
        if (adapt != NULL) c.step_size = fs_dual_avg_update(adapt, info.hmc.accept_prob);
    }
    *n_done = it;
    if (step_size_out) *step_size_out = c.step_size;
    return status;
}

/* ---- initial step size --------------------------------------------------- */

int fs_rmhmc_find_step_size(const fs_rmhmc_config *cfg, const fs_potential *drive,
                            const fs_metric *dmetric, const fs_potential *judge,
                            const fs_metric *jmetric, fs_rng *rng,
                            const fs_rmhmc_point *cur, double *FS_RESTRICT work,
                            double *step_size)
{
    const double log08 = log(0.8);
    double eps = cfg->step_size, h0, h1, dh;
    fs_rmhmc_point prop;
    int direction = 0, status, iter, nj;
    if (!(eps > 0.0) || eps > 1e7) return FS_EINVAL;
    for (iter = 0; iter < 100; iter++) {
        status = propose(cfg, eps, 1, drive, dmetric, judge, jmetric, rng, cur, &prop, work,
                         &h0, &h1, &nj, NULL);
        if (is_divergence(status)) dh = -INFINITY;
        else if (status != FS_OK) return status;
        else dh = fs_isfinite(h1 - h0) ? h0 - h1 : -INFINITY;
        if (direction == 0) direction = dh > log08 ? 1 : -1;
        if (direction == 1 && !(dh > log08)) break;
        if (direction == -1 && !(dh < log08)) break;
        eps = direction == 1 ? 2.0 * eps : 0.5 * eps;
        if (eps > 1e7 || eps < 1e-12) break;
    }
    *step_size = eps;
    return FS_OK;
}
