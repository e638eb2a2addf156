"""Argument checks, shared by the samplers and their skeleton
(:mod:`fastsurrogate.samplers._base`).

Each returns the argument as the samplers use it (an int, a float, a bool,
an array, a Potential) or raises a TypeError or ValueError that says what
is wrong; :func:`check_trace_memory` refuses (MemoryError) traces larger
than the machine's memory.
"""

import os
import sys

import numpy as np

from ..core._hmc import LowRankMetric
from ..core._potential import Potential
from ..core._checks import real_array

__all__ = ["MAX_INT", "check_int", "check_int_or_auto", "check_trace_memory", "check_flag",
           "check_number", "check_positive", "refuse_options", "check_potential",
           "check_metric", "check_tree_depth", "check_explore", "check_init"]

# counts and sizes reach C as int / long: larger ones are refused up front
MAX_INT = 2**31 - 1


def check_int(name, value, minimum=0, maximum=MAX_INT):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return int(value)


def check_int_or_auto(name, value, minimum=1):
    """"auto", or an integer >= minimum (:func:`check_int`)."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f'{name} must be a positive integer or "auto", got {value!r}')
        return value
    return check_int(name, value, minimum)


#: bytes each chain costs besides its traces (its generator, context, chain
#: and trace objects: 10.6 KiB of resident memory measured with 8000 chains
#: of a 2-d model, rounded up)
CHAIN_OVERHEAD = 16384


def check_trace_memory(n_rows, dim, chains):
    """Refuse runs whose traces and per-chain objects need more than half
    the machine's memory (the Result's arrays copy the traces), before
    allocating anything."""
    need = float(chains) * (float(n_rows) * (8.0 * dim + 64.0) + CHAIN_OVERHEAD)
    try:
        have = float(os.sysconf("SC_PAGE_SIZE")) * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return
    if need > 0.5 * have:
        raise MemoryError(
            f"{chains} chain(s) x {n_rows} iterations x dim {dim} need {need / 1e9:.1f} GB "
            f"for their traces and per-chain state, and the Result copies the traces; this "
            f"machine has {have / 1e9:.1f} GB: run fewer chains or iterations")


def check_flag(name, value):
    """An on/off option: True or False (NumPy bools, and the ints 0 and 1, too).

    Anything else is a TypeError: ``adapt="no"`` would otherwise be True."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def check_choice(name, value, choices):
    """One of the strings in `choices` (TypeError for a non-string)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {choices}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_number(name, value):
    """A real number (int or float, NumPy scalars too) as a float; not a bool,
    a string or None (TypeError).  Range checks are the caller's."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    return float(value)


def check_positive(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, (str, bytes, bool, np.bool_)):    # float("1") and float(True) work
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}") from None
    if not (v > 0 and np.isfinite(v)):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return v


def refuse_options(sampler_name, options, names, why):
    """A ValueError for an option the sampler accepts through ``**options``
    (from the class it extends) but does not use: given, it would be
    silently ignored.  None and False count as not given."""
    given = [k for k in names if options.get(k) is not None and options.get(k) is not False]
    if given:
        raise ValueError(f"{sampler_name} does not use {', '.join(given)}: {why}")



def check_potential(potential, name="potential", dim=None):
    """`potential` if it is a Potential (of dimension `dim` when given); a
    posteriordb model (:mod:`fastsurrogate.models.posteriordb`) is wrapped
    with its ``as_potential``."""
    pdb = sys.modules.get("fastsurrogate.models.posteriordb")    # loaded if it is one
    if pdb is not None and isinstance(potential, pdb._PosteriorModel):
        potential = pdb.as_potential(potential)
    if not isinstance(potential, Potential):
        raise TypeError(
            f"{name} must be a fastsurrogate Potential (a model, a surrogate, or "
            f"Potential.from_callable(f, dim)); got {type(potential).__name__}")
    if dim is not None and potential.dim != dim:
        raise ValueError(f"{name} has dim {potential.dim}; the potential has {dim}")
    return potential


def check_metric(metric, names, dim):
    """A metric name from `names`, or a fixed inverse metric: a positive (dim,)
    diagonal or a symmetric (dim, dim) array (definiteness is checked by the chain),
    or a LowRankMetric."""
    if isinstance(metric, LowRankMetric):
        if metric.dim != dim:
            raise ValueError(f"the low-rank metric has dim {metric.dim}, the potential {dim}")
        return metric
    if isinstance(metric, str):
        if metric not in names:
            raise ValueError(f"metric must be one of {names} or an array, got {metric!r}")
        return metric
    m = real_array("metric", metric, allow_nonfinite=True)
    if m.shape not in ((dim,), (dim, dim)):
        raise ValueError(f"a metric array must have shape ({dim},) or ({dim}, {dim})")
    if not np.all(np.isfinite(m)):
        raise ValueError("the metric array contains NaN or inf")
    if m.ndim == 2 and not np.allclose(m, m.T, rtol=1e-12, atol=0.0):
        raise ValueError("a dense metric must be symmetric")
    # definiteness here, before any evaluation of the potential
    if m.ndim == 1 and not np.all(m > 0):
        raise ValueError("a diagonal metric must be positive")
    if m.ndim == 2 and np.linalg.eigvalsh(m).min() <= 0:
        raise ValueError("a dense metric must be positive definite")
    return m


def check_tree_depth(max_tree_depth):
    """NUTS's maximum tree depth: an int in 1..30."""
    depth = check_int("max_tree_depth", max_tree_depth, 1)
    if depth > 30:
        raise ValueError(f"max_tree_depth must be <= 30, got {max_tree_depth}")
    return depth


def check_explore(explore):
    """The exploration kernel of a surrogate sampler: "hmc" or "nuts"."""
    if explore not in ("hmc", "nuts"):
        raise ValueError(f'explore must be "hmc" or "nuts", got {explore!r}')
    return explore


def check_init(init, dim, chains):
    """User initial points as a (chains, dim) array (None stays None)."""
    if init is None:
        return None
    try:
        booleans = np.asarray(init).dtype.kind == "b"
    except (TypeError, ValueError):         # ragged: real_array says so
        booleans = False
    if booleans:
        raise TypeError("init must be real numbers, not booleans (True / False), as seed is")
    init = real_array("init", init, allow_nonfinite=True)
    if init.shape == (dim,):
        init = np.tile(init, (chains, 1))
    if init.shape != (chains, dim):
        raise ValueError(f"init must have shape ({dim},) or ({chains}, {dim}), got {init.shape}")
    if not np.all(np.isfinite(init)):
        raise ValueError("init contains NaN or inf")
    return init.copy()

