/* fs_nuts.c: Stan's multinomial No-U-Turn transition (see fs_nuts.h).
 *
 * Names follow Stan's base_nuts: "fwd"/"bck" are the two ends of the
 * trajectory, "beg"/"end" the first and last point of a subtree in the
 * direction it was built, p_sharp = M^{-1} p, rho = the sum of the momenta
 * of a (sub)trajectory.  The recursion builds a subtree of 2^depth steps as
 * two subtrees of 2^(depth-1); level k > 0 keeps its scratch in frame k of
 * the workspace, and candidate samples move between levels by swapping
 * buffers, never by copying.
 */
#include <math.h>
#include <string.h>

#include "fs_nuts.h"

/* A point the integrator moves: position, momentum, gradient and U. */
typedef struct nuts_point {
    double *q, *p, *g;
    double u;
} nuts_point;

/* A candidate sample: position, gradient, U and H (with its momentum). */
typedef struct nuts_sample {
    double *q, *g;
    double u, h;
} nuts_sample;

/* Scratch of one recursion level: the inner ends and momentum sums of its
   two halves, and the sample drawn from the second half. */
typedef struct nuts_frame {
    double *p_init_end, *p_sharp_init_end, *rho_init;
    double *p_final_beg, *p_sharp_final_beg, *rho_final;
    nuts_sample propose_final;
} nuts_frame;

#define FRAME_DOUBLES 8   /* per dim: six vectors and a sample's q and g */

typedef struct nuts_tree {
    const fs_hmc_config *cfg;
    const fs_potential *pot;
    fs_rng *rng;
    double eps;              /* signed step: > 0 forward, < 0 backward */
    double h0;               /* H at the start of the transition       */
    double *v;               /* dim doubles of scratch                 */
    nuts_frame *frames;      /* frames[k] for levels k = 1 .. depth-1  */
    int n_leapfrog;
    double sum_metro_prob;
    int divergent;
    int status;              /* a potential's error other than ENONFINITE */
} nuts_tree;

static double log_sum_exp(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* The generalized no-U-turn criterion for the momentum sum rho = x + y
   (y may be NULL): both end velocities keep a positive projection on rho. */
static int no_uturn(const double *p_sharp_minus, const double *p_sharp_plus,
                    const double *x, const double *y, int d)
{
    double a = 0.0, b = 0.0;
    int i;
    if (y == NULL) {
        for (i = 0; i < d; i++) { a += p_sharp_minus[i] * x[i]; b += p_sharp_plus[i] * x[i]; }
    } else {
        for (i = 0; i < d; i++) {
            const double r = x[i] + y[i];
            a += p_sharp_minus[i] * r;
            b += p_sharp_plus[i] * r;
        }
    }
    return a > 0.0 && b > 0.0;
}

static void swap_samples(nuts_sample *a, nuts_sample *b)
{
    nuts_sample t = *a;
    *a = *b;
    *b = t;
}

static void copy_vec(double *dst, const double *src, int d)
{
    memcpy(dst, src, sizeof(double) * (size_t)d);
}

/* Builds a subtree of 2^depth leapfrog steps of t->eps from z (moved to its
   far end).  Out: its sample in *propose, the velocities and momenta of its
   first and last points, its momentum sum added to rho, its log weight
   log-sum-exp'ed into *log_sum_weight.  Returns 0 when the subtree is to be
   rejected (a U-turn inside it, a divergence, or t->status set). */
static int build_tree(nuts_tree *t, int depth, nuts_point *z, nuts_sample *propose,
                      double *p_sharp_beg, double *p_sharp_end, double *rho,
                      double *p_beg, double *p_end, double *log_sum_weight)
{
    const int d = t->cfg->dim;
    int i;

    if (depth == 0) {
        double u = NAN, h;
        const int status = fs_hmc_leapfrog(t->cfg, t->eps, 1, t->pot, z->q, z->g, z->p,
                                           t->v, 1, &u);
        t->n_leapfrog++;
        if (status == FS_OK) {
            h = u + fs_hmc_kinetic(t->cfg, z->p, p_sharp_beg);
            if (h != h) h = INFINITY;
        } else if (status == FS_ENONFINITE) {
            h = INFINITY;
        } else {
            t->status = status;
            return 0;
        }
        z->u = u;
        if (h - t->h0 > t->cfg->max_energy_error) t->divergent = 1;
        *log_sum_weight = log_sum_exp(*log_sum_weight, t->h0 - h);
        t->sum_metro_prob += t->h0 - h > 0.0 ? 1.0 : exp(t->h0 - h);
        if (t->divergent) return 0;
        copy_vec(propose->q, z->q, d);
        copy_vec(propose->g, z->g, d);
        propose->u = u;
        propose->h = h;
        copy_vec(p_sharp_end, p_sharp_beg, d);
        copy_vec(p_beg, z->p, d);
        copy_vec(p_end, z->p, d);
        for (i = 0; i < d; i++) rho[i] += z->p[i];
        return 1;
    }

    {
        nuts_frame *f = &t->frames[depth];
        double lsw_init = -INFINITY, lsw_final = -INFINITY, lsw_subtree;
        int ok;

        memset(f->rho_init, 0, sizeof(double) * (size_t)d);
        if (!build_tree(t, depth - 1, z, propose, p_sharp_beg, f->p_sharp_init_end,
                        f->rho_init, p_beg, f->p_init_end, &lsw_init))
            return 0;
        memset(f->rho_final, 0, sizeof(double) * (size_t)d);
        if (!build_tree(t, depth - 1, z, &f->propose_final, f->p_sharp_final_beg, p_sharp_end,
                        f->rho_final, f->p_final_beg, p_end, &lsw_final))
            return 0;

        /* multinomial (uniform progressive) sample within the subtree */
        lsw_subtree = log_sum_exp(lsw_init, lsw_final);
        *log_sum_weight = log_sum_exp(*log_sum_weight, lsw_subtree);
        if (lsw_final > lsw_subtree
            || t->rng->uniform(t->rng->state) < exp(lsw_final - lsw_subtree))
            swap_samples(propose, &f->propose_final);

        /* U-turn over the subtree, and across its halves with one more point */
        ok = no_uturn(p_sharp_beg, p_sharp_end, f->rho_init, f->rho_final, d)
             && no_uturn(p_sharp_beg, f->p_sharp_final_beg, f->rho_init, f->p_final_beg, d)
             && no_uturn(f->p_sharp_init_end, p_sharp_end, f->rho_final, f->p_init_end, d);
        for (i = 0; i < d; i++) rho[i] += f->rho_init[i] + f->rho_final[i];
        return ok;
    }
}

size_t fs_nuts_workspace_size(int dim, int max_tree_depth)
{
    const size_t d = (size_t)(dim > 0 ? dim : 1);
    const size_t levels = (size_t)(max_tree_depth < 1 ? 1
                                   : max_tree_depth > FS_NUTS_MAX_TREE_DEPTH
                                   ? FS_NUTS_MAX_TREE_DEPTH : max_tree_depth);
    return (24 + FRAME_DOUBLES * (levels - 1)) * d;
}

int fs_nuts_transition(const fs_hmc_config *cfg, const fs_potential *pot, fs_rng *rng,
                       fs_hmc_point *cur, double *FS_RESTRICT work, fs_hmc_info *info)
{
    const int d = cfg->dim;
    const int max_depth = cfg->max_tree_depth;
    nuts_frame frames[FS_NUTS_MAX_TREE_DEPTH];
    nuts_tree t;
    nuts_point fwd, bck;
    nuts_sample sample, propose;
    double *w = work;
    double *z_scratch, *proposal_out;
    double *p_fwd_fwd, *p_sharp_fwd_fwd, *p_fwd_bck, *p_sharp_fwd_bck;
    double *p_bck_fwd, *p_sharp_bck_fwd, *p_bck_bck, *p_sharp_bck_bck;
    double *rho, *rho_fwd, *rho_bck;
    double log_sum_weight = 0.0;  /* log weight of the starting point: H0 - H0 */
    int depth = 0, moved = 0, k, i;

    if (d < 1 || max_depth < 1 || max_depth > FS_NUTS_MAX_TREE_DEPTH || d != pot->dim)
        return FS_EINVAL;

    /* carve the workspace; the first three blocks match fs_hmc_transition's */
    t.v = w;                 w += d;
    z_scratch = w;           w += d;
    proposal_out = w;        w += d;
    fwd.q = w;               w += d;
    fwd.p = w;               w += d;
    fwd.g = w;               w += d;
    bck.q = w;               w += d;
    bck.p = w;               w += d;
    bck.g = w;               w += d;
    sample.q = w;            w += d;
    sample.g = w;            w += d;
    propose.q = w;           w += d;
    propose.g = w;           w += d;
    p_fwd_fwd = w;           w += d;
    p_sharp_fwd_fwd = w;     w += d;
    p_fwd_bck = w;           w += d;
    p_sharp_fwd_bck = w;     w += d;
    p_bck_fwd = w;           w += d;
    p_sharp_bck_fwd = w;     w += d;
    p_bck_bck = w;           w += d;
    p_sharp_bck_bck = w;     w += d;
    rho = w;                 w += d;
    rho_fwd = w;             w += d;
    rho_bck = w;             w += d;
    for (k = 1; k < max_depth; k++) {
        nuts_frame *f = &frames[k];
        f->p_init_end = w;          w += d;
        f->p_sharp_init_end = w;    w += d;
        f->rho_init = w;            w += d;
        f->p_final_beg = w;         w += d;
        f->p_sharp_final_beg = w;   w += d;
        f->rho_final = w;           w += d;
        f->propose_final.q = w;     w += d;
        f->propose_final.g = w;     w += d;
    }

    t.cfg = cfg;
    t.pot = pot;
    t.rng = rng;
    t.frames = frames;
    t.n_leapfrog = 0;
    t.sum_metro_prob = 0.0;
    t.divergent = 0;
    t.status = FS_OK;

    info->n_judge_evals = 0;
    info->da_rejected = 0;

    /* the starting point, its momentum, and the trajectory {z0} */
    fs_hmc_draw_momentum(cfg, rng, fwd.p, z_scratch);
    t.h0 = cur->u_judge + fs_hmc_kinetic(cfg, fwd.p, p_sharp_fwd_fwd);
    copy_vec(fwd.q, cur->q, d);
    copy_vec(fwd.g, cur->grad, d);
    fwd.u = cur->u_judge;
    copy_vec(bck.q, fwd.q, d);
    copy_vec(bck.p, fwd.p, d);
    copy_vec(bck.g, fwd.g, d);
    bck.u = fwd.u;
    copy_vec(sample.q, cur->q, d);
    copy_vec(sample.g, cur->grad, d);
    sample.u = cur->u_judge;
    sample.h = t.h0;
    copy_vec(p_fwd_fwd, fwd.p, d);
    copy_vec(p_fwd_bck, fwd.p, d);
    copy_vec(p_bck_fwd, fwd.p, d);
    copy_vec(p_bck_bck, fwd.p, d);
    copy_vec(p_sharp_fwd_bck, p_sharp_fwd_fwd, d);
    copy_vec(p_sharp_bck_fwd, p_sharp_fwd_fwd, d);
    copy_vec(p_sharp_bck_bck, p_sharp_fwd_fwd, d);
    copy_vec(rho, fwd.p, d);

    while (depth < max_depth) {
        double lsw_subtree = -INFINITY;
        int valid;
        if (rng->uniform(rng->state) > 0.5) {
            /* extend forward: the old trajectory becomes the backward part */
            t.eps = cfg->step_size;
            copy_vec(rho_bck, rho, d);
            copy_vec(p_bck_fwd, p_fwd_fwd, d);
            copy_vec(p_sharp_bck_fwd, p_sharp_fwd_fwd, d);
            memset(rho_fwd, 0, sizeof(double) * (size_t)d);
            valid = build_tree(&t, depth, &fwd, &propose, p_sharp_fwd_bck, p_sharp_fwd_fwd,
                               rho_fwd, p_fwd_bck, p_fwd_fwd, &lsw_subtree);
        } else {
            t.eps = -cfg->step_size;
            copy_vec(rho_fwd, rho, d);
            copy_vec(p_fwd_bck, p_bck_bck, d);
            copy_vec(p_sharp_fwd_bck, p_sharp_bck_bck, d);
            memset(rho_bck, 0, sizeof(double) * (size_t)d);
            valid = build_tree(&t, depth, &bck, &propose, p_sharp_bck_fwd, p_sharp_bck_bck,
                               rho_bck, p_bck_fwd, p_bck_bck, &lsw_subtree);
        }
        if (t.status != FS_OK) return t.status;
        if (!valid) break;
        depth++;

        /* biased progressive sampling: prefer the new subtree */
        if (lsw_subtree > log_sum_weight
            || rng->uniform(rng->state) < exp(lsw_subtree - log_sum_weight)) {
            swap_samples(&sample, &propose);
            moved = 1;
        }
        log_sum_weight = log_sum_exp(log_sum_weight, lsw_subtree);

        /* U-turn over the whole trajectory, and across old and new parts */
        for (i = 0; i < d; i++) rho[i] = rho_bck[i] + rho_fwd[i];
        if (!(no_uturn(p_sharp_bck_bck, p_sharp_fwd_fwd, rho, NULL, d)
              && no_uturn(p_sharp_bck_bck, p_sharp_fwd_bck, rho_bck, p_fwd_bck, d)
              && no_uturn(p_sharp_bck_fwd, p_sharp_fwd_fwd, rho_fwd, p_bck_fwd, d)))
            break;
    }

    info->n_steps = t.n_leapfrog;
    info->tree_depth = depth;
    info->divergent = t.divergent;
    info->accepted = moved;
    info->accept_prob = t.sum_metro_prob / (double)t.n_leapfrog;
    info->energy = sample.h;
    info->energy_error = sample.h - t.h0;
    info->proposal_u = sample.u;
    copy_vec(cur->q, sample.q, d);
    copy_vec(cur->grad, sample.g, d);
    cur->u_judge = sample.u;
    cur->u_drive = sample.u;
    copy_vec(proposal_out, sample.q, d);
    return FS_OK;
}
