"""A Potential as a JAX log density: jittable, differentiable, vmappable.

The potential runs on the host through ``jax.pure_callback``; a
``jax.custom_vjp`` supplies its gradient.  Under ``jax.grad`` /
``jax.value_and_grad`` the forward pass makes ONE callback that computes the
value and the gradient together (one pass of the C kernel) and keeps the
gradient as the residual, so the backward pass calls nothing.  Evaluating
the density without differentiating it asks the kernel for the value only.
"""
import numpy as np

from ..core import Potential, PotentialError

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
    """

    def __init__(self, potential, vmap_method="sequential"):
        import jax
        import jax.numpy as jnp

        _require_x64(jax)
        pot = potential
        dim = pot.dim
        f64 = jnp.float64

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
        scalar = jax.ShapeDtypeStruct((), f64)
        vector = jax.ShapeDtypeStruct((dim,), f64)

        @jax.custom_vjp
        def potential_u(q):
            (u,) = jax.pure_callback(u_cb, (scalar,), q, vmap_method=vmap_method)
            return u

        def fwd(q):
            u, g = jax.pure_callback(ug_cb, (scalar, vector), q, vmap_method=vmap_method)
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
        self.potential_fn = potential_fn
        self.log_density = log_density
        self.value_and_grad = jax.value_and_grad(log_density)

    def __call__(self, x):
        return self.log_density(x)

    def __repr__(self):
        return f"<JaxLogDensity of {self.potential!r}>"


def to_jax(potential, *, vmap_method="sequential"):
    """A JAX log density (jittable, differentiable, vmappable) of a Potential.

    Parameters
    ----------
    potential : Potential
        A model, a trained surrogate, a WeightedSum, ...  ``U(q)`` on
        ``R^dim``.
    vmap_method : str
        How ``jax.vmap`` (chains vectorised by NumPyro or BlackJAX) calls
        the host: ``"sequential"`` (one callback per chain, the default) or
        ``"expand_dims"`` (one callback for the whole batch, looping over
        the rows on the host).  See ``jax.pure_callback``.

    Returns
    -------
    JaxLogDensity
        ``logdensity(x) -> -U(x)`` for ``x`` float64 of shape ``(dim,)``;
        ``logdensity.potential_fn(x) -> U(x)``.

    JAX must run in float64: call ``jax.config.update("jax_enable_x64",
    True)`` first (a RuntimeError says so otherwise).  The potential runs on
    the host (CPU) with the GIL released for compiled kernels.  Under
    ``jax.grad`` one callback computes value and gradient together; a
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
    return JaxLogDensity(potential, vmap_method=vmap_method)
