"""fs.from_pymc: a PyMC model's log density behind a numba cfunc (or a
PyTensor callback), against PyMC's own functions and the posteriordb
reference posteriors (PyMC models written here from the posteriordb data)."""
import pickle
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pm = pytest.importorskip("pymc")
pytest.importorskip("numba")
pt = pytest.importorskip("pytensor.tensor")

import fastsurrogate as fs                                  # noqa: E402
from fastsurrogate import diagnostics                       # noqa: E402
from fastsurrogate.core._blas_threads import blas_threads   # noqa: E402
from fastsurrogate.models import posteriordb as pdb         # noqa: E402
from test_posteriordb_hmc import compare_to_reference       # noqa: E402


# ---------------------------------------------------------------------------
# a small model with every kind of variable: vector, matrix, simplex (a
# value variable of another size), log and interval transforms, data,
# a Deterministic, dims and coords

def small_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = X @ np.array([1.0, -0.5, 0.2]) + 0.3 * rng.normal(size=30)
    coords = {"feature": ["a", "b", "c"], "obs": np.arange(30)}
    with pm.Model(coords=coords) as model:
        Xd = pm.Data("X", X, dims=("obs", "feature"))
        beta = pm.Normal("beta", 0.0, 1.0, dims="feature")
        sigma = pm.HalfNormal("sigma", 1.0)
        w = pm.Dirichlet("w", a=np.ones(3))
        L = pm.Normal("L", 0.0, 1.0, shape=(2, 2))
        u = pm.Uniform("u", -1.0, 2.0)
        mu = pm.Deterministic("mu", Xd @ beta + w[0] + 0.1 * L.sum() * u, dims="obs")
        pm.Normal("y", mu, sigma, observed=y, dims="obs")
    return model


@pytest.fixture(scope="module")
def small():
    model = small_model()
    return model, fs.from_pymc(model)


def _point(pot, q):
    """q (dim,) -> PyMC's dict of value variables."""
    out, start = {}, 0
    for name, shape in pot.shapes.items():
        n = int(np.prod(shape, dtype=int))
        out[name] = q[start:start + n].reshape(shape)
        start += n
    return out


@pytest.mark.parametrize("backend", ["numba", "python"])
def test_value_and_gradient_agree_with_pymc(small, backend):
    model, pot = small
    if backend == "python":
        pot = fs.from_pymc(model, backend="python")
        assert not pot.thread_safe
    else:
        assert pot.thread_safe
    assert pot.dim == 3 + 1 + 2 + 4 + 1
    assert pot.param_names[:4] == ["beta[0]", "beta[1]", "beta[2]", "sigma_log__"]
    assert "L[1,0]" in pot.param_names and "u_interval__" in pot.param_names
    logp, dlogp = model.compile_logp(), model.compile_dlogp()
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = 0.7 * rng.normal(size=pot.dim)
        u, g = pot.value_and_grad(q)
        p = _point(pot, q)
        assert u == pytest.approx(-float(logp(p)), rel=1e-12, abs=1e-10)
        np.testing.assert_allclose(g, -np.asarray(dlogp(p)), rtol=1e-10, atol=1e-10)
        assert pot.value(q) == pytest.approx(u, rel=1e-12)
        np.testing.assert_array_equal(pot.grad(q), g)
        # log density protocol
        assert pot.log_density(q) == pytest.approx(float(logp(p)), rel=1e-12)


def test_gradient_matches_finite_differences(small):
    _, pot = small
    q = 0.5 * np.random.default_rng(2).normal(size=pot.dim)
    g = pot.grad(q)
    h = 1e-6
    fd = np.array([(pot.value(q + h * e) - pot.value(q - h * e)) / (2 * h)
                   for e in np.eye(pot.dim)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_constrain_shapes_names_and_values(small):
    model, pot = small
    assert pot.reference_names == ["beta", "sigma", "w", "L", "u", "mu"]
    q = np.random.default_rng(3).normal(size=(2, 5, pot.dim))
    c = pot.constrain(q)
    assert list(c) == pot.reference_names
    assert c["beta"].shape == (2, 5, 3) and c["L"].shape == (2, 5, 2, 2)
    assert c["w"].shape == (2, 5, 3) and c["sigma"].shape == (2, 5)
    assert c["mu"].shape == (2, 5, 30)
    np.testing.assert_allclose(c["w"].sum(-1), 1.0)
    np.testing.assert_allclose(c["sigma"], np.exp(q[..., 3]))
    assert np.all((c["u"] > -1) & (c["u"] < 2))
    # against PyMC's own map from value variables to the model's variables
    import pytensor
    fn = pytensor.function(model.value_vars, model.replace_rvs_by_values(
        [model["beta"], model["w"], model["mu"]]), on_unused_input="ignore")
    beta, w, mu = fn(*_point(pot, q[1, 2]).values())
    np.testing.assert_allclose(c["beta"][1, 2], beta)
    np.testing.assert_allclose(c["w"][1, 2], w)
    np.testing.assert_allclose(c["mu"][1, 2], mu)
    assert pot.constrain(q[0, 0])["L"].shape == (2, 2)


def test_initial_point_is_the_models(small):
    model, pot = small
    q0 = pot.initial_point()
    assert q0.shape == (pot.dim,)
    ip = model.initial_point()
    for name, value in _point(pot, q0).items():
        np.testing.assert_allclose(value, ip[name])
    assert np.isfinite(pot.value(q0))
    q1 = pot.initial_point(seed=3, jitter=True)
    assert q1.shape == (pot.dim,) and not np.allclose(q1, q0)
    assert np.all(np.abs(q1 - q0) <= 1.0)


def test_a_failure_inside_the_compiled_function_is_a_divergence():
    """What the cfunc does when PyTensor's function raises (a Cholesky of a
    matrix that is not positive definite, ...): U = inf, gradient NaN."""
    import numba
    from fastsurrogate.core._potential import CFunctionPotential
    from fastsurrogate.interop._pymc_model import _make_cfunc

    @numba.njit
    def graph(q, data):
        if q[0] > 1.0:
            raise ValueError("not positive definite")
        return np.array(-0.5 * q[0] * q[0] * data[0]), -q * data[0]

    data = np.array([2.0])
    both = _make_cfunc(graph, 1, [data], with_grad=True)
    pot = CFunctionPotential(both, 1, keep_alive=data)
    assert pot.value_and_grad(np.array([0.5]))[0] == 0.25
    u, g = pot.value_and_grad(np.array([2.0]))
    assert u == np.inf and np.isnan(g[0])
    assert pot.value(np.array([2.0])) == np.inf


# ---------------------------------------------------------------------------
# threads

def test_chains_in_threads_give_the_draws_of_chains_in_turn(small):
    _, pot = small
    assert pot.thread_safe
    kw = dict(n_draws=150, n_warmup=150, chains=2, seed=5, progress=False, warn=False)
    threaded = fs.sample(pot, **kw)                          # threads (thread-safe)
    with ThreadPoolExecutor(2) as ex:
        pooled = fs.sample(pot, executor=ex, **kw)
    # the same C function behind a potential not marked thread-safe: in turn
    in_turn = fs.sample(fs.Potential.from_capsule(pot.capsule, keep_alive=None), **kw)
    assert np.all(np.isfinite(threaded.draws))
    np.testing.assert_array_equal(threaded.draws, in_turn.draws)
    np.testing.assert_array_equal(pooled.draws, in_turn.draws)


def test_concurrent_evaluations_share_nothing(small):
    _, pot = small
    rng = np.random.default_rng(7)
    Q = 0.5 * rng.normal(size=(64, pot.dim))
    expected = [pot.value_and_grad(q) for q in Q]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda q: (pot.value(q), pot.value_and_grad(q)), Q))
    for (u, g), (v, (u2, g2)) in zip(expected, got):
        assert u == u2 and v == pytest.approx(u, rel=1e-13)
        np.testing.assert_array_equal(g, g2)


# ---------------------------------------------------------------------------
# ArviZ

def test_to_arviz_has_the_models_names_shapes_and_coords(small):
    pytest.importorskip("arviz")
    model, pot = small
    res = fs.sample(pot, n_draws=100, n_warmup=100, chains=2, seed=1, progress=False,
                    warn=False)
    post = res.to_arviz().posterior
    assert set(post.data_vars) == {"beta", "sigma", "w", "L", "u", "mu"}
    assert post["beta"].dims == ("chain", "draw", "feature")
    assert list(post["feature"].values) == ["a", "b", "c"]
    assert post["mu"].dims == ("chain", "draw", "obs") and post["mu"].shape == (2, 100, 30)
    assert post["L"].shape == (2, 100, 2, 2) and post["sigma"].shape == (2, 100)
    # the caller's dims and coords still win
    post2 = res.to_arviz(dims={"beta": ["coef"]}, coords={"coef": ["x", "y", "z"]}).posterior
    assert post2["beta"].dims == ("chain", "draw", "coef")
    assert list(post2["coef"].values) == ["x", "y", "z"]
    # a pickled Result keeps them without the model
    again = pickle.loads(pickle.dumps(res)).to_arviz().posterior
    assert again["beta"].dims == ("chain", "draw", "feature")
    np.testing.assert_array_equal(again["w"].values, post["w"].values)


# ---------------------------------------------------------------------------
# bad inputs, imports, pickling

def test_bad_inputs_raise_before_any_compilation():
    with pytest.raises(TypeError, match="pymc.Model"):
        fs.from_pymc({"mu": 0.0})
    with pytest.raises(TypeError, match="pymc.Model"):
        fs.from_pymc(fs.models.StandardNormal(2))
    with pm.Model() as discrete:
        pm.Normal("mu")
        pm.Poisson("k", 3.0)
    with pytest.raises(ValueError, match="discrete.*'k'"):
        fs.from_pymc(discrete)
    with pm.Model() as empty:
        pm.Normal("y", 0.0, 1.0, observed=np.zeros(3))
    with pytest.raises(ValueError, match="no free random variables"):
        fs.from_pymc(empty)
    with pm.Model() as fine:
        pm.Normal("mu")
    with pytest.raises(ValueError, match="backend"):
        fs.from_pymc(fine, backend="jax")


def test_without_numba_the_default_backend_says_so(monkeypatch):
    with pm.Model() as model:
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1.0, observed=np.array([0.5, 1.5]))
    monkeypatch.setitem(sys.modules, "numba", None)
    with pytest.raises(ImportError, match="needs numba"):
        fs.from_pymc(model)
    pot = fs.from_pymc(model, backend="python")
    # posterior N(2/3, 1/3): U = 1.5 (mu - 2/3)^2 + const
    assert pot.grad(np.array([1.0])) == pytest.approx([3.0 * (1.0 - 2.0 / 3.0)])


def test_importing_fastsurrogate_imports_no_pymc():
    code = ("import sys, fastsurrogate; "
            "print(sorted(m for m in ('pymc', 'pytensor', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_pickles_by_recompiling_from_the_model():
    pytest.importorskip("cloudpickle")
    with pm.Model() as model:
        mu = pm.Normal("mu", 1.0, 2.0)
        pm.Normal("y", mu, 1.0, observed=np.array([0.5, 1.5]))
    pot = fs.from_pymc(model)
    back = pickle.loads(pickle.dumps(pot))
    assert back is not pot and back.thread_safe and back.param_names == ["mu"]
    assert back.value_and_grad(np.array([0.3]))[0] == pot.value_and_grad(np.array([0.3]))[0]


# ---------------------------------------------------------------------------
# the posteriordb references, through PyMC models written from their data
# (the same likelihoods and priors as fastsurrogate.models.posteriordb)

def sblrc_blr(d):
    X = np.asarray(d["X"], dtype=float)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 10.0, shape=X.shape[1])
        sigma = pm.HalfNormal("sigma", 10.0)
        pm.Normal("y", X @ beta, sigma, observed=np.asarray(d["y"], dtype=float))
    return model


def eight_schools_noncentered(d):
    with pm.Model() as model:
        theta_trans = pm.Normal("theta_trans", 0.0, 1.0, shape=int(d["J"]))
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Deterministic("theta", mu + tau * theta_trans)
        pm.Normal("y", theta, np.asarray(d["sigma"], dtype=float),
                  observed=np.asarray(d["y"], dtype=float))
    return model


def garch11(d):
    import pytensor
    y = np.asarray(d["y"], dtype=float)
    h1 = np.float64(float(d["sigma1"]) ** 2)
    with pm.Model() as model:
        mu = pm.Flat("mu")
        alpha0 = pm.HalfFlat("alpha0")
        alpha1 = pm.Uniform("alpha1", 0.0, 1.0)
        beta1 = pm.Uniform("beta1", 0.0, 1.0 - alpha1)
        # Stan's beta1 has no prior: cancel the uniform's 1 / (1 - alpha1)
        pm.Potential("beta1_flat", pt.log1p(-alpha1))
        e2 = (y - mu) ** 2
        h = pytensor.scan(lambda e2_prev, h_prev, a0, a1, b1: a0 + a1 * e2_prev + b1 * h_prev,
                          sequences=[e2[:-1]], outputs_info=[pt.as_tensor(h1)],
                          non_sequences=[alpha0, alpha1, beta1], strict=True,
                          return_updates=False)
        h = pt.concatenate([pt.as_tensor([h1]), h])
        pm.Normal("y", mu, pt.sqrt(h), observed=y)
    return model


def ark(d):
    y = np.asarray(d["y"], dtype=float)
    K, T = int(d["K"]), y.shape[0]
    lags = np.column_stack([y[K - k:T - k] for k in range(1, K + 1)])
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0, shape=K)
        sigma = pm.HalfCauchy("sigma", 2.5)
        pm.Normal("y", alpha + lags @ beta, sigma, observed=y[K:])
    return model


def gp_regr(d):
    x = np.asarray(d["x"], dtype=float)
    d2 = (x[:, None] - x[None, :]) ** 2
    with pm.Model() as model:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", 2.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        # sigma itself on the diagonal, as in the Stan program
        cov = alpha ** 2 * pt.exp(-d2 / (2.0 * rho ** 2)) + sigma * pt.eye(x.shape[0])
        pm.MvNormal("y", mu=np.zeros(x.shape[0]), cov=cov,
                    observed=np.asarray(d["y"], dtype=float))
    return model


# posterior -> (PyMC model, n_warmup, n_draws): tests/test_nuts.py's settings
POSTERIORS = {
    "sblrc-blr": sblrc_blr,
    "eight_schools-eight_schools_noncentered": eight_schools_noncentered,
    "garch-garch11": garch11,
    "arK-arK": ark,
    "gp_pois_regr-gp_regr": gp_regr,
}
assert set(POSTERIORS) == set(pdb.MODELS)


def stan_names(constrained):
    """{"beta": (..., 5)} -> {"beta[1]": (...), ...}: Stan's 1-based names."""
    out = {}
    for name, value in constrained.items():
        value = np.asarray(value)
        extra = value.ndim - 2            # (chains, draws, *shape)
        if extra == 0:
            out[name] = value
            continue
        for idx in np.ndindex(*value.shape[2:]):
            out[f"{name}[{','.join(str(i + 1) for i in idx)}]"] = value[(slice(None),) * 2 + idx]
    return out


@pytest.mark.parametrize("surrogate", [False, True], ids=["exact", "surrogate"])
@pytest.mark.parametrize("name", list(POSTERIORS))
def test_pymc_model_reproduces_reference_posterior(data_dir, name, surrogate):
    """fs.sample's defaults (4 chains x (1000 + 1000) of NUTS), with the
    surrogate off and forced on: the two choices surrogate="auto" makes."""
    build = POSTERIORS[name]
    cls = pdb.MODELS[name]
    pot = fs.from_pymc(build(pdb.load_data(cls.data_name, data_dir)))
    assert pot.thread_safe
    ref = pdb.load_reference(name, data_dir)
    # the PyMC model and the NumPy one differ by a constant only
    numpy_model = cls.from_posteriordb(data_dir)
    q = numpy_model.unconstrain({k: v[0, :3] for k, v in ref.items()})   # 3 points
    du = [pot.value(x) - numpy_model.value(x) for x in q]
    np.testing.assert_allclose(du, du[0], rtol=0, atol=1e-8 * (1 + abs(du[0])))
    np.testing.assert_allclose([pot.grad(x) for x in q], [numpy_model.grad(x) for x in q],
                               rtol=1e-7, atol=1e-8)

    # numba's linear algebra calls SciPy's OpenBLAS: on one thread per chain
    # (its worker threads would spin beside the chains')
    with blas_threads(1):
        res = fs.sample(pot, seed=2024, progress=False, surrogate=surrogate, warn=False)
    assert np.all(diagnostics.rhat(res.draws) < 1.01)
    assert res.stats["divergent"].mean() < 0.01
    draws = stan_names(res.constrained())
    assert set(ref) <= set(draws)
    compare_to_reference(draws, ref)
