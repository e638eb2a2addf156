"""The papers' remaining compiled models: ICA with logistic sources (VHMC
paper, section 4.4), the NNgHMC paper's twisted banana with parameters A, B,
C, and logistic regression with a Laplace prior (NNgHMC paper, Table 3).
C kernels in csrc/fs_papers.c."""

import math
import numbers

import numpy as np
cimport numpy as cnp

from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.core._common cimport fs_potential, fs_pool, FS_OK

cnp.import_array()

cdef extern from "fs_papers.h" nogil:
    ctypedef struct fs_ica:
        int n, d, n_threads
    int fs_ica_init(fs_ica *m, const double *X, int n, int d, double prior_var,
                    int n_threads)
    void fs_ica_free(fs_ica *m)
    int fs_ica_eval(void *state, const double *q, double *value, double *grad)

    ctypedef struct fs_twisted_banana:
        double A, B, C
    int fs_twisted_banana_eval(void *state, const double *q, double *value, double *grad)

    ctypedef struct fs_laplace_prior:
        fs_potential inner
        const double *scale
        const double *loc
        double log_norm
    int fs_laplace_prior_eval(void *state, const double *q, double *value, double *grad)


def _real_scalar(obj, name, positive=False):
    if isinstance(obj, (bool, np.bool_)) or not isinstance(obj, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {obj!r}")
    x = float(obj)
    if not math.isfinite(x) or (positive and not x > 0.0):
        raise ValueError(f"{name} must be {'positive and ' if positive else ''}finite, got {obj!r}")
    return x


def _n_threads(obj):
    if isinstance(obj, (bool, np.bool_)) or not isinstance(obj, numbers.Integral):
        raise TypeError(f"n_threads must be an int, got {obj!r}")
    if obj < 1 or obj > 1024:
        raise ValueError(f"n_threads must be in [1, 1024], got {obj}")
    return int(obj)


def _per_param(value, d, name, positive):
    if np.iscomplexobj(value):
        raise TypeError(f"{name} must be real numbers")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be real numbers ({e})") from None
    if arr.ndim == 0:
        arr = np.full(d, float(arr))
    if arr.shape != (d,):
        raise ValueError(f"{name} must be a scalar or have shape ({d},), got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = ~np.isfinite(arr) | ((arr <= 0.0) if positive else False)
    if bad.any():
        j = int(np.argmax(bad))
        raise ValueError(f"{name} must be {'positive and ' if positive else ''}finite; "
                         f"{name}[{j}] = {arr[j]}")
    return arr


# ---- ICA -------------------------------------------------------------------------

cdef class ICA(Potential):
    """Bayesian ICA with logistic sources (VHMC paper, section 4.4, Figure 5).

    Observations x_n = A s_n (n = 1..N, d channels) with independent sources
    of density p(s) = 1 / (4 cosh^2(s / 2)) (the logistic density; the paper
    writes it through log p(s) = -2 log(2 cosh(s / 2))), and the unmixing
    matrix W ~ N(0, prior_var) entrywise (the paper: prior_var = 100)::

        U(W) = -N log|det W| - sum_n sum_i log p((W x_n)_i) + |W|_F^2 / (2 prior_var)

    (the prior's normalising constant is left out).  ``q`` is W flattened in
    row-major order (dim = d * d).  Value and gradient are one pass over X in
    C, ``n_threads`` OpenMP threads over fixed blocks of 1024 rows whose
    partial sums are added in block order, so the result does not depend on
    the thread count.  A singular W gives U = inf (a divergence).

    Parameters
    ----------
    X : array_like, shape (N, d)
        Observations (rows), finite.
    prior_var : float
        Prior variance of each entry of W.
    n_threads : int

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> X, A, W0 = fs.datasets.simulate_ica(n=2000, d=3, seed=1)
    >>> model = fs.models.ICA(X)
    >>> U, g = model.value_and_grad(W0.ravel())
    >>> g.shape
    (9,)
    """

    cdef fs_ica st
    cdef bint _ready
    cdef readonly cnp.ndarray X
    cdef readonly double prior_var

    def __cinit__(self, *args, **kwargs):
        self._ready = False

    def __dealloc__(self):
        if self._ready:
            fs_ica_free(&self.st)

    def __init__(self, X, prior_var=100.0, n_threads=1):
        if self._ready:
            raise TypeError("ICA is already initialised")
        if np.iscomplexobj(X):
            raise TypeError("X must be real numbers")
        try:
            Xa = np.array(X, dtype=np.float64, order="C", copy=True)
        except (TypeError, ValueError) as e:
            raise TypeError(f"X must be an array of real numbers ({e})") from None
        if Xa.ndim != 2:
            raise ValueError(f"X must be 2-D (N, d), got shape {Xa.shape}")
        if Xa.shape[0] < 1 or Xa.shape[1] < 1:
            raise ValueError(f"X must have at least one row and one column, got {Xa.shape}")
        if Xa.shape[1] > 512 or Xa.shape[0] > 2147483647:
            raise ValueError(f"X is too large for ICA (d <= 512), got {Xa.shape}")
        if not np.all(np.isfinite(Xa)):
            raise ValueError("X contains NaN or inf")
        pv = _real_scalar(prior_var, "prior_var", positive=True)
        nt = _n_threads(n_threads)
        Xa.flags.writeable = False
        self.X = Xa
        self.prior_var = pv
        status = fs_ica_init(&self.st, <const double *>cnp.PyArray_DATA(Xa),
                             <int>Xa.shape[0], <int>Xa.shape[1], pv, nt)
        if status != FS_OK:
            raise_for_status(status, "ICA")
        self._ready = True
        self.pot.dim = <int>(Xa.shape[1] * Xa.shape[1])
        self.pot.state = &self.st
        self.pot.eval = fs_ica_eval
        self.thread_safe = True

    @property
    def n_channels(self):
        """d, the number of channels (and sources)."""
        return self.st.d

    @property
    def n_threads(self):
        return self.st.n_threads

    @property
    def param_names(self):
        d = self.st.d
        return [f"W[{i},{j}]" for i in range(d) for j in range(d)]

    def constrain(self, q):
        """``(..., d*d)`` draws -> ``{"W": (..., d, d)}``."""
        q = np.asarray(q, dtype=np.float64)
        d = self.st.d
        if q.ndim < 1 or q.shape[q.ndim - 1] != d * d:
            raise ValueError(f"q must have shape (..., {d * d}), got {q.shape}")
        return {"W": q.reshape(q.shape[:-1] + (d, d))}

    def __reduce__(self):
        return (ICA, (self.X, self.prior_var, self.st.n_threads))


# ---- the NNgHMC banana -------------------------------------------------------------

cdef class TwistedBanana(Potential):
    """The banana of the NNgHMC paper's synthetic examples (eq. 23), with
    parameters A, B, C: a twisted Gaussian (Haario, Saksman and Tamminen)::

        q0 ~ N(0, A),   q1 | q0 ~ N(C - B q0^2, 1)
        U(q) = q0^2 / (2 A) + (q1 + B q0^2 - C)^2 / 2

    Its moments are exact: E q0 = 0, Var q0 = A, E q1 = C - A B,
    Var q1 = 1 + 2 A^2 B^2, Cov(q0, q1) = 0 (:meth:`moments`), and
    :meth:`sample` draws from it exactly.  Not the data-based banana of the
    RNS-HMC paper (:class:`fastsurrogate.models.Banana`).

    Parameters
    ----------
    A : float
        Variance of q0 (> 0).
    B : float
        Curvature of the banana.
    C : float
        Offset of q1.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> b = fs.models.TwistedBanana(A=100.0, B=0.03, C=3.0)
    >>> b.value(np.zeros(2))
    4.5
    """

    cdef fs_twisted_banana st

    def __init__(self, A=100.0, B=0.03, C=3.0):
        self.st.A = _real_scalar(A, "A", positive=True)
        self.st.B = _real_scalar(B, "B")
        self.st.C = _real_scalar(C, "C")
        self.pot.dim = 2
        self.pot.state = &self.st
        self.pot.eval = fs_twisted_banana_eval
        self.thread_safe = True

    @property
    def A(self):
        return self.st.A

    @property
    def B(self):
        return self.st.B

    @property
    def C(self):
        return self.st.C

    def moments(self):
        """Exact ``(mean (2,), covariance (2, 2))``."""
        A, B, C = self.st.A, self.st.B, self.st.C
        return (np.array([0.0, C - A * B]),
                np.array([[A, 0.0], [0.0, 1.0 + 2.0 * A * A * B * B]]))

    def sample(self, n, seed=None):
        """``n`` exact draws, shape ``(n, 2)``."""
        rng = np.random.default_rng(seed)
        q0 = math.sqrt(self.st.A) * rng.standard_normal(int(n))
        q1 = self.st.C - self.st.B * q0 * q0 + rng.standard_normal(int(n))
        return np.stack([q0, q1], axis=1)

    def __reduce__(self):
        return (TwistedBanana, (self.st.A, self.st.B, self.st.C))


# ---- logistic regression with a Laplace prior --------------------------------------------

cdef class LaplaceLogisticRegression(Potential):
    """Logistic regression with independent Laplace priors (NNgHMC paper, Table 3)::

        U(beta) = sum_i [log(1 + exp(t_i)) - y_i t_i] + sum_j |beta_j - loc_j| / scale_j
                  + sum_j log(2 scale_j),    t = X @ beta

    The likelihood is the fused C kernel of
    :class:`fastsurrogate.models.LogisticRegression` (with a flat prior); the
    prior term is added in C.  ``|x|`` is not differentiable at 0: the gradient
    uses sign(beta_j - loc_j) / scale_j with sign(0) = 0 (a subgradient), so
    HMC's leapfrog is exact almost everywhere and the Metropolis test keeps
    the chain exact.

    Parameters
    ----------
    X : array_like, shape (n_obs, dim)
    y : array_like, shape (n_obs,), values 0/1
    scale : float or array_like (dim,)
        Laplace scales b_j > 0 (the NNgHMC paper: 1).
    loc : float or array_like (dim,)
        Laplace locations (default 0).
    n_threads : int

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> X = np.array([[1.0, 0.5], [1.0, -1.0], [1.0, 2.0]])
    >>> model = fs.models.LaplaceLogisticRegression(X, np.array([0.0, 1.0, 1.0]), scale=1.0)
    >>> U, g = model.value_and_grad(np.array([0.1, -0.2]))
    """

    cdef fs_laplace_prior st
    cdef readonly Potential likelihood
    cdef readonly cnp.ndarray scale
    cdef readonly cnp.ndarray loc

    def __init__(self, X, y, scale=1.0, loc=0.0, n_threads=1):
        from fastsurrogate.models._glm import LogisticRegression
        lik = LogisticRegression(X, y, prior_sd=None, n_threads=n_threads)
        d = lik.dim
        sc = _per_param(scale, d, "scale", True)
        lo = _per_param(loc, d, "loc", False)
        sc.flags.writeable = False
        lo.flags.writeable = False
        self.likelihood = lik
        self.scale = sc
        self.loc = lo
        self.st.inner = (<Potential>lik).pot
        self.st.scale = <const double *>cnp.PyArray_DATA(sc)
        self.st.loc = <const double *>cnp.PyArray_DATA(lo)
        self.st.log_norm = float(np.sum(np.log(2.0 * sc)))
        self._keep = lik
        self.pot.dim = d
        self.pot.state = &self.st
        self.pot.eval = fs_laplace_prior_eval
        self.thread_safe = lik.thread_safe

    @property
    def X(self):
        return self.likelihood.X

    @property
    def y(self):
        return self.likelihood.y

    @property
    def param_names(self):
        return [f"beta[{j}]" for j in range(self.pot.dim)]

    def __reduce__(self):
        return (LaplaceLogisticRegression,
                (self.likelihood.X, self.likelihood.y, self.scale, self.loc,
                 self.likelihood.n_threads))
