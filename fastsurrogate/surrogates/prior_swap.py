"""Reuse a trained gradient network under another prior (NNgHMC paper, section 4.2).

A gradient network trained on U_old = -log likelihood - log prior_old
predicts grad U_old.  Under a new prior the target's gradient is

    grad U_new = grad U_old - grad(-log prior_old) + grad(-log prior_new),

so the network plus the difference of the two prior gradients drives HMC
for the new posterior without retraining (the exact Metropolis test then
uses U_new itself).
"""
from ..core._potential import Potential, WeightedSum

__all__ = ["swap_prior"]


def swap_prior(net, old_prior, new_prior):
    """A drive for the posterior under ``new_prior``: net + new_prior - old_prior.

    Parameters
    ----------
    net : Potential
        The trained gradient network (or any potential whose gradient
        approximates grad U of the old posterior).
    old_prior, new_prior : Potential
        The priors as potentials, ``-log prior(q)`` up to a constant, on the
        same (unconstrained) scale as the network's inputs; e.g.
        ``fastsurrogate.models.Gaussian(zeros, sd**2 * I)`` or
        ``Potential.from_callable(f, dim)``.

    Returns
    -------
    WeightedSum
        A compiled weighted sum with weights (1, 1, -1): its gradient is
        ``net.grad(q) + new_prior.grad(q) - old_prior.grad(q)``.  Only its
        gradient is meaningful (a gradient network has no value), which is
        all a drive is asked for; pass it as ``surrogate=`` to
        :class:`fastsurrogate.NNGHMC` with the new posterior as the potential.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> old = fs.models.Gaussian(np.zeros(2), np.eye(2))
    >>> new = fs.models.Gaussian(np.zeros(2), 4.0 * np.eye(2))
    >>> lik = fs.models.Gaussian(np.ones(2), np.eye(2))
    >>> drive = fs.surrogates.swap_prior(fs.WeightedSum([lik, old]), old, new)
    >>> np.allclose(drive.grad(np.zeros(2)), lik.grad(np.zeros(2)) + new.grad(np.zeros(2)))
    True
    """
    for name, p in (("net", net), ("old_prior", old_prior), ("new_prior", new_prior)):
        if not isinstance(p, Potential):
            raise TypeError(f"{name} must be a fastsurrogate Potential, got {type(p).__name__}")
    if old_prior.dim != net.dim or new_prior.dim != net.dim:
        raise ValueError(f"dimensions differ: net {net.dim}, old_prior {old_prior.dim}, "
                         f"new_prior {new_prior.dim}")
    return WeightedSum([net, new_prior, old_prior], [1.0, 1.0, -1.0])
