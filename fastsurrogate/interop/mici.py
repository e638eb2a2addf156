"""A Potential as a mici Hamiltonian system.

mici's systems take ``neg_log_dens`` (our ``U``) and ``grad_neg_log_dens``,
which may return ``(grad, value)`` together: one kernel pass per gradient,
with the value cached by mici for its energy.
"""
from typing import Any

import numpy as np

from ..core import Potential

__all__ = ["mici_system", "mici_kwargs"]


def mici_kwargs(potential):
    """The keyword arguments of a mici system for ``potential``.

    Returns ``dict(neg_log_dens=..., grad_neg_log_dens=...)`` where
    ``grad_neg_log_dens(q)`` returns ``(dU/dq, U)`` from one evaluation, the
    form mici accepts.  Use it with any mici system class, e.g.
    ``mici.systems.GaussianEuclideanMetricSystem(**mici_kwargs(pot), ...)``.
    """
    if not isinstance(potential, Potential):
        raise TypeError(f"mici_kwargs needs a fastsurrogate Potential, got "
                        f"{type(potential).__name__}")
    pot = potential

    def grad_neg_log_dens(q):
        u, g = pot.value_and_grad(q)
        return g, u

    return dict(neg_log_dens=pot.value, grad_neg_log_dens=grad_neg_log_dens)


def mici_system(potential: Potential, metric: Any = None) -> Any:
    """A ``mici.systems.EuclideanMetricSystem`` whose target is ``exp(-U)``.

    Parameters
    ----------
    potential : Potential
        ``U(q)`` on ``R^dim``.
    metric : None, ndarray (dim,) or (dim, dim), or a mici matrix
        The metric (mass matrix) as mici takes it; None is the identity.

    Examples
    --------
    >>> import numpy as np, mici, fastsurrogate as fs
    >>> from fastsurrogate.interop.mici import mici_system
    >>> system = mici_system(fs.models.StandardNormal(3))
    >>> sampler = mici.samplers.DynamicMultinomialHMC(
    ...     system, mici.integrators.LeapfrogIntegrator(system),
    ...     np.random.default_rng(0))
    >>> out = sampler.sample_chains(200, 500, [np.zeros(3)], n_worker=1,
    ...                             display_progress=False)
    >>> out.traces["pos"][0].shape
    (500, 3)
    """
    kwargs = mici_kwargs(potential)          # checks the potential first
    if isinstance(metric, (np.ndarray, list, tuple)):
        m = np.asarray(metric)
        d = potential.dim
        if m.shape not in ((d,), (d, d)):
            raise ValueError(f"metric must have shape ({d},) or ({d}, {d}), got {m.shape}")
    try:
        import mici
    except ImportError as exc:
        raise ImportError("mici_system needs mici: pip install mici") from exc
    return mici.systems.EuclideanMetricSystem(metric=metric, **kwargs)
