"""Exact Hamiltonian Monte Carlo with Stan-style warm-up.

The chain loop runs in C (fastsurrogate.core._hmc.Chain); this module holds only
the phases: step-size search, dual averaging of the step size, mass-matrix
windows, sampling.
"""

import numpy as np

from .._typing import ArrayLike
from ..core._hmc import Chain, LowRankMetric
from ..core._potential import Potential
from ._base import Sampler
from ._chain import warmup_windows, regularized_metric
from ._checks import (check_int, check_positive, check_metric, check_flag, check_number,
                      check_choice)

__all__ = ["HMC"]

_METRICS = ("unit", "diag", "dense", "low-rank")
_ADAPTATIONS = ("stan", "fisher")


class HMC(Sampler):
    """Exact HMC: leapfrog with the exact gradient, Metropolis test with the exact U.

    Parameters
    ----------
    potential : Potential
        The target, U = -log density.
    step_size : float, optional
        Leapfrog step size.  With ``adapt=True`` it is the starting point of
        the dual-averaging search (found by Stan's heuristic when omitted);
        with ``adapt=False`` it is used as given (default 0.1).
    n_steps : int
        Leapfrog steps per iteration (the maximum with ``random_n_steps``).
    random_n_steps : bool
        Draw the number of steps uniformly from 1..n_steps every iteration,
        as the RNS-HMC paper does (default).  A fixed path length can resonate
        with the target (a trajectory near a full period returns to where it
        started, and the chain barely moves); random lengths break that.
    metric : {"low-rank", "diag", "dense", "unit"}, ndarray or LowRankMetric, optional
        The mass matrix adapted when ``adapt`` ("low-rank": a diagonal plus
        the directions where the draws and gradients disagree with it, with
        ``adaptation="fisher"``; "diag"; "dense": in Stan's windows), the
        identity, or a fixed inverse metric: (dim,), (dim, dim) or a
        :class:`fastsurrogate.LowRankMetric`.  Default:
        "low-rank" with ``adaptation="fisher"``, "diag" with "stan".
    adapt : bool
        Adapt step size (and metric) during warm-up.
    adaptation : {"fisher", "stan"}
        How the metric is adapted.  "stan": Stan's windows, the variance
        of each window's draws (the former default: with it, and the
        metric left to its default, a run makes the draws it made before).
        "fisher" (default): nutpie's schedule and
        estimate (Seyboldt, Carlson & Carpenter 2026), in C after every
        warm-up iteration: M^{-1}_jj = sqrt(Var q_j / Var dU/dq_j), the
        diagonal Gaussian closest to the target in Fisher divergence, from
        the draws and gradients of the last one or two windows (10 states
        in the first 30 % of the warm-up, 80 later; the metric frozen in the
        last 15 %).  With ``metric="low-rank"`` the metric is rebuilt at
        each switch from the states of the last two windows: the diagonal
        estimate, and on top of it the eigen-directions of the
        Fisher-optimal covariance of those draws and gradients whose
        eigenvalues are outside [1/2, 2] (nutpie's low-rank modified mass
        matrix; csrc/fs_adapt.h), kept factored (``fs.LowRankMetric``).
        A dense metric adapts in Stan's windows either way.
    warmup_end : {"converged", "fixed"}, optional
        When the warm-up ends.  "converged" (the default with
        ``adaptation="fisher"``): once the chain is stationary, checked on
        consecutive blocks of 80 warm-up states: when no coordinate's
        estimate sqrt(Var q_j / Var dU/dq_j) differs between two blocks by
        more than a factor 2, the metric is set from both blocks, frozen,
        and the warm-up ends with the fixed schedule's last phase (15 % of
        ``n_warmup``, 150 iterations of the default 1000), in which the step
        size adapts alone; ``n_warmup`` is the ceiling (each chain decides
        for itself; ``result.warmup_n_done`` and
        ``result.info["warmup_converged_at"]`` say where).  The metric
        rests on the last 160 states whatever the warm-up's length, so
        once two blocks agree a longer warm-up would only draw the same
        estimate again.  "fixed": exactly ``n_warmup`` iterations (the only
        choice with ``adaptation="stan"``).
    target_accept : float
        Dual-averaging target acceptance probability.
    max_energy_error : float
        Energy error above which a proposal is a divergence.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> res = fs.HMC(fs.models.StandardNormal(3), n_steps=5).sample(
    ...     200, n_warmup=200, chains=1, seed=1, progress=False)
    >>> res.draws.shape
    (1, 200, 3)
    """

    method = "hmc"
    # the surrogate samplers train on their exact warm-up's rows: "fixed"
    _warmup_ends: tuple[str, ...] = ("converged", "fixed")

    def __init__(self, potential: Potential, *, step_size: float | None = None,
                 n_steps: int = 10, random_n_steps: bool = True,
                 metric: str | ArrayLike | LowRankMetric | None = None, adapt: bool = True,
                 target_accept: float = 0.8, max_energy_error: float = 1000.0,
                 adaptation: str = "fisher", warmup_end: str | None = None) -> None:
        super().__init__(potential)
        self.step_size = check_positive("step_size", step_size, allow_none=True)
        self.n_steps = check_int("n_steps", n_steps, 1)
        self.random_n_steps = check_flag("random_n_steps", random_n_steps)
        self.adaptation = check_choice("adaptation", adaptation, _ADAPTATIONS)
        if metric is None:
            metric = "low-rank" if self.adaptation == "fisher" else "diag"
        self.metric = check_metric(metric, _METRICS, potential.dim)
        self.adapt = check_flag("adapt", adapt)
        self.target_accept = check_number("target_accept", target_accept)
        if not 0 < self.target_accept < 1:
            raise ValueError("target_accept must be in (0, 1)")
        self.max_energy_error = check_positive("max_energy_error", max_energy_error)
        if isinstance(self.metric, str) and self.metric == "low-rank" \
                and self.adaptation != "fisher":
            raise ValueError('metric="low-rank" is adapted from draws and gradients: '
                             'pass adaptation="fisher"')
        self.warmup_end = self._check_warmup_end(warmup_end)

    def _check_warmup_end(self, warmup_end):
        ends = self._warmup_ends
        fisher = (self.adaptation == "fisher" and isinstance(self.metric, str)
                  and self.metric in ("diag", "low-rank"))
        if warmup_end is None:
            return ends[0] if fisher else "fixed"
        warmup_end = check_choice("warmup_end", warmup_end, ends)
        if warmup_end == "converged" and not fisher:
            raise ValueError('warmup_end="converged" watches the metric adapted from draws '
                             'and gradients: it needs adaptation="fisher" with metric '
                             '"diag" or "low-rank"')
        return warmup_end

    # -- pieces reused by the surrogate samplers -------------------------------
    def _initial_inv_metric(self):
        return None if isinstance(self.metric, str) else self.metric

    def make_chain(self, q0, generator, drive=None, judge=None, **kw):
        drive = self.potential if drive is None else drive
        judge = self.potential if judge is None else judge
        step = self.step_size if self.step_size is not None else (1.0 if self.adapt else 0.1)
        random_n_steps = self.random_n_steps and kw.get("algorithm", "hmc") != "nuts"
        return Chain(drive, judge, q0, generator, step_size=step, n_steps=self.n_steps,
                     random_n_steps=random_n_steps, inv_metric=self._initial_inv_metric(),
                     max_energy_error=self.max_energy_error, **kw)

    def warmup(self, chain, trace, ctx, n_warmup, key="warmup", offset=0, span=None):
        """Run n_warmup iterations into rows offset .. offset + n_warmup of
        `trace`, adapting when self.adapt (Stan's windows within them).
        ``span(chain, trace, a, b, key)`` runs rows a..b-1 and returns the row
        reached (default ``ctx.run_span``)."""
        span = ctx.run_span if span is None else span
        if not self.adapt or n_warmup == 0:
            return span(chain, trace, offset, offset + n_warmup, key)
        if (self.adaptation == "fisher" and isinstance(self.metric, str)
                and self.metric in ("diag", "low-rank")):
            return self._warmup_fisher(chain, trace, n_warmup, key, offset, span)
        if self.step_size is None:
            chain.find_step_size()
        chain.start_adaptation(self.target_accept)
        adapt_metric = isinstance(self.metric, str) and self.metric != "unit"
        first, ends = warmup_windows(n_warmup) if adapt_metric else (n_warmup, [])
        i = span(chain, trace, offset, offset + (first if ends else n_warmup), key)
        start = offset + first
        for end in ends:
            i = span(chain, trace, i, offset + end, key)
            chain.set_inv_metric(regularized_metric(trace["draws"][start:offset + end],
                                                    self.metric))
            chain.find_step_size()
            chain.start_adaptation(self.target_accept)
            start = offset + end
        i = span(chain, trace, i, offset + n_warmup, key)
        chain.finish_adaptation()
        return i

    def _warmup_fisher(self, chain, trace, n_warmup, key, offset, span):
        """The warm-up with the metric from draws and gradients, adapted in
        C after every iteration (fs_adapt.h); the step size is searched at
        the start and again after the first metric update (and after the
        last, when the warm-up ends on convergence).  Returns the row reached."""
        chain.start_metric_adaptation(n_warmup, low_rank=self.metric == "low-rank",
                                      stop_early=self.warmup_end == "converged")
        chain.find_step_size()
        chain.start_adaptation(self.target_accept)
        i = span(chain, trace, offset, offset + n_warmup, key)
        chain.finish_metric_adaptation()
        chain.finish_adaptation()
        return i

    # -- the algorithm -----------------------------------------------------------
    def phases(self, run):
        """Each chain on its own: warm-up (adaptation), then sampling."""
        run.start()
        run.each_chain(self.warmup_and_sample, run.n_warmup + run.n_draws, self.method)

    def finish(self, run):
        if self.warmup_end == "converged":
            run.info["warmup_converged_at"] = [c.warmup_converged_at for c in run.ctxs]

    def warmup_and_sample(self, ctx):
        ctx.chain = self.make_chain(ctx.q0, ctx.generator)
        n_warmup = ctx.run.n_warmup
        with ctx.phase("warmup"):
            rows = self.warmup(ctx.chain, ctx.warm, ctx, n_warmup)
        if self.warmup_end == "converged":
            ctx.report(n_warmup - rows)          # the progress bar counted n_warmup
            ctx.warmup_converged_at = ctx.chain.warmup_converged_at
        with ctx.phase("sample"):
            ctx.run_span(ctx.chain, ctx.main, 0, ctx.run.n_draws, "sample")
