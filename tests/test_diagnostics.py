"""Tests for fastsurrogate.diagnostics.

The rank-normalised diagnostics (bulk/tail ESS, R-hat, MCSE of mean and sd)
are compared with ArviZ on the same AR(1) draws to 1e-6 relative.

``ess_geyer`` is *not* compared with ``arviz.ess(method="mean")``: that one
(a) splits every chain in two halves, (b) adds the even-lag autocorrelation
of the first dropped pair to Geyer's sum (Stan's estimator), and (c) takes
the unbiased within-chain variance W in rho_t = 1 - (W - acov_t) / var_plus,
which shifts every rho_t by about -1/(n-1), so even for one chain it is not
exactly Geyer's.  The RNS-HMC definition is Geyer's ``1 + 2 sum_k rho_k`` on
the raw draws.  So ``ess_geyer`` is checked against an independent loop-based NumPy
reference written here (direct lag-by-lag autocovariances, no FFT), the
reference itself is checked against ArviZ in its Stan form (both with and
without splitting), and ``ess_geyer`` is checked against the AR(1) truth
``ESS = B (1 - phi) / (1 + phi)`` within a Monte Carlo tolerance.
"""

import math
import warnings

import numpy as np
import pytest
from scipy.signal import lfilter

from fastsurrogate import diagnostics as dg

PHIS = [0.0, 0.5, 0.9, -0.3]          # -0.3: antithetic chains, ESS > B
SHAPES = [(1, 1000), (4, 1000), (4, 1001), (3, 4), (2, 5), (2, 7)]
RTOL = 1e-6


def ar1(phi, chains, draws, dim=None, seed=0, loc=0.0):
    """Stationary AR(1) chains with unit marginal variance.

    x_t = phi x_{t-1} + sqrt(1 - phi^2) e_t,  x_0 ~ N(0, 1).
    Shape (chains, draws) or (chains, draws, dim).
    """
    rng = np.random.default_rng(seed)
    shape = (chains, draws) if dim is None else (chains, draws, dim)
    e = rng.standard_normal(shape)
    e[:, 0] /= math.sqrt(1.0 - phi ** 2)
    return loc + lfilter([math.sqrt(1.0 - phi ** 2)], [1.0, -phi], e, axis=1)


def cases():
    return [pytest.param(phi, chains, draws, id=f"phi{phi}-{chains}x{draws}")
            for phi in PHIS for chains, draws in SHAPES]


def draws_for(phi, chains, draws):
    seed = 1000 * chains + draws + int(round(100 * (phi + 1)))
    return ar1(phi, chains, draws, seed=seed, loc=1.5)


# ----------------------------------------------------------------------------
# independent reference for the multi-chain Geyer / Stan ESS
# ----------------------------------------------------------------------------

def reference_ess(x, stan=False, split=False):
    """Loop-based ESS of (chains, draws) draws, written from the definitions.

    Autocovariances (divide by n) are computed lag by lag as dot products and
    only as far as the truncation needs them.  Multi-chain autocorrelation
    rho_t = 1 - (W - mean_c acov_c(t)) / var_plus, with
    var_plus = (n-1)/n mean_c s_c^2 + var(chain means) and W = mean_c acov_c(0)
    (Geyer: rho_t = acov(t)/acov(0) for one chain) or, in Stan's form, the
    unbiased W = mean_c s_c^2.  Pair sums
    P_m = rho_2m + rho_2m+1 are taken while the previous one is positive and
    while 2m + 2 < n (the pairs Stan's loop can reach); the last one taken,
    P_M, is the first non-positive one or the last reachable one and is left
    out.  P_0..P_{M-1} are made monotone (running minimum) and
    tau = -1 + 2 sum P_m.  Stan's form also adds rho_2M when it is positive
    or P_M >= 0.  tau is always bounded below by 1 / log10(chains * draws).
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    if split:
        half = x.shape[1] // 2
        x = np.vstack([x[:, :half], x[:, x.shape[1] - half:]])
    chains, n = x.shape
    centred = x - x.mean(axis=1, keepdims=True)

    def acov(t):
        return np.mean([centred[c, : n - t] @ centred[c, t:] / n for c in range(chains)])

    var_plus = acov(0)
    if chains > 1:
        var_plus += np.var(x.mean(axis=1), ddof=1)
    within = acov(0) * n / (n - 1) if stan else acov(0)

    def rho(t):
        return 1.0 if t == 0 else 1.0 - (within - acov(t)) / var_plus

    pairs = [rho(0) + rho(1)]
    while pairs[-1] > 0 and 2 * len(pairs) + 2 < n:
        m = len(pairs)
        pairs.append(rho(2 * m) + rho(2 * m + 1))
    last = len(pairs) - 1
    kept = pairs[:last]
    for m in range(1, len(kept)):
        kept[m] = min(kept[m], kept[m - 1])
    tau = -1.0 + 2.0 * sum(kept)
    if stan:
        even = rho(2 * last)
        if even > 0 or pairs[last] >= 0:
            tau += even
    tau = max(tau, 1.0 / math.log10(chains * n))
    return chains * n / tau


# ----------------------------------------------------------------------------
# comparisons with ArviZ
# ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def az():
    arviz = pytest.importorskip("arviz")
    # ArviZ switches to numba kernels when numba is installed (the test extra
    # brings it for nutpie); its numba mcse_sd fails under NumPy 2.4 ("only
    # 0-dimensional arrays can be converted"), so the reference runs ArviZ's
    # NumPy code, as it does without numba.
    numba_switch = getattr(arviz, "Numba", None)
    if numba_switch is not None and getattr(numba_switch, "numba_flag", False):
        numba_switch.disable_numba()
        yield arviz
        numba_switch.enable_numba()
    else:
        yield arviz


@pytest.mark.parametrize("phi,chains,draws", cases())
def test_ess_bulk_matches_arviz(az, phi, chains, draws):
    x = draws_for(phi, chains, draws)
    assert dg.ess_bulk(x) == pytest.approx(az.ess(x, method="bulk"), rel=RTOL)


def split_tail_indicator_is_constant(x):
    q = np.quantile(x, [0.05, 0.95])
    half = x.shape[1] // 2
    split = np.concatenate([x[:, :half], x[:, x.shape[1] - half:]])
    return any(np.all(split <= qi) or not np.any(split <= qi) for qi in q)


@pytest.mark.parametrize("phi,chains,draws", cases())
def test_ess_tail_matches_arviz(az, phi, chains, draws):
    x = draws_for(phi, chains, draws)
    if split_tail_indicator_is_constant(x):
        # Documented difference: with very few draws the split 5% or 95%
        # indicator can be constant; its ESS is undefined.  We return nan
        # (as the posterior R package does); ArviZ counts it as B draws.
        assert np.isnan(dg.ess_tail(x))
        assert draws < 10
        return
    assert dg.ess_tail(x) == pytest.approx(az.ess(x, method="tail"), rel=RTOL)


@pytest.mark.parametrize("phi,chains,draws", cases())
def test_rhat_matches_arviz(az, phi, chains, draws):
    x = draws_for(phi, chains, draws)
    if chains == 1:
        # Documented difference: ArviZ needs two chains; we use the two halves.
        assert np.isnan(az.rhat(x, method="rank"))
        assert np.isfinite(dg.rhat(x))
        return
    assert dg.rhat(x) == pytest.approx(az.rhat(x, method="rank"), rel=RTOL)


@pytest.mark.parametrize("phi,chains,draws", cases())
def test_mcse_mean_matches_arviz(az, phi, chains, draws):
    x = draws_for(phi, chains, draws)
    assert dg.mcse_mean(x) == pytest.approx(az.mcse(x, method="mean"), rel=RTOL)


@pytest.mark.parametrize("phi,chains,draws", cases())
def test_mcse_sd_matches_arviz(az, phi, chains, draws):
    # ArviZ >= 0.15 uses the delta-method formula without normality
    # (checked against ArviZ 0.23.4).
    x = draws_for(phi, chains, draws)
    assert dg.mcse_sd(x) == pytest.approx(az.mcse(x, method="sd"), rel=RTOL)


def test_vectorised_over_parameters_matches_arviz(az):
    # Different phi per parameter in one (chains, draws, dim) array.
    x = np.stack([ar1(phi, 4, 800, seed=i) for i, phi in enumerate(PHIS)], axis=-1)
    x[..., 1] *= 3.0
    got = {
        "bulk": dg.ess_bulk(x), "tail": dg.ess_tail(x), "rhat": dg.rhat(x),
        "mcse_mean": dg.mcse_mean(x), "mcse_sd": dg.mcse_sd(x),
    }
    for name, values in got.items():
        assert values.shape == (len(PHIS),)
    for j in range(len(PHIS)):
        xj = x[..., j]
        assert got["bulk"][j] == pytest.approx(az.ess(xj, method="bulk"), rel=RTOL)
        assert got["tail"][j] == pytest.approx(az.ess(xj, method="tail"), rel=RTOL)
        assert got["rhat"][j] == pytest.approx(az.rhat(xj), rel=RTOL)
        assert got["mcse_mean"][j] == pytest.approx(az.mcse(xj), rel=RTOL)
        assert got["mcse_sd"][j] == pytest.approx(az.mcse(xj, method="sd"), rel=RTOL)


def test_one_chain_1d_input_matches_arviz(az):
    x = ar1(0.5, 1, 600, seed=11)[0]
    assert dg.ess_bulk(x) == pytest.approx(az.ess(x[None], method="bulk"), rel=RTOL)
    assert dg.ess_tail(x) == pytest.approx(az.ess(x[None], method="tail"), rel=RTOL)
    assert dg.mcse_mean(x) == pytest.approx(az.mcse(x[None]), rel=RTOL)


def test_summary_matches_arviz_summary(az):
    # Even number of draws: az.summary folds about the median of the unsplit
    # draws while az.rhat uses the split draws; the two agree for even draws.
    x = np.stack([ar1(phi, 4, 1000, seed=20 + i) for i, phi in enumerate(PHIS)], axis=-1)
    table = dg.summary(x)
    ref = az.summary(x, round_to="none")
    for col in ("mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"):
        np.testing.assert_allclose(table[col], ref[col].to_numpy(), rtol=RTOL, err_msg=col)
    assert table.names == list(ref.index)


def test_autocorrelation_matches_arviz(az):
    x = ar1(0.7, 1, 500, seed=3)[0]
    np.testing.assert_allclose(dg.autocorrelation(x), az.autocorr(x), rtol=1e-8, atol=1e-12)


# ----------------------------------------------------------------------------
# Geyer ESS: reference, ArviZ's documented differences, AR(1) truth
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("phi,chains,draws", cases())
def test_ess_geyer_matches_reference(phi, chains, draws):
    x = draws_for(phi, chains, draws)
    assert dg.ess_geyer(x) == pytest.approx(reference_ess(x), rel=1e-8)


@pytest.mark.parametrize("phi,chains,draws", cases())
def test_reference_in_stan_form_matches_arviz(az, phi, chains, draws):
    # Validates the reference: in Stan's form it is ArviZ's ESS on raw draws
    # ("identity") and, after splitting, ArviZ's "mean" ESS.
    x = draws_for(phi, chains, draws)
    assert reference_ess(x, stan=True) == pytest.approx(
        az.ess(x, method="identity"), rel=1e-8)
    assert reference_ess(x, stan=True, split=True) == pytest.approx(
        az.ess(x, method="mean"), rel=1e-8)


def test_ess_geyer_differs_from_arviz_mean_only_by_documented_details(az):
    x = ar1(0.9, 4, 1001, seed=5)
    geyer = dg.ess_geyer(x)
    assert geyer != pytest.approx(az.ess(x, method="mean"), rel=1e-6)
    # ... but they estimate the same thing.
    assert geyer == pytest.approx(az.ess(x, method="mean"), rel=0.1)


def test_ess_geyer_one_chain_is_classical_geyer():
    # One chain: rho_k is the ordinary autocorrelation; sum pairs until the
    # first non-positive one, after a running minimum.
    x = ar1(0.6, 1, 3000, seed=8)[0]
    rho = dg.autocorrelation(x)
    pairs = rho[0:-1:2] + rho[1::2]
    stop = int(np.argmax(pairs <= 0))
    tau = -1.0 + 2.0 * np.minimum.accumulate(pairs[:stop]).sum()
    assert dg.ess_geyer(x) == pytest.approx(x.size / tau, rel=1e-10)


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9, -0.3, -0.6])
def test_ess_geyer_recovers_ar1_truth(phi):
    """ESS of AR(1) is B (1 - phi) / (1 + phi).

    Tolerance: ESS_hat / ESS = tau / tau_hat, and tau_hat is a truncated
    (rectangular-window) lag-window estimate of the spectral density at 0,
    whose relative variance is about 2 (2K + 1) / B (Bartlett; twice the
    value away from frequency 0).  Geyer's rule truncates near the lag where
    |phi|^K = B^{-1/2}, the noise level of rho_k, plus a couple of noisy
    pairs: K = ceil(log(B^{-1/2}) / log|phi|) + 4.  Truncation and
    mean-estimation bias are O(B^{-1/2}); allow 3 B^{-1/2}.  dim independent
    replicates: each within 5 sigma, their mean within 4 sigma / sqrt(dim).
    """
    chains, draws, dim = 4, 20_000, 16
    x = ar1(phi, chains, draws, dim=dim, seed=1234)
    total = chains * draws
    truth = total * (1.0 - phi) / (1.0 + phi)
    lag = 0 if phi == 0 else math.ceil(math.log(total ** -0.5) / math.log(abs(phi)))
    sigma = math.sqrt(2.0 * (2 * (lag + 4) + 1) / total)
    bias = 3.0 / math.sqrt(total)
    ratio = dg.ess_geyer(x) / truth
    assert ratio.shape == (dim,)
    assert np.all(np.abs(ratio - 1.0) < 5.0 * sigma + bias), ratio
    assert abs(ratio.mean() - 1.0) < 4.0 * sigma / math.sqrt(dim) + bias


def test_antithetic_chains_have_ess_above_draws():
    x = ar1(-0.3, 4, 5000, seed=2)
    assert dg.ess_geyer(x) > x.size
    assert dg.ess_bulk(x) > x.size


def test_ess_geyer_bounded_for_extreme_antithetic_chains():
    # Alternating chains: tau -> 0; bounded below by 1/log10(B).
    x = np.tile([1.0, -1.0], (2, 50)) + np.random.default_rng(0).normal(0, 1e-3, (2, 100))
    assert dg.ess_geyer(x) <= x.size * math.log10(x.size) * (1 + 1e-12)


# ----------------------------------------------------------------------------
# R-hat behaviour
# ----------------------------------------------------------------------------

def test_rhat_near_one_for_mixed_chains():
    assert dg.rhat(ar1(0.5, 4, 2000, seed=9)) < 1.01


def test_rhat_detects_shifted_chain():
    x = ar1(0.0, 4, 1000, seed=4)
    x[0] += 2.0
    assert dg.rhat(x) > 1.1


def test_rhat_detects_chain_with_different_scale_through_folding():
    x = ar1(0.0, 4, 1000, seed=3)
    x[0] *= 3.0
    assert dg.rhat(x) > 1.1


def test_rhat_one_chain_uses_its_halves():
    x = np.concatenate([np.zeros(500), np.full(500, 5.0)])
    x = x + np.random.default_rng(0).normal(0, 0.1, 1000)
    assert dg.rhat(x) > 1.5
    assert dg.rhat(ar1(0.0, 1, 1000, seed=1)) < 1.05


# ----------------------------------------------------------------------------
# autocorrelation
# ----------------------------------------------------------------------------

def test_autocorrelation_matches_direct_sum():
    x = ar1(0.5, 1, 257, seed=6)[0]
    c = x - x.mean()
    direct = np.array([c[: c.size - k] @ c[k:] for k in range(c.size)]) / (c @ c)
    np.testing.assert_allclose(dg.autocorrelation(x), direct, rtol=1e-9, atol=1e-12)


def test_autocorrelation_of_ar1_is_geometric():
    phi, n = 0.8, 100_000
    rho = dg.autocorrelation(ar1(phi, 1, n, seed=7)[0])
    lags = np.arange(1, 6)
    # Bartlett: sd(rho_hat_k) <= sqrt((1 + phi^2) / (1 - phi^2) / n); 5 sigma.
    tol = 5.0 * math.sqrt((1 + phi ** 2) / (1 - phi ** 2) / n)
    np.testing.assert_allclose(rho[lags], phi ** lags, atol=tol)
    assert rho[0] == 1.0


# ----------------------------------------------------------------------------
# degenerate input, validation
# ----------------------------------------------------------------------------

STATS = [dg.ess_geyer, dg.ess_bulk, dg.ess_tail, dg.rhat, dg.mcse_mean, dg.mcse_sd]


@pytest.mark.parametrize("func", STATS, ids=lambda f: f.__name__)
def test_constant_chains_give_nan_without_warnings(func):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(func(np.full((4, 100), 2.5)))
        out = func(np.full((2, 50, 3), -1.0))
        assert out.shape == (3,) and np.all(np.isnan(out))


def test_constant_parameter_in_summary_and_others_unaffected():
    x = ar1(0.3, 4, 400, dim=3, seed=12)
    x[..., 1] = 7.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = dg.summary(x)
        assert np.isnan(dg.autocorrelation(np.ones(10))).all()
    for col in ("mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "ess", "r_hat"):
        assert np.isnan(table[col][1]), col
        assert np.all(np.isfinite(table[col][[0, 2]])), col
    assert table["mean"][1] == 7.0 and table["sd"][1] == 0.0


def test_chains_each_constant_but_different_give_infinite_rhat():
    x = np.repeat(np.arange(4.0)[:, None], 100, axis=1)
    assert dg.rhat(x) == np.inf


@pytest.mark.parametrize("func", STATS, ids=lambda f: f.__name__)
def test_per_parameter_input_validation(func):
    with pytest.raises(ValueError, match="ndim"):
        func(np.zeros((2, 10, 3, 2)))
    with pytest.raises(ValueError, match="ndim"):
        func(np.float64(1.0))
    with pytest.raises(ValueError, match="at least 4 draws"):
        func(np.random.default_rng(0).normal(size=(4, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        func(np.array([[0.0, 1.0, np.nan, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="non-finite"):
        func(np.array([0.0, 1.0, np.inf, 2.0, 3.0]))
    with pytest.raises(TypeError, match="real numbers"):
        func(np.array(["a", "b", "c", "d"]))
    with pytest.raises(TypeError, match="real"):
        func(np.ones(8, dtype=complex))
    with pytest.raises(ValueError, match="no chains"):
        func(np.zeros((0, 10)))


def test_scalar_and_vector_returns():
    x = ar1(0.2, 2, 100, seed=1)
    assert isinstance(dg.ess_bulk(x), float)
    assert isinstance(dg.ess_geyer(x[0]), float)
    assert dg.rhat(x[..., None]).shape == (1,)


def test_autocorrelation_validation():
    with pytest.raises(ValueError, match="shape"):
        dg.autocorrelation(np.zeros((2, 10)))
    with pytest.raises(ValueError, match="at least 2"):
        dg.autocorrelation(np.zeros(1))
    with pytest.raises(ValueError, match="non-finite"):
        dg.autocorrelation(np.array([1.0, np.nan, 2.0]))
    with pytest.raises(TypeError):
        dg.autocorrelation(["a", "b"])


def test_summary_validation():
    with pytest.raises(ValueError, match="chains, draws, dim"):
        dg.summary(np.zeros((4, 100)))
    with pytest.raises(ValueError, match="names"):
        dg.summary(np.zeros((2, 10, 3)), names=["a", "b"])
    with pytest.raises(TypeError, match="names"):
        dg.summary(np.zeros((2, 10, 1)), names="a")
    with pytest.raises(ValueError, match="at least 4 draws"):
        dg.summary(np.zeros((2, 3, 1)))


# ----------------------------------------------------------------------------
# summary table
# ----------------------------------------------------------------------------

def test_summary_columns_equal_the_functions():
    x = ar1(0.4, 3, 501, dim=4, seed=21)
    table = dg.summary(x, names=["a", "b", "c", "d"])
    np.testing.assert_allclose(table["mean"], x.reshape(-1, 4).mean(axis=0))
    np.testing.assert_allclose(table["sd"], x.reshape(-1, 4).std(axis=0, ddof=1))
    for col, func in [("mcse_mean", dg.mcse_mean), ("mcse_sd", dg.mcse_sd),
                      ("ess_bulk", dg.ess_bulk), ("ess_tail", dg.ess_tail),
                      ("ess", dg.ess_geyer), ("r_hat", dg.rhat)]:
        np.testing.assert_allclose(table[col], func(x), rtol=1e-12, err_msg=col)
    assert list(table["names"]) == ["a", "b", "c", "d"]
    assert len(table) == 4


def test_summary_table_api():
    x = ar1(0.4, 2, 100, dim=3, seed=22)
    table = dg.summary(x)
    assert table.names == ["x[0]", "x[1]", "x[2]"]
    d = table.to_dict()
    assert set(d) == {"names", "mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk",
                      "ess_tail", "ess", "r_hat"}
    assert all(d[k].shape == (3,) for k in d if k != "names")
    d["mean"][:] = 0.0                       # a copy: the table is unchanged
    assert not np.all(table["mean"] == 0.0)
    with pytest.raises(KeyError, match="unknown column"):
        table["hdi"]
    text = str(table)
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[0].split() == list(dg.SummaryTable.columns)
    assert lines[1].startswith("x[0]")
    # right-aligned numeric columns: every line ends at the r_hat column
    assert len({len(line) for line in lines}) == 1
    assert repr(table) == text


def test_summary_to_pandas():
    pd = pytest.importorskip("pandas")
    x = ar1(0.4, 2, 100, dim=2, seed=23)
    df = dg.summary(x, names=["alpha", "beta"]).to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.index) == ["alpha", "beta"]
    assert list(df.columns) == list(dg.SummaryTable.columns)


# ----------------------------------------------------------------------------
# REM, REC, Amari distance
# ----------------------------------------------------------------------------

def test_relative_error_mean_hand_computed():
    draws = np.array([[1.0, 2.0], [3.0, 2.0]])          # mean (2, 2)
    # |2 - 2| + |2 - 4| over |2| + |4|
    assert dg.relative_error_mean(draws, [2.0, 4.0]) == pytest.approx(1.0 / 3.0)
    assert dg.relative_error_mean(draws, [2.0, 2.0]) == 0.0
    # chains are pooled: (chains, draws, dim)
    chains = np.array([[[1.0], [3.0]], [[5.0], [7.0]]])  # mean 4
    assert dg.relative_error_mean(chains, [-2.0]) == pytest.approx(3.0)


def test_relative_error_cov_hand_computed():
    draws = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    # sample covariance (ddof=1): diag(2/3, 2/3)
    truth = np.array([[1.0, 0.5], [0.5, 1.0]])
    # (1/3 + 1/3 + 0.5 + 0.5) / 3
    assert dg.relative_error_cov(draws, truth) == pytest.approx(5.0 / 9.0)
    assert dg.relative_error_cov(draws, np.eye(2) * 2 / 3) == pytest.approx(0.0, abs=1e-15)
    assert dg.relative_error_cov(np.array([[0.0], [2.0]]), [[1.0]]) == pytest.approx(1.0)
    assert dg.relative_error_cov(draws.reshape(2, 2, 2), truth) == pytest.approx(5.0 / 9.0)


def test_relative_errors_validation():
    draws = np.zeros((5, 2))
    with pytest.raises(ValueError, match="shape"):
        dg.relative_error_mean(draws, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="all zeros"):
        dg.relative_error_mean(draws, [0.0, 0.0])
    with pytest.raises(ValueError, match="shape"):
        dg.relative_error_mean(np.zeros(5), [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        dg.relative_error_mean(np.array([[np.nan, 1.0]]), [1.0, 1.0])
    with pytest.raises(ValueError, match="shape"):
        dg.relative_error_cov(draws, np.eye(3))
    with pytest.raises(ValueError, match="all zeros"):
        dg.relative_error_cov(draws, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="at least 2 draws"):
        dg.relative_error_cov(np.zeros((1, 2)), np.eye(2))
    with pytest.raises(TypeError):
        dg.relative_error_cov(draws, [["a", "b"], ["c", "d"]])


def test_amari_distance_hand_computed():
    eye = np.eye(2)
    assert dg.amari_distance(eye, eye) == 0.0
    # |P| = [[1, 1], [0, 1]]: rows (2-1) + (1-1), columns (1-1) + (2-1);
    # (1 + 1) / (2 m (m - 1)) = 2 / 4
    assert dg.amari_distance([[1.0, 1.0], [0.0, 1.0]], eye) == pytest.approx(0.5)
    # invariant to B: A = M B gives P = M
    b = np.array([[2.0, 1.0], [0.5, 3.0]])
    assert dg.amari_distance(np.array([[1.0, -1.0], [0.0, 1.0]]) @ b, b) == pytest.approx(0.5)
    # 3 x 3: |P| = [[1, .5, 0], [0, 1, 0], [0, 0, 2]]; rows .5, columns .5
    p = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 2.0]])
    assert dg.amari_distance(p, np.eye(3)) == pytest.approx(1.0 / 12.0)
    # all magnitudes equal: the maximum, 1
    assert dg.amari_distance(np.ones((3, 3)), np.eye(3)) == pytest.approx(1.0)
    assert dg.amari_distance([[2.0]], [[5.0]]) == 0.0


def test_amari_distance_invariant_to_row_permutation_and_scaling():
    rng = np.random.default_rng(0)
    b = rng.normal(size=(4, 4))
    perm_scale = np.eye(4)[[2, 0, 3, 1]] * np.array([3.0, -0.5, 2.0, 7.0])[:, None]
    assert dg.amari_distance(perm_scale @ b, b) == pytest.approx(0.0, abs=1e-12)
    d = dg.amari_distance(rng.normal(size=(4, 4)), b)
    assert 0.0 < d < 1.0


def test_amari_distance_validation():
    with pytest.raises(ValueError, match="square"):
        dg.amari_distance(np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="shape of A"):
        dg.amari_distance(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="singular"):
        dg.amari_distance(np.eye(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="non-finite"):
        dg.amari_distance(np.array([[np.inf, 0.0], [0.0, 1.0]]), np.eye(2))
    with pytest.raises(TypeError):
        dg.amari_distance([["a"]], [["b"]])


def test_summary_of_a_chain_that_never_moved_is_nan_without_warnings():
    import warnings
    import fastsurrogate as fs
    res = fs.HMC(fs.models.StandardNormal(2), step_size=50.0, n_steps=3, adapt=False,
                 metric="unit").sample(40, 0, chains=1, seed=1, init=np.ones((1, 2)),
                                       progress=False)
    assert res.stats["accepted"].sum() == 0          # step 50 on N(0, I): nothing moves
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        overall = res.summary().overall
    assert np.isnan(overall["ess_min"]) and np.isnan(overall["min_ess_per_second"])
