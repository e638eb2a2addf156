/* fs_transition.c: kinetic energy, momentum and leapfrog for the unit,
 * diagonal, dense and factored low-rank metrics, and the HMC transition
 * (with delayed acceptance). */
#include <math.h>
#include <string.h>

#include "fs_transition.h"

/* ---- kinetic energy and momentum ---------------------------------------- */

/* v = M^{-1} p for the factored low-rank metric (fs_transition.h). */
static void low_rank_velocity(int d, const double *inv, const double *p, double *FS_RESTRICT v)
{
    const double *sigma = inv, *lam = inv + d + 2;
    const int r = (int)inv[d], rmax = (int)inv[d + 1];
    const double *U = lam + rmax;
    double t[FS_LOW_RANK_MAX];
    int i, k;
    for (i = 0; i < d; i++) v[i] = sigma[i] * p[i];          /* w = D p */
    for (k = 0; k < r; k++) {                                /* t = (L - 1) U^T w */
        const double *u = U + (size_t)k * d;
        double s = 0.0;
        for (i = 0; i < d; i++) s += u[i] * v[i];
        t[k] = (lam[k] - 1.0) * s;
    }
    for (k = 0; k < r; k++) {
        const double *u = U + (size_t)k * d;
        for (i = 0; i < d; i++) v[i] += t[k] * u[i];
    }
    for (i = 0; i < d; i++) v[i] *= sigma[i];
}

double fs_hmc_kinetic(const fs_hmc_config *cfg, const double *p, double *FS_RESTRICT v)
{
    const int d = cfg->dim;
    double k = 0.0;
    int i, j;
    switch (cfg->metric) {
    case FS_METRIC_LOW_RANK:
        low_rank_velocity(d, cfg->inv_metric, p, v);
        for (i = 0; i < d; i++) k += p[i] * v[i];
        break;
    case FS_METRIC_DIAG: {
        const double *m = cfg->inv_metric;
        for (i = 0; i < d; i++) { v[i] = m[i] * p[i]; k += p[i] * v[i]; }
        break;
    }
    case FS_METRIC_DENSE: {
        const double *m = cfg->inv_metric;
        for (i = 0; i < d; i++) {
            const double *row = m + (size_t)i * d;
            double s = 0.0;
            for (j = 0; j < d; j++) s += row[j] * p[j];
            v[i] = s;
            k += p[i] * s;
        }
        break;
    }
    default:
        for (i = 0; i < d; i++) { v[i] = p[i]; k += p[i] * p[i]; }
    }
    return 0.5 * k;
}

void fs_hmc_velocity(const fs_hmc_config *cfg, const double *p, double *FS_RESTRICT v)
{
    const int d = cfg->dim;
    int i, j;
    switch (cfg->metric) {
    case FS_METRIC_LOW_RANK:
        low_rank_velocity(d, cfg->inv_metric, p, v);
        break;
    case FS_METRIC_DIAG:
        for (i = 0; i < d; i++) v[i] = cfg->inv_metric[i] * p[i];
        break;
    case FS_METRIC_DENSE:
        for (i = 0; i < d; i++) {
            const double *row = cfg->inv_metric + (size_t)i * d;
            double s = 0.0;
            for (j = 0; j < d; j++) s += row[j] * p[j];
            v[i] = s;
        }
        break;
    default:
        memcpy(v, p, sizeof(double) * (size_t)d);
    }
}

void fs_hmc_draw_momentum(const fs_hmc_config *cfg, fs_rng *rng, double *FS_RESTRICT p,
                          double *FS_RESTRICT z)
{
    const int d = cfg->dim;
    int i, k;
    switch (cfg->metric) {
    case FS_METRIC_LOW_RANK: {
        /* p = D^{-1} (z + U ((L^{-1/2} - 1) * (U^T z))) */
        const double *inv_sigma = cfg->metric_chol, *f = cfg->metric_chol + d;
        const int r = (int)cfg->inv_metric[d], rmax = (int)cfg->inv_metric[d + 1];
        const double *U = cfg->inv_metric + d + 2 + rmax;
        for (i = 0; i < d; i++) p[i] = z[i] = rng->normal(rng->state);
        for (k = 0; k < r; k++) {
            const double *u = U + (size_t)k * d;
            double s = 0.0;
            int j;
            for (j = 0; j < d; j++) s += u[j] * z[j];
            s *= f[k];
            for (j = 0; j < d; j++) p[j] += s * u[j];
        }
        for (i = 0; i < d; i++) p[i] *= inv_sigma[i];
        break;
    }
    case FS_METRIC_DIAG:
        for (i = 0; i < d; i++) p[i] = cfg->metric_chol[i] * rng->normal(rng->state);
        break;
    case FS_METRIC_DENSE:
        for (i = 0; i < d; i++) z[i] = rng->normal(rng->state);
        for (i = 0; i < d; i++) {
            const double *row = cfg->metric_chol + (size_t)i * d;
            double s = 0.0;
            for (k = 0; k <= i; k++) s += row[k] * z[k];
            p[i] = s;
        }
        break;
    default:
        for (i = 0; i < d; i++) p[i] = rng->normal(rng->state);
    }
}

int fs_hmc_all_finite(const double *x, int n)
{
    double s = 0.0;
    int i;
    for (i = 0; i < n; i++) s += x[i] * 0.0;
    return s == 0.0;  /* NaN*0 and inf*0 are NaN */
}

/* ---- leapfrog ------------------------------------------------------------ */

/* n_steps leapfrog steps of size eps from (q, p) with drive gradient g at q,
   all updated in place.  With want_value, the drive value at the final
   position goes to *u_end.  Returns FS_OK, FS_ENONFINITE (a divergence:
   non-finite gradient or value) or a potential's error code. */
int fs_hmc_leapfrog(const fs_hmc_config *cfg, double eps, int n_steps,
                    const fs_potential *drive, double *FS_RESTRICT q,
                    double *FS_RESTRICT g, double *FS_RESTRICT p,
                    double *FS_RESTRICT v, int want_value, double *u_end)
{
    const int d = cfg->dim;
    const double half = 0.5 * eps;
    int s, i, status;
    for (i = 0; i < d; i++) p[i] -= half * g[i];
    for (s = 1; s <= n_steps; s++) {
        const int last = (s == n_steps);
        fs_hmc_velocity(cfg, p, v);
        for (i = 0; i < d; i++) q[i] += eps * v[i];
        status = drive->eval(drive->state, q, (last && want_value) ? u_end : NULL, g);
        if (status != FS_OK) return status;
        if (!fs_hmc_all_finite(g, d)) return FS_ENONFINITE;
        {
            const double h = last ? half : eps;
            for (i = 0; i < d; i++) p[i] -= h * g[i];
        }
    }
    if (want_value && !fs_isfinite(*u_end)) return FS_ENONFINITE;
    return FS_OK;
}

/* ---- transitions --------------------------------------------------------- */

size_t fs_hmc_workspace_size(int dim)
{
    return (size_t)5 * (size_t)(dim > 0 ? dim : 1);
}

int fs_hmc_same_potential(const fs_potential *a, const fs_potential *b)
{
    return a == b || (a->eval == b->eval && a->state == b->state);
}

int fs_hmc_point_init(const fs_hmc_config *cfg, const fs_potential *drive,
                      const fs_potential *judge, fs_hmc_point *cur)
{
    const int same = fs_hmc_same_potential(drive, judge);
    const int want_drive_value = same || cfg->delayed_acceptance || cfg->surrogate_steps > 0;
    double ud = NAN, uj = NAN;
    int status;
    status = drive->eval(drive->state, cur->q, want_drive_value ? &ud : NULL, cur->grad);
    if (status != FS_OK) return status;
    if (same) {
        uj = ud;
    } else {
        status = judge->eval(judge->state, cur->q, &uj, NULL);
        if (status != FS_OK) return status;
    }
    cur->u_drive = ud;
    cur->u_judge = uj;
    if ((want_drive_value && !fs_isfinite(ud)) || !fs_isfinite(uj)
        || !fs_hmc_all_finite(cur->grad, drive->dim))
        return FS_ENONFINITE;
    return FS_OK;
}

int fs_hmc_point_refresh_drive(const fs_hmc_config *cfg, const fs_potential *drive,
                               const fs_potential *judge, fs_hmc_point *cur)
{
    const int want_value = cfg->delayed_acceptance || cfg->surrogate_steps > 0;
    double ud = NAN;
    int status;
    if (fs_hmc_same_potential(drive, judge)) return fs_hmc_point_init(cfg, drive, judge, cur);
    status = drive->eval(drive->state, cur->q, want_value ? &ud : NULL, cur->grad);
    if (status != FS_OK) return status;
    cur->u_drive = ud;
    if ((want_value && !fs_isfinite(ud)) || !fs_hmc_all_finite(cur->grad, drive->dim))
        return FS_ENONFINITE;
    return FS_OK;
}

int fs_hmc_transition(const fs_hmc_config *cfg, const fs_potential *drive,
                      const fs_potential *judge, fs_rng *rng, fs_hmc_point *cur,
                      double *FS_RESTRICT work, fs_hmc_info *info)
{
    const int d = cfg->dim;
    double *p = work, *v = work + d, *q1 = work + 2 * (size_t)d;
    double *g1 = work + 3 * (size_t)d, *z = work + 4 * (size_t)d;
    const int same = fs_hmc_same_potential(drive, judge);
    const int da = cfg->delayed_acceptance && !same;
    int n_steps = cfg->n_steps, status, accept = 0;
    double k0, k1, h0, h1, ud1 = NAN, uj1 = NAN, dh, a;

    if (cfg->random_n_steps && cfg->n_steps > 1) {
        n_steps = 1 + (int)(rng->uniform(rng->state) * cfg->n_steps);
        if (n_steps > cfg->n_steps) n_steps = cfg->n_steps;
    }
    info->n_steps = n_steps;
    info->tree_depth = 0;
    info->divergent = 0;
    info->accepted = 0;
    info->n_judge_evals = 0;
    info->da_rejected = 0;
    info->energy_error = NAN;
    info->proposal_u = NAN;

    fs_hmc_draw_momentum(cfg, rng, p, z);
    k0 = fs_hmc_kinetic(cfg, p, v);
    h0 = cur->u_judge + k0;
    memcpy(q1, cur->q, sizeof(double) * (size_t)d);
    memcpy(g1, cur->grad, sizeof(double) * (size_t)d);

    status = fs_hmc_leapfrog(cfg, cfg->step_size, n_steps, drive, q1, g1, p, v,
                             same || da, &ud1);
    if (status == FS_ENONFINITE) {
        info->divergent = 1;
        info->accept_prob = 0.0;
        info->energy = h0;
        return FS_OK;
    }
    if (status != FS_OK) return status;
    k1 = fs_hmc_kinetic(cfg, p, v);

    a = 1.0;
    if (da) {
        /* stage 1: the drive Hamiltonian, no judge evaluation */
        const double dh_drive = (ud1 + k1) - (cur->u_drive + k0);
        const double a1 = fs_isfinite(dh_drive) ? (dh_drive > 0 ? exp(-dh_drive) : 1.0) : 0.0;
        if (!(rng->uniform(rng->state) < a1)) {
            info->da_rejected = 1;
            info->accept_prob = a1;
            info->energy = h0;
            return FS_OK;
        }
        status = judge->eval(judge->state, q1, &uj1, NULL);
        if (status != FS_OK && status != FS_ENONFINITE) return status;
        info->n_judge_evals = 1;
        info->proposal_u = status == FS_OK ? uj1 : NAN;
        dh = (uj1 + k1) - h0;
        info->energy_error = dh;
        if (status == FS_ENONFINITE || !fs_isfinite(dh) || dh > cfg->max_energy_error) {
            info->divergent = 1;
            info->accept_prob = 0.0;
            info->energy = h0;
            return FS_OK;
        }
        {
            const double r = dh - dh_drive;  /* second-stage log ratio */
            const double a2 = r > 0 ? exp(-r) : 1.0;
            accept = rng->uniform(rng->state) < a2;
            a = a1 * a2;
        }
    } else {
        if (same) {
            uj1 = ud1;
        } else {
            status = judge->eval(judge->state, q1, &uj1, NULL);
            if (status != FS_OK && status != FS_ENONFINITE) return status;
            info->n_judge_evals = 1;
            if (status == FS_ENONFINITE) uj1 = NAN;
        }
        info->proposal_u = uj1;
        h1 = uj1 + k1;
        dh = h1 - h0;
        info->energy_error = dh;
        if (!fs_isfinite(dh) || dh > cfg->max_energy_error) {
            info->divergent = 1;
            info->accept_prob = 0.0;
            info->energy = h0;
            return FS_OK;
        }
        a = dh > 0 ? exp(-dh) : 1.0;
        accept = rng->uniform(rng->state) < a;
    }
    info->accept_prob = a;
    if (accept) {
        memcpy(cur->q, q1, sizeof(double) * (size_t)d);
        memcpy(cur->grad, g1, sizeof(double) * (size_t)d);
        cur->u_judge = uj1;
        cur->u_drive = ud1;
        info->accepted = 1;
        info->energy = uj1 + k1;
    } else {
        info->energy = h0;
    }
    return FS_OK;
}
