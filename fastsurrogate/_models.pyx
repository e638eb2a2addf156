"""Analytic potentials: Gaussians and the banana-shaped target."""

import numpy as np
cimport numpy as cnp

from fastsurrogate._potential cimport Potential
from fastsurrogate._common cimport fs_potential

cnp.import_array()

cdef extern from "fs_models.h" nogil:
    ctypedef struct fs_gaussian:
        int dim
        int diagonal
        const double *mean
        const double *prec
    ctypedef struct fs_banana:
        double n, sum_y, sum_y2, sigma_y, sigma_q
    int fs_gaussian_eval(void *state, const double *q, double *value, double *grad)
    int fs_banana_eval(void *state, const double *q, double *value, double *grad)


def _finite(name, a):
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf")


cdef class Gaussian(Potential):
    """Multivariate normal target N(mean, cov): U(q) = 0.5 (q-m)^T cov^{-1} (q-m).

    Parameters
    ----------
    mean : array_like, shape (dim,)
    cov : array_like, shape (dim,) for a diagonal covariance or (dim, dim)
        for a dense one (symmetric positive definite).

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> g = fs.models.Gaussian(np.zeros(2), np.eye(2))
    >>> g.value(np.ones(2))
    1.0
    """

    cdef fs_gaussian st
    cdef readonly cnp.ndarray mean
    cdef readonly cnp.ndarray cov
    cdef readonly cnp.ndarray precision

    def __init__(self, mean, cov):
        mean = np.array(mean, dtype=np.float64, copy=True).ravel()
        cov = np.array(cov, dtype=np.float64, copy=True)
        d = mean.shape[0]
        if d < 1:
            raise ValueError("mean must have at least one element")
        _finite("mean", mean)
        _finite("cov", cov)
        if cov.shape == (d,):
            if np.any(cov <= 0):
                raise ValueError("a diagonal cov must be positive")
            prec = 1.0 / cov
            self.st.diagonal = 1
        elif cov.shape == (d, d):
            if not np.allclose(cov, cov.T, rtol=1e-12, atol=1e-14 * np.abs(cov).max()):
                raise ValueError("cov must be symmetric")
            try:
                chol = np.linalg.cholesky(cov)
            except np.linalg.LinAlgError:
                raise ValueError("cov must be positive definite") from None
            inv_chol = np.linalg.inv(chol)
            prec = np.ascontiguousarray(inv_chol.T @ inv_chol)
            prec = 0.5 * (prec + prec.T)
            self.st.diagonal = 0
        else:
            raise ValueError(f"cov must have shape ({d},) or ({d}, {d}), got {cov.shape}")
        self.mean = mean
        self.cov = cov
        self.precision = np.ascontiguousarray(prec)
        self.mean.flags.writeable = False
        self.cov.flags.writeable = False
        self.precision.flags.writeable = False
        self.st.dim = d
        self.st.mean = <const double *>cnp.PyArray_DATA(self.mean)
        self.st.prec = <const double *>cnp.PyArray_DATA(self.precision)
        self.pot.dim = d
        self.pot.state = &self.st
        self.pot.eval = fs_gaussian_eval
        self.thread_safe = True

    @property
    def covariance(self):
        """The covariance as a (dim, dim) array."""
        return np.diag(self.cov) if self.cov.ndim == 1 else self.cov.copy()


def StandardNormal(dim):
    """N(0, I_dim): U(q) = 0.5 q.q, gradient q."""
    dim = int(dim)
    if dim < 1:
        raise ValueError(f"dim must be positive, got {dim}")
    return Gaussian(np.zeros(dim), np.ones(dim))


cdef class Banana(Potential):
    """The 2-d banana-shaped posterior of the RNS-HMC and NNgHMC papers.

    y_i ~ N(q0 + q1^2, sigma_y^2), i = 1..n, with q0, q1 ~ N(0, sigma_q^2).
    By default the n = 100 observations are simulated with q0 + q1^2 = 1
    (``seed`` fixes them) and sigma_y = 2, sigma_q = 1.

    Parameters
    ----------
    y : array_like, shape (n,), optional
        Observations; simulated when omitted.
    sigma_y, sigma_q : float
        Noise sd and prior sd.
    n : int
        Number of simulated observations when ``y`` is omitted.
    seed : int
        Seed of the simulated observations.
    """

    cdef fs_banana st
    cdef readonly cnp.ndarray y

    def __init__(self, y=None, sigma_y=2.0, sigma_q=1.0, n=100, seed=2017):
        if not (sigma_y > 0 and sigma_q > 0 and np.isfinite(sigma_y) and np.isfinite(sigma_q)):
            raise ValueError("sigma_y and sigma_q must be positive and finite")
        if y is None:
            if int(n) < 1:
                raise ValueError("n must be positive")
            y = 1.0 + sigma_y * np.random.default_rng(seed).standard_normal(int(n))
        y = np.array(y, dtype=np.float64).ravel()
        if y.size < 1:
            raise ValueError("y must have at least one observation")
        _finite("y", y)
        self.y = y
        self.st.n = y.size
        self.st.sum_y = y.sum()
        self.st.sum_y2 = (y * y).sum()
        self.st.sigma_y = sigma_y
        self.st.sigma_q = sigma_q
        self.pot.dim = 2
        self.pot.state = &self.st
        self.pot.eval = fs_banana_eval
        self.thread_safe = True
