/* fs_rmhmc.h: Riemannian-manifold HMC (Girolami & Calderhead 2011) with the
 * generalized leapfrog, and the whole chain loop, in C.
 *
 * H(q, p) = U(q) + 1/2 log det G(q) + 1/2 p^T G(q)^{-1} p     (RNS-HMC paper eq. 5)
 * dH/dq_k = dU/dq_k + 1/2 tr(G^{-1} dG_k) - 1/2 u^T dG_k u,  u = G^{-1} p
 * One generalized leapfrog step of size eps (eq. 7-9):
 *   p' = p - eps/2 dH/dq(q, p')                     implicit in p'   (eq. 7)
 *   q' = q + eps/2 [G(q)^{-1} + G(q')^{-1}] p'      implicit in q'   (eq. 8)
 *   p'' = p' - eps/2 dH/dq(q', p')                  explicit         (eq. 9)
 * The implicit updates are solved by fixed-point iteration: at most
 * cfg->max_fixed_point iterations, converged when the largest change of an
 * iterate is <= fixed_point_tol * (1 + its largest entry).  A trajectory
 * whose fixed point does not converge is a divergence (rejected, counted).
 * The step is symmetric and volume preserving (to the fixed-point tolerance).
 *
 * Two potentials and two metrics, as in fs_transition.h: `drive` and `dmetric`
 * move the trajectory; `judge` and `jmetric` (NULL: dmetric) give the
 * Hamiltonian of the Metropolis test, with the momentum drawn from
 * N(0, G_judge(q)).  RNS-RMHMC drives with the surrogate and its metric and
 * judges with the exact U and the exact metric; the step is still a
 * reversible volume-preserving map, so the chain targets exp(-U_judge).
 *
 * Metric G is factored (Cholesky) once per evaluation; G^{-1} is formed
 * from the factor (dim^3, small next to a data pass).  With a metric that
 * has a product (fs_metric.h matvec), eq. 8 needs one G(q')v per iterate
 * (Richardson preconditioned by G(q), the same fixed point) and G itself
 * only once per step, at the converged q'; should that iteration not
 * converge, the step falls back to a whole G per iterate.
 */
#ifndef FS_RMHMC_H
#define FS_RMHMC_H

#include "fs_common.h"
#include "fs_potential.h"
#include "fs_metric.h"
#include "fs_hmc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returned by the leapfrog (never by the run) when a fixed point did not converge. */
#define FS_RMHMC_NOT_CONVERGED 1

typedef struct fs_rmhmc_config {
    int dim;
    double step_size;
    int n_steps;              /* L >= 1                                       */
    int random_n_steps;       /* 1: L_t uniform on 1..n_steps                  */
    double max_energy_error;  /* dH above this is a divergence                 */
    int max_fixed_point;      /* iterations per implicit update (>= 1)         */
    double fixed_point_tol;   /* relative tolerance of the fixed point (> 0)   */
    int overlap;              /* 1: fs_rmhmc_run overlaps the judge (below)    */
} fs_rmhmc_config;

/* Everything known at a position.  Arrays belong to the caller; sizes:
   q, grad, tr: dim; L, Ginv, Lj: dim*dim (Lj only with a separate judge metric). */
typedef struct fs_rmhmc_point {
    double *q, *grad, *L, *Ginv, *tr;
    double logdet;        /* log det G_drive(q)                                */
    double u_drive;       /* drive U(q)                                        */
    double u_judge;       /* judge U(q)                                        */
    double *Lj;           /* lower Cholesky factor of G_judge(q)               */
    double logdet_judge;
} fs_rmhmc_point;

/* What a transition reports beyond fs_hmc_info. */
typedef struct fs_rmhmc_info {
    fs_hmc_info hmc;
    int not_converged;    /* 1 when a fixed point failed (also divergent)      */
    int fixed_point_iterations;  /* iterations of both implicit updates, summed */
} fs_rmhmc_info;

/* Doubles of workspace for fs_rmhmc_transition / _run / _find_step_size. */
size_t fs_rmhmc_workspace_size(int dim);

/* Evaluates everything at cur->q.  jmetric NULL: the drive metric judges.
   FS_ENONFINITE when a value is not finite, FS_ESINGULAR when a metric is
   not positive definite. */
int fs_rmhmc_point_init(const fs_rmhmc_config *cfg, const fs_potential *drive,
                        const fs_metric *dmetric, const fs_potential *judge,
                        const fs_metric *jmetric, fs_rmhmc_point *cur,
                        double *FS_RESTRICT work);

/* n_steps generalized leapfrog steps of size eps (eq. 7-9) from pt (q,
   grad, L, Ginv, tr, logdet at q) and momentum p, updated in place; the
   drive value at the end goes to pt->u_drive.  work: fs_rmhmc_workspace_size.
   *fp_iter (may be NULL) adds the fixed-point iterations made.
   Returns FS_OK, FS_RMHMC_NOT_CONVERGED, FS_ENONFINITE / FS_ESINGULAR
   (divergences) or a potential's / metric's error code. */
int fs_rmhmc_leapfrog(const fs_rmhmc_config *cfg, double eps, int n_steps,
                      const fs_potential *drive, const fs_metric *metric,
                      fs_rmhmc_point *pt, double *FS_RESTRICT p,
                      double *FS_RESTRICT work, int *fp_iter);

/* One RMHMC transition: p ~ N(0, G_judge(q)), the trajectory, the Metropolis
   test with H_judge = U_judge + 1/2 log det G_judge + 1/2 p^T G_judge^{-1} p.
   Random numbers, in this order whatever happens: the number of steps (with
   random_n_steps), dim normals, the test's uniform (also after a divergence). */
int fs_rmhmc_transition(const fs_rmhmc_config *cfg, const fs_potential *drive,
                        const fs_metric *dmetric, const fs_potential *judge,
                        const fs_metric *jmetric, fs_rng *rng, fs_rmhmc_point *cur,
                        double *FS_RESTRICT work, fs_rmhmc_info *info);

/* n_iter transitions into `trace` (fs_hmc.h; tree_depth gets 0), dual
   averaging of the step size when adapt is non-NULL, *stop checked before
   each iteration; *n_done and *n_not_converged (may be NULL; incremented)
   as for fs_hmc_run.
   With cfg->overlap, no adaptation, a judge potential apart from the drive
   and the drive's metric judging (jmetric NULL), the judge's U at each
   proposal is evaluated on a second thread (OpenMP) while the calling
   thread runs the next trajectory from that proposal, kept when the
   proposal is accepted (pre-fetching, Brockwell 2006).  The chain is the
   serial one bit for bit: each transition draws its random numbers in a
   fixed order (fs_rmhmc.c).  The judge must then be safe to call from
   another thread while the drive and its metric run; it runs on one
   thread (nested OpenMP regions are inactive). */
int fs_rmhmc_run(const fs_rmhmc_config *cfg, const fs_potential *drive,
                 const fs_metric *dmetric, const fs_potential *judge,
                 const fs_metric *jmetric, fs_rng *rng, fs_rmhmc_point *cur,
                 fs_dual_avg *adapt, long n_iter, const fs_hmc_trace *trace,
                 double *FS_RESTRICT work, volatile const int *stop, long *n_done,
                 double *step_size_out, long *n_not_converged);

/* Stan's initial step-size heuristic with one generalized leapfrog step. */
int fs_rmhmc_find_step_size(const fs_rmhmc_config *cfg, const fs_potential *drive,
                            const fs_metric *dmetric, const fs_potential *judge,
                            const fs_metric *jmetric, fs_rng *rng,
                            const fs_rmhmc_point *cur, double *FS_RESTRICT work,
                            double *step_size);

/* Lower Cholesky factor of the symmetric dim*dim row-major A in place (the
   upper triangle is zeroed), with *logdet = log det A.  FS_ESINGULAR when A
   is not (numerically) positive definite.  Exposed for tests. */
int fs_rmhmc_cholesky(double *A, int dim, double *logdet);

#ifdef __cplusplus
}
#endif
#endif /* FS_RMHMC_H */
