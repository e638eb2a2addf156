"""fastsurrogate potentials driving JAX samplers through interop.to_jax."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import fastsurrogate as fs  # noqa: E402
from fastsurrogate.interop import to_jax  # noqa: E402
from fastsurrogate.models import posteriordb as pdb  # noqa: E402
from test_posteriordb_hmc import compare_to_reference  # noqa: E402


def _glm():
    rng = np.random.default_rng(7)
    X = np.column_stack([np.ones(300), rng.normal(size=(300, 3))])
    y = (rng.uniform(size=300) < 1 / (1 + np.exp(-X @ [0.2, 1.0, -0.7, 0.3]))).astype(float)
    return fs.models.LogisticRegression(X, y, prior_sd=10.0)


class _Counting:
    """A callback potential that counts its evaluations."""

    def __init__(self, base):
        self.base, self.n = base, 0
        self.pot = fs.Potential.from_callable(self._vg, base.dim, value=self._v)

    def _vg(self, q):
        self.n += 1
        return self.base.value_and_grad(q)

    def _v(self, q):
        self.n += 1
        return self.base.value(q)


def test_value_and_gradient_match_the_potential_under_jit():
    pot = _glm()
    logp = to_jax(pot)
    q = np.array([0.1, 0.5, -0.3, 0.2])
    u, g = pot.value_and_grad(q)
    np.testing.assert_allclose(float(jax.jit(logp)(q)), -u, rtol=1e-14)
    v, dg = jax.jit(jax.value_and_grad(logp))(q)
    np.testing.assert_allclose(float(v), -u, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(dg), -g, rtol=1e-13)
    np.testing.assert_allclose(float(logp.potential_fn(q)), u, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jax.grad(logp.potential_fn)(q)), g, rtol=1e-13)
    # float32 input is cast to float64 for the kernel; the gradient comes back
    # in the input's dtype
    g32 = jax.grad(logp)(jnp.asarray(q, dtype=jnp.float32))
    assert g32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(g32), -pot.grad(q.astype(np.float32)), rtol=1e-6)


def test_one_callback_per_value_and_gradient():
    c = _Counting(_glm())
    logp = to_jax(c.pot)
    f = jax.jit(jax.value_and_grad(logp))
    q = np.zeros(4)
    f(q)
    c.n = 0
    for _ in range(5):
        f(q + 0.1)
    assert c.n == 5
    c.n = 0
    jax.jit(logp)(q)
    assert c.n == 1


@pytest.mark.parametrize("vmap_method", ["sequential", "expand_dims"])
def test_vmap_over_chains(vmap_method):
    pot = _glm()
    logp = to_jax(pot, vmap_method=vmap_method, backend="callback")
    Q = np.random.default_rng(1).normal(size=(5, 4)) * 0.3
    v, g = jax.jit(jax.vmap(jax.value_and_grad(logp)))(Q)
    for k in range(5):
        u, gu = pot.value_and_grad(Q[k])
        np.testing.assert_allclose(float(v[k]), -u, rtol=1e-14)
        np.testing.assert_allclose(np.asarray(g[k]), -gu, rtol=1e-13)


def test_bad_input_and_float32_mode_raise_clear_errors():
    with pytest.raises(TypeError, match="Potential"):
        to_jax(lambda q: q)
    with pytest.raises(ValueError, match="shape"):
        to_jax(_glm())(np.zeros(3))
    with pytest.raises(ValueError, match="vmap_method"):
        to_jax(_glm(), vmap_method="nope")
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(RuntimeError, match="jax_enable_x64"):
            to_jax(_glm())
    finally:
        jax.config.update("jax_enable_x64", True)


def test_non_finite_potential_is_minus_infinity_not_an_error():
    pot = fs.Potential.from_callable(lambda q: (np.inf, np.full(2, np.nan)), 2)
    assert float(jax.jit(to_jax(pot))(np.zeros(2))) == -np.inf


def _posteriordb(data_dir):
    model = pdb.SBLRC_BLR.from_posteriordb(data_dir)
    return pdb.as_potential(model), pdb.SBLRC_BLR.reference_draws(data_dir)


def test_numpyro_nuts_reproduces_a_posteriordb_posterior(data_dir):
    pytest.importorskip("numpyro")
    from numpyro.infer import MCMC, NUTS
    pot, ref = _posteriordb(data_dir)
    # the pure_callback path (the FFI path: test_interop_jax_ffi.py); chains
    # vectorised: one host callback evaluates both chains
    logp = to_jax(pot, vmap_method="expand_dims", backend="callback")
    chains, n = 2, 600
    mcmc = MCMC(NUTS(potential_fn=logp.potential_fn), num_warmup=300, num_samples=n,
                num_chains=chains, chain_method="vectorized", progress_bar=False)
    init = np.random.default_rng(0).normal(size=(chains, pot.dim)) * 0.5
    mcmc.run(jax.random.PRNGKey(2024), init_params=jnp.asarray(init),
             extra_fields=("diverging",))
    draws = np.asarray(mcmc.get_samples(group_by_chain=True))
    assert draws.shape == (chains, n, pot.dim)
    assert float(np.mean(mcmc.get_extra_fields()["diverging"])) < 0.01
    res = fs.Result(draws=draws, stats={}, method="numpyro-nuts", potential=pot,
                    param_names=pot.param_names)
    compare_to_reference(res, ref)


def test_blackjax_nuts_reproduces_a_posteriordb_posterior(data_dir):
    blackjax = pytest.importorskip("blackjax")
    pot, ref = _posteriordb(data_dir)
    logp = to_jax(pot, vmap_method="expand_dims")
    k_warm, k_draw = jax.random.split(jax.random.PRNGKey(11))
    warmup = blackjax.window_adaptation(blackjax.nuts, logp)
    (state, params), _ = warmup.run(k_warm, jnp.zeros(pot.dim), num_steps=300)
    nuts = blackjax.nuts(logp, **params)
    chains, n = 2, 600
    states = jax.vmap(nuts.init)(jnp.stack([state.position] * chains))

    @jax.jit
    def draw(states, key):
        def step(states, k):
            states, info = jax.vmap(nuts.step)(jax.random.split(k, chains), states)
            return states, (states.position, info.is_divergent)
        return jax.lax.scan(step, states, jax.random.split(key, n))[1]

    pos, div = draw(states, k_draw)
    assert float(np.mean(div)) < 0.01
    draws = np.swapaxes(np.asarray(pos), 0, 1)          # (chains, draws, dim)
    res = fs.Result(draws=draws, stats={}, method="blackjax-nuts", potential=pot,
                    param_names=pot.param_names)
    compare_to_reference(res, ref)
