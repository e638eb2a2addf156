"""The No-U-Turn sampler, Stan's multinomial variant.

NUTS (Hoffman & Gelman 2014) is HMC that chooses its own path length: each
iteration doubles a leapfrog trajectory, forward or backward in time at
random, until the trajectory starts to turn back on itself (the generalized
U-turn criterion on the momentum sum) or reaches 2**max_tree_depth - 1
steps.  The next state is drawn from the whole trajectory with weights
exp(-H) (multinomial sampling, Betancourt 2017), as in Stan.  The
transition runs in C (csrc/fs_nuts.c); warm-up is HMC's (Stan's step-size
heuristic, dual averaging to ``target_accept`` of Stan's accept_stat, and
metric windows).
"""

from typing import Any

from .._typing import ArrayLike
from ..core._hmc import LowRankMetric
from ..core._potential import Potential
from .hmc import HMC
from ._checks import check_tree_depth
from .surrogate_nuts import SurrogateNUTS, SurrogatePolicy, check_surrogate, cost_check

__all__ = ["NUTS"]


class NUTS(HMC):
    """Multinomial NUTS with Stan-style warm-up and Stan's defaults.

    Parameters
    ----------
    potential, step_size, metric, adapt, adaptation, warmup_end
        As for :class:`HMC`: by default a low-rank-plus-diagonal metric
        adapted from the warm-up's draws and gradients in C (nutpie's
        schedule) beside dual averaging of the step size, the warm-up
        ending when the chain's metric estimate has settled (at most
        ``n_warmup`` iterations);
        ``adaptation="stan"`` for Stan's warm-up (step-size heuristic, dual
        averaging, metric windows).  A surrogate run adapts its own metric
        (the Laplace covariance, then windows on V's trees).
    target_accept : float
        Dual-averaging target of the mean acceptance statistic (Stan: 0.8).
    max_tree_depth : int
        At most 2**max_tree_depth - 1 leapfrog steps per iteration (Stan: 10).
    max_energy_error : float
        Energy error above which a trajectory is divergent (Stan: 1000).
    surrogate : "auto", True or False
        Drive the trees with a surrogate V of U trained on the warm-up's own
        leapfrog points, each selected point corrected with one exact U
        (exact for any V; :mod:`fastsurrogate.samplers.surrogate_nuts`).
        "auto" (default): when one exact gradient costs at least
        ``policy.cost_ratio`` surrogate evaluations, measured once before
        the run (``result.info["surrogate"]`` has the figures); False: plain
        NUTS.
    policy : dict or SurrogatePolicy, optional
        Settings of the surrogate (:class:`~fastsurrogate.samplers.surrogate_nuts.SurrogatePolicy`:
        ``min_accept``, ``block``, ``n_hidden``, ``max_points``,
        ``cost_ratio``, ``dense_max``, ``laplace``).

    Notes
    -----
    ``result.stats`` has ``tree_depth`` and ``n_steps`` (leapfrog steps, i.e.
    gradient evaluations) per iteration.

    Examples
    --------
    >>> import fastsurrogate as fs
    >>> res = fs.NUTS(fs.models.StandardNormal(3)).sample(
    ...     200, n_warmup=200, chains=1, seed=1, progress=False)
    >>> res.draws.shape
    (1, 200, 3)
    """

    method = "nuts"

    def __init__(self, potential: Potential, *, step_size: float | None = None,
                 metric: str | ArrayLike | LowRankMetric | None = None, adapt: bool = True,
                 target_accept: float = 0.8, max_tree_depth: int = 10,
                 max_energy_error: float = 1000.0, surrogate: str | bool = "auto",
                 policy: SurrogatePolicy | dict[str, Any] | None = None,
                 adaptation: str = "fisher", warmup_end: str | None = None) -> None:
        super().__init__(potential, step_size=step_size, n_steps=1, random_n_steps=False,
                         metric=metric, adapt=adapt, target_accept=target_accept,
                         max_energy_error=max_energy_error, adaptation=adaptation,
                         warmup_end=warmup_end)
        self.max_tree_depth = check_tree_depth(max_tree_depth)
        self.surrogate, self.policy = check_surrogate(surrogate, policy)
        if self.surrogate is True and not (adapt and isinstance(self.metric, str)):
            raise ValueError("surrogate=True adapts its own metric and step size: it needs "
                             "adapt=True and a metric name")

    def checkpoint_support(self):
        if self.surrogate is True:
            return ("NUTS with a surrogate does not checkpoint yet; pass surrogate=False "
                    "for a checkpointed run")
        return None

    def check_sizes(self, n_draws, n_warmup):
        if self.surrogate is True and n_warmup < 2 * self.policy.block:
            raise ValueError(f"surrogate=True needs a warm-up of at least two blocks "
                             f"({2 * self.policy.block} iterations), got {n_warmup}")

    def _surrogate_decision(self, run):
        """Whether this run drives its trees with a surrogate, and why."""
        if self.surrogate is False:
            return {"used": False, "decided_by": "surrogate=False"}
        remote = run.executor is not None and not _threads(run.executor)
        if self.surrogate is True:
            if remote:
                raise ValueError("surrogate=True runs its chains in this process (its pooled "
                                 "fits need them between blocks): pass executor=None or a "
                                 "ThreadPoolExecutor")
            return {"used": True, "decided_by": "surrogate=True"}
        if not (self.adapt and isinstance(self.metric, str)):
            return {"used": False, "decided_by": "a fixed metric or adapt=False"}
        if run.checkpoint is not None:
            return {"used": False, "decided_by": "checkpoint="}
        if remote:
            return {"used": False, "decided_by": "an executor outside this process"}
        if run.n_warmup < 2 * self.policy.block:
            return {"used": False, "decided_by": "a warm-up shorter than two blocks"}
        return cost_check(self.potential, run.ctxs[0].q0, self.policy)

    def phases(self, run):
        run.start()
        run.info["max_tree_depth"] = self.max_tree_depth
        decision = self._surrogate_decision(run)
        if not decision["used"]:
            run.info["surrogate"] = decision
            run.each_chain(self.warmup_and_sample, run.n_warmup + run.n_draws, self.method)
            return
        # the run-wide state of NUTS with a surrogate: its engine (V, the fits)
        run.state = SurrogateNUTS(self, self.policy, decision)
        run.state.phases(run)

    def finish(self, run):
        if isinstance(run.state, SurrogateNUTS):
            run.state.finish(run)
        else:
            super().finish(run)

    def make_chain(self, q0, generator, drive=None, judge=None, **kw):
        return super().make_chain(q0, generator, drive, judge, algorithm="nuts",
                                  max_tree_depth=self.max_tree_depth, **kw)


def _threads(executor):
    from concurrent.futures import ThreadPoolExecutor
    return isinstance(executor, ThreadPoolExecutor)
