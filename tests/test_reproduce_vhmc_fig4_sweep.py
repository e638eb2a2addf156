"""reproduce vhmc-fig4's sweep (the paper's Figure 4: error at T against the
mixing rate): the mixing rate and the errors at T against NumPy on synthetic
draws, and a tiny sweep on a small logistic regression."""
import argparse
import math

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.reproduce._plots import markdown_tables, number
from fastsurrogate.reproduce._vhmc_fig4_sweep import (QUICK_SETTINGS, errors_at, mixing_rate,
                                                       sweep_report)


def _ar1(rho, n, dim, seed):
    rng = np.random.default_rng(seed)
    x = np.empty((n, dim))
    x[0] = rng.standard_normal(dim)
    e = rng.standard_normal((n, dim)) * math.sqrt(1 - rho ** 2)
    for t in range(1, n):
        x[t] = rho * x[t - 1] + e[t]
    return x


def test_mixing_rate_is_mean_ess_per_second_of_ar1_draws():
    # an AR(1) chain's ESS is n (1 - rho) / (1 + rho); independent draws: n
    n, secs = 20000, 4.0
    for rho in (0.0, 0.8):
        rate = mixing_rate(_ar1(rho, n, 4, seed=3), secs)
        want = n * (1 - rho) / (1 + rho) / secs
        assert abs(rate / want - 1) < 0.12, (rho, rate, want)
    # (chains, draws, dim) is accepted too, and the rate scales as 1 / seconds
    d = _ar1(0.5, 4000, 3, seed=4)
    assert mixing_rate(d[None], 2.0) == pytest.approx(2 * mixing_rate(d, 4.0))


def test_errors_at_budget_are_the_papers_rem_and_rec_of_the_draws_done():
    rng = np.random.default_rng(5)
    draws = rng.standard_normal((500, 4)) @ np.diag([1.0, 2.0, 0.5, 3.0]) + [1, -2, 3, 0.5]
    times = np.linspace(0.01, 5.0, 500)
    truth = dict(mean=np.array([1.1, -1.9, 2.8, 0.4]), cov=np.diag([1.0, 4.0, 0.25, 9.0]))
    k, rem, rec = errors_at(draws, times, 2.5, truth)
    assert k == int(np.sum(times <= 2.5))
    used = draws[:k]
    assert rem == pytest.approx(np.abs(used.mean(0) - truth["mean"]).sum()
                                / np.abs(truth["mean"]).sum())
    assert rec == pytest.approx(np.abs(np.cov(used, rowvar=False) - truth["cov"]).sum()
                                / np.abs(truth["cov"]).sum())
    # fewer than 10 draws by the budget: no errors
    assert errors_at(draws, times, 0.05, truth)[1:] == (None, None)


def test_tiny_sweep_writes_finite_rows_and_a_png(tmp_path):
    X, y, _ = fs.datasets.simulate_logistic(n=3000, d=3, seed=2)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1)
    lap = fs.surrogates.laplace_approximation(model)
    prob = dict(model=model, lap=lap, t_lap=0.0, truth=dict(mean=lap.mean, cov=lap.cov))
    args = argparse.Namespace(quick=True, sweep_budget=0.4, sweep_keep=3000, train=100,
                              n_hidden=60, vhmc_draws=4000, seed=1, no_sweep=False,
                              out_dir=str(tmp_path))
    runs = {"HMC tuned": fs.HMC(model, n_steps=10, metric=lap.cov).sample(
                200, 100, chains=1, seed=0, init=lap.mean, progress=False, warn=False),
            "VHMC": fs.VHMC(model, laplace_tail=False, n_hidden=60, n_s=500, n_train=100,
                            laplace=lap, n_steps=10).sample(
                200, 100, chains=1, seed=0, progress=False, warn=False)}
    text = "\n".join(sweep_report(prob, runs, args))
    head, rows = markdown_tables(text)[-1]
    assert head[-1] == "paper" and len(rows) == sum(map(len, QUICK_SETTINGS.values()))
    for r in rows:
        assert r[-1].startswith("n/a")
        for j in (3, 4, 5):                    # mixing rate, REM, REC
            assert math.isfinite(number(r[j])) and number(r[j]) > 0, r
    assert all("bias" in r[6] for r in rows if r[0] == "SGLD")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "vhmc-fig4-sweep.png").stat().st_size > 1000
    assert "vhmc-fig4-sweep.png" in text
