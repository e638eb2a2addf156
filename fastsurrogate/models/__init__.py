"""Potentials for the papers' models (each a fastsurrogate.Potential), compiled.

The posteriordb models (NumPy) are in :mod:`fastsurrogate.models.posteriordb`;
its ``Garch11`` and ``GPRegr`` are posteriordb's GARCH(1,1) and GP models, not
the ``Garch`` (GARCH(m, r)) and ``GPRegression`` (Matern 3/2 GP) here."""
from ._models import Gaussian, StandardNormal, Banana, BetaBinomial, Garch, GPRegression
from ._glm import LogisticRegression, ProbitRegression, PoissonRegression, LinearRegression
from ._papers import ICA, TwistedBanana, LaplaceLogisticRegression
from .pde import EllipticPDE
from ..core._potential import Potential

from_callable = Potential.from_callable

__all__ = ["Gaussian", "StandardNormal", "Banana", "BetaBinomial", "Garch", "GPRegression",
           "LogisticRegression", "ProbitRegression", "PoissonRegression", "LinearRegression",
           "ICA", "TwistedBanana", "LaplaceLogisticRegression", "EllipticPDE",
           "from_callable"]


def __getattr__(name):
    # fs.models.posteriordb without an explicit import (NumPy and SciPy only,
    # loaded on first use)
    if name == "posteriordb":
        import importlib
        return importlib.import_module(".posteriordb", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
