"""The compiled evaluation of the elliptic PDE potential (csrc/fs_pde.c):
U against an independent dense NumPy assembly and solve, the adjoint
gradient against finite differences and against the SciPy reference path,
the banded Cholesky against LAPACK, and the divergence conventions."""
import numpy as np
import pytest
import scipy.linalg
import scipy.optimize

import fastsurrogate as fs
from fastsurrogate.models._pde import _band_cholesky, _band_solve

KREF = np.array([[4, -1, -2, -1], [-1, 4, -1, -2], [-2, -1, 4, -1], [-1, -2, -1, 4]]) / 6.0


def dense_potential(model, theta):
    """U(theta) from scratch: KL field, dense assembly, Dirichlet elimination,
    numpy.linalg.solve, bilinear interpolation at the observation points."""
    m = model.n_mesh
    n1, h = m + 1, 1.0 / m
    c = np.exp(model._Phi @ theta)
    K = np.zeros((n1 * n1, n1 * n1))
    for j in range(m):
        for i in range(m):
            nodes = [i + n1 * j, i + 1 + n1 * j, i + 1 + n1 * (j + 1), i + n1 * (j + 1)]
            K[np.ix_(nodes, nodes)] += c[i + m * j] * KREF
    x1 = np.tile(np.arange(n1) * h, n1)
    row = np.repeat(np.arange(n1), n1)
    dir_ = (row == 0) | (row == m)
    u = np.where(row == 0, x1, 1.0 - x1) * dir_
    free = ~dir_
    u[free] = np.linalg.solve(K[np.ix_(free, free)], -K[np.ix_(free, dir_)] @ u[dir_])
    obs = []
    for a, b in model.obs_points:
        i, j = min(int(a / h), m - 1), min(int(b / h), m - 1)
        s, t = a / h - i, b / h - j
        obs.append((1 - s) * (1 - t) * u[i + n1 * j] + s * (1 - t) * u[i + 1 + n1 * j]
                   + s * t * u[i + 1 + n1 * (j + 1)] + (1 - s) * t * u[i + n1 * (j + 1)])
    r = np.array(obs) - model.y
    return 0.5 * r @ r / model.noise_sd ** 2 + 0.5 * theta @ theta / model.prior_sd ** 2


@pytest.mark.parametrize("kw", [dict(), dict(n_mesh=7, n_modes=5, n_obs_side=4, seed=3),
                                dict(n_mesh=12, n_modes=8, n_obs_side=5, noise_sd=0.3,
                                     prior_sd=1.5, seed=4)])
def test_compiled_potential_matches_dense_assembly(kw):
    model = fs.models.EllipticPDE(**kw)
    assert not model.calls_python
    rng = np.random.default_rng(1)
    for theta in [model.theta_true, 0.7 * rng.standard_normal(model.dim)]:
        U_ref = dense_potential(model, theta)
        assert model.value(theta) == pytest.approx(U_ref, rel=1e-10)
        assert model.value_and_grad(theta)[0] == pytest.approx(U_ref, rel=1e-10)


@pytest.mark.parametrize("kw", [dict(), dict(n_mesh=9, n_modes=6, n_obs_side=6, seed=5)])
def test_compiled_gradient_matches_finite_differences_and_reference(kw):
    model = fs.models.EllipticPDE(**kw)
    rng = np.random.default_rng(2)
    theta = model.theta_true + 0.2 * rng.standard_normal(model.dim)
    U, g = model.value_and_grad(theta)
    # the SciPy path (LAPACK banded Cholesky, sparse products) computes the same thing
    U_py, g_py = model._value_and_grad(theta)
    assert U == pytest.approx(U_py, rel=1e-12)
    np.testing.assert_allclose(g, g_py, rtol=1e-10, atol=1e-10 * np.abs(g).max())
    eps = 1e-5
    fd = np.array([(model.value(theta + eps * e) - model.value(theta - eps * e)) / (2 * eps)
                   for e in np.eye(model.dim)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(g).max())


@pytest.mark.parametrize("n,p", [(1, 0), (7, 0), (10, 3), (37, 5), (899, 32), (50, 49)])
def test_band_cholesky_matches_lapack(n, p):
    rng = np.random.default_rng(n + p)
    A = np.zeros((n, n))
    for k in range(p + 1):
        v = rng.uniform(-1, 1, n - k)
        A += np.diag(v, -k) + (np.diag(v, k) if k else 0)
    A += np.eye(n) * (2 * p + 2)
    ab = np.zeros((p + 1, n))
    for k in range(p + 1):
        ab[k, :n - k] = np.diag(A, -k)
    cb, info = _band_cholesky(ab)
    assert info == 0
    ref = scipy.linalg.cholesky_banded(ab, lower=True)
    np.testing.assert_allclose(cb, ref, rtol=1e-12, atol=1e-12)
    b = rng.standard_normal(n)
    np.testing.assert_allclose(_band_solve(cb, b), np.linalg.solve(A, b), rtol=1e-10,
                               atol=1e-12)


def test_band_cholesky_reports_the_failing_pivot():
    ab = np.array([[2.0, 1.0, -3.0, 2.0], [0.5, 0.1, 0.2, 0.0]])
    assert _band_cholesky(ab)[1] == 3


def test_divergences_and_the_splu_path():
    model = fs.models.EllipticPDE(n_mesh=8, n_modes=4, n_obs_side=4, seed=1)
    for bad in (np.full(4, 1e4), np.array([np.nan, 0, 0, 0]), np.array([np.inf, 0, 0, 0])):
        U, g = model.value_and_grad(bad)
        assert U == np.inf and np.all(np.isnan(g))
        assert model.value(bad) == np.inf
    other = fs.models.EllipticPDE(n_mesh=8, n_modes=4, n_obs_side=4, seed=1, solver="splu")
    assert other.calls_python
    theta = np.array([0.3, -0.2, 0.1, 0.5])
    assert other.value(theta) == pytest.approx(model.value(theta), rel=1e-11)
    np.testing.assert_allclose(other.grad(theta), model.grad(theta), rtol=1e-9)


@pytest.mark.slow
def test_hmc_on_the_compiled_potential_matches_quadrature():
    """Two threaded HMC chains on the C kernel (thread-safe, no callback):
    posterior means and variances of a 2-parameter PDE posterior within
    MCSE-derived tolerances of a quadrature on a fine grid."""
    model = fs.models.EllipticPDE(n_mesh=6, n_modes=2, n_obs_side=6, noise_sd=0.003, seed=7)
    assert model.thread_safe
    # noise_sd = 0.003: the data move the posterior (sd ~0.06 / 0.04 against the prior's 0.5)
    # quadrature: the posterior is concentrated within a few sd of the MAP
    x0 = scipy.optimize.minimize(model.value_and_grad, np.zeros(2), jac=True).x
    sd = 1.0 / np.sqrt(np.diag(_fd_hessian(model, x0)))
    g1 = np.linspace(x0[0] - 8 * sd[0], x0[0] + 8 * sd[0], 161)
    g2 = np.linspace(x0[1] - 8 * sd[1], x0[1] + 8 * sd[1], 161)
    T1, T2 = np.meshgrid(g1, g2, indexing="ij")
    U = np.array([model.value(np.array([a, b])) for a, b in zip(T1.ravel(), T2.ravel())])
    w = np.exp(-(U - U.min()))
    w /= w.sum()
    mean = np.array([w @ T1.ravel(), w @ T2.ravel()])
    var = np.array([w @ (T1.ravel() - mean[0]) ** 2, w @ (T2.ravel() - mean[1]) ** 2])
    res = fs.sample(model, method="hmc", n_draws=2000, n_warmup=500, chains=2, seed=3,
                    init=x0, progress=False)
    d = res.draws
    m_hat = d.mean(axis=(0, 1))
    se = fs.diagnostics.mcse_mean(d)
    assert np.all(np.abs(m_hat - mean) <= 4.5 * se), (m_hat, mean, se)
    v_hat = d.reshape(-1, 2).var(axis=0)
    # MCSE of the variance: that of the mean of (x - mean)^2
    se_v = fs.diagnostics.mcse_mean((d - mean) ** 2)
    assert np.all(np.abs(v_hat - var) <= 4.5 * se_v + 1e-12), (v_hat, var, se_v)


def _fd_hessian(model, x, eps=1e-4):
    n = x.size
    H = np.empty((n, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        H[i] = (model.grad(x + e) - model.grad(x - e)) / (2 * eps)
    return 0.5 * (H + H.T)
