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


@pytest.fixture(autouse=True)
def _pinned_defaults(request, monkeypatch):
    """NUTS's surrogate="auto" decides by one timing before the run.  Outside
    test_surrogate_nuts.py (which tests that decision) the suite pins it to
    exact NUTS, so that no test's draws depend on the machine's load; a
    test that wants the surrogate passes surrogate=True.  Outside
    test_checks.py the gradient check before a run is off."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    if module != "test_surrogate_nuts":
        from fastsurrogate.samplers import surrogate_nuts
        monkeypatch.setattr(surrogate_nuts, "DEFAULT_POLICY",
                            surrogate_nuts.SurrogatePolicy(cost_ratio=float("inf")))
    if module != "test_checks":
        # the gradient check before a run calls the potential ~15 times: the
        # suites that count a callback's calls (fault injection at the k-th
        # call, checkpoint replay) would count them too
        from fastsurrogate.samplers import _base
        monkeypatch.setattr(_base, "check_gradient_before", lambda potential: None)


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


# -- counts of the reliability suites (issue 15), printed after every run -------------

_RELIABILITY_FILES = {"test_bad_inputs.py": "bad-input cases",
                      "test_faults.py": "fault-injection scenarios"}


def pytest_collection_modifyitems(session, config, items):
    counts = {}
    for item in items:
        name = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        if name in _RELIABILITY_FILES:
            counts[name] = counts.get(name, 0) + 1
    config._fs_reliability_counts = counts


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts = getattr(config, "_fs_reliability_counts", {})
    if counts:
        terminalreporter.write_line(
            "collected: " + "; ".join(f"{_RELIABILITY_FILES[k]} {v}" for k, v in sorted(counts.items())))
