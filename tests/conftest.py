import os
from pathlib import Path

import numpy as np
import pytest


def _data_dir():
    env = os.environ.get("FASTSURROGATE_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent      # the repo root
    for cand in (here.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"):
        if cand.is_dir():
            return cand
    return here.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir():
    d = _data_dir()
    if not d.is_dir():
        pytest.skip(f"shared data folder {d} is absent")
    return d


def mcse_check(draws, truth, n_se=4.0):
    """Assert the mean of draws (chains, n, dim) is within n_se MCSE of truth."""
    from fastsurrogate import diagnostics
    m = draws.mean(axis=(0, 1))
    se = diagnostics.mcse_mean(draws)
    z = (m - truth) / se
    assert np.all(np.abs(z) < n_se), f"means off by {z} MCSE"
    return z
