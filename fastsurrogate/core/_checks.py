"""Argument checks shared by the compiled classes and the Python layer (run before any C code)."""
import numpy as np


def _shape_text(shape):
    """(n, 4) for (None, 4); (4,) for (4,)."""
    parts = ["n" if k is None else str(k) for k in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


_FINITE_BLOCK = 1 << 20      # entries per block of the finiteness check (8 MB of float64)


def _all_finite(arr):
    """np.isfinite(arr).all() in blocks of a C-contiguous array: its boolean
    temporary is one block, not an eighth of the array (100 MB for a
    0.8 GB data matrix)."""
    flat = arr.reshape(-1)
    for start in range(0, flat.size, _FINITE_BLOCK):
        if not np.isfinite(flat[start:start + _FINITE_BLOCK]).all():
            return False
    return True


def real_array(name, a, ndim=None, shape=None, *, copy=True, allow_nonfinite=False):
    """`a` as a C-contiguous float64 ndarray of real numbers, checked.

    The one array check of the package.  `name` is the argument's name in
    the messages.

    - TypeError when `a` is None, does not convert to an array (ragged
      lists), has a dtype that is not real numeric (strings, objects, dates)
      or is complex.  bool, int, uint and float of any width are converted.
    - ndim: required number of dimensions (ValueError otherwise).
    - shape: required shape, None in an entry accepting any length on that
      axis, e.g. (None, 4) (ValueError "must have shape (n, 4)"); implies ndim.
    - copy: True (default) always returns a fresh array the caller owns;
      False returns `a` itself when it already is a C-contiguous float64
      ndarray (a caller that keeps it should make it read-only).
    - allow_nonfinite: accept NaN and inf; by default they are a ValueError
      naming the first one.
    """
    if a is None:
        raise TypeError(f"{name} must be an array of real numbers, got None")
    try:
        arr = np.asarray(a)
    except (TypeError, ValueError) as exc:     # ragged lists and the like
        raise TypeError(f"{name} must be an array of real numbers ({exc})") from None
    kind = arr.dtype.kind
    if kind == "c":
        raise TypeError(f"{name} must be real numeric, got a complex array (dtype {arr.dtype})")
    if kind not in "biuf":
        raise TypeError(f"{name} must be an array of real numbers; "
                        f"dtype {arr.dtype} is not real numeric")
    if copy:
        arr = np.array(arr, dtype=np.float64, order="C", copy=True)
    else:
        arr = np.asarray(arr, dtype=np.float64, order="C")
    if shape is not None:
        if arr.ndim != len(shape) or any(k is not None and k != m
                                         for k, m in zip(shape, arr.shape)):
            raise ValueError(f"{name} must have shape {_shape_text(shape)}, got {arr.shape}")
    elif ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if not allow_nonfinite and not _all_finite(arr):
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        entry = f"{name}[{', '.join(map(str, where))}]" if where else name
        raise ValueError(f"{name} must be finite; {entry} = {arr[where]} "
                         "(non-finite: NaN or inf)")
    return arr


def repeated(names):
    """The names that occur more than once in ``names``, in order of first repeat."""
    seen, out = set(), []
    for n in names:
        if n in seen and n not in out:
            out.append(n)
        seen.add(n)
    return out


def activation_code(activation, table):
    """(name, code) of `activation` in `table` (name -> C code), case-insensitive."""
    if not isinstance(activation, str):
        raise TypeError(f"activation must be a string, got {type(activation).__name__}")
    key = activation.lower()
    if key not in table:
        raise ValueError(f"unknown activation {activation!r}; choose from {sorted(table)}")
    return key, table[key]
