"""Exact Hamiltonian Monte Carlo with Stan-style warm-up.

The chain loop runs in C (fastsurrogate.core._hmc.Chain); this module holds only
the phases: step-size search, dual averaging of the step size, mass-matrix
windows, sampling.
"""

import numpy as np

from ..core._hmc import Chain, new_trace
from ..core._potential import Potential
from ..result import Result
from ._base import (chain_generators, initial_points, warmup_windows, regularized_metric,
                    run_chains, check_int, check_positive)

__all__ = ["HMC", "Sampler"]

_METRICS = ("unit", "diag", "dense")


class Sampler:
    """Shared validation and result assembly for the samplers."""

    method = "base"

    def _check_potential(self, potential):
        if not isinstance(potential, Potential):
            raise TypeError(
                "potential must be a fastsurrogate Potential (a model, a surrogate, or "
                f"Potential.from_callable(f, dim)); got {type(potential).__name__}")
        return potential

    @staticmethod
    def _assemble(traces, key, chains, dim, ctxs, complete):
        """Stack per-chain traces, truncated to the rows every chain completed."""
        if complete:
            n = traces[0]["draws"].shape[0]
        else:
            n = min(c.done.get(key, 0) for c in ctxs)
        draws = np.stack([t["draws"][:n] for t in traces]) if chains else np.empty((0, n, dim))
        stats = {k: np.stack([t[k][:n] for t in traces]) for k in traces[0]
                 if k not in ("draws", "proposals")}
        return draws, stats


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
    metric : {"diag", "dense", "unit"} or ndarray
        Mass-matrix adaptation ("diag"/"dense", adapted in Stan's windows when
        ``adapt``), the identity, or a fixed inverse metric (dim,) / (dim, dim).
    adapt : bool
        Adapt step size (and metric) during warm-up.
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

    def __init__(self, potential, *, step_size=None, n_steps=10, random_n_steps=True,
                 metric="diag", adapt=True, target_accept=0.8, max_energy_error=1000.0):
        self.potential = self._check_potential(potential)
        self.step_size = check_positive("step_size", step_size, allow_none=True)
        self.n_steps = check_int("n_steps", n_steps, 1)
        self.random_n_steps = bool(random_n_steps)
        if isinstance(metric, str):
            if metric not in _METRICS:
                raise ValueError(f"metric must be one of {_METRICS} or an array, got {metric!r}")
            self.metric = metric
        else:
            m = np.asarray(metric, dtype=np.float64)
            d = potential.dim
            if m.shape not in ((d,), (d, d)):
                raise ValueError(f"a metric array must have shape ({d},) or ({d}, {d})")
            self.metric = m
        self.adapt = bool(adapt)
        self.target_accept = float(target_accept)
        if not 0 < self.target_accept < 1:
            raise ValueError("target_accept must be in (0, 1)")
        self.max_energy_error = check_positive("max_energy_error", max_energy_error)

    # -- pieces reused by the surrogate samplers -------------------------------
    def _initial_inv_metric(self):
        if isinstance(self.metric, np.ndarray):
            return self.metric
        return None

    def make_chain(self, q0, generator, drive=None, judge=None, **kw):
        drive = self.potential if drive is None else drive
        judge = self.potential if judge is None else judge
        step = self.step_size if self.step_size is not None else (1.0 if self.adapt else 0.1)
        return Chain(drive, judge, q0, generator, step_size=step, n_steps=self.n_steps,
                     random_n_steps=self.random_n_steps, inv_metric=self._initial_inv_metric(),
                     max_energy_error=self.max_energy_error, **kw)

    def warmup(self, chain, trace, ctx, n_warmup, key="warmup"):
        """Run n_warmup iterations into `trace`, adapting when self.adapt."""
        if not self.adapt or n_warmup == 0:
            ctx.run_span(chain, trace, 0, n_warmup, key)
            return
        if self.step_size is None:
            chain.find_step_size()
        chain.start_adaptation(self.target_accept)
        adapt_metric = isinstance(self.metric, str) and self.metric != "unit"
        first, ends = warmup_windows(n_warmup) if adapt_metric else (n_warmup, [])
        i = ctx.run_span(chain, trace, 0, first if ends else n_warmup, key)
        start = first
        for end in ends:
            i = ctx.run_span(chain, trace, i, end, key)
            chain.set_inv_metric(regularized_metric(trace["draws"][start:end], self.metric))
            chain.find_step_size()
            chain.start_adaptation(self.target_accept)
            start = end
        ctx.run_span(chain, trace, i, n_warmup, key)
        chain.finish_adaptation()

    # -- the public entry point -------------------------------------------------
    def sample(self, n_draws=1000, n_warmup=1000, *, chains=4, seed=None, init=None,
               progress=True, keep_warmup=True):
        """Run the chains.

        Parameters
        ----------
        n_draws : int
            Draws kept per chain after warm-up.
        n_warmup : int
            Warm-up iterations per chain (adaptation; discarded from ``draws``).
        chains : int
            Number of chains; they run in threads when the potential releases
            the GIL (compiled potentials), one after another otherwise.
        seed : int, numpy.random.SeedSequence or Generator, optional
            Chain k uses child k of the seed's SeedSequence.
        init : array (dim,) or (chains, dim), optional
            Initial positions; default uniform on [-2, 2]^dim.
        progress : bool
            Show a progress bar.
        keep_warmup : bool
            Keep the warm-up draws in ``result.warmup_draws``.

        Returns
        -------
        Result
            ``draws`` (chains, n_draws, dim).  On Ctrl-C the completed part,
            with ``interrupted=True``.  If the potential raises, that exception
            propagates with the partial Result as its ``result`` attribute.
        """
        n_draws = check_int("n_draws", n_draws, 0)
        n_warmup = check_int("n_warmup", n_warmup, 0)
        chains = check_int("chains", chains, 1)
        gens = chain_generators(seed, chains)
        q0 = initial_points(self.potential, init, gens)
        d = self.potential.dim
        warm = [new_trace(n_warmup, d) for _ in range(chains)]
        main = [new_trace(n_draws, d) for _ in range(chains)]
        chain_objs = [None] * chains

        def worker(ctx):
            k = ctx.index
            chain = self.make_chain(q0[k], gens[k])
            chain_objs[k] = chain
            with ctx.phase("warmup"):
                self.warmup(chain, warm[k], ctx, n_warmup)
            with ctx.phase("sample"):
                ctx.run_span(chain, main[k], 0, n_draws, "sample")
            return chain

        results, ctxs, interrupted, error = run_chains(
            worker, chains, chains * (n_warmup + n_draws),
            parallel=self.potential.thread_safe, progress=progress, desc=self.method)
        res = self._result(warm, main, ctxs, chain_objs, interrupted or error is not None,
                           keep_warmup)
        if error is not None:
            error.result = res
            raise error
        return res

    def _result(self, warm, main, ctxs, chain_objs, partial, keep_warmup, **extra):
        chains, d = len(main), self.potential.dim
        draws, stats = self._assemble(main, "sample", chains, d, ctxs, not partial)
        wd = ws = None
        if keep_warmup:
            wd, ws = self._assemble(warm, "warmup", chains, d, ctxs, not partial)
        timings = {}
        for c in ctxs:
            for k, v in c.timings.items():
                timings[k] = max(timings.get(k, 0.0), v)
        return Result(
            draws=draws, stats=stats, method=self.method, potential=self.potential,
            param_names=self.potential.param_names, warmup_draws=wd, warmup_stats=ws,
            step_size=np.array([c.step_size if c is not None else np.nan for c in chain_objs]),
            inv_metric=[c.inv_metric if c is not None else None for c in chain_objs],
            timings=timings, timings_per_chain=[dict(c.timings) for c in ctxs],
            interrupted=partial, **extra)
