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

from .hmc import HMC
from ._base import check_tree_depth

__all__ = ["NUTS"]


class NUTS(HMC):
    """Multinomial NUTS with Stan-style warm-up and Stan's defaults.

    Parameters
    ----------
    potential, step_size, metric, adapt
        As for :class:`HMC` (Stan's warm-up: step-size heuristic, dual
        averaging, metric windows).
    target_accept : float
        Dual-averaging target of the mean acceptance statistic (Stan: 0.8).
    max_tree_depth : int
        At most 2**max_tree_depth - 1 leapfrog steps per iteration (Stan: 10).
    max_energy_error : float
        Energy error above which a trajectory is divergent (Stan: 1000).

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

    def __init__(self, potential, *, step_size=None, metric="diag", adapt=True,
                 target_accept=0.8, max_tree_depth=10, max_energy_error=1000.0):
        super().__init__(potential, step_size=step_size, n_steps=1, random_n_steps=False,
                         metric=metric, adapt=adapt, target_accept=target_accept,
                         max_energy_error=max_energy_error)
        self.max_tree_depth = check_tree_depth(max_tree_depth)

    def make_chain(self, q0, generator, drive=None, judge=None, **kw):
        return super().make_chain(q0, generator, drive, judge, algorithm="nuts",
                                  max_tree_depth=self.max_tree_depth, **kw)
