"""ICA (VHMC paper 4.4), the NNgHMC twisted banana and logistic regression
with a Laplace prior (NNgHMC Table 3): C kernels against NumPy/SciPy
references and finite differences; a short HMC run recovers the ICA
unmixing matrix."""
import pickle

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import minimize

import fastsurrogate as fs
from fastsurrogate import diagnostics


def fd_grad(f, q, eps=1e-6):
    g = np.empty_like(q)
    for j in range(q.size):
        e = np.zeros_like(q)
        e[j] = eps * max(1.0, abs(q[j]))
        g[j] = (f(q + e) - f(q - e)) / (2 * e[j])
    return g


# ---- ICA ------------------------------------------------------------------------

def ica_ref(W, X, prior_var=100.0):
    """Independent reference: SciPy's logistic log-density, NumPy's slogdet."""
    n = X.shape[0]
    Y = X @ W.T
    sign, logdet = np.linalg.slogdet(W)
    U = -n * logdet - stats.logistic.logpdf(Y).sum() + (W ** 2).sum() / (2 * prior_var)
    G = -n * np.linalg.inv(W).T + np.tanh(Y / 2).T @ X + W / prior_var
    return U, G.ravel()


@pytest.fixture(scope="module")
def ica_data():
    return fs.datasets.simulate_ica(n=3000, d=3, seed=5)


def test_simulate_ica_shapes_and_truth():
    X, A, W0 = fs.datasets.simulate_ica(n=17730, d=5, seed=1)
    assert X.shape == (17730, 5) and A.shape == (5, 5) and W0.shape == (5, 5)
    np.testing.assert_allclose(W0 @ A, np.eye(5), atol=1e-12)
    assert np.linalg.cond(A) <= 2.0 + 1e-9
    X2, _, _ = fs.datasets.simulate_ica(n=17730, d=5, seed=1)
    np.testing.assert_array_equal(X, X2)
    # the unmixed sources are standard logistic: variance pi^2 / 3
    S = X @ W0.T
    # Var(s^2) = (kurtosis - 1) sigma^4 = 3.2 sigma^4 for the logistic (excess kurtosis 1.2)
    se = np.sqrt(3.2 * (np.pi ** 2 / 3) ** 2 / S.shape[0])
    assert np.all(np.abs(S.var(axis=0) - np.pi ** 2 / 3) < 5 * se)
    Xl, _, _ = fs.datasets.simulate_ica(n=100, d=2, seed=1, sources="laplace")
    assert Xl.shape == (100, 2)
    with pytest.raises(ValueError):
        fs.datasets.simulate_ica(n=0)
    with pytest.raises(ValueError):
        fs.datasets.simulate_ica(sources="gauss")


def test_ica_value_and_grad_against_scipy(ica_data):
    X, A, W0 = ica_data
    model = fs.models.ICA(X)
    assert model.dim == 9 and model.n_channels == 3
    rng = np.random.default_rng(0)
    for W in (W0, np.eye(3), W0 + 0.3 * rng.standard_normal((3, 3)),
              -W0[[2, 0, 1]] * 1.7):
        U, g = model.value_and_grad(W.ravel())
        U_ref, g_ref = ica_ref(W, X)
        assert U == pytest.approx(U_ref, rel=1e-12, abs=1e-9)
        np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-8 * np.abs(g_ref).max())
        assert model.value(W.ravel()) == U
        np.testing.assert_array_equal(model.grad(W.ravel()), g)


def test_ica_grad_finite_differences(ica_data):
    X, A, W0 = ica_data
    model = fs.models.ICA(X[:500], prior_var=4.0)
    q = (W0 + 0.2 * np.random.default_rng(1).standard_normal((3, 3))).ravel()
    g = model.grad(q)
    np.testing.assert_allclose(g, fd_grad(model.value, q), rtol=1e-6, atol=1e-5)


def test_ica_stable_for_large_projections():
    X = np.array([[1e3, -2e3], [5e2, 7.0]])
    model = fs.models.ICA(X)
    W = np.array([[1.0, 0.5], [0.2, 3.0]])
    U, g = model.value_and_grad(W.ravel())
    U_ref, g_ref = ica_ref(W, X)
    assert np.isfinite(U) and U == pytest.approx(U_ref, rel=1e-13)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12)


def test_ica_threads_do_not_change_results(ica_data):
    X, A, W0 = ica_data
    Xb = np.tile(X, (2, 1))          # 6000 rows: six blocks
    q = (W0 + 0.1).ravel()
    one = fs.models.ICA(Xb, n_threads=1).value_and_grad(q)
    two = fs.models.ICA(Xb, n_threads=2).value_and_grad(q)
    assert one[0] == two[0]
    np.testing.assert_array_equal(one[1], two[1])


def test_ica_singular_is_divergence(ica_data):
    model = fs.models.ICA(ica_data[0])
    U, g = model.value_and_grad(np.zeros(9))
    assert U == np.inf and np.all(np.isnan(g))


def test_ica_bad_input():
    with pytest.raises(ValueError):
        fs.models.ICA(np.ones(5))
    with pytest.raises(ValueError):
        fs.models.ICA(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError):
        fs.models.ICA(np.ones((3, 2)), prior_var=0.0)
    with pytest.raises(TypeError):
        fs.models.ICA(np.ones((3, 2)), n_threads=1.5)
    with pytest.raises(TypeError):
        fs.models.ICA(np.ones((3, 2)) + 1j)
    with pytest.raises(ValueError):
        fs.models.ICA(np.ones((3, 2))).value(np.ones(3))


def test_ica_pickle_and_constrain(ica_data):
    model = fs.models.ICA(ica_data[0][:100], prior_var=3.0)
    clone = pickle.loads(pickle.dumps(model))
    q = np.arange(9.0) / 10 + np.eye(3).ravel()
    assert clone.value(q) == model.value(q)
    W = model.constrain(np.stack([q, q]))["W"]
    assert W.shape == (2, 3, 3)
    assert model.param_names[1] == "W[0,1]"


def test_hmc_recovers_unmixing_matrix(ica_data):
    """HMC from the identity finds W0 up to row permutation and sign."""
    X, A, W0 = ica_data
    model = fs.models.ICA(X)
    res = fs.sample(model, method="hmc", n_draws=600, n_warmup=400, chains=2, seed=3,
                    n_steps=10, init=np.eye(3).ravel(), progress=False)
    draws = res.draws                                  # (chains, n, 9)
    # The reference: the posterior mode found by BFGS from W0.  Its Amari
    # distance from W0 is the finite-sample estimation error (0.064 for this
    # data set); an unrelated matrix is at 0.3-0.5.
    opt = minimize(model.value_and_grad, W0.ravel(), jac=True, method="BFGS")
    W_map = opt.x.reshape(3, 3)
    d_map = diagnostics.amari_distance(W_map, W0)
    assert d_map < 0.1
    for c in range(draws.shape[0]):
        Wm = draws[c].mean(axis=0).reshape(3, 3)
        # the chain (started at the identity) found W0's mode: its mean is at
        # the mode up to posterior-mean-vs-mode and Monte Carlo error
        assert diagnostics.amari_distance(Wm, W_map) < 0.01
        assert diagnostics.amari_distance(Wm, W0) < d_map + 0.01
        # align rows (permutation and sign) and compare with the posterior sd
        P = Wm @ A
        perm = np.abs(P).argmax(axis=1)
        assert sorted(perm) == [0, 1, 2]
        sgn = np.sign(P[np.arange(3), perm])
        W_al = np.empty((3, 3))
        W_al[perm] = Wm * sgn[:, None]
        sd = draws[c].std(axis=0).reshape(3, 3)
        sd_al = np.empty((3, 3))
        sd_al[perm] = sd
        # the posterior mean is within a few posterior sd of the truth
        z = (W_al - W0) / sd_al
        assert np.all(np.abs(z) < 5), z


# ---- the NNgHMC banana ------------------------------------------------------------

def banana_ref(q, A, B, C):
    U = q[0] ** 2 / (2 * A) + (q[1] + B * q[0] ** 2 - C) ** 2 / 2
    r = q[1] + B * q[0] ** 2 - C
    return U, np.array([q[0] / A + 2 * B * q[0] * r, r])


@pytest.mark.parametrize("A,B,C", [(100.0, 0.03, 3.0), (1.0, -0.5, 0.2), (4.0, 0.0, 0.0)])
def test_twisted_banana_value_grad(A, B, C):
    b = fs.models.TwistedBanana(A=A, B=B, C=C)
    rng = np.random.default_rng(2)
    for q in rng.standard_normal((5, 2)) * 3:
        U, g = b.value_and_grad(q)
        U_ref, g_ref = banana_ref(q, A, B, C)
        assert U == pytest.approx(U_ref, rel=1e-14)
        np.testing.assert_allclose(g, g_ref, rtol=1e-13)
        np.testing.assert_allclose(g, fd_grad(b.value, q), rtol=1e-6, atol=1e-7)
    # the density integrates to the Gaussian normaliser: log Z = log(2 pi sqrt(A))
    from scipy import integrate
    if A == 1.0:
        Z, _ = integrate.dblquad(lambda y, x: np.exp(-b.value(np.array([x, y]))),
                                 -10, 10, lambda x: -60, lambda x: 60)
        assert Z == pytest.approx(2 * np.pi * np.sqrt(A), rel=1e-6)


def test_twisted_banana_exact_sampler_matches_moments():
    b = fs.models.TwistedBanana(A=100.0, B=0.03, C=3.0)
    mean, cov = b.moments()
    x = b.sample(200000, seed=1)
    se = np.sqrt(np.diag(cov) / x.shape[0])
    assert np.all(np.abs(x.mean(axis=0) - mean) < 4 * se)
    assert b.A == 100.0 and b.B == 0.03 and b.C == 3.0
    assert pickle.loads(pickle.dumps(b)).value(np.ones(2)) == b.value(np.ones(2))
    with pytest.raises(ValueError):
        fs.models.TwistedBanana(A=-1.0)
    with pytest.raises(TypeError):
        fs.models.TwistedBanana(B="x")


def test_hmc_on_twisted_banana_matches_exact_moments():
    b = fs.models.TwistedBanana(A=1.0, B=0.5, C=0.0)
    mean, cov = b.moments()
    res = fs.sample(b, method="hmc", n_draws=4000, n_warmup=1000, chains=2, seed=4,
                    n_steps=10, progress=False)
    z = (res.draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(res.draws)
    assert np.all(np.abs(z) < 4), z


# ---- logistic regression with a Laplace prior ---------------------------------------

def laplace_ref(beta, X, y, b, m):
    t = X @ beta
    U = np.sum(np.logaddexp(0.0, t) - y * t) + np.sum(np.abs(beta - m) / b) + np.sum(np.log(2 * b))
    g = X.T @ (1 / (1 + np.exp(-t)) - y) + np.sign(beta - m) / b
    return U, g


def test_laplace_logistic_value_grad():
    X, y, _ = fs.datasets.simulate_logistic(n=2000, d=6, seed=3)
    b = np.array([1.0, 0.5, 2.0, 1.0, 1.0, 3.0])
    m = np.array([0.0, 0.1, 0.0, -0.2, 0.0, 0.0])
    model = fs.models.LaplaceLogisticRegression(X, y, scale=b, loc=m)
    rng = np.random.default_rng(4)
    for beta in rng.standard_normal((4, 6)):
        U, g = model.value_and_grad(beta)
        U_ref, g_ref = laplace_ref(beta, X, y, b, m)
        assert U == pytest.approx(U_ref, rel=1e-12)
        np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(g, fd_grad(model.value, beta), rtol=1e-6, atol=1e-6)
    # at a kink the prior contributes 0 (sign(0) = 0): the likelihood gradient only
    beta = m.copy()
    lik = fs.models.LogisticRegression(X, y, prior_sd=None)
    np.testing.assert_allclose(model.grad(beta), lik.grad(beta), rtol=1e-14)
    # Laplace density from SciPy
    lp = stats.laplace.logpdf(beta + 0.3, loc=m, scale=b).sum()
    assert model.value(beta + 0.3) == pytest.approx(lik.value(beta + 0.3) - lp, rel=1e-12)


def test_laplace_logistic_threads_pickle_and_errors():
    X, y, _ = fs.datasets.simulate_logistic(n=5000, d=4, seed=3)
    q = np.array([0.3, -0.2, 0.5, 1.0])
    a = fs.models.LaplaceLogisticRegression(X, y, n_threads=1)
    c = fs.models.LaplaceLogisticRegression(X, y, n_threads=2)
    assert a.value_and_grad(q)[0] == c.value_and_grad(q)[0]
    assert pickle.loads(pickle.dumps(a)).value(q) == a.value(q)
    assert a.param_names[0] == "beta[0]"
    with pytest.raises(ValueError):
        fs.models.LaplaceLogisticRegression(X, y, scale=0.0)
    with pytest.raises(ValueError):
        fs.models.LaplaceLogisticRegression(X, y, scale=np.ones(3))
    with pytest.raises(ValueError):
        fs.models.LaplaceLogisticRegression(X, y, loc=np.nan)
