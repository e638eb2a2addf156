"""Samplers: one module per method, each supplying only its phases on the
shared skeleton of :class:`Sampler` (samplers/_base.py).

``SAMPLERS`` maps a method name to its class; ``fastsurrogate.sample``
looks names up there, so registering a class of your own is one line.
"""
from ._base import Sampler
from ._checks import check_int, check_positive
from .hmc import HMC
from .nuts import NUTS
from .surrogate_nuts import SurrogatePolicy
from .rns_hmc import RNSHMC
from .arns_hmc import ARNSHMC
from .nnghmc import NNGHMC
from .vhmc import VHMC
from .rmhmc import RMHMC, RNSRMHMC
from .sg import SGLD, SGHMC

SAMPLERS: dict[str, type[Sampler]] = {"hmc": HMC, "nuts": NUTS, "rns-hmc": RNSHMC,
                                      "arns-hmc": ARNSHMC, "nnghmc": NNGHMC, "vhmc": VHMC}
SAMPLERS.update({"rmhmc": RMHMC, "rns-rmhmc": RNSRMHMC})
SAMPLERS.update({"sgld": SGLD, "sghmc": SGHMC})

__all__ = ["Sampler", "HMC", "NUTS", "SurrogatePolicy", "RNSHMC", "ARNSHMC", "NNGHMC", "VHMC", "RMHMC", "RNSRMHMC", "SAMPLERS",
           "SGLD", "SGHMC", "check_int", "check_positive"]
