"""The surrogate samplers on issue 38's 5-d target (tests/_targets.py): a
banana block, a skew-normal coordinate and a mild funnel block, with
analytic moments.  Each block is hard for a surrogate in its own way; the
funnel's steep neck once made VHMC's exp(-V) leak to |q| of 1e2 to 3e4 and
ARNS-HMC's online recursion blow up.

One seed per method here (bench/five_d.py runs five).  The exact samplers'
means and standard deviations are compared with the truth in units of their
Monte Carlo standard errors, at 4 (ten statistics per run).
"""
import warnings

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.diagnostics import rhat, mcse_mean, mcse_sd

from _targets import five_d


def _run(method, seed=1, **kw):
    pot, mean, sd = five_d()
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        res = fs.sample(pot, method=method, n_draws=4000, n_warmup=2000, chains=4, seed=seed,
                        progress=False, **kw)
    return res, mean, sd, [str(w.message) for w in caught]


@pytest.mark.slow
@pytest.mark.parametrize("method, kw", [("rns-hmc", {}), ("arns-hmc", {}), ("nnghmc", {})])
def test_exact_surrogate_samplers_match_the_five_d_truth(method, kw):
    res, mean, sd, _ = _run(method, **kw)
    D = res.draws
    assert res.exact
    assert np.max(rhat(D)) <= 1.01
    z_mean = (D.mean(axis=(0, 1)) - mean) / np.asarray(mcse_mean(D))
    z_sd = (D.std(axis=(0, 1)) - sd) / np.asarray(mcse_sd(D))
    assert np.all(np.abs(z_mean) < 4), z_mean
    assert np.all(np.abs(z_sd) < 4), z_sd
    # no chain stuck: every chain accepts about as often as the others
    acc = np.nanmean(res.stats["accept_prob"], axis=1)
    assert acc.min() > 0.5, acc


@pytest.mark.parametrize("seed", [1, 2])
def test_default_vhmc_has_no_drifting_chain_on_the_five_d_target(seed):
    """Seed 2 on an Intel Xeon: with V frozen at t0 (learn_outside=False) one
    chain spent 32 % of its draws beyond its training ball, in spurious
    mass of exp(-V) (R-hat 1.12)."""
    res, mean, sd, caught = _run("vhmc", seed=seed)
    D = res.draws
    assert not res.exact
    # every chain stays where the posterior is: no chain in a far region of exp(-V)
    assert np.abs(D).max() < 10 and np.max(rhat(D)) <= 1.01
    for c in range(4):
        assert np.all(np.abs(D[c].mean(axis=0) - mean) < 0.25 * sd + 0.1)
    # the surrogate is approximate: its error against the truth (seed 1: means
    # within 0.04 sd, sds up to 3 % low, the funnel coordinate's 12 %; bench/five_d.py)
    err_mean = np.abs(D.mean(axis=(0, 1)) - mean) / sd
    err_sd = D.std(axis=(0, 1)) / sd - 1
    assert err_mean.max() < 0.15 and np.all(np.abs(err_sd) < 0.2), (err_mean, err_sd)
    # the training region is recorded; few draws fall beyond it
    assert len(res.info["outside_training"]) == 4
    assert max(res.info["outside_training"]) < 0.05


def test_vhmc_exact_mixes_on_the_five_d_target():
    """exact=True with the default s (400 here) after its default warm-up
    (surrogate NUTS's, input scale chosen on held-out points): every mean
    and sd, the funnel's included, within 4 MCSE (with s = 100, the old
    floor, the funnel sd was 3.6 to 5.7 MCSE low in 4 of 5 seeds;
    bench/five_d.py).  After the paper's warm-up the funnel's sd can come
    out 7-8 MCSE low with R-hat 1.001 (VHMC's ``warmup``), so that warm-up
    is not the default of ``exact=True``."""
    res, mean, sd, caught = _run("vhmc", exact=True)
    assert "warmup" in res.info and res.info["input_scale"] in (0.15, 0.4, 1.0)
    D = res.draws
    assert res.exact and res.info["n_hidden"] == 400 and np.max(rhat(D)) <= 1.01
    z_mean = (D.mean(axis=(0, 1)) - mean) / np.asarray(mcse_mean(D))
    z_sd = (D.std(axis=(0, 1)) - sd) / np.asarray(mcse_sd(D))
    assert np.all(np.abs(z_mean) < 4), z_mean
    assert np.all(np.abs(z_sd) < 4), z_sd


def test_paper_vhmc_surrogate_drifts_and_the_run_says_so():
    """laplace_tail=False, the paper's V_t = mu z + (1 - mu) Laplace: on this
    target chains leave for far regions of exp(-V) (the reason for the
    default), and the run's warnings say so."""
    res, mean, sd, caught = _run("vhmc", laplace_tail=False)
    assert np.abs(res.draws).max() > 20
    assert any("R-hat" in m for m in caught)


def test_run_warnings_report_chains_that_stopped_moving():
    from fastsurrogate.diagnostics.checks import run_warnings

    class R:
        pass
    rng = np.random.default_rng(0)
    r = R()
    r.draws = rng.normal(size=(3, 400, 2))
    r.draws[1, 1:] = r.draws[1, 0]          # never moved
    r.draws[2] = np.repeat(rng.normal(size=(10, 2)), 40, axis=0)   # moved 9 times in 400
    r.param_names, r.stats, r.info = ["a", "b"], {}, {"warnings": ["the sampler's own"]}
    out = run_warnings(r)
    assert any("[1] never moved" in m for m in out)
    assert any("[2] moved in only 2.3%" in m for m in out)
    assert "the sampler's own" in out


def _funnel_blind_drive(q):
    """The 5-d potential with the funnel's coupling replaced by a unit
    Gaussian in q4: a drive that is badly wrong in the funnel block."""
    from _targets import _five_d
    u, g = _five_d(q)
    e = np.exp(-q[3])
    g = g.copy()
    g[3] += 0.5 * q[4] ** 2 * e
    g[4] = q[4]
    return u - 0.5 * q[4] ** 2 * e + 0.5 * q[4] ** 2, g


def test_a_wrong_surrogate_drive_leaves_the_target_invariant():
    """The surrogate-driven kernel (drive: a network or any potential; judge:
    the exact U) is exact whatever the drive: chains started from exact
    draws of the 5-d target are still exact draws after a few iterations.
    So a surrogate sampler's low tail sds here come from its mixing, not
    from a wrong target.  (The same drive in 4 x (1000 + 40000) runs gave
    the funnel sd 5-12 % low with R-hat <= 1.006 and z down to -8.6:
    mixing in the tails that the MCSE does not see; Intel Xeon.)"""
    from fastsurrogate.core._hmc import Chain, new_trace
    from _targets import five_d_draws
    pot, _, _ = five_d()
    drive = fs.Potential.from_callable(_funnel_blind_drive, 5)
    rng = np.random.default_rng(2026)
    M, T = 10000, 5
    Q0 = five_d_draws(M, rng)
    chain = Chain(drive, pot, Q0[0], rng, step_size=0.575, n_steps=10, random_n_steps=True)
    trace = new_trace(T, 5)
    QT, acc = np.empty_like(Q0), 0.0
    with np.errstate(all="ignore"):
        for m in range(M):
            chain.set_position(Q0[m])
            chain.run(trace, 0, T)
            QT[m] = chain.position
            acc += trace["accept_prob"].mean() / M
    assert 0.3 < acc < 0.7          # it moves, and its drive is visibly wrong
    for f in (lambda Q: Q, lambda Q: Q ** 2):
        d = f(QT) - f(Q0)           # paired: E f(X_T) - E f(X_0) = 0 when exact
        z = d.mean(axis=0) / (d.std(axis=0) / np.sqrt(M))
        assert np.all(np.abs(z) < 4), z
