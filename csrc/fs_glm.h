/* fs_glm.h: generalised linear models as fs_potential, with a fused
 * single-pass data sum.
 *
 * U(beta) = sum_i loss(y_i, x_i . beta)
 *         + 0.5 * sum_j (beta_j - m_j)^2 / s_j^2          (Gaussian prior)
 *
 * family    y            loss(y, t)                   residual r = dloss/dt
 * logistic  {0, 1}       log(1 + e^t) - y t           sigmoid(t) - y
 * probit    {0, 1}       -log Phi(s t), s = 2y - 1     -s phi(s t) / Phi(s t)
 * poisson   0, 1, 2, ... e^t - y t  (- log y! dropped) e^t - y
 * gaussian  real         (t - y)^2 / (2 sigma^2)      (t - y) / sigma^2
 *
 * The gradient is X^T r + prior term.  X (n x d, row-major) is read ONCE per
 * evaluation: each row's dot product x_i . beta is followed at once by the
 * accumulation r_i x_i into the gradient while the row is still in L1.
 *
 * Determinism: rows are cut into blocks whose size depends on n only (never
 * on the thread count); each block writes its partial sums to the workspace,
 * and the partials are added in block order.  Results are therefore bit-for-
 * bit identical for every n_threads.  (Machines that run different code
 * paths, FMA or not, may differ in the last bits.)
 *
 * Plain C99, no Python.h.  OpenMP is used when compiled with it.
 */
#ifndef FS_GLM_H
#define FS_GLM_H

#include <stddef.h>
#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FS_GLM_LOGISTIC = 0,
    FS_GLM_PROBIT = 1,
    FS_GLM_POISSON = 2,
    FS_GLM_GAUSSIAN = 3
};

/* Rows per block of the eval kernel (the block size is this, or larger when
 * n > FS_GLM_BLOCK_ROWS * FS_GLM_MAX_BLOCKS, so that the workspace stays
 * bounded; it depends on n only). */
#define FS_GLM_BLOCK_ROWS 512
#define FS_GLM_MAX_BLOCKS 1024
/* Blocks per task when fs_glm_eval runs inside a team (fs_glm.c). */
#define FS_GLM_TASK_BLOCKS 8
/* The Fisher kernel cuts the rows into at most this many chunks, each of at
 * least FS_GLM_FISHER_MIN_ROWS rows (again a function of n only). */
#define FS_GLM_FISHER_MAX_CHUNKS 16
#define FS_GLM_FISHER_MIN_ROWS 2048

typedef struct fs_glm {
    int family;                 /* FS_GLM_*                                   */
    size_t n;                   /* observations (rows of X)                   */
    size_t d;                   /* coefficients (columns of X)                */
    const double *X;            /* n*d, row-major, borrowed                   */
    const double *y;            /* n, borrowed                                */
    const double *prior_mean;   /* d, borrowed; NULL means zeros              */
    double *prior_prec;         /* d, owned: 1 / prior_sd^2; NULL: flat prior */
    double sigma;               /* noise sd (gaussian family), else 1         */
    double inv_sigma2;          /* 1 / sigma^2                                */
    int n_threads;              /* OpenMP threads per evaluation (>= 1)       */
    fs_pool pool;               /* per-call workspace for fs_glm_potential_eval */
} fs_glm;

/* Sizes, in doubles, of the workspaces of fs_glm_eval (eval_doubles) and of
 * fs_glm_fisher (fisher_doubles) for n rows and d columns.  Either output
 * pointer may be NULL.  Returns FS_EINVAL when n or d is 0. */
int fs_glm_workspace_size(size_t n, size_t d, size_t *eval_doubles,
                          size_t *fisher_doubles);

/* Set up a model.  X (n*d row-major), y (n), prior_mean (d, or NULL for
 * zeros) are borrowed and must outlive the model.  prior_sd (d, or NULL for
 * a flat prior) is copied as precisions 1/sd^2.  sigma is used by the
 * gaussian family only.  Allocates the precision array and the workspace
 * pool (FS_POOL_SLOTS eval workspaces).
 * Checks: family, n, d >= 1, d <= INT_MAX, non-NULL X and y, prior_sd finite
 * and > 0 with a finite precision, sigma finite and > 0 (gaussian),
 * n_threads >= 1 (FS_EINVAL otherwise; FS_ENOMEM when allocation fails).
 * Does NOT check the data: finiteness of X and y and the label domain
 * (0/1, counts) are the caller's job.  On failure nothing is left allocated;
 * on success release with fs_glm_free. */
int fs_glm_init(fs_glm *m, int family, size_t n, size_t d, const double *X,
                const double *y, const double *prior_mean, const double *prior_sd,
                double sigma, int n_threads);

/* Release what fs_glm_init allocated (safe to call twice). */
void fs_glm_free(fs_glm *m);

/* U(beta) into *value and dU/dbeta into grad (d doubles); either may be
 * NULL and its work is skipped (value only: no residuals, no gradient
 * accumulation; gradient only: no log-likelihood terms), with the same bits
 * as the combined call.  work holds eval_doubles of fs_glm_workspace_size
 * (one workspace per concurrent caller).  Reads X once, with m->n_threads
 * OpenMP threads (each concurrent caller starts its own team).
 * Not checked: the pointers, and beta (non-finite beta or overflow, e.g.
 * poisson with t > 709, gives inf/nan with FS_OK, which samplers treat as
 * a divergence).  Always returns FS_OK. */
int fs_glm_eval(const fs_glm *m, const double *beta, double *FS_RESTRICT value,
                double *FS_RESTRICT grad, double *FS_RESTRICT work);

/* The fs_potential_fn of a model: state is an fs_glm*.  Takes a workspace
 * from the model's pool, so it may run in several threads at once.
 * Returns FS_ENOMEM when the pool is exhausted and malloc fails. */
int fs_glm_potential_eval(void *state, const double *q, double *value,
                          double *grad);

/* Fisher information at beta plus the prior precision:
 *   F = X^T W X + diag(1 / prior_sd^2),  F (d*d, full symmetric, row-major)
 * with the expected-information weights W_i = logistic s(t)(1 - s(t)),
 * probit phi(t)^2 / (Phi(t)(1 - Phi(t))) (computed as a product of two
 * inverse Mills ratios, no cancellation), poisson e^t, gaussian 1/sigma^2.
 * For canonical links (logistic, poisson, gaussian) F is the Hessian of U.
 * work holds fisher_doubles of fs_glm_workspace_size.  Deterministic for any
 * thread count (fixed chunking).  O(n d^2) flops. */
int fs_glm_fisher(const fs_glm *m, const double *beta, double *FS_RESTRICT F,
                  double *FS_RESTRICT work);

/* The expected-information weight w(t) and dw/dt of a family (sigma: the
 * gaussian noise sd): logistic s(1-s), (1-2s) w; probit m(t) m(-t) with the
 * inverse Mills ratio m, w (m(-t) - m(t) - 2t); poisson e^t twice; gaussian
 * 1/sigma^2 and 0.  The same functions as the row kernels below use
 * (FS_EINVAL for an unknown family). */
int fs_glm_weight_deriv(int family, double sigma, double t, double *FS_RESTRICT w,
                        double *FS_RESTRICT dw);

/* Row kernels of the Fisher metric (fs_metrics.c), rows [i0, i1), one pass
 * over them, by the tiles of the gradient kernel:
 *   fs_glm_fisher_matvec_rows: part (d) = sum_n w(x_n . beta) (x_n . v) x_n,
 *       with the weights of fs_glm_fisher;
 *   fs_glm_weighted_rows: Z[n - i0] (row-major, d) = sqrt(w(x_n . beta)) x_n,
 *       so that the rows' part of the Fisher is Z^T Z (one dsyrk);
 *   fs_glm_weight_derivs_rows: dw[n - i0] = w'(x_n . beta);
 *   fs_glm_contract_rows: with dw[n - i0] as above,
 *       ptr (d)   += sum_n dw[n - i0] h[n - i0] x_n        (when ptr != NULL)
 *       pquad (d) += sum_n dw[n - i0] (x_n . u)^2 x_n      (when pquad != NULL). */
void fs_glm_fisher_matvec_rows(const fs_glm *m, const double *beta, const double *v,
                               size_t i0, size_t i1, double *FS_RESTRICT part);
void fs_glm_weighted_rows(const fs_glm *m, const double *beta, size_t i0, size_t i1,
                          double *FS_RESTRICT Z);
void fs_glm_weight_derivs_rows(const fs_glm *m, const double *beta, size_t i0, size_t i1,
                               double *FS_RESTRICT dw);
void fs_glm_contract_rows(const fs_glm *m, const double *u, const double *FS_RESTRICT dw,
                          const double *FS_RESTRICT h, size_t i0, size_t i1,
                          double *FS_RESTRICT ptr, double *FS_RESTRICT pquad);

/* The memory-bandwidth floor of the eval kernel: *out = sum of the n
 * doubles of X, read once with n_threads OpenMP threads, with fixed blocks
 * and block-order reduction like fs_glm_eval.  Returns FS_EINVAL for
 * n_threads < 1. */
int fs_read_floor(const double *X, size_t n, int n_threads,
                  double *FS_RESTRICT out);

/* Minibatch evaluation for stochastic-gradient samplers (SGLD, Welling &
 * Teh 2011, eq. 2; SGHMC, Chen, Fox & Guestrin 2014, eq. 5): the rows
 * rows[0..k) of X (indices into 0..n-1, repeats allowed, X never copied:
 * each row is read in place, the next panel's rows prefetched) give
 *   value = scale * sum_{i in rows} loss_i + prior term
 *   grad  = scale * sum_{i in rows} r_i x_i + prior gradient
 *   grad_sq[j] = sum_{i in rows} (r_i x_ij)^2            (unscaled)
 * With scale = n / k and rows a uniform draw, value and grad are unbiased
 * estimates of U and grad U (the prior enters in full).  grad_sq (the
 * diagonal of the batch's empirical Fisher, for SGHMC's noise estimate)
 * needs grad.  Any of the outputs may be NULL.  One thread; no workspace.
 * Rows are summed in order (the result depends on the order of rows).
 * Returns FS_EINVAL when k == 0 or a row index is >= n (nothing written). */
int fs_glm_eval_rows(const fs_glm *m, const size_t *rows, size_t k, double scale,
                     const double *beta, double *FS_RESTRICT value,
                     double *FS_RESTRICT grad, double *FS_RESTRICT grad_sq);

/* Scalar helpers, exposed for tests: log Phi(z) and the inverse Mills ratio
 * phi(z) / Phi(z) (the kernel's own routines), relative error below ~1e-13
 * for every finite z: erfc-based for |z| < 30, asymptotic Mills-ratio
 * series beyond, so nothing underflows (log Phi(z) is -inf only where
 * z^2/2 overflows, z < -1.9e154). */
int fs_log_ndtr(double z, double *FS_RESTRICT out);
int fs_inv_mills(double z, double *FS_RESTRICT out);

#ifdef __cplusplus
}
#endif
#endif /* FS_GLM_H */
