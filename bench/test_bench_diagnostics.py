"""pytest-benchmark: the summary table on (4 chains, 5000 draws, 50 parameters)."""
import numpy as np
import pytest

from fastsurrogate import diagnostics


@pytest.mark.benchmark(group="diagnostics-summary")
def test_summary_4x5000x50(benchmark):
    x = np.random.default_rng(0).standard_normal((4, 5000, 50))
    table = benchmark(diagnostics.summary, x)
    assert np.all(np.abs(np.asarray(table["r_hat"]) - 1) < 0.01)
