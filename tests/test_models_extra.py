"""GARCH(m, r), GP-regression hyper-parameters and the beta-binomial model
(csrc/fs_garch.c, csrc/fs_gpreg.c, csrc/fs_models.c) against independent
NumPy/SciPy references, finite differences and (near boundaries) mpmath."""
import math
import threading

import numpy as np
import pytest
from scipy import linalg, special, stats
from scipy.spatial.distance import cdist

from fastsurrogate import datasets
from fastsurrogate.models._models import _digamma, _digamma_diff, _log_rising
from fastsurrogate.models import BetaBinomial, Garch, GPRegression

LOG_2PI = math.log(2.0 * math.pi)


def central_fd(f, q, rel=1e-5):
    q = np.asarray(q, dtype=float)
    g = np.empty(q.size)
    for i in range(q.size):
        h = rel * max(1.0, abs(q[i]))
        e = np.zeros(q.size)
        e[i] = h
        g[i] = (f(q + e) - f(q - e)) / (2.0 * h)
    return g


def assert_grad_close(g, ref, rtol, scale=None):
    scale = max(1.0, np.abs(ref).max()) if scale is None else scale
    np.testing.assert_allclose(g, ref, rtol=rtol, atol=rtol * scale)


# ---------------------------------------------------------------------------
# GARCH: a plain loop, gradient by forward-mode sensitivities (not the adjoint)

def garch_reference(y, m, r, h0, mu0, sd0, q):
    k = m + r
    phi_all = special.softmax(np.append(q[1:], 0.0))     # (alpha, beta, s)
    alpha, beta = phi_all[:m], phi_all[m:k]
    a0 = math.exp(q[0])
    x = y * y
    H, DH = [], []                   # h_t and dh_t / d(alpha0, alpha, beta)
    U = 0.0
    dU = np.zeros(1 + k)
    for t in range(len(y)):
        h = a0
        dh = np.zeros(1 + k)
        dh[0] = 1.0
        for i in range(1, m + 1):
            xv = x[t - i] if t - i >= 0 else h0
            h += alpha[i - 1] * xv
            dh[i] += xv
        for j in range(1, r + 1):
            hv, dhv = (H[t - j], DH[t - j]) if t - j >= 0 else (h0, np.zeros(1 + k))
            h += beta[j - 1] * hv
            dh += beta[j - 1] * dhv
            dh[m + j] += hv
        H.append(h)
        DH.append(dh)
        U -= stats.norm.logpdf(y[t], 0.0, math.sqrt(h))
        dU += 0.5 * (1.0 / h - x[t] / h ** 2) * dh
    # priors: normal on log alpha0; uniform (density k!) on the simplex; Jacobian
    U += -stats.norm.logpdf(q[0], mu0, sd0) - math.log(math.factorial(k)) - np.log(phi_all).sum()
    phi = phi_all[:k]
    J = np.diag(phi) - np.outer(phi, phi)                # d phi / d z
    g = np.empty(1 + k)
    g[0] = a0 * dU[0] + (q[0] - mu0) / sd0 ** 2
    g[1:] = J.T @ dU[1:] - (1.0 - (k + 1) * phi)
    return U, g


@pytest.fixture(scope="module")
def garch_series():
    return datasets.simulate_garch(300, 0.2, [0.15, 0.1], [0.6], seed=3)


GARCH_POINTS = [
    [-1.5, -1.0, -1.5, 0.5],            # typical
    [0.5, 0.0, -2.0, 1.0],
    [-1.6, 6.0, 3.0, 9.0],              # persistence close to 1 (s ~ 1e-4)
    [-4.0, -25.0, -30.0, 2.0],          # alpha_1, alpha_2 ~ 1e-11
    [3.0, -1.0, -1.0, -20.0],           # beta ~ 0, large alpha0
]


@pytest.mark.parametrize("order", [(2, 1), (1, 1), (1, 2), (3, 0), (0, 2)])
def test_garch_matches_loop_reference(garch_series, order):
    m, r = order
    y = garch_series
    model = Garch(y, m=m, r=r, log_alpha0_mean=-1.0, log_alpha0_sd=2.0)
    assert model.dim == 1 + m + r
    h0 = float(np.mean(y * y))
    assert model.h0 == h0
    rng = np.random.default_rng(10 + m + 3 * r)
    points = [np.asarray(p[:1 + m + r], dtype=float) for p in GARCH_POINTS]
    points += [rng.normal([-1.5] + [-1.0] * (m + r), 1.0) for _ in range(2)]
    for q in points:
        U, g = model.value_and_grad(q)
        Ur, gr = garch_reference(y, m, r, h0, -1.0, 2.0, q)
        assert U == pytest.approx(Ur, rel=1e-10)
        assert_grad_close(g, gr, 1e-8)
        fd = central_fd(model.value, q)
        assert_grad_close(g, fd, 1e-6)


def test_garch_paper_size():
    """GARCH(2, 1) on T = 1000 simulated observations, as in the NNgHMC paper."""
    y = datasets.simulate_garch(1000, 0.1, [0.2, 0.1], [0.5], seed=1)
    model = Garch(y, m=2, r=1)
    truth = {"alpha0": 0.1, "alpha[1]": 0.2, "alpha[2]": 0.1, "beta[1]": 0.5}
    q = model.unconstrain(truth)
    U, g = model.value_and_grad(q)
    Ur, gr = garch_reference(y, 2, 1, float(np.mean(y * y)), 0.0, 5.0, q)
    assert U == pytest.approx(Ur, rel=1e-10)
    assert_grad_close(g, gr, 1e-8)
    assert model.value(q) == U
    np.testing.assert_array_equal(model.grad(q), g)
    # the truth is far better than a point far from it
    far = model.unconstrain({"alpha0": 1.0, "alpha[1]": 0.02, "alpha[2]": 0.02, "beta[1]": 0.02})
    assert model.value(far) > U + 50


@pytest.mark.parametrize("scale", [1e-60, 1e-3, 1e10, 1e60])
def test_garch_extreme_scales(garch_series, scale):
    """Variances far from 1 (the log-sum of h_t is taken through products)."""
    y = garch_series * scale
    model = Garch(y, m=2, r=1, log_alpha0_mean=math.log(0.2 * scale ** 2), log_alpha0_sd=2.0)
    q = np.array([math.log(0.2 * scale ** 2), -1.0, -1.5, 0.5])
    U, g = model.value_and_grad(q)
    Ur, gr = garch_reference(y, 2, 1, float(np.mean(y * y)), q[0], 2.0, q)
    assert U == pytest.approx(Ur, rel=1e-10, abs=1e-9 * len(y))
    assert_grad_close(g, gr, 1e-8)


def test_garch_transform_round_trip(garch_series):
    model = Garch(garch_series, m=2, r=2)
    rng = np.random.default_rng(0)
    q = rng.normal(0.0, 2.0, size=(3, 4, model.dim))
    c = model.constrain(q)
    assert set(c) == {"alpha0", "alpha[1]", "alpha[2]", "beta[1]", "beta[2]", "persistence"}
    phi = np.stack([c[n] for n in model.constrained_names[1:]], axis=-1)
    assert np.all(phi > 0) and np.all(c["persistence"] < 1)
    np.testing.assert_allclose(c["persistence"], phi.sum(-1), rtol=1e-14)
    np.testing.assert_allclose(model.unconstrain(c), q, rtol=1e-9, atol=1e-9)
    assert model.param_names == ["log_alpha0", "z_alpha[1]", "z_alpha[2]", "z_beta[1]", "z_beta[2]"]
    with pytest.raises(ValueError):
        model.unconstrain({"alpha0": 1.0, "alpha[1]": 0.5, "alpha[2]": 0.3,
                           "beta[1]": 0.3, "beta[2]": 0.1})


def test_garch_nonfinite_q_gives_nan(garch_series):
    model = Garch(garch_series)
    U, g = model.value_and_grad(np.array([np.nan, 0.0, 0.0, 0.0]))
    assert np.isnan(U) and np.all(np.isnan(g))


def test_garch_bad_input(garch_series):
    y = garch_series
    with pytest.raises(ValueError, match="1-D"):
        Garch(y.reshape(-1, 2))
    bad = y.copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match=r"y\[5\]"):
        Garch(bad)
    with pytest.raises(ValueError, match="m \\+ r"):
        Garch(y, m=0, r=0)
    with pytest.raises(ValueError):
        Garch(y, m=-1)
    with pytest.raises(TypeError):
        Garch(y, m=1.5)
    with pytest.raises(ValueError):
        Garch(y, h0=0.0)
    with pytest.raises(ValueError):
        Garch(y, log_alpha0_sd=-1.0)
    with pytest.raises(ValueError):
        Garch(np.zeros(10))                   # mean(y^2) = 0 and no h0
    with pytest.raises(TypeError):
        Garch(["a", "b"])
    with pytest.raises(ValueError):
        Garch(y).value(np.zeros(3))


def test_simulate_garch_checks():
    y = datasets.simulate_garch(500, 0.1, [0.1], [0.8], seed=0)
    assert y.shape == (500,) and np.all(np.isfinite(y))
    np.testing.assert_array_equal(y, datasets.simulate_garch(500, 0.1, [0.1], [0.8], seed=0))
    with pytest.raises(ValueError):
        datasets.simulate_garch(10, 0.1, [0.5], [0.6])
    with pytest.raises(ValueError):
        datasets.simulate_garch(10, -0.1, [0.1], [0.1])


# ---------------------------------------------------------------------------
# GP regression: scipy.linalg reference

def gp_reference(X, y, q, sf2_fixed, mu, sd):
    ell, sn2 = math.exp(q[0]), math.exp(q[1])
    sf2 = math.exp(q[2]) if len(q) == 3 else sf2_fixed
    n = len(y)
    t = math.sqrt(3.0) * cdist(X, X) / ell
    Kf = sf2 * (1.0 + t) * np.exp(-t)
    K = Kf + sn2 * np.eye(n)
    cf = linalg.cho_factor(K, lower=True)
    a = linalg.cho_solve(cf, y)
    U = (0.5 * y @ a + np.log(np.diag(cf[0])).sum() + 0.5 * n * LOG_2PI
         - stats.norm.logpdf(q, mu, sd).sum())
    W = linalg.cho_solve(cf, np.eye(n)) - np.outer(a, a)
    dKs = [sf2 * t * t * np.exp(-t), sn2 * np.eye(n)]
    if len(q) == 3:
        dKs.append(Kf)
    g = np.array([0.5 * np.sum(W * dK) for dK in dKs]) + (q - mu) / sd ** 2
    return U, g


@pytest.fixture(scope="module")
def gp_data():
    return datasets.simulate_gp_regression(n=80, dim=4, lengthscale=0.8,
                                           noise_variance=0.05, seed=2)


GP_POINTS = [
    [0.0, -2.0, 0.0],
    [-0.5, -3.0, 0.3],
    [2.5, -1.0, 1.0],          # long length scale: K close to rank one
    [-4.0, 0.5, -1.0],         # short length scale: K close to diagonal
    [1.0, -12.0, 0.0],         # tiny noise
]


@pytest.mark.parametrize("sample_sf2", [False, True])
def test_gp_matches_scipy_reference(gp_data, sample_sf2):
    X, y = gp_data
    dim = 3 if sample_sf2 else 2
    mu = np.array([0.1, -1.0, 0.2])[:dim]
    sd = np.array([2.0, 3.0, 1.5])[:dim]
    model = GPRegression(X, y, signal_variance=None if sample_sf2 else 1.3,
                         prior_mean=mu, prior_sd=sd)
    assert model.dim == dim
    rng = np.random.default_rng(5)
    points = [np.array(p[:dim]) for p in GP_POINTS]
    points += [rng.normal([0.0, -2.0, 0.0][:dim], 1.0) for _ in range(2)]
    for q in points:
        U, g = model.value_and_grad(q)
        Ur, gr = gp_reference(X, y, q, 1.3, mu, sd)
        assert U == pytest.approx(Ur, rel=1e-10)
        assert_grad_close(g, gr, 1e-7)
        assert model.value(q) == pytest.approx(U, rel=1e-14, abs=1e-12)
        fd = central_fd(model.value, q)
        assert_grad_close(g, fd, 1e-5)


def test_gp_matches_multivariate_normal(gp_data):
    X, y = gp_data
    model = GPRegression(X, y, signal_variance=None, prior_mean=0.0, prior_sd=3.0)
    q = np.array([0.2, -2.5, 0.4])
    ell, sn2, sf2 = np.exp(q)
    t = math.sqrt(3.0) * cdist(X, X) / ell
    K = sf2 * (1.0 + t) * np.exp(-t) + sn2 * np.eye(len(y))
    lp = stats.multivariate_normal.logpdf(y, np.zeros(len(y)), K)
    lp += stats.norm.logpdf(q, 0.0, 3.0).sum()
    assert model.value(q) == pytest.approx(-lp, rel=1e-9)


def test_gp_simulated_and_duplicates():
    X, y = datasets.simulate_gp_regression(n=500, dim=4, seed=0)
    assert X.shape == (500, 4) and y.shape == (500,) and np.all(np.isfinite(y))
    X, y = X[:200], y[:200]
    X = X.copy()
    X[7] = X[3]                                   # duplicate inputs: r = 0
    model = GPRegression(X, y)
    q = np.log([1.0, 0.1])
    U, g = model.value_and_grad(q)
    Ur, gr = gp_reference(X, y, q, 1.0, np.zeros(2), np.full(2, 3.0))
    assert U == pytest.approx(Ur, rel=1e-10)
    assert_grad_close(g, gr, 1e-7)
    assert model.value(q) == pytest.approx(U, rel=1e-14)
    np.testing.assert_allclose(model.grad(q), g, rtol=1e-12)


def test_gp_not_positive_definite_and_extremes(gp_data):
    X, y = gp_data
    model = GPRegression(X, y)
    U, g = model.value_and_grad(np.array([12.0, -80.0]))   # rank-one K, sn2 ~ 1e-35
    assert U == math.inf and np.all(np.isnan(g))
    assert model.value(np.array([12.0, -80.0])) == math.inf
    U, g = model.value_and_grad(np.array([-800.0, 0.0]))   # length scale underflows: K = I
    Ur = -stats.norm.logpdf(y, 0.0, math.sqrt(2.0)).sum() - stats.norm.logpdf([-800.0, 0.0], 0.0, 3.0).sum()
    assert U == pytest.approx(Ur, rel=1e-12) and np.all(np.isfinite(g))
    U, g = model.value_and_grad(np.array([np.inf, 0.0]))
    assert np.isnan(U) and np.all(np.isnan(g))


def test_gp_constrain(gp_data):
    X, y = gp_data
    model = GPRegression(X, y)
    q = np.random.default_rng(0).normal(size=(5, 2))
    c = model.constrain(q)
    np.testing.assert_allclose(c["lengthscale"], np.exp(q[:, 0]))
    np.testing.assert_allclose(c["signal_variance"], np.ones(5))
    np.testing.assert_allclose(model.unconstrain(c), q, rtol=1e-12)
    assert model.param_names == ["log_lengthscale", "log_noise_variance"]
    model3 = GPRegression(X, y, signal_variance=None)
    assert model3.param_names[-1] == "log_signal_variance"
    q3 = np.random.default_rng(1).normal(size=(2, 3))
    np.testing.assert_allclose(model3.unconstrain(model3.constrain(q3)), q3, rtol=1e-12)


def test_gp_bad_input(gp_data):
    X, y = gp_data
    with pytest.raises(ValueError, match="2-D"):
        GPRegression(X[:, 0], y)
    with pytest.raises(ValueError, match="shape"):
        GPRegression(X, y[:-1])
    Xb = X.copy()
    Xb[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"X\[2, 1\]"):
        GPRegression(Xb, y)
    yb = y.copy()
    yb[4] = np.inf
    with pytest.raises(ValueError, match=r"y\[4\]"):
        GPRegression(X, yb)
    with pytest.raises(ValueError):
        GPRegression(X, y, signal_variance=0.0)
    with pytest.raises(ValueError):
        GPRegression(X, y, prior_sd=[1.0, -1.0])
    with pytest.raises(ValueError):
        GPRegression(X, y, prior_mean=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError):
        GPRegression(np.empty((0, 3)), np.empty(0))
    with pytest.raises(ValueError):
        GPRegression(X, y).grad(np.zeros(3))


# ---------------------------------------------------------------------------
# beta-binomial: scipy.special.betaln reference; mpmath at the extremes

def bb_reference(y, n, q):
    m, K = special.expit(q[0]), math.exp(q[1])
    a, b = K * m, K * (1.0 - m)
    U = -(special.betaln(a + y, b + n - y) - special.betaln(a, b)).sum()
    U += -q[1] + 2.0 * np.logaddexp(0.0, q[1])
    dfa = (special.digamma(a + y) - special.digamma(a + b + n)
           - special.digamma(a) + special.digamma(a + b)).sum()
    dfb = (special.digamma(b + n - y) - special.digamma(a + b + n)
           - special.digamma(b) + special.digamma(a + b)).sum()
    g = np.array([-(dfa - dfb) * K * m * (1.0 - m),
                  -(dfa * a + dfb * b) - 1.0 + 2.0 * special.expit(q[1])])
    return U, g


def bb_mpmath(y, n, q, dps=50):
    mp = pytest.importorskip("mpmath")
    with mp.workdps(dps):
        def U(q0, q1):
            m = 1 / (1 + mp.exp(-q0))
            K = mp.exp(q1)
            a, b = K * m, K * (1 - m)
            f = 0
            for yj, nj in zip(y, n):
                yj, nj = int(yj), int(nj)
                f += (mp.loggamma(a + yj) + mp.loggamma(b + nj - yj) - mp.loggamma(K + nj)
                      - mp.loggamma(a) - mp.loggamma(b) + mp.loggamma(K))
            return -f - q1 + 2 * mp.log(1 + mp.exp(q1))
        q0, q1 = mp.mpf(float(q[0])), mp.mpf(float(q[1]))
        val = float(U(q0, q1))
        g = [float(mp.diff(lambda t: U(t, q1), q0)), float(mp.diff(lambda t: U(q0, t), q1))]
    return val, np.array(g)


@pytest.fixture(scope="module")
def cancer(data_dir):
    return datasets.load_cancer_mortality(data_dir)


def test_load_cancer_mortality(cancer):
    y, n = cancer
    assert y.shape == n.shape == (20,)
    assert y.dtype.kind == "i" and n.dtype.kind == "i"
    assert y.sum() == 71 and n.max() == 53637 and np.all(y <= n)


def test_betabinomial_matches_betaln(cancer):
    y, n = cancer
    model = BetaBinomial(y, n)
    assert model.dim == 2 and model.param_names == ["logit_m", "log_K"]
    rng = np.random.default_rng(7)
    points = [np.array([-7.0, 7.5]), np.array([-6.8, 8.0]), np.array([-8.0, 4.0])]
    points += list(rng.normal([-7.0, 7.5], [0.5, 1.5], size=(4, 2)))
    for q in points:
        U, g = model.value_and_grad(q)
        Ur, gr = bb_reference(y.astype(float), n.astype(float), q)
        assert U == pytest.approx(Ur, rel=1e-10)
        assert_grad_close(g, gr, 1e-8)
        # U sums terms of size ~1e6 (n = 53637) to ~500: its rounding noise
        # (~1e-10) limits finite differences to about 1e-6
        fd = central_fd(model.value, q)
        assert_grad_close(g, fd, 1e-5)
        assert model.value(q) == U
        np.testing.assert_array_equal(model.grad(q), g)


@pytest.mark.parametrize("q", [[-7.0, 7.5], [-7.0, 25.0], [-7.0, -15.0], [-25.0, 6.0],
                               [20.0, 3.0], [0.3, 0.2]])
def test_betabinomial_extremes_against_mpmath(cancer, q):
    """Near the boundaries (K -> 0 or inf, m -> 0 or 1), against 50-digit mpmath."""
    y, n = cancer
    model = BetaBinomial(y, n)
    q = np.array(q)
    U, g = model.value_and_grad(q)
    Um, gm = bb_mpmath(y, n, q)
    assert U == pytest.approx(Um, rel=1e-11)
    assert_grad_close(g, gm, 1e-9)


def test_betabinomial_small_synthetic():
    rng = np.random.default_rng(3)
    n = rng.integers(0, 40, size=15)
    y = rng.binomial(n, 0.3)
    model = BetaBinomial(y, n)
    for q in ([-0.8, 1.0], [0.5, -3.0], [-2.0, 9.0]):
        q = np.array(q)
        U, g = model.value_and_grad(q)
        Ur, gr = bb_reference(y.astype(float), n.astype(float), q)
        assert U == pytest.approx(Ur, rel=1e-10)
        assert_grad_close(g, gr, 1e-8)
        assert_grad_close(g, central_fd(model.value, q), 1e-6)


def test_betabinomial_constrain_and_cancer(data_dir):
    model = BetaBinomial.from_cancer_mortality(data_dir)
    q = np.array([[-7.0, 7.0], [-6.0, 9.0]])
    c = model.constrain(q)
    np.testing.assert_allclose(c["m"], special.expit(q[:, 0]), rtol=1e-14)
    np.testing.assert_allclose(c["K"], np.exp(q[:, 1]), rtol=1e-14)
    np.testing.assert_allclose(model.unconstrain(c), q, rtol=1e-12)
    # Albert's posterior mode (laplace(betabinexch, c(-7, 6), cancer.mortality)):
    # about (-6.82, 7.58)
    from scipy.optimize import minimize
    res = minimize(lambda t: model.value_and_grad(t), np.array([-7.0, 6.0]), jac=True)
    np.testing.assert_allclose(res.x, [-6.82, 7.58], atol=0.02)


def test_betabinomial_bad_input():
    with pytest.raises(ValueError, match="exceed"):
        BetaBinomial([3, 1], [2, 5])
    with pytest.raises(ValueError, match="non-negative integer"):
        BetaBinomial([-1, 1], [2, 5])
    with pytest.raises(ValueError, match="non-negative integer"):
        BetaBinomial([1.5, 1], [2, 5])
    with pytest.raises(ValueError, match="non-negative integer"):
        BetaBinomial([np.nan, 1], [2, 5])
    with pytest.raises(ValueError, match="same shape"):
        BetaBinomial([1, 1], [2, 5, 3])
    with pytest.raises(ValueError, match="1-D"):
        BetaBinomial([[1]], [[2]])
    with pytest.raises(ValueError, match="at least one"):
        BetaBinomial([], [])
    with pytest.raises(ValueError):
        BetaBinomial([1], [2]).value(np.zeros(3))


# ---------------------------------------------------------------------------
# special functions

def test_digamma_matches_scipy():
    x = np.concatenate([np.geomspace(1e-12, 1e6, 400), -np.geomspace(1e-6, 50, 200) + 0.37,
                        [0.5, 1.0, 2.0, 9.999, 10.0, 10.001, 1e15]])
    ref = special.digamma(x)
    np.testing.assert_allclose(_digamma(x), ref, rtol=1e-13, atol=1e-15)
    root = 1.4616321449683623
    assert abs(_digamma(root)) < 1e-15
    assert np.isnan(_digamma(0.0)) and np.isnan(_digamma(-3.0))


def test_rising_differences_against_mpmath():
    mp = pytest.importorskip("mpmath")
    for x in (1e-9, 0.3, 2.5, 9.9, 10.0, 47.0, 3e4, 1e9, 1e14):
        for c in (0, 1, 3, 8, 9, 54, 1000, 53637):
            with mp.workdps(40):
                lr = float(mp.loggamma(mp.mpf(x) + c) - mp.loggamma(mp.mpf(x)))
                dd = float(mp.digamma(mp.mpf(x) + c) - mp.digamma(mp.mpf(x)))
            assert _log_rising(x, c) == pytest.approx(lr, rel=1e-13, abs=1e-300)
            assert _digamma_diff(x, c) == pytest.approx(dd, rel=1e-13, abs=1e-300)


# ---------------------------------------------------------------------------
# all three: concurrent evaluation equals serial evaluation

def test_thread_safe_evaluation(garch_series, gp_data):
    X, y = gp_data
    models = [(Garch(garch_series), np.array([-1.5, -1.0, -1.5, 0.5])),
              (GPRegression(X, y), np.array([0.0, -2.0])),
              (BetaBinomial([0, 2, 1, 54], [1083, 3461, 1208, 53637]), np.array([-7.0, 7.0]))]
    for model, q0 in models:
        assert model.thread_safe
        # few threads: a multi-threaded OpenBLAS called from several threads at
        # once is slow on a loaded machine (the GP calls LAPACK)
        qs = [q0 + 0.1 * k for k in range(4)]
        serial = [model.value_and_grad(q) for q in qs]
        out = [None] * len(qs)

        def work(k):
            for _ in range(2):
                out[k] = model.value_and_grad(qs[k])

        threads = [threading.Thread(target=work, args=(k,)) for k in range(len(qs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for (U, g), (Us, gs) in zip(out, serial):
            assert U == pytest.approx(Us, rel=1e-13)
            np.testing.assert_allclose(g, gs, rtol=1e-11, atol=1e-11)


def test_compiled_models_pickle_round_trip():
    import pickle
    from fastsurrogate import models as M
    rng = np.random.default_rng(0)
    objs = [M.Gaussian(np.zeros(3), 2.0 * np.eye(3)), M.StandardNormal(2), M.Banana(n=20),
            BetaBinomial(np.array([1, 2, 0, 3]), np.array([100, 200, 150, 300])),
            Garch(rng.standard_normal(50), 2, 1),
            GPRegression(rng.uniform(size=(20, 2)), rng.standard_normal(20)),
            GPRegression(rng.uniform(size=(20, 2)), rng.standard_normal(20),
                         signal_variance=None)]
    for o in objs:
        q = 0.3 * rng.standard_normal(o.dim)
        t = pickle.loads(pickle.dumps(o))
        u0, g0 = o.value_and_grad(q)
        u1, g1 = t.value_and_grad(q)
        assert u0 == u1 and np.array_equal(g0, g1), type(o).__name__


# ---- datasets.random_projection -------------------------------------------

def test_random_projection_matches_numpy():
    rng = np.random.default_rng(0)
    X = (rng.random((300, 20)) < 0.3).astype(float)
    Z = datasets.random_projection(X, 5, seed=4)
    R = np.random.default_rng(4).standard_normal((20, 5)) / np.sqrt(5)
    P = X @ R
    ref = np.hstack([np.ones((300, 1)), (P - P.mean(0)) / P.std(0)])
    np.testing.assert_allclose(Z, ref, rtol=1e-12, atol=1e-12)
    # standardised inputs first: the same projection of the standardised X
    Zs = datasets.random_projection(X, 5, seed=4, standardize=False, intercept=False,
                                    standardize_input=True)
    np.testing.assert_allclose(Zs, ((X - X.mean(0)) / X.std(0)) @ R, rtol=1e-12, atol=1e-12)
    assert Zs.flags.c_contiguous and Z.flags.c_contiguous


def test_random_projection_standardize_input_removes_intercept_collinearity():
    # one-hot groups (as in a9a): every row has the same number of ones, so
    # the raw projected columns share a constant component with the intercept
    rng = np.random.default_rng(1)
    cols = []
    for g in [2, 3, 5, 8, 8, 10, 12, 16]:
        p = rng.dirichlet(np.full(g, 0.7))
        onehot = np.zeros((3000, g))
        onehot[np.arange(3000), rng.choice(g, 3000, p=p)] = 1.0
        cols.append(onehot)
    X = np.hstack(cols)
    cond = {pre: np.linalg.cond(datasets.random_projection(X, 30, seed=2, standardize_input=pre))
            for pre in (False, True)}
    assert cond[True] < 0.6 * cond[False], cond


def test_random_projection_errors():
    with pytest.raises(ValueError, match="2-d"):
        datasets.random_projection(np.ones(5), 2)
    with pytest.raises(ValueError, match="k"):
        datasets.random_projection(np.ones((5, 3)), 0)
