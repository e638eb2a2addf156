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


def blocks_agree(prev, block, factor=2.0):
    """Every coordinate's sqrt(Var q / Var g) within `factor` between blocks."""
    (Xp, Gp), (Xc, Gc) = (map(np.array, zip(*b)) for b in (prev, block))
    vp, vc = Xp.var(0) / Gp.var(0), Xc.var(0) / Gc.var(0)
    ok = (Xp.var(0) > 0) & (Gp.var(0) > 0) & (Xc.var(0) > 0) & (Gc.var(0) > 0)
    return bool(np.all(ok) and np.all(np.abs(np.log(vc / vp)) <= 2 * np.log(factor)))


def reference_path(q0, g0, Q, G, divergent, n_warmup, low_rank, stop_early=False):
    """The metric after each state, and each state's code (1: the first
    update, 2: two blocks of 80 states agree and set the final metric,
    3: the warm-up is over, floor(0.15 n_warmup) iterations after that)."""
    d = len(q0)
    early_end = np.floor(0.3 * n_warmup)
    metric_end = n_warmup - np.floor(0.15 * n_warmup)
    warmup_end, converged_at = n_warmup, None
    fg, bg = [(q0, g0)], [(q0, g0)]
    block, prev = [], None
    ag = np.abs(g0)
    diag = np.clip(np.where(ag > 0, 1 / np.where(ag > 0, ag, 1), 1.0), 1e-20, 1e20)
    inv = np.diag(diag) if low_rank else diag
    out, codes, n_updates = [], [], 0
    for it, (q, g, dv) in enumerate(zip(Q, G, divergent)):
        code = 0
        if converged_at is not None:
            code = 3 if it + 1 >= warmup_end else 0
        elif it < metric_end:
            fed = not dv and np.all(np.isfinite(q)) and np.all(np.isfinite(g))
            if fed:
                fg.append((q, g))
                bg.append((q, g))
                if stop_early:
                    block.append((q, g))
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
                code = 1 if n_updates == 1 else 0
            if fed and stop_early and len(block) >= 80:
                if prev is not None and it + 1 < metric_end and blocks_agree(prev, block):
                    X, Gr = map(np.array, zip(*(prev + block)))
                    if low_rank:
                        inv = low_rank_estimate(X, Gr)
                    else:
                        est, ok = diag_estimate(X, Gr)
                        inv = np.where(ok, np.clip(est, 1e-20, 1e20), inv)
                    last = warmup_end - metric_end
                    converged_at, warmup_end, code = it + 1, it + 1 + last, 2
                    metric_end = it + 1
                    n_updates += 1
                else:
                    prev, block = block, []
        out.append(np.array(inv, copy=True))
        codes.append(code)
    return np.array(out), np.array(codes)


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
    got, codes = metric_adaptation_path(q0, g0, Q, G, div, n_warmup)
    want, want_codes = reference_path(q0, g0, Q, G, div, n_warmup, low_rank=False)
    assert codes.tolist() == want_codes.tolist() and np.sum(codes == 1) == 1
    np.testing.assert_allclose(got, want, rtol=1e-9)
    # frozen for the last 15 %
    end = n_warmup - int(0.15 * n_warmup)
    assert np.all(got[end:] == got[end - 1])


@pytest.mark.parametrize("d", [3, 8, 30])
def test_the_low_rank_estimate_follows_the_numpy_reference(d):
    n_warmup = 300
    q0, g0, Q, G, div = states(n_warmup, d, seed=d)
    got, codes = metric_adaptation_path(q0, g0, Q, G, div, n_warmup, low_rank=True)
    want, want_codes = reference_path(q0, g0, Q, G, div, n_warmup, low_rank=True)
    assert codes.tolist() == want_codes.tolist()
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * np.abs(want).max())
    # the metric changes only at the switches
    changes = np.flatnonzero(np.any(np.diff(got, axis=0) != 0, axis=(1, 2))) + 1
    assert len(changes) >= 5
    for M in got[changes]:
        assert np.all(np.linalg.eigvalsh(M) > 0)


def drifting_states(n, d, seed, drift=200):
    """States whose scale shrinks by a factor 20 over the first `drift`
    (a chain on its way in), then stationary."""
    q0, g0, Q, G, div = states(n, d, seed)
    shrink = np.concatenate([np.geomspace(20.0, 1.0, drift), np.ones(n - drift)])[:, None]
    return q0, g0, Q * shrink, G / shrink, div


@pytest.mark.parametrize("low_rank,d", [(False, 4), (False, 30), (True, 3), (True, 12)])
def test_the_end_of_the_warmup_follows_the_numpy_reference(low_rank, d):
    """stop_early: blocks of 80 states compared; the first pair that agrees
    sets the final metric from both, and the warm-up ends 15 % of n_warmup
    later (the fixed schedule's last phase)."""
    n_warmup = 1000
    q0, g0, Q, G, div = drifting_states(700, d, seed=10 + d)
    got, codes = metric_adaptation_path(q0, g0, Q, G, div, n_warmup, low_rank=low_rank,
                                        stop_early=True)
    want, want_codes = reference_path(q0, g0, Q, G, div, n_warmup, low_rank, stop_early=True)
    assert codes.tolist() == want_codes.tolist()
    scale = np.abs(want).max() if low_rank else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * scale)
    # the drift keeps the first blocks apart; stationary ones agree
    at = int(np.flatnonzero(codes == 2)[0])
    assert 240 <= at + 1 <= 480, at
    assert np.flatnonzero(codes == 3).tolist()[0] == at + 150
    assert np.all(got[at:] == got[at])                     # frozen from there
    # without stop_early the same states run the fixed schedule
    fixed, fixed_codes = metric_adaptation_path(q0, g0, Q, G, div, n_warmup,
                                                low_rank=low_rank)
    assert not np.any(fixed_codes >= 2)
    np.testing.assert_array_equal(fixed[:at], got[:at])


def test_the_warmup_does_not_end_early_when_its_ceiling_is_near():
    """Agreement counts only before the fixed schedule freezes the metric
    (the last 15 %)."""
    q0, g0, Q, G, div = states(400, 4, seed=3)
    _, codes = metric_adaptation_path(q0, g0, Q, G, div, 188, stop_early=True)
    assert not np.any(codes >= 2)          # 160 states: the metric frozen at 160
    _, codes = metric_adaptation_path(q0, g0, Q, G, div, 400, stop_early=True)
    assert np.any(codes == 2)


def test_nuts_ends_its_warmup_on_convergence():
    """The default warm-up ends per chain when two blocks agree; the draws
    keep the target's moments; "fixed" keeps n_warmup rows, and the
    option's misuse is refused."""
    rng = np.random.default_rng(2)
    d = 8
    A = rng.normal(size=(d, d))
    cov = A @ A.T / d + np.diag(np.geomspace(0.01, 100, d))
    pot = fs.models.Gaussian(np.zeros(d), cov)
    res = fs.NUTS(pot, surrogate=False).sample(2000, 1000, chains=4, seed=3, progress=False)
    at = res.info["warmup_converged_at"]
    assert all(a is not None for a in at), at
    assert res.warmup_n_done.tolist() == [a + 150 for a in at]
    assert max(res.warmup_n_done) < 700
    assert np.all(np.isnan(res.warmup_draws[0, res.warmup_n_done[0]:]))
    assert not res.interrupted and res.n_done.tolist() == [2000] * 4
    assert np.max(diagnostics.rhat(res.draws)) <= 1.01
    x = res.draws.reshape(-1, d)
    ess = diagnostics.ess_bulk(res.draws)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(x.mean(0)) <= 4 * sd / np.sqrt(ess)), (x.mean(0) / sd, ess)
    ess_sq = diagnostics.ess_bulk(res.draws ** 2)
    var_se = np.sqrt(2) * np.diag(cov) / np.sqrt(ess_sq)
    assert np.all(np.abs(x.var(0) - np.diag(cov)) <= 4 * var_se)
    fixed = fs.NUTS(pot, surrogate=False, warmup_end="fixed").sample(
        100, 300, chains=1, seed=3, progress=False, warn=False)
    assert fixed.warmup_n_done.tolist() == [300] and "warmup_converged_at" not in fixed.info
    with pytest.raises(ValueError, match="warmup_end"):
        fs.NUTS(pot, adaptation="stan", warmup_end="converged")
    with pytest.raises(ValueError, match="warmup_end must be one of"):
        fs.RNSHMC(pot, warmup_end="converged")
    assert fs.NUTS(pot, adaptation="stan").warmup_end == "fixed"
    assert fs.RNSHMC(pot).warmup_end == "fixed"


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
