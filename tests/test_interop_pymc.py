"""A fastsurrogate potential as a log-density term of a PyMC model (interop.pymc)."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics

pm = pytest.importorskip("pymc")
pt = pytest.importorskip("pytensor.tensor")
from fastsurrogate.interop import to_pytensor  # noqa: E402


def _data():
    rng = np.random.default_rng(4)
    X = np.column_stack([np.ones(150), rng.normal(size=(150, 2))])
    y = (rng.uniform(size=150) < 1 / (1 + np.exp(-X @ [-0.3, 1.2, -0.8]))).astype(float)
    return X, y


class _Counting:
    def __init__(self, base):
        self.base, self.n = base, 0
        self.pot = fs.Potential.from_callable(self._vg, base.dim)

    def _vg(self, q):
        self.n += 1
        return self.base.value_and_grad(q)


def test_logp_and_gradient_of_the_model_come_from_one_call():
    X, y = _data()
    glm = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    c = _Counting(glm)
    with pm.Model() as model:
        beta = pm.Flat("beta", shape=3)
        pm.Potential("fs_logp", to_pytensor(c.pot)(beta))
    f = model.logp_dlogp_function(ravel_inputs=True)
    f.set_extra_values({})
    q = np.array([0.1, 0.2, -0.3])
    c.n = 0
    v, g = f(q)
    assert c.n == 1
    u, gu = glm.value_and_grad(q)
    np.testing.assert_allclose(v, -u, rtol=1e-13)
    np.testing.assert_allclose(g, -gu, rtol=1e-12)
    with pytest.raises(TypeError, match="Potential"):
        to_pytensor(lambda q: q)


def _moments(idata):
    b = idata.posterior["beta"].values           # (chains, draws, 3)
    return b, b.mean(axis=(0, 1)), b.reshape(-1, 3).std(axis=0)


def test_pymc_model_with_a_fastsurrogate_term_matches_the_native_model():
    X, y = _data()
    glm = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    kw = dict(draws=1000, tune=500, chains=2, cores=1, progressbar=False,
              compute_convergence_checks=False)
    with pm.Model():
        beta = pm.Flat("beta", shape=3)
        pm.Potential("fs_logp", to_pytensor(glm)(beta))
        ours = pm.sample(random_seed=1, **kw)
    with pm.Model():
        beta = pm.Normal("beta", 0.0, 10.0, shape=3)
        pm.Bernoulli("y", logit_p=pt.dot(X, beta), observed=y)
        native = pm.sample(random_seed=2, **kw)
    a, ma, sa = _moments(ours)
    b, mb, sb = _moments(native)
    z_m = (ma - mb) / np.hypot(diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    z_s = (sa - sb) / np.hypot(diagnostics.mcse_sd(a), diagnostics.mcse_sd(b))
    assert np.all(np.abs(z_m) < 4), z_m
    assert np.all(np.abs(z_s) < 4), z_s


def test_nutpie_samples_the_pymc_model_with_a_fastsurrogate_term():
    nutpie = pytest.importorskip("nutpie")
    X, y = _data()
    glm = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    with pm.Model() as model:
        beta = pm.Flat("beta", shape=3)
        pm.Potential("fs_logp", to_pytensor(glm)(beta))
    compiled = nutpie.compile_pymc_model(model, backend="numba")
    idata = nutpie.sample(compiled, draws=1000, tune=500, chains=2, seed=3,
                          progress_bar=False)
    draws = idata.posterior["beta"].values
    ref = fs.sample(glm, method="nuts", n_draws=3000, n_warmup=500, chains=2, seed=3,
                    progress=False).draws
    z_m = ((draws.mean(axis=(0, 1)) - ref.mean(axis=(0, 1)))
           / np.hypot(diagnostics.mcse_mean(draws), diagnostics.mcse_mean(ref)))
    assert np.all(np.abs(z_m) < 4), z_m
