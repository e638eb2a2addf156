/* fs_pde.c: the elliptic PDE potential (see fs_pde.h). */
#include "fs_pde.h"

#include <math.h>
#include <stddef.h>

#if FS_PDE_NB != 4
#error "fs_band_cholesky's trailing update is written for panels of 4 columns"
#endif

size_t fs_pde_workspace_size(int n_el, int nf, int p, int n_obs)
{
    return (size_t)n_el + (size_t)(p + FS_PDE_NB) * (size_t)nf + 2 * (size_t)nf + (size_t)n_obs;
}

int fs_pde_init(fs_pde *m, int n_el, int d, int nf, int p, int n_obs,
                const int *el_free, const double *el_g, const double *k_ref,
                const double *phi, const int *obs_ptr, const int *obs_idx,
                const double *obs_val, const double *obs_const, const double *y,
                double noise_var, double prior_var)
{
    if (n_el < 1 || d < 1 || nf < 1 || n_obs < 1 || p < 0 || p >= nf)
        return FS_EINVAL;
    if (!(noise_var > 0.0 && isfinite(noise_var) && prior_var > 0.0 && isfinite(prior_var)))
        return FS_EINVAL;
    m->n_el = n_el;
    m->d = d;
    m->nf = nf;
    m->p = p;
    m->n_obs = n_obs;
    m->el_free = el_free;
    m->el_g = el_g;
    m->k_ref = k_ref;
    m->phi = phi;
    m->obs_ptr = obs_ptr;
    m->obs_idx = obs_idx;
    m->obs_val = obs_val;
    m->obs_const = obs_const;
    m->y = y;
    m->inv_noise_var = 1.0 / noise_var;
    m->inv_prior_var = 1.0 / prior_var;
    return fs_pool_init(&m->pool, fs_pde_workspace_size(n_el, nf, p, n_obs));
}

void fs_pde_free(fs_pde *m)
{
    fs_pool_free(&m->pool);
}

/* Right-looking banded Cholesky (LAPACK dpbtrf's algorithm, lower) in
 * panels of FS_PDE_NB columns: each panel is factorised column by column,
 * then the trailing triangle takes one rank-FS_PDE_NB update, so each
 * trailing entry is loaded and stored once per panel, not once per column
 * (1.4x faster than the column-by-column update at p = 32).  The padding
 * rows p + 1 .. p + FS_PDE_NB - 1 of each stored column are zero, so a
 * panel's columns can be read over the panel's whole row range. */
int fs_band_cholesky(int n, int p, double *FS_RESTRICT ab)
{
    const ptrdiff_t ld = p + FS_PDE_NB;
#define COL(m) (ab + (ptrdiff_t)(m) * ld - (m))
    for (int j0 = 0; j0 < n; j0 += FS_PDE_NB) {
        const int jb = (n - j0 < FS_PDE_NB) ? n - j0 : FS_PDE_NB;
        const int last = (j0 + jb - 1 + p < n - 1) ? j0 + jb - 1 + p : n - 1;
        for (int j = j0; j < j0 + jb; ++j) {
            double *cj = COL(j);
            double ajj = cj[j];
            if (!(ajj > 0.0) || !isfinite(ajj)) return j + 1;
            ajj = sqrt(ajj); cj[j] = ajj;
            const double s = 1.0 / ajj;
            const int top = (j + p < n - 1) ? j + p : n - 1;
            for (int i = j + 1; i <= top; ++i) cj[i] *= s;
            for (int m = j + 1; m < j0 + jb; ++m) {
                double *FS_RESTRICT cm = COL(m);
                const double lm = cj[m];
                for (int i = m; i <= top; ++i) cm[i] -= cj[i] * lm;
            }
        }
        if (jb == FS_PDE_NB) {
            const double *c0 = COL(j0), *c1 = COL(j0 + 1), *c2 = COL(j0 + 2), *c3 = COL(j0 + 3);
            for (int m = j0 + FS_PDE_NB; m <= last; ++m) {
                double *FS_RESTRICT cm = COL(m);
                const double l0 = c0[m], l1 = c1[m], l2 = c2[m], l3 = c3[m];
                for (int i = m; i <= last; ++i)
                    cm[i] -= c0[i] * l0 + c1[i] * l1 + c2[i] * l2 + c3[i] * l3;
            }
        } else {
            for (int q = 0; q < jb; ++q) {
                const double *cq = COL(j0 + q);
                for (int m = j0 + jb; m <= last; ++m) {
                    double *FS_RESTRICT cm = COL(m);
                    const double lq = cq[m];
                    for (int i = m; i <= last; ++i) cm[i] -= cq[i] * lq;
                }
            }
        }
    }
    return 0;
#undef COL
}

void fs_band_cholesky_solve(int n, int p, const double *ab, double *FS_RESTRICT x)
{
    const ptrdiff_t ld = p + FS_PDE_NB;
    for (int j = 0; j < n; ++j) {                 /* L z = b */
        const double *cj = ab + (ptrdiff_t)j * ld;
        const double zj = x[j] / cj[0];
        x[j] = zj;
        const int kn = (p < n - 1 - j) ? p : n - 1 - j;
        for (int i = 1; i <= kn; ++i)
            x[j + i] -= cj[i] * zj;
    }
    for (int j = n - 1; j >= 0; --j) {            /* L^T x = z */
        const double *cj = ab + (ptrdiff_t)j * ld;
        const double *xj = x + j;
        const int kn = (p < n - 1 - j) ? p : n - 1 - j;
        /* four partial sums: a dependent chain of FMAs would bound the
           dot product by their latency (no reassociation without them) */
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        int i = 1;
        for (; i + 3 <= kn; i += 4) {
            s0 += cj[i] * xj[i];
            s1 += cj[i + 1] * xj[i + 1];
            s2 += cj[i + 2] * xj[i + 2];
            s3 += cj[i + 3] * xj[i + 3];
        }
        for (; i <= kn; ++i)
            s0 += cj[i] * xj[i];
        x[j] = (x[j] - ((s0 + s1) + (s2 + s3))) / cj[0];
    }
}

static int pde_diverged(const fs_pde *m, double *value, double *grad)
{
    if (value) *value = INFINITY;
    if (grad)
        for (int k = 0; k < m->d; ++k) grad[k] = NAN;
    return FS_OK;
}

int fs_pde_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_pde *m = (const fs_pde *)state;
    const int n_el = m->n_el, d = m->d, nf = m->nf, p = m->p, n_obs = m->n_obs;
    const ptrdiff_t ld = p + FS_PDE_NB;
    const double *K = m->k_ref;
    for (int k = 0; k < d; ++k)
        if (!isfinite(q[k]))
            return pde_diverged(m, value, grad);
    double *work = fs_pool_take((fs_pool *)&m->pool);
    if (!work)
        return FS_ENOMEM;
    double *c = work;                        /* n_el          */
    double *ab = c + n_el;                   /* (p + NB) nf   */
    double *u = ab + ld * nf;                /* nf            */
    double *lam = u + nf;                    /* nf            */
    double *r = lam + nf;                    /* n_obs         */
    int status = FS_OK, bad = 0;

    /* KL expansion: c_e = exp(Phi[e, :] . theta) */
    for (int e = 0; e < n_el; ++e) {
        const double *ph = m->phi + (ptrdiff_t)e * d;
        double s = 0.0;
        for (int k = 0; k < d; ++k)
            s += ph[k] * q[k];
        c[e] = exp(s);
        if (!(c[e] > 0.0) || !isfinite(c[e]))
            bad = 1;
    }
    if (bad)
        goto diverged;

    /* assembly of the lower band and of the right-hand side -K_fd g_d */
    for (ptrdiff_t i = 0; i < ld * nf; ++i)
        ab[i] = 0.0;
    for (int i = 0; i < nf; ++i)
        u[i] = 0.0;
    for (int e = 0; e < n_el; ++e) {
        const int *fa = m->el_free + 4 * (ptrdiff_t)e;
        const double *ga = m->el_g + 4 * (ptrdiff_t)e;
        const double ce = c[e];
        for (int a = 0; a < 4; ++a) {
            const int ia = fa[a];
            if (ia < 0)
                continue;
            for (int b = 0; b < 4; ++b) {
                const int ib = fa[b];
                const double kab = ce * K[4 * a + b];
                if (ib < 0)
                    u[ia] -= kab * ga[b];
                else if (ia >= ib)
                    ab[(ia - ib) + (ptrdiff_t)ib * ld] += kab;
            }
        }
    }
    if (fs_band_cholesky(nf, p, ab) != 0)
        goto diverged;
    fs_band_cholesky_solve(nf, p, ab, u);

    /* residual and U */
    double rr = 0.0, tt = 0.0;
    for (int o = 0; o < n_obs; ++o) {
        double s = m->obs_const[o] - m->y[o];
        for (int t = m->obs_ptr[o]; t < m->obs_ptr[o + 1]; ++t)
            s += m->obs_val[t] * u[m->obs_idx[t]];
        r[o] = s;
        rr += s * s;
    }
    for (int k = 0; k < d; ++k)
        tt += q[k] * q[k];
    if (value)
        *value = 0.5 * rr * m->inv_noise_var + 0.5 * tt * m->inv_prior_var;

    if (grad) {
        /* adjoint: K lambda = O^T r / s^2 */
        for (int i = 0; i < nf; ++i)
            lam[i] = 0.0;
        for (int o = 0; o < n_obs; ++o) {
            const double w = r[o] * m->inv_noise_var;
            for (int t = m->obs_ptr[o]; t < m->obs_ptr[o + 1]; ++t)
                lam[m->obs_idx[t]] += m->obs_val[t] * w;
        }
        fs_band_cholesky_solve(nf, p, ab, lam);
        for (int k = 0; k < d; ++k)
            grad[k] = q[k] * m->inv_prior_var;
        /* dU/dtheta = -sum_e c_e (lambda_e^T K_ref u_e) Phi[e, :] */
        for (int e = 0; e < n_el; ++e) {
            const int *fa = m->el_free + 4 * (ptrdiff_t)e;
            const double *ga = m->el_g + 4 * (ptrdiff_t)e;
            double ue[4], le[4];
            for (int a = 0; a < 4; ++a) {
                ue[a] = fa[a] >= 0 ? u[fa[a]] : ga[a];
                le[a] = fa[a] >= 0 ? lam[fa[a]] : 0.0;
            }
            double s = 0.0;
            for (int a = 0; a < 4; ++a) {
                if (le[a] == 0.0)
                    continue;
                double ka = 0.0;
                for (int b = 0; b < 4; ++b)
                    ka += K[4 * a + b] * ue[b];
                s += le[a] * ka;
            }
            const double w = -c[e] * s;
            const double *ph = m->phi + (ptrdiff_t)e * d;
            for (int k = 0; k < d; ++k)
                grad[k] += w * ph[k];
        }
    }
    fs_pool_give((fs_pool *)&m->pool, work);
    return status;

diverged:
    fs_pool_give((fs_pool *)&m->pool, work);
    return pde_diverged(m, value, grad);
}
