"""The elliptic PDE inverse problem (RNS-HMC paper, section 5.2): the finite
element solver against an independent SciPy implementation and a
manufactured solution (O(h^2) in L2), the KL basis against the eigenproblem,
the adjoint gradient and the Gauss-Newton Hessian against finite
differences."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

import fastsurrogate as fs


@pytest.fixture(scope="module")
def model():
    return fs.models.EllipticPDE()           # the paper's sizes: 30 x 30, d = 20


def reference_solve(model, c, g_fn=None, f_fn=None):
    """Independent FE solve: element loop, full system, Dirichlet rows replaced."""
    m, h = model.n_mesh, 1.0 / model.n_mesh
    n1 = m + 1
    Kref = np.array([[4, -1, -2, -1], [-1, 4, -1, -2], [-2, -1, 4, -1], [-1, -2, -1, 4]]) / 6.0
    Mref = np.array([[4, 2, 1, 2], [2, 4, 2, 1], [1, 2, 4, 2], [2, 1, 2, 4]]) / 36.0 * h * h
    rows, cols, vals = [], [], []
    F = np.zeros(n1 * n1)
    x = np.array([(i * h, j * h) for j in range(n1) for i in range(n1)])
    for j in range(m):
        for i in range(m):
            e = i + m * j
            nodes = [i + n1 * j, i + 1 + n1 * j, i + 1 + n1 * (j + 1), i + n1 * (j + 1)]
            for a in range(4):
                for b in range(4):
                    rows.append(nodes[a]); cols.append(nodes[b]); vals.append(c[e] * Kref[a, b])
            if f_fn is not None:
                F[nodes] += Mref @ f_fn(x[nodes, 0], x[nodes, 1])
    K = sp.coo_matrix((vals, (rows, cols)), shape=(n1 * n1, n1 * n1)).tolil()
    if g_fn is None:
        g_fn = lambda x1, x2: np.where(x2 == 0.0, x1, 1.0 - x1)
    for k in range(n1 * n1):
        if k // n1 in (0, m):
            K.rows[k] = [k]; K.data[k] = [1.0]
            F[k] = g_fn(x[k, 0], x[k, 1])
    return spsolve(K.tocsr(), F)


def test_forward_matches_independent_solver(model):
    theta = model.theta_true
    c = model.coefficient(theta)
    u_ref = reference_solve(model, c)
    np.testing.assert_allclose(model.solve(theta), u_ref, rtol=1e-11, atol=1e-12)
    # and the observation operator: the 11 x 11 grid is on the mesh nodes for 30 x 30
    idx = [3 * i + 31 * 3 * j for j in range(11) for i in range(11)]
    np.testing.assert_allclose(model.observe(theta), u_ref[idx], atol=1e-12)
    # the potential from these pieces
    r = u_ref[idx] - model.y
    U_ref = 0.5 * r @ r / 0.1 ** 2 + 0.5 * theta @ theta / 0.5 ** 2
    assert model.value(theta) == pytest.approx(U_ref, rel=1e-11)


def test_splu_and_banded_agree(model):
    other = fs.models.EllipticPDE(solver="splu")
    rng = np.random.default_rng(0)
    for theta in 0.5 * rng.standard_normal((3, 20)):
        U1, g1 = model.value_and_grad(theta)
        U2, g2 = other.value_and_grad(theta)
        assert U1 == pytest.approx(U2, rel=1e-11)
        np.testing.assert_allclose(g1, g2, rtol=1e-9, atol=1e-9 * np.abs(g1).max())


def test_kl_basis_solves_the_eigenproblem(model):
    m, h = model.n_mesh, model.h
    xc = model.centres
    C = np.exp(-((xc[:, None, :] - xc[None, :, :]) ** 2).sum(-1) / (2 * 0.2 ** 2))
    lam_all = np.linalg.eigvalsh(h * h * C)[::-1]
    np.testing.assert_allclose(model.kl_eigenvalues, lam_all[:20], rtol=1e-9)
    Phi = model._Phi / np.sqrt(model.kl_eigenvalues)
    np.testing.assert_allclose((h * h * C) @ Phi, Phi * model.kl_eigenvalues, atol=1e-9)
    np.testing.assert_allclose(h * h * Phi.T @ Phi, np.eye(20), atol=1e-9)   # orthonormal in L2


def test_adjoint_gradient_matches_finite_differences(model):
    rng = np.random.default_rng(1)
    theta = model.theta_true + 0.2 * rng.standard_normal(20)
    g = model.grad(theta)
    eps = 1e-5
    fd = np.array([(model.value(theta + eps * e) - model.value(theta - eps * e)) / (2 * eps)
                   for e in np.eye(20)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.abs(g).max())


def test_jacobian_and_gauss_newton(model):
    theta = 0.3 * np.ones(20)
    J = model.jacobian(theta)
    eps = 1e-6
    fd = np.stack([(model.observe(theta + eps * e) - model.observe(theta - eps * e)) / (2 * eps)
                   for e in np.eye(20)], axis=1)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8)
    H = model.gauss_newton_hessian(theta)
    np.testing.assert_allclose(H, fd.T @ fd / 0.01 + 4 * np.eye(20), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(model.gauss_newton_diag(theta), np.diag(H), rtol=1e-12)
    assert np.all(np.linalg.eigvalsh(H) > 0)


def _l2_error(model, u_h, u_exact):
    """||u_h - u||_L2 by 2 x 2 Gauss quadrature on every element."""
    h = model.h
    gp = (1 - 1 / np.sqrt(3)) / 2, (1 + 1 / np.sqrt(3)) / 2
    err2 = 0.0
    x0 = model.nodes[model.elements[:, 0]]
    ul = u_h[model.elements]
    for s in gp:
        for t in gp:
            N = np.array([(1 - s) * (1 - t), s * (1 - t), s * t, (1 - s) * t])
            uq = ul @ N
            xq = x0 + h * np.array([s, t])
            err2 += ((uq - u_exact(xq[:, 0], xq[:, 1])) ** 2).sum() * h * h / 4
    return np.sqrt(err2)


def test_manufactured_solution_converges_at_second_order():
    # u = cos(pi x1) exp(x2) satisfies the zero-flux condition on x1 = 0, 1;
    # c = exp(x1 x2 / 2); f = -div(c grad u); Dirichlet data from u on x2 = 0, 1.
    u = lambda x1, x2: np.cos(np.pi * x1) * np.exp(x2)
    a = lambda x1, x2: 0.5 * x1 * x2

    def f(x1, x2):
        c = np.exp(a(x1, x2))
        ux1 = -np.pi * np.sin(np.pi * x1) * np.exp(x2)
        ux2 = np.cos(np.pi * x1) * np.exp(x2)
        lap = (1 - np.pi ** 2) * np.cos(np.pi * x1) * np.exp(x2)
        return -c * (0.5 * x2 * ux1 + 0.5 * x1 * ux2 + lap)

    errs, hs = [], []
    for m in (8, 16, 32, 64):
        mod = fs.models.EllipticPDE(n_mesh=m, n_modes=1, n_obs_side=2)
        c = np.exp(a(mod.centres[:, 0], mod.centres[:, 1]))
        g = u(mod.nodes[:, 0], mod.nodes[:, 1])
        u_h, _ = mod._solve_full(c, g=g, f_nodes=f(mod.nodes[:, 0], mod.nodes[:, 1]))
        if m == 8:
            u_ref = reference_solve(mod, c, g_fn=u, f_fn=f)
            np.testing.assert_allclose(u_h, u_ref, atol=1e-12)
        errs.append(_l2_error(mod, u_h, u))
        hs.append(1.0 / m)
    rates = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(rates > 1.9) and np.all(rates < 2.3), (errs, rates)


def test_constant_coefficient_is_scale_free(model):
    # with c constant the solution does not depend on the constant
    m = fs.models.EllipticPDE(n_mesh=12, n_modes=3, n_obs_side=5)
    u1, _ = m._solve_full(np.ones(144))
    u2, _ = m._solve_full(7.5 * np.ones(144))
    np.testing.assert_allclose(u1, u2, atol=1e-13)
    np.testing.assert_allclose(u1[m.dirichlet], np.where(m.nodes[m.dirichlet, 1] == 0,
                                                         m.nodes[m.dirichlet, 0],
                                                         1 - m.nodes[m.dirichlet, 0]))


def test_data_reproducible_and_pickle():
    a = fs.models.EllipticPDE(n_mesh=10, n_modes=4, seed=3)
    b = fs.models.EllipticPDE(n_mesh=10, n_modes=4, seed=3)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.y.shape == (121,) and a.dim == 4
    c = pickle.loads(pickle.dumps(a))
    q = np.array([0.1, -0.2, 0.3, 0.0])
    assert c.value(q) == a.value(q)
    assert a.param_names == ["theta[0]", "theta[1]", "theta[2]", "theta[3]"]
    assert a.value(np.array([np.nan, 0, 0, 0])) == np.inf
    U, g = a.value_and_grad(np.array([1e4, 0, 0, 0]))      # c overflows: a divergence
    assert U == np.inf and np.all(np.isnan(g))


def test_bad_arguments():
    with pytest.raises(ValueError):
        fs.models.EllipticPDE(n_mesh=1)
    with pytest.raises(TypeError):
        fs.models.EllipticPDE(n_modes=2.5)
    with pytest.raises(ValueError):
        fs.models.EllipticPDE(n_mesh=4, n_modes=17)
    with pytest.raises(ValueError):
        fs.models.EllipticPDE(noise_sd=0.0)
    with pytest.raises(ValueError):
        fs.models.EllipticPDE(solver="cg")
    with pytest.raises(ValueError):
        fs.models.EllipticPDE(n_mesh=6, n_modes=3, y=np.ones(5))
    m = fs.models.EllipticPDE(n_mesh=6, n_modes=3)
    with pytest.raises(ValueError):
        m.value(np.zeros(4))


def test_hmc_runs_on_pde_through_the_callback():
    m = fs.models.EllipticPDE(n_mesh=10, n_modes=3, seed=2)
    res = fs.sample(m, method="hmc", n_draws=30, n_warmup=30, chains=1, seed=1,
                    n_steps=5, progress=False)
    assert res.draws.shape == (1, 30, 3) and np.all(np.isfinite(res.draws))
