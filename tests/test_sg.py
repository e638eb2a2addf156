"""SGLD and SGHMC (samplers/sg.py, csrc/fs_sg.c) and the minibatch kernel
(fs_glm_eval_rows).

The kernel against NumPy on the same rows and against finite differences;
the minibatch gradient's unbiasedness, both for NumPy-drawn batches and for
the batches the C loop draws (through one SGLD step), with standard errors
of the mean over independent batches; the draws against a NUTS reference,
with tolerances from the MCSEs plus a bias bound derived from the step size.
"""
import numpy as np
import pytest
from scipy.special import expit, log_ndtr

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.core._sg import SGChain, minibatch_value_and_grad
from fastsurrogate.core import new_trace


def _data(n=1000, d=3, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[:, 0] = 1.0
    beta = np.resize([0.5, -1.0, 0.3, 0.8, -0.2], d) / np.sqrt(max(d / 3, 1))
    y = (rng.random(n) < expit(X @ beta)).astype(float)
    return X, y


def _numpy_rows(family, X, y, beta, rows, scale, prior_sd):
    Xb, yb = X[rows], y[rows]
    t = Xb @ beta
    if family == "logistic":
        loss, r = np.logaddexp(0, t) - yb * t, expit(t) - yb
    elif family == "probit":
        s = 2 * yb - 1
        loss = -log_ndtr(s * t)
        r = -s * np.exp(-0.5 * t ** 2 - 0.5 * np.log(2 * np.pi) - log_ndtr(s * t))
    elif family == "poisson":
        loss, r = np.exp(t) - yb * t, np.exp(t) - yb
    else:
        loss, r = 0.5 * (t - yb) ** 2, t - yb
    value = scale * loss.sum() + 0.5 * np.sum(beta ** 2) / prior_sd ** 2
    grad = scale * (Xb.T @ r) + beta / prior_sd ** 2
    gsq = ((r[:, None] * Xb) ** 2).sum(axis=0)
    return value, grad, gsq


def _model(family, X, y, prior_sd=2.0):
    if family == "logistic":
        return fs.models.LogisticRegression(X, y, prior_sd=prior_sd)
    if family == "probit":
        return fs.models.ProbitRegression(X, y, prior_sd=prior_sd)
    if family == "poisson":
        yc = np.random.default_rng(0).poisson(np.exp(0.3 * X[:, 1]))
        return fs.models.PoissonRegression(X, yc.astype(float), prior_sd=prior_sd), yc.astype(float)
    return fs.models.LinearRegression(X, y, prior_sd=prior_sd, sigma=1.0)


@pytest.mark.parametrize("family", ["logistic", "probit", "poisson", "gaussian"])
@pytest.mark.parametrize("d", [3, 7, 50])
def test_rows_kernel_matches_numpy(family, d):
    X, y = _data(n=300, d=d)
    m = _model(family, X, y)
    if isinstance(m, tuple):
        m, y = m
    rng = np.random.default_rng(1)
    beta = 0.1 * rng.standard_normal(d)
    for k in (1, 5, 24, 25, 77):
        rows = rng.integers(0, 300, size=k)          # repeats allowed
        v, g, gs = minibatch_value_and_grad(m, beta, rows, grad_sq=True)
        rv, rg, rgs = _numpy_rows(family, X, y, beta, rows, 300 / k, 2.0)
        np.testing.assert_allclose(v, rv, rtol=1e-11)
        np.testing.assert_allclose(g, rg, rtol=1e-10, atol=1e-10 * np.abs(rg).max())
        np.testing.assert_allclose(gs, rgs, rtol=1e-10)
    # all rows with scale 1 is the full model
    v, g = minibatch_value_and_grad(m, beta, np.arange(300), scale=1.0)
    fv, fg = m.value_and_grad(beta)
    np.testing.assert_allclose(v, fv, rtol=1e-12)
    np.testing.assert_allclose(g, fg, rtol=1e-10, atol=1e-10 * np.abs(fg).max())


def test_rows_kernel_finite_differences():
    X, y = _data(n=200, d=5)
    m = fs.models.LogisticRegression(X, y, prior_sd=2.0)
    rows = np.random.default_rng(2).choice(200, 40, replace=False)
    beta = np.array([0.3, -0.5, 0.1, 0.7, -0.2])
    _, g = minibatch_value_and_grad(m, beta, rows)
    h = 1e-6
    fd = np.array([(minibatch_value_and_grad(m, beta + h * e, rows)[0]
                    - minibatch_value_and_grad(m, beta - h * e, rows)[0]) / (2 * h)
                   for e in np.eye(5)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_minibatch_gradient_unbiased_numpy_batches():
    X, y = _data(n=500, d=3)
    m = fs.models.LogisticRegression(X, y, prior_sd=2.0)
    beta = np.array([0.4, -0.8, 0.2])
    full = m.grad(beta)
    rng = np.random.default_rng(5)
    gs = np.array([minibatch_value_and_grad(m, beta, rng.choice(500, 20, replace=False))[1]
                   for _ in range(4000)])
    se = gs.std(axis=0, ddof=1) / np.sqrt(len(gs))      # independent batches
    z = (gs.mean(axis=0) - full) / se
    assert np.all(np.abs(z) < 4), z


def test_minibatch_gradient_unbiased_c_batches():
    """One SGLD step from q with eps = 1: 2 (q - q1) = g_B(q) + 2 xi, so its
    mean over independent chains is the full gradient (batches drawn in C)."""
    X, y = _data(n=500, d=3)
    m = fs.models.LogisticRegression(X, y, prior_sd=2.0)
    q = np.array([0.4, -0.8, 0.2])
    full = m.grad(q)
    gens = np.random.default_rng(7).spawn(3000)
    est = np.empty((len(gens), 3))
    for i, g in enumerate(gens):
        ch = SGChain(m, q, g, algorithm="sgld", batch_size=20, a=1.0, delta=0.0)
        tr = new_trace(1, 3)
        ch.run(tr, 0, 1)
        est[i] = 2.0 * (q - tr["draws"][0])
    se = est.std(axis=0, ddof=1) / np.sqrt(len(est))
    z = (est.mean(axis=0) - full) / se
    assert np.all(np.abs(z) < 4), z


# ---- the draws against NUTS ---------------------------------------------------

@pytest.fixture(scope="module")
def problem():
    X, y = _data(n=1000, d=3)
    m = fs.models.LogisticRegression(X, y, prior_sd=2.0)
    ref = fs.sample(m, method="nuts", n_draws=3000, n_warmup=500, chains=4, seed=11,
                    progress=False)
    return m, ref.draws


def _bias_bound(m, ref, h_disc, h_noise, batch_size):
    """Per-coordinate bound on the mean's bias from the step size.

    The stationary variance inflates by about h_disc / 4 (the discretisation:
    a Langevin step of variance h on a near-Gaussian target; for SGHMC's
    step eps, h_disc = eps^2) plus sd^2 h_noise V_jj / 4 (the unmodelled
    minibatch noise raises the temperature by h_noise V / 4; h_noise = h for
    SGLD, 2 eps / C for SGHMC), V = n^2 / k (1 - k / n) var_i(grad loss_i) at
    the posterior mean.  On a target whose standardised skewness is at most
    1 (checked on the reference) the mean moves by at most inflation / sd."""
    flat = ref.reshape(-1, ref.shape[-1])
    mu, sd = flat.mean(0), flat.std(0)
    z = (flat - mu) / sd
    assert np.all(np.abs((z ** 3).mean(0)) < 1.0)
    n = m.n_obs
    _, g, gsq = minibatch_value_and_grad(m, mu, np.arange(n), scale=1.0, grad_sq=True)
    lik = g - mu / 4.0                                   # prior_sd 2
    var_i = gsq / n - (lik / n) ** 2
    V = n * n / batch_size * (1 - batch_size / n) * var_i
    inflation = h_disc / 4 + sd ** 2 * h_noise * V / 4
    return inflation / sd, mu


def _check_mean(res, m, ref, h_disc, h_noise, batch_size):
    bound, mu = _bias_bound(m, ref, h_disc, h_noise, batch_size)
    se = np.sqrt(diagnostics.mcse_mean(res.draws) ** 2 + diagnostics.mcse_mean(ref) ** 2)
    err = np.abs(res.draws.mean(axis=(0, 1)) - mu)
    sd = ref.reshape(-1, ref.shape[-1]).std(0)
    assert np.all(4 * se + bound < 0.5 * sd)            # the test has teeth
    assert np.all(err < 4 * se + bound), (err, se, bound)


def test_sgld_decaying_step_matches_nuts(problem):
    m, ref = problem
    b, delta = 1000.0, 0.55
    a = 4e-4 * b ** delta                                # eps_0 = 4e-4
    res = fs.sample(m, method="sgld", step_size=a, step_offset=b, step_decay=delta,
                    batch_size=100, n_warmup=3000, n_draws=12000, chains=4, seed=3,
                    progress=False)
    assert res.exact is False and "APPROXIMATE" in res.info["note"]
    assert "approximate" in res.target and "stochastic-gradient" in res.target
    h = res.stats["step_size"].mean()
    assert res.stats["step_size"][0, -1] < 0.25 * res.warmup_stats["step_size"][0, 0]
    _check_mean(res, m, ref, h, h, 100)


def test_sghmc_decaying_step_matches_nuts(problem):
    m, ref = problem
    b, delta, C = 1000.0, 0.2, 30.0
    res = fs.sample(m, method="sghmc", step_size=0.006 * b ** delta, step_offset=b,
                    step_decay=delta, friction=C, n_steps=10, batch_size=100,
                    n_warmup=1000, n_draws=4000, chains=4, seed=4, progress=False)
    assert res.exact is False and "APPROXIMATE" in res.info["note"]
    eps = res.stats["step_size"].mean()
    _check_mean(res, m, ref, eps ** 2, 2 * eps / C, 100)


def test_sghmc_fisher_noise_estimate(problem):
    m, ref = problem
    eps, C = 0.004, 40.0
    res = fs.sample(m, method="sghmc", step_size=eps, step_decay=0.0, friction=C,
                    n_steps=5, batch_size=100, noise_estimate="fisher",
                    n_warmup=500, n_draws=4000, chains=4, seed=5, progress=False)
    assert "noise_clipped" in res.stats
    _check_mean(res, m, ref, eps ** 2, 2 * eps / C, 100)


def test_sghmc_mh_is_exact(problem):
    m, ref = problem
    res = fs.sample(m, method="sghmc", mh=True, step_size=0.01, n_steps=12, batch_size=500,
                    n_warmup=200, n_draws=1500, chains=4, seed=6, progress=False)
    assert res.exact is True
    assert 0.2 < res.stats["accept_prob"].mean() <= 1.0
    assert res.stats["judge_evaluated"].all()
    flat = ref.reshape(-1, 3)
    se = np.sqrt(diagnostics.mcse_mean(res.draws) ** 2 + diagnostics.mcse_mean(ref) ** 2)
    z = (res.draws.mean(axis=(0, 1)) - flat.mean(0)) / se
    assert np.all(np.abs(z) < 4), z
    # the potential column is the full U at the draws
    np.testing.assert_allclose(res.stats["potential"][0, -1], m.value(res.draws[0, -1]),
                               rtol=1e-12)


def test_reproducible_and_threads_independent(problem):
    m, _ = problem
    kw = dict(method="sgld", step_size=1e-3, step_decay=0.0, batch_size=50, n_warmup=10,
              n_draws=50, chains=2, seed=9, progress=False)
    a = fs.sample(m, **kw).draws
    b = fs.sample(m, **kw).draws
    np.testing.assert_array_equal(a, b)


# ---- bad arguments ------------------------------------------------------------

def test_bad_arguments():
    X, y = _data(n=100, d=3)
    m = fs.models.LogisticRegression(X, y)
    with pytest.raises(TypeError, match="GLM"):
        fs.SGLD(fs.models.StandardNormal(3), step_size=1e-3)
    with pytest.raises(TypeError):
        fs.SGLD(m)                                         # step_size required
    with pytest.raises(ValueError, match="step_size"):
        fs.SGLD(m, step_size=-1.0)
    with pytest.raises(ValueError, match="batch_size"):
        fs.SGLD(m, step_size=1e-3, batch_size=101)
    with pytest.raises(ValueError, match="batch_size"):
        fs.SGLD(m, step_size=1e-3, batch_size=0)
    with pytest.raises(TypeError, match="batch_size"):
        fs.SGLD(m, step_size=1e-3, batch_size=2.5)
    with pytest.raises(ValueError, match="step_decay"):
        fs.SGLD(m, step_size=1e-3, step_decay=-0.5)
    with pytest.raises(ValueError, match="step_offset"):
        fs.SGLD(m, step_size=1e-3, step_offset=0.0)
    with pytest.raises(ValueError, match="friction"):
        fs.SGHMC(m, step_size=1e-3, friction=-1.0)
    with pytest.raises(ValueError, match="eps_0 C"):
        fs.SGHMC(m, step_size=0.5, friction=3.0)
    with pytest.raises(ValueError, match="noise_estimate"):
        fs.SGHMC(m, step_size=1e-3, noise_estimate="full")
    with pytest.raises(ValueError, match="n_steps"):
        fs.SGHMC(m, step_size=1e-3, n_steps=0)
    with pytest.raises(ValueError, match="row indices"):
        minibatch_value_and_grad(m, np.zeros(3), [0, 100])
    with pytest.raises(ValueError, match="row indices"):
        minibatch_value_and_grad(m, np.zeros(3), [-1])
    with pytest.raises(TypeError, match="integers"):
        minibatch_value_and_grad(m, np.zeros(3), [0.5])
    with pytest.raises(ValueError, match="non-empty"):
        minibatch_value_and_grad(m, np.zeros(3), [])
    with pytest.raises(ValueError, match="beta"):
        minibatch_value_and_grad(m, np.zeros(4), [0])
    with pytest.raises(TypeError, match="GLM"):
        minibatch_value_and_grad(fs.models.StandardNormal(3), np.zeros(3), [0])
    with pytest.raises(ValueError):
        SGChain(m, np.zeros(3), np.random.default_rng(0), algorithm="sgd")


def test_divergence_raises_with_partial_result():
    X, y = _data(n=200, d=3)
    m = fs.models.LinearRegression(X, y, sigma=1.0)
    with pytest.raises(FloatingPointError, match="step size") as info:
        fs.sample(m, method="sgld", step_size=1.0, step_decay=0.0, batch_size=10,
                  n_warmup=0, n_draws=2000, chains=1, seed=0, progress=False)
    assert info.value.result.interrupted


def test_registry_and_exports():
    assert fs.SAMPLERS["sgld"] is fs.SGLD and fs.SAMPLERS["sghmc"] is fs.SGHMC
