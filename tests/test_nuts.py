"""NUTS (Stan's multinomial variant) as a distribution, its tree statistics,
its divergences, its arguments, and the posteriordb reference posteriors."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.core._hmc import Chain, new_trace
from fastsurrogate.models import posteriordb as pdb

from test_posteriordb_hmc import compare_to_reference


def scaled_equicorrelated(d=10, rho=0.9):
    """Mean, covariance with all correlations rho and sds from 0.1 to 10."""
    sd = np.logspace(-1, 1, d)
    corr = np.full((d, d), rho) + (1 - rho) * np.eye(d)
    return np.linspace(-3, 3, d), corr * np.outer(sd, sd)


def test_nuts_10d_correlated_gaussian_means_and_variances():
    mean, cov = scaled_equicorrelated()
    res = fs.sample(fs.models.Gaussian(mean, cov), "nuts", n_draws=1500, n_warmup=1000,
                    chains=4, seed=7, progress=False)
    x = res.draws
    assert x.shape == (4, 1500, 10)
    zm = (x.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(x)
    assert np.all(np.abs(zm) < 4), zm
    sq = (x - mean) ** 2                       # E[(x - mu)^2] = var, MCSE from its ESS
    zv = (sq.mean(axis=(0, 1)) - np.diag(cov)) / diagnostics.mcse_mean(sq)
    assert np.all(np.abs(zv) < 4), zv
    assert np.all(diagnostics.rhat(x) < 1.01)
    assert res.n_divergent == 0
    # the trajectory length adapts: far more than one step, never the cap
    assert 1 < res.stats["tree_depth"].mean() < 10


@pytest.mark.parametrize("metric", ["unit", "diag", "dense"])
def test_one_transition_leaves_the_target_invariant(metric):
    """Exact draws in, one transition each, exact draws out: with independent
    starts the output moments have iid standard errors.  A large step makes
    the energy errors (hence the exp(-H) weights) matter."""
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.array([[1.0, 0.6, 0.0], [0.6, 2.0, -0.5], [0.0, -0.5, 0.5]])
    target = fs.models.Gaussian(mean, cov)
    rng = np.random.default_rng(3)
    n = 8000
    starts = rng.multivariate_normal(mean, cov, size=n)
    inv_metric = {"unit": None, "diag": np.array([1.0, 1.5, 0.7]), "dense": cov}[metric]
    chain = Chain(target, target, starts[0], np.random.default_rng(4), step_size=0.9,
                  inv_metric=inv_metric, algorithm="nuts", max_tree_depth=6)
    tr = new_trace(n, 3)
    for i in range(n):
        chain.set_position(starts[i])
        chain.run(tr, i, 1)
    out = tr["draws"]
    assert np.mean(np.all(out == starts, axis=1)) < 0.5      # it does move
    assert 0.3 < tr["accept_prob"].mean() < 0.95             # energy errors are not small
    c = out - mean
    stats = [c[:, j] for j in range(3)]
    stats += [c[:, j] ** 2 - cov[j, j] for j in range(3)]
    stats += [c[:, 0] * c[:, 1] - cov[0, 1], c[:, 1] * c[:, 2] - cov[1, 2]]
    z = np.array([s.mean() / (s.std() / np.sqrt(n)) for s in stats])
    assert np.all(np.abs(z) < 4.5), z


def test_tree_depth_and_steps_without_u_turn():
    # a step far too small to turn within 2^5 - 1 steps: every tree is full
    target = fs.models.StandardNormal(4)
    res = fs.NUTS(target, step_size=0.01, adapt=False, max_tree_depth=5).sample(
        200, n_warmup=0, chains=1, seed=1, progress=False)
    assert np.all(res.stats["tree_depth"] == 5)
    assert np.all(res.stats["n_steps"] == 31)


def test_tree_depth_bounds_and_step_counts():
    mean, cov = scaled_equicorrelated(5)
    # a diagonal metric (Stan's windows): the low-rank default preconditions
    # this target so well that depth 4 is not reached
    res = fs.NUTS(fs.models.Gaussian(mean, cov), max_tree_depth=4, adaptation="stan").sample(
        500, n_warmup=300, chains=2, seed=5, progress=False)
    depth = res.stats["tree_depth"].astype(np.int64)
    steps = res.stats["n_steps"].astype(np.int64)
    assert depth.dtype == np.int64 and depth.min() >= 0 and depth.max() <= 4
    assert np.any(depth == 4)                  # the cap binds on this target
    # a completed tree has 2^depth - 1 steps; a rejected last subtree adds 1 .. 2^depth
    assert np.all(steps >= 2 ** depth - 1) and np.all(steps <= 2 ** (depth + 1) - 1)
    assert np.all(steps <= 15)
    assert np.all((res.stats["accept_prob"] >= 0) & (res.stats["accept_prob"] <= 1))
    # HMC results carry the field too, as zeros
    hmc = fs.sample(fs.models.StandardNormal(2), "hmc", 20, 20, chains=1, seed=1,
                    progress=False)
    assert np.all(hmc.stats["tree_depth"] == 0)


def test_divergences_with_a_huge_step():
    target = fs.models.StandardNormal(3)
    res = fs.NUTS(target, step_size=50.0, adapt=False).sample(100, n_warmup=0, chains=1,
                                                              seed=2, progress=False)
    assert res.stats["divergent"].mean() > 0.9
    assert res.n_divergent == res.stats["divergent"].sum()
    assert np.all(np.isfinite(res.draws))
    assert np.all(res.stats["accept_prob"] < 0.5)


def test_divergences_on_a_funnel():
    """Neal's funnel: v ~ N(0, 3^2), x_j | v ~ N(0, e^v).  The neck defeats a
    step size adapted to the mouth, so default NUTS reports divergences."""
    def funnel(q):
        v, x = q[0], q[1:]
        u = v * v / 18.0 + 0.5 * x.size * v + 0.5 * np.exp(-v) * (x @ x)
        g = np.empty_like(q)
        g[0] = v / 9.0 + 0.5 * x.size - 0.5 * np.exp(-v) * (x @ x)
        g[1:] = np.exp(-v) * x
        return u, g
    pot = fs.Potential.from_callable(funnel, 6)
    res = fs.sample(pot, "nuts", n_draws=500, n_warmup=500, chains=2, seed=4, progress=False)
    assert res.n_divergent > 0
    assert np.all(np.isfinite(res.draws))


def test_seed_reproduces_and_chain0_matches_single_chain():
    target = fs.models.Gaussian(np.zeros(3), np.array([1.0, 4.0, 0.25]))
    kw = dict(n_draws=200, n_warmup=200, seed=9, progress=False)
    one = fs.sample(target, "nuts", chains=1, **kw)
    many = fs.sample(target, "nuts", chains=2, **kw)
    again = fs.sample(target, "nuts", chains=2, **kw)
    np.testing.assert_array_equal(many.draws, again.draws)
    np.testing.assert_array_equal(one.draws[0], many.draws[0])
    assert one.method == "nuts"


def test_bad_arguments_raise():
    target = fs.models.StandardNormal(2)
    other = fs.models.StandardNormal(2)
    with pytest.raises(ValueError, match="max_tree_depth"):
        fs.NUTS(target, max_tree_depth=0)
    with pytest.raises(ValueError, match="max_tree_depth"):
        fs.NUTS(target, max_tree_depth=31)
    with pytest.raises(TypeError, match="max_tree_depth"):
        fs.NUTS(target, max_tree_depth=2.5)
    with pytest.raises(TypeError, match="n_steps"):
        fs.sample(target, "nuts", n_steps=5)
    with pytest.raises(TypeError):
        fs.NUTS(target, random_n_steps=True)
    with pytest.raises(ValueError, match="target_accept"):
        fs.NUTS(target, target_accept=1.5)
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="one potential"):
        Chain(target, other, np.zeros(2), g, algorithm="nuts")
    with pytest.raises(ValueError, match="algorithm"):
        Chain(target, target, np.zeros(2), g, algorithm="slice")
    with pytest.raises(TypeError, match="algorithm"):
        Chain(target, target, np.zeros(2), g, algorithm=1)
    with pytest.raises(ValueError, match="max_tree_depth"):
        Chain(target, target, np.zeros(2), g, algorithm="nuts", max_tree_depth=40)
    with pytest.raises(ValueError, match="do not apply"):
        Chain(target, target, np.zeros(2), g, algorithm="nuts", delayed_acceptance=True)
    c = Chain(target, target, np.zeros(2), g, algorithm="nuts", max_tree_depth=7)
    assert c.algorithm == "nuts" and c.max_tree_depth == 7


def test_potential_error_propagates():
    calls = [0]

    def f(q):
        calls[0] += 1
        if calls[0] > 50:
            raise RuntimeError("model failed")
        return 0.5 * q @ q, q.copy()
    pot = fs.Potential.from_callable(f, 2)
    with pytest.raises(RuntimeError, match="model failed") as info:
        fs.NUTS(pot, step_size=0.5, adapt=False).sample(100, n_warmup=0, chains=1, seed=1,
                                                        progress=False)
    assert np.all(np.isfinite(info.value.result.draws))


# posteriordb: default settings; fewer draws where the ESS allows (runtime)
POSTERIORS = [
    (pdb.SBLRC_BLR, 1000, 1000),
    (pdb.EightSchoolsNoncentered, 600, 800),
    (pdb.Garch11, 500, 500),
    (pdb.ArK, 500, 500),
    (pdb.GPRegr, 500, 800),
]


@pytest.mark.parametrize("cls, n_warmup, n_draws", POSTERIORS,
                         ids=[c.posterior_name for c, _, _ in POSTERIORS])
def test_nuts_reproduces_reference_posterior(data_dir, cls, n_warmup, n_draws):
    model = cls.from_posteriordb(data_dir)
    pot = pdb.as_potential(model)
    res = fs.sample(pot, "nuts", n_draws=n_draws, n_warmup=n_warmup, chains=4, seed=2024,
                    progress=False)
    assert np.all(diagnostics.rhat(res.draws) < 1.01)
    assert res.stats["divergent"].mean() < 0.01
    compare_to_reference(res, cls.reference_draws(data_dir))


@pytest.mark.parametrize("step_size", [1e-50, 1e-300, 1e300])
@pytest.mark.parametrize("method", ["hmc", "nuts"])
def test_the_step_size_search_recovers_from_an_absurd_start(method, step_size):
    """Stan's heuristic doubles or halves from any finite start (the search
    used to stop doubling at 1e-12, leaving a chain that never moved, and to
    refuse a start above 1e7)."""
    target = fs.models.StandardNormal(3)
    kw = {} if method == "hmc" else {"surrogate": False}
    res = fs.sample(target, method, 1000, 300, chains=2, seed=1, progress=False,
                    step_size=step_size, warn=False, **kw)
    assert np.all((res.step_size > 0.1) & (res.step_size < 5.0))
    flat = res.draws.reshape(-1, 3)
    z = (flat.std(axis=0) - 1.0) / fs.diagnostics.mcse_sd(res.draws)
    assert np.all(np.abs(z) < 4.0), z
