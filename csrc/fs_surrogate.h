/* fs_surrogate.h: surrogate transitions with one exact correction.
 *
 * Liu (2001, Monte Carlo Strategies in Scientific Computing, sec. 9.4.3,
 * "surrogate transitions") and Christen & Fox (2005): let T_V be any Markov
 * kernel that leaves pi_V ~ exp(-V) invariant and satisfies detailed balance
 * for it (HMC with V as drive and judge; NUTS on V).  Run k >= 1 steps of
 * T_V from q to q', then accept q' with probability
 *
 *     min(1, exp(-U(q') + U(q) + V(q') - V(q))),
 *
 * else stay at q.  The composite move is reversible with respect to
 * pi_U ~ exp(-U) for every k and every V: the exact posterior stays
 * invariant, and the move pays ONE evaluation of U (a value, no gradient)
 * per k surrogate transitions.
 */
#ifndef FS_SURROGATE_H
#define FS_SURROGATE_H

#include "fs_transition.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Doubles of workspace fs_surrogate_transition needs: the inner kernel's
   (fs_hmc_workspace_size, or fs_nuts_workspace_size when cfg->algorithm is
   FS_ALGORITHM_NUTS) plus 2 dim for the saved state. */
size_t fs_surrogate_workspace_size(int dim, int algorithm, int max_tree_depth);

/* One composite move: cfg->surrogate_steps (k >= 1, else FS_EINVAL)
 * transitions of cfg->algorithm (HMC or NUTS) with `drive` (V) as its only
 * potential, then the exact test above with `judge` (U).
 *
 * cur must come from fs_hmc_point_init with cfg->surrogate_steps > 0, so
 * that cur->u_drive holds V(q) (and cur->grad grad V(q), cur->u_judge U(q)).
 * On rejection cur is restored exactly (q, grad, u_judge, u_drive).
 * When the inner transitions never move (q' == q bit for bit) the move is
 * accepted without evaluating U.
 *
 * info: accept_prob = the composite acceptance probability; accepted;
 * n_steps = leapfrog steps summed over the k inner transitions; tree_depth
 * = the largest inner tree depth (NUTS); n_judge_evals = 1 (0 when q' == q);
 * divergent = an inner divergence or a non-finite U(q'); energy_error =
 * (U - V)(q') - (U - V)(q), minus the log acceptance ratio (NaN when U(q')
 * was not finite); energy = U of the state kept; proposal_u = U(q') (NaN
 * if not evaluated); inner_accept_prob = the mean acceptance statistic of
 * the inner transitions (what step-size adaptation targets).  q' is left in
 * work[2*dim .. 3*dim).  A potential error other than FS_ENONFINITE stops
 * the move and is returned with cur restored. */
int fs_surrogate_transition(const fs_hmc_config *cfg, const fs_potential *drive,
                            const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
                            double *FS_RESTRICT work, fs_hmc_info *info);

#ifdef __cplusplus
}
#endif
#endif /* FS_SURROGATE_H */
