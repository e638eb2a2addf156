"""fastsurrogate potentials as log densities for other samplers.

Every Potential (a model, a trained surrogate, a sum of them) can drive a
sampler written in another library.  One module per library, each importing
its library only when used:

==========================  ====================================================
``to_jax(potential)``       a jittable, differentiable, vmappable JAX log
                            density (XLA FFI or ``jax.pure_callback``, + ``custom_vjp``)
                            for NumPyro (``potential_fn``) and BlackJAX
                            (``logdensity_fn``); module ``interop._jax``
``to_pytensor(potential)``  a PyTensor Op (value and gradient in one call) for
                            ``pm.Potential`` / ``pm.CustomDist`` terms in PyMC
                            models (and nutpie through PyMC); module
                            ``interop.pymc``
``mici_system(potential)``  a mici Hamiltonian system; module ``interop.mici``
==========================  ====================================================

And the other way, models written in those libraries as Potentials:

==========================  ====================================================
``from_jax(fn, example)``   a JAX log density over a pytree, compiled once
                            (also ``fastsurrogate.from_jax``); module ``interop._jax_model``
``from_pymc(model)``        a PyMC model's unconstrained log density, compiled by
                            PyTensor (also ``fastsurrogate.from_pymc``); module
                            ``interop._pymc_model``
==========================  ====================================================

C and Cython code can call a Potential with no Python in the loop: see the
``potential_v1`` capsule and ``fastsurrogate.get_include()``.
"""

# Each module imports its library (jax, pytensor / pymc, numba, mici) inside
# the functions that use it: importing fastsurrogate.interop imports none of
# the libraries.
from ._jax import to_jax
from ._jax_model import from_jax
from ._pymc_model import from_pymc
from .mici import mici_system
from .pymc import to_pytensor

__all__ = ["to_jax", "to_pytensor", "mici_system", "from_jax", "from_pymc"]
