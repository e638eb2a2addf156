/* fs_compose.h: potentials built from other potentials.
 *
 * fs_weighted_sum: U(q) = sum_k w_k U_k(q).  Used for the regularised
 *   surrogate of VHMC (mu z(q) + (1 - mu) Laplace quadratic), for swapping the
 *   prior under a trained gradient network (net + new prior - old prior), and
 *   by users who combine a likelihood and a prior.  A term whose weight is
 *   exactly zero is not evaluated at all.  Thread-safe when every term is.
 *
 * fs_clamped_sum: a two-term weighted sum [z, L] whose first term is held
 *   at its value on a sphere around L's centre beyond it (below).  VHMC's
 *   surrogate: z counts where its training points are, and exp(-V) has L's
 *   tails beyond them.
 *
 * fs_trusted: a surrogate drive trusted only near its data: the surrogate's
 *   U and gradient inside an ellipsoid around its training points, the
 *   exact potential's beyond it (below).  RNS-HMC's and ARNS-HMC's drive.
 *
 * fs_recorder: evaluates an inner potential and stores every (q, grad U(q))
 *   it is asked for (and U(q) when that was computed too), up to a capacity.
 *   Driving a chain's leapfrog with a recorder collects the training set of
 *   NNgHMC: one point per leapfrog step, and RNS-HMC's (q, U) points along
 *   its exploration's trajectories.  With `decimate`, a full recorder keeps
 *   every other stored point and doubles `every`, so the stored points stay
 *   evenly spread over the whole stream in bounded memory (the points kept
 *   are those whose index in the stream of counted points is a multiple of
 *   `every`, whatever the capacity's history).  NOT thread-safe (one per
 *   chain).
 *
 * Plain C99, no Python.h.
 */
#ifndef FS_COMPOSE_H
#define FS_COMPOSE_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fs_weighted_sum {
    int dim;
    int n_terms;
    const fs_potential *terms;   /* n_terms potentials, each of dimension dim */
    const double *weights;       /* n_terms weights; read at every eval       */
    fs_pool pool;                /* dim doubles per slot: a term's gradient  */
} fs_weighted_sum;

/* Sets up the scratch pool; terms and weights are borrowed.  FS_EINVAL if
 * n_terms < 1, dim < 1 or a term's dimension differs from dim. */
int fs_weighted_sum_init(fs_weighted_sum *st, int dim, int n_terms,
                         const fs_potential *terms, const double *weights);
void fs_weighted_sum_free(fs_weighted_sum *st);
int fs_weighted_sum_eval(void *state, const double *q, double *value, double *grad);

/* fs_clamped_sum: V(q) = w_0 z(p(q)) + w_1 L(q), the terms and weights of a
 * weighted sum [z, L] (borrowed, with its scratch pool), L a quadratic with
 * its minimum base_min at `centre`, r(q) = sqrt(2 (L(q) - base_min)) the
 * distance from the centre in L's own metric, and p(q) = q inside the ball
 * r <= *radius, its radial projection onto the sphere r = R outside:
 * p(q) = centre + (R / r) (q - centre).  Beyond the ball z is frozen along
 * each ray at its value on the sphere, so V grows like w_1 L there and
 * exp(-V) is normalisable whatever z does away from its data.  V is
 * continuous; its gradient loses z's radial part across the sphere.
 * *radius is read at every evaluation (the owner may grow it between
 * evaluations).  Thread-safe when both terms are. */
typedef struct fs_clamped_sum {
    const fs_weighted_sum *sum;  /* n_terms == 2: [z, L]                    */
    const double *centre;        /* dim: the minimum of L                   */
    double base_min;             /* L(centre)                               */
    const double *radius;        /* R >= 0                                  */
} fs_clamped_sum;

int fs_clamped_sum_eval(void *state, const double *q, double *value, double *grad);

/* fs_trusted: V(q) = S(q) where r(q) <= *radius, U(q) beyond, with
 * r(q) = |W (q - centre)|, W lower triangular (dim x dim, row-major; only
 * its lower triangle is read), so r is a Mahalanobis distance when
 * W^T W is an inverse covariance.  The leapfrog with any force that is a
 * function of q alone is volume-preserving and reversible, so an HMC chain
 * driven by V and judged by the exact U stays exact; V merely sends the
 * trajectory by the exact gradient where the surrogate S has no data.  V
 * jumps across the sphere by S's error there.  *radius is read at every
 * evaluation.  n_exact and n_surrogate count the evaluations made by each
 * (plain counters: give each chain its own fs_trusted when the counts
 * matter); thread-safe otherwise when both potentials are. */
typedef struct fs_trusted {
    fs_potential surrogate;
    fs_potential exact;
    const double *centre;        /* dim                                     */
    const double *whiten;        /* dim x dim, lower triangle read          */
    const double *radius;        /* R >= 0                                  */
    long n_exact;
    long n_surrogate;
} fs_trusted;

/* r(q)^2 = |W (q - centre)|^2, O(dim^2), no scratch. */
double fs_trusted_distance2(const fs_trusted *st, const double *q);
int fs_trusted_eval(void *state, const double *q, double *value, double *grad);

typedef struct fs_recorder {
    fs_potential inner;
    long capacity;     /* rows of the buffers                                  */
    long count;        /* rows stored                                          */
    long seen;         /* gradient evaluations made (stored or not)            */
    long every;        /* store one gradient evaluation in `every` (>= 1)      */
    int active;        /* 0: pass through without storing                      */
    int decimate;      /* 1: when full, keep every other point, double `every`  */
    int need_value;    /* 1: U with every stored point (asked of the inner
                          potential when the caller wanted the gradient only) */
    double *q_buf;     /* capacity * dim                                       */
    double *g_buf;     /* capacity * dim                                       */
    double *u_buf;     /* capacity: U at the point, NaN when it was not asked   */
    double *value_grad;/* dim doubles, or NULL: when set, a value-only call asks
                          the inner potential for the gradient too (into this
                          scratch) and is counted and stored like a gradient
                          call (the training points of a surrogate's exact
                          corrections, for about the price of the value)     */
} fs_recorder;

/* Evaluates the inner potential; when a gradient was asked for (or a value,
 * with `value_grad` set), the result is finite and the recorder is active,
 * the point is counted in `seen` and
 * every `every`-th one is stored while count < capacity (with decimate:
 * always, halving the stored set first when it is full; capacity must then
 * be >= 2).  With need_value, U is computed at a point to be stored even
 * when the caller asked for the gradient only (once per stored point), and
 * the point is counted only if U is finite too. */
int fs_recorder_eval(void *state, const double *q, double *value, double *grad);

#ifdef __cplusplus
}
#endif
#endif /* FS_COMPOSE_H */
