"""Potentials for the papers' models (each a fastsurrogate.Potential)."""
from .._models import Gaussian, StandardNormal, Banana
try:  # FS-TEMP until _glm lands
    from .._glm import LogisticRegression, ProbitRegression, PoissonRegression, LinearRegression
except ImportError:
    pass
from .._potential import Potential

from_callable = Potential.from_callable

__all__ = ["Gaussian", "StandardNormal", "Banana", "LogisticRegression", "ProbitRegression",
           "PoissonRegression", "LinearRegression", "from_callable"]
