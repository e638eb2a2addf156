/* fs_hmc.c: the chain loop, dual averaging and the initial step-size
 * heuristic; the transitions are fs_transition.c, fs_nuts.c and
 * fs_surrogate.c. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "fs_hmc.h"
#include "fs_adapt.h"
#include "fs_nuts.h"
#include "fs_surrogate.h"

/* ---- dual averaging ------------------------------------------------------ */

void fs_dual_avg_init(fs_dual_avg *da, double step_size, double delta)
{
    da->mu = log(10.0 * step_size);
    da->gamma = 0.05;
    da->t0 = 10.0;
    da->kappa = 0.75;
    da->delta = delta;
    da->h_bar = 0.0;
    da->log_eps = log(step_size);
    da->log_eps_bar = 0.0;
    da->count = 0.0;
}

double fs_dual_avg_update(fs_dual_avg *da, double accept_prob)
{
    double eta, x;
    if (!(accept_prob >= 0.0)) accept_prob = 0.0;  /* NaN -> 0 */
    if (accept_prob > 1.0) accept_prob = 1.0;
    da->count += 1.0;
    eta = 1.0 / (da->count + da->t0);
    da->h_bar = (1.0 - eta) * da->h_bar + eta * (da->delta - accept_prob);
    da->log_eps = da->mu - sqrt(da->count) / da->gamma * da->h_bar;
    x = pow(da->count, -da->kappa);
    da->log_eps_bar = x * da->log_eps + (1.0 - x) * da->log_eps_bar;
    return exp(da->log_eps);
}

/* ---- chain loop ---------------------------------------------------------- */

int fs_hmc_run(const fs_hmc_config *cfg, const fs_potential *drive,
               const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
               fs_dual_avg *adapt, long n_iter, const fs_hmc_trace *tr,
               double *FS_RESTRICT work, volatile const int *stop, long *n_done,
               double *step_size_out, fs_hmc_hook *hook, fs_metric_adapt *metric)
{
    fs_hmc_config c = *cfg;
    fs_hmc_info info;
    const int d = cfg->dim;
    long it;
    int status = FS_OK;

    if (hook != NULL) hook->status = FS_OK;
    if (cfg->algorithm == FS_ALGORITHM_NUTS && cfg->surrogate_steps <= 0
        && !fs_hmc_same_potential(drive, judge))
        status = FS_EINVAL;  /* NUTS has no separate judge */
    for (it = 0; it < n_iter && status == FS_OK; it++) {
        if (stop != NULL && *stop) { status = FS_EINTERRUPT; break; }
        status = c.surrogate_steps > 0
                     ? fs_surrogate_transition(&c, drive, judge, rng, cur, work, &info)
                     : c.algorithm == FS_ALGORITHM_NUTS
                     ? fs_nuts_transition(&c, drive, rng, cur, work, &info)
                     : fs_hmc_transition(&c, drive, judge, rng, cur, work, &info);
        if (status != FS_OK) break;
        if (tr->draws) memcpy(tr->draws + (size_t)it * d, cur->q, sizeof(double) * (size_t)d);
        if (tr->potential) tr->potential[it] = cur->u_judge;
        if (tr->accept_prob) tr->accept_prob[it] = info.accept_prob;
        if (tr->energy_error) tr->energy_error[it] = info.energy_error;
        if (tr->energy) tr->energy[it] = info.energy;
        if (tr->step_size) tr->step_size[it] = c.step_size;
        if (tr->accepted) tr->accepted[it] = (int8_t)info.accepted;
        if (tr->divergent) tr->divergent[it] = (int8_t)info.divergent;
        if (tr->n_steps) tr->n_steps[it] = (int32_t)info.n_steps;
        if (tr->judge_evaluated) tr->judge_evaluated[it] = (int8_t)info.n_judge_evals;
        if (tr->tree_depth) tr->tree_depth[it] = (int8_t)info.tree_depth;
        if (tr->proposals)
            memcpy(tr->proposals + (size_t)it * d, work + 2 * (size_t)d, sizeof(double) * (size_t)d);
        if (tr->proposal_potential) tr->proposal_potential[it] = info.proposal_u;
        if (tr->inner_accept_prob)
            tr->inner_accept_prob[it] = c.surrogate_steps > 0 ? info.inner_accept_prob : NAN;
        if (adapt != NULL)
            c.step_size = fs_dual_avg_update(
                adapt, c.surrogate_steps > 0 ? info.inner_accept_prob : info.accept_prob);
        if (hook != NULL) {
            int refresh = 0;
            status = hook->after_iteration(hook->state, it, rng, &info, cur,
                                           work + 2 * (size_t)d, &refresh);
            hook->status = status;
            /* a refresh also follows a pause (a positive status): the
               iteration is done, and the run may resume from this point */
            if (status >= FS_OK && refresh) {
                const int r = refresh == FS_REFRESH_DRIVE
                                  ? fs_hmc_point_refresh_drive(&c, drive, judge, cur)
                                  : fs_hmc_point_init(&c, drive, judge, cur);
                if (r != FS_OK) status = r;
            }
            if (status != FS_OK) { it++; break; }
        }
        if (metric != NULL) {
            int r = fs_metric_adapt_update(metric, cur->q, cur->grad, info.divergent);
            if (r < 0) { status = r; it++; break; }
            if (r == FS_METRIC_ADAPT_FIRST && adapt != NULL) {
                /* the first metric from the draws: a new step size for it (nutpie) */
                status = fs_hmc_find_step_size(&c, drive, judge, rng, cur, work, &c.step_size);
                if (status != FS_OK) { it++; break; }
                fs_dual_avg_init(adapt, c.step_size, adapt->delta);
            }
            if (r == FS_METRIC_ADAPT_DONE) { status = FS_WARMUP_DONE; it++; break; }
        }
    }
    *n_done = it;
    if (step_size_out) *step_size_out = c.step_size;
    return status;
}

/* ---- initial step size --------------------------------------------------- */

static int one_step_delta_h(const fs_hmc_config *cfg, double eps, const fs_potential *drive,
                            const fs_potential *judge, fs_rng *rng, const fs_hmc_point *cur,
                            double *FS_RESTRICT work, double *delta_h)
{
    const int d = cfg->dim;
    double *p = work, *v = work + d, *q1 = work + 2 * (size_t)d;
    double *g1 = work + 3 * (size_t)d, *z = work + 4 * (size_t)d;
    const int same = fs_hmc_same_potential(drive, judge);
    double k0, k1, u1 = NAN;
    int status;
    fs_hmc_draw_momentum(cfg, rng, p, z);
    k0 = fs_hmc_kinetic(cfg, p, v);
    memcpy(q1, cur->q, sizeof(double) * (size_t)d);
    memcpy(g1, cur->grad, sizeof(double) * (size_t)d);
    status = fs_hmc_leapfrog(cfg, eps, 1, drive, q1, g1, p, v, same, &u1);
    if (status == FS_OK && !same) status = judge->eval(judge->state, q1, &u1, NULL);
    if (status == FS_ENONFINITE) { *delta_h = -INFINITY; return FS_OK; }
    if (status != FS_OK) return status;
    k1 = fs_hmc_kinetic(cfg, p, v);
    *delta_h = (cur->u_judge + k0) - (u1 + k1);
    if (!fs_isfinite(*delta_h)) *delta_h = -INFINITY;
    return FS_OK;
}

int fs_hmc_find_step_size(const fs_hmc_config *cfg, const fs_potential *drive,
                          const fs_potential *judge, fs_rng *rng,
                          const fs_hmc_point *cur, double *FS_RESTRICT work,
                          double *step_size)
{
    const double log08 = log(0.8);
    double eps = cfg->step_size, dh;
    int direction, status, iter;
    if (!(eps > 0.0) || !fs_isfinite(eps)) return FS_EINVAL;
    status = one_step_delta_h(cfg, eps, drive, judge, rng, cur, work, &dh);
    if (status != FS_OK) return status;
    direction = dh > log08 ? 1 : -1;
    /* as Stan's init_stepsize: double while a step is accepted more often
       than 0.8 (up to 1e7: beyond, the posterior is flat), halve while less
       (down to the smallest normal double); 2200 halvings or doublings span
       any finite start, 1e-300 and 1e300 included */
    for (iter = 0; iter < 2200; iter++) {
        status = one_step_delta_h(cfg, eps, drive, judge, rng, cur, work, &dh);
        if (status != FS_OK) return status;
        if (direction == 1 && !(dh > log08)) break;
        if (direction == -1 && !(dh < log08)) break;
        if (direction == 1 ? eps > 1e7 : eps < DBL_MIN) break;
        eps = direction == 1 ? 2.0 * eps : 0.5 * eps;
    }
    *step_size = eps;
    return FS_OK;
}
