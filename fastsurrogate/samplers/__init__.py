"""Samplers: one module per method; each owns only its phase logic."""
from .hmc import HMC
from .rns_hmc import RNSHMC
from .arns_hmc import ARNSHMC
from .nnghmc import NNGHMC
from .vhmc import VHMC

SAMPLERS = {"hmc": HMC, "rns-hmc": RNSHMC, "arns-hmc": ARNSHMC, "nnghmc": NNGHMC,
            "vhmc": VHMC}

__all__ = ["HMC", "RNSHMC", "ARNSHMC", "NNGHMC", "VHMC", "SAMPLERS"]
