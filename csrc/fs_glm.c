/* fs_glm.c: fused single-pass GLM potentials and their Fisher information.
 * See fs_glm.h for the model and the determinism contract.
 *
 * Layout of the eval kernel
 *   Rows [0, n) are cut into nb blocks of `rows` rows (fs__eval_blocking,
 *   a function of n only).  Block b writes d gradient partials and one value
 *   partial to work[b*fs__eval_stride(d) ...].  OpenMP (static schedule) spreads the
 *   blocks over threads, or, when called inside a running team (fs_rmhmc.c's
 *   overlapped loop), makes tasks of them for whichever thread is free; the
 *   partials are then added in block order, so neither the thread count nor
 *   the schedule changes a bit of the result.
 *   Inside a block, rows go by panels of up to 24 rows (<= 16 KB): the dot
 *   products x_i . beta of the panel, 4 rows at a time (the loads of beta
 *   are shared); the residuals and losses of the panel, 4 rows per vector;
 *   then g += sum_i r_i x_i, 4 rows at a time, on rows still in L1.  A
 *   software-prefetch cursor runs two panels ahead.
 *
 * Vector code without -ffast-math
 *   GNU vector extensions (4 doubles) with a scalar fallback that performs
 *   the same operations in the same order.  A dot product keeps 8 partial
 *   sums per row, combined in a fixed order.  exp and log1p for the
 *   logistic and Poisson families are evaluated 4 rows at a time by the
 *   polynomial routines below (glibc's exp/log1p are scalar calls and cost
 *   more than the memory traffic of a 50-column row).  a*b + c is fused
 *   where the ISA has FMA (see the pragma below), so the AVX2/AVX-512
 *   versions and the baseline version may differ in the last bits; the
 *   baseline version and the scalar fallback give identical bits.
 *   The hot kernels are compiled for several ISAs (target_clones: AVX-512,
 *   x86-64-v3 = AVX2+FMA, baseline) and picked when the library loads, so a
 *   portable -O3 build still runs wide vector code.
 */
#include "fs_glm.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
/* fs__ld / fs__set1 return 32-byte vectors from always-inlined helpers: the
 * "AVX vector return without AVX changes the ABI" warning does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"
/* Fuse a*b + c where the target has FMA (the AVX2 and AVX-512 versions of
 * the kernels): measured 5-7 % faster for logistic U + grad, with the same
 * or better accuracy.  The baseline version has no FMA and is unchanged. */
#pragma GCC optimize ("fp-contract=fast")
#elif defined(__clang__)
#pragma STDC FP_CONTRACT ON
#endif

#include "fs_kernel.h"   /* FS_CLONES (multi-versioning), FS__INLINE */

#define FS__TILE 4      /* rows per dot/update tile */
#ifndef FS__PANEL
/* Zen 5, logistic, d = 50: panels of 24 rows take 0.85 of the time of
 * panels of 16 with 1 thread, 0.90 with 2 (same bits) */
#define FS__PANEL 24            /* at most this many rows per panel          */
#endif
#ifndef FS__PANEL_BYTES
#define FS__PANEL_BYTES 16384   /* ... and about this much of X (L1-resident) */
#endif

#define FS_SQRT1_2 0.70710678118654752440         /* 1/sqrt(2)        */
#define FS_INV_SQRT_2PI 0.39894228040143267794    /* 1/sqrt(2 pi)     */
#define FS_LOG_SQRT_2PI 0.91893853320467274178    /* log sqrt(2 pi)   */
/* Beyond |z| = FS_PROBIT_TAIL the normal tail uses the Mills-ratio series;
 * below it erfc is accurate and far from underflow (erfc(30/sqrt2) ~ 1e-197). */
#define FS_PROBIT_TAIL 30.0

/* ---- blocking: functions of n only, never of the thread count ----------- */
static size_t fs__round_up(size_t a, size_t m) { return (a + m - 1) / m * m; }

static void fs__eval_blocking(size_t n, size_t *rows, size_t *nb)
{
    size_t r = FS_GLM_BLOCK_ROWS;
    if (n > r * (size_t)FS_GLM_MAX_BLOCKS)
        r = fs__round_up((n + FS_GLM_MAX_BLOCKS - 1) / FS_GLM_MAX_BLOCKS, FS__TILE);
    *rows = r;
    *nb = (n + r - 1) / r;
}

static void fs__fisher_blocking(size_t n, size_t *rows, size_t *nc)
{
    size_t c = (n + FS_GLM_FISHER_MIN_ROWS - 1) / FS_GLM_FISHER_MIN_ROWS;
    size_t r;
    if (c > FS_GLM_FISHER_MAX_CHUNKS) c = FS_GLM_FISHER_MAX_CHUNKS;
    if (c < 1) c = 1;
    r = fs__round_up((n + c - 1) / c, FS__TILE);
    *rows = r;
    *nc = (n + r - 1) / r;
}

/* Doubles between two blocks' partials in the eval workspace (d + 1) and
 * between two chunks' partials in the Fisher workspace (d * d), rounded up
 * to whole 64-byte lines, so that two threads never write to the same cache
 * line (a block updates its d gradient partials once per 4 rows); each
 * workspace gets FS__ALIGN_SLACK doubles more, to align its start. */
#define FS__ALIGN_SLACK 8
static size_t fs__eval_stride(size_t d) { return fs__round_up(d + 1, 8); }
static size_t fs__fisher_stride(size_t d) { return fs__round_up(d * d, 8); }

static double *fs__align64(double *p)
{
    return (double *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
}

int fs_glm_workspace_size(size_t n, size_t d, size_t *eval_doubles,
                          size_t *fisher_doubles)
{
    size_t rows, nb;
    if (n == 0 || d == 0) return FS_EINVAL;
    if (eval_doubles) {
        fs__eval_blocking(n, &rows, &nb);
        *eval_doubles = nb * fs__eval_stride(d) + FS__ALIGN_SLACK;
    }
    if (fisher_doubles) {
        fs__fisher_blocking(n, &rows, &nb);
        *fisher_doubles = nb * fs__fisher_stride(d) + FS__ALIGN_SLACK;
    }
    return FS_OK;
}

/* ---- 4-wide vectors: the types and helpers of fs_vmath.h ----------------- */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(FS_NO_VECTOR_EXT)
#define FS__VEC 1
typedef double fs__v2 __attribute__((vector_size(16)));
#endif
#include "fs_vmath.h"

/* ---- exp and log1p, scalar and 4-wide, bit-identical --------------------- */
/* exp(x): x = k ln2 + r, |r| <= ln2/2 (Cody-Waite, ln2 in two parts),
 * exp(r) by its Taylor polynomial of degree 13 (truncation < 5e-18
 * relative), times 2^k applied as two factors so that the results that are
 * subnormal or within a factor 2 of overflow come out right.  x is clamped
 * to [-746, 710] first (exp underflows to 0 / overflows to inf there), NaN
 * propagates.  About 1 ulp. */
#define FS__SHIFT_BITS 0x4338000000000000ULL
/* Estrin's scheme: a short dependency chain (the kernels are latency bound
 * otherwise).  C() broadcasts a constant in the vector version. */
#define FS__EXP_POLY(r, P, C)                                                 \
    do {                                                                      \
        const FS__T r2_ = r * r, r4_ = r2_ * r2_, r8_ = r4_ * r4_;            \
        const FS__T a0_ = C(1.0) + r;                                         \
        const FS__T a1_ = C(0.5) + r * C(0.16666666666666666);                \
        const FS__T a2_ = C(0.041666666666666664) + r * C(0.008333333333333333); \
        const FS__T a3_ = C(0.001388888888888889) + r * C(0.0001984126984126984); \
        const FS__T a4_ = C(2.48015873015873e-05) + r * C(2.7557319223985893e-06); \
        const FS__T a5_ = C(2.755731922398589e-07) + r * C(2.505210838544172e-08); \
        const FS__T a6_ = C(2.08767569878681e-09) + r * C(1.6059043836821613e-10); \
        const FS__T b0_ = a0_ + r2_ * a1_, b1_ = a2_ + r2_ * a3_;              \
        const FS__T b2_ = a4_ + r2_ * a5_;                                    \
        const FS__T c0_ = b0_ + r4_ * b1_, c1_ = b2_ + r4_ * a6_;              \
        P = c0_ + r8_ * c1_;                                                  \
    } while (0)


#define FS__T double
FS__INLINE double fs__exp(double x)
{
    double kd, r, p;
    uint64_t k, k1, k2;
    if (x < FS__EXP_LO) x = FS__EXP_LO;
    if (x > FS__EXP_HI) x = FS__EXP_HI;
    kd = x * FS__LOG2E + FS__SHIFT;
    k = fs__bits(kd) - FS__SHIFT_BITS;       /* round(x / ln2), mod 2^64 */
    kd = kd - FS__SHIFT;
    r = (x - kd * FS__LN2_HI) - kd * FS__LN2_LO;
    FS__EXP_POLY(r, p, );
    k1 = ((k + 2048u) >> 1) - 1024u;           /* floor(k / 2)            */
    k2 = k - k1;
    return (p * fs__from_bits((k1 + 1023u) << 52)) * fs__from_bits((k2 + 1023u) << 52);
}

/* log1p(e) for e in [0, 1] (the logistic softplus term, fs__logistic_terms):
 * with f = e, or (e - 1)/2 and an added ln 2 when e > sqrt2 - 1, so that
 * 1 + f is in [sqrt(1/2), sqrt(2)]: log(1 + f) = 2 atanh(s), s = f/(2 + f),
 * |s| <= 0.1716, z = s^2 <= 0.0295, by its series to s^19 (truncation
 * < 3e-17 relative).  About 1 ulp. */
#define FS__SQRT2M1 0.41421356237309515
#define FS__LOG1P_POLY(z, P, C)                                               \
    do {                                                                      \
        const FS__T z2_ = z * z, z4_ = z2_ * z2_, z8_ = z4_ * z4_;            \
        const FS__T a0_ = C(1.0) + z * C(0.3333333333333333);                 \
        const FS__T a1_ = C(0.2) + z * C(0.14285714285714285);                \
        const FS__T a2_ = C(0.1111111111111111) + z * C(0.09090909090909091); \
        const FS__T a3_ = C(0.07692307692307693) + z * C(0.06666666666666667); \
        const FS__T a4_ = C(0.058823529411764705) + z * C(0.05263157894736842); \
        const FS__T b0_ = a0_ + z2_ * a1_, b1_ = a2_ + z2_ * a3_;              \
        P = (b0_ + z4_ * b1_) + z8_ * a4_;                                    \
    } while (0)

/* exp(x) for x <= 0 (the logistic e = exp(-|t|)): as fs__exp, whose bits
 * it gives for x >= -708, but with one scale factor and no clamps, and 0
 * for x < -708 (exp(x) < 3.4e-308 there, below what changes a softplus or
 * a sigmoid residual).  NaN propagates. */
#define FS__EXPNEG_MIN (-708.0)
FS__INLINE double fs__exp_neg(double x)
{
    double kd, r, p;
    uint64_t k;
    kd = x * FS__LOG2E + FS__SHIFT;
    k = fs__bits(kd) - FS__SHIFT_BITS;
    kd = kd - FS__SHIFT;
    r = (x - kd * FS__LN2_HI) - kd * FS__LN2_LO;
    FS__EXP_POLY(r, p, );
    p = p * fs__from_bits((k + 1023u) << 52);
    return x < FS__EXPNEG_MIN ? 0.0 : p;
}

#undef FS__T

#ifdef FS__VEC
#define FS__T fs__v4
/* out[0..4) = exp(in[0..4)), bit for bit fs__exp. */
FS__INLINE void fs__exp4(const double *in, double *out)
{
    const fs__v4 lo = fs__set1(FS__EXP_LO), hi = fs__set1(FS__EXP_HI);
    const fs__v4 shift = fs__set1(FS__SHIFT);
    fs__v4 x = fs__ld(in), kd, r, p;
    fs__v4u k, k1, k2;
    x = fs__sel(x < lo, lo, x);
    x = fs__sel(x > hi, hi, x);
    kd = x * FS__LOG2E + shift;
    k = (fs__v4u)kd - FS__SHIFT_BITS;
    kd = kd - shift;
    r = (x - kd * FS__LN2_HI) - kd * FS__LN2_LO;
    FS__EXP_POLY(r, p, fs__set1);
    k1 = ((k + 2048u) >> 1) - 1024u;
    k2 = k - k1;
    fs__st(out, (p * (fs__v4)((k1 + 1023u) << 52)) * (fs__v4)((k2 + 1023u) << 52));
}

/* out[0..4) = exp(-|t[0..4)|), bit for bit fs__exp_neg(-|t|). */
FS__INLINE void fs__exp_negabs4(const double *t, double *out)
{
    const fs__v4 shift = fs__set1(FS__SHIFT);
    const fs__v4 x = -(fs__v4)((fs__v4u)fs__ld(t) & 0x7fffffffffffffffULL);
    fs__v4 kd, r, p;
    fs__v4u k;
    kd = x * FS__LOG2E + shift;
    k = (fs__v4u)kd - FS__SHIFT_BITS;
    kd = kd - shift;
    r = (x - kd * FS__LN2_HI) - kd * FS__LN2_LO;
    FS__EXP_POLY(r, p, fs__set1);
    p = p * (fs__v4)((k + 1023u) << 52);
    fs__st(out, (fs__v4)((fs__v4u)p & ~(fs__v4u)(x < fs__set1(FS__EXPNEG_MIN))));
}
#undef FS__T
#endif

/* ---- the normal distribution (probit), scalar, via libm erfc ------------- */

/* S(x) = x Q(x) / phi(x) = 1 - 1/x^2 + 3/x^4 - 15/x^6 + ... for x >= 30
 * (12 terms: truncation error < 25!! / 30^26 ~ 1e-25). */
static double fs__mills_series(double x)
{
    double u = 1.0 / (x * x), term = 1.0, s = 0.0;
    double terms[13];
    int k;
    terms[0] = 1.0;
    for (k = 1; k <= 12; k++) {
        term *= -(double)(2 * k - 1) * u;
        terms[k] = term;
    }
    for (k = 12; k >= 0; k--) s += terms[k];   /* smallest first */
    return s;
}

/* log Phi(z).  Relative error ~1e-13 at worst (|z| near 30, from the
 * rounding of z/sqrt2 amplified by erfc), ~1e-16 near 0. */
static inline double fs__log_ndtr(double z)
{
    if (z >= 0.0) return log1p(-0.5 * erfc(z * FS_SQRT1_2));
    if (z > -FS_PROBIT_TAIL) return log(0.5 * erfc(-z * FS_SQRT1_2));
    {
        double x = -z;
        return ((-0.5 * x * x - FS_LOG_SQRT_2PI) - log(x)) + log(fs__mills_series(x));
    }
}

/* phi(z) / Phi(z), the inverse Mills ratio of -z. */
static inline double fs__inv_mills(double z)
{
    if (z >= 0.0)
        return FS_INV_SQRT_2PI * exp(-0.5 * z * z) / (1.0 - 0.5 * erfc(z * FS_SQRT1_2));
    if (z > -FS_PROBIT_TAIL)
        return FS_INV_SQRT_2PI * exp(-0.5 * z * z) / (0.5 * erfc(-z * FS_SQRT1_2));
    return -z / fs__mills_series(-z);
}

/* phi(t)^2 / (Phi(t) (1 - Phi(t))) = [phi/Phi](t) * [phi/Phi](-t), even in t. */
static inline double fs__probit_weight(double t)
{
    double a = fabs(t);
    double phi = FS_INV_SQRT_2PI * exp(-0.5 * a * a);
    if (a < FS_PROBIT_TAIL) {
        double q = 0.5 * erfc(a * FS_SQRT1_2);   /* Phi(-a) */
        return (phi / q) * (phi / (1.0 - q));
    }
    return (a / fs__mills_series(a)) * phi;      /* 1 - Phi(-a) == 1 here */
}

int fs_log_ndtr(double z, double *FS_RESTRICT out)
{
    *out = fs__log_ndtr(z);
    return FS_OK;
}

int fs_inv_mills(double z, double *FS_RESTRICT out)
{
    *out = fs__inv_mills(z);
    return FS_OK;
}

/* Software prefetch: a cursor runs FS__PF_PANELS panels ahead of the rows
 * being read and requests one cache line per 128 bytes that the dot
 * products and the gradient updates read (per 64 bytes when there is no
 * update), so that requests go out at the pace of the reads.  The family
 * terms of a panel read no X, so the cursor also requests FS__PF_TERM_LINES
 * lines after each of their phases (fs__pf_step): without requests during
 * them the memory pipeline drains.
 * The hardware prefetchers alone do not keep up: a 4-row tile reads four
 * short streams 8d bytes apart.  Measured on a 2-core Zen 5 VM (AVX-512,
 * 2 MB L2 per core), logistic U + grad at N = 1e5, d = 50 (40 MB of X),
 * panels of 16 rows, medians of 51 calls in a C program that alternates
 * the builds: with 2 threads (1 thread), no software prefetch 1.14 ms; the
 * cursor one panel ahead together with a burst of the lines of the tile
 * 3 tiles ahead (the best setting on a Zen 3 VM with 512 KB L2) 0.56-0.59
 * ms (1.11-1.16); the cursor alone two panels ahead 0.44-0.45 ms
 * (0.87-0.89).  In a build with 8-lane dot products (no faster in cache),
 * 3 panels ahead were as fast as 2, 4 and 8 panels 6-12 % slower, and the
 * burst added to 2 panels 4 % slower. */
#ifndef FS__PF_PANELS
#define FS__PF_PANELS 2
#endif
#ifndef FS__PF_TERM_LINES
#define FS__PF_TERM_LINES 4
#endif
#if defined(__GNUC__) || defined(__clang__)
#  define FS__PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 3)
#else
#  define FS__PREFETCH(p) ((void)(p))
#endif

/* FS__PF_TERM_LINES cache lines at the cursor *pf, which moves past them. */
FS__INLINE void fs__pf_step(uintptr_t *pf)
{
    const uintptr_t c = *pf;
    int u;
    for (u = 0; u < FS__PF_TERM_LINES; u++) FS__PREFETCH(c + 64 * (uintptr_t)u);
    *pf = c + 64 * (uintptr_t)FS__PF_TERM_LINES;
}

/* ---- per-panel family terms --------------------------------------------- */
/* For k rows with linear predictors t[0..k) and responses y[0..k): write
 * the losses to l[0..k) when l != NULL and the residuals dloss/dt to
 * r[0..k) when r != NULL.  l and r have room for k rounded up to a multiple
 * of 4; the padding entries of l are set to 0.  Rows go 4 at a time; a
 * row's results depend neither on k nor on which of l and r are wanted.
 * Between phases (logistic, Poisson) or every 4 rows (probit, and the
 * scalar versions) they step the prefetch cursor pf (fs__pf_step); the
 * Gaussian terms are too cheap to need it. */

/* logistic: softplus(t) - y t = max(t, 0) + log1p(e) - y t, e = exp(-|t|);
 * sigmoid(t) - y = ((1-y) - y e) / (1 + e) for t >= 0, ((1-y) e - y) / (1 + e)
 * otherwise: no overflow, no cancellation for y in {0, 1}.  One division
 * per row: w = 1 / ((1 + e)(2 + f)) gives both s = f / (2 + f) = f (1+e) w
 * and 1 / (1 + e) = (2 + f) w. */
FS__INLINE void fs__logistic_terms(const double *y, const double *t, size_t k,
                                   double *l, double *r, uintptr_t *pf)
{
    size_t q;
#ifdef FS__VEC
    /* In phases over the whole panel (exp of every row, then the divisions,
     * then residuals, then losses): the iterations of each phase are
     * independent and short, so the CPU overlaps them; one 4-row chunk after
     * the other would be one long dependency chain after another.
     * Same bits either way. */
    double tb[FS__PANEL], yb[FS__PANEL], eb[FS__PANEL], fb[FS__PANEL], wb[FS__PANEL];
    const fs__v4 zero = fs__set1(0.0), one = fs__set1(1.0);
    const fs__v4 sqrt2m1 = fs__set1(FS__SQRT2M1);
    const size_t kk = (k + 3) / 4 * 4;
    if (kk != k) {                          /* pad the last chunk with t = y = 0 */
        for (q = 0; q < kk; q++) {
            tb[q] = q < k ? t[q] : 0.0;
            yb[q] = q < k ? y[q] : 0.0;
        }
        t = tb;
        y = yb;
    }
    for (q = 0; q < kk; q += 4)             /* e = exp(-|t|), in [0, 1] */
        fs__exp_negabs4(t + q, eb + q);
    fs__pf_step(pf);
    for (q = 0; q < kk; q += 4) {           /* f and w = 1 / ((1 + e)(2 + f)) */
        const fs__v4 e = fs__ld(eb + q);
        const fs__v4 f = fs__sel(e > sqrt2m1, 0.5 * (e - one), e);
        fs__st(fb + q, f);
        fs__st(wb + q, one / ((one + e) * (2.0 + f)));
    }
    fs__pf_step(pf);
    if (r) {
        for (q = 0; q < kk; q += 4) {
            const fs__v4 tv = fs__ld(t + q), yv = fs__ld(y + q), e = fs__ld(eb + q);
            const fs__v4 num = fs__sel(tv >= zero, (one - yv) - yv * e, (one - yv) * e - yv);
            fs__st(r + q, num * ((2.0 + fs__ld(fb + q)) * fs__ld(wb + q)));
        }
        fs__pf_step(pf);
    }
    if (l) {
        for (q = 0; q < kk; q += 4) {
            const fs__v4 tv = fs__ld(t + q), yv = fs__ld(y + q), e = fs__ld(eb + q);
            const fs__v4 f = fs__ld(fb + q), w = fs__ld(wb + q);
            const fs__v4 sv = f * ((one + e) * w), z = sv * sv;
            fs__v4 p, v;
#define FS__T fs__v4
            FS__LOG1P_POLY(z, p, fs__set1);
#undef FS__T
            v = (2.0 * sv) * p;
            v = fs__sel(e > sqrt2m1, FS__LN2_HI + (v + FS__LN2_LO), v);
            fs__st(l + q, (fs__sel(tv > zero, tv, zero) + v) - yv * tv);
        }
        fs__pf_step(pf);
        for (q = k; q < kk; q++) l[q] = 0.0;
    }
#else
    for (q = 0; q < k; q++) {
        const double ti = t[q], yi = y[q];
        const double e = fs__exp_neg(-fabs(ti)), u = 1.0 + e;
        const int big = e > FS__SQRT2M1;
        const double f = big ? 0.5 * (e - 1.0) : e, den = 2.0 + f;
        const double w = 1.0 / (u * den);
        if (l) {
            const double sv = f * (u * w), z = sv * sv;
            double p, v;
#define FS__T double
            FS__LOG1P_POLY(z, p, );
#undef FS__T
            v = (2.0 * sv) * p;
            v = big ? FS__LN2_HI + (v + FS__LN2_LO) : v;
            l[q] = ((ti > 0.0 ? ti : 0.0) + v) - yi * ti;
        }
        if (r) r[q] = (ti >= 0.0 ? (1.0 - yi) - yi * e : (1.0 - yi) * e - yi) * (den * w);
        if (q % 4 == 3) fs__pf_step(pf);
    }
    if (l) for (; q % 4; q++) l[q] = 0.0;
#endif
}

/* poisson: e^t - y t and e^t - y (exp for the whole panel first). */
FS__INLINE void fs__poisson_terms(const double *y, const double *t, size_t k,
                                  double *l, double *r, uintptr_t *pf)
{
    size_t q;
#ifdef FS__VEC
    double tb[FS__PANEL], yb[FS__PANEL], eb[FS__PANEL];
    const size_t kk = (k + 3) / 4 * 4;
    if (kk != k) {
        for (q = 0; q < kk; q++) {
            tb[q] = q < k ? t[q] : 0.0;
            yb[q] = q < k ? y[q] : 0.0;
        }
        t = tb;
        y = yb;
    }
    for (q = 0; q < kk; q += 4) fs__exp4(t + q, eb + q);
    fs__pf_step(pf);
    if (r)
        for (q = 0; q < kk; q += 4) fs__st(r + q, fs__ld(eb + q) - fs__ld(y + q));
    if (l) {
        for (q = 0; q < kk; q += 4)
            fs__st(l + q, fs__ld(eb + q) - fs__ld(y + q) * fs__ld(t + q));
        for (q = k; q < kk; q++) l[q] = 0.0;
    }
#else
    for (q = 0; q < k; q++) {
        const double e = fs__exp(t[q]);
        if (l) l[q] = e - y[q] * t[q];
        if (r) r[q] = e - y[q];
        if (q % 4 == 3) fs__pf_step(pf);
    }
    if (l) for (; q % 4; q++) l[q] = 0.0;
#endif
}

FS__INLINE void fs__family_terms(const fs_glm *m, int family, const double *y,
                                 const double *t, size_t k,
                                 double *l, double *r, uintptr_t *pf)
{
    size_t i;
    switch (family) {
    case FS_GLM_LOGISTIC:
        fs__logistic_terms(y, t, k, l, r, pf);
        return;
    case FS_GLM_POISSON:
        fs__poisson_terms(y, t, k, l, r, pf);
        return;
    case FS_GLM_PROBIT:
        /* -log Phi(s t) and -s phi(s t) / Phi(s t), s = 2y - 1 */
        for (i = 0; i < k; i++) {
            const double s = 2.0 * y[i] - 1.0, z = s * t[i];
            if (l) l[i] = -fs__log_ndtr(z);
            if (r) r[i] = -s * fs__inv_mills(z);
            if (i % 4 == 3) fs__pf_step(pf);
        }
        break;
    default: /* FS_GLM_GAUSSIAN: (t - y)^2 / (2 sigma^2) and (t - y) / sigma^2 */
        for (i = 0; i < k; i++) {
            const double u = t[i] - y[i];
            if (l) l[i] = 0.5 * (u * u) * m->inv_sigma2;
            if (r) r[i] = u * m->inv_sigma2;
        }
        break;
    }
    if (l) for (i = k; i % 4; i++) l[i] = 0.0;
}

/* Expected-information weights of k rows. */
FS__INLINE void fs__weights(const fs_glm *m, const double *t, size_t k,
                            double *w)
{
    size_t i;
    switch (m->family) {
    case FS_GLM_LOGISTIC:
        for (i = 0; i < k; i++) {
            const double e = fs__exp_neg(-fabs(t[i])), u = 1.0 + e;
            w[i] = e / (u * u);                   /* s(t) (1 - s(t)) */
        }
        break;
    case FS_GLM_PROBIT:
        for (i = 0; i < k; i++) w[i] = fs__probit_weight(t[i]);
        break;
    case FS_GLM_POISSON:
        for (i = 0; i < k; i++) w[i] = fs__exp(t[i]);
        break;
    default:
        for (i = 0; i < k; i++) w[i] = m->inv_sigma2;
        break;
    }
}

/* ---- dot products and row updates ---------------------------------------- */
/* Dot products.  For d >= 4 a row keeps 8 partial sums (two groups of 4:
 * lo for columns 8k..8k+3, hi for 8k+4..8k+7); one more group of 4 goes
 * into lo when d % 8 >= 4; when d % 4 != 0, the last 4 columns x[d-4..d)
 * times bt = (0, .., 0, b[d - d%4 .. d)) go into hi (the zeros mask the
 * columns already counted).  Then s = lo + hi and x . b = (s0 + s1) +
 * (s2 + s3).  For d < 4 the products are added one by one.  A row gets the
 * same bits from fs__dot_row and from fs__dot_tile.  bt is fs__tail_b(). */
FS__INLINE void fs__tail_b(const double *b, size_t d, double *bt)
{
    size_t l, rem = d % 4;
    for (l = 0; l < 4; l++) bt[l] = (d >= 4 && rem && l >= 4 - rem) ? b[d - 4 + l] : 0.0;
}

FS__INLINE double fs__dot_row(const double *FS_RESTRICT x, const double *FS_RESTRICT b,
                           const double *FS_RESTRICT bt, size_t d)
{
    size_t j = 0;
    if (d < 4) {
        double s = 0.0;
        for (; j < d; j++) s += x[j] * b[j];
        return s;
    }
    {
#ifdef FS__VEC
        fs__v4 lo = fs__set1(0.0), hi = lo, sv;
        for (; j + 8 <= d; j += 8) {
            lo += fs__ld(x + j) * fs__ld(b + j);
            hi += fs__ld(x + j + 4) * fs__ld(b + j + 4);
        }
        if (j + 4 <= d) lo += fs__ld(x + j) * fs__ld(b + j);
        if (d % 4) hi += fs__ld(x + d - 4) * fs__ld(bt);
        sv = lo + hi;
        return fs__hsum1(sv);
#else
        double lo[4] = {0.0, 0.0, 0.0, 0.0}, hi[4] = {0.0, 0.0, 0.0, 0.0};
        size_t l;
        for (; j + 8 <= d; j += 8)
            for (l = 0; l < 4; l++) {
                lo[l] += x[j + l] * b[j + l];
                hi[l] += x[j + 4 + l] * b[j + 4 + l];
            }
        if (j + 4 <= d)
            for (l = 0; l < 4; l++) lo[l] += x[j + l] * b[j + l];
        if (d % 4)
            for (l = 0; l < 4; l++) hi[l] += x[d - 4 + l] * bt[l];
        return ((lo[0] + hi[0]) + (lo[1] + hi[1])) + ((lo[2] + hi[2]) + (lo[3] + hi[3]));
#endif
    }
}

/* t[0..4) = x_k . b for the 4 rows starting at x (row stride d), each with
 * the summation order of fs__dot_row; the loads of b are shared by the rows.
 * With pf != NULL, pf_lines cache lines at the prefetch cursor *pf are
 * requested per 8 columns (256 bytes of X read) and the cursor advanced. */
FS__INLINE void fs__dot_tile(const double *FS_RESTRICT x, size_t d,
                             const double *FS_RESTRICT b,
                             const double *FS_RESTRICT bt,
                             double *FS_RESTRICT t, uintptr_t *pf, int pf_lines)
{
#ifdef FS__VEC
    if (d >= 4) {
        const double *x0 = x, *x1 = x + d, *x2 = x + 2 * d, *x3 = x + 3 * d;
        fs__v4 l0 = fs__set1(0.0), l1 = l0, l2 = l0, l3 = l0;
        fs__v4 h0 = l0, h1 = l0, h2 = l0, h3 = l0;
        size_t j = 0;
        uintptr_t c = pf ? *pf : 0;
        for (; j + 8 <= d; j += 8) {
            const fs__v4 bl = fs__ld(b + j), bh = fs__ld(b + j + 4);
            if (pf) {
                FS__PREFETCH(c);
                FS__PREFETCH(c + 64);
                if (pf_lines > 2) {
                    FS__PREFETCH(c + 128);
                    FS__PREFETCH(c + 192);
                }
                c += 64 * (uintptr_t)pf_lines;
            }
            l0 += fs__ld(x0 + j) * bl;
            h0 += fs__ld(x0 + j + 4) * bh;
            l1 += fs__ld(x1 + j) * bl;
            h1 += fs__ld(x1 + j + 4) * bh;
            l2 += fs__ld(x2 + j) * bl;
            h2 += fs__ld(x2 + j + 4) * bh;
            l3 += fs__ld(x3 + j) * bl;
            h3 += fs__ld(x3 + j + 4) * bh;
        }
        if (pf) *pf = c;
        if (j + 4 <= d) {
            const fs__v4 bl = fs__ld(b + j);
            l0 += fs__ld(x0 + j) * bl;
            l1 += fs__ld(x1 + j) * bl;
            l2 += fs__ld(x2 + j) * bl;
            l3 += fs__ld(x3 + j) * bl;
        }
        if (d % 4) {
            const fs__v4 bv = fs__ld(bt);
            h0 += fs__ld(x0 + d - 4) * bv;
            h1 += fs__ld(x1 + d - 4) * bv;
            h2 += fs__ld(x2 + d - 4) * bv;
            h3 += fs__ld(x3 + d - 4) * bv;
        }
        /* lane k of the result: (s0 + s1) + (s2 + s3) of row k */
        fs__st(t, fs__hsum4(l0 + h0, l1 + h1, l2 + h2, l3 + h3));
        return;
    }
#endif
    {
        size_t k;
        (void)pf;
        (void)pf_lines;
        for (k = 0; k < FS__TILE; k++) t[k] = fs__dot_row(x + k * d, b, bt, d);
    }
}

/* g += (r0 x0 + r1 x1) + (r2 x2 + r3 x3) for the 4 rows starting at x;
 * with pf != NULL, one line at the prefetch cursor per 4 columns.  The
 * last d % 4 columns go by a 2-wide vector and a scalar (a 4-wide vector
 * overlapping the columns just stored would stall on store forwarding). */
FS__INLINE void fs__axpy_tile(double *FS_RESTRICT g, const double *FS_RESTRICT r,
                              const double *FS_RESTRICT x, size_t d, uintptr_t *pf)
{
    const double *x0 = x, *x1 = x + d, *x2 = x + 2 * d, *x3 = x + 3 * d;
    const double r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
    size_t j = 0;
#ifdef FS__VEC
    const fs__v4 v0 = fs__set1(r0), v1 = fs__set1(r1);
    const fs__v4 v2 = fs__set1(r2), v3 = fs__set1(r3);
    uintptr_t c = pf ? *pf : 0;
    for (; j + 4 <= d; j += 4) {
        if (pf) {
            FS__PREFETCH(c);
            c += 64;
        }
        fs__st(g + j, fs__ld(g + j) + ((v0 * fs__ld(x0 + j) + v1 * fs__ld(x1 + j)) +
                                       (v2 * fs__ld(x2 + j) + v3 * fs__ld(x3 + j))));
    }
    if (pf) *pf = c;
    if (j + 2 <= d) {
        const fs__v2 w0 = {r0, r0}, w1 = {r1, r1}, w2 = {r2, r2}, w3 = {r3, r3};
        fs__v2 gv, a, b2, c2, e2;
        __builtin_memcpy(&gv, g + j, sizeof gv);
        __builtin_memcpy(&a, x0 + j, sizeof a);
        __builtin_memcpy(&b2, x1 + j, sizeof b2);
        __builtin_memcpy(&c2, x2 + j, sizeof c2);
        __builtin_memcpy(&e2, x3 + j, sizeof e2);
        gv += (w0 * a + w1 * b2) + (w2 * c2 + w3 * e2);
        __builtin_memcpy(g + j, &gv, sizeof gv);
        j += 2;
    }
#else
    (void)pf;
#endif
    for (; j < d; j++)
        g[j] += (r0 * x0[j] + r1 * x1[j]) + (r2 * x2[j] + r3 * x3[j]);
}

/* g += r x */
FS__INLINE void fs__axpy1(double *FS_RESTRICT g, double r,
                          const double *FS_RESTRICT x, size_t d)
{
    size_t j = 0;
#ifdef FS__VEC
    const fs__v4 v = fs__set1(r);
    for (; j + 4 <= d; j += 4) fs__st(g + j, fs__ld(g + j) + v * fs__ld(x + j));
#endif
    for (; j < d; j++) g[j] += r * x[j];
}

/* ---- the row-block kernel ------------------------------------------------ */
/* Rows [i0, i1): acc[0..d) = sum r_i x_i (when want_grad) and acc[d] = sum
 * of the losses (0 unless want_value), summed in 4 lanes (lane = (i - i0)
 * mod 4) combined at the end as ((l0 + l2) + (l1 + l3)).
 * Rows go by panels of 4 to FS__PANEL rows (the last panel of a block may
 * be shorter): the panel's dot products, tile by tile (with the prefetches
 * of rows FS__PF_PANELS panels further on); the panel's family terms; the
 * gradient updates, tile by tile, on rows that are still in L1 (continuing
 * the prefetch). */
FS__INLINE void fs__eval_block(const fs_glm *m, const int family,
                               const double *FS_RESTRICT beta,
                               size_t i0, size_t i1, int want_value, int want_grad,
                               double *FS_RESTRICT acc)
{
    const size_t d = m->d;
    const double *FS_RESTRICT X = m->X;
    const double *FS_RESTRICT y = m->y;
    /* rows per panel: a multiple of 4, from 4 to FS__PANEL (the results do
     * not depend on it: losses go to lane (i - i0) % 4, updates by tiles) */
    size_t panel = FS__PANEL_BYTES / (sizeof(double) * d) / FS__TILE * FS__TILE;
    double t[FS__PANEL], r[FS__PANEL], l[FS__PANEL];
    double *lp = want_value ? l : NULL;
    double *rp = want_grad ? r : NULL;
    double bt[4];
    uintptr_t pf_dist;
    size_t i, j, q;
#ifdef FS__VEC
    fs__v4 vacc = fs__set1(0.0);
#else
    double vacc[4] = {0.0, 0.0, 0.0, 0.0};
#endif

    if (panel < FS__TILE) panel = FS__TILE;
    if (panel > FS__PANEL) panel = FS__PANEL;
    pf_dist = (uintptr_t)(FS__PF_PANELS * panel * d * sizeof(double));
    fs__tail_b(beta, d, bt);
    if (want_grad)
        for (j = 0; j < d; j++) acc[j] = 0.0;
    for (i = i0; i < i1; i += panel) {
        const size_t k = i1 - i < panel ? i1 - i : panel;
        const double *x = X + i * d;
        /* prefetch cursor: the rows FS__PF_PANELS panels further on */
        uintptr_t pf = (uintptr_t)x + pf_dist;
        for (q = 0; q + FS__TILE <= k; q += FS__TILE)
            fs__dot_tile(x + q * d, d, beta, bt, t + q, &pf, want_grad ? 2 : 4);
        for (; q < k; q++) t[q] = fs__dot_row(x + q * d, beta, bt, d);
        fs__family_terms(m, family, y + i, t, k, lp, rp, &pf);
        if (want_value) {
#ifdef FS__VEC
            for (q = 0; q < k; q += 4) vacc += fs__ld(l + q);
#else
            for (q = 0; q < k; q += 4)
                for (j = 0; j < 4; j++) vacc[j] += l[q + j];
#endif
        }
        if (want_grad) {
            for (q = 0; q + FS__TILE <= k; q += FS__TILE)
                fs__axpy_tile(acc, r + q, x + q * d, d, &pf);
            for (; q < k; q++) fs__axpy1(acc, r[q], x + q * d, d);
        }
    }
    acc[d] = (vacc[0] + vacc[2]) + (vacc[1] + vacc[3]);
}

/* One compiled block kernel per family, so that each family's loops get
 * the registers and the code layout to themselves: with one kernel for
 * all four, a change to the probit terms alone made the logistic kernel
 * 4 % slower.  Per-family kernels, measured as above: logistic 0.96 of the
 * time of the shared kernel (d = 50, 1 and 2 threads), no change with X
 * in cache. */
#define FS__BLOCK_KERNEL(name, fam)                                            \
    FS_CLONES static void name(const fs_glm *m, const double *FS_RESTRICT beta, \
                               size_t i0, size_t i1, int want_value,          \
                               int want_grad, double *FS_RESTRICT acc)        \
    {                                                                         \
        fs__eval_block(m, fam, beta, i0, i1, want_value, want_grad, acc);     \
    }
FS__BLOCK_KERNEL(fs__block_logistic, FS_GLM_LOGISTIC)
FS__BLOCK_KERNEL(fs__block_probit, FS_GLM_PROBIT)
FS__BLOCK_KERNEL(fs__block_poisson, FS_GLM_POISSON)
FS__BLOCK_KERNEL(fs__block_gaussian, FS_GLM_GAUSSIAN)

typedef void (*fs__block_fn)(const fs_glm *, const double *, size_t, size_t,
                             int, int, double *);

int fs_glm_eval(const fs_glm *m, const double *beta, double *FS_RESTRICT value,
                double *FS_RESTRICT grad, double *FS_RESTRICT work)
{
    const size_t d = m->d, n = m->n, stride = fs__eval_stride(d);
    const int want_value = value != NULL, want_grad = grad != NULL;
    size_t rows, nbs, j;
    int nb, b, nt;
    double v = 0.0;

    fs__block_fn blk = m->family == FS_GLM_LOGISTIC ? fs__block_logistic
                     : m->family == FS_GLM_PROBIT ? fs__block_probit
                     : m->family == FS_GLM_POISSON ? fs__block_poisson
                     : fs__block_gaussian;

    if (!want_value && !want_grad) return FS_OK;
    work = fs__align64(work);
    fs__eval_blocking(n, &rows, &nbs);
    nb = (int)nbs;
    nt = m->n_threads < nb ? m->n_threads : nb;

#ifdef _OPENMP
    if (nt > 1 && omp_in_parallel() && omp_get_num_threads() > 1) {
        /* called inside a running team (fs_rmhmc.c's overlapped loop, where
           the other thread runs a trajectory): the blocks become tasks, run
           by whichever thread of the team is free (same partials, so the
           same bits) */
#pragma omp taskloop grainsize(FS_GLM_TASK_BLOCKS)
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * rows, i1 = i0 + rows < n ? i0 + rows : n;
            blk(m, beta, i0, i1, want_value, want_grad,
                           work + (size_t)b * stride);
        }
    } else if (nt > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * rows, i1 = i0 + rows < n ? i0 + rows : n;
            blk(m, beta, i0, i1, want_value, want_grad,
                           work + (size_t)b * stride);
        }
    } else
#endif
    {
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * rows, i1 = i0 + rows < n ? i0 + rows : n;
            blk(m, beta, i0, i1, want_value, want_grad,
                           work + (size_t)b * stride);
        }
    }
    (void)nt;

    /* the block partials, in block order; then the prior */
    if (want_grad) {
        for (j = 0; j < d; j++) grad[j] = work[j];
        for (b = 1; b < nb; b++) {
            const double *p = work + (size_t)b * stride;
            for (j = 0; j < d; j++) grad[j] += p[j];
        }
    }
    if (want_value)
        for (b = 0; b < nb; b++) v += work[(size_t)b * stride + d];

    if (m->prior_prec != NULL) {
        const double *pm = m->prior_mean, *pp = m->prior_prec;
        double pv = 0.0;
        for (j = 0; j < d; j++) {
            const double u = pm ? beta[j] - pm[j] : beta[j];
            const double gu = u * pp[j];
            pv += u * gu;
            if (want_grad) grad[j] += gu;
        }
        v += 0.5 * pv;
    }
    if (want_value) *value = v;
    return FS_OK;
}

int fs_glm_potential_eval(void *state, const double *q, double *value,
                          double *grad)
{
    fs_glm *m = (fs_glm *)state;
    double *work;
    int status;
    if (value == NULL && grad == NULL) return FS_OK;
    work = fs_pool_take(&m->pool);
    if (work == NULL) return FS_ENOMEM;
    status = fs_glm_eval(m, q, value, grad, work);
    fs_pool_give(&m->pool, work);
    return status;
}

/* ---- init / free --------------------------------------------------------- */

int fs_glm_init(fs_glm *m, int family, size_t n, size_t d, const double *X,
                const double *y, const double *prior_mean, const double *prior_sd,
                double sigma, int n_threads)
{
    size_t ws, j;
    int status;

    memset(m, 0, sizeof(*m));
    if (family < FS_GLM_LOGISTIC || family > FS_GLM_GAUSSIAN) return FS_EINVAL;
    if (n == 0 || d == 0 || d > (size_t)INT_MAX || X == NULL || y == NULL)
        return FS_EINVAL;
    if (n > ((size_t)-1) / sizeof(double) / d) return FS_EINVAL;
    if (n_threads < 1) return FS_EINVAL;
    if (family == FS_GLM_GAUSSIAN) {
        if (!(sigma > 0.0) || !fs_isfinite(sigma) || !fs_isfinite(1.0 / (sigma * sigma)))
            return FS_EINVAL;
    } else {
        sigma = 1.0;
    }
    if (prior_sd != NULL) {
        for (j = 0; j < d; j++) {
            const double s = prior_sd[j];
            if (!(s > 0.0) || !fs_isfinite(s) || !fs_isfinite(1.0 / (s * s)))
                return FS_EINVAL;
        }
    }
    status = fs_glm_workspace_size(n, d, &ws, NULL);
    if (status != FS_OK) return status;

    m->family = family;
    m->n = n;
    m->d = d;
    m->X = X;
    m->y = y;
    m->prior_mean = prior_mean;
    m->sigma = sigma;
    m->inv_sigma2 = 1.0 / (sigma * sigma);
    m->n_threads = n_threads;
    if (prior_sd != NULL) {
        m->prior_prec = (double *)malloc(sizeof(double) * d);
        if (m->prior_prec == NULL) return FS_ENOMEM;
        for (j = 0; j < d; j++) m->prior_prec[j] = 1.0 / (prior_sd[j] * prior_sd[j]);
    }
    status = fs_pool_init(&m->pool, ws);
    if (status != FS_OK) {
        fs_pool_free(&m->pool);
        free(m->prior_prec);
        m->prior_prec = NULL;
        return status;
    }
    return FS_OK;
}

void fs_glm_free(fs_glm *m)
{
    if (m == NULL) return;
    fs_pool_free(&m->pool);
    free(m->prior_prec);
    m->prior_prec = NULL;
}

/* ---- Fisher information -------------------------------------------------- */
/* P = sum_{i in [i0, i1)} w_i x_i x_i^T, rows of 4 at a time: row j of P,
 * columns from j rounded down to a multiple of 4 to d (the upper triangle
 * and a few entries below it, so that the vector loop needs no peeling); P
 * is d*d and fully overwritten; only its upper triangle is used. */
FS__INLINE void fs__rank4_update(double *FS_RESTRICT P, size_t d, const double *w,
                                 const double *FS_RESTRICT x0, const double *FS_RESTRICT x1,
                                 const double *FS_RESTRICT x2, const double *FS_RESTRICT x3)
{
    size_t j, l;
    for (j = 0; j < d; j++) {
        const double a0 = w[0] * x0[j], a1 = w[1] * x1[j];
        const double a2 = w[2] * x2[j], a3 = w[3] * x3[j];
        double *FS_RESTRICT Pj = P + j * d;
        l = j / 4 * 4;
#ifdef FS__VEC
        {
            const fs__v4 v0 = fs__set1(a0), v1 = fs__set1(a1);
            const fs__v4 v2 = fs__set1(a2), v3 = fs__set1(a3);
            for (; l + 4 <= d; l += 4)
                fs__st(Pj + l, fs__ld(Pj + l) + ((v0 * fs__ld(x0 + l) + v1 * fs__ld(x1 + l)) +
                                                 (v2 * fs__ld(x2 + l) + v3 * fs__ld(x3 + l))));
        }
#endif
        for (; l < d; l++)
            Pj[l] += (a0 * x0[l] + a1 * x1[l]) + (a2 * x2[l] + a3 * x3[l]);
    }
}

FS_CLONES
static void fs__fisher_chunk(const fs_glm *m, const double *FS_RESTRICT beta,
                             size_t i0, size_t i1, double *FS_RESTRICT P)
{
    const size_t d = m->d;
    const double *FS_RESTRICT X = m->X;
    double t[FS__TILE], w[FS__TILE], bt[4];
    size_t i = i0, j;

    fs__tail_b(beta, d, bt);
    for (j = 0; j < d * d; j++) P[j] = 0.0;
    for (; i + FS__TILE <= i1; i += FS__TILE) {
        const double *x0 = X + i * d;
        fs__dot_tile(x0, d, beta, bt, t, NULL, 0);
        fs__weights(m, t, FS__TILE, w);
        fs__rank4_update(P, d, w, x0, x0 + d, x0 + 2 * d, x0 + 3 * d);
    }
    for (; i < i1; i++) {          /* the last rows, one by one (zero weights) */
        const double *x = X + i * d;
        t[0] = fs__dot_row(x, beta, bt, d);
        fs__weights(m, t, 1, w);
        w[1] = w[2] = w[3] = 0.0;
        fs__rank4_update(P, d, w, x, x, x, x);
    }
}

int fs_glm_fisher(const fs_glm *m, const double *beta, double *FS_RESTRICT F,
                  double *FS_RESTRICT work)
{
    const size_t d = m->d, n = m->n, dd = fs__fisher_stride(d);
    size_t rows, ncs, j, l;
    int nc, c, nt;

    work = fs__align64(work);
    fs__fisher_blocking(n, &rows, &ncs);
    nc = (int)ncs;
    nt = m->n_threads < nc ? m->n_threads : nc;
#ifdef _OPENMP
    if (nt > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (c = 0; c < nc; c++) {
            const size_t i0 = (size_t)c * rows, i1 = i0 + rows < n ? i0 + rows : n;
            fs__fisher_chunk(m, beta, i0, i1, work + (size_t)c * dd);
        }
    } else
#endif
    {
        for (c = 0; c < nc; c++) {
            const size_t i0 = (size_t)c * rows, i1 = i0 + rows < n ? i0 + rows : n;
            fs__fisher_chunk(m, beta, i0, i1, work + (size_t)c * dd);
        }
    }
    (void)nt;

    /* chunk partials in chunk order, mirrored; then the prior precision */
    for (j = 0; j < d; j++) {
        for (l = j; l < d; l++) {
            double s = work[j * d + l];
            for (c = 1; c < nc; c++) s += work[(size_t)c * dd + j * d + l];
            F[j * d + l] = s;
            F[l * d + j] = s;
        }
    }
    if (m->prior_prec != NULL)
        for (j = 0; j < d; j++) F[j * d + j] += m->prior_prec[j];
    return FS_OK;
}

/* ---- row kernels of the Fisher metric (fs_metrics.c) --------------------- */
/* They read rows [i0, i1) by the tiles of the gradient and the Fisher: a
 * metric-vector product or a contraction costs one pass over X, with the
 * weights from the same fs__weights as fs_glm_fisher (so G v is the
 * product with the G that fs_glm_fisher computes, to rounding). */

FS_CLONES
void fs_glm_fisher_matvec_rows(const fs_glm *m, const double *beta, const double *v,
                               size_t i0, size_t i1, double *FS_RESTRICT part)
{
    const size_t d = m->d;
    const double *FS_RESTRICT X = m->X;
    double t[FS__TILE], s[FS__TILE], w[FS__TILE], bt[4], vt[4];
    size_t i = i0, j, k;

    fs__tail_b(beta, d, bt);
    fs__tail_b(v, d, vt);
    for (j = 0; j < d; j++) part[j] = 0.0;
    for (; i + FS__TILE <= i1; i += FS__TILE) {
        const double *x0 = X + i * d;
        fs__dot_tile(x0, d, beta, bt, t, NULL, 0);
        fs__dot_tile(x0, d, v, vt, s, NULL, 0);
        fs__weights(m, t, FS__TILE, w);
        for (k = 0; k < FS__TILE; k++) w[k] *= s[k];
        fs__axpy_tile(part, w, x0, d, NULL);
    }
    for (; i < i1; i++) {
        const double *x = X + i * d;
        t[0] = fs__dot_row(x, beta, bt, d);
        s[0] = fs__dot_row(x, v, vt, d);
        fs__weights(m, t, 1, w);
        fs__axpy1(part, w[0] * s[0], x, d);
    }
}

/* Z (rows i0..i1, row-major, d columns) = sqrt(w(x_n . beta)) x_n. */
FS_CLONES
void fs_glm_weighted_rows(const fs_glm *m, const double *beta, size_t i0, size_t i1,
                          double *FS_RESTRICT Z)
{
    const size_t d = m->d;
    const double *FS_RESTRICT X = m->X;
    double t[FS__TILE], w[FS__TILE], bt[4];
    size_t i = i0, j, k;

    fs__tail_b(beta, d, bt);
    for (; i + FS__TILE <= i1; i += FS__TILE) {
        fs__dot_tile(X + i * d, d, beta, bt, t, NULL, 0);
        fs__weights(m, t, FS__TILE, w);
        for (k = 0; k < FS__TILE; k++) {
            const double a = sqrt(w[k]), *x = X + (i + k) * d;
            double *z = Z + (i - i0 + k) * d;
            for (j = 0; j < d; j++) z[j] = a * x[j];
        }
    }
    for (; i < i1; i++) {
        const double *x = X + i * d;
        double *z = Z + (i - i0) * d, a;
        t[0] = fs__dot_row(x, beta, bt, d);
        fs__weights(m, t, 1, w);
        a = sqrt(w[0]);
        for (j = 0; j < d; j++) z[j] = a * x[j];
    }
}

/* dw/dt of the expected-information weight w(t) of fs__weights. */
FS__INLINE double fs__weight_deriv(const fs_glm *m, double t)
{
    switch (m->family) {
    case FS_GLM_LOGISTIC: {                       /* w (1 - 2 s(t)) */
        const double e = fs__exp_neg(-fabs(t)), u = 1.0 + e, w = e / (u * u);
        return w * (t >= 0 ? (e - 1.0) / u : (1.0 - e) / u);
    }
    case FS_GLM_PROBIT: {                         /* w (m(-t) - m(t) - 2 t) */
        const double m1 = fs__inv_mills(t), m2 = fs__inv_mills(-t);
        return m1 * m2 * (m2 - m1 - 2.0 * t);
    }
    case FS_GLM_POISSON:
        return fs__exp(t);
    default:
        return 0.0;
    }
}

int fs_glm_weight_deriv(int family, double sigma, double t, double *FS_RESTRICT w,
                        double *FS_RESTRICT dw)
{
    fs_glm m;
    if (family != FS_GLM_LOGISTIC && family != FS_GLM_PROBIT && family != FS_GLM_POISSON
        && family != FS_GLM_GAUSSIAN)
        return FS_EINVAL;
    memset(&m, 0, sizeof(m));
    m.family = family;
    m.sigma = sigma;
    m.inv_sigma2 = 1.0 / (sigma * sigma);
    fs__weights(&m, &t, 1, w);
    *dw = fs__weight_deriv(&m, t);
    return FS_OK;
}

FS_CLONES
void fs_glm_weight_derivs_rows(const fs_glm *m, const double *beta, size_t i0, size_t i1,
                               double *FS_RESTRICT dw)
{
    const size_t d = m->d;
    const double *FS_RESTRICT X = m->X;
    double t[FS__TILE], bt[4];
    size_t i = i0, k;

    fs__tail_b(beta, d, bt);
    for (; i + FS__TILE <= i1; i += FS__TILE) {
        fs__dot_tile(X + i * d, d, beta, bt, t, NULL, 0);
        for (k = 0; k < FS__TILE; k++) dw[i - i0 + k] = fs__weight_deriv(m, t[k]);
    }
    for (; i < i1; i++) dw[i - i0] = fs__weight_deriv(m, fs__dot_row(X + i * d, beta, bt, d));
}

FS_CLONES
void fs_glm_contract_rows(const fs_glm *m, const double *u, const double *FS_RESTRICT dw,
                          const double *FS_RESTRICT h, size_t i0, size_t i1,
                          double *FS_RESTRICT ptr, double *FS_RESTRICT pquad)
{
    const size_t d = m->d;
    const double *FS_RESTRICT X = m->X;
    double s[FS__TILE], c[FS__TILE], ut[4];
    size_t i = i0, k;

    if (pquad) fs__tail_b(u, d, ut);
    for (; i + FS__TILE <= i1; i += FS__TILE) {
        const double *x0 = X + i * d;
        const double *dwb = dw + (i - i0);
        if (ptr) {
            for (k = 0; k < FS__TILE; k++) c[k] = dwb[k] * h[i - i0 + k];
            fs__axpy_tile(ptr, c, x0, d, NULL);
        }
        if (pquad) {
            fs__dot_tile(x0, d, u, ut, s, NULL, 0);
            for (k = 0; k < FS__TILE; k++) c[k] = dwb[k] * s[k] * s[k];
            fs__axpy_tile(pquad, c, x0, d, NULL);
        }
    }
    for (; i < i1; i++) {
        const double *x = X + i * d;
        if (ptr) fs__axpy1(ptr, dw[i - i0] * h[i - i0], x, d);
        if (pquad) {
            const double sq = fs__dot_row(x, u, ut, d);
            fs__axpy1(pquad, dw[i - i0] * sq * sq, x, d);
        }
    }
}

/* ---- memory floor -------------------------------------------------------- */
#define FS__FLOOR_BLOCK 65536
#define FS__FLOOR_MAX_BLOCKS 4096

/* The read-floor sum of one block of X (fs_read_floor): four partial sums
 * of 8 lanes (32 doubles per step): with fewer, the sum
 * is bound by the latency of the additions rather than by the bandwidth of
 * cache or memory, and on AVX-512 a read by 32-byte loads streams a 40 MB
 * X from memory ~25 % slower than one by 64-byte loads (Zen 5, 1 thread).
 * fs__v8 (fs_vmath.h) is one register with AVX-512, two or four elsewhere. */

FS_CLONES
static double fs__read_floor_block(const double *FS_RESTRICT x, size_t len)
{
    double s;
    size_t j = 0;
#ifdef FS__VEC
    fs__v8 a0 = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, a1 = a0, a2 = a0, a3 = a0;
    for (; j + 32 <= len; j += 32) {
        a0 += fs__ld8(x + j);
        a1 += fs__ld8(x + j + 8);
        a2 += fs__ld8(x + j + 16);
        a3 += fs__ld8(x + j + 24);
    }
    {
        const fs__v8 sv = (a0 + a2) + (a1 + a3);
        s = ((sv[0] + sv[4]) + (sv[2] + sv[6])) + ((sv[1] + sv[5]) + (sv[3] + sv[7]));
    }
#else
    double a[32];
    size_t l;
    for (l = 0; l < 32; l++) a[l] = 0.0;
    for (; j + 32 <= len; j += 32)
        for (l = 0; l < 32; l++) a[l] += x[j + l];
    for (l = 0; l < 8; l++) a[l] = (a[l] + a[l + 16]) + (a[l + 8] + a[l + 24]);
    s = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
#endif
    for (; j < len; j++) s += x[j];
    return s;
}

int fs_read_floor(const double *X, size_t n, int n_threads, double *FS_RESTRICT out)
{
    double part[FS__FLOOR_MAX_BLOCKS];
    size_t blk = FS__FLOOR_BLOCK;
    int nb, b, nt;
    double s = 0.0;

    if (n_threads < 1) return FS_EINVAL;
    if (n == 0) { *out = 0.0; return FS_OK; }
    if (n > blk * (size_t)FS__FLOOR_MAX_BLOCKS)
        blk = fs__round_up((n + FS__FLOOR_MAX_BLOCKS - 1) / FS__FLOOR_MAX_BLOCKS, 8);
    nb = (int)((n + blk - 1) / blk);
    nt = n_threads < nb ? n_threads : nb;
#ifdef _OPENMP
    if (nt > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * blk, i1 = i0 + blk < n ? i0 + blk : n;
            part[b] = fs__read_floor_block(X + i0, i1 - i0);
        }
    } else
#endif
    {
        for (b = 0; b < nb; b++) {
            const size_t i0 = (size_t)b * blk, i1 = i0 + blk < n ? i0 + blk : n;
            part[b] = fs__read_floor_block(X + i0, i1 - i0);
        }
    }
    (void)nt;
    for (b = 0; b < nb; b++) s += part[b];
    *out = s;
    return FS_OK;
}

/* ---- minibatch: a list of rows (stochastic-gradient samplers) ------------ */
/* Rows go by panels of FS__PANEL: the panel's dot products (row by row,
 * fs__dot_row), its family terms, then the updates g += r_i x_i (and
 * gsq += (r_i x_i)^2) on rows still in L1.  While a panel is computed,
 * the rows of the next panel are prefetched (their addresses are known:
 * the row list), so that gathering scattered rows costs about what
 * streaming them would. */
FS_CLONES
static void fs__rows_kernel(const fs_glm *m, const size_t *rows, size_t k,
                            const double *FS_RESTRICT beta, int want_value,
                            double *FS_RESTRICT g, double *FS_RESTRICT gsq,
                            double *FS_RESTRICT lsum)
{
    const size_t d = m->d;
    const double *FS_RESTRICT X = m->X;
    double t[FS__PANEL], r[FS__PANEL], l[FS__PANEL], yb[FS__PANEL], bt[4];
    double *lp = want_value ? l : NULL;
    double *rp = g != NULL ? r : NULL;
    double v = 0.0;
    size_t i, q, j;
    const size_t row_bytes = d * sizeof(double);

    fs__tail_b(beta, d, bt);
    for (i = 0; i < k; i += FS__PANEL) {
        const size_t kk = k - i < FS__PANEL ? k - i : FS__PANEL;
        /* the dummy cursor of the family terms points at this panel's first
         * row (already in cache): the real prefetches are the next rows' */
        uintptr_t pf = (uintptr_t)(X + rows[i] * d);
        for (q = 0; q < kk; q++) {
            const size_t nxt = i + q + FS__PANEL;
            if (nxt < k) {
                const char *p = (const char *)(X + rows[nxt] * d);
                size_t off;
                for (off = 0; off < row_bytes; off += 64) FS__PREFETCH(p + off);
                FS__PREFETCH(p + row_bytes - 1);
            }
            yb[q] = m->y[rows[i + q]];
            t[q] = fs__dot_row(X + rows[i + q] * d, beta, bt, d);
        }
        for (q = kk; q % 4; q++) { yb[q] = 0.0; t[q] = 0.0; }
        fs__family_terms(m, m->family, yb, t, kk, lp, rp, &pf);
        if (want_value)
            for (q = 0; q < kk; q++) v += l[q];
        if (g != NULL) {
            for (q = 0; q < kk; q++) {
                const double *x = X + rows[i + q] * d;
                fs__axpy1(g, r[q], x, d);
                if (gsq != NULL) {
                    const double rq = r[q];
                    for (j = 0; j < d; j++) {
                        const double u = rq * x[j];
                        gsq[j] += u * u;
                    }
                }
            }
        }
    }
    *lsum = v;
}

int fs_glm_eval_rows(const fs_glm *m, const size_t *rows, size_t k, double scale,
                     const double *beta, double *FS_RESTRICT value,
                     double *FS_RESTRICT grad, double *FS_RESTRICT grad_sq)
{
    const size_t d = m->d;
    size_t i, j;
    double lsum = 0.0;
    if (k == 0) return FS_EINVAL;
    for (i = 0; i < k; i++)
        if (rows[i] >= m->n) return FS_EINVAL;
    if (grad == NULL) grad_sq = NULL;
    if (value == NULL && grad == NULL) return FS_OK;
    if (grad != NULL)
        for (j = 0; j < d; j++) grad[j] = 0.0;
    if (grad_sq != NULL)
        for (j = 0; j < d; j++) grad_sq[j] = 0.0;
    fs__rows_kernel(m, rows, k, beta, value != NULL, grad, grad_sq, &lsum);
    if (grad != NULL)
        for (j = 0; j < d; j++) grad[j] *= scale;
    lsum *= scale;
    if (m->prior_prec != NULL) {
        const double *pm = m->prior_mean, *pp = m->prior_prec;
        double pv = 0.0;
        for (j = 0; j < d; j++) {
            const double u = pm ? beta[j] - pm[j] : beta[j];
            const double gu = u * pp[j];
            pv += u * gu;
            if (grad != NULL) grad[j] += gu;
        }
        lsum += 0.5 * pv;
    }
    if (value != NULL) *value = lsum;
    return FS_OK;
}
