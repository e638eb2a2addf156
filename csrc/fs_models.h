/* fs_models.h: small analytic potentials (Gaussians, the banana target).
 * Each has a state struct and an fs_potential_fn; all are thread-safe. */
#ifndef FS_MODELS_H
#define FS_MODELS_H

#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

/* U(q) = 0.5 (q - m)^T P (q - m) with P the precision matrix.
   P is dim*dim row-major symmetric (dense) or dim values (diagonal). */
typedef struct fs_gaussian {
    int dim;
    int diagonal;          /* 1: prec holds dim values                  */
    const double *mean;    /* dim                                       */
    const double *prec;    /* dim*dim or dim                            */
} fs_gaussian;

int fs_gaussian_eval(void *state, const double *q, double *value, double *grad);

/* The banana-shaped target of the RNS-HMC / NNgHMC papers:
   y_i ~ N(q0 + q1^2, sigma_y^2), i = 1..n, q0, q1 ~ N(0, sigma_q^2).
   U = [S2 - 2 m S1 + n m^2] / (2 sigma_y^2) + (q0^2 + q1^2) / (2 sigma_q^2),
   m = q0 + q1^2, S1 = sum y_i, S2 = sum y_i^2 (sufficient statistics). */
typedef struct fs_banana {
    double n, sum_y, sum_y2;
    double sigma_y, sigma_q;
} fs_banana;

int fs_banana_eval(void *state, const double *q, double *value, double *grad);

#ifdef __cplusplus
}
#endif
#endif /* FS_MODELS_H */
