"""Simulators and loaders for the papers' data.

Real data are read from the shared data folder (``../shared/data`` beside
the repository, or ``$FASTSURROGATE_DATA``); nothing is bundled.
"""
import gzip
import os
from pathlib import Path
from typing import Literal, overload

import numpy as np

from ._typing import ArrayLike, FloatArray, IntArray, PathLike

__all__ = ["simulate_logistic", "simulate_probit", "simulate_garch", "simulate_gp_regression",
           "simulate_ica", "find_data_dir", "load_bank_marketing", "load_libsvm", "load_a9a",
           "load_cancer_mortality", "random_projection"]


def simulate_logistic(n: int = 100000, d: int = 50,
                      seed: int = 0) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The RNS-HMC paper's simulated logistic regression.

    X = (0.1 * 1, X1) with X1 ~ N(0, I/100) (n x (d-1)), beta ~ U[0, 1]^d,
    y ~ Bernoulli(logistic(X beta)).

    Returns
    -------
    X : ndarray (n, d), y : ndarray (n,) of 0/1 floats, beta : ndarray (d,)
    """
    if n < 1 or d < 2:
        raise ValueError("need n >= 1 and d >= 2")
    rng = np.random.default_rng(seed)
    X = np.empty((n, d))
    X[:, 0] = 0.1
    X[:, 1:] = rng.standard_normal((n, d - 1)) / 10.0
    beta = rng.uniform(0.0, 1.0, d)
    p = 1.0 / (1.0 + np.exp(-(X @ beta)))
    y = (rng.uniform(size=n) < p).astype(np.float64)
    return X, y, beta


def simulate_probit(n: int = 10000, d: int = 5,
                    seed: int = 0) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Simulated probit regression (VHMC paper, section 4.2): X ~ N(0, I),
    beta ~ N(0, I), y ~ Bernoulli(Phi(X beta)).  Returns X, y, beta."""
    from scipy.special import ndtr
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    beta = rng.standard_normal(d)
    y = (rng.uniform(size=n) < ndtr(X @ beta)).astype(np.float64)
    return X, y, beta


def simulate_garch(T: int, alpha0: float, alphas: ArrayLike, betas: ArrayLike, seed: int = 0,
                   burn_in: int = 1000) -> FloatArray:
    """A series from GARCH(m, r) with Gaussian innovations (the model of
    :class:`fastsurrogate.models.Garch`; NNgHMC paper, section 4.3)::

        y_t = sigma_t eps_t,
        sigma_t^2 = alpha0 + sum_i alphas[i-1] y_{t-i}^2 + sum_j betas[j-1] sigma_{t-j}^2

    The recursion starts from the stationary variance
    alpha0 / (1 - sum(alphas) - sum(betas)) and runs ``burn_in`` steps before
    the T returned ones.

    Parameters
    ----------
    T : int
        Length of the returned series.
    alpha0 : float
        Positive intercept.
    alphas, betas : sequence of float
        ARCH (m) and GARCH (r) coefficients, non-negative, with
        sum(alphas) + sum(betas) < 1 (covariance stationarity).
    seed : int or numpy.random.Generator

    Returns
    -------
    y : ndarray (T,)

    Examples
    --------
    >>> y = simulate_garch(1000, 0.1, [0.2, 0.1], [0.5], seed=1)   # GARCH(2, 1)
    """
    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    betas = np.atleast_1d(np.asarray(betas, dtype=np.float64))
    T, burn_in = int(T), int(burn_in)
    if T < 1 or burn_in < 0:
        raise ValueError("need T >= 1 and burn_in >= 0")
    if alphas.ndim != 1 or betas.ndim != 1 or alphas.size + betas.size < 1:
        raise ValueError("alphas and betas must be 1-D, with at least one coefficient in all")
    if not (alpha0 > 0 and np.isfinite(alpha0)):
        raise ValueError(f"alpha0 must be positive and finite, got {alpha0}")
    if (np.any(~np.isfinite(alphas)) or np.any(~np.isfinite(betas))
            or np.any(alphas < 0) or np.any(betas < 0)):
        raise ValueError("alphas and betas must be non-negative and finite")
    persistence = float(alphas.sum() + betas.sum())
    if persistence >= 1.0:
        raise ValueError(f"sum(alphas) + sum(betas) = {persistence} must be < 1")
    rng = np.random.default_rng(seed)
    m, r = alphas.size, betas.size
    p = max(m, r)
    n = p + burn_in + T
    h_bar = alpha0 / (1.0 - persistence)
    y2 = np.full(n, h_bar)
    h = np.full(n, h_bar)
    eps = rng.standard_normal(n)
    y = np.sqrt(h_bar) * eps
    for t in range(p, n):
        h[t] = alpha0 + alphas @ y2[t - m:t][::-1] + betas @ h[t - r:t][::-1]
        y[t] = np.sqrt(h[t]) * eps[t]
        y2[t] = y[t] * y[t]
    return y[n - T:].copy()


def simulate_gp_regression(n: int = 500, dim: int = 4, lengthscale: float = 1.0,
                           signal_variance: float = 1.0, noise_variance: float = 0.1,
                           seed: int = 0) -> tuple[FloatArray, FloatArray]:
    """A data set like the NNgHMC paper's GP regression (section 4.4):
    inputs X ~ U[0, 2]^dim, f ~ GP(0, Matern 3/2 kernel with the given
    ``lengthscale`` and ``signal_variance``) at X, y = f + N(0, noise_variance).

    Returns
    -------
    X : ndarray (n, dim), y : ndarray (n,)

    Examples
    --------
    >>> X, y = simulate_gp_regression(n=500, dim=4, seed=0)
    """
    n, dim = int(n), int(dim)
    if n < 1 or dim < 1:
        raise ValueError("need n >= 1 and dim >= 1")
    for name, v in (("lengthscale", lengthscale), ("signal_variance", signal_variance),
                    ("noise_variance", noise_variance)):
        if not (v > 0 and np.isfinite(v)):
            raise ValueError(f"{name} must be positive and finite, got {v}")
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 2.0, size=(n, dim))
    d2 = np.maximum((X * X).sum(1)[:, None] + (X * X).sum(1)[None, :] - 2.0 * X @ X.T, 0.0)
    t = np.sqrt(3.0 * d2) / lengthscale
    K = signal_variance * (1.0 + t) * np.exp(-t)
    K[np.diag_indices(n)] += 1e-10 * signal_variance
    f = np.linalg.cholesky(K) @ rng.standard_normal(n)
    y = f + np.sqrt(noise_variance) * rng.standard_normal(n)
    return X, y


@overload
def find_data_dir(required: Literal[True] = ...) -> Path: ...
@overload
def find_data_dir(required: bool) -> Path | None: ...


def find_data_dir(required: bool = True) -> Path | None:
    """The shared data folder (``X/shared/data`` for a repository at ``X/main``).

    Order: the environment variable ``FASTSURROGATE_DATA`` (if set and an
    existing folder), then a ``shared/data`` folder found by walking up from
    the current working directory, then from this package's location.
    Returns a :class:`pathlib.Path`; when nothing is found, None if
    ``required`` is False, else a FileNotFoundError.
    :func:`fastsurrogate.models.posteriordb.find_data_dir` is this search
    with ``required=False``.
    """
    found = None
    env = os.environ.get("FASTSURROGATE_DATA")
    if env:
        p = Path(env).expanduser()
        found = p if p.is_dir() else None
    else:
        found = next((d / "shared" / "data"
                      for start in (Path.cwd(), Path(__file__).resolve().parent)
                      for d in (start, *start.parents)
                      if (d / "shared" / "data").is_dir()), None)
    if found is None and required:
        raise FileNotFoundError(
            "the shared data folder was not found; set FASTSURROGATE_DATA to its path")
    return found


def load_bank_marketing(data_dir: PathLike | None = None) -> tuple[FloatArray, FloatArray]:
    """Bank Marketing as preprocessed for the RNS-HMC paper: X (40197, 25)
    with an intercept column, y in {0, 1} (float)."""
    path = Path(data_dir or find_data_dir()) / "bank_marketing.npz"
    with np.load(path) as f:
        return np.ascontiguousarray(f["X"], dtype=np.float64), f["y"].astype(np.float64)


def load_libsvm(path: PathLike,
                n_features: int | None = None) -> tuple[FloatArray, FloatArray]:
    """Read a LIBSVM text file (optionally gzipped) into a dense X and y.

    Feature indices are 1-based.  Returns X (n, n_features), y (n,).
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    labels, rows, cols, vals = [], [], [], []
    with opener(path, "rt") as f:
        for i, line in enumerate(f):
            parts = line.split()
            if not parts:
                continue
            labels.append(float(parts[0]))
            for item in parts[1:]:
                j, v = item.split(":")
                rows.append(len(labels) - 1)
                cols.append(int(j) - 1)
                vals.append(float(v))
    n = len(labels)
    p = n_features if n_features is not None else (max(cols) + 1 if cols else 0)
    X = np.zeros((n, p))
    X[np.asarray(rows, dtype=np.intp), np.asarray(cols, dtype=np.intp)] = vals
    return X, np.asarray(labels)


def load_a9a(data_dir: PathLike | None = None,
             test: bool = False) -> tuple[FloatArray, FloatArray]:
    """a9a (UCI adult, LIBSVM version): X (n, 123) binary features, y in {0, 1}."""
    name = "a9a.t.libsvm.gz" if test else "a9a.libsvm.gz"
    X, y = load_libsvm(Path(data_dir or find_data_dir()) / name, n_features=123)
    return X, (y > 0).astype(np.float64)


def load_cancer_mortality(data_dir: PathLike | None = None) -> tuple[IntArray, IntArray]:
    """Stomach-cancer deaths and populations at risk of 20 Missouri cities:
    returns (deaths, at_risk), each an int array (20,)."""
    path = Path(data_dir or find_data_dir()) / "cancer_mortality.csv"
    raw = np.genfromtxt(path, delimiter=",", names=True)
    return raw["deaths"].astype(np.int64), raw["at_risk"].astype(np.int64)


def _standardize_columns(A):
    """Columns centred and scaled to unit sd (constant columns only centred)."""
    sd = A.std(axis=0)
    sd[sd == 0] = 1.0
    return (A - A.mean(axis=0)) / sd


def random_projection(X: ArrayLike, k: int, seed: int = 0, standardize: bool = True,
                      intercept: bool = True, standardize_input: bool = False) -> FloatArray:
    """Reduce X to k columns by a Gaussian random projection, as the papers do
    for a9a; standardise the projected columns and prepend an intercept.

    Parameters
    ----------
    X : array (n, p)
    k : int
        Number of projected columns.
    seed : int
        Seed of the projection matrix R (p, k), entries N(0, 1/k).
    standardize : bool
        Centre the projected columns and scale them to unit sd.
    intercept : bool
        Prepend a column of ones.
    standardize_input : bool
        Centre and scale the p input columns before projecting.  For one-hot
        data such as a9a (every row has the same number of ones) this removes
        the near-collinearity of the projected columns with the intercept:
        on a9a the posterior's condition number falls from ~1700 to ~110.

    Returns
    -------
    ndarray
        An (n, k + intercept) array.
    """
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError("X must be 2-d")
    if not 1 <= int(k):
        raise ValueError("k must be >= 1")
    if standardize_input:
        A = _standardize_columns(A)
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((A.shape[1], k)) / np.sqrt(k)
    Z = A @ R
    if standardize:
        Z = _standardize_columns(Z)
    if intercept:
        Z = np.hstack([np.ones((Z.shape[0], 1)), Z])
    return np.ascontiguousarray(Z)


def simulate_ica(n: int = 17730, d: int = 5, seed: int = 0,
                 sources: str = "logistic") -> tuple[FloatArray, FloatArray, FloatArray]:
    """Mixed super-Gaussian sources for ICA (a stand-in for the VHMC paper's
    MEG data, section 4.4: 5 channels, 17730 observations, not public).

    Sources s_ni are independent standard logistic (density
    1 / (4 cosh^2(s / 2)), the density :class:`fastsurrogate.models.ICA`
    assumes) or, with ``sources="laplace"``, Laplace with scale 1.  The
    mixing matrix is ``A = Q1 diag(sv) Q2^T`` with Q1, Q2 Haar-random
    orthogonal matrices and singular values sv uniform on [1, 2] (so its
    condition number is at most 2); ``X = S A^T`` (row n is A s_n).

    Returns
    -------
    X : ndarray (n, d)
        Observations.
    A : ndarray (d, d)
        The mixing matrix.
    W0 : ndarray (d, d)
        The true unmixing matrix A^{-1} (W0 x_n = s_n).

    Examples
    --------
    >>> import fastsurrogate as fs
    >>> X, A, W0 = fs.datasets.simulate_ica(n=1000, d=3, seed=1)
    >>> X.shape, W0.shape
    ((1000, 3), (3, 3))
    """
    import numbers
    for name, v, lo in (("n", n, 1), ("d", d, 1)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if sources not in ("logistic", "laplace"):
        raise ValueError(f"sources must be 'logistic' or 'laplace', got {sources!r}")
    rng = np.random.default_rng(seed)

    def haar(k):
        q, r = np.linalg.qr(rng.standard_normal((k, k)))
        return q * np.sign(np.diag(r))

    sv = rng.uniform(1.0, 2.0, d)
    A = haar(d) @ np.diag(sv) @ haar(d).T
    S = rng.logistic(size=(n, d)) if sources == "logistic" else rng.laplace(size=(n, d))
    X = S @ A.T
    return X, A, np.linalg.inv(A)
