"""Surrogate transitions with an exact correction (csrc/fs_surrogate.c): k
transitions on a surrogate V, then one Metropolis-Hastings test with U - V.
The composite move must leave exp(-U) invariant for any V and any k."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.core._hmc import Chain, new_trace


def banana_moments(pot, lim=(-6, 6, -4, 4), n=801):
    """Mean and variance of exp(-U) by quadrature on a fine grid (2-d)."""
    a = np.linspace(lim[0], lim[1], n)
    b = np.linspace(lim[2], lim[3], n)
    A, B = np.meshgrid(a, b, indexing="ij")
    Q = np.column_stack([A.ravel(), B.ravel()])
    U = np.array([pot.value(q) for q in Q])
    w = np.exp(-(U - U.min()))
    w /= w.sum()
    m = w @ Q
    v = w @ (Q - m) ** 2
    return m, v


def run_chain(drive, judge, n, seed, k, inner, step_size, n_steps=5, q0=None):
    g = np.random.default_rng(seed)
    q0 = np.zeros(judge.dim) if q0 is None else q0
    ch = Chain(drive, judge, q0, g, step_size=step_size, n_steps=n_steps,
               random_n_steps=inner == "hmc", algorithm=inner, surrogate_steps=k)
    tr = new_trace(n, judge.dim, proposals=True, inner=True)
    ch.run(tr, 0, n)
    return tr


def check_moments(x, mean, var, z=4.5):
    """x: (chains, draws, dim); |mean error| and |variance error| within z MCSE."""
    zm = (x.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(x)
    assert np.all(np.abs(zm) < z), zm
    sq = (x - mean) ** 2
    zv = (sq.mean(axis=(0, 1)) - var) / diagnostics.mcse_mean(sq)
    assert np.all(np.abs(zv) < z), zv


@pytest.mark.parametrize("inner,k", [("hmc", 1), ("hmc", 4), ("nuts", 1), ("nuts", 3)])
def test_gaussian_target_with_a_wrong_surrogate(inner, k):
    """Target N(m, S) correlated; V a Gaussian with the wrong mean, scales and
    no correlation: the draws still have the target's mean and variances."""
    mean = np.array([1.0, -2.0])
    cov = np.array([[1.0, 0.6], [0.6, 2.0]])
    U = fs.models.Gaussian(mean, cov)
    V = fs.models.Gaussian(np.array([1.6, -1.2]), np.diag([1.8, 1.1]))
    x = np.stack([run_chain(V, U, 3000, [11, c, k], k, inner, 0.5)["draws"] for c in range(4)])
    check_moments(x, mean, np.diag(cov))
    # the surrogate is wrong: some composite moves are rejected, most are not
    tr = run_chain(V, U, 500, 3, k, inner, 0.5)
    assert 0.05 < tr["accepted"].mean() < 0.99


@pytest.mark.parametrize("inner,k", [("hmc", 1), ("hmc", 5), ("nuts", 2)])
def test_banana_target_with_a_gaussian_surrogate(inner, k):
    """A skewed 2-d target (the papers' banana) judged exactly, driven by a
    Gaussian V: means and variances against quadrature."""
    U = fs.models.Banana()
    m, v = banana_moments(U)
    V = fs.models.Gaussian(np.array([0.3, 0.0]), np.diag([1.0, 0.7]))
    x = np.stack([run_chain(V, U, 3000, [5, c, k], k, inner, 0.4, q0=np.array([0.5, 0.5]))
                  ["draws"] for c in range(4)])
    check_moments(x, m, v)


def test_trace_statistics():
    U = fs.models.Gaussian(np.zeros(3), np.eye(3))
    V = fs.models.Gaussian(np.full(3, 0.3), 1.5 * np.eye(3))
    k = 3
    tr = run_chain(V, U, 400, 1, k, "hmc", 0.4, n_steps=4)
    assert np.all(tr["judge_evaluated"] <= 1)
    assert tr["judge_evaluated"].mean() > 0.9
    assert np.all((tr["n_steps"] >= k) & (tr["n_steps"] <= 4 * k))
    assert np.all((tr["accept_prob"] >= 0) & (tr["accept_prob"] <= 1))
    assert np.all((tr["inner_accept_prob"] >= 0) & (tr["inner_accept_prob"] <= 1))
    # the potential is the exact U of each state kept, energy too
    U_at = np.array([U.value(q) for q in tr["draws"]])
    np.testing.assert_allclose(tr["potential"], U_at, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tr["energy"], U_at, rtol=1e-12, atol=1e-12)
    # energy_error is (U - V)(q') - (U - V)(q); acceptance its min(1, exp(-.))
    ev = tr["judge_evaluated"].astype(bool)
    a = np.minimum(1.0, np.exp(-tr["energy_error"][ev]))
    np.testing.assert_allclose(tr["accept_prob"][ev], a, rtol=1e-12)
    prev = np.vstack([np.zeros(3), tr["draws"][:-1]])
    d = lambda q: U.value(q) - V.value(q)  # noqa: E731
    for i in np.flatnonzero(ev)[:50]:
        r = d(tr["proposals"][i]) - d(prev[i])
        assert abs(tr["energy_error"][i] - r) < 1e-10
    # NUTS inner kernel: tree depth recorded
    trn = run_chain(V, U, 100, 2, 2, "nuts", 0.4)
    assert trn["tree_depth"].max() >= 1
    assert np.all(trn["n_steps"] >= 2)


def test_rejection_restores_the_state():
    """A rejected composite move leaves the chain exactly where it was: the
    position, the exact U, and the cached drive value and gradient (the next
    move from it equals a move from a freshly initialised chain)."""
    U = fs.models.Gaussian(np.zeros(2), np.eye(2))
    V = fs.models.Gaussian(np.array([3.0, -3.0]), 0.3 * np.eye(2))  # very wrong
    g = np.random.default_rng(4)
    ch = Chain(V, U, np.array([0.1, 0.2]), g, step_size=0.3, n_steps=6,
               algorithm="hmc", surrogate_steps=3)
    n_rej = 0
    for it in range(60):
        before = ch.position
        tr = new_trace(1, 2, proposals=True, inner=True)
        ch.run(tr, 0, 1)
        if not tr["accepted"][0]:
            n_rej += 1
            assert np.array_equal(ch.position, before)
            assert ch.potential == U.value(before)
            # a fresh chain at `before` with the same stream state makes the same next move
            state = g.bit_generator.state
            fresh = Chain(V, U, before, np.random.default_rng(0), step_size=0.3, n_steps=6,
                          algorithm="hmc", surrogate_steps=3)
            fresh.generator.bit_generator.state = state
            t1, t2 = new_trace(1, 2), new_trace(1, 2)
            fresh.run(t1, 0, 1)
            ch.run(t2, 0, 1)
            assert np.array_equal(t1["draws"], t2["draws"])
            assert t1["accept_prob"][0] == t2["accept_prob"][0]
    assert n_rej >= 5


def test_never_moving_inner_chain_skips_the_exact_value():
    U = fs.models.Gaussian(np.zeros(2), np.eye(2))
    V = fs.models.Gaussian(np.zeros(2), 1e-6 * np.eye(2))  # every inner proposal diverges/rejects
    tr = run_chain(V, U, 50, 0, 2, "hmc", 5.0, q0=np.array([1.0, 1.0]))
    stuck = tr["accepted"] == 0
    assert np.all(tr["judge_evaluated"][stuck & (tr["accept_prob"] == 1.0)] == 0)


def test_step_size_adaptation_targets_the_inner_acceptance():
    U = fs.models.Gaussian(np.zeros(4), np.eye(4))
    V = fs.models.Gaussian(np.full(4, 0.2), 1.3 * np.eye(4))
    ch = Chain(V, U, np.zeros(4), np.random.default_rng(2), step_size=2.0, n_steps=5,
               algorithm="nuts", surrogate_steps=2)
    ch.find_step_size()
    ch.start_adaptation(0.8)
    tr = new_trace(600, 4, inner=True)
    ch.run(tr, 0, 600)
    ch.finish_adaptation()
    assert abs(tr["inner_accept_prob"][300:].mean() - 0.8) < 0.1


def test_bad_arguments():
    U = fs.models.Gaussian(np.zeros(2), np.eye(2))
    V = fs.models.Gaussian(np.zeros(2), 2 * np.eye(2))
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="distinct"):
        Chain(U, U, np.zeros(2), g, surrogate_steps=2)
    with pytest.raises(ValueError, match=">= 0"):
        Chain(V, U, np.zeros(2), g, surrogate_steps=-1)
    with pytest.raises(TypeError, match="integer"):
        Chain(V, U, np.zeros(2), g, surrogate_steps=1.5)
    with pytest.raises(TypeError, match="integer"):
        Chain(V, U, np.zeros(2), g, surrogate_steps=True)
    with pytest.raises(ValueError, match="delayed_acceptance"):
        Chain(V, U, np.zeros(2), g, surrogate_steps=2, delayed_acceptance=True)
    ch = Chain(V, U, np.zeros(2), g)
    with pytest.raises(ValueError, match="surrogate_steps"):
        ch.surrogate_steps = 3
    ch = Chain(V, U, np.zeros(2), g, surrogate_steps=2)
    ch.surrogate_steps = 5
    assert ch.surrogate_steps == 5
    with pytest.raises(ValueError):
        ch.surrogate_steps = 0


# -- the samplers -------------------------------------------------------------

def _gauss4():
    mean = np.array([0.5, -1.0, 2.0, 0.0])
    cov = np.diag([1.0, 0.5, 2.0, 1.5])
    cov[0, 1] = cov[1, 0] = 0.4
    return mean, cov, fs.models.Gaussian(mean, cov)


@pytest.mark.parametrize("transitions,inner", [(3, "hmc"), ("auto", "nuts")])
def test_rns_hmc_with_transitions_is_exact(transitions, inner):
    mean, cov, U = _gauss4()
    res = fs.sample(U, "rns-hmc", n_draws=2000, n_warmup=600, chains=2, seed=3, n_hidden=150,
                    n_steps=5, transitions=transitions, inner=inner, progress=False)
    check_moments(res.draws, mean, np.diag(cov))
    tinfo = res.info["transitions"]
    assert len(tinfo) == 2 and all(t["inner"] == inner for t in tinfo)
    assert sorted(t["chain"] for t in tinfo) == [0, 1]
    for t in tinfo:    # in the order the chains finished tuning; "auto" picks k per chain
        c, k = t["chain"], t["k"]
        if transitions == "auto":
            assert k in t["ladder"] and 1 <= k <= 16
        else:
            assert k == 3
        assert res.stats["n_steps"][c].min() >= k
    assert np.all(res.stats["judge_evaluated"] <= 1)
    assert np.isfinite(res.stats["inner_accept_prob"]).all()
    assert res.info["exact_evaluations"] == int(res.stats["judge_evaluated"].sum())


def test_rns_hmc_laplace_base_with_transitions():
    mean, cov, U = _gauss4()
    res = fs.sample(U, "rns-hmc", n_draws=1500, n_warmup=500, chains=2, seed=4, n_hidden=100,
                    base="laplace", transitions=4, progress=False)
    check_moments(res.draws, mean, np.diag(cov))
    assert res.stats["accepted"].mean() > 0.5


def test_arns_hmc_transitions_after_max_points():
    mean, cov, U = _gauss4()
    res = fs.sample(U, "arns-hmc", n_draws=2000, n_warmup=400, chains=2, seed=5, n_hidden=100,
                    n_start=200, max_points=300, transitions=2, progress=False)
    check_moments(res.draws, mean, np.diag(cov))
    assert [t["k"] for t in res.info["transitions"]] == [2, 2]
    assert all(s is not None for s in res.info["adaptation_stopped"])
    with pytest.raises(ValueError, match="max_points"):
        fs.ARNSHMC(U, transitions=2)


def test_vhmc_exact_with_transitions():
    mean, cov, U = _gauss4()
    res = fs.sample(U, "vhmc", n_draws=1500, n_warmup=400, chains=2, seed=6, exact=True,
                    n_train=200, transitions=3, inner="nuts", progress=False)
    assert res.exact
    check_moments(res.draws, mean, np.diag(cov))
    assert res.info["transitions"][0]["k"] == 3
    with pytest.raises(ValueError, match="exact"):
        fs.VHMC(U, transitions=3)


@pytest.mark.parametrize("method", ["rns-hmc", "nnghmc"])
def test_nuts_exploration(method):
    mean, cov, U = _gauss4()
    opts = {"n_hidden": 100} if method == "rns-hmc" else {"n_hidden": 30}
    res = fs.sample(U, method, n_draws=1500, n_warmup=600, chains=2, seed=8, explore="nuts",
                    keep_warmup=True, progress=False, **opts)
    assert res.warmup_stats["tree_depth"].max() >= 1   # NUTS explored
    check_moments(res.draws, mean, np.diag(cov))


def test_sampler_bad_arguments():
    _, _, U = _gauss4()
    with pytest.raises(ValueError, match="transitions"):
        fs.RNSHMC(U, transitions="many")
    with pytest.raises(ValueError, match="transitions"):
        fs.RNSHMC(U, transitions=0)
    with pytest.raises(TypeError):
        fs.RNSHMC(U, transitions=2.5)
    with pytest.raises(ValueError, match="inner"):
        fs.RNSHMC(U, transitions=2, inner="mala")
    with pytest.raises(ValueError, match="explore"):
        fs.RNSHMC(U, explore="slice")
    with pytest.raises(ValueError, match="delayed_acceptance"):
        fs.RNSHMC(U, transitions=2, delayed_acceptance=True)
    with pytest.raises(ValueError, match="no value V"):
        fs.NNGHMC(U, transitions=2)
    with pytest.raises(ValueError, match="explore"):
        fs.NNGHMC(U, explore="mala")
