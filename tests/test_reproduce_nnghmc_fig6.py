"""NNgHMC paper Figure 6 (``fastsurrogate reproduce nnghmc-fig6``): the
GARCH(2, 1) series of section 4.3, its summary statistics beside the
model's, and the conditional sd drawn with it."""
import argparse

import numpy as np
import pytest

from fastsurrogate.reproduce import _nnghmc_fig6 as f6
from fastsurrogate.reproduce._plots import markdown_tables


def test_conditional_sd_is_the_garch_recursion():
    y = np.array([0.5, -1.0, 0.2, 0.0])
    a0, a, b = 0.1, [0.2, 0.1], [0.5]
    s2 = [a0 / (1 - 0.8)] * 4
    want = []
    for t in range(4):
        ym1 = y[t - 1] ** 2 if t >= 1 else s2[0]
        ym2 = y[t - 2] ** 2 if t >= 2 else s2[0]
        sm1 = want[t - 1] ** 2 if t >= 1 else s2[0]
        want.append(np.sqrt(a0 + 0.2 * ym1 + 0.1 * ym2 + 0.5 * sm1))
    np.testing.assert_allclose(f6.conditional_sd(y, a0, a, b), want, rtol=1e-14)


def test_table_and_plot(tmp_path):
    args = argparse.Namespace(n_obs=1000, seed=2019, out_dir=str(tmp_path))
    text = f6.reproduce(args)
    (head, rows), = markdown_tables(text)
    assert head[-1] == "paper" and [r[0] for r in rows] == ["the series (T = 1000, seed 2019)",
                                                           "the model"]
    series, model = rows
    # the series' variance is near the model's 0.5 (a 1000-step GARCH estimate
    # is noisy: its sd here is about 0.05), it is uncorrelated, and y^2 is not
    assert float(model[2]) == pytest.approx(0.5)
    assert abs(float(series[2]) - 0.5) < 0.2
    assert abs(float(series[4])) < 0.1 < float(series[5])
    assert float(model[3].split()[0]) > 0          # fat tails: positive excess kurtosis
    pytest.importorskip("matplotlib")
    assert (tmp_path / "nnghmc-fig6-series.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="n-obs"):
        f6.reproduce(argparse.Namespace(n_obs=3, seed=1, out_dir=None))
