"""Stochastic-gradient baselines: SGLD (Welling & Teh 2011) and SGHMC (Chen,
Fox & Guestrin 2014), the comparisons of the VHMC and NNgHMC papers.

Both are APPROXIMATE samplers (``result.exact`` is False): without a
Metropolis-Hastings test their draws carry a discretisation bias of the
order of the step size, and SGHMC with the naive noise estimate B_hat = 0
also the unmodelled part of the minibatch-gradient noise; both vanish only
as the step size decays to 0.  SGHMC with ``mh=True`` is the exception: an
exact chain (see :class:`SGHMC`).

Every gradient is (n / k) times the likelihood gradient of k rows drawn
uniformly without replacement, plus the full prior gradient: unbiased.  The
rows are read in place through an index list (csrc/fs_glm.c,
``fs_glm_eval_rows``), never copied; the whole update loop is C
(csrc/fs_sg.c), entered once per chunk of iterations.
"""
import numpy as np

from ..core._sg import SGChain
from ..models._glm import GeneralizedLinearModel
from ..models._papers import LaplaceLogisticRegression
from ._base import Sampler
from ._checks import check_int, check_positive, check_flag

__all__ = ["SGLD", "SGHMC"]


def _check_nonneg(name, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}") from None
    if not (v >= 0 and np.isfinite(v)):
        raise ValueError(f"{name} must be >= 0 and finite, got {value!r}")
    return v


class SGLD(Sampler):
    """Stochastic gradient Langevin dynamics (Welling & Teh 2011, eq. 4).

    APPROXIMATE: no Metropolis-Hastings test; the draws are biased by
    O(step size) and become exact only as the step size decays to 0
    (``result.exact`` is False).

    Each iteration: q <- q - (eps_t / 2) g_B(q) + N(0, eps_t I), with
    g_B the unbiased minibatch gradient (batch_size rows drawn uniformly
    without replacement, scaled by n / batch_size, plus the full prior
    gradient) and the step-size schedule eps_t = a (b + t)^(-delta)
    (Welling & Teh, section 3), t the number of gradient steps taken.
    The warm-up iterations (``n_warmup``) are the same chain and the same
    schedule, discarded.

    Parameters
    ----------
    potential : GeneralizedLinearModel or LaplaceLogisticRegression
        A data-sum model (LogisticRegression, ProbitRegression,
        PoissonRegression, LinearRegression); or a LaplaceLogisticRegression,
        whose Laplace prior's (sub)gradient is added in full to every
        minibatch gradient (the NNgHMC paper's Table 3).
    step_size : float
        a, the schedule's scale (eps_0 = a b^(-delta)); required: these
        samplers have no adaptation.  eps_t is a variance: the noise of a
        step has sd sqrt(eps_t).
    step_offset : float
        b > 0 (default 1).
    step_decay : float
        delta >= 0 (default 0.55; Welling & Teh's convergence conditions
        need 0.5 < delta <= 1; 0 gives a constant step).
    batch_size : int
        Rows per gradient (default 100), 1..n.

    Examples
    --------
    >>> import fastsurrogate as fs
    >>> X, y, _ = fs.datasets.simulate_logistic(n=2000, d=3, seed=0)
    >>> model = fs.models.LogisticRegression(X, y)
    >>> res = fs.sample(model, method="sgld", step_size=1e-3, batch_size=50,
    ...                 n_draws=500, n_warmup=500, chains=1, seed=1, progress=False)
    >>> res.draws.shape, res.exact
    ((1, 500, 3), False)
    """

    method = "sgld"
    # SGChain does not pickle: chains stay in this process (executor=: threads only)
    remote_chains = False
    algorithm = "sgld"

    def __init__(self, potential: GeneralizedLinearModel | LaplaceLogisticRegression, *,
                 step_size: float, step_offset: float = 1.0, step_decay: float = 0.55,
                 batch_size: int = 100) -> None:
        super().__init__(potential)
        # the GLM whose rows are drawn, and an optional Laplace prior added in C
        self._glm, self._l1 = potential, None
        if isinstance(potential, LaplaceLogisticRegression):
            self._glm = potential.likelihood
            self._l1 = dict(l1_scale=potential.scale, l1_loc=potential.loc)
        elif not isinstance(potential, GeneralizedLinearModel):
            raise TypeError(
                f"{type(self).__name__} needs a data-sum GLM (fs.models.LogisticRegression, "
                f"ProbitRegression, PoissonRegression, LinearRegression, or "
                f"LaplaceLogisticRegression) to draw minibatches from; got "
                f"{type(potential).__name__}")
        self.step_size = check_positive("step_size", step_size)
        self.step_offset = check_positive("step_offset", step_offset)
        self.step_decay = _check_nonneg("step_decay", step_decay)
        self.batch_size = check_int("batch_size", batch_size, 1)
        if self.batch_size > self._glm.n_obs:
            raise ValueError(f"batch_size must be <= the number of observations "
                             f"({self._glm.n_obs}), got {batch_size}")

    def _chain_options(self):
        return dict(algorithm=self.algorithm, batch_size=self.batch_size, a=self.step_size,
                    b=self.step_offset, delta=self.step_decay)

    def _note(self):
        return ("APPROXIMATE: SGLD has no Metropolis-Hastings test; its draws are biased "
                "by O(step size) and exact only as the step size decays to 0")

    @property
    def exact(self) -> bool:
        return False

    def phases(self, run):
        """Each chain on its own: burn-in (discarded), then the kept draws."""
        run.exact = self.exact
        run.info["note"] = self._note()
        if not self.exact:
            run.info["target"] = "stochastic-gradient stationary distribution (approximate)"
        run.info["batch_size"] = self.batch_size
        run.info["step_schedule"] = (f"eps_t = {self.step_size:g} * ({self.step_offset:g} + t)"
                                     f"^(-{self.step_decay:g})")
        run.start()
        for ctx in run.ctxs:    # SGHMC's clipped-noise counter
            ctx.warm["noise_clipped"] = np.zeros(run.n_warmup, dtype=np.int32)
            ctx.main["noise_clipped"] = np.zeros(run.n_draws, dtype=np.int32)
        run.each_chain(self._chain, run.n_warmup + run.n_draws, self.method, parallel=True)

    def _chain(self, ctx):
        chain = ctx.chain = SGChain(self._glm, ctx.q0, ctx.generator,
                                    **self._chain_options(), **(self._l1 or {}))
        with ctx.phase("warmup"):
            ctx.run_span(chain, ctx.warm, 0, ctx.run.n_warmup, "warmup")
        with ctx.phase("sample"):
            ctx.run_span(chain, ctx.main, 0, ctx.run.n_draws, "sample")

    def finish(self, run):
        run.info["gradient_steps"] = [c.chain.t if c.chain is not None else 0 for c in run.ctxs]


class SGHMC(SGLD):
    """Stochastic gradient HMC (Chen, Fox & Guestrin 2014, eq. 15 / Alg. 2).

    APPROXIMATE unless ``mh=True``: without a Metropolis-Hastings test the
    draws are biased by the discretisation and, with the naive noise
    estimate B_hat = 0, by the unmodelled minibatch noise; both vanish as
    the step size decays to 0 (``result.exact`` is False).

    Each iteration draws a momentum r ~ N(0, I) (Alg. 2), sets v = eps r
    and takes ``n_steps`` steps (M = I)

        q <- q + v
        v <- v - eps^2 g_B(q) - eps C v + N(0, 2 eps^3 (C - B_hat))

    with a fresh minibatch each and eps = eps_t = a (b + t)^(-delta)
    (t counts gradient steps).  ``noise_estimate``: "zero" (B_hat = 0, the
    paper's naive choice) or "fisher": B_hat = (eps / 2) V_hat, V_hat the
    diagonal of the minibatch-gradient covariance estimated from the batch
    (the empirical Fisher, n^2 / k (1 - k/n) var_i(grad loss_i)); where
    B_hat > C that coordinate gets no noise (counted in
    ``stats["noise_clipped"]``).  eps C must stay below 1.

    ``mh=True`` (the NNgHMC paper's Table 3 comparison): friction and noise
    are off; each step is a leapfrog step on its own minibatch (two
    minibatch gradients), and the endpoint faces a Metropolis-Hastings test
    with the full U (one pass over X without the gradient per iteration,
    about the cost of n/(2 k) minibatch gradients).  Each step is reversible
    and volume-preserving, and the sequence of batches is as likely as its
    reverse, so this chain is EXACT (``result.exact`` True): the test
    corrects both the discretisation and the gradient noise, at the price
    of a full data pass per iteration and rejections when the noise is
    large.

    Parameters
    ----------
    potential, step_size, step_offset, step_decay, batch_size
        As :class:`SGLD`; here eps_t is the step (the "learning rate" of
        Chen et al. is eta = eps^2).  Default step_decay 0 with mh.
    friction : float
        C >= 0 (default 1.0).
    n_steps : int
        Steps per iteration (kept draw), default 10.
    noise_estimate : {"zero", "fisher"}
    mh : bool

    Examples
    --------
    >>> import fastsurrogate as fs
    >>> X, y, _ = fs.datasets.simulate_logistic(n=2000, d=3, seed=0)
    >>> model = fs.models.LogisticRegression(X, y)
    >>> res = fs.sample(model, method="sghmc", step_size=0.02, batch_size=50,
    ...                 n_steps=5, n_draws=300, n_warmup=300, chains=1, seed=1,
    ...                 progress=False)
    >>> res.draws.shape, res.exact
    ((1, 300, 3), False)
    """

    method = "sghmc"
    algorithm = "sghmc"

    def __init__(self, potential: GeneralizedLinearModel | LaplaceLogisticRegression, *,
                 step_size: float, step_offset: float = 1.0, step_decay: float | None = None,
                 batch_size: int = 100, friction: float = 1.0, n_steps: int = 10,
                 noise_estimate: str = "zero", mh: bool = False) -> None:
        self.mh = check_flag("mh", mh)
        if step_decay is None:
            step_decay = 0.0 if self.mh else 0.55
        super().__init__(potential, step_size=step_size, step_offset=step_offset,
                         step_decay=step_decay, batch_size=batch_size)
        self.friction = _check_nonneg("friction", friction)
        self.n_steps = check_int("n_steps", n_steps, 1)
        if noise_estimate not in ("zero", "fisher"):
            raise ValueError(f'noise_estimate must be "zero" or "fisher", got {noise_estimate!r}')
        self.noise_estimate = noise_estimate
        eps0 = self.step_size * self.step_offset ** (-self.step_decay)
        if not self.mh and eps0 * self.friction >= 1.0:
            raise ValueError(f"the first step times the friction, eps_0 C = {eps0 * self.friction:g}, "
                             "must be < 1 (the momentum would be over-damped or diverge)")

    def _chain_options(self):
        opts = super()._chain_options()
        opts.update(friction=self.friction, n_steps=self.n_steps,
                    noise_estimate=self.noise_estimate, mh=self.mh)
        return opts

    @property
    def exact(self) -> bool:
        return self.mh

    def _note(self):
        if self.mh:
            return ("exact: SGHMC steps without friction or noise (leapfrog on minibatches) "
                    "and a Metropolis-Hastings test with the full U")
        return ("APPROXIMATE: SGHMC has no Metropolis-Hastings test; its draws are biased "
                "by the discretisation and the minibatch noise, and exact only as the "
                "step size decays to 0")
