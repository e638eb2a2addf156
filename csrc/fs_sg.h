/* fs_sg.h: stochastic-gradient samplers on the minibatches of a data-sum
 * GLM (fs_glm.h): SGLD (Welling & Teh 2011) and SGHMC (Chen, Fox &
 * Guestrin 2014), with an optional Metropolis-Hastings test for SGHMC.
 *
 * Minibatches: every gradient uses k = batch_size rows drawn uniformly
 * without replacement by a partial Fisher-Yates shuffle of a permutation
 * of 0..n-1 that the caller owns (O(k) per batch; any permutation is a
 * valid state).  The rows are read in place (fs_glm_eval_rows): X is never
 * copied.  The gradient estimate is (n / k) sum_{i in B} grad loss_i plus
 * the full prior gradient: unbiased.
 *
 * Step sizes: eps_t = a (b + t)^(-delta), t = number of gradient steps
 * taken so far (Welling & Teh, section 3; delta = 0 is a constant step).
 *
 * Plain C99, no Python.h.
 */
#ifndef FS_SG_H
#define FS_SG_H

#include <stddef.h>
#include <stdint.h>
#include "fs_common.h"
#include "fs_glm.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { FS_SG_SGLD = 0, FS_SG_SGHMC = 1 };
enum { FS_SG_NOISE_ZERO = 0, FS_SG_NOISE_FISHER = 1 };

typedef struct fs_sg_config {
    int algorithm;        /* FS_SG_SGLD or FS_SG_SGHMC                          */
    size_t batch_size;    /* rows per gradient, 1..n                            */
    double a, b, delta;   /* eps_t = a (b + t)^(-delta); a > 0, b > 0, delta >= 0 */
    double friction;      /* SGHMC: C (scalar times I), >= 0                    */
    int noise_estimate;   /* SGHMC: FS_SG_NOISE_ZERO (B_hat = 0) or _FISHER    */
    int n_steps;          /* SGHMC: steps per iteration (stored draw), >= 1     */
    int mh;               /* SGHMC: leapfrog steps (no friction, no noise) and
                             a Metropolis-Hastings test with the full U        */
    /* optional independent Laplace prior added to the GLM's U (NNgHMC paper,
     * Table 3): sum_j |q_j - l1_loc_j| / l1_scale_j + l1_log_norm, gradient
     * sign(q_j - l1_loc_j) / l1_scale_j (sign(0) = 0, a subgradient), added in
     * full to every minibatch gradient and to the full U of the test.
     * l1_scale NULL: no such term (the default); l1_loc NULL: 0.              */
    const double *l1_scale;
    const double *l1_loc;
    double l1_log_norm;
} fs_sg_config;

/* Per-iteration outputs (rows of n_iter; any pointer except draws may be
 * NULL). */
typedef struct fs_sg_trace {
    double *draws;         /* n_iter * d                                        */
    double *potential;     /* full U at the draw (mh), else NaN                 */
    double *accept_prob;   /* min(1, exp(H0 - H1)) (mh), else 1                 */
    double *energy_error;  /* H1 - H0 (mh), else NaN                            */
    double *energy;        /* H at the kept state (mh), else NaN                */
    double *step_size;     /* eps_t of the iteration's first step               */
    int8_t *accepted;      /* 1, or the test's outcome (mh)                     */
    int8_t *divergent;     /* non-finite proposal (mh)                          */
    int32_t *n_steps;      /* gradient steps of the iteration                   */
    int8_t *judge_evaluated; /* 1 when the full U was evaluated (mh)            */
    int32_t *noise_clipped;  /* SGHMC with FS_SG_NOISE_FISHER: coordinates where
                                B_hat > C (injected noise set to 0), summed over
                                the iteration's steps                           */
} fs_sg_trace;

/* The chain's state between calls. */
typedef struct fs_sg_state {
    double *q;        /* d, the position (in/out)                               */
    double u;         /* full U at q (mh only; NaN when not yet known)          */
    long t;           /* gradient steps taken (the schedule's t)                */
    size_t *perm;     /* n, a permutation of 0..n-1 (any order)                 */
} fs_sg_state;

/* Doubles of workspace fs_sg_run needs for a model with n rows and d
 * columns (the full-U workspace of fs_glm_eval for the MH test, plus 6 d).
 * Returns FS_EINVAL when n or d is 0. */
int fs_sg_workspace_size(size_t n, size_t d, size_t *doubles);

/* Check a configuration against a model: FS_OK or FS_EINVAL. */
int fs_sg_check(const fs_sg_config *cfg, const fs_glm *m);

/* n_iter iterations, row i of every trace array for iteration i.
 *
 * SGLD (Welling & Teh 2011, eq. 4), one step per iteration:
 *   q <- q - (eps_t / 2) g_B(q) + N(0, eps_t I)
 * SGHMC (Chen et al. 2014, eq. 15, M = I): momentum v = eps r, r ~ N(0, I)
 * drawn afresh at the start of each iteration (their Alg. 2), then n_steps
 *   q <- q + v;  v <- v - eps^2 g_B(q) - eps C v + N(0, 2 eps^3 (C - B_hat))
 * with B_hat = 0, or B_hat = (eps / 2) V_hat, V_hat the diagonal of the
 * covariance of the minibatch gradient estimated from the batch's rows,
 * (n^2 / k)(1 - k / n) var_i(r_i x_ij) (their eq. 8 and section 3.2, the
 * empirical Fisher); where B_hat_j > C the noise of coordinate j is 0 and
 * noise_clipped counts it.  The step eps is that of the iteration's first
 * step (the schedule advances by n_steps per iteration).
 * SGHMC with mh: r ~ N(0, I); n_steps leapfrog steps
 *   r -= (eps/2) g_Bk(q); q += eps r; r -= (eps/2) g_Bk(q)
 * each with its own batch B_k (two minibatch gradients per step); then the
 * Metropolis-Hastings test with the full U (one pass over X, no gradient).
 * Each step is a reversible volume-preserving map and the batch sequence
 * has the law of its reverse, so the chain is exact (a randomized
 * integrator, as for random step sizes); friction and noise are not used.
 *
 * stop: optional flag, checked before each iteration (FS_EINTERRUPT).
 * Returns FS_OK; FS_ENONFINITE when q becomes non-finite without mh (the
 * iteration is not written; *n_done says how many were); FS_EINVAL for a
 * bad configuration.  work: fs_sg_workspace_size doubles. */
int fs_sg_run(const fs_sg_config *cfg, const fs_glm *m, fs_rng *rng,
              fs_sg_state *st, long n_iter, const int *stop,
              const fs_sg_trace *tr, double *FS_RESTRICT work, long *n_done);

#ifdef __cplusplus
}
#endif
#endif /* FS_SG_H */
