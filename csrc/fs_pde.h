/* fs_pde.h: the elliptic PDE inverse problem of the RNS-HMC paper
 * (Zhang, Shahbaba and Zhao 2017, section 5.2) as a compiled potential.
 *
 *   div(c(x, theta) grad u) = 0 on [0, 1]^2, Dirichlet data on two sides,
 *   log c_e = sum_k Phi[e, k] theta_k     (Karhunen-Loeve expansion, c
 *                                          constant on each element e),
 *   K(c) u_f = -K_fd(c) g_d               (bilinear finite elements),
 *   U(theta) = |O u_f + o - y|^2 / (2 s^2) + |theta|^2 / (2 t^2).
 *
 * The stiffness matrix of the free nodes is SPD and banded (half bandwidth
 * p in the natural node order): each evaluation assembles its lower band
 * straight from the element coefficients, factorises it by a banded
 * Cholesky (n p^2 / 2 multiply-adds, no pivoting, no fill outside the band)
 * and solves with it; the gradient is the adjoint method (one more pair of
 * triangular solves with the same factor):
 *   K lambda = O^T r / s^2,
 *   dU/dtheta_k = -sum_e c_e Phi[e, k] lambda_e^T K_ref u_e + theta_k / t^2.
 * Everything the mesh fixes (element-to-free-node map, the reference
 * element stiffness, the KL modes, the observation operator) is set up once
 * by the caller; the arrays are not owned and must outlive the struct. */
#ifndef FS_PDE_H
#define FS_PDE_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fs_pde {
    int n_el;               /* elements                                    */
    int d;                  /* KL modes = dim                              */
    int nf;                 /* free (non-Dirichlet) nodes                  */
    int p;                  /* half bandwidth of the free-node stiffness   */
    int n_obs;              /* observations                                */
    const int *el_free;     /* n_el x 4: free index of each local node, -1 on Dirichlet nodes */
    const double *el_g;     /* n_el x 4: Dirichlet value of each local node (0 on free ones) */
    const double *k_ref;    /* 4 x 4 element stiffness for c = 1           */
    const double *phi;      /* n_el x d row-major: d(log c_e)/d(theta_k)   */
    const int *obs_ptr;     /* CSR of O (n_obs x nf): n_obs + 1            */
    const int *obs_idx;
    const double *obs_val;
    const double *obs_const;  /* o: the Dirichlet nodes' share, n_obs      */
    const double *y;          /* n_obs                                     */
    double inv_noise_var;     /* 1 / s^2                                   */
    double inv_prior_var;     /* 1 / t^2                                   */
    fs_pool pool;             /* per-call scratch: fs_pde_workspace_size   */
} fs_pde;

/* Doubles of scratch one evaluation needs: c, the band, u, lambda, r. */
size_t fs_pde_workspace_size(int n_el, int nf, int p, int n_obs);

/* Checks the sizes (n_el, d, nf, n_obs >= 1, 0 <= p < nf, finite positive
 * variances), stores the pointers and allocates the scratch pool: FS_EINVAL
 * or FS_ENOMEM otherwise.  It does not check the index arrays' contents
 * (the caller builds them from the mesh). */
int fs_pde_init(fs_pde *m, int n_el, int d, int nf, int p, int n_obs,
                const int *el_free, const double *el_g, const double *k_ref,
                const double *phi, const int *obs_ptr, const int *obs_idx,
                const double *obs_val, const double *obs_const, const double *y,
                double noise_var, double prior_var);
void fs_pde_free(fs_pde *m);

/* The fs_potential_fn of the PDE posterior (RNS-HMC paper, section 5.2:
 * U as above; gradient by the adjoint).  A non-finite theta, a coefficient
 * that over/underflows, or a non-positive pivot (the matrix is not
 * numerically SPD) gives U = +inf and a NaN gradient with FS_OK: a
 * divergence for the samplers.  Thread-safe. */
int fs_pde_eval(void *state, const double *q, double *value, double *grad);

/* Panel width of fs_band_cholesky; the band storage has ld = p + FS_PDE_NB. */
#define FS_PDE_NB 4

/* Banded Cholesky A = L L^T in place.  Storage: LAPACK's lower band with
 * ldab = p + FS_PDE_NB (ab[i + j ldab] = A[j + i, j] for i = 0..p; rows
 * p + 1 .. ldab - 1 of every column zero).  Returns 0, or j + 1 when the
 * pivot of column j is not positive (A not numerically SPD).  Exposed for
 * the tests. */
int fs_band_cholesky(int n, int p, double *FS_RESTRICT ab);

/* Solves L L^T x = b in place with the factor of fs_band_cholesky. */
void fs_band_cholesky_solve(int n, int p, const double *ab, double *FS_RESTRICT x);

#ifdef __cplusplus
}
#endif
#endif /* FS_PDE_H */
