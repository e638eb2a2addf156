/* fs_metrics.c: the GLM Fisher metric and the network SoftAbs metric (fs_metrics.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fs_metrics.h"
#include "fs_kernel.h"

/* Dot products with 8 partial sums in a fixed order: a single running sum
   is bound by the latency of its additions (no -ffast-math here, so the
   compiler keeps one); the same bits for any chunking of the rows. */
FS__INLINE double mdot(const double *FS_RESTRICT x, const double *FS_RESTRICT y, size_t d)
{
    double a[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, s;
    size_t j = 0, l;
    for (; j + 8 <= d; j += 8)
        for (l = 0; l < 8; l++) a[l] += x[j + l] * y[j + l];
    s = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    for (; j < d; j++) s += x[j] * y[j];
    return s;
}

/* ---- GLM Fisher metric ---------------------------------------------------- */

int fs_glm_metric_init(fs_glm_metric *s, const fs_glm *model, const fs_blas *blas)
{
    size_t d, total, c;
    memset(s, 0, sizeof(*s));
    if (model == NULL || blas == NULL || blas->dgemm == NULL || blas->dsyrk == NULL)
        return FS_EINVAL;
    d = model->d;
    c = (model->n + FS_GLM_FISHER_MIN_ROWS - 1) / FS_GLM_FISHER_MIN_ROWS;
    if (c > FS_GLM_FISHER_MAX_CHUNKS) c = FS_GLM_FISHER_MAX_CHUNKS;
    if (c < 1) c = 1;
    s->chunk_rows = (model->n + c - 1) / c;
    s->n_chunks = (int)((model->n + s->chunk_rows - 1) / s->chunk_rows);
    total = (size_t)s->n_chunks * (d * d + 2 * d + FS_GLM_METRIC_BLOCK * (d + 3))
            + model->n + d + d * d;
    s->own = malloc(sizeof(double) * total);
    if (s->own == NULL) return FS_ENOMEM;
    s->fpart = (double *)s->own;
    s->partials = s->fpart + (size_t)s->n_chunks * d * d;
    s->ybuf = s->partials + (size_t)s->n_chunks * 2 * d;
    s->dw = s->ybuf + (size_t)s->n_chunks * FS_GLM_METRIC_BLOCK * (d + 3);
    s->cq = s->dw + model->n;
    s->rfac = s->cq + d;
    s->have_dw = 0;
    s->model = model;
    s->blas = blas;
    return FS_OK;
}

void fs_glm_metric_free(fs_glm_metric *s)
{
    free(s->own);
    s->own = NULL;
}

/* The GLM metric's passes: fn(s, c, rows [i0, i1) of chunk c, arg) for each
   chunk, in the model's threads.  The chunks are a function of n only, and
   each writes its own partial: the callers add them in chunk order, so the
   bits do not depend on the thread count. */
typedef struct glm_pass {
    const double *q, *v, *Ginv, *R, *u;
    int have_dw, want_tr, want_quad;
} glm_pass;
typedef void (*glm_chunk_fn)(const fs_glm_metric *s, int c, size_t i0, size_t i1,
                             const glm_pass *a);

static void glm_for_chunks(const fs_glm_metric *s, glm_chunk_fn fn, const glm_pass *a)
{
    const size_t n = s->model->n;
    const int nc = s->n_chunks;
    int c;
#ifdef _OPENMP
    const int nt = s->model->n_threads < nc ? s->model->n_threads : nc;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
#endif
    for (c = 0; c < nc; c++) {
        const size_t i0 = (size_t)c * s->chunk_rows;
        const size_t i1 = i0 + s->chunk_rows < n ? i0 + s->chunk_rows : n;
        fn(s, c, i0, i1, a);
    }
}

static double *glm_ybuf(const fs_glm_metric *s, int c)
{
    return s->ybuf + (size_t)c * FS_GLM_METRIC_BLOCK * (s->model->d + 3);
}

/* Chunk c: its partial P (d x d, column-major lower triangle) = Z^T Z with
   the rows of Z = sqrt(w_n) x_n, by blocks of rows (one dsyrk each). */
static void glm_fisher_chunk(const fs_glm_metric *s, int c, size_t i0, size_t i1,
                             const glm_pass *a)
{
    const fs_glm *m = s->model;
    const int di = (int)m->d;
    const double one = 1.0, zero = 0.0;
    double *P = s->fpart + (size_t)c * m->d * m->d, *Z = glm_ybuf(s, c);
    size_t i;
    for (i = i0; i < i1; i += FS_GLM_METRIC_BLOCK) {
        const size_t nb = i + FS_GLM_METRIC_BLOCK <= i1 ? FS_GLM_METRIC_BLOCK : i1 - i;
        const int nbi = (int)nb;
        fs_glm_weighted_rows(m, a->q, i, i + nb, Z);
        /* column-major: Z^T is d x nb; P (+)= Z^T Z */
        s->blas->dsyrk("L", "N", &di, &nbi, &one, Z, &di, i == i0 ? &zero : &one, P, &di);
    }
}

/* G = X^T W X + prior precision. */
int fs_glm_metric_eval(void *state, const double *q, double *G)
{
    fs_glm_metric *s = (fs_glm_metric *)state;
    const fs_glm *m = s->model;
    const size_t d = m->d, dd = d * d;
    const int nc = s->n_chunks;
    glm_pass a;
    int c;
    size_t j, l;
    memset(&a, 0, sizeof(a));
    a.q = q;
    glm_for_chunks(s, glm_fisher_chunk, &a);
    for (l = 0; l < d; l++)             /* column l, rows j >= l (column-major lower) */
        for (j = l; j < d; j++) {
            double v = s->fpart[l * d + j];
            for (c = 1; c < nc; c++) v += s->fpart[(size_t)c * dd + l * d + j];
            G[j * d + l] = v;
            G[l * d + j] = v;
        }
    if (m->prior_prec != NULL)
        for (j = 0; j < d; j++) G[j * d + j] += m->prior_prec[j];
    return FS_OK;
}

/* Chunk c: the partial sums of tr and quad (with u) into its 2 d partials.
   The leverages h_n = x_n^T Ginv x_n come by blocks of rows: with R, the
   Cholesky factor of Ginv = R R^T, as |R^T x_n|^2 (a triangular product,
   d^2/2 per row); else as x_n . (Ginv x_n) (d^2 per row).  s->dw[i0..i1)
   holds w'(t_n) when have_dw, else it is computed and stored. */
static void glm_contract_chunk(const fs_glm_metric *s, int c, size_t i0, size_t i1,
                               const glm_pass *a)
{
    const fs_glm *m = s->model;
    const size_t d = m->d;
    const int di = (int)d;
    const double one = 1.0, zero = 0.0;
    double *Y = glm_ybuf(s, c), *h = Y + FS_GLM_METRIC_BLOCK * d;
    double *ptr = a->want_tr ? s->partials + (size_t)c * 2 * d : NULL;
    double *pquad = a->want_quad ? s->partials + (size_t)c * 2 * d + d : NULL;
    size_t i, r;
    if (ptr) memset(ptr, 0, sizeof(double) * d);
    if (pquad) memset(pquad, 0, sizeof(double) * d);
    for (i = i0; i < i1; i += FS_GLM_METRIC_BLOCK) {
        const size_t nb = i + FS_GLM_METRIC_BLOCK <= i1 ? FS_GLM_METRIC_BLOCK : i1 - i;
        const double *Xb = m->X + i * d;
        const int nbi = (int)nb;
        if (!a->have_dw) fs_glm_weight_derivs_rows(m, a->q, i, i + nb, s->dw + i);
        if (ptr && a->R) {
            /* column-major: Y (d x nb) = R^T X_b^T */
            memcpy(Y, Xb, sizeof(double) * nb * d);
            s->blas->dtrmm("L", "L", "T", "N", &di, &nbi, &one, a->R, &di, Y, &di);
            for (r = 0; r < nb; r++) h[r] = mdot(Y + r * d, Y + r * d, d);
        } else if (ptr) {
            /* column-major: Y^T (d x nb) = Ginv (d x d, symmetric) X_b^T */
            s->blas->dgemm("N", "N", &di, &nbi, &di, &one, a->Ginv, &di, Xb, &di, &zero, Y,
                           &di);
            for (r = 0; r < nb; r++) h[r] = mdot(Xb + r * d, Y + r * d, d);
        }
        fs_glm_contract_rows(m, a->u, s->dw + i, ptr ? h : NULL, i, i + nb, ptr, pquad);
    }
}

/* Chunk c: its partial of w(x_n . q) (x_n . v) x_n. */
static void glm_matvec_chunk(const fs_glm_metric *s, int c, size_t i0, size_t i1,
                             const glm_pass *a)
{
    fs_glm_fisher_matvec_rows(s->model, a->q, a->v, i0, i1,
                              s->partials + (size_t)c * 2 * s->model->d);
}

int fs_glm_metric_matvec(void *state, const double *q, const double *v, double *out)
{
    fs_glm_metric *s = (fs_glm_metric *)state;
    const fs_glm *m = s->model;
    const size_t d = m->d;
    glm_pass a;
    int c;
    size_t j;
    memset(&a, 0, sizeof(a));
    a.q = q;
    a.v = v;
    glm_for_chunks(s, glm_matvec_chunk, &a);
    for (j = 0; j < d; j++) out[j] = m->prior_prec != NULL ? m->prior_prec[j] * v[j] : 0.0;
    for (c = 0; c < s->n_chunks; c++) {  /* chunk order: deterministic */
        const double *pp = s->partials + (size_t)c * 2 * d;
        for (j = 0; j < d; j++) out[j] += pp[j];
    }
    return FS_OK;
}

int fs_glm_metric_contract(void *state, const double *q, const double *Ginv,
                           const double *u, double *tr, double *quad)
{
    fs_glm_metric *s = (fs_glm_metric *)state;
    const size_t d = s->model->d;
    glm_pass a;
    int c;
    size_t j;
    if (tr == NULL && quad == NULL) return FS_OK;
    if (quad != NULL && u == NULL) return FS_EINVAL;
    if (tr != NULL && Ginv == NULL) return FS_EINVAL;
    memset(&a, 0, sizeof(a));
    a.q = q;
    a.Ginv = Ginv;
    a.u = quad != NULL ? u : NULL;
    a.want_tr = tr != NULL;
    a.want_quad = quad != NULL;
    a.have_dw = s->have_dw && memcmp(q, s->cq, sizeof(double) * d) == 0;
    s->have_dw = 0;
    if (tr != NULL && s->blas->dtrmm != NULL && s->blas->dpotrf != NULL) {
        /* Ginv = R R^T: the leverages by triangular products (half the
           arithmetic of Ginv x_n); Ginv not numerically positive definite
           (info != 0) falls back to the products with Ginv */
        int di = (int)d, info = 0;
        memcpy(s->rfac, Ginv, sizeof(double) * d * d);
        s->blas->dpotrf("L", &di, s->rfac, &di, &info);
        a.R = info == 0 ? s->rfac : NULL;
    }
    glm_for_chunks(s, glm_contract_chunk, &a);
    memcpy(s->cq, q, sizeof(double) * d);
    s->have_dw = 1;
    if (tr) memset(tr, 0, sizeof(double) * d);
    if (quad) memset(quad, 0, sizeof(double) * d);
    for (c = 0; c < s->n_chunks; c++) {  /* chunk order: deterministic */
        const double *pp = s->partials + (size_t)c * 2 * d;
        for (j = 0; j < d; j++) {
            if (tr) tr[j] += pp[j];
            if (quad) quad[j] += pp[d + j];
        }
    }
    return FS_OK;
}

/* ---- SoftAbs --------------------------------------------------------------- */

void fs_softabs(double l, double alpha, double *FS_RESTRICT f, double *FS_RESTRICT fp)
{
    const double x = alpha * l, ax = fabs(x);
    if (ax < 0.1) {
        /* x coth x = 1 + x^2/3 - x^4/45 + 2x^6/945 - x^8/4725 + 2x^10/93555 */
        const double x2 = x * x;
        const double g = 1.0 + x2 * (1.0 / 3 + x2 * (-1.0 / 45 + x2 * (2.0 / 945
                         + x2 * (-1.0 / 4725 + x2 * (2.0 / 93555)))));
        const double gp = x * (2.0 / 3 + x2 * (-4.0 / 45 + x2 * (12.0 / 945
                          + x2 * (-8.0 / 4725 + x2 * (20.0 / 93555)))));
        *f = g / alpha;
        *fp = gp;
    } else if (ax > 40.0) {
        *f = fabs(l);
        *fp = x > 0 ? 1.0 : -1.0;
    } else {
        const double th = tanh(x), sh = sinh(x);
        *f = l / th;
        *fp = 1.0 / th - x / (sh * sh);
    }
}

int fs_network_metric_init(fs_network_metric *s, const fs_network *net, const fs_blas *blas,
                           int diagonal, double alpha)
{
    const int d = net != NULL ? net->dim : 0;
    size_t nw, total;
    memset(s, 0, sizeof(*s));
    if (net == NULL || d < 1 || !(alpha > 0) || (!diagonal && (blas == NULL || blas->dsyev == NULL)))
        return FS_EINVAL;
    s->lwork = 3 * d + 64 * d;
    nw = fs_network_workspace_size(d, net->n_hidden);
    total = (size_t)4 * d + 3 * (size_t)d * d + nw + (size_t)s->lwork;
    s->own = malloc(sizeof(double) * total);
    if (s->own == NULL) return FS_ENOMEM;
    s->cq = (double *)s->own;
    s->lam = s->cq + d;
    s->f = s->lam + d;
    s->fp = s->f + d;
    s->V = s->fp + d;
    s->A = s->V + (size_t)d * d;
    s->T = s->A + (size_t)d * d;
    s->net_work = s->T + (size_t)d * d;
    s->syev_work = s->net_work + nw;
    s->net = net;
    s->blas = blas;
    s->diagonal = diagonal;
    s->alpha = alpha;
    s->have = 0;
    if (!diagonal && net->activation != FS_NETWORK_RBF && blas->dgemm != NULL
        && blas->dgemv != NULL && blas->dtrsm != NULL) {
        const size_t ns = (size_t)net->n_hidden, dd = (size_t)d;
        size_t i, j;
        s->own_fast = malloc(sizeof(double) * (3 * ns * dd + 2 * ns + 3 * dd * dd)
                             + sizeof(int) * dd);
        if (s->own_fast == NULL) {
            fs_network_metric_free(s);
            return FS_ENOMEM;
        }
        s->Y = (double *)s->own_fast;
        s->Yv = s->Y + ns * dd;
        s->Tm = s->Yv + ns * dd;
        s->c3 = s->Tm + ns * dd;
        s->pv = s->c3 + ns;
        s->Ew = s->pv + ns;
        s->R = s->Ew + dd * dd;
        s->Lc = s->R + dd * dd;
        s->unsat = (int *)(s->Lc + dd * dd);
        for (i = 0; i < ns; i++)
            for (j = 0; j < dd; j++)
                s->Y[i * dd + j] = net->inv_scale ? net->inv_scale[j] * net->W[i * dd + j]
                                                  : net->W[i * dd + j];
        s->fast = 1;
    }
    return FS_OK;
}

void fs_network_metric_free(fs_network_metric *s)
{
    free(s->own);
    s->own = NULL;
    free(s->own_fast);
    s->own_fast = NULL;
    s->fast = 0;
    free(s->offset);
    s->offset = NULL;
}

int fs_network_metric_set_offset(fs_network_metric *s, const double *P)
{
    const size_t dd = (size_t)s->net->dim * (size_t)s->net->dim;
    size_t i;
    s->have = 0;
    s->have_basis = 0;
    if (P == NULL) {
        free(s->offset);
        s->offset = NULL;
        return FS_OK;
    }
    for (i = 0; i < dd; i++)
        if (!fs_isfinite(P[i])) return FS_EINVAL;
    if (s->offset == NULL) {
        s->offset = malloc(sizeof(double) * dd);
        if (s->offset == NULL) return FS_ENOMEM;
    }
    memcpy(s->offset, P, sizeof(double) * dd);
    return FS_OK;
}

/* The eigen- (or diagonal) decomposition at q, cached. */
static int softabs_at(fs_network_metric *s, const double *q)
{
    const int d = s->net->dim;
    int i, status, info = 0;
    if (s->have && memcmp(q, s->cq, sizeof(double) * (size_t)d) == 0) return FS_OK;
    s->have = 0;
    s->have_basis = 0;
    if (s->diagonal) {
        status = fs_network_hessian_diag(s->net, q, s->lam, s->net_work);
        if (s->offset != NULL)
            for (i = 0; i < d; i++) s->lam[i] += s->offset[(size_t)i * d + i];
    } else {
        const char jobz = 'V', uplo = 'L';
        status = fs_network_hessian(s->net, q, s->V, s->net_work);
        if (status != FS_OK) return status;
        if (s->offset != NULL)
            for (i = 0; i < d * d; i++) s->V[i] += s->offset[i];
        for (i = 0; i < d * d; i++)
            if (!fs_isfinite(s->V[i])) return FS_ENONFINITE;
        s->sat = 0;
        if (s->fast && s->blas->dpotrf != NULL) {
            /* saturated (fs_metrics.h): H - (20 / alpha) I positive definite */
            const double shift = 20.0 / s->alpha;
            memcpy(s->Lc, s->V, sizeof(double) * (size_t)d * d);
            for (i = 0; i < d; i++) s->Lc[(size_t)i * d + i] -= shift;
            s->blas->dpotrf(&uplo, &d, s->Lc, &d, &info);
            if (info == 0) {   /* V keeps H: G at cq */
                memcpy(s->Lc, s->V, sizeof(double) * (size_t)d * d);
                s->blas->dpotrf(&uplo, &d, s->Lc, &d, &info);
                if (info != 0) return FS_ELAPACK;
                memcpy(s->cq, q, sizeof(double) * (size_t)d);
                s->sat = 1;
                s->have = 1;
                return FS_OK;
            }
            info = 0;
        }
        /* symmetric: row- and column-major agree; on return column j of the
           column-major V (V[i + j d]) is the eigenvector of lam[j] */
        s->blas->dsyev(&jobz, &uplo, &d, s->V, &d, s->lam, s->syev_work, &s->lwork, &info);
        if (info != 0) return FS_ELAPACK;
    }
    if (status != FS_OK) return status;
    for (i = 0; i < d; i++) {
        if (!fs_isfinite(s->lam[i])) return FS_ENONFINITE;
        fs_softabs(s->lam[i], s->alpha, &s->f[i], &s->fp[i]);
    }
    memcpy(s->cq, q, sizeof(double) * (size_t)d);
    s->have = 1;
    return FS_OK;
}

/* out (row-major, symmetric) = V diag(c) V^T with V[i + j d] column j. */
static void v_diag_vt(const double *V, const double *c, int d, double *FS_RESTRICT out)
{
    int i, k, j;
    for (i = 0; i < d; i++)
        for (k = 0; k <= i; k++) {
            double acc = 0.0;
            for (j = 0; j < d; j++) acc += V[i + (size_t)j * d] * c[j] * V[k + (size_t)j * d];
            out[(size_t)i * d + k] = acc;
            out[(size_t)k * d + i] = acc;
        }
}

/* J_jk of the Daleckii-Krein formula (fs_metrics.h); exactly 1 when both
   eigenvalues are in the range where SoftAbs is exactly |l| = l. */
static double softabs_J(const fs_network_metric *s, int j, int k)
{
    const double dl = s->lam[j] - s->lam[k];
    if (fabs(dl) > 1e-9 * (fabs(s->lam[j]) + fabs(s->lam[k]) + 1e-300))
        return (s->f[j] - s->f[k]) / dl;
    return 0.5 * (s->fp[j] + s->fp[k]);
}

/* 1 when SoftAbs is not exactly |l| at eigenvalue j (f = l, f' = 1 there). */
static int softabs_unsat(const fs_network_metric *s, int j)
{
    return s->f[j] != s->lam[j] || s->fp[j] != 1.0;
}

/* The rows in the eigenbasis, the third-derivative coefficients and the
   rows of J - 1 at the cached position (after softabs_at). */
static int basis_at(fs_network_metric *s, const double *q)
{
    const int d = s->net->dim, ns = s->net->n_hidden;
    const double one = 1.0, zero = 0.0;
    const char tr = 'T', nt = 'N';
    int i, j, l, r, m = 0, status;
    if (s->have_basis) return FS_OK;
    status = fs_network_unit_coefs(s->net, q, 3, s->c3, s->net_work);
    if (status != FS_OK) return status;
    for (i = 0; i < ns; i++)
        if (!fs_isfinite(s->c3[i])) return FS_ENONFINITE;
    if (s->sat) {
        s->n_unsat = 0;
        s->have_basis = 1;
        return FS_OK;
    }
    /* Yv (row-major ns x d) = Y V: column-major, Yv^T = V^T Y^T */
    s->blas->dgemm(&tr, &nt, &d, &ns, &d, &one, s->V, &d, s->Y, &d, &zero, s->Yv, &d);
    for (j = 0; j < d; j++)
        if (softabs_unsat(s, j)) s->unsat[m++] = j;
    /* b^T (J - 1) b = sum_{j unsat} b_j sum_l (J_jl - 1) (2 - [l unsat]) b_l:
       a pair (j, l) with l saturated is met only from j */
    for (r = 0; r < m; r++)
        for (l = 0; l < d; l++)
            s->Ew[r + (size_t)l * m] = (softabs_J(s, s->unsat[r], l) - 1.0)
                                       * (softabs_unsat(s, l) ? 1.0 : 2.0);
    s->n_unsat = m;
    s->have_basis = 1;
    return FS_OK;
}

/* out = sum_i pv_i w~_i */
static void rows_times(const fs_network_metric *s, double *out)
{
    const int d = s->net->dim, ns = s->net->n_hidden, inc = 1;
    const double one = 1.0, zero = 0.0;
    const char nt = 'N';
    s->blas->dgemv(&nt, &d, &ns, &one, s->Y, &d, s->pv, &inc, &zero, out, &inc);
}

static int fast_contract(fs_network_metric *s, const double *q, const double *Ginv,
                         const double *u, double *tr, double *quad)
{
    const int d = s->net->dim, ns = s->net->n_hidden;
    int status = basis_at(s, q), i, j, l, r, m;
    if (status != FS_OK) return status;
    m = s->n_unsat;
    if (s->sat) {
        const double one = 1.0;
        const char lft = 'L', lo = 'L', nt = 'N', tt = 'T';
        if (tr) {
            /* w~_i^T G^-1 w~_i = |R^T w~_i|^2 with Ginv = R R^T (a triangular
               product, 1.6x the speed of OpenBLAS's solve |L^-1 w~_i|^2 at
               d = 50, s = 2000); by the solve when Ginv has no factor.  Yv
               as scratch. */
            int info = 1;
            if (Ginv != NULL && s->blas->dtrmm != NULL) {
                memcpy(s->R, Ginv, sizeof(double) * (size_t)d * d);
                s->blas->dpotrf(&lo, &d, s->R, &d, &info);
            }
            memcpy(s->Yv, s->Y, sizeof(double) * (size_t)ns * d);
            if (info == 0)
                s->blas->dtrmm(&lft, &lo, &tt, &nt, &d, &ns, &one, s->R, &d, s->Yv, &d);
            else
                s->blas->dtrsm(&lft, &lo, &nt, &nt, &d, &ns, &one, s->Lc, &d, s->Yv, &d);
            for (i = 0; i < ns; i++) {
                const double *y = s->Yv + (size_t)i * d;
                double acc = 0.0;
                for (j = 0; j < d; j++) acc += y[j] * y[j];
                s->pv[i] = s->c3[i] * acc;
            }
            rows_times(s, tr);
        }
        if (quad) return fs_network_quad_rows(s->net, s->c3, u, quad, s->net_work);
        return FS_OK;
    }
    if (tr) {
        double *D = s->A;
        for (j = 0; j < d; j++) D[j] = s->fp[j] / s->f[j];
        for (i = 0; i < ns; i++) {
            const double *y = s->Yv + (size_t)i * d;
            double acc = 0.0;
            for (j = 0; j < d; j++) acc += D[j] * (y[j] * y[j]);
            s->pv[i] = s->c3[i] * acc;
        }
        rows_times(s, tr);
    }
    if (quad) {
        double *a = s->A;
        for (j = 0; j < d; j++) {
            double acc = 0.0;
            for (i = 0; i < d; i++) acc += s->V[i + (size_t)j * d] * u[i];
            a[j] = acc;
        }
        if (m > 0) {
            const double one = 1.0, zero = 0.0;
            const char nt = 'N';
            for (l = 0; l < d; l++)
                for (r = 0; r < m; r++)
                    s->R[r + (size_t)l * m] = a[s->unsat[r]] * s->Ew[r + (size_t)l * m] * a[l];
            /* Tm (m x ns) = R Yv^T */
            s->blas->dgemm(&nt, &nt, &m, &ns, &d, &one, s->R, &m, s->Yv, &d, &zero, s->Tm, &m);
        }
        for (i = 0; i < ns; i++) {
            const double *y = s->Yv + (size_t)i * d, *t = s->Tm + (size_t)i * m;
            double ay = 0.0, v;
            for (j = 0; j < d; j++) ay += a[j] * y[j];
            v = ay * ay;
            for (r = 0; r < m; r++) v += y[s->unsat[r]] * t[r];
            s->pv[i] = s->c3[i] * v;
        }
        rows_times(s, quad);
    }
    return FS_OK;
}

int fs_network_metric_matvec(void *state, const double *q, const double *v, double *out)
{
    fs_network_metric *s = (fs_network_metric *)state;
    int status;
    if (!s->fast) return FS_EINVAL;   /* fast: the BLAS table has dgemv */
    status = fs_network_hessian_vector(s->net, q, v, out, s->net_work);
    if (status == FS_OK && s->offset != NULL) {   /* out += P v (P symmetric) */
        const int d = s->net->dim, inc = 1;
        const double one = 1.0;
        const char nt = 'N';
        s->blas->dgemv(&nt, &d, &d, &one, s->offset, &d, v, &inc, &one, out, &inc);
    }
    return status;
}

int fs_network_metric_matvec_exact(void *state, const double *q)
{
    const fs_network_metric *s = (const fs_network_metric *)state;
    return s->have && s->sat && memcmp(q, s->cq, sizeof(double) * (size_t)s->net->dim) == 0;
}

int fs_network_metric_eval(void *state, const double *q, double *G)
{
    fs_network_metric *s = (fs_network_metric *)state;
    const int d = s->net->dim;
    int status = softabs_at(s, q), i;
    if (status != FS_OK) return status;
    if (s->diagonal) {
        memset(G, 0, sizeof(double) * (size_t)d * d);
        for (i = 0; i < d; i++) G[(size_t)i * d + i] = s->f[i];
    } else if (s->sat) {
        memcpy(G, s->V, sizeof(double) * (size_t)d * d);   /* H, not eigenvectors */
    } else {
        v_diag_vt(s->V, s->f, d, G);
    }
    return FS_OK;
}

int fs_network_metric_contract(void *state, const double *q, const double *Ginv,
                               const double *u, double *tr, double *quad)
{
    fs_network_metric *s = (fs_network_metric *)state;
    const int d = s->net->dim;
    int status = softabs_at(s, q), i, j, k;
    if (status != FS_OK) return status;
    if (s->diagonal) {
        if (tr) {
            for (i = 0; i < d; i++) s->T[i] = s->fp[i] / s->f[i];
            status = fs_network_third_diag(s->net, q, s->T, tr, s->net_work);
            if (status != FS_OK) return status;
        }
        if (quad) {
            for (i = 0; i < d; i++) s->T[i] = u[i] * u[i] * s->fp[i];
            status = fs_network_third_diag(s->net, q, s->T, quad, s->net_work);
        }
        return status;
    }
    if (s->fast) return fast_contract(s, q, Ginv, u, tr, quad);
    if (tr) {
        for (i = 0; i < d; i++) s->T[i] = s->fp[i] / s->f[i];
        v_diag_vt(s->V, s->T, d, s->A);
        status = fs_network_third_contractions(s->net, q, s->A, NULL, tr, NULL, s->net_work);
        if (status != FS_OK) return status;
    }
    if (quad) {
        double *a = s->T, *M = s->A, *VM = s->T + d;   /* T holds a, then V M (rows 1..) */
        /* a = V^T u; M = J o a a^T */
        for (j = 0; j < d; j++) {
            double acc = 0.0;
            for (i = 0; i < d; i++) acc += s->V[i + (size_t)j * d] * u[i];
            a[j] = acc;
        }
        for (j = 0; j < d; j++)
            for (k = 0; k <= j; k++) {
                const double J = softabs_J(s, j, k);
                M[(size_t)j * d + k] = M[(size_t)k * d + j] = J * a[j] * a[k];
            }
        /* B = V M V^T: first VM (row-major d x d) into T after a, then B into A */
        (void)VM;
        {
            double *P = s->T;   /* a is no longer needed: M holds it */
            for (i = 0; i < d; i++)
                for (k = 0; k < d; k++) {
                    double acc = 0.0;
                    for (j = 0; j < d; j++) acc += s->V[i + (size_t)j * d] * M[(size_t)j * d + k];
                    P[(size_t)i * d + k] = acc;
                }
            for (i = 0; i < d; i++)
                for (k = 0; k <= i; k++) {
                    double acc = 0.0;
                    for (j = 0; j < d; j++) acc += P[(size_t)i * d + j] * s->V[k + (size_t)j * d];
                    M[(size_t)i * d + k] = M[(size_t)k * d + i] = acc;
                }
        }
        status = fs_network_third_contractions(s->net, q, M, NULL, quad, NULL, s->net_work);
    }
    return status;
}
