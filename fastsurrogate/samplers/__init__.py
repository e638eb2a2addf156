"""Samplers: one module per method; each owns only its phase logic."""
from .hmc import HMC
from .rns_hmc import RNSHMC
from .arns_hmc import ARNSHMC

SAMPLERS = {"hmc": HMC, "rns-hmc": RNSHMC, "arns-hmc": ARNSHMC}

__all__ = ["HMC", "RNSHMC", "ARNSHMC", "SAMPLERS"]
