"""Five posteriordb models, reimplemented in NumPy/SciPy with exact gradients.

Each model works on the unconstrained scale, as Stan does: a parameter with
lower bound 0 is sampled as its log, one in (0, 1) as its logit, and GARCH's
``beta1`` in (0, 1 - alpha1) as ``logit(beta1 / (1 - alpha1))``.  The
potential is

    U(q) = -(log density of the constrained parameters + log |Jacobian|),

with every term that depends on the parameters kept (constants dropped).

======================================  ====================  ===============
posteriordb posterior                   class                 data
======================================  ====================  ===============
``sblrc-blr``                           :class:`SBLRC_BLR`    ``sblrc``
``eight_schools-eight_schools_nonc...`` :class:`EightSchoolsNoncentered`
                                                              ``eight_schools``
``garch-garch11``                       :class:`Garch11`      ``garch``
``arK-arK``                             :class:`ArK`          ``arK``
``gp_pois_regr-gp_regr``                :class:`GPRegr`       ``gp_pois_regr``
======================================  ====================  ===============

The GARCH and GP classes here are posteriordb's models, not the compiled
:class:`fastsurrogate.models.Garch` (GARCH(m, r) of the NNgHMC paper) and
:class:`fastsurrogate.models.GPRegression` (Matern 3/2 GP hyper-parameters),
which are different models with different parameters and priors.

Every class has ``dim``, ``param_names`` (unconstrained scale),
``value_and_grad(q) -> (U, dU/dq)``, ``value(q)``, ``constrain(q)`` (unconstrained
``(..., dim)`` -> dict keyed like the reference draws), ``unconstrain(dict)``
and ``reference_names``.  Data and reference draws are read from the shared
data folder (see :func:`find_data_dir`); nothing is copied into the package.

The models are NumPy and SciPy; :func:`as_potential` wraps one as a
:class:`fastsurrogate.Potential`.
"""
import json
import math
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, TypeVar

import numpy as np
from scipy.linalg.lapack import dpotrf, dtrtri, dtrtrs
from scipy.signal import lfilter
from scipy.special import expit, logit

from .. import datasets
from .._typing import ArrayLike, FloatArray, PathLike
from ..core._checks import real_array
from ..core._potential import Potential

__all__ = [
    "find_data_dir", "load_data", "load_reference", "as_potential",
    "SBLRC_BLR", "EightSchoolsNoncentered", "Garch11", "ArK", "GPRegr",
    "MODELS",
]

_LOG5 = math.log(5.0)
_LOG2_5 = math.log(2.5)


# ---------------------------------------------------------------------------
# data access

def find_data_dir() -> Path | None:
    """The shared data folder (``X/shared/data`` for a repository at ``X/main``).

    Order: the environment variable ``FASTSURROGATE_DATA`` (if set and an
    existing folder), then a ``shared/data`` folder found by walking up from
    the current working directory, then from the package's location.  Returns
    a :class:`pathlib.Path`, or None when nothing is found
    (:func:`fastsurrogate.datasets.find_data_dir` with ``required=False``).
    """
    return datasets.find_data_dir(required=False)


def _posteriordb_dir(data_dir):
    if data_dir is None:
        data_dir = find_data_dir()
        if data_dir is None:
            raise FileNotFoundError(
                "shared data folder not found: set FASTSURROGATE_DATA or place the "
                "data at ../shared/data relative to the repository root")
    data_dir = Path(data_dir)
    sub = data_dir / "posteriordb"
    return sub if sub.is_dir() else data_dir


def _read_zip_json(path):
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n.endswith(".json")]
        if len(names) != 1:
            raise ValueError(f"{path}: expected one JSON file, found {z.namelist()}")
        return json.loads(z.read(names[0]))


def load_data(name: str, data_dir: PathLike | None = None) -> dict[str, Any]:
    """Data set ``name`` (e.g. ``"sblrc"``) from ``<name>.data.zip``.

    Returns a dict: lists become NumPy arrays (their dtype inferred, so a
    matrix becomes a 2-D array), integers stay ``int`` and reals ``float``.
    """
    path = _posteriordb_dir(data_dir) / f"{name}.data.zip"
    raw = _read_zip_json(path)
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if isinstance(v, list):
            out[k] = np.asarray(v)
        elif isinstance(v, bool):
            out[k] = int(v)
        else:
            out[k] = v
    return out


def load_reference(posterior_name: str,
                   data_dir: PathLike | None = None) -> dict[str, FloatArray]:
    """Reference draws of ``posterior_name`` from ``<posterior_name>.draws.zip``.

    Returns a dict ``"param[i]"`` (or ``"param"``) -> float array
    ``(n_chains, n_draws)`` = (10, 1000), on the constrained scale, keys in
    the file's order.
    """
    path = _posteriordb_dir(data_dir) / f"{posterior_name}.draws.zip"
    chains = _read_zip_json(path)
    keys = list(chains[0].keys())
    return {k: np.array([c[k] for c in chains], dtype=np.float64) for k in keys}


# ---------------------------------------------------------------------------
# scalar helpers (math module: no NumPy overhead, no overflow warnings)

def _exp(x):
    return math.exp(x) if x < 709.0 else math.inf


def _softplus(x):
    """log(1 + exp(x)), stable."""
    return (x if x > 0.0 else 0.0) + math.log1p(math.exp(-abs(x)))


def _expit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _as_q(q, dim):
    return real_array("q", q, shape=(dim,), copy=False, allow_nonfinite=True)


def _as_batch(q, dim):
    q = real_array("q", q, copy=False, allow_nonfinite=True)
    if q.shape[-1:] != (dim,):
        raise ValueError(f"q must have shape (..., {dim}), got {q.shape}")
    return q


def _indexed(name, n):
    return [f"{name}[{i}]" for i in range(1, n + 1)]


# ---------------------------------------------------------------------------
# base class

_Model = TypeVar("_Model", bound="_PosteriorModel")


class _PosteriorModel:
    """Common interface; subclasses set ``posterior_name``/``data_name``."""

    posterior_name: str            # set by each model
    data_name: str
    dim: int

    if TYPE_CHECKING:              # what each model defines
        def __init__(self, data: Mapping[str, Any]) -> None: ...

        def value_and_grad(self, q: ArrayLike) -> tuple[float, FloatArray]: ...

    @classmethod
    def from_posteriordb(cls: type[_Model], data_dir: PathLike | None = None) -> _Model:
        """Build the model from the shared posteriordb data."""
        return cls(load_data(cls.data_name, data_dir))

    @classmethod
    def reference_draws(cls, data_dir: PathLike | None = None) -> dict[str, FloatArray]:
        """The reference draws (see :func:`load_reference`)."""
        return load_reference(cls.posterior_name, data_dir)

    def value(self, q: ArrayLike) -> float:
        """U(q)."""
        return self.value_and_grad(q)[0]

    def grad(self, q: ArrayLike) -> FloatArray:
        """dU/dq."""
        return self.value_and_grad(q)[1]

    def log_density(self, q: ArrayLike) -> float:
        """-U(q) (log density on the unconstrained scale, up to a constant)."""
        return -self.value(q)

    def __repr__(self):
        return f"<{type(self).__name__} {self.posterior_name!r} dim={self.dim}>"


class _LinearGaussian(_PosteriorModel):
    """y ~ N(Z w, sigma^2), w_i ~ N(0, prior_sd^2), sigma on the log scale.

    Shared by :class:`SBLRC_BLR` (half-normal sigma prior) and :class:`ArK`
    (half-Cauchy sigma prior); subclasses define ``_sigma_prior(ls)`` returning
    (-log prior(sigma) up to a constant, its derivative in log sigma).
    """

    prior_sd = 10.0

    def _setup(self, Z, y, coef_names):
        self.Z = np.ascontiguousarray(Z, dtype=np.float64)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.n, self.p = self.Z.shape
        self.dim = self.p + 1
        self._coef_names = coef_names
        self.param_names = coef_names + ["log_sigma"]
        self.reference_names = coef_names + ["sigma"]
        self._prec = 1.0 / self.prior_sd ** 2

    def value_and_grad(self, q):
        q = _as_q(q, self.dim)
        p = self.p
        w = q[:p]
        ls = float(q[p])
        inv_s2 = _exp(-2.0 * ls)
        r = self.y - self.Z @ w
        rr = float(r @ r)
        ps, dps = self._sigma_prior(ls)
        U = (0.5 * self._prec * float(w @ w) + ps + self.n * ls
             + 0.5 * rr * inv_s2 - ls)
        g = np.empty(self.dim)
        g[:p] = self._prec * w - (r @ self.Z) * inv_s2
        g[p] = dps + self.n - rr * inv_s2 - 1.0
        return U, g

    def value(self, q):
        q = _as_q(q, self.dim)
        p = self.p
        w = q[:p]
        ls = float(q[p])
        r = self.y - self.Z @ w
        return (0.5 * self._prec * float(w @ w) + self._sigma_prior(ls)[0]
                + self.n * ls + 0.5 * float(r @ r) * _exp(-2.0 * ls) - ls)

    def constrain(self, q):
        q = _as_batch(q, self.dim)
        out = {n: q[..., i] for i, n in enumerate(self._coef_names)}
        out["sigma"] = np.exp(q[..., self.p])
        return out

    def unconstrain(self, params):
        cols = [np.asarray(params[n], dtype=np.float64) for n in self._coef_names]
        cols.append(np.log(np.asarray(params["sigma"], dtype=np.float64)))
        return np.stack(np.broadcast_arrays(*cols), axis=-1)


# ---------------------------------------------------------------------------
# sblrc-blr

class SBLRC_BLR(_LinearGaussian):
    """``sblrc-blr``: Bayesian linear regression, N = 100, D = 5.

    beta_d ~ N(0, 10^2), sigma ~ half-N(0, 10^2), y ~ N(X beta, sigma^2).
    Unconstrained q = (beta[1..D], log sigma).
    """

    posterior_name = "sblrc-blr"
    data_name = "sblrc"

    def __init__(self, data: Mapping[str, Any]) -> None:
        X = np.asarray(data["X"], dtype=np.float64)
        y = np.asarray(data["y"], dtype=np.float64).ravel()
        D = X.shape[1]
        self._setup(X, y, _indexed("beta", D))

    def _sigma_prior(self, ls):
        s2 = _exp(2.0 * ls)
        return 0.5 * self._prec * s2, self._prec * s2


# ---------------------------------------------------------------------------
# arK-arK

class ArK(_LinearGaussian):
    """``arK-arK``: AR(K), K = 5, T = 200.

    alpha, beta_k ~ N(0, 10^2), sigma ~ half-Cauchy(0, 2.5),
    y_t ~ N(alpha + sum_k beta_k y_{t-k}, sigma^2) for t = K+1..T.
    Unconstrained q = (alpha, beta[1..K], log sigma).
    """

    posterior_name = "arK-arK"
    data_name = "arK"

    def __init__(self, data: Mapping[str, Any]) -> None:
        y = np.asarray(data["y"], dtype=np.float64).ravel()
        K = int(data["K"])
        T = y.shape[0]
        if "T" in data and int(data["T"]) != T:
            raise ValueError(f"T = {data['T']} but y has {T} entries")
        Z = np.empty((T - K, K + 1))
        Z[:, 0] = 1.0
        for k in range(1, K + 1):
            Z[:, k] = y[K - k:T - k]
        self.K = K
        self._setup(Z, y[K:], ["alpha"] + _indexed("beta", K))

    def _sigma_prior(self, ls):
        # -log Cauchy+(sigma | 0, 2.5) = log(1 + (sigma/2.5)^2) + const
        x = 2.0 * (ls - _LOG2_5)
        return _softplus(x), 2.0 * _expit(x)


# ---------------------------------------------------------------------------
# eight_schools-eight_schools_noncentered

class EightSchoolsNoncentered(_PosteriorModel):
    """``eight_schools-eight_schools_noncentered``.

    theta_trans_j ~ N(0, 1), mu ~ N(0, 5^2), tau ~ half-Cauchy(0, 5),
    theta = mu + tau * theta_trans, y_j ~ N(theta_j, sigma_j^2).
    Unconstrained q = (theta_trans[1..J], mu, log tau) (Stan's order).
    ``constrain`` returns theta[1..J], mu, tau (the reference draw keys) and
    also theta_trans[1..J].
    """

    posterior_name = "eight_schools-eight_schools_noncentered"
    data_name = "eight_schools"

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.y = np.asarray(data["y"], dtype=np.float64).ravel()
        self.sigma = np.asarray(data["sigma"], dtype=np.float64).ravel()
        self.J = J = self.y.shape[0]
        self._inv_sigma = 1.0 / self.sigma
        self.dim = J + 2
        self._tt_names = _indexed("theta_trans", J)
        self._theta_names = _indexed("theta", J)
        self.param_names = self._tt_names + ["mu", "log_tau"]
        self.reference_names = self._theta_names + ["mu", "tau"]

    def value_and_grad(self, q):
        q = _as_q(q, self.dim)
        J = self.J
        tt = q[:J]
        mu = float(q[J])
        lt = float(q[J + 1])
        tau = _exp(lt)
        z = (mu + tau * tt - self.y) * self._inv_sigma
        r = z * self._inv_sigma
        x = 2.0 * (lt - _LOG5)
        U = (0.5 * float(tt @ tt) + 0.5 * float(z @ z) + mu * mu / 50.0
             + _softplus(x) - lt)
        g = np.empty(self.dim)
        g[:J] = tt + tau * r
        g[J] = float(r.sum()) + mu / 25.0
        g[J + 1] = tau * float(r @ tt) + 2.0 * _expit(x) - 1.0
        return U, g

    def value(self, q):
        q = _as_q(q, self.dim)
        J = self.J
        tt = q[:J]
        mu = float(q[J])
        lt = float(q[J + 1])
        z = (mu + _exp(lt) * tt - self.y) * self._inv_sigma
        return (0.5 * float(tt @ tt) + 0.5 * float(z @ z) + mu * mu / 50.0
                + _softplus(2.0 * (lt - _LOG5)) - lt)

    def constrain(self, q):
        q = _as_batch(q, self.dim)
        J = self.J
        mu = q[..., J]
        tau = np.exp(q[..., J + 1])
        out = {}
        for j, n in enumerate(self._theta_names):
            out[n] = mu + tau * q[..., j]
        out["mu"] = mu
        out["tau"] = tau
        for j, n in enumerate(self._tt_names):
            out[n] = q[..., j]
        return out

    def unconstrain(self, params):
        """Inverse of :meth:`constrain`; uses theta_trans[j] if given, else
        (theta[j] - mu) / tau."""
        mu = np.asarray(params["mu"], dtype=np.float64)
        tau = np.asarray(params["tau"], dtype=np.float64)
        if all(n in params for n in self._tt_names):
            tt = [np.asarray(params[n], dtype=np.float64) for n in self._tt_names]
        else:
            tt = [(np.asarray(params[n], dtype=np.float64) - mu) / tau
                  for n in self._theta_names]
        return np.stack(np.broadcast_arrays(*tt, mu, np.log(tau)), axis=-1)


# ---------------------------------------------------------------------------
# garch-garch11

class Garch11(_PosteriorModel):
    """posteriordb's ``garch-garch11``: GARCH(1,1) with a mean, in NumPy.

    Stan's constrained parameters (mu, alpha0, alpha1, beta1), flat priors,
    T = 200, sigma_1 given by the data.  Not
    :class:`fastsurrogate.models.Garch`, the compiled zero-mean GARCH(m, r) of
    the NNgHMC paper (softmax parameters, log-normal prior on alpha0), which
    is a different model even for m = r = 1.

    sigma_1 = sigma1 (data), sigma_t^2 = alpha0 + alpha1 (y_{t-1} - mu)^2
    + beta1 sigma_{t-1}^2, y_t ~ N(mu, sigma_t^2) for t = 1..T.
    Constraints alpha0 > 0, 0 < alpha1 < 1, 0 < beta1 < 1 - alpha1.
    Unconstrained q = (mu, log alpha0, logit alpha1, logit(beta1 / (1 - alpha1))).

    The variance recursion (and its adjoint for the gradient) is a first-order
    linear recurrence h_t = c_t + beta1 h_{t-1}, run by
    :func:`scipy.signal.lfilter` (the same recursion, in C).
    """

    posterior_name = "garch-garch11"
    data_name = "garch"
    reference_names = ["mu", "alpha0", "alpha1", "beta1"]
    param_names = ["mu", "log_alpha0", "logit_alpha1", "logit_beta1_scaled"]
    dim = 4

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.y = np.asarray(data["y"], dtype=np.float64).ravel()
        self.T = self.y.shape[0]
        if "T" in data and int(data["T"]) != self.T:
            raise ValueError(f"T = {data['T']} but y has {self.T} entries")
        self.sigma1 = float(data["sigma1"])
        self._h1 = self.sigma1 ** 2
        self._b = np.ones(1)

    def _unpack(self, q):
        mu = float(q[0])
        la0 = float(q[1])
        v = float(q[2])
        u = float(q[3])
        a0 = _exp(la0)
        a1 = _expit(v)
        om_a1 = _expit(-v)            # 1 - alpha1, without cancellation
        s = _expit(u)
        om_s = _expit(-u)
        b1 = om_a1 * s
        return mu, la0, v, u, a0, a1, om_a1, s, om_s, b1

    def _forward(self, mu, a0, a1, b1):
        e = self.y - mu
        e2 = e * e
        h = np.empty(self.T)
        h[0] = self._h1
        a = np.array([1.0, -b1])
        zi = np.array([b1 * self._h1])
        h[1:] = lfilter(self._b, a, a0 + a1 * e2[:-1], zi=zi)[0]
        return e, e2, h, a

    @staticmethod
    def _log_jacobian(la0, v, u):
        # log|d(alpha0, alpha1, beta1)/d(q1, q2, q3)|
        #   = la0 + log a1 + log(1-a1)  [alpha1]  + log(1-a1) + log s + log(1-s)  [beta1]
        return la0 - _softplus(-v) - 2.0 * _softplus(v) - _softplus(-u) - _softplus(u)

    def value(self, q):
        q = _as_q(q, self.dim)
        mu, la0, v, u, a0, a1, om_a1, s, om_s, b1 = self._unpack(q)
        e, e2, h, _ = self._forward(mu, a0, a1, b1)
        loglik = -0.5 * float(np.log(h).sum()) - 0.5 * float((e2 / h).sum())
        return -(loglik + self._log_jacobian(la0, v, u))

    def value_and_grad(self, q):
        q = _as_q(q, self.dim)
        mu, la0, v, u, a0, a1, om_a1, s, om_s, b1 = self._unpack(q)
        e, e2, h, a = self._forward(mu, a0, a1, b1)
        inv_h = 1.0 / h
        e2h = e2 * inv_h
        loglik = -0.5 * float(np.log(h).sum()) - 0.5 * float(e2h.sum())
        # d loglik / d h_t (direct), then the adjoint of the recursion:
        # hbar_t = gh_t + beta1 hbar_{t+1}, t = T..2
        gh = 0.5 * (e2h - 1.0) * inv_h
        hbar = lfilter(self._b, a, gh[:0:-1])[::-1]          # t = 2..T
        d_a0 = float(hbar.sum())
        d_a1 = float(hbar @ e2[:-1])
        d_b1 = float(hbar @ h[:-1])
        d_mu = float(e @ inv_h) - 2.0 * a1 * float(hbar @ e[:-1])
        # chain rule to the unconstrained scale
        da1_dv = a1 * om_a1
        g = np.empty(4)
        g[0] = d_mu
        g[1] = a0 * d_a0 + 1.0
        g[2] = da1_dv * (d_a1 - s * d_b1) + (om_a1 - 2.0 * a1)
        g[3] = om_a1 * s * om_s * d_b1 + (om_s - s)
        U = -(loglik + self._log_jacobian(la0, v, u))
        return U, -g

    def constrain(self, q):
        q = _as_batch(q, self.dim)
        return {
            "mu": q[..., 0],
            "alpha0": np.exp(q[..., 1]),
            "alpha1": expit(q[..., 2]),
            "beta1": expit(-q[..., 2]) * expit(q[..., 3]),
        }

    def unconstrain(self, params):
        mu = np.asarray(params["mu"], dtype=np.float64)
        a0 = np.asarray(params["alpha0"], dtype=np.float64)
        a1 = np.asarray(params["alpha1"], dtype=np.float64)
        b1 = np.asarray(params["beta1"], dtype=np.float64)
        cols = (mu, np.log(a0), logit(a1), logit(b1 / (1.0 - a1)))
        return np.stack(np.broadcast_arrays(*cols), axis=-1)


# ---------------------------------------------------------------------------
# gp_pois_regr-gp_regr

class GPRegr(_PosteriorModel):
    """posteriordb's ``gp_pois_regr-gp_regr``: GP regression hyper-parameters, in NumPy.

    Squared-exponential kernel on N = 11 one-dimensional points, Stan's
    priors.  Not :class:`fastsurrogate.models.GPRegression`, the compiled
    Matern 3/2 hyper-parameter posterior of the NNgHMC paper (inputs of any
    dimension, log-normal priors), which is a different model.

    rho ~ Gamma(25, rate 4), alpha ~ half-N(0, 2^2), sigma ~ half-N(0, 1),
    y ~ N(0, K), K_ij = alpha^2 exp(-(x_i - x_j)^2 / (2 rho^2)) + sigma delta_ij
    (sigma itself on the diagonal, as in the Stan program).
    Unconstrained q = (log rho, log alpha, log sigma).

    The gradient uses the Cholesky factor:
    d/dtheta [-log N(y | 0, K)] = 0.5 tr((K^-1 - a a^T) dK/dtheta), a = K^-1 y.
    If K is not numerically positive definite, U = inf (gradient NaN).
    """

    posterior_name = "gp_pois_regr-gp_regr"
    data_name = "gp_pois_regr"
    reference_names = ["rho", "alpha", "sigma"]
    param_names = ["log_rho", "log_alpha", "log_sigma"]
    dim = 3

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.x = np.asarray(data["x"], dtype=np.float64).ravel()
        self.y = np.asarray(data["y"], dtype=np.float64).ravel()
        self.N = self.x.shape[0]
        if self.y.shape[0] != self.N:
            raise ValueError("x and y differ in length")
        d = self.x[:, None] - self.x[None, :]
        self._d2 = d * d
        self._half_d2 = 0.5 * self._d2
        self._diag = np.arange(self.N)

    def _prior_jac(self, lr, la, ls):
        """-(log priors + log Jacobian) up to a constant, and its gradient."""
        rho = _exp(lr)
        a2 = _exp(2.0 * la)
        s2 = _exp(2.0 * ls)
        # Gamma(25, 4): 24 log rho - 4 rho;  Jacobian: lr + la + ls
        val = -24.0 * lr + 4.0 * rho + a2 / 8.0 + 0.5 * s2 - (lr + la + ls)
        return val, (-25.0 + 4.0 * rho, a2 / 4.0 - 1.0, s2 - 1.0), rho, a2

    def _kernel(self, rho, a2, sigma):
        E = np.exp(self._half_d2 * (-1.0 / (rho * rho)))
        Kse = a2 * E
        K = Kse.copy()
        K[self._diag, self._diag] += sigma
        return Kse, K

    def value(self, q):
        q = _as_q(q, self.dim)
        lr, la, ls = float(q[0]), float(q[1]), float(q[2])
        pv, _, rho, a2 = self._prior_jac(lr, la, ls)
        if not _kernel_ok(rho, a2, pv):
            return math.inf
        _, K = self._kernel(rho, a2, _exp(ls))
        L, info = dpotrf(K, lower=1, clean=1)
        if info != 0:
            return math.inf
        z, info = dtrtrs(L, self.y, lower=1)
        return pv + float(np.log(np.diag(L)).sum()) + 0.5 * float(z @ z)

    def value_and_grad(self, q):
        q = _as_q(q, self.dim)
        lr, la, ls = float(q[0]), float(q[1]), float(q[2])
        pv, pg, rho, a2 = self._prior_jac(lr, la, ls)
        if not _kernel_ok(rho, a2, pv):
            return math.inf, np.full(3, np.nan)
        sigma = _exp(ls)
        Kse, K = self._kernel(rho, a2, sigma)
        L, info = dpotrf(K, lower=1, clean=1)      # K = L L^T
        if info != 0:
            return math.inf, np.full(3, np.nan)
        Linv, info = dtrtri(L, lower=1)            # lower triangle; upper stays 0
        Kinv = Linv.T @ Linv
        z = Linv @ self.y
        a = Linv.T @ z
        U = pv + float(np.log(np.diag(L)).sum()) + 0.5 * float(z @ z)
        W = Kinv - np.outer(a, a)
        WK = W * Kse
        g = np.empty(3)
        # dK/dlog rho = Kse * d^2 / rho^2; dK/dlog alpha = 2 Kse; dK/dlog sigma = sigma I
        g[0] = pg[0] + 0.5 * float((WK * self._d2).sum()) / (rho * rho)
        g[1] = pg[1] + float(WK.sum())
        g[2] = pg[2] + 0.5 * sigma * float(np.trace(W))
        return U, g

    def constrain(self, q):
        q = _as_batch(q, self.dim)
        e = np.exp(q)
        return {"rho": e[..., 0], "alpha": e[..., 1], "sigma": e[..., 2]}

    def unconstrain(self, params):
        cols = [np.log(np.asarray(params[n], dtype=np.float64))
                for n in self.reference_names]
        return np.stack(np.broadcast_arrays(*cols), axis=-1)


def _kernel_ok(rho, a2, pv):
    """False where the GP kernel cannot be formed (rho^2 underflows, overflow)."""
    return rho * rho > 0.0 and math.isfinite(rho * rho) and math.isfinite(a2) and math.isfinite(pv)


MODELS = {cls.posterior_name: cls for cls in
          (SBLRC_BLR, EightSchoolsNoncentered, Garch11, ArK, GPRegr)}


# ---------------------------------------------------------------------------
# fastsurrogate Potential

_POTENTIAL_CLASS = None


def _posterior_potential_class(Potential):
    """A Python subclass of the callback Potential whose ``constrain`` and
    ``model`` come from the wrapped model (None if it cannot be made)."""
    global _POTENTIAL_CLASS
    if _POTENTIAL_CLASS is None:
        try:
            base = type(Potential.from_callable(lambda q: (0.0, q), 1))

            class PosteriorPotential(base):
                """Callback Potential of a posteriordb model; ``constrain``
                and ``reference_names`` delegate to ``self.model``."""

                def constrain(self, q):
                    return self.model.constrain(q)

                @property
                def reference_names(self):
                    return list(self.model.reference_names)

            PosteriorPotential.__qualname__ = "PosteriorPotential"
            _POTENTIAL_CLASS = PosteriorPotential
        except TypeError:             # base class not subclassable
            _POTENTIAL_CLASS = False
    return _POTENTIAL_CLASS or None


def _quiet(f):
    """f with NumPy's floating-point warnings off during the call."""
    def call(q):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return f(q)
    call.__doc__ = f.__doc__
    return call


def as_potential(model: Any) -> Potential:
    """Wrap a model as a :class:`fastsurrogate.Potential` (a callback potential).

    Equivalent to ``Potential.from_callable(model.value_and_grad, model.dim,
    value=model.value, names=model.param_names)``, with NumPy's floating-point
    warnings silenced inside the calls (an overflow far out in a warm-up
    trajectory gives a non-finite value or gradient, which the samplers count
    as a divergence); when possible the result also carries ``.model`` and
    its ``.constrain(q)`` calls ``model.constrain``.
    """
    kwargs = dict(value=_quiet(model.value), names=list(model.param_names))
    cls = _posterior_potential_class(Potential)
    if cls is None:
        return Potential.from_callable(_quiet(model.value_and_grad), model.dim, **kwargs)
    pot = cls(_quiet(model.value_and_grad), model.dim, **kwargs)
    pot.model = model
    return pot
