"""Diagnostics: how well a chain mixed, and how close an approximation is.

* :mod:`.mcmc`: ESS (Geyer's, bulk and tail), R-hat, MCSE, the summary
  table, REM / REC and the Amari distance (pure NumPy / SciPy, checked
  against ArviZ).
* :mod:`.approximation`: KL divergence and score-matching distance on a grid,
  relative errors against a reference run (for VHMC's exp(-V) and other
  approximate posteriors); also reachable as ``fastsurrogate.approximation``.
* :mod:`.checks`: the gradient check before a run (``check_gradient``, also
  ``fastsurrogate.check_gradient``) and the warnings after it
  (``run_warnings``).
"""
from .mcmc import *          # noqa: F401,F403  (the public diagnostics)
from .mcmc import __all__ as _mcmc_all
from . import approximation
from .checks import (check_gradient, run_warnings, GradientCheck, GradientCheckError,
                     SamplingWarning)

__all__ = list(_mcmc_all) + ["approximation", "check_gradient", "run_warnings",
                             "GradientCheck", "GradientCheckError", "SamplingWarning"]
