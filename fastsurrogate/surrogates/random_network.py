"""Random-basis networks fitted to (q, U(q)) pairs: the batch ELM trainer of
the RNS-HMC paper (Algorithm 2).

The hidden layer is random and fixed (input weights w ~ N(0, I/d), biases
~ N(0, 1), softplus nodes, applied to standardised inputs, as the authors'
own code does); only the output weights are fitted, by ridge-regularised
least squares solved with a Cholesky factorisation (LAPACK), falling back to
an SVD-based least-squares solve when the normal equations are not
numerically positive definite.
"""
import numpy as np
import scipy.linalg as sla

from ._network import RandomNetwork
from ..core import _blas_threads

__all__ = ["fit_output_weights", "train_random_network", "standardization", "whitening"]


def standardization(Q):
    """Affine standardisation of training inputs: (shift, scale), each (dim,)."""
    shift = Q.mean(axis=0)
    scale = Q.std(axis=0)
    scale[~(scale > 0)] = 1.0
    return shift, scale


def whitening(Q):
    """Whitening of training inputs: (shift, T) with x = T (q - shift) of unit
    sample covariance.  T = L^{-1} for the Cholesky factor L of the sample
    covariance, computed by a triangular solve (no explicit inverse).
    Returns T = None when the covariance is not numerically positive definite
    (fewer points than dimensions, or a flat direction)."""
    shift = Q.mean(axis=0)
    S = np.cov(Q, rowvar=False).reshape(Q.shape[1], Q.shape[1])
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return shift, None
    d = np.diag(L)
    if not np.all(d > 1e-8 * d.max()):
        return shift, None
    T = sla.solve_triangular(L, np.eye(Q.shape[1]), lower=True, check_finite=False)
    return shift, T


def _ridge_path(H, y, ridges):
    """Output weights (v, b) for each relative ridge in `ridges`, one Gram matrix.

    With fewer training points than units (N < s) the dual form
    v = Hc^T (Hc Hc^T + lam I)^-1 yc solves the same ridge problem with an
    N x N system instead of s x s (the s x s Gram is then singular up to the
    ridge, and its factorisation fails over to an SVD that cost tens of
    seconds at s = 2000); lam is the same in both forms (relative to
    trace(Hc^T Hc) / s).
    """
    hm, ym = H.mean(axis=0), y.mean()
    Hc, yc = H - hm, y - ym
    n, s = Hc.shape
    dual = n < s
    G = Hc @ Hc.T if dual else Hc.T @ Hc
    rhs = yc if dual else Hc.T @ yc
    scale = max(np.trace(G) / s, np.finfo(float).tiny)
    out = []
    for r in ridges:
        Gr = G.copy()
        Gr[np.diag_indices_from(Gr)] += r * scale
        try:
            a = sla.cho_solve(sla.cho_factor(Gr, lower=True, check_finite=False), rhs,
                              check_finite=False)
        except np.linalg.LinAlgError:
            a = sla.lstsq(Gr, rhs, lapack_driver="gelsd", check_finite=False)[0]
        v = Hc.T @ a if dual else a
        out.append((v, float(ym - hm @ v)))
    return out


INPUT_SCALES = (0.05, 0.2, 0.5, 1.0)
RIDGES = (1e-12, 1e-10, 1e-8)


def fit_output_weights(H, y, ridge=1e-8, fit_bias=True):
    """Ridge least squares for the output layer.

    Solves min_v ||H v + b - y||^2 + lam ||v||^2 with the bias b unpenalised,
    lam = ridge * mean(diag(H_c^T H_c)) (ridge is relative to the feature
    scale, so one default fits every network size), by Cholesky of the
    normal equations of the centred problem.

    Parameters
    ----------
    H : ndarray (N, s)
        Hidden-layer features of the training points.
    y : ndarray (N,)
        Targets.
    ridge : float
        Relative ridge parameter (>= 0).

    Returns
    -------
    v : ndarray (s,), b : float
    """
    H = np.asarray(H, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if H.ndim != 2 or y.shape != (H.shape[0],):
        raise ValueError(f"H must be (N, s) and y (N,); got {H.shape} and {y.shape}")
    if not (ridge >= 0 and np.isfinite(ridge)):
        raise ValueError(f"ridge must be >= 0, got {ridge}")
    if fit_bias:
        hm, ym = H.mean(axis=0), y.mean()
        Hc, yc = H - hm, y - ym
    else:
        hm, ym, Hc, yc = np.zeros(H.shape[1]), 0.0, H, y
    G = Hc.T @ Hc
    lam = ridge * max(np.trace(G) / G.shape[0], np.finfo(float).tiny)
    rhs = Hc.T @ yc
    G[np.diag_indices_from(G)] += lam
    try:
        v = sla.cho_solve(sla.cho_factor(G, lower=True, check_finite=False), rhs,
                          check_finite=False)
    except np.linalg.LinAlgError:
        v = sla.lstsq(G, rhs, lapack_driver="gelsd", check_finite=False)[0]
    if not np.all(np.isfinite(v)):
        v = sla.lstsq(Hc, yc, lapack_driver="gelsd", check_finite=False)[0]
    b = float(ym - hm @ v)
    return v, b


def train_random_network(Q, u, n_hidden=1000, activation="softplus", ridge="auto",
                         standardize=True, input_scale="auto", seed=None, rbf_scale=1.0,
                         shift_targets=True, validation=0.2, blas_threads=1, progress=None,
                         directions=None):
    """Fit a random-basis network z(q) ~ U(q) on training pairs (Algorithm 2).

    Parameters
    ----------
    Q : ndarray (N, dim)
        Training positions (states of the exploration chain).
    u : ndarray (N,)
        Exact U at those positions.
    n_hidden : int
        Hidden units s.
    activation : {"softplus", "sigmoid", "tanh", "rbf"}
    ridge : float or "auto"
        Relative ridge parameter of the output least squares.  "auto" picks
        it from (1e-12, 1e-10, 1e-8) by the error on held-out points.
    standardize : bool or "whiten"
        True: standardise inputs by the training set's mean and sd (each
        coordinate on its own).  "whiten": by its mean and covariance (x =
        L^{-1} (q - mean), L L^T the sample covariance; folded into the
        hidden weights, so evaluation costs the same).  Whitening helps
        ill-conditioned posteriors with correlated parameters, where the
        gradient along the narrow directions is what the leapfrog needs
        most; it needs more training points than dimensions and falls back
        to True otherwise.
    input_scale : float or "auto"
        Additive nodes see x = input_scale * (q - mean) / sd.  "auto" (the
        default) picks it from (0.05, 0.2, 0.5, 1) together with the ridge, by
        the RMSE of U on the last ``validation`` fraction of the training
        points (the latest chain states), then refits on all points.  With the
        default input weights w ~ N(0, I/d), a pre-activation then varies by
        about input_scale over the training set: small values keep every node
        in its smooth, nearly quadratic range (right for near-Gaussian
        posteriors: on the paper's 50-d logistic regression 0.05-0.3 give
        acceptance within 2 % of exact HMC, 0.5 within 5 % and 1 loses 10 %);
        larger values resolve stronger non-Gaussian structure (on the banana
        target 0.05 halves the acceptance, 0.5 is within 2 % of HMC).  The
        default, 0.5, serves both.  Ignored for RBF nodes.
    seed : int or Generator
        Random basis.
    rbf_scale : float
        Width multiplier of RBF nodes (centres are training points).
    shift_targets : bool
        Subtract min(u) from the targets (the authors' practice; it only
        moves the output bias).
    validation : float
        Held-out fraction for the automatic choices.
    blas_threads : int or None
        Threads of SciPy's BLAS for the fit (Gram matrices and Cholesky
        factors; None: the library's setting).  One by default: OpenBLAS's
        threads spin while they wait, and on a busy 2-core machine an 800 x 800
        Cholesky took 0.6-2.0 s with two threads against 0.08-0.12 s with one
        (AMD EPYC, load 17); on an idle machine two threads save at most half
        of a fit that is seconds long.
    progress : callable, optional
        ``progress(n_done, n_total)`` after each candidate fit (input scale)
        and after the final fit; samplers pass their progress bar's.
    directions : ndarray (k, dim), optional
        Additive nodes see only the k projections y = directions @ (q -
        mean), whitened over the training set (e.g. an active subspace,
        :func:`fastsurrogate.surrogates.subspace.active_subspace`): the
        network is constant along the other directions, and its capacity
        goes to the k that matter.  The input weights are drawn in k
        dimensions (w ~ N(0, I/k)) and folded into (s, dim) weights, so
        evaluation costs the same.  Not with RBF nodes or
        ``standardize=False``.

    Returns
    -------
    RandomNetwork
        A Potential; ``net.info`` holds the training RMSE.
    """
    Q, u, directions = _checked_data(Q, u, directions, activation, standardize)
    with _blas_threads.blas_threads(blas_threads):
        return _fit(Q, u, n_hidden, activation, ridge, standardize, input_scale, seed,
                    rbf_scale, shift_targets, validation, progress, directions)


def _checked_data(Q, u, directions, activation, standardize):
    """Q (N, dim), u (N,) and directions (k, dim) or None for
    :func:`train_random_network`, as float64 arrays, checked."""
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64).ravel()
    if Q.ndim != 2 or u.shape[0] != Q.shape[0]:
        raise ValueError(f"Q must be (N, dim) and u (N,); got {Q.shape} and {u.shape}")
    if Q.shape[0] < 2:
        raise ValueError("need at least 2 training points")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(u))):
        raise ValueError("training data contain NaN or inf")
    if not np.any(Q != Q[0]):
        raise ValueError(f"all {Q.shape[0]} training points are the same point: a network "
                         "fitted to them is a constant with zero gradient (did the chain "
                         "ever move?)")
    if directions is not None:
        directions = np.asarray(directions, dtype=np.float64)
        if directions.ndim != 2 or directions.shape[1] != Q.shape[1] or directions.shape[0] < 1:
            raise ValueError(f"directions must be (k, {Q.shape[1]}) with k >= 1, got "
                             f"shape {directions.shape}")
        if not np.all(np.isfinite(directions)):
            raise ValueError("directions must be finite")
        if activation == "rbf" or standardize is False:
            raise ValueError("directions apply to additive nodes on standardised inputs "
                             "(not activation='rbf' or standardize=False)")
    return Q, u, directions


def _projected_whitening(Q, P):
    """(shift, T) with x = T (q - shift) the whitened k projections P (q - shift)."""
    shift = Q.mean(axis=0)
    _, Tk = whitening((Q - shift) @ P.T)
    if Tk is None:      # a degenerate projection: scale each coordinate instead
        sd = ((Q - shift) @ P.T).std(axis=0)
        sd[~(sd > 0)] = 1.0
        Tk = np.diag(1.0 / sd)
    return shift, Tk @ P


def _checked_choices(input_scale, ridge, standardize):
    """(input scale automatic, ridge automatic), or the ValueError that names
    the bad option."""
    auto_c = isinstance(input_scale, str)
    auto_r = isinstance(ridge, str)
    if (auto_c and input_scale != "auto") or (auto_r and ridge != "auto"):
        raise ValueError('input_scale and ridge take a number or "auto"')
    if not auto_c and not (input_scale > 0 and np.isfinite(input_scale)):
        raise ValueError(f"input_scale must be positive, got {input_scale!r}")
    if not auto_r and not (ridge >= 0 and np.isfinite(ridge)):
        raise ValueError(f"ridge must be >= 0, got {ridge!r}")
    if standardize not in (True, False, "whiten"):
        raise ValueError(f'standardize must be True, False or "whiten", got {standardize!r}')
    return auto_c, auto_r


def _input_map(Q, directions, standardize, activation):
    """(standardize, w_shift, whiten): the whitening x = whiten (q - w_shift)
    of the directions' projections or of q itself (standardize then True),
    or whiten None (standardize unchanged)."""
    if directions is not None:
        w_shift, whiten = _projected_whitening(Q, directions)
        return True, w_shift, whiten
    if standardize == "whiten":
        if activation == "rbf":
            raise ValueError('standardize="whiten" applies to additive nodes only')
        w_shift, whiten = whitening(Q)
        return True, w_shift, whiten
    return standardize, None, None


def _select(make, Q, u, offset, scales, ridges, n_val, report):
    """((input scale, ridge) with the lowest RMSE of U on the last ``n_val``
    points, fitted on the others; {(scale, ridge): RMSE} of every pair)."""
    choice, scores, best = (scales[0], ridges[0]), {}, np.inf
    for k, c in enumerate(scales):
        net = make(c)
        H = net.features(Q)
        Ht, Hv = H[:-n_val], H[-n_val:]
        for r, (v, b) in zip(ridges, _ridge_path(Ht, u[:-n_val] - offset, ridges)):
            err = float(np.sqrt(np.mean((Hv @ v + b + offset - u[-n_val:]) ** 2)))
            scores[(c, r)] = err
            if err < best:
                best, choice = err, (c, r)
        report(k + 1)
    return choice, scores


def _inputs_text(directions, whiten, standardize):
    """What the units see, for ``net.info["inputs"]``."""
    if whiten is None:
        return "standardised" if standardize else "raw"
    return f"{whiten.shape[0]} whitened projections" if directions is not None else "whitened"


def _fit(Q, u, n_hidden, activation, ridge, standardize, input_scale, seed, rbf_scale,
         shift_targets, validation, progress, directions=None):
    """The network of :func:`train_random_network` on checked data: input
    scale and ridge chosen on the last ``validation`` fraction of the points
    when there is a choice, then the output layer fitted on every point."""
    rng = np.random.default_rng(seed)
    dim = Q.shape[1]
    auto_c, auto_r = _checked_choices(input_scale, ridge, standardize)
    standardize, w_shift, whiten = _input_map(Q, directions, standardize, activation)
    if not standardize or activation == "rbf":
        auto_c, input_scale = False, 1.0
    scales = INPUT_SCALES if auto_c else (float(input_scale),)
    ridges = RIDGES if auto_r else (float(ridge),)
    offset = float(u.min()) if shift_targets else 0.0
    shift, sd = standardization(Q) if standardize else (None, None)
    centres = None
    if activation == "rbf":
        idx = rng.choice(Q.shape[0], size=min(n_hidden, Q.shape[0]), replace=False)
        centres = Q[idx]
        n_hidden = centres.shape[0]
    basis_seed = rng.integers(2 ** 63)

    def make(c):
        if whiten is not None:
            # units see c T (q - m): fold it into the weights, w_i <- c T^T w_i
            base = RandomNetwork.random(whiten.shape[0], n_hidden, activation=activation,
                                        seed=basis_seed)
            W = c * (base.W @ whiten)
            return RandomNetwork(W, base.bias - W @ w_shift, np.zeros(n_hidden), 0.0,
                                 activation)
        scale = sd / c if (standardize and activation != "rbf") else sd
        return RandomNetwork.random(dim, n_hidden, activation=activation, seed=basis_seed,
                                    shift=shift, scale=scale, centres=centres,
                                    rbf_scale=rbf_scale)

    if not (isinstance(validation, (int, float, np.integer, np.floating))
            and 0.0 <= validation < 1.0):
        raise ValueError(f"validation must be a fraction in [0, 1), got {validation!r}")
    n_val = int(round(validation * Q.shape[0]))
    select = len(scales) * len(ridges) > 1 and n_val >= 2 and Q.shape[0] - n_val >= 2
    n_steps = (len(scales) if select else 0) + 1

    def report(k):
        if progress is not None:
            progress(k, n_steps)

    choice, scores = (scales[0], ridges[0]), {}
    if select:
        choice, scores = _select(make, Q, u, offset, scales, ridges, n_val, report)
    net = make(choice[0])
    H = net.features(Q)
    v, b = _ridge_path(H, u - offset, [choice[1]])[0]
    net.output_weights = v
    net.out_bias = b + offset
    resid = H @ v + b + offset - u
    report(n_steps)
    net.info = {"train_rmse": float(np.sqrt(np.mean(resid ** 2))), "n_train": Q.shape[0],
                "ridge": choice[1], "input_scale": choice[0],
                "inputs": _inputs_text(directions, whiten, standardize),
                "validation_rmse": {f"{c:g}/{r:g}": e for (c, r), e in scores.items()}}
    return net
