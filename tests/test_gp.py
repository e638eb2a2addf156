"""GP and FITC surrogates (fastsurrogate.surrogates.gp): likelihood gradients,
hyper-parameter recovery, the compiled RBF-network encoding of the predictive
mean, FITC -> GP limit, and a 32-d Gaussian potential."""
import numpy as np
import pytest

pytest.importorskip("fastsurrogate.surrogates._network")

from fastsurrogate.surrogates import gp  # noqa: E402


def _fd_grad(f, theta, h=1e-6):
    out = np.empty(len(theta))
    for k in range(len(theta)):
        e = np.zeros(len(theta))
        e[k] = h
        out[k] = (f(theta + e) - f(theta - e)) / (2 * h)
    return out


def _smooth_data(n=80, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(n, dim)) * np.linspace(0.5, 2.0, dim) + 1.0
    w = np.linspace(1.0, -0.5, dim)
    u = np.sin(Q @ w) + 0.3 * np.sum((Q - 1.0) ** 2, axis=1)
    return Q, u


# --------------------------------------------------------------------------
# marginal likelihoods
# --------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["gp", "fitc"])
@pytest.mark.parametrize("ard", [False, True])
def test_log_marginal_likelihood_gradient_matches_finite_differences(kind, ard):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    y = np.sin(X @ np.array([1.0, 0.5, -0.3])) + 0.05 * rng.normal(size=60)
    n_ell = 3 if ard else 1
    theta = np.concatenate([[0.1], rng.normal(0.0, 0.3, size=n_ell), [-1.5]])
    if kind == "gp":
        f = lambda t: gp.gp_log_marginal_likelihood(t, X, y, grad=False)   # noqa: E731
        lml, g = gp.gp_log_marginal_likelihood(theta, X, y)
    else:
        Z = X[:15]
        f = lambda t: gp.fitc_log_marginal_likelihood(t, X, y, Z, grad=False)   # noqa: E731
        lml, g = gp.fitc_log_marginal_likelihood(theta, X, y, Z)
    assert lml == pytest.approx(f(theta), rel=1e-12)
    np.testing.assert_allclose(g, _fd_grad(f, theta), rtol=1e-6, atol=1e-6 * np.abs(g).max())


def test_gp_log_marginal_likelihood_matches_dense_formula():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 2))
    y = rng.normal(size=30)
    theta = np.log([1.3, 0.7, 0.2])
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = 1.3 ** 2 * (np.exp(-0.5 * D / 0.7 ** 2) + 1e-8 * np.eye(30)) + 0.2 ** 2 * np.eye(30)
    sign, logdet = np.linalg.slogdet(K)
    ref = -0.5 * (y @ np.linalg.solve(K, y) + logdet + 30 * np.log(2 * np.pi))
    assert gp.gp_log_marginal_likelihood(theta, X, y, grad=False) == pytest.approx(ref, rel=1e-10)


def test_fitted_hyperparameters_recover_a_known_gp():
    rng = np.random.default_rng(3)
    n, sf, ell, sn = 200, 1.5, 0.8, 0.05
    Q = rng.normal(size=(n, 2))
    D = ((Q[:, None, :] - Q[None, :, :]) ** 2).sum(-1)
    K = sf ** 2 * np.exp(-0.5 * D / ell ** 2) + (sn ** 2 + 1e-10) * np.eye(n)
    u = 4.0 + np.linalg.cholesky(K) @ rng.normal(size=n)
    sur = gp.fit_gp(Q, u, seed=0)
    assert sur.info["converged"]
    assert 0.5 * sf < sur.signal_sd < 2.0 * sf
    np.testing.assert_array_less(0.6 * ell, sur.length_scales)
    np.testing.assert_array_less(sur.length_scales, 1.6 * ell)
    assert 0.5 * sn < sur.noise_sd < 2.0 * sn
    # ARD on the same data: both length scales in range as well
    ard = gp.fit_gp(Q, u, ard=True, seed=0)
    assert ard.length_scale_std.shape == (2,)
    np.testing.assert_array_less(0.5 * ell, ard.length_scales)
    np.testing.assert_array_less(ard.length_scales, 2.0 * ell)
    assert ard.info["log_marginal_likelihood"] >= sur.info["log_marginal_likelihood"] - 1e-6


def test_ard_finds_the_irrelevant_dimension():
    rng = np.random.default_rng(4)
    Q = rng.normal(size=(150, 2))
    u = np.sin(2.0 * Q[:, 0])
    sur = gp.fit_gp(Q, u, ard=True, seed=0)
    assert sur.length_scales[1] > 10 * sur.length_scales[0]


def test_predictive_mean_nearly_interpolates_with_small_noise():
    Q, u = _smooth_data(n=60, dim=2, seed=5)
    sur = gp.fit_gp(Q, u, noise=1e-4, seed=0)
    assert np.max(np.abs(sur.predict(Q) - u)) < 1e-2 * np.std(u)
    mean, var = sur.predict(Q, return_var=True)
    assert np.all(var >= 0) and np.max(var) < 1e-4 * sur.signal_sd ** 2
    far = np.full((1, 2), 100.0)
    m_far, v_far = sur.predict(far, return_var=True)
    assert m_far[0] == pytest.approx(sur.mean, abs=1e-8)
    assert v_far[0] == pytest.approx(sur.signal_sd ** 2, rel=1e-6)


# --------------------------------------------------------------------------
# the compiled network is the predictive mean
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fitted():
    Q, u = _smooth_data(n=80, dim=3, seed=6)
    return Q, u, {
        ("gp", False): gp.fit_gp(Q, u, seed=0),
        ("gp", True): gp.fit_gp(Q, u, ard=True, seed=0),
        ("fitc", False): gp.fit_fitc(Q, u, n_inducing=20, seed=0),
        ("fitc", True): gp.fit_fitc(Q, u, n_inducing=20, ard=True, seed=0),
    }


@pytest.mark.parametrize("kind", ["gp", "fitc"])
@pytest.mark.parametrize("ard", [False, True])
def test_compiled_potential_equals_numpy_predictive_mean(fitted, kind, ard):
    Q, u, surs = fitted
    sur = surs[(kind, ard)]
    pot = sur.potential
    assert pot.dim == Q.shape[1]
    rng = np.random.default_rng(7)
    pts = np.vstack([Q[:5], Q.mean(0) + rng.normal(size=(10, Q.shape[1])) * Q.std(0)])
    m = sur.predict(pts)
    g = sur.grad_mean(pts)
    for q, mq, gq in zip(pts, m, g):
        val, grad = pot.value_and_grad(q)
        assert val == pytest.approx(mq, rel=1e-9, abs=1e-9 * np.std(u))
        np.testing.assert_allclose(grad, gq, rtol=1e-9, atol=1e-9 * np.abs(gq).max())
        assert pot.value(q) == val
        np.testing.assert_array_equal(pot.grad(q), grad)
        fd = _fd_grad(lambda x: sur.predict(x), q, h=1e-4)   # weights ~1e5: cancellation
        np.testing.assert_allclose(gq, fd, rtol=1e-5, atol=1e-6 * np.abs(gq).max())


def test_surrogate_summary_and_encoding(fitted):
    Q, u, surs = fitted
    sur = surs[("fitc", True)]
    assert sur.info["n_train"] == 80 and sur.info["n_centres"] == 20
    assert np.isfinite(sur.info["log_marginal_likelihood"]) and sur.info["fit_seconds"] > 0
    np.testing.assert_allclose(sur.shift, Q.mean(0))
    np.testing.assert_allclose(sur.scale, Q.std(0) * sur.length_scale_std)
    assert sur.mean == pytest.approx(u.mean())
    assert "fitc" in repr(sur)
    iso = surs[("gp", False)]
    assert iso.length_scale_std.shape == (1,) and iso.centres.shape == Q.shape


def test_gp_potential_and_max_train():
    Q, u = _smooth_data(n=90, dim=2, seed=8)
    pot = gp.gp_potential(Q, u, kind="gp", max_train=40, seed=1)
    sur = gp.fit_gp(Q, u, max_train=40, seed=1)
    assert sur.info["n_train"] == 40
    assert pot.value(Q[0]) == pytest.approx(sur.potential.value(Q[0]), rel=1e-12)
    pf = gp.gp_potential(Q, u, kind="fitc", n_inducing=10, seed=1)
    assert pf.dim == 2 and np.isfinite(pf.value(Q[0]))
    with pytest.raises(ValueError, match="kind"):
        gp.gp_potential(Q, u, kind="svgp")


# --------------------------------------------------------------------------
# FITC -> full GP
# --------------------------------------------------------------------------

@pytest.mark.parametrize("ard", [False, True])
def test_fitc_with_all_points_matches_full_gp(ard):
    Q, u = _smooth_data(n=100, dim=3, seed=9)
    rng = np.random.default_rng(10)
    Qt = Q.mean(0) + rng.normal(size=(40, 3)) * Q.std(0)
    full = gp.fit_gp(Q, u, ard=ard, noise=1e-2, seed=0)
    m = full.predict(Qt)
    # same hyper-parameters: FITC with Z = X is the full GP (up to jitter)
    same = gp.fit_fitc(Q, u, n_inducing=100, theta=full.theta)
    assert np.max(np.abs(same.predict(Qt) - m)) < 5e-3 * np.std(m)
    assert same.info["log_marginal_likelihood"] == pytest.approx(
        full.info["log_marginal_likelihood"], rel=1e-2)
    # hyper-parameters fitted separately land on the same model
    sep = gp.fit_fitc(Q, u, n_inducing=100, ard=ard, noise=1e-2, seed=0)
    assert np.max(np.abs(sep.predict(Qt) - m)) < 2e-2 * np.std(m)


def test_kmeanspp_inducing_points_are_distinct_training_inputs():
    Q, u = _smooth_data(n=60, dim=2, seed=11)
    for how in ("kmeans++", "random"):
        sur = gp.fit_fitc(Q, u, n_inducing=15, inducing=how, seed=2)
        idx = sur.info["inducing_index"]
        assert len(np.unique(idx)) == 15
        np.testing.assert_allclose(sur.centres, (Q[idx] - sur.shift) / sur.sd)


# --------------------------------------------------------------------------
# 32-d Gaussian with one wide direction
# --------------------------------------------------------------------------

def test_gp_gradient_follows_32d_gaussian():
    # Sigma = 0.01 I + 0.99 e e^T, e = (1, ..., 1) / sqrt(32): eigenvalue 1
    # along e, 0.01 elsewhere; U(q) = q^T Sigma^-1 q / 2.  U is a quadratic
    # form, 32 * 33 / 2 + 32 + 1 = 561 coefficients.  With 500 training points
    # (fewer than that) the marginal likelihood prefers a short-length-scale
    # model whose gradient has mean cosine ~0.65-0.87 to the truth; from
    # ~600 points on it selects the smooth model (l ~ 50 standardised units)
    # and the cosine is > 0.97 everywhere.  700 points leave a margin.
    d = 32
    e = np.ones(d) / np.sqrt(d)
    cov = 0.01 * np.eye(d) + 0.99 * np.outer(e, e)
    prec = np.linalg.inv(cov)
    chol = np.linalg.cholesky(cov)
    rng = np.random.default_rng(12)
    Q = rng.normal(size=(700, d)) @ chol.T
    u = 0.5 * np.einsum("ij,jk,ik->i", Q, prec, Q)
    sur = gp.fit_gp(Q, u, seed=0)
    Qt = rng.normal(size=(100, d)) @ chol.T
    truth = Qt @ prec
    g = np.array([sur.potential.grad(q) for q in Qt])
    cos = np.sum(g * truth, 1) / np.linalg.norm(g, axis=1) / np.linalg.norm(truth, axis=1)
    assert cos.mean() > 0.95
    assert np.quantile(cos, 0.05) > 0.9


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------

def test_validation_errors():
    Q, u = _smooth_data(n=30, dim=2, seed=13)
    with pytest.raises(ValueError, match="2-D"):
        gp.fit_gp(Q[:, 0], u)
    with pytest.raises(ValueError, match="shape"):
        gp.fit_gp(Q, u[:-1])
    with pytest.raises(ValueError, match="shape"):
        gp.fit_fitc(Q, u[:, None], n_inducing=5)
    bad = Q.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        gp.fit_gp(bad, u)
    ubad = u.copy()
    ubad[0] = np.inf
    with pytest.raises(ValueError, match="NaN"):
        gp.fit_fitc(Q, ubad, n_inducing=5)
    with pytest.raises(ValueError, match="at least 2"):
        gp.fit_gp(Q[:1], u[:1])
    with pytest.raises(ValueError, match="n_inducing"):
        gp.fit_fitc(Q, u, n_inducing=31)
    with pytest.raises(ValueError, match="n_inducing"):
        gp.fit_fitc(Q, u, n_inducing=0)
    with pytest.raises(ValueError, match="noise"):
        gp.fit_gp(Q, u, noise=-1.0)
    with pytest.raises(ValueError, match="max_train"):
        gp.fit_gp(Q, u, max_train=1)
    with pytest.raises(ValueError, match="inducing"):
        gp.fit_fitc(Q, u, n_inducing=5, inducing="grid")
    with pytest.raises(ValueError, match="theta"):
        gp.fit_gp(Q, u, theta=[0.0, 0.0])
    sur = gp.fit_gp(Q, u, seed=0)
    with pytest.raises(ValueError, match="Qnew"):
        sur.predict(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="NaN"):
        sur.predict(np.full(2, np.nan))
    with pytest.raises(ValueError):
        sur.potential.value(np.zeros(3))
