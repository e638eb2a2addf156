"""Diagnostics: how well a chain mixed, and how close an approximation is.

* :mod:`.mcmc`: ESS (Geyer's, bulk and tail), R-hat, MCSE, the summary
  table, REM / REC and the Amari distance (pure NumPy / SciPy, checked
  against ArviZ).
* :mod:`.approximation`: KL divergence and score-matching distance on a grid,
  relative errors against a reference run (for VHMC's exp(-V) and other
  approximate posteriors); also reachable as ``fastsurrogate.approximation``.
"""
from .mcmc import *          # noqa: F401,F403  (the public diagnostics)
from .mcmc import __all__ as _mcmc_all
from . import approximation

__all__ = list(_mcmc_all) + ["approximation"]
