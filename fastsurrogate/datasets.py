"""Simulators and loaders for the papers' data.

Real data are read from the shared data folder (``../shared/data`` beside
the repository, or ``$FASTSURROGATE_DATA``); nothing is bundled.
"""
import gzip
from pathlib import Path

import numpy as np

__all__ = ["simulate_logistic", "simulate_probit", "find_data_dir", "load_bank_marketing",
           "load_libsvm", "load_a9a", "load_cancer_mortality", "random_projection"]


def simulate_logistic(n=100000, d=50, seed=0):
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


def simulate_probit(n=10000, d=5, seed=0):
    """Simulated probit regression (VHMC paper, section 4.2): X ~ N(0, I),
    beta ~ N(0, I), y ~ Bernoulli(Phi(X beta)).  Returns X, y, beta."""
    from scipy.special import ndtr
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    beta = rng.standard_normal(d)
    y = (rng.uniform(size=n) < ndtr(X @ beta)).astype(np.float64)
    return X, y, beta


def find_data_dir(required=True):
    """The shared data folder: ``$FASTSURROGATE_DATA``, else a ``shared/data``
    folder found walking up from the working directory or this package
    (the search of :func:`fastsurrogate.models.posteriordb.find_data_dir`)."""
    from .models.posteriordb import find_data_dir as _find
    found = _find()
    if found is None and required:
        raise FileNotFoundError(
            "the shared data folder was not found; set FASTSURROGATE_DATA to its path")
    return found


def load_bank_marketing(data_dir=None):
    """Bank Marketing as preprocessed for the RNS-HMC paper: X (40197, 25)
    with an intercept column, y in {0, 1} (float)."""
    path = Path(data_dir or find_data_dir()) / "bank_marketing.npz"
    with np.load(path) as f:
        return np.ascontiguousarray(f["X"], dtype=np.float64), f["y"].astype(np.float64)


def load_libsvm(path, n_features=None):
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


def load_a9a(data_dir=None, test=False):
    """a9a (UCI adult, LIBSVM version): X (n, 123) binary features, y in {0, 1}."""
    name = "a9a.t.libsvm.gz" if test else "a9a.libsvm.gz"
    X, y = load_libsvm(Path(data_dir or find_data_dir()) / name, n_features=123)
    return X, (y > 0).astype(np.float64)


def load_cancer_mortality(data_dir=None):
    """Stomach-cancer deaths and populations at risk of 20 Missouri cities:
    returns (deaths, at_risk), each an int array (20,)."""
    path = Path(data_dir or find_data_dir()) / "cancer_mortality.csv"
    raw = np.genfromtxt(path, delimiter=",", names=True)
    return raw["deaths"].astype(np.int64), raw["at_risk"].astype(np.int64)


def random_projection(X, k, seed=0, standardize=True, intercept=True):
    """Reduce X to k columns by a Gaussian random projection, as the papers do
    for a9a; standardise the projected columns and prepend an intercept.

    Returns an (n, k + intercept) array.
    """
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((X.shape[1], k)) / np.sqrt(k)
    Z = X @ R
    if standardize:
        sd = Z.std(axis=0)
        sd[sd == 0] = 1.0
        Z = (Z - Z.mean(axis=0)) / sd
    if intercept:
        Z = np.hstack([np.ones((Z.shape[0], 1)), Z])
    return np.ascontiguousarray(Z)
