"""A Potential as a PyTensor Op: a log-density term in a PyMC model.

``to_pytensor(potential)(x)`` is a scalar PyTensor variable, the log density
``-U(x)`` of a float64 vector ``x``, differentiable through a gradient that
the same Op computes: the Op has two outputs (log density and its
gradient), so a graph that needs both (PyMC's NUTS, nutpie) evaluates the
potential once per point.  Use it as a ``pm.Potential`` term or as the
``logp`` of a ``pm.CustomDist``.
"""
from typing import Any, Callable

import numpy as np

from ..core import Potential, PotentialError

__all__ = ["to_pytensor", "PotentialOp"]


def _op_class():
    import pytensor.tensor as pt
    from pytensor.gradient import grad_not_implemented
    from pytensor.graph.basic import Apply
    from pytensor.graph.null_type import NullType
    from pytensor.graph.op import Op
    from pytensor.gradient import DisconnectedType

    class PotentialOp(Op):
        """log density and its gradient of a fastsurrogate Potential.

        ``op(x)`` with ``x`` a float64 vector of length ``dim`` returns
        ``[logp, dlogp]`` (a scalar and a vector).
        """

        def __init__(self, potential):
            self.potential = potential

        def make_node(self, x):
            x = pt.as_tensor_variable(x)
            if x.type.ndim != 1:
                raise TypeError(f"expected a vector of {self.potential.dim} parameters, "
                                f"got a {x.type.ndim}-d tensor")
            x = pt.cast(x, "float64")
            return Apply(self, [x], [pt.dscalar(), pt.dvector()])

        def perform(self, node, inputs, outputs):
            (x,) = inputs
            try:
                u, g = self.potential.value_and_grad(x)
            except PotentialError:      # a non-finite value: log density -inf
                u, g = np.inf, np.full(self.potential.dim, np.nan)
            outputs[0][0] = np.asarray(-u, dtype=np.float64)
            outputs[1][0] = np.negative(g)

        def infer_shape(self, fgraph, node, shapes):
            return [(), (self.potential.dim,)]

        def grad(self, inputs, output_grads):
            (x,) = inputs
            g_logp, g_dlogp = output_grads
            _, dlogp = self(x)      # the same node after merging: no second call
            if not isinstance(g_dlogp.type, (DisconnectedType, NullType)):
                return [grad_not_implemented(self, 0, x,
                                             "second derivatives of a fastsurrogate Potential")]
            if isinstance(g_logp.type, DisconnectedType):
                return [x.zeros_like()]
            return [g_logp * dlogp]

        def connection_pattern(self, node):
            return [[True, True]]

        def __hash__(self):
            return hash((type(self), id(self.potential)))

        def __eq__(self, other):
            return type(self) is type(other) and self.potential is other.potential

        def __repr__(self):
            return f"PotentialOp({self.potential!r})"

    return PotentialOp


_OP = None


def _get_op_class():
    global _OP
    if _OP is None:
        _OP = _op_class()
    return _OP


def __getattr__(name):
    if name == "PotentialOp":
        return _get_op_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def to_pytensor(potential: Potential) -> Callable[[Any], Any]:
    """A function ``x -> log density`` building PyTensor graphs for a Potential.

    Parameters
    ----------
    potential : Potential
        ``U(q)`` on ``R^dim`` (a model with its prior, a likelihood, a trained
        surrogate, ...).

    Returns
    -------
    callable
        ``logp(x)``: ``x`` a PyTensor (or array-like) float vector of length
        ``dim``; returns a scalar PyTensor variable ``-U(x)`` with a gradient.

    The potential is evaluated on the host in Python-mode ``perform`` (the
    kernel itself is compiled C); its value and gradient come from one
    call.  Second derivatives are not defined.

    Examples
    --------
    >>> import numpy as np, pymc as pm, fastsurrogate as fs
    >>> from fastsurrogate.interop import to_pytensor
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> y = (X @ [1.0, -1.0, 0.5] > 0).astype(float)
    >>> lik = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    >>> logp = to_pytensor(lik)
    >>> with pm.Model():
    ...     beta = pm.Flat("beta", shape=3)
    ...     _ = pm.Potential("fs_logp", logp(beta))
    ...     idata = pm.sample(draws=200, tune=200, chains=1, progressbar=False)  # doctest: +SKIP
    """
    if not isinstance(potential, Potential):
        raise TypeError(f"to_pytensor needs a fastsurrogate Potential, got "
                        f"{type(potential).__name__}")
    try:
        import pytensor  # noqa: F401
    except ImportError as exc:
        raise ImportError("to_pytensor needs PyTensor (pip install pymc)") from exc
    op = _get_op_class()(potential)

    def logp(x):
        return op(x)[0]

    logp.op = op                  # type: ignore[attr-defined]
    logp.potential = potential    # type: ignore[attr-defined]
    return logp
