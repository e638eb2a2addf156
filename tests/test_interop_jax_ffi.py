"""The XLA FFI path of interop.to_jax, and its fallback to jax.pure_callback."""
import gc
import os
import threading

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import fastsurrogate as fs  # noqa: E402
from fastsurrogate.interop import _xla_ffi, to_jax  # noqa: E402
from fastsurrogate.interop._jax import _calls_python  # noqa: E402
from fastsurrogate.models import posteriordb as pdb  # noqa: E402


@pytest.fixture(scope="module")
def ffi():
    if _xla_ffi.target() is None:
        pytest.skip(f"XLA FFI handler unavailable: {_xla_ffi.unavailable_reason()}")


def _glm(n=300):
    rng = np.random.default_rng(7)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 3))])
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ [0.2, 1.0, -0.7, 0.3]))).astype(float)
    return fs.models.LogisticRegression(X, y, prior_sd=10.0)


def _fd_grad(f, q, h=1e-6):
    g = np.empty_like(q)
    for i in range(q.size):
        e = np.zeros_like(q)
        e[i] = h
        g[i] = (f(q + e) - f(q - e)) / (2 * h)
    return g


@pytest.mark.parametrize("make", [_glm, lambda: fs.models.Banana()],
                         ids=["logistic", "banana"])
def test_ffi_value_and_grad_match_the_kernel_and_finite_differences(ffi, make):
    pot = make()
    logp = to_jax(pot, backend="ffi")
    assert logp.backend == "ffi"
    q = np.linspace(-0.4, 0.5, pot.dim)
    u, g = pot.value_and_grad(q)
    assert float(jax.jit(logp)(q)) == -u
    v, dg = jax.jit(jax.value_and_grad(logp))(q)
    assert float(v) == -u
    np.testing.assert_array_equal(np.asarray(dg), -g)     # the kernel's bits
    f = jax.jit(logp)
    fd = _fd_grad(lambda x: float(f(x)), q)
    np.testing.assert_allclose(np.asarray(dg), fd, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(jax.grad(logp.potential_fn)(q)), g)
    # not jitted, and float32 in: gradient in float32
    np.testing.assert_array_equal(np.asarray(jax.grad(logp)(q)), -g)
    g32 = jax.grad(logp)(jnp.asarray(q, dtype=jnp.float32))
    assert g32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(g32), -pot.grad(q.astype(np.float32)), rtol=1e-6)


def test_ffi_matches_the_callback_path(ffi):
    pot = _glm()
    Q = np.random.default_rng(3).normal(size=(6, pot.dim)) * 0.5
    a = jax.jit(jax.vmap(jax.value_and_grad(to_jax(pot, backend="ffi"))))(Q)
    b = jax.jit(jax.vmap(jax.value_and_grad(to_jax(pot, backend="callback"))))(Q)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_ffi_vmap_loops_over_any_batch_axes_in_order(ffi):
    rec = fs.RecordingPotential(_glm(), capacity=100)
    logp = to_jax(rec, backend="ffi")
    Q = np.random.default_rng(1).normal(size=(2, 3, rec.dim)) * 0.3
    v, g = jax.jit(jax.vmap(jax.vmap(jax.value_and_grad(logp))))(Q)
    assert v.shape == (2, 3) and g.shape == (2, 3, rec.dim)
    for i in range(2):
        for k in range(3):
            u, gu = rec.potential.value_and_grad(Q[i, k])
            assert float(v[i, k]) == -u
            np.testing.assert_array_equal(np.asarray(g[i, k]), -gu)
    # one batched custom call: the handler evaluated the rows in row-major order
    Qs, _, _ = rec.points()
    np.testing.assert_array_equal(Qs, Q.reshape(-1, rec.dim))
    # in_axes on a non-leading axis: vmap moves it first
    v1 = jax.vmap(logp, in_axes=1)(Q[0].T)
    np.testing.assert_array_equal(np.asarray(v1), np.asarray(v[0]))


def test_one_kernel_pass_per_value_and_gradient_and_value_only_without_gradient(ffi):
    rec = fs.RecordingPotential(_glm(), capacity=100)
    logp = to_jax(rec, backend="ffi")
    f = jax.jit(jax.value_and_grad(logp))
    q = np.zeros(rec.dim)
    f(q)
    n0 = rec.n_seen
    for k in range(5):
        f(q + 0.1 * k)
    assert rec.n_seen - n0 == 5
    jax.jit(logp)(q).block_until_ready()           # value only: no gradient pass
    assert rec.n_seen - n0 == 5


def test_non_finite_and_failures_are_a_divergence(ffi):
    pot = fs.models.StandardNormal(3)
    logp = to_jax(pot, backend="ffi")
    q = np.array([np.inf, 0.0, 0.0])
    assert float(jax.jit(logp)(q)) == -np.inf
    v, g = jax.jit(jax.value_and_grad(logp))(q)
    assert float(v) == -np.inf


def test_python_potentials_take_the_callback_path(ffi):
    base = _glm()
    cb = fs.Potential.from_callable(base.value_and_grad, base.dim)
    assert _calls_python(cb) and not _calls_python(base)
    assert _calls_python(fs.WeightedSum([base, cb], [0.5, 0.5]))
    assert _calls_python(fs.RecordingPotential(cb, capacity=4))
    assert to_jax(cb).backend == "callback"
    assert to_jax(base).backend == "ffi"
    assert to_jax(base, backend="callback").backend == "callback"
    with pytest.raises(ValueError, match="calls Python"):
        to_jax(cb, backend="ffi")
    with pytest.raises(ValueError, match="backend"):
        to_jax(base, backend="xla")


def test_the_traced_function_keeps_the_potential_alive(ffi):
    q = np.array([0.1, 0.5, -0.3, 0.2])
    u, g = _glm().value_and_grad(q)
    f = jax.jit(jax.grad(to_jax(_glm(), backend="ffi")))
    gc.collect()
    for _ in range(3):
        _glm()                                     # reuse the freed memory, if any
    np.testing.assert_array_equal(np.asarray(f(q)), -g)


def test_serial_lock_with_concurrent_callers(ffi):
    # RecordingPotential is not thread-safe: the handler serialises it; four
    # threads run jitted gradients at once and every evaluation is counted
    rec = fs.RecordingPotential(_glm(), capacity=10)
    f = jax.jit(jax.vmap(jax.grad(to_jax(rec, backend="ffi"))))
    Q = np.random.default_rng(2).normal(size=(8, rec.dim))
    f(Q).block_until_ready()
    n0 = rec.n_seen
    out = []

    def work():
        for _ in range(20):
            out.append(np.asarray(f(Q)))
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert rec.n_seen - n0 == 4 * 20 * 8
    want = np.stack([-rec.potential.grad(x) for x in Q])
    for o in out:
        np.testing.assert_array_equal(o, want)


def test_compiles_into_the_cache_folder_once(ffi, tmp_path, monkeypatch):
    monkeypatch.setenv("FASTSURROGATE_CACHE_DIR", str(tmp_path))
    cc = _xla_ffi.compiler()
    path = _xla_ffi._build(jax, cc)
    assert os.path.dirname(path) == str(tmp_path) and os.path.isfile(path)
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(path)]  # no temp left
    stamp = os.stat(path).st_mtime_ns
    assert _xla_ffi._build(jax, cc) == path
    assert os.stat(path).st_mtime_ns == stamp


def test_without_a_compiler_it_falls_back_with_a_warning(monkeypatch):
    monkeypatch.setattr(_xla_ffi, "_state", {"done": False, "target": None, "reason": None,
                                             "lib": None, "path": None})
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert _xla_ffi.compiler() is None
    pot = _glm()
    with pytest.warns(RuntimeWarning, match="no C compiler"):
        logp = to_jax(pot)
    assert logp.backend == "callback"
    q = np.array([0.1, 0.5, -0.3, 0.2])
    u, g = pot.value_and_grad(q)
    v, dg = jax.jit(jax.value_and_grad(logp))(q)
    assert float(v) == -u
    np.testing.assert_array_equal(np.asarray(dg), -g)
    with pytest.raises(RuntimeError, match="unavailable"):
        to_jax(pot, backend="ffi")


def test_a_failed_compile_falls_back_too(monkeypatch, tmp_path):
    monkeypatch.setattr(_xla_ffi, "_state", {"done": False, "target": None, "reason": None,
                                             "lib": None, "path": None})
    monkeypatch.setenv("FASTSURROGATE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", "false")              # a "compiler" that always fails
    with pytest.warns(RuntimeWarning, match="failed"):
        assert to_jax(_glm()).backend == "callback"


def _sblrc_glm(data_dir):
    """A compiled GLM on posteriordb's sblrc data (y ~ N(X beta, sigma^2),
    sigma fixed at the least-squares residual sd, beta ~ N(0, 10^2 I)) and its
    exact Gaussian posterior (mean, sd)."""
    data = pdb.load_data("sblrc", data_dir)
    X = np.asarray(data["X"], dtype=float)
    y = np.asarray(data["y"], dtype=float).ravel()
    resid = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    sigma = float(np.sqrt(resid @ resid / (len(y) - X.shape[1])))
    pot = fs.models.LinearRegression(X, y, sigma=sigma, prior_sd=10.0)
    cov = np.linalg.inv(X.T @ X / sigma**2 + np.eye(X.shape[1]) / 100.0)
    return pot, cov @ X.T @ y / sigma**2, np.sqrt(np.diag(cov))


def _check_exact(draws, mean, sd, n_se=4.0):
    """Means and sds of draws (chains, n, dim) within n_se MCSE of the truth."""
    from fastsurrogate import diagnostics
    zm = (draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(draws)
    zs = (draws.std(axis=(0, 1)) - sd) / diagnostics.mcse_sd(draws)
    assert np.all(np.abs(zm) < n_se) and np.all(np.abs(zs) < n_se), (zm, zs)


def test_numpyro_nuts_through_ffi_matches_the_exact_posterior(ffi, data_dir):
    pytest.importorskip("numpyro")
    from numpyro.infer import MCMC, NUTS
    pot, mean, sd = _sblrc_glm(data_dir)
    logp = to_jax(pot, backend="ffi")
    chains, n = 2, 1000
    mcmc = MCMC(NUTS(potential_fn=logp.potential_fn), num_warmup=500, num_samples=n,
                num_chains=chains, chain_method="vectorized", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(2024), init_params=jnp.zeros((chains, pot.dim)),
             extra_fields=("diverging",))
    draws = np.asarray(mcmc.get_samples(group_by_chain=True))
    assert draws.shape == (chains, n, pot.dim)
    assert float(np.mean(mcmc.get_extra_fields()["diverging"])) < 0.01
    _check_exact(draws, mean, sd)


def test_blackjax_nuts_through_ffi_matches_the_exact_posterior(ffi, data_dir):
    blackjax = pytest.importorskip("blackjax")
    pot, mean, sd = _sblrc_glm(data_dir)
    logp = to_jax(pot, backend="ffi")
    k_warm, k_draw = jax.random.split(jax.random.PRNGKey(11))
    warmup = blackjax.window_adaptation(blackjax.nuts, logp)
    (state, params), _ = warmup.run(k_warm, jnp.zeros(pot.dim), num_steps=500)
    nuts = blackjax.nuts(logp, **params)
    chains, n = 2, 1000
    states = jax.vmap(nuts.init)(jnp.stack([state.position] * chains))

    @jax.jit
    def draw(states, key):
        def step(states, k):
            states, info = jax.vmap(nuts.step)(jax.random.split(k, chains), states)
            return states, (states.position, info.is_divergent)
        return jax.lax.scan(step, states, jax.random.split(key, n))[1]

    pos, div = draw(states, k_draw)
    assert float(np.mean(div)) < 0.01
    _check_exact(np.swapaxes(np.asarray(pos), 0, 1), mean, sd)
