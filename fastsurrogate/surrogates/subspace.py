"""Active subspaces: the directions along which a function varies most, from
gradient samples (Constantine, Dow & Wang 2014, "Active subspace methods in
theory and practice", SIAM J. Sci. Comput. 36).

A random-basis network in d dimensions with s units spans at most s
directions of each polynomial degree, and the cubic terms alone number
d (d + 1) (d + 2) / 6 (1540 at d = 20): at the RNS-HMC paper's s = 1000 on
the 20-parameter elliptic PDE the fitted network is little better than a
quadratic.  When the non-Gaussian part of U (U minus a Gaussian base, see
``RNSHMC(base="laplace")``) varies mostly along k < d directions, a network
on those k coordinates has the capacity for it; the Gaussian base covers
the rest.  This module finds the k directions.
"""
import numpy as np
import scipy.linalg as sla

__all__ = ["active_subspace"]


def active_subspace(Q, G, k):
    """The k leading directions of E[g g^T] in the whitened coordinates of Q.

    With x = L^{-1} (q - mean(Q)), L L^T the sample covariance of Q, the
    gradient in x is L^T g; the directions are the k leading eigenvectors
    V_k of C = mean over points of (L^T g)(L^T g)^T, returned as the
    projection P = V_k^T L^{-1} (so y = P (q - mean) has about unit sample
    covariance).  Whitening first makes the result independent of the
    parameters' units.

    Parameters
    ----------
    Q : ndarray (n, dim)
        Points (e.g. exploration states); n > dim.
    G : ndarray (n, dim)
        Gradients of the function at those points (e.g. of U minus a
        Gaussian base), or at a subset: then ``Q`` only sets the whitening.
    k : int
        Directions kept, 1 <= k <= dim.

    Returns
    -------
    P : ndarray (k, dim)
        Projection onto the subspace (rows: directions in q coordinates).
    eigenvalues : ndarray (dim,)
        All eigenvalues of C, in decreasing order (the share of squared
        gradient along each direction).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Q = rng.standard_normal((500, 3))
    >>> G = np.outer(np.cos(Q[:, 0] + Q[:, 1]), [1.0, 1.0, 0.0])   # f = sin(q0 + q1)
    >>> P, ev = active_subspace(Q, G, 1)
    >>> P.shape, bool(ev[1] < 1e-12 * ev[0])
    ((1, 3), True)
    """
    Q = np.asarray(Q, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    if Q.ndim != 2 or G.ndim != 2 or G.shape[1] != Q.shape[1]:
        raise ValueError(f"Q must be (n, dim) and G (m, dim); got {Q.shape} and {G.shape}")
    n, dim = Q.shape
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {k!r}")
    if not 1 <= k <= dim:
        raise ValueError(f"k must be in [1, {dim}], got {k}")
    if n <= dim or G.shape[0] < 1:
        raise ValueError(f"need more points than dimensions ({n} for {dim}) and a gradient")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(G))):
        raise ValueError("Q and G must be finite")
    S = np.cov(Q, rowvar=False).reshape(dim, dim)
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        raise ValueError("the sample covariance of Q is not positive definite (a flat "
                         "direction?)") from None
    Gx = G @ L                                   # rows: (L^T g)^T
    C = Gx.T @ Gx / Gx.shape[0]
    w, V = np.linalg.eigh(C)
    w, V = w[::-1], V[:, ::-1]
    # P = V_k^T L^{-1}, i.e. P^T = L^{-T} V_k: one triangular solve
    P = sla.solve_triangular(L, V[:, :k], trans="T", lower=True, check_finite=False).T
    return np.ascontiguousarray(P), np.maximum(w, 0.0)
