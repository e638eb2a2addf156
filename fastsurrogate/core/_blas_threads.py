"""Thread count of the BLAS behind SciPy (and so behind the fs_blas table)
and of NumPy's own bundled OpenBLAS.

The online trainers call dgemm/dsyrk on matrices of a few hundred to a few
thousand rows once per point.  At those sizes OpenBLAS's worker threads cost
more in wake-ups than they save, and on a loaded machine (or with chains
already running in threads) they oversubscribe the cores: an SMW update
with s = 200, d = 10 measured 0.11 ms on one thread and 1.25 ms with the
default threads on a busy 2-core machine.  :func:`blas_threads` runs a block
with a given count and restores the old one.
"""
import ctypes
import glob
import os
import threading
from contextlib import contextmanager

__all__ = ["blas_threads"]

_lock = threading.Lock()
_state = {"funcs": None, "looked": False, "depth": 0, "saved": None}


def _functions():
    """[(get, set), ...] of the OpenBLAS libraries bundled with SciPy (behind
    the fs_blas table) and with NumPy (behind numpy.linalg and ``@``), empty
    when there are none.  NumPy's has its own thread pool: left alone, its
    threads spin beside the chains' (measured: a 400 x 400 Cholesky in
    numpy.linalg took 0.52-0.64 s at load 5 against 0.008-0.012 s on one
    thread)."""
    if _state["looked"]:
        return _state["funcs"]
    _state["looked"] = True
    _state["funcs"] = []
    folders = []
    try:
        import scipy
        import scipy.linalg.cython_blas  # noqa: F401  (makes sure the library is loaded)
        folders.append(os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs"))
    except ImportError:
        pass
    import numpy
    folders.append(os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs"))
    for libs in folders:
        for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
            pair = _pair(path)
            if pair is not None:
                _state["funcs"].append(pair)
                break
    return _state["funcs"]


def _pair(path):
    """(get, set) of the OpenBLAS at ``path`` (either symbol flavour, 32- or
    64-bit integer interface), or None."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for prefix in ("scipy_openblas", "openblas"):
        for suffix in ("", "64_"):
            get = getattr(lib, prefix + "_get_num_threads" + suffix, None)
            put = getattr(lib, prefix + "_set_num_threads" + suffix, None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


@contextmanager
def blas_threads(n):
    """Run the block with SciPy's and NumPy's OpenBLAS on ``n`` threads (None: unchanged).

    The count is process-wide; nested and concurrent blocks share it (the
    outermost saves and restores the previous counts).  A no-op for a BLAS
    that is not a bundled OpenBLAS.
    """
    funcs = _functions() if n is not None else None
    if not funcs:
        yield
        return
    with _lock:
        if _state["depth"] == 0:
            _state["saved"] = [get() for get, _ in funcs]
        _state["depth"] += 1
        for _, put in funcs:
            put(int(n))
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["saved"] is not None:
                for (_, put), old in zip(funcs, _state["saved"]):
                    put(old)
