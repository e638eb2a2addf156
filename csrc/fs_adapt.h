/* fs_adapt.h: a diagonal mass matrix adapted from draws and gradients.
 *
 * The estimate is the diagonal metric that minimises the Fisher divergence
 * between the target and a Gaussian with that covariance, restricted to
 * diagonals: M^{-1}_jj = sqrt(Var(q_j) / Var(dU/dq_j)).  For a Gaussian
 * target the ratio is the variance itself; away from Gaussianity the
 * gradients carry information about the scale that the draws alone need
 * many more iterations to show (Seyboldt, Carlson & Carpenter 2026,
 * nutpie's adaptation).
 *
 * The schedule is nutpie's: two running estimators fed with every
 * non-divergent warm-up state, a foreground one that sets the metric after
 * every iteration and a background one that replaces it after `switch`
 * states (10 in the early part of the warm-up, 80 later), so the metric
 * always rests on the last 1-2 windows and forgets the start; the metric is
 * frozen for the last part of the warm-up, where only the step size adapts.
 * The chain loop (fs_hmc_run) calls fs_metric_adapt_update after each
 * iteration and re-runs the step-size heuristic after the first update.
 *
 * Low rank (low_rank = 1): at each switch the metric is rebuilt from the
 * foreground's states (the window just completed and the one before it,
 * up to 160 states).  With D = diag(sigma), sigma_j^2 the
 * diagonal estimate above, the window is scaled (q - mean) / sigma and
 * (g - mean) * sigma; in the span of those scaled draws and gradients the
 * covariance S that minimises the Fisher divergence of a Gaussian solves
 * S B S = A (A, B: the scaled draws' and gradients' covariances, each plus
 * 1e-3 I), S = B^{-1/2} (B^{1/2} A B^{1/2})^{1/2} B^{-1/2}; its eigenpairs
 * (lambda, u) outside [1/2, 2] (at most 160, the furthest from 1 first)
 * give M^{-1} = D (I + sum (lambda - 1) u u^T) D
 * (nutpie's low-rank modified mass matrix; elsewhere the diagonal), kept
 * factored (FS_METRIC_LOW_RANK in fs_transition.h: O(dim r) per product).
 *
 * The end of the warm-up (stop_early = 1).  Because the metric always rests
 * on the last one or two windows, a longer warm-up does not give it more
 * data: once the chain is stationary, later windows only draw the same
 * estimate again.  So the states are also cut into consecutive blocks of
 * FS_METRIC_ADAPT_WINDOW states, and at the end of each block its diagonal
 * estimate sqrt(Var q_j / Var g_j) is compared with the previous block's.
 * When no coordinate differs by more than a factor FS_METRIC_ADAPT_AGREE
 * the two blocks are taken to come from the same (stationary) distribution:
 * the metric is set from the two blocks together (160 states, as a late
 * switch would) and frozen; the warm-up then ends with the fixed
 * schedule's last phase (15 % of n_warmup), in which only the step size
 * adapts: the agreement cuts the metric's part of the warm-up short.  A chain still
 * on its way to the typical set gives blocks whose estimates differ by far
 * more than sampling noise.  Measured with the default NUTS, 4 chains x
 * (1000 + 1000), seed 1, blocks of 80 iterations, the largest coordinate's
 * factor between the first two blocks: 1.5 to 4e5 on sblrc, garch11, arK,
 * gp_regr and Bank Marketing (eight schools, which starts near its typical
 * set, 1.06 to 2.3); between later blocks 1.01 to 4.2, mostly below 1.6.
 * Without agreement the schedule runs to n_warmup as above.
 */
#ifndef FS_ADAPT_H
#define FS_ADAPT_H

#include "fs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The late switch interval (states); the low-rank estimate keeps up to two
   such windows of states. */
#define FS_METRIC_ADAPT_WINDOW 80
/* Agreement of two blocks: no diagonal estimate differs by more than this
   factor.  Then the warm-up's last phase, as long as the fixed schedule's
   (the last 15 % of n_warmup), adapts the step size alone; its dual
   averaging goes on.  Shorter, or restarted, it left step sizes too small:
   the sampling phase's mean acceptance was 0.84-0.92 (50 iterations, Stan's
   last window; a9a 0.91) against the target 0.8, 0.83-0.85 with 150. */
#define FS_METRIC_ADAPT_AGREE 2.0
/* Doubles of `stats` the estimator needs (low rank: the states too, of the
   foreground and of the last two blocks). */
#define FS_METRIC_ADAPT_STATS(dim, low_rank) \
    (16 * (size_t)(dim) + ((low_rank) ? 8 * (size_t)(dim) * FS_METRIC_ADAPT_WINDOW : 0))
/* Number of double counters of the struct (a checkpoint's state). */
#define FS_METRIC_ADAPT_COUNTERS 13

/* fs_metric_adapt_update's non-negative results. */
#define FS_METRIC_ADAPT_FIRST 1     /* the first update: search a step size */
#define FS_METRIC_ADAPT_FINAL_SET 2 /* blocks agree: the final metric is set */
#define FS_METRIC_ADAPT_DONE 3      /* the warm-up is over                    */
/* The chain loop's status (positive: a pause) when the warm-up ended early. */
#define FS_WARMUP_DONE 1000

typedef struct fs_metric_adapt {
    int dim;
    int low_rank;          /* 0: diagonal; 1: low rank plus diagonal (dense)   */
    const fs_blas *blas;   /* low rank: dsyev                                   */
    /* diagonal: dim values M^{-1}_jj and sqrt(M_jj); low rank: the buffers
       of FS_METRIC_LOW_RANK (fs_transition.h), rmax set by the caller.  Written
       here. */
    double *inv_metric;
    double *metric_chol;
    /* FS_METRIC_ADAPT_STATS(dim) doubles: foreground then background, each
       mean(q), sum of squared deviations of q, mean(g), the same for g
       (Welford's running sums); then the current and the previous block,
       the same sums; low rank: then the foreground's states, q then g,
       2 * dim doubles each (2 * FS_METRIC_ADAPT_WINDOW of them), then the
       previous and the current block's states, the same way.             */
    double *stats;
    double n_fg, n_bg;     /* states in each estimator                         */
    double iteration;      /* warm-up iterations seen                          */
    double early_end;      /* iterations with the short switch interval        */
    double metric_end;     /* iteration from which the metric is frozen        */
    double early_switch;   /* background size that triggers a switch, early   */
    double late_switch;    /* the same after early_end                         */
    double n_updates;      /* metric updates made                              */
    double stop_early;     /* 1: end when two blocks agree                      */
    double n_block;        /* states in the current block                      */
    double n_prev;         /* states in the previous block (0: none yet)       */
    double warmup_end;     /* the warm-up's last iteration + 1 (n_warmup, or
                              earlier once two blocks agree)                   */
    double converged_at;   /* iterations when they agreed (-1: not yet)        */
} fs_metric_adapt;

/* Sets the schedule for a warm-up of n_warmup iterations (nutpie's shares:
   the first 30 % early, the last 15 % with a frozen metric; switches after
   10 and 80 states), clears both estimators, feeds them the starting point
   (q, g) and sets the first metric from the gradient alone,
   M^{-1}_jj = 1 / |g_j| (1 where g_j is 0 or not finite), clamped to
   [1e-20, 1e20].  With stop_early the warm-up may end before n_warmup
   (see above).  The caller has set dim, low_rank, blas, inv_metric,
   metric_chol, stats. */
void fs_metric_adapt_init(fs_metric_adapt *a, long n_warmup, int stop_early,
                          const double *q, const double *g);

/* Feeds one warm-up state (skipped when `divergent`), switches the
   estimators when due, and sets the metric: diagonal, from the foreground
   estimator after every state (once it holds at least 3, until
   metric_end); low rank, from the finished window at each switch; with
   stop_early, compares the blocks.  Returns FS_METRIC_ADAPT_FIRST when this
   was the first update of the metric (the caller then searches a new step
   size), FS_METRIC_ADAPT_FINAL_SET when two blocks agreed (the metric is
   final; the step size keeps adapting), FS_METRIC_ADAPT_DONE after the warm-up's last
   iteration when it ended early, 0 otherwise, or FS_ENOMEM / FS_ELAPACK
   (the metric is then unchanged). */
int fs_metric_adapt_update(fs_metric_adapt *a, const double *q, const double *g,
                           int divergent);

#ifdef __cplusplus
}
#endif

#endif /* FS_ADAPT_H */
