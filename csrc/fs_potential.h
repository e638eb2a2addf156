/* fs_potential.h: the contract every part of fastsurrogate is built around.
 *
 * A potential is U(q) = -log density(q) (up to an additive constant) on R^dim.
 * Models (GLMs, PDE inverse problems, ...), trained surrogates and Python
 * callables are all fs_potential; the samplers only ever see this struct.
 *
 * eval(state, q, value, grad):
 *   q      in:  dim doubles
 *   value  out: U(q), or NULL when the caller does not need it
 *   grad   out: dU/dq (dim doubles), or NULL when the caller does not need it
 *   returns FS_OK, or an FS_E* code (fs_common.h).  A non-finite value or
 *   gradient with FS_OK is allowed: samplers treat it as a divergence.
 *
 * An eval whose potential is marked thread-safe by its owner may be called
 * from several threads at once with different q.
 *
 * This layout is part of the public ABI ("fastsurrogate.potential_v1"
 * capsules point at one): it must match fastsurrogate/core/_common.pxd.
 */
#ifndef FS_POTENTIAL_H
#define FS_POTENTIAL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*fs_potential_fn)(void *state, const double *q, double *value,
                               double *grad);

typedef struct fs_potential {
    void *state;
    fs_potential_fn eval;
    int dim;
} fs_potential;

#ifdef __cplusplus
}
#endif
#endif /* FS_POTENTIAL_H */
