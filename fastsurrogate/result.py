"""One result type for every sampler."""

import numpy as np

__all__ = ["Result"]


class Result:
    """Draws, per-draw statistics and timings of a sampler run.

    Attributes
    ----------
    draws : ndarray, shape (chains, draws, dim)
        Post-warm-up draws on the sampler's (unconstrained) scale.
    stats : dict of ndarray, each (chains, draws)
        Per-draw statistics: ``accepted``, ``accept_prob``, ``energy_error``,
        ``divergent``, ``n_steps``, ``potential`` (U at the draw), ``energy``,
        ``step_size``, ``judge_evaluated``, ``tree_depth`` (NUTS; 0 otherwise).
    warmup_draws : ndarray (chains, n_warmup, dim) or None
        Warm-up / exploration draws when kept.
    warmup_stats : dict of ndarray or None
    method : str
    param_names : list of str
    step_size : ndarray (chains,)
        Step size used after warm-up.
    inv_metric : list of ndarray or None
        Inverse mass matrix of each chain after warm-up.
    timings : dict
        Wall seconds per phase (the slowest chain's), e.g. ``warmup``,
        ``sample``, ``train``; ``timings_per_chain`` keeps every chain's.
    interrupted : bool
        True when the run was stopped (Ctrl-C or an error) before the end;
        the arrays then hold what was completed.
    exact : bool
        Whether the draws target the exact posterior (False for samplers
        whose Metropolis test uses a surrogate).
    info : dict
        Sampler-specific extras (decisions of schedules, counts).
    surrogate : Potential or None
        The trained surrogate, for samplers that train one.
    """

    def __init__(self, *, draws, stats, method, potential=None, param_names=None,
                 warmup_draws=None, warmup_stats=None, step_size=None, inv_metric=None,
                 timings=None, timings_per_chain=None, interrupted=False, exact=True,
                 info=None, surrogate=None):
        self.draws = draws
        self.stats = stats
        self.method = method
        self.potential = potential
        d = draws.shape[-1]
        self.param_names = list(param_names) if param_names is not None else [
            f"q[{i}]" for i in range(d)]
        self.warmup_draws = warmup_draws
        self.warmup_stats = warmup_stats
        self.step_size = step_size
        self.inv_metric = inv_metric
        self.timings = dict(timings or {})
        self.timings_per_chain = timings_per_chain or []
        self.interrupted = interrupted
        self.exact = exact
        self.info = dict(info or {})
        self.surrogate = surrogate

    # -- shape ---------------------------------------------------------------
    @property
    def chains(self):
        return self.draws.shape[0]

    @property
    def n_draws(self):
        return self.draws.shape[1]

    @property
    def dim(self):
        return self.draws.shape[2]

    @property
    def acceptance_rate(self):
        """Mean acceptance probability after warm-up (per chain, shape (chains,))."""
        return self.stats["accept_prob"].mean(axis=1) if self.n_draws else np.full(self.chains, np.nan)

    @property
    def n_divergent(self):
        return int(self.stats["divergent"].sum())

    def sampling_seconds(self):
        """Sampling-phase seconds summed over chains (CPU-time-like)."""
        per = [t.get("sample", np.nan) for t in self.timings_per_chain]
        return float(np.sum(per)) if per else self.timings.get("sample", np.nan)

    def seconds_per_iteration(self):
        """Mean sampling seconds per iteration of one chain."""
        if not self.n_draws:
            return np.nan
        return self.sampling_seconds() / (self.chains * self.n_draws)

    def constrained(self):
        """Draws mapped to the model's constrained quantities: dict name -> (chains, draws)."""
        if self.potential is not None and hasattr(self.potential, "constrain"):
            return self.potential.constrain(self.draws)
        return {n: self.draws[..., i] for i, n in enumerate(self.param_names)}

    # -- diagnostics -----------------------------------------------------------
    def summary(self, constrained=False):
        """Per-parameter table (mean, sd, MCSE, bulk/tail ESS, Geyer ESS, R-hat)
        plus run-level figures in ``table.overall`` (acceptance, divergences,
        min/median/max ESS, seconds per iteration, min ESS per second)."""
        from . import diagnostics
        if self.n_draws < 4:
            raise ValueError(f"summary needs at least 4 draws per chain; have {self.n_draws}")
        if constrained:
            c = self.constrained()
            names = list(c)
            draws = np.stack([np.asarray(c[n]) for n in names], axis=-1)
        else:
            names, draws = self.param_names, self.draws
        table = diagnostics.summary(draws, names=names)
        ess = np.asarray(table["ess"], dtype=float)
        finite = ess[np.isfinite(ess)]       # all NaN when no chain ever moved
        ess_min, ess_med, ess_max = ((float(finite.min()), float(np.median(finite)),
                                      float(finite.max())) if finite.size else (np.nan,) * 3)
        secs = self.sampling_seconds()
        table.overall = {
            "method": self.method,
            "chains": self.chains,
            "draws": self.n_draws,
            "acceptance": float(np.mean(self.acceptance_rate)),
            "divergent": self.n_divergent,
            "ess_min": ess_min,
            "ess_median": ess_med,
            "ess_max": ess_max,
            "seconds_per_iteration": self.seconds_per_iteration(),
            "min_ess_per_second": ess_min / secs if secs > 0 else np.nan,
            "timings": dict(self.timings),
            "exact": self.exact,
            "target": self.target,
            "interrupted": self.interrupted,
        }
        return table

    def to_arviz(self):
        """An ``arviz.InferenceData`` with the (constrained) draws and sample stats."""
        try:
            import arviz as az
        except ImportError as exc:
            raise ImportError("to_arviz needs ArviZ: pip install arviz") from exc
        posterior = {k: np.asarray(v) for k, v in self.constrained().items()}
        names = {"accept_prob": "acceptance_rate", "divergent": "diverging",
                 "energy": "energy", "n_steps": "n_steps", "step_size": "step_size",
                 "potential": "lp", "energy_error": "energy_error", "accepted": "accepted"}
        sample_stats = {}
        for k, new in names.items():
            if k in self.stats:
                v = np.asarray(self.stats[k])
                if k == "potential":
                    v = -v
                if k in ("divergent", "accepted"):
                    v = v.astype(bool)
                sample_stats[new] = v
        kw = dict(posterior=posterior, sample_stats=sample_stats,
                  attrs={"method": self.method, "exact": int(self.exact),
                         "inference_library": "fastsurrogate"})
        return az.from_dict(**kw)

    def __repr__(self):
        state = " (interrupted)" if self.interrupted else ""
        if not self.exact:
            state += "; APPROXIMATE: draws target the surrogate-induced distribution"
        acc = np.mean(self.acceptance_rate) if self.n_draws else float("nan")
        return (f"<Result {self.method}: {self.chains} chains x {self.n_draws} draws, "
                f"dim {self.dim}, acceptance {acc:.3f}{state}>")

    @property
    def target(self):
        """What the draws target: "exact posterior" or "surrogate-induced
        distribution (approximate)" (``exact`` False, e.g. VHMC)."""
        return "exact posterior" if self.exact else "surrogate-induced distribution (approximate)"
