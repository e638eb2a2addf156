/* fs_greville.c: Greville's row-addition recursion for the pseudo-inverse
 * and recursive least squares (ARNS-HMC output weights).  See fs_greville.h
 * for the formulas and the storage convention.
 *
 * Layout reminder: a row-major s x s array M is, to Fortran BLAS, the matrix
 * M^T; for a symmetric matrix whose row-major upper triangle is stored, that
 * is the Fortran lower triangle, hence uplo = 'L' throughout.  A row-major
 * n x s matrix H is the Fortran s x n matrix H^T (leading dimension s).
 */
#include "fs_greville.h"

#if defined(__GNUC__) && !defined(__clang__)
/* GCC's -Wpsabi fires at every use of a 32-byte vector helper in the
 * baseline clone, inlined or not; the helpers below are FS__INLINE (always
 * inlined), so no call passes vectors through the ABI it warns about.
 * tests/test_csources.py checks that every vector helper is FS__INLINE. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fs_kernel.h"   /* FS_CLONES: multi-versioning of the rank-one loops */

static const int fs__one = 1;
static const double fs__d1 = 1.0;
static const double fs__d0 = 0.0;
static const double fs__dm1 = -1.0;

/* ---- 4-wide vectors (GCC / clang vector extensions) ---------------------- */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(FS_NO_VECTOR_EXT)
#define FS__GRV_VEC 1
typedef double fs__g4 __attribute__((vector_size(32)));
/* FS__INLINE (always inline): called from the multi-versioned loops, these
 * must become part of each clone; an out-of-line copy would be compiled for
 * the baseline ISA and pass 32-byte vectors by a different ABI (at -O0 that
 * crashed). */
FS__INLINE fs__g4 fs__g4_ld(const double *p)
{
    fs__g4 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
FS__INLINE void fs__g4_st(double *p, fs__g4 v) { __builtin_memcpy(p, &v, sizeof v); }
FS__INLINE fs__g4 fs__g4_set1(double a) { fs__g4 v = {a, a, a, a}; return v; }
#endif

/* M -= w w^T on the row-major upper triangle.  w_i * w_j == w_j * w_i in
 * IEEE arithmetic, so the update is exactly symmetric. */
FS_CLONES
static void fs__syr_minus(int s, double *FS_RESTRICT M, const double *FS_RESTRICT w)
{
    int i, j;
    for (i = 0; i < s; i++) {
        double *FS_RESTRICT row = M + (size_t)i * (size_t)s;
        const double wi = w[i];
        j = i;
#ifdef FS__GRV_VEC
        {
            const fs__g4 vi = fs__g4_set1(wi);
            for (; j + 4 <= s; j += 4)
                fs__g4_st(row + j, fs__g4_ld(row + j) - vi * fs__g4_ld(w + j));
        }
#endif
        for (; j < s; j++)
            row[j] -= wi * w[j];
    }
}

/* M += p p^T - q q^T on the row-major upper triangle (one pass). */
FS_CLONES
static void fs__syr2_pm(int s, double *FS_RESTRICT M, const double *FS_RESTRICT p,
                        const double *FS_RESTRICT q)
{
    int i, j;
    for (i = 0; i < s; i++) {
        double *FS_RESTRICT row = M + (size_t)i * (size_t)s;
        const double pi = p[i], qi = q[i];
        j = i;
#ifdef FS__GRV_VEC
        {
            const fs__g4 vp = fs__g4_set1(pi), vq = fs__g4_set1(qi);
            for (; j + 4 <= s; j += 4)
                fs__g4_st(row + j, fs__g4_ld(row + j) +
                                   (vp * fs__g4_ld(p + j) - vq * fs__g4_ld(q + j)));
        }
#endif
        for (; j < s; j++)
            row[j] += pi * p[j] - qi * q[j];
    }
}

/* y = M x for the symmetric M stored in the row-major upper triangle, in one
 * pass over the triangle: row i adds M_ij x_i to y_j (j > i) and its dot
 * product with x to y_i.  Plain loops rather than BLAS dsymv: for these sizes
 * a threaded BLAS level-2 call costs more in thread wake-ups than the work
 * (measured with OpenBLAS 0.3.31 on 2 cores, s = 200, c = 0 branch:
 * 129 us per update through dsymv + loops, 18 us with OpenBLAS restricted to
 * one thread, 10-12 us with these loops), and a fixed summation order makes
 * the result independent of the BLAS, of the thread count and of the ISA
 * clone picked at load time (no FMA contraction under -std=c99). */
FS_CLONES
static void fs__symv(int s, const double *FS_RESTRICT M, const double *FS_RESTRICT x,
                     double *FS_RESTRICT y)
{
    int i, j;
    memset(y, 0, sizeof(double) * (size_t)s);
    for (i = 0; i < s; i++) {
        const double *FS_RESTRICT row = M + (size_t)i * (size_t)s;
        const double xi = x[i];
        double acc = 0.0;
        j = i + 1;
#ifdef FS__GRV_VEC
        {
            const fs__g4 vi = fs__g4_set1(xi);
            fs__g4 a0 = fs__g4_set1(0.0), a1 = a0;
            for (; j + 8 <= s; j += 8) {
                const fs__g4 r0 = fs__g4_ld(row + j), r1 = fs__g4_ld(row + j + 4);
                fs__g4_st(y + j, fs__g4_ld(y + j) + r0 * vi);
                fs__g4_st(y + j + 4, fs__g4_ld(y + j + 4) + r1 * vi);
                a0 += r0 * fs__g4_ld(x + j);
                a1 += r1 * fs__g4_ld(x + j + 4);
            }
            a0 += a1;
            acc = (a0[0] + a0[2]) + (a0[1] + a0[3]);
        }
#endif
        for (; j < s; j++) {
            y[j] += row[j] * xi;
            acc += row[j] * x[j];
        }
        y[i] += row[i] * xi + acc;
    }
}

static double fs__dot(int n, const double *x, const double *y)
{
    /* Fixed-order sum (no BLAS): the same bits on every machine path. */
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        a0 += x[i] * y[i];
        a1 += x[i + 1] * y[i + 1];
        a2 += x[i + 2] * y[i + 2];
        a3 += x[i + 3] * y[i + 3];
    }
    for (; i < n; i++) a0 += x[i] * y[i];
    return (a0 + a1) + (a2 + a3);
}

static void fs__set_identity(int s, double *M, double diag)
{
    size_t i, ss = (size_t)s * (size_t)s;
    memset(M, 0, ss * sizeof(double));
    for (i = 0; i < (size_t)s; i++) M[i * (size_t)s + i] = diag;
}

/* ---- life cycle --------------------------------------------------------- */

/* Empty state of Algorithm 4 (n = 0): v = 0, Phi = I, Theta = 0, or the
 * ridge start P = I / lambda. */
int fs_greville_init(fs_greville *g, const fs_blas *blas, int s, double lambda,
                     double tol)
{
    size_t ss;
    memset(g, 0, sizeof(*g));
    if (s < 1 || blas == NULL || !(lambda >= 0.0) || !fs_isfinite(lambda) ||
        !(tol >= 0.0) || !fs_isfinite(tol))
        return FS_EINVAL;
    ss = (size_t)s * (size_t)s;
    g->mem = (double *)malloc(sizeof(double) * ((size_t)s + 2 * ss));
    if (g->mem == NULL) return FS_ENOMEM;
    g->s = s;
    g->lambda = lambda;
    g->ridge = lambda > 0.0;
    g->tol = tol;
    g->blas = blas;
    g->v = g->mem;
    g->Theta = g->mem + s;
    g->Phi = g->ridge ? NULL : g->mem + s + ss;
    g->resync_every = 0;
    fs_greville_reset(g);
    return FS_OK;
}

/* Releases the memory of fs_greville_init. */
void fs_greville_free(fs_greville *g)
{
    free(g->mem);
    g->mem = NULL;
    g->v = g->Phi = g->Theta = NULL;
}

/* Back to the empty state (Algorithm 4 start), keeping the allocation. */
void fs_greville_reset(fs_greville *g)
{
    const int s = g->s;
    memset(g->v, 0, sizeof(double) * (size_t)s);
    if (g->ridge) {
        fs__set_identity(s, g->Theta, 1.0 / g->lambda);     /* P_0 = I / lambda */
    } else {
        fs__set_identity(s, g->Phi, 1.0);                    /* Phi_0 = I        */
        memset(g->Theta, 0, sizeof(double) * (size_t)s * (size_t)s);  /* Theta_0 = 0 */
    }
    g->n_seen = 0;
    g->rank = 0;
    g->n_new_direction = 0;
    g->n_in_span = 0;
    g->since_resync = 0;
}

/* Scratch for one update (Proposition 1): u = Theta h, c = Phi h, and one more. */
size_t fs_greville_workspace_size(int s)
{
    return s > 0 ? 3 * (size_t)s : 0;
}

/* Re-synchronisation policy: due after resync_every updates. */
int fs_greville_resync_due(const fs_greville *g)
{
    return g->resync_every > 0 && g->since_resync >= g->resync_every;
}

/* ---- one point ------------------------------------------------------------ */

/* Algorithm 4 / Proposition 1 (Appendix C): absorb the row h with target y.
 * Pinv mode: v = H^+ y, Phi = I - H^+ H, Theta = H^+ H^{+T} after the call;
 * ridge mode: the recursive least-squares update of P = (H^T H + lambda I)^{-1}. */
int fs_greville_update(fs_greville *g, const double *h, double y,
                       double *FS_RESTRICT work)
{
    const int s = g->s;
    double *FS_RESTRICT u = work;          /* Theta h                   */
    double *FS_RESTRICT c = work + s;      /* Phi h, then Phi Phi h     */
    double *FS_RESTRICT t = work + 2 * s;  /* scratch                   */
    double hh, hu, gam, err, scale;
    int i, new_direction = 0;

    if (!fs_isfinite(y)) return FS_ENONFINITE;
    hh = fs__dot(s, h, h);
    if (!fs_isfinite(hh)) return FS_ENONFINITE;   /* catches inf / nan in h */

    err = y - fs__dot(s, h, g->v);                 /* t - h.v                   */

    /* c != 0 test: only while the row space is not yet all of R^s. */
    if (!g->ridge && g->rank < s && hh > 0.0) {
        const double thr2 = g->tol * g->tol * hh;  /* ||c||^2 > tol^2 ||h||^2   */
        fs__symv(s, g->Phi, h, t);
        if (fs__dot(s, t, t) > thr2) {
            fs__symv(s, g->Phi, t, c);    /* reproject: c = Phi (Phi h) */
            if (fs__dot(s, c, c) > thr2) new_direction = 1;
        }
    }

    fs__symv(s, g->Theta, h, u);
    hu = fs__dot(s, h, u);
    gam = 1.0 + hu;
    if (!(gam > 0.0) || !fs_isfinite(gam)) return FS_ESINGULAR;

    if (new_direction) {
        /* c != 0: b = c / (c.c); Phi -= c c^T / (c.c);
           Theta += p p^T - q q^T with q = u / sqrt(gam), p = sqrt(gam) (b - u / gam). */
        const double cc = fs__dot(s, c, c);
        const double rg = sqrt(gam);
        const double inv_cc = 1.0 / cc;
        const double inv_nc = 1.0 / sqrt(cc);
        double *FS_RESTRICT q = t;
        for (i = 0; i < s; i++) {
            const double bi = c[i] * inv_cc;
            g->v[i] += bi * err;
            q[i] = u[i] / rg;
            u[i] = rg * (bi - u[i] / gam);         /* u now holds p             */
            c[i] *= inv_nc;                        /* c now holds c / ||c||     */
        }
        fs__syr2_pm(s, g->Theta, u, q);
        g->rank++;
        if (g->rank >= s) {
            /* The row space is R^s: Phi is exactly 0 and is no longer read. */
            memset(g->Phi, 0, sizeof(double) * (size_t)s * (size_t)s);
        } else {
            fs__syr_minus(s, g->Phi, c);
        }
        g->n_new_direction++;
    } else {
        /* c = 0 (or ridge): b = Theta h / (1 + h.Theta h);
           Theta -= u u^T / gam, applied as w w^T with w = u / sqrt(gam). */
        scale = err / gam;
        {
            const double rg = 1.0 / sqrt(gam);
            for (i = 0; i < s; i++) {
                g->v[i] += u[i] * scale;
                t[i] = u[i] * rg;
            }
        }
        fs__syr_minus(s, g->Theta, t);
        g->n_in_span++;
    }
    g->n_seen++;
    g->since_resync++;
    return FS_OK;
}

/* Proposition 1 applied to n rows in order. */
int fs_greville_update_many(fs_greville *g, const double *H, const double *y,
                            long n, double *FS_RESTRICT work, long *n_done)
{
    long k;
    int st = FS_OK;
    for (k = 0; k < n; k++) {
        st = fs_greville_update(g, H + (size_t)k * (size_t)g->s, y[k], work);
        if (st != FS_OK) break;
    }
    if (n_done) *n_done = k;
    return st;
}

/* ---- batch ----------------------------------------------------------------- */

static int fs__dsyev_lwork(const fs_blas *blas, int s)
{
    int lwork = -1, info = 0;
    double query = 0.0, a = 0.0, w = 0.0;
    int lda = s;
    blas->dsyev("V", "L", &s, &a, &lda, &w, &query, &lwork, &info);
    if (info != 0 || !(query >= 1.0)) return 3 * s;
    lwork = (int)query;
    return lwork < 3 * s ? 3 * s : lwork;
}

/* Scratch of the batch solve (Appendix C start-up): Gram matrix, n residuals,
 * three s-vectors and the dsyev work array. */
size_t fs_greville_batch_workspace_size(const fs_greville *g, long n)
{
    const size_t s = (size_t)g->s;
    size_t base = s * s + 3 * s + (n > 0 ? (size_t)n : 0);
    if (!g->ridge) base += (size_t)fs__dsyev_lwork(g->blas, g->s);
    return base;
}

/* y_out = H^T x (H: n x s row-major, x: n), in chunks so that int holds n. */
static void fs__Ht_times(const fs_blas *blas, int s, const double *H, long n,
                         const double *x, double *FS_RESTRICT out)
{
    long k0 = 0;
    memset(out, 0, sizeof(double) * (size_t)s);
    while (k0 < n) {
        int m = (n - k0) > (long)(INT_MAX / 2) ? INT_MAX / 2 : (int)(n - k0);
        blas->dgemv("N", &s, &m, &fs__d1, H + (size_t)k0 * (size_t)s, &s,
                    x + k0, &fs__one, &fs__d1, out, &fs__one);
        k0 += m;
    }
}

/* r = y - H v */
static void fs__residual(const fs_blas *blas, int s, const double *H, long n,
                         const double *y, const double *v, double *FS_RESTRICT r)
{
    long k0 = 0;
    memcpy(r, y, sizeof(double) * (size_t)n);
    while (k0 < n) {
        int m = (n - k0) > (long)(INT_MAX / 2) ? INT_MAX / 2 : (int)(n - k0);
        blas->dgemv("T", &s, &m, &fs__dm1, H + (size_t)k0 * (size_t)s, &s,
                    v, &fs__one, &fs__d1, r + k0, &fs__one);
        k0 += m;
    }
}

/* G = H^T H (Fortran lower = row-major upper triangle), chunked. */
static void fs__gram(const fs_blas *blas, int s, const double *H, long n,
                     double *FS_RESTRICT G)
{
    long k0 = 0;
    memset(G, 0, sizeof(double) * (size_t)s * (size_t)s);
    while (k0 < n) {
        int m = (n - k0) > (long)(INT_MAX / 2) ? INT_MAX / 2 : (int)(n - k0);
        blas->dsyrk("L", "N", &s, &m, &fs__d1, H + (size_t)k0 * (size_t)s, &s,
                    &fs__d1, G, &s);
        k0 += m;
    }
}

static int fs__resync(fs_greville *g, const double *H, const double *y, long n,
                      double *FS_RESTRICT work)
{
    const fs_blas *blas = g->blas;
    const int s = g->s;
    const size_t ss = (size_t)s * (size_t)s;
    double *G, *Hty, *tmp, *r, *lw;
    int info = 0, i, it;

    if (n < 0) return FS_EINVAL;
    fs_greville_reset(g);
    if (n == 0) return FS_OK;
    {
        const size_t len = (size_t)n * (size_t)s;
        size_t k;
        for (k = 0; k < len; k++)
            if (!fs_isfinite(H[k])) return FS_ENONFINITE;
        for (k = 0; k < (size_t)n; k++)
            if (!fs_isfinite(y[k])) return FS_ENONFINITE;
    }

    G = work;
    Hty = G + ss;
    tmp = Hty + s;
    r = tmp + s;
    lw = r + n;

    fs__gram(blas, s, H, n, G);
    fs__Ht_times(blas, s, H, n, y, Hty);

    if (g->ridge) {
        /* P = (H^T H + lambda I)^{-1} by Cholesky; v by dpotrs + refinement. */
        for (i = 0; i < s; i++) G[(size_t)i * s + i] += g->lambda;
        blas->dpotrf("L", &s, G, &s, &info);
        if (info > 0) return FS_ESINGULAR;
        if (info < 0) return FS_ELAPACK;
        fs__set_identity(s, g->Theta, 1.0);
        blas->dpotrs("L", &s, &s, G, &s, g->Theta, &s, &info);
        if (info != 0) return FS_ELAPACK;
        memcpy(g->v, Hty, sizeof(double) * (size_t)s);
        blas->dpotrs("L", &s, &fs__one, G, &s, g->v, &s, &info);
        if (info != 0) return FS_ELAPACK;
        /* one refinement step: v += (H^T H + lambda I)^{-1} (H^T (y - H v) - lambda v) */
        fs__residual(blas, s, H, n, y, g->v, r);
        fs__Ht_times(blas, s, H, n, r, tmp);
        for (i = 0; i < s; i++) tmp[i] -= g->lambda * g->v[i];
        blas->dpotrs("L", &s, &fs__one, G, &s, tmp, &s, &info);
        if (info != 0) return FS_ELAPACK;
        for (i = 0; i < s; i++) g->v[i] += tmp[i];
    } else {
        /* Gram eigen-decomposition: H^T H = V diag(l) V^T. */
        int lwork = fs__dsyev_lwork(blas, s), nnull, rank;
        double lmax, thr, f;
        blas->dsyev("V", "L", &s, G, &s, tmp, lw, &lwork, &info);
        if (info != 0) return FS_ELAPACK;
        /* eigenvalues ascending in tmp; eigenvector k is row k of G (row-major) */
        lmax = tmp[s - 1];
        f = g->tol * g->tol;
        if (f < (double)s * DBL_EPSILON) f = (double)s * DBL_EPSILON;
        thr = lmax * f;
        rank = 0;
        if (lmax > 0.0)
            for (i = 0; i < s; i++) rank += tmp[i] > thr;
        nnull = s - rank;
        /* Phi = V_0 V_0^T (null eigenvectors, rows 0 .. nnull-1) */
        blas->dsyrk("L", "N", &s, &nnull, &fs__d1, G, &s, &fs__d0, g->Phi, &s);
        /* Theta = V_r diag(1/l) V_r^T: scale eigenvector k by 1/sqrt(l_k) */
        for (i = nnull; i < s; i++) {
            const double sc = 1.0 / sqrt(tmp[i]);
            double *row = G + (size_t)i * s;
            int j;
            for (j = 0; j < s; j++) row[j] *= sc;
        }
        blas->dsyrk("L", "N", &s, &rank, &fs__d1, G + (size_t)nnull * s, &s,
                    &fs__d0, g->Theta, &s);
        /* v = Theta H^T y, refined twice: v += Theta H^T (y - H v) */
        fs__symv(s, g->Theta, Hty, g->v);
        for (it = 0; it < 2; it++) {
            fs__residual(blas, s, H, n, y, g->v, r);
            fs__Ht_times(blas, s, H, n, r, Hty);
            blas->dsymv("L", &s, &fs__d1, g->Theta, &s, Hty, &fs__one, &fs__d1,
                        g->v, &fs__one);
        }
        g->rank = rank;
        if (rank >= s) memset(g->Phi, 0, sizeof(double) * ss);
    }
    for (i = 0; i < s; i++)
        if (!fs_isfinite(g->v[i])) return FS_ENONFINITE;
    g->n_seen = n;
    g->since_resync = 0;
    return FS_OK;
}

/* Batch start-up / re-synchronisation (Appendix C): the state of (H, y).
 * On an error the state is reset to the empty one. */
int fs_greville_resync(fs_greville *g, const double *H, const double *y, long n,
                       double *FS_RESTRICT work)
{
    int st = fs__resync(g, H, y, n, work);
    if (st != FS_OK) fs_greville_reset(g);
    return st;
}

/* Initialisation from a batch (Appendix C). */
int fs_greville_init_batch(fs_greville *g, const fs_blas *blas, int s,
                           double lambda, double tol, const double *H,
                           const double *y, long n, double *FS_RESTRICT work)
{
    int st = fs_greville_init(g, blas, s, lambda, tol);
    if (st != FS_OK) return st;
    return fs_greville_resync(g, H, y, n, work);
}
