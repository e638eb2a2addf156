"""Surrogate-driven NUTS: the value-and-gradient fit against a NumPy
reference, and the sampler as a distribution (exact for any surrogate)."""
import subprocess
import sys
import time

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.models import posteriordb as pdb
from fastsurrogate.samplers.surrogate_nuts import SurrogatePolicy, check_surrogate
from fastsurrogate.surrogates import value_gradient as vg

from test_posteriordb_hmc import compare_to_reference


# -- the fit ---------------------------------------------------------------------

def test_gradient_rows_gram_equals_stacked_least_squares():
    """The O(N s^2) Gram of the gradient rows equals the explicit stacked
    (N (dim + 1)) x s system's normal equations."""
    rng = np.random.default_rng(0)
    N, d, s, c = 30, 3, 7, 0.7
    X = rng.standard_normal((N, d))
    Rx = rng.standard_normal((N, d))
    r = rng.standard_normal(N)
    has = np.ones(N, dtype=bool)
    has[::4] = False                      # value-only points
    W0 = rng.standard_normal((s, d))
    b0 = rng.standard_normal(s)
    des = vg._Design(X, Rx, r, has, W0, b0, c)
    A = c * X @ W0.T + b0
    H = np.log1p(np.exp(A))
    S = 1.0 / (1.0 + np.exp(-A))
    rows, rhs = [H - H.mean(axis=0)], [r - r.mean()]
    for n in np.flatnonzero(has):
        rows.append((S[n][:, None] * c * W0).T)        # (d, s): d z / d x_j
        rhs.append(Rx[n])
    M, y = np.vstack(rows), np.concatenate(rhs)
    np.testing.assert_allclose(des.G, M.T @ M, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(des.rhs, M.T @ y, rtol=1e-12, atol=1e-12)
    v, b = des.solve(1e-9)
    lam = 1e-9 * np.trace(M.T @ M) / s
    v_ref = np.linalg.solve(M.T @ M + lam * np.eye(s), M.T @ y)
    np.testing.assert_allclose(v, v_ref, rtol=1e-8, atol=1e-10)
    assert b == pytest.approx(r.mean() - H.mean(axis=0) @ v)


def test_score_matching_rows_are_the_gradient_rows_alone():
    """values=False: the Gram and right-hand side of the gradient rows
    alone (VHMC's gradient matching); the values' mean sets the bias."""
    rng = np.random.default_rng(1)
    N, d, s, c = 25, 3, 6, 0.4
    X, Rx, r = rng.standard_normal((N, d)), rng.standard_normal((N, d)), rng.standard_normal(N)
    has = np.ones(N, dtype=bool)
    W0, b0 = rng.standard_normal((s, d)), rng.standard_normal(s)
    des = vg._Design(X, Rx, r, has, W0, b0, c, values=False)
    A = c * X @ W0.T + b0
    S = 1.0 / (1.0 + np.exp(-A))
    M = np.vstack([(S[n][:, None] * c * W0).T for n in range(N)])
    np.testing.assert_allclose(des.G, M.T @ M, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(des.rhs, M.T @ Rx.ravel(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="needs gradients"):
        vg.fit_value_gradient(X, r, None, values=False)


def test_the_three_kinds_of_fit_learn_a_banana():
    """network (values and gradients), score (gradients) and fitc (values)
    all predict the held-out banana points well (as scored during the fit,
    before the network's final refit on every point); the network, which
    sees both, best."""
    model, Q, U, G = _banana_points(600, 3)
    held = np.arange(600) >= 450
    acc = {}
    for fit in vg.FITS:
        V, info = vg.fit_surrogate(Q, U, G, fit=fit, n_hidden=200 if fit != "fitc" else 60,
                                   held_out=held, seed=1)
        acc[fit] = info["predicted_acceptance"]
        e = U[held] - np.array([V.value(q) for q in Q[held]])
        assert vg.predicted_acceptance(e) > 0.75          # the V returned, too
    assert min(acc.values()) > 0.75, acc
    assert acc["network"] >= max(acc["score"], acc["fitc"]) - 0.02, acc
    with pytest.raises(ValueError, match="fit must be"):
        vg.fit_surrogate(Q, U, G, fit="gp")


def test_predicted_acceptance_is_the_mean_over_pairs():
    e = np.array([0.0, 0.3, -1.0, 2.0, 0.5])
    ref = np.mean([min(1.0, np.exp(e[i] - e[j])) for i in range(5) for j in range(5) if i != j])
    assert vg.predicted_acceptance(e) == pytest.approx(ref, rel=1e-14)
    assert vg.predicted_acceptance(e + 7.0) == pytest.approx(ref, rel=1e-12)
    assert vg.predicted_acceptance([1.0]) == 1.0


def _banana_points(n, seed):
    model = fs.models.Banana()
    rng = np.random.default_rng(seed)
    res = fs.NUTS(model, surrogate=False).sample(n, 300, chains=1, seed=seed, progress=False)
    Q = res.draws[0] + 0.05 * rng.standard_normal((n, 2))
    U = np.array([model.value(q) for q in Q])
    G = np.array([model.grad(q) for q in Q])
    return model, Q, U, G


def test_fit_learns_a_non_gaussian_potential_and_its_gradient_is_exact():
    model, Q, U, G = _banana_points(600, 3)
    held = np.arange(600) >= 450
    V, info = vg.fit_value_gradient(Q, U, G, n_hidden=200, held_out=held, seed=1)
    assert info["kind"] == "network"
    assert info["predicted_acceptance"] > 0.9
    # the returned potential's gradient against central differences of its value
    q = Q[500]
    h = 1e-6
    fd = [(V.value(q + h * e) - V.value(q - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(V.grad(q), fd, rtol=1e-6, atol=1e-6)
    # the gradient rows matter: the fit to values alone is worse on held-out gradients
    Vv, _ = vg.fit_value_gradient(Q, U, None, n_hidden=200, held_out=held, seed=1)
    err = lambda P: np.mean([np.sum((P.grad(q) - g) ** 2) for q, g in zip(Q[held], G[held])])
    assert err(V) < 0.5 * err(Vv)


def test_fit_with_a_gaussian_base_keeps_the_base_when_the_network_does_not_help():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((4, 4))
    cov = A @ A.T + 4 * np.eye(4)
    target = fs.models.Gaussian(np.ones(4), cov)
    Q = rng.multivariate_normal(np.ones(4), cov, size=200)
    U = np.array([target.value(q) for q in Q])
    G = np.array([target.grad(q) for q in Q])
    V, info = vg.fit_value_gradient(Q, U, G, base=target, n_hidden=50, seed=0)
    assert V is target and info["kind"] == "base"
    assert info["predicted_acceptance"] == pytest.approx(1.0)


def test_fit_refuses_bad_input():
    Q = np.zeros((10, 2))
    with pytest.raises(ValueError, match="u must have shape"):
        vg.fit_value_gradient(Q, np.zeros(9))
    with pytest.raises(ValueError, match="finite"):
        vg.fit_value_gradient(Q + np.nan, np.zeros(10))
    with pytest.raises(ValueError, match="held_out"):
        vg.fit_value_gradient(Q, np.zeros(10), held_out=np.ones(10, dtype=bool))


# -- options -------------------------------------------------------------------

def test_surrogate_options_are_checked_before_any_work():
    m = fs.models.StandardNormal(2)
    with pytest.raises(TypeError, match="surrogate must be"):
        fs.NUTS(m, surrogate="yes")
    with pytest.raises(TypeError, match="unknown policy settings"):
        fs.NUTS(m, policy={"min_acept": 0.5})
    with pytest.raises(ValueError, match="min_accept"):
        fs.NUTS(m, policy={"min_accept": 1.5})
    with pytest.raises(TypeError, match="policy must be"):
        fs.NUTS(m, policy=3)
    with pytest.raises(ValueError, match="fit must be one of"):
        fs.NUTS(m, policy={"fit": "gp"})
    with pytest.raises(ValueError, match="inducing"):
        fs.NUTS(m, policy={"fit": "fitc", "n_hidden": 0})
    with pytest.raises(ValueError, match="adapt=True"):
        fs.NUTS(m, surrogate=True, adapt=False)
    assert check_surrogate("auto", SurrogatePolicy(block=10))[1].block == 10
    assert len(SurrogatePolicy.__dataclass_fields__) <= 8


def test_auto_decides_once_and_reports_why():
    m = fs.models.StandardNormal(3)          # a gradient cheaper than any network
    res = fs.NUTS(m).sample(100, 100, chains=2, seed=1, progress=False)
    info = res.info["surrogate"]
    assert info["used"] is False and info["decided_by"] == "cost check"
    assert info["ratio"] < info["cost_ratio"]
    plain = fs.NUTS(m, surrogate=False).sample(100, 100, chains=2, seed=1, progress=False)
    np.testing.assert_array_equal(res.draws, plain.draws)


# -- the sampler as a distribution ---------------------------------------------

def _check_moments(draws, mean, cov, n_se=4.0):
    """Means and variances within n_se MCSE of the truth."""
    flat = draws.reshape(-1, draws.shape[-1])
    sd = np.sqrt(np.diag(cov))
    zm = (flat.mean(axis=0) - mean) / diagnostics.mcse_mean(draws)
    zs = (flat.std(axis=0) - sd) / diagnostics.mcse_sd(draws)
    assert np.all(np.abs(zm) < n_se), zm
    assert np.all(np.abs(zs) < n_se), zs


def _correlated_gaussian(d=10, seed=5):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d, d))
    cov = A @ A.T / d + 0.1 * np.eye(d)
    mean = rng.standard_normal(d)
    return fs.models.Gaussian(mean, cov), mean, cov


def test_surrogate_nuts_is_exact_on_a_correlated_gaussian():
    target, mean, cov = _correlated_gaussian()
    res = fs.NUTS(target, surrogate=True).sample(1000, 1000, chains=4, seed=3, progress=False)
    info = res.info["surrogate"]
    assert info["used"] and info["surrogate_share"] > 0.9
    _check_moments(res.draws, mean, cov)
    assert np.max(diagnostics.rhat(res.draws)) < 1.01


def test_surrogate_nuts_is_exact_with_a_poor_surrogate():
    """A network alone on few points (no Laplace base): V is poor, the
    correction keeps the chain exact, and the report counts what it did."""
    target, mean, cov = _correlated_gaussian(d=6, seed=7)
    pol = {"laplace": False, "n_hidden": 20, "min_accept": 0.3}
    res = fs.NUTS(target, surrogate=True, policy=pol).sample(1500, 500, chains=4, seed=4,
                                                              progress=False)
    info = res.info["surrogate"]
    assert info["used"] and info["fits"]
    _check_moments(res.draws, mean, cov)
    n_value = sum(c["value_calls"] for c in info["chains"])
    assert info["exact_value_calls"] == n_value
    assert info["exact_calls"] == info["exact_gradient_calls"] + info["exact_value_calls"]
    # every sampling iteration of a surrogate chain that moved paid one exact U
    for c, j in zip(info["chains"], range(4)):
        if c["sampling_kernel"] == "surrogate":
            assert c["value_calls"] >= int(res.stats["judge_evaluated"][j].sum())


def test_a_surrogate_that_never_reaches_min_accept_leaves_exact_nuts():
    target, mean, cov = _correlated_gaussian(d=6, seed=7)
    pol = {"laplace": False, "n_hidden": 5, "min_accept": 0.999}
    res = fs.NUTS(target, surrogate=True, policy=pol).sample(1000, 500, chains=2, seed=4,
                                                              progress=False)
    info = res.info["surrogate"]
    assert all(c["sampling_kernel"] == "exact" for c in info["chains"])
    assert info["surrogate_share"] == 0.0
    # fits were tried only as the data doubled: a bounded number
    assert 1 <= len(info["fits"]) <= 1 + np.log2(20 * 1023)
    _check_moments(res.draws, mean, cov)


@pytest.mark.parametrize("cls", list(pdb.MODELS.values()), ids=list(pdb.MODELS))
def test_surrogate_nuts_reproduces_posteriordb_references(data_dir, cls):
    pot = pdb.as_potential(cls.from_posteriordb(data_dir))
    ref = cls.reference_draws(data_dir)
    res = fs.NUTS(pot, surrogate=True).sample(1000, 1000, chains=4, seed=2024,
                                              progress=False)
    assert res.info["surrogate"]["used"]
    compare_to_reference(res, ref)


@pytest.mark.parametrize("policy", [{"fit": "score"}, {"fit": "fitc", "n_hidden": 60}],
                         ids=["score", "fitc"])
def test_the_other_kinds_of_v_sample_a_posteriordb_reference(data_dir, policy):
    cls = pdb.MODELS["garch-garch11"]
    pot = pdb.as_potential(cls.from_posteriordb(data_dir))
    res = fs.NUTS(pot, surrogate=True, policy=policy).sample(1000, 1000, chains=4, seed=7,
                                                             progress=False)
    info = res.info["surrogate"]
    assert info["used"] and info["policy"]["fit"] == policy["fit"]
    kept = [f for f in info["fits"] if f.get("kept")]
    assert kept and kept[-1]["kind"].endswith("fitc" if policy["fit"] == "fitc" else "network")
    compare_to_reference(res, cls.reference_draws(data_dir))


def test_same_seed_same_draws_on_a_busy_machine():
    X, y, _ = fs.datasets.simulate_logistic(n=3000, d=5, seed=2)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)

    def run():
        return fs.NUTS(model, surrogate=True).sample(300, 300, chains=2, seed=9,
                                                     progress=False)
    quiet = run()
    # another process keeps a core busy (a bare interpreter: it spins at once)
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nt = time.time()\nwhile time.time() - t < 60: pass"])
    try:
        time.sleep(0.2)
        assert busy.poll() is None
        loaded = run()
    finally:
        busy.kill()
        busy.wait()
    assert quiet.info["surrogate"]["used"]
    np.testing.assert_array_equal(quiet.draws, loaded.draws)
    assert quiet.info["surrogate"]["exact_calls"] == loaded.info["surrogate"]["exact_calls"]


def test_the_result_says_what_ran():
    import pickle
    X, y, _ = fs.datasets.simulate_logistic(n=3000, d=5, seed=2)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    res = fs.NUTS(model, surrogate=True).sample(200, 200, chains=2, seed=9, progress=False)
    rep = res.surrogate_report()
    info = res.info["surrogate"]
    assert rep["exact_gradient_calls"] == info["exact_gradient_calls"] > 0
    assert rep["exact_value_calls"] == info["exact_value_calls"] >= 2 * 200 * info["surrogate_share"]
    assert 0.5 < rep["share"] <= 1.0 and rep["sampling_kernels"] == ["surrogate"] * 2
    assert "surrogate drove" in repr(res) and "exact calls" in res.report_line()
    assert "exact-test acceptance" in repr(res)
    assert "exact-test" not in repr(fs.NUTS(model, surrogate=False).sample(
        50, 50, chains=1, seed=9, progress=False, warn=False))
    overall = res.summary().overall
    assert overall["surrogate"] == rep
    # min ESS per second is over the whole run, the sampling-phase figure has its own name
    total = res.timings["total"]
    assert total >= res.timings["sample"] and total >= res.timings.get("laplace", 0.0)
    assert overall["min_ess_per_second"] == pytest.approx(overall["ess_min"] / total)
    assert overall["min_ess_per_sampling_second"] > overall["min_ess_per_second"]
    back = pickle.loads(pickle.dumps(res))
    np.testing.assert_array_equal(back.draws, res.draws)
    assert back.surrogate_report() == rep
    q = res.draws[0, -1]
    assert back.surrogate.value(q) == pytest.approx(res.surrogate.value(q), rel=1e-14)


def test_surrogate_true_refuses_what_it_cannot_do():
    from concurrent.futures import ProcessPoolExecutor
    target, _, _ = _correlated_gaussian(d=3)
    with pytest.raises(ValueError, match="at least two blocks"):
        fs.NUTS(target, surrogate=True).sample(10, 20, chains=1, progress=False)
    with pytest.raises(ValueError, match="checkpoint"):
        fs.NUTS(target, surrogate=True).sample(10, 100, chains=1, progress=False,
                                               checkpoint="unused.npz")
    with ProcessPoolExecutor(1) as ex:
        with pytest.raises(ValueError, match="in this process"):
            fs.NUTS(target, surrogate=True).sample(10, 100, chains=1, progress=False,
                                                   executor=ex)
    # "auto" runs exact NUTS there, and says why
    with ProcessPoolExecutor(1) as ex:
        res = fs.NUTS(target).sample(10, 100, chains=1, progress=False, executor=ex, warn=False)
    assert res.info["surrogate"] == {"used": False,
                                     "decided_by": "an executor outside this process"}


# -- the warm-up as an option of the papers' samplers ------------------------------

@pytest.mark.parametrize("method", ["rns-hmc", "arns-hmc", "rns-rmhmc", "nnghmc", "vhmc"])
def test_paper_samplers_with_the_surrogate_nuts_warmup_reproduce_a_reference(data_dir, method):
    """Exact for every sampler (VHMC with exact=True: without it VHMC's draws
    target exp(-V), and on this posterior they drift, as with its own
    warm-up: issue 38)."""
    cls = pdb.MODELS["garch-garch11"]
    pot = pdb.as_potential(cls.from_posteriordb(data_dir))
    extra = {"exact": True} if method == "vhmc" else {}
    res = fs.sample(pot, method=method, warmup="surrogate-nuts", chains=4, n_warmup=1000,
                    n_draws=1000, seed=11, progress=False, **extra)
    w = res.info["warmup"]
    assert w["kind"] == "surrogate-nuts" and w["surrogate_share"] > 0.5
    assert w["n_points"] > 500 and w["exact_gradient_calls"] > 0
    if method == "vhmc":
        assert res.exact and res.info["mu_final"] == [1.0] * 4
    else:
        n_train = (res.info["n_train"] if method == "nnghmc" else
                   res.info["training_set"][0]["n_states"] if method == "arns-hmc" else
                   res.info["training_set"]["n_states"])
        assert n_train > 100
    compare_to_reference(res, cls.reference_draws(data_dir))


def test_the_warmup_option_is_checked_before_any_work():
    m = fs.models.StandardNormal(2)
    with pytest.raises(ValueError, match="warmup must be one of"):
        fs.RNSHMC(m, warmup="nuts")
    with pytest.raises(ValueError, match="n_warmup >= 50"):
        fs.NNGHMC(m, warmup="surrogate-nuts").sample(100, 20, progress=False)
    with pytest.raises(ValueError, match="pass no surrogate"):
        fs.NNGHMC(m, warmup="surrogate-nuts", surrogate=m)
    with pytest.raises(ValueError, match="has no transitions option"):
        fs.VHMC(m, warmup="surrogate-nuts", exact=True, transitions=2)
