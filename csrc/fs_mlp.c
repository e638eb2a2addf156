/* fs_mlp.c: gradient networks (see fs_mlp.h for the model and the packing).
 *
 * Two kinds of kernels:
 *
 *   Single point (the sampler's hot path, one call per leapfrog step).  The
 *   struct keeps W1 with its rows padded with zeros to ld_in = n_in rounded
 *   up to 4, and each block's hidden units padded to a multiple of 4 (zero
 *   rows of W1, zero bias, zero columns of W2_b), so every loop runs over
 *   whole 4-lane vectors.  Pre-activations: four rows at a time, two partial
 *   sums per row (columns 8k..8k+3 and 8k+4..8k+7), so that the loads of x
 *   are shared and eight independent FMA chains are in flight; the
 *   activations four lanes at a time with our own exp (below); then each
 *   block's outputs the same way against that block's activations.  For
 *   n_in = 50, H = 100 this reads 80 KB of weights (L2-resident) per call.
 *   Measured (AMD EPYC, AVX2 clone, one thread, a shared machine, so
 *   approximate): 1.4 us per call for n_in = 50, H = 100 (softplus; 0.9 us
 *   with relu, so the 100 softplus evaluations cost about 0.45 us), 12.7 us
 *   for 200 inputs in 8 blocks of 50 hidden units (W1 is 640 KB and streams
 *   from L3); NumPy takes 9 us and 35 us from Python.  (The four row sums
 *   by shuffles or by scalar adds: no measurable difference.)
 *
 *   Batched (training): dgemm through the fs_blas table on row blocks of
 *   FS_MLP_ROWS points, data laid out so that no transposition is ever
 *   copied (row-major N x k arrays are read as column-major k x N).
 *
 * Elementwise code uses GNU vector extensions (4 doubles) with a fixed
 * summation order, compiled for several ISAs (target_clones) and picked at
 * load time; compilers without vector extensions run scalar loops with libm.
 */
#include "fs_mlp.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#  if !defined(FS_MLP_NO_FMA)
#    pragma GCC optimize("fp-contract=fast")
#  endif
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs_kernel.h"   /* FS_CLONES (multi-versioning), FS__INLINE */

#if (defined(__GNUC__) || defined(__clang__)) && !defined(FS_MLP_NO_VEC)
#  define FS__VEC 1
#endif

static int fs__round4(int n) { return (n + 3) & ~3; }

/* ======================================================================== */
/* Elementwise activations                                                  */
/* ======================================================================== */
/* Every activation is written through e = exp(-|t|) (tanh: exp(-2|t|)) so
 * that nothing overflows:
 *   softplus(t) = max(t, 0) + log1p(e),  softplus'(t) = 1/(1+e) or e/(1+e)
 *   tanh(|t|)   = -m / (1 + e), m = expm1(-2|t|),  tanh'(t) = 4 e / (1+e)^2
 * exp, expm1 and log1p come from fs_vmath.h (shared with fs_network.c). */
#include "fs_vmath.h"

#ifdef FS__VEC
/* Gradient-MLP activation: a = act(t), da = act'(t) on four lanes (either
 * output may be NULL; callers pass literal NULLs, so the unused half is
 * compiled away). */
FS__INLINE void fs__mlp_act4(int act, fs__v4 t, fs__v4 *a, fs__v4 *da)
{
    const fs__v4 zero = fs__set1(0.0);
    const fs__v4i nan = t != t;
    if (act == FS_MLP_RELU) {
        const fs__v4i pos = t > zero;
        if (a) *a = fs__sel(nan, t, fs__sel(pos, t, zero));
        if (da) *da = fs__sel(nan, t, fs__sel(pos, fs__set1(1.0), zero));
        return;
    }
    {
        const fs__v4i pos = t >= zero;
        const fs__v4 at = fs__abs(t);
        fs__v4 e, m, r;
        if (act == FS_MLP_TANH) {
            fs__exp_expm1_v(-2.0 * at, &e, &m);
            r = 1.0 / (1.0 + e);
            if (a) {
                const fs__v4 tau = -m * r;
                *a = fs__sel(pos, tau, -tau);
            }
            if (da) *da = 4.0 * e * (r * r);
        } else {
            fs__exp_expm1_v(-at, &e, &m);
            if (a) *a = fs__sel(pos, t, zero) + fs__log1p01_v(e);
            if (da) {
                r = 1.0 / (1.0 + e);
                *da = fs__sel(pos, r, e * r);
            }
        }
    }
}
#endif /* FS__VEC */

/* fs__mlp_act4 on one lane (libm), for compilers without vector
 * extensions. */
FS__INLINE void fs__mlp_act1(int act, double t, double *a, double *da)
{
    if (t != t) {
        if (a) *a = t;
        if (da) *da = t;
        return;
    }
    if (act == FS_MLP_RELU) {
        if (a) *a = t > 0.0 ? t : 0.0;
        if (da) *da = t > 0.0 ? 1.0 : 0.0;
    } else if (act == FS_MLP_TANH) {
        const double tau = tanh(t);
        if (a) *a = tau;
        if (da) {
            const double e = exp(-2.0 * fabs(t)), r = 1.0 / (1.0 + e);
            *da = 4.0 * e * r * r;
        }
    } else {
        const double e = exp(-fabs(t));
        if (a) *a = (t > 0.0 ? t : 0.0) + log1p(e);
        if (da) *da = t >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    }
}

/* a[i] = act(t[i]), da[i] = act'(t[i]) for i < n.  t may alias a (the values
 * are read before they are written); either output may be NULL. */
FS_CLONES
static void fs__act_array(int act, size_t n, const double *t, double *a, double *da)
{
    size_t i = 0;
#ifdef FS__VEC
    if (a && da) {
        for (; i + 4 <= n; i += 4) {
            fs__v4 y, dy;
            fs__mlp_act4(act, fs__ld(t + i), &y, &dy);
            fs__st(a + i, y);
            fs__st(da + i, dy);
        }
    } else if (a) {
        for (; i + 4 <= n; i += 4) {
            fs__v4 y;
            fs__mlp_act4(act, fs__ld(t + i), &y, NULL);
            fs__st(a + i, y);
        }
    } else if (da) {
        for (; i + 4 <= n; i += 4) {
            fs__v4 dy;
            fs__mlp_act4(act, fs__ld(t + i), NULL, &dy);
            fs__st(da + i, dy);
        }
    }
    if (i < n) {
        double tb[4] = {0.0, 0.0, 0.0, 0.0}, ya[4], yd[4];
        fs__v4 y, dy;
        size_t l;
        for (l = 0; i + l < n; l++) tb[l] = t[i + l];
        fs__mlp_act4(act, fs__ld(tb), &y, &dy);
        fs__st(ya, y);
        fs__st(yd, dy);
        for (l = 0; i + l < n; l++) {
            if (a) a[i + l] = ya[l];
            if (da) da[i + l] = yd[l];
        }
    }
#else
    for (; i < n; i++) {
        double y, dy;
        fs__mlp_act1(act, t[i], &y, &dy);
        if (a) a[i] = y;
        if (da) da[i] = dy;
    }
#endif
}

/* ======================================================================== */
/* Single-point kernel                                                      */
/* ======================================================================== */

/* fs__dot4 / fs__dot1 (dot products of padded rows) are in fs_vmath.h. */

/* raw = W2 act(W1 x + b1) + b2 for one standardised point x (padded to
 * ld_in with zeros); h receives the n_hidden_pad activations. */
FS_CLONES
static void fs__forward_kernel(const fs_mlp *net, const double *x,
                               double *FS_RESTRICT h, double *FS_RESTRICT raw)
{
    const int ld = net->ld_in, hp = net->n_hidden_pad;
    const double *b2 = net->theta + (net->n_params - (size_t)net->n_out);
    int i, b;
    for (i = 0; i < hp; i += 4) fs__dot4(net->W1p + (size_t)i * ld, ld, x, h + i);
#ifdef FS__VEC
    for (i = 0; i < hp; i += 4) {
        fs__v4 y;
        fs__mlp_act4(net->activation, fs__ld(h + i) + fs__ld(net->b1p + i), &y, NULL);
        fs__st(h + i, y);
    }
#else
    for (i = 0; i < hp; i++) fs__mlp_act1(net->activation, h[i] + net->b1p[i], h + i, NULL);
#endif
    for (b = 0; b < net->n_blocks; b++) {
        const int mb = net->block_out[b], o = net->out_off[b];
        const int ldh = net->hid_pad_off[b + 1] - net->hid_pad_off[b];
        const double *Wb = net->W2p + net->w2p_off[b];
        const double *hb = h + net->hid_pad_off[b];
        int k = 0;
        for (; k + 4 <= mb; k += 4) fs__dot4(Wb + (size_t)k * ldh, ldh, hb, raw + o + k);
        for (; k < mb; k++) raw[o + k] = fs__dot1(Wb + (size_t)k * ldh, ldh, hb);
    }
    for (i = 0; i < net->n_out; i++) raw[i] += b2[i];
}

/* ======================================================================== */
/* Setup                                                                    */
/* ======================================================================== */

size_t fs_mlp_n_params(int n_in, int n_blocks, const int *block_hidden,
                       const int *block_out)
{
    size_t H = 0, m = 0, w2 = 0;
    int b;
    if (n_in < 1 || n_blocks < 1 || block_hidden == NULL || block_out == NULL) return 0;
    for (b = 0; b < n_blocks; b++) {
        if (block_hidden[b] < 1 || block_out[b] < 1) return 0;
        H += (size_t)block_hidden[b];
        m += (size_t)block_out[b];
        w2 += (size_t)block_out[b] * (size_t)block_hidden[b];
    }
    if (H > (1u << 28) || m > (1u << 28) || (size_t)n_in > (1u << 28)) return 0;
    if (H * (size_t)n_in > ((size_t)1 << 40) || w2 > ((size_t)1 << 40)) return 0;
    return H * (size_t)n_in + H + w2 + m;
}

/* Bump allocation in one block: every array starts on a 64-byte boundary. */
static size_t fs__take(size_t *off, size_t bytes)
{
    const size_t start = (*off + 63) & ~(size_t)63;
    *off = start + bytes;
    return start;
}

/* Rebuild the padded copies W1p, b1p, W2p from net->theta. */
static void fs__repack(fs_mlp *net)
{
    const int d = net->n_in, ld = net->ld_in;
    const double *W1 = net->theta, *b1 = W1 + (size_t)net->n_hidden * d;
    const double *W2 = b1 + net->n_hidden;
    int b, i, k;
    memset(net->W1p, 0, sizeof(double) * (size_t)net->n_hidden_pad * ld);
    memset(net->b1p, 0, sizeof(double) * (size_t)net->n_hidden_pad);
    for (b = 0; b < net->n_blocks; b++) {
        const int hb = net->block_hidden[b], mb = net->block_out[b];
        const int c = net->hid_off[b], cp = net->hid_pad_off[b];
        const int ldh = net->hid_pad_off[b + 1] - cp;
        double *Wb = net->W2p + net->w2p_off[b];
        for (i = 0; i < hb; i++) {
            memcpy(net->W1p + (size_t)(cp + i) * ld, W1 + (size_t)(c + i) * d,
                   sizeof(double) * (size_t)d);
            net->b1p[cp + i] = b1[c + i];
        }
        for (k = 0; k < mb; k++) {
            memcpy(Wb + (size_t)k * ldh, W2 + (size_t)k * hb, sizeof(double) * (size_t)hb);
            for (i = hb; i < ldh; i++) Wb[(size_t)k * ldh + i] = 0.0;
        }
        W2 += (size_t)mb * hb;
    }
}

int fs_mlp_init(fs_mlp *net, const fs_blas *blas, int n_in, int n_blocks,
                const int *block_hidden, const int *block_out, int activation,
                const double *theta, const double *in_shift,
                const double *in_scale, const double *out_shift,
                const double *out_scale)
{
    size_t np, off = 0, o_bh, o_bo, o_ho, o_hpo, o_oo, o_w2o, o_th, o_is, o_iv, o_os,
           o_osc, o_W1p, o_b1p, o_W2p, w2p = 0;
    int b, j, H = 0, Hp = 0, m = 0, status;
    char *raw, *base;
    int *bh, *bo, *ho, *hpo, *oo;
    if (net == NULL) return FS_EINVAL;
    memset(net, 0, sizeof *net);
    if (blas == NULL || blas->dgemm == NULL) return FS_EINVAL;
    if (activation < FS_MLP_SOFTPLUS || activation > FS_MLP_RELU) return FS_EINVAL;
    np = fs_mlp_n_params(n_in, n_blocks, block_hidden, block_out);
    if (np == 0) return FS_EINVAL;
    for (b = 0; b < n_blocks; b++) {
        H += block_hidden[b];
        Hp += fs__round4(block_hidden[b]);
        m += block_out[b];
        w2p += (size_t)block_out[b] * (size_t)fs__round4(block_hidden[b]);
    }
    if (in_scale)
        for (j = 0; j < n_in; j++)
            if (!(in_scale[j] > 0.0)) return FS_EINVAL;
    if (out_scale)
        for (j = 0; j < m; j++)
            if (!(out_scale[j] > 0.0)) return FS_EINVAL;
    net->n_in = n_in;
    net->n_out = m;
    net->n_blocks = n_blocks;
    net->n_hidden = H;
    net->n_hidden_pad = Hp;
    net->activation = activation;
    net->n_params = np;
    net->blas = blas;
    net->ld_in = fs__round4(n_in);
    net->rows = FS_MLP_ROWS;

    o_bh = fs__take(&off, sizeof(int) * (size_t)n_blocks);
    o_bo = fs__take(&off, sizeof(int) * (size_t)n_blocks);
    o_ho = fs__take(&off, sizeof(int) * ((size_t)n_blocks + 1));
    o_hpo = fs__take(&off, sizeof(int) * ((size_t)n_blocks + 1));
    o_oo = fs__take(&off, sizeof(int) * ((size_t)n_blocks + 1));
    o_w2o = fs__take(&off, sizeof(size_t) * (size_t)n_blocks);
    o_th = fs__take(&off, sizeof(double) * np);
    o_is = fs__take(&off, sizeof(double) * (size_t)n_in);
    o_iv = fs__take(&off, sizeof(double) * (size_t)n_in);
    o_os = fs__take(&off, sizeof(double) * (size_t)m);
    o_osc = fs__take(&off, sizeof(double) * (size_t)m);
    o_W1p = fs__take(&off, sizeof(double) * (size_t)Hp * (size_t)net->ld_in);
    o_b1p = fs__take(&off, sizeof(double) * (size_t)Hp);
    o_W2p = fs__take(&off, sizeof(double) * w2p);
    raw = (char *)malloc(off + 64);
    if (raw == NULL) return FS_ENOMEM;
    net->own = raw;
    base = raw + (64 - (uintptr_t)raw % 64);

    bh = (int *)(base + o_bh);
    bo = (int *)(base + o_bo);
    ho = (int *)(base + o_ho);
    hpo = (int *)(base + o_hpo);
    oo = (int *)(base + o_oo);
    net->w2p_off = (size_t *)(base + o_w2o);
    ho[0] = hpo[0] = oo[0] = 0;
    w2p = 0;
    for (b = 0; b < n_blocks; b++) {
        bh[b] = block_hidden[b];
        bo[b] = block_out[b];
        ho[b + 1] = ho[b] + bh[b];
        hpo[b + 1] = hpo[b] + fs__round4(bh[b]);
        oo[b + 1] = oo[b] + bo[b];
        net->w2p_off[b] = w2p;
        w2p += (size_t)bo[b] * (size_t)fs__round4(bh[b]);
    }
    net->block_hidden = bh;
    net->block_out = bo;
    net->hid_off = ho;
    net->hid_pad_off = hpo;
    net->out_off = oo;
    {
        double *th = (double *)(base + o_th), *is = (double *)(base + o_is),
               *iv = (double *)(base + o_iv), *os = (double *)(base + o_os),
               *osc = (double *)(base + o_osc);
        if (theta) memcpy(th, theta, sizeof(double) * np);
        else memset(th, 0, sizeof(double) * np);
        for (j = 0; j < n_in; j++) {
            is[j] = in_shift ? in_shift[j] : 0.0;
            iv[j] = in_scale ? 1.0 / in_scale[j] : 1.0;
        }
        for (j = 0; j < m; j++) {
            os[j] = out_shift ? out_shift[j] : 0.0;
            osc[j] = out_scale ? out_scale[j] : 1.0;
        }
        net->theta = th;
        net->in_shift = is;
        net->in_inv_scale = iv;
        net->out_shift = os;
        net->out_scale = osc;
    }
    net->W1p = (double *)(base + o_W1p);
    net->b1p = (double *)(base + o_b1p);
    net->W2p = (double *)(base + o_W2p);
    fs__repack(net);
    status = fs_pool_init(&net->pool, fs_mlp_workspace_size(net));
    if (status != FS_OK) {
        fs_mlp_free(net);
        return status;
    }
    return FS_OK;
}

void fs_mlp_free(fs_mlp *net)
{
    if (net == NULL) return;
    if (net->pool.mem != NULL) fs_pool_free(&net->pool);
    free(net->own);
    net->own = NULL;
    net->theta = NULL;
    net->W1p = net->b1p = net->W2p = NULL;
}

static int fs__check(const fs_mlp *net)
{
    return (net == NULL || net->own == NULL || net->pool.mem == NULL) ? FS_EINVAL : FS_OK;
}

int fs_mlp_set_params(fs_mlp *net, const double *theta)
{
    if (fs__check(net) != FS_OK || theta == NULL) return FS_EINVAL;
    memcpy((double *)net->theta, theta, sizeof(double) * net->n_params);
    fs__repack(net);
    return FS_OK;
}

/* ======================================================================== */
/* Single point                                                             */
/* ======================================================================== */

size_t fs_mlp_workspace_size(const fs_mlp *net)
{
    if (net == NULL) return 0;
    return (size_t)net->ld_in + (size_t)net->n_hidden_pad + (size_t)net->n_out + 8;
}

int fs_mlp_forward(const fs_mlp *net, const double *q, double *FS_RESTRICT g,
                   double *FS_RESTRICT work)
{
    double *w, *x, *h, *raw;
    int j;
    if (fs__check(net) != FS_OK || q == NULL || g == NULL) return FS_EINVAL;
    w = work != NULL ? work : fs_pool_take((fs_pool *)&net->pool);
    if (w == NULL) return FS_ENOMEM;
    x = w;
    h = x + net->ld_in;
    raw = h + net->n_hidden_pad;
    for (j = 0; j < net->n_in; j++) x[j] = (q[j] - net->in_shift[j]) * net->in_inv_scale[j];
    for (; j < net->ld_in; j++) x[j] = 0.0;
    fs__forward_kernel(net, x, h, raw);
    for (j = 0; j < net->n_out; j++) g[j] = net->out_scale[j] * raw[j] + net->out_shift[j];
    if (work == NULL) fs_pool_give((fs_pool *)&net->pool, w);
    return FS_OK;
}

int fs_mlp_potential_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_mlp *net = (const fs_mlp *)state;
    if (fs__check(net) != FS_OK || net->n_in != net->n_out) return FS_EINVAL;
    if (grad != NULL) {
        const int status = fs_mlp_forward(net, q, grad, NULL);
        if (status != FS_OK) return status;
    }
    if (value != NULL) {
        *value = NAN;
        return FS_EUNDEFINED;
    }
    return FS_OK;
}

/* ======================================================================== */
/* Batched                                                                  */
/* ======================================================================== */

static const double fs__one = 1.0, fs__zero = 0.0;

/* Rows per block for n points (the workspace layout depends on it only). */
static size_t fs__rows(const fs_mlp *net, size_t n) { return n < (size_t)net->rows ? (n > 0 ? n : 1) : (size_t)net->rows; }

size_t fs_mlp_batch_workspace_size(const fs_mlp *net, size_t n)
{
    if (net == NULL) return 0;
    return fs__rows(net, n) *
           (2 * (size_t)net->n_hidden + (size_t)net->n_out + (size_t)net->n_in);
}

/* Xs[p] = (X[p] - in_shift) * in_inv_scale for nb rows. */
static void fs__standardise_rows(const fs_mlp *net, int nb, const double *X, double *Xs)
{
    const int d = net->n_in;
    int p, j;
    for (p = 0; p < nb; p++) {
        const double *xr = X + (size_t)p * d;
        double *o = Xs + (size_t)p * d;
        for (j = 0; j < d; j++) o[j] = (xr[j] - net->in_shift[j]) * net->in_inv_scale[j];
    }
}

/* A (col-major H x nb) = W1 X^T + b1 for nb standardised rows X (ld n_in). */
static void fs__layer1(const fs_mlp *net, const double *W1, const double *b1, int nb,
                       const double *X, double *A)
{
    const int d = net->n_in, H = net->n_hidden;
    int p;
    for (p = 0; p < nb; p++) memcpy(A + (size_t)p * H, b1, sizeof(double) * (size_t)H);
    net->blas->dgemm("T", "N", &H, &nb, &d, &fs__one, W1, &d, X, &d, &fs__one, A, &H);
}

/* Out (col-major n_out x nb, ld n_out) += blockdiag(W2) A, block by block. */
static void fs__layer2(const fs_mlp *net, const double *W2, int nb, const double *A,
                       double *Out)
{
    const int H = net->n_hidden, m = net->n_out;
    int b;
    for (b = 0; b < net->n_blocks; b++) {
        const int hb = net->block_hidden[b], mb = net->block_out[b];
        net->blas->dgemm("T", "N", &mb, &nb, &hb, &fs__one, W2, &hb, A + net->hid_off[b],
                         &H, &fs__one, Out + net->out_off[b], &m);
        W2 += (size_t)mb * hb;
    }
}

int fs_mlp_forward_batch(const fs_mlp *net, size_t n, const double *Q,
                         double *FS_RESTRICT G, double *FS_RESTRICT work)
{
    const int d = net ? net->n_in : 0, H = net ? net->n_hidden : 0, m = net ? net->n_out : 0;
    const double *W1, *b1, *W2, *b2;
    double *Xs, *A;
    size_t p0;
    int p, k;
    if (fs__check(net) != FS_OK || (n > 0 && (Q == NULL || G == NULL || work == NULL)))
        return FS_EINVAL;
    W1 = net->theta;
    b1 = W1 + (size_t)H * d;
    W2 = b1 + H;
    b2 = net->theta + (net->n_params - (size_t)m);
    Xs = work;
    A = Xs + fs__rows(net, n) * d;
    for (p0 = 0; p0 < n; p0 += (size_t)net->rows) {
        const int nb = (int)(n - p0 < (size_t)net->rows ? n - p0 : (size_t)net->rows);
        double *Gb = G + p0 * (size_t)m;
        fs__standardise_rows(net, nb, Q + p0 * (size_t)d, Xs);
        fs__layer1(net, W1, b1, nb, Xs, A);
        fs__act_array(net->activation, (size_t)nb * H, A, A, NULL);
        for (p = 0; p < nb; p++) memcpy(Gb + (size_t)p * m, b2, sizeof(double) * (size_t)m);
        fs__layer2(net, W2, nb, A, Gb);
        for (p = 0; p < nb; p++) {
            double *g = Gb + (size_t)p * m;
            for (k = 0; k < m; k++) g[k] = net->out_scale[k] * g[k] + net->out_shift[k];
        }
    }
    return FS_OK;
}

int fs_mlp_loss_grad(const fs_mlp *net, const double *theta, size_t n,
                     const double *X, const double *Y, double weight_decay,
                     int standardise, double *FS_RESTRICT loss,
                     double *FS_RESTRICT grad, double *FS_RESTRICT work)
{
    const int d = net ? net->n_in : 0, H = net ? net->n_hidden : 0, m = net ? net->n_out : 0;
    const double *W1, *b1, *W2, *b2;
    double *gW1 = NULL, *gb1 = NULL, *gW2 = NULL, *gb2 = NULL;
    double *Xs, *A, *Ap, *R, sse = 0.0, reg = 0.0;
    size_t p0, i, nw1, nw2;
    int p, k, b;
    if (fs__check(net) != FS_OK || theta == NULL || X == NULL || Y == NULL ||
        loss == NULL || work == NULL || n == 0)
        return FS_EINVAL;
    if (!(weight_decay >= 0.0)) return FS_EINVAL;
    W1 = theta;
    b1 = W1 + (size_t)H * d;
    W2 = b1 + H;
    b2 = theta + (net->n_params - (size_t)m);
    nw1 = (size_t)H * d;
    nw2 = net->n_params - nw1 - (size_t)H - (size_t)m;
    Xs = work;
    A = Xs + fs__rows(net, n) * d;
    Ap = A + fs__rows(net, n) * H;
    R = Ap + fs__rows(net, n) * H;
    if (grad) {
        memset(grad, 0, sizeof(double) * net->n_params);
        gW1 = grad;
        gb1 = gW1 + nw1;
        gW2 = gb1 + H;
        gb2 = grad + (net->n_params - (size_t)m);
    }
    for (p0 = 0; p0 < n; p0 += (size_t)net->rows) {
        const int nb = (int)(n - p0 < (size_t)net->rows ? n - p0 : (size_t)net->rows);
        const double *xb, *yb = Y + p0 * (size_t)m;
        if (standardise) {
            fs__standardise_rows(net, nb, X + p0 * (size_t)d, Xs);
            xb = Xs;
        } else {
            xb = X + p0 * (size_t)d;
        }
        /* forward: A = act(Z), Ap = act'(Z) */
        fs__layer1(net, W1, b1, nb, xb, A);
        fs__act_array(net->activation, (size_t)nb * H, A, A, grad ? Ap : NULL);
        /* residual R = W2 A + b2 - T */
        for (p = 0; p < nb; p++) {
            const double *y = yb + (size_t)p * m;
            double *r = R + (size_t)p * m;
            if (standardise)
                for (k = 0; k < m; k++) r[k] = b2[k] - (y[k] - net->out_shift[k]) / net->out_scale[k];
            else
                for (k = 0; k < m; k++) r[k] = b2[k] - y[k];
        }
        fs__layer2(net, W2, nb, A, R);
        for (i = 0; i < (size_t)nb * m; i++) sse += R[i] * R[i];
        if (!grad) continue;
        /* backward */
        for (p = 0; p < nb; p++) {
            const double *r = R + (size_t)p * m;
            for (k = 0; k < m; k++) gb2[k] += r[k];
        }
        {
            const double *W2b = W2;
            double *gW2b = gW2;
            for (b = 0; b < net->n_blocks; b++) {
                const int hb = net->block_hidden[b], mb = net->block_out[b];
                double *Ab = A + net->hid_off[b];
                const double *Rb = R + net->out_off[b];
                /* gW2_b += A_b R_b^T, then D_b = W2_b^T R_b over A_b */
                net->blas->dgemm("N", "T", &hb, &mb, &nb, &fs__one, Ab, &H, Rb, &m,
                                 &fs__one, gW2b, &hb);
                net->blas->dgemm("N", "N", &hb, &nb, &mb, &fs__one, W2b, &hb, Rb, &m,
                                 &fs__zero, Ab, &H);
                W2b += (size_t)mb * hb;
                gW2b += (size_t)mb * hb;
            }
        }
        for (i = 0; i < (size_t)nb * H; i++) A[i] *= Ap[i];
        for (p = 0; p < nb; p++) {
            const double *dr = A + (size_t)p * H;
            for (k = 0; k < H; k++) gb1[k] += dr[k];
        }
        net->blas->dgemm("N", "T", &d, &H, &nb, &fs__one, xb, &d, A, &H, &fs__one, gW1, &d);
    }
    for (i = 0; i < nw1; i++) reg += W1[i] * W1[i];
    for (i = 0; i < nw2; i++) reg += W2[i] * W2[i];
    *loss = 0.5 * sse / (double)n + 0.5 * weight_decay * reg;
    if (grad) {
        const double inv_n = 1.0 / (double)n;
        for (i = 0; i < net->n_params; i++) grad[i] *= inv_n;
        if (weight_decay > 0.0) {
            for (i = 0; i < nw1; i++) gW1[i] += weight_decay * W1[i];
            for (i = 0; i < nw2; i++) gW2[i] += weight_decay * W2[i];
        }
    }
    return FS_OK;
}

int fs_mlp_activation(int activation, size_t n, const double *t,
                      double *FS_RESTRICT a, double *FS_RESTRICT da)
{
    if (activation < FS_MLP_SOFTPLUS || activation > FS_MLP_RELU) return FS_EINVAL;
    if (n > 0 && t == NULL) return FS_EINVAL;
    fs__act_array(activation, n, t, a, da);
    return FS_OK;
}
