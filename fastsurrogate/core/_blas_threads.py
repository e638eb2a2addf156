"""Thread count of the BLAS behind SciPy (and so behind the fs_blas table).

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
    """(get, set) of the OpenBLAS bundled with SciPy, or None when there is none."""
    if _state["looked"]:
        return _state["funcs"]
    _state["looked"] = True
    try:
        import scipy
        import scipy.linalg.cython_blas  # noqa: F401  (makes sure the library is loaded)
    except ImportError:
        return None
    libs = os.path.join(os.path.dirname(scipy.__file__), os.pardir, "scipy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_openblas", "openblas"):
            get = getattr(lib, prefix + "_get_num_threads", None)
            put = getattr(lib, prefix + "_set_num_threads", None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                _state["funcs"] = (get, put)
                return _state["funcs"]
    return None


@contextmanager
def blas_threads(n):
    """Run the block with SciPy's OpenBLAS on ``n`` threads (None: unchanged).

    The count is process-wide; nested and concurrent blocks share it (the
    outermost saves and restores the previous count).  A no-op when SciPy's
    BLAS is not a bundled OpenBLAS.
    """
    funcs = _functions() if n is not None else None
    if funcs is None:
        yield
        return
    get, put = funcs
    with _lock:
        if _state["depth"] == 0:
            _state["saved"] = get()
        _state["depth"] += 1
        put(int(n))
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["saved"] is not None:
                put(_state["saved"])
