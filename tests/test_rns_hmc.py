"""RNS-HMC and ARNS-HMC are exact: their draws match exact references."""
import warnings

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.models import posteriordb as pdb
from fastsurrogate.samplers.rns_hmc import warn_few_training_points

from test_posteriordb_hmc import compare_to_reference


def z_scores(a, b):
    """(mean, sd) differences of two runs (chains, draws, dim) in combined MCSE."""
    zm = (a.mean(axis=(0, 1)) - b.mean(axis=(0, 1))) / np.hypot(
        diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    zs = (a.std(axis=(0, 1)) - b.std(axis=(0, 1))) / np.hypot(
        diagnostics.mcse_sd(a), diagnostics.mcse_sd(b))
    return zm, zs


@pytest.fixture(scope="module")
def logistic():
    X, y, beta = fs.datasets.simulate_logistic(5000, 8, seed=3)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    ref = fs.sample(model, method="hmc", n_draws=5000, n_warmup=1000, chains=4, seed=1,
                    progress=False)
    return model, ref


@pytest.mark.parametrize("method, kw", [
    ("rns-hmc", dict(n_hidden=300)),
    ("rns-hmc", dict(n_hidden=300, delayed_acceptance=True, training="accepted")),
    ("rns-hmc", dict(n_hidden=300, base="laplace")),
    ("rns-hmc", dict(n_hidden=300, training="trajectory")),
    ("arns-hmc", dict(n_hidden=200, n_start=200)),
    ("arns-hmc", dict(n_hidden=200, n_start=200, max_points=600)),
    ("arns-hmc", dict(n_hidden=200, n_start=200, training="trajectory")),
])
def test_surrogate_samplers_match_exact_hmc_on_logistic(logistic, method, kw):
    model, ref = logistic
    res = fs.sample(model, method=method, n_draws=4000, n_warmup=1000, chains=4, seed=7,
                    progress=False, **kw)
    assert res.exact
    zm, zs = z_scores(res.draws, ref.draws)
    assert np.all(np.abs(zm) < 4) and np.all(np.abs(zs) < 4), (zm, zs)
    # a useful surrogate: acceptance close to exact HMC's
    assert res.acceptance_rate.mean() > 0.8 * ref.acceptance_rate.mean()
    assert res.surrogate is not None and res.surrogate.dim == model.dim
    assert {"warmup", "sample", "train"} <= set(res.timings)
    if kw.get("base"):
        assert isinstance(res.surrogate, fs.WeightedSum)
        base = res.info["base"]
        assert isinstance(base, fs.models.Gaussian)
        # the surrogate is base + network: its gradient at the posterior mean
        # is near the exact one, and the base alone is a Gaussian there
        q = ref.draws.mean(axis=(0, 1))
        g, gb = res.surrogate.grad(q), base.grad(q)
        assert np.linalg.norm(g - model.grad(q)) < 0.2 * np.linalg.norm(gb - model.grad(q)) + 1.0
    if kw.get("max_points"):
        for k in range(4):
            stop = res.info["adaptation_stopped"][k]
            assert stop is not None and 0 < stop < 4000
            assert res.info["n_seen"][k] == kw["max_points"]
            assert res.info["switch_iterations"][k][-1] == stop
            it, sec = res.info["sample_clock"][k].T
            assert it[-1] == 4000 and np.all(np.diff(it) > 0) and np.all(np.diff(sec) >= 0)
    if kw.get("training") == "trajectory" and method == "arns-hmc":
        # each chain's network starts from its own points: 2-4 times the count
        for ts in res.info["training_set"]:
            assert ts["kind"] == "trajectory" and ts["n_evaluated"] > 800 * 3
            assert 2 * 45 <= ts["n_recorded"] <= 4 * 45
            assert ts["n_far_out"] < 0.05 * ts["n_recorded"]
    elif kw.get("training") == "trajectory":
        ts = res.info["training_set"]
        # every point of the exploration's trajectories from train_from on
        # (HMC: L per iteration), thinned to between 2 and 4 times the
        # quadratic count (45 at d = 8) pooled over the 4 chains
        assert ts["kind"] == "trajectory" and ts["n_evaluated"] > 4 * 800 * 3
        assert 2 * 45 <= ts["n_recorded"] <= 4 * 45 + 4
        assert res.info["n_train"] == ts["n_recorded"] - ts["n_far_out"]
        assert ts["n_far_out"] < 0.05 * ts["n_recorded"]
    if kw.get("delayed_acceptance"):
        assert res.info["exact_evaluations_saved"] > 0
        assert res.info["exact_evaluations"] + res.info["exact_evaluations_saved"] == 4 * 4000


@pytest.mark.parametrize("method, cls, kw", [
    ("rns-hmc", pdb.Garch11, dict(n_hidden=300)),
    ("rns-hmc", pdb.ArK, dict(n_hidden=300)),
    ("arns-hmc", pdb.Garch11, dict(n_hidden=200, n_start=300)),
    ("arns-hmc", pdb.ArK, dict(n_hidden=200, n_start=300)),
])
def test_surrogate_samplers_reproduce_posteriordb(data_dir, method, cls, kw):
    model = cls.from_posteriordb(data_dir)
    pot = pdb.as_potential(model)
    ref = cls.reference_draws(data_dir)
    res = fs.sample(pot, method=method, n_draws=3000, n_warmup=1500, chains=4, seed=5,
                    progress=False, **kw)
    assert res.stats["divergent"].mean() < 0.01
    compare_to_reference(res, ref)


def test_guard_returns_to_exact_hmc_and_stays_exact():
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.diag([1.0, 0.5, 2.0])
    target = fs.models.Gaussian(mean, cov)
    wrong = fs.models.Gaussian(mean + 3.0, cov / 20.0)   # a useless surrogate
    res = fs.RNSHMC(target, surrogate=wrong, guard=0.5, guard_window=100,
                    guard_action="exact").sample(3000, n_warmup=500, chains=2, seed=3,
                                                 progress=False)
    events = res.info["guard_events"]
    assert len(events) == 2 and all(e["action"] == "exact" for e in events)
    assert all(e["iteration"] == 100 for e in events)
    z = (res.draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(res.draws)
    assert np.all(np.abs(z) < 4), z


def test_guard_retrains():
    X, y, _ = fs.datasets.simulate_logistic(3000, 5, seed=1)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    # far too few hidden units: poor surrogate, retraining is triggered
    res = fs.RNSHMC(model, n_hidden=3, guard=0.95, guard_window=100,
                    guard_action="retrain").sample(400, n_warmup=400, chains=1, seed=2,
                                                   progress=False)
    assert res.info["guard_events"]
    assert res.info["guard_events"][0]["action"] == "retrain"
    # the retrained networks drive inside their own ellipsoids: the counts add up
    # over the drives (at least one evaluation per iteration, L per trajectory)
    rec = res.info["trust"][0]
    assert rec["radius"] > 0 and rec["n_exact"] + rec["n_network"] >= 400 * 2


def test_rns_trust_records_each_chain_and_rnsrmhmc_refuses_it():
    X, y, _ = fs.datasets.simulate_logistic(2000, 3, seed=0)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    kw = dict(n_draws=200, n_warmup=300, chains=2, seed=4, progress=False, n_hidden=50)
    on = fs.sample(model, method="rns-hmc", **kw)
    off = fs.sample(model, method="rns-hmc", trust=None, **kw)
    assert off.info["trust"] == [None, None]
    assert [r["radius"] for r in on.info["trust"]] == [on.info["trust"][0]["radius"]] * 2
    for rec in on.info["trust"]:
        assert 0 <= rec["exact_fraction"] < 0.2 and rec["n_network"] > 200
    with pytest.raises(ValueError, match="trust"):
        fs.RNSHMC(model, trust=0.0)
    with pytest.raises(ValueError, match="trust"):
        fs.RNSRMHMC(model, trust=0.99)


def test_surrogate_is_a_reusable_potential(logistic):
    model, _ = logistic
    res = fs.sample(model, method="rns-hmc", n_draws=200, n_warmup=600, chains=1, seed=1,
                    n_hidden=100, progress=False)
    sur = res.surrogate
    q = res.draws[0, -1]
    u, g = sur.value_and_grad(q)
    assert np.isfinite(u) and g.shape == (model.dim,)
    # the surrogate's gradient approximates the exact one near the posterior
    gx = model.grad(q)
    cos = g @ gx / np.linalg.norm(g) / np.linalg.norm(gx)
    assert cos > 0.9
    # usable by another sampler, and through the capsule
    again = fs.RNSHMC(model, surrogate=sur).sample(200, n_warmup=100, chains=1, seed=2,
                                                    progress=False)
    assert again.surrogate is sur
    wrapped = fs.Potential.from_capsule(sur.capsule, keep_alive=sur)
    assert wrapped.value(q) == sur.value(q)


def test_every_method_runs_four_chains_by_default():
    for cls in (fs.HMC, fs.NUTS, fs.RNSHMC, fs.ARNSHMC, fs.RNSRMHMC, fs.NNGHMC, fs.RMHMC,
                fs.VHMC, fs.SGLD, fs.SGHMC):
        assert cls.default_chains == 4, cls
    res = fs.RNSHMC(fs.models.StandardNormal(2), n_hidden=20, n_steps=3).sample(
        30, 150, seed=1, progress=False, warn=False)
    assert res.draws.shape == (4, 30, 2)


def test_rns_argument_errors():
    model = fs.models.StandardNormal(2)
    with pytest.raises(ValueError, match="activation"):
        fs.RNSHMC(model, activation="relu")
    with pytest.raises(ValueError, match="training"):
        fs.RNSHMC(model, training="all")
    with pytest.raises(ValueError, match="n_hidden"):
        fs.RNSHMC(model, n_hidden="many")
    with pytest.raises(ValueError, match="n_hidden"):
        fs.RNSHMC(model, n_hidden=0)
    with pytest.raises(ValueError, match="guard"):
        fs.RNSHMC(model, guard=1.5)
    with pytest.raises(ValueError, match="dim"):
        fs.RNSHMC(model, surrogate=fs.models.StandardNormal(3))
    with pytest.raises(ValueError, match="n_warmup"):
        fs.RNSHMC(model).sample(10, n_warmup=5, progress=False)
    with pytest.raises(ValueError, match="exponent"):
        fs.ARNSHMC(model, exponent=2.0)
    with pytest.raises(ValueError, match="max_points"):
        fs.ARNSHMC(model, n_start=100, max_points=50)
    with pytest.raises(ValueError, match="base"):
        fs.ARNSHMC(model, base="laplace")
    with pytest.raises(ValueError, match="base"):
        fs.RNSHMC(model, base="laplace", surrogate=fs.models.StandardNormal(2))
    with pytest.raises(ValueError, match="base"):
        fs.RNSHMC(model, base=fs.models.StandardNormal(2), surrogate=fs.models.StandardNormal(2))
    with pytest.raises(ValueError, match="dim"):
        fs.RNSHMC(model, base=fs.models.StandardNormal(3))
    with pytest.raises(ValueError, match="base"):
        fs.RNSHMC(model, base="gaussian")
    with pytest.raises(TypeError):
        fs.RNSHMC(model, base=np.eye(2))


def test_arns_max_points_equal_to_start_set_never_adapts():
    X, y, _ = fs.datasets.simulate_logistic(2000, 3, seed=0)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    res = fs.ARNSHMC(model, n_hidden=50, n_start=100, max_points=100).sample(
        300, 200, chains=1, seed=3, progress=False)
    assert res.info["adaptation_stopped"] == [0]
    assert res.info["n_seen"] == [100]
    assert res.info["switch_iterations"] == [[]]
    it = res.info["sample_clock"][0][:, 0]
    assert it[-1] == 300



def test_arns_trust_sends_the_tails_to_the_exact_gradient():
    X, y, _ = fs.datasets.simulate_logistic(2000, 3, seed=0)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    kw = dict(n_hidden=50, n_start=100)
    runs = {trust: fs.ARNSHMC(model, trust=trust, **kw).sample(300, 200, chains=1, seed=3,
                                                              progress=False)
            for trust in (0.99, 0.05, None)}
    assert runs[None].info["trust"] == [None]
    wide, narrow = runs[0.99].info["trust"][0], runs[0.05].info["trust"][0]
    assert narrow["radius"] < wide["radius"]
    # the ball holding 5 % of the start set leaves most evaluations to the exact U;
    # the one holding 99 % few (a posterior's states fill it like the start set)
    assert narrow["exact_fraction"] > 0.5 > 0.2 > wide["exact_fraction"]
    assert wide["n_exact"] + wide["n_network"] > 300
    with pytest.raises(ValueError, match="trust"):
        fs.ARNSHMC(model, trust=0.0)
    with pytest.raises(ValueError, match="trust"):
        fs.ARNSHMC(model, trust=1.5)

def test_rns_with_a_given_base_potential(logistic):
    model, ref = logistic
    flat = ref.draws.reshape(-1, model.dim)
    base = fs.models.Gaussian(flat.mean(axis=0), np.cov(flat.T))
    res = fs.RNSHMC(model, n_hidden=200, base=base).sample(500, 500, chains=1, seed=2,
                                                            progress=False)
    assert res.info["base"] is base
    assert isinstance(res.surrogate, fs.WeightedSum)
    # base + network reproduces U up to a constant on posterior draws, better
    # than the base alone (whose largest error there is ~0.09; the sum's ~0.005)
    q = flat[::997][:6]
    du = np.array([model.value(x) for x in q]) - model.value(q[0])
    ds = np.array([res.surrogate.value(x) for x in q]) - res.surrogate.value(q[0])
    np.testing.assert_allclose(ds, du, atol=0.03)
    assert res.acceptance_rate[0] > 0.8 * ref.acceptance_rate.mean()


def test_few_training_points_for_the_dimension_warn():
    # d = 20: a quadratic has 231 coefficients; training takes the states
    # after train_from (half of n_warmup by default)
    X, y, _ = fs.datasets.simulate_logistic(2000, 20, seed=0)
    m = fs.models.LogisticRegression(X, y)
    kw = dict(n_draws=20, chains=1, seed=1, progress=False, n_hidden=200)
    with pytest.warns(UserWarning, match="100 training points, fewer than the 231 coefficients"):
        res = fs.sample(m, method="rns-hmc", n_warmup=200, training="states", **kw)
    assert res.info["n_train"] == 100
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        res = fs.sample(m, method="rns-hmc", n_warmup=500, training="states", **kw)
        assert res.info["n_train"] == 250
        # the default ("auto") trains on the trajectory points when the
        # states are fewer than the count
        res = fs.sample(m, method="rns-hmc", n_warmup=200, **kw)
        assert res.info["training_set"]["kind"] == "trajectory"
        assert res.info["n_train"] >= 2 * 231
        # a Gaussian base carries the curvature: no warning
        fs.sample(m, method="rns-hmc", n_warmup=200, base="laplace", **kw)
    # an active subspace of k inputs needs (k + 1)(k + 2) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warn_few_training_points("rns-hmc", 10, 50, subspace=3)
    with pytest.warns(UserWarning, match="9 training points, fewer than the 10 coefficients "
                                         "of a quadratic in 3 variables"):
        warn_few_training_points("rns-hmc", 9, 50, subspace=3)


def test_trajectory_training_fits_what_too_few_states_cannot():
    # d = 20 (a quadratic has 231 coefficients), 160 exploration states
    # after train_from: fitted to the states the network's gradient is far
    # off; fitted to the points of their trajectories it is close
    X, y, _ = fs.datasets.simulate_logistic(5000, 20, seed=2)
    m = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    kw = dict(n_draws=300, n_warmup=320, chains=1, seed=3, progress=False,
              explore="nuts", guard=None, train_from=0.5)
    with pytest.warns(UserWarning, match="160 training points"):
        states = fs.sample(m, method="rns-hmc", training="states", **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        traj = fs.sample(m, method="rns-hmc", **kw)
    ts = traj.info["training_set"]
    assert ts["kind"] == "trajectory" and ts["n_states"] == 160
    assert ts["n_evaluated"] > 3 * 160 and 2 * 231 <= traj.info["n_train"] <= 4 * 231
    # the same exploration either way (the recorder passes evaluations through)
    assert np.array_equal(states.warmup_draws, traj.warmup_draws)

    def grad_error(res):
        qs = res.draws[0, ::10]
        e = np.array([res.surrogate.grad(q) - m.grad(q) for q in qs])
        return np.median(np.linalg.norm(e, axis=1) / np.linalg.norm(
            [m.grad(q) - m.grad(qs.mean(axis=0)) for q in qs], axis=1))

    e_states, e_traj = grad_error(states), grad_error(traj)
    assert e_traj < 0.25 * e_states, (e_traj, e_states)
    assert traj.acceptance_rate.mean() > states.acceptance_rate.mean()


def test_auto_training_takes_the_states_when_they_are_enough():
    # d = 3 (count 10): 2 x 100 states are plenty; "auto" is the paper's
    # training on the states, bit for bit, with no recorder in the chain
    X, y, _ = fs.datasets.simulate_logistic(500, 3, seed=2)
    m = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    kw = dict(n_draws=100, n_warmup=200, chains=2, seed=3, progress=False,
              n_hidden=50)
    a = fs.sample(m, method="rns-hmc", **kw)
    b = fs.sample(m, method="rns-hmc", training="states", **kw)
    assert a.info["training_set"] == {"setting": "auto", "kind": "states", "n_states": 200}
    assert np.array_equal(a.draws, b.draws) and a.info["n_train"] == b.info["n_train"] == 200
    # a base carries the curvature: the states, even when few
    c = fs.sample(m, method="rns-hmc", base="laplace", **dict(kw, n_warmup=20))
    assert c.info["training_set"]["kind"] == "states" and c.info["n_train"] == 20


def test_arns_online_layer_starts_from_the_batch_fit(monkeypatch):
    # ARNS-HMC hands the batch-fitted network to its online trainer, whose
    # first solve sets the output weights.  From trajectory points it must
    # solve the batch's ridge problem (the same relative penalty on the same
    # scale, on centred rows), not a more penalised one.  With max_points at
    # most the start set no update follows, so the run's network is that
    # first solve.  (Until 2026-11 the penalty was scaled by the uncentred
    # rows' squared norm, 1e2-1e5 times the batch's: on the states of this
    # problem the RMSE on the start points was then 16-29x the batch fit's,
    # seeds 4-6, input scales 0.5 and 0.05; with the batch's penalty
    # 0.92-1.32x, at RMSEs of 4e-5 to 3e-3.)
    from fastsurrogate.samplers.arns_hmc import ARNSHMC, online_penalty
    from fastsurrogate.surrogates.online import OnlineOutputLayer, with_bias
    from fastsurrogate.surrogates.random_network import train_random_network
    X, y, _ = fs.datasets.simulate_logistic(5000, 10, seed=2)
    m = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    seen = []
    start_set = ARNSHMC.start_set

    def recording(self, ctx):
        out = start_set(self, ctx)
        seen.append(out)
        return out

    monkeypatch.setattr(ARNSHMC, "start_set", recording)
    for scale in (0.5, 0.05):
        seen.clear()
        res = fs.sample(m, method="arns-hmc", n_draws=20, n_warmup=300, chains=1, seed=4,
                        progress=False, n_hidden=300, n_start=2,
                        max_points=2, input_scale=scale, training="trajectory")
        assert res.info["training_set"][0]["kind"] == "trajectory"
        assert res.info["adaptation_stopped"] == [0]
        net = res.info["surrogates"][0]
        (Q, U), = seen
        assert Q.shape[0] >= 2 * 66
        rmse = np.sqrt(np.mean((np.array([net.value(q) for q in Q]) - U) ** 2))
        assert rmse <= 2.0 * net.info["train_rmse"] + 1e-9, (scale, rmse, net.info)
    # the layer itself, on a larger set: its first solve fits U as well as
    # the batch fit (centred rows, the batch's penalty), the old penalty on
    # uncentred rows did not
    Q = res.warmup_draws[0]
    U = np.array([m.value(q) for q in Q])
    for scale, ridge in ((0.05, 1e-10), (0.5, 1e-8), (1.0, 1e-6)):
        net = train_random_network(Q, U, n_hidden=300, input_scale=scale, ridge=ridge, seed=1)
        F = net.features(Q)
        centre = F.mean(axis=0)
        layer = OnlineOutputLayer(with_bias(F - centre), U - U.min(), online_penalty(F, ridge),
                                  10, 0, centre=centre)
        fit = np.sqrt(np.mean((layer.rows(F) @ layer.weights + U.min() - U) ** 2))
        H = with_bias(F)
        old = OnlineOutputLayer(H, U - U.min(), max(ridge, 1e-8) * np.mean(np.sum(H * H, axis=1)),
                                10, 0)
        old_fit = np.sqrt(np.mean((H @ old.weights + U.min() - U) ** 2))
        # the same bar: the batch's penalty passes it, the old penalty fails it
        assert fit <= 2.0 * net.info["train_rmse"] + 1e-9, (scale, fit, net.info["train_rmse"])
        assert old_fit > 2.0 * net.info["train_rmse"], (scale, old_fit, net.info["train_rmse"])


def test_arns_starts_from_trajectory_points_when_states_are_few():
    # d = 20: the 200 start states are fewer than a quadratic's 231
    # coefficients; "auto" starts each chain's network from its own
    # trajectory points, which fit U's gradient far better
    X, y, _ = fs.datasets.simulate_logistic(5000, 20, seed=2)
    m = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    kw = dict(n_draws=300, n_warmup=400, chains=2, seed=3, progress=False,
              explore="nuts", n_hidden=400, max_points=200)
    states = fs.sample(m, method="arns-hmc", training="states", **kw)
    traj = fs.sample(m, method="arns-hmc", **kw)
    assert [t["kind"] for t in states.info["training_set"]] == ["states"] * 2
    for t, chain_seen in zip(traj.info["training_set"], traj.info["n_seen"]):
        assert t["setting"] == "auto" and t["kind"] == "trajectory" and t["n_states"] == 200
        # thinned to 2-4 times the count, the far-out points left out
        assert 2 * 231 <= t["n_recorded"] <= 4 * 231 and t["n_evaluated"] > 3 * 200
        assert chain_seen == t["n_recorded"] - t["n_far_out"]
    # the same exploration either way (the recorder passes evaluations through)
    assert np.array_equal(states.warmup_draws, traj.warmup_draws)

    def grad_error(res, chain):
        qs = res.draws[chain, ::10]
        net = res.info["surrogates"][chain]
        e = np.array([net.grad(q) - m.grad(q) for q in qs])
        return np.median(np.linalg.norm(e, axis=1) / np.linalg.norm(
            [m.grad(q) - m.grad(qs.mean(axis=0)) for q in qs], axis=1))

    # (seeds 3-5: errors 0.007-0.008 against 0.22-0.34, acceptance 0.87-0.90
    # against 0.48-0.59; before the trajectory start took RNS-HMC's "auto"
    # input scale and ridge and the batch fit's online penalty: errors
    # 0.06-0.07, acceptance 0.83-0.86)
    for c in range(2):
        e_states, e_traj = grad_error(states, c), grad_error(traj, c)
        assert e_traj < 0.5 * e_states, (c, e_traj, e_states)
    assert traj.acceptance_rate.mean() > 1.2 * states.acceptance_rate.mean()
    # n_hidden "auto": 1000 from states (the paper's), auto_hidden from trajectories
    from fastsurrogate.samplers.rns_hmc import auto_hidden
    big = fs.models.Gaussian(np.zeros(50), np.eye(50))
    assert fs.ARNSHMC(big).n_hidden == auto_hidden(50) == 1989
    assert fs.ARNSHMC(big, training="states").n_hidden == 1000
    assert fs.ARNSHMC(big, n_start=1400).start_kind == "states"
    small = fs.models.Gaussian(np.zeros(18), np.eye(18))
    assert fs.ARNSHMC(small).start_kind == "states"        # 190 coefficients < 200
    with pytest.raises(ValueError, match="training"):
        fs.ARNSHMC(small, training="accepted")


def test_auto_hidden_units():
    from fastsurrogate.samplers.rns_hmc import auto_hidden, quadratic_count
    assert quadratic_count(50) == 1326 and quadratic_count(50, 3) == 10
    assert [auto_hidden(d) for d in (1, 20, 35, 36, 50, 100)] == [1000, 1000, 1000, 1055,
                                                                  1989, 4000]
    assert auto_hidden(100, subspace=20) == 1000
    assert fs.RNSHMC(fs.models.StandardNormal(50)).n_hidden == 1989
    assert fs.RNSHMC(fs.models.StandardNormal(50), n_hidden=300).n_hidden == 300
