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
import inspect as _inspect
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
from . import plots          # matplotlib is imported only when a plot is made
from .diagnostics import approximation, check_gradient, SamplingWarning
from .samplers._checkpoint import resume

__version__ = "0.1.0.dev0"

__all__ = ["Potential", "PotentialError", "TrainingError", "WeightedSum", "RecordingPotential",
           "Result", "HMC", "NUTS", "SurrogatePolicy", "RNSHMC", "ARNSHMC", "NNGHMC", "VHMC", "RMHMC", "RNSRMHMC", "SGLD", "SGHMC",
           "sample", "check_gradient", "SamplingWarning", "models", "surrogates", "diagnostics", "approximation", "datasets", "interop",
           "get_include", "resume", "SAMPLERS", "plots", "LowRankMetric"]


def get_include():
    """Folder with the C headers (fs_potential.h, ...) for extensions built on fastsurrogate.

    An installed package ships them in ``fastsurrogate/include``; a checkout
    built in place has them in ``csrc/`` beside the package.
    """
    here = _os.path.dirname(_os.path.abspath(__file__))
    inc = _os.path.join(here, "include")
    csrc = _os.path.join(_os.path.dirname(here), "csrc")
    if not _os.path.isdir(inc) and _os.path.isfile(_os.path.join(csrc, "fs_potential.h")):
        return csrc
    return inc


def _init_params(cls):
    """Keyword names a sampler's constructor accepts, through **options chains."""
    names = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = _inspect.signature(init).parameters
        names |= {n for n, p in params.items()
                  if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            break
    return names - {"self", "potential"}


def sample(potential, method="nuts", n_draws=1000, n_warmup=None, **kwargs):
    """Sample from ``potential`` with the named method.

    ``fs.sample(model)`` runs NUTS with its defaults: 4 chains x (1000
    warm-up + 1000 draws), its trees driven by a surrogate trained on the
    warm-up's own leapfrog points where the gradient is expensive enough to
    matter, and exact NUTS otherwise (``result.info["surrogate"]`` says
    which and why; exact either way).  ``fs.sample(model, "nuts", 1000,
    1000, chains=4)`` is ``fs.NUTS(model).sample(1000, 1000, chains=4)``.

    Parameters
    ----------
    potential : Potential
        The target: a model (``fs.models``; a posteriordb model is wrapped
        for you), a trained surrogate, or ``fs.Potential.from_callable(f, dim)``.
    method : str
        A key of ``fastsurrogate.SAMPLERS`` (case and "_" / "-" ignored),
        default "nuts": "hmc", "nuts", "rns-hmc", "arns-hmc", "vhmc", "nnghmc", "rmhmc",
        "rns-rmhmc", "sgld", "sghmc".
    n_draws : int
        Kept draws per chain.
    n_warmup : int, optional
        Warm-up (or exploration) iterations per chain; default the sampler's
        ``default_warmup`` (1000; 400 for ARNS-HMC).
    **kwargs
        Go to the sampler's constructor (e.g. ``step_size``, ``n_steps``,
        ``n_hidden``) or to its ``sample`` method
        (``chains``, ``seed``, ``init``, ``progress``, ``keep_warmup``,
        ``checkpoint``, ``checkpoint_every``, ``resume``, ``executor``),
        whichever accepts them; an argument
        neither accepts is a TypeError.

    Returns
    -------
    Result
        ``draws`` (chains, n_draws, dim), per-draw ``stats``, ``timings``,
        ``summary()``, ``to_arviz()``.
    """
    key = str(method).lower().replace("_", "-")
    if key not in SAMPLERS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(SAMPLERS)}")
    cls = SAMPLERS[key]
    init_params = _init_params(cls)
    run_params = set(_inspect.signature(cls.sample).parameters) - {"self"}
    unknown = set(kwargs) - init_params - run_params
    if unknown:
        raise TypeError(f"{cls.__name__} got unexpected arguments: {sorted(unknown)}")
    ctor = {k: v for k, v in kwargs.items() if k in init_params}
    run = {k: v for k, v in kwargs.items() if k in run_params and k not in init_params}
    return cls(potential, **ctor).sample(n_draws, n_warmup, **run)
