"""A Potential as a JAX log density: jittable, differentiable, vmappable.

Two ways into a compiled JAX program, one contract:

* ``"ffi"``: an XLA FFI custom call (``_xla_ffi.c``, compiled on first use,
  see ``_xla_ffi.py``) calls the potential's C function directly: no Python,
  no GIL, no host-callback machinery per call.  vmap loops over the batch
  inside the handler.
* ``"callback"``: ``jax.pure_callback`` into ``Potential.value_and_grad``;
  the fallback when no C compiler is available, and the path for potentials
  that run Python (``Potential.from_callable``, the PDE model), so that their
  exceptions reach the caller unchanged.

Either way a ``jax.custom_vjp`` supplies the gradient: under ``jax.grad`` /
``jax.value_and_grad`` the forward pass makes ONE call that computes the
value and the gradient together (one pass of the C kernel) and keeps the
gradient as the residual, so the backward pass calls nothing.  Evaluating
the density without differentiating it asks the kernel for the value only.
"""
import warnings

import numpy as np

from ..core import Potential, PotentialError
from ..core._potential import CallbackPotential, RecordingPotential, WeightedSum
from . import _xla_ffi

__all__ = ["to_jax", "JaxLogDensity"]


def _require_x64(jax):
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "fastsurrogate's JAX bridge works in float64; enable it before building "
            "any array: jax.config.update('jax_enable_x64', True)")


def _batched(fn, dim):
    """fn(q (dim,)) -> tuple of outputs, applied over any leading axes of q."""
    def call(q):
        q = np.asarray(q, dtype=np.float64)
        if q.ndim == 1:
            return fn(q)
        lead = q.shape[:-1]
        rows = q.reshape(-1, dim)
        outs = [fn(r) for r in rows]
        return tuple(np.stack([o[k] for o in outs]).reshape(lead + np.shape(outs[0][k]))
                     for k in range(len(outs[0])))
    return call


def _calls_python(pot):
    """Whether evaluating pot can run Python (a callback somewhere inside)."""
    if isinstance(pot, CallbackPotential) or getattr(pot, "calls_python", False):
        return True
    if isinstance(pot, WeightedSum):
        return any(_calls_python(t) for t in pot.potentials)
    if isinstance(pot, RecordingPotential):
        return _calls_python(pot.potential)
    return False


def _callback_primitives(jax, pot, dim, vmap_method):
    """(u(q), (u, g)(q)) through jax.pure_callback."""
    import jax.numpy as jnp

    def u_only(q):
        try:
            return (np.float64(pot.value(q)),)
        except PotentialError:          # the kernel met a non-finite value
            return (np.float64(np.inf),)

    def u_and_grad(q):
        try:
            u, g = pot.value_and_grad(q)
        except PotentialError:
            return np.float64(np.inf), np.full(dim, np.nan)
        return np.float64(u), g

    u_cb = _batched(u_only, dim)
    ug_cb = _batched(u_and_grad, dim)
    scalar = jax.ShapeDtypeStruct((), jnp.float64)
    vector = jax.ShapeDtypeStruct((dim,), jnp.float64)

    def u(q):
        return jax.pure_callback(u_cb, (scalar,), q, vmap_method=vmap_method)[0]

    def ug(q):
        return jax.pure_callback(ug_cb, (scalar, vector), q, vmap_method=vmap_method)
    return u, ug


def _ffi_primitives(jax, pot, dim, target):
    """(u(q), (u, g)(q)) through the XLA FFI handler (batched in the handler)."""
    import jax.numpy as jnp

    attrs = dict(potential=np.uint64(_xla_ffi.potential_address(pot)),
                 serial=np.int32(0 if pot.thread_safe else 1))
    scalar = jax.ShapeDtypeStruct((), jnp.float64)
    vector = jax.ShapeDtypeStruct((dim,), jnp.float64)
    call_u = jax.ffi.ffi_call(target, (scalar,), vmap_method="broadcast_all")
    call_ug = jax.ffi.ffi_call(target, (scalar, vector), vmap_method="broadcast_all")

    # the closures hold pot: the address in attrs stays valid as long as any
    # traced function can run them
    def u(q, _keep=pot):
        return call_u(q, **attrs)[0]

    def ug(q, _keep=pot):
        return tuple(call_ug(q, **attrs))
    return u, ug


def _choose_backend(pot, backend):
    """'ffi' or 'callback' for this potential; warns when 'auto' falls back."""
    if backend == "callback":
        return "callback", None
    if _calls_python(pot):
        if backend == "ffi":
            raise ValueError("backend='ffi' cannot run a potential that calls Python "
                             "(Potential.from_callable, ...); use backend='auto' or "
                             "'callback'")
        return "callback", None
    import jax
    if jax.default_backend() != "cpu":
        # the handler is registered for the CPU only; a callback reaches
        # the host from any device
        if backend == "ffi":
            raise RuntimeError(f"backend='ffi' runs on the CPU only; JAX's default "
                               f"backend is {jax.default_backend()!r}")
        return "callback", None
    target = _xla_ffi.target()
    if target is not None:
        return "ffi", target
    reason = _xla_ffi.unavailable_reason()
    if backend == "ffi":
        raise RuntimeError(f"the XLA FFI handler is unavailable: {reason}")
    if not reason.startswith("FASTSURROGATE_JAX_FFI=0"):
        warnings.warn(f"fastsurrogate.interop.to_jax: the XLA FFI handler is unavailable "
                      f"({reason}); using jax.pure_callback, which adds a few hundred "
                      f"microseconds per call", RuntimeWarning, stacklevel=4)
    return "callback", None


class JaxLogDensity:
    """The JAX face of a Potential (made by :func:`to_jax`).

    Calling it gives the log density ``-U(x)`` (a float64 scalar) of a
    float64 vector ``x`` of shape ``(dim,)``; it can be jitted,
    differentiated (``jax.grad``) and vmapped over chains.

    Attributes
    ----------
    potential_fn : callable
        ``U(x) = -log density(x)``, for NumPyro's ``NUTS(potential_fn=...)``.
    value_and_grad : callable
        ``jax.value_and_grad`` of the log density (one callback per call).
    potential : Potential
    dim : int
    backend : str
        ``"ffi"`` or ``"callback"``: how compiled JAX code reaches the potential.
    """

    def __init__(self, potential, vmap_method="sequential", backend="auto"):
        import jax
        import jax.numpy as jnp

        _require_x64(jax)
        pot = potential
        dim = pot.dim
        f64 = jnp.float64
        backend, target = _choose_backend(pot, backend)
        if backend == "ffi":
            u_fn, ug_fn = _ffi_primitives(jax, pot, dim, target)
        else:
            u_fn, ug_fn = _callback_primitives(jax, pot, dim, vmap_method)

        @jax.custom_vjp
        def potential_u(q):
            return u_fn(q)

        def fwd(q):
            u, g = ug_fn(q)
            return u, g

        def bwd(g, ct):
            return (ct * g,)

        potential_u.defvjp(fwd, bwd)

        def potential_fn(x):
            _require_x64(jax)
            x = jnp.asarray(x)
            if x.shape != (dim,):
                raise ValueError(f"x must have shape ({dim},), got {x.shape}")
            return potential_u(x.astype(f64))

        def log_density(x):
            return -potential_fn(x)

        self.potential = pot
        self.dim = dim
        self.backend = backend
        self.potential_fn = potential_fn
        self.log_density = log_density
        self.value_and_grad = jax.value_and_grad(log_density)

    def __call__(self, x):
        return self.log_density(x)

    def __repr__(self):
        return f"<JaxLogDensity of {self.potential!r} via {self.backend}>"


def to_jax(potential: Potential, *, vmap_method: str = "sequential",
           backend: str = "auto") -> "JaxLogDensity":
    """A JAX log density (jittable, differentiable, vmappable) of a Potential.

    Parameters
    ----------
    potential : Potential
        A model, a trained surrogate, a WeightedSum, ...  ``U(q)`` on
        ``R^dim``.
    vmap_method : str
        For the ``"callback"`` backend only: how ``jax.vmap`` (chains
        vectorised by NumPyro or BlackJAX) calls the host:
        ``"sequential"`` (one callback per chain, the default) or
        ``"expand_dims"`` (one callback for the whole batch, looping over
        the rows on the host).  See ``jax.pure_callback``.  The ``"ffi"``
        backend always takes the whole batch in one call.
    backend : str
        ``"auto"`` (default): the XLA FFI handler when it is available and
        the potential runs no Python, else ``jax.pure_callback`` (with a
        RuntimeWarning when the handler could not be built).  ``"ffi"``:
        the handler or an error.  ``"callback"``: ``jax.pure_callback``.
        The handler is C compiled on first use with the compiler that
        built Python (``$CC`` overrides) into ``~/.cache/fastsurrogate``
        (``$FASTSURROGATE_CACHE_DIR`` overrides); ``FASTSURROGATE_JAX_FFI=0``
        turns it off.  It costs a few microseconds per call where a
        callback costs a few hundred.  A function traced with it holds
        the potential's address, so it runs in this process only (no
        ``jax.export``).

    Returns
    -------
    JaxLogDensity
        ``logdensity(x) -> -U(x)`` for ``x`` float64 of shape ``(dim,)``;
        ``logdensity.potential_fn(x) -> U(x)``.

    Notes
    -----
    JAX must run in float64: call ``jax.config.update("jax_enable_x64",
    True)`` first (a RuntimeError says so otherwise).  The potential runs on
    the host (CPU); compiled kernels run without the GIL.  Under
    ``jax.grad`` one call computes value and gradient together; a
    non-finite value or a kernel failure gives ``U = inf`` (a divergence
    for NumPyro and BlackJAX).  Higher derivatives are not defined.

    Examples
    --------
    >>> import jax, numpy as np, fastsurrogate as fs
    >>> jax.config.update("jax_enable_x64", True)
    >>> from fastsurrogate.interop import to_jax
    >>> logp = to_jax(fs.models.StandardNormal(3))
    >>> float(jax.jit(logp)(np.ones(3)))
    -1.5
    >>> np.asarray(jax.grad(logp)(np.ones(3)))
    array([-1., -1., -1.])
    """
    if not isinstance(potential, Potential):
        raise TypeError(f"to_jax needs a fastsurrogate Potential, got {type(potential).__name__}")
    if vmap_method not in ("sequential", "expand_dims", "broadcast_all"):
        raise ValueError(f"vmap_method must be 'sequential', 'expand_dims' or "
                         f"'broadcast_all', got {vmap_method!r}")
    if backend not in ("auto", "ffi", "callback"):
        raise ValueError(f"backend must be 'auto', 'ffi' or 'callback', got {backend!r}")
    return JaxLogDensity(potential, vmap_method=vmap_method, backend=backend)
