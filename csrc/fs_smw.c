/* fs_smw.c: Sherman-Morrison-Woodbury updates for gradient matching (VHMC).
 * See fs_smw.h for the formulas and the storage convention.
 *
 * Layout reminder: the row-major d x s array A is, to Fortran BLAS, the
 * s x d matrix A^T (leading dimension s); the row-major upper triangle of the
 * symmetric C is the Fortran lower triangle (uplo = 'L').  Every s x d work
 * array below is Fortran column-major s x d (leading dimension s).
 */
#include "fs_smw.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const int fs__one = 1;
static const double fs__d1 = 1.0;
static const double fs__d0 = 0.0;
static const double fs__dm1 = -1.0;

int fs_smw_init(fs_smw *st, const fs_blas *blas, int s, int d, double lambda)
{
    memset(st, 0, sizeof(*st));
    if (s < 1 || d < 1 || blas == NULL || !(lambda > 0.0) || !fs_isfinite(lambda))
        return FS_EINVAL;
    st->mem = (double *)malloc(sizeof(double) * ((size_t)s + (size_t)s * (size_t)s));
    if (st->mem == NULL) return FS_ENOMEM;
    st->s = s;
    st->d = d;
    st->lambda = lambda;
    st->blas = blas;
    st->v = st->mem;
    st->C = st->mem + s;
    fs_smw_reset(st);
    return FS_OK;
}

void fs_smw_free(fs_smw *st)
{
    free(st->mem);
    st->mem = NULL;
    st->v = st->C = NULL;
}

void fs_smw_reset(fs_smw *st)
{
    const size_t s = (size_t)st->s;
    size_t i;
    memset(st->v, 0, sizeof(double) * s);
    memset(st->C, 0, sizeof(double) * s * s);
    for (i = 0; i < s; i++) st->C[i * s + i] = 1.0 / st->lambda;   /* C_0 = I / lambda */
    st->n_seen = 0;
}

size_t fs_smw_workspace_size(int s, int d)
{
    if (s < 1 || d < 1) return 0;
    return (size_t)s * (size_t)d + (size_t)d * (size_t)d + (size_t)d;
}

size_t fs_smw_batch_workspace_size(int s)
{
    return s > 0 ? (size_t)s * (size_t)s : 0;
}

/* C -= E E^T (E: Fortran s x d), keeping the full array exactly symmetric. */
static void fs__smw_downdate(const fs_blas *blas, int s, int d, const double *E,
                             double *FS_RESTRICT C)
{
#ifdef FS_SMW_GEMM_DOWNDATE
    blas->dgemm("N", "T", &s, &s, &d, &fs__dm1, E, &s, E, &s, &fs__d1, C, &s);
#else
    /* dsyrk on the Fortran lower (= row-major upper) triangle, then mirror it
       to the row-major lower triangle in cache-sized tiles. */
    const size_t n = (size_t)s;
    size_t i0, j0, i, j;
    blas->dsyrk("L", "N", &s, &d, &fs__dm1, E, &s, &fs__d1, C, &s);
    for (i0 = 0; i0 < n; i0 += 32) {
        const size_t i1 = i0 + 32 < n ? i0 + 32 : n;
        for (j0 = i0; j0 < n; j0 += 32) {
            const size_t j1 = j0 + 32 < n ? j0 + 32 : n;
            for (i = i0; i < i1; i++) {
                const double *FS_RESTRICT src = C + i * n;
                for (j = (j0 > i + 1 ? j0 : i + 1); j < j1; j++)
                    C[j * n + i] = src[j];
            }
        }
    }
#endif
}

/* Eq. (3.20)-(3.21) (Proposition 2): W = C A^T (I + A C A^T)^{-1},
 * v += W (g - A v), C -= W A C, with the d x d system solved by Cholesky. */
int fs_smw_update(fs_smw *st, const double *A, const double *g,
                  double *FS_RESTRICT work)
{
    const fs_blas *blas = st->blas;
    const int s = st->s, d = st->d;
    const size_t sd = (size_t)s * (size_t)d;
    double *FS_RESTRICT B = work;             /* s x d: C A^T, then E = B L^{-T} */
    double *FS_RESTRICT M = work + sd;        /* d x d: I + A C A^T, then L      */
    double *FS_RESTRICT r = M + (size_t)d * d; /* d: g - A v, then L^{-1} (g - A v) */
    size_t k;
    int i, info = 0;

    for (k = 0; k < sd; k++)
        if (!fs_isfinite(A[k])) return FS_ENONFINITE;
    for (i = 0; i < d; i++)
        if (!fs_isfinite(g[i])) return FS_ENONFINITE;

    /* B = C A^T  (C is stored in full, so a plain dgemm) */
    blas->dgemm("N", "N", &s, &d, &s, &fs__d1, st->C, &s, A, &s, &fs__d0, B, &s);
    /* M = I + A B (only its lower triangle is read by dpotrf) */
    memset(M, 0, sizeof(double) * (size_t)d * d);
    for (i = 0; i < d; i++) M[(size_t)i * d + i] = 1.0;
    blas->dgemm("T", "N", &d, &d, &s, &fs__d1, A, &s, B, &s, &fs__d1, M, &d);
    /* r = g - A v */
    memcpy(r, g, sizeof(double) * (size_t)d);
    blas->dgemv("T", &s, &d, &fs__dm1, A, &s, st->v, &fs__one, &fs__d1, r, &fs__one);
    /* M = L L^T */
    blas->dpotrf("L", &d, M, &d, &info);
    if (info > 0) return FS_ESINGULAR;
    if (info < 0) return FS_ELAPACK;
    /* --- from here on the state changes --- */
    /* E = B L^{-T};  z = L^{-1} r;  v += E z  (= W (g - A v)) */
    blas->dtrsm("R", "L", "T", "N", &s, &d, &fs__d1, M, &d, B, &s);
    blas->dtrsv("L", "N", "N", &d, M, &d, r, &fs__one);
    blas->dgemv("N", &s, &d, &fs__d1, B, &s, r, &fs__one, &fs__d1, st->v, &fs__one);
    /* C -= E E^T  (= W A C = C A^T M^{-1} A C) */
    fs__smw_downdate(blas, s, d, B, st->C);
    st->n_seen++;
    return FS_OK;
}

int fs_smw_update_many(fs_smw *st, const double *As, const double *gs, long N,
                       double *FS_RESTRICT work, long *n_done)
{
    const size_t sd = (size_t)st->s * (size_t)st->d;
    long t;
    int status = FS_OK;
    for (t = 0; t < N; t++) {
        status = fs_smw_update(st, As + (size_t)t * sd, gs + (size_t)t * (size_t)st->d, work);
        if (status != FS_OK) break;
    }
    if (n_done) *n_done = t;
    return status;
}

/* C <- (C + C^T) / 2 */
static void fs__symmetrise(int s, double *FS_RESTRICT C)
{
    const size_t n = (size_t)s;
    size_t i, j;
    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++) {
            const double m = 0.5 * (C[i * n + j] + C[j * n + i]);
            C[i * n + j] = m;
            C[j * n + i] = m;
        }
}

static int fs__smw_batch(fs_smw *st, const double *As, const double *gs, long N,
                         double *FS_RESTRICT G)
{
    const fs_blas *blas = st->blas;
    const int s = st->s, d = st->d;
    const size_t ss = (size_t)s * (size_t)s;
    const long chunk = (long)(INT_MAX / 2) / d;   /* points per BLAS call */
    long t0;
    size_t k, len;
    int i, info = 0;

    if (N < 0) return FS_EINVAL;
    len = (size_t)N * (size_t)s * (size_t)d;
    for (k = 0; k < len; k++)
        if (!fs_isfinite(As[k])) return FS_ENONFINITE;
    for (k = 0; k < (size_t)N * (size_t)d; k++)
        if (!fs_isfinite(gs[k])) return FS_ENONFINITE;

    /* G = lambda I + sum_t A_t^T A_t;  v = sum_t A_t^T g_t */
    memset(G, 0, sizeof(double) * ss);
    for (i = 0; i < s; i++) G[(size_t)i * s + i] = st->lambda;
    memset(st->v, 0, sizeof(double) * (size_t)s);
    for (t0 = 0; t0 < N; t0 += chunk) {
        const long m = (N - t0) < chunk ? (N - t0) : chunk;
        const int rows = (int)(m * d);
        const double *X = As + (size_t)t0 * (size_t)s * (size_t)d;
        blas->dsyrk("L", "N", &s, &rows, &fs__d1, X, &s, &fs__d1, G, &s);
        blas->dgemv("N", &s, &rows, &fs__d1, X, &s, gs + (size_t)t0 * (size_t)d,
                    &fs__one, &fs__d1, st->v, &fs__one);
    }
    blas->dpotrf("L", &s, G, &s, &info);
    if (info > 0) return FS_ESINGULAR;
    if (info < 0) return FS_ELAPACK;
    blas->dpotrs("L", &s, &fs__one, G, &s, st->v, &s, &info);
    if (info != 0) return FS_ELAPACK;
    memset(st->C, 0, sizeof(double) * ss);
    for (i = 0; i < s; i++) st->C[(size_t)i * s + i] = 1.0;
    blas->dpotrs("L", &s, &s, G, &s, st->C, &s, &info);
    if (info != 0) return FS_ELAPACK;
    fs__symmetrise(s, st->C);
    for (i = 0; i < s; i++)
        if (!fs_isfinite(st->v[i])) return FS_ENONFINITE;
    st->n_seen = N;
    return FS_OK;
}

/* Batch solution of eq. (3.19) by the normal equations and Cholesky; also
 * sets C = (lambda I + sum A_t^T A_t)^{-1} so that online updates (3.20-3.21)
 * can continue from it (restart). */
int fs_smw_solve_batch(fs_smw *st, const double *As, const double *gs, long N,
                       double *FS_RESTRICT work)
{
    int status = fs__smw_batch(st, As, gs, N, work);
    if (status != FS_OK) fs_smw_reset(st);
    return status;
}
