/* fs_hmc.h: the whole chain loop: n_iter transitions (HMC, NUTS or
 * surrogate transitions: fs_transition.h, fs_nuts.h, fs_surrogate.h) with
 * their rows written into a trace, dual averaging of the step size, the
 * metric adapted from the warm-up (fs_adapt.h), a C hook after every
 * iteration, and the initial step-size heuristic.
 */
#ifndef FS_HMC_H
#define FS_HMC_H

#include <stdint.h>
#include "fs_common.h"
#include "fs_potential.h"
#include "fs_transition.h"
#include "fs_adapt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per-iteration output arrays of a chain run; any pointer may be NULL. */
typedef struct fs_hmc_trace {
    double *draws;          /* n_iter * dim                                     */
    double *potential;      /* judge U at each draw                             */
    double *accept_prob;
    double *energy_error;
    double *energy;
    double *step_size;      /* step size used in the iteration                  */
    int8_t *accepted;
    int8_t *divergent;
    int32_t *n_steps;
    int8_t *judge_evaluated;
    double *proposals;          /* n_iter * dim: the proposal of each iteration */
    double *proposal_potential; /* judge U at the proposal (NaN: not evaluated) */
    int8_t *tree_depth;         /* NUTS tree depth (0 for HMC)                  */
    double *inner_accept_prob;  /* surrogate transitions: inner mean acceptance */
} fs_hmc_trace;

/* Dual averaging of log(step size) (Hoffman & Gelman 2014, Stan's defaults). */
typedef struct fs_dual_avg {
    double mu, gamma, t0, kappa, delta;
    double h_bar, log_eps, log_eps_bar;
    double count;
} fs_dual_avg;

void fs_dual_avg_init(fs_dual_avg *da, double step_size, double delta);
/* Feeds one acceptance probability; returns the next step size to use. */
double fs_dual_avg_update(fs_dual_avg *da, double accept_prob);

/* A callback run by fs_hmc_run after each iteration (its trace row written
   and the step size adapted), without the GIL: e.g. an online trainer that
   absorbs the iteration's state or proposal and updates the drive
   potential's weights.  `iteration` counts from 0 within the fs_hmc_run
   call; `rng` is the chain's own stream (draws from it continue the chain's
   sequence); `proposal` is the iteration's proposal (dim values; its judge U
   is info->proposal_u).  Setting *refresh to 1 says the drive (or judge)
   potential changed: the loop then re-evaluates the current point
   (fs_hmc_point_init) before the next iteration; FS_REFRESH_DRIVE says only
   the drive changed (fs_hmc_point_refresh_drive: no judge evaluation).  A
   status other than FS_OK stops the run after this iteration (counted in
   *n_done) and is returned; positive values are free for the hook to mean "pause: the caller has work
   to do, then continues", negative ones are errors. */
#define FS_REFRESH_DRIVE 2

typedef int (*fs_hmc_hook_fn)(void *state, long iteration, fs_rng *rng,
                              const fs_hmc_info *info, const fs_hmc_point *cur,
                              const double *proposal, int *refresh);

typedef struct fs_hmc_hook {
    void *state;
    fs_hmc_hook_fn after_iteration;
    int status;   /* out: what the hook last returned (FS_OK if not called) */
} fs_hmc_hook;

/* n_iter transitions (fs_hmc_transition, or fs_nuts_transition when
   cfg->algorithm is FS_ALGORITHM_NUTS: then drive must be judge, else
   FS_EINVAL, and work must hold fs_nuts_workspace_size doubles; or, when
   cfg->surrogate_steps > 0, fs_surrogate_transition with that inner
   algorithm, and work must hold fs_surrogate_workspace_size doubles),
   storing draws and stats in `trace` row by row.
   With `adapt` non-NULL the step size follows dual averaging after every
   iteration (fed the inner kernels' mean acceptance with surrogate
   transitions: the step size is theirs) (cfg->step_size is the starting value; the final one is
   returned in *step_size_out when that is non-NULL).  Checks *stop before
   each iteration.  *n_done gets the number of completed iterations, also on
   error or interruption (FS_EINTERRUPT).  `hook` (NULL: none) runs after
   each iteration; see fs_hmc_hook_fn.  `metric` (NULL: none; needs a
   diagonal metric whose arrays it holds) adapts the metric from each
   iteration's state and its gradient (fs_adapt.h); after its first update
   the step size is searched again and dual averaging restarts from it. */
int fs_hmc_run(const fs_hmc_config *cfg, const fs_potential *drive,
               const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
               fs_dual_avg *adapt, long n_iter, const fs_hmc_trace *trace,
               double *FS_RESTRICT work, volatile const int *stop, long *n_done,
               double *step_size_out, fs_hmc_hook *hook, fs_metric_adapt *metric);

/* Stan's heuristic for an initial step size: double or halve the step until
   the acceptance probability of one leapfrog step crosses 0.8. */
int fs_hmc_find_step_size(const fs_hmc_config *cfg, const fs_potential *drive,
                          const fs_potential *judge, fs_rng *rng,
                          const fs_hmc_point *cur, double *FS_RESTRICT work,
                          double *step_size);

#ifdef __cplusplus
}
#endif
#endif /* FS_HMC_H */
