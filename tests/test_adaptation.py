"""The metric from draws and gradients (csrc/fs_adapt.c, ``adaptation="fisher"``):
the C estimator against a NumPy reference of the same schedule, and NUTS
with it against posteriordb reference posteriors."""
import pickle

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.core._hmc import Chain, LowRankMetric, metric_adaptation_path, new_trace
from fastsurrogate.models import posteriordb as pdb

from test_posteriordb_hmc import compare_to_reference


# -- a NumPy reference of the schedule and the two estimates -------------------------

def diag_estimate(X, G):
    vq, vg = X.var(axis=0), G.var(axis=0)
    return np.sqrt(vq / vg), (vq > 0) & (vg > 0)


def low_rank_estimate(X, G, ridge=1e-3, cutoff=2.0):
    """M^{-1} = D (I + U (L - 1) U^T) D from the geometric mean of the scaled
    draws' and gradients' covariances in their span."""
    n, d = X.shape
    sigma = (X.var(axis=0) / G.var(axis=0)) ** 0.25
    Xs, Gs = (X - X.mean(0)) / sigma, (G - G.mean(0)) * sigma
    Z = np.concatenate([Xs, Gs]).T
    u, s, _ = np.linalg.svd(Z, full_matrices=False)
    Q = u[:, s > 1e-8 * s[0]]
    k = Q.shape[1]
    A = (Xs @ Q).T @ (Xs @ Q) / n + ridge * np.eye(k)
    B = (Gs @ Q).T @ (Gs @ Q) / n + ridge * np.eye(k)

    def power(S, p):
        w, V = np.linalg.eigh(S)
        return (V * w ** p) @ V.T

    Bh, Bih = power(B, 0.5), power(B, -0.5)
    S = Bih @ power(Bh @ A @ Bh, 0.5) @ Bih
    lam, V = np.linalg.eigh(S)
    keep = (lam > cutoff) | (lam < 1 / cutoff)
    U = Q @ V[:, keep]
    inner = np.eye(d) + (U * (lam[keep] - 1)) @ U.T
    return sigma[:, None] * inner * sigma[None, :]


def reference_path(q0, g0, Q, G, divergent, n_warmup, low_rank):
    d = len(q0)
    early_end = np.floor(0.3 * n_warmup)
    metric_end = n_warmup - np.floor(0.15 * n_warmup)
    fg, bg = [(q0, g0)], [(q0, g0)]
    ag = np.abs(g0)
    diag = np.clip(np.where(ag > 0, 1 / np.where(ag > 0, ag, 1), 1.0), 1e-20, 1e20)
    inv = np.diag(diag) if low_rank else diag
    out, first, n_updates = [], -1, 0
    for it, (q, g, dv) in enumerate(zip(Q, G, divergent)):
        if it < metric_end:
            if not dv and np.all(np.isfinite(q)) and np.all(np.isfinite(g)):
                fg.append((q, g))
                bg.append((q, g))
            every = 10 if it < early_end else 80
            updated = False
            if len(bg) >= every and it + every <= metric_end:
                if low_rank:     # the foreground: the last two windows
                    X, Gr = map(np.array, zip(*fg))
                    inv = low_rank_estimate(X, Gr)
                    updated = True
                fg, bg = bg, []
            if not low_rank and len(fg) >= 3:
                X, Gr = map(np.array, zip(*fg))
                est, ok = diag_estimate(X, Gr)
                inv = np.where(ok, np.clip(est, 1e-20, 1e20), inv)
                updated = True
            if updated:
                n_updates += 1
                if n_updates == 1:
                    first = it
        out.append(np.array(inv, copy=True))
    return np.array(out), first


def states(n, d, seed):
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.normal(size=d))
    Q = rng.normal(size=(n, d)) * scale
    G = Q / scale ** 2 + 0.3 * rng.normal(size=(n, d))
    div = rng.random(n) < 0.05
    Q[7, 1] = np.nan                    # a non-finite state is skipped
    return rng.normal(size=d), rng.normal(size=d), Q, G, div


@pytest.mark.parametrize("n_warmup", [60, 200, 400])
def test_the_diagonal_estimate_follows_the_numpy_reference(n_warmup):
    q0, g0, Q, G, div = states(n_warmup + 5, 4, seed=n_warmup)
    got, first = metric_adaptation_path(q0, g0, Q, G, div, n_warmup)
    want, want_first = reference_path(q0, g0, Q, G, div, n_warmup, low_rank=False)
    assert first == want_first
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # frozen for the last 15 %
    end = n_warmup - int(0.15 * n_warmup)
    assert np.all(got[end:] == got[end - 1])


@pytest.mark.parametrize("d", [3, 8, 30])
def test_the_low_rank_estimate_follows_the_numpy_reference(d):
    n_warmup = 300
    q0, g0, Q, G, div = states(n_warmup, d, seed=d)
    got, first = metric_adaptation_path(q0, g0, Q, G, div, n_warmup, low_rank=True)
    want, want_first = reference_path(q0, g0, Q, G, div, n_warmup, low_rank=True)
    assert first == want_first
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * np.abs(want).max())
    # the metric changes only at the switches
    changes = np.flatnonzero(np.any(np.diff(got, axis=0) != 0, axis=(1, 2))) + 1
    assert len(changes) >= 5
    for M in got[changes]:
        assert np.all(np.linalg.eigvalsh(M) > 0)


def test_on_a_gaussian_the_estimates_find_the_covariance():
    """Exact Gaussian draws: the diagonal estimate is the variance, the
    low-rank one the covariance (up to the [1/2, 2] cut and sampling error)."""
    rng = np.random.default_rng(5)
    d, n = 6, 400
    A = rng.normal(size=(d, d))
    C = A @ A.T + 0.1 * np.eye(d)
    X = rng.multivariate_normal(np.zeros(d), C, size=n)
    G = X @ np.linalg.inv(C)
    lr, _ = metric_adaptation_path(X[0], G[0], X[1:], G[1:], np.zeros(n - 1), 100,
                                   low_rank=True)
    M = lr[-1]
    # the adapted metric whitens the target: M^{-1/2} C M^{-1/2} near I
    w = np.linalg.eigvalsh(np.linalg.solve(M, C))
    assert w.max() / w.min() < 3.0, w
    assert np.linalg.cond(C) > 50


def test_the_chain_runs_with_the_adapted_metric_and_pickles_mid_warmup():
    pot = fs.models.StandardNormal(3)
    trace = new_trace(60, 3)
    for low_rank in (False, True):
        a = Chain(pot, pot, np.ones(3), np.random.default_rng(1), algorithm="nuts")
        a.start_metric_adaptation(60, low_rank=low_rank)
        a.start_adaptation(0.8)
        a.run(trace, 0, 30)
        b = pickle.loads(pickle.dumps(a))
        ta, tb = new_trace(60, 3), new_trace(60, 3)
        a.run(ta, 0, 30)
        b.run(tb, 0, 30)
        assert ta["draws"].tobytes() == tb["draws"].tobytes()
        if low_rank:
            assert isinstance(a.inv_metric, LowRankMetric) and a.inv_metric == b.inv_metric
            assert a.inv_metric.dense().shape == (3, 3)
        else:
            assert np.array_equal(a.inv_metric, b.inv_metric) and a.inv_metric.shape == (3,)


def test_a_factored_low_rank_metric_preconditions_exactly():
    """The chain's O(dim r) products (FS_METRIC_LOW_RANK): with M^{-1} the
    target's covariance (condition number ~1e5) the dynamics is isotropic,
    so long leapfrog steps are accepted almost always, and the draws have
    the target's moments."""
    rng = np.random.default_rng(3)
    d, r = 7, 3
    U, _ = np.linalg.qr(rng.normal(size=(d, r)))
    lr = LowRankMetric(np.exp(rng.normal(size=d)), [0.01, 4.0, 30.0], U)
    C = lr.dense()
    assert np.linalg.cond(C) > 1e4
    pot = fs.models.Gaussian(np.zeros(d), C)
    chain = Chain(pot, pot, np.zeros(d), np.random.default_rng(9), step_size=0.4,
                  n_steps=4, random_n_steps=True, inv_metric=lr)
    t = new_trace(4000, d)
    chain.run(t, 0, 4000)
    assert t["accept_prob"].mean() > 0.9
    x = t["draws"][None]
    z = x[0].mean(0) / np.sqrt(np.diag(C) / diagnostics.ess_bulk(x))
    assert np.all(np.abs(z) < 4.5), z
    ratio = x[0].var(0) / np.diag(C)
    assert np.all(np.abs(ratio - 1) < 0.15), ratio
    # a diagonal metric with the same sigma is far worse here
    chain = Chain(pot, pot, np.zeros(d), np.random.default_rng(9), step_size=0.4,
                  n_steps=4, random_n_steps=True, inv_metric=np.diag(C))
    t = new_trace(200, d)
    chain.run(t, 0, 200)
    assert t["accept_prob"].mean() < 0.5
    with pytest.raises(ValueError, match="orthonormal"):
        LowRankMetric(np.ones(d), [2.0], np.ones((d, 1)))
    with pytest.raises(ValueError, match="positive"):
        LowRankMetric(np.ones(d), [-1.0], U[:, :1])
    with pytest.raises(ValueError, match="dim"):
        Chain(pot, pot, np.zeros(d), np.random.default_rng(0)).set_inv_metric(
            LowRankMetric(np.ones(3), [], np.zeros((3, 0))))


def test_bad_adaptation_options():
    pot = fs.models.StandardNormal(2)
    with pytest.raises(ValueError, match="adaptation must be one of"):
        fs.NUTS(pot, adaptation="nutpie")
    with pytest.raises(TypeError, match="adaptation must be one of"):
        fs.NUTS(pot, adaptation=1)
    with pytest.raises(ValueError, match="low-rank"):
        fs.NUTS(pot, metric="low-rank", adaptation="stan")
    chain = Chain(pot, fs.models.StandardNormal(2), np.zeros(2), np.random.default_rng(0),
                  algorithm="hmc")
    with pytest.raises(ValueError, match="exact chain"):
        chain.start_metric_adaptation(10)
    with pytest.raises(ValueError, match="q0, g0"):
        metric_adaptation_path(np.zeros(2), np.zeros(3), np.zeros((1, 2)), np.zeros((1, 2)),
                               np.zeros(1), 10)


@pytest.mark.slow
@pytest.mark.parametrize("cls", list(pdb.MODELS.values()), ids=list(pdb.MODELS))
def test_nuts_with_its_default_adaptation_reproduces_posteriordb_references(data_dir, cls):
    """The default warm-up (adaptation="fisher", metric="low-rank") on the
    five references: R-hat at most 1.01, means and sds within MCSE."""
    model = cls.from_posteriordb(data_dir)
    res = fs.NUTS(pdb.as_potential(model), surrogate=False).sample(
        1000, 1000, chains=4, seed=7, progress=False)
    assert isinstance(res.inv_metric[0], LowRankMetric)
    assert np.max(diagnostics.rhat(res.draws)) <= 1.01
    compare_to_reference(res, cls.reference_draws(data_dir))


@pytest.mark.slow
@pytest.mark.parametrize("cls", [pdb.SBLRC_BLR, pdb.Garch11])
def test_nuts_with_the_fisher_diagonal_reproduces_posteriordb_references(data_dir, cls):
    model = cls.from_posteriordb(data_dir)
    res = fs.NUTS(pdb.as_potential(model), surrogate=False, adaptation="fisher",
                  metric="diag").sample(1000, 1000, chains=4, seed=7, progress=False)
    assert res.inv_metric[0].ndim == 1
    assert np.max(diagnostics.rhat(res.draws)) <= 1.01
    compare_to_reference(res, cls.reference_draws(data_dir))
