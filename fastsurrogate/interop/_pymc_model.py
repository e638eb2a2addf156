"""A PyMC model as a Potential: ``fs.from_pymc(model)``.

The model's joint log density and its gradient, on the unconstrained space
(PyMC's value variables after their transforms, log-Jacobians included),
are one PyTensor graph compiled once:

- ``backend="numba"`` (default): PyTensor's numba backend, wrapped in a
  numba ``cfunc`` whose address a :class:`~fastsurrogate.core._potential.
  CFunctionPotential` holds.  The C chain loop calls it directly, without
  the GIL and without entering Python (as nutpie does), so the Potential is
  thread-safe and chains in threads run in parallel.  The model's shared
  variables (``pm.Data``, dim lengths) are copied once when the Potential is
  made; the ``cfunc`` reads the copies through addresses compiled into it.
  Change the data by building a new Potential.
- ``backend="python"``: PyTensor's default (C) backend behind a Python
  callback; it holds the GIL, so chains run one at a time.

The Potential carries what a PyMC user expects back: ``param_names``
(flattened value variables: ``mu``, ``tau_log__``, ``theta[0]``, ...),
``constrain(q)`` (the free variables and Deterministics on their own scale
and shapes), ``reference_names``, ``arviz_dims`` / ``arviz_coords`` (from
the model's dims and coords; ``Result.to_arviz`` uses them) and
``initial_point()``.

pymc, pytensor and numba are imported inside the functions here: importing
fastsurrogate imports none of them.
"""
import itertools
import threading
import warnings
from typing import Any

import numpy as np

from ..core._potential import CallbackPotential, CFunctionPotential, Potential

__all__ = ["from_pymc", "PyMCPotential", "PyMCCallbackPotential"]

BACKENDS = ("numba", "python")


# ---------------------------------------------------------------------------
# entry point

def from_pymc(model: Any, *, backend: str = "numba", value_function: bool = True) -> Potential:
    """The log density of a PyMC model as a Potential on its unconstrained space.

    The transforms' log-Jacobians (``tau_log__``, ...) are included; value
    and gradient are one graph compiled once by PyTensor.

    Parameters
    ----------
    model : pymc.Model
        A model with at least one free variable, all of them continuous
        (marginalise discrete ones first, e.g. with ``pymc_extras``).
    backend : {"numba", "python"}
        "numba" (default; needs numba): a numba ``cfunc`` called by the C
        chain loop without the GIL; the Potential is ``thread_safe``.
        "python": a callback through PyTensor's C backend (GIL held; not
        thread-safe).
    value_function : bool
        Also compile log p alone (default True), for the callers that need
        U without its gradient (the exact test of surrogate samplers);
        False saves that compilation (a second or more), and such calls
        then compute the gradient too and drop it.

    Returns
    -------
    PyMCPotential or PyMCCallbackPotential
        A :class:`~fastsurrogate.Potential` of dimension ``dim`` = the total
        size of the value variables, U(q) = -log p(q) with ``q`` of shape
        ``(dim,)`` their flattened concatenation in the order of
        ``model.free_RVs``.  Besides the Potential methods it has
        ``param_names`` (length ``dim``), ``constrain(q)`` (``(..., dim)`` ->
        dict name -> ``(..., *shape)`` for the free variables and
        Deterministics), ``reference_names`` (the keys of that dict),
        ``arviz_dims``, ``arviz_coords``, ``initial_point(seed=None,
        jitter=False)`` (shape ``(dim,)``), ``shapes`` (value variable ->
        shape), ``model`` and ``backend``.

    Raises
    ------
    TypeError
        ``model`` is not a ``pymc.Model``.
    ValueError
        Unknown backend; a model without free variables or with discrete ones.
    ImportError
        pymc (or, for the default backend, numba) is not installed.

    Notes
    -----
    Compilation: PyTensor caches its numba code on disk (a GP with an
    ``MvNormal``: minutes the first time, much less after); the ``cfunc``
    and the graph it calls are compiled every time (seconds).  numba's
    linear algebra calls SciPy's OpenBLAS: with chains in threads set
    ``OPENBLAS_NUM_THREADS=1``, or its threads spin beside the chains (on a
    loaded 2-core machine 1.1 ms instead of 0.2 ms per gradient of an
    11-point GP).  A non-finite log density, or a failure inside the
    compiled function (a Cholesky of a matrix not positive definite), gives
    U = inf: a divergence.  An Op with no numba implementation runs in
    Python inside the function (with a warning), holding the GIL.

    Examples
    --------
    >>> import pymc as pm, fastsurrogate as fs             # doctest: +SKIP
    >>> with pm.Model() as model:                          # doctest: +SKIP
    ...     mu = pm.Normal("mu")
    ...     pm.Normal("y", mu, 1.0, observed=[0.1, -0.3])
    >>> pot = fs.from_pymc(model)                          # doctest: +SKIP
    >>> res = fs.sample(pot)                               # doctest: +SKIP
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    pm = _import("pymc", "fastsurrogate.from_pymc needs PyMC: pip install pymc")
    if not isinstance(model, pm.Model):
        raise TypeError(f"from_pymc expects a pymc.Model, got {type(model).__name__}")
    if backend == "numba":
        _import("numba", "fastsurrogate.from_pymc(model, backend='numba') needs numba "
                "(pip install numba); backend='python' works without it, with the GIL "
                "held during every evaluation")
    spec = ModelSpec(model)
    if backend == "numba":
        return _numba_potential(spec, value_function=value_function)
    return _python_potential(spec, value_function=value_function)


def _import(name, message):
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(message) from exc


def _rebuild(model_bytes, backend, value_function=True):
    import pickle
    return from_pymc(pickle.loads(model_bytes), backend=backend,
                     value_function=value_function)


# ---------------------------------------------------------------------------
# what the model looks like on the unconstrained space

def _flat_names(name, shape):
    if not shape:
        return [name]
    return [f"{name}[{','.join(map(str, idx))}]"
            for idx in itertools.product(*(range(n) for n in shape))]


class ModelSpec:
    """The model's value variables, their shapes and slices of ``q``, the
    constrained outputs (free variables and Deterministics) and the graphs
    of log p and its gradient with ``q`` as their one input.

    Raises ValueError for a model with no free variables or discrete ones.
    """

    def __init__(self, model):
        import pytensor
        import pytensor.tensor as pt
        from pytensor.tensor.type import discrete_dtypes

        self.model = model
        free = list(model.free_RVs)
        if not free:
            raise ValueError("the model has no free random variables: nothing to sample")
        discrete = [rv.name for rv in free if rv.type.dtype in discrete_dtypes]
        if discrete:
            raise ValueError(
                f"the model has discrete free variables {discrete}: HMC needs continuous "
                "parameters (marginalise them, e.g. with pymc_extras.marginalize)")
        self.value_vars = [model.rvs_to_values[rv] for rv in free]
        point = model.initial_point()
        self.shapes = {v.name: tuple(int(s) for s in np.shape(point[v.name]))
                       for v in self.value_vars}
        self.slices, self.param_names, start = {}, [], 0
        for v in self.value_vars:
            shape = self.shapes[v.name]
            size = int(np.prod(shape, dtype=np.int64))
            self.slices[v.name] = slice(start, start + size)
            self.param_names += _flat_names(v.name, shape)
            start += size
        self.dim = start
        if self.dim == 0:
            raise ValueError("the model's free random variables have size 0: nothing to sample")

        self.q = pt.TensorType("float64", shape=(self.dim,))("q")
        self.replacements = {
            v: self.q[self.slices[v.name]].reshape(self.shapes[v.name]).astype(v.dtype)
            for v in self.value_vars}

        # log p and its gradient, rewritten for stability before the gradient
        # is taken (as nutpie does), then written in terms of q
        logp = model.logp()
        rewrites = ["canonicalize", "stabilize"]
        if not model.check_bounds:
            rewrites.append("local_remove_check_parameter")
        raw = logp
        logp = pytensor.graph.rewrite_graph(raw, include=rewrites)
        try:
            grads = pytensor.gradient.grad(logp, self.value_vars)
        except NotImplementedError:
            # the rewrites can fuse a scan's inner graph into Composite ops,
            # which have no gradient: differentiate the graph as written
            logp = raw
            grads = pytensor.gradient.grad(logp, self.value_vars)
        grad = pt.concatenate([pt.as_tensor_variable(g).ravel() for g in grads])
        logp, grad = pytensor.clone_replace([logp, grad], self.replacements)
        self.logp = pt.cast(logp, "float64")
        self.grad = pt.cast(grad, "float64")

        # constrained quantities: free variables on their own scale, Deterministics
        outs = free + list(model.deterministics)
        self.out_names = [o.name for o in outs]
        graphs = model.replace_rvs_by_values(outs)
        self.out_graphs = pytensor.clone_replace(graphs, self.replacements)
        self._constrain_fn = None
        self._lock = threading.Lock()
        self.out_shapes = {k: v.shape[1:] for k, v in
                           self._constrain_flat(self.initial_point()[None]).items()}
        self.arviz_dims, self.arviz_coords = self._dims_and_coords()

    # -- compiled functions --------------------------------------------------
    def compile(self, outputs, mode=None):
        from pymc.pytensorf import compile as compile_pymc
        with self.model:
            return compile_pymc([self.q], outputs, mode=mode, on_unused_input="ignore")

    def _constrain_function(self):
        """A function of a batch Q (n, dim) -> the constrained outputs, each
        (n, *shape): the graph vectorised over rows when PyTensor can,
        else one row at a time."""
        import pytensor
        import pytensor.tensor as pt
        from pytensor.graph.replace import vectorize_graph
        with self._lock:
            if self._constrain_fn is not None:
                return self._constrain_fn
            Q = pt.matrix("Q", dtype="float64")
            try:
                batched = vectorize_graph(self.out_graphs, replace={self.q: Q})
                with self.model:
                    fn = pytensor.function([Q], batched, mode="FAST_COMPILE",
                                           on_unused_input="ignore")
                fn(np.zeros((2, self.dim)))

                ndims = [g.ndim for g in self.out_graphs]

                def run(flat):
                    # an output that does not depend on q stays unbatched
                    return [np.asarray(o) if np.ndim(o) > nd else
                            np.broadcast_to(o, (flat.shape[0],) + np.shape(o))
                            for o, nd in zip(fn(flat), ndims)]
            except Exception:         # an Op without a batched form: row by row
                fn1 = self.compile(self.out_graphs, mode="FAST_COMPILE")

                def run(flat):
                    rows = [fn1(row) for row in flat]
                    return [np.stack([np.asarray(r[k]) for r in rows]) if rows else
                            np.empty((0,) + self.out_shapes[name])
                            for k, name in enumerate(self.out_names)]
            self._constrain_fn = run
            return run

    def _constrain_flat(self, flat):
        run = self._constrain_function()
        with np.errstate(all="ignore"):
            outs = run(np.ascontiguousarray(flat, dtype=np.float64))
        return dict(zip(self.out_names, outs))

    def constrain(self, q):
        """``(..., dim)`` -> dict name -> ``(..., *shape)``."""
        q = np.asarray(q)
        if q.dtype.kind not in "biuf":
            raise TypeError(f"q must be an array of real numbers, got dtype {q.dtype}")
        if q.ndim < 1 or q.shape[-1] != self.dim:
            raise ValueError(f"q must have shape (..., {self.dim}), got {q.shape}")
        lead = q.shape[:-1]
        flat = q.reshape(-1, self.dim)
        out = self._constrain_flat(flat)
        return {k: v.reshape(lead + v.shape[1:]) for k, v in out.items()}

    # -- points ----------------------------------------------------------------
    def ravel(self, point):
        """A dict value-variable name -> array as one vector ``(dim,)``."""
        q = np.empty(self.dim)
        for v in self.value_vars:
            q[self.slices[v.name]] = np.asarray(point[v.name], dtype=np.float64).ravel()
        return q

    def initial_point(self, seed=None, jitter=False):
        if jitter:
            from pymc.initial_point import make_initial_point_fn
            fn = make_initial_point_fn(model=self.model, jitter_rvs=set(self.model.free_RVs),
                                       return_transformed=True)
            return self.ravel(fn(seed))
        return self.ravel(self.model.initial_point(random_seed=seed))

    # -- ArviZ -------------------------------------------------------------------
    def _dims_and_coords(self):
        model = self.model
        named = dict(getattr(model, "named_vars_to_dims", {}) or {})
        dims, used = {}, []
        for name in self.out_names:
            d = named.get(name)
            shape = self.out_shapes[name]
            if not d or len(d) != len(shape):
                continue
            dims[name] = [dn if dn is not None else f"{name}_dim_{i}" for i, dn in enumerate(d)]
            for dn, n in zip(dims[name], shape):
                used.append((dn, n))
        coords = {}
        for dn, n in used:
            if dn in coords:
                continue
            vals = (model.coords or {}).get(dn)
            coords[dn] = list(vals) if vals is not None else list(range(n))
        return dims, coords


# ---------------------------------------------------------------------------
# the Potential classes

class _PyMCFace:
    """What a Potential made from a PyMC model adds (mixed into a compiled
    Potential class; its state lives in ``self._spec``)."""

    def constrain(self, q):
        """Unconstrained draws ``(..., dim)`` -> dict of the model's free
        variables (on their own scale) and Deterministics, each
        ``(..., *shape)``."""
        return self._spec.constrain(q)

    @property
    def reference_names(self):
        """Names of what :meth:`constrain` returns (free variables, then
        Deterministics, in the model's order)."""
        return list(self._spec.out_names)

    @property
    def arviz_dims(self):
        """Variable -> dimension names, from ``model.named_vars_to_dims``."""
        return {k: list(v) for k, v in self._spec.arviz_dims.items()}

    @property
    def arviz_coords(self):
        """Dimension name -> coordinate values, from ``model.coords``."""
        return {k: list(v) for k, v in self._spec.arviz_coords.items()}

    @property
    def shapes(self):
        """Value variable name -> its shape (unconstrained scale)."""
        return dict(self._spec.shapes)

    @property
    def model(self):
        """The pymc.Model this Potential was made from."""
        return self._spec.model

    @property
    def backend(self):
        return self._backend

    def initial_point(self, seed=None, jitter=False):
        """The model's initial point on the unconstrained scale, shape ``(dim,)``.

        ``jitter=True`` adds PyMC's uniform(-1, 1) jitter to every free
        variable (drawn with ``seed``).  Pass it (or a stack of them, shape
        ``(chains, dim)``) as ``init=`` to a sampler.
        """
        return self._spec.initial_point(seed=seed, jitter=jitter)

    def __reduce__(self):
        # the model goes by cloudpickle (a pymc.Model does not pickle
        # otherwise) and is compiled again where it is unpickled
        try:
            import cloudpickle
        except ImportError:
            raise TypeError(f"pickling a {type(self).__name__} (to send it to another "
                            "process) needs cloudpickle: pip install cloudpickle") from None
        return (_rebuild, (cloudpickle.dumps(self._spec.model), self._backend,
                           self._value_function))

    def __repr__(self):
        return (f"<{type(self).__name__} dim={self.dim} backend={self._backend} "
                f"variables={self._spec.out_names}>")


class PyMCPotential(_PyMCFace, CFunctionPotential):
    """A PyMC model's potential behind a numba ``cfunc`` (thread-safe, no GIL)."""


class PyMCCallbackPotential(_PyMCFace, CallbackPotential):
    """A PyMC model's potential behind a Python callback (PyTensor's C backend)."""


# ---------------------------------------------------------------------------
# backends

def _python_potential(spec, value_function=True):
    fn = spec.compile([spec.logp, spec.grad])
    vfn = spec.compile(spec.logp) if value_function else None
    dim = spec.dim
    nan_grad = np.full(dim, np.nan)

    def value_and_grad(q):
        try:
            lp, g = fn(q)
        except np.linalg.LinAlgError:
            return -np.inf, nan_grad
        return float(lp), np.asarray(g, dtype=np.float64)

    def value(q):
        try:
            return float(vfn(q))
        except np.linalg.LinAlgError:
            return -np.inf

    pot = PyMCCallbackPotential(value_and_grad, dim, value=value if value_function else None,
                                log_density=True, thread_safe=False, names=spec.param_names)
    pot._spec = spec
    pot._backend = "python"
    pot._value_function = bool(value_function)
    pot._functions = (fn, vfn)
    return pot


_OBJECT_MODE = "object mode"


def _numba_potential(spec, value_function=True):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = spec.compile([spec.logp, spec.grad], mode="NUMBA")
        shared = _snapshot(fn)
        both = _make_cfunc(fn.vm.jit_fn, spec.dim, shared, with_grad=True)
        vfn, vshared, only = None, [], None
        if value_function:
            vfn = spec.compile(spec.logp, mode="NUMBA")
            vshared = _snapshot(vfn)
            only = _make_cfunc(vfn.vm.jit_fn, spec.dim, vshared, with_grad=False)
    slow = sorted({str(w.message) for w in caught if _OBJECT_MODE in str(w.message)})
    for w in caught:
        if _OBJECT_MODE not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if slow:
        warnings.warn(
            "fastsurrogate.from_pymc: some Ops have no numba implementation and run in Python "
            "(object mode) inside the compiled function, taking the GIL while they run: "
            + "; ".join(slow), RuntimeWarning, stacklevel=3)
    # what the cfuncs call and read: alive as long as the Potential
    keep = {"cfunc": both, "value_cfunc": only, "functions": (fn, vfn),
            "shared": shared + vshared}
    pot = PyMCPotential(both, spec.dim, value_address=only, log_density=True,
                        thread_safe=True, names=spec.param_names, keep_alive=keep)
    pot._spec = spec
    pot._backend = "numba"
    pot._value_function = bool(value_function)
    return pot


def _snapshot(fn):
    """Read-only C-ordered copies of the shared variables (``pm.Data``, dim
    lengths) a compiled function reads, in the order its jitted graph takes
    them after ``q``."""
    out = []
    for v in fn.get_shared():
        a = np.array(v.get_value(borrow=True), order="C", copy=True)
        a.flags.writeable = False
        out.append(a)
    return out


_PTR = None


def _address_as_pointer():
    """A numba intrinsic: an integer address -> void * (made once)."""
    global _PTR
    if _PTR is None:
        from numba.core import cgutils, types
        from numba.extending import intrinsic

        @intrinsic
        def address_as_pointer(typingctx, addr):
            sig = types.voidptr(addr)

            def codegen(context, builder, signature, args):
                return builder.inttoptr(args[0], cgutils.voidptr_t)
            return sig, codegen
        _PTR = address_as_pointer
    return _PTR


def _make_cfunc(jit_fn, dim, shared, with_grad):
    """A numba ``cfunc`` around PyTensor's jitted graph ``jit_fn(q, *shared)``.

    Signature ``int32(void *user, const double *q, double *logp, double *grad)``
    (``with_grad``) or ``int32(void *user, const double *q, double *logp)``.
    The shared arrays (kept alive by the caller) are read through their
    addresses, compiled in as constants; returns 1 when the graph raised.
    """
    import numba
    from numba import types

    ns = {"numba": numba, "jit_fn": jit_fn, "_ptr": _address_as_pointer(), "DIM": int(dim)}
    lines = []
    for k, a in enumerate(shared):
        ns[f"A{k}"] = int(a.ctypes.data)
        ns[f"S{k}"] = tuple(int(n) for n in a.shape)
        ns[f"T{k}"] = numba.from_dtype(a.dtype)
        lines.append(f"    s{k} = numba.carray(_ptr(A{k}), S{k}, T{k})")
    args = "".join(f", s{k}" for k in range(len(shared)))
    # the work in a plain jitted function, the cfunc only catches: a loop, not
    # g[:] = ...  (numba's generic array assignment takes seconds to compile)
    src = [f"def _inner(q_, lp_{', g_' if with_grad else ''}):",
           "    q = numba.carray(q_, (DIM,))",
           *lines,
           f"    out = jit_fn(q{args})",
           "    lp_[0] = out[0][()]"]
    if with_grad:
        src += ["    grad = out[1]",
                "    for i in range(DIM):",
                "        g_[i] = grad[i]"]
    params = "user, q_, lp_, g_" if with_grad else "user, q_, lp_"
    src += ["",
            f"def _logdensity({params}):",
            "    try:",
            f"        _inner({params[6:]})",
            "    except Exception:",
            "        return 1",
            "    return 0", ""]
    exec(compile("\n".join(src), "<fastsurrogate.from_pymc cfunc>", "exec"), ns)
    ns["_inner"] = numba.njit(ns["_inner"])
    dp = types.CPointer(types.float64)
    sig = (types.int32(types.voidptr, dp, dp, dp) if with_grad
           else types.int32(types.voidptr, dp, dp))
    return numba.cfunc(sig)(ns["_logdensity"])
