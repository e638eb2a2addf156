"""Generalised linear models as Potentials, evaluated by a fused C kernel.

U(beta) = -log likelihood(beta) - log prior(beta) for regression on a data
matrix X (n_obs, dim) and responses y (n_obs,), with linear predictor
t = X @ beta and an independent Gaussian prior beta_j ~ N(prior_mean_j,
prior_sd_j^2).  The C kernel (csrc/fs_glm.c) reads X once per evaluation
(each row's dot product, then its contribution to the gradient while the
row is in L1), with OpenMP threads, and gives bit-for-bit the same result for
every thread count.
"""

import numbers

import numpy as np
cimport numpy as cnp

from fastsurrogate.core._common cimport FS_OK
from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.core._checks import real_array
from fastsurrogate.models._glm_dask import is_dask_collection

cnp.import_array()

__all__ = ["GeneralizedLinearModel", "LogisticRegression", "ProbitRegression",
           "PoissonRegression", "LinearRegression"]


# ---- validation (all of it happens before any C runs) ----------------------

cdef int _check_n_threads(n_threads) except -1:
    if isinstance(n_threads, (bool, np.bool_)) or not isinstance(n_threads, numbers.Integral):
        raise TypeError(f"n_threads must be a positive int, got {n_threads!r}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if n_threads > 1024:
        raise ValueError(f"n_threads must be <= 1024, got {n_threads}")
    return 0


cdef object _per_coefficient(value, Py_ssize_t d, str name):
    """A scalar or a length-d array, as a contiguous float64 array of length d."""
    arr = real_array(name, value, copy=False, allow_nonfinite=True)
    if arr.ndim == 0:
        return np.full(d, float(arr), dtype=np.float64)
    if arr.ndim != 1 or arr.shape[0] != d:
        raise ValueError(f"{name} must be a scalar or have shape ({d},), got shape {arr.shape}")
    return arr


cdef tuple _validate(X, y, prior_sd, prior_mean, str labels):
    Xa = real_array("X", X, copy=False)
    if Xa.ndim != 2:
        raise ValueError(f"X must be 2-D (n_obs, dim), got {Xa.ndim}-D with shape {Xa.shape}")
    cdef Py_ssize_t n = Xa.shape[0], d = Xa.shape[1]
    if n < 1 or d < 1:
        raise ValueError(f"X must have at least one row and one column, got shape {Xa.shape}")
    if d > 2147483647:
        raise ValueError(f"X has {d} columns; at most 2**31 - 1 are supported")

    ya = real_array("y", y, copy=False)
    if ya.ndim != 1:
        raise ValueError(f"y must be 1-D (n_obs,), got shape {ya.shape}")
    if ya.shape[0] != n:
        raise ValueError(f"y has {ya.shape[0]} entries but X has {n} rows")
    if labels == "binary":
        ok = (ya == 0.0) | (ya == 1.0)
        if not ok.all():
            i = int(np.argmax(~ok))
            raise ValueError(f"y must contain only the labels 0 and 1; y[{i}] = {ya[i]}")
    elif labels == "counts":
        ok = (ya >= 0.0) & (ya == np.floor(ya))
        if not ok.all():
            i = int(np.argmax(~ok))
            raise ValueError(f"y must contain non-negative integer counts; y[{i}] = {ya[i]}")

    if prior_sd is None:
        sd = None
    else:
        sd = _per_coefficient(prior_sd, d, "prior_sd")
        with np.errstate(over="ignore", divide="ignore"):
            ok = (sd > 0.0) & np.isfinite(sd) & np.isfinite(1.0 / (sd * sd))
        if not ok.all():
            j = int(np.argmax(~ok))
            raise ValueError(f"prior_sd must be positive and finite (and not so small that "
                             f"1/prior_sd**2 overflows); prior_sd[{j}] = {sd[j]}")
    mean = _per_coefficient(prior_mean, d, "prior_mean")
    if not np.isfinite(mean).all():
        j = int(np.argmax(~np.isfinite(mean)))
        raise ValueError(f"prior_mean must be finite; prior_mean[{j}] = {mean[j]}")
    return Xa, ya, sd, mean


cdef object _column_names(X, Py_ssize_t d):
    """A DataFrame's column names as strings when there are d of them and
    they are unique; None otherwise (then ``beta[j]``)."""
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    try:
        names = [str(c) for c in cols]
    except TypeError:
        return None
    if len(names) != d or len(set(names)) != d:
        return None
    return names


cdef bint _is_dask_array(x):
    """A Dask collection (array, or a DataFrame / Series, which
    DistributedGLM refuses with what to pass instead), recognised without
    importing dask."""
    return is_dask_collection(x)


cdef double _check_sigma(sigma) except -1.0:
    if isinstance(sigma, (bool, np.bool_)) or not isinstance(sigma, numbers.Real):
        raise TypeError(f"sigma must be a positive real number, got {sigma!r}")
    s = float(sigma)
    with np.errstate(over="ignore", divide="ignore"):
        ok = s > 0.0 and np.isfinite(s) and np.isfinite(1.0 / (s * s))
    if not ok:
        raise ValueError(f"sigma must be positive and finite (and 1/sigma**2 finite), got {sigma!r}")
    return s


# ---- the models ----------------------------------------------------------

cdef class GeneralizedLinearModel(Potential):
    """Base class of the GLM potentials (not instantiated directly).

    Attributes shared by the families: :attr:`X` (n_obs, dim), :attr:`y`
    (n_obs,), :attr:`prior_sd` (dim,) or None, :attr:`prior_mean` (dim,),
    :attr:`n_obs`, :attr:`n_threads` (settable), and
    :meth:`fisher_information`.  Evaluations may run in several threads at
    once (``thread_safe`` is True).
    """

    _family_name = None

    def __cinit__(self, *args, **kwargs):
        self._ready = False

    def __dealloc__(self):
        if self._ready:
            fs_glm_free(&self.model)
            self._ready = False

    cdef _setup(self, int family, X, y, prior_sd, prior_mean, double sigma,
                n_threads, str labels):
        if self._ready or self._distributed is not None:
            raise TypeError(f"{type(self).__name__} is already initialised")
        _check_n_threads(n_threads)
        if _is_dask_array(X) or _is_dask_array(y):
            self._setup_distributed(X, y, prior_sd, prior_mean, sigma, n_threads)
            return
        Xa, ya, sd, mean = _validate(X, y, prior_sd, prior_mean, labels)
        cdef cnp.ndarray Xc = Xa, yc = ya, mc = mean
        cdef const double *sdp = NULL
        cdef cnp.ndarray sdc
        if sd is not None:
            sdc = sd
            sdp = <const double *>cnp.PyArray_DATA(sdc)
        cdef size_t n = <size_t>Xc.shape[0], d = <size_t>Xc.shape[1]
        cdef int status = fs_glm_init(&self.model, family, n, d,
                                      <const double *>cnp.PyArray_DATA(Xc),
                                      <const double *>cnp.PyArray_DATA(yc),
                                      <const double *>cnp.PyArray_DATA(mc),
                                      sdp, sigma, <int>n_threads)
        if status != FS_OK:
            raise_for_status(status, f"{type(self).__name__}: fs_glm_init")
        self._ready = True
        self._names = _column_names(X, Xc.shape[1])
        self._X = Xc
        self._y = yc
        self._prior_sd = sd
        self._prior_mean = mc
        # the C model keeps pointers into these buffers
        self._keep = (Xc, yc, mc, sd)
        self.pot.state = <void *>&self.model
        self.pot.eval = fs_glm_potential_eval
        self.pot.dim = <int>d
        self.thread_safe = True

    cdef int _require_ready(self) except -1:
        if not self._ready:
            if self._distributed is not None:
                raise TypeError(f"{type(self).__name__} on Dask arrays evaluates U and its "
                                f"gradient on the cluster only; this needs X in memory")
            raise TypeError(f"{type(self).__name__} is not initialised")
        return 0

    def _setup_distributed(self, X, y, prior_sd, prior_mean, double sigma, n_threads):
        """X, y Dask arrays: per-chunk models on the workers, one reduction per call
        (fastsurrogate/models/_glm_dask.py); this Potential calls it through the
        Python-callback trampoline."""
        from ._glm_dask import DistributedGLM
        d = X.shape[1] if getattr(X, "ndim", 0) == 2 else None
        if d is None or not np.isfinite(d):
            raise ValueError(f"X must be 2-D (n_obs, dim) with a known dim, got shape "
                             f"{getattr(X, 'shape', None)}")
        # the prior, checked by the in-memory constructor on one dummy row
        tiny = type(self).__new__(type(self))
        (<GeneralizedLinearModel>tiny)._setup(self._family_code(), np.zeros((1, int(d))),
                                              np.zeros(1), prior_sd, prior_mean, sigma, 1,
                                              "real")
        dist = DistributedGLM(type(self), X, y, tiny.prior_sd, tiny.prior_mean,
                              sigma=sigma, n_threads=int(n_threads))
        cdef Potential cb = Potential.from_callable(dist.value_and_grad, dist.dim,
                                                    value=dist.value, thread_safe=True)
        self._distributed = dist
        self._X = X
        self._y = y
        self._prior_sd = tiny.prior_sd
        self._prior_mean = tiny.prior_mean
        self._keep = (cb,)           # a callback's exception is found through _keep
        self.pot = cb.pot
        self.thread_safe = True

    def _family_code(self):
        return {"logistic": FS_GLM_LOGISTIC, "probit": FS_GLM_PROBIT,
                "poisson": FS_GLM_POISSON, "gaussian": FS_GLM_GAUSSIAN}[self._family_name]

    @property
    def distributed(self):
        """The Dask side (a ``DistributedGLM``: ``client``, ``n_chunks``) when X
        and y are Dask arrays, else None."""
        return self._distributed

    # -- properties ------------------------------------------------------
    @property
    def X(self):
        """The data matrix (n_obs, dim), float64, read-only view (the Dask array
        itself for a model on Dask arrays)."""
        if self._distributed is not None:
            return self._X
        self._require_ready()
        v = self._X.view()
        v.flags.writeable = False
        return v

    @property
    def y(self):
        """The responses (n_obs,), float64, read-only view (or the Dask array)."""
        if self._distributed is not None:
            return self._y
        self._require_ready()
        v = self._y.view()
        v.flags.writeable = False
        return v

    @property
    def n_obs(self):
        """Number of observations (rows of X)."""
        if self._distributed is not None:
            return self._distributed.n_obs
        self._require_ready()
        return int(self.model.n)

    @property
    def prior_sd(self):
        """Prior standard deviations (dim,), or None for a flat prior."""
        if self._distributed is None:
            self._require_ready()
        return None if self._prior_sd is None else self._prior_sd.copy()

    @property
    def prior_mean(self):
        """Prior means (dim,)."""
        if self._distributed is None:
            self._require_ready()
        return self._prior_mean.copy()

    @property
    def family(self):
        """'logistic', 'probit', 'poisson' or 'gaussian'."""
        return self._family_name

    @property
    def n_threads(self):
        """OpenMP threads per evaluation (results do not depend on it).

        Set it only while no evaluation of this model is running.
        """
        if self._distributed is not None:
            return self._distributed.n_threads
        self._require_ready()
        return int(self.model.n_threads)

    @n_threads.setter
    def n_threads(self, value):
        if self._distributed is not None:
            raise TypeError(f"{type(self).__name__} on Dask arrays: its threads per chunk "
                            "evaluation are fixed when it is built (the n_threads argument)")
        self._require_ready()
        _check_n_threads(value)
        self.model.n_threads = <int>value

    @property
    def param_names(self):
        """The column names of ``X`` when it was a pandas DataFrame (with
        unique names), else ``beta[0]``, ..., ``beta[dim-1]``."""
        if self._names is not None:
            return list(self._names)
        return [f"beta[{j}]" for j in range(self.pot.dim)]

    def __setstate__(self, state):
        self._names = state.get("names")

    # -- Fisher information ---------------------------------------------------
    def fisher_information(self, beta):
        """Expected Fisher information of the likelihood plus the prior precision.

        ``X.T @ diag(w) @ X + diag(1 / prior_sd**2)`` at ``beta`` (shape
        ``(dim,)``), with the family's expected-information weights ``w``
        (logistic ``s(t)(1 - s(t))``, probit ``phi(t)^2 / (Phi(t)(1 - Phi(t)))``,
        Poisson ``exp(t)``, Gaussian ``1 / sigma**2``; ``t = X @ beta``).
        For the canonical links (logistic, Poisson, Gaussian) this is the
        Hessian of U.  Returns an ndarray ``(dim, dim)``, symmetric.  Costs
        O(n_obs dim^2); the GIL is released.
        """
        self._require_ready()
        cdef Py_ssize_t d = self.pot.dim
        ba = real_array("beta", beta, shape=(d,), copy=False, allow_nonfinite=True)
        cdef size_t fisher_doubles = 0
        cdef int status = fs_glm_workspace_size(self.model.n, self.model.d, NULL,
                                                &fisher_doubles)
        if status != FS_OK:
            raise_for_status(status, f"{type(self).__name__}.fisher_information")
        cdef cnp.ndarray bc = ba
        cdef cnp.ndarray F = np.empty((d, d), dtype=np.float64)
        cdef cnp.ndarray work = np.empty(max(<Py_ssize_t>fisher_doubles, 1), dtype=np.float64)
        cdef const double *bp = <const double *>cnp.PyArray_DATA(bc)
        cdef double *Fp = <double *>cnp.PyArray_DATA(F)
        cdef double *wp = <double *>cnp.PyArray_DATA(work)
        with nogil:
            status = fs_glm_fisher(&self.model, bp, Fp, wp)
        if status != FS_OK:
            raise_for_status(status, f"{type(self).__name__}.fisher_information")
        return F

    def __repr__(self):
        if self._distributed is not None:
            return (f"<{type(self).__name__} n_obs={self._distributed.n_obs} dim={self.pot.dim} "
                    f"on Dask ({self._distributed.n_chunks} row chunks)>")
        if not self._ready:
            return f"<{type(self).__name__} (not initialised)>"
        return (f"<{type(self).__name__} n_obs={self.model.n} dim={self.pot.dim} "
                f"n_threads={self.model.n_threads}>")


cdef class LogisticRegression(GeneralizedLinearModel):
    """Bayesian logistic regression: y_i ~ Bernoulli(sigmoid(x_i . beta)).

    U(beta) = sum_i [log(1 + exp(t_i)) - y_i t_i]
              + 0.5 sum_j (beta_j - prior_mean_j)^2 / prior_sd_j^2,  t = X @ beta.

    Parameters
    ----------
    X : array_like (n_obs, dim)
        Design matrix (include a column of ones for an intercept).  Converted
        once to C-contiguous float64; not copied when it already is, in which
        case the model reads that array (do not modify it afterwards).  A
        pandas DataFrame's column names become the parameter names
        (``param_names``, the result's summary and ArviZ variables).
    y : array_like (n_obs,)
        Labels, 0 or 1.
    prior_sd : float or array_like (dim,), default 10.0
        Prior standard deviations (> 0); None for a flat (improper) prior.
    prior_mean : float or array_like (dim,), default 0.0
    n_threads : int, default 1
        OpenMP threads per evaluation (settable later); results are identical
        for any value.  2 pays on an idle multi-core machine; with the passive
        OpenMP wait policy that ``import fastsurrogate`` sets (unless you set
        OMP_WAIT_POLICY), 2 threads were no slower than 1 on a busy 2-core
        machine (bench/busy_threads.py).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.models import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((1000, 5))
    >>> y = (rng.random(1000) < 1 / (1 + np.exp(-X @ np.ones(5)))).astype(float)
    >>> model = LogisticRegression(X, y, prior_sd=10.0)
    >>> U, g = model.value_and_grad(np.zeros(5))
    >>> print(f"{U:.4f}", g.shape)          # U(0) = n_obs log 2
    693.1472 (5,)
    """

    _family_name = "logistic"

    def __init__(self, X, y, prior_sd=10.0, prior_mean=0.0, n_threads=1):
        self._setup(FS_GLM_LOGISTIC, X, y, prior_sd, prior_mean, 1.0, n_threads, "binary")

    def __reduce__(self):
        return (type(self), (self._X, self._y, self._prior_sd, self._prior_mean,
                             self.n_threads), {"names": self._names})


cdef class ProbitRegression(GeneralizedLinearModel):
    """Bayesian probit regression: y_i ~ Bernoulli(Phi(x_i . beta)).

    U(beta) = -sum_i log Phi(s_i t_i) + Gaussian prior term, s_i = 2 y_i - 1,
    with a log normal CDF that stays accurate far in the tail (no underflow
    for t down to about -1e154) and the gradient through the inverse Mills
    ratio.

    Parameters are those of :class:`LogisticRegression` (labels 0 or 1).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.models import ProbitRegression
    >>> X = np.array([[1.0, -2.0], [1.0, 0.5], [1.0, 3.0]])
    >>> model = ProbitRegression(X, np.array([0.0, 1.0, 1.0]), prior_sd=5.0)
    >>> model.grad(np.zeros(2)).shape
    (2,)
    """

    _family_name = "probit"

    def __init__(self, X, y, prior_sd=10.0, prior_mean=0.0, n_threads=1):
        self._setup(FS_GLM_PROBIT, X, y, prior_sd, prior_mean, 1.0, n_threads, "binary")

    def __reduce__(self):
        return (type(self), (self._X, self._y, self._prior_sd, self._prior_mean,
                             self.n_threads), {"names": self._names})


cdef class PoissonRegression(GeneralizedLinearModel):
    """Bayesian Poisson regression with log link: y_i ~ Poisson(exp(x_i . beta)).

    U(beta) = sum_i [exp(t_i) - y_i t_i] + Gaussian prior term (the constant
    sum_i log y_i! is dropped).  exp(t) overflows to inf for t > ~709.8; U
    is then inf (a divergence for the samplers), not an error.

    Parameters are those of :class:`LogisticRegression`, with ``y`` the
    counts (non-negative integers, any numeric dtype).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.models import PoissonRegression
    >>> X = np.ones((4, 1))
    >>> model = PoissonRegression(X, np.array([0, 2, 1, 3]), prior_sd=None)
    >>> float(model.grad(np.zeros(1))[0])   # sum(exp(0) - y) = 4 - 6
    -2.0
    """

    _family_name = "poisson"

    def __init__(self, X, y, prior_sd=10.0, prior_mean=0.0, n_threads=1):
        self._setup(FS_GLM_POISSON, X, y, prior_sd, prior_mean, 1.0, n_threads, "counts")

    def __reduce__(self):
        return (type(self), (self._X, self._y, self._prior_sd, self._prior_mean,
                             self.n_threads), {"names": self._names})


cdef class LinearRegression(GeneralizedLinearModel):
    """Bayesian linear regression with known noise sd: y_i ~ N(x_i . beta, sigma^2).

    U(beta) = sum_i (t_i - y_i)^2 / (2 sigma^2) + Gaussian prior term (the
    normalising constant is dropped).

    Parameters
    ----------
    X, y : array_like (n_obs, dim), (n_obs,)
        Design matrix and real responses.
    sigma : float, default 1.0
        Noise standard deviation (> 0).
    prior_sd, prior_mean, n_threads
        As for :class:`LogisticRegression`.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.models import LinearRegression
    >>> X = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])
    >>> model = LinearRegression(X, np.array([1.0, 3.0, 5.0]), sigma=0.5, prior_sd=None)
    >>> model.value(np.array([1.0, 2.0]))   # exact fit
    0.0
    """

    _family_name = "gaussian"

    def __init__(self, X, y, sigma=1.0, prior_sd=10.0, prior_mean=0.0, n_threads=1):
        cdef double s = _check_sigma(sigma)
        self._setup(FS_GLM_GAUSSIAN, X, y, prior_sd, prior_mean, s, n_threads, "real")

    @property
    def sigma(self):
        """Noise standard deviation."""
        if self._distributed is not None:
            return self._distributed.sigma
        self._require_ready()
        return float(self.model.sigma)

    def __reduce__(self):
        return (type(self), (self._X, self._y, self.sigma, self._prior_sd,
                             self._prior_mean, self.n_threads), {"names": self._names})


# ---- benchmark and test hooks ----------------------------------------------

def _read_floor(X, n_threads=1, repeat=1):
    """Sum of every element of X, read once with ``n_threads`` threads.

    The memory-bandwidth floor of the GLM kernel (same block structure and
    threading, no arithmetic beyond the sum).  X is used in place when it is
    a C-contiguous float64 array, converted otherwise.  ``repeat`` > 1 reads
    X that many times in one C loop (to time a read without the cost of the
    Python call) and returns the last sum.  Releases the GIL.
    """
    _check_n_threads(n_threads)
    if not isinstance(repeat, numbers.Integral) or isinstance(repeat, bool) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    cdef cnp.ndarray Xc = real_array("X", X, copy=False, allow_nonfinite=True)
    cdef size_t n = <size_t>Xc.size
    cdef const double *p = <const double *>cnp.PyArray_DATA(Xc)
    cdef int nt = <int>n_threads
    cdef long r, nrep = <long>repeat
    cdef double out = 0.0
    cdef int status = FS_OK
    with nogil:
        for r in range(nrep):
            status = fs_read_floor(p, n, nt, &out)
            if status != FS_OK:
                break
    if status != FS_OK:
        raise_for_status(status, "_read_floor")
    return out


def _log_ndtr(z):
    """log Phi(z) elementwise, by the kernel's own routine (test hook)."""
    za = real_array("z", z, copy=False, allow_nonfinite=True)
    out = np.empty_like(za)
    cdef double[::1] zf = za.reshape(-1)
    cdef double[::1] of = out.reshape(-1)
    cdef Py_ssize_t i
    with nogil:
        for i in range(zf.shape[0]):
            fs_log_ndtr(zf[i], &of[i])
    return out


def _inv_mills(z):
    """phi(z) / Phi(z) elementwise, by the kernel's own routine (test hook)."""
    za = real_array("z", z, copy=False, allow_nonfinite=True)
    out = np.empty_like(za)
    cdef double[::1] zf = za.reshape(-1)
    cdef double[::1] of = out.reshape(-1)
    cdef Py_ssize_t i
    with nogil:
        for i in range(zf.shape[0]):
            fs_inv_mills(zf[i], &of[i])
    return out
