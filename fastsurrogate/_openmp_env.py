"""OpenMP waiting policy, set before any fastsurrogate extension loads.

The data-sum kernels (csrc/fs_glm.c) run ``#pragma omp parallel`` once per
potential evaluation.  With GNU OpenMP's default policy a thread that
reaches the end of a region spins for a while before sleeping; on a busy
machine (other processes on the cores) a spinning thread takes CPU time
from the thread that is still working: 2 threads took 1.4-2.1 times as long
as 1 (bench/busy_threads.py, shared 2-core machine), against 0.75-1.01
times with the passive policy.  With the passive policy waiting threads
sleep at once; on an idle machine the cost is a wake-up per region
(microseconds, against the 1-3 ms of a data pass).

So, at import and only when the user has set neither ``OMP_WAIT_POLICY``
nor ``GOMP_SPINCOUNT``, fastsurrogate sets ``OMP_WAIT_POLICY=PASSIVE``.
The OpenMP runtime reads its environment once, when it is loaded: if
another package loaded it earlier, the setting has no effect (then set
``OMP_WAIT_POLICY=PASSIVE`` yourself before starting Python).
``WAIT_POLICY`` records what happened.
"""
import os

__all__ = ["WAIT_POLICY"]


def _runtime_loaded():
    """True when an OpenMP runtime is already mapped into this process (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return False
    return any(name in maps for name in ("libgomp", "libomp.so", "libiomp5"))


def _set_wait_policy():
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return "user: OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s" % (
            os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
    if _runtime_loaded():
        return "not set: an OpenMP runtime was loaded before fastsurrogate"
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return "PASSIVE (set by fastsurrogate)"


WAIT_POLICY = _set_wait_policy()
