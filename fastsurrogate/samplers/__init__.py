"""Samplers: one module per method; each owns only its phase logic."""
from .hmc import HMC

SAMPLERS = {"hmc": HMC}

__all__ = ["HMC", "SAMPLERS"]
