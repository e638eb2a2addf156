"""Exact HMC as a distribution, its reproducibility, and its failure modes."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.core._hmc import Chain, new_trace


def correlated_gaussian(d=10, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d, d))
    cov = A @ A.T / d + np.diag(np.linspace(0.2, 2.0, d))
    mean = rng.uniform(-2, 2, d)
    return mean, cov


def cov_mcse_z(draws, mean, cov):
    """z-scores of the sample covariance entries, with MCSE from the ESS of
    the centred products (true mean known)."""
    c = draws - mean
    d = draws.shape[-1]
    z = np.zeros((d, d))
    for i in range(d):
        for j in range(i, d):
            prod = c[..., i] * c[..., j]
            se = diagnostics.mcse_mean(prod)
            z[i, j] = z[j, i] = (prod.mean() - cov[i, j]) / se
    return z


def test_hmc_10d_correlated_gaussian_mean_and_covariance():
    mean, cov = correlated_gaussian()
    target = fs.models.Gaussian(mean, cov)
    res = fs.sample(target, method="hmc", n_draws=3000, n_warmup=1000, chains=4, seed=11,
                    n_steps=10, metric="dense", progress=False)
    assert res.draws.shape == (4, 3000, 10)
    zm = (res.draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(res.draws)
    assert np.all(np.abs(zm) < 4), zm
    zc = cov_mcse_z(res.draws, mean, cov)
    assert np.all(np.abs(zc) < 4), zc
    assert np.all(diagnostics.rhat(res.draws) < 1.01)
    assert res.n_divergent == 0


@pytest.mark.parametrize("adaptation", ["stan", "fisher"])
def test_the_metric_adapts_to_scales(adaptation):
    scales = np.array([0.01, 1.0, 100.0])
    target = fs.models.Gaussian(np.zeros(3), scales ** 2)
    res = fs.HMC(target, n_steps=8, adaptation=adaptation).sample(
        2000, n_warmup=1000, chains=2, seed=3, progress=False)
    inv = res.inv_metric[0]
    ratio = np.diag(inv.dense()) if adaptation == "fisher" else np.array(inv)
    ratio = ratio / scales ** 2
    assert np.all((ratio > 0.5) & (ratio < 2)), ratio
    z = res.draws.mean(axis=(0, 1)) / diagnostics.mcse_mean(res.draws)
    assert np.all(np.abs(z) < 4)
    sd_hat = res.draws.std(axis=(0, 1))
    assert np.all(np.abs(sd_hat / scales - 1) < 4 * diagnostics.mcse_sd(res.draws) / scales)


def test_paper_fixed_settings_random_steps():
    # the papers' setting: no adaptation, L drawn uniformly from 1..L
    target = fs.models.StandardNormal(50)
    res = fs.sample(target, method="hmc", n_draws=500, n_warmup=0, chains=1, seed=0, step_size=0.045,
                    n_steps=6, random_n_steps=True, adapt=False, progress=False)
    ns = res.stats["n_steps"].ravel()
    assert ns.min() == 1 and ns.max() == 6
    counts = np.bincount(ns, minlength=7)[1:]
    # uniform on 1..6: each count ~ Binomial(500, 1/6); 5 sd bound
    assert np.all(np.abs(counts - 500 / 6) < 5 * np.sqrt(500 * (1 / 6) * (5 / 6)))
    assert np.all(res.stats["step_size"] == 0.045)
    fixed = fs.sample(target, method="hmc", n_draws=50, n_warmup=0, chains=1, seed=0, step_size=0.045,
                      n_steps=6, random_n_steps=False, adapt=False, progress=False)
    assert np.all(fixed.stats["n_steps"] == 6)


def test_seed_reproduces_and_chain0_matches_single_chain():
    target = fs.models.Gaussian(np.zeros(4), np.ones(4))
    kw = dict(n_draws=300, n_warmup=200, seed=42, progress=False)
    one = fs.sample(target, method="hmc", chains=1, **kw)
    many = fs.sample(target, method="hmc", chains=3, **kw)
    again = fs.sample(target, method="hmc", chains=3, **kw)
    np.testing.assert_array_equal(one.draws[0], many.draws[0])
    np.testing.assert_array_equal(many.draws, again.draws)
    assert not np.array_equal(many.draws[0], many.draws[1])
    gen = fs.sample(target, method="hmc", chains=2, n_draws=10, n_warmup=10, progress=False,
                    seed=np.random.default_rng(5))
    assert gen.draws.shape == (2, 10, 4)


def _sequential_half_sq(q):
    """0.5 sum q_i^2 summed left to right, as the C model does.  Not q @ q:
    NumPy's dot (OpenBLAS ddot) sums in its own order, which on AVX-512
    machines (AMD EPYC family 25 model 17, NumPy 2.4.6) differs from the
    sequential sum in the last bit for 26 % of random q, and a last-bit
    difference in U changes the adapted step size and so every draw."""
    s = 0.0
    for x in q:
        s += x * x
    return 0.5 * s


def test_callable_potential_matches_compiled_one_bit_for_bit():
    compiled = fs.models.StandardNormal(5)
    py = fs.Potential.from_callable(lambda q: (_sequential_half_sq(q), q.copy()), 5)
    kw = dict(n_draws=200, n_warmup=100, chains=2, seed=9, progress=False)
    a = fs.sample(compiled, method="hmc", **kw)
    b = fs.sample(py, method="hmc", **kw)
    np.testing.assert_array_equal(a.draws, b.draws)


def test_delayed_acceptance_is_exact_and_saves_evaluations():
    # drive: a slightly wrong Gaussian; judge: the exact one
    mean, cov = correlated_gaussian(4, seed=2)
    exact = fs.models.Gaussian(mean, cov)
    approx = fs.models.Gaussian(mean + 0.05, cov * 1.1)
    gens = [np.random.default_rng(s) for s in range(4)]
    traces = []
    for g in gens:
        ch = Chain(approx, exact, mean, g, step_size=0.3, n_steps=8,
                   inv_metric=np.diag(cov), delayed_acceptance=True)
        tr = new_trace(5000, 4)
        ch.run(tr, 0, 5000)
        traces.append(tr)
    draws = np.stack([t["draws"] for t in traces])
    z = (draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(draws)
    assert np.all(np.abs(z) < 4), z
    zc = cov_mcse_z(draws, mean, cov)
    assert np.all(np.abs(zc) < 4), zc
    evaluated = np.concatenate([t["judge_evaluated"] for t in traces])
    assert 0 < evaluated.mean() < 1


def test_drive_judge_split_is_exact():
    # a wrong drive gradient with the exact Metropolis test still samples the target
    mean, cov = correlated_gaussian(3, seed=4)
    exact = fs.models.Gaussian(mean, cov)
    approx = fs.models.Gaussian(mean - 0.1, np.diag(np.diag(cov)))
    draws = []
    for s in range(4):
        ch = Chain(approx, exact, mean, np.random.default_rng(100 + s), step_size=0.2,
                   n_steps=6, random_n_steps=True)
        tr = new_trace(6000, 3)
        ch.run(tr, 0, 6000)
        assert tr["judge_evaluated"].all()
        draws.append(tr["draws"])
    draws = np.stack(draws)
    z = (draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(draws)
    assert np.all(np.abs(z) < 4), z
    assert np.all(np.abs(cov_mcse_z(draws, mean, cov)) < 4)


# -- failure modes ------------------------------------------------------------

def test_callback_exception_reaches_caller_with_draws_so_far():
    calls = {"n": 0}

    def f(q):
        calls["n"] += 1
        if calls["n"] > 400:
            raise KeyError("model blew up")
        return 0.5 * q @ q, q

    pot = fs.Potential.from_callable(f, 3)
    with pytest.raises(KeyError, match="model blew up") as info:
        fs.sample(pot, method="hmc", n_draws=1000, n_warmup=0, chains=1, seed=1, adapt=False,
                  step_size=0.5, n_steps=5, progress=False)
    res = info.value.result
    assert res.interrupted
    # every iteration before the failing call is kept (at least 1 gradient
    # per iteration: fewer than 400 rows), not only the finished chunks
    assert 0 < res.n_draws < 400 and res.n_done.tolist() == [res.n_draws]
    assert np.all(np.isfinite(res.draws))
    assert 400 - 12 < np.sum(res.stats["n_steps"]) <= 400


def test_nan_from_callback_is_a_counted_divergence():
    def f(q):
        if q[0] > 1.0:
            return np.nan, np.full(2, np.nan)
        return 0.5 * q @ q, q

    pot = fs.Potential.from_callable(f, 2)
    res = fs.sample(pot, method="hmc", n_draws=2000, n_warmup=0, chains=1, seed=2, adapt=False,
                    step_size=0.3, n_steps=5, init=np.zeros(2), progress=False)
    assert res.n_divergent > 0
    assert np.all(res.draws[..., 0] <= 1.0)
    assert np.all(np.isfinite(res.draws))
    assert np.all(res.stats["accepted"][res.stats["divergent"] == 1] == 0)


def test_callback_wrong_gradient_shape_is_a_clear_error():
    pot = fs.Potential.from_callable(lambda q: (0.0, np.zeros(3)), 2)
    with pytest.raises(ValueError, match=r"gradient of shape \(3,\); expected \(2,\)"):
        pot.grad(np.zeros(2))
    with pytest.raises(ValueError, match="gradient of shape"):
        fs.sample(pot, method="hmc", n_draws=10, n_warmup=0, chains=1, init=np.zeros(2), progress=False)
    bad_tuple = fs.Potential.from_callable(lambda q: 1.0, 2)
    with pytest.raises(TypeError, match="tuple"):
        bad_tuple.value(np.zeros(2))


def test_keyboard_interrupt_returns_partial_result():
    calls = {"n": 0}

    def f(q):
        calls["n"] += 1
        if calls["n"] == 3000:
            raise KeyboardInterrupt
        return 0.5 * q @ q, q

    pot = fs.Potential.from_callable(f, 2)
    res = fs.sample(pot, method="hmc", n_draws=2000, n_warmup=100, chains=2, seed=3, n_steps=5,
                    progress=False)
    assert res.interrupted
    assert res.n_draws < 2000
    # chains run in turn (a Python potential): chain 0's draws are all kept,
    # chain 1 stopped in its warm-up; the padding after n_done is NaN
    assert res.n_done[0] == res.n_draws and res.n_done[1] < res.n_done[0]
    for k in range(2):
        assert np.all(np.isfinite(res.draws[k, :res.n_done[k]]))
        assert np.all(np.isnan(res.draws[k, res.n_done[k]:]))


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(n_steps=0), ValueError, "n_steps"),
    (dict(n_steps=2.5), TypeError, "n_steps"),
    (dict(step_size=-1.0), ValueError, "step_size"),
    (dict(step_size=np.nan), ValueError, "step_size"),
    (dict(metric="full"), ValueError, "metric"),
    (dict(metric=np.ones(3)), ValueError, "metric"),
    (dict(target_accept=1.5), ValueError, "target_accept"),
])
def test_sampler_argument_errors(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        fs.HMC(fs.models.StandardNormal(2), **kwargs)


def test_sample_argument_errors():
    target = fs.models.StandardNormal(2)
    with pytest.raises(TypeError, match="Potential"):
        fs.HMC(lambda q: q)
    with pytest.raises(ValueError, match="chains"):
        fs.sample(target, chains=0)
    with pytest.raises(ValueError, match="init"):
        fs.sample(target, init=np.zeros(3), progress=False)
    with pytest.raises(ValueError, match="init"):
        fs.sample(target, init=np.array([np.nan, 0.0]), progress=False)
    with pytest.raises(ValueError, match="unknown method"):
        fs.sample(target, method="slice")
    with pytest.raises(TypeError, match="unexpected"):
        fs.sample(target, n_hiden=3)
    with pytest.raises(TypeError, match="seed"):
        fs.sample(target, seed="abc", progress=False)


def test_potential_input_validation():
    g = fs.models.StandardNormal(3)
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        g.value(np.zeros(4))
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        g.grad(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="positive definite"):
        fs.models.Gaussian(np.zeros(2), np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="NaN"):
        fs.models.Gaussian(np.array([0.0, np.nan]), np.ones(2))
    with pytest.raises(ValueError, match="dim"):
        fs.Potential.from_callable(lambda q: (0, q), 0)
    with pytest.raises(TypeError, match="callable"):
        fs.Potential.from_callable(3, 2)


def test_result_summary_and_arviz():
    target = fs.models.Gaussian(np.array([1.0, 2.0]), np.array([1.0, 4.0]))
    res = fs.sample(target, n_draws=500, n_warmup=300, chains=2, seed=0, progress=False)
    table = res.summary()
    assert set(["mean", "sd", "ess_bulk", "ess_tail", "r_hat", "mcse_mean"]) <= set(
        table.to_dict())
    assert table.overall["ess_min"] > 100
    assert table.overall["min_ess_per_second"] > 0
    assert "sample" in res.timings and "warmup" in res.timings
    az = pytest.importorskip("arviz")
    idata = res.to_arviz()
    assert idata.posterior["q"].shape == (2, 500, res.dim)       # q[0..] gathered
    assert bool(idata.sample_stats["diverging"].sum() == 0)
    assert np.allclose(az.summary(idata, round_to="none")["mean"].values,
                       res.draws.mean(axis=(0, 1)))
