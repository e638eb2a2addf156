"""Riemannian-manifold HMC: metrics against finite differences, the generalized
leapfrog's reversibility and volume preservation, RMHMC and RNS-RMHMC as
distributions (MCSE tolerances)."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.core._potential import WeightedSum
from fastsurrogate.core._hmc import new_trace
from fastsurrogate.core._rmhmc import (FisherMetric, SoftAbsMetric, CallableMetric, RMChain,
                                       softabs, glm_weight_deriv)
from fastsurrogate.models import posteriordb as pdb
from fastsurrogate.samplers.rmhmc import usable_cpus
from fastsurrogate.surrogates import train_random_network


def fd_tensor(metric, q, h=1e-5):
    return np.array([(metric(q + h * e) - metric(q - h * e)) / (2 * h) for e in np.eye(len(q))])


def check_contractions(metric, q, u, rtol=1e-7):
    tr, quad = metric.contract(q, u)
    dG = fd_tensor(metric, q)
    Gi = np.linalg.inv(metric(q))
    tr_fd = np.einsum("kij,ij->k", dG, Gi)
    quad_fd = np.einsum("kij,i,j->k", dG, u, u)
    np.testing.assert_allclose(tr, tr_fd, rtol=0, atol=rtol * np.abs(tr_fd).max())
    np.testing.assert_allclose(quad, quad_fd, rtol=0, atol=rtol * np.abs(quad_fd).max())


def glm(family, n=3000, d=4, seed=0):
    X, y, _ = fs.datasets.simulate_logistic(n, d, seed=seed)
    rng = np.random.default_rng(seed)
    if family == "poisson":
        return fs.models.PoissonRegression(X, rng.poisson(1.0, n).astype(float), prior_sd=10.0)
    if family == "linear":
        return fs.models.LinearRegression(X, X @ np.ones(d) + rng.normal(size=n), sigma=1.0,
                                          prior_sd=10.0)
    cls = fs.models.LogisticRegression if family == "logistic" else fs.models.ProbitRegression
    return cls(X, y, prior_sd=10.0)


@pytest.mark.parametrize("family", ["logistic", "probit", "poisson", "linear"])
def test_fisher_metric_matches_model_and_finite_differences(family):
    m = glm(family)
    M = FisherMetric(m)
    q = np.array([0.1, -0.2, 0.3, 0.05])
    # the metric's G (dsyrk on weighted rows) is the model's Fisher to rounding
    F = m.fisher_information(q)
    np.testing.assert_allclose(M(q), F, rtol=0, atol=1e-13 * np.abs(F).max())
    assert np.array_equal(M(q), M(q).T)
    if family == "linear":          # constant metric: both contractions vanish
        tr, quad = M.contract(q, np.ones(4))
        assert np.all(tr == 0) and np.all(quad == 0)
        return
    check_contractions(M, q, np.array([0.3, 0.1, -0.5, 1.0]))


def glm_weights_numpy(m, q):
    """w(t), w'(t) of the expected information, t = X q, in NumPy."""
    t = m.X @ q
    fam = type(m).__name__
    if fam == "LogisticRegression":
        s = 1 / (1 + np.exp(-t))
        w = s * (1 - s)
        return w, w * (1 - 2 * s)
    if fam == "PoissonRegression":
        return np.exp(t), np.exp(t)
    if fam == "LinearRegression":
        return np.full_like(t, 1.0), np.zeros_like(t)
    from scipy.stats import norm
    m1, m2 = norm.pdf(t) / norm.cdf(t), norm.pdf(t) / norm.sf(t)
    w = m1 * m2
    return w, w * (m2 - m1 - 2 * t)


@pytest.mark.parametrize("shape", [(3000, 4), (3003, 7), (517, 2)])
@pytest.mark.parametrize("family", ["logistic", "probit", "poisson", "linear"])
def test_fisher_matvec_and_contractions_match_numpy(family, shape):
    """Row counts and dimensions off the kernels' tiles (4 rows, 4 columns)
    and blocks (256 rows) included."""
    n, d = shape
    m = glm(family, n=n, d=d)
    M = FisherMetric(m)
    q = np.array([0.1, -0.2, 0.3, 0.05, -0.1, 0.2, 0.0])[:d]
    v = np.array([0.3, 0.1, -0.5, 1.0, 0.7, -0.2, 0.4])[:d]
    G = M(q)
    Gv = M.matvec(q, v)
    w, dw = glm_weights_numpy(m, q)
    ref = m.X.T @ (w * (m.X @ v)) + (G - m.X.T @ (w[:, None] * m.X)) @ v
    np.testing.assert_allclose(Gv, G @ v, rtol=1e-12, atol=1e-12 * np.abs(G @ v).max())
    np.testing.assert_allclose(Gv, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    # finite differences of G(q + h e_k) v: the product follows q like G does
    h = 1e-5
    for k in range(d):
        e = np.eye(d)[k]
        fd = (M.matvec(q + h * e, v) - M.matvec(q - h * e, v)) / (2 * h)
        dG = (M(q + h * e) - M(q - h * e)) / (2 * h)
        np.testing.assert_allclose(fd, dG @ v, rtol=0, atol=1e-7 * (np.abs(dG @ v).max() + 1))
    # the contractions (w' cached per position) against NumPy: the leverage
    # form tr_k = sum_n w'_n x_nk (x_n G^-1 x_n), quad_k = sum_n w'_n x_nk (x_n u)^2
    Gi = np.linalg.inv(G)
    lev = np.einsum("ni,ij,nj->n", m.X, Gi, m.X)
    tr_ref, quad_ref = m.X.T @ (dw * lev), m.X.T @ (dw * (m.X @ v) ** 2)
    q2 = q + 0.05
    for point in (q, q, q2, q):          # the cache must follow the position
        tr, quad = M.contract(point, v)
        if point is q:
            np.testing.assert_allclose(tr, tr_ref, rtol=1e-11, atol=1e-13)
            np.testing.assert_allclose(quad, quad_ref, rtol=1e-11, atol=1e-13)
    # an indefinite Ginv (no Cholesky factor): the leverages by products with Ginv
    S = np.diag(np.linspace(-1.0, 2.0, d)) + 0.1
    tr_s, _ = M.contract(q, Ginv=S)
    np.testing.assert_allclose(tr_s, m.X.T @ (dw * np.einsum("ni,ij,nj->n", m.X, S, m.X)),
                               rtol=1e-11, atol=1e-12 * np.abs(tr_ref).max())
    fresh = FisherMetric(m)
    t1, k1 = fresh.contract(q2, v)
    t2, k2 = M.contract(q2, v)
    M.contract(q2, v)
    t3, k3 = M.contract(q2, v)
    assert np.array_equal(t1, t2) and np.array_equal(k1, k2)
    assert np.array_equal(t1, t3) and np.array_equal(k1, k3)


def test_fisher_metric_same_bits_for_any_thread_count():
    X, y, _ = fs.datasets.simulate_logistic(40000, 6, seed=2)
    q = np.linspace(-0.3, 0.3, 6)
    v = np.linspace(1.0, -2.0, 6)
    outs = []
    for t in (1, 2, 3):
        M = FisherMetric(fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=t))
        outs.append((M(q), M.matvec(q, v)) + M.contract(q, v))
    for o in outs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(outs[0], o))


def test_position_update_by_products_matches_whole_metrics():
    """eq. 8 solved with G v products (FisherMetric) and with whole metrics
    (the same G through CallableMetric, which has no product) agree."""
    m = glm("logistic", n=2000, d=3)
    M = FisherMetric(m)
    w_dw = lambda q: glm_weights_numpy(m, q)
    C = CallableMetric(lambda q: M(q),
                       lambda q: np.einsum("n,nk,ni,nj->kij", w_dw(q)[1], m.X, m.X, m.X), 3)
    q = np.array([0.2, -0.1, 0.4])
    p = np.array([3.0, -2.0, 1.5])
    out = []
    for metric in (M, C):
        chain = RMChain(m, metric, None, None, q, np.random.default_rng(0), max_fixed_point=200,
                        fixed_point_tol=1e-13)
        out.append(chain.leapfrog(q, p, 0.1, 3))
        assert chain.last_fixed_point_iterations < 100
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=0, atol=1e-9 * np.abs(p).max())


@pytest.mark.parametrize("family, code", [("logistic", 0), ("probit", 1), ("poisson", 2)])
def test_glm_weight_derivative(family, code):
    t = np.linspace(-6, 6, 25)
    h = 1e-6
    w, dw = glm_weight_deriv(code, 1.0, t)
    fd = (glm_weight_deriv(code, 1.0, t + h)[0] - glm_weight_deriv(code, 1.0, t - h)[0]) / (2 * h)
    np.testing.assert_allclose(dw, fd, rtol=1e-7, atol=1e-12)


def test_softabs_values_and_derivative():
    l = np.array([-50.0, -3.0, -0.4, -0.05, -1e-4, 0.0, 1e-4, 0.05, 0.099, 0.101, 0.7, 3.0, 50.0])
    f, fp = softabs(l, 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.where(l == 0, 0.5, l / np.tanh(2.0 * l))
    np.testing.assert_allclose(f, ref, rtol=1e-13)
    h = 1e-6
    fd = (softabs(l + h, 2.0)[0] - softabs(l - h, 2.0)[0]) / (2 * h)
    np.testing.assert_allclose(fp, fd, rtol=1e-7, atol=1e-9)
    # beyond alpha l = 20, SoftAbs is l itself and f' is 1 to rounding: the
    # premise of the saturated route (G = H, fs_metrics.h)
    for alpha in (1.0, 0.3, 7.0):
        ls = np.linspace(20.0, 60.0, 4001) / alpha
        f, fp = softabs(ls, alpha)
        assert np.array_equal(f, ls)
        assert np.abs(fp - 1.0).max() < 4e-16


def small_network(diagonal):
    rng = np.random.default_rng(4)
    Q = rng.normal(size=(400, 3))
    U = 0.5 * np.sum(Q ** 2 * [1.0, 2.0, 0.5], axis=1) + 0.3 * Q[:, 0] * Q[:, 1] ** 2
    net = train_random_network(Q, U, n_hidden=80, activation="softplus", ridge=1e-8,
                               standardize=True, input_scale=1.0, seed=3)
    return net, SoftAbsMetric(net, alpha=1.5, diagonal=diagonal)


@pytest.mark.parametrize("diagonal", [False, True])
def test_softabs_network_metric_finite_differences(diagonal):
    net, M = small_network(diagonal)
    q = np.array([0.3, -0.4, 0.2])
    G = M(q)
    H = net.hessian(q)
    if diagonal:
        np.testing.assert_allclose(np.diag(G), softabs(np.diag(H), 1.5)[0], rtol=1e-12)
    else:
        lam, V = np.linalg.eigh(H)
        np.testing.assert_allclose(G, (V * softabs(lam, 1.5)[0]) @ V.T, rtol=1e-10, atol=1e-12)
    check_contractions(M, q, np.array([0.7, -0.2, 0.4]))


def scaled_network(scale, alpha=1.0):
    """small_network's fit to scale * U: its Hessian, so its eigenvalues, scale with it."""
    rng = np.random.default_rng(4)
    Q = rng.normal(size=(400, 3)) / np.sqrt(scale)
    U = scale * (0.5 * np.sum(Q ** 2 * [1.0, 2.0, 0.5], axis=1) + 0.3 * Q[:, 0] * Q[:, 1] ** 2)
    net = train_random_network(Q, U, n_hidden=80, activation="softplus", ridge=1e-8,
                               standardize=True, input_scale=1.0, seed=3)
    return net, SoftAbsMetric(net, alpha=alpha)


def softabs_reference(net, q, alpha, u, offset=None):
    """G, dG/dq_k and the two contractions of the SoftAbs metric of a softplus
    network in NumPy: Hessian and third derivatives from the weights,
    Daleckii-Krein for the derivative of the matrix function.  ``offset``: a
    constant matrix added to the Hessian (SoftAbsMetric(offset=)); the
    returned H includes it."""
    shift = np.zeros(len(q)) if net.shift is None else net.shift
    scale = np.ones(len(q)) if net.scale is None else net.scale
    Wt = net.W / scale
    t = Wt @ (q - shift) + net.bias
    sg = 1.0 / (1.0 + np.exp(-t))
    a2 = sg * (1 - sg)
    a3 = a2 * (1 - 2 * sg)
    v = net.output_weights
    H = (Wt.T * (v * a2)) @ Wt
    if offset is not None:
        H = H + offset
    dH = np.einsum("i,ik,ij,il->kjl", v * a3, Wt, Wt, Wt)
    lam, V = np.linalg.eigh(H)
    f, fp = softabs(lam, alpha)
    dl = lam[:, None] - lam[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        J = np.where(np.abs(dl) > 1e-9 * (np.abs(lam[:, None]) + np.abs(lam[None, :])),
                     (f[:, None] - f[None, :]) / dl, 0.5 * (fp[:, None] + fp[None, :]))
    G = (V * f) @ V.T
    dG = np.array([V @ (J * (V.T @ dHk @ V)) @ V.T for dHk in dH])
    tr = np.einsum("kij,ij->k", dG, np.linalg.inv(G))
    quad = np.einsum("kij,i,j->k", dG, u, u)
    return H, lam, G, dG, tr, quad


@pytest.mark.parametrize("regime, scale", [("unsaturated", 1.0), ("mixed", 30.0),
                                           ("saturated", 400.0)])
def test_softabs_network_metric_in_each_regime(regime, scale):
    """The dense SoftAbs metric computes its contractions through the rows in
    the eigenbasis, with J - 1 only for the eigenvalues where SoftAbs is not
    exactly |l| (mixed, unsaturated), or, where every alpha l > 20, as G = H
    with no eigendecomposition (saturated).  Each route against a NumPy
    reference, finite differences, and its product against G v."""
    alpha = 1.0
    net, M = scaled_network(scale, alpha)
    q = np.array([0.3, -0.4, 0.2]) / np.sqrt(scale)
    u = np.array([0.7, -0.2, 0.4]) / np.sqrt(scale)
    H, lam, G_ref, dG, tr_ref, quad_ref = softabs_reference(net, q, alpha, u)
    np.testing.assert_allclose(net.hessian(q), H, rtol=0, atol=1e-11 * np.abs(H).max())
    if regime == "unsaturated":
        assert alpha * lam.max() < 20
    elif regime == "mixed":
        assert alpha * lam.min() < 20 and alpha * lam.max() > 41
    else:
        assert alpha * lam.min() > 41
    G = M(q)
    np.testing.assert_allclose(G, G_ref, rtol=0, atol=1e-12 * np.abs(G_ref).max())
    if regime == "saturated":
        np.testing.assert_array_equal(G, net.hessian(q))     # G is H itself there
    tr, quad = M.contract(q, u)
    np.testing.assert_allclose(tr, tr_ref, rtol=0, atol=1e-10 * np.abs(tr_ref).max())
    np.testing.assert_allclose(quad, quad_ref, rtol=0, atol=1e-10 * np.abs(quad_ref).max())
    check_contractions(M, q, u)
    if regime == "saturated":
        # the trace by the factor of the caller's Ginv; with an indefinite
        # one (no factor) by the solve with H's own factor: the same tr
        tr_s, _ = M.contract(q, Ginv=np.diag([-1.0, 1.0, 1.0]))
        np.testing.assert_allclose(tr_s, tr_ref, rtol=0, atol=1e-10 * np.abs(tr_ref).max())
    w = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(M.matvec(q, w), G_ref @ w, rtol=0,
                               atol=1e-12 * np.abs(G_ref).max() * np.abs(w).max())


OFFSET = np.array([[0.6, 0.2, -0.1], [0.2, 0.4, 0.05], [-0.1, 0.05, 0.3]])


@pytest.mark.parametrize("regime, scale", [("unsaturated", 1.0), ("mixed", 30.0),
                                           ("saturated", 400.0)])
def test_softabs_network_metric_with_offset(regime, scale):
    """SoftAbs(H_z + P) with a constant P (the precision of a Gaussian base,
    RNSRMHMC(base="laplace")): G, both contractions and the product G v
    against the NumPy reference (dG from H_z alone), finite differences, in
    each route; the offset does not change the metric without it."""
    net, M0 = scaled_network(scale)
    P = OFFSET * (1.0 if regime == "mixed" else scale)
    M = SoftAbsMetric(net, alpha=1.0, offset=P)
    q = np.array([0.3, -0.4, 0.2]) / np.sqrt(scale)
    u = np.array([0.7, -0.2, 0.4]) / np.sqrt(scale)
    H, lam, G_ref, dG, tr_ref, quad_ref = softabs_reference(net, q, 1.0, u, offset=P)
    if regime == "unsaturated":
        assert lam.max() < 20
    elif regime == "mixed":
        assert lam.min() < 20 < lam.max()
    else:
        assert lam.min() > 20
    G = M(q)
    np.testing.assert_allclose(G, G_ref, rtol=0, atol=1e-12 * np.abs(G_ref).max())
    tr, quad = M.contract(q, u)
    np.testing.assert_allclose(tr, tr_ref, rtol=0, atol=1e-10 * np.abs(tr_ref).max())
    np.testing.assert_allclose(quad, quad_ref, rtol=0, atol=1e-10 * np.abs(quad_ref).max())
    check_contractions(M, q, u)
    w = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(M.matvec(q, w), G_ref @ w, rtol=0,
                               atol=1e-12 * np.abs(G_ref).max() * np.abs(w).max())
    np.testing.assert_allclose(M0(q), softabs_reference(net, q, 1.0, u)[2], rtol=0,
                               atol=1e-12 * np.abs(G_ref).max())
    assert M0.offset is None and np.array_equal(M.offset, P)


def test_softabs_diagonal_metric_with_offset():
    net, _ = small_network(True)
    M = SoftAbsMetric(net, alpha=1.5, diagonal=True, offset=OFFSET)
    q = np.array([0.3, -0.4, 0.2])
    np.testing.assert_allclose(np.diag(M(q)),
                               softabs(np.diag(net.hessian(q)) + np.diag(OFFSET), 1.5)[0],
                               rtol=1e-12)
    check_contractions(M, q, np.array([0.7, -0.2, 0.4]))


@pytest.mark.parametrize("bad, match", [
    (np.eye(2), "offset must have shape"), (np.full((3, 3), np.nan), "finite"),
    (np.triu(np.ones((3, 3))), "symmetric")])
def test_softabs_offset_bad_input_raises_before_c(bad, match):
    net, _ = small_network(False)
    with pytest.raises(ValueError, match=match):
        SoftAbsMetric(net, offset=bad)


@pytest.mark.parametrize("regime, scale", [("mixed", 30.0), ("saturated", 400.0)])
def test_softabs_position_update_by_products_matches_whole_metrics(regime, scale):
    """eq. 8 with the network metric's O(s d) products (kept only where G = H
    at the solution; otherwise solved again with whole metrics) and with whole
    metrics (the same G and dG through CallableMetric) give the same step."""
    net, M = scaled_network(scale)
    C = CallableMetric(lambda q: softabs_reference(net, q, 1.0, np.zeros(3))[2],
                       lambda q: softabs_reference(net, q, 1.0, np.zeros(3))[3], 3)
    q = np.array([0.3, -0.4, 0.2]) / np.sqrt(scale)
    p = np.array([0.8, -0.5, 0.3]) * np.sqrt(scale)
    out = []
    for metric in (M, C):
        chain = RMChain(net, metric, None, None, q, np.random.default_rng(0),
                        max_fixed_point=200, fixed_point_tol=1e-13)
        out.append(chain.leapfrog(q, p, 0.2, 3))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=0, atol=1e-10 / np.sqrt(scale))
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=0, atol=1e-9 * np.abs(p).max())


def test_callable_metric_contractions():
    A = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 1.5]])
    Gf = lambda q: A * np.exp(q[0]) + np.diag(q ** 2)
    dGf = lambda q: np.array([(k == 0) * A * np.exp(q[0]) + np.diag(2 * q * (np.arange(3) == k))
                              for k in range(3)])
    check_contractions(CallableMetric(Gf, dGf, 3), np.array([0.2, -0.5, 0.8]),
                       np.array([1.0, 0.5, -0.3]))


@pytest.mark.parametrize("size", [(12, 5), (30, 20)])
def test_pde_fisher_metric_contractions_match_finite_differences(size):
    """EllipticPDE's Gauss-Newton (Fisher) metric: G is gauss_newton_hessian,
    and the adjoint contractions of dG agree with finite differences of G
    (the paper's 30 x 30 mesh with 20 modes, and a small one)."""
    n_mesh, d = size
    model = fs.models.EllipticPDE(n_mesh=n_mesh, n_modes=d, seed=3)
    M = fs.RMHMC(model).metric            # metric="fisher": the model's fisher_metric()
    assert isinstance(M, CallableMetric) and M.dim == d
    rng = np.random.default_rng(1)
    q = model.theta_true + 0.2 * rng.standard_normal(d)
    np.testing.assert_array_equal(M(q), model.gauss_newton_hessian(q))
    check_contractions(M, q, rng.standard_normal(d))
    # the contraction at a second u reuses the position's sensitivities
    check_contractions(M, q, rng.standard_normal(d))
    # where c overflows the metric is non-finite (a divergence), not an error
    assert not np.all(np.isfinite(M(np.full(d, 1e4))))


def test_callable_metric_contract_function_checked():
    G = lambda q: np.eye(2) * np.exp(q[0])
    good = lambda q, Gi, u: (None if Gi is None else np.array([np.trace(Gi) * np.exp(q[0]) / 2, 0.0]),
                             None if u is None else np.array([u @ u * np.exp(q[0]), 0.0]))
    M = CallableMetric(G, None, 2, contract=good)
    tr, quad = M.contract(np.zeros(2), np.ones(2))
    np.testing.assert_allclose(tr, [1.0, 0.0])
    np.testing.assert_allclose(quad, [2.0, 0.0])
    check_contractions(CallableMetric(lambda q: np.eye(2) * np.exp(q[0]), None, 2,
                                      contract=lambda q, Gi, u: (
                                          None if Gi is None else np.array([2.0, 0.0]),
                                          None if u is None else np.array([u @ u * np.exp(q[0]), 0.0]))),
                       np.array([0.3, 0.1]), np.array([0.5, -1.0]))
    with pytest.raises(ValueError, match="shape"):
        CallableMetric(G, None, 2, contract=lambda q, Gi, u: (np.zeros(3), np.zeros(3))).contract(
            np.zeros(2), np.ones(2))
    with pytest.raises(TypeError, match="pair"):
        CallableMetric(G, None, 2, contract=lambda q, Gi, u: np.zeros(2)).contract(
            np.zeros(2), np.ones(2))
    with pytest.raises(TypeError, match="contract"):
        CallableMetric(G, None, 2)
    with pytest.raises(TypeError, match="contract"):
        CallableMetric(G, None, 2, contract=3)


def lf_map(chain, eps, n):
    def f(z):
        q1, p1 = chain.leapfrog(z[:3], z[3:], eps, n)
        return np.concatenate([q1, p1])
    return f


@pytest.mark.parametrize("kind", ["fisher", "pde", "softabs", "softabs-saturated",
                                  "softabs-base", "softabs-base-saturated"])
def test_generalized_leapfrog_reversible_and_volume_preserving(kind):
    if kind == "fisher":
        m = glm("logistic", n=2000, d=3)
        pot, M = m, FisherMetric(m)
        q = np.array([0.2, -0.1, 0.4])
        p = np.array([3.0, -2.0, 1.5])
        eps = 0.1
    elif kind == "pde":                # Gauss-Newton metric, adjoint contractions
        pot = fs.models.EllipticPDE(n_mesh=8, n_modes=3, seed=3)
        M = pot.fisher_metric()
        q = pot.theta_true + np.array([0.1, -0.2, 0.1])
        p = np.array([3.0, -2.0, 1.5])
        eps = 0.1
    elif kind == "softabs":
        pot, M = small_network(False)
        q = np.array([0.3, -0.4, 0.2])
        p = np.array([0.8, -0.5, 0.3])
        eps = 0.2
    elif kind.startswith("softabs-base"):
        # drive z + U0 (Gaussian U0 of precision P), metric SoftAbs(H_z + P)
        scale = 400.0 if kind.endswith("saturated") else 1.0
        net, _ = scaled_network(scale)
        P = OFFSET * scale
        base = fs.models.Gaussian(np.array([0.1, 0.0, -0.1]) / np.sqrt(scale),
                                  np.linalg.inv(P))
        pot = WeightedSum([net, base], [1.0, 1.0])
        M = SoftAbsMetric(net, offset=P)
        q = np.array([0.3, -0.4, 0.2]) / np.sqrt(scale)
        p = np.array([0.8, -0.5, 0.3]) * np.sqrt(scale)
        eps = 0.2
    else:   # G = H along the trajectory: eq. 8 by the network's O(s d) products
        pot, M = scaled_network(400.0)
        q = np.array([0.3, -0.4, 0.2]) / 20.0
        p = np.array([0.8, -0.5, 0.3]) * 20.0
        eps = 0.2
    chain = RMChain(pot, M, None, None, q, np.random.default_rng(0), max_fixed_point=200,
                    fixed_point_tol=1e-15)
    q1, p1 = chain.leapfrog(q, p, eps, 3)
    assert chain.last_fixed_point_iterations < 200     # no fall-back from the G v products
    assert np.abs(q1 - q).max() > 1e-3
    q2, p2 = chain.leapfrog(q1, -p1, eps, 3)
    np.testing.assert_allclose(q2, q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(-p2, p, rtol=0, atol=1e-10)
    f = lf_map(chain, eps, 3)
    z = np.concatenate([q, p])
    h = 1e-5
    J = np.array([(f(z + h * e) - f(z - h * e)) / (2 * h) for e in np.eye(6)]).T
    assert abs(np.linalg.det(J) - 1.0) < 1e-8
    # energy error is second order in the step
    dh = chain.hamiltonian(q1, p1) - chain.hamiltonian(q, p)
    assert abs(dh) < 0.05


def compare(x, ref, n_se=4.0):
    bad = []
    for i in range(x.shape[1]):
        se_m = np.hypot(diagnostics.mcse_mean(x[:, i]), diagnostics.mcse_mean(ref[:, i]))
        se_s = np.hypot(diagnostics.mcse_sd(x[:, i]), diagnostics.mcse_sd(ref[:, i]))
        zm = (x[:, i].mean() - ref[:, i].mean()) / se_m
        zs = (x[:, i].std() - ref[:, i].std()) / se_s
        if abs(zm) > n_se or abs(zs) > n_se:
            bad.append((i, round(float(zm), 2), round(float(zs), 2)))
    assert not bad, f"(index, z of mean, z of sd) outside {n_se} MCSE: {bad}"


@pytest.fixture(scope="module")
def logistic_reference():
    X, y, _ = fs.datasets.simulate_logistic(2000, 5, seed=0)
    m = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    ref = fs.sample(m, method="nuts", n_draws=6000, n_warmup=1000, chains=1, seed=11,
                    progress=False)
    return m, ref.draws.reshape(-1, 5)


@pytest.mark.parametrize("method, kw", [
    ("rmhmc", dict(n_steps=3)),
    ("rns-rmhmc", dict(n_hidden=300, rm_n_steps=3)),
    ("rns-rmhmc", dict(n_hidden=300, rm_n_steps=3, test_metric="exact")),
    ("rns-rmhmc", dict(n_hidden=300, rm_n_steps=3, base="laplace")),
])
def test_rmhmc_exact_on_logistic_regression(logistic_reference, method, kw):
    m, ref = logistic_reference
    res = fs.sample(m, method=method, n_draws=2000, n_warmup=600, chains=1, seed=5,
                    progress=False, **kw)
    assert res.stats["divergent"].mean() < 0.02
    compare(res.draws.reshape(-1, 5), ref)


@pytest.fixture(scope="module")
def pde_reference():
    model = fs.models.EllipticPDE(n_mesh=10, n_modes=4, n_obs_side=6, seed=3)
    ref = fs.sample(model, method="nuts", n_draws=6000, n_warmup=1000, chains=1, seed=11,
                    progress=False).draws.reshape(-1, 4)
    return model, ref


@pytest.mark.parametrize("method, kw", [
    ("rmhmc", {}),
    # the paper's RNS-RMHMC on the PDE: the diagonal surrogate metric, and
    # here the exact (Gauss-Newton) metric in the Metropolis test
    ("rns-rmhmc", dict(n_hidden=200, diagonal_metric=True, test_metric="exact")),
])
def test_rmhmc_exact_on_elliptic_pde(pde_reference, method, kw):
    """RMHMC with the PDE's Gauss-Newton metric (metric="fisher"), and
    RNS-RMHMC with it in the test, against a long NUTS run, means and sds
    within 4 MCSE."""
    model, ref = pde_reference
    res = fs.sample(model, method=method, n_draws=2000, n_warmup=500, chains=1, seed=5,
                    progress=False, **kw)
    assert res.stats["divergent"].mean() < 0.02
    compare(res.draws.reshape(-1, 4), ref)


def linear_gaussian_fisher(model):
    """Fisher information of (w, log sigma) for y ~ N(Z w, sigma^2) plus prior precision."""
    ZtZ = model.Z.T @ model.Z
    p = model.p

    def G(q):
        out = np.zeros((p + 1, p + 1))
        out[:p, :p] = np.exp(-2 * q[p]) * ZtZ + np.eye(p) / model.prior_sd ** 2
        out[p, p] = 2.0 * model.n
        return out

    def dG(q):
        out = np.zeros((p + 1, p + 1, p + 1))
        out[p, :p, :p] = -2 * np.exp(-2 * q[p]) * ZtZ
        return out
    return G, dG


@pytest.mark.parametrize("cls", [pdb.SBLRC_BLR, pdb.ArK])
@pytest.mark.parametrize("method", ["rmhmc", "rns-rmhmc"])
def test_rmhmc_reproduces_posteriordb_reference(data_dir, cls, method):
    model = cls.from_posteriordb(data_dir)
    pot = pdb.as_potential(model)
    ref = cls.reference_draws(data_dir)
    kw = dict(n_hidden=400) if method == "rns-rmhmc" else {}
    res = fs.sample(pot, method=method, metric=linear_gaussian_fisher(model), n_draws=1500,
                    n_warmup=600, chains=1, seed=7, progress=False, **kw)
    # RNS-RMHMC's divergences are fixed points of the surrogate metric that
    # do not converge (rejected: the chain stays exact), at states in the
    # tails (seed 9: max |z| 2.6 against 1.6 for all states).  On ArK they
    # were 1.7, 0, 2.1, 2.4, 0, 4.2, 1.1, 1.9 % over seeds 7-14 (AMD EPYC
    # Zen 4, -O3) and 2.8 % for seed 7 in the -O0 sanitizer build there, not
    # fewer with max_fixed_point 50 or 200 or with n_warmup 1200, so 5 % for
    # it; RMHMC's stay at 2 %.
    assert res.stats["divergent"].mean() < (0.05 if method == "rns-rmhmc" else 0.02)
    draws = res.constrained()
    bad = []
    for name, r in ref.items():
        x = np.asarray(draws[name]).ravel()
        r = np.asarray(r).ravel()
        se_m = np.hypot(diagnostics.mcse_mean(x), diagnostics.mcse_mean(r))
        se_s = np.hypot(diagnostics.mcse_sd(x), diagnostics.mcse_sd(r))
        zm, zs = (x.mean() - r.mean()) / se_m, (x.std() - r.std()) / se_s
        if abs(zm) > 4 or abs(zs) > 4:
            bad.append((name, round(float(zm), 2), round(float(zs), 2)))
    assert not bad, bad


@pytest.mark.parametrize("activation", ["softplus", "sigmoid", "tanh"])
def test_network_hessian_vector_matches_hessian(activation):
    """The one-pass product (the eq. 8 product of the SoftAbs metric where
    G = H) against the formed Hessian, off the 4-unit tiles and 32-unit
    blocks (s = 70) and the 4-column padding (d = 5), standardised inputs."""
    rng = np.random.default_rng(4)
    Q = rng.normal(size=(300, 5)) * [1.0, 2.0, 0.5, 3.0, 1.0] + 0.3
    U = 0.5 * np.sum(Q ** 2, axis=1) + np.sin(Q[:, 0])
    net = train_random_network(Q, U, n_hidden=70, activation=activation, standardize=True,
                               seed=2)
    for q in Q[:5]:
        v = rng.normal(size=5)
        ref = net.hessian(q) @ v
        np.testing.assert_allclose(net.hessian_vector(q, v), ref, rtol=0,
                                   atol=1e-12 * (np.abs(ref).max() + 1e-300) * 70)
    with pytest.raises(ValueError, match="v must have shape"):
        net.hessian_vector(Q[0], np.ones(4))
    rbf = train_random_network(Q, U, n_hidden=10, activation="rbf", seed=2)
    with pytest.raises(TypeError, match="additive"):
        rbf.hessian_vector(Q[0], np.ones(5))


def test_bad_arguments_raise_before_c():
    m = glm("logistic", n=200, d=3)
    with pytest.raises(TypeError):
        fs.RMHMC(fs.models.StandardNormal(3))          # no Fisher for a non-GLM
    with pytest.raises(ValueError):
        fs.RMHMC(m, metric="hessian")
    with pytest.raises(ValueError):
        fs.RNSRMHMC(m, test_metric="both")
    with pytest.raises(ValueError, match="Riemannian"):
        fs.RNSRMHMC(m, metric="unit")              # not the exploration's mass matrix
    with pytest.raises(TypeError):
        CallableMetric(1, 2, 3)
    M = FisherMetric(m)
    with pytest.raises(ValueError, match="shape"):
        M.contract(np.zeros(3), Ginv=np.eye(2))
    with pytest.raises(ValueError, match="symmetric"):
        M.contract(np.zeros(3), Ginv=np.triu(np.ones((3, 3))))
    with pytest.raises(ValueError, match="finite"):
        M.contract(np.zeros(3), Ginv=np.full((3, 3), np.nan))


# ---- the overlapped loop (fs_rmhmc_run with cfg->overlap) -------------------

def fitted_network(m, seed):
    """A network fitted to m's U at 400 NUTS draws, and the last draw."""
    res = fs.sample(m, method="nuts", n_draws=400, n_warmup=300, chains=1, seed=seed,
                    progress=False)
    Q = res.draws.reshape(-1, m.dim)
    net = train_random_network(Q, np.array([m.value(q) for q in Q]), n_hidden=200, seed=4)
    return m, net, Q[-1]


@pytest.fixture(scope="module")
def overlap_problem():
    """A logistic regression (N = 20000 rows: 40 blocks, 5 tasks when its U
    runs inside the overlapped loop's team), a network fitted to it and a
    start in the bulk."""
    X, y, _ = fs.datasets.simulate_logistic(20000, 4, seed=2)
    return fitted_network(fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=2), 3)


def overlap_trace(problem, overlap, chunks, step, random_n_steps=False, judge=None, stop=None):
    m, net, q0 = problem
    chain = RMChain(net, SoftAbsMetric(net), m if judge is None else judge, None, q0,
                    np.random.default_rng(9), step_size=step, n_steps=3,
                    random_n_steps=random_n_steps, overlap=overlap)
    tr = new_trace(sum(chunks), m.dim, proposals=True)
    i = 0
    for c in chunks:
        n, _ = chain.run(tr, i, c, stop=stop)
        i += n
        if n < c:
            break
    return tr, chain, i


def assert_same_trace(a, b, rows=None):
    for k in a:
        x, y = a[k][:rows], b[k][:rows]
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), k


@pytest.mark.parametrize("step, random_n_steps", [(1.2, False), (1.0, True), (1.8, True), (2.3, True)])
def test_overlapped_loop_gives_the_serial_chain_bit_for_bit(overlap_problem, step,
                                                            random_n_steps):
    # 1.0 and 1.2: 15-25 % rejected; 1.8: most rejected; 2.3: most divergent
    # (fixed points that do not converge, non-finite values).  The pre-fetched
    # trajectories are then mostly thrown away and run again from the
    # current point, with the random numbers already drawn
    chunks = [1, 2, 37, 1, 60, 99]
    ref, _, _ = overlap_trace(overlap_problem, False, chunks, step, random_n_steps)
    for ov in (True, "auto"):
        tr, chain, _ = overlap_trace(overlap_problem, ov, chunks, step, random_n_steps)
        assert_same_trace(ref, tr)
    acc = ref["accepted"].mean()
    assert (0.6 < acc < 0.95 if step < 1.5 else acc < 0.5 if step < 2
            else ref["divergent"].sum() > 3)
    # "auto" timed both ways (each call of >= 2 iterations is timed one way)
    t = chain.overlap_timings
    assert t["serial"][1] >= 2 and t["overlapped"][1] >= 2


def test_overlapped_loop_with_ica_judge():
    # ICA's U also cuts its blocks into tasks inside the team
    X, _, _ = fs.datasets.simulate_ica(n=20000, d=2, seed=1)
    problem = fitted_network(fs.models.ICA(X, n_threads=2), 5)
    ref, _, _ = overlap_trace(problem, False, [3, 80], 0.8, True)
    tr, _, _ = overlap_trace(problem, True, [3, 80], 0.8, True)
    assert_same_trace(ref, tr)
    assert 0.2 < ref["accepted"].mean() < 1.0


def test_overlapped_loop_with_a_python_judge_that_goes_non_finite(overlap_problem):
    # a thread-safe callback judge runs on the OpenMP worker (it takes the
    # GIL there); NaN far out is a divergence, as in the serial loop
    m, _, q0 = overlap_problem
    far = q0[0] - 0.1

    def value(q):
        return np.nan if q[0] < far else m.value(q)

    judge = fs.Potential.from_callable(lambda q: m.value_and_grad(q), 4, value=value,
                                       thread_safe=True)
    ref, _, _ = overlap_trace(overlap_problem, False, [150], 1.0, True, judge=judge)
    tr, _, _ = overlap_trace(overlap_problem, True, [150], 1.0, True, judge=judge)
    assert_same_trace(ref, tr)
    # every proposal into the NaN region is a divergence and is never taken
    # (how many there are depends on the chain's rounding: 3 in the -O0
    # sanitizer build on an Intel Xeon, more elsewhere)
    into_nan = ref["proposals"][:, 0] < far
    assert into_nan.any() and np.all(ref["divergent"][into_nan] == 1)
    assert np.all(ref["draws"][:, 0] >= far)


def test_overlapped_loop_stop_and_error_keep_the_chain(overlap_problem):
    m, _, q0 = overlap_problem
    ref, _, _ = overlap_trace(overlap_problem, False, [120], 1.0)
    # a stop request during the run: the rows done are the serial chain's,
    # and the rest, run after it, completes the same chain
    stop = np.zeros(1, dtype=np.int32)
    calls = [0]

    def value(q):
        calls[0] += 1
        if calls[0] == 40:
            stop[0] = 1
        return m.value(q)

    judge = fs.Potential.from_callable(lambda q: m.value_and_grad(q), 4, value=value,
                                       thread_safe=True)
    tr, chain, n = overlap_trace(overlap_problem, True, [120], 1.0, judge=judge, stop=stop)
    assert 30 <= n < 120
    stop[0] = 0
    chain.run(tr, n, 120 - n, stop=stop)
    assert_same_trace(ref, tr)

    # an error raised by the judge reaches the caller; the rows before it are kept
    def bad(q):
        calls[0] += 1
        if calls[0] == 60:
            raise ValueError("judge failed")
        return m.value(q)

    calls[0] = 0
    net = overlap_problem[1]
    judge = fs.Potential.from_callable(lambda q: m.value_and_grad(q), 4, value=bad,
                                       thread_safe=True)
    chain = RMChain(net, SoftAbsMetric(net), judge, None, q0, np.random.default_rng(9),
                    step_size=1.0, n_steps=3, overlap=True)
    tr = new_trace(120, 4, proposals=True)
    with pytest.raises(ValueError, match="judge failed"):
        chain.run(tr, 0, 120)
    k = chain.n_done_last
    assert 40 < k < 60
    assert_same_trace(ref, tr, rows=k)


def test_rns_rmhmc_records_its_overlap_setting():
    X, y, _ = fs.datasets.simulate_logistic(3000, 4, seed=1)
    m = fs.models.LogisticRegression(X, y, n_threads=2)
    kw = dict(n_draws=200, n_warmup=400, chains=1, seed=2, progress=False, n_hidden=200)
    ov = fs.sample(m, method="rns-rmhmc", **kw).info["overlap"]
    assert len(ov) == 1 and ov[0]["setting"] == ("auto" if usable_cpus() > 1 else False)
    assert set(ov[0]) == {"setting", "serial", "overlapped"}
    # the exact test metric needs the exact metric at t before t + 1 starts
    assert fs.sample(m, method="rns-rmhmc", test_metric="exact",
                     **kw).info["overlap"][0]["setting"] is False


def test_overlap_argument_checked():
    m = glm("logistic", n=200, d=3)
    with pytest.raises(ValueError, match="overlap"):
        fs.RNSRMHMC(m, overlap="yes")
    net, M = small_network(False)
    with pytest.raises(ValueError, match="overlap"):
        RMChain(net, M, None, None, np.zeros(3), np.random.default_rng(0), overlap="on")
    with pytest.raises(TypeError, match="overlap"):
        RMChain(net, M, None, None, np.zeros(3), np.random.default_rng(0), overlap=1)


def _lag1(draws):
    x = draws[0] - draws[0].mean(axis=0)
    return float(np.mean([np.corrcoef(x[:-1, i], x[1:, i])[0, 1] for i in range(x.shape[1])]))


def test_auto_steps_make_iterations_nearly_independent():
    # with the Fisher metric the generalized leapfrog is a unit-frequency
    # oscillator in whitened coordinates: lag-1 autocorrelation cos(t) for a
    # trajectory of length t.  "auto" sets L = round(pi / step) (L drawn
    # from 1..L: mean length about pi / 2, mean cos about 0); 3 steps of a
    # small step leave the chain strongly autocorrelated
    from fastsurrogate.samplers.rmhmc import auto_rm_steps
    X, y, _ = fs.datasets.simulate_logistic(5000, 5, seed=4)
    m = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    kw = dict(n_draws=800, n_warmup=300, chains=1, seed=5, progress=False, target_accept=0.97)
    auto = fs.sample(m, method="rmhmc", **kw)
    three = fs.sample(m, method="rmhmc", n_steps=3, **kw)
    step = float(auto.step_size[0])
    assert step == float(three.step_size[0]) and 0.2 < step < 0.8   # the same adaptation (at 3)
    assert auto.info["n_steps"] == [auto_rm_steps(step)] and auto.info["n_steps"][0] >= 4
    assert three.info["n_steps"] == [3]
    # lag-1 autocorrelation, mean over the 5 coefficients: sd about 0.02
    assert abs(_lag1(auto.draws)) < 0.25 and _lag1(three.draws) > 0.4
    # the kept draws ran the auto L (drawn from 1..L)
    assert auto.stats["n_steps"].max() == auto.info["n_steps"][0]
    # a given step without adaptation: L set before the first iteration
    fixed = fs.sample(m, method="rmhmc", step_size=0.5, adapt=False, n_draws=20, n_warmup=5,
                      chains=1, seed=1, progress=False)
    assert fixed.info["n_steps"] == [6] and fixed.warmup_stats["n_steps"].max() <= 6
    assert auto_rm_steps(0.5, random_n_steps=False) == 3
    assert auto_rm_steps(np.pi / 16) == 16 and auto_rm_steps(10.0) == 1
    assert auto_rm_steps(np.pi / 17) == 16 and auto_rm_steps(np.pi / 64) == 16
    assert auto_rm_steps(np.pi / 65) == 3 and auto_rm_steps(1e-6) == 3   # a poor metric
    # RNS-RMHMC: the Riemannian chain's L from its adapted step
    rns = fs.sample(m, method="rns-rmhmc", n_draws=50, n_warmup=300, chains=1, seed=2,
                    progress=False, n_hidden=200)
    assert rns.info["rm_n_steps"] == [auto_rm_steps(rns.info["rm_step_size"][0])]
    assert rns.stats["n_steps"].max() <= rns.info["rm_n_steps"][0]


def test_auto_steps_arguments_checked():
    m = glm("logistic", n=200, d=3)
    with pytest.raises(ValueError, match='n_steps must be a positive integer or "auto"'):
        fs.RMHMC(m, n_steps="many")
    with pytest.raises(ValueError, match='rm_n_steps must be a positive integer or "auto"'):
        fs.RNSRMHMC(m, rm_n_steps="auto-ish")
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        fs.RMHMC(m, n_steps=0)
    net, M = small_network(False)
    chain = RMChain(net, M, None, None, np.zeros(3), np.random.default_rng(0))
    chain.n_steps = 5
    assert chain.n_steps == 5
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        chain.n_steps = 0
    with pytest.raises(TypeError, match="n_steps must be an integer"):
        chain.n_steps = 2.5


def test_options_the_surrogate_riemannian_and_online_samplers_would_ignore_are_refused():
    """ARNS-HMC and RNS-RMHMC take RNS-HMC's options through **options; the
    ones they do not use were accepted and silently ignored (a given
    surrogate= was ignored and a network trained; guard=0.9 did nothing)."""
    X, y, _ = fs.datasets.simulate_logistic(300, 2, seed=0)
    m = fs.models.LogisticRegression(X, y)
    net = fs.surrogates.RandomNetwork.random(2, 5, seed=0)
    for kw in (dict(surrogate=net), dict(guard=0.9), dict(guard_window=50),
               dict(guard_action="stop")):
        with pytest.raises(ValueError, match=f"ARNS-HMC does not use {list(kw)[0]}"):
            fs.ARNSHMC(m, **kw)
    for kw in (dict(transitions=2), dict(inner="nuts"), dict(delayed_acceptance=True),
               dict(guard=0.5), dict(guard_window=50)):
        with pytest.raises(ValueError, match=f"RNS-RMHMC does not use {list(kw)[0]}"):
            fs.RNSRMHMC(m, **kw)
    fs.ARNSHMC(m, guard=None, delayed_acceptance=False)       # None / False: not given
    fs.RNSRMHMC(m, guard=None, transitions=None)
