"""One result type for every sampler."""
import re
import warnings
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import plots
from ._typing import ArrayLike, FloatArray, IntArray
from .core._checks import repeated
from .core._potential import Potential, RecordingPotential, WeightedSum
from .diagnostics import mcmc

if TYPE_CHECKING:                     # matplotlib is imported when a plot is made
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["Result", "DetachedPotential", "has_transform"]


class Result:
    """Draws, per-draw statistics and timings of a sampler run.

    Attributes
    ----------
    draws : ndarray, shape (chains, draws, dim)
        Post-warm-up draws on the sampler's (unconstrained) scale.  After an
        early stop the chains may hold different numbers of draws: ``draws``
        is then NaN-padded to the longest chain and ``n_done[k]`` says how
        many rows of chain k are real (see :meth:`complete_draws`).
    n_done : ndarray of int, shape (chains,)
        Draws completed per chain (all ``draws.shape[1]`` after a full run).
    warmup_n_done : ndarray of int, shape (chains,) or None
        The same for ``warmup_draws``.  Also short of ``n_warmup`` when a
        chain's warm-up ended on convergence (``warmup_end="converged"``,
        the default of NUTS and HMC: ``info["warmup_converged_at"]``).
    stats : dict of ndarray, each (chains, draws)
        Per-draw statistics (padded like ``draws``: NaN, or 0 for the
        integer ones): ``accepted``, ``accept_prob``, ``energy_error``,
        ``divergent``, ``n_steps``, ``potential`` (U at the draw), ``energy``,
        ``step_size``, ``judge_evaluated``, ``tree_depth`` (NUTS; 0 otherwise).
    warmup_draws : ndarray (chains, n_warmup, dim) or None
        Warm-up / exploration draws when kept (NaN-padded past
        ``warmup_n_done[k]``).
    warmup_stats : dict of ndarray or None
    method : str
    param_names : list of str
    step_size : ndarray (chains,)
        Step size used after warm-up.
    inv_metric : list of ndarray or None
        Inverse mass matrix of each chain after warm-up.
    timings : dict
        Wall seconds per phase (the slowest chain's), e.g. ``warmup``,
        ``sample``, ``train``, and ``total``, the whole run's wall clock
        (set-up, warm-up, training, sampling); ``timings_per_chain`` keeps
        every chain's.
    interrupted : bool
        True when the run was stopped (Ctrl-C or an error) before the end;
        the arrays then hold every iteration each chain completed (ragged:
        padded, with ``n_done``).  :meth:`summary` and :meth:`to_arviz`
        then use :meth:`complete_draws`, the largest block of complete rows
        (and say so in a warning).
    exact : bool
        Whether the draws target the exact posterior (False for samplers
        whose Metropolis test uses a surrogate).
    info : dict
        Sampler-specific extras (decisions of schedules, counts).
    surrogate : Potential or None
        The trained surrogate, for samplers that train one.
    """

    def __init__(self, *, draws: FloatArray, stats: dict[str, np.ndarray], method: str,
                 potential: Any = None, param_names: Sequence[str] | None = None,
                 warmup_draws: FloatArray | None = None,
                 warmup_stats: dict[str, np.ndarray] | None = None,
                 step_size: FloatArray | None = None, inv_metric: list[np.ndarray] | None = None,
                 timings: dict[str, float] | None = None,
                 timings_per_chain: list[dict[str, float]] | None = None,
                 interrupted: bool = False, exact: bool = True,
                 info: dict[str, Any] | None = None, surrogate: Any = None,
                 n_done: ArrayLike | None = None, warmup_n_done: ArrayLike | None = None,
                 continuation: Any = None) -> None:
        if not (isinstance(draws, np.ndarray) and draws.ndim == 3):
            raise ValueError(f"draws must be an ndarray (chains, draws, dim), got "
                             f"{getattr(draws, 'shape', type(draws).__name__)}")
        self.draws = draws
        self.n_done: IntArray = (
            np.full(draws.shape[0], draws.shape[1], dtype=np.int64) if n_done is None
            else np.asarray(n_done, dtype=np.int64))
        if warmup_n_done is None and warmup_draws is not None:
            warmup_n_done = np.full(warmup_draws.shape[0], warmup_draws.shape[1], dtype=np.int64)
        self.warmup_n_done: IntArray | None = (
            None if warmup_n_done is None else np.asarray(warmup_n_done, dtype=np.int64))
        self.stats = stats
        self.method = method
        self.potential = potential
        d = draws.shape[-1]
        self.param_names: list[str] = list(param_names) if param_names is not None else [
            f"q[{i}]" for i in range(d)]
        self.warmup_draws = warmup_draws
        self.warmup_stats = warmup_stats
        self.step_size = step_size
        self.inv_metric = inv_metric
        self.timings = dict(timings or {})
        self.timings_per_chain = timings_per_chain or []
        self.interrupted = interrupted
        self.exact = exact
        self.info: dict[str, Any] = dict(info or {})
        self.surrogate = surrogate
        # what sample(..., resume=result) continues from (samplers._checkpoint)
        self._continuation = continuation

    # -- shape ---------------------------------------------------------------
    @property
    def chains(self) -> int:
        return self.draws.shape[0]

    @property
    def n_draws(self) -> int:
        """Rows of ``draws`` (the longest chain's count after an early stop)."""
        return self.draws.shape[1]

    @property
    def ragged(self) -> bool:
        """True when the chains completed different numbers of draws."""
        return bool(np.any(self.n_done != self.draws.shape[1]))

    def complete_draws(self) -> tuple[FloatArray, dict[str, np.ndarray], IntArray]:
        """The largest rectangular block of completed draws.

        Returns ``(draws, stats, chains)``: draws ``(len(chains), n, dim)``,
        stats ``{name: (len(chains), n)}`` and the indices of the chains
        kept.  Chains are kept in order of their counts so as to maximise
        ``len(chains) * n`` (n the smallest count kept): after a full run,
        every chain and every draw; when chain 0 finished and chain 1 was
        stopped early (chains run in turn), chain 0 alone.

        Examples
        --------
        >>> draws, stats, kept = res.complete_draws()   # doctest: +SKIP
        """
        counts = self.n_done
        order = np.argsort(-counts, kind="stable")
        best_k, best = 1, -1
        for k in range(1, len(order) + 1):
            total = k * int(counts[order[k - 1]])
            if total > best:
                best_k, best = k, total
        kept = np.sort(order[:best_k])
        n = int(counts[order[best_k - 1]]) if len(order) else 0
        draws = self.draws[kept, :n]
        stats = {k: np.asarray(v)[kept, :n] for k, v in self.stats.items()}
        return draws, stats, kept

    def _complete(self, what):
        draws, stats, kept = self.complete_draws()
        if self.ragged:
            warnings.warn(
                f"{what}: the chains completed {self.n_done.tolist()} draws; using "
                f"chains {kept.tolist()} x their first {draws.shape[1]} draws",
                RuntimeWarning, stacklevel=3)
        return draws, stats, kept

    @property
    def dim(self) -> int:
        return self.draws.shape[2]

    @property
    def acceptance_rate(self) -> FloatArray:
        """Mean acceptance probability after warm-up (per chain, shape (chains,);
        over each chain's completed draws, NaN for a chain with none)."""
        acc = np.asarray(self.stats.get("accept_prob", np.zeros((self.chains, 0))))
        out = np.full(self.chains, np.nan)
        for k in range(self.chains):
            n = int(self.n_done[k])
            if n:
                out[k] = acc[k, :n].mean()
        return out

    @property
    def n_divergent(self) -> int:
        return int(self.stats["divergent"].sum())

    def sampling_seconds(self) -> float:
        """Sampling-phase seconds summed over chains (CPU-time-like)."""
        per = [t.get("sample", np.nan) for t in self.timings_per_chain]
        return float(np.sum(per)) if per else self.timings.get("sample", np.nan)

    def seconds_per_iteration(self) -> float:
        """Mean sampling seconds per iteration of one chain."""
        total = int(self.n_done.sum())
        if not total:
            return np.nan
        return self.sampling_seconds() / total

    def constrained(self) -> dict[str, np.ndarray]:
        """Draws mapped to the model's constrained quantities: dict name -> (chains, draws)."""
        return self._constrain(self.draws)

    def _constrain(self, draws, source="draws", block=None):
        """The constrained quantities of ``draws``: rows ``block`` = (chains
        kept, rows) of ``source`` ("draws" or "warmup") when not None.  An
        unpickled Result reads them from what its pickle kept."""
        pot = self.potential
        if isinstance(pot, DetachedPotential) and pot.kept(source) is not None:
            out = pot.kept(source)
            if block is not None:
                kept, n = block
                out = {k: np.asarray(v)[kept, :n] for k, v in out.items()}
            return out
        if isinstance(pot, DetachedPotential):
            if pot.had_constrain:
                return pot.constrain(draws)        # raises: put the model back
        elif pot is not None and has_transform(pot):
            return pot.constrain(draws)
        names = list(self.param_names)
        twice = repeated(names)
        if twice:
            raise ValueError(f"the parameter names repeat {twice}: give each "
                             "parameter its own name")
        return {n: draws[..., i] for i, n in enumerate(names)}

    # -- diagnostics -----------------------------------------------------------
    def summary(self, constrained: bool = False) -> mcmc.SummaryTable:
        """Per-parameter table (mean, sd, MCSE, bulk/tail ESS, Geyer ESS, R-hat)
        plus run-level figures in ``table.overall``: acceptance, divergences,
        min/median/max ESS, seconds per iteration, ``min_ess_per_second``
        (over the WHOLE run's wall clock, ``timings["total"]``: warm-up,
        training and sampling), ``min_ess_per_sampling_second`` (over the
        sampling phase's seconds summed over chains), and for NUTS with a
        surrogate what it did (``surrogate``: :meth:`surrogate_report`)."""
        draws, _, kept = self._complete("summary")
        if draws.shape[1] < 4:
            raise ValueError(f"summary needs at least 4 draws per chain; the chains completed "
                             f"{self.n_done.tolist()}")
        if constrained:
            c = self._constrain(draws, block=(kept, draws.shape[1]))
            names = list(c)
            draws = np.stack([np.asarray(c[n]) for n in names], axis=-1)
        else:
            names = self.param_names
        table = mcmc.summary(draws, names=names)
        ess = np.asarray(table["ess"], dtype=float)
        finite = ess[np.isfinite(ess)]       # all NaN when no chain ever moved
        ess_min, ess_med, ess_max = ((float(finite.min()), float(np.median(finite)),
                                      float(finite.max())) if finite.size else (np.nan,) * 3)
        secs = self.sampling_seconds()
        total = self.timings.get("total", np.nan)
        table.overall = {
            "method": self.method,
            "chains": self.chains,
            "draws": self.n_draws,
            "n_done": self.n_done.tolist(),
            "acceptance": float(np.nanmean(self.acceptance_rate)) if self.n_done.any() else np.nan,
            "divergent": self.n_divergent,
            "ess_min": ess_min,
            "ess_median": ess_med,
            "ess_max": ess_max,
            "seconds_per_iteration": self.seconds_per_iteration(),
            "min_ess_per_second": ess_min / total if total > 0 else np.nan,
            "min_ess_per_sampling_second": ess_min / secs if secs > 0 else np.nan,
            "surrogate": self.surrogate_report(),
            "timings": dict(self.timings),
            "exact": self.exact,
            "target": self.target,
            "interrupted": self.interrupted,
        }
        return table

    # ArviZ's names for the sampler statistics (sample_stats group).
    _ARVIZ_STATS = {"accept_prob": "acceptance_rate", "divergent": "diverging",
                    "energy": "energy", "step_size": "step_size", "n_steps": "n_steps",
                    "potential": "lp", "tree_depth": "tree_depth",
                    "energy_error": "energy_error", "accepted": "accepted"}

    def _arviz_stats(self, stats):
        out = {}
        for k, new in self._ARVIZ_STATS.items():
            if k not in stats:
                continue
            v = np.asarray(stats[k])
            if k == "tree_depth" and self.method != "nuts" and not np.any(v):
                continue            # only NUTS builds trees
            if k == "potential":
                v = -v              # lp is the log density
            if k in ("divergent", "accepted"):
                v = v.astype(bool)
            out[new] = v
        return out

    def to_arviz(self, *, dims: dict[str, list[str]] | None = None,
                 coords: dict[str, Any] | None = None, rename: dict[str, str] | None = None,
                 include_warmup: bool = False) -> Any:
        """An ``arviz.InferenceData`` with the (constrained) draws and sample stats.

        Scalars named ``name[i]`` (or ``name[i,j]``, ...) are gathered into one
        variable ``name`` with one dimension per index (default dimension
        names ``name_dim_0``, ..., coordinates the indices as written), so a
        model's ``beta[0]..beta[49]`` is one variable ``beta`` of shape
        ``(chain, draw, 50)``.  Sample stats use ArviZ's names:
        ``acceptance_rate``, ``diverging``, ``energy``, ``step_size``,
        ``n_steps``, ``lp`` (log density, ``-U``), ``tree_depth`` (NUTS), plus
        ``energy_error`` and ``accepted``.

        Parameters
        ----------
        dims : dict, optional
            Variable name -> list of dimension names, e.g.
            ``{"beta": ["feature"]}`` (after ``rename``).  Default: the
            potential's ``arviz_dims`` when it has them (a PyMC model's
            dims, ``fs.from_pymc``), else ``name_dim_0``, ....
        coords : dict, optional
            Dimension name -> coordinate values, e.g. ``{"feature": names}``;
            default the potential's ``arviz_coords`` when it has them.
        rename : dict, optional
            Old variable name -> new one, e.g. ``{"q": "beta"}`` for a
            Potential whose parameters are the default ``q[0], q[1], ...``.
        include_warmup : bool
            Also store the warm-up draws (when the run kept them) in the
            ``warmup_posterior`` / ``warmup_sample_stats`` groups (NaN past a
            chain's ``warmup_n_done`` when the warm-ups' lengths differ).

        Examples
        --------
        >>> import fastsurrogate as fs
        >>> res = fs.sample(fs.models.StandardNormal(3), n_draws=100, n_warmup=100,
        ...                 chains=2, seed=0, progress=False)
        >>> idata = res.to_arviz(rename={"q": "x"}, dims={"x": ["axis"]})  # doctest: +SKIP
        >>> idata.posterior["x"].shape                                     # doctest: +SKIP
        (2, 100, 3)
        """
        try:
            import arviz as az
        except ImportError as exc:
            raise ImportError("to_arviz needs ArviZ: pip install arviz") from exc
        draws, stats, kept = self._complete("to_arviz")
        rename = dict(rename or {})
        posterior, auto_dims, auto_coords = _gather_vectors(
            self._constrain(draws, block=(kept, draws.shape[1])), rename)
        # the potential's own dims and coords (a PyMC model's), then the caller's
        pot_dims = {rename.get(k, k): list(v) for k, v in
                    (getattr(self.potential, "arviz_dims", None) or {}).items()
                    if rename.get(k, k) in posterior}
        dims = {**auto_dims, **pot_dims, **dict(dims or {})}
        used = {d for ds in dims.values() for d in ds}
        auto_coords = {**auto_coords, **(getattr(self.potential, "arviz_coords", None) or {})}
        coords = {**{k: v for k, v in auto_coords.items() if k in used}, **dict(coords or {})}
        kw = dict(posterior=posterior, sample_stats=self._arviz_stats(stats),
                  dims=dims, coords=coords,
                  attrs={"method": self.method, "exact": int(self.exact),
                         "inference_library": "fastsurrogate"})
        if include_warmup and (self.warmup_draws is None or not self.warmup_draws.shape[1]):
            warnings.warn("to_arviz(include_warmup=True): this run kept no warm-up draws "
                          "(keep_warmup=False, or no warm-up); the warm-up groups are left out",
                          RuntimeWarning, stacklevel=2)
        elif include_warmup:
            warm = self._constrain(self.warmup_draws, source="warmup")
            kw["warmup_posterior"] = _gather_vectors(warm, rename)[0]
            kw["warmup_sample_stats"] = self._arviz_stats(self.warmup_stats or {})
            kw["save_warmup"] = True
        return az.from_dict(**kw)

    def surrogate_report(self) -> dict[str, Any] | None:
        """What a surrogate did in this run (NUTS with a surrogate), else None:
        the share of iterations it drove, the exact U-and-gradient and U-only
        calls, the refits and the whole run's seconds."""
        info = self.info.get("surrogate") if isinstance(self.info, dict) else None
        if not info or not info.get("used"):
            return None
        return {"share": float(info["surrogate_share"]),
                "exact_gradient_calls": int(info["exact_gradient_calls"]),
                "exact_value_calls": int(info["exact_value_calls"]),
                "refits": int(info["n_refits"]),
                "seconds": float(self.timings.get("total", np.nan)),
                "sampling_kernels": [c["sampling_kernel"] for c in info["chains"]]}

    def report_line(self) -> str:
        """One line on what ran: the method, the surrogate's share and the
        exact calls (with a surrogate), the whole run's seconds."""
        rep = self.surrogate_report()
        secs = self.timings.get("total", np.nan)
        if rep is None:
            return f"{self.method}: {self.chains} chains, {secs:.1f} s"
        exact = sum(k == "exact" for k in rep["sampling_kernels"])
        tail = f"; {exact} chain(s) sampled with exact NUTS" if exact else ""
        return (f"{self.method} with surrogate: it drove {100 * rep['share']:.0f} % of "
                f"iterations; exact calls {rep['exact_gradient_calls']} U+gradient, "
                f"{rep['exact_value_calls']} U only; {rep['refits']} refits; "
                f"{secs:.1f} s{tail}")

    def __repr__(self) -> str:
        state = " (interrupted)" if self.interrupted else ""
        rep = self.surrogate_report()
        if rep is not None:
            state += (f"; surrogate drove {100 * rep['share']:.0f} % of iterations, exact "
                      f"calls {rep['exact_gradient_calls']} U+grad + "
                      f"{rep['exact_value_calls']} U, {rep['refits']} refits, "
                      f"{rep['seconds']:.1f} s")
        if not self.exact:
            state += f"; APPROXIMATE: draws target the {self.target.replace(' (approximate)', '')}"
        acc = np.nanmean(self.acceptance_rate) if self.n_done.any() else float("nan")
        if self.ragged:
            state += f"; draws per chain {self.n_done.tolist()}"
        # where a surrogate drove the trees, accept_prob is the exact test's
        # (its V error), not NUTS's mean over the tree (whose target is 0.8)
        what = "exact-test acceptance" if rep is not None and rep["share"] > 0 else "acceptance"
        return (f"<Result {self.method}: {self.chains} chains x {self.n_draws} draws, "
                f"dim {self.dim}, {what} {acc:.3f}{state}>")

    # -- pickling ----------------------------------------------------------------
    def __getstate__(self):
        """Pickle without the potential: a model holds its data set (X, y), which
        a Result does not need.  ``potential`` becomes a
        :class:`DetachedPotential` (dimension, names, kind; evaluating it
        raises), and so does every reference to it in ``info`` and in the
        continuation state.  Surrogates (small) are kept."""
        state = dict(self.__dict__)
        pot = self.potential
        if pot is None or isinstance(pot, DetachedPotential):
            return state
        det = DetachedPotential(pot, self)
        state["potential"] = det
        state["info"] = {k: _detach(v, pot, det) for k, v in self.info.items()}
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_continuation", None)

    @property
    def target(self) -> str:
        """What the draws target: "exact posterior" or "surrogate-induced
        distribution (approximate)" (``exact`` False, e.g. VHMC)."""
        if self.exact:
            return "exact posterior"
        return self.info.get("target", "surrogate-induced distribution (approximate)")

    # -- plots (fastsurrogate.plots; matplotlib is imported when a plot is made) --
    def plot_trace(self, params: str | int | Sequence[str | int] | None = None,
                   warmup: bool = False, axes: Any = None) -> "Figure":
        """Trace plot (:func:`fastsurrogate.plots.plot_trace`); returns the Figure.

        >>> res.plot_trace(["q[0]"]).savefig("trace.png")       # doctest: +SKIP
        """
        return plots.plot_trace(self, params=params, warmup=warmup, axes=axes)

    def plot_marginals(self, params: str | int | Sequence[str | int] | None = None,
                       reference: tuple[ArrayLike, ArrayLike] | None = None, bins: int = 40,
                       axes: Any = None) -> "Figure":
        """Marginal histograms, optionally against reference ``(mean, sd)``
        (:func:`fastsurrogate.plots.plot_marginals`); returns the Figure."""
        return plots.plot_marginals(self, params=params, reference=reference, bins=bins, axes=axes)

    def plot_acceptance(self, window: int = 50, warmup: bool = True,
                        ax: "Axes | None" = None) -> "Figure":
        """Acceptance probability over iterations
        (:func:`fastsurrogate.plots.plot_acceptance`); returns the Figure."""
        return plots.plot_acceptance(self, window=window, warmup=warmup, ax=ax)

    def plot_energy(self, bins: int = 40, ax: "Axes | None" = None) -> "Figure":
        """Marginal energy and energy transitions, with E-BFMI
        (:func:`fastsurrogate.plots.plot_energy`); returns the Figure."""
        return plots.plot_energy(self, bins=bins, ax=ax)

    def plot_training(self, ax: "Axes | None" = None, log: bool = True) -> "Figure":
        """The surrogate's training curve (:func:`fastsurrogate.plots.plot_training`);
        returns the Figure."""
        return plots.plot_training(self, ax=ax, log=log)


def has_transform(potential: object) -> bool:
    """Whether ``potential.constrain`` is more than the identity over its
    parameter names (a model with a transform, e.g. a log-scale), looking
    through the wrappers that delegate it (WeightedSum, a recorder)."""
    method = getattr(type(potential), "constrain", None)
    if method is None or method is Potential.constrain:
        return False
    if type(potential) is WeightedSum:
        return has_transform(potential.potentials[0])
    if type(potential) is RecordingPotential:
        return has_transform(potential.potential)
    return True


class DetachedPotential:
    """What an unpickled :class:`Result` keeps of its potential: ``dim``,
    ``param_names``, ``kind`` (the class name) and, when the model had a
    transform (``constrain``), the constrained quantities of the Result's
    draws and warm-up draws, computed when it was pickled, so that
    ``constrained()``, ``summary(constrained=True)`` and ``to_arviz()``
    work without the model.  Evaluating it (or its ``constrain`` on other
    draws) raises a RuntimeError that says to put the model back
    (``result.potential = model``); ``sample(model, ..., resume=result)``
    takes the model as its argument anyway."""

    def __init__(self, potential, result=None):
        self.dim = int(potential.dim)
        self.param_names = list(potential.param_names)
        self.kind = type(potential).__name__
        self.had_constrain = has_transform(potential)
        # a PyMC model's dims and coords, for to_arviz
        self.arviz_dims = getattr(potential, "arviz_dims", None)
        self.arviz_coords = getattr(potential, "arviz_coords", None)
        self._kept = {}
        if self.had_constrain and result is not None:
            for source, draws in (("draws", result.draws), ("warmup", result.warmup_draws)):
                if draws is None:
                    continue
                try:
                    with np.errstate(all="ignore"):     # NaN rows of a stopped chain
                        self._kept[source] = {k: np.asarray(v) for k, v in
                                              potential.constrain(draws).items()}
                except Exception:         # a transform that fails: raise when asked
                    pass

    def kept(self, source):
        """The constrained quantities of the Result's ``source`` ("draws" or
        "warmup") kept when it was pickled, or None."""
        return self.__dict__.get("_kept", {}).get(source)

    def _gone(self, *args, **kwargs):
        raise RuntimeError(
            f"this Result was unpickled without its {self.kind} potential (a Result pickles "
            "without the data set); set result.potential = <the model> to evaluate it")

    value = grad = value_and_grad = log_density = log_density_gradient = _gone

    def __getattr__(self, name):
        if name == "constrain" and self.__dict__.get("had_constrain"):
            return self._gone
        raise AttributeError(name)

    def __repr__(self):
        return f"<DetachedPotential {self.kind}, dim {self.dim}>"


def _detach(value, pot, det):
    if value is pot:
        return det
    if isinstance(value, list):
        return [det if v is pot else v for v in value]
    return value


_INDEXED = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<idx>[^\[\]]+)\]$")


def _gather_vectors(named, rename):
    """Scalars ``name[i, ...]`` -> one array per ``name`` with trailing axes.

    ``named`` maps names to arrays ``(chains, draws)`` (or already with
    trailing axes).  A group becomes one variable when its indices are
    integers filling a full grid (any common start, e.g. Stan's 1-based
    ones); otherwise its entries stay separate.  Returns ``(variables, dims,
    coords)`` for ``arviz.from_dict``.
    """
    groups, order = {}, []
    for name, value in named.items():
        m = _INDEXED.match(name)
        key = m.group("base") if m else None
        idx = None
        if m:
            try:
                idx = tuple(int(t) for t in m.group("idx").split(","))
            except ValueError:
                key = None
        if key is None:
            order.append(("scalar", name))
            continue
        if key not in groups:
            groups[key] = []
            order.append(("group", key))
        groups[key].append((idx, name, value))

    out, dims, coords = {}, {}, {}
    for kind, key in order:
        if kind == "scalar":
            out[rename.get(key, key)] = np.asarray(named[key])
            continue
        entries = groups[key]
        idxs = np.array([e[0] for e in entries]) if len({len(e[0]) for e in entries}) == 1 else None
        ok = idxs is not None
        if ok:
            lo = idxs.min(axis=0)
            shape = tuple(int(s) for s in idxs.max(axis=0) - lo + 1)
            ok = (int(np.prod(shape)) == len(entries)
                  and len({tuple(i) for i in idxs.tolist()}) == len(entries)
                  and key not in named)
        if not ok:                       # not a full grid: keep the scalars
            for _, name, value in entries:
                out[rename.get(name, name)] = np.asarray(value)
            continue
        first = np.asarray(entries[0][2])
        arr = np.empty(first.shape + shape, dtype=first.dtype)
        for i, _, value in entries:
            arr[(...,) + tuple(np.asarray(i) - lo)] = np.asarray(value)
        new = rename.get(key, key)
        out[new] = arr
        names = [f"{new}_dim_{k}" for k in range(len(shape))]
        dims[new] = names
        for k, n in enumerate(names):
            coords[n] = np.arange(lo[k], lo[k] + shape[k])
    return out, dims, coords
