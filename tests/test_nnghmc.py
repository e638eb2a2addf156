"""NNgHMC: exact draws, the training schedule's decisions, the prior swap."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.models import posteriordb as pdb

from test_posteriordb_hmc import compare_to_reference


def z_to_truth(draws, mean, sd):
    """(mean, sd) errors of draws (chains, n, dim) in units of their MCSE."""
    zm = (draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(draws)
    zs = (draws.std(axis=(0, 1)) - sd) / diagnostics.mcse_sd(draws)
    return zm, zs


def linear_trainer(Q, G, **options):
    """A stand-in trainer: the least-squares affine map q -> grad U (exact for a Gaussian)."""
    X = np.hstack([Q, np.ones((Q.shape[0], 1))])
    W = np.linalg.lstsq(X, G, rcond=None)[0]
    A, b = W[:-1], W[-1]
    return fs.Potential.from_callable(lambda q: (np.nan, q @ A + b), Q.shape[1])


def useless_trainer(Q, G, **options):
    """A gradient field pointing the wrong way: every trial fails."""
    return fs.Potential.from_callable(lambda q: (np.nan, -5.0 * q), Q.shape[1])


class FailsFirst:
    """Useless on the first call, linear least squares afterwards."""

    def __init__(self):
        self.calls = []

    def __call__(self, Q, G, **options):
        self.calls.append((Q.shape[0], options))
        return useless_trainer(Q, G) if len(self.calls) == 1 else linear_trainer(Q, G)


# -- exactness ---------------------------------------------------------------------

def test_exact_on_ill_conditioned_gaussian():
    d = 30
    var = np.logspace(-1, 3, d)           # variances 0.1 .. 1000
    model = fs.models.Gaussian(np.zeros(d), np.diag(var))
    res = fs.sample(model, method="nnghmc", n_draws=3000, n_warmup=1000, chains=2, seed=11,
                    n_steps=10, n_hidden=60, progress=False)
    assert res.exact and res.info["switched"], res.info["events"]
    assert res.stats["judge_evaluated"].all()
    zm, zs = z_to_truth(res.draws, 0.0, np.sqrt(var))
    assert np.all(np.abs(zm) < 4) and np.all(np.abs(zs) < 4), (zm, zs)
    # the network drives well: acceptance close to exact HMC's in the exploration
    assert res.acceptance_rate.mean() >= 0.9 * res.info["hmc_acceptance"] - 0.05


def test_exact_on_posteriordb_gp_regr(data_dir):
    model = pdb.GPRegr.from_posteriordb(data_dir)
    pot = pdb.as_potential(model)
    ref = pdb.GPRegr.reference_draws(data_dir)
    res = fs.sample(pot, method="nnghmc", n_draws=3000, n_warmup=1000, chains=4, seed=5,
                    n_steps=8, n_hidden=50, progress=False)
    assert res.info["switched"], res.info["events"]
    assert res.stats["divergent"].mean() < 0.01
    compare_to_reference(res, ref)


def test_defaults_mix_on_posteriordb_eight_schools(data_dir):
    """The default optimiser (the paper's Adam) on eight schools (non-centred)
    with every default: with L-BFGS's network mu and log tau mixed slowly at
    the same acceptance (smallest bulk ESS 114, R-hat 1.039; Adam 1766 and
    1.003, exact HMC 1916; Intel Xeon)."""
    cls = pdb.EightSchoolsNoncentered
    pot = pdb.as_potential(cls.from_posteriordb(data_dir))
    with np.errstate(all="ignore"):
        res = fs.sample(pot, method="nnghmc", chains=4, seed=2024, progress=False)
    assert res.exact and res.info["switched"]
    assert np.max(diagnostics.rhat(res.draws)) <= 1.01
    assert np.min(diagnostics.ess_bulk(res.draws)) >= 400
    compare_to_reference(res, cls.reference_draws(data_dir))


# -- the schedule ------------------------------------------------------------------

def test_schedule_switches_after_a_successful_trial():
    model = fs.models.Gaussian(np.array([1.0, -1.0, 0.0]), np.diag([1.0, 2.0, 4.0]))
    res = fs.NNGHMC(model, n_steps=8, trainer=linear_trainer, trial_length=40).sample(
        1000, n_warmup=400, chains=2, seed=3, progress=False)
    ev = res.info["events"]
    assert [e["event"] for e in ev] == ["train", "trial", "switch"]
    burn, start, every, end = res_schedule = fs.NNGHMC(model).schedule(400)
    assert res_schedule == (80, 200, 40, 400)
    assert ev[0]["iteration"] == 200 and ev[0]["n_points"] > 100
    assert ev[1]["switch"] and ev[1]["acceptance"] >= 0.9 * ev[1]["hmc_acceptance"]
    assert res.info["switched"] and res.info["switch_iteration"] == 200
    # stage of every warm-up row: burn-in, explore, one trial; sampling drawn by the network
    stage = res.info["warmup_stage"]
    assert np.bincount(stage).tolist() == [80, 120, 40]
    assert res.warmup_draws.shape == (2, 240, 3)
    assert res.draws.shape == (2, 1000, 3)
    assert {"warmup", "train", "trial", "sample"} <= set(res.timings)
    assert res.surrogate is not None and res.info["n_train"] == ev[0]["n_points"]


def test_schedule_retrains_after_a_failed_trial():
    model = fs.models.Gaussian(np.zeros(3), np.diag([1.0, 2.0, 4.0]))
    trainer = FailsFirst()
    res = fs.NNGHMC(model, n_steps=8, trainer=trainer, n_hidden=17, blocks=3, start="affine",
                    train_start=100, train_every=50, trial_length=30).sample(
        500, n_warmup=300, chains=1, seed=4, progress=False)
    ev = res.info["events"]
    assert [e["event"] for e in ev] == ["train", "trial", "train", "trial", "switch"]
    assert not ev[1]["switch"] and ev[3]["switch"]
    assert [ev[0]["iteration"], ev[2]["iteration"]] == [100, 150]
    # more exploration, more points; the trainer got the network options and a seed
    assert ev[2]["n_points"] > ev[0]["n_points"]
    opts = trainer.calls[0][1]
    assert opts["n_hidden"] == 17 and opts["blocks"] == 3 and isinstance(opts["seed"], int)
    assert trainer.calls[0][1]["seed"] != trainer.calls[1][1]["seed"]
    # start="affine": the first training starts from the affine fit, the
    # retraining from the previous network (warm start)
    assert isinstance(trainer.calls[0][1]["init"], fs.surrogates.GradientNetwork)
    assert isinstance(trainer.calls[1][1]["init"], fs.Potential)
    assert not isinstance(trainer.calls[1][1]["init"], fs.surrogates.GradientNetwork)
    assert np.bincount(res.info["warmup_stage"]).tolist() == [60, 90, 60]
    random = FailsFirst()         # the default start: the trainer's own
    fs.NNGHMC(model, n_steps=8, trainer=random, train_start=100,
              train_every=50, trial_length=30).sample(10, n_warmup=300, chains=1, seed=4,
                                                                   progress=False)
    assert "init" not in random.calls[0][1] and "init" in random.calls[1][1]
    # a user's trainer is not handed the built-in trainer's optimizer
    assert "method" not in random.calls[0][1]


def test_affine_start_network_is_the_least_squares_fit():
    from fastsurrogate.surrogates.gradient_network import affine_start_network
    rng = np.random.default_rng(0)
    Q = rng.normal(size=(400, 6)) * [1, 2, 3, 0.5, 1, 4] + 1.0
    A = rng.normal(size=(6, 6))
    G = Q @ A.T + 0.3 + 0.01 * rng.normal(size=(400, 6))
    X = np.hstack([Q, np.ones((400, 1))])
    W = np.linalg.lstsq(X, G, rcond=None)[0]
    for blocks, n_hidden in ((1, 12), (3, 5), (2, 20)):
        net = affine_start_network(Q, G, n_hidden, blocks, seed=1)
        assert net.n_hidden == n_hidden * blocks and net.dim == 6
        pred = net.gradient_batch(Q[:50])
        if 2 * (6 // blocks) <= n_hidden:                # every block keeps its full rank
            np.testing.assert_allclose(pred, X[:50] @ W, rtol=1e-5, atol=1e-5)
        else:                                            # truncated rank: still close
            assert np.linalg.norm(pred - G[:50]) < 0.5 * np.linalg.norm(G[:50])
    with pytest.raises(ValueError, match="softplus or relu"):
        affine_start_network(Q, G, 12, activation="tanh")


def test_schedule_keeps_exact_hmc_when_no_trial_succeeds():
    mean, sd = np.array([1.0, -2.0]), np.array([1.0, 0.5])
    model = fs.models.Gaussian(mean, np.diag(sd ** 2))
    res = fs.NNGHMC(model, n_steps=8, trainer=useless_trainer, train_start=200,
                    train_every=100, trial_length=20).sample(
        3000, n_warmup=400, chains=2, seed=6, progress=False)
    ev = res.info["events"]
    assert [e["event"] for e in ev] == ["train", "trial"] * 3 + ["keep_exact"]
    assert [e["iteration"] for e in ev if e["event"] == "train"] == [200, 300, 400]
    assert not any(e["switch"] for e in ev if e["event"] == "trial")
    assert not res.info["switched"] and res.info["switch_iteration"] is None
    assert res.acceptance_rate.mean() > 0.6          # exact HMC drew the sample
    zm, zs = z_to_truth(res.draws, mean, sd)
    assert np.all(np.abs(zm) < 4) and np.all(np.abs(zs) < 4), (zm, zs)


def test_seeded_runs_repeat():
    model = fs.models.Gaussian(np.zeros(2), np.eye(2))
    a, b = (fs.NNGHMC(model, n_steps=5, trainer=linear_trainer).sample(
        200, n_warmup=200, chains=2, seed=9, progress=False) for _ in range(2))
    np.testing.assert_array_equal(a.draws, b.draws)
    np.testing.assert_array_equal(a.warmup_draws, b.warmup_draws)


# -- prior swap --------------------------------------------------------------------

def test_prior_swap_gradient_and_sampling():
    # likelihood N(q | m, S) with prior N(0, I) (old) or N(0, 4 I) (new)
    m, S = np.array([1.0, -1.0, 0.5]), np.diag([0.5, 1.0, 2.0])
    lik = fs.models.Gaussian(m, S)
    old = fs.models.Gaussian(np.zeros(3), np.eye(3))
    new = fs.models.Gaussian(np.zeros(3), 4.0 * np.eye(3))
    first = fs.NNGHMC(fs.WeightedSum([lik, old]), n_steps=8, n_hidden=40).sample(
        200, n_warmup=500, chains=1, seed=1, progress=False)
    net = first.surrogate
    drive = fs.surrogates.swap_prior(net, old, new)
    rng = np.random.default_rng(0)
    for q in rng.normal(size=(5, 3)):
        np.testing.assert_allclose(drive.grad(q), net.grad(q) + new.grad(q) - old.grad(q),
                                   rtol=1e-12, atol=1e-12)
    # reused without retraining: exact for the new posterior
    target = fs.WeightedSum([lik, new])
    res = fs.NNGHMC(target, surrogate=drive, n_steps=8).sample(
        3000, n_warmup=300, chains=2, seed=2, progress=False)
    assert [e["event"] for e in res.info["events"]] == ["given_surrogate"]
    assert res.surrogate is drive
    P = np.linalg.inv(np.linalg.inv(S) + np.eye(3) / 4.0)      # posterior covariance
    mu = P @ np.linalg.solve(S, m)
    zm, zs = z_to_truth(res.draws, mu, np.sqrt(np.diag(P)))
    assert np.all(np.abs(zm) < 4) and np.all(np.abs(zs) < 4), (zm, zs)


def test_prior_swap_errors():
    a, b = fs.models.StandardNormal(2), fs.models.StandardNormal(3)
    with pytest.raises(TypeError, match="new_prior"):
        fs.surrogates.swap_prior(a, a, lambda q: q)
    with pytest.raises(ValueError, match="dimensions"):
        fs.surrogates.swap_prior(a, a, b)


# -- bad input -------------------------------------------------------------------

def test_argument_errors():
    model = fs.models.StandardNormal(2)
    assert fs.SAMPLERS["nnghmc"] is fs.NNGHMC
    with pytest.raises(ValueError, match="activation"):
        fs.NNGHMC(model, activation="sigmoid")
    with pytest.raises(ValueError, match="blocks"):
        fs.NNGHMC(model, blocks=3)
    with pytest.raises(ValueError, match="holdout"):
        fs.NNGHMC(model, holdout=1.0)
    with pytest.raises(ValueError, match="switch_fraction"):
        fs.NNGHMC(model, switch_fraction=-0.1)
    with pytest.raises(ValueError, match="train_start"):
        fs.NNGHMC(model, train_start=1.5)
    with pytest.raises(TypeError, match="train_every"):
        fs.NNGHMC(model, train_every="often")
    with pytest.raises(ValueError, match="trial_length"):
        fs.NNGHMC(model, trial_length=0)
    with pytest.raises(TypeError, match="trainer"):
        fs.NNGHMC(model, trainer="adam")
    with pytest.raises(ValueError, match="start"):
        fs.NNGHMC(model, start="zeros")
    with pytest.raises(TypeError, match="trainer_options"):
        fs.NNGHMC(model, trainer_options=[1])
    with pytest.raises(ValueError, match="dim"):
        fs.NNGHMC(model, surrogate=fs.models.StandardNormal(3))
    with pytest.raises(TypeError, match="unexpected"):
        fs.sample(model, method="nnghmc", n_hiden=10)
    with pytest.raises(ValueError, match="no training"):
        fs.NNGHMC(model, train_start=300, train_end=200).sample(10, n_warmup=400,
                                                                progress=False)
    with pytest.raises(ValueError, match="dim"):
        fs.NNGHMC(model, trainer=lambda Q, G, **kw: fs.models.StandardNormal(3)).sample(
            10, n_warmup=100, progress=False)
