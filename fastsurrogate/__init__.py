"""fastsurrogate: Hamiltonian Monte Carlo made cheap for expensive posteriors.

Surrogate-accelerated HMC (RNS-HMC, ARNS-HMC, VHMC, NNgHMC) with the hot
loops (leapfrog, chain loop, surrogate and data-sum gradients) in C.

>>> import fastsurrogate as fs
>>> model = fs.models.StandardNormal(2)
>>> res = fs.sample(model, method="hmc", n_draws=100, n_warmup=100, chains=1,
...                 seed=0, progress=False)
>>> res.draws.shape
(1, 100, 2)
"""
import os as _os

from ._openmp_env import WAIT_POLICY as _OMP_WAIT_POLICY  # before any extension loads

try:
    from .core import (Potential, PotentialError, TrainingError, WeightedSum,
                       RecordingPotential, LowRankMetric)
except ImportError as _exc:
    _here = _os.path.dirname(_os.path.abspath(__file__))
    if not any(f.startswith("_potential.") and f.endswith((".so", ".pyd"))
               for f in _os.listdir(_os.path.join(_here, "core"))):
        raise ImportError(
            f"fastsurrogate was imported from {_here}, a source checkout with no "
            "compiled extensions (Python puts the current directory first on the "
            "import path). Run Python from another directory to use the installed "
            "package, or build in place with `python setup.py build_ext --inplace`."
        ) from _exc
    raise
from . import models, diagnostics, datasets
from .result import Result
from .samplers import HMC, NUTS, SurrogatePolicy, RNSHMC, ARNSHMC, NNGHMC, VHMC, SAMPLERS
from .samplers import RMHMC, RNSRMHMC
from .samplers import SGLD, SGHMC
from . import surrogates
from . import interop
from .interop import from_jax, from_pymc
from . import plots          # matplotlib is imported only when a plot is made
from .diagnostics import approximation, check_gradient, SamplingWarning
from ._headers import get_include
from ._sample import sample, resume

__version__ = "0.1.0.dev0"

__all__ = ["Potential", "PotentialError", "TrainingError", "WeightedSum", "RecordingPotential",
           "Result", "HMC", "NUTS", "SurrogatePolicy", "RNSHMC", "ARNSHMC", "NNGHMC", "VHMC", "RMHMC", "RNSRMHMC", "SGLD", "SGHMC",
           "sample", "check_gradient", "SamplingWarning", "models", "surrogates", "diagnostics", "approximation", "datasets", "interop",
           "get_include", "resume", "from_jax", "from_pymc", "SAMPLERS", "plots", "LowRankMetric"]
