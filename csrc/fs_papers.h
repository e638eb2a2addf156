/* fs_papers.h: the papers' remaining compiled models.
 *   - ICA with logistic sources (VHMC paper, Zhang et al. 2018, section 4.4);
 *   - the twisted-Gaussian banana with parameters A, B, C (NNgHMC paper,
 *     Li et al. 2019, the banana of its synthetic examples, eq. 23);
 *   - a Laplace (double-exponential) prior added to any inner potential
 *     (the NNgHMC paper's logistic regression with a Laplace prior, Table 3).
 * Every eval is an fs_potential_fn and is thread-safe. */
#ifndef FS_PAPERS_H
#define FS_PAPERS_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ICA ------------------------------------------------------------------
 * Unmixing matrix W (d x d, row-major in q, dim = d*d), N observations x_n
 * (rows of X, n x d row-major), sources with the logistic density
 *   p(y) = 1 / (4 cosh^2(y / 2)),   log p(y) = -|y| - 2 log1p(exp(-|y|)),
 * prior W_ij ~ N(0, prior_var) (VHMC paper, section 4.4: prior_var = 100):
 *   U(W) = -N log|det W| - sum_n sum_i log p((W x_n)_i)
 *          + sum_ij W_ij^2 / (2 prior_var)
 *   dU/dW = -N W^{-T} + sum_n tanh((W x_n) / 2) x_n^T + W / prior_var.
 * The prior's normalising constant is left out.  The data sum runs over
 * fixed blocks of rows whose partial sums are added in block order, so the
 * result does not depend on n_threads.  A singular W gives U = +inf and a
 * NaN gradient with FS_OK (a divergence for the samplers). */
typedef struct fs_ica {
    int n, d, n_threads;
    const double *X;        /* n x d row-major (not owned)            */
    double prior_var;
    size_t block_rows;      /* rows per block                         */
    int n_blocks;
    fs_pool pool;           /* per-call scratch: fs_ica_workspace_size */
} fs_ica;

/* Doubles of scratch one evaluation needs (blocks, LU, inverse). */
size_t fs_ica_workspace_size(int n, int d, size_t block_rows);
/* Requires n >= 1, 1 <= d <= 512, n_threads >= 1, prior_var > 0 finite;
   FS_EINVAL otherwise, FS_ENOMEM when the pool cannot be allocated.
   X must stay alive and unchanged while m is used. */
int fs_ica_init(fs_ica *m, const double *X, int n, int d, double prior_var,
                int n_threads);
void fs_ica_free(fs_ica *m);
int fs_ica_eval(void *state, const double *q, double *value, double *grad);

/* ---- the NNgHMC banana ----------------------------------------------------
 * q0 ~ N(0, A), q1 | q0 ~ N(C - B q0^2, 1) (Haario et al.'s twisted
 * Gaussian, parameterised by A > 0, B, C):
 *   U(q) = q0^2 / (2 A) + (q1 + B q0^2 - C)^2 / 2,
 * normalising constant left out. */
typedef struct fs_twisted_banana {
    double A, B, C;
} fs_twisted_banana;

int fs_twisted_banana_eval(void *state, const double *q, double *value, double *grad);

/* ---- Laplace prior on top of an inner potential ---------------------------
 * U(q) = U_inner(q) + sum_j |q_j - m_j| / b_j + sum_j log(2 b_j)
 * (NNgHMC paper, Table 3: logistic regression with a Laplace prior).
 * |x| is not differentiable at 0: the gradient uses sign(q_j - m_j) / b_j
 * with sign(0) = 0.  b and m have dim entries (not owned). */
typedef struct fs_laplace_prior {
    fs_potential inner;
    const double *scale;    /* b_j > 0        */
    const double *loc;      /* m_j            */
    double log_norm;        /* sum log(2 b_j) */
} fs_laplace_prior;

int fs_laplace_prior_eval(void *state, const double *q, double *value, double *grad);

#ifdef __cplusplus
}
#endif
#endif /* FS_PAPERS_H */
