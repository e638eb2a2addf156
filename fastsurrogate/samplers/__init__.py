"""Samplers: one module per method; each owns only its phase logic."""
from .hmc import HMC
from .nuts import NUTS
from .rns_hmc import RNSHMC
from .arns_hmc import ARNSHMC
from .nnghmc import NNGHMC
from .vhmc import VHMC

SAMPLERS = {"hmc": HMC, "nuts": NUTS, "rns-hmc": RNSHMC, "arns-hmc": ARNSHMC,
            "nnghmc": NNGHMC, "vhmc": VHMC}

__all__ = ["HMC", "NUTS", "RNSHMC", "ARNSHMC", "NNGHMC", "VHMC", "SAMPLERS"]
