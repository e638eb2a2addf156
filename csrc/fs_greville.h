/* fs_greville.h: online least squares for the output weights of a random
 * network, one new point at a time (ARNS-HMC).
 *
 * Reference: C. Zhang, B. Shahbaba, H. Zhao (2017), "Hamiltonian Monte Carlo
 * acceleration using surrogate functions with random bases", Statistics and
 * Computing 27: Algorithm 4, Proposition 1 and Appendix C.
 *
 * The network's hidden features of the n points seen so far form H (n x s),
 * their targets y (n).  After every update the state holds
 *
 *   pseudo-inverse mode (lambda == 0):
 *     v     = H^+ y             minimum-norm least-squares weights
 *     Phi   = I - H^+ H         projector onto the null space of H
 *     Theta = H^+ H^{+T}        (= (H^T H)^+)
 *   ridge mode (lambda > 0):
 *     v     = (H^T H + lambda I)^{-1} H^T y
 *     Theta = P = (H^T H + lambda I)^{-1}   (Phi is not used: NULL)
 *
 * Adding a row h with target t (Greville's recursion for a new row; all
 * products O(s^2)):
 *     c = Phi h
 *     c != 0 (||c|| > tol ||h||):  b = c / (c.c)
 *         Phi   <- Phi - c c^T / (c.c)
 *         Theta <- Theta - b u^T - u b^T + (1 + h.u) b b^T,   u = Theta h
 *     c == 0 (h in the row space of H), and every ridge update:
 *         b = u / (1 + h.u),  u = Theta h
 *         Theta <- Theta - u u^T / (1 + h.u)
 *     v <- v + b (t - h.v)
 * (the c != 0 Theta update is applied as Theta - q q^T + p p^T with
 *  q = u / sqrt(g), p = sqrt(g) (b - u / g), g = 1 + h.u, both symmetric.)
 *
 * Storage: Phi and Theta are s x s row-major arrays of which ONLY THE UPPER
 * TRIANGLE (entries [i*s + j], j >= i; 'L' for Fortran BLAS) is read and
 * maintained, so both stay exactly symmetric; the strict lower triangle holds
 * stale values.  Mirror the upper triangle to read a full matrix.
 *
 * Numerical guards: the c != 0 test is relative (||Phi h|| > tol ||h||); in
 * that branch c is projected twice (c = Phi (Phi h), "twice is enough"), so
 * the new direction stays orthogonal to the row space; once the row space
 * fills R^s (rank == s) Phi is set to exactly zero and no longer read; the
 * updates are symmetric rank-one forms.  Accuracy: Theta stores the
 * explicit (H^T H)^+, so rounding errors made while a prefix H_k is badly
 * conditioned (typically at k ~ s, where the last new direction arrives) are
 * of order eps cond(H_k)^2 |Theta_k| and are not forgotten once later rows
 * make H well conditioned (Gaussian rows, s = 200: 1e-13 relative for
 * cond(H_s) ~ 1e3, 1e-10 for 1e4).  Hence the re-synchronisation with a
 * batch solve (fs_greville_resync) every `resync_every` updates, or once
 * after n passes s; the state does not keep the data, so the caller passes
 * H and y.  A larger tol treats nearly dependent rows as in the span.
 *
 * Plain C99, no Python.h.  The update is plain C loops (vectorised, fixed
 * summation order; faster than BLAS level 2 at these sizes); the batch solve
 * calls BLAS/LAPACK through the fs_blas table.
 */
#ifndef FS_GREVILLE_H
#define FS_GREVILLE_H

#include <stddef.h>
#include "fs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fs_greville {
    int s;                 /* hidden units: columns of H, length of v        */
    int ridge;             /* 1: ridge mode (lambda > 0); 0: pseudo-inverse  */
    double lambda;         /* ridge penalty (>= 0)                           */
    double tol;            /* relative threshold of the c != 0 test          */
    long n_seen;           /* rows absorbed (batch rows + updates)           */
    int rank;              /* pinv mode: dim. of the row space of H; ridge: 0 */
    long n_new_direction;  /* updates that took the c != 0 branch            */
    long n_in_span;        /* updates that took the c == 0 (or ridge) branch */
    long resync_every;     /* 0: never; else resync is due after this many updates */
    long since_resync;     /* updates since the last (re)initialisation      */
    const fs_blas *blas;   /* borrowed; must outlive the state               */
    double *v;             /* s: output weights                              */
    double *Phi;           /* s*s (upper triangle) or NULL in ridge mode     */
    double *Theta;         /* s*s (upper triangle): Theta, or P in ridge mode */
    double *mem;           /* owned block behind v, Phi, Theta               */
} fs_greville;

/* Empty state (n = 0): v = 0; pinv mode Phi = I, Theta = 0, rank = 0; ridge
 * mode P = I / lambda (RLS start, Prop. 1 with a ridge prior).  Allocates
 * (s + 2 s^2) doubles once; release with fs_greville_free.  lambda >= 0
 * (0 selects pseudo-inverse mode), tol >= 0, s >= 1, else FS_EINVAL.
 * resync_every starts at 0 (never due). */
int fs_greville_init(fs_greville *g, const fs_blas *blas, int s, double lambda,
                     double tol);

/* Frees the owned memory; the struct may then be init-ed again. */
void fs_greville_free(fs_greville *g);

/* Back to the empty state (n = 0) without reallocating. */
void fs_greville_reset(fs_greville *g);

/* Doubles of workspace that fs_greville_update / _update_many need: 3 s. */
size_t fs_greville_workspace_size(int s);

/* Doubles of workspace that fs_greville_resync / _init_batch need for n rows
 * (asks LAPACK dsyev for its optimal work size through g->blas). */
size_t fs_greville_batch_workspace_size(const fs_greville *g, long n);

/* One new point (Algorithm 4, Proposition 1 / Appendix C): absorbs the row h
 * (s doubles) with target y in O(s^2) work, whatever the number of points
 * seen.  work: fs_greville_workspace_size(s) doubles.  Returns FS_ENONFINITE
 * (state untouched) if h or y is not finite, FS_ESINGULAR (state untouched)
 * if Theta has lost positive semi-definiteness (1 + h.Theta h <= 0): resync.
 * Does not check that work is large enough. */
int fs_greville_update(fs_greville *g, const double *h, double y,
                       double *FS_RESTRICT work);

/* n points in order (H: n x s row-major, y: n), as n calls of
 * fs_greville_update.  *n_done (may be NULL) receives the number of rows
 * absorbed; on an error the state holds the first *n_done rows. */
int fs_greville_update_many(fs_greville *g, const double *H, const double *y,
                            long n, double *FS_RESTRICT work, long *n_done);

/* Batch solve (Appendix C start-up; re-synchronisation): replaces the state
 * by the one of the data (H: n x s row-major, y: n), n_seen = n.
 * pinv mode: eigen-decomposition of the Gram matrix H^T H = V diag(l) V^T
 * (LAPACK dsyev); directions with l_i <= l_max * max(tol^2, s * eps) are the
 * null space: Phi = V_0 V_0^T, Theta = V_r diag(1/l_r) V_r^T,
 * v = Theta H^T y refined twice by v += Theta H^T (y - H v).  Accurate while
 * cond(H)^2 * eps << 1 (a Gram matrix squares the condition number).
 * ridge mode: Cholesky of H^T H + lambda I (dpotrf), P from dpotrs on I,
 * v by dpotrs plus one refinement step.
 * work: fs_greville_batch_workspace_size(g, n) doubles.  Returns FS_ELAPACK,
 * FS_ESINGULAR (ridge Cholesky failed) or FS_ENONFINITE (non-finite data);
 * then the state is the empty one.  n == 0 gives the empty state.
 * Resets resync counter and branch counters. */
int fs_greville_resync(fs_greville *g, const double *H, const double *y, long n,
                       double *FS_RESTRICT work);

/* fs_greville_init followed by fs_greville_resync (init from a batch).  On
 * an error after the allocation the state is empty but allocated: free it. */
int fs_greville_init_batch(fs_greville *g, const fs_blas *blas, int s,
                           double lambda, double tol, const double *H,
                           const double *y, long n, double *FS_RESTRICT work);

/* 1 when resync_every > 0 and at least resync_every updates have been made
 * since the last init / resync; else 0. */
int fs_greville_resync_due(const fs_greville *g);

#ifdef __cplusplus
}
#endif
#endif /* FS_GREVILLE_H */
