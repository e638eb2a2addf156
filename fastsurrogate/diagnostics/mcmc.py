"""MCMC convergence diagnostics and accuracy metrics (pure NumPy / SciPy).

Conventions
-----------
Draws are ``(chains, draws, dim)``.  The per-parameter diagnostics also take a
single chain ``(draws,)`` or one scalar parameter ``(chains, draws)`` and then
return a Python ``float``; given ``(chains, draws, dim)`` they return an array
of shape ``(dim,)``, computed for all parameters at once.

What is implemented
-------------------
* ``ess_geyer``: the effective sample size used in the RNS-HMC paper
  (Zhang, Shahbaba, Zhao 2017), ``ESS = B / (1 + 2 sum_k rho_k)`` with the sum
  cut by Geyer's (1992) initial positive sequence and made monotone, on the raw
  draws.  Several chains are combined as in Stan (within-chain autocovariances
  and ``var_plus``); for one chain it is exactly Geyer's estimator.
* ``rhat``, ``ess_bulk``, ``ess_tail``, ``mcse_mean``, ``mcse_sd``: the
  rank-normalised split diagnostics of Vehtari, Gelman, Simpson, Carpenter and
  Buerkner (2021), "Rank-normalization, folding, and localization: an improved
  R-hat", Bayesian Analysis 16(2).  These use Stan's estimator of the
  autocorrelation time, which adds the last positive even-lag term to Geyer's
  sum and bounds the time below by ``1 / log10(B)`` for antithetic chains.
* ``relative_error_mean`` / ``relative_error_cov``: REM and REC of the VHMC
  paper (Zhang, Shahbaba, Zhao 2017, eq. 4.1).
* ``amari_distance``: Amari's distance between two unmixing matrices.

Degenerate input: a parameter whose draws are all equal (or whose transformed
draws, e.g. a split quantile indicator, are all equal) has no defined ESS,
R-hat or MCSE; those entries are ``nan``, as in the posterior R package.  No
warning is raised.  (ArviZ returns the number of draws as the ESS there, and
0 as mcse_mean of a constant parameter.)
"""

from typing import Any, Mapping, Sequence

import numpy as np
from scipy import fft as _fft
from scipy import special as _special

from fastsurrogate._typing import ArrayLike, FloatArray
from fastsurrogate.core._checks import real_array

__all__ = [
    "autocorrelation",
    "ess_geyer",
    "ess_bulk",
    "ess_tail",
    "rhat",
    "mcse_mean",
    "mcse_sd",
    "summary",
    "SummaryTable",
    "relative_error_mean",
    "relative_error_cov",
    "amari_distance",
]

_MIN_DRAWS = 4
_TAIL_PROBS = (0.05, 0.95)
_BLOM_OFFSET = 3.0 / 8.0


# ----------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------

def _check_finite(arr, name):
    if not np.all(np.isfinite(arr)):
        n_bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise ValueError(
            f"{name} contains {n_bad} non-finite value(s) (nan or inf); "
            "all draws must be finite (an interrupted Result's draws are "
            "NaN-padded after each chain's n_done rows: pass "
            "res.complete_draws()[0], or use res.summary())"
        )


def _as_draws(x, name="x", min_draws=_MIN_DRAWS):
    """Validate draws and bring them to ``(chains, draws, dim)``.

    Returns the 3-D float64 array and whether the caller should return a
    scalar (input was 1-D or 2-D).
    """
    arr = real_array(name, x, copy=False, allow_nonfinite=True)
    if arr.ndim == 1:
        arr = arr[None, :, None]
        scalar = True
    elif arr.ndim == 2:
        arr = arr[:, :, None]
        scalar = True
    elif arr.ndim == 3:
        scalar = False
    else:
        raise ValueError(
            f"{name} must have shape (draws,), (chains, draws) or "
            f"(chains, draws, dim); got ndim={arr.ndim} with shape {arr.shape}"
        )
    n_chains, n_draws, dim = arr.shape
    if n_chains < 1 or dim < 1:
        raise ValueError(f"{name} has no chains or no parameters: shape {arr.shape}")
    if n_draws < min_draws:
        raise ValueError(
            f"{name} needs at least {min_draws} draws per chain, got {n_draws} "
            f"(shape {arr.shape})"
        )
    _check_finite(arr, name)
    return arr, scalar


def _out(values, scalar):
    return float(values[0]) if scalar else values


# ----------------------------------------------------------------------------
# building blocks, all on (chains, draws, dim) float64 arrays
# ----------------------------------------------------------------------------

def _is_constant(arr):
    """(dim,) bool: every draw of the parameter, over all chains, is equal."""
    return np.ptp(arr, axis=(0, 1)) == 0.0


def _autocov(arr):
    """Biased (divide by n) autocovariance along axis 1, via zero-padded FFT.

    ``arr`` (chains, draws, dim) -> (chains, draws, dim).
    """
    n = arr.shape[1]
    centred = arr - arr.mean(axis=1, keepdims=True)
    m = _fft.next_fast_len(2 * n, real=True)
    spec = _fft.rfft(centred, n=m, axis=1)
    power = spec.real ** 2 + spec.imag ** 2
    return _fft.irfft(power, n=m, axis=1)[:, :n, :] / n


def _split(arr):
    """Split each chain in two halves (the middle draw is dropped for odd n).

    (chains, draws, dim) -> (2 chains, draws // 2, dim); first halves of all
    chains come first, then the second halves.
    """
    half = arr.shape[1] // 2
    return np.concatenate([arr[:, :half], arr[:, arr.shape[1] - half:]], axis=0)


def _average_ranks(flat):
    """Ranks 1..N of each column of ``flat`` (N, dim); ties get their mean rank.

    Same result as ``scipy.stats.rankdata(flat, method="average", axis=0)``,
    a few times faster for many columns: one contiguous argsort per column,
    then tie groups found on the sorted values.
    """
    a = np.ascontiguousarray(flat.T)                        # (dim, N)
    d, n = a.shape
    order = np.argsort(a, axis=1)
    ordered = np.take_along_axis(a, order, axis=1)
    starts_group = np.ones((d, n), dtype=bool)
    starts_group[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    if starts_group.all():                                  # no ties
        sorted_ranks = np.broadcast_to(np.arange(1.0, n + 1.0), (d, n))
    else:
        flags = starts_group.ravel()
        first = np.flatnonzero(flags)                       # group starts, flat index
        last = np.append(first[1:], flags.size) - 1         # group ends, flat index
        # mean 1-based position within the column of each tie group
        mean_rank = 0.5 * (first + last) - (first // n) * n + 1.0
        sorted_ranks = mean_rank[np.cumsum(flags) - 1].reshape(d, n)
    ranks = np.empty((d, n))
    np.put_along_axis(ranks, order, sorted_ranks, axis=1)
    return ranks.T


def _z_scale(arr):
    """Rank-normalise each parameter over all chains and draws.

    Average ranks of ties, Blom's offset 3/8, then the standard normal
    quantile.  (chains, draws, dim) -> same shape.
    """
    c, n, d = arr.shape
    ranks = _average_ranks(arr.reshape(c * n, d))
    size = c * n
    u = (ranks - _BLOM_OFFSET) / (size - 2.0 * _BLOM_OFFSET + 1.0)
    return _special.ndtri(u).reshape(c, n, d)


def _fold(arr):
    """|x - median(x)| per parameter over all chains and draws."""
    med = np.median(arr.reshape(-1, arr.shape[2]), axis=0)
    return np.abs(arr - med)


def _autocorr_time(arr, stan):
    """Integrated autocorrelation time tau per parameter, (dim,).

    ``arr`` (chains, draws, dim).  Multi-chain autocorrelations as in Stan:
    ``rho_t = 1 - (W - mean_c acov_c(t)) / var_plus`` with ``acov_c`` the
    autocovariance (divide by n) of chain c, ``W`` the within-chain variance
    and ``var_plus = (n-1)/n mean_c s_c^2 + var(chain means, ddof=1)``.
    Pair sums ``P_m = rho_2m + rho_2m+1`` are kept up to the first
    non-positive one (Geyer's initial positive sequence) and replaced by their
    running minimum (initial monotone sequence); ``tau = -1 + 2 sum_m P_m``
    = ``1 + 2 sum_k rho_k``.  Only pairs with ``2m + 2 < n`` are looked at.

    ``stan=True`` is Stan's (and ArviZ's) estimator: ``W`` is the unbiased
    ``mean_c s_c^2``, and the even-lag autocorrelation of the first dropped
    pair is added to tau when it is positive (or that pair sum is >= 0).
    ``stan=False`` is Geyer's: ``W = mean_c acov_c(0)``, so for one chain
    ``rho_t = acov(t) / acov(0)`` exactly, and no extra term.  Both bound
    tau below by ``1 / log10(chains * draws)``, a guard against tau <= 0 for
    strongly antithetic chains.  Constant parameters give nan.
    """
    c, n, d = arr.shape
    total = c * n
    acov = _autocov(arr)
    chain_mean = arr.mean(axis=1)                                  # (c, d)
    within = acov[:, 0, :].mean(axis=0) * n / (n - 1.0)            # (d,)
    var_plus = within * (n - 1.0) / n
    if c > 1:
        var_plus = var_plus + chain_mean.var(axis=0, ddof=1)
    constant = _is_constant(arr) | ~(var_plus > 0.0)

    # Stan subtracts the mean autocovariance (divide by n) from the unbiased
    # within-chain variance, which shifts every rho_t by about -1/(n-1);
    # Geyer's form uses the biased variance, so rho_t = acov_t / acov_0 for
    # one chain.
    within_num = within if stan else acov[:, 0, :].mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (within_num - acov.mean(axis=0)) / var_plus    # (n, d)
    rho[0] = 1.0
    # Pairs that Stan's loop can reach: m = 0 .. ceil(n/2) - 2.
    n_pairs = max((n + 1) // 2 - 1, 1)
    pairs = rho[0:2 * n_pairs:2] + rho[1:2 * n_pairs:2]            # (n_pairs, d)
    nonpos = ~(pairs > 0.0)
    first_nonpos = np.argmax(nonpos, axis=0)
    stop = np.where(nonpos.any(axis=0), first_nonpos, n_pairs - 1)  # M, (d,)
    monotone = np.minimum.accumulate(pairs, axis=0)
    keep = np.arange(n_pairs)[:, None] < stop[None, :]
    tau = -1.0 + 2.0 * np.where(keep, monotone, 0.0).sum(axis=0)
    if stan:
        cols = np.arange(d)
        rho_even = rho[2 * stop, cols]
        pair_last = pairs[stop, cols]
        tau = tau + np.where((rho_even > 0.0) | (pair_last >= 0.0), rho_even, 0.0)
    tau = np.maximum(tau, 1.0 / np.log10(total))
    tau[constant] = np.nan
    return tau


def _ess(arr, stan=True):
    """ESS per parameter of (chains, draws, dim) draws, (dim,)."""
    tau = _autocorr_time(arr, stan=stan)
    return arr.shape[0] * arr.shape[1] / tau


def _rhat_plain(arr):
    """Classic (non-split) potential scale reduction per parameter, (dim,)."""
    n = arr.shape[1]
    chain_mean = arr.mean(axis=1)
    within = arr.var(axis=1, ddof=1).mean(axis=0)
    between = n * chain_mean.var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1.0) / n)


def _rhat_rank(arr, z_split=None):
    """max(bulk, folded) rank-normalised split R-hat, (dim,)."""
    split = _split(arr)
    if z_split is None:
        z_split = _z_scale(split)
    bulk = _rhat_plain(z_split)
    tail = _rhat_plain(_z_scale(_fold(split)))
    out = np.maximum(bulk, tail)
    constant = _is_constant(arr)
    # Every split chain constant but not all equal: the chains disagree
    # completely (rounding in the normal scores would give a huge finite value).
    out[(np.ptp(split, axis=1) == 0.0).all(axis=0) & ~constant] = np.inf
    out[constant] = np.nan
    return out


def _ess_tail(arr):
    """min over the 5% and 95% quantile indicators of their split ESS, (dim,)."""
    c, n, d = arr.shape
    q = np.quantile(arr.reshape(c * n, d), _TAIL_PROBS, axis=0)   # (2, d)
    ess = [_ess(_split((arr <= q[i]).astype(np.float64))) for i in range(2)]
    # min that propagates nan (a constant indicator has no ESS).
    return np.minimum(ess[0], ess[1])


def _mcse_mean(arr):
    c, n, d = arr.shape
    sd = arr.reshape(c * n, d).std(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return sd / np.sqrt(_ess(_split(arr)))


def _mcse_sd(arr):
    c, n, d = arr.shape
    sq_dev = (arr - arr.reshape(c * n, d).mean(axis=0)) ** 2
    ess = _ess(_split(sq_dev))
    flat = sq_dev.reshape(c * n, d)
    mean_sq = flat.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        var_var = ((flat ** 2).mean(axis=0) - mean_sq ** 2) / ess
        return np.sqrt(var_var / mean_sq / 4.0)


# ----------------------------------------------------------------------------
# public per-parameter diagnostics
# ----------------------------------------------------------------------------

def autocorrelation(x: ArrayLike) -> FloatArray:
    """Autocorrelation of one chain at every lag, by zero-padded FFT.

    ``rho_k = gamma_k / gamma_0`` with the biased autocovariance
    ``gamma_k = (1/n) sum_t (x_t - xbar)(x_{t+k} - xbar)``.

    Parameters
    ----------
    x : array_like, shape (draws,)
        One chain, at least 2 finite draws.

    Returns
    -------
    ndarray, shape (draws,)
        Autocorrelations at lags 0 .. draws-1 (lag 0 is 1).  All nan for a
        constant chain.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import autocorrelation
    >>> rho = autocorrelation(np.array([1.0, 2.0, 3.0, 4.0]))
    >>> rho.shape, float(rho[0])
    ((4,), 1.0)
    """
    arr = real_array("x", x, copy=False, allow_nonfinite=True)
    if arr.ndim != 1:
        raise ValueError(
            f"x must be one chain of shape (draws,), got shape {arr.shape}"
        )
    if arr.shape[0] < 2:
        raise ValueError(f"x needs at least 2 draws, got {arr.shape[0]}")
    _check_finite(arr, "x")
    acov = _autocov(arr[None, :, None])[0, :, 0]
    if acov[0] == 0.0:
        return np.full(arr.shape[0], np.nan)
    return acov / acov[0]


def ess_geyer(x: ArrayLike) -> float | FloatArray:
    """Effective sample size by Geyer's initial monotone sequence, raw draws.

    ``ESS = B / (1 + 2 sum_{k=1}^{K} rho_k)`` with ``B = chains * draws``, as
    in the RNS-HMC paper.  ``K`` is set by Geyer's (1992) initial positive
    sequence: pair sums ``rho_2m + rho_2m+1`` are summed until the first
    non-positive one, after being replaced by their running minimum (initial
    monotone sequence).  For several chains the autocorrelations are combined
    as in Stan, ``rho_k = 1 - (W - mean_chains acov_k) / var_plus`` with
    ``var_plus`` the pooled variance including the between-chain part; here
    ``W`` is the mean within-chain variance with divisor n (Stan uses n - 1),
    so for one chain ``rho_k`` is exactly the ordinary autocorrelation of
    :func:`autocorrelation`.  No chain splitting, no rank normalisation, and
    unlike ``arviz.ess(method="mean")`` no split chains and no extra
    even-lag term after the truncation point.  For strongly antithetic chains
    the denominator is bounded below by ``1 / log10(B)`` (as Stan does), so
    ``ESS <= B log10(B)``.

    Parameters
    ----------
    x : array_like, shape (draws,), (chains, draws) or (chains, draws, dim)
        At least 4 finite draws per chain.

    Returns
    -------
    float, or ndarray of shape (dim,) for 3-D input
        nan for a constant parameter.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import ess_geyer
    >>> x = np.random.default_rng(0).standard_normal((4, 1000))
    >>> 3000 < ess_geyer(x) < 5500
    True
    """
    arr, scalar = _as_draws(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(_ess(arr, stan=False), scalar)


def ess_bulk(x: ArrayLike) -> float | FloatArray:
    """Bulk effective sample size: rank-normalised split ESS (Vehtari et al. 2021).

    Chains are split in halves, all draws of a parameter are replaced by the
    normal scores of their ranks, and Stan's multi-chain ESS is taken.
    Matches ``arviz.ess(x, method="bulk")``.

    Parameters
    ----------
    x : array_like, shape (draws,), (chains, draws) or (chains, draws, dim)
        At least 4 finite draws per chain.

    Returns
    -------
    float, or ndarray of shape (dim,) for 3-D input
        nan for a constant parameter.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import ess_bulk
    >>> x = np.random.default_rng(0).standard_normal((4, 1000, 3))
    >>> ess_bulk(x).shape
    (3,)
    """
    arr, scalar = _as_draws(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(_ess(_z_scale(_split(arr))), scalar)


def ess_tail(x: ArrayLike) -> float | FloatArray:
    """Tail effective sample size (Vehtari et al. 2021).

    The minimum of the split ESS of the indicators ``x <= q_0.05`` and
    ``x <= q_0.95``, with the quantiles of all draws (R type 7 / NumPy
    "linear").  Matches ``arviz.ess(x, method="tail")``.

    Parameters
    ----------
    x : array_like, shape (draws,), (chains, draws) or (chains, draws, dim)
        At least 4 finite draws per chain.

    Returns
    -------
    float, or ndarray of shape (dim,) for 3-D input
        nan for a constant parameter (or a constant quantile indicator).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import ess_tail
    >>> x = np.random.default_rng(0).standard_normal((4, 1000))
    >>> ess_tail(x) > 1000
    True
    """
    arr, scalar = _as_draws(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(_ess_tail(arr), scalar)


def rhat(x: ArrayLike) -> float | FloatArray:
    """Rank-normalised split R-hat (Vehtari et al. 2021).

    ``max(bulk, tail)`` where bulk is the split R-hat of the rank-normalised
    draws and tail that of the rank-normalised draws folded about the median,
    ``|x - median(x)|``.  Matches ``arviz.rhat(x, method="rank")`` for two or
    more chains; a single chain is handled through its two halves (ArviZ
    returns nan there).  Values above about 1.01 signal non-convergence.

    Parameters
    ----------
    x : array_like, shape (draws,), (chains, draws) or (chains, draws, dim)
        At least 4 finite draws per chain.

    Returns
    -------
    float, or ndarray of shape (dim,) for 3-D input
        nan for a constant parameter; inf if every split chain is constant
        but they do not all agree.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import rhat
    >>> x = np.random.default_rng(0).standard_normal((4, 1000))
    >>> rhat(x) < 1.01
    True
    """
    arr, scalar = _as_draws(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(_rhat_rank(arr), scalar)


def mcse_mean(x: ArrayLike) -> float | FloatArray:
    """Monte Carlo standard error of the posterior mean.

    ``sd / sqrt(ESS_mean)`` with ``sd`` the pooled standard deviation
    (ddof=1) and ``ESS_mean`` the split ESS of the raw draws.  Matches
    ``arviz.mcse(x, method="mean")``.

    Parameters
    ----------
    x : array_like, shape (draws,), (chains, draws) or (chains, draws, dim)
        At least 4 finite draws per chain.

    Returns
    -------
    float, or ndarray of shape (dim,) for 3-D input
        In the units of ``x``; nan for a constant parameter.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import mcse_mean
    >>> x = np.random.default_rng(0).standard_normal((4, 2500))
    >>> 0.005 < mcse_mean(x) < 0.02
    True
    """
    arr, scalar = _as_draws(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(_mcse_mean(arr), scalar)


def mcse_sd(x: ArrayLike) -> float | FloatArray:
    """Monte Carlo standard error of the posterior standard deviation.

    Delta method without a normality assumption (as in ArviZ >= 0.15 and the
    posterior R package): with ``s_i = (x_i - xbar)^2``,
    ``Var(sigma^2) ~ (mean(s^2) - mean(s)^2) / ESS(s)``, where ``ESS(s)`` is
    the split ESS of the raw ``s``, and
    ``mcse_sd = sqrt(Var(sigma^2) / (4 mean(s)))``.  Matches
    ``arviz.mcse(x, method="sd")``.

    Parameters
    ----------
    x : array_like, shape (draws,), (chains, draws) or (chains, draws, dim)
        At least 4 finite draws per chain.

    Returns
    -------
    float, or ndarray of shape (dim,) for 3-D input
        In the units of ``x``; nan for a constant parameter.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import mcse_sd
    >>> x = np.random.default_rng(0).standard_normal((4, 2500))
    >>> 0.003 < mcse_sd(x) < 0.015
    True
    """
    arr, scalar = _as_draws(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(_mcse_sd(arr), scalar)


# ----------------------------------------------------------------------------
# summary table
# ----------------------------------------------------------------------------

class SummaryTable:
    """Per-parameter summary statistics, one 1-D array per column.

    Columns: ``mean``, ``sd``, ``mcse_mean``, ``mcse_sd``, ``ess_bulk``,
    ``ess_tail``, ``ess`` (Geyer), ``r_hat``; ``names`` holds the parameter
    names.  ``table["ess_bulk"]`` gives a column, ``str(table)`` an aligned
    text table, ``to_pandas()`` a DataFrame indexed by name.
    """

    columns = ("mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail",
               "ess", "r_hat")
    _formats = {"mean": "{:.4g}", "sd": "{:.4g}", "mcse_mean": "{:.2g}",
                "mcse_sd": "{:.2g}", "ess_bulk": "{:.0f}", "ess_tail": "{:.0f}",
                "ess": "{:.0f}", "r_hat": "{:.3f}"}
    # run-level figures, set by Result.summary (fastsurrogate.Result)
    overall: dict[str, Any]

    def __init__(self, names: Sequence[str], values: Mapping[str, ArrayLike]) -> None:
        self._names = list(names)
        self._values = {}
        for col in self.columns:
            v = np.asarray(values[col], dtype=np.float64)
            if v.shape != (len(self._names),):
                raise ValueError(
                    f"column {col!r} has shape {v.shape}, expected "
                    f"({len(self._names)},)"
                )
            self._values[col] = v

    @property
    def names(self) -> list[str]:
        """Parameter names, a list of str."""
        return list(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __getitem__(self, column: str) -> np.ndarray:
        if column == "names":
            return np.array(self._names, dtype=object)
        try:
            return self._values[column]
        except KeyError:
            raise KeyError(
                f"unknown column {column!r}; columns are "
                f"{', '.join(('names',) + self.columns)}"
            ) from None

    def __contains__(self, column: object) -> bool:
        return column == "names" or column in self._values

    def keys(self) -> tuple[str, ...]:
        return ("names",) + self.columns

    def to_dict(self) -> dict[str, Any]:
        """Plain dict: ``names`` (list of str) and one (dim,) array per column."""
        out = {"names": list(self._names)}
        out.update({col: self._values[col].copy() for col in self.columns})
        return out

    def to_pandas(self) -> Any:
        """The table as a ``pandas.DataFrame`` indexed by parameter name."""
        import pandas as pd

        return pd.DataFrame({col: self._values[col] for col in self.columns},
                            index=pd.Index(self._names, name="name"))

    def __str__(self) -> str:
        header = [""] + list(self.columns)
        rows = []
        for i, name in enumerate(self._names):
            row = [str(name)]
            for col in self.columns:
                v = self._values[col][i]
                row.append(self._formats[col].format(v) if np.isfinite(v) else str(v))
            rows.append(row)
        widths = [max(len(r[j]) for r in [header] + rows) for j in range(len(header))]
        lines = []
        for r in [header] + rows:
            cells = [r[0].ljust(widths[0])]
            cells += [cell.rjust(w) for cell, w in zip(r[1:], widths[1:])]
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)

    def __repr__(self):
        return str(self)


def summary(draws: ArrayLike, names: Sequence[str] | None = None) -> SummaryTable:
    """Summary statistics and diagnostics for every parameter.

    Parameters
    ----------
    draws : array_like, shape (chains, draws, dim)
        At least 4 finite draws per chain.
    names : sequence of str, length dim, optional
        Parameter names; default ``x[0]``, ``x[1]``, ...

    Returns
    -------
    SummaryTable
        Columns (each shape (dim,)): ``mean``, ``sd`` (ddof=1), ``mcse_mean``,
        ``mcse_sd``, ``ess_bulk``, ``ess_tail``, ``ess`` (Geyer, raw draws,
        see :func:`ess_geyer`), ``r_hat`` (rank-normalised split R-hat).

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import summary
    >>> table = summary(np.random.default_rng(0).standard_normal((4, 500, 2)),
    ...                 names=["a", "b"])
    >>> table["ess_bulk"].shape, table.names
    ((2,), ['a', 'b'])
    """
    arr = real_array("draws", draws, copy=False, allow_nonfinite=True)
    if arr.ndim != 3:
        raise ValueError(
            f"draws must have shape (chains, draws, dim), got shape {arr.shape}; "
            "for one parameter use draws[..., None]"
        )
    arr, _ = _as_draws(arr, "draws")
    c, n, d = arr.shape
    if names is None:
        names = [f"x[{i}]" for i in range(d)]
    else:
        if isinstance(names, str):
            raise TypeError("names must be a sequence of str, not a single str")
        names = [str(s) for s in names]
        if len(names) != d:
            raise ValueError(f"names has {len(names)} entries, draws has dim={d}")
    flat = arr.reshape(c * n, d)
    with np.errstate(divide="ignore", invalid="ignore"):
        z_split = _z_scale(_split(arr))
        values = {
            "mean": flat.mean(axis=0),
            "sd": flat.std(axis=0, ddof=1),
            "mcse_mean": _mcse_mean(arr),
            "mcse_sd": _mcse_sd(arr),
            "ess_bulk": _ess(z_split),
            "ess_tail": _ess_tail(arr),
            "ess": _ess(arr, stan=False),
            "r_hat": _rhat_rank(arr, z_split=z_split),
        }
    return SummaryTable(names, values)


# ----------------------------------------------------------------------------
# accuracy against a known target
# ----------------------------------------------------------------------------

def _pooled_draws(draws, name="draws"):
    arr = real_array(name, draws, copy=False, allow_nonfinite=True)
    if arr.ndim == 3:
        arr = arr.reshape(-1, arr.shape[2])
    elif arr.ndim != 2:
        raise ValueError(
            f"{name} must have shape (draws, dim) or (chains, draws, dim), "
            f"got shape {arr.shape}"
        )
    if arr.shape[1] < 1:
        raise ValueError(f"{name} has no parameters: shape {arr.shape}")
    _check_finite(arr, name)
    return arr


def relative_error_mean(draws: ArrayLike, truth_mean: ArrayLike, norm: str = "l1") -> float:
    """Relative error of the mean, REM (VHMC paper, eq. 4.1; RNS-HMC paper, Figures 7-8).

    ``norm="l1"`` (default, the VHMC paper): ``REM = sum_i |mean_hat_i - mean_i| / sum_i |mean_i|``.
    ``norm="l2"`` (the RNS-HMC paper): ``REM = ||mean_hat - mean||_2 / ||mean||_2``.

    Parameters
    ----------
    draws : array_like, shape (draws, dim) or (chains, draws, dim)
        Chains are pooled.
    truth_mean : array_like, shape (dim,)
        Reference mean; must not be all zeros.
    norm : {"l1", "l2"}
        Which norm both the error and the reference's size are measured in.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import relative_error_mean
    >>> relative_error_mean(np.array([[1.0, 2.0], [3.0, 2.0]]), [2.0, 4.0])
    0.3333333333333333
    >>> relative_error_mean(np.array([[1.0, 2.0], [3.0, 2.0]]), [3.0, 4.0], norm="l2")
    0.2
    """
    if norm not in ("l1", "l2"):
        raise ValueError(f'norm must be "l1" or "l2", got {norm!r}')
    arr = _pooled_draws(draws)
    if arr.shape[0] < 1:
        raise ValueError("draws needs at least 1 draw")
    truth = real_array("truth_mean", truth_mean, shape=(arr.shape[1],), copy=False)
    if norm == "l2":
        denom = float(np.sqrt(np.dot(truth, truth)))
    else:
        denom = np.abs(truth).sum()
    if denom == 0.0:
        raise ValueError("truth_mean is all zeros; REM is undefined")
    err = arr.mean(axis=0) - truth
    if norm == "l2":
        return float(np.sqrt(np.dot(err, err)) / denom)
    return float(np.abs(err).sum() / denom)


def relative_error_cov(draws: ArrayLike, truth_cov: ArrayLike) -> float:
    """Relative error of the covariance, REC (VHMC paper, eq. 4.1).

    ``REC = sum_ij |Cov_hat_ij - Cov_ij| / sum_ij |Cov_ij|`` with
    ``Cov_hat`` the sample covariance (ddof=1) of the pooled draws.

    Parameters
    ----------
    draws : array_like, shape (draws, dim) or (chains, draws, dim)
        At least 2 draws in all; chains are pooled.
    truth_cov : array_like, shape (dim, dim)
        Reference covariance; must not be all zeros.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import relative_error_cov
    >>> relative_error_cov(np.array([[0.0], [2.0]]), [[1.0]])
    1.0
    """
    arr = _pooled_draws(draws)
    if arr.shape[0] < 2:
        raise ValueError(
            f"draws needs at least 2 draws for a covariance, got {arr.shape[0]}"
        )
    d = arr.shape[1]
    truth = real_array("truth_cov", truth_cov, shape=(d, d), copy=False)
    denom = np.abs(truth).sum()
    if denom == 0.0:
        raise ValueError("truth_cov is all zeros; REC is undefined")
    cov_hat = np.cov(arr, rowvar=False, ddof=1).reshape(d, d)
    return float(np.abs(cov_hat - truth).sum() / denom)


def amari_distance(A: ArrayLike, B: ArrayLike) -> float:
    """Amari distance between two unmixing matrices, in [0, 1].

    With ``P = A B^{-1}`` (m x m)::

        d = [sum_i (sum_j |P_ij| / max_j |P_ij| - 1)
             + sum_j (sum_i |P_ij| / max_i |P_ij| - 1)] / (2 m (m - 1))

    It is 0 exactly when ``A`` equals ``B`` up to permutation and scaling of
    its rows (the ICA ambiguities) and 1 when every entry of ``P`` has the
    same magnitude.  For m = 1 it is 0.

    Parameters
    ----------
    A, B : array_like, shape (m, m)
        Unmixing matrices; ``B`` must be invertible.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.diagnostics import amari_distance
    >>> amari_distance([[0.0, 2.0], [3.0, 0.0]], np.eye(2))
    0.0
    """
    a = real_array("A", A, copy=False, allow_nonfinite=True)
    b = real_array("B", B, copy=False, allow_nonfinite=True)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be a square matrix, got shape {a.shape}")
    if b.shape != a.shape:
        raise ValueError(f"B must have the shape of A {a.shape}, got {b.shape}")
    if a.shape[0] < 1:
        raise ValueError("A and B must be at least 1 x 1")
    _check_finite(a, "A")
    _check_finite(b, "B")
    m = a.shape[0]
    try:
        p = np.abs(np.linalg.solve(b.T, a.T).T)       # A B^{-1}
    except np.linalg.LinAlgError:
        raise ValueError("B is singular; the Amari distance needs B invertible") from None
    if not np.all(np.isfinite(p)):
        raise ValueError("B is numerically singular (A B^-1 is not finite)")
    if m == 1:
        return 0.0
    row_max = p.max(axis=1)
    col_max = p.max(axis=0)
    if np.any(row_max == 0.0) or np.any(col_max == 0.0):
        raise ValueError("A B^-1 has a zero row or column; A must be invertible")
    rows = (p.sum(axis=1) / row_max - 1.0).sum()
    cols = (p.sum(axis=0) / col_max - 1.0).sum()
    return float((rows + cols) / (2.0 * m * (m - 1.0)))
