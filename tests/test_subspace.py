"""Active subspaces (surrogates/subspace.py), networks on a projection of q
(train_random_network(directions=)) and RNSHMC(subspace=)."""
import argparse

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.surrogates.random_network import train_random_network
from fastsurrogate.surrogates.subspace import active_subspace


def _reference_active_subspace(Q, G, k):
    """Straight from the definition: inverse square root by explicit inverse."""
    S = np.cov(Q.T)
    L = np.linalg.cholesky(S)
    Gx = G @ L
    w, V = np.linalg.eigh(Gx.T @ Gx / len(G))
    order = np.argsort(w)[::-1]
    return V[:, order[:k]].T @ np.linalg.inv(L), w[order]


def test_active_subspace_matches_numpy_reference_and_finds_the_planted_direction():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 5))
    Q = rng.standard_normal((800, 5)) @ A.T          # correlated inputs
    a = np.array([1.0, -2.0, 0.5, 0.0, 3.0])
    G = np.cos(Q @ a)[:, None] * a                   # f(q) = sin(a . q)
    P, ev = active_subspace(Q, G, 2)
    Pr, evr = _reference_active_subspace(Q, G, 2)
    np.testing.assert_allclose(ev, evr, rtol=1e-10, atol=1e-12)
    # the leading direction is determined up to sign
    s = np.sign(P[0] @ Pr[0])
    np.testing.assert_allclose(P[0], s * Pr[0], rtol=1e-8, atol=1e-10)
    # rank one: one non-zero eigenvalue; the direction's gradient response is a
    # multiple of a: P^T P ... moving q along the kernel of P leaves a . q fixed
    assert ev[1] < 1e-12 * ev[0]
    y = (Q - Q.mean(0)) @ P[:1].T
    assert abs(np.corrcoef(y[:, 0], Q @ a)[0, 1]) > 1 - 1e-10
    # whitened: the projections have unit sample variance
    np.testing.assert_allclose(np.var((Q - Q.mean(0)) @ P.T, axis=0, ddof=1), 1.0, rtol=1e-10)
    # independent of the parameters' units
    D = np.diag([1.0, 10.0, 0.1, 3.0, 1.0])
    P2, ev2 = active_subspace(Q @ D, G @ np.linalg.inv(D), 1)
    np.testing.assert_allclose(ev2, ev, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(np.abs((Q @ D - (Q @ D).mean(0)) @ P2.T), np.abs(y), rtol=1e-7,
                               atol=1e-9)


@pytest.mark.parametrize("call, exc", [
    (lambda Q, G: active_subspace(Q, G, 0), ValueError),
    (lambda Q, G: active_subspace(Q, G, 4), ValueError),
    (lambda Q, G: active_subspace(Q, G, 1.5), TypeError),
    (lambda Q, G: active_subspace(Q, G, True), TypeError),
    (lambda Q, G: active_subspace(Q[:3], G, 1), ValueError),
    (lambda Q, G: active_subspace(Q, G[:, :2], 1), ValueError),
    (lambda Q, G: active_subspace(Q, np.full_like(G, np.nan), 1), ValueError),
    (lambda Q, G: train_random_network(Q, G[:, 0], n_hidden=5, directions=np.ones((1, 2))),
     ValueError),
    (lambda Q, G: train_random_network(Q, G[:, 0], n_hidden=5, directions=np.ones((1, 3)),
                                       activation="rbf"), ValueError),
    (lambda Q, G: train_random_network(Q, G[:, 0], n_hidden=5, directions=np.ones((1, 3)),
                                       standardize=False), ValueError),
])
def test_bad_inputs(call, exc):
    rng = np.random.default_rng(1)
    Q, G = rng.standard_normal((50, 3)), rng.standard_normal((50, 3))
    with pytest.raises(exc):
        call(Q, G)


def test_network_on_directions_is_constant_off_the_subspace_and_fits_on_it():
    rng = np.random.default_rng(2)
    Q = rng.standard_normal((1500, 6)) * [1.0, 2.0, 0.5, 1.0, 1.0, 3.0]
    P = np.array([[1.0, 0.5, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, -1.0, 0.0, 0.0]])
    f = lambda X: np.sin(X @ P[0]) + 0.3 * (X @ P[1]) ** 2 + np.cos(X @ P[0]) * (X @ P[1])
    net = train_random_network(Q[:1000], f(Q[:1000]), n_hidden=200, directions=P, seed=3)
    assert net.info["inputs"] == "2 whitened projections"
    # the gradient lies in the row space of P, for every point
    G = net.gradient_batch(Q[1000:])
    resid = G - (G @ np.linalg.pinv(P)) @ P
    assert np.max(np.abs(resid)) < 1e-8 * np.max(np.abs(G))
    # and the function is learned (held out): a small error against its spread
    err = net.value_batch(Q[1000:]) - f(Q[1000:])
    assert np.sqrt(np.mean(err ** 2)) < 0.05 * np.std(f(Q[1000:]))


@pytest.fixture(scope="module")
def logistic():
    X, y, _ = fs.datasets.simulate_logistic(3000, 6, seed=4)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    ref = fs.sample(model, method="hmc", n_draws=3000, n_warmup=500, chains=2, seed=1,
                    progress=False)
    return model, ref


def test_rnshmc_subspace_is_exact_and_records_the_subspace(logistic):
    model, ref = logistic
    res = fs.sample(model, method="rns-hmc", n_draws=3000, n_warmup=800, chains=2, seed=9,
                    n_hidden=200, base="laplace", subspace=3, subspace_points=300,
                    progress=False)
    info = res.info["subspace"]
    assert info["k"] == 3 and info["used"] and info["n_gradients"] == 300
    assert info["eigenvalues"].shape == (6,) and np.all(np.diff(info["eigenvalues"]) <= 0)
    net = res.surrogate.potentials[0]
    assert net.info["inputs"] == "3 whitened projections"
    a, b = res.draws, ref.draws
    zm = (a.mean(axis=(0, 1)) - b.mean(axis=(0, 1))) / np.hypot(
        diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    zs = (a.std(axis=(0, 1)) - b.std(axis=(0, 1))) / np.hypot(
        diagnostics.mcse_sd(a), diagnostics.mcse_sd(b))
    assert np.all(np.abs(zm) < 4) and np.all(np.abs(zs) < 4), (zm, zs)
    assert res.acceptance_rate.mean() > 0.5


def test_rnshmc_subspace_equal_to_dim_is_the_plain_network():
    target = fs.models.Gaussian(np.zeros(3), np.eye(3))
    kw = dict(n_draws=50, n_warmup=100, chains=1, seed=3, n_hidden=20,
              progress=False, standardize="whiten")
    a = fs.sample(target, method="rns-hmc", subspace=3, **kw)
    b = fs.sample(target, method="rns-hmc", **kw)
    assert a.info["subspace"] == {"k": 3, "used": False, "n_gradients": 0}
    np.testing.assert_array_equal(a.draws, b.draws)


@pytest.mark.parametrize("kw, exc", [
    (dict(subspace=0), ValueError),
    (dict(subspace=4), ValueError),
    (dict(subspace=2.5), TypeError),
    (dict(subspace=2, activation="rbf"), ValueError),
    (dict(subspace=2, standardize=False), ValueError),
    (dict(subspace=2, surrogate=fs.models.Gaussian(np.zeros(3), np.eye(3))), ValueError),
    (dict(subspace=2, subspace_points=1), ValueError),
])
def test_rnshmc_subspace_bad_inputs(kw, exc):
    target = fs.models.Gaussian(np.zeros(3), np.eye(3))
    with pytest.raises(exc):
        fs.RNSHMC(target, **kw)


def test_pde_table_surrogate_options():
    from fastsurrogate.reproduce import rns_hmc
    ap = argparse.ArgumentParser()
    rns_hmc.pde_options(ap)
    opts = rns_hmc._surrogate_options(ap.parse_args([]))
    assert opts == dict(base="laplace", subspace=12, input_scale=0.1, ridge=1e-8, train_from=0.0)
    paper = rns_hmc._surrogate_options(ap.parse_args(
        ["--base", "none", "--subspace", "0", "--input-scale", "auto", "--ridge", "auto",
         "--train-from", "0.2"]))
    assert paper == dict(base=None, subspace=None, input_scale="auto", ridge="auto",
                         train_from=0.2)
