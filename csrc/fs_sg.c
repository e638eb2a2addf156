/* fs_sg.c: SGLD and SGHMC on GLM minibatches.  See fs_sg.h. */
#include "fs_sg.h"

#include <math.h>
#include <string.h>

int fs_sg_workspace_size(size_t n, size_t d, size_t *doubles)
{
    size_t ev = 0;
    int status = fs_glm_workspace_size(n, d, &ev, NULL);
    if (status != FS_OK) return status;
    *doubles = ev + 6 * d;
    return FS_OK;
}

int fs_sg_check(const fs_sg_config *cfg, const fs_glm *m)
{
    if (cfg->algorithm != FS_SG_SGLD && cfg->algorithm != FS_SG_SGHMC) return FS_EINVAL;
    if (cfg->batch_size < 1 || cfg->batch_size > m->n) return FS_EINVAL;
    if (!(cfg->a > 0.0) || !fs_isfinite(cfg->a)) return FS_EINVAL;
    if (!(cfg->b > 0.0) || !fs_isfinite(cfg->b)) return FS_EINVAL;
    if (!(cfg->delta >= 0.0) || !fs_isfinite(cfg->delta)) return FS_EINVAL;
    if (!(cfg->friction >= 0.0) || !fs_isfinite(cfg->friction)) return FS_EINVAL;
    if (cfg->noise_estimate != FS_SG_NOISE_ZERO && cfg->noise_estimate != FS_SG_NOISE_FISHER)
        return FS_EINVAL;
    if (cfg->n_steps < 1) return FS_EINVAL;
    if (cfg->l1_scale != NULL) {
        size_t j;
        if (!fs_isfinite(cfg->l1_log_norm)) return FS_EINVAL;
        for (j = 0; j < m->d; j++) {
            if (!(cfg->l1_scale[j] > 0.0) || !fs_isfinite(cfg->l1_scale[j])) return FS_EINVAL;
            if (cfg->l1_loc != NULL && !fs_isfinite(cfg->l1_loc[j])) return FS_EINVAL;
        }
    }
    return FS_OK;
}

/* k rows drawn uniformly without replacement into perm[0..k): a partial
 * Fisher-Yates shuffle (whatever perm held, the first k entries are then a
 * uniform k-subset in uniform order). */
static void fs__draw_batch(size_t *perm, size_t n, size_t k, fs_rng *rng)
{
    size_t i;
    for (i = 0; i < k; i++) {
        size_t j = i + (size_t)(rng->uniform(rng->state) * (double)(n - i));
        size_t tmp;
        if (j >= n) j = n - 1;
        tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

static double fs__eps(const fs_sg_config *cfg, long t)
{
    return cfg->delta == 0.0 ? cfg->a : cfg->a * pow(cfg->b + (double)t, -cfg->delta);
}

static int fs__all_finite(const double *x, size_t d)
{
    size_t j;
    for (j = 0; j < d; j++)
        if (!fs_isfinite(x[j])) return 0;
    return 1;
}

/* the optional Laplace prior's gradient sign(q - loc) / scale at q (0 when
 * cfg->l1_scale is NULL) */
static double fs__l1_grad(const fs_sg_config *cfg, const double *q, size_t j)
{
    double x;
    if (cfg->l1_scale == NULL) return 0.0;
    x = cfg->l1_loc ? q[j] - cfg->l1_loc[j] : q[j];
    return (x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0)) / cfg->l1_scale[j];
}

/* add the optional Laplace prior to a value (if u != NULL) and a gradient
 * (if g != NULL) at q */
static void fs__l1_add(const fs_sg_config *cfg, size_t d, const double *q, double *u,
                       double *g)
{
    size_t j;
    if (cfg->l1_scale == NULL) return;
    if (u != NULL) {
        double s = cfg->l1_log_norm;
        for (j = 0; j < d; j++)
            s += fabs(cfg->l1_loc ? q[j] - cfg->l1_loc[j] : q[j]) / cfg->l1_scale[j];
        *u += s;
    }
    if (g != NULL)
        for (j = 0; j < d; j++) g[j] += fs__l1_grad(cfg, q, j);
}

/* minibatch gradient at q (and the diagonal of the batch Fisher) */
static int fs__batch_grad(const fs_sg_config *cfg, const fs_glm *m, fs_rng *rng,
                          size_t *perm, const double *q, double *g, double *gsq)
{
    const size_t k = cfg->batch_size;
    int status;
    fs__draw_batch(perm, m->n, k, rng);
    status = fs_glm_eval_rows(m, perm, k, (double)m->n / (double)k, q, NULL, g, gsq);
    fs__l1_add(cfg, m->d, q, NULL, g);
    return status;
}

int fs_sg_run(const fs_sg_config *cfg, const fs_glm *m, fs_rng *rng,
              fs_sg_state *st, long n_iter, const int *stop,
              const fs_sg_trace *tr, double *FS_RESTRICT work, long *n_done)
{
    const size_t d = m->d, n = m->n, k = cfg->batch_size;
    const int fisher = cfg->algorithm == FS_SG_SGHMC && !cfg->mh
                       && cfg->noise_estimate == FS_SG_NOISE_FISHER;
    double *g = work, *gsq = work + d, *v = work + 2 * d, *q1 = work + 3 * d;
    double *r = work + 4 * d, *g0 = work + 5 * d, *ev = work + 6 * d;
    double *q = st->q;
    long it;
    size_t j;
    int status;

    *n_done = 0;
    status = fs_sg_check(cfg, m);
    if (status != FS_OK) return status;
    (void)g0;

    for (it = 0; it < n_iter; it++) {
        const double eps0 = fs__eps(cfg, st->t);
        double pot = NAN, acc = 1.0, de = NAN, energy = NAN;
        int accepted = 1, divergent = 0, evaluated = 0, clipped = 0, s;
        if (stop != NULL && *stop) return FS_EINTERRUPT;

        if (cfg->algorithm == FS_SG_SGLD) {
            const double sd = sqrt(eps0);
            status = fs__batch_grad(cfg, m, rng, st->perm, q, g, NULL);
            if (status != FS_OK) return status;
            for (j = 0; j < d; j++)
                q1[j] = q[j] - 0.5 * eps0 * g[j] + sd * rng->normal(rng->state);
            st->t += 1;
            if (!fs__all_finite(q1, d)) return FS_ENONFINITE;
            memcpy(q, q1, d * sizeof(double));
        } else if (!cfg->mh) {
            /* Chen et al. eq. 15, v = eps r */
            memcpy(q1, q, d * sizeof(double));
            for (j = 0; j < d; j++) v[j] = eps0 * rng->normal(rng->state);
            for (s = 0; s < cfg->n_steps; s++) {
                const double eps = fs__eps(cfg, st->t);
                const double alpha = eps * cfg->friction;
                const double base_var = 2.0 * eps * eps * eps;
                for (j = 0; j < d; j++) q1[j] += v[j];
                status = fs__batch_grad(cfg, m, rng, st->perm, q1, g, fisher ? gsq : NULL);
                if (status != FS_OK) return status;
                st->t += 1;
                for (j = 0; j < d; j++) {
                    double c = cfg->friction, var;
                    if (fisher) {
                        /* per-row gradients r_i x_ij: mean gl / n, sample
                         * variance from the sum of squares (likelihood part:
                         * g minus the prior, unscaled) */
                        const double lik = g[j] - (m->prior_prec
                            ? (m->prior_mean ? q1[j] - m->prior_mean[j] : q1[j]) * m->prior_prec[j]
                            : 0.0) - fs__l1_grad(cfg, q1, j);
                        const double mean_i = lik / (double)n;
                        const double var_i = k > 1
                            ? (gsq[j] - (double)k * mean_i * mean_i) / (double)(k - 1) : 0.0;
                        const double vhat = ((double)n * (double)n / (double)k)
                                            * (1.0 - (double)k / (double)n)
                                            * (var_i > 0.0 ? var_i : 0.0);
                        c -= 0.5 * eps * vhat;
                        if (c < 0.0) { c = 0.0; clipped++; }
                    }
                    var = base_var * c;
                    v[j] = v[j] - eps * eps * g[j] - alpha * v[j]
                           + (var > 0.0 ? sqrt(var) * rng->normal(rng->state) : 0.0);
                }
            }
            if (!fs__all_finite(q1, d)) return FS_ENONFINITE;
            memcpy(q, q1, d * sizeof(double));
        } else {
            /* leapfrog with one batch per step, then the exact test */
            double h0, h1, u1 = NAN, kin = 0.0;
            if (!fs_isfinite(st->u)) {
                status = fs_glm_eval(m, q, &st->u, NULL, ev);
                if (status != FS_OK) return status;
                fs__l1_add(cfg, d, q, &st->u, NULL);
                if (!fs_isfinite(st->u)) return FS_ENONFINITE;
            }
            memcpy(q1, q, d * sizeof(double));
            for (j = 0; j < d; j++) {
                r[j] = rng->normal(rng->state);
                kin += r[j] * r[j];
            }
            h0 = st->u + 0.5 * kin;
            for (s = 0; s < cfg->n_steps && !divergent; s++) {
                const double eps = fs__eps(cfg, st->t);
                fs__draw_batch(st->perm, n, k, rng);
                status = fs_glm_eval_rows(m, st->perm, k, (double)n / (double)k, q1,
                                          NULL, g, NULL);
                if (status != FS_OK) return status;
                fs__l1_add(cfg, d, q1, NULL, g);
                for (j = 0; j < d; j++) {
                    r[j] -= 0.5 * eps * g[j];
                    q1[j] += eps * r[j];
                }
                status = fs_glm_eval_rows(m, st->perm, k, (double)n / (double)k, q1,
                                          NULL, g, NULL);
                if (status != FS_OK) return status;
                fs__l1_add(cfg, d, q1, NULL, g);
                for (j = 0; j < d; j++) r[j] -= 0.5 * eps * g[j];
                st->t += 1;
                if (!fs__all_finite(q1, d) || !fs__all_finite(r, d)) divergent = 1;
            }
            if (!divergent) {
                status = fs_glm_eval(m, q1, &u1, NULL, ev);
                if (status != FS_OK) return status;
                fs__l1_add(cfg, d, q1, &u1, NULL);
                evaluated = 1;
                kin = 0.0;
                for (j = 0; j < d; j++) kin += r[j] * r[j];
                h1 = u1 + 0.5 * kin;
                if (!fs_isfinite(h1)) divergent = 1;
            }
            if (divergent) {
                acc = 0.0;
                accepted = 0;
                de = INFINITY;
            } else {
                de = h1 - h0;
                acc = de <= 0.0 ? 1.0 : exp(-de);
                accepted = rng->uniform(rng->state) < acc;
            }
            if (accepted) {
                memcpy(q, q1, d * sizeof(double));
                st->u = u1;
                energy = h1;
            } else {
                energy = h0;
            }
            pot = st->u;
        }

        memcpy(tr->draws + (size_t)it * d, q, d * sizeof(double));
        if (tr->potential) tr->potential[it] = pot;
        if (tr->accept_prob) tr->accept_prob[it] = acc;
        if (tr->energy_error) tr->energy_error[it] = de;
        if (tr->energy) tr->energy[it] = energy;
        if (tr->step_size) tr->step_size[it] = eps0;
        if (tr->accepted) tr->accepted[it] = (int8_t)accepted;
        if (tr->divergent) tr->divergent[it] = (int8_t)divergent;
        if (tr->n_steps)
            tr->n_steps[it] = cfg->algorithm == FS_SG_SGLD ? 1 : cfg->n_steps;
        if (tr->judge_evaluated) tr->judge_evaluated[it] = (int8_t)evaluated;
        if (tr->noise_clipped) tr->noise_clipped[it] = clipped;
        *n_done = it + 1;
    }
    return FS_OK;
}
