"""A scalar surrogate V ~ U fitted to values AND gradients: the surrogate of
surrogate-driven NUTS (:mod:`fastsurrogate.samplers.surrogate_nuts`).

V(q) = B(q) + z(q): an optional Gaussian base B (the Laplace approximation,
or any :class:`~fastsurrogate.models.Gaussian`) plus a random-basis network
z (softplus nodes, as the RNS-HMC paper's) whose output weights v solve one
ridge problem over stacked value and gradient rows:

    min_v  sum_n (z(q_n) + b - r_n)^2  +  sum_n |T^-T (grad z(q_n) - g_n)|^2
           + lam |v|^2,

with r_n = U(q_n) - B(q_n), g_n = grad U(q_n) - grad B(q_n), and gradient
errors measured in the whitened coordinates x = T (q - m) of the base (or
of the training points), where one unit is one posterior standard deviation.

The gradient rows cost nothing extra to assemble: with a_n = c W x_n + d the
pre-activations, s_n = sigmoid(a_n) (the softplus derivative) and W the
(n_hidden, dim) input weights in x, the gradient rows' Gram matrix is
(S^T S) o (c^2 W W^T) (o: elementwise) and their right-hand side
c sum_n s_n o (W T^-T g_n), so the fit is O(N n_hidden^2) whatever the
dimension: a point with its gradient gives dim + 1 equations for the price
of one row.  The network is folded into a :class:`RandomNetwork` (weights
c W T, biases d - c W T m), so evaluating V costs one (n_hidden x dim)
product and the base's (dim x dim) one.

What decides whether V is good enough is what the exact correction of
surrogate NUTS will see: its log ratio (U - V)(q') - (U - V)(q).  For held-
out points with errors e_n = U(q_n) - V(q_n) (up to a constant),
:func:`predicted_acceptance` is the mean of min(1, exp(e_i - e_j)) over pairs,
the correction's acceptance if current state and proposal were two
independent held-out points.
"""
import numpy as np
import scipy.linalg as sla

from ._network import RandomNetwork
from .gp import fit_fitc
from ..core._potential import WeightedSum
from ..core import _blas_threads

__all__ = ["fit_surrogate", "fit_value_gradient", "fit_fitc_residual", "predicted_acceptance",
           "gaussian_base_terms", "FITS"]

#: the kinds of V: the random network on values and gradients, the same
#: network on gradients alone (score matching), a FITC GP on values
FITS = ("network", "score", "fitc")

#: input scales c tried (nodes see c W x, x whitened: pre-activations of sd ~c)
INPUT_SCALES = (0.15, 0.4, 1.0)
#: relative ridges tried (times the mean diagonal of the Gram matrix)
RIDGES = (1e-7, 1e-5, 1e-3, 1e-1)
#: training points the choice of input scale and ridge is made on (an even
#: subsample of the rest; the final fit uses every point)
MAX_SELECTION_POINTS = 1000


def predicted_acceptance(err, max_pairs=250000, seed=0):
    """Mean of min(1, exp(e_i - e_j)) over ordered pairs i != j of `err`.

    err : (n,) U - V at held-out points (any constant offset cancels).
    With more than ``sqrt(max_pairs)`` points, a fixed subsample is used.
    Returns 1.0 for fewer than 2 points.
    """
    e = np.asarray(err, dtype=np.float64).ravel()
    e = e[np.isfinite(e)]
    n = e.shape[0]
    if n < 2:
        return 1.0
    m = int(np.sqrt(max_pairs))
    if n > m:
        e = e[np.random.default_rng(seed).choice(n, m, replace=False)]
        n = m
    diff = e[:, None] - e[None, :]
    a = np.exp(np.minimum(diff, 0.0))
    return float((a.sum() - n) / (n * (n - 1)))


def gaussian_base_terms(base, Q):
    """B(Q) (n,) and grad B(Q) (n, dim) of a Gaussian base (None: zeros)."""
    if base is None:
        return np.zeros(Q.shape[0]), np.zeros_like(Q)
    D = Q - base.mean
    P = base.precision
    if P.ndim == 1:
        G = D * P
    else:
        G = D @ P
    return 0.5 * np.einsum("ij,ij->i", D, G), G


def _whitening(base, Q):
    """(m, T, Tinv_T) with x = T (q - m): from the base's covariance, else from
    the points' (regularised) covariance."""
    d = Q.shape[1]
    if base is not None:
        m = np.asarray(base.mean, dtype=np.float64)
        C = base.covariance
    else:
        m = Q.mean(axis=0)
        C = np.cov(Q, rowvar=False).reshape(d, d)
        C = C + 1e-10 * max(np.trace(C) / d, 1e-300) * np.eye(d)
    L = np.linalg.cholesky(C)
    T = sla.solve_triangular(L, np.eye(d), lower=True, check_finite=False)
    return m, T, L


def _features(X, W0, b0, c):
    """Softplus features H and their derivatives S (sigmoid) at inputs X
    (rows), from one exponential: with t = exp(-|a|), softplus(a) =
    max(a, 0) + log1p(t) and sigmoid(a) = 1 / (1 + t) for a >= 0, t / (1 + t)
    below."""
    A = X @ (c * W0.T)
    A += b0
    T = np.exp(-np.abs(A))
    H = np.log1p(T)
    H += np.maximum(A, 0.0)
    S = T
    S /= 1.0 + T
    np.subtract(1.0, S, out=S, where=A >= 0.0)
    return H, S


class _Design:
    """Features of one input scale: the Gram matrix of value rows (centred:
    a free bias) and gradient rows, and its right-hand side.  With
    ``values=False`` the gradient rows alone (score matching); the value
    rows' mean then only sets the bias."""

    def __init__(self, X, Rx, r, has_grad, W0, b0, c, values=True):
        H, S = _features(X, W0, b0, c)
        self.hm, self.rm = H.mean(axis=0), r.mean()
        H -= self.hm
        Sg = S[has_grad]
        K = (c * c) * (W0 @ W0.T)
        self.G = (Sg.T @ Sg) * K
        self.rhs = c * np.sum(Sg * (Rx[has_grad] @ W0.T), axis=0)
        if values:
            self.G += H.T @ H
            self.rhs += H.T @ (r - self.rm)
        self.c = c

    def solve(self, ridge):
        G = self.G.copy()
        s = G.shape[0]
        G[np.diag_indices(s)] += ridge * max(np.trace(G) / s, np.finfo(float).tiny)
        try:
            v = sla.cho_solve(sla.cho_factor(G, lower=True, check_finite=False), self.rhs,
                              check_finite=False)
        except np.linalg.LinAlgError:
            v = sla.lstsq(G, self.rhs, lapack_driver="gelsd", check_finite=False)[0]
        return v, float(self.rm - self.hm @ v)


def even_indices(n, k):
    """k indices spread evenly over range(n), first and last included (k < n)."""
    return np.linspace(0, n - 1, k).round().astype(np.int64)


def _checked_points(Q, u, G, held_out):
    """Q (N, dim), u (N,), G (N, dim) (NaN rows: no gradient; None: none)
    and held_out (N,) bool (None: the last fifth), checked."""
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64).ravel()
    N, d = Q.shape
    if u.shape != (N,):
        raise ValueError(f"u must have shape ({N},), got {u.shape}")
    G = np.full((N, d), np.nan) if G is None else np.asarray(G, dtype=np.float64)
    if G.shape != (N, d):
        raise ValueError(f"G must have shape ({N}, {d}), got {G.shape}")
    if N < 4:
        raise ValueError(f"need at least 4 points, got {N}")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(u))):
        raise ValueError("Q and u must be finite")
    if held_out is None:
        held_out = np.zeros(N, dtype=bool)
        held_out[N - max(N // 5, 2):] = True
    held_out = np.asarray(held_out, dtype=bool)
    if held_out.shape != (N,) or held_out.all() or not held_out.any():
        raise ValueError("held_out must be N booleans leaving points on both sides")
    return Q, u, G, held_out


def fit_value_gradient(Q, u, G=None, *, base=None, n_hidden=300, held_out=None, seed=None,
                       input_scales=INPUT_SCALES, blas_threads=1, values=True):
    """Fit V = base + random-basis network to U values and gradients.

    Parameters
    ----------
    Q : ndarray (N, dim)
        Points (e.g. every leapfrog point of an exact NUTS warm-up).
    u : ndarray (N,)
        U at the points.
    G : ndarray (N, dim), optional
        grad U at the points; rows with NaN (value-only points, e.g. the
        exact corrections' proposals) give value rows only.
    base : fastsurrogate.models.Gaussian, optional
        The Gaussian base B; the network fits U - B.  None: the network alone
        (inputs whitened by the points' covariance).
    n_hidden : int
        Hidden units (0: the base alone, which needs a base).
    held_out : ndarray of bool (N,), optional
        Points left out of the choice of input scale and ridge (and scored):
        the input scale and ridge with the best predicted acceptance there
        are kept, then the network is refitted on all points.  None: the
        last fifth of the points.
    seed : int or Generator
        The random basis.
    input_scales : sequence of float
        The input scales c tried (nodes see c W x, x whitened); a refit may
        pass the one chosen before.
    blas_threads : int or None
        Threads for the Gram matrices and the Cholesky solve.
    values : bool
        Fit the value rows too (True).  False: the gradient rows alone, the
        gradient (score) matching of Variational HMC (Zhang, Shahbaba & Zhao
        2018, eq. 3.19) in one batch; the values then only set V's constant
        and score the held-out points.  Needs gradients.

    Returns
    -------
    V : Potential
        ``base + network`` (a :class:`WeightedSum`), the network alone, or
        the base alone (when the network does not beat it on the held-out
        points).  ``V.info`` (a dict attribute of the returned object's
        ``fit_info``) is returned separately.
    info : dict
        ``predicted_acceptance`` (held-out, of the V returned),
        ``base_acceptance`` (the base alone), ``input_scale``, ``ridge``,
        ``n_points``, ``n_gradients``, ``n_hidden``, ``kind``.
    """
    Q, u, G, held_out = _checked_points(Q, u, G, held_out)
    N, d = Q.shape
    if base is None and n_hidden < 1:
        raise ValueError("n_hidden = 0 needs a base")
    has_grad = np.all(np.isfinite(G), axis=1)
    if not values and not has_grad.any():
        raise ValueError("values=False (score matching) needs gradients")
    r, X, Rx, m, T = _whitened_residuals(base, Q, u, G, has_grad)
    base_acc = predicted_acceptance(r[held_out]) if base is not None else 0.0
    info = {"n_points": int(N), "n_gradients": int(has_grad.sum()), "n_hidden": int(n_hidden),
            "base_acceptance": base_acc}
    if n_hidden < 1:
        info.update(kind="base", predicted_acceptance=base_acc)
        return base, info
    rng = np.random.default_rng(seed)
    W0 = rng.standard_normal((n_hidden, d)) / np.sqrt(d)
    b0 = rng.standard_normal(n_hidden)
    with _blas_threads.blas_threads(blas_threads):
        acc, c, lam = _best_scale_and_ridge(X, Rx, r, has_grad, held_out, W0, b0, input_scales,
                                            values)
        if c is None or (base is not None and acc <= base_acc):
            if base is None:
                raise ValueError("no finite network fit")
            info.update(kind="base", predicted_acceptance=base_acc)
            return base, info
        v, b = _Design(X, Rx, r, has_grad, W0, b0, c, values).solve(lam)
    Weff = c * (W0 @ T)
    net = RandomNetwork(Weff, b0 - Weff @ m, v, b, "softplus")
    info.update(kind="network" if base is None else "base+network", input_scale=c, ridge=lam,
                predicted_acceptance=acc, rows="values and gradients" if values else "gradients")
    V = net if base is None else WeightedSum([base, net])
    return V, info


def _whitened_residuals(base, Q, u, G, has_grad):
    """(r, X, Rx, m, T): the residuals r = U - B of the values, the points in
    whitened coordinates X = (Q - m) T^T, and the gradient residuals
    grad U - grad B in those coordinates (L^T g as rows; zero rows where
    there is no gradient)."""
    Bq, gB = gaussian_base_terms(base, Q)
    r = u - Bq
    Rq = np.where(has_grad[:, None], G - gB, 0.0)
    m, T, L = _whitening(base, Q)
    X = (Q - m) @ T.T
    Rx = Rq @ L                 # gradient in x: L^T g, as rows
    return r, X, Rx, m, T


def _best_scale_and_ridge(X, Rx, r, has_grad, held_out, W0, b0, input_scales, values):
    """(predicted acceptance, input scale, ridge) of the fit on the training
    points (an even subsample of at most MAX_SELECTION_POINTS) that scores
    best on the held-out points; (-1, None, None) when no fit is finite."""
    tr = np.flatnonzero(~held_out)
    if tr.shape[0] > MAX_SELECTION_POINTS:      # the choice on an even subsample
        tr = tr[even_indices(tr.shape[0], MAX_SELECTION_POINTS)]
    best = (-1.0, None, None)
    for c in input_scales:
        des = _Design(X[tr], Rx[tr], r[tr], has_grad[tr], W0, b0, c, values)
        Hh = _features(X[held_out], W0, b0, c)[0]
        for lam in RIDGES:
            v, b = des.solve(lam)
            if not np.all(np.isfinite(v)):
                continue
            acc = predicted_acceptance(r[held_out] - (Hh @ v + b))
            if acc > best[0]:
                best = (acc, c, lam)
    return best


def fit_fitc_residual(Q, u, *, base=None, n_inducing=100, held_out=None, seed=None,
                      max_train=MAX_SELECTION_POINTS):
    """V = base + the mean of a FITC sparse GP fitted to the values U - base
    (the FITC-HMC surrogate of the RNS-HMC paper, section 3.3, on the
    residual of a Gaussian base): gradients are not used.

    The hyper-parameters and the fit use at most ``max_train`` training
    points (an even subsample: FITC costs O(N n_inducing^2) per likelihood
    evaluation); the held-out points score it as in
    :func:`fit_value_gradient`, whose arguments and returns these are.
    """
    Q, u, _, held_out = _checked_points(Q, u, None, held_out)
    N = Q.shape[0]
    r = u - gaussian_base_terms(base, Q)[0]
    tr = np.flatnonzero(~held_out)
    if tr.shape[0] > max_train:
        tr = tr[even_indices(tr.shape[0], max_train)]
    m = int(min(n_inducing, tr.shape[0]))
    gp = fit_fitc(Q[tr], r[tr], n_inducing=m, seed=seed, max_iter=100)
    acc = predicted_acceptance(r[held_out] - gp.predict(Q[held_out]))
    base_acc = predicted_acceptance(r[held_out]) if base is not None else 0.0
    info = {"n_points": int(N), "n_gradients": 0, "n_hidden": m, "base_acceptance": base_acc}
    if base is not None and acc <= base_acc:
        info.update(kind="base", predicted_acceptance=base_acc)
        return base, info
    info.update(kind="fitc" if base is None else "base+fitc", predicted_acceptance=acc,
                n_train=int(tr.shape[0]))
    return (gp.potential if base is None else WeightedSum([base, gp.potential])), info


def fit_surrogate(Q, u, G=None, *, fit="network", base=None, n_hidden=300, held_out=None,
                  seed=None, input_scales=INPUT_SCALES):
    """V of kind ``fit`` (one of :data:`FITS`): ``"network"``
    (:func:`fit_value_gradient`), ``"score"`` (the same, gradient rows
    alone) or ``"fitc"`` (:func:`fit_fitc_residual`, ``n_hidden`` inducing
    points).  Returns ``(V, info)``."""
    if fit == "fitc":
        return fit_fitc_residual(Q, u, base=base, n_inducing=n_hidden, held_out=held_out,
                                 seed=seed)
    if fit not in FITS:
        raise ValueError(f"fit must be one of {FITS}, got {fit!r}")
    return fit_value_gradient(Q, u, G, base=base, n_hidden=n_hidden, held_out=held_out,
                              seed=seed, input_scales=input_scales, values=fit == "network")
