"""The posteriordb models: gradients, densities, transforms, reference posteriors.

Data come from the shared data folder (../shared/data relative to the repository
root, or $FASTSURROGATE_DATA); the tests skip when it is absent.
"""
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from fastsurrogate.models import posteriordb

NAMES = list(posteriordb.MODELS)


def _have_data():
    d = posteriordb.find_data_dir()
    if d is None:
        return False
    sub = d / "posteriordb"
    sub = sub if sub.is_dir() else d
    return all((sub / f"{name}.draws.zip").is_file()
               and (sub / f"{cls.data_name}.data.zip").is_file()
               for name, cls in posteriordb.MODELS.items())


needs_data = pytest.mark.skipif(not _have_data(),
                                reason="shared posteriordb data folder absent")


@pytest.fixture(scope="module")
def cache():
    return {}


def _get(cache, name):
    """(model, reference draws, unconstrained draws flattened to (n, dim))."""
    if name not in cache:
        cls = posteriordb.MODELS[name]
        model = cls.from_posteriordb()
        ref = posteriordb.load_reference(name)
        qd = model.unconstrain(ref).reshape(-1, model.dim)
        cache[name] = (model, ref, qd)
    return cache[name]


def _points(qd, n, rng, scale=1.0):
    """Random points around the posterior: mean + scale * sd * N(0, 1)."""
    m, s = qd.mean(0), qd.std(0)
    return m + scale * s * rng.standard_normal((n, qd.shape[1]))


# ---------------------------------------------------------------------------
# independent implementations: constrained parameters from q (written out
# directly, not via the module) and the log density with scipy.stats plus
# the log-Jacobian of the transforms.

def _indep_constrain(name, model, q):
    q = np.asarray(q, dtype=float)
    if name == "sblrc-blr":
        D = model.dim - 1
        out = {f"beta[{i + 1}]": q[..., i] for i in range(D)}
        out["sigma"] = np.exp(q[..., D])
    elif name == "arK-arK":
        K = model.dim - 2
        out = {"alpha": q[..., 0]}
        out.update({f"beta[{k + 1}]": q[..., k + 1] for k in range(K)})
        out["sigma"] = np.exp(q[..., K + 1])
    elif name == "eight_schools-eight_schools_noncentered":
        J = model.dim - 2
        mu, tau = q[..., J], np.exp(q[..., J + 1])
        out = {f"theta[{j + 1}]": mu + tau * q[..., j] for j in range(J)}
        out["mu"] = mu
        out["tau"] = tau
    elif name == "garch-garch11":
        a1 = 1.0 / (1.0 + np.exp(-q[..., 2]))
        out = {"mu": q[..., 0], "alpha0": np.exp(q[..., 1]), "alpha1": a1,
               "beta1": (1.0 - a1) / (1.0 + np.exp(-q[..., 3]))}
    elif name == "gp_pois_regr-gp_regr":
        out = {"rho": np.exp(q[..., 0]), "alpha": np.exp(q[..., 1]),
               "sigma": np.exp(q[..., 2])}
    else:
        raise KeyError(name)
    return out


def _indep_logp(name, data, q):
    """log p(constrained(q)) + log|Jacobian|, up to a constant, for one q."""
    q = np.asarray(q, dtype=float)
    norm = stats.norm.logpdf
    if name == "sblrc-blr":
        X, y = np.asarray(data["X"], float), np.asarray(data["y"], float)
        beta, sigma = q[:-1], math.exp(q[-1])
        lp = norm(beta, 0, 10).sum() + stats.halfnorm.logpdf(sigma, scale=10)
        lp += norm(y, X @ beta, sigma).sum()
        return lp + q[-1]
    if name == "arK-arK":
        y, K = np.asarray(data["y"], float), int(data["K"])
        alpha, beta, sigma = q[0], q[1:K + 1], math.exp(q[K + 1])
        lp = norm(alpha, 0, 10) + norm(beta, 0, 10).sum()
        lp += stats.halfcauchy.logpdf(sigma, scale=2.5)
        for t in range(K, len(y)):
            m = alpha + sum(beta[k] * y[t - k - 1] for k in range(K))
            lp += norm(y[t], m, sigma)
        return lp + q[K + 1]
    if name == "eight_schools-eight_schools_noncentered":
        y, s = np.asarray(data["y"], float), np.asarray(data["sigma"], float)
        J = len(y)
        tt, mu, tau = q[:J], q[J], math.exp(q[J + 1])
        lp = norm(tt).sum() + norm(mu, 0, 5) + stats.halfcauchy.logpdf(tau, scale=5)
        lp += norm(y, mu + tau * tt, s).sum()
        return lp + q[J + 1]
    if name == "garch-garch11":
        y, s1 = np.asarray(data["y"], float), float(data["sigma1"])
        mu, a0 = q[0], math.exp(q[1])
        a1 = 1.0 / (1.0 + math.exp(-q[2]))
        frac = 1.0 / (1.0 + math.exp(-q[3]))
        b1 = (1.0 - a1) * frac
        lp, sig = 0.0, s1
        for t in range(len(y)):
            if t > 0:
                sig = math.sqrt(a0 + a1 * (y[t - 1] - mu) ** 2 + b1 * sig ** 2)
            lp += norm(y[t], mu, sig)
        # Jacobians: alpha0 = e^q1; alpha1 = logistic(q2);
        # beta1 = (1 - alpha1) logistic(q3) (triangular, so the product)
        jac = q[1] + math.log(a1 * (1 - a1)) + math.log((1 - a1) * frac * (1 - frac))
        return lp + jac
    if name == "gp_pois_regr-gp_regr":
        x, y = np.asarray(data["x"], float), np.asarray(data["y"], float)
        rho, alpha, sigma = np.exp(q)
        K = alpha ** 2 * np.exp(-np.subtract.outer(x, x) ** 2 / (2 * rho ** 2))
        K += sigma * np.eye(len(x))
        lp = stats.gamma.logpdf(rho, 25, scale=1 / 4)
        lp += stats.halfnorm.logpdf(alpha, scale=2) + stats.halfnorm.logpdf(sigma, scale=1)
        lp += stats.multivariate_normal.logpdf(y, np.zeros(len(x)), K)
        return lp + q.sum()
    raise KeyError(name)


# ---------------------------------------------------------------------------
# data access

def test_find_data_dir_env(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTSURROGATE_DATA", str(tmp_path))
    assert posteriordb.find_data_dir() == tmp_path
    monkeypatch.setenv("FASTSURROGATE_DATA", str(tmp_path / "missing"))
    assert posteriordb.find_data_dir() is None


def test_find_data_dir_upward_from_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("FASTSURROGATE_DATA", raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "main" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "main" / "sub")
    assert posteriordb.find_data_dir() == tmp_path / "shared" / "data"


def test_missing_data_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        posteriordb.load_data("sblrc", data_dir=tmp_path)


@needs_data
def test_load_data_and_reference():
    d = posteriordb.load_data("sblrc")
    assert d["N"] == 100 and d["D"] == 5
    assert d["X"].shape == (100, 5) and d["y"].shape == (100,)
    d = posteriordb.load_data("garch")
    assert d["T"] == 200 and isinstance(d["sigma1"], float)
    ref = posteriordb.load_reference("garch-garch11")
    assert list(ref) == ["mu", "alpha0", "alpha1", "beta1"]
    assert all(v.shape == (10, 1000) and v.dtype == np.float64 for v in ref.values())


# ---------------------------------------------------------------------------
# per model

@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_interface(name, cache):
    model, ref, _ = _get(cache, name)
    assert model.dim == len(model.param_names)
    assert model.reference_names == list(ref)
    expected_dims = {"sblrc-blr": 6, "eight_schools-eight_schools_noncentered": 10,
                     "garch-garch11": 4, "arK-arK": 7, "gp_pois_regr-gp_regr": 3}
    assert model.dim == expected_dims[name]
    q = np.zeros(model.dim)
    U, g = model.value_and_grad(q)
    assert isinstance(U, float) and np.isfinite(U)
    assert g.shape == (model.dim,) and np.all(np.isfinite(g))
    with pytest.raises(ValueError):
        model.value_and_grad(np.zeros(model.dim + 1))


@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_finite_differences(name, cache):
    model, _, qd = _get(cache, name)
    rng = np.random.default_rng(1)
    for q in _points(qd, 6, rng, scale=1.5):
        U, g = model.value_and_grad(q)
        assert model.value(q) == pytest.approx(U, rel=1e-12, abs=1e-10)
        fd = np.empty(model.dim)
        for i in range(model.dim):
            h = 1e-5 * max(1.0, abs(q[i]))
            e = np.zeros(model.dim)
            e[i] = h
            fd[i] = (model.value(q + e) - model.value(q - e)) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(g).max()))


@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_log_density_matches_scipy(name, cache):
    model, _, qd = _get(cache, name)
    data = posteriordb.load_data(model.data_name)
    rng = np.random.default_rng(2)
    qs = _points(qd, 5, rng, scale=2.0)
    U = np.array([model.value(q) for q in qs])
    lp = np.array([_indep_logp(name, data, q) for q in qs])
    # U = -log p + const: compare differences between points
    np.testing.assert_allclose(U[1:] - U[0], -(lp[1:] - lp[0]),
                               rtol=1e-9, atol=1e-8 * max(1.0, np.abs(lp).max()))


@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_constrain_unconstrain_round_trip(name, cache):
    model, ref, qd = _get(cache, name)
    rng = np.random.default_rng(3)
    q = _points(qd, 12, rng, scale=2.0).reshape(3, 4, model.dim)
    c = model.constrain(q)
    assert set(model.reference_names) <= set(c)
    indep = _indep_constrain(name, model, q)
    for k in model.reference_names:
        assert c[k].shape == (3, 4)
        np.testing.assert_allclose(c[k], indep[k], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.unconstrain(c), q, rtol=1e-9, atol=1e-9)
    # reference draws -> unconstrained -> constrained
    assert qd.shape == (10 * 1000, model.dim) and np.all(np.isfinite(qd))
    back = model.constrain(qd)
    for k in model.reference_names:
        np.testing.assert_allclose(back[k], ref[k].ravel(), rtol=1e-9, atol=1e-9)
    # one point, 1-D
    c1 = model.constrain(q[0, 0])
    np.testing.assert_allclose(model.unconstrain(c1), q[0, 0], rtol=1e-9, atol=1e-9)


@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_reference_mean_beats_far_points(name, cache):
    model, ref, qd = _get(cache, name)
    mean = {k: v.mean() for k, v in ref.items()}
    q0 = model.unconstrain(mean)
    assert q0.shape == (model.dim,) and np.all(np.isfinite(q0))
    U0 = model.value(q0)
    sd = qd.std(0)
    rng = np.random.default_rng(4)
    for _ in range(10):
        far = q0 + 6.0 * sd * rng.choice([-1.0, 1.0], size=model.dim)
        assert model.value(far) > U0
    # and lower than at most reference draws themselves
    Ud = np.array([model.value(q) for q in qd[::50]])
    assert U0 < np.median(Ud)


@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_score_has_mean_zero_under_reference(name, cache):
    """E_posterior[grad U] = 0: ties the density (with its Jacobians) to the
    posterior the reference draws come from."""
    model, _, qd = _get(cache, name)
    G = np.array([model.value_and_grad(q)[1] for q in qd[::5]])
    z = G.mean(0) / (G.std(0) / np.sqrt(len(G)))
    assert np.all(np.abs(z) < 5), z


@needs_data
def test_garch_beta1_constraint_and_extremes(cache):
    model, _, _ = _get(cache, "garch-garch11")
    q = np.array([0.0, -3.0, 25.0, 25.0])    # alpha1 -> 1, beta1 -> 1 - alpha1
    c = model.constrain(q)
    assert 0 < c["beta1"] < 1 - c["alpha1"]
    assert c["beta1"] == pytest.approx(expit(-25.0) * expit(25.0), rel=1e-12)
    U, g = model.value_and_grad(q)
    assert np.isfinite(U) and np.all(np.isfinite(g))


@needs_data
def test_gp_not_positive_definite_gives_inf():
    model = posteriordb.GPRegr.from_posteriordb()
    q = np.array([8.0, 5.0, -60.0])          # rank-one kernel, sigma ~ 1e-26
    U, g = model.value_and_grad(q)
    assert U == math.inf and model.value(q) == math.inf


@needs_data
def test_as_potential():
    try:
        from fastsurrogate import Potential
    except ImportError:
        pytest.skip("compiled fastsurrogate not available")
    model = posteriordb.SBLRC_BLR.from_posteriordb()
    pot = posteriordb.as_potential(model)
    assert isinstance(pot, Potential)
    assert pot.dim == model.dim and list(pot.param_names) == model.param_names
    q = np.linspace(-0.5, 0.5, model.dim)
    U, g = pot.value_and_grad(q)
    U2, g2 = model.value_and_grad(q)
    assert U == pytest.approx(U2) and np.allclose(g, g2)
    assert pot.value(q) == pytest.approx(model.value(q))
    c = pot.constrain(q)
    assert c["sigma"] == pytest.approx(math.exp(q[-1]))


@needs_data
def test_the_samplers_take_a_posteriordb_model_as_it_is():
    """fs.models.posteriordb without an import of its own, and a model
    passed to fs.sample as it is (wrapped with as_potential): the same
    draws as the wrapped model's, and its constrained quantities."""
    try:
        import fastsurrogate as fs
    except ImportError:
        pytest.skip("compiled fastsurrogate not available")
    assert fs.models.posteriordb is posteriordb
    model = posteriordb.EightSchoolsNoncentered.from_posteriordb()
    kw = dict(n_draws=30, n_warmup=30, chains=1, seed=2, progress=False)
    res = fs.sample(model, "nuts", **kw)
    ref = fs.sample(posteriordb.as_potential(model), "nuts", **kw)
    assert np.array_equal(res.draws, ref.draws)
    assert set(res.constrained()) >= {"mu", "tau", "theta[1]"}
    with pytest.raises(TypeError, match="must be a fastsurrogate Potential"):
        fs.sample(object(), "nuts", **kw)
