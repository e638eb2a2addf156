/* fs_network.h: random-basis networks (one hidden layer, fixed random
 * hidden weights, trained output weights) as surrogate potentials.
 *
 * Zhang, Shahbaba & Zhao (2017), "Hamiltonian Monte Carlo acceleration using
 * surrogate functions with random bases", eq. 12:
 *
 *     z(q) = sum_i v_i a_i(x) + b,        x = (q - shift) * inv_scale
 *
 * (elementwise standardisation; shift and inv_scale may be NULL, meaning 0
 * and 1).  Two kinds of hidden nodes:
 *
 *   additive  a_i(x) = a(w_i . x + d_i),  a in {softplus, sigmoid, tanh}
 *   RBF       a_i(x) = exp(-||x - c_i||^2 / (2 l_i^2))
 *
 * For RBF nodes the rows of W are the centres c_i, `width` holds the l_i and
 * there is no bias.  Every derivative below is taken with respect to q
 * (the chain rule through the standardisation is applied inside).
 *
 * Memory: the struct borrows every array (the caller keeps them alive and
 * unchanged, except the output weights v, which the caller may overwrite
 * between calls, e.g. after retraining).  fs_network_init also makes an
 * aligned copy of W with rows padded to a multiple of 4 doubles (the hot
 * loops then need no remainder code and no load crosses a cache line), of
 * the biases and of 1 / width^2, and allocates the scratch pool used by
 * thread-safe evaluation: changing W, bias or width after init has no effect
 * on the kernels that use the copies, so re-initialise instead.
 *
 * Workspace: every function takes `work`, at least
 * fs_network_workspace_size(dim, n_hidden) doubles, or NULL to borrow a slot
 * of the network's pool.  Two threads must not share one `work`.
 *
 * Determinism: rows are processed in blocks of FS_NETWORK_BLOCK and tiles
 * whose layout depends on dim and n_hidden only, so a result never depends on
 * the caller's threads.  (Different CPUs may run different vector code paths,
 * chosen at load time, which can differ in the last bits.)
 *
 * Plain C99, no Python.h.
 */
#ifndef FS_NETWORK_H
#define FS_NETWORK_H

#include <stddef.h>
#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FS_NETWORK_SOFTPLUS = 0,   /* a(t) = log(1 + e^t)                         */
    FS_NETWORK_SIGMOID = 1,    /* a(t) = 1 / (1 + e^-t)                       */
    FS_NETWORK_TANH = 2,       /* a(t) = tanh(t)                              */
    FS_NETWORK_RBF = 3         /* a_i(x) = exp(-||x - c_i||^2 / (2 l_i^2))     */
};

/* Hidden rows per block: a block's rows stay in L1 between the dot products
 * and the accumulation of the gradient. */
#define FS_NETWORK_BLOCK 32

typedef struct fs_network {
    int dim;                 /* inputs (length of q)                          */
    int n_hidden;            /* hidden units s                                */
    int activation;          /* FS_NETWORK_*                                  */
    const double *W;         /* n_hidden*dim row-major: w_i, or centres c_i   */
    const double *bias;      /* n_hidden (additive only; NULL = zeros)        */
    const double *width;     /* n_hidden, positive (RBF only)                 */
    const double *v;         /* n_hidden output weights (may change between calls) */
    double out_bias;         /* b                                             */
    const double *shift;     /* dim or NULL (zeros)                           */
    const double *inv_scale; /* dim or NULL (ones)                            */
    fs_pool pool;            /* scratch for fs_network_potential_eval         */
    /* Private, filled by fs_network_init from W, bias and width: */
    int ld;                  /* dim rounded up to a multiple of 4             */
    double *Wp;              /* W with rows padded to ld (zeros), 64-byte aligned */
    double *bp;              /* bias (zeros for RBF), padded to whole blocks  */
    double *il2p;            /* 1 / width^2 (ones for additive), padded       */
    void *own;               /* the allocation behind Wp, bp and il2p         */
} fs_network;

/* Doubles of workspace any function below needs for this shape
 * (10 dim + 64: O(dim), independent of n_hidden). */
size_t fs_network_workspace_size(int dim, int n_hidden);

/* Fill `net` (borrowing every array) and allocate its scratch pool.
 * Checks dim >= 1, n_hidden >= 1, a known activation, W and v non-NULL,
 * width non-NULL for RBF; returns FS_EINVAL otherwise, FS_ENOMEM when the pool
 * cannot be allocated.  Does not check finiteness or that widths are
 * positive (the Python layer does).  `bias` is ignored for RBF nodes. */
int fs_network_init(fs_network *net, int dim, int n_hidden, int activation,
                    const double *W, const double *bias, const double *width,
                    const double *v, double out_bias, const double *shift,
                    const double *inv_scale);

/* Release the pool and the padded copies; the borrowed arrays are
 * untouched.  Safe to call twice, and after a failed fs_network_init. */
void fs_network_free(fs_network *net);

/* *value = z(q) (eq. 12). */
int fs_network_value(const fs_network *net, const double *q,
                     double *FS_RESTRICT value, double *FS_RESTRICT work);

/* grad = dz/dq (dim).  One pass over W: for each block of rows, the dot
 * products, then v_i a'(t_i) for the block, then the accumulation of
 * v_i a'(t_i) w_i while the rows are still in L1.  (RBF: v_i a_i (c_i - x) / l_i^2.) */
int fs_network_grad(const fs_network *net, const double *q,
                    double *FS_RESTRICT grad, double *FS_RESTRICT work);

/* value and/or gradient in one pass (either output may be NULL). */
int fs_network_value_grad(const fs_network *net, const double *q,
                          double *FS_RESTRICT value, double *FS_RESTRICT grad,
                          double *FS_RESTRICT work);

/* The fs_potential_fn of a network (state = fs_network *): U(q) = z(q).
 * Thread-safe: scratch comes from the network's pool. */
int fs_network_potential_eval(void *state, const double *q, double *value,
                              double *grad);

/* hess = d^2 z / dq dq^T (dim*dim, row-major, exactly symmetric).
 * Additive: S (sum_i v_i a''(t_i) w_i w_i^T) S, S = diag(inv_scale).
 * RBF: S (sum_i v_i a_i [dd^T / l^4 - I / l^2]) S, d = x - c_i. */
int fs_network_hessian(const fs_network *net, const double *q,
                       double *FS_RESTRICT hess, double *FS_RESTRICT work);

/* hdiag[k] = d^2 z / dq_k^2 (dim). */
int fs_network_hessian_diag(const fs_network *net, const double *q,
                            double *FS_RESTRICT hdiag, double *FS_RESTRICT work);

/* The third-derivative contractions of Riemannian-manifold HMC with metric
 * G(q) = hessian of z (RNS-HMC paper, 2.2 and 3.4):
 *   out_tr[k]   = tr(A dG/dq_k)      (A symmetric dim*dim)
 *   out_quad[k] = u^T (dG/dq_k) u    (u of length dim)
 * Additive, with w~_i = inv_scale * w_i and c_i = v_i a'''(t_i):
 *   dG/dq_k = sum_i c_i w~_ik w~_i w~_i^T
 *   out_tr[k] = sum_i c_i w~_ik (w~_i^T A w~_i),  out_quad[k] = sum_i c_i w~_ik (w~_i . u)^2.
 * RBF, with y = inv_scale * (x - c_i), a = v_i a_i, tA = sum_j s_j^2 A_jj,
 * uu = sum_j s_j^2 u_j^2:
 *   out_tr[k]   = sum_i a [-y_k / l^2 (y^T A y / l^4 - tA / l^2) + 2 s_k^2 (A y)_k / l^4]
 *   out_quad[k] = sum_i a [-y_k / l^2 ((u . y)^2 / l^4 - uu / l^2) + 2 s_k^2 u_k (u . y) / l^4]
 * A (with out_tr) or u (with out_quad) may be NULL to skip that output.
 * A is read in full and must be symmetric (not checked).
 * Cost O(n_hidden dim^2) with A, O(n_hidden dim) otherwise. */
int fs_network_third_contractions(const fs_network *net, const double *q,
                                  const double *A, const double *u,
                                  double *FS_RESTRICT out_tr,
                                  double *FS_RESTRICT out_quad,
                                  double *FS_RESTRICT work);

/* out[k] = sum_j a[j] d(hess_jj)/dq_k = tr(diag(a) dG/dq_k): the contraction
 * needed when the metric is the Hessian diagonal (RNS-RMHMC with a diagonal
 * metric: a = 1/diag G for the log-determinant term, a = u*u for the
 * quadratic term).  Cost O(n_hidden dim). */
int fs_network_third_diag(const fs_network *net, const double *q,
                          const double *a, double *FS_RESTRICT out,
                          double *FS_RESTRICT work);

/* out = hess(q) v (dim), the Hessian-vector product of an additive network
 * (FS_EINVAL for RBF) in one pass over the weights: sum_i v_i a''(t_i)
 * (w~_i . v) w~_i, without forming hess.  Cost O(n_hidden dim). */
int fs_network_hessian_vector(const fs_network *net, const double *q, const double *v,
                              double *FS_RESTRICT out, double *FS_RESTRICT work);

/* out = sum_i cf[i] (w~_i . u)^2 w~_i (dim) for unit coefficients cf
 * (n_hidden; fs_network_unit_coefs), in one pass over the weights: with the
 * order-3 coefficients, u^T (d hess / dq_k) u for all k (the kinetic term of
 * the generalized leapfrog where the SoftAbs metric is the Hessian).
 * Additive networks only (FS_EINVAL for RBF).  Cost O(n_hidden dim). */
int fs_network_quad_rows(const fs_network *net, const double *cf, const double *u,
                         double *FS_RESTRICT out, double *FS_RESTRICT work);

/* cf[i] = v_i a^(order)(t_i), i < n_hidden, t_i = w_i . x + d_i: the unit
 * coefficients of the Hessian (order 2: hess = sum_i cf_i w~_i w~_i^T) and of
 * the third derivatives (order 3), for callers that contract them with their
 * own dense algebra (the SoftAbs metric, fs_metrics.c).  Additive networks
 * only (FS_EINVAL for RBF or another order).  Cost O(n_hidden dim). */
int fs_network_unit_coefs(const fs_network *net, const double *q, int order,
                          double *FS_RESTRICT cf, double *FS_RESTRICT work);

/* Hidden-layer features of n points: H[p*n_hidden + i] = a_i(x_p) for the
 * rows q_p of Q (n*dim, row-major).  H is the design matrix of the ELM
 * least-squares fit of the output weights (RNS-HMC, Alg. 3). */
int fs_network_features(const fs_network *net, size_t n, const double *Q,
                        double *FS_RESTRICT H, double *FS_RESTRICT work);

/* Gradient features of one point: A[k*n_hidden + i] = d a_i / d q_k
 * (dim x n_hidden, row-major), so that dz/dq = A v.  This is the design
 * matrix of gradient (score) matching (VHMC, Prop. 2). */
int fs_network_grad_features(const fs_network *net, const double *q,
                             double *FS_RESTRICT A, double *FS_RESTRICT work);

/* fs_network_grad_features for the n rows of Q: out is (n*dim) x n_hidden,
 * point p's block starting at out + p*dim*n_hidden. */
int fs_network_grad_features_batch(const fs_network *net, size_t n,
                                   const double *Q, double *FS_RESTRICT out,
                                   double *FS_RESTRICT work);

/* ---- elementwise kernels, exposed for tests ----------------------------- */

/* out[i] = exp(x[i]) by the vectorised kernel the networks use (Cody-Waite
 * reduction, degree-11 polynomial, two-step scaling so that subnormal results
 * are correctly rounded to a few ulp); `scalar` = 1 runs the portable scalar
 * code instead. */
int fs_network_exp(size_t n, const double *x, double *FS_RESTRICT out, int scalar);

/* out[i] = the order-th derivative (0..3) of the additive activation at t[i]
 * (softplus, sigmoid or tanh), as the network kernels compute it. */
int fs_network_activation(int activation, int order, size_t n, const double *t,
                          double *FS_RESTRICT out, int scalar);

#ifdef __cplusplus
}
#endif
#endif /* FS_NETWORK_H */
