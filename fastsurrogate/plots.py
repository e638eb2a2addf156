"""Diagnostic plots of a :class:`~fastsurrogate.Result` with matplotlib.

matplotlib is an optional dependency (``pip install "fastsurrogate[plot]"``),
imported when a plot is made.  Every function takes a Result, draws on the
given matplotlib ``axes`` (or on a new figure) and returns the Figure; the
same plots are methods of the Result (``res.plot_trace()``, ...).

    trace        draws against iteration, one panel per parameter, a line
                 per chain (warm-up shaded when ``warmup=True``)
    marginals    histogram per parameter, optionally against reference
                 means and standard deviations (a normal density drawn over
                 it, and the reference mean as a line)
    acceptance   acceptance probability over iterations (a running mean per
                 chain), warm-up included when the result kept it
    energy       the marginal energy distribution against the energy
                 transitions, centred (Betancourt 2017, sec. 6.1), with the
                 E-BFMI of each chain
    training     the surrogate's training curve: RNS-HMC the held-out RMSE of
                 U of each candidate fit; ARNS-HMC the RMSE of U on each
                 span's states before (held out) and after the online
                 updates; VHMC the held-out score-matching error
                 ||grad z - grad U||^2 / ||grad U||^2 (running mean) over
                 training iterations; NNgHMC the training and held-out loss
                 over optimiser iterations, one line per training

Examples
--------
>>> import fastsurrogate as fs                                  # doctest: +SKIP
>>> res = fs.sample(fs.models.StandardNormal(3), method="hmc")  # doctest: +SKIP
>>> fig = res.plot_trace()                                      # doctest: +SKIP
>>> fig.savefig("trace.png")                                    # doctest: +SKIP
"""
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

from ._typing import ArrayLike, FloatArray, IntArray

if TYPE_CHECKING:                     # matplotlib is imported when a plot is made
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_trace", "plot_marginals", "plot_acceptance", "plot_energy",
           "plot_training", "training_curves", "PlottableResult"]

_MISSING = ('plots need matplotlib, which is not installed: pip install matplotlib '
            '(or pip install "fastsurrogate[plot]")')


def _plt():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    return plt


class PlottableResult(Protocol):
    """What the plots read of a :class:`~fastsurrogate.Result` (which has all
    of it).  The plots sit below result.py, whose ``plot_*`` methods call
    them, so they check these attributes rather than the class."""
    draws: FloatArray
    stats: dict[str, np.ndarray]
    n_done: IntArray
    param_names: list[str]
    method: str
    info: dict[str, Any]
    warmup_draws: FloatArray | None
    warmup_stats: dict[str, np.ndarray] | None
    warmup_n_done: IntArray | None

    @property
    def chains(self) -> int: ...


_RESULT_ATTRIBUTES = (*PlottableResult.__annotations__, "chains")


def _check_result(res: object) -> None:
    if not all(hasattr(res, a) for a in _RESULT_ATTRIBUTES):
        raise TypeError(f"expected a fastsurrogate Result, got {type(res).__name__}")


def _params(res, params, limit=6):
    """Indices of the parameters to plot: names or indices (default the first `limit`)."""
    names = list(res.param_names)
    d = res.draws.shape[-1]
    if params is None:
        return list(range(min(d, limit)))
    if isinstance(params, (str, int, np.integer)):
        params = [params]
    out = []
    for p in params:
        if isinstance(p, str):
            if p not in names:
                raise ValueError(f"unknown parameter {p!r}; the names are {names[:10]}"
                                 f"{' ...' if len(names) > 10 else ''}")
            out.append(names.index(p))
        elif isinstance(p, (int, np.integer)) and not isinstance(p, bool):
            if not -d <= p < d:
                raise ValueError(f"parameter index {p} out of range for dim {d}")
            out.append(int(p) % d)
        else:
            raise TypeError(f"params holds names or indices, got {type(p).__name__}")
    if not out:
        raise ValueError("params is empty")
    return out


def _axes(axes, n, ncols=None, size=(3.2, 2.4)):
    """A flat list of n axes: the user's, or a new figure's."""
    plt = _plt()
    if axes is not None:
        flat = list(np.ravel(axes))
        if len(flat) < n:
            raise ValueError(f"this plot needs {n} axes, got {len(flat)}")
        return flat[0].figure, flat[:n]
    ncols = ncols or min(n, 3)
    nrows = -(-n // ncols)
    fig, ax = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows),
                           squeeze=False, layout="constrained")
    flat = list(ax.ravel())
    for extra in flat[n:]:
        extra.set_visible(False)
    return fig, flat[:n]


def _rows(values, n_done):
    """Per-chain 1-D arrays of the completed rows of values (chains, n, ...)."""
    return [np.asarray(values[k, :int(n_done[k])]) for k in range(values.shape[0])]


def plot_trace(res: PlottableResult, params: str | int | Sequence[str | int] | None = None,
               warmup: bool = False, axes: Any = None) -> "Figure":
    """Trace plot: draws against iteration, one panel per parameter.

    Parameters
    ----------
    res : Result
    params : sequence of str or int, optional
        Parameter names or indices (default: the first six).
    warmup : bool
        Also draw the warm-up iterations (shaded) when the result kept them.
    axes : matplotlib Axes or array of them, optional
        One per parameter; default a new figure.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = fs.plots.plot_trace(res, params=["q[0]", "q[1]"])   # doctest: +SKIP
    """
    _check_result(res)
    idx = _params(res, params)
    fig, axs = _axes(axes, len(idx), ncols=1, size=(7.0, 1.8))
    warm, warm_done = (res.warmup_draws, res.warmup_n_done) if warmup else (None, None)
    use_warm = warm is not None and warm_done is not None
    nw = warm.shape[1] if warm is not None and warm_done is not None else 0
    for ax, j in zip(axs, idx):
        for k in range(res.chains):
            if warm is not None and warm_done is not None:
                w = warm[k, :int(warm_done[k]), j]
                ax.plot(np.arange(len(w)), w, lw=0.6, color=f"C{k}", alpha=0.5)
            d = res.draws[k, :int(res.n_done[k]), j]
            ax.plot(nw + np.arange(len(d)), d, lw=0.6, color=f"C{k}",
                    label=f"chain {k}" if j == idx[0] else None)
        if use_warm:
            ax.axvspan(0, nw, color="0.9", zorder=-1)
        ax.set_ylabel(res.param_names[j])
    axs[-1].set_xlabel("iteration" + (" (warm-up shaded)" if use_warm else " (after warm-up)"))
    if res.chains > 1:
        axs[0].legend(loc="upper right", fontsize="small", ncol=min(res.chains, 4))
    axs[0].set_title(f"{res.method}: trace")
    return fig


def plot_marginals(res: PlottableResult, params: str | int | Sequence[str | int] | None = None,
                   reference: tuple[ArrayLike, ArrayLike] | None = None, bins: int = 40,
                   axes: Any = None) -> "Figure":
    """Histogram of each parameter's draws (all chains pooled).

    Parameters
    ----------
    res : Result
    params : sequence of str or int, optional
        Default the first six.
    reference : (mean, sd), optional
        Reference means and standard deviations, each (dim,) (e.g. a
        posteriordb reference or a long exact run): the normal density with
        that mean and sd is drawn over the histogram, and the mean as a line.
    bins : int
    axes : matplotlib Axes or array of them, optional

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> ref = (truth_mean, truth_sd)                                  # doctest: +SKIP
    >>> fig = res.plot_marginals(reference=ref)                       # doctest: +SKIP
    """
    _check_result(res)
    idx = _params(res, params)
    d = res.draws.shape[-1]
    if reference is not None:
        try:
            ref_mean, ref_sd = reference
        except (TypeError, ValueError):
            raise TypeError("reference must be a pair (mean, sd) of arrays of shape "
                            f"({d},)") from None
        mean = np.asarray(ref_mean, dtype=np.float64)
        sd = np.asarray(ref_sd, dtype=np.float64)
        if mean.shape != (d,) or sd.shape != (d,):
            raise ValueError(f"reference mean and sd must have shape ({d},); got "
                             f"{mean.shape} and {sd.shape}")
        if not (np.all(np.isfinite(mean)) and np.all(sd > 0) and np.all(np.isfinite(sd))):
            raise ValueError("reference means must be finite and sds positive and finite")
    fig, axs = _axes(axes, len(idx))
    for ax, j in zip(axs, idx):
        x = np.concatenate(_rows(res.draws[..., j], res.n_done))
        x = x[np.isfinite(x)]
        ax.hist(x, bins=bins, density=True, color="C0", alpha=0.6, label="draws")
        ax.axvline(x.mean() if x.size else np.nan, color="C0", lw=1)
        if reference is not None:
            lo = min(x.min() if x.size else mean[j], mean[j] - 4 * sd[j])
            hi = max(x.max() if x.size else mean[j], mean[j] + 4 * sd[j])
            g = np.linspace(lo, hi, 200)
            ax.plot(g, np.exp(-0.5 * ((g - mean[j]) / sd[j]) ** 2) / (sd[j] * np.sqrt(2 * np.pi)),
                    color="C3", lw=1.2, label="reference N(mean, sd)")
            ax.axvline(mean[j], color="C3", lw=1, ls="--")
        ax.set_xlabel(res.param_names[j])
        ax.set_yticks([])
    axs[0].legend(fontsize="small")
    fig.suptitle(f"{res.method}: marginals")
    return fig


def _running_mean(x, window):
    w = max(1, min(int(window), len(x)))
    if len(x) == 0:
        return x
    c = np.cumsum(np.insert(np.nan_to_num(x, nan=0.0), 0, 0.0))
    out = (c[w:] - c[:-w]) / w
    return np.concatenate([c[1:w] / np.arange(1, w), out])


def plot_acceptance(res: PlottableResult, window: int = 50, warmup: bool = True,
                    ax: "Axes | None" = None) -> "Figure":
    """Acceptance probability over iterations: a running mean of
    ``accept_prob`` over ``window`` iterations, one line per chain, the
    warm-up (exploration, training) first when the result kept it.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = res.plot_acceptance(window=100)                         # doctest: +SKIP
    """
    _check_result(res)
    window = int(window)
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    fig, (ax,) = _axes(ax, 1, size=(7.0, 2.6))
    warm = (res.warmup_stats or {}).get("accept_prob") if warmup else None
    warm_done = res.warmup_n_done
    use_warm = warm is not None and warm_done is not None
    nw = warm.shape[1] if warm is not None and warm_done is not None else 0
    for k in range(res.chains):
        parts = []
        if warm is not None and warm_done is not None:
            parts.append(warm[k, :int(warm_done[k])])
        parts.append(res.stats["accept_prob"][k, :int(res.n_done[k])])
        a = np.concatenate(parts).astype(float)
        ax.plot(np.arange(len(a)), _running_mean(a, window), lw=0.8, color=f"C{k}",
                label=f"chain {k}")
    if use_warm and nw:
        ax.axvspan(0, nw, color="0.9", zorder=-1, label="warm-up")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"acceptance (mean of {window})")
    ax.set_title(f"{res.method}: acceptance probability")
    ax.legend(fontsize="small", loc="lower right")
    return fig


def plot_energy(res: PlottableResult, bins: int = 40, ax: "Axes | None" = None) -> "Figure":
    """Energy plot: histograms of the centred energy E and of its changes
    between iterations, pooled over chains; E-BFMI = var(dE) / var(E) of each
    chain in the legend (below about 0.3 the momentum resampling explores the
    energy levels poorly; Betancourt 2017, sec. 6.1).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> fig = res.plot_energy()                                       # doctest: +SKIP
    """
    _check_result(res)
    if "energy" not in res.stats:
        raise ValueError(f"the {res.method} result has no 'energy' statistic")
    fig, (ax,) = _axes(ax, 1, size=(5.0, 3.0))
    rows = [e[np.isfinite(e)] for e in _rows(res.stats["energy"], res.n_done)]
    centred = np.concatenate([e - e.mean() for e in rows if e.size])
    diffs = np.concatenate([np.diff(e) for e in rows if e.size > 1])
    bfmi = [float(np.var(np.diff(e)) / np.var(e)) if e.size > 2 and np.var(e) > 0 else np.nan
            for e in rows]
    ax.hist(centred, bins=bins, density=True, alpha=0.5, color="C0", label="marginal energy")
    ax.hist(diffs, bins=bins, density=True, alpha=0.5, color="C1",
            label="energy transition\nE-BFMI " + ", ".join(f"{b:.2f}" for b in bfmi))
    ax.set_yticks([])
    ax.set_xlabel("E - mean(E)")
    ax.set_title(f"{res.method}: energy")
    ax.legend(fontsize="small")
    return fig


def training_curves(res: PlottableResult) -> list[tuple[str, np.ndarray, np.ndarray, str, str]]:
    """The surrogate training curve of a result as plain lines.

    Returns a list of ``(label, x, y, xlabel, ylabel)`` (x, y 1-D arrays),
    empty when the run trained no surrogate (exact HMC, NUTS, a given
    surrogate).  What each sampler records (``res.info["training_curve"]``)
    is listed in the module docstring.
    """
    _check_result(res)
    cur = res.info.get("training_curve")
    method = res.method
    lines: list[tuple[str, np.ndarray, np.ndarray, str, str]] = []
    if cur is None:
        return lines
    if isinstance(cur, dict) and "holdout_rmse" in cur:          # RNS-HMC: the fit's candidates
        x = np.arange(len(cur["holdout_rmse"]))
        lines.append((f"held-out RMSE of U (chosen {cur['chosen']}, train RMSE "
                      f"{cur['train_rmse']:.3g})", x, np.asarray(cur["holdout_rmse"]),
                      "candidate fit (input scale / ridge, in order)", "RMSE of U"))
        return lines
    for k, c in enumerate(cur):
        if isinstance(c, np.ndarray) and c.ndim == 2 and c.shape[1] == 3:   # ARNS-HMC
            lines.append((f"chain {k}: held out (before the span's updates)", c[:, 0], c[:, 1],
                          "iteration", "RMSE of U on the span's states"))
            lines.append((f"chain {k}: after the updates", c[:, 0], c[:, 2],
                          "iteration", "RMSE of U on the span's states"))
        elif isinstance(c, dict) and "sq_error" in c:                          # VHMC
            rel = c["sq_error"] / np.maximum(c["sq_grad"], np.finfo(float).tiny)
            w = max(1, min(100, len(rel) // 10 or 1))
            lines.append((f"chain {k}", np.asarray(c["iteration"]), _running_mean(rel, w),
                          "training iteration",
                          f"held-out |grad z - grad U|^2 / |grad U|^2 (mean of {w})"))
        elif isinstance(c, dict) and "loss" in c:                              # NNgHMC
            it = np.arange(1, len(c["loss"]) + 1)
            lines.append((f"training at {c['iteration']}: train", it, c["loss"],
                          "optimiser iteration", "loss (standardised)"))
            if len(c["holdout_loss"]):
                lines.append((f"training at {c['iteration']}: held out",
                              np.arange(1, len(c["holdout_loss"]) + 1), c["holdout_loss"],
                              "optimiser iteration", "loss (standardised)"))
    if not lines and cur:
        raise ValueError(f"unrecognised training curve in the {method} result")
    return lines


def plot_training(res: PlottableResult, ax: "Axes | None" = None, log: bool = True) -> "Figure":
    """The surrogate's training curve (see :func:`training_curves`).

    Raises ValueError when the run trained no surrogate.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> res = fs.sample(model, method="vhmc", n_draws=500)             # doctest: +SKIP
    >>> fig = res.plot_training()                                     # doctest: +SKIP
    """
    lines = training_curves(res)
    if not lines:
        raise ValueError(f"the {res.method} result has no surrogate training curve "
                         "(samplers that train one: rns-hmc, arns-hmc, vhmc, nnghmc)")
    fig, (ax,) = _axes(ax, 1, size=(6.0, 3.2))
    for i, (label, x, y, xlabel, ylabel) in enumerate(lines):
        ax.plot(x, y, lw=1.0, marker="o" if len(x) < 20 else None, ms=3, color=f"C{i % 10}",
                label=label)
    xlabel, ylabel = lines[0][3], lines[0][4]
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ys = np.concatenate([np.asarray(line[2], dtype=float) for line in lines])
    if log and np.all(ys[np.isfinite(ys)] > 0) and np.isfinite(ys).any():
        ax.set_yscale("log")
    ax.set_title(f"{res.method}: surrogate training")
    ax.legend(fontsize="small")
    return fig
