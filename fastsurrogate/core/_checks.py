"""Argument checks shared by the compiled classes (run before any C code)."""
import numpy as np


def real_array(name, a, ndim=None):
    """A C-contiguous float64 copy of `a`, checked to be real, finite, of `ndim` dims."""
    if a is None:
        raise TypeError(f"{name} must be an array, got None")
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = np.array(arr, dtype=np.float64, order="C", copy=True)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def activation_code(activation, table):
    """(name, code) of `activation` in `table` (name -> C code), case-insensitive."""
    if not isinstance(activation, str):
        raise TypeError(f"activation must be a string, got {type(activation).__name__}")
    key = activation.lower()
    if key not in table:
        raise ValueError(f"unknown activation {activation!r}; choose from {sorted(table)}")
    return key, table[key]
