/* fs_vmath.h: the elementwise math shared by the network kernels
 * (fs_network.c, fs_mlp.c): exp, exp with expm1, log1p on [0, 1], scalar and
 * 4-wide with the same arithmetic, and the 4-wide (and one 8-wide) vector
 * helpers (types, loads, stores, lane selects, row sums), which fs_glm.c uses
 * too.  Private to csrc/.  Include after fs_kernel.h, with FS__VEC defined
 * when the compiler has GNU vector extensions; needs <math.h>, <stdint.h>
 * and <string.h>.
 * Everything is static inline: each kernel file (and each of its
 * target_clones versions) gets its own copy. */
#ifndef FS_VMATH_H
#define FS_VMATH_H

#include <stdint.h>
#include <string.h>

/* ---- constants of the elementwise kernels -------------------------------- */
#define FS__LOG2E 1.4426950408889634          /* 1 / log 2                    */
#define FS__LN2_HI 6.93147180369123816490e-01  /* log 2, high part (32 bits)   */
#define FS__LN2_LO 1.90821492927058770002e-10  /* log 2 - FS__LN2_HI           */
#define FS__SHIFT 6755399441055744.0           /* 1.5 * 2^52: x + SHIFT rounds x to an integer */
#define FS__EXP_LO (-746.0)                    /* exp(x) rounds to 0 below     */
#define FS__EXP_HI 710.0                       /* exp(x) overflows above       */
/* exp(r) = 1 + r + r^2 Q(r) on |r| <= log(2)/2; Q of degree 9 interpolates
 * (exp(r) - 1 - r) / r^2 at Chebyshev nodes (relative error of exp(r) with
 * these double coefficients: 1.6e-17). */
#define FS__Q0 0.5000000000000001
#define FS__Q1 0.16666666666666669
#define FS__Q2 0.041666666666624164
#define FS__Q3 0.008333333333330065
#define FS__Q4 0.0013888888917196719
#define FS__Q5 0.00019841269863040545
#define FS__Q6 2.4801521322368428e-05
#define FS__Q7 2.755726848030982e-06
#define FS__Q8 2.7620075880109014e-07
#define FS__Q9 2.510037583265786e-08

/* ======================================================================== */
/* Scalar elementwise kernels (the portable path; the vector kernels below  */
/* do the same arithmetic on 4 lanes).                                       */
/* ======================================================================== */

static inline uint64_t fs__bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double fs__from_bits(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* 2^k for an integer-valued kd = k + FS__SHIFT, -1022 <= k <= 1023: the low
 * bits of kd hold k, and (bits + 1023) << 52 keeps only the exponent field. */
static inline double fs__pow2_s(double kd)
{
    return fs__from_bits((fs__bits(kd) + 1023u) << 52);
}

/* The shared core of exp and expm1: x = k log 2 + r, returns r and k. */
static inline double fs__reduce_s(double x, double *k)
{
    const double kk = (x * FS__LOG2E + FS__SHIFT) - FS__SHIFT;
    *k = kk;
    return (x - kk * FS__LN2_HI) - kk * FS__LN2_LO;
}

/* exp(r) - 1 for |r| <= log(2)/2 (Estrin evaluation of Q). */
static inline double fs__pm1_s(double r)
{
    const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const double q = ((FS__Q0 + FS__Q1 * r) + (FS__Q2 + FS__Q3 * r) * r2) +
                     (((FS__Q4 + FS__Q5 * r) + (FS__Q6 + FS__Q7 * r) * r2) * r4 +
                      (FS__Q8 + FS__Q9 * r) * r8);
    return r + r2 * q;
}

/* (1 + pm1) 2^k with k split in two halves so that subnormal results are
 * rounded once, and 2^1024 overflows to inf. */
static inline double fs__scale_s(double p, double k)
{
    const double k1s = k * 0.5 + FS__SHIFT;
    const double k2s = (k - (k1s - FS__SHIFT)) + FS__SHIFT;
    return p * fs__pow2_s(k1s) * fs__pow2_s(k2s);
}

/* exp(x) for every double x (NaN propagates). */
static inline double fs__exp_s(double x)
{
    double k, r;
    x = x < FS__EXP_LO ? FS__EXP_LO : x;
    x = x > FS__EXP_HI ? FS__EXP_HI : x;
    r = fs__reduce_s(x, &k);
    return fs__scale_s(1.0 + fs__pm1_s(r), k);
}

/* e = exp(x) and m = expm1(x) = e - 1 (accurate for small |x|), x <= 0. */
static inline void fs__exp_expm1_s(double x, double *e, double *m)
{
    double k, r, pm1, s;
    x = x < FS__EXP_LO ? FS__EXP_LO : x;
    r = fs__reduce_s(x, &k);
    pm1 = fs__pm1_s(r);
    *e = fs__scale_s(1.0 + pm1, k);
    s = fs__scale_s(1.0, k);                     /* 2^k, possibly 0 */
    *m = s * pm1 + (s - 1.0);
}

/* log1p(e) for 0 <= e <= 1: 2 atanh(s), s = e / (2 + e) <= 1/3, by the
 * series of atanh to s^35; T is the type, C() makes a constant of it (the
 * scalar and the 4-wide versions run the same operations). */
#define FS__LOG1P01_BODY(T, C)                                                \
    {                                                                         \
        const T s = e / (2.0 + e), z = s * s;                                 \
        T p = C(1.0 / 33.0);                                                  \
        p = p * z + 1.0 / 31.0;                                               \
        p = p * z + 1.0 / 29.0;                                               \
        p = p * z + 1.0 / 27.0;                                               \
        p = p * z + 1.0 / 25.0;                                               \
        p = p * z + 1.0 / 23.0;                                               \
        p = p * z + 1.0 / 21.0;                                               \
        p = p * z + 1.0 / 19.0;                                               \
        p = p * z + 1.0 / 17.0;                                               \
        p = p * z + 1.0 / 15.0;                                               \
        p = p * z + 1.0 / 13.0;                                               \
        p = p * z + 1.0 / 11.0;                                               \
        p = p * z + 1.0 / 9.0;                                                \
        p = p * z + 1.0 / 7.0;                                                \
        p = p * z + 1.0 / 5.0;                                                \
        p = p * z + 1.0 / 3.0;                                                \
        return 2.0 * s + (2.0 * s) * (z * p);                                 \
    }

static inline double fs__log1p01_s(double e)
FS__LOG1P01_BODY(double, )

/* ======================================================================== */
/* Vector elementwise kernels (the same arithmetic, 4 lanes at a time)       */
/* ======================================================================== */
#ifdef FS__VEC
typedef double fs__v4 __attribute__((vector_size(32)));
typedef int64_t fs__v4i __attribute__((vector_size(32)));
typedef uint64_t fs__v4u __attribute__((vector_size(32)));

#if defined(__clang__)
#  define FS__SHUF(a, b, i, j, k, l) __builtin_shufflevector(a, b, i, j, k, l)
#else
#  define FS__SHUF(a, b, i, j, k, l) __builtin_shuffle(a, b, (fs__v4i){i, j, k, l})
#endif

FS__INLINE fs__v4 fs__ld(const double *p)
{
    fs__v4 v;
    memcpy(&v, p, sizeof v);
    return v;
}

FS__INLINE void fs__st(double *p, fs__v4 v) { memcpy(p, &v, sizeof v); }

/* 8 lanes, for the plain read of fs_read_floor: one AVX-512 register, two
 * AVX2 registers, four SSE2 registers */
typedef double fs__v8 __attribute__((vector_size(64)));

FS__INLINE fs__v8 fs__ld8(const double *p)
{
    fs__v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

FS__INLINE fs__v4 fs__set1(double a)
{
    const fs__v4 v = {a, a, a, a};
    return v;
}

/* lanes of a where the mask m is set, of b elsewhere */
FS__INLINE fs__v4 fs__sel(fs__v4i m, fs__v4 a, fs__v4 b)
{
    return (fs__v4)(((fs__v4i)a & m) | ((fs__v4i)b & ~m));
}

FS__INLINE fs__v4 fs__andm(fs__v4 a, fs__v4i m) { return (fs__v4)((fs__v4i)a & m); }

FS__INLINE fs__v4 fs__abs(fs__v4 a)
{
    return (fs__v4)((fs__v4u)a & (fs__v4u)fs__set1(fs__from_bits(0x7fffffffffffffffULL)));
}

/* lane r = (a_r[0] + a_r[1]) + (a_r[2] + a_r[3]): four row sums at once
 * (in-lane unpacks, then one cross-lane step). */
FS__INLINE fs__v4 fs__hsum4(fs__v4 a0, fs__v4 a1, fs__v4 a2, fs__v4 a3)
{
    const fs__v4 h01 = FS__SHUF(a0, a1, 0, 4, 2, 6) + FS__SHUF(a0, a1, 1, 5, 3, 7);
    const fs__v4 h23 = FS__SHUF(a2, a3, 0, 4, 2, 6) + FS__SHUF(a2, a3, 1, 5, 3, 7);
    return FS__SHUF(h01, h23, 0, 1, 4, 5) + FS__SHUF(h01, h23, 2, 3, 6, 7);
}

FS__INLINE double fs__hsum1(fs__v4 a) { return (a[0] + a[1]) + (a[2] + a[3]); }

FS__INLINE fs__v4 fs__pow2_v(fs__v4 kd)
{
    return (fs__v4)(((fs__v4u)kd + 1023u) << 52);
}

FS__INLINE fs__v4 fs__reduce_v(fs__v4 x, fs__v4 *k)
{
    const fs__v4 kk = (x * FS__LOG2E + FS__SHIFT) - FS__SHIFT;
    *k = kk;
    return (x - kk * FS__LN2_HI) - kk * FS__LN2_LO;
}

FS__INLINE fs__v4 fs__pm1_v(fs__v4 r)
{
    const fs__v4 r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    const fs__v4 q = ((FS__Q0 + FS__Q1 * r) + (FS__Q2 + FS__Q3 * r) * r2) +
                     (((FS__Q4 + FS__Q5 * r) + (FS__Q6 + FS__Q7 * r) * r2) * r4 +
                      (FS__Q8 + FS__Q9 * r) * r8);
    return r + r2 * q;
}

FS__INLINE fs__v4 fs__scale_v(fs__v4 p, fs__v4 k)
{
    const fs__v4 k1s = k * 0.5 + FS__SHIFT;
    const fs__v4 k2s = (k - (k1s - FS__SHIFT)) + FS__SHIFT;
    return p * fs__pow2_v(k1s) * fs__pow2_v(k2s);
}

/* exp(x) for x <= 0 or NaN (no upper clamp) */
FS__INLINE fs__v4 fs__expneg_v(fs__v4 x)
{
    fs__v4 k, r;
    x = fs__sel(x < FS__EXP_LO, fs__set1(FS__EXP_LO), x);
    r = fs__reduce_v(x, &k);
    return fs__scale_v(1.0 + fs__pm1_v(r), k);
}

/* exp(x) for every x: fs__expneg_v after the upper clamp */
FS__INLINE fs__v4 fs__exp_v(fs__v4 x)
{
    return fs__expneg_v(fs__sel(x > FS__EXP_HI, fs__set1(FS__EXP_HI), x));
}

FS__INLINE void fs__exp_expm1_v(fs__v4 x, fs__v4 *e, fs__v4 *m)
{
    fs__v4 k, r, pm1, s;
    x = fs__sel(x < FS__EXP_LO, fs__set1(FS__EXP_LO), x);
    r = fs__reduce_v(x, &k);
    pm1 = fs__pm1_v(r);
    *e = fs__scale_v(1.0 + pm1, k);
    s = fs__scale_v(fs__set1(1.0), k);
    *m = s * pm1 + (s - 1.0);
}

FS__INLINE fs__v4 fs__log1p01_v(fs__v4 e)
FS__LOG1P01_BODY(fs__v4, fs__set1)
#endif /* FS__VEC */

/* ---- dot products of padded rows (ld a multiple of 4, x padded with zeros) */
/* t[r] = w_r . x for the 4 rows w_r = w + r ld: two partial sums per row
 * (columns 8k..8k+3 and 8k+4..8k+7, a last group of 4 into the first),
 * lanes combined as (s0 + s1) + (s2 + s3). */
FS__INLINE void fs__dot4(const double *w, int ld, const double *x, double *t)
{
#ifdef FS__VEC
    const double *w0 = w, *w1 = w + ld, *w2 = w + 2 * ld, *w3 = w + 3 * ld;
    const fs__v4 z = fs__set1(0.0);
    fs__v4 l0 = z, l1 = z, l2 = z, l3 = z, h0 = z, h1 = z, h2 = z, h3 = z;
    int j = 0;
    for (; j + 8 <= ld; j += 8) {
        const fs__v4 xl = fs__ld(x + j), xh = fs__ld(x + j + 4);
        l0 += fs__ld(w0 + j) * xl;
        h0 += fs__ld(w0 + j + 4) * xh;
        l1 += fs__ld(w1 + j) * xl;
        h1 += fs__ld(w1 + j + 4) * xh;
        l2 += fs__ld(w2 + j) * xl;
        h2 += fs__ld(w2 + j + 4) * xh;
        l3 += fs__ld(w3 + j) * xl;
        h3 += fs__ld(w3 + j + 4) * xh;
    }
    if (j < ld) {
        const fs__v4 xl = fs__ld(x + j);
        l0 += fs__ld(w0 + j) * xl;
        l1 += fs__ld(w1 + j) * xl;
        l2 += fs__ld(w2 + j) * xl;
        l3 += fs__ld(w3 + j) * xl;
    }
    fs__st(t, fs__hsum4(l0 + h0, l1 + h1, l2 + h2, l3 + h3));
#else
    int r, j;
    for (r = 0; r < 4; r++) {
        const double *wr = w + (size_t)r * ld;
        double s = 0.0;
        for (j = 0; j < ld; j++) s += wr[j] * x[j];
        t[r] = s;
    }
#endif
}

/* One row, in the summation order of fs__dot4. */
FS__INLINE double fs__dot1(const double *w, int ld, const double *x)
{
#ifdef FS__VEC
    const fs__v4 z = fs__set1(0.0);
    fs__v4 l = z, h = z;
    int j = 0;
    for (; j + 8 <= ld; j += 8) {
        l += fs__ld(w + j) * fs__ld(x + j);
        h += fs__ld(w + j + 4) * fs__ld(x + j + 4);
    }
    if (j < ld) l += fs__ld(w + j) * fs__ld(x + j);
    return fs__hsum1(l + h);
#else
    double s = 0.0;
    int j;
    for (j = 0; j < ld; j++) s += w[j] * x[j];
    return s;
#endif
}

#endif /* FS_VMATH_H */
