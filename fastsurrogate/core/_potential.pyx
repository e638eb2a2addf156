"""The Potential type (the Python face of the fs_potential contract), its
compositions WeightedSum, ClampedSum, TrustedDrive and RecordingPotential
(csrc/fs_compose.c), and the
exceptions FS_* status codes become (PotentialError, TrainingError)."""

from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer, PyCapsule_IsValid
from libc.string cimport memcpy
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY, NAN

import numpy as np

from fastsurrogate.core._checks import repeated
cimport numpy as cnp

from fastsurrogate.core._common cimport (fs_potential, fs_strerror,
                                        FS_OK, FS_ECALLBACK, FS_ENOMEM)

cnp.import_array()

CAPSULE_NAME = "fastsurrogate.potential_v1"
# fs_potential.dim is a C int; dimensions beyond this are refused before any
# allocation (a (dim,) float64 vector would already be 16 GB at 2**31).
MAX_DIM = 2**31 - 1
cdef const char *_CAPSULE_NAME = "fastsurrogate.potential_v1"
# fs_potential.dim is a C int; dimensions beyond this are refused before any
# allocation (a (dim,) float64 vector would already be 16 GB at 2**31).
MAX_DIM = 2**31 - 1


class PotentialError(RuntimeError):
    """A potential's C code reported a failure (its status code is `.status`)."""

    def __init__(self, msg, status=None):
        super().__init__(msg)
        self.status = status


class TrainingError(PotentialError):
    """A surrogate's trainer or solver failed (its status code is `.status`).

    Raised by the online trainers (GrevilleTrainer, SMWTrainer) when their
    set-up, an update, a batch solve or a resync fails (a non-finite value,
    a factor that lost positive definiteness, ...), not by a potential's
    evaluation.  A subclass of
    PotentialError for compatibility: code that catches PotentialError
    around trainer updates keeps working; catch TrainingError to tell a
    trainer's failure from a potential's.
    """


def raise_for_status(int status, where="", error=PotentialError):
    """Turn an FS_* status code into the matching Python exception: MemoryError
    for FS_ENOMEM, `error` (PotentialError, or TrainingError for a trainer)
    for any other failure."""
    if status == FS_OK:
        return
    msg = fs_strerror(status).decode()
    if where:
        msg = f"{where}: {msg}"
    if status == FS_ENOMEM:
        raise MemoryError(msg)
    raise error(msg, status)


def _check_bridgestan_flags(propto, jacobian):
    if not propto:
        raise ValueError(
            "propto=False asks for the normalising constants, which a Potential "
            "does not compute (U is defined up to a constant); use propto=True")
    if not jacobian:
        raise ValueError(
            "jacobian=False asks for the density without the log-Jacobian of the "
            "unconstraining transforms, which a Potential always includes; use "
            "jacobian=True")


cdef class Potential:
    """U(q) = -log density(q) + const on R^dim, evaluated by compiled code.

    Every model, every trained surrogate and every user callable in
    fastsurrogate is a Potential.  Samplers only see its C function
    pointer, so any Potential can drive or judge any sampler.

    Methods take ``q`` as a 1-D float array of shape ``(dim,)``.

    Notes
    -----
    Interoperability:

    * bayes-kit / BridgeStan protocol: :meth:`dims`, :meth:`log_density`,
      :meth:`log_density_gradient` (log density = -U).
    * :attr:`capsule`: a ``PyCapsule`` named ``"fastsurrogate.potential_v1"``
      holding a pointer to the ``fs_potential`` struct of
      ``fastsurrogate/include/fs_potential.h`` (keep this object alive while
      the pointer is used).
    * Cython: ``from fastsurrogate.core._potential cimport Potential``.
    """

    def __cinit__(self, *args, **kwargs):
        self.pot.state = NULL
        self.pot.eval = NULL
        self.pot.dim = 0
        self.thread_safe = False
        self._keep = None
        self._error = None

    @property
    def dim(self):
        """Number of parameters."""
        return self.pot.dim

    @property
    def param_names(self):
        """Names of the parameters (unconstrained scale), length ``dim``."""
        return [f"q[{i}]" for i in range(self.pot.dim)]

    def constrain(self, q):
        """Map unconstrained draws ``(..., dim)`` to named constrained quantities.

        Returns a dict ``name -> ndarray (...)``.  The default is the identity,
        one entry per coordinate.
        """
        q = np.asarray(q, dtype=np.float64)
        return {name: q[..., i] for i, name in enumerate(self.param_names)}

    cdef int check_status(self, int status) except -1:
        if status == FS_OK:
            return 0
        if status == FS_ECALLBACK:
            err = self._take_error()
            if err is not None:
                raise err
        raise_for_status(status, type(self).__name__)
        return -1

    def _take_error(self):
        """The exception a Python callback raised during the last evaluation,
        here or in any potential this one wraps (WeightedSum terms, the
        recorded potential, ...), cleared once taken; None when there is none."""
        return _take_error(self, 0)

    cdef object _as_q(self, q):
        if self.pot.eval == NULL:
            raise TypeError(f"{type(self).__name__} is not initialised")
        arr = np.asarray(q)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"q must be an array of real numbers, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float64)
        if arr.ndim != 1 or arr.shape[0] != self.pot.dim:
            raise ValueError(f"q must have shape ({self.pot.dim},), got {np.shape(q)}")
        return arr

    def _eval(self, q, bint want_value, bint want_grad):
        cdef cnp.ndarray qa = self._as_q(q)
        cdef double value = 0.0
        cdef cnp.ndarray g = np.empty(self.pot.dim, dtype=np.float64)
        cdef const double *qp = <const double *>cnp.PyArray_DATA(qa)
        cdef double *vp = &value if want_value else NULL
        cdef double *gp = <double *>cnp.PyArray_DATA(g) if want_grad else NULL
        cdef int status
        with nogil:
            status = self.pot.eval(self.pot.state, qp, vp, gp)
        self.check_status(status)
        return value, g

    def _eval_loop(self, q, long n, bint want_value=False, bint want_grad=True):
        """Benchmark hook: evaluate at q n times in C without the GIL."""
        cdef cnp.ndarray qa = self._as_q(q)
        cdef double value = 0.0
        cdef cnp.ndarray g = np.empty(self.pot.dim, dtype=np.float64)
        cdef const double *qp = <const double *>cnp.PyArray_DATA(qa)
        cdef double *vp = &value if want_value else NULL
        cdef double *gp = <double *>cnp.PyArray_DATA(g) if want_grad else NULL
        cdef int status = 0
        cdef long i
        with nogil:
            for i in range(n):
                status = self.pot.eval(self.pot.state, qp, vp, gp)
                if status != 0:
                    break
        self.check_status(status)
        return value

    def value(self, q):
        """U(q) as a float."""
        return self._eval(q, True, False)[0]

    def grad(self, q):
        """dU/dq as an ndarray of shape ``(dim,)``."""
        return self._eval(q, False, True)[1]

    def value_and_grad(self, q):
        """``(U(q), dU/dq)``: a float and an ndarray of shape ``(dim,)``."""
        return self._eval(q, True, True)

    def __call__(self, q):
        return self.value(q)

    # -- bayes-kit / BridgeStan protocol ---------------------------------
    # BridgeStan's StanModel: log_density(theta_unc, propto=True, jacobian=True),
    # log_density_gradient(theta_unc, propto=True, jacobian=True, out=None) ->
    # (float, ndarray), param_unc_num(), param_num(include_tp=False,
    # include_gq=False), param_unc_names().  A Potential is defined on the
    # unconstrained scale, up to a constant, with the log-Jacobian of its
    # transforms included: the defaults are the only combination it computes.
    def dims(self):
        """Number of parameters (bayes-kit protocol); same as :meth:`param_unc_num`."""
        return self.pot.dim

    def param_unc_num(self):
        """Number of unconstrained parameters (BridgeStan protocol): ``dim``."""
        return self.pot.dim

    def param_num(self, include_tp=False, include_gq=False):
        """Number of parameters on the constrained scale (BridgeStan protocol).

        ``include_tp`` / ``include_gq`` (transformed parameters, generated
        quantities) are accepted for compatibility; a Potential has neither,
        so the answer is the number of scalars :meth:`constrain` returns for
        one point (``dim`` for the identity).
        """
        out = self.constrain(np.zeros(self.pot.dim))
        return int(sum(np.size(v) for v in out.values()))

    def param_unc_names(self):
        """Names of the unconstrained parameters (BridgeStan protocol): ``param_names``."""
        return list(self.param_names)

    def log_density(self, x, propto=True, jacobian=True):
        """log density at x = -U(x) (bayes-kit and BridgeStan protocols).

        Parameters
        ----------
        x : array-like, shape (dim,)
            Unconstrained parameters.
        propto, jacobian : bool
            BridgeStan's flags; only the defaults (``True``, ``True``) are
            supported: U is defined up to a constant and includes the
            log-Jacobian of its transforms.  Other values raise ValueError.

        Examples
        --------
        >>> import numpy as np, fastsurrogate as fs
        >>> fs.models.StandardNormal(2).log_density(np.ones(2))
        -1.0
        """
        _check_bridgestan_flags(propto, jacobian)
        return -self.value(x)

    def log_density_gradient(self, x, propto=True, jacobian=True, out=None):
        """``(log density, gradient of log density)`` at x (bayes-kit and
        BridgeStan protocols): a float and an ndarray of shape ``(dim,)``.

        ``out``, an optional float64 array ``(dim,)``, receives the gradient
        and is returned (BridgeStan's ``out``).  ``propto`` and ``jacobian``
        as in :meth:`log_density`.
        """
        _check_bridgestan_flags(propto, jacobian)
        v, g = self._eval(x, True, True)
        np.negative(g, out=g)
        if out is not None:
            if not (isinstance(out, np.ndarray) and out.dtype == np.float64
                    and out.shape == (self.pot.dim,)):
                raise ValueError(f"out must be a float64 ndarray of shape ({self.pot.dim},)")
            out[...] = g
            g = out
        return -v, g

    # -- C-level access ----------------------------------------------------
    @property
    def capsule(self):
        """PyCapsule ``"fastsurrogate.potential_v1"`` -> ``fs_potential *``."""
        if self.pot.eval == NULL:
            raise TypeError(f"{type(self).__name__} is not initialised")
        return PyCapsule_New(<void *>&self.pot, _CAPSULE_NAME, NULL)

    @staticmethod
    def from_callable(f, dim, *, value=None, log_density=False, thread_safe=False,
                      names=None):
        """Wrap a Python function as a Potential.

        Parameters
        ----------
        f : callable
            ``f(q) -> (U, grad)`` with ``q`` an ndarray ``(dim,)``, ``U`` a float
            and ``grad`` array-like ``(dim,)``.  With ``log_density=True``,
            ``f`` returns ``(log p, grad log p)`` instead.
        dim : int
            Number of parameters.
        value : callable, optional
            ``value(q) -> U`` (or log p), used when only the value is needed
            (exact Metropolis tests of surrogate samplers).
        log_density : bool
            Whether ``f`` and ``value`` return the log density instead of U.
        thread_safe : bool
            Declare that ``f`` may run in several threads at once.  Callables
            hold the GIL, so chains still run one at a time.
        names : sequence of str, optional
            Parameter names.

        Notes
        -----
        An exception raised by ``f`` during sampling stops the sampler and
        reaches the caller unchanged; a NaN or inf returned by ``f`` counts as
        a divergence and the proposal is rejected.

        Examples
        --------
        >>> import numpy as np, fastsurrogate as fs
        >>> pot = fs.Potential.from_callable(lambda q: (0.5 * q @ q, q), 3)
        >>> pot.value(np.ones(3))
        1.5
        """
        return CallbackPotential(f, dim, value=value, log_density=log_density,
                                 thread_safe=thread_safe, names=names)

    @staticmethod
    def from_capsule(capsule, keep_alive=None):
        """Wrap an ``fs_potential`` given as a ``"fastsurrogate.potential_v1"`` capsule.

        ``keep_alive`` is kept referenced (the object that owns the struct).
        The result is treated as thread-safe only if ``keep_alive`` is a
        thread-safe Potential.
        """
        if not PyCapsule_IsValid(capsule, _CAPSULE_NAME):
            raise TypeError(f"expected a PyCapsule named {CAPSULE_NAME!r}")
        cdef fs_potential *p = <fs_potential *>PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
        cdef Potential out = Potential.__new__(Potential)
        out.pot = p[0]
        out._keep = (capsule, keep_alive)
        out.thread_safe = isinstance(keep_alive, Potential) and (<Potential>keep_alive).thread_safe
        return out

    def __repr__(self):
        return f"<{type(self).__name__} dim={self.pot.dim}>"


cdef object _take_error(obj, int depth):
    """Depth-first search of a Potential and what it keeps alive for a pending
    callback exception (cleared when found)."""
    if depth > 8 or obj is None:
        return None
    cdef Potential p
    if isinstance(obj, Potential):
        p = <Potential>obj
        if p._error is not None:
            err = p._error
            p._error = None
            return err
        return _take_error(p._keep, depth + 1)
    if isinstance(obj, (tuple, list)):
        for item in obj:
            err = _take_error(item, depth + 1)
            if err is not None:
                return err
    return None


def _checked_dim_and_names(dim, names):
    """names as a list of str (or None), after checking dim and them."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"dim must be a positive integer, got {type(dim).__name__}")
    if dim < 1 or dim > MAX_DIM:
        raise ValueError(f"dim must be in 1..{MAX_DIM}, got {dim!r}")
    if names is not None:
        names = [str(n) for n in names]
        if len(names) != dim:
            raise ValueError(f"names has {len(names)} entries; expected dim = {dim}")
        twice = sorted(repeated(names))
        if twice:
            raise ValueError(f"names repeat {twice}: each parameter needs its own name "
                             "(summaries and ArviZ key the draws by name)")
    return names


cdef int _callback_eval(void *state, const double *q, double *value,
                        double *grad) noexcept nogil:
    with gil:
        return (<CallbackPotential>state)._call(q, value, grad)


def _real(v, what):
    if np.iscomplexobj(v):
        raise TypeError(f"potential callback returned a complex {what}; return a real number")
    try:
        if np.asarray(v).dtype.kind not in "iuf":       # a bool is no energy
            raise TypeError
        return float(v)
    except (TypeError, ValueError):
        raise TypeError(f"potential callback returned a {what} that is not a real number: "
                        f"{v!r:.60} ({type(v).__name__})") from None


def _rebuild_callback(f, dim, value, log_density, thread_safe, names):
    return CallbackPotential(f, dim, value=value, log_density=log_density,
                             thread_safe=thread_safe, names=names)


cdef class CallbackPotential(Potential):
    """A Potential backed by a Python function (see Potential.from_callable)."""

    cdef object _fn
    cdef object _value_fn
    cdef double _sign
    cdef object _names

    def __init__(self, f, dim, *, value=None, log_density=False, thread_safe=False,
                 names=None):
        if not callable(f):
            raise TypeError(f"f must be callable, got {type(f).__name__}")
        if value is not None and not callable(value):
            raise TypeError(f"value must be callable or None, got {type(value).__name__}")
        names = _checked_dim_and_names(dim, names)
        for flag, v in (("log_density", log_density), ("thread_safe", thread_safe)):
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{flag} must be True or False, got {v!r}")
        self._fn = f
        self._value_fn = value
        self._sign = -1.0 if log_density else 1.0
        self._names = names
        self.pot.dim = <int>dim
        self.pot.state = <void *>self
        self.pot.eval = _callback_eval
        self.thread_safe = bool(thread_safe)

    @property
    def param_names(self):
        if self._names is not None:
            return list(self._names)
        return Potential.param_names.__get__(self)

    def __reduce__(self):
        # pickles whenever f (and value) pickle, e.g. module-level functions
        return (_rebuild_callback, (self._fn, self.pot.dim, self._value_fn,
                                    self._sign < 0, self.thread_safe, self._names))

    cdef int _call(self, const double *q, double *value, double *grad) noexcept:
        cdef Py_ssize_t i, d = self.pot.dim
        cdef const double[::1] gv
        try:
            qa = np.empty(d, dtype=np.float64)
            memcpy(cnp.PyArray_DATA(qa), q, d * sizeof(double))
            qa.flags.writeable = False
            if grad == NULL and self._value_fn is not None:
                v = self._value_fn(qa)
                value[0] = self._sign * _real(v, "value")
                return FS_OK
            out = self._fn(qa)
            if not isinstance(out, tuple) or len(out) != 2:
                raise TypeError(
                    f"potential callback must return a tuple (value, grad); got {type(out).__name__}")
            v, g = out
            if value != NULL:
                value[0] = self._sign * _real(v, "value")
            if grad != NULL:
                ga = np.asarray(g)
                if np.iscomplexobj(ga):
                    raise TypeError("potential callback returned a complex gradient; "
                                    "return real numbers")
                if ga.dtype.kind not in "iuf":
                    raise TypeError(f"potential callback returned a gradient of dtype "
                                    f"{ga.dtype}; return an array of real numbers")
                ga = np.asarray(ga, dtype=np.float64)
                if ga.shape != (d,):
                    raise ValueError(
                        f"potential callback returned a gradient of shape {ga.shape}; expected ({d},)")
                gv = np.ascontiguousarray(ga)
                for i in range(d):
                    grad[i] = self._sign * gv[i]
            return FS_OK
        except BaseException as e:
            self._error = e
            return FS_ECALLBACK


# -- a potential behind a C function pointer ------------------------------------

ctypedef int (*fs_logdensity_cfn)(void *user_data, const double *q, double *logp,
                                  double *grad) noexcept nogil
ctypedef int (*fs_logdensity_value_cfn)(void *user_data, const double *q,
                                        double *logp) noexcept nogil

cdef struct fs_cfn_state:
    fs_logdensity_cfn fn
    fs_logdensity_value_cfn value_fn
    void *user_data
    double sign
    int dim

# Gradients of up to this many doubles go on the trampoline's stack when the
# caller asks for the value only; larger ones get a buffer per call.
cdef enum:
    _CFN_STACK = 256


cdef int _cfn_eval(void *state, const double *q, double *value,
                   double *grad) noexcept nogil:
    """fs_potential_fn of CFunctionPotential: no GIL, no shared scratch."""
    cdef fs_cfn_state *st = <fs_cfn_state *>state
    cdef double lp = 0.0
    cdef double stack_g[_CFN_STACK]
    cdef double *g = grad
    cdef int i, rc
    if grad == NULL and st.value_fn != NULL:
        rc = st.value_fn(st.user_data, q, &lp)
        if value != NULL:
            value[0] = st.sign * lp if rc == 0 else INFINITY
        return FS_OK
    if grad == NULL:
        if st.dim <= _CFN_STACK:
            g = stack_g
        else:
            g = <double *>malloc(st.dim * sizeof(double))
            if g == NULL:
                return FS_ENOMEM
    rc = st.fn(st.user_data, q, &lp, g)
    if grad == NULL and g != stack_g:
        free(g)
    if rc != 0:
        # a failure inside the function (a Cholesky of a matrix that is not
        # positive definite, ...): a point of zero density, i.e. a divergence
        if value != NULL:
            value[0] = INFINITY
        if grad != NULL:
            for i in range(st.dim):
                grad[i] = NAN
        return FS_OK
    if value != NULL:
        value[0] = st.sign * lp
    if grad != NULL and st.sign != 1.0:
        for i in range(st.dim):
            grad[i] = st.sign * grad[i]
    return FS_OK


_ADDR_LIMIT = 2 ** (8 * np.dtype(np.uintp).itemsize)


def _address(obj, what):
    """An integer C address from an int or an object with ``.address`` (a
    numba ``cfunc``)."""
    addr = getattr(obj, "address", obj)
    if isinstance(addr, bool) or not isinstance(addr, (int, np.integer)):
        raise TypeError(f"{what} must be an integer address or an object with an "
                        f"integer .address (a numba cfunc), got {type(obj).__name__}")
    addr = int(addr)
    if addr <= 0 or addr >= _ADDR_LIMIT:
        raise ValueError(f"{what} must be a non-null address, got {addr:#x}")
    return addr


cdef class CFunctionPotential(Potential):
    """A Potential behind a C function pointer that computes log p and its gradient.

    The C chain loop calls the function directly, without the GIL, so a
    thread-safe function (one that keeps no state between calls, e.g. a
    numba ``cfunc``) lets chains in threads run in parallel.  This is what
    :func:`fastsurrogate.from_pymc` builds on.

    Parameters
    ----------
    address : int or object with ``.address``
        Address of ``int fn(void *user_data, const double *q, double *logp,
        double *grad)``: it reads ``q`` (``dim`` doubles), writes log p(q) to
        ``*logp`` and its gradient (``dim`` doubles) to ``grad`` (both
        pointers are always valid), and returns 0.  A nonzero return means
        the density could not be computed at ``q``: the potential reports
        U = +inf and a NaN gradient, which samplers treat as a divergence.
        With numba: ``numba.cfunc(numba.types.int32(numba.types.voidptr,
        numba.types.CPointer(numba.types.float64), ...))``; its object can be
        passed directly (its ``.address`` is read, and it is kept alive).
    dim : int
        Number of parameters.
    user_data : int, optional
        Address passed as the first argument (default 0, NULL).
    value_address : int or object with ``.address``, optional
        ``int fn(void *user_data, const double *q, double *logp)``: log p
        only, used when a caller needs U without its gradient (the exact
        Metropolis test of surrogate samplers).  Without it such calls
        compute the gradient into scratch memory of their own and drop it.
    log_density : bool
        True (default): the functions return log p, and U = -log p.  False:
        they return U and dU/dq directly.
    thread_safe : bool
        Whether the function may run in several threads at once (default
        True).  Say False for a function that keeps state between calls.
    names : sequence of str, optional
        Parameter names, length ``dim``.
    keep_alive : object, optional
        Kept referenced as long as the Potential lives: whatever owns the
        code and the memory the pointers point into.

    Notes
    -----
    An evaluation never enters Python: the trampoline calls the function,
    negates log p into U (and the gradient with it), and returns FS_OK.
    When the caller asks for U only and there is no ``value_address``, the
    gradient goes to a buffer of the call's own (the stack up to 256
    parameters, else ``malloc``), so concurrent calls share nothing.  The
    pointers cannot be pickled: neither can this Potential (a subclass may
    rebuild itself, as the PyMC potential does from its model).

    Examples
    --------
    >>> import numba, numpy as np, fastsurrogate as fs      # doctest: +SKIP
    >>> from numba import types as t
    >>> sig = t.int32(t.voidptr, t.CPointer(t.float64), t.CPointer(t.float64),
    ...               t.CPointer(t.float64))
    >>> @numba.cfunc(sig)
    ... def std_normal(user, q, logp, grad):
    ...     s = 0.0
    ...     for i in range(3):
    ...         s += q[i] * q[i]
    ...         grad[i] = -q[i]
    ...     logp[0] = -0.5 * s
    ...     return 0
    >>> from fastsurrogate.core._potential import CFunctionPotential
    >>> pot = CFunctionPotential(std_normal, 3)
    >>> pot.value(np.ones(3))
    1.5
    """

    cdef fs_cfn_state st
    cdef object _names

    def __init__(self, address, dim, *, user_data=0, value_address=None,
                 log_density=True, thread_safe=True, names=None, keep_alive=None):
        if self.pot.eval != NULL:
            raise TypeError("CFunctionPotential is already initialised")
        fn = _address(address, "address")
        vfn = None if value_address is None else _address(value_address, "value_address")
        if isinstance(user_data, bool) or not isinstance(user_data, (int, np.integer)) \
                or user_data < 0 or user_data >= _ADDR_LIMIT:
            raise TypeError(f"user_data must be an integer address (or 0), got {user_data!r}")
        names = _checked_dim_and_names(dim, names)
        self._names = names
        self.st.fn = <fs_logdensity_cfn><size_t>fn
        self.st.value_fn = NULL if vfn is None else <fs_logdensity_value_cfn><size_t>vfn
        self.st.user_data = <void *><size_t>int(user_data)
        self.st.sign = -1.0 if log_density else 1.0
        self.st.dim = <int>dim
        self._keep = (address, value_address, keep_alive)
        self.pot.dim = <int>dim
        self.pot.state = &self.st
        self.pot.eval = _cfn_eval
        self.thread_safe = bool(thread_safe)

    @property
    def param_names(self):
        if self._names is not None:
            return list(self._names)
        return Potential.param_names.__get__(self)

    @property
    def keep_alive(self):
        """The ``keep_alive`` object given to the constructor."""
        return self._keep[2] if self._keep is not None else None

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} holds C function pointers, which do not "
                        "pickle; rebuild it in the other process")


cdef class WeightedSum(Potential):
    """U(q) = sum_k w_k U_k(q): a weighted sum of potentials, evaluated in C.

    Parameters
    ----------
    potentials : sequence of Potential
        The terms, all of the same dimension.
    weights : array_like, shape (n_terms,), optional
        Finite weights (default all ones).  They can be changed later through
        :attr:`weights` (between sampler runs, not during one); a term whose
        weight is exactly zero is not evaluated.

    Notes
    -----
    Used for the regularised VHMC surrogate ``mu z + (1 - mu) Laplace`` and
    for a prior swap under a trained gradient network (``net + new prior -
    old prior``).  Thread-safe when every term is.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> a = fs.models.StandardNormal(2)
    >>> s = fs.WeightedSum([a, a], [0.25, 0.5])
    >>> s.value(np.ones(2))
    0.75
    """

    def __cinit__(self, *args, **kwargs):
        self._ready = False

    def __dealloc__(self):
        if self._ready:
            fs_weighted_sum_free(&self.st)

    def __init__(self, potentials, weights=None):
        if self._ready:
            raise TypeError("WeightedSum is already initialised")
        terms = tuple(potentials)
        if len(terms) == 0:
            raise ValueError("potentials must contain at least one Potential")
        for t in terms:
            if not isinstance(t, Potential):
                raise TypeError(f"every term must be a Potential, got {type(t).__name__}")
            if (<Potential>t).pot.eval == NULL:
                raise TypeError(f"{type(t).__name__} is not initialised")
        dim = (<Potential>terms[0]).pot.dim
        for t in terms:
            if (<Potential>t).pot.dim != dim:
                raise ValueError(f"all terms must have the same dim; got {[p.dim for p in terms]}")
        n = len(terms)
        w = np.ones(n) if weights is None else np.array(weights, dtype=np.float64).ravel()
        if w.shape != (n,):
            raise ValueError(f"weights must have shape ({n},), got {np.shape(weights)}")
        if not np.all(np.isfinite(w)):
            raise ValueError("weights must be finite")
        self._weights = w
        self._terms_mem = np.zeros(n * sizeof(fs_potential), dtype=np.uint8)
        cdef fs_potential *tp = <fs_potential *>cnp.PyArray_DATA(self._terms_mem)
        cdef int k
        for k in range(n):
            tp[k] = (<Potential>terms[k]).pot
        status = fs_weighted_sum_init(&self.st, dim, n, tp,
                                      <const double *>cnp.PyArray_DATA(self._weights))
        if status != FS_OK:
            raise_for_status(status, "WeightedSum")
        self._ready = True
        self.potentials = terms
        self._keep = terms
        self.pot.dim = dim
        self.pot.state = &self.st
        self.pot.eval = fs_weighted_sum_eval
        self.thread_safe = all((<Potential>t).thread_safe for t in terms)

    @property
    def param_names(self):
        return self.potentials[0].param_names

    def constrain(self, q):
        return self.potentials[0].constrain(q)

    @property
    def weights(self):
        """The weights, shape (n_terms,) (a copy; assign to change them)."""
        return self._weights.copy()

    @weights.setter
    def weights(self, value):
        w = np.array(value, dtype=np.float64).ravel()
        if w.shape != (self._weights.shape[0],):
            raise ValueError(f"weights must have shape ({self._weights.shape[0]},), "
                             f"got {np.shape(value)}")
        if not np.all(np.isfinite(w)):
            raise ValueError("weights must be finite")
        self._weights[:] = w

    def __reduce__(self):
        return (WeightedSum, (self.potentials, self.weights))

    def __repr__(self):
        return (f"<WeightedSum dim={self.pot.dim} terms="
                f"{[type(t).__name__ for t in self.potentials]} weights={self.weights.tolist()}>")


def _store_radius(buf, value):
    """buf[0] = value, a radius: finite and >= 0 (ClampedSum, TrustedDrive)."""
    r = float(value)
    if not (r >= 0 and np.isfinite(r)):
        raise ValueError(f"radius must be finite and >= 0, got {value!r}")
    buf[0] = r


cdef class ClampedSum(WeightedSum):
    """V(q) = w_0 z(p(q)) + w_1 L(q): z held at its values on a sphere beyond it.

    L is a quadratic (a Gaussian potential, such as a Laplace
    approximation's) with its minimum at ``centre``, and
    r(q) = sqrt(2 (L(q) - L(centre))) is the distance from the centre in
    L's own metric (for the Laplace approximation: in Laplace standard
    deviations).  p(q) = q inside the ball r <= ``radius``; outside it,
    p(q) = centre + (radius / r) (q - centre), the point where q's ray
    from the centre meets the sphere.  So z counts as it is inside the
    ball that holds its training points, and along each ray beyond it is
    frozen at its value on the sphere: there V grows like w_1 L, and with
    w_1 > 0, exp(-V) is normalisable whatever z would do away from its
    data.  V is continuous; its gradient loses z's radial part across the
    sphere.  VHMC's surrogate (``laplace_tail``).

    Parameters
    ----------
    z, base : Potential
        The two terms; ``base`` quadratic with its minimum at ``centre``.
    weights : array_like, shape (2,)
        (w_0, w_1), as for :class:`WeightedSum`.
    centre : array_like, shape (dim,)
        The minimum of ``base``.
    radius : float
        R >= 0; may be grown later through :attr:`radius`.
    """

    def __init__(self, z, base, weights, centre, radius=0.0):
        super().__init__([z, base], weights)
        c = np.array(centre, dtype=np.float64).ravel()
        if c.shape != (self.pot.dim,) or not np.all(np.isfinite(c)):
            raise ValueError(f"centre must be a finite array of shape ({self.pot.dim},)")
        self.centre = c
        self._radius = np.zeros(1)
        self.radius = radius
        self.gst.sum = &self.st
        self.gst.centre = <const double *>cnp.PyArray_DATA(self.centre)
        self.gst.base_min = float(base.value(c))
        self.gst.radius = <const double *>cnp.PyArray_DATA(self._radius)
        self.pot.state = &self.gst
        self.pot.eval = fs_clamped_sum_eval

    @property
    def radius(self):
        """R: z counts as it is where r(q) <= R."""
        return float(self._radius[0])

    @radius.setter
    def radius(self, value):
        _store_radius(self._radius, value)

    def distance(self, q):
        """r(q) for q of shape (dim,) or (n, dim): the distance from the centre
        in the base's metric."""
        Q = np.asarray(q, dtype=np.float64)
        base = self.potentials[1]
        u = np.array([base.value(x) for x in Q.reshape(-1, self.pot.dim)])
        r = np.sqrt(2.0 * np.maximum(u - self.gst.base_min, 0.0))
        return r.reshape(Q.shape[:Q.ndim - 1]) if Q.ndim > 1 else float(r[0])

    def __reduce__(self):
        return (ClampedSum, (self.potentials[0], self.potentials[1], self.weights, self.centre,
                             self.radius))

    def __repr__(self):
        return (f"<ClampedSum dim={self.pot.dim} terms="
                f"{[type(t).__name__ for t in self.potentials]} weights={self.weights.tolist()} "
                f"radius={self.radius:.4g}>")


cdef class TrustedDrive(Potential):
    """A surrogate trusted only near its data: V(q) = S(q) where r(q) <= R,
    the exact U(q) beyond.

    r(q) = |W (q - centre)| with W lower triangular: with W the inverse of
    the Cholesky factor of a covariance C, r is the Mahalanobis distance
    sqrt((q - c)^T C^-1 (q - c)).  Drive an HMC chain with V and judge it
    with U: the leapfrog with any force that depends on q alone is
    volume-preserving and reversible, so the chain stays exact however the
    switch falls, and where the surrogate has seen no data (its tails) the
    trajectory follows the exact gradient.  V's value jumps across the
    sphere by the surrogate's error there.  RNS-HMC's and ARNS-HMC's drive (``trust``).

    Parameters
    ----------
    surrogate, exact : Potential
        S and U, of the same dimension d.
    centre : array_like, shape (d,)
    whiten : array_like, shape (d, d)
        W; only its lower triangle is read.
    radius : float
        R >= 0; may be changed later through :attr:`radius`.

    Attributes
    ----------
    n_exact, n_surrogate : int
        Evaluations made by U and by S so far (:meth:`reset_counts`).  Plain
        counters: chains sharing one TrustedDrive in threads may miscount.

    See Also
    --------
    from_points : centre, W and R from training points.
    """

    def __init__(self, surrogate, exact, centre, whiten, radius):
        for name, p in (("surrogate", surrogate), ("exact", exact)):
            if not isinstance(p, Potential):
                raise TypeError(f"{name} must be a Potential, got {type(p).__name__}")
            if (<Potential>p).pot.eval == NULL:
                raise TypeError(f"{name} ({type(p).__name__}) is not initialised")
        d = (<Potential>surrogate).pot.dim
        if (<Potential>exact).pot.dim != d:
            raise ValueError(f"surrogate and exact must have the same dim; got {d} and "
                             f"{exact.dim}")
        c = np.array(centre, dtype=np.float64).ravel()
        if c.shape != (d,) or not np.all(np.isfinite(c)):
            raise ValueError(f"centre must be a finite array of shape ({d},)")
        W = np.ascontiguousarray(np.tril(np.asarray(whiten, dtype=np.float64)))
        if W.shape != (d, d) or not np.all(np.isfinite(W)):
            raise ValueError(f"whiten must be a finite array of shape ({d}, {d})")
        self.surrogate, self.exact = surrogate, exact
        self.centre, self.whiten = c, W
        self._radius = np.zeros(1)
        self.radius = radius
        self._keep = (surrogate, exact)
        self.st.surrogate = (<Potential>surrogate).pot
        self.st.exact = (<Potential>exact).pot
        self.st.centre = <const double *>cnp.PyArray_DATA(self.centre)
        self.st.whiten = <const double *>cnp.PyArray_DATA(self.whiten)
        self.st.radius = <const double *>cnp.PyArray_DATA(self._radius)
        self.st.n_exact = 0
        self.st.n_surrogate = 0
        self.pot.dim = d
        self.pot.state = &self.st
        self.pot.eval = fs_trusted_eval
        self.thread_safe = surrogate.thread_safe and exact.thread_safe

    @staticmethod
    def from_points(surrogate, exact, Q, quantile):
        """The TrustedDrive whose ball holds ``quantile`` of the points Q.

        centre = the points' mean, W = the inverse Cholesky factor of their
        covariance (its diagonal floored at 1e-12 of its mean, relative,
        when the points span fewer than d directions), R = that quantile
        of the points' distances r.

        Parameters
        ----------
        surrogate, exact : Potential
        Q : array_like, shape (n, d)
            The surrogate's training points, n >= 2.
        quantile : float
            In (0, 1]; 1 is the farthest point.
        """
        Q = np.asarray(Q, dtype=np.float64)
        if Q.ndim != 2 or Q.shape[0] < 2 or not np.all(np.isfinite(Q)):
            raise ValueError("Q must be a finite array of shape (n, d) with n >= 2")
        q = float(quantile)
        if not 0 < q <= 1:
            raise ValueError(f"quantile must be in (0, 1], got {quantile!r}")
        centre = Q.mean(axis=0)
        C = np.atleast_2d(np.cov(Q, rowvar=False))
        floor = 1e-12 * max(float(np.mean(np.diag(C))), np.finfo(float).tiny)
        C[np.diag_indices_from(C)] = np.maximum(np.diag(C), 0.0) + floor
        W = np.linalg.inv(np.linalg.cholesky(C))
        r = np.sqrt(np.sum(((Q - centre) @ W.T) ** 2, axis=1))
        return TrustedDrive(surrogate, exact, centre, W, float(np.quantile(r, q)))

    @property
    def radius(self):
        """R: the surrogate drives where r(q) <= R."""
        return float(self._radius[0])

    @radius.setter
    def radius(self, value):
        _store_radius(self._radius, value)

    @property
    def n_exact(self):
        return int(self.st.n_exact)

    @property
    def n_surrogate(self):
        return int(self.st.n_surrogate)

    def reset_counts(self):
        """Set :attr:`n_exact` and :attr:`n_surrogate` to zero."""
        self.st.n_exact = 0
        self.st.n_surrogate = 0

    def distance(self, q):
        """r(q) for q of shape (d,) or (n, d)."""
        Q = np.asarray(q, dtype=np.float64)
        if Q.ndim not in (1, 2) or Q.shape[Q.ndim - 1] != self.pot.dim:
            raise ValueError(f"q must have shape ({self.pot.dim},) or (n, {self.pot.dim})")
        r = np.sqrt(np.sum(((Q - self.centre) @ self.whiten.T) ** 2, axis=-1))
        return float(r) if Q.ndim == 1 else r

    @property
    def param_names(self):
        return self.exact.param_names

    def constrain(self, q):
        return self.exact.constrain(q)

    def _ckpt_state(self, full):
        return {"n_exact": self.n_exact, "n_surrogate": self.n_surrogate}, {}

    def _ckpt_restore(self, sc, arr):
        self.st.n_exact = int(sc["n_exact"])
        self.st.n_surrogate = int(sc["n_surrogate"])

    def __reduce__(self):
        return (TrustedDrive, (self.surrogate, self.exact, self.centre, self.whiten,
                               self.radius))

    def __repr__(self):
        return (f"<TrustedDrive dim={self.pot.dim} surrogate={type(self.surrogate).__name__} "
                f"exact={type(self.exact).__name__} radius={self.radius:.4g}>")


cdef class RecordingPotential(Potential):
    """A potential that stores every (q, grad U(q)) it evaluates.

    Drive a chain with it and it collects one training point per leapfrog
    step (the NNgHMC training set); U(q) is stored too when it was computed
    (NaN otherwise).  Points with a non-finite value or gradient are not
    stored.  Not thread-safe: use one recorder per chain.

    Parameters
    ----------
    potential : Potential
        The potential evaluated (its values and gradients pass through).
    capacity : int
        Maximum number of points stored; later points are counted in
        :attr:`n_seen` but not stored.
    every : int
        Store one gradient evaluation in ``every`` (thinning), default 1.
    decimate : bool
        When the buffers are full, keep every other stored point and double
        ``every`` (instead of storing nothing more): the stored points stay
        evenly spread over everything evaluated, in bounded memory.  The
        points kept are those whose index among the counted evaluations is a
        multiple of the current :attr:`every`.  Needs ``capacity >= 2``.
    need_value : bool
        Store U(q) with every stored point: a point to be stored whose
        evaluation asked for the gradient only gets U computed too (once
        per stored point: HMC's leapfrog asks for gradients only), and is
        counted only if U is finite.
    record_values : bool
        Record value-only calls too: such a call asks the potential for U
        and its gradient together (one call, for about the price of U where
        the gradient shares the value's work) and is counted and stored like
        a gradient call.  The exact corrections of a surrogate chain then
        leave training points where the chain proposes.
    """

    cdef fs_recorder st
    cdef readonly Potential potential
    cdef cnp.ndarray _q
    cdef cnp.ndarray _g
    cdef cnp.ndarray _u
    cdef cnp.ndarray _vg

    def __init__(self, Potential potential not None, capacity, every=1, decimate=False,
                 need_value=False, record_values=False):
        if potential.pot.eval == NULL:
            raise TypeError(f"{type(potential).__name__} is not initialised")
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        if decimate and capacity < 2:
            raise ValueError(f"decimate needs capacity >= 2, got {capacity}")
        d = potential.pot.dim
        self.potential = potential
        self._q = np.empty((capacity, d))
        self._g = np.empty((capacity, d))
        self._u = np.empty(capacity)
        self.st.inner = potential.pot
        self.st.capacity = capacity
        self.st.count = 0
        self.st.seen = 0
        self.st.every = every
        self.st.active = 1
        self.st.decimate = 1 if decimate else 0
        self.st.need_value = 1 if need_value else 0
        self.st.q_buf = <double *>cnp.PyArray_DATA(self._q)
        self.st.g_buf = <double *>cnp.PyArray_DATA(self._g)
        self.st.u_buf = <double *>cnp.PyArray_DATA(self._u)
        self._vg = np.empty(d)
        self.st.value_grad = <double *>cnp.PyArray_DATA(self._vg) if record_values else NULL
        self._keep = potential
        self.pot.dim = d
        self.pot.state = &self.st
        self.pot.eval = fs_recorder_eval
        self.thread_safe = False

    @property
    def param_names(self):
        return self.potential.param_names

    def constrain(self, q):
        return self.potential.constrain(q)

    @property
    def n_stored(self):
        """Points stored so far."""
        return self.st.count

    @property
    def n_seen(self):
        """Finite gradient evaluations made while active (stored or not)."""
        return self.st.seen

    @property
    def capacity(self):
        return self.st.capacity

    @property
    def every(self):
        """One counted evaluation in ``every`` is stored (doubles at each
        decimation)."""
        return self.st.every

    @property
    def decimate(self):
        return bool(self.st.decimate)

    @property
    def need_value(self):
        return bool(self.st.need_value)

    @property
    def record_values(self):
        return self.st.value_grad != NULL

    @property
    def active(self):
        """Whether evaluations are recorded (set False to pass through)."""
        return bool(self.st.active)

    @active.setter
    def active(self, bint value):
        self.st.active = value

    def points(self, start=0):
        """Copies of the stored points from row ``start``: ``(Q, G, U)``.

        Shapes ``(n, dim)``, ``(n, dim)``, ``(n,)``.
        """
        n = self.st.count
        start = int(start)
        if start < 0 or start > n:
            raise ValueError(f"start must be in [0, {n}], got {start}")
        return self._q[start:n].copy(), self._g[start:n].copy(), self._u[start:n].copy()

    def __reduce__(self):
        # the wrapped potential, the sizes and the points stored so far
        return (_rebuild_recorder, (self.potential, self.st.capacity, self.st.every,
                                    self._q[:self.st.count].copy(), self._g[:self.st.count].copy(),
                                    self._u[:self.st.count].copy(), self.st.seen,
                                    bool(self.st.active), bool(self.st.decimate),
                                    bool(self.st.need_value), self.st.value_grad != NULL))

    def _restore(self, Q, G, U, long seen, bint active, every=None):
        cdef long n = Q.shape[0]
        if n > self.st.capacity:
            raise ValueError(f"{n} points do not fit the capacity {self.st.capacity}")
        self._q[:n] = Q
        self._g[:n] = G
        self._u[:n] = U
        self.st.count = n
        self.st.seen = seen
        self.st.active = active
        if every is not None:
            self.st.every = every

    def clear(self):
        """Forget the stored points (and reset :attr:`n_seen`)."""
        self.st.count = 0
        self.st.seen = 0

    def __repr__(self):
        return (f"<RecordingPotential dim={self.pot.dim} stored={self.st.count}/"
                f"{self.st.capacity} of {type(self.potential).__name__}>")


def _rebuild_recorder(potential, capacity, every, Q, G, U, seen, active, decimate=False,
                      need_value=False, record_values=False):
    r = RecordingPotential(potential, capacity, every, decimate, need_value, record_values)
    r._restore(Q, G, U, seen, active)
    return r
