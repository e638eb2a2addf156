# Declarations of csrc/fs_transition.h, csrc/fs_hmc.h, csrc/fs_adapt.h,
# csrc/fs_nuts.h and csrc/fs_surrogate.h.
from libc.stdint cimport int8_t, int32_t
from fastsurrogate.core._common cimport fs_potential, fs_rng, fs_blas

cdef extern from "fs_transition.h" nogil:
    enum:
        FS_METRIC_UNIT
        FS_METRIC_DIAG
        FS_METRIC_DENSE
        FS_METRIC_LOW_RANK
        FS_LOW_RANK_MAX
    enum:
        FS_ALGORITHM_HMC
        FS_ALGORITHM_NUTS
    size_t FS_LOW_RANK_INV_SIZE(int dim, int rmax)
    size_t FS_LOW_RANK_CHOL_SIZE(int dim, int rmax)

    ctypedef struct fs_hmc_config:
        int dim
        double step_size
        int n_steps
        int random_n_steps
        int metric
        const double *inv_metric
        const double *metric_chol
        double max_energy_error
        int delayed_acceptance
        int algorithm
        int max_tree_depth
        int surrogate_steps

    ctypedef struct fs_hmc_point:
        double *q
        double *grad
        double u_judge
        double u_drive

    ctypedef struct fs_hmc_info:
        double accept_prob
        double energy_error
        double energy
        int accepted
        int divergent
        int n_steps
        int n_judge_evals
        int da_rejected
        double proposal_u
        int tree_depth
        double inner_accept_prob

    size_t fs_hmc_workspace_size(int dim)
    int fs_hmc_point_init(const fs_hmc_config *cfg, const fs_potential *drive,
                          const fs_potential *judge, fs_hmc_point *cur)
    int fs_hmc_point_refresh_drive(const fs_hmc_config *cfg, const fs_potential *drive,
                                   const fs_potential *judge, fs_hmc_point *cur)
    int fs_hmc_transition(const fs_hmc_config *cfg, const fs_potential *drive,
                          const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
                          double *work, fs_hmc_info *info)


cdef extern from "fs_hmc.h" nogil:
    ctypedef struct fs_hmc_trace:
        double *draws
        double *potential
        double *accept_prob
        double *energy_error
        double *energy
        double *step_size
        int8_t *accepted
        int8_t *divergent
        int32_t *n_steps
        int8_t *judge_evaluated
        double *proposals
        double *proposal_potential
        int8_t *tree_depth
        double *inner_accept_prob

    ctypedef struct fs_dual_avg:
        double mu, gamma, t0, kappa, delta
        double h_bar, log_eps, log_eps_bar
        double count

    enum: FS_REFRESH_DRIVE

    ctypedef int (*fs_hmc_hook_fn)(void *state, long iteration, fs_rng *rng,
                                   const fs_hmc_info *info, const fs_hmc_point *cur,
                                   const double *proposal, int *refresh) noexcept nogil

    ctypedef struct fs_hmc_hook:
        void *state
        fs_hmc_hook_fn after_iteration
        int status

    void fs_dual_avg_init(fs_dual_avg *da, double step_size, double delta)
    double fs_dual_avg_update(fs_dual_avg *da, double accept_prob)
    int fs_hmc_run(const fs_hmc_config *cfg, const fs_potential *drive,
                   const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
                   fs_dual_avg *adapt, long n_iter, const fs_hmc_trace *trace,
                   double *work, const int *stop, long *n_done,
                   double *step_size_out, fs_hmc_hook *hook, fs_metric_adapt *metric)
    int fs_hmc_find_step_size(const fs_hmc_config *cfg, const fs_potential *drive,
                              const fs_potential *judge, fs_rng *rng,
                              const fs_hmc_point *cur, double *work,
                              double *step_size)


cdef extern from "fs_adapt.h" nogil:
    ctypedef struct fs_metric_adapt:
        int dim
        int low_rank
        const fs_blas *blas
        double *inv_metric
        double *metric_chol
        double *stats
        double n_fg, n_bg, iteration, early_end, metric_end
        double early_switch, late_switch, n_updates
        double stop_early, n_block, n_prev, warmup_end, converged_at

    enum:
        FS_METRIC_ADAPT_COUNTERS
        FS_METRIC_ADAPT_FIRST
        FS_METRIC_ADAPT_FINAL_SET
        FS_METRIC_ADAPT_DONE
        FS_WARMUP_DONE
    size_t FS_METRIC_ADAPT_STATS(int dim, int low_rank)
    void fs_metric_adapt_init(fs_metric_adapt *a, long n_warmup, int stop_early,
                              const double *q, const double *g)
    int fs_metric_adapt_update(fs_metric_adapt *a, const double *q, const double *g,
                               int divergent)


cdef extern from "fs_nuts.h" nogil:
    enum:
        FS_NUTS_MAX_TREE_DEPTH

    size_t fs_nuts_workspace_size(int dim, int max_tree_depth)
    int fs_nuts_transition(const fs_hmc_config *cfg, const fs_potential *pot, fs_rng *rng,
                           fs_hmc_point *cur, double *work, fs_hmc_info *info)


cdef extern from "fs_surrogate.h" nogil:
    size_t fs_surrogate_workspace_size(int dim, int algorithm, int max_tree_depth)
    int fs_surrogate_transition(const fs_hmc_config *cfg, const fs_potential *drive,
                                const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
                                double *work, fs_hmc_info *info)


cdef class ChainHook:
    # A C callback that Chain.run calls after each iteration (fs_hmc_hook).
    # Subclasses point hook.state at their C state and hook.after_iteration
    # at a `noexcept nogil` function; they may override `check` to turn the
    # hook's negative statuses into exceptions with context.
    cdef fs_hmc_hook hook
