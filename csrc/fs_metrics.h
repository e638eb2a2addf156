/* fs_metrics.h: metrics (fs_metric.h) for Riemannian-manifold HMC.
 *
 * GLM Fisher metric (Girolami & Calderhead 2011, section 7; RNS-HMC paper
 * section 2.2):  G(b) = X^T W(Xb) X + P,  P = diag(prior precision),
 *   dG/db_k = X^T diag(w'(t) X[:, k]) X,  t = X b, so that
 *   tr(G^{-1} dG_k) = sum_n w'(t_n) X_nk h_n,   h_n = x_n^T G^{-1} x_n
 *   u^T dG_k u      = sum_n w'(t_n) X_nk (x_n . u)^2
 * Each is one pass over X (tr: a dgemm per block of rows, the d^2 per row
 * that h_n costs); both together share the pass.  w'(t_n) is cached for the
 * last position contracted at: the fixed-point iterations of eq. 7 contract
 * quad at one q many times, each then one pass of 2 d flops per row.
 *
 * Network SoftAbs metric (Betancourt 2013) of a random-basis network's
 * Hessian H (RNS-HMC paper section 3.4): H = Q diag(l) Q^T,
 *   G = Q diag(f(l)) Q^T,  f(l) = l coth(alpha l)  (-> |l|, f(0) = 1/alpha)
 *   dG_k = Q (J o (Q^T dH_k Q)) Q^T,  J_ij = (f_i - f_j) / (l_i - l_j), J_ii = f'(l_i)
 * (Daleckii-Krein), hence with the network's contractions tr(A dH_k):
 *   tr(G^{-1} dG_k) = tr(A dH_k),  A = Q diag(f'/f) Q^T
 *   u^T dG_k u      = tr(B dH_k),  B = Q (J o a a^T) Q^T,  a = Q^T u.
 * For an additive network dH_k = sum_i c_i w~_ik w~_i w~_i^T (c_i = v_i a'''),
 * so with y_i = Q^T w~_i (one dgemm per position, O(s d^2)):
 *   tr(G^{-1} dG_k) = sum_i c_i w~_ik sum_j (f'_j / f_j) y_ij^2
 *   u^T dG_k u      = sum_i c_i w~_ik [ (a . y_i)^2 + b_i^T (J - 1) b_i ],
 *                     b_i = a o y_i.
 * J - 1 vanishes exactly between eigenvalues where SoftAbs is exactly |l|
 * (f = l, f' = 1 in floating point: alpha l > ~20), so its rows are only
 * those of the m other eigenvalues and the second term costs O(s d m):
 * O(s d) per fixed-point iterate of eq. 7 at a well-fitted posterior mode,
 * where the old route (B dense, then tr(B dH_k)) cost O(s d^2 + d^3).
 * Where a Cholesky factor of H - (20 / alpha) I exists, every eigenvalue has
 * alpha l > 20, where SoftAbs is l to below rounding: l coth(alpha l) - l <
 * 2 l e^-40 (1e-17 relative; fs_softabs returns l itself, tanh being 1.0
 * in double) and |f'(l) - 1| < 4e-16.  There G = H itself, J = 1, and no
 * eigendecomposition is needed: G is H, tr(G^-1 dG_k)
 * = sum_i c_i w~_ik w~_i^T G^-1 w~_i (one triangular product per position,
 * |R^T w~_i|^2 with the caller's Ginv = R R^T; |L^-1 w~_i|^2 with H = L L^T
 * when Ginv has no Cholesky factor), and
 * u^T dG_k u = sum_i c_i w~_ik (w~_i . u)^2.  Both routes compute the same G
 * there (up to rounding); which one runs is a deterministic function of q.
 * Diagonal variant (non-convex U, the paper's PDE example): G = diag(f(h)),
 * h = diag H, with fs_network_third_diag.
 * SoftAbs rather than eigenvalue clipping: clipping has a kink, so G would
 * not be differentiable where an eigenvalue crosses the threshold and the
 * generalized leapfrog's dG terms would jump; SoftAbs is smooth everywhere.
 */
#ifndef FS_METRICS_H
#define FS_METRICS_H

#include "fs_common.h"
#include "fs_metric.h"
#include "fs_glm.h"
#include "fs_network.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows per block of the GLM metric's passes over X (one dsyrk per block for
   G, one dtrmm for the leverages of the contraction). */
#define FS_GLM_METRIC_BLOCK 256

typedef struct fs_glm_metric {
    const fs_glm *model;      /* borrowed */
    const fs_blas *blas;      /* borrowed: dgemm, dsyrk, dtrmm, dpotrf */
    int n_chunks;
    size_t chunk_rows;
    double *fpart;            /* owned (all below are in one allocation): n_chunks * d * d */
    double *partials;         /* n_chunks * 2 d */
    double *ybuf;             /* n_chunks * (FS_GLM_METRIC_BLOCK * (d + 3)) */
    double *dw;               /* n: w'(x_n . cq), valid when have_dw */
    double *cq;               /* d: the position dw belongs to */
    double *rfac;             /* d*d: the Cholesky factor of Ginv (contract) */
    int have_dw;
    void *own;
} fs_glm_metric;

/* Allocates the workspaces.  FS_EINVAL / FS_ENOMEM. */
int fs_glm_metric_init(fs_glm_metric *s, const fs_glm *model, const fs_blas *blas);
void fs_glm_metric_free(fs_glm_metric *s);
/* fs_metric_eval_fn / fs_metric_contract_fn with state = fs_glm_metric*.
 * eval: G = X^T W X + prior precision, W the weights of fs_glm_fisher, by
 * dsyrk on row blocks scaled by sqrt(w) (fs_glm_fisher's result to rounding;
 * fixed chunks in chunk order: the same bits for any thread count).
 * contract: tr[k] = sum_n w'_n x_nk h_n with the leverages h_n = x_n^T Ginv
 * x_n (by triangular products with the Cholesky factor of Ginv), quad[k] =
 * sum_n w'_n x_nk (x_n . u)^2; one pass over X.  w'_n is cached between
 * calls at the same q. */
int fs_glm_metric_eval(void *state, const double *q, double *G);
int fs_glm_metric_contract(void *state, const double *q, const double *Ginv,
                           const double *u, double *tr, double *quad);
/* fs_metric_matvec_fn: out = G(q) v = X^T (w(Xq) o X v) + P v, one pass over X
 * (fixed chunks summed in chunk order: the same bits for any thread count).
 * The position update (RNS-HMC paper eq. 8) needs G(q')^{-1} p at each
 * iterate q'; fs_rmhmc solves it with this product (fs_rmhmc.h). */
int fs_glm_metric_matvec(void *state, const double *q, const double *v, double *out);
typedef struct fs_network_metric {
    const fs_network *net;    /* borrowed */
    const fs_blas *blas;      /* borrowed: dsyev */
    int diagonal;
    double alpha;
    int have;                 /* cache valid for cq */
    int lwork;
    double *cq, *lam, *V, *f, *fp, *A, *T, *net_work, *syev_work;   /* V: H when sat */
    void *own;
    /* Dense SoftAbs of an additive network (the contraction path below):
     * the rows w~_i = inv_scale * w_i in the eigenbasis, computed once per
     * position by one dgemm, make tr(G^-1 dG_k) O(s d) and u^T dG_k u
     * O(s d (1 + m)), m = the eigenvalues where SoftAbs is not exactly |l|. */
    int fast;
    int sat;                  /* at cq: every alpha l > 20, so G = H (fs_metrics.h) */
    int have_basis;           /* c3 (and Yv, Ew, unsat unless sat) valid for cq */
    double *Lc;               /* dim x dim: Cholesky factor of H (when sat) */
    int n_unsat;
    double *Y;                /* n_hidden x dim, row-major: w~_i */
    double *Yv;               /* n_hidden x dim, row-major: Q^T w~_i */
    double *c3;               /* n_hidden: v_i a'''(t_i) at cq */
    double *pv;               /* n_hidden */
    double *Ew;               /* n_unsat x dim, column-major: (J - 1) rows, weighted */
    double *R;                /* n_unsat x dim, column-major; saturated: the factor of Ginv */
    double *Tm;               /* n_unsat x n_hidden, column-major */
    int *unsat;               /* dim */
    void *own_fast;
    /* A constant symmetric matrix added to the network's Hessian before the
     * SoftAbs map (NULL: none): the precision of a Gaussian base U0 when the
     * leapfrog is driven by z + U0 (fs_network_metric_set_offset). */
    double *offset;           /* dim x dim, owned */
} fs_network_metric;

int fs_network_metric_init(fs_network_metric *s, const fs_network *net, const fs_blas *blas,
                           int diagonal, double alpha);
void fs_network_metric_free(fs_network_metric *s);
/* G = SoftAbs(H_z(q) + P) with P (dim x dim, symmetric; copied) constant, so
 * dG/dq_k comes from H_z alone and every contraction below is unchanged;
 * P = NULL removes it.  FS_EINVAL when P is not finite. */
int fs_network_metric_set_offset(fs_network_metric *s, const double *P);
int fs_network_metric_eval(void *state, const double *q, double *G);
/* The product of the saturated route, H(q) v = sum_i c2_i w~_i (w~_i . v)
 * (O(s d), no Hessian): G(q) v wherever G = H (fs_network_metric_matvec_exact
 * after eval at q says whether q is such a point).  Only with `fast`. */
int fs_network_metric_matvec(void *state, const double *q, const double *v, double *out);
int fs_network_metric_matvec_exact(void *state, const double *q);
int fs_network_metric_contract(void *state, const double *q, const double *Ginv,
                               const double *u, double *tr, double *quad);
/* f(l) = l coth(alpha l) and f'(l), accurate for every l (series near 0). */
void fs_softabs(double l, double alpha, double *FS_RESTRICT f, double *FS_RESTRICT fp);

#ifdef __cplusplus
}
#endif
#endif /* FS_METRICS_H */
