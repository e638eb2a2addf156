/* fs_transition.h: one HMC transition and what every transition shares: the
 * configuration, the chain's point and the report of a transition
 * (fs_hmc_config, fs_hmc_point, fs_hmc_info), the metrics, the momentum
 * and the leapfrog.  The NUTS transition (fs_nuts.h), surrogate
 * transitions (fs_surrogate.h) and the chain loop (fs_hmc.h) build on it.
 *
 * A transition takes two potentials: `drive`, whose gradient moves the
 * leapfrog trajectory, and `judge`, whose value enters the Metropolis test.
 * Exact HMC passes the same potential twice (its value at the end of the
 * trajectory then comes with the last gradient, for free).  Surrogate
 * samplers pass a surrogate as `drive` and the exact model as `judge`
 * (RNS-HMC, NNgHMC), or the surrogate as both (VHMC).
 *
 * Delayed acceptance (optional): a proposal first faces a Metropolis test
 * with the drive Hamiltonian; only if it passes is the judge evaluated, and
 * a second test with ratio exp(-(dH_judge - dH_drive)) keeps the chain exact
 * for the judge target.
 */
#ifndef FS_TRANSITION_H
#define FS_TRANSITION_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { FS_METRIC_UNIT = 0, FS_METRIC_DIAG = 1, FS_METRIC_DENSE = 2, FS_METRIC_LOW_RANK = 3 };

/* A low-rank-plus-diagonal metric, M^{-1} = D (I + U (L - 1) U^T) D with
   D = diag(sigma) and r orthonormal columns U, kept factored: every
   product costs O(dim r).  Its inv_metric buffer holds, in order, sigma
   (dim), r and rmax (one double each), the eigenvalues L (rmax, the
   first r used) and the columns of U (rmax * dim, column after column);
   its metric_chol buffer 1 / sigma (dim) and L^{-1/2} - 1 (rmax), so that
   p = D^{-1} (I + U (L^{-1/2} - 1) U^T) z ~ N(0, M). */
#define FS_LOW_RANK_MAX 160   /* largest r (two adaptation windows of states) */
#define FS_LOW_RANK_INV_SIZE(dim, rmax) \
    ((size_t)(dim) + 2 + (size_t)(rmax) + (size_t)(rmax) * (size_t)(dim))
#define FS_LOW_RANK_CHOL_SIZE(dim, rmax) ((size_t)(dim) + (size_t)(rmax))
enum { FS_ALGORITHM_HMC = 0, FS_ALGORITHM_NUTS = 1 };

typedef struct fs_hmc_config {
    int dim;
    double step_size;
    int n_steps;               /* L >= 1                                        */
    int random_n_steps;        /* 1: L_t uniform on 1..n_steps each iteration   */
    int metric;                /* FS_METRIC_*                                   */
    /* DIAG: dim values of M^{-1}; DENSE: dim*dim row-major M^{-1};
       LOW_RANK: see FS_LOW_RANK_INV_SIZE.                                      */
    const double *inv_metric;
    /* DIAG: dim values sqrt(M_jj); DENSE: dim*dim row-major lower Cholesky
       factor L of M (M = L L^T), so that p = L z ~ N(0, M); LOW_RANK: see
       FS_LOW_RANK_CHOL_SIZE.                                                  */
    const double *metric_chol;
    double max_energy_error;   /* dH above this is a divergence (Stan: 1000)    */
    int delayed_acceptance;    /* 1: first-stage test with the drive Hamiltonian */
    int algorithm;             /* FS_ALGORITHM_*: the transition fs_hmc_run makes */
    int max_tree_depth;        /* NUTS: at most 2^max_tree_depth - 1 steps (1..30) */
    /* > 0: surrogate transitions (fs_surrogate.h): each iteration makes this
       many `algorithm` transitions on the drive alone, then one exact test
       with the judge.  0: the plain transition.                            */
    int surrogate_steps;
} fs_hmc_config;

/* The chain's current state, owned by the caller. */
typedef struct fs_hmc_point {
    double *q;          /* dim: position                                        */
    double *grad;       /* dim: drive gradient at q                             */
    double u_judge;     /* judge U at q                                         */
    double u_drive;     /* drive U at q (used by delayed acceptance only)       */
} fs_hmc_point;

/* What one transition reports. */
typedef struct fs_hmc_info {
    double accept_prob;   /* min(1, exp(-dH)) of the (last) test made          */
    double energy_error;  /* judge H(proposal) - H(start); NaN if not computed  */
    double energy;        /* judge H of the state kept                          */
    int accepted;
    int divergent;
    int n_steps;
    int n_judge_evals;    /* judge evaluations made (0 when DA rejected early)  */
    double proposal_u;    /* judge U at the proposal; NaN if not evaluated     */
    int da_rejected;      /* rejected at the first (drive) stage                */
    int tree_depth;       /* NUTS: doublings of the trajectory; 0 for HMC       */
    double inner_accept_prob; /* surrogate transitions: the inner kernels' mean
                                 acceptance (set by fs_surrogate_transition only) */
} fs_hmc_info;

/* Doubles of workspace that fs_hmc_transition (and fs_hmc_run, fs_hmc.h) need. */
size_t fs_hmc_workspace_size(int dim);

/* Evaluates judge U and the drive gradient at cur->q (and the drive U when
   drive == judge, with delayed acceptance or with surrogate transitions).  Returns FS_ENONFINITE when
   any of them is not finite. */
int fs_hmc_point_init(const fs_hmc_config *cfg, const fs_potential *drive,
                      const fs_potential *judge, fs_hmc_point *cur);

/* After the drive potential changed (an online surrogate took new weights)
   and the judge did not: re-evaluate only the drive at cur->q (its gradient,
   and its value when a transition uses it), so that the next trajectory
   starts from the drive's own gradient and stays reversible; u_judge is kept.
   When drive and judge are the same potential, fs_hmc_point_init. */
int fs_hmc_point_refresh_drive(const fs_hmc_config *cfg, const fs_potential *drive,
                               const fs_potential *judge, fs_hmc_point *cur);

/* One HMC transition from cur (updated in place on acceptance).
   The proposal's position is left in work[2*dim .. 3*dim) and its judge U
   in info->proposal_u.
   Potential errors other than FS_ENONFINITE stop it and are returned with
   cur unchanged; non-finite values or gradients are divergences. */
int fs_hmc_transition(const fs_hmc_config *cfg, const fs_potential *drive,
                      const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
                      double *FS_RESTRICT work, fs_hmc_info *info);

/* ---- building blocks shared with fs_nuts.c and fs_hmc.c ----------------- */

/* Kinetic energy 0.5 p^T M^{-1} p, velocity v = M^{-1} p into v. */
double fs_hmc_kinetic(const fs_hmc_config *cfg, const double *p, double *FS_RESTRICT v);

/* Velocity v = M^{-1} p. */
void fs_hmc_velocity(const fs_hmc_config *cfg, const double *p, double *FS_RESTRICT v);

/* A momentum p ~ N(0, M) (z: dim doubles of scratch, used by DENSE). */
void fs_hmc_draw_momentum(const fs_hmc_config *cfg, fs_rng *rng, double *FS_RESTRICT p,
                          double *FS_RESTRICT z);

/* 1 when all n values are finite. */
int fs_hmc_all_finite(const double *x, int n);

/* 1 when a and b are the same potential (the same struct, or the same
   function on the same state): drive == judge, exact HMC. */
int fs_hmc_same_potential(const fs_potential *a, const fs_potential *b);

/* n_steps leapfrog steps of size eps (negative: backward in time) from
   (q, p) with drive gradient g at q, all updated in place; v is scratch.
   With want_value, the drive value at the final position goes to *u_end.
   Returns FS_OK, FS_ENONFINITE (non-finite gradient or value: a divergence)
   or a potential's error code. */
int fs_hmc_leapfrog(const fs_hmc_config *cfg, double eps, int n_steps,
                    const fs_potential *drive, double *FS_RESTRICT q,
                    double *FS_RESTRICT g, double *FS_RESTRICT p,
                    double *FS_RESTRICT v, int want_value, double *u_end);

#ifdef __cplusplus
}
#endif
#endif /* FS_TRANSITION_H */
