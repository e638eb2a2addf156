"""A Python potential for tests/test_checkpoint_processes.py's killed run,
in a module of its own so that the run's subprocess imports only the
package and this (the test modules import ArviZ, pytest, ...: seconds)."""
import os
import time

import fastsurrogate as fs


def slow_gauss(q):
    """N(1, 0.5^2) per coordinate; sleeps FS_TEST_SLOW seconds per call when
    that is set (the killed run only: the values are the same)."""
    pause = float(os.environ.get("FS_TEST_SLOW", "0"))
    if pause:
        time.sleep(pause)
    r = (q - 1.0) / 0.25
    return 0.5 * float(q @ q - 2 * q.sum() + q.size) / 0.25, r


def gauss_run(**kw):
    """HMC on slow_gauss: 2 chains, 100 warm-up iterations, 300 draws, seed 7."""
    pot = fs.Potential.from_callable(slow_gauss, 2)
    return fs.HMC(pot, n_steps=5).sample(300, 100, chains=2, seed=7, progress=False, warn=False,
                                         **kw)
