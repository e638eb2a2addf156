/* fs_network.c: random-basis networks (see fs_network.h for the model).
 *
 * Layout of the gradient kernel (the hot path of every surrogate sampler)
 *   The hidden rows are cut into blocks of FS_NETWORK_BLOCK rows.  For each
 *   block: (1) the pre-activations t_i = w_i . x + d_i (RBF: ||x - c_i||^2),
 *   four rows at a time so that the loads of x are shared; (2) the
 *   coefficients c_i = v_i a'(t_i) for the whole block, vectorised (the
 *   exponential is our own, see below); (3) grad += sum_i c_i w_i over tiles
 *   of eight rows, which are still in L1.  W is therefore read once from
 *   L2/L3 per evaluation.
 *
 *   The kernels read an aligned copy of W whose rows are padded with zeros to
 *   ld = dim rounded up to 4 (x and the gradient accumulator are padded the
 *   same way), so the loops have no remainders and no load crosses a cache
 *   line.
 *
 * Measured alternatives (development machine: AMD EPYC Zen 3, AVX2, 512 KB
 * L2 per core, so the 800 KB of W stream from L3; one thread; s = 2000,
 * dim = 50, minimum of repeated runs): this kernel 21-23 us; unpadded rows
 * 24-28 us; two passes (all dot products, then all accumulations) 30-40 us;
 * 16-row blocks +5%, 64-row blocks +2% (1000 x 24: -4%); 8 rows with one
 * accumulator each for the dot products instead of 4 rows with two: equal;
 * a transposed layout (4 rows interleaved column by column: no horizontal
 * sums, a 4-lane gradient accumulator per column) equal for 2000 x 50 and
 * 5% faster for 1000 x 24, not worth a second copy of W; software prefetch
 * of the next block, and software pipelining (dot products of block k+1
 * between the accumulations of block k), 5-15% slower; no FMA contraction
 * +10%; one-step scaling in exp (subnormal results flushed) -3%, not taken.
 * The loop is bound by L1 loads (each row is read twice from L1, once from
 * L3) and by the latency of the 32 exponentials of a block.
 *
 * Vector code without -ffast-math: GNU vector extensions (4 doubles), with a
 * fixed summation order (and a*b + c contracted to FMA where the ISA has
 * it).  A dot product keeps two partial sums per row (`lo` for columns
 * 8k..8k+3, `hi` for 8k+4..8k+7, and a last group of 4 into `lo`) and
 * combines the lanes as (s0 + s1) + (s2 + s3).  Compilers without vector
 * extensions run plain scalar loops over the same padded rows.
 *
 * Hot kernels are compiled for several ISAs (target_clones) and picked at
 * load time, so a portable -O3 build still runs AVX2 / AVX-512 code.
 */
#include "fs_network.h"

#if defined(__GNUC__) && !defined(__clang__)
/* 32-byte vector helpers are always inlined: the psABI note does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"
/* Let the AVX2 / AVX-512 clones fuse a*b + c into FMA instructions (ISO C
 * mode, -std=c99, otherwise turns contraction off): 10% on the gradient
 * kernel.  The baseline clone has no FMA, so its code is unchanged. */
#  if !defined(FS_NETWORK_NO_FMA)
#    pragma GCC optimize("fp-contract=fast")
#  endif
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs_kernel.h"   /* FS_CLONES (multi-versioning), FS__INLINE */

#if (defined(__GNUC__) || defined(__clang__)) && !defined(FS_NETWORK_NO_VEC)
#  define FS__VEC 1
#endif

#define FS__B FS_NETWORK_BLOCK

#include "fs_vmath.h"   /* exp, expm1, log1p01, 4-wide helpers */

/* Network activation, one lane: derivatives 0..3 of an additive activation
 * at t (any pointer may be NULL).
 * Written through e = exp(-|t|) (tanh: exp(-2|t|)), r = 1 / (1 + e) and
 * m = expm1(-|t|), so nothing overflows or cancels:
 *   sigmoid(t) = r (t >= 0) or e r;  sigmoid' = e r^2;  1 - 2 sigmoid = +-m r
 *   tanh(|t|) = -m r;  tanh' = 4 e r^2 */
static inline void fs__net_act1(int act, double t, double *f0, double *f1,
                             double *f2, double *f3)
{
    const double at = fabs(t);
    const int pos = t >= 0.0;
    double e, m, r;
    if (act == FS_NETWORK_TANH) {
        double tau, sech2;
        fs__exp_expm1_s(-2.0 * at, &e, &m);
        r = 1.0 / (1.0 + e);
        tau = pos ? -m * r : m * r;
        sech2 = 4.0 * e * r * r;
        if (f0) *f0 = tau;
        if (f1) *f1 = sech2;
        if (f2) *f2 = -2.0 * tau * sech2;
        if (f3) *f3 = -2.0 * sech2 * (1.0 - 3.0 * tau * tau);
    } else {
        double sig, sp, odd;
        fs__exp_expm1_s(-at, &e, &m);
        r = 1.0 / (1.0 + e);
        sig = pos ? r : e * r;
        sp = e * r * r;
        odd = pos ? m * r : -(m * r);            /* 1 - 2 sigmoid(t) */
        if (act == FS_NETWORK_SOFTPLUS) {
            if (f0) *f0 = (t > 0.0 ? t : 0.0) + fs__log1p01_s(e);
            if (f1) *f1 = sig;
            if (f2) *f2 = sp;
            if (f3) *f3 = sp * odd;
        } else {
            if (f0) *f0 = sig;
            if (f1) *f1 = sp;
            if (f2) *f2 = sp * odd;
            if (f3) *f3 = sp * (1.0 - 6.0 * sp);
        }
    }
    if (t != t) {                                /* NaN in, NaN out */
        if (f0) *f0 = t;
        if (f1) *f1 = t;
        if (f2) *f2 = t;
        if (f3) *f3 = t;
    }
}

#ifdef FS__VEC

/* fs__net_act1 on four lanes; outputs may be NULL. */
FS__INLINE void fs__net_act4(int act, fs__v4 t, fs__v4 *f0, fs__v4 *f1, fs__v4 *f2,
                          fs__v4 *f3)
{
    const fs__v4 zero = fs__set1(0.0);
    const fs__v4 at = fs__abs(t);
    const fs__v4i pos = t >= zero, nan = t != t;
    fs__v4 e, m, r;
    if (act == FS_NETWORK_TANH) {
        fs__v4 tau, sech2;
        fs__exp_expm1_v(-2.0 * at, &e, &m);
        r = 1.0 / (1.0 + e);
        tau = fs__sel(pos, -m * r, m * r);
        sech2 = 4.0 * e * r * r;
        if (f0) *f0 = tau;
        if (f1) *f1 = sech2;
        if (f2) *f2 = -2.0 * tau * sech2;
        if (f3) *f3 = -2.0 * sech2 * (1.0 - 3.0 * tau * tau);
    } else {
        fs__v4 sig, sp, odd;
        fs__exp_expm1_v(-at, &e, &m);
        r = 1.0 / (1.0 + e);
        sig = fs__sel(pos, r, e * r);
        sp = e * r * r;
        odd = fs__sel(pos, m * r, -(m * r));
        if (act == FS_NETWORK_SOFTPLUS) {
            if (f0) *f0 = fs__sel(t > zero, t, zero) + fs__log1p01_v(e);
            if (f1) *f1 = sig;
            if (f2) *f2 = sp;
            if (f3) *f3 = sp * odd;
        } else {
            if (f0) *f0 = sig;
            if (f1) *f1 = sp;
            if (f2) *f2 = sp * odd;
            if (f3) *f3 = sp * (1.0 - 6.0 * sp);
        }
    }
    if (f0) *f0 = fs__sel(nan, t, *f0);
    if (f1) *f1 = fs__sel(nan, t, *f1);
    if (f2) *f2 = fs__sel(nan, t, *f2);
    if (f3) *f3 = fs__sel(nan, t, *f3);
}

/* a(t) and a'(t) only (the value and gradient paths), with the same formulas
 * as fs__net_act4 but no expm1 for softplus and sigmoid; either output may be
 * NULL (callers pass literal NULLs, so the unused half is compiled away).
 * NaN propagates through the arithmetic. */
FS__INLINE void fs__f01_v(int act, fs__v4 t, fs__v4 *f0, fs__v4 *f1)
{
    const fs__v4 zero = fs__set1(0.0);
    const fs__v4i pos = t >= zero;
    const fs__v4 at = fs__abs(t);
    if (act == FS_NETWORK_TANH) {
        fs__v4 e, m, r;
        fs__exp_expm1_v(-2.0 * at, &e, &m);
        r = 1.0 / (1.0 + e);
        if (f0) *f0 = fs__sel(pos, -m * r, m * r);
        if (f1) *f1 = 4.0 * e * r * r;
    } else {
        const fs__v4 e = fs__expneg_v(-at);
        const fs__v4 r = 1.0 / (1.0 + e);
        if (act == FS_NETWORK_SOFTPLUS) {
            if (f0) *f0 = fs__sel(t > zero, t, zero) + fs__log1p01_v(e);
            if (f1) *f1 = fs__sel(pos, r, e * r);
        } else {
            if (f0) *f0 = fs__sel(pos, r, e * r);
            if (f1) *f1 = e * r * r;
        }
    }
}
#endif /* FS__VEC */

/* ======================================================================== */
/* Activations over a block                                                 */
/* ======================================================================== */

/* f_k[b] = a^(k)(t[b]) for b < nb (additive activations; NULL outputs are
 * skipped). */
FS__INLINE void fs__act_block(int act, int nb, const double *t, double *f0,
                              double *f1, double *f2, double *f3)
{
    int b;
#ifdef FS__VEC
    for (b = 0; b < nb; b += 4) {
        double tb[4] = {0.0, 0.0, 0.0, 0.0}, o[4][4];
        fs__v4 y0, y1, y2, y3;
        const int k = nb - b < 4 ? nb - b : 4;
        int l;
        for (l = 0; l < k; l++) tb[l] = t[b + l];
        fs__net_act4(act, fs__ld(tb), f0 ? &y0 : NULL, f1 ? &y1 : NULL,
                  f2 ? &y2 : NULL, f3 ? &y3 : NULL);
        if (f0) fs__st(o[0], y0);
        if (f1) fs__st(o[1], y1);
        if (f2) fs__st(o[2], y2);
        if (f3) fs__st(o[3], y3);
        for (l = 0; l < k; l++) {
            if (f0) f0[b + l] = o[0][l];
            if (f1) f1[b + l] = o[1][l];
            if (f2) f2[b + l] = o[2][l];
            if (f3) f3[b + l] = o[3][l];
        }
    }
#else
    for (b = 0; b < nb; b++)
        fs__net_act1(act, t[b], f0 ? f0 + b : NULL, f1 ? f1 + b : NULL,
                  f2 ? f2 + b : NULL, f3 ? f3 + b : NULL);
#endif
}

/* The hot path: c[b] = v[b] a'(t[b]) (additive) or, for RBF nodes with
 * t = ||x - c||^2 and il2 = 1 / l^2, c[b] = v[b] a_b il2[b] with
 * a_b = exp(-t il2 / 2).  When f0 is not NULL it also receives a(t[b])
 * (RBF: a_b).  nb is a multiple of 4 (the caller pads t, v and il2). */
FS__INLINE void fs__coef_block(int act, int nb, const double *t, const double *v,
                               const double *il2, double *c, double *f0)
{
    int b;
#ifdef FS__VEC
    const fs__v4 zero = fs__set1(0.0);
    if (f0 && act != FS_NETWORK_RBF) {
        for (b = 0; b < nb; b += 4) {
            fs__v4 y0, y1;
            fs__f01_v(act, fs__ld(t + b), &y0, &y1);
            fs__st(f0 + b, y0);
            fs__st(c + b, fs__ld(v + b) * y1);
        }
        return;
    }
    switch (act) {
    case FS_NETWORK_SOFTPLUS:
        for (b = 0; b < nb; b += 4) {
            const fs__v4 tb = fs__ld(t + b);
            const fs__v4 e = fs__expneg_v(-fs__abs(tb));
            const fs__v4 r = 1.0 / (1.0 + e);
            fs__st(c + b, fs__ld(v + b) * fs__sel(tb >= zero, r, e * r));
        }
        break;
    case FS_NETWORK_SIGMOID:
        for (b = 0; b < nb; b += 4) {
            const fs__v4 e = fs__expneg_v(-fs__abs(fs__ld(t + b)));
            const fs__v4 r = 1.0 / (1.0 + e);
            fs__st(c + b, fs__ld(v + b) * (e * r * r));
        }
        break;
    case FS_NETWORK_TANH:
        for (b = 0; b < nb; b += 4) {
            const fs__v4 e = fs__expneg_v(-2.0 * fs__abs(fs__ld(t + b)));
            const fs__v4 r = 1.0 / (1.0 + e);
            fs__st(c + b, fs__ld(v + b) * (4.0 * e * r * r));
        }
        break;
    default: /* RBF */
        for (b = 0; b < nb; b += 4) {
            const fs__v4 il = fs__ld(il2 + b);
            const fs__v4 a = fs__expneg_v(-0.5 * (fs__ld(t + b) * il));
            if (f0) fs__st(f0 + b, a);
            fs__st(c + b, fs__ld(v + b) * (a * il));
        }
        break;
    }
#else
    for (b = 0; b < nb; b++) {
        if (act == FS_NETWORK_RBF) {
            const double a = fs__exp_s(-0.5 * (t[b] * il2[b]));
            if (f0) f0[b] = a;
            c[b] = v[b] * (a * il2[b]);
        } else {
            double y1;
            fs__net_act1(act, t[b], f0 ? f0 + b : NULL, &y1, NULL, NULL);
            c[b] = v[b] * y1;
        }
    }
#endif
}

/* f0[b] = a(t[b]) (RBF: exp(-t[b] il2[b] / 2)), nb a multiple of 4. */
FS__INLINE void fs__value_block(int act, int nb, const double *t, const double *il2,
                                double *f0)
{
    int b;
#ifdef FS__VEC
    for (b = 0; b < nb; b += 4) {
        fs__v4 y;
        if (act == FS_NETWORK_RBF)
            y = fs__expneg_v(-0.5 * (fs__ld(t + b) * fs__ld(il2 + b)));
        else
            fs__f01_v(act, fs__ld(t + b), &y, NULL);
        fs__st(f0 + b, y);
    }
#else
    for (b = 0; b < nb; b++) {
        if (act == FS_NETWORK_RBF)
            f0[b] = fs__exp_s(-0.5 * (t[b] * il2[b]));
        else
            fs__net_act1(act, t[b], f0 + b, NULL, NULL, NULL);
    }
#endif
}

/* Network output of one block: the dot product sum_b v[b] f[b] of output
 * weights and features, nb a multiple of 4: four partial sums (lane l takes
 * b = l mod 4), combined as (s0 + s1) + (s2 + s3). */
FS__INLINE double fs__net_dot_block(int nb, const double *v, const double *f)
{
    int b;
#ifdef FS__VEC
    fs__v4 z = fs__set1(0.0);
    for (b = 0; b < nb; b += 4) z += fs__ld(v + b) * fs__ld(f + b);
    return fs__hsum1(z);
#else
    double z[4] = {0.0, 0.0, 0.0, 0.0};
    for (b = 0; b < nb; b++) z[b % 4] += v[b] * f[b];
    return (z[0] + z[1]) + (z[2] + z[3]);
#endif
}

/* ======================================================================== */
/* Pre-activations and accumulations over tiles of rows                     */
/* ======================================================================== */
/* Rows are the padded rows of net->Wp (stride ld, a multiple of 4) and x is
 * padded with zeros to ld, so the loops have no remainders. */

/* t[r] = w_r . x (rbf = 0: fs__dot4) or ||w_r - x||^2 (rbf = 1) for the 4
 * rows w_r = w + r*ld. */
FS__INLINE void fs__pre4(const double *w, int ld, const double *x, int rbf, double *t)
{
    if (!rbf) {
        fs__dot4(w, ld, x, t);
        return;
    }
    {
#ifdef FS__VEC
    const double *w0 = w, *w1 = w + ld, *w2 = w + 2 * ld, *w3 = w + 3 * ld;
    const fs__v4 z = fs__set1(0.0);
    fs__v4 l0 = z, l1 = z, l2 = z, l3 = z, h0 = z, h1 = z, h2 = z, h3 = z;
    fs__v4 a, b;
    int j = 0;
    for (; j + 8 <= ld; j += 8) {
        const fs__v4 xl = fs__ld(x + j), xh = fs__ld(x + j + 4);
        a = fs__ld(w0 + j) - xl; b = fs__ld(w0 + j + 4) - xh; l0 += a * a; h0 += b * b;
        a = fs__ld(w1 + j) - xl; b = fs__ld(w1 + j + 4) - xh; l1 += a * a; h1 += b * b;
        a = fs__ld(w2 + j) - xl; b = fs__ld(w2 + j + 4) - xh; l2 += a * a; h2 += b * b;
        a = fs__ld(w3 + j) - xl; b = fs__ld(w3 + j + 4) - xh; l3 += a * a; h3 += b * b;
    }
    if (j < ld) {
        const fs__v4 xl = fs__ld(x + j);
        a = fs__ld(w0 + j) - xl; l0 += a * a;
        a = fs__ld(w1 + j) - xl; l1 += a * a;
        a = fs__ld(w2 + j) - xl; l2 += a * a;
        a = fs__ld(w3 + j) - xl; l3 += a * a;
    }
    fs__st(t, fs__hsum4(l0 + h0, l1 + h1, l2 + h2, l3 + h3));
#else
    int r, j;
    for (r = 0; r < 4; r++) {
        const double *wr = w + r * ld;
        double s = 0.0;
        for (j = 0; j < ld; j++) {
            const double a = wr[j] - x[j];
            s += a * a;
        }
        t[r] = s;
    }
#endif
    }
}

/* One row, in exactly the summation order of fs__pre4 (additive: fs__dot1). */
FS__INLINE double fs__pre1(const double *w, int ld, const double *x, int rbf)
{
    if (!rbf) return fs__dot1(w, ld, x);
    {
#ifdef FS__VEC
    const fs__v4 z = fs__set1(0.0);
    fs__v4 l = z, h = z, a, b;
    int j = 0;
    for (; j + 8 <= ld; j += 8) {
        a = fs__ld(w + j) - fs__ld(x + j);
        b = fs__ld(w + j + 4) - fs__ld(x + j + 4);
        l += a * a;
        h += b * b;
    }
    if (j < ld) {
        a = fs__ld(w + j) - fs__ld(x + j);
        l += a * a;
    }
    return fs__hsum1(l + h);
#else
    double s = 0.0;
    int j;
    for (j = 0; j < ld; j++) {
        const double a = w[j] - x[j];
        s += a * a;
    }
    return s;
#endif
    }
}

/* Pre-activations of rows i0 .. i0+nb-1: w_i . x + bias_i (additive) or
 * ||x - c_i||^2 (RBF), padded with zeros (additive: the padded biases) to a
 * multiple of 4. */
FS__INLINE void fs__pre_block(const fs_network *net, const double *x, int i0, int nb,
                              double *t)
{
    const int ld = net->ld, rbf = net->activation == FS_NETWORK_RBF;
    const double *Wb = net->Wp + (size_t)i0 * ld;
    int i = 0;
    for (; i + 4 <= nb; i += 4) fs__pre4(Wb + (size_t)i * ld, ld, x, rbf, t + i);
    for (; i < nb; i++) t[i] = fs__pre1(Wb + (size_t)i * ld, ld, x, rbf);
    for (; i % 4; i++) t[i] = 0.0;
    if (!rbf) {
        const double *bb = net->bp + i0;
#ifdef FS__VEC
        for (i = 0; i < nb; i += 4) fs__st(t + i, fs__ld(t + i) + fs__ld(bb + i));
#else
        for (i = 0; i < nb; i++) t[i] += bb[i];
#endif
    }
}

/* g[j] += sum_r c_r (w_r[j] - rbf x[j]), j < ld, over the k rows (k = 8, 4
 * or 1) of a tile; the products are added as a balanced tree in row order. */
FS__INLINE void fs__acc_tile(double *FS_RESTRICT g, const double *w, int ld, int k,
                             const double *c, const double *x, int rbf)
{
    int j;
#ifdef FS__VEC
    if (k == 8) {
        const double *w0 = w, *w1 = w + ld, *w2 = w + 2 * ld, *w3 = w + 3 * ld;
        const double *w4 = w + 4 * ld, *w5 = w + 5 * ld, *w6 = w + 6 * ld, *w7 = w + 7 * ld;
        const fs__v4 c0 = fs__set1(c[0]), c1 = fs__set1(c[1]), c2 = fs__set1(c[2]),
                     c3 = fs__set1(c[3]), c4 = fs__set1(c[4]), c5 = fs__set1(c[5]),
                     c6 = fs__set1(c[6]), c7 = fs__set1(c[7]);
        if (!rbf) {
            for (j = 0; j < ld; j += 4) {
                const fs__v4 s =
                    ((c0 * fs__ld(w0 + j) + c1 * fs__ld(w1 + j)) +
                     (c2 * fs__ld(w2 + j) + c3 * fs__ld(w3 + j))) +
                    ((c4 * fs__ld(w4 + j) + c5 * fs__ld(w5 + j)) +
                     (c6 * fs__ld(w6 + j) + c7 * fs__ld(w7 + j)));
                fs__st(g + j, fs__ld(g + j) + s);
            }
        } else {
            for (j = 0; j < ld; j += 4) {
                const fs__v4 xl = fs__ld(x + j);
                const fs__v4 s =
                    ((c0 * (fs__ld(w0 + j) - xl) + c1 * (fs__ld(w1 + j) - xl)) +
                     (c2 * (fs__ld(w2 + j) - xl) + c3 * (fs__ld(w3 + j) - xl))) +
                    ((c4 * (fs__ld(w4 + j) - xl) + c5 * (fs__ld(w5 + j) - xl)) +
                     (c6 * (fs__ld(w6 + j) - xl) + c7 * (fs__ld(w7 + j) - xl)));
                fs__st(g + j, fs__ld(g + j) + s);
            }
        }
    } else if (k == 4) {
        const double *w0 = w, *w1 = w + ld, *w2 = w + 2 * ld, *w3 = w + 3 * ld;
        const fs__v4 c0 = fs__set1(c[0]), c1 = fs__set1(c[1]), c2 = fs__set1(c[2]),
                     c3 = fs__set1(c[3]);
        if (!rbf) {
            for (j = 0; j < ld; j += 4) {
                const fs__v4 s = (c0 * fs__ld(w0 + j) + c1 * fs__ld(w1 + j)) +
                                 (c2 * fs__ld(w2 + j) + c3 * fs__ld(w3 + j));
                fs__st(g + j, fs__ld(g + j) + s);
            }
        } else {
            for (j = 0; j < ld; j += 4) {
                const fs__v4 xl = fs__ld(x + j);
                const fs__v4 s = (c0 * (fs__ld(w0 + j) - xl) + c1 * (fs__ld(w1 + j) - xl)) +
                                 (c2 * (fs__ld(w2 + j) - xl) + c3 * (fs__ld(w3 + j) - xl));
                fs__st(g + j, fs__ld(g + j) + s);
            }
        }
    } else {
        const fs__v4 c0 = fs__set1(c[0]);
        for (j = 0; j < ld; j += 4) {
            const fs__v4 a = rbf ? fs__ld(w + j) - fs__ld(x + j) : fs__ld(w + j);
            fs__st(g + j, fs__ld(g + j) + c0 * a);
        }
    }
#else
    int r;
    for (r = 0; r < k; r++) {
        const double *wr = w + r * ld, cr = c[r];
        for (j = 0; j < ld; j++) g[j] += cr * (rbf ? wr[j] - x[j] : wr[j]);
    }
#endif
}

/* g += sum over the nb rows of the block at i0 of c_b (w_b - rbf x). */
FS__INLINE void fs__acc_block(const fs_network *net, const double *x, int i0, int nb,
                              const double *c, double *FS_RESTRICT g)
{
    const int ld = net->ld, rbf = net->activation == FS_NETWORK_RBF;
    const double *Wb = net->Wp + (size_t)i0 * ld;
    int i = 0;
    for (; i + 8 <= nb; i += 8) fs__acc_tile(g, Wb + (size_t)i * ld, ld, 8, c + i, x, rbf);
    for (; i + 4 <= nb; i += 4) fs__acc_tile(g, Wb + (size_t)i * ld, ld, 4, c + i, x, rbf);
    for (; i < nb; i++) fs__acc_tile(g, Wb + (size_t)i * ld, ld, 1, c + i, x, rbf);
}

/* ======================================================================== */
/* Kernels (x standardised and padded to ld; results in x coordinates)      */
/* ======================================================================== */

/* value and/or gradient dz/dx (g has ld entries) in one pass over W. */
FS_CLONES
static void fs__value_grad_kernel(const fs_network *net, const double *x,
                                  double *value, double *FS_RESTRICT g)
{
    const int s = net->n_hidden, act = net->activation;
    double t[FS__B], c[FS__B], f0[FS__B], vb[FS__B];
    double z = 0.0;
    int i0, b;
    if (g) memset(g, 0, sizeof(double) * (size_t)net->ld);
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        const int np = (nb + 3) & ~3;
        const double *vp = net->v + i0, *il2 = net->il2p + i0;
        fs__pre_block(net, x, i0, nb, t);
        if (np != nb) {               /* the short last block: pad v */
            for (b = 0; b < np; b++) vb[b] = b < nb ? vp[b] : 0.0;
            vp = vb;
        }
        if (g) {
            if (value)
                fs__coef_block(act, np, t, vp, il2, c, f0);
            else
                fs__coef_block(act, np, t, vp, il2, c, NULL);
            fs__acc_block(net, x, i0, nb, c, g);
        } else {
            fs__value_block(act, np, t, il2, f0);
        }
        if (value) z += fs__net_dot_block(np, vp, f0);
    }
    if (value) *value = z + net->out_bias;
}

/* The rows y_r of a tile of k rows starting at unit i: pointers to the rows
 * of W (additive) or the differences x - c written to ybuf (RBF). */
FS__INLINE void fs__tile_rows(const fs_network *net, const double *x, int i, int k,
                              double *ybuf, const double **y)
{
    const int d = net->dim;
    int r, j;
    for (r = 0; r < k; r++) {
        const double *w = net->W + (size_t)(i + r) * d;
        if (net->activation == FS_NETWORK_RBF) {
            double *yr = ybuf + (size_t)r * d;
            for (j = 0; j < d; j++) yr[j] = x[j] - w[j];
            y[r] = yr;
        } else {
            y[r] = w;
        }
    }
}

/* f[b] = a''(t[b]), b < nb (additive).  Softplus by e = exp(-|t|) alone,
 * a'' = e / (1 + e)^2 (fs__act_block also forms expm1 for the orders that
 * need it); the others by fs__act_block. */
FS__INLINE void fs__act2_block(int act, int nb, const double *t, double *f)
{
#ifdef FS__VEC
    if (act == FS_NETWORK_SOFTPLUS) {
        int b = 0;
        for (; b + 4 <= nb; b += 4) {
            const fs__v4 e = fs__expneg_v(-fs__abs(fs__ld(t + b)));
            const fs__v4 r = 1.0 / (1.0 + e);
            fs__st(f + b, e * r * r);
        }
        for (; b < nb; b++) fs__net_act1(act, t[b], NULL, NULL, f + b, NULL);
        return;
    }
#endif
    fs__act_block(act, nb, t, NULL, NULL, f, NULL);
}

/* Per-unit coefficients over a block:
 *   additive: cf[b] = v_b a^(order)(t_b)   (order 2 or 3)
 *   RBF: cf[b] = v_b a_b, il2[b] = 1 / l_b^2, a_b = exp(-t_b il2[b] / 2). */
FS__INLINE void fs__coef_order(const fs_network *net, int i0, int nb, const double *t,
                               int order, double *cf, double *il2)
{
    int b;
    if (net->activation == FS_NETWORK_RBF) {
        for (b = 0; b < nb; b++) {
            const double ib = net->il2p[i0 + b];
            il2[b] = ib;
            cf[b] = net->v[i0 + b] * fs__exp_s(-0.5 * (t[b] * ib));
        }
    } else {
        double f[FS__B];
        if (order == 2)
            fs__act2_block(net->activation, nb, t, f);
        else
            fs__act_block(net->activation, nb, t, NULL, NULL, NULL, f);
        for (b = 0; b < nb; b++) cf[b] = net->v[i0 + b] * f[b];
    }
}

/* Lower triangle of the Hessian in x coordinates:
 * sum_i cf_i y_i y_i^T (- sum_i v_i a_i / l_i^2 on the diagonal for RBF). */
FS_CLONES
static void fs__hessian_kernel(const fs_network *net, const double *x,
                               double *FS_RESTRICT H, double *FS_RESTRICT ybuf)
{
    const int d = net->dim, s = net->n_hidden, rbf = net->activation == FS_NETWORK_RBF;
    double t[FS__B], cf[FS__B], il2[FS__B];
    double diag = 0.0;
    const double *y[4];
    int i0, i, j, k, r;
    for (j = 0; j < d; j++) memset(H + (size_t)j * d, 0, sizeof(double) * (size_t)(j + 1));
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        fs__pre_block(net, x, i0, nb, t);
        fs__coef_order(net, i0, nb, t, 2, cf, il2);
        if (rbf)  /* v a (y y^T / l^4 - I / l^2) */
            for (i = 0; i < nb; i++) {
                diag += cf[i] * il2[i];
                cf[i] *= il2[i] * il2[i];
            }
        for (i = 0; i < nb; i += 4) {
            const int kk = nb - i < 4 ? nb - i : 4;
            double c4[4] = {0.0, 0.0, 0.0, 0.0};
            fs__tile_rows(net, x, i0 + i, kk, ybuf, y);
            for (r = 0; r < kk; r++) c4[r] = cf[i + r];
            for (r = kk; r < 4; r++) y[r] = y[0];
            for (j = 0; j < d; j++) {
                const double a0 = c4[0] * y[0][j], a1 = c4[1] * y[1][j],
                             a2 = c4[2] * y[2][j], a3 = c4[3] * y[3][j];
                const double *y0 = y[0], *y1 = y[1], *y2 = y[2], *y3 = y[3];
                double *Hj = H + (size_t)j * d;
                for (k = 0; k <= j; k++)
                    Hj[k] += (a0 * y0[k] + a1 * y1[k]) + (a2 * y2[k] + a3 * y3[k]);
            }
        }
    }
    if (rbf)
        for (j = 0; j < d; j++) H[(size_t)j * d + j] -= diag;
}

/* Hessian diagonal in x coordinates. */
FS_CLONES
static void fs__hessian_diag_kernel(const fs_network *net, const double *x,
                                    double *FS_RESTRICT h, double *FS_RESTRICT ybuf)
{
    const int d = net->dim, s = net->n_hidden, rbf = net->activation == FS_NETWORK_RBF;
    double t[FS__B], cf[FS__B], il2[FS__B];
    double diag = 0.0;
    const double *y[4];
    int i0, i, k, r;
    memset(h, 0, sizeof(double) * (size_t)d);
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        fs__pre_block(net, x, i0, nb, t);
        fs__coef_order(net, i0, nb, t, 2, cf, il2);
        if (rbf)
            for (i = 0; i < nb; i++) {
                diag += cf[i] * il2[i];
                cf[i] *= il2[i] * il2[i];
            }
        for (i = 0; i < nb; i += 4) {
            const int kk = nb - i < 4 ? nb - i : 4;
            fs__tile_rows(net, x, i0 + i, kk, ybuf, y);
            for (r = 0; r < kk; r++) {
                const double c = cf[i + r], *yr = y[r];
                for (k = 0; k < d; k++) h[k] += c * (yr[k] * yr[k]);
            }
        }
    }
    if (rbf)
        for (k = 0; k < d; k++) h[k] -= diag;
}

/* Third-derivative contractions in q coordinates (formulas in fs_network.h).
 * A dense (out_tr) and/or u (out_quad), or A = diag(adiag) (out_tr only).
 * work: 4*d (scaled rows y) + 4*d (A y). */
FS_CLONES
static void fs__third_kernel(const fs_network *net, const double *x,
                             const double *A, const double *u, const double *adiag,
                             double *FS_RESTRICT out_tr, double *FS_RESTRICT out_quad,
                             double *FS_RESTRICT work)
{
    const int d = net->dim, s = net->n_hidden, rbf = net->activation == FS_NETWORK_RBF;
    const double *sc = net->inv_scale;
    double t[FS__B], cf[FS__B], il2[FS__B];
    double *Y = work, *Z = work + 4 * (size_t)d;
    double tA = 0.0, uu = 0.0;
    int i0, i, j, k, r;
    if (out_tr) memset(out_tr, 0, sizeof(double) * (size_t)d);
    if (out_quad) memset(out_quad, 0, sizeof(double) * (size_t)d);
    if (rbf) {
        for (j = 0; j < d; j++) {
            const double s2 = sc ? sc[j] * sc[j] : 1.0;
            if (A) tA += s2 * A[(size_t)j * d + j];
            if (adiag) tA += s2 * adiag[j];
            if (u) uu += s2 * (u[j] * u[j]);
        }
    }
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        fs__pre_block(net, x, i0, nb, t);
        fs__coef_order(net, i0, nb, t, 3, cf, il2);
        for (i = 0; i < nb; i += 4) {
            const int kk = nb - i < 4 ? nb - i : 4;
            double p[4] = {0.0, 0.0, 0.0, 0.0};
            /* y_r = inv_scale * w_r (additive) or inv_scale * (x - c_r) (RBF) */
            for (r = 0; r < kk; r++) {
                const double *w = net->W + (size_t)(i0 + i + r) * d;
                double *yr = Y + (size_t)r * d;
                for (j = 0; j < d; j++) {
                    const double a = rbf ? x[j] - w[j] : w[j];
                    yr[j] = sc ? sc[j] * a : a;
                }
            }
            /* p_r = y_r^T A y_r, keeping Z_r = A y_r (A symmetric: row j of A
             * times y_rj summed over j) */
            if (A) {
                memset(Z, 0, sizeof(double) * 4 * (size_t)d);
                for (j = 0; j < d; j++) {
                    const double *Aj = A + (size_t)j * d;
                    for (r = 0; r < kk; r++) {
                        const double b = Y[(size_t)r * d + j];
                        double *Zr = Z + (size_t)r * d;
                        for (k = 0; k < d; k++) Zr[k] += b * Aj[k];
                    }
                }
                for (r = 0; r < kk; r++)
                    for (k = 0; k < d; k++) p[r] += Y[(size_t)r * d + k] * Z[(size_t)r * d + k];
            } else if (adiag) {
                for (r = 0; r < kk; r++)
                    for (k = 0; k < d; k++) {
                        const double yk = Y[(size_t)r * d + k];
                        p[r] += adiag[k] * (yk * yk);
                    }
            }
            for (r = 0; r < kk; r++) {
                const double *yr = Y + (size_t)r * d;
                const double c = cf[i + r];
                double ud = 0.0;
                if (u) for (k = 0; k < d; k++) ud += yr[k] * u[k];
                if (!rbf) {
                    if (out_tr) {
                        const double a = c * p[r];
                        for (k = 0; k < d; k++) out_tr[k] += a * yr[k];
                    }
                    if (out_quad) {
                        const double a = c * (ud * ud);
                        for (k = 0; k < d; k++) out_quad[k] += a * yr[k];
                    }
                } else {
                    const double ib = il2[i + r], ib2 = ib * ib;
                    if (out_tr) {
                        const double a = -c * ib * (p[r] * ib2 - tA * ib), b2 = 2.0 * c * ib2;
                        const double *Zr = Z + (size_t)r * d;
                        for (k = 0; k < d; k++) {
                            const double s2 = sc ? sc[k] * sc[k] : 1.0;
                            const double ay = A ? Zr[k] : adiag[k] * yr[k];
                            out_tr[k] += a * yr[k] + b2 * (s2 * ay);
                        }
                    }
                    if (out_quad) {
                        const double a = -c * ib * ((ud * ud) * ib2 - uu * ib),
                                     b2 = 2.0 * c * ib2 * ud;
                        for (k = 0; k < d; k++) {
                            const double s2 = sc ? sc[k] * sc[k] : 1.0;
                            out_quad[k] += a * yr[k] + b2 * (s2 * u[k]);
                        }
                    }
                }
            }
        }
    }
}

/* x = (q - shift) * inv_scale into buf[0..dim), zeros in buf[dim..ld). */
static void fs__standardise(const fs_network *net, const double *q, double *buf)
{
    int j;
    for (j = 0; j < net->dim; j++) {
        const double a = net->shift ? q[j] - net->shift[j] : q[j];
        buf[j] = net->inv_scale ? a * net->inv_scale[j] : a;
    }
    for (; j < net->ld; j++) buf[j] = 0.0;
}

/* H[p*s + i] = a_i(x_p): outer loop over blocks of hidden rows (kept in L1),
 * inner loop over the points. */
FS_CLONES
static void fs__features_kernel(const fs_network *net, size_t n, const double *Q,
                                double *FS_RESTRICT H, double *FS_RESTRICT xbuf)
{
    const int d = net->dim, s = net->n_hidden, act = net->activation;
    double t[FS__B], f0[FS__B];
    size_t p;
    int i0;
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        const int np = (nb + 3) & ~3;
        for (p = 0; p < n; p++) {
            fs__standardise(net, Q + p * (size_t)d, xbuf);
            fs__pre_block(net, xbuf, i0, nb, t);
            fs__value_block(act, np, t, net->il2p + i0, f0);
            memcpy(H + p * (size_t)s + i0, f0, sizeof(double) * (size_t)nb);
        }
    }
}

/* A[k*s + i] = d a_i / d q_k for one standardised point x. */
FS_CLONES
static void fs__grad_features_kernel(const fs_network *net, const double *x,
                                     double *FS_RESTRICT A)
{
    const int d = net->dim, s = net->n_hidden, act = net->activation;
    const double *sc = net->inv_scale;
    double t[FS__B], c[FS__B], f0[FS__B], ones[FS__B];
    int i0, b, k;
    for (b = 0; b < FS__B; b++) ones[b] = 1.0;
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        const int np = (nb + 3) & ~3;
        const double *Wb = net->W + (size_t)i0 * d;
        fs__pre_block(net, x, i0, nb, t);
        if (act == FS_NETWORK_RBF) {
            /* d a / d x = a (c - x) / l^2 */
            fs__coef_block(act, np, t, ones, net->il2p + i0, c, f0);
            for (k = 0; k < d; k++) {
                double *Ak = A + (size_t)k * s + i0;
                const double sk = sc ? sc[k] : 1.0, xk = x[k];
                for (b = 0; b < nb; b++) Ak[b] = sk * (c[b] * (Wb[(size_t)b * d + k] - xk));
            }
        } else {
            fs__act_block(act, np, t, NULL, c, NULL, NULL);
            for (k = 0; k < d; k++) {
                double *Ak = A + (size_t)k * s + i0;
                const double sk = sc ? sc[k] : 1.0;
                for (b = 0; b < nb; b++) Ak[b] = sk * (c[b] * Wb[(size_t)b * d + k]);
            }
        }
    }
}

/* ======================================================================== */
/* Public API                                                               */
/* ======================================================================== */

size_t fs_network_workspace_size(int dim, int n_hidden)
{
    (void)n_hidden;
    if (dim < 1) dim = 1;
    return 10 * (size_t)dim + 64;
}

int fs_network_init(fs_network *net, int dim, int n_hidden, int activation,
                    const double *W, const double *bias, const double *width,
                    const double *v, double out_bias, const double *shift,
                    const double *inv_scale)
{
    size_t s_pad, nW, i;
    int j, status;
    char *raw;
    if (net == NULL) return FS_EINVAL;
    net->pool.mem = NULL;
    net->own = NULL;
    net->Wp = net->bp = net->il2p = NULL;
    if (dim < 1 || n_hidden < 1 || W == NULL || v == NULL) return FS_EINVAL;
    if (activation < FS_NETWORK_SOFTPLUS || activation > FS_NETWORK_RBF) return FS_EINVAL;
    if (activation == FS_NETWORK_RBF && width == NULL) return FS_EINVAL;
    if (dim > (1 << 28) || (size_t)n_hidden > ((size_t)1 << 40) / (size_t)dim) return FS_EINVAL;
    net->dim = dim;
    net->n_hidden = n_hidden;
    net->activation = activation;
    net->W = W;
    net->bias = activation == FS_NETWORK_RBF ? NULL : bias;
    net->width = activation == FS_NETWORK_RBF ? width : NULL;
    net->v = v;
    net->out_bias = out_bias;
    net->shift = shift;
    net->inv_scale = inv_scale;
    net->ld = (dim + 3) & ~3;
    s_pad = ((size_t)n_hidden + FS__B - 1) / FS__B * FS__B;
    nW = (size_t)n_hidden * (size_t)net->ld;
    raw = (char *)malloc(64 + sizeof(double) * (nW + 2 * s_pad));
    if (raw == NULL) return FS_ENOMEM;
    net->own = raw;
    net->Wp = (double *)(raw + (64 - (uintptr_t)raw % 64));
    net->bp = net->Wp + nW;
    net->il2p = net->bp + s_pad;
    for (i = 0; i < (size_t)n_hidden; i++) {
        double *row = net->Wp + i * (size_t)net->ld;
        memcpy(row, W + i * (size_t)dim, sizeof(double) * (size_t)dim);
        for (j = dim; j < net->ld; j++) row[j] = 0.0;
    }
    for (i = 0; i < s_pad; i++) {
        const int in = i < (size_t)n_hidden;
        net->bp[i] = (in && net->bias) ? net->bias[i] : 0.0;
        net->il2p[i] = (in && net->width) ? 1.0 / (net->width[i] * net->width[i]) : 1.0;
    }
    status = fs_pool_init(&net->pool, fs_network_workspace_size(dim, n_hidden));
    if (status != FS_OK) {
        fs_network_free(net);
        return status;
    }
    return FS_OK;
}

void fs_network_free(fs_network *net)
{
    if (net == NULL) return;
    if (net->pool.mem != NULL) fs_pool_free(&net->pool);
    free(net->own);
    net->own = NULL;
    net->Wp = net->bp = net->il2p = NULL;
}

/* Borrow a pool slot when the caller passed no workspace. */
static double *fs__work(const fs_network *net, double *work)
{
    return work != NULL ? work : fs_pool_take((fs_pool *)&net->pool);
}

static void fs__unwork(const fs_network *net, double *given, double *used)
{
    if (given == NULL) fs_pool_give((fs_pool *)&net->pool, used);
}

static int fs__check(const fs_network *net)
{
    return (net == NULL || net->Wp == NULL || net->v == NULL) ? FS_EINVAL : FS_OK;
}

int fs_network_value_grad(const fs_network *net, const double *q,
                          double *FS_RESTRICT value, double *FS_RESTRICT grad,
                          double *FS_RESTRICT work)
{
    double *w, *g;
    int j;
    if (fs__check(net) != FS_OK || q == NULL) return FS_EINVAL;
    if (value == NULL && grad == NULL) return FS_OK;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    g = w + net->ld;
    fs__standardise(net, q, w);
    fs__value_grad_kernel(net, w, value, grad ? g : NULL);
    if (grad) {
        if (net->inv_scale)
            for (j = 0; j < net->dim; j++) grad[j] = g[j] * net->inv_scale[j];
        else
            memcpy(grad, g, sizeof(double) * (size_t)net->dim);
    }
    fs__unwork(net, work, w);
    return FS_OK;
}

int fs_network_value(const fs_network *net, const double *q,
                     double *FS_RESTRICT value, double *FS_RESTRICT work)
{
    if (value == NULL) return FS_EINVAL;
    return fs_network_value_grad(net, q, value, NULL, work);
}

int fs_network_grad(const fs_network *net, const double *q,
                    double *FS_RESTRICT grad, double *FS_RESTRICT work)
{
    if (grad == NULL) return FS_EINVAL;
    return fs_network_value_grad(net, q, NULL, grad, work);
}

int fs_network_potential_eval(void *state, const double *q, double *value,
                              double *grad)
{
    return fs_network_value_grad((const fs_network *)state, q, value, grad, NULL);
}

int fs_network_hessian(const fs_network *net, const double *q,
                       double *FS_RESTRICT hess, double *FS_RESTRICT work)
{
    const double *sc;
    double *w;
    int d, j, k;
    if (fs__check(net) != FS_OK || q == NULL || hess == NULL) return FS_EINVAL;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    d = net->dim;
    sc = net->inv_scale;
    fs__standardise(net, q, w);
    fs__hessian_kernel(net, w, hess, w + net->ld);
    for (j = 0; j < d; j++)
        for (k = 0; k <= j; k++) {
            double h = hess[(size_t)j * d + k];
            if (sc) h *= sc[j] * sc[k];
            hess[(size_t)j * d + k] = h;
            hess[(size_t)k * d + j] = h;
        }
    fs__unwork(net, work, w);
    return FS_OK;
}

int fs_network_hessian_diag(const fs_network *net, const double *q,
                            double *FS_RESTRICT hdiag, double *FS_RESTRICT work)
{
    double *w;
    int k;
    if (fs__check(net) != FS_OK || q == NULL || hdiag == NULL) return FS_EINVAL;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    fs__standardise(net, q, w);
    fs__hessian_diag_kernel(net, w, hdiag, w + net->ld);
    if (net->inv_scale)
        for (k = 0; k < net->dim; k++) hdiag[k] *= net->inv_scale[k] * net->inv_scale[k];
    fs__unwork(net, work, w);
    return FS_OK;
}

int fs_network_third_contractions(const fs_network *net, const double *q,
                                  const double *A, const double *u,
                                  double *FS_RESTRICT out_tr,
                                  double *FS_RESTRICT out_quad,
                                  double *FS_RESTRICT work)
{
    double *w;
    if (fs__check(net) != FS_OK || q == NULL) return FS_EINVAL;
    if ((out_tr != NULL && A == NULL) || (out_quad != NULL && u == NULL)) return FS_EINVAL;
    if (out_tr == NULL) A = NULL;
    if (out_quad == NULL) u = NULL;
    if (out_tr == NULL && out_quad == NULL) return FS_OK;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    fs__standardise(net, q, w);
    fs__third_kernel(net, w, A, u, NULL, out_tr, out_quad, w + net->ld);
    fs__unwork(net, work, w);
    return FS_OK;
}

int fs_network_third_diag(const fs_network *net, const double *q,
                          const double *a, double *FS_RESTRICT out,
                          double *FS_RESTRICT work)
{
    double *w;
    if (fs__check(net) != FS_OK || q == NULL || a == NULL || out == NULL) return FS_EINVAL;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    fs__standardise(net, q, w);
    fs__third_kernel(net, w, NULL, NULL, a, out, NULL, w + net->ld);
    fs__unwork(net, work, w);
    return FS_OK;
}

/* cf[i] = v_i a^(order)(t_i) over all units (additive networks). */
FS_CLONES
static void fs__unit_coefs_kernel(const fs_network *net, const double *x, int order,
                                  double *FS_RESTRICT cf)
{
    const int s = net->n_hidden;
    double t[FS__B], c[FS__B], il2[FS__B];
    int i0, b;
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        fs__pre_block(net, x, i0, nb, t);
        fs__coef_order(net, i0, nb, t, order, c, il2);
        for (b = 0; b < nb; b++) cf[i0 + b] = c[b];
    }
}

int fs_network_unit_coefs(const fs_network *net, const double *q, int order,
                          double *FS_RESTRICT cf, double *FS_RESTRICT work)
{
    double *w;
    if (fs__check(net) != FS_OK || q == NULL || cf == NULL) return FS_EINVAL;
    if (net->activation == FS_NETWORK_RBF || (order != 2 && order != 3)) return FS_EINVAL;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    fs__standardise(net, q, w);
    fs__unit_coefs_kernel(net, w, order, cf);
    fs__unwork(net, work, w);
    return FS_OK;
}

/* g = H_x vx = sum_i v_i a''(t_i) (w_i . vx) w_i (additive networks, x
   coordinates, g has ld entries), one pass over W by blocks of units: the
   block's pre-activations, its products with vx and its update, all while
   its rows are in L1. */
FS_CLONES
static void fs__hv_kernel(const fs_network *net, const double *x, const double *vx,
                          double *FS_RESTRICT g)
{
    const int s = net->n_hidden, ld = net->ld, act = net->activation;
    double t[FS__B], y[FS__B], f[FS__B], c[FS__B];
    int i0, i;
    memset(g, 0, sizeof(double) * (size_t)ld);
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        const double *Wb = net->Wp + (size_t)i0 * ld;
        fs__pre_block(net, x, i0, nb, t);
        for (i = 0; i + 4 <= nb; i += 4) fs__pre4(Wb + (size_t)i * ld, ld, vx, 0, y + i);
        for (; i < nb; i++) y[i] = fs__pre1(Wb + (size_t)i * ld, ld, vx, 0);
        fs__act2_block(act, nb, t, f);
        for (i = 0; i < nb; i++) c[i] = net->v[i0 + i] * f[i] * y[i];
        fs__acc_block(net, x, i0, nb, c, g);
    }
}

/* A direction or a covector between q and x coordinates: out[j] =
   inv_scale[j] a[j] for j < dim, zeros up to ld.  (x = (q - shift)
   inv_scale, so a direction v in q is inv_scale v in x, and a gradient g in
   x is inv_scale g in q.)  With pad, out has ld entries (zeros after dim). */
static void fs__scale_dir(const fs_network *net, const double *a, double *out, int pad)
{
    const double *sc = net->inv_scale;
    int j;
    for (j = 0; j < net->dim; j++) out[j] = sc ? sc[j] * a[j] : a[j];
    if (pad)
        for (; j < net->ld; j++) out[j] = 0.0;
}

/* g = sum_i cf_i (w_i . ux)^2 w_i (x coordinates, g has ld entries), one
   pass over W by blocks of units. */
FS_CLONES
static void fs__quad_rows_kernel(const fs_network *net, const double *cf, const double *ux,
                                 double *FS_RESTRICT g)
{
    const int s = net->n_hidden, ld = net->ld;
    double y[FS__B];
    int i0, i;
    memset(g, 0, sizeof(double) * (size_t)ld);
    for (i0 = 0; i0 < s; i0 += FS__B) {
        const int nb = s - i0 < FS__B ? s - i0 : FS__B;
        const double *Wb = net->Wp + (size_t)i0 * ld;
        for (i = 0; i + 4 <= nb; i += 4) fs__pre4(Wb + (size_t)i * ld, ld, ux, 0, y + i);
        for (; i < nb; i++) y[i] = fs__pre1(Wb + (size_t)i * ld, ld, ux, 0);
        for (i = 0; i < nb; i++) y[i] = cf[i0 + i] * (y[i] * y[i]);
        fs__acc_block(net, ux, i0, nb, y, g);
    }
}

int fs_network_quad_rows(const fs_network *net, const double *cf, const double *u,
                         double *FS_RESTRICT out, double *FS_RESTRICT work)
{
    double *ux, *g;
    if (fs__check(net) != FS_OK || cf == NULL || u == NULL || out == NULL) return FS_EINVAL;
    if (net->activation == FS_NETWORK_RBF) return FS_EINVAL;
    ux = fs__work(net, work);
    if (ux == NULL) return FS_ENOMEM;
    g = ux + net->ld;
    fs__scale_dir(net, u, ux, 1);
    fs__quad_rows_kernel(net, cf, ux, g);
    fs__scale_dir(net, g, out, 0);
    fs__unwork(net, work, ux);
    return FS_OK;
}

int fs_network_hessian_vector(const fs_network *net, const double *q, const double *v,
                              double *FS_RESTRICT out, double *FS_RESTRICT work)
{
    double *w, *vx, *g;
    if (fs__check(net) != FS_OK || q == NULL || v == NULL || out == NULL) return FS_EINVAL;
    if (net->activation == FS_NETWORK_RBF) return FS_EINVAL;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    vx = w + net->ld;
    g = vx + net->ld;
    fs__standardise(net, q, w);
    fs__scale_dir(net, v, vx, 1);
    fs__hv_kernel(net, w, vx, g);
    fs__scale_dir(net, g, out, 0);
    fs__unwork(net, work, w);
    return FS_OK;
}

int fs_network_features(const fs_network *net, size_t n, const double *Q,
                        double *FS_RESTRICT H, double *FS_RESTRICT work)
{
    double *w;
    if (fs__check(net) != FS_OK || (n > 0 && (Q == NULL || H == NULL))) return FS_EINVAL;
    if (n == 0) return FS_OK;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    fs__features_kernel(net, n, Q, H, w);
    fs__unwork(net, work, w);
    return FS_OK;
}

int fs_network_grad_features(const fs_network *net, const double *q,
                             double *FS_RESTRICT A, double *FS_RESTRICT work)
{
    double *w;
    if (fs__check(net) != FS_OK || q == NULL || A == NULL) return FS_EINVAL;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    fs__standardise(net, q, w);
    fs__grad_features_kernel(net, w, A);
    fs__unwork(net, work, w);
    return FS_OK;
}

int fs_network_grad_features_batch(const fs_network *net, size_t n,
                                   const double *Q, double *FS_RESTRICT out,
                                   double *FS_RESTRICT work)
{
    double *w;
    size_t p, block;
    if (fs__check(net) != FS_OK || (n > 0 && (Q == NULL || out == NULL))) return FS_EINVAL;
    if (n == 0) return FS_OK;
    w = fs__work(net, work);
    if (w == NULL) return FS_ENOMEM;
    block = (size_t)net->dim * (size_t)net->n_hidden;
    for (p = 0; p < n; p++) {
        fs__standardise(net, Q + p * (size_t)net->dim, w);
        fs__grad_features_kernel(net, w, out + p * block);
    }
    fs__unwork(net, work, w);
    return FS_OK;
}

FS_CLONES
static void fs__exp_array(size_t n, const double *x, double *FS_RESTRICT out, int scalar)
{
    size_t i = 0;
#ifdef FS__VEC
    if (!scalar) {
        for (; i + 4 <= n; i += 4) fs__st(out + i, fs__exp_v(fs__ld(x + i)));
        if (i < n) {
            double b[4] = {0.0, 0.0, 0.0, 0.0};
            size_t l;
            for (l = 0; i + l < n; l++) b[l] = x[i + l];
            fs__st(b, fs__exp_v(fs__ld(b)));
            for (l = 0; i + l < n; l++) out[i + l] = b[l];
        }
        return;
    }
#else
    (void)scalar;
#endif
    for (; i < n; i++) out[i] = fs__exp_s(x[i]);
}

int fs_network_exp(size_t n, const double *x, double *FS_RESTRICT out, int scalar)
{
    if (n > 0 && (x == NULL || out == NULL)) return FS_EINVAL;
    fs__exp_array(n, x, out, scalar);
    return FS_OK;
}

int fs_network_activation(int activation, int order, size_t n, const double *t,
                          double *FS_RESTRICT out, int scalar)
{
    size_t i, m;
    if (activation < FS_NETWORK_SOFTPLUS || activation > FS_NETWORK_TANH) return FS_EINVAL;
    if (order < 0 || order > 3 || (n > 0 && (t == NULL || out == NULL))) return FS_EINVAL;
    for (i = 0; i < n; i += m) {
        double *f[4] = {NULL, NULL, NULL, NULL};
        m = n - i < FS__B ? n - i : FS__B;
        f[order] = out + i;
        if (scalar) {
            size_t b;
            for (b = 0; b < m; b++)
                fs__net_act1(activation, t[i + b], f[0] ? f[0] + b : NULL,
                          f[1] ? f[1] + b : NULL, f[2] ? f[2] + b : NULL,
                          f[3] ? f[3] + b : NULL);
        } else {
            fs__act_block(activation, (int)m, t + i, f[0], f[1], f[2], f[3]);
        }
    }
    return FS_OK;
}
