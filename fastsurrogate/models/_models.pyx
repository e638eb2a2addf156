"""Compiled model potentials: Gaussians, the banana-shaped target, the
beta-binomial overdispersion model, GARCH(m, r) and Gaussian-process
regression hyper-parameters."""

import math
import numbers

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t

from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.core._checks import real_array
from fastsurrogate.core._common cimport FS_OK
from fastsurrogate.core._blas cimport blas_table

cnp.import_array()


# fs_potential.dim is a C int
_MAX_DIM = 2**31 - 1


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
        mean = real_array("mean", mean).ravel()
        cov = real_array("cov", cov)
        d = mean.shape[0]
        if d < 1:
            raise ValueError("mean must have at least one element")
        if d > _MAX_DIM:
            raise ValueError(f"dim must be at most {_MAX_DIM}, got {d}")
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

    def __reduce__(self):
        return (Gaussian, (self.mean, self.cov))


def StandardNormal(dim):
    """N(0, I_dim): U(q) = 0.5 q.q, gradient q.

    ``dim`` must be an integer in 1 .. 2**31 - 1 (checked before anything
    is allocated).
    """
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"dim must be an integer, got {type(dim).__name__} {dim!r}")
    if dim < 1 or dim > _MAX_DIM:
        raise ValueError(f"dim must be in 1..{_MAX_DIM}, got {dim}")
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
        y = real_array("y", y).ravel()
        if y.size < 1:
            raise ValueError("y must have at least one observation")
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

    def __reduce__(self):
        return (Banana, (self.y, self.st.sigma_y, self.st.sigma_q))


# ---- validation helpers ------------------------------------------------------

def _real_scalar(obj, name, positive=False):
    if isinstance(obj, (bool, np.bool_)) or not isinstance(obj, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {obj!r}")
    x = float(obj)
    if not math.isfinite(x) or (positive and not x > 0.0):
        raise ValueError(f"{name} must be {'positive and ' if positive else ''}finite, got {obj!r}")
    return x


def _order(obj, name, minimum):
    if isinstance(obj, (bool, np.bool_)) or not isinstance(obj, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {obj!r}")
    if obj < minimum or obj > 10000:
        raise ValueError(f"{name} must be in [{minimum}, 10000], got {obj}")
    return int(obj)


def _per_param(value, d, name, positive):
    arr = real_array(name, value, copy=False, allow_nonfinite=True)
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    if arr.shape != (d,):
        raise ValueError(f"{name} must be a scalar or have shape ({d},), got shape {arr.shape}")
    bad = ~np.isfinite(arr) | ((arr <= 0.0) if positive else False)
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(f"{name} must be {'positive and ' if positive else ''}finite; "
                         f"{name}[{j}] = {arr[j]}")
    return arr


def _counts(obj, name):
    arr = real_array(name, obj, copy=False, allow_nonfinite=True)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr != np.floor(arr)) | (arr > 2.0 ** 53)
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(f"{name} must hold non-negative integer counts; {name}[{j}] = {arr[j]}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _q_batch(q, d):
    q = np.asarray(q, dtype=np.float64)
    if q.ndim < 1 or q.shape[q.ndim - 1] != d:
        raise ValueError(f"q must have shape (..., {d}), got {q.shape}")
    return q


def _expit(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))),
                        np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


# ---- beta-binomial -----------------------------------------------------------

cdef class BetaBinomial(Potential):
    """Beta-binomial overdispersion model (VHMC paper, section 4.1).

    y_j ~ BetaBinomial(n_j, K m, K (1 - m)) for j = 1..J, with Albert's prior
    p(m, K) proportional to 1 / (m (1 - m)) * 1 / (1 + K)^2 (Bayesian Computation
    with R, cancer mortality example), sampled as q = (logit m, log K):

        U(q) = -sum_j [log B(K m + y_j, K (1-m) + n_j - y_j) - log B(K m, K (1-m))]
               - log K + 2 log(1 + K)

    (the Jacobian m (1 - m) K is included; it cancels the 1/(m(1-m)) factor).
    The binomial coefficients sum_j log C(n_j, y_j) are left out: the prior
    is improper, so U is defined up to a constant anyway.  m is the mean
    success probability, K the precision (small K = strong overdispersion).

    Parameters
    ----------
    y : array_like of int, shape (J,)
        Successes (deaths), 0 <= y_j <= n_j.
    n : array_like of int, shape (J,)
        Trials (population at risk).

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> model = fs.models.BetaBinomial([0, 2, 1], [1083, 3461, 1208])
    >>> U, g = model.value_and_grad(np.array([-7.0, 6.0]))
    """

    cdef fs_betabinom st
    cdef readonly cnp.ndarray y
    cdef readonly cnp.ndarray n

    def __init__(self, y, n):
        ya = _counts(y, "y")
        na = _counts(n, "n")
        if ya.shape != na.shape:
            raise ValueError(f"y and n must have the same shape, got {ya.shape} and {na.shape}")
        if ya.shape[0] < 1:
            raise ValueError("need at least one group (y and n are empty)")
        if ya.shape[0] > 2147483647:
            raise ValueError("too many groups")
        over = ya > na
        if over.any():
            j = int(np.argmax(over))
            raise ValueError(f"y must not exceed n; y[{j}] = {ya[j]} > n[{j}] = {na[j]}")
        ya.flags.writeable = False
        na.flags.writeable = False
        self.y = ya
        self.n = na
        self.st.J = <int>ya.shape[0]
        self.st.y = <const int64_t *>cnp.PyArray_DATA(ya)
        self.st.n = <const int64_t *>cnp.PyArray_DATA(na)
        self.pot.dim = 2
        self.pot.state = &self.st
        self.pot.eval = fs_betabinom_eval
        self.thread_safe = True

    @classmethod
    def from_cancer_mortality(cls, data_dir=None):
        """The model on the 20-city stomach-cancer data
        (:func:`fastsurrogate.datasets.load_cancer_mortality`)."""
        from fastsurrogate.datasets import load_cancer_mortality
        deaths, at_risk = load_cancer_mortality(data_dir)
        return cls(deaths, at_risk)

    @property
    def param_names(self):
        """``["logit_m", "log_K"]``."""
        return ["logit_m", "log_K"]

    def constrain(self, q):
        """``(..., 2)`` unconstrained draws -> dict with ``m`` and ``K``."""
        q = _q_batch(q, 2)
        return {"m": _expit(q[..., 0]), "K": np.exp(q[..., 1])}

    def unconstrain(self, params):
        """Inverse of :meth:`constrain`: dict with ``m``, ``K`` -> ``(..., 2)``."""
        m = np.asarray(params["m"], dtype=np.float64)
        K = np.asarray(params["K"], dtype=np.float64)
        return np.stack(np.broadcast_arrays(np.log(m) - np.log1p(-m), np.log(K)), axis=-1)

    def __reduce__(self):
        return (BetaBinomial, (self.y, self.n))


def _digamma(x):
    """Test hook: the C digamma (csrc/fs_models.c) at x (float or array)."""
    xa = np.asarray(x, dtype=np.float64)
    out = np.empty_like(xa)
    flat_in = xa.ravel()
    flat_out = out.ravel()
    cdef Py_ssize_t i
    for i in range(flat_in.shape[0]):
        flat_out[i] = fs_digamma(flat_in[i])
    return out.reshape(xa.shape) if xa.ndim else float(out)


def _log_rising(double x, long long c):
    """Test hook: lgamma(x + c) - lgamma(x) by the C kernel."""
    return fs_log_rising(x, c)


def _digamma_diff(double x, long long c):
    """Test hook: psi(x + c) - psi(x) by the C kernel."""
    return fs_digamma_diff(x, c)


# ---- GARCH(m, r) ---------------------------------------------------------------

cdef class Garch(Potential):
    """Compiled GARCH(m, r) of the NNgHMC paper (section 4.3), any m and r.

    Zero-mean returns, Gaussian innovations, (alpha, beta) through a softmax
    with a flat prior on the stationary region, a log-normal prior on alpha0;
    in C.  Not posteriordb's ``garch-garch11``
    (:class:`fastsurrogate.models.posteriordb.Garch11`, NumPy: GARCH(1,1)
    with a mean mu, Stan's constrained parameters, flat priors and sigma_1
    given), which is a different model even for m = r = 1.

    For t = 1..T::

        y_t = sigma_t eps_t,   eps_t ~ N(0, 1)
        sigma_t^2 = alpha0 + sum_{i=1..m} alpha_i y_{t-i}^2 + sum_{j=1..r} beta_j sigma_{t-j}^2

    ``m`` is the number of ARCH terms (lagged squared observations) and ``r``
    the number of GARCH terms (lagged variances); the NNgHMC paper's GARCH(2, 1)
    on 1000 simulated observations is ``Garch(y, m=2, r=1)`` (dim 4).  Before
    the series starts, y_t^2 and sigma_t^2 are the constant ``h0`` (default:
    the mean of y^2), so all T observations enter the likelihood.

    Unconstrained parameters (``dim = 1 + m + r``)::

        q[0]        = log alpha0
        q[1:1+m+r]  = z,  (alpha_1..alpha_m, beta_1..beta_r, s) = softmax(z, 0)

    so alpha_i > 0, beta_j > 0 and s = 1 - sum(alpha) - sum(beta) > 0
    (covariance stationarity).  Priors: log alpha0 ~ N(log_alpha0_mean,
    log_alpha0_sd^2) (log-normal alpha0); (alpha, beta) uniform on the
    stationary region {alpha, beta > 0, sum < 1} (the "truncated" flat prior).
    U is the negative log joint density of (y, q) with every constant:
    Gaussian likelihood terms 0.5 (log 2 pi + log sigma_t^2 + y_t^2 / sigma_t^2),
    the normal density of q[0], the uniform density (m + r)! and the
    log-Jacobian sum(log alpha) + sum(log beta) + log s of the softmax map.

    Value and gradient cost one forward pass over the series and, for the
    gradient, one backward (adjoint) pass: O(T (m + r)), in C.

    Parameters
    ----------
    y : array_like, shape (T,)
        The series (finite).
    m, r : int
        ARCH and GARCH orders (m, r >= 0, m + r >= 1).
    h0 : float, optional
        Pre-sample value of y^2 and sigma^2 (default ``mean(y**2)``).
    log_alpha0_mean, log_alpha0_sd : float
        Normal prior of log alpha0.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> y = fs.datasets.simulate_garch(1000, 0.1, [0.2, 0.1], [0.5], seed=1)
    >>> model = fs.models.Garch(y, m=2, r=1)
    >>> q = model.unconstrain({"alpha0": 0.1, "alpha[1]": 0.2, "alpha[2]": 0.1, "beta[1]": 0.5})
    >>> U, g = model.value_and_grad(q)
    """

    cdef fs_garch st
    cdef bint _ready
    cdef readonly cnp.ndarray y
    cdef readonly int m
    cdef readonly int r
    cdef readonly double h0
    cdef readonly double log_alpha0_mean
    cdef readonly double log_alpha0_sd

    def __cinit__(self, *args, **kwargs):
        self._ready = False

    def __dealloc__(self):
        if self._ready:
            fs_garch_free(&self.st)
            self._ready = False

    def __init__(self, y, m=2, r=1, h0=None, log_alpha0_mean=0.0, log_alpha0_sd=5.0):
        if self._ready:
            raise TypeError("Garch is already initialised")
        ya = real_array("y", y, copy=False)
        if ya.ndim != 1:
            raise ValueError(f"y must be 1-D (T,), got shape {ya.shape}")
        if ya.shape[0] < 1 or ya.shape[0] > 2147483647:
            raise ValueError(f"y must have between 1 and 2**31 - 1 entries, got {ya.shape[0]}")
        m = _order(m, "m", 0)
        r = _order(r, "r", 0)
        if m + r < 1:
            raise ValueError("need m + r >= 1 (at least one ARCH or GARCH term)")
        if h0 is None:
            h0 = float(np.mean(ya * ya))
            if not (h0 > 0.0 and math.isfinite(h0)):
                raise ValueError("mean(y**2) is not positive and finite; pass h0 explicitly")
        else:
            h0 = _real_scalar(h0, "h0", positive=True)
        mu0 = _real_scalar(log_alpha0_mean, "log_alpha0_mean")
        sd0 = _real_scalar(log_alpha0_sd, "log_alpha0_sd", positive=True)
        ya = np.array(ya, dtype=np.float64, copy=True)
        ya.flags.writeable = False
        cdef cnp.ndarray yc = ya
        cdef int status = fs_garch_init(&self.st, <const double *>cnp.PyArray_DATA(yc),
                                        <int>yc.shape[0], <int>m, <int>r, h0, mu0, sd0)
        if status != FS_OK:
            raise_for_status(status, "Garch: fs_garch_init")
        self._ready = True
        self.y = ya
        self.m = m
        self.r = r
        self.h0 = h0
        self.log_alpha0_mean = mu0
        self.log_alpha0_sd = sd0
        self.pot.dim = 1 + m + r
        self.pot.state = &self.st
        self.pot.eval = fs_garch_eval
        self.thread_safe = True

    @property
    def T(self):
        """Length of the series."""
        return int(self.y.shape[0])

    @property
    def param_names(self):
        """``log_alpha0``, ``z_alpha[1..m]``, ``z_beta[1..r]`` (unconstrained)."""
        return (["log_alpha0"] + [f"z_alpha[{i}]" for i in range(1, self.m + 1)]
                + [f"z_beta[{j}]" for j in range(1, self.r + 1)])

    @property
    def constrained_names(self):
        """``alpha0``, ``alpha[1..m]``, ``beta[1..r]``."""
        return (["alpha0"] + [f"alpha[{i}]" for i in range(1, self.m + 1)]
                + [f"beta[{j}]" for j in range(1, self.r + 1)])

    def constrain(self, q):
        """``(..., dim)`` unconstrained draws -> dict ``alpha0``, ``alpha[i]``,
        ``beta[j]`` and ``persistence`` (= sum alpha + sum beta < 1)."""
        q = _q_batch(q, self.pot.dim)
        z = q[..., 1:]
        zmax = np.maximum(z.max(axis=-1, keepdims=True), 0.0)
        e = np.exp(z - zmax)
        phi = e / (e.sum(axis=-1, keepdims=True) + np.exp(-zmax))
        out = {"alpha0": np.exp(q[..., 0])}
        for k, name in enumerate(self.constrained_names[1:]):
            out[name] = phi[..., k]
        out["persistence"] = phi.sum(axis=-1)
        return out

    def unconstrain(self, params):
        """Inverse of :meth:`constrain` (dict with ``alpha0``, ``alpha[i]``, ``beta[j]``)."""
        names = self.constrained_names
        cols = np.broadcast_arrays(*[np.asarray(params[n], dtype=np.float64) for n in names])
        phi = np.stack(cols[1:], axis=-1)
        s = 1.0 - phi.sum(axis=-1, keepdims=True)
        if np.any(phi <= 0) or np.any(s <= 0):
            raise ValueError("need alpha_i > 0, beta_j > 0 and sum(alpha) + sum(beta) < 1")
        return np.concatenate([np.log(cols[0])[..., None], np.log(phi) - np.log(s)], axis=-1)

    def __reduce__(self):
        return (Garch, (self.y, self.m, self.r, self.h0, self.log_alpha0_mean, self.log_alpha0_sd))


# ---- Gaussian-process regression hyper-parameters --------------------------------

cdef class GPRegression(Potential):
    """Compiled GP-regression hyper-parameter posterior of the NNgHMC paper
    (section 4.4): Matern 3/2 kernel on inputs of any dimension, log-normal
    priors, in C.

    Not posteriordb's ``gp_pois_regr-gp_regr``
    (:class:`fastsurrogate.models.posteriordb.GPRegr`, NumPy: squared-
    exponential kernel on 11 one-dimensional points with Stan's gamma and
    half-normal priors), which is a different model.

    Kernel and likelihood::

        y ~ N(0, K),  K_ij = sf2 (1 + sqrt(3) r_ij / l) exp(-sqrt(3) r_ij / l) + sn2 [i == j]

    with r_ij = ||x_i - x_j||.  Unconstrained parameters: ``q = (log l, log sn2)``
    with the signal variance sf2 fixed at ``signal_variance`` (default 1, as for
    standardised targets), or ``q = (log l, log sn2, log sf2)`` when
    ``signal_variance=None``.  Priors: q_p ~ N(prior_mean_p, prior_sd_p^2),
    i.e. log-normal priors on l, sn2 (and sf2); given on q, they already
    include the log-Jacobian of the log transform.  U is the negative log joint
    density of (y, q) with every constant (n/2 log 2 pi, the normal constants).

    Cost: the value alone is one Cholesky factorisation and one triangular
    solve (n^3/3 flops); value and gradient add K^{-1} (LAPACK dpotri, 2n^3/3
    flops) and O(n^2) traces:  dU/dq_p = 0.5 tr((K^{-1} - a a^T) dK/dq_p) +
    prior term, a = K^{-1} y.  A K that is not numerically positive definite
    gives U = inf.  Evaluations may run in several threads at once; each takes
    about 1.5 n^2 doubles of scratch.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Inputs.
    y : array_like, shape (n,)
        Targets (a zero-mean GP: centre them first).
    signal_variance : float or None
        Fixed sf2, or None to sample log sf2 as a third parameter.
    prior_mean, prior_sd : float or array_like (dim,)
        Normal priors of the unconstrained parameters (default N(0, 3^2)).

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> X, y = fs.datasets.simulate_gp_regression(n=100, dim=4, seed=0)
    >>> model = fs.models.GPRegression(X, y)
    >>> U, g = model.value_and_grad(np.log([1.0, 0.1]))
    """

    cdef fs_gpreg st
    cdef bint _ready
    cdef readonly cnp.ndarray X
    cdef readonly cnp.ndarray y
    cdef readonly object signal_variance
    cdef readonly cnp.ndarray prior_mean
    cdef readonly cnp.ndarray prior_sd

    def __cinit__(self, *args, **kwargs):
        self._ready = False

    def __dealloc__(self):
        if self._ready:
            fs_gpreg_free(&self.st)
            self._ready = False

    def __init__(self, X, y, signal_variance=1.0, prior_mean=0.0, prior_sd=3.0):
        if self._ready:
            raise TypeError("GPRegression is already initialised")
        Xa = real_array("X", X, copy=False)
        if Xa.ndim != 2:
            raise ValueError(f"X must be 2-D (n, d), got shape {Xa.shape}")
        n, d = Xa.shape
        if n < 1 or d < 1:
            raise ValueError(f"X must have at least one row and one column, got shape {Xa.shape}")
        if n > 46340 or d > 2147483647:
            raise ValueError(f"X has too many rows for a dense GP (n = {n})")
        ya = real_array("y", y, shape=(n,), copy=False)
        cdef int sample_sf2 = 1 if signal_variance is None else 0
        cdef double sf2 = 1.0
        if not sample_sf2:
            sf2 = _real_scalar(signal_variance, "signal_variance", positive=True)
        dim = 3 if sample_sf2 else 2
        pm = _per_param(prior_mean, dim, "prior_mean", positive=False)
        ps = _per_param(prior_sd, dim, "prior_sd", positive=True)
        Xa = np.array(Xa, dtype=np.float64, order="C", copy=True)
        ya = np.array(ya, dtype=np.float64, copy=True)
        for a in (Xa, ya, pm, ps):
            a.flags.writeable = False
        cdef cnp.ndarray Xc = Xa, yc = ya, pmc = pm, psc = ps
        cdef int status = fs_gpreg_init(&self.st, blas_table(),
                                        <const double *>cnp.PyArray_DATA(Xc),
                                        <const double *>cnp.PyArray_DATA(yc),
                                        <int>n, <int>d, sample_sf2, sf2,
                                        <const double *>cnp.PyArray_DATA(pmc),
                                        <const double *>cnp.PyArray_DATA(psc))
        if status != FS_OK:
            raise_for_status(status, "GPRegression: fs_gpreg_init")
        self._ready = True
        self.X = Xa
        self.y = ya
        self.signal_variance = None if sample_sf2 else sf2
        self.prior_mean = pm
        self.prior_sd = ps
        self.pot.dim = dim
        self.pot.state = &self.st
        self.pot.eval = fs_gpreg_eval
        self.thread_safe = True

    @property
    def n_obs(self):
        """Number of data points n."""
        return int(self.X.shape[0])

    @property
    def param_names(self):
        """``log_lengthscale``, ``log_noise_variance`` (and ``log_signal_variance``)."""
        names = ["log_lengthscale", "log_noise_variance"]
        if self.pot.dim == 3:
            names.append("log_signal_variance")
        return names

    def constrain(self, q):
        """``(..., dim)`` draws -> dict ``lengthscale``, ``noise_variance``,
        ``signal_variance`` (the fixed value, broadcast, when not sampled)."""
        q = _q_batch(q, self.pot.dim)
        e = np.exp(q)
        out = {"lengthscale": e[..., 0], "noise_variance": e[..., 1]}
        if self.pot.dim == 3:
            out["signal_variance"] = e[..., 2]
        else:
            out["signal_variance"] = np.full(q.shape[:q.ndim - 1], self.signal_variance)
        return out

    def unconstrain(self, params):
        """Inverse of :meth:`constrain`."""
        names = ["lengthscale", "noise_variance"]
        if self.pot.dim == 3:
            names.append("signal_variance")
        cols = [np.log(np.asarray(params[k], dtype=np.float64)) for k in names]
        return np.stack(np.broadcast_arrays(*cols), axis=-1)

    def __reduce__(self):
        return (GPRegression, (self.X, self.y, self.signal_variance, self.prior_mean, self.prior_sd))
