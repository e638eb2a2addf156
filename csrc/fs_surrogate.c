/* fs_surrogate.c: k transitions on the surrogate, one exact test (see
 * fs_surrogate.h). */
#include <math.h>
#include <string.h>

#include "fs_surrogate.h"
#include "fs_nuts.h"

static size_t inner_workspace(int dim, int algorithm, int max_tree_depth)
{
    const size_t h = fs_hmc_workspace_size(dim);
    if (algorithm == FS_ALGORITHM_NUTS) {
        const size_t n = fs_nuts_workspace_size(dim, max_tree_depth);
        return n > h ? n : h;
    }
    return h;
}

size_t fs_surrogate_workspace_size(int dim, int algorithm, int max_tree_depth)
{
    return inner_workspace(dim, algorithm, max_tree_depth)
           + (size_t)2 * (size_t)(dim > 0 ? dim : 1);
}

static void restore(fs_hmc_point *cur, const double *q0, const double *g0,
                    double uj0, double ud0, int d)
{
    memcpy(cur->q, q0, sizeof(double) * (size_t)d);
    memcpy(cur->grad, g0, sizeof(double) * (size_t)d);
    cur->u_judge = uj0;
    cur->u_drive = ud0;
}

int fs_surrogate_transition(const fs_hmc_config *cfg, const fs_potential *drive,
                            const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
                            double *FS_RESTRICT work, fs_hmc_info *info)
{
    const int d = cfg->dim;
    const int k = cfg->surrogate_steps;
    const size_t inner = inner_workspace(d, cfg->algorithm, cfg->max_tree_depth);
    double *q0 = work + inner, *g0 = work + inner + d;
    const double uj0 = cur->u_judge, ud0 = cur->u_drive;
    fs_hmc_point p;
    fs_hmc_info in;
    double sum_accept = 0.0, u1 = NAN, r, a;
    int j, status, n_steps = 0, depth = 0, divergent = 0;

    if (k < 1 || d != drive->dim || d != judge->dim
        || (cfg->algorithm != FS_ALGORITHM_HMC && cfg->algorithm != FS_ALGORITHM_NUTS))
        return FS_EINVAL;
    memcpy(q0, cur->q, sizeof(double) * (size_t)d);
    memcpy(g0, cur->grad, sizeof(double) * (size_t)d);

    /* k transitions that leave exp(-V) invariant: V drives and judges */
    p.q = cur->q;
    p.grad = cur->grad;
    p.u_judge = ud0;
    p.u_drive = ud0;
    for (j = 0; j < k; j++) {
        status = cfg->algorithm == FS_ALGORITHM_NUTS
                     ? fs_nuts_transition(cfg, drive, rng, &p, work, &in)
                     : fs_hmc_transition(cfg, drive, drive, rng, &p, work, &in);
        if (status != FS_OK) {
            restore(cur, q0, g0, uj0, ud0, d);
            return status;
        }
        n_steps += in.n_steps;
        if (in.tree_depth > depth) depth = in.tree_depth;
        divergent |= in.divergent;
        sum_accept += in.accept_prob;
    }

    info->n_steps = n_steps;
    info->tree_depth = depth;
    info->divergent = divergent;
    info->da_rejected = 0;
    info->inner_accept_prob = sum_accept / (double)k;
    memcpy(work + 2 * (size_t)d, p.q, sizeof(double) * (size_t)d);

    if (memcmp(p.q, q0, sizeof(double) * (size_t)d) == 0) {
        /* never moved: the ratio is 1 and U(q) is known */
        cur->u_judge = uj0;
        cur->u_drive = ud0;
        info->n_judge_evals = 0;
        info->proposal_u = NAN;
        info->energy_error = 0.0;
        info->accept_prob = 1.0;
        info->accepted = 0;
        info->energy = uj0;
        return FS_OK;
    }

    /* the exact correction: one value of U */
    status = judge->eval(judge->state, p.q, &u1, NULL);
    info->n_judge_evals = 1;
    if (status != FS_OK && status != FS_ENONFINITE) {
        restore(cur, q0, g0, uj0, ud0, d);
        return status;
    }
    if (status == FS_ENONFINITE || !fs_isfinite(u1)) {
        restore(cur, q0, g0, uj0, ud0, d);
        info->proposal_u = NAN;
        info->energy_error = NAN;
        info->accept_prob = 0.0;
        info->accepted = 0;
        info->divergent = 1;
        info->energy = uj0;
        return FS_OK;
    }
    info->proposal_u = u1;
    r = (u1 - p.u_judge) - (uj0 - ud0);   /* (U - V)(q') - (U - V)(q) */
    info->energy_error = r;
    a = r > 0.0 ? exp(-r) : 1.0;
    if (!(a >= 0.0)) a = 0.0;
    info->accept_prob = a;
    if (rng->uniform(rng->state) < a) {
        cur->u_judge = u1;
        cur->u_drive = p.u_judge;
        info->accepted = 1;
        info->energy = u1;
    } else {
        restore(cur, q0, g0, uj0, ud0, d);
        info->accepted = 0;
        info->energy = uj0;
    }
    return FS_OK;
}
