"""fs.from_jax: models the tests write themselves in JAX.

The five posteriordb references are written here in ``jax.numpy`` from the
shared data (not through the package's hand-coded models) and sampled with
``fs.sample``'s defaults, exact NUTS and the surrogate forced on; their
means and sds must agree with the reference draws within 4 combined MCSE.
"""
import pickle

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.models import posteriordb as pdb
from test_posteriordb_hmc import compare_to_reference

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)


# -- the five references, in JAX -----------------------------------------------

def _linear_gaussian(Z, y, sigma_prior):
    n = y.shape[0]

    def logdensity(p):
        w = jnp.concatenate([jnp.atleast_1d(p["alpha"]), p["beta"]]) if "alpha" in p else p["beta"]
        ls = p["log_sigma"]
        r = y - Z @ w
        return (-0.5 * jnp.sum(w ** 2) / 100.0 + sigma_prior(jnp.exp(ls))
                - n * ls - 0.5 * jnp.sum(r ** 2) * jnp.exp(-2.0 * ls) + ls)
    return logdensity


def sblrc(data):
    X = jnp.asarray(data["X"], dtype=float)
    y = jnp.asarray(data["y"], dtype=float).ravel()
    logdensity = _linear_gaussian(X, y, lambda s: -0.5 * s ** 2 / 100.0)
    example = {"beta": np.zeros(X.shape[1]), "log_sigma": 0.0}
    return logdensity, example, lambda p: {"beta": p["beta"], "sigma": jnp.exp(p["log_sigma"])}


def ark(data):
    y = np.asarray(data["y"], dtype=float).ravel()
    K = int(data["K"])
    T = y.shape[0]
    Z = np.column_stack([np.ones(T - K)] + [y[K - k:T - k] for k in range(1, K + 1)])
    logdensity = _linear_gaussian(jnp.asarray(Z), jnp.asarray(y[K:]),
                                  lambda s: -jnp.log1p((s / 2.5) ** 2))
    example = {"alpha": 0.0, "beta": np.zeros(K), "log_sigma": 0.0}
    return logdensity, example, lambda p: {"alpha": p["alpha"], "beta": p["beta"],
                                           "sigma": jnp.exp(p["log_sigma"])}


def eight_schools(data):
    y = jnp.asarray(data["y"], dtype=float)
    sigma = jnp.asarray(data["sigma"], dtype=float)

    def logdensity(p):
        tau = jnp.exp(p["log_tau"])
        theta = p["mu"] + tau * p["theta_trans"]
        return (-0.5 * jnp.sum(p["theta_trans"] ** 2) - p["mu"] ** 2 / 50.0
                - jnp.log1p((tau / 5.0) ** 2) + p["log_tau"]
                - 0.5 * jnp.sum(((y - theta) / sigma) ** 2))

    def constrain(p):
        tau = jnp.exp(p["log_tau"])
        return {"theta": p["mu"] + tau * p["theta_trans"], "mu": p["mu"], "tau": tau}
    return logdensity, {"theta_trans": np.zeros(y.shape[0]), "mu": 0.0, "log_tau": 0.0}, constrain


def garch(data):
    y = jnp.asarray(data["y"], dtype=float).ravel()
    h1 = float(data["sigma1"]) ** 2

    def unpack(p):
        a1 = jax.nn.sigmoid(p["v"])
        return p["mu"], jnp.exp(p["la0"]), a1, (1.0 - a1) * jax.nn.sigmoid(p["u"])

    def logdensity(p):
        mu, a0, a1, b1 = unpack(p)
        e2 = (y - mu) ** 2

        def step(h, e2_prev):
            h = a0 + a1 * e2_prev + b1 * h
            return h, h
        _, h_rest = jax.lax.scan(step, h1, e2[:-1])
        h = jnp.concatenate([jnp.array([h1]), h_rest])
        loglik = -0.5 * jnp.sum(jnp.log(h)) - 0.5 * jnp.sum(e2 / h)
        log_jac = (p["la0"] + jax.nn.log_sigmoid(p["v"]) + 2.0 * jax.nn.log_sigmoid(-p["v"])
                   + jax.nn.log_sigmoid(p["u"]) + jax.nn.log_sigmoid(-p["u"]))
        return loglik + log_jac

    def constrain(p):
        mu, a0, a1, b1 = unpack(p)
        return {"mu": mu, "alpha0": a0, "alpha1": a1, "beta1": b1}
    return logdensity, {"mu": 0.0, "la0": 0.0, "v": 0.0, "u": 0.0}, constrain


def gp_regr(data):
    x = jnp.asarray(data["x"], dtype=float).ravel()
    y = jnp.asarray(data["y"], dtype=float).ravel()
    d2 = (x[:, None] - x[None, :]) ** 2

    def logdensity(p):
        rho, alpha, sigma = (jnp.exp(p[k]) for k in ("lr", "la", "ls"))
        K = alpha ** 2 * jnp.exp(-d2 / (2.0 * rho ** 2)) + sigma * jnp.eye(x.shape[0])
        L = jnp.linalg.cholesky(K)
        z = jax.scipy.linalg.solve_triangular(L, y, lower=True)
        prior = 24.0 * p["lr"] - 4.0 * rho - alpha ** 2 / 8.0 - 0.5 * sigma ** 2
        return (prior + p["lr"] + p["la"] + p["ls"]
                - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * z @ z)

    def constrain(p):
        return {"rho": jnp.exp(p["lr"]), "alpha": jnp.exp(p["la"]), "sigma": jnp.exp(p["ls"])}
    return logdensity, {"lr": 0.0, "la": 0.0, "ls": 0.0}, constrain


MODELS = {"sblrc-blr": sblrc, "arK-arK": ark,
          "eight_schools-eight_schools_noncentered": eight_schools,
          "garch-garch11": garch, "gp_pois_regr-gp_regr": gp_regr}


def scalar_draws(constrained):
    """{name: (chains, n, *shape)} -> {"name" or "name[i]" (1-based, Stan's): (chains, n)}."""
    out = {}
    for name, x in constrained.items():
        x = np.asarray(x)
        if x.ndim == 2:
            out[name] = x
        else:
            for i in range(x.shape[2]):
                out[f"{name}[{i + 1}]"] = x[:, :, i]
    return out


def build(name, data_dir):
    cls = pdb.MODELS[name]
    return MODELS[name](pdb.load_data(cls.data_name, data_dir))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_jax_model_agrees_with_the_hand_coded_one(name, data_dir):
    """Value differences are constant and gradients equal: the same posterior."""
    logdensity, example, _ = build(name, data_dir)
    pot = fs.from_jax(logdensity, example)
    model = pdb.MODELS[name].from_posteriordb(data_dir)
    rng = np.random.default_rng(0)
    # the hand-coded models order their parameters as Stan does; the pytree is
    # flattened in sorted-key order: match them through the constrained draws
    q_model = rng.uniform(-0.5, 0.5, (6, model.dim))
    constrained = model.constrain(q_model)
    diffs = []
    for i in range(q_model.shape[0]):
        q_jax = _unconstrain_like(name, pot, {k: v[i] for k, v in constrained.items()})
        u_jax, _ = pot.value_and_grad(q_jax)
        diffs.append(u_jax - model.value(q_model[i]))
    np.testing.assert_allclose(diffs, diffs[0], atol=1e-8 * (1 + abs(diffs[0])))
    report = fs.check_gradient(pot)
    assert report.ok, report


def _unconstrain_like(name, pot, c):
    """The JAX pytree's flat vector for the constrained values c (Stan names)."""
    vec = lambda stem: np.array([c[k] for k in sorted((k for k in c if k.startswith(stem + "[")),
                                                      key=lambda k: int(k[len(stem) + 1:-1]))])
    if name in ("sblrc-blr", "arK-arK"):
        p = {"beta": vec("beta"), "log_sigma": np.log(c["sigma"])}
        if name == "arK-arK":
            p["alpha"] = c["alpha"]
    elif name.startswith("eight_schools"):
        p = {"theta_trans": vec("theta_trans"), "mu": c["mu"], "log_tau": np.log(c["tau"])}
    elif name == "garch-garch11":
        a1 = c["alpha1"]
        s = c["beta1"] / (1.0 - a1)
        p = {"mu": c["mu"], "la0": np.log(c["alpha0"]), "v": np.log(a1 / (1 - a1)),
             "u": np.log(s / (1 - s))}
    else:
        p = {"lr": np.log(c["rho"]), "la": np.log(c["alpha"]), "ls": np.log(c["sigma"])}
    from jax.flatten_util import ravel_pytree
    return np.asarray(ravel_pytree(jax.tree_util.tree_map(jnp.asarray, p))[0])


@pytest.mark.parametrize("surrogate", [False, True], ids=["exact", "surrogate"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_five_references_through_jax_models(name, surrogate, data_dir):
    logdensity, example, constrain = build(name, data_dir)
    pot = fs.from_jax(logdensity, example, constrain=constrain)
    res = fs.sample(pot, seed=7, progress=False, surrogate=surrogate, warn=False)
    assert res.method == "nuts"
    assert np.all(diagnostics.rhat(res.draws) < 1.01)
    assert res.stats["divergent"].mean() < 0.01
    compare_to_reference(scalar_draws(res.constrained()),
                         pdb.MODELS[name].reference_draws(data_dir))


def test_names_shapes_and_arviz():
    def logdensity(p):
        return -0.5 * (jnp.sum(p["theta"] ** 2) + p["mu"] ** 2 + jnp.sum(p["m"] ** 2))
    pot = fs.from_jax(logdensity, {"mu": 0.0, "theta": jnp.zeros(3),
                                             "m": np.zeros((2, 2))})
    assert pot.dim == 8
    # ravel_pytree's order: sorted dict keys, each leaf in C order
    assert pot.param_names == ["m[0,0]", "m[0,1]", "m[1,0]", "m[1,1]", "mu",
                               "theta[0]", "theta[1]", "theta[2]"]
    q = np.arange(8.0)
    u, g = pot.value_and_grad(q)
    assert u == pytest.approx(0.5 * q @ q)
    np.testing.assert_allclose(g, q)
    assert pot.value(q) == pytest.approx(u)
    res = fs.sample(pot, n_draws=200, n_warmup=200, chains=2, seed=1, progress=False, warn=False)
    c = res.constrained()
    assert c["m"].shape == (2, 200, 2, 2) and c["theta"].shape == (2, 200, 3)
    np.testing.assert_array_equal(c["theta"][..., 1], res.draws[..., 6])
    az = pytest.importorskip("arviz")
    idata = res.to_arviz()
    assert isinstance(idata, az.InferenceData)
    assert idata.posterior["m"].shape == (2, 200, 2, 2)
    assert idata.posterior["mu"].shape == (2, 200)


def test_a_bare_array_and_pickling():
    pot = fs.from_jax(_module_level_logdensity, jnp.zeros(3))
    assert pot.param_names == ["q[0]", "q[1]", "q[2]"]
    again = pickle.loads(pickle.dumps(pot))
    q = np.array([0.1, -0.2, 0.3])
    assert again.value_and_grad(q)[0] == pot.value_and_grad(q)[0]
    assert pot.thread_safe


def _module_level_logdensity(x):
    return -0.5 * jnp.sum(x ** 2) - jnp.sum(jnp.cos(x))


def test_bad_inputs_are_refused_before_sampling():
    with pytest.raises(TypeError, match="callable"):
        fs.from_jax(3.0, {"a": 0.0})
    with pytest.raises(TypeError, match="constrain"):
        fs.from_jax(lambda p: p["a"], {"a": 0.0}, constrain=1)
    with pytest.raises(ValueError, match="scalar"):
        fs.from_jax(lambda x: x, jnp.zeros(2))
    with pytest.raises(ValueError, match="no array leaves"):
        fs.from_jax(lambda p: 0.0, {})
    with pytest.raises(TypeError, match="dtype"):
        fs.from_jax(lambda p: 0.0, {"a": np.array(["x"])})
