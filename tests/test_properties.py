"""Property-based tests (hypothesis) of the compiled kernels through the public API.

Random shapes (N, d, s), input dtypes and layouts (float32 / float64 / int,
Fortran order, strided views), scales and seeds:

- a kernel fed any real array layout gives bit for bit what it gives the
  same numbers as a C-contiguous float64 array (the conversion is exact);
- value against a NumPy reference (GLM families, Gaussian, random
  network, gradient network) and gradient against central finite
  differences of the value, with a tolerance derived from the step h:
  truncation h^2 / 6 * (a bound of the third derivative along the step)
  plus rounding eps * (sum of |terms|) / h;
- online = batch: Greville (ridge 0: pinv(H) y; ridge > 0: the ridge
  solution) and Sherman-Morrison-Woodbury updates equal the batch solve;
- metrics: the GLM Fisher metric and the SoftAbs surrogate metric are
  symmetric positive definite, the Fisher metric equals X^T W X + prior.

The profile ("fastsurrogate-ci", selected here) keeps max_examples modest
and deadline=None, so the file runs in about a minute on a loaded 2-core
machine; HYPOTHESIS_PROFILE=thorough raises the example counts.
"""
import os

import numpy as np
import pytest
from scipy import special

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st   # noqa: E402

import fastsurrogate as fs                                              # noqa: E402
from fastsurrogate.core._rmhmc import FisherMetric, SoftAbsMetric      # noqa: E402
from fastsurrogate.surrogates._online import GrevilleTrainer, SMWTrainer  # noqa: E402

settings.register_profile("fastsurrogate-ci", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow], derandomize=True,
                          database=None)
settings.register_profile("thorough", max_examples=300, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fastsurrogate-ci")
EPS = np.finfo(np.float64).eps


def _ci(n=None):
    """The file's settings; n overrides max_examples for expensive properties."""
    base = settings.get_profile(PROFILE)
    return settings(base, max_examples=n) if n is not None and PROFILE == "fastsurrogate-ci" \
        else base


# -- array layouts ---------------------------------------------------------------------

LAYOUTS = ["c64", "f64", "c32", "strided", "int"]


def layout(a, how):
    """`a` (float64) in another dtype / memory layout; for "c32" and "int" the
    values change (rounded), so the caller compares with `as_float64(result)`."""
    if how == "c64":
        return np.ascontiguousarray(a)
    if how == "f64":
        return np.asfortranarray(a)
    if how == "c32":
        return a.astype(np.float32)
    if how == "strided":       # a non-contiguous view: every other column of a wider array
        wide = np.zeros(a.shape[:-1] + (2 * a.shape[-1],)) if a.ndim > 1 else np.zeros(2 * a.size)
        if a.ndim > 1:
            wide[..., ::2] = a
            return wide[..., ::2]
        wide[::2] = a
        return wide[::2]
    if how == "int":
        return np.round(4 * a).astype(np.int64)
    raise AssertionError(how)


def as_float64(a):
    return np.ascontiguousarray(a, dtype=np.float64)


def central_difference(f, q, h):
    """(f(q + h e_j) - f(q - h e_j)) / 2h for every j."""
    out = np.empty(q.size)
    for j in range(q.size):
        e = np.zeros(q.size)
        e[j] = h[j]
        out[j] = (f(q + e) - f(q - e)) / (2 * h[j])
    return out


# -- GLM families ------------------------------------------------------------------------

FAMILIES = {"logistic": fs.models.LogisticRegression, "probit": fs.models.ProbitRegression,
            "poisson": fs.models.PoissonRegression, "gaussian": fs.models.LinearRegression}


def glm_data(family, n, d, scale, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale / np.sqrt(d)
    t = X @ rng.normal(size=d)
    if family in ("logistic", "probit"):
        y = (rng.random(n) < special.expit(t)).astype(float)
    elif family == "poisson":
        y = rng.poisson(np.exp(np.clip(t, -10, 3))).astype(float)
    else:
        y = t + rng.normal(size=n)
    return X, y, rng.normal(size=d)


def glm_reference(family, X, y, beta, prior_sd, sigma=1.0):
    """(U, grad U, sum of |loss terms|, third-derivative bound per row) in NumPy."""
    t = X @ beta
    if family == "logistic":
        loss, r, c3 = np.logaddexp(0, t) - y * t, special.expit(t) - y, np.full_like(t, 0.1)
    elif family == "probit":
        s = 2 * y - 1
        z = s * t
        lam = np.exp(special.log_ndtr(z) * -1 + (-0.5 * z * z - 0.5 * np.log(2 * np.pi)))
        loss, r, c3 = -special.log_ndtr(z), -s * lam, 1.0 + np.abs(z)
    elif family == "poisson":
        loss, r, c3 = np.exp(t) - y * t, np.exp(t) - y, np.exp(t)
    else:
        loss, r, c3 = (t - y) ** 2 / (2 * sigma ** 2), (t - y) / sigma ** 2, np.zeros_like(t)
    U = loss.sum() + 0.5 * np.sum(beta ** 2) / prior_sd ** 2
    g = X.T @ r + beta / prior_sd ** 2
    # magnitudes of the summed terms: the scales of the rounding errors
    mag = np.abs(loss).sum() + 0.5 * np.sum(beta ** 2) / prior_sd ** 2
    gmag = np.abs(X).T @ np.abs(r) + np.abs(beta) / prior_sd ** 2
    return U, g, mag, c3, gmag


@_ci()
@given(family=st.sampled_from(sorted(FAMILIES)), n=st.integers(1, 60), d=st.integers(1, 6),
       scale=st.sampled_from([0.1, 1.0, 3.0]), how=st.sampled_from(LAYOUTS),
       prior_sd=st.sampled_from([0.5, 10.0]), seed=st.integers(0, 2**16))
def test_glm_against_numpy_any_layout(family, n, d, scale, how, prior_sd, seed):
    X, y, beta = glm_data(family, n, d, scale, seed)
    Xl = layout(X, how)
    X64 = as_float64(Xl)
    model = FAMILIES[family](Xl, y, prior_sd=prior_sd)
    ref_model = FAMILIES[family](X64, y, prior_sd=prior_sd)
    U, g = model.value_and_grad(beta)
    U0, g0 = ref_model.value_and_grad(beta)
    # the converted layout gives the same numbers as float64 C order, bit for bit
    assert U == U0 and np.array_equal(g, g0)
    # NumPy reference: relative to the magnitude of the summed terms
    Ur, gr, mag, _, gmag = glm_reference(family, X64, y, beta, prior_sd)
    # summation of n + 1 terms (any order, blocked): |error| <= (n + 1) eps sum |terms|,
    # and each term carries a few ulps from exp / log1p / erfc
    assert abs(U - Ur) <= 16 * (n + 1) * EPS * mag + 1e-300
    assert np.all(np.abs(g - gr) <= 16 * (n + 1) * EPS * gmag + 1e-300)


@_ci()
@given(family=st.sampled_from(sorted(FAMILIES)), n=st.integers(1, 40), d=st.integers(1, 5),
       scale=st.sampled_from([0.1, 1.0, 3.0]), seed=st.integers(0, 2**16))
def test_glm_gradient_is_the_derivative_of_the_value(family, n, d, scale, seed):
    X, y, beta = glm_data(family, n, d, scale, seed)
    model = FAMILIES[family](X, y, prior_sd=2.0)
    h = EPS ** (1 / 3) * (1.0 + np.abs(beta))
    fd = central_difference(model.value, beta, h)
    g = model.grad(beta)
    U, _, mag, c3, _ = glm_reference(family, X, y, beta, 2.0)
    # truncation: h_j^2 / 6 max |U'''| along e_j (<= sum_i |x_ij|^3 c3 at the
    # farthest point: exp(t) grows by at most exp(h |x|)); rounding: eps |terms| / h
    grow = np.exp(np.abs(X) @ h) if family == "poisson" else 1.0
    trunc = h ** 2 / 6 * ((np.abs(X) ** 3).T @ (c3 * grow))
    rounding = 4 * EPS * (mag + np.abs(U)) / h
    assert np.all(np.abs(fd - g) <= 4 * (trunc + rounding) + 1e-13), (fd - g, trunc, rounding)


@_ci(15)
@given(family=st.sampled_from(["logistic", "poisson", "gaussian"]), n=st.integers(1, 40),
       d=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_fisher_metric_symmetric_positive_definite(family, n, d, seed):
    X, y, beta = glm_data(family, n, d, 1.0, seed)
    model = FAMILIES[family](X, y, prior_sd=3.0)
    G = FisherMetric(model)(beta)
    np.testing.assert_array_equal(G, G.T)
    assert np.linalg.eigvalsh(G).min() > 0
    t = X @ beta
    w = {"logistic": special.expit(t) * special.expit(-t), "poisson": np.exp(t),
         "gaussian": np.ones(n)}[family]
    ref = X.T @ (w[:, None] * X) + np.eye(d) / 9.0
    np.testing.assert_allclose(G, ref, rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(seed).normal(size=d)
    np.testing.assert_allclose(FisherMetric(model).matvec(beta, v), G @ v, rtol=1e-9,
                               atol=1e-12 * np.abs(G).sum())


# -- Gaussian model ------------------------------------------------------------------------

@_ci()
@given(d=st.integers(1, 6), seed=st.integers(0, 2**16), how=st.sampled_from(["c64", "f64", "c32"]),
       scale=st.sampled_from([1e-2, 1.0, 1e2]))
def test_gaussian_against_numpy(d, seed, how, scale):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(d, d))
    cov = scale * (B @ B.T + d * np.eye(d))
    mean = rng.normal(size=d)
    cov_l = layout(cov, how)
    if how == "c32":          # rounding can break symmetry by an ulp: symmetrise the input
        cov_l = ((cov_l + cov_l.T) / 2).astype(np.float32)
    cov64 = as_float64(cov_l)
    model = fs.models.Gaussian(mean, cov_l)
    q = mean + rng.normal(size=d) * np.sqrt(scale)
    U, g = model.value_and_grad(q)
    P = np.linalg.inv(cov64)
    r = q - mean
    assert abs(U - 0.5 * r @ P @ r) <= 1e-10 * (1 + abs(U))
    np.testing.assert_allclose(g, P @ r, rtol=1e-9, atol=1e-9 * np.abs(P @ r).max() + 1e-300)


# -- random network (RNS-HMC surrogate) ------------------------------------------------------

def act(name, t):
    if name == "softplus":
        return np.logaddexp(0, t), special.expit(t)
    if name == "sigmoid":
        s = special.expit(t)
        return s, s * (1 - s)
    return np.tanh(t), 1 - np.tanh(t) ** 2


@_ci()
@given(d=st.integers(1, 5), s=st.integers(1, 40),
       activation=st.sampled_from(["softplus", "sigmoid", "tanh", "rbf"]),
       seed=st.integers(0, 2**16), qscale=st.sampled_from([0.1, 1.0, 5.0]))
def test_random_network_against_numpy_and_finite_differences(d, s, activation, seed, qscale):
    rng = np.random.default_rng(seed)
    net = fs.surrogates.RandomNetwork.random(d, s, activation=activation, seed=seed)
    net.output_weights = rng.normal(size=s)
    W = np.array(net.W)
    q = rng.normal(size=d) * qscale
    if activation == "rbf":
        lw = np.array(net.width)
        a = np.exp(-((W - q) ** 2).sum(1) / (2 * lw ** 2))
        A = (W - q).T * (a / lw ** 2)             # (d, s): d a_i / d q
    else:
        a, da = act(activation, W @ q + np.array(net.bias))
        A = W.T * da
    v = net.output_weights
    U, g = net.value_and_grad(q)
    assert abs(U - (a @ v + net.out_bias)) <= 1e-11 * (np.abs(a) @ np.abs(v) + 1)
    np.testing.assert_allclose(g, A @ v, rtol=0, atol=1e-11 * (np.abs(A) @ np.abs(v) + 1).max())
    # the gradient is the derivative of the value; the Hessian that of the gradient
    h = EPS ** (1 / 3) * (1 + np.abs(q))
    Wmax = np.abs(W).max() if activation != "rbf" else 1.0 / np.array(net.width).min()
    bound3 = np.abs(v).sum() * Wmax ** 3 * 2.0        # |act'''| <= 2 for these forms
    tol = 4 * (h ** 2 / 6 * bound3 + 4 * EPS * (np.abs(a) @ np.abs(v) + 1) / h)
    assert np.all(np.abs(central_difference(net.value, q, h) - g) <= tol)
    H = net.hessian(q)
    np.testing.assert_array_equal(H, H.T)
    for j in range(d):
        fd = central_difference(lambda x: net.grad(x)[j], q, h)
        assert np.all(np.abs(fd - H[j]) <= 4 * (h ** 2 / 6 * bound3 * Wmax + tol * Wmax + 1e-9))
    np.testing.assert_allclose(net.hessian_diag(q), np.diag(H), rtol=1e-12, atol=1e-14)


@_ci(15)
@given(d=st.integers(1, 4), s=st.integers(1, 30), n=st.integers(1, 20),
       how=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**16))
def test_random_network_batch_equals_points_any_layout(d, s, n, how, seed):
    rng = np.random.default_rng(seed)
    net = fs.surrogates.RandomNetwork.random(d, s, seed=seed)
    net.output_weights = rng.normal(size=s)
    Ql = layout(rng.normal(size=(n, d)), how)
    Q = as_float64(Ql)
    F = net.features(Ql)
    np.testing.assert_array_equal(F, net.features(Q))
    V, G = net.value_and_gradient_batch(Ql)
    for i in range(n):
        u, g = net.value_and_grad(Q[i])
        assert V[i] == pytest.approx(u, rel=1e-13, abs=1e-13)
        np.testing.assert_allclose(G[i], g, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(F[i] @ net.output_weights + net.out_bias, u, rtol=1e-12,
                                   atol=1e-12)


@_ci(15)
@given(d=st.integers(1, 4), s=st.integers(2, 20), seed=st.integers(0, 2**16),
       alpha=st.sampled_from([0.1, 1.0, 10.0]), diagonal=st.booleans())
def test_softabs_metric_symmetric_positive_definite(d, s, seed, alpha, diagonal):
    rng = np.random.default_rng(seed)
    net = fs.surrogates.RandomNetwork.random(d, s, seed=seed)
    net.output_weights = rng.normal(size=s) * 3     # an indefinite Hessian, usually
    q = rng.normal(size=d)
    G = SoftAbsMetric(net, alpha=alpha, diagonal=diagonal)(q)
    np.testing.assert_allclose(G, G.T, rtol=0, atol=1e-13 * np.abs(G).max())
    lam = np.linalg.eigvalsh(H := net.hessian(q)) if not diagonal else np.diag(net.hessian(q))
    # SoftAbs: each eigenvalue l of H becomes l coth(alpha l) >= 1 / alpha
    assert np.linalg.eigvalsh((G + G.T) / 2).min() >= (1 / alpha) * (1 - 1e-9)
    softabs = np.where(np.abs(lam) * alpha > 1e-8, lam / np.tanh(alpha * lam), 1 / alpha)
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh((G + G.T) / 2)), np.sort(softabs),
                               rtol=1e-8, atol=1e-10)


# -- gradient network (NNgHMC) --------------------------------------------------------------

@_ci(15)
@given(d=st.integers(1, 4), hidden=st.integers(1, 12), blocks=st.integers(1, 4), n=st.integers(1, 15),
       activation=st.sampled_from(["softplus", "tanh"]), seed=st.integers(0, 2**16),
       how=st.sampled_from(LAYOUTS))
def test_gradient_network_backprop_and_batch(d, hidden, blocks, n, activation, seed, how):
    blocks = min(blocks, d)
    net = fs.surrogates.GradientNetwork.random(d, n_hidden=hidden * blocks, blocks=blocks,
                                               activation=activation, seed=seed)
    rng = np.random.default_rng(seed)
    theta = net.get_params() + 0.1 * rng.normal(size=net.n_params)
    net.set_params(theta)
    Ql = layout(rng.normal(size=(n, d)), how)
    Q = as_float64(Ql)
    Y = rng.normal(size=(n, d))
    G = net.gradient_batch(Ql)
    np.testing.assert_array_equal(G, net.gradient_batch(Q))
    for i in range(n):
        np.testing.assert_allclose(G[i], net.grad(Q[i]), rtol=1e-12, atol=1e-13)
    # the training loss's gradient (backpropagation in C) is the derivative of the loss
    loss, grad = net.loss_and_grad(theta, Q, Y, weight_decay=1e-3)
    assert loss == pytest.approx(net.loss(Q, Y, weight_decay=1e-3), rel=1e-13)
    h = EPS ** (1 / 3) * (1 + np.abs(theta))
    idx = rng.choice(theta.size, size=min(theta.size, 12), replace=False)
    for j in idx:
        e = np.zeros(theta.size)
        e[j] = h[j]
        fd = (net.loss_and_grad(theta + e, Q, Y, weight_decay=1e-3, grad=False)[0]
              - net.loss_and_grad(theta - e, Q, Y, weight_decay=1e-3, grad=False)[0]) / (2 * h[j])
        scale = 1 + abs(loss) + np.abs(Y).max() ** 2 + np.abs(theta).max() ** 2
        assert abs(fd - grad[j]) <= 50 * (h[j] ** 2 * scale * 10 + EPS * scale / h[j])


# -- ICA (VHMC paper 4.4) and the elliptic PDE ----------------------------------------------

@_ci(15)
@given(d=st.integers(1, 3), n=st.integers(1, 50), seed=st.integers(0, 2**16),
       how=st.sampled_from(LAYOUTS))
def test_ica_against_numpy_and_finite_differences(d, n, seed, how):
    rng = np.random.default_rng(seed)
    Xl = layout(rng.logistic(size=(n, d)), how)
    X = as_float64(Xl)
    model = fs.models.ICA(Xl, prior_var=100.0)
    W = np.eye(d) + 0.3 * rng.normal(size=(d, d))
    U, g = model.value_and_grad(W.ravel())
    assert (U, g.tolist()) == (lambda r: (r[0], r[1].tolist()))(
        fs.models.ICA(X, prior_var=100.0).value_and_grad(W.ravel()))
    S = X @ W.T
    logp = -2 * np.logaddexp(S / 2, -S / 2)          # log 1 / (4 cosh^2(s / 2))
    Uref = -n * np.log(abs(np.linalg.det(W))) - logp.sum() + np.sum(W ** 2) / 200.0
    mag = n * abs(np.log(abs(np.linalg.det(W)))) + np.abs(logp).sum() + np.sum(W ** 2) / 200
    assert abs(U - Uref) <= 1e-11 * mag + 1e-12
    gref = -n * np.linalg.inv(W).T + np.tanh(S / 2).T @ X + W / 100.0
    np.testing.assert_allclose(g, gref.ravel(), rtol=1e-9, atol=1e-10 * (n + 1))
    h = EPS ** (1 / 3) * (1 + np.abs(W.ravel()))
    fd = central_difference(model.value, W.ravel(), h)
    cond = np.linalg.cond(W)
    bound3 = (np.abs(X) ** 3).sum() + 2 * n * cond ** 3 + 1
    assert np.all(np.abs(fd - g) <= 4 * (h ** 2 / 6 * bound3 + 4 * EPS * mag / h) + 1e-10)


def test_elliptic_pde_gradient_is_the_derivative_of_the_value():
    # one fixed case (each evaluation is a PDE solve): the adjoint gradient
    model = fs.models.EllipticPDE(n_mesh=12, n_modes=4, n_obs_side=4, seed=3)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = 0.5 * rng.normal(size=model.dim)
        U, g = model.value_and_grad(q)
        h = 1e-5 * (1 + np.abs(q))
        fd = central_difference(model.value, q, h)
        np.testing.assert_allclose(fd, g, rtol=1e-5, atol=1e-6 * (1 + np.abs(g).max()))


# -- online = batch ---------------------------------------------------------------------------

@_ci()
@given(s=st.integers(1, 25), n=st.integers(1, 50), ridge=st.sampled_from([0.0, 1e-3, 1.0]),
       how=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**16))
def test_greville_online_equals_batch(s, n, ridge, how, seed):
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(n, s))
    y = rng.normal(size=n)
    Hl = layout(H, how)
    H64 = as_float64(Hl)
    tr = GrevilleTrainer(s, ridge=ridge)
    for i in range(n):
        tr.update(H64[i], y[i])
    many = GrevilleTrainer(s, ridge=ridge)
    many.update_many(Hl, y)
    np.testing.assert_array_equal(many.weights, tr.weights)   # the same recursion
    if ridge == 0.0:
        ref = np.linalg.pinv(H64) @ y
    else:
        ref = np.linalg.solve(H64.T @ H64 + ridge * np.eye(s), H64.T @ y)
    cond = np.linalg.cond(H64) if ridge == 0 else 1 + np.linalg.norm(H64, 2) ** 2 / ridge
    np.testing.assert_allclose(tr.weights, ref, rtol=0,
                               atol=1e-11 * cond ** 2 * (1 + np.abs(ref).max()))
    assert tr.n_seen == n


@_ci()
@given(s=st.integers(1, 20), d=st.integers(1, 4), n=st.integers(1, 30),
       ridge=st.sampled_from([1e-3, 0.1, 10.0]), seed=st.integers(0, 2**16),
       how=st.sampled_from(LAYOUTS))
def test_smw_online_equals_batch(s, d, n, ridge, seed, how):
    rng = np.random.default_rng(seed)
    As = rng.normal(size=(n, d, s))
    gs = rng.normal(size=(n, d))
    Al = layout(As, how)
    A64 = as_float64(Al)
    tr = SMWTrainer(s, d, ridge)
    tr.update_many(Al, gs)
    one = SMWTrainer(s, d, ridge)
    for i in range(n):
        one.update(A64[i], gs[i])
    M = sum(A.T @ A for A in A64) + ridge * np.eye(s)
    ref = np.linalg.solve(M, sum(A.T @ g for A, g in zip(A64, gs)))
    batch = SMWTrainer(s, d, ridge).solve_batch(Al, gs)
    cond = np.linalg.cond(M)
    atol = 1e-12 * cond * (1 + np.abs(ref).max()) * n
    np.testing.assert_allclose(tr.weights, ref, rtol=0, atol=atol)
    np.testing.assert_allclose(one.weights, ref, rtol=0, atol=atol)
    np.testing.assert_allclose(batch, ref, rtol=0, atol=atol)


# -- random bad inputs: the documented error, before the potential is evaluated -----------

class _Counting:
    def __init__(self):
        self.calls = 0

    def __call__(self, q):
        self.calls += 1
        return 0.5 * float(q @ q), q.copy()


_F = _Counting()
_P = fs.Potential.from_callable(_F, 2)

# option -> (strategy of invalid values, expected exception type for each kind)
_NOT_INT = st.one_of(st.floats(allow_nan=True), st.text(max_size=3), st.booleans())
_BAD_COUNT = st.one_of(st.integers(max_value=-1), st.integers(min_value=2**31, max_value=2**64))
_BAD_POSITIVE = st.one_of(st.floats(max_value=0.0), st.just(float("nan")), st.just(float("inf")),
                          st.integers(max_value=0))
_NOT_NUMBER = st.one_of(st.text(max_size=3), st.booleans(), st.lists(st.integers(), max_size=2))


def _expect(value):
    """TypeError for a value of the wrong type, ValueError for a number out of range."""
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return ValueError if is_number else TypeError


@_ci(60)
@given(method=st.sampled_from(["hmc", "nuts", "rns-hmc", "arns-hmc", "vhmc", "nnghmc"]),
       option=st.sampled_from(["n_draws", "n_warmup", "chains"]),
       value=st.one_of(_NOT_INT, _BAD_COUNT, st.integers(-5, 0)))
def test_random_bad_run_sizes_are_refused(method, option, value):
    if option != "chains" and isinstance(value, int) and not isinstance(value, bool) \
            and 0 <= value < 2**31:
        value = -1 - value                    # 0 draws / warm-up is valid: make it negative
    kw = dict(n_draws=5, n_warmup=20, chains=1)
    kw[option] = value
    _F.calls = 0
    is_int = isinstance(value, int) and not isinstance(value, bool)
    with pytest.raises(ValueError if is_int else TypeError, match=option):
        fs.sample(_P, method, progress=False, **kw)
    assert _F.calls == 0


@_ci(60)
@given(method=st.sampled_from(["hmc", "nuts", "rns-hmc", "arns-hmc", "vhmc", "nnghmc"]),
       option=st.sampled_from(["step_size", "max_energy_error"]),
       value=st.one_of(_BAD_POSITIVE, _NOT_NUMBER))
def test_random_bad_positive_options_are_refused(method, option, value):
    _F.calls = 0
    with pytest.raises(_expect(value), match=option):
        fs.sample(_P, method, n_draws=5, n_warmup=20, progress=False, **{option: value})
    assert _F.calls == 0


@_ci(40)
@given(shape=st.sampled_from([(3,), (2, 2), (1, 2, 2), ()]),
       fill=st.sampled_from([0.0, np.nan, np.inf]), dtype=st.sampled_from(["f8", "U1", "c16"]))
def test_random_bad_init_is_refused(shape, fill, dtype):
    init = np.full(shape, fill).astype(dtype) if dtype != "U1" else np.full(shape, "a")
    _F.calls = 0
    exc = TypeError if dtype != "f8" else ValueError
    with pytest.raises(exc, match="init"):
        fs.sample(_P, "hmc", n_draws=5, n_warmup=5, chains=1, init=init, progress=False)
    assert _F.calls == 0
