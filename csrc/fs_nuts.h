/* fs_nuts.h: the No-U-Turn sampler as Stan implements it (multinomial
 * variant), one transition at a time.
 *
 * Hoffman & Gelman (2014) build a trajectory by repeated doubling, forward
 * or backward in time with probability 1/2, until the trajectory starts to
 * turn back on itself or reaches 2^max_tree_depth - 1 leapfrog steps.
 * Betancourt (2017, "A conceptual introduction to HMC", appendix A) draws
 * the next state from the trajectory with weights exp(-H) instead of slice
 * sampling: uniformly (multinomially) within each new subtree, and with the
 * biased progressive rule min(1, w_new / w_old) when a subtree joins the
 * trajectory; the U-turn criterion is the generalized one on the momentum
 * sum rho, checked over every subtree, over the whole trajectory and (since
 * Stan 2.26) across the two halves of every merge, with one extra point.
 *
 * The transition runs on the same configuration, point and info records as
 * HMC (fs_transition.h), with one potential: NUTS has no separate judge.
 */
#ifndef FS_NUTS_H
#define FS_NUTS_H

#include "fs_transition.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest accepted cfg->max_tree_depth (2^30 - 1 leapfrog steps). */
#define FS_NUTS_MAX_TREE_DEPTH 30

/* Doubles of workspace fs_nuts_transition needs: (16 + 8 max_tree_depth) dim.
   It is at least fs_hmc_workspace_size(dim), so the same buffer also serves
   fs_hmc_find_step_size and fs_hmc_transition. */
size_t fs_nuts_workspace_size(int dim, int max_tree_depth);

/* One multinomial NUTS transition from cur (Stan's base_nuts::transition).
 *
 * Uses cfg->dim, step_size, metric, inv_metric, metric_chol,
 * max_energy_error and max_tree_depth (1 .. FS_NUTS_MAX_TREE_DEPTH, else
 * FS_EINVAL); ignores n_steps, random_n_steps and delayed_acceptance.
 * cur must come from fs_hmc_point_init with pot as both drive and judge.
 *
 * On return cur holds the new state and info:
 *   n_steps      leapfrog steps taken (= gradient evaluations),
 *   tree_depth   doublings completed (n_steps = 2^tree_depth - 1 unless a
 *                subtree was rejected by a U-turn or a divergence),
 *   accept_prob  mean over the new points of min(1, exp(H0 - H)) (Stan's
 *                accept_stat, the dual-averaging statistic),
 *   divergent    H - H0 > max_energy_error or a non-finite value/gradient,
 *   accepted     1 when the new state is not the starting one,
 *   energy       H of the new state (with its momentum), energy_error that
 *                minus H0, proposal_u its U; n_judge_evals is 0.
 * The new position is also left in work[2*dim .. 3*dim) (the "proposal"
 * slot of fs_hmc_transition).  A potential error other than FS_ENONFINITE
 * stops the transition and is returned with cur unchanged. */
int fs_nuts_transition(const fs_hmc_config *cfg, const fs_potential *pot, fs_rng *rng,
                       fs_hmc_point *cur, double *FS_RESTRICT work, fs_hmc_info *info);

#ifdef __cplusplus
}
#endif
#endif /* FS_NUTS_H */
