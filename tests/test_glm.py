"""The fused GLM kernels (csrc/fs_glm.c) against NumPy/SciPy references."""
import pickle
import threading

import numpy as np
import pytest
from scipy import special, stats

import fastsurrogate as fs

from fastsurrogate.models._glm import (LinearRegression, LogisticRegression, PoissonRegression,
                                ProbitRegression, _inv_mills, _log_ndtr, _read_floor)

BLOCK_ROWS = 512          # FS_GLM_BLOCK_ROWS
FISHER_MIN_ROWS = 2048    # FS_GLM_FISHER_MIN_ROWS
FAMILIES = ["logistic", "probit", "poisson", "gaussian"]
CLASSES = {"logistic": LogisticRegression, "probit": ProbitRegression,
           "poisson": PoissonRegression, "gaussian": LinearRegression}


# ---- data and NumPy references -------------------------------------------

def make_data(family, n, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * scale / np.sqrt(d)
    beta_true = rng.standard_normal(d)
    t = X @ beta_true
    if family == "logistic":
        y = (rng.random(n) < special.expit(t)).astype(float)
    elif family == "probit":
        y = (rng.random(n) < special.ndtr(t)).astype(float)
    elif family == "poisson":
        y = rng.poisson(np.exp(np.clip(t, -20, 5))).astype(float)
    else:
        y = t + 0.7 * rng.standard_normal(n)
    return X, y, beta_true


def make_model(family, X, y, sigma=0.7, **kw):
    if family == "gaussian":
        return LinearRegression(X, y, sigma=sigma, **kw)
    return CLASSES[family](X, y, **kw)


def probit_inv_mills(z):
    """phi(z) / Phi(z) for any z, from the scaled erfc (no underflow)."""
    z = np.asarray(z, dtype=float)
    out = np.empty_like(z)
    neg = z < 0
    out[neg] = np.sqrt(2.0 / np.pi) / special.erfcx(-z[neg] / np.sqrt(2.0))
    out[~neg] = stats.norm.pdf(z[~neg]) / special.ndtr(z[~neg])
    return out


def logistic_residual(t, y):
    """sigmoid(t) - y without the cancellation of the literal formula (y in {0, 1})."""
    return (1.0 - y) * special.expit(t) - y * special.expit(-t)


def reference(family, X, y, beta, prior_sd=10.0, prior_mean=0.0, sigma=0.7):
    """(U, grad U, Fisher information) by NumPy/SciPy."""
    d = X.shape[1]
    t = X @ beta
    if family == "logistic":
        loss = np.logaddexp(0.0, t) - y * t
        r = logistic_residual(t, y)
        w = special.expit(t) * special.expit(-t)
    elif family == "probit":
        s = 2.0 * y - 1.0
        loss = -special.log_ndtr(s * t)
        r = -s * probit_inv_mills(s * t)
        w = np.exp(2.0 * stats.norm.logpdf(t) - special.log_ndtr(t) - special.log_ndtr(-t))
    elif family == "poisson":
        loss = np.exp(t) - y * t
        r = np.exp(t) - y
        w = np.exp(t)
    else:
        loss = (t - y) ** 2 / (2.0 * sigma ** 2)
        r = (t - y) / sigma ** 2
        w = np.full_like(t, 1.0 / sigma ** 2)
    U = loss.sum()
    g = X.T @ r
    F = X.T @ (w[:, None] * X)
    if prior_sd is not None:
        prec = np.broadcast_to(1.0 / np.asarray(prior_sd, float) ** 2, (d,))
        u = beta - np.broadcast_to(np.asarray(prior_mean, float), (d,))
        U += 0.5 * np.sum(prec * u * u)
        g = g + prec * u
        F = F + np.diag(prec)
    # magnitude of the summed terms: the scale for absolute tolerances
    g_scale = np.abs(X).T @ np.abs(r) + 1.0
    return U, g, F, g_scale


def fd_grad(model, beta, h=1e-5):
    g = np.empty_like(beta)
    for j in range(beta.size):
        e = np.zeros_like(beta)
        e[j] = h
        g[j] = (model.value(beta + e) - model.value(beta - e)) / (2 * h)
    return g


def fd_hessian(model, beta, h=1e-5):
    d = beta.size
    H = np.empty((d, d))
    for j in range(d):
        e = np.zeros(d)
        e[j] = h
        H[j] = (model.grad(beta + e) - model.grad(beta - e)) / (2 * h)
    return 0.5 * (H + H.T)


# (n, d): n below, at and above the block size and never a multiple of it;
# d < 4, d % 4 != 0, d % 8 in {0, 4} (the dot product's tail paths)
SHAPES = [(1, 1), (5, 2), (37, 3), (511, 4), (513, 7), (1573, 8), (1030, 13), (700, 50)]


# ---- value and gradient ----------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("n,d", SHAPES)
def test_value_and_grad_match_numpy(family, n, d):
    X, y, beta_true = make_data(family, n, d, seed=n + d)
    rng = np.random.default_rng(1)
    prior_sd = rng.uniform(0.5, 5.0, d)
    prior_mean = rng.standard_normal(d)
    model = make_model(family, X, y, prior_sd=prior_sd, prior_mean=prior_mean)
    for beta in (np.zeros(d), beta_true, beta_true + 0.3 * rng.standard_normal(d)):
        U, g = model.value_and_grad(beta)
        U_ref, g_ref, _, g_scale = reference(family, X, y, beta, prior_sd, prior_mean)
        assert U == pytest.approx(U_ref, rel=1e-10, abs=1e-12)
        np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-12 * g_scale.max())


@pytest.mark.parametrize("family", FAMILIES)
def test_default_prior_and_flat_prior(family):
    X, y, beta = make_data(family, 300, 5, seed=3)
    U0, g0, _, _ = reference(family, X, y, beta, prior_sd=None)
    kw = {"sigma": 0.7} if family == "gaussian" else {}
    flat = CLASSES[family](X, y, prior_sd=None, **kw)
    assert flat.value(beta) == pytest.approx(U0, rel=1e-10)
    np.testing.assert_allclose(flat.grad(beta), g0, rtol=1e-10, atol=1e-10)
    default = CLASSES[family](X, y, **kw)     # prior_sd=10, prior_mean=0
    U10, g10, _, _ = reference(family, X, y, beta, prior_sd=10.0)
    assert default.value(beta) == pytest.approx(U10, rel=1e-10)
    np.testing.assert_allclose(default.grad(beta), g10, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(default.prior_sd, np.full(5, 10.0))
    np.testing.assert_array_equal(default.prior_mean, np.zeros(5))
    assert flat.prior_sd is None


@pytest.mark.parametrize("family", FAMILIES)
def test_gradient_matches_finite_differences(family):
    X, y, beta_true = make_data(family, 900, 6, seed=11)
    model = make_model(family, X, y, prior_sd=3.0)
    beta = beta_true + 0.2
    g = model.grad(beta)
    np.testing.assert_allclose(g, fd_grad(model, beta), rtol=1e-6, atol=1e-6 * np.abs(g).max())


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("n", [3, 1573])
def test_value_only_and_grad_only_equal_combined_call(family, n):
    X, y, beta = make_data(family, n, 13, seed=5)
    model = make_model(family, X, y, prior_sd=2.0, n_threads=2)
    U, g = model.value_and_grad(beta)
    assert model.value(beta) == U                   # bit for bit
    np.testing.assert_array_equal(model.grad(beta), g)
    lp, glp = model.log_density_gradient(beta)
    assert lp == -U and model.log_density(beta) == -U
    np.testing.assert_array_equal(glp, -g)


# ---- Fisher information ---------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("n,d", [(7, 1), (1573, 7), (2 * FISHER_MIN_ROWS + 3, 12)])
def test_fisher_matches_numpy(family, n, d):
    X, y, beta = make_data(family, n, d, seed=d)
    prior_sd = np.linspace(0.5, 4.0, d)
    model = make_model(family, X, y, prior_sd=prior_sd)
    F = model.fisher_information(beta)
    _, _, F_ref, _ = reference(family, X, y, beta, prior_sd)
    assert F.shape == (d, d)
    np.testing.assert_array_equal(F, F.T)
    np.testing.assert_allclose(F, F_ref, rtol=1e-10, atol=1e-12 * np.abs(F_ref).max())


@pytest.mark.parametrize("family", ["logistic", "poisson", "gaussian"])
def test_fisher_is_hessian_for_canonical_links(family):
    X, y, beta = make_data(family, 800, 5, seed=21)
    model = make_model(family, X, y, prior_sd=2.0)
    F = model.fisher_information(beta)
    H = fd_hessian(model, beta)
    np.testing.assert_allclose(F, H, rtol=1e-6, atol=1e-6 * np.abs(F).max())


def test_probit_fisher_is_expected_information_not_hessian():
    X, y, beta = make_data("probit", 800, 4, seed=8)
    model = ProbitRegression(X, y, prior_sd=None)
    F = model.fisher_information(beta)
    t = X @ beta
    w = stats.norm.pdf(t) ** 2 / (special.ndtr(t) * special.ndtr(-t))
    np.testing.assert_allclose(F, X.T @ (w[:, None] * X), rtol=1e-10)
    # the observed information differs (non-canonical link)
    assert not np.allclose(F, fd_hessian(model, beta), rtol=1e-3)


# ---- determinism across thread counts ---------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_bit_identical_for_any_thread_count(family):
    n = 4 * FISHER_MIN_ROWS + 3 * BLOCK_ROWS + 37     # several blocks and chunks, ragged
    X, y, beta = make_data(family, n, 11, seed=2)
    out = []
    for nt in (1, 2, 3):
        model = make_model(family, X, y, prior_sd=1.5, n_threads=nt)
        U, g = model.value_and_grad(beta)
        out.append((U, g, model.value(beta), model.grad(beta), model.fisher_information(beta)))
    for U, g, v, gg, F in out[1:]:
        assert U == out[0][0] and v == out[0][2]
        np.testing.assert_array_equal(g, out[0][1])
        np.testing.assert_array_equal(gg, out[0][3])
        np.testing.assert_array_equal(F, out[0][4])


def test_n_threads_setter_keeps_results_identical():
    X, y, beta = make_data("logistic", 3000, 9, seed=4)
    model = LogisticRegression(X, y)
    U1, g1 = model.value_and_grad(beta)
    model.n_threads = 3
    assert model.n_threads == 3
    U3, g3 = model.value_and_grad(beta)
    assert U1 == U3
    np.testing.assert_array_equal(g1, g3)


def test_many_rows_grow_the_blocks():
    # beyond FS_GLM_BLOCK_ROWS * FS_GLM_MAX_BLOCKS rows the blocks get longer
    n = 512 * 1024 + 4099
    X, y, beta = make_data("logistic", n, 3, seed=9)
    U_ref, g_ref, _, g_scale = reference("logistic", X, y, beta)
    res = []
    for nt in (1, 2):
        model = LogisticRegression(X, y, n_threads=nt)
        res.append(model.value_and_grad(beta))
    assert res[0][0] == res[1][0]
    np.testing.assert_array_equal(res[0][1], res[1][1])
    assert res[0][0] == pytest.approx(U_ref, rel=1e-10)
    np.testing.assert_allclose(res[0][1], g_ref, rtol=1e-10, atol=1e-12 * g_scale.max())


# ---- extreme linear predictors ---------------------------------------------

EXTREME_T = np.array([-1000.0, -750.0, -709.0, -40.0, -30.0, -29.9, -8.0, -1e-3,
                      0.0, 1e-3, 8.0, 29.9, 30.0, 40.0, 709.0, 750.0, 1000.0])


def extreme_data():
    # rows x_i = (t_i, 1) with beta = (1, 0): t = EXTREME_T, each with both labels
    t = np.repeat(EXTREME_T, 2)
    X = np.column_stack([t, np.ones_like(t)])
    y = np.tile([0.0, 1.0], EXTREME_T.size)
    return X, y, np.array([1.0, 0.0])


@pytest.mark.parametrize("family", ["logistic", "probit"])
def test_extreme_inputs_finite_and_accurate(family):
    X, y, beta = extreme_data()
    model = CLASSES[family](X, y, prior_sd=None)
    U, g = model.value_and_grad(beta)
    assert np.isfinite(U) and np.all(np.isfinite(g))
    t = X @ beta
    if family == "logistic":
        loss = np.logaddexp(0.0, t) - y * t
        r = logistic_residual(t, y)
    else:
        s = 2 * y - 1
        loss = -special.log_ndtr(s * t)
        r = -s * probit_inv_mills(s * t)
    assert U == pytest.approx(loss.sum(), rel=1e-12)
    g_ref, scale = X.T @ r, np.abs(X).T @ np.abs(r)
    assert np.all(np.abs(g - g_ref) <= 1e-12 * np.abs(g_ref) + 1e-15 * scale), (g, g_ref)
    # row by row: one observation at a time
    for i in range(X.shape[0]):
        m1 = CLASSES[family](X[i:i + 1], y[i:i + 1], prior_sd=None)
        Ui, gi = m1.value_and_grad(beta)
        assert Ui == pytest.approx(loss[i], rel=1e-12, abs=1e-300)
        np.testing.assert_allclose(gi, X[i] * r[i], rtol=1e-12, atol=1e-300)
    F = model.fisher_information(beta)
    assert np.all(np.isfinite(F))


def test_log_ndtr_and_inverse_mills_ratio_against_scipy():
    z = np.concatenate([-np.logspace(-3, 8, 400), [0.0], np.logspace(-3, 1.6, 200),
                        [-30.0, -29.999999, -30.000001, -1e150]])
    x = -z[z < 0]
    # log Phi(z) = log(erfcx(x / sqrt2) / 2) - x^2 / 2 for z = -x < 0
    ref_neg = np.log(0.5 * special.erfcx(x / np.sqrt(2))) - 0.5 * x * x
    ref = np.empty_like(z)
    ref[z < 0] = ref_neg
    ref[z >= 0] = special.log_ndtr(z[z >= 0])
    got = _log_ndtr(z)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(got, special.log_ndtr(z), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(_inv_mills(z), probit_inv_mills(z), rtol=1e-12, atol=1e-300)
    assert np.all(np.isfinite(_inv_mills(np.array([-1e150, 1e300]))))


def test_poisson_overflow_is_inf_not_error():
    X = np.array([[1.0], [2.0]])
    model = PoissonRegression(X, np.array([1.0, 0.0]), prior_sd=None)
    U, g = model.value_and_grad(np.array([800.0]))
    assert U == np.inf and g[0] == np.inf
    assert np.isfinite(model.value(np.array([350.0])))


# ---- inputs ----------------------------------------------------------------

def test_accepts_any_real_array_and_does_not_copy_float64_c_arrays():
    X, y, beta = make_data("logistic", 200, 4, seed=1)
    model = LogisticRegression(X, y)
    assert np.shares_memory(model.X, X) and np.shares_memory(model.y, y)
    assert not model.X.flags.writeable
    Xf = np.asfortranarray(X)
    assert LogisticRegression(Xf, y.astype(np.int64)).value(beta) == model.value(beta)
    assert LogisticRegression(X.tolist(), y.astype(bool)).value(beta) == model.value(beta)
    Xi = np.arange(12, dtype=np.int32).reshape(6, 2)
    yi = np.array([0, 1, 0, 1, 1, 0])
    np.testing.assert_array_equal(LogisticRegression(Xi, yi).X, Xi.astype(float))
    counts = PoissonRegression(Xi, np.array([0, 3, 1, 0, 7, 2], dtype=np.uint8))
    assert counts.n_obs == 6 and counts.dim == 2


def test_properties_and_repr():
    X, y, _ = make_data("gaussian", 50, 3)
    model = LinearRegression(X, y, sigma=2.5, prior_sd=[1.0, 2.0, 3.0], prior_mean=1.0,
                             n_threads=2)
    assert model.n_obs == 50 and model.dim == 3 and model.n_threads == 2
    assert model.sigma == 2.5 and model.family == "gaussian"
    assert model.thread_safe
    assert model.param_names == ["beta[0]", "beta[1]", "beta[2]"]
    np.testing.assert_array_equal(model.prior_sd, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(model.prior_mean, [1.0, 1.0, 1.0])
    assert "n_obs=50" in repr(model)


@pytest.mark.parametrize("family", FAMILIES)
def test_dataframe_column_names_become_parameter_names(family):
    pd = pytest.importorskip("pandas")
    X, y, _ = make_data(family, 60, 3, seed=4)
    frame = pd.DataFrame(X, columns=["intercept", "age", 2])
    model = make_model(family, frame, pd.Series(y))
    assert model.param_names == ["intercept", "age", "2"]
    assert pickle.loads(pickle.dumps(model)).param_names == ["intercept", "age", "2"]
    np.testing.assert_array_equal(model.X, X)
    # the names reach the result (summary, dict of draws)
    res = fs.HMC(model, n_steps=3).sample(20, 20, chains=1, seed=1, progress=False,
                                          warn=False)
    assert list(res.summary().names) == ["intercept", "age", "2"]
    # duplicate names, or an array: beta[j]
    dup = make_model(family, pd.DataFrame(X, columns=["a", "a", "b"]), y)
    assert dup.param_names == ["beta[0]", "beta[1]", "beta[2]"]
    assert make_model(family, X, y).param_names[0] == "beta[0]"


@pytest.mark.parametrize("family", FAMILIES)
def test_pickle_round_trip(family):
    X, y, beta = make_data(family, 100, 3, seed=6)
    model = make_model(family, X, y, prior_sd=[1.0, 2.0, 3.0], prior_mean=0.5, n_threads=2)
    clone = pickle.loads(pickle.dumps(model))
    assert type(clone) is type(model) and clone.n_threads == 2
    assert clone.value(beta) == model.value(beta)
    np.testing.assert_array_equal(clone.fisher_information(beta), model.fisher_information(beta))


def test_read_floor():
    X = np.random.default_rng(0).standard_normal((1000, 77))
    for nt in (1, 2, 3):
        assert _read_floor(X, nt) == pytest.approx(X.sum(), rel=1e-12, abs=1e-9)
    assert _read_floor(X, 1) == _read_floor(X, 2) == _read_floor(X, 3)
    assert _read_floor(np.ones(10), 1) == 10.0
    for n in (15, 16, 17, 37, 65536 + 19):     # the 16-wide steps and their tails
        v = np.arange(1.0, n + 1.0)
        assert _read_floor(v, 2) == n * (n + 1) / 2
    assert _read_floor(X, 2, repeat=5) == _read_floor(X, 2)
    with pytest.raises(ValueError, match="n_threads"):
        _read_floor(X, 0)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="repeat"):
            _read_floor(X, 1, repeat=bad)


GOOD_X = np.array([[1.0, 0.5], [1.0, -0.5], [1.0, 2.0]])
GOOD_Y = np.array([0.0, 1.0, 1.0])


@pytest.mark.parametrize("cls", [LogisticRegression, ProbitRegression, PoissonRegression,
                                 LinearRegression])
@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(X=np.ones(3)), ValueError, "X must be 2-D"),
    (dict(X=np.ones((3, 2, 1))), ValueError, "X must be 2-D"),
    (dict(X=np.ones((0, 2)), y=np.ones(0)), ValueError, "at least one row"),
    (dict(X=np.ones((3, 0))), ValueError, "at least one row and one column"),
    (dict(X=GOOD_X + 1j), TypeError, "X must be real"),
    (dict(X=[["a", "b"]] * 3), TypeError, "X must be an array of real numbers"),
    (dict(X=np.where(np.eye(3, 2) > 0, np.nan, 1.0)), ValueError, r"X must be finite; X\[0, 0\]"),
    (dict(X=np.where(np.eye(3, 2) > 0, np.inf, 1.0)), ValueError, "X must be finite"),
    (dict(y=np.ones(4)), ValueError, "y has 4 entries but X has 3 rows"),
    (dict(y=np.ones((3, 1))), ValueError, "y must be 1-D"),
    (dict(y=np.array([0.0, np.nan, 1.0])), ValueError, r"y must be finite; y\[1\]"),
    (dict(y=["a", "b", "c"]), TypeError, "y must be an array of real numbers"),
    (dict(prior_sd=0.0), ValueError, "prior_sd must be positive"),
    (dict(prior_sd=-1.0), ValueError, "prior_sd must be positive"),
    (dict(prior_sd=np.inf), ValueError, "prior_sd must be positive and finite"),
    (dict(prior_sd=np.nan), ValueError, "prior_sd must be positive"),
    (dict(prior_sd=1e-200), ValueError, "overflows"),
    (dict(prior_sd=[1.0, 2.0, 3.0]), ValueError, r"prior_sd must be a scalar or have shape \(2,\)"),
    (dict(prior_sd=[1.0, -2.0]), ValueError, r"prior_sd\[1\]"),
    (dict(prior_sd="wide"), TypeError, "prior_sd must be an array of real numbers"),
    (dict(prior_mean=[0.0]), ValueError, r"prior_mean must be a scalar or have shape \(2,\)"),
    (dict(prior_mean=np.nan), ValueError, "prior_mean must be finite"),
    (dict(n_threads=0), ValueError, "n_threads must be >= 1"),
    (dict(n_threads=-2), ValueError, "n_threads must be >= 1"),
    (dict(n_threads=100000), ValueError, "n_threads must be <= 1024"),
    (dict(n_threads=1.5), TypeError, "n_threads must be a positive int"),
    (dict(n_threads=True), TypeError, "n_threads must be a positive int"),
    (dict(n_threads="2"), TypeError, "n_threads must be a positive int"),
])
def test_invalid_inputs(cls, kwargs, exc, match):
    args = dict(X=GOOD_X, y=GOOD_Y)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        cls(**args)


@pytest.mark.parametrize("cls", [LogisticRegression, ProbitRegression])
@pytest.mark.parametrize("bad", [[0.0, 2.0, 1.0], [0.0, -1.0, 1.0], [0.0, 0.5, 1.0]])
def test_binary_labels_required(cls, bad):
    with pytest.raises(ValueError, match=r"only the labels 0 and 1; y\[1\]"):
        cls(GOOD_X, np.array(bad))


@pytest.mark.parametrize("bad", [[0.0, -1.0, 1.0], [0.0, 1.5, 1.0]])
def test_poisson_counts_required(bad):
    with pytest.raises(ValueError, match=r"non-negative integer counts; y\[1\]"):
        PoissonRegression(GOOD_X, np.array(bad))


@pytest.mark.parametrize("sigma,exc", [(0.0, ValueError), (-1.0, ValueError),
                                       (np.inf, ValueError), (np.nan, ValueError),
                                       (1e-200, ValueError), ("1", TypeError),
                                       (None, TypeError), (True, TypeError)])
def test_sigma_validated(sigma, exc):
    with pytest.raises(exc, match="sigma must be"):
        LinearRegression(GOOD_X, GOOD_Y, sigma=sigma)


def test_beta_shape_and_setter_validated():
    model = LogisticRegression(GOOD_X, GOOD_Y)
    for call in (model.value, model.grad, model.value_and_grad, model.fisher_information):
        with pytest.raises(ValueError, match=r"shape \(2,\)"):
            call(np.zeros(3))
    with pytest.raises(ValueError, match="n_threads must be >= 1"):
        model.n_threads = 0
    with pytest.raises(TypeError, match="n_threads must be a positive int"):
        model.n_threads = 2.0
    assert model.n_threads == 1


def test_uninitialised_model_raises():
    model = LogisticRegression.__new__(LogisticRegression)
    with pytest.raises(TypeError, match="not initialised"):
        model.value(np.zeros(2))
    with pytest.raises(TypeError, match="not initialised"):
        model.fisher_information(np.zeros(2))
    with pytest.raises(TypeError, match="not initialised"):
        model.n_obs
    assert "not initialised" in repr(model)


def test_init_twice_raises():
    model = LogisticRegression(GOOD_X, GOOD_Y)
    with pytest.raises(TypeError, match="already initialised"):
        model.__init__(GOOD_X, GOOD_Y)


# ---- thread safety ---------------------------------------------------------

@pytest.mark.parametrize("n_python_threads", [4, 12])   # 12 > FS_POOL_SLOTS: pool overflow path
def test_concurrent_grad_calls_match_serial(n_python_threads):
    X, y, beta0 = make_data("logistic", 5000, 20, seed=12)
    model = LogisticRegression(X, y, n_threads=2)
    rng = np.random.default_rng(0)
    betas = [beta0 + 0.1 * rng.standard_normal(20) for _ in range(n_python_threads)]
    serial = [model.grad(b) for b in betas]
    results = [None] * n_python_threads
    errors = []
    barrier = threading.Barrier(n_python_threads)

    def work(k):
        try:
            barrier.wait()
            out = [model.grad(betas[k]) for _ in range(25)]
            results[k] = out
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_python_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for k in range(n_python_threads):
        for g in results[k]:
            np.testing.assert_array_equal(g, serial[k])
