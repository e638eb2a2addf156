/* fs_metric.h: the position-dependent metric contract of Riemannian-manifold
 * HMC, beside fs_potential (fs_potential.h).
 *
 * Girolami & Calderhead (2011); RNS-HMC paper (Zhang, Shahbaba & Zhao 2017),
 * section 2.2, eq. 5-9: H(q, p) = U(q) + 1/2 log det G(q) + 1/2 p^T G(q)^{-1} p.
 * The generalized leapfrog (fs_rmhmc.h) needs, at a position q,
 *
 *   G(q)                         dim*dim, symmetric positive definite
 *   tr[k]   = tr(G^{-1} dG/dq_k)        (the log-determinant term)
 *   quad[k] = u^T (dG/dq_k) u           (the kinetic term, u = G^{-1} p)
 *
 * and never the dim^3 tensor dG itself: every metric here computes the two
 * contractions directly (a GLM's Fisher information in passes over X, a
 * random network's SoftAbs Hessian through its third-derivative contractions).
 *
 * eval(state, q, G):             G (dim*dim, row-major, full symmetric)
 * contract(state, q, Ginv, u, tr, quad):
 *     Ginv = G(q)^{-1} as the caller computed it from eval at the same q
 *     (dim*dim); tr or quad may be NULL (then that output is skipped; u may
 *     be NULL when quad is).  A metric may cache what its eval at q computed
 *     (an eigendecomposition), but must check that q is the cached one.
 * matvec(state, q, v, out):      out = G(q) v (dim), OPTIONAL (NULL: not
 *     provided).  With it, the position update of the generalized leapfrog
 *     (fs_rmhmc.h, eq. 8) needs one matrix-vector product per fixed-point
 *     iterate instead of a whole G and its Cholesky factor: a GLM's Fisher
 *     G v = X^T (W(Xq) X v) + P v is one pass over X (O(N d)), G is O(N d^2).
 *     q need not be a point eval was called at.
 * matvec_exact(state, q):        OPTIONAL with matvec (NULL: the product is
 *     G(q) v everywhere).  Called after eval at q: nonzero when matvec at q
 *     computes G(q) v there.  A metric whose cheap product is G v only in a
 *     region (the network SoftAbs metric, where G = H exactly: fs_metrics.h)
 *     provides it; a position update solved with products is then kept only
 *     where it holds at the solution, and is otherwise solved again with
 *     whole metrics (fs_rmhmc.c).  Either way the step solves eq. 8 for the
 *     metric G; which route ran is a deterministic function of the state.
 * All return FS_OK or an FS_E* code; non-finite output with FS_OK is
 * treated by the samplers as a divergence.  A metric is NOT assumed
 * thread-safe: one chain uses it at a time.
 */
#ifndef FS_METRIC_H
#define FS_METRIC_H

#include "fs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*fs_metric_eval_fn)(void *state, const double *q, double *G);
typedef int (*fs_metric_contract_fn)(void *state, const double *q, const double *Ginv,
                                     const double *u, double *tr, double *quad);
typedef int (*fs_metric_matvec_fn)(void *state, const double *q, const double *v,
                                   double *out);
typedef int (*fs_metric_matvec_exact_fn)(void *state, const double *q);

typedef struct fs_metric {
    void *state;
    fs_metric_eval_fn eval;
    fs_metric_contract_fn contract;
    int dim;
    fs_metric_matvec_fn matvec;   /* appended; NULL when the metric has none */
    fs_metric_matvec_exact_fn matvec_exact;   /* appended; NULL: always exact */
} fs_metric;

#ifdef __cplusplus
}
#endif
#endif /* FS_METRIC_H */
