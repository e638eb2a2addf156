"""Gaussian-process surrogates of the potential U(q): the GP-HMC and FITC-HMC
baselines of the RNS-HMC paper (Zhang, Shahbaba & Zhao 2017, section 3.3).

Model
-----
Inputs are standardised by the training set, x = (q - shift) / sd.  The
prior is u(x) ~ GP(mu, k) with a constant mean mu = mean(u) and the squared
exponential kernel

    k(x, x') = sf^2 exp(-1/2 sum_j (x_j - x'_j)^2 / l_j^2),

with one length scale l (isotropic) or one per dimension (``ard=True``),
and Gaussian noise of sd sn.  The hyper-parameters are fitted by maximising
the log marginal likelihood (full GP) or the FITC log marginal likelihood
(Snelson & Ghahramani 2006) with L-BFGS-B, using analytic gradients in both
cases (see :func:`gp_log_marginal_likelihood` and
:func:`fitc_log_marginal_likelihood`).  The parameter vector is always

    theta = [log sf, log l_1, ..., log l_L, log sn]      (L = 1 or dim).

The predictive mean is an RBF network
-------------------------------------
For both approximations the predictive mean is

    m(q) = mu + sum_i v_i exp(-1/2 ||z(q) - c_i||^2),   z(q) = (q - shift) / (sd * l),

(elementwise division by ``scale = sd * l``, a vector of length dim; with the
isotropic kernel l is the same in every coordinate).  The centres c_i are
the training inputs (full GP) or the inducing points (FITC) in standardised
coordinates divided by the length scales, c_i = x_i / l, every RBF width is 1,
and the output weights are v = sf^2 * K^-1 (u - mu) (full GP) or
v = sf^2 * Sigma K_uf Lambda^-1 (u - mu) (FITC).  This is exactly the compiled
``fastsurrogate.surrogates._network.RandomNetwork`` with ``activation="rbf"``,
``shift = mean(Q)``, ``scale = sd * l`` and ``width = 1``, so the surrogate
gradient used by the samplers runs in C: ``GPSurrogate.potential``.

All linear algebra goes through Cholesky factorisations (LAPACK via
scipy.linalg).  The one place an inverse is formed is the trace term
tr(K^-1 dK/dtheta) of the full-GP likelihood gradient, which needs every
entry of K^-1; it is computed from the Cholesky factor with LAPACK ``potri``.
"""
import math
import time

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack
from scipy.optimize import minimize

from ..core._checks import real_array
from ._network import RandomNetwork

__all__ = ["GPSurrogate", "fit_gp", "fit_fitc", "gp_potential",
           "gp_log_marginal_likelihood", "fitc_log_marginal_likelihood"]

_LOG_2PI = math.log(2.0 * math.pi)
# Relative jitter: sf^2 * JITTER is added to the diagonal of K (K_uu for FITC).
_JITTER = 1e-8
_JITTER_LADDER = (1e-8, 1e-6, 1e-4)


# --------------------------------------------------------------------------
# kernel helpers (standardised inputs already divided by the length scales)
# --------------------------------------------------------------------------

def _sqdist(A, B=None):
    """Squared Euclidean distances between the rows of A and B (clipped at 0)."""
    a2 = np.einsum("ij,ij->i", A, A)
    if B is None:
        D = a2[:, None] + a2[None, :] - 2.0 * (A @ A.T)
        np.fill_diagonal(D, 0.0)
    else:
        b2 = np.einsum("ij,ij->i", B, B)
        D = a2[:, None] + b2[None, :] - 2.0 * (A @ B.T)
    np.maximum(D, 0.0, out=D)
    return D


def _lengthscale_contraction(M, S, T):
    """sum_ab M_ab (S_aj - T_bj)^2 for every coordinate j, in O(n_a n_b d).

    With M = G * K (elementwise), G an adjoint dF/dK, this is the
    contraction of G with dK/dlog l_j for the SE kernel on inputs already
    divided by the length scales (S, T).
    """
    rs = M.sum(axis=1)
    cs = M.sum(axis=0)
    return rs @ (S * S) + cs @ (T * T) - 2.0 * np.einsum("aj,aj->j", S, M @ T)


def _unpack(theta, n_ell):
    theta = np.asarray(theta, dtype=np.float64)
    sf2 = math.exp(2.0 * theta[0])
    ell = np.exp(theta[1:1 + n_ell])
    sn2 = math.exp(2.0 * theta[1 + n_ell])
    return sf2, ell, sn2


def _n_ell(theta, dim):
    n_ell = len(theta) - 2
    if n_ell not in (1, dim):
        raise ValueError(f"theta must have length 3 (isotropic) or dim + 2 = {dim + 2} (ARD); "
                         f"got {len(theta)}")
    return n_ell


def _cholesky(K, sf2, base_jitter):
    """Lower Cholesky factor of K + sf2 * jitter * I, escalating the jitter on failure.

    K is modified in place (its diagonal gets the jitter).  Returns (L, jitter).
    """
    added = 0.0
    for jit in sorted({base_jitter, *[j for j in _JITTER_LADDER if j > base_jitter]}):
        K[np.diag_indices_from(K)] += sf2 * (jit - added)
        added = jit
        try:
            return sla.cholesky(K, lower=True, check_finite=False), jit
        except np.linalg.LinAlgError:
            continue
    raise np.linalg.LinAlgError(
        f"kernel matrix is not positive definite even with relative jitter {added:g}")


# --------------------------------------------------------------------------
# full GP
# --------------------------------------------------------------------------

def _gp_core(theta, X, y, jitter):
    """Factorisation of the full GP: returns a dict with L, alpha, lml pieces."""
    n_ell = _n_ell(theta, X.shape[1])
    sf2, ell, sn2 = _unpack(theta, n_ell)
    S = X / ell
    C = np.exp(-0.5 * _sqdist(S))
    K = sf2 * C
    K[np.diag_indices_from(K)] += sn2
    L, jit = _cholesky(K, sf2, jitter)
    alpha = sla.cho_solve((L, True), y, check_finite=False)
    quad = float(y @ alpha)
    logdet = 2.0 * float(np.sum(np.log(np.diag(L))))
    lml = -0.5 * (quad + logdet + len(y) * _LOG_2PI)
    return dict(sf2=sf2, ell=ell, sn2=sn2, S=S, C=C, L=L, alpha=alpha, lml=lml,
                quad=quad, logdet=logdet, jitter=jit, n_ell=n_ell)


def gp_log_marginal_likelihood(theta, X, y, jitter=_JITTER, grad=True):
    """Log marginal likelihood of the full GP and its gradient.

    Parameters
    ----------
    theta : array (L + 2,)
        ``[log sf, log l_1..l_L, log sn]``; L = 1 (isotropic) or dim (ARD).
    X : ndarray (N, dim)
        Inputs (standardised).
    y : ndarray (N,)
        Centred targets (u - mu).
    jitter : float
        Relative jitter: ``sf^2 * jitter`` is added to the diagonal of K
        (raised to 1e-6, 1e-4 if the Cholesky factorisation fails).

    Returns
    -------
    lml : float, and with ``grad=True`` also dlml : ndarray (L + 2,)

    The gradient is 0.5 tr((alpha alpha^T - K^-1) dK/dtheta), alpha = K^-1 y,
    with K^-1 from the Cholesky factor (LAPACK potri).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    core = _gp_core(theta, X, y, jitter)
    if not grad:
        return core["lml"]
    sf2, sn2, L, alpha, C, S = (core[k] for k in ("sf2", "sn2", "L", "alpha", "C", "S"))
    Kinv, info = lapack.dpotri(L, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"LAPACK dpotri failed (info={info})")
    G = np.tril(Kinv)
    del Kinv
    G += np.tril(G, -1).T
    # G = d(-lml)/dK = 0.5 (K^-1 - alpha alpha^T)
    G -= np.outer(alpha, alpha)
    G *= 0.5
    trG = float(np.trace(G))
    G *= C
    G *= sf2                                     # G * Ks, Ks = sf2 C: signal part of K
    g = np.empty(len(theta))
    g[0] = 2.0 * (float(G.sum()) + sf2 * core["jitter"] * trG)
    gl = _lengthscale_contraction(G, S, S)
    if core["n_ell"] == 1:
        g[1] = gl.sum()
    else:
        g[1:-1] = gl
    g[-1] = 2.0 * sn2 * trG
    return core["lml"], -g


# --------------------------------------------------------------------------
# FITC
# --------------------------------------------------------------------------

def _fitc_core(theta, X, y, Z, jitter):
    n_ell = _n_ell(theta, X.shape[1])
    sf2, ell, sn2 = _unpack(theta, n_ell)
    S, Su = X / ell, Z / ell
    M = Z.shape[0]
    Cuu = np.exp(-0.5 * _sqdist(Su))
    Kuu = sf2 * Cuu
    Luu, jit = _cholesky(Kuu, sf2, jitter)      # Kuu now includes the jitter
    Cuf = np.exp(-0.5 * _sqdist(Su, S))
    Kuf = sf2 * Cuf
    V = sla.solve_triangular(Luu, Kuf, lower=True, check_finite=False)      # Luu^-1 Kuf
    lam = np.maximum(sf2 - np.einsum("ij,ij->j", V, V), 0.0) + sn2           # diag(Kff - Qff) + sn2
    Vl = V / lam
    A = Vl @ V.T
    A[np.diag_indices(M)] += 1.0                                              # I + V Lam^-1 V^T
    La = sla.cholesky(A, lower=True, check_finite=False)
    gam = sla.solve_triangular(La, V @ (y / lam), lower=True, check_finite=False)
    quad = float(y @ (y / lam)) - float(gam @ gam)
    logdet = float(np.sum(np.log(lam))) + 2.0 * float(np.sum(np.log(np.diag(La))))
    lml = -0.5 * (quad + logdet + len(y) * _LOG_2PI)
    return dict(quad=quad, logdet=logdet, sf2=sf2, ell=ell, sn2=sn2, S=S, Su=Su, Cuu=Cuu, Kuu=Kuu, Luu=Luu,
                Kuf=Kuf, V=V, Vl=Vl, lam=lam, La=La, gam=gam, lml=lml, jitter=jit,
                n_ell=n_ell)


def fitc_log_marginal_likelihood(theta, X, y, Z, jitter=_JITTER, grad=True):
    """FITC log marginal likelihood and its analytic gradient, O(N M^2).

    The FITC prior covariance is Q_ff + Lambda, Q_ff = K_fu K_uu^-1 K_uf,
    Lambda = diag(K_ff - Q_ff) + sn^2 I; determinant and solves use the
    Woodbury identity through the Cholesky factors of K_uu (+ jitter) and of
    A = I + V Lambda^-1 V^T, V = L_uu^-1 K_uf.

    Parameters
    ----------
    theta : array (L + 2,)
        ``[log sf, log l_1..l_L, log sn]``.
    X : ndarray (N, dim)
        Inputs (standardised).
    y : ndarray (N,)
        Centred targets.
    Z : ndarray (M, dim)
        Inducing inputs (standardised), held fixed.

    Returns
    -------
    lml : float, and with ``grad=True`` also dlml : ndarray (L + 2,)

    Gradient: with C = Q_ff + Lambda, a = C^-1 y, W = C^-1 - a a^T,
    w = diag(W), B = K_uu^-1 K_uf and B~W = B W - B diag(w), the adjoints of
    -lml are dK_uf: B~W, dK_uu: -1/2 B~W B^T, ddiag K_ff: w / 2, d sn^2:
    sum(w) / 2; they are contracted with the kernel derivatives.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    c = _fitc_core(theta, X, y, Z, jitter)
    if not grad:
        return c["lml"]
    sf2, sn2, lam, V, Vl, La, Luu, gam = (c[k] for k in
                                          ("sf2", "sn2", "lam", "V", "Vl", "La", "Luu", "gam"))
    solve = sla.solve_triangular
    t = solve(La, gam, lower=True, trans="T", check_finite=False)            # A^-1 V Lam^-1 y
    a = (y - V.T @ t) / lam                                                   # C^-1 y
    P = solve(La, V, lower=True, check_finite=False)
    w = 1.0 / lam - np.einsum("ij,ij->j", P, P) / lam ** 2 - a * a           # diag(W)
    B = solve(Luu, V, lower=True, trans="T", check_finite=False)             # Kuu^-1 Kuf
    H = solve(La, solve(La, Vl, lower=True, check_finite=False), lower=True, trans="T",
              check_finite=False)
    BCinv = solve(Luu, H, lower=True, trans="T", check_finite=False)         # B C^-1
    BWt = BCinv - np.outer(B @ a, a) - B * w                                   # B (W - diag w)
    Guf = BWt
    Guu = -0.5 * (BWt @ B.T)
    sw = float(w.sum())
    g = np.empty(len(theta))
    g[0] = 2.0 * (float(np.sum(Guu * c["Kuu"])) + float(np.sum(Guf * c["Kuf"]))
                  + 0.5 * sw * sf2)
    gl = (_lengthscale_contraction(Guu * (sf2 * c["Cuu"]), c["Su"], c["Su"])
          + _lengthscale_contraction(Guf * c["Kuf"], c["Su"], c["S"]))
    if c["n_ell"] == 1:
        g[1] = gl.sum()
    else:
        g[1:-1] = gl
    g[-1] = sn2 * sw
    return c["lml"], -g


# --------------------------------------------------------------------------
# the surrogate object
# --------------------------------------------------------------------------

class _GPPredVar:
    """Latent predictive variance of the full GP from k(Qnew, X) (picklable)."""

    def __init__(self, L, sf2):
        self.L, self.sf2 = L, sf2

    def __call__(self, Kxc):
        W = sla.solve_triangular(self.L, Kxc.T, lower=True, check_finite=False)
        return self.sf2 - np.einsum("ij,ij->j", W, W)


class _FITCPredVar:
    """Latent predictive variance of FITC from k(Qnew, Z) (picklable)."""

    def __init__(self, Luu, La, sf2):
        self.Luu, self.La, self.sf2 = Luu, La, sf2

    def __call__(self, Kxu):
        W1 = sla.solve_triangular(self.Luu, Kxu.T, lower=True, check_finite=False)
        W2 = sla.solve_triangular(self.La, W1, lower=True, check_finite=False)
        return self.sf2 - np.einsum("ij,ij->j", W1, W1) + np.einsum("ij,ij->j", W2, W2)


class GPSurrogate:
    """A fitted GP (or FITC sparse GP) surrogate of U.

    Attributes
    ----------
    kind : {"gp", "fitc"}
    potential : RandomNetwork
        Compiled Potential evaluating the predictive mean m(q) and its
        gradient (RBF network, see the module docstring for the encoding).
    mean : float
        Constant prior mean mu = mean(u).
    signal_sd, noise_sd : float
        sf and sn, in the units of U.
    length_scales : ndarray (dim,)
        Length scales in the ORIGINAL q coordinates (sd * l).
    length_scale_std : ndarray (1,) or (dim,)
        Length scales l in standardised coordinates (as fitted).
    shift, sd : ndarray (dim,)
        Standardisation x = (q - shift) / sd.
    scale : ndarray (dim,)
        sd * l: the network's input scale, z = (q - shift) / scale.
    theta : ndarray (L + 2,)
        ``[log sf, log l_1..l_L, log sn]`` (l standardised), reusable as
        ``fit_gp(..., theta=theta)``.
    centres : ndarray (M, dim)
        Training inputs (gp) or inducing inputs (fitc), standardised.
    weights : ndarray (M,)
        Output weights v of the RBF representation.
    info : dict
        ``n_train`` (N), ``n_centres`` (M), ``log_marginal_likelihood``,
        ``fit_seconds``, ``n_iter``, ``converged``, ``message``, ``jitter``,
        ``theta``.
    """

    def __init__(self, kind, theta, shift, sd, centres, weights, mean, predvar, info):
        self.kind = kind
        self.theta = np.asarray(theta, dtype=np.float64)
        dim = len(shift)
        n_ell = len(self.theta) - 2
        self.ard = n_ell > 1
        self.signal_sd = math.exp(self.theta[0])
        self.length_scale_std = np.exp(self.theta[1:1 + n_ell])
        self.noise_sd = math.exp(self.theta[-1])
        self.shift = shift
        self.sd = sd
        ell = np.broadcast_to(self.length_scale_std, (dim,))
        self.scale = sd * ell
        self.length_scales = self.scale
        self.centres = centres
        self.weights = weights
        self.mean = float(mean)
        self._predvar = predvar          # callable(k(Qnew, centres)) -> latent variance
        self.info = info
        self._c_scaled = centres / ell   # centres in z = (q - shift) / scale coordinates
        self.potential = RandomNetwork(
            self._c_scaled.copy(), None, np.array(weights, dtype=np.float64), out_bias=self.mean,
            activation="rbf", width=1.0, shift=np.array(shift, dtype=np.float64),
            scale=np.array(self.scale, dtype=np.float64))

    @property
    def dim(self):
        """Number of parameters of U."""
        return len(self.shift)

    def _features(self, Qnew):
        """(single, z, Phi): z = (Qnew - shift) / scale (n, dim), Phi = exp(-|z - c|^2 / 2) (n, M)."""
        Qnew = np.asarray(Qnew, dtype=np.float64)
        single = Qnew.ndim == 1
        Qnew = np.atleast_2d(Qnew)
        if Qnew.ndim != 2 or Qnew.shape[1] != self.dim:
            raise ValueError(f"Qnew must have shape (n, {self.dim}) or ({self.dim},); "
                             f"got {np.shape(Qnew)}")
        if not np.all(np.isfinite(Qnew)):
            raise ValueError("Qnew contains NaN or inf")
        Zq = (Qnew - self.shift) / self.scale
        C = self._c_scaled
        Phi = np.empty((Zq.shape[0], C.shape[0]))
        chunk = max(1, int(2_000_000 // max(1, C.size)))
        for s in range(0, Zq.shape[0], chunk):
            diff = Zq[s:s + chunk, None, :] - C[None, :, :]
            Phi[s:s + chunk] = np.exp(-0.5 * np.einsum("ncd,ncd->nc", diff, diff))
        return single, Zq, Phi

    def predict(self, Qnew, return_var=False):
        """Predictive mean (and latent variance) of U at new points, in NumPy.

        Parameters
        ----------
        Qnew : ndarray (n, dim) or (dim,)
        return_var : bool
            Also return the predictive variance of the latent function
            (without the noise variance sn^2).

        Returns
        -------
        mean : ndarray (n,) (float for a single point); and var, same shape.
        """
        single, _, Phi = self._features(Qnew)
        mean = self.mean + Phi @ self.weights
        if return_var:
            var = np.maximum(self._predvar(self.signal_sd ** 2 * Phi), 0.0)
            return (mean[0], var[0]) if single else (mean, var)
        return mean[0] if single else mean

    def grad_mean(self, Qnew):
        """Gradient of the predictive mean dm/dq, in NumPy: (n, dim) or (dim,)."""
        single, Zq, Phi = self._features(Qnew)
        Pw = Phi * self.weights
        # dm/dz = -sum_i v_i phi_i (z - c_i); dm/dq = dm/dz / scale
        g = -(Zq * Pw.sum(axis=1)[:, None] - Pw @ self._c_scaled) / self.scale
        return g[0] if single else g

    def __repr__(self):
        return (f"<GPSurrogate kind={self.kind} dim={self.dim} N={self.info['n_train']} "
                f"M={self.info['n_centres']} lml={self.info['log_marginal_likelihood']:.4g}>")


# --------------------------------------------------------------------------
# fitting
# --------------------------------------------------------------------------

def _check_data(Q, u):
    Q = real_array("Q", Q, copy=False, allow_nonfinite=True)
    u = real_array("u", u, copy=False, allow_nonfinite=True)
    if Q.ndim != 2:
        raise ValueError(f"Q must be a 2-D array (N, dim); got shape {Q.shape}")
    if u.ndim != 1 or u.shape[0] != Q.shape[0]:
        raise ValueError(f"u must have shape (N,) = ({Q.shape[0]},); got {u.shape}")
    if Q.shape[0] < 2:
        raise ValueError(f"need at least 2 training points; got {Q.shape[0]}")
    if Q.shape[1] < 1:
        raise ValueError("Q must have at least one column")
    if not (np.all(np.isfinite(Q)) and np.all(np.isfinite(u))):
        raise ValueError("training data Q, u contain NaN or inf")
    return Q, u


def _check_options(jitter, max_iter):
    jitter = float(jitter)
    if not (0.0 <= jitter <= 1e-2):
        raise ValueError(f"jitter must be in [0, 1e-2] (relative to sf^2); got {jitter}")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer; got {max_iter!r}")
    return jitter, int(max_iter)


def _check_noise(noise):
    if noise is None:
        return None
    noise = float(noise)
    if not (noise > 0 and np.isfinite(noise)):
        raise ValueError(f"noise must be a positive finite sd (or None to fit it); got {noise}")
    return noise


def _standardise(Q):
    shift = Q.mean(axis=0)
    sd = Q.std(axis=0)
    sd[~(sd > 0)] = 1.0
    return shift, sd, (Q - shift) / sd


def _init_and_bounds(X, y, ard, noise, rng, core_fn):
    """Initial theta and L-BFGS-B bounds from the (standardised) data.

    ``core_fn(theta)`` factorises the model (``_gp_core`` or ``_fitc_core``).
    Both covariances scale as sf^2 * C(l, r) when the noise variance is
    sn^2 = r sf^2, so for fixed (l, r) the likelihood is maximised over sf in
    closed form (sf^2 = y^T C^-1 y / N).  This profile likelihood is
    evaluated on a grid l = med * 2^k (med = median distance between
    standardised inputs, k = -3..4) x r in {1e-2, 1e-4, 1e-6}, and the best
    point starts L-BFGS-B.  The grid matters: for smooth U in many
    dimensions the likelihood has a narrow ridge sf ~ l^2 (the near-quadratic
    regime) besides a short-length-scale optimum, and on a 32-d Gaussian U
    a start at (med, sd(u)) ran straight into the lower bound l = 0.01
    (every value explained as noise).  With a fixed
    ``noise`` the grid still picks l and sf; sn starts (and stays) at
    ``noise``.  ARD starts with every l_j at the isotropic grid optimum.
    """
    N, dim = X.shape
    sd_u = float(np.std(y))
    if not sd_u > 0:
        sd_u = 1.0
    idx = rng.choice(N, size=min(N, 500), replace=False)
    D = np.sqrt(_sqdist(X[idx]))
    med = float(np.median(D[np.triu_indices(len(idx), 1)])) if len(idx) > 1 else 1.0
    if not med > 0:
        med = 1.0
    n_ell = dim if ard else 1
    bounds = ([(math.log(1e-4 * sd_u), math.log(1e4 * sd_u))]
              + [(math.log(1e-2), math.log(1e3 * max(med, 1.0)))] * n_ell
              + [(math.log(1e-6 * sd_u), math.log(10.0 * sd_u))])
    best = (-np.inf, math.log(sd_u), math.log(med), math.log(1e-2 * sd_u))
    for k in range(-3, 5):
        for r in (1e-2, 1e-4, 1e-6):
            th = np.array([0.0, math.log(med * 2.0 ** k), 0.5 * math.log(r)])
            try:
                c = core_fn(th)
            except np.linalg.LinAlgError:
                continue
            sf2 = max(c["quad"] / N, np.finfo(float).tiny)
            val = -0.5 * N * (1.0 + math.log(sf2)) - 0.5 * c["logdet"]
            if np.isfinite(val) and val > best[0]:
                sf = math.sqrt(sf2)
                best = (val, math.log(sf), th[1], math.log(sf * math.sqrt(r)))
    theta0 = np.concatenate([[best[1]], np.full(n_ell, best[2]), [best[3]]])
    theta0 = np.clip(theta0, [b[0] for b in bounds], [b[1] for b in bounds])
    if noise is not None:                # fixed: not optimised, so not bounded either
        theta0[-1] = math.log(noise)
    return theta0, bounds


def _optimise(objective, theta0, bounds, fixed_noise, max_iter):
    """Maximise objective(theta) -> (lml, dlml) with L-BFGS-B."""
    free = np.ones(len(theta0), dtype=bool)
    if fixed_noise:
        free[-1] = False

    def f(t_free):
        th = theta0.copy()
        th[free] = t_free
        try:
            lml, g = objective(th)
        except np.linalg.LinAlgError:    # not PD even with jitter: reject the step
            return np.inf, np.zeros(int(free.sum()))
        return -lml, -g[free]

    res = minimize(f, theta0[free], jac=True, method="L-BFGS-B",
                   bounds=[b for b, k in zip(bounds, free) if k],
                   options=dict(maxiter=max_iter))
    theta = theta0.copy()
    theta[free] = res.x
    return theta, res


def _check_theta(theta, dim):
    theta = np.array(theta, dtype=np.float64).ravel()
    if len(theta) not in (3, dim + 2):
        raise ValueError(f"theta must have length 3 (isotropic) or dim + 2 = {dim + 2} (ARD); "
                         f"got {len(theta)}")
    if not np.all(np.isfinite(theta)):
        raise ValueError("theta contains NaN or inf")
    return theta


def _result_info(res):
    if res is None:
        return dict(n_iter=0, converged=True, message="fixed hyper-parameters")
    return dict(n_iter=int(res.nit), converged=bool(res.success), message=str(res.message))


def _make_rng(seed):
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def fit_gp(Q, u, ard=False, noise=None, max_train=None, seed=None, max_iter=200,
           jitter=_JITTER, theta=None):
    """Fit a full GP surrogate of U by maximum marginal likelihood.

    Parameters
    ----------
    Q : ndarray (N, dim)
        Training positions.
    u : ndarray (N,)
        U at those positions.
    ard : bool
        One length scale per dimension instead of one shared length scale.
    noise : float or None
        Fixed noise sd (units of U); None fits it (bounded below by 1e-6 sd(u)).
    max_train : int or None
        If N > max_train, fit on a random subset of max_train points.
    seed : int or Generator
        For the subset and the length-scale initialisation.
    max_iter : int
        L-BFGS-B iterations.
    jitter : float
        Relative diagonal jitter (``sf^2 * jitter``).
    theta : array (3,) or (dim + 2,), optional
        Fixed hyper-parameters ``[log sf, log l, log sn]`` (l in standardised
        coordinates, e.g. another surrogate's ``.theta``): no optimisation.

    Returns
    -------
    GPSurrogate
        ``.potential`` is the compiled predictive mean.

    The cost is O(N^3) per likelihood evaluation; use :func:`fit_fitc` or
    ``max_train`` beyond a few thousand points.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.surrogates.gp import fit_gp
    >>> Q = np.random.default_rng(0).normal(size=(100, 2))
    >>> sur = fit_gp(Q, 0.5 * np.sum(Q ** 2, axis=1), seed=0)
    >>> abs(sur.potential.value(np.zeros(2))) < 0.05
    True
    """
    t0 = time.perf_counter()
    Q, u = _check_data(Q, u)
    noise = _check_noise(noise)
    jitter, max_iter = _check_options(jitter, max_iter)
    if max_train is not None:
        if isinstance(max_train, bool) or int(max_train) != max_train or max_train < 2:
            raise ValueError(f"max_train must be an integer >= 2 or None; got {max_train!r}")
    rng = _make_rng(seed)
    if max_train is not None and Q.shape[0] > max_train:
        idx = np.sort(rng.choice(Q.shape[0], size=int(max_train), replace=False))
        Q, u = Q[idx], u[idx]
    shift, sd, X = _standardise(Q)
    mu = float(u.mean())
    y = u - mu
    if theta is None:
        theta0, bounds = _init_and_bounds(X, y, ard, noise, rng,
                                          lambda th: _gp_core(th, X, y, jitter))
        theta, res = _optimise(lambda th: gp_log_marginal_likelihood(th, X, y, jitter),
                               theta0, bounds, noise is not None, max_iter)
    else:
        theta, res = _check_theta(theta, Q.shape[1]), None
    core = _gp_core(theta, X, y, jitter)
    L, sf2 = core["L"], core["sf2"]

    predvar = _GPPredVar(L, sf2)

    info = dict(kind="gp", n_train=Q.shape[0], n_centres=Q.shape[0],
                log_marginal_likelihood=core["lml"], fit_seconds=time.perf_counter() - t0,
                **_result_info(res),
                jitter=core["jitter"], theta=theta.copy())
    return GPSurrogate("gp", theta, shift, sd, X, sf2 * core["alpha"], mu, predvar, info)


def _kmeanspp(X, m, rng):
    """k-means++ seeding (D^2 sampling): m spread-out rows of X."""
    N = X.shape[0]
    idx = np.empty(m, dtype=np.intp)
    idx[0] = rng.integers(N)
    d2 = np.sum((X - X[idx[0]]) ** 2, axis=1)
    for k in range(1, m):
        tot = d2.sum()
        if tot > 0:
            idx[k] = rng.choice(N, p=d2 / tot)
        else:                                   # all remaining points duplicate chosen ones
            rest = np.setdiff1d(np.arange(N), idx[:k])
            idx[k] = rng.choice(rest)
        np.minimum(d2, np.sum((X - X[idx[k]]) ** 2, axis=1), out=d2)
    return idx


def _checked_inducing(n_inducing, inducing, N):
    """``n_inducing`` as an int in [1, N], ``inducing`` one of the two
    choices, or the ValueError that says what is wrong."""
    if isinstance(n_inducing, bool) or int(n_inducing) != n_inducing:
        raise ValueError(f"n_inducing must be an integer; got {n_inducing!r}")
    n_inducing = int(n_inducing)
    if not 1 <= n_inducing <= N:
        raise ValueError(f"n_inducing must be between 1 and the number of training points "
                         f"N = {N}; got {n_inducing}")
    if inducing not in ("kmeans++", "random"):
        raise ValueError(f"inducing must be 'kmeans++' or 'random'; got {inducing!r}")
    return n_inducing


def _inducing_index(X, n_inducing, inducing, rng):
    """Rows of X chosen as inducing inputs: all of them, a sorted uniform
    random subset, or k-means++ seeding."""
    N = X.shape[0]
    if n_inducing == N:
        return np.arange(N)
    if inducing == "random":
        return np.sort(rng.choice(N, size=n_inducing, replace=False))
    return _kmeanspp(X, n_inducing, rng)


def fit_fitc(Q, u, n_inducing=100, ard=False, seed=None, inducing="kmeans++", noise=None,
             max_iter=200, jitter=_JITTER, theta=None):
    """Fit a FITC sparse-GP surrogate of U (Snelson & Ghahramani 2006).

    The inducing inputs are chosen among the standardised training inputs
    (k-means++ D^2 seeding, or a uniform random subset with
    ``inducing="random"``; all training inputs if ``n_inducing == N``) and
    kept fixed; the kernel hyper-parameters maximise the FITC log marginal
    likelihood (analytic gradient, O(N M^2) per evaluation).

    Parameters
    ----------
    Q : ndarray (N, dim)
    u : ndarray (N,)
    n_inducing : int
        Number of inducing points M (1 <= M <= N).
    ard : bool
        Per-dimension length scales.
    seed : int or Generator
    inducing : {"kmeans++", "random"}
    noise : float or None
        Fixed noise sd, or None to fit it.
    max_iter : int
    jitter : float
        Relative jitter on K_uu.
    theta : array (3,) or (dim + 2,), optional
        Fixed hyper-parameters ``[log sf, log l, log sn]``: no optimisation.

    Returns
    -------
    GPSurrogate
        Predictive mean m(q) = mu + k_u(q)^T Sigma K_uf Lambda^-1 (u - mu),
        Sigma = (K_uu + K_uf Lambda^-1 K_fu)^-1, as a compiled RBF network
        with the inducing points as centres (``.potential``).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.surrogates.gp import fit_fitc
    >>> Q = np.random.default_rng(0).normal(size=(300, 2))
    >>> sur = fit_fitc(Q, 0.5 * np.sum(Q ** 2, axis=1), n_inducing=30, seed=0)
    >>> sur.info["n_centres"]
    30
    """
    t0 = time.perf_counter()
    Q, u = _check_data(Q, u)
    noise = _check_noise(noise)
    jitter, max_iter = _check_options(jitter, max_iter)
    N = Q.shape[0]
    n_inducing = _checked_inducing(n_inducing, inducing, N)
    rng = _make_rng(seed)
    shift, sd, X = _standardise(Q)
    zidx = _inducing_index(X, n_inducing, inducing, rng)
    Z = X[zidx].copy()
    mu = float(u.mean())
    y = u - mu
    if theta is None:
        theta0, bounds = _init_and_bounds(X, y, ard, noise, rng,
                                          lambda th: _fitc_core(th, X, y, Z, jitter))
        theta, res = _optimise(lambda th: fitc_log_marginal_likelihood(th, X, y, Z, jitter),
                               theta0, bounds, noise is not None, max_iter)
    else:
        theta, res = _check_theta(theta, Q.shape[1]), None
    c = _fitc_core(theta, X, y, Z, jitter)
    Luu, La, sf2 = c["Luu"], c["La"], c["sf2"]
    w = sla.solve_triangular(Luu, sla.solve_triangular(La, c["gam"], lower=True, trans="T",
                                                       check_finite=False),
                             lower=True, trans="T", check_finite=False)
    predvar = _FITCPredVar(Luu, La, sf2)

    info = dict(kind="fitc", n_train=N, n_centres=n_inducing,
                log_marginal_likelihood=c["lml"], fit_seconds=time.perf_counter() - t0,
                **_result_info(res),
                jitter=c["jitter"], theta=theta.copy(), inducing_index=zidx)
    return GPSurrogate("fitc", theta, shift, sd, Z, sf2 * w, mu, predvar, info)


def gp_potential(Q, u, kind="gp", **kw):
    """Fit a GP (``kind="gp"``) or FITC (``kind="fitc"``) surrogate; return its Potential.

    Keyword arguments go to :func:`fit_gp` or :func:`fit_fitc`; call those
    directly to keep the :class:`GPSurrogate` (hyper-parameters, fit
    summary, NumPy predictive mean and variance).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.surrogates.gp import gp_potential
    >>> Q = np.random.default_rng(1).normal(size=(80, 3))
    >>> pot = gp_potential(Q, 0.5 * np.sum(Q ** 2, axis=1), kind="gp", seed=1)
    >>> pot.dim
    3
    """
    key = str(kind).lower()
    if key == "gp":
        return fit_gp(Q, u, **kw).potential
    if key == "fitc":
        return fit_fitc(Q, u, **kw).potential
    raise ValueError(f"kind must be 'gp' or 'fitc'; got {kind!r}")
