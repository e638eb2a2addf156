"""A JAX log density as a Potential: ``fs.from_jax``.

The user writes ``logdensity_fn(params) -> scalar`` over a pytree of
parameters on the unconstrained scale, as for BlackJAX or NumPyro's
``potential_fn`` (with the sign of a log density).  It is traced once: the
pytree is flattened to one float64 vector, ``jax.value_and_grad`` is
compiled ahead of time (``jit(...).lower(...).compile()``) into an
executable that returns the value and the gradient in ONE array (a single
device-to-host copy per call), and a second executable returns the value
alone for the calls that need no gradient (the exact correction of a
surrogate transition, the step-size search).

The C chain loop reaches it through the callback path (the GIL is taken for
each call).  The per-call overhead beyond the executable itself is measured
by ``bench/from_jax.py`` and quoted in docs/benchmarks.md.  A path with no Python at
all would need XLA's PJRT C API to run the executable; jaxlib's wheels do not
ship it for the CPU client, so there is none.
"""
import numpy as np

from ..core._potential import CallbackPotential

__all__ = ["from_jax", "JaxPotential"]


def _import_jax():
    try:
        import jax
    except ImportError as exc:        # pragma: no cover - depends on the install
        raise ImportError("fastsurrogate.from_jax needs JAX: pip install jax") from exc
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "fastsurrogate.from_jax samples in float64; enable it before building any "
            "JAX array: jax.config.update('jax_enable_x64', True)")
    return jax


def _key_name(key):
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _leaves(jax, example):
    """[(name, shape)] of the example's leaves in ravel_pytree's order."""
    flat, _ = jax.tree_util.tree_flatten_with_path(example)
    out = []
    for path, leaf in flat:
        arr = np.asarray(leaf)
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"example leaf {jax.tree_util.keystr(path) or 'root'} has "
                            f"dtype {arr.dtype}; parameters are real numbers")
        # a bare array is "q", as the package's default names q[0], q[1], ...
        name = ".".join(_key_name(k) for k in path) or "q"
        out.append((name, arr.shape))
    if not out:
        raise ValueError("example has no array leaves: nothing to sample")
    return out


def _names(leaves):
    names = []
    for name, shape in leaves:
        if shape == ():
            names.append(name)
        else:
            names.extend(f"{name}[{','.join(map(str, idx))}]" for idx in np.ndindex(*shape))
    return names


class JaxPotential(CallbackPotential):
    """A Potential compiled from a JAX log density (see :func:`from_jax`).

    Attributes
    ----------
    unravel : callable
        Flat vector ``(dim,)`` -> the parameter pytree.
    leaves : list of (str, tuple)
        Each leaf's name and shape, in the order of the flat vector.
    """

    def constrain(self, q):
        """Draws ``(..., dim)`` -> dict ``name -> (..., *shape)``, one entry
        per leaf of the parameter pytree, or what the ``constrain`` function
        given to :func:`from_jax` returns (applied draw by draw, vmapped)."""
        q = np.asarray(q, dtype=np.float64)
        lead = q.shape[:-1]
        if self._user_constrain is not None:
            rows = q.reshape(-1, q.shape[-1])
            out = self._vconstrain(rows)
            return {str(k): np.asarray(v).reshape(lead + np.shape(v)[1:])
                    for k, v in out.items()}
        out, start = {}, 0
        for name, shape in self.leaves:
            size = int(np.prod(shape, dtype=np.int64))
            out[name] = q[..., start:start + size].reshape(lead + shape)
            start += size
        return out

    def __reduce__(self):
        # rebuilt (and recompiled) from the user's functions when they pickle
        return (_rebuild, (self._logdensity_fn, self._example, self._user_constrain,
                           self._grad_mode))


def _rebuild(logdensity_fn, example, constrain, grad):
    return from_jax(logdensity_fn, example, constrain=constrain, grad=grad)


def _compiled(jax, logdensity_fn, unravel, dim, grad):
    """Two executables compiled ahead of time for a flat (dim,) float64
    vector: the log density and its gradient in one (dim + 1,) array (value
    first; the gradient by ``grad`` mode), and the log density alone."""
    import jax.numpy as jnp

    def logp(flat):
        out = jnp.asarray(logdensity_fn(unravel(flat)))
        if out.shape != ():
            raise ValueError(f"logdensity_fn must return a scalar; it returned shape {out.shape}")
        return out

    def logp_and_grad(flat):
        if grad == "reverse":
            v, g = jax.value_and_grad(logp)(flat)
        else:
            v, g = logp(flat), jax.jacfwd(logp)(flat)
        return jnp.concatenate([v[None], g])

    spec = jax.ShapeDtypeStruct((dim,), jnp.float64)
    both = jax.jit(logp_and_grad).lower(spec).compile()
    value_only = jax.jit(logp).lower(spec).compile()
    return both, value_only


def from_jax(logdensity_fn, example, *, constrain=None, grad="reverse"):
    """A Potential from a JAX log density over a pytree of parameters.

    Value and gradient are one XLA executable compiled ahead of time.

    Parameters
    ----------
    logdensity_fn : callable
        ``logdensity_fn(params) -> scalar``: the log density (up to a
        constant) on the unconstrained scale, written with ``jax.numpy``;
        ``params`` has the structure of ``example``.  U = -logdensity_fn.
    example : pytree of arrays
        Parameters of the right structure, shapes and kinds (their values are
        not used): a dict ``{"mu": 0.0, "theta": jnp.zeros(8)}``, a tuple, or
        one array.  Flattened in ``jax.flatten_util.ravel_pytree``'s order.
    constrain : callable, optional
        ``constrain(params) -> dict name -> array``: the quantities to report
        for each draw (e.g. ``{"sigma": jnp.exp(params["log_sigma"])}``),
        applied under ``jax.vmap``.  By default each leaf under its name.
    grad : {"reverse", "forward"}
        How JAX differentiates: ``jax.value_and_grad`` (reverse mode, the
        default: one backward pass whatever the dimension), or ``jax.jacfwd``
        (forward mode: one tangent per parameter, cheaper for a few
        parameters through an ODE solver; diffrax needs
        ``adjoint=diffrax.ForwardMode()`` for it).

    Returns
    -------
    JaxPotential
        dim = the number of scalars in ``example``; parameter names ``mu``,
        ``theta[0]``, ... (0-based, ``name[i,j]`` for a matrix leaf); its
        ``constrain`` gives ``Result.constrained()`` and ``to_arviz()`` the
        pytree's names and shapes.  Thread-safe (chains may run in threads;
        each call takes the GIL to enter the executable).

    Examples
    --------
    >>> import jax, jax.numpy as jnp, fastsurrogate as fs  # doctest: +SKIP
    >>> jax.config.update("jax_enable_x64", True)            # doctest: +SKIP
    >>> def logdensity(p):                                   # doctest: +SKIP
    ...     return -0.5 * jnp.sum((p["theta"] - p["mu"]) ** 2) - 0.5 * p["mu"] ** 2
    >>> pot = fs.from_jax(logdensity, {"mu": 0.0, "theta": jnp.zeros(3)})  # doctest: +SKIP
    >>> res = fs.sample(pot)                                 # doctest: +SKIP
    """
    if not callable(logdensity_fn):
        raise TypeError(f"logdensity_fn must be callable, got {type(logdensity_fn).__name__}")
    if grad not in ("reverse", "forward"):
        raise ValueError(f"grad must be 'reverse' or 'forward', got {grad!r}")
    if constrain is not None and not callable(constrain):
        raise TypeError(f"constrain must be callable or None, got {type(constrain).__name__}")
    jax = _import_jax()
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    leaves = _leaves(jax, example)
    example64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dtype=jnp.float64), example)
    flat0, unravel = ravel_pytree(example64)
    dim = int(flat0.shape[0])
    both, value_only = _compiled(jax, logdensity_fn, unravel, dim, grad)

    def f(q):
        out = np.asarray(both(q))
        return out[0], out[1:]

    def value(q):
        return float(np.asarray(value_only(q)))

    pot = JaxPotential(f, dim, value=value, log_density=True, thread_safe=True,
                       names=_names(leaves))
    pot.unravel = unravel
    pot.leaves = leaves
    pot._jax_both = both                 # for bench/from_jax.py
    pot._logdensity_fn = logdensity_fn
    pot._example = example
    pot._user_constrain = constrain
    pot._grad_mode = grad
    pot._vconstrain = None
    if constrain is not None:
        pot._vconstrain = jax.jit(jax.vmap(lambda flat: constrain(unravel(flat))))
    return pot
