/* fs_smw.h: online gradient (score) matching of a random network's output
 * weights by the Sherman-Morrison-Woodbury identity (VHMC).
 *
 * Reference: C. Zhang, B. Shahbaba, H. Zhao (2018), "Variational Hamiltonian
 * Monte Carlo via score matching", Bayesian Analysis 13(2): eq. (3.19)-(3.21)
 * and Proposition 2.
 *
 * Problem (3.19): for points q_1..q_N with gradients g_t = grad U(q_t) (d),
 *     minimise  sum_t ||A_t v - g_t||^2 + lambda ||v||^2
 * where A_t (d x s) has column i = a'(w_i . q_t + d_i) w_i, the gradient of
 * hidden unit i at q_t (built by the caller).  Its solution is
 *     v = C sum_t A_t^T g_t,   C = (lambda I + sum_t A_t^T A_t)^{-1}.
 * Online (3.20)-(3.21), one point (A, g) at a time, from v = 0, C = I/lambda:
 *     W = C A^T (I_d + A C A^T)^{-1}
 *     v <- v + W (g - A v)
 *     C <- C - W A C
 * computed as B = C A^T (s x d, dgemm), M = I + A B = L L^T (dpotrf),
 * E = B L^{-T} (dtrsm), v += E L^{-1} (g - A v), C -= E E^T (dsyrk):
 * O(d s^2 + d^3) work, no explicit inverse, and the C update is a symmetric
 * rank-d downdate.
 *
 * Storage: C is a full s x s row-major array, kept EXACTLY symmetric: dsyrk
 * updates one triangle, which is then mirrored onto the other.  (With dsymm
 * in the fs_blas table, B = C A^T could read one triangle and the mirror
 * would go.)  A_t are d x s row-major; a stack of N of them is an
 * (N d) x s row-major array.
 *
 * Threads: the BLAS calls run with whatever threading the BLAS library has;
 * for s of a few hundred a single-threaded BLAS is faster (thread wake-ups).
 *
 * Plain C99, no Python.h.  BLAS/LAPACK only through the fs_blas table.
 */
#ifndef FS_SMW_H
#define FS_SMW_H

#include <stddef.h>
#include "fs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fs_smw {
    int s;                 /* hidden units: columns of A_t, length of v      */
    int d;                 /* dimension of q: rows of A_t, length of g_t     */
    double lambda;         /* ridge penalty (> 0)                            */
    long n_seen;           /* points absorbed (batch points + updates)       */
    const fs_blas *blas;   /* borrowed; must outlive the state               */
    double *v;             /* s: output weights                              */
    double *C;             /* s*s, full and symmetric: (lambda I + sum A^T A)^{-1} */
    double *mem;           /* owned block behind v and C                     */
} fs_smw;

/* Empty state (3.20-3.21 start): v = 0, C = I / lambda, n_seen = 0.
 * Allocates s + s^2 doubles once; release with fs_smw_free.  s >= 1, d >= 1,
 * lambda > 0 and finite, else FS_EINVAL. */
int fs_smw_init(fs_smw *st, const fs_blas *blas, int s, int d, double lambda);

/* Frees the owned memory. */
void fs_smw_free(fs_smw *st);

/* Back to the empty state without reallocating. */
void fs_smw_reset(fs_smw *st);

/* Doubles of workspace that fs_smw_update / _update_many need: s d + d^2 + d. */
size_t fs_smw_workspace_size(int s, int d);

/* Doubles of workspace that fs_smw_solve_batch needs: s^2. */
size_t fs_smw_batch_workspace_size(int s);

/* One point, eq. (3.20)-(3.21) / Proposition 2: A (d x s row-major), g (d).
 * O(d s^2 + d^3).  work: fs_smw_workspace_size(s, d) doubles.
 * Returns FS_ENONFINITE (state untouched) if A or g is not finite,
 * FS_ESINGULAR (state untouched) if I + A C A^T is not numerically positive
 * definite (C has lost definiteness: restart with fs_smw_solve_batch),
 * FS_ELAPACK on a LAPACK argument error. */
int fs_smw_update(fs_smw *st, const double *A, const double *g,
                  double *FS_RESTRICT work);

/* N points in order (As: N stacked d x s blocks, gs: N x d), as N calls of
 * fs_smw_update.  *n_done (may be NULL) receives the number absorbed; on an
 * error the state holds the first *n_done points. */
int fs_smw_update_many(fs_smw *st, const double *As, const double *gs, long N,
                       double *FS_RESTRICT work, long *n_done);

/* Batch solution of (3.19) by the normal equations, for tests and restarts:
 * G = lambda I + sum_t A_t^T A_t (dsyrk), Cholesky G = L L^T (dpotrf),
 * v = G^{-1} sum_t A_t^T g_t and C = G^{-1} (dpotrs), n_seen = N.
 * Replaces the state.  work: fs_smw_batch_workspace_size(s) doubles.
 * Returns FS_ENONFINITE (non-finite data), FS_ESINGULAR (G not numerically
 * positive definite) or FS_ELAPACK; on an error the state is reset to the
 * empty one. */
int fs_smw_solve_batch(fs_smw *st, const double *As, const double *gs, long N,
                       double *FS_RESTRICT work);

#ifdef __cplusplus
}
#endif
#endif /* FS_SMW_H */
