"""Variational HMC: a random-basis network trained by gradient (score)
matching online (Zhang, Shahbaba & Zhao 2018, Bayesian Analysis 13(2),
section 3, Algorithm 2 and Proposition 2).

Phases
------
0. laplace: the MAP and the Hessian there give the Laplace approximation
   N(q_MAP, H^{-1}) (:func:`~fastsurrogate.surrogates.laplace_approximation`),
   computed once and shared by every chain.
1. train (iterations t = 0 .. t0 - 1 of the warm-up): the regularised surrogate

       V_t(q) = mu_t z_t(q) + (1 - mu_t) L(q),  L(q) = (1/2) (q - q_MAP)^T H (q - q_MAP)

   (the paper's; by default V_t = mu_t z_t + L with z fitted to grad U -
   grad L, so that exp(-V) stays normalisable: ``laplace_tail``)
   drives the leapfrog AND judges the Metropolis test (Hamiltonian V_t + K).
   Every accepted state q adds (q, grad U(q)) to the training set: the
   output weights v of z_t solve the ridge gradient-matching problem (3.19),
   updated by one Sherman-Morrison-Woodbury step (3.20-3.21, in C).  mu_t
   rises from 0 to 1 (1 - exp(-t / n_s) by default), so the chain starts
   on the Laplace approximation and hands over to the network as it learns.
   The training step runs inside the C chain loop, after each iteration (a
   chain hook: grad U at accepted states, the SMW update, the new mu_t);
   Python is entered once per chunk of iterations.
2. sample: training stops at t0 (fixed, or when the weights settle) and the
   surrogate is frozen at V = V_{t0}.  The rest of the warm-up (if any) and
   every draw then run wholly in C with V as drive and judge: no exact
   evaluation, no pass over the data.  The draws target the
   surrogate-induced distribution exp(-V) (a free-form variational
   approximation), NOT the exact posterior; ``result.exact`` is False.

With ``exact=True`` the frozen V drives the leapfrog but the exact U judges
(one exact value per iteration, RNS-HMC style): the draws after t0 then
target the exact posterior.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..core._blas_threads import blas_threads
from ..core._hmc import Chain
from ..core._potential import ClampedSum, Potential, TrainingError, WeightedSum
from ..surrogates._network import RandomNetwork
from ..surrogates._online import SMWTrainer, ScoreMatchingHook
from ..surrogates.laplace import LaplaceApproximation, laplace_approximation
from .._typing import ArrayLike
from ._chain import surrogate_seed
from ._checks import check_int, check_positive, check_metric, check_flag
from .hmc import HMC
from ._transitions import check_transitions, tune_transitions
from .surrogate_nuts import (DEFAULT_POLICY, check_warmup, check_warmup_size,
                             surrogate_nuts_warmup)
from ..surrogates.value_gradient import (INPUT_SCALES, MAX_SELECTION_POINTS, even_indices,
                                         gaussian_base_terms, predicted_acceptance)

__all__ = ["VHMC", "training_curve", "default_n_hidden"]

_METRICS = ("laplace", "laplace-diag", "unit")
_ACTIVATIONS = ("softplus", "sigmoid", "tanh")
# auto t0: the weights must have settled AND the Laplace term faded below 1 %
_AUTO_MU = 0.99
_PROBES = 10
# warn when a chain spends more than this fraction of its draws beyond every
# training point: draws from the distribution the training points came from
# fall beyond the farthest of n of them with probability about 1 / (n + 1),
# but the frozen V is not quite any V_t the points came from (measured on the
# 5-d target of tests/_targets.py, 2000 training iterations: 0 to 1.5 %)
_OUTSIDE_WARN = 0.05


PAPER_INPUT_SCALE = 0.5     # input_scale of the paper's warm-up (and "auto" there)


def default_n_hidden(dim):
    """min(3000, max(400, dim (dim + 3))): see :class:`VHMC`."""
    return int(min(3000, max(400, dim * (dim + 3))))


def _exp_schedule(n_s):
    def mu(t):
        return -np.expm1(-t / n_s)
    mu.vectorized = True
    return mu


def _mu_table(mu_fn, t_max):
    """mu[t] for t = 1 .. t_max (mu[0] = NaN, unused), checked in [0, 1] by the hook.
    The default schedule takes all t at once; a user's mu(t) is called per t."""
    t = np.arange(1, t_max + 1)
    values = mu_fn(t) if getattr(mu_fn, "vectorized", False) else [mu_fn(int(k)) for k in t]
    return np.concatenate([[np.nan], np.asarray(values, dtype=np.float64)])


def _check_schedule(n_s: float | None, mu: Callable[[int], float] | None,
                    n_train: int | str | None
                    ) -> tuple[float | None, Callable[[int], float] | None, int | str | None]:
    """VHMC's ``n_s``, ``mu`` and ``n_train``, checked."""
    n_s = check_positive("n_s", n_s, allow_none=True)
    if mu is not None and not callable(mu):
        raise TypeError(f"mu must be a callable mu(t) -> [0, 1] or None, got {type(mu).__name__}")
    if mu is not None and n_s is not None:
        raise ValueError("give either n_s (the default schedule's time scale) or mu, not both")
    if isinstance(n_train, str):
        if n_train != "auto":
            raise ValueError(f'n_train must be an int, "auto" or None, got {n_train!r}')
        return n_s, mu, n_train
    return n_s, mu, None if n_train is None else check_int("n_train", n_train, 1)


def _check_laplace(laplace: LaplaceApproximation | None, dim: int
                   ) -> LaplaceApproximation | None:
    if laplace is not None:
        if not isinstance(laplace, LaplaceApproximation):
            raise TypeError("laplace must be a LaplaceApproximation "
                            "(fastsurrogate.surrogates.laplace_approximation)")
        if laplace.dim != dim:
            raise ValueError(f"laplace has dim {laplace.dim}; the potential has {dim}")
    return laplace


class _OutsidePoints:
    """The states a chain learnt after t0 (``learn_outside``): (q, grad U(q)
    - grad L(q)) rows, saved with its checkpoints (the rows only grow)."""

    def __init__(self, dim):
        self.Q = np.zeros((0, dim))
        self.G = np.zeros((0, dim))

    def add(self, Q, G):
        self.Q = np.concatenate([self.Q, Q])
        self.G = np.concatenate([self.G, G])

    def points(self):
        return self.Q, self.G

    @property
    def n(self):
        return self.Q.shape[0]

    def _ckpt_state(self, full=True):
        return {"n": self.n}, ({"Q": self.Q.copy(), "G": self.G.copy()} if full else {})

    def _ckpt_restore(self, sc, arr):
        n = sc["n"]
        d = self.Q.shape[1]
        self.Q = np.array(arr["Q"][:n], dtype=float).reshape(n, d)
        self.G = np.array(arr["G"][:n], dtype=float).reshape(n, d)


@dataclass
class _VHMCChain:
    """A VHMC chain's own state (its ``ctx.state``): its surrogate and training record."""
    net: RandomNetwork | None = None      # the random-basis network z
    V: WeightedSum | ClampedSum | None = None   # the surrogate V on z and the Laplace term
    lam: float | None = None              # the ridge penalty of (3.19)
    t0: int = 0                           # training iterations (V is frozen from t0)
    curve: dict | None = None             # the training curve (info["training_curve"])
    train_radius: float | None = None     # the training points' farthest Laplace distance
    outside: _OutsidePoints | None = None   # states learnt after t0 (learn_outside)
    outside_start: int = 0                # of them, those learnt before the draws


def _chain_state(ctx):
    """The chain's _VHMCChain; its defaults when the run stopped before the
    chain had one (or in the surrogate-NUTS warm-up, whose state it holds)."""
    return ctx.state if isinstance(ctx.state, _VHMCChain) else _VHMCChain()


def _new_curve(mu):
    """An empty training curve (``mu``: its first values)."""
    return {"iteration": [], "sq_error": [], "sq_grad": [], "mu": list(mu),
            "weight_change": [], "resolves": []}


class VHMC(HMC):
    """Variational HMC (Algorithm 2): score-matching surrogate, surrogate Metropolis test.

    Parameters
    ----------
    potential : Potential
        The exact target U = -log posterior.
    n_hidden : int, optional
        Hidden units s of the random network.  Default
        ``min(3000, max(400, dim (dim + 3)))``.  For the gradient of z to
        match that of a quadratic U, the units' linear parts must span the
        dim (dim + 1) / 2 entries of the Hessian plus the dim of the linear
        term, dim (dim + 3) / 2 in all; dim (dim + 3) is twice that
        (measured on a 10-d Gaussian, 65 needed: s = 50 gives a covariance
        56 % off (REC), s = 100 3.4 %, s = 130 2.7 %, s = 150-300 2.2 %, at a
        Monte Carlo floor of about 1.3 %).  A posterior that is not nearly
        Gaussian needs more units than its dimension suggests, hence the
        floor of 400: on the 5-d target of ``tests/_targets.py`` (a banana
        block, a skew-normal coordinate, a funnel block; 4 chains x (2000 +
        4000), seeds 1-5, ``exact=True`` after the paper's warm-up), the
        funnel coordinate's sd came out 3.6 to 5.7 MCSE low in 4 of 5 seeds
        with s = 100; s = 200 left one chain stuck (acceptance 0.03, seed
        5); s = 300 was 4.4 MCSE low at seed 5; s = 400 kept every mean and
        sd within 2.2 MCSE and R-hat at most 1.003 (acceptance 0.80-0.85),
        but seeds 10 and 13 of 6-15 left it 4.5 MCSE low.  After the default
        warm-up of ``exact=True`` (see ``warmup``), s = 400 kept every mean
        and sd within 2.7 MCSE at all of seeds 1-15.  The paper's a9a setting is
        dim 51, s = 2000.  An SMW update costs O(dim s^2).
    activation : {"softplus", "sigmoid", "tanh"}
    input_scale : float or "auto"
        The network sees x = input_scale L^{-1} (q - q_MAP), L L^T the
        Laplace covariance, so a hidden unit's pre-activation w_i . x + d_i
        (w_i ~ N(0, I/dim), d_i ~ N(0, 1)) varies by about ``input_scale``
        over the Laplace approximation's spread.  Small values keep the
        units in their nearly linear range (best for near-Gaussian
        posteriors: on a 10-d Gaussian, covariance error 2.2 % at 0.5 and
        3.3 % at 0.75 with s = 130); larger values (0.75-1) resolve skewed
        posteriors better (beta-binomial, s = 100: KL 3e-5 nats at 1.0 and
        4e-5 at 0.75, against 3e-4 with occasional seeds far worse at 0.5).
        "auto" (default): after surrogate NUTS's warm-up, the scale of
        0.15, 0.4 and 1.0 whose fit (3.19) on four fifths of the warm-up's
        points predicts the highest exact-test acceptance on the rest (the
        rule by which surrogate NUTS picks its own; ``info["input_scale"]``
        and ``info["input_scale_choice"]``); with the paper's warm-up,
        whose network exists before any point does, 0.5.  Why: the Laplace
        approximation can sit far from the posterior's mass, and a fixed
        scale then puts the units where the points are not.  On
        posteriordb's eight schools (non-centred) the mode has log tau =
        3.4 and the posterior's mean is 0.6 (sd 1.4, against the Laplace
        sd 0.9): with ``exact=True`` and the defaults (4 chains x (1000 +
        1000), seed 2024), 0.5 accepted 0.19-0.28 (R-hat 1.044, smallest
        bulk ESS 151); "auto" chose 0.15 (predicted 0.75, against 0.68 and
        0.62 for 0.4 and 1.0) and accepted 0.64-0.68 (R-hat 1.005, ESS
        989).
    whiten : bool
        Whiten the inputs by the Laplace covariance as above (default), or
        only scale each coordinate by its Laplace sd.  With correlated
        posteriors, per-coordinate scaling leaves the stiff directions a
        sliver of the units' input range, and the gradient there (the
        largest part of grad U) is poorly matched: measured on a9a-50d,
        per-coordinate scaling left a 60-80 % relative score error after
        2000 iterations.
    ridge : float
        The penalty lambda of (3.19), relative: lambda = ridge x the mean
        squared norm of the gradient features (columns of A) at the MAP,
        i.e. ``ridge`` pseudo-points' worth of shrinkage towards v = 0.
        Measured: 1e-3 limits the fit (beta-binomial KL stalls near 7e-4
        nats from s = 100 on; 10-d Gaussian REC 2.7 % at s = 130), 1e-6
        does not (2e-5 to 3e-5 nats with input_scale 0.75; REC 2.2 %).
    n_s : float, optional
        Time scale of mu_t = 1 - exp(-t / n_s); default a tenth of the
        training iterations (mu = 1 - e^-10 at t0).
    mu : callable, optional
        A user schedule ``mu(t) -> float in [0, 1]`` (t = 0, 1, ...) instead.
    n_train : int, "auto" or None
        The stopping time t0 of training.  None: the whole warm-up trains
        (t0 = n_warmup).  An int <= n_warmup: train that many iterations,
        then finish the warm-up on the frozen surrogate.  "auto": stop once,
        at a check every ``window`` iterations, the output weights changed
        by less than ``tol`` (relative, measured on the gradients they
        predict at the latest training points) and mu_t >= 0.99; at most
        n_warmup iterations.
    tol, window : float, int
        The "auto" rule.
    laplace_tail : bool
        True (default; a deviation from the paper): z learns the residual
        grad U - grad L, L the Laplace term, and

            V_t(q) = mu_t z_t(q) + L(q),

        so the Laplace term never fades.  Where the training points are,
        z ~ U - L and V_t ~ mu_t U + (1 - mu_t) L, as in the paper; away
        from them z grows at most linearly (the slope of a softplus, sigmoid
        or tanh unit is bounded), L quadratically, and exp(-V) is
        normalisable by construction.  Further, z counts as it is only
        inside the ball (in the Laplace approximation's metric) that holds
        every training point; beyond it, along each ray from the MAP, z is
        held at its value on the sphere
        (:class:`~fastsurrogate.core.ClampedSum`), so exp(-V) has no
        spurious mass far from the data: there it falls off like the Laplace
        approximation.  The ball grows with the training points and is
        frozen with z at t0.  False: the paper's V_t = mu_t z_t +
        (1 - mu_t) L, in which, once mu_t ~ 1, nothing outside the data
        keeps exp(-V) normalisable: on a 5-d target with a mild funnel block
        (``tests/_targets.py``), 4 chains x (2000 + 4000), it sent chains to
        distances of 1e2 to 3e4 from the mode (R-hat 5 at seed 1).
        The price: beyond its training points exp(-V) has the Laplace
        approximation's light tails.  On the paper's beta-binomial (Figure
        2; s = 50, 100, 200, seed 1000) the KL divergence to the posterior
        on the paper's box rose from 6e-5, 6e-5 and 8e-6 nats (the paper's
        form) to 6e-3, 1e-2 and 6e-3.  ``fastsurrogate reproduce`` runs the
        paper's form.
    learn_outside : bool
        With ``laplace_tail`` and the paper's warm-up, approximate draws
        only: after t0, every ``window`` iterations, the states of the span
        that lie beyond every training point (the training ball above) join
        the fit: their exact gradients update z's output weights by the SMW
        step and the ball grows to hold them (True, default; a deviation,
        not in the paper, whose V is frozen at t0).  Inside the ball no
        exact evaluation is made; outside, exp(-V) is an extrapolation that
        a chain can find spurious mass in, and there the exact gradient
        corrects it where the chain went.  ``info["learnt_outside"]`` has
        the count per chain (also in ``exact_evaluations["after_t0"]``).
        Measured on issue 38's 5-d target (``tests/_targets.py``, 4 x (2000
        + 4000), Intel Xeon): frozen at t0 (False), one chain of seed 2
        spent 32 % of its draws beyond its ball, in spurious mass (R-hat
        1.12, the banana's second coordinate 0.31 sd off, an sd 35 % high);
        learning, R-hat 1.002 and every mean within 0.03 sd, sds -6 % to
        +9 %, with 4 to 77 exact gradients per chain of 4000 draws.  At
        seeds 1 and 3-10 the funnel's sd, 7 to 14 % low when frozen, came
        out 1 to 11 % low, the means alike, at 2 to 162 exact gradients per
        chain.
    exact : bool
        After t0, judge with the exact U (RNS-HMC style): exact draws (not
        in the paper).  Its default warm-up is surrogate NUTS's (see
        ``warmup``).
    delayed_acceptance : bool
        With ``exact``, first screen each proposal with V (saves exact
        evaluations; still exact).
    transitions : None, int or "auto"
        With ``exact``: surrogate transitions with an exact correction after
        t0 (k transitions of ``inner`` on the frozen V, then one exact test
        with U - V; see :class:`~fastsurrogate.RNSHMC`); k and the inner
        step size are tuned at t0 and fixed from there (the rest of the
        warm-up re-adapts the inner step size when ``adapt``).
    inner : {"hmc", "nuts"} or None
        The kernel on V for ``transitions`` (None, default: HMC); refused
        without them.
    max_tree_depth : int
        NUTS as ``inner``: at most 2**max_tree_depth - 1 leapfrog steps.
    laplace : LaplaceApproximation, optional
        Reuse one (e.g. from an earlier run) instead of computing it.
    metric : {"laplace", "laplace-diag", "unit"} or ndarray
        Inverse mass matrix: the Laplace covariance (dense, the default),
        its diagonal, the identity, or a fixed (dim,) / (dim, dim) array.
    warmup : {"paper", "surrogate-nuts"} or None
        None (default): "paper", but "surrogate-nuts" with ``exact=True``
        when none of the paper's training options (``n_s``, ``mu``,
        ``n_train``, ``transitions``) is given and n_warmup >= 50 holds its
        two blocks.  Why the exact option warms up otherwise: in Algorithm 2
        V_t judges the training iterations, so a chain goes where
        exp(-V_t) has mass; V then fits the exact U poorly where the chain
        ends, and the exact test that follows t0 can reject nearly
        everything there.  Measured on posteriordb's eight schools
        (non-centred; 4 chains x (1000 + 4000)): with the paper's warm-up
        one chain drifted to mu = -32 (the posterior's mean 4.4, sd 3.3)
        and accepted 2 % of its proposals after t0 (R-hat 1.59, seed
        2024); with surrogate NUTS's, R-hat 1.003 and 1.009 (seeds 2024,
        1).  On the 5-d target of ``tests/_targets.py`` (4 chains x (2000 +
        4000), seeds 1-5) both pass, every mean and sd within 2.7 MCSE with
        surrogate NUTS's (ESS 4600-8400) against 2.2 with the paper's (ESS
        about 5500); at seeds 6-15 surrogate NUTS's stayed within 2.7, the
        paper's left the funnel's sd 4.5 MCSE low at seeds 10 and 13 (on an
        AMD EPYC Zen 3).  On an Intel Xeon (AVX-512), whose rounding gives
        other chains from the same seeds, the paper's warm-up left the
        funnel's sd 8.1 and 6.8 MCSE low at seeds 1 and 3 of 1-5 with R-hat
        1.001 and acceptance 0.81-0.86 (every chain alike, so R-hat cannot
        see it), where surrogate NUTS's (with ``input_scale="auto"``) kept
        every mean and sd within 2.6 MCSE.  Judging the training iterations by U instead kept the
        chains together but left the 5-d funnel's sd 3.9 to 5.5 MCSE low
        (seeds 1-3): training points then come from the posterior alone,
        and few lie in its tails.
        "paper": Algorithm 2 above.  "surrogate-nuts" (a
        deviation, not in the paper): the chains warm up together with
        surrogate-driven NUTS
        (:func:`~fastsurrogate.samplers.surrogate_nuts.surrogate_nuts_warmup`:
        Laplace start, exact NUTS recorded, then NUTS on a value-and-gradient
        surrogate whose every exact correction is recorded with its
        gradient); z's output weights then solve the gradient-matching
        problem (3.19) in one batch over every recorded (q, grad U - grad
        L), L the Laplace term, and V = z + L: the Laplace term stays (a
        softplus z alone grows only linearly away from its data, and exp(-z)
        need not normalise).  The draws run on V (judged by V, or by U with
        ``exact``) from each chain's adapted state, step size and metric.
        ``n_s``, ``mu``, ``n_train``, ``tol``, ``window`` and ``transitions``
        do not apply; the start's Laplace approximation is VHMC's.
    blas_threads : int or None
        Threads of SciPy's OpenBLAS while the chains run (the SMW updates are
        dgemm/dsyrk calls on s x s matrices, where extra threads mostly add
        wake-up cost and oversubscribe cores the chains use); None leaves
        the count alone.  Process-wide while sampling.
    step_size, n_steps, random_n_steps, adapt, target_accept, max_energy_error
        As for :class:`HMC`.  With ``adapt`` the step size is tuned by dual
        averaging during training (and again on the frozen surrogate over
        the rest of the warm-up, when there are at least 50 iterations).

    Notes
    -----
    exp(-V) is a good approximation where the training points were (the
    chain's states).  Far from all of them the network extrapolates (softplus
    units grow linearly) and exp(-V) can carry spurious mass that a chain
    started near the mode never reaches: on the beta-binomial example
    (bench/paper_vhmc_fig2.py), KL on a box 20-30 Laplace sd wide was
    dominated by such far regions for 1 of 5 random bases at s = 100 (4 of 5
    at s = 50), while KL on the posterior's own region was below 1e-4 nats
    for all five.  Draws are fine; densities and normalising constants of
    exp(-V) far from the data are not to be trusted.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> target = fs.models.Gaussian(np.ones(3), np.eye(3))
    >>> res = fs.sample(target, method="vhmc", n_draws=300, n_warmup=300, chains=1,
    ...                 n_hidden=50, seed=1, progress=False)
    >>> res.exact, res.draws.shape
    (False, (1, 300, 3))
    """

    method = "vhmc"
    _warmup_ends = ("fixed",)    # training reads the whole exact warm-up

    def __init__(self, potential: Potential, *, n_hidden: int | None = None,
                 activation: str = "softplus", input_scale: float | str = "auto",
                 whiten: bool = True,
                 ridge: float = 1e-6, n_s: float | None = None,
                 mu: Callable[[int], float] | None = None, n_train: int | str | None = None,
                 tol: float = 0.01, window: int = 100, laplace_tail: bool = True,
                 exact: bool = False, delayed_acceptance: bool = False,
                 laplace: LaplaceApproximation | None = None,
                 metric: str | ArrayLike = "laplace", step_size: float | None = None,
                 n_steps: int = 10, random_n_steps: bool = True, adapt: bool = True,
                 target_accept: float = 0.8, max_energy_error: float = 1000.0,
                 blas_threads: int | None = 1, transitions: int | str | None = None,
                 inner: str | None = None, max_tree_depth: int = 10,
                 warmup: str | None = None, learn_outside: bool = True) -> None:
        super().__init__(potential, step_size=step_size, n_steps=n_steps,
                         random_n_steps=random_n_steps, metric="unit", adapt=adapt,
                         target_accept=target_accept, max_energy_error=max_energy_error)
        d = potential.dim
        self.metric = check_metric(metric, _METRICS, potential.dim)
        if n_hidden is None:
            n_hidden = default_n_hidden(d)
        self.n_hidden = check_int("n_hidden", n_hidden, 1)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {_ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        # "auto": chosen on held-out warm-up points after surrogate NUTS's
        # warm-up (_choose_input_scale); the paper's warm-up builds its network
        # before any point is seen, so it starts from PAPER_INPUT_SCALE
        self.input_scale_auto = isinstance(input_scale, str) and input_scale == "auto"
        self.input_scale = PAPER_INPUT_SCALE if self.input_scale_auto else \
            check_positive("input_scale", input_scale)
        self.whiten = check_flag("whiten", whiten)
        self.ridge = check_positive("ridge", ridge)
        self.n_s, self.mu, self.n_train = _check_schedule(n_s, mu, n_train)
        self.tol = check_positive("tol", tol)
        self.window = check_int("window", window, 10)
        self.laplace_tail = check_flag("laplace_tail", laplace_tail)
        self.learn_outside = check_flag("learn_outside", learn_outside)
        self.exact = check_flag("exact", exact)
        self.delayed_acceptance = check_flag("delayed_acceptance", delayed_acceptance)
        if self.delayed_acceptance and not self.exact:
            raise ValueError("delayed_acceptance applies to the exact option only (exact=True)")
        self.laplace = _check_laplace(laplace, d)
        self.blas_threads = None if blas_threads is None else check_int("blas_threads",
                                                                        blas_threads, 1)
        self.transitions, self.inner = check_transitions(transitions, inner)
        self.max_tree_depth = check_int("max_tree_depth", max_tree_depth, 1)
        if self.transitions is not None and not self.exact:
            raise ValueError("transitions apply to the exact option only (exact=True): "
                             "without it V already judges")
        if self.transitions is not None and self.delayed_acceptance:
            raise ValueError("delayed_acceptance does not apply with transitions")
        if self.exact:
            self.method = "vhmc-exact"
        # None: the paper's warm-up, but surrogate NUTS's for exact=True (below)
        self.warmup_kind = None if warmup is None else check_warmup(warmup, self.method)
        if self.warmup_kind == "surrogate-nuts" and self.transitions is not None:
            raise ValueError("warmup='surrogate-nuts' has no transitions option")

    def _warmup_for(self, n_warmup: int) -> str:
        """The warm-up a run of n_warmup iterations gets: ``warmup`` when
        given; by default the paper's, except with ``exact`` when none of
        the paper's training options (n_s, mu, n_train, transitions) is
        given and n_warmup holds surrogate NUTS's two blocks."""
        if self.warmup_kind is not None:
            return self.warmup_kind
        paper_options = (self.n_s, self.mu, self.n_train, self.transitions)
        if self.exact and all(o is None for o in paper_options) \
                and n_warmup >= 2 * DEFAULT_POLICY.block:
            return "surrogate-nuts"
        return "paper"

    # -- pieces -----------------------------------------------------------------
    def _inv_metric(self, lap):
        if isinstance(self.metric, np.ndarray):
            return self.metric
        if self.metric == "laplace":
            return lap.cov
        if self.metric == "laplace-diag":
            return lap.sd ** 2
        return None

    def _schedule(self, t_max):
        if self.mu is not None:
            user = self.mu

            def mu(t):
                m = float(user(t))
                if not (0.0 <= m <= 1.0):
                    raise ValueError(f"the mu schedule must return values in [0, 1]; mu({t}) = {m!r}")
                return m
            return mu, None
        n_s = self.n_s if self.n_s is not None else max(1.0, t_max / 10.0)
        return _exp_schedule(n_s), n_s

    def make_surrogate(self, lap, seed, input_scale=None):
        """(network z with v = 0, V with weights [0, 1] on [z, Laplace], lambda):
        V a :class:`~fastsurrogate.core.ClampedSum` with ``laplace_tail``, else a
        WeightedSum.  ``input_scale`` overrides the sampler's."""
        d = self.potential.dim
        c = self.input_scale if input_scale is None else input_scale
        if self.whiten:
            # x = c L^{-1} (q - q_MAP), cov_Laplace = L L^T, folded into W
            base = RandomNetwork.random(d, self.n_hidden, activation=self.activation, seed=seed)
            Linv = np.linalg.inv(np.linalg.cholesky(lap.cov))
            net = RandomNetwork(c * (base.W @ Linv), base.bias,
                                np.zeros(self.n_hidden), 0.0, self.activation, shift=lap.mean)
        else:
            net = RandomNetwork.random(d, self.n_hidden, activation=self.activation, seed=seed,
                                       shift=lap.mean, scale=lap.sd / c)
        if self.laplace_tail:
            # z held on the sphere beyond its training points' ball (grown by the hook)
            V = ClampedSum(net, lap.potential, [0.0, 1.0], lap.mean, radius=0.0)
        else:
            V = WeightedSum([net, lap.potential], [0.0, 1.0])
        A0 = net.grad_features(lap.mean)
        lam = self.ridge * max(float(np.mean(np.einsum("ij,ij->j", A0, A0))),
                               np.finfo(float).tiny)
        return net, V, lam

    def train(self, chain, trace, ctx, t_max, net, V, trainer, mu_fn, curve):
        """Algorithm 2 for t = 0 .. t0 - 1; returns (t0, the training hook, which
        holds the training points).  Appends to `curve` (dict of lists).

        The training step runs in C after each iteration
        (:class:`~fastsurrogate.surrogates._online.ScoreMatchingHook`): Python
        is entered once per chunk of iterations (once per ``window`` with the
        "auto" rule, whose check runs here), and after a breakdown of the
        SMW recursion, to re-solve (3.19) from every point seen.
        """
        auto = self.n_train == "auto"
        mu = _mu_table(mu_fn, t_max)
        hook = ScoreMatchingHook(self.potential, net, V, trainer, mu,
                                 residual=self.laplace_tail)
        for obj in (net, trainer, hook):        # saved with checkpoints
            ctx.track(obj)
        v_check = None
        t = 0
        while t < t_max:
            end = min((t // self.window + 1) * self.window, t_max) if auto else t_max
            t = ctx.run_span(chain, trace, t, end, "warmup", hook=hook)
            if hook.pending and ctx.replayed:
                # replayed from a checkpoint: its saved state has the re-solve
                curve["resolves"].append(t - 1)
            elif hook.pending:
                # C lost definiteness after many downdates: re-solve (3.19)
                # from every point seen (recomputing their features)
                _resolve(trainer, net, list(zip(*hook.points())))
                curve["resolves"].append(t - 1)
                net.output_weights = trainer.weights
                hook.finish_iteration()
                # V changed: the chain's cached V and grad V at its state are stale
                chain.refresh_drive()
            if auto and t % self.window == 0 and hook.n_points:
                Q = hook.points()[0][-_PROBES:]
                P = np.concatenate([net.grad_features(q) for q in Q])
                v = trainer.weights
                if v_check is not None:
                    # relative to grad V (mu ~ 1): with the Laplace tail z's part
                    # alone may be ~0 (a near-Gaussian U)
                    now = P @ v
                    if self.laplace_tail:
                        now = now + np.concatenate([V.potentials[1].grad(q) for q in Q])
                    change = float(np.linalg.norm(P @ (v - v_check)) /
                                   max(np.linalg.norm(now), np.finfo(float).tiny))
                    curve["weight_change"].append((t, change))
                    if change < self.tol and mu[t] >= _AUTO_MU:
                        break
                v_check = v
        Q = hook.points()[0]
        ctx.state.train_radius = float(np.max(_laplace_distance(V, Q))) if Q.shape[0] else 0.0
        iteration, sq_error, sq_grad = hook.curve()
        curve["iteration"].extend(iteration.tolist())
        curve["sq_error"].extend(sq_error.tolist())
        curve["sq_grad"].extend(sq_grad.tolist())
        curve["mu"].extend(mu[1:t + 1].tolist())
        return t, hook

    # -- the algorithm -----------------------------------------------------------
    def check_sizes(self, n_draws, n_warmup):
        if self._warmup_for(n_warmup) != "paper":
            check_warmup_size(self.method, n_warmup)
            return
        if n_warmup < 1:
            raise ValueError(f"n_warmup must be >= 1, got {n_warmup}")
        if isinstance(self.n_train, int) and self.n_train > n_warmup:
            raise ValueError(f"n_train ({self.n_train}) must be <= n_warmup ({n_warmup}): "
                             "training is part of the warm-up")

    def phases(self, run):
        """Laplace, then n_warmup warm-up iterations (training for the first t0),
        then n_draws draws on the frozen surrogate.

        ``result.exact`` is False (draws target exp(-V), the surrogate-induced
        distribution) unless ``exact=True``; ``warmup_draws`` hold the
        training iterations (they target the changing V_t); chains start
        from draws of the Laplace approximation unless ``init`` is given.
        ``surrogate`` is chain 0's frozen V (a Potential; ``info["networks"]``
        holds each chain's network z, ``info["surrogates"]`` each chain's V).
        ``info`` also holds ``laplace``, ``t0`` (per chain), ``mu_final``,
        ``lambda``, ``n_s``, ``training_curve`` (per chain: for each training
        point, its iteration, the squared score-matching error
        ||grad z - grad U||^2 of the surrogate BEFORE it absorbed the point --
        a held-out error -- and ||grad U||^2; mu_t per iteration; the "auto"
        rule's weight changes; ``resolves``, the iterations where a numerical
        breakdown of the SMW recursion forced a batch re-solve from all
        points), ``exact_evaluations`` per phase.  ``timings``: laplace,
        train, warmup (frozen part), sample.
        """
        run.exact = self.exact
        if self._warmup_for(run.n_warmup) == "surrogate-nuts":
            return self._after_surrogate_nuts_warmup(run)
        t_max = self.n_train if isinstance(self.n_train, int) else run.n_warmup
        seed = surrogate_seed(run.generators[0])
        with run.phase("laplace"):
            lap = self.laplace if self.laplace is not None else laplace_approximation(self.potential)
        run.info["laplace"] = lap
        q0 = run.init if run.init is not None else np.stack(
            [lap.sample(1, g)[0] for g in run.generators])
        run.start(q0)
        mu_fn, run.info["n_s"] = self._schedule(t_max)
        with blas_threads(self.blas_threads):
            run.each_chain(lambda ctx: self.chain(ctx, lap, seed, mu_fn, t_max),
                           run.n_warmup + run.n_draws, self.method)

    def _after_surrogate_nuts_warmup(self, run):
        """``warmup="surrogate-nuts"``: that warm-up; z fitted to every
        recorded (q, grad U - grad L) by (3.19) in one batch; the draws on
        V = z + L."""
        seed = surrogate_seed(run.generators[0])
        run.start()
        w = surrogate_nuts_warmup(self, run)
        lap = self.laplace if self.laplace is not None else w.laplace
        if lap is None:
            with run.phase("laplace"):
                lap = laplace_approximation(self.potential)
        run.info["laplace"] = lap
        with run.phase("train"), blas_threads(self.blas_threads):
            # z fits the residual gradient grad U - grad Laplace: V = z + Laplace
            # keeps the Laplace term's tails (a softplus z alone grows only
            # linearly away from its data, and exp(-z) need not normalise)
            G = w.G - gaussian_base_terms(lap.potential, w.Q)[1]
            scale = self.input_scale
            if self.input_scale_auto:
                scale, run.info["input_scale_choice"] = self._choose_input_scale(
                    lap, seed, w.Q, G, w.U)
            run.info["input_scale"] = scale
            net, V, lam, radius = self._fit_batch(lap, seed, scale, w.Q, G)
        judge = self.potential if self.exact else V
        for ctx in run.ctxs:        # the warm-up's state gives way to VHMC's
            ctx.state = _VHMCChain(net=net, V=V, lam=lam, t0=run.n_warmup,
                                   curve=_new_curve([1.0]), train_radius=radius)

        def sample(ctx):
            old = ctx.chain
            ctx.chain = Chain(V, judge, old.position, ctx.generator, step_size=old.step_size,
                              n_steps=self.n_steps, random_n_steps=self.random_n_steps,
                              inv_metric=old.inv_metric, max_energy_error=self.max_energy_error,
                              delayed_acceptance=self.delayed_acceptance)
            with ctx.phase("sample"):
                ctx.run_span(ctx.chain, ctx.main, 0, ctx.run.n_draws, "sample")

        run.each_chain(sample, run.n_draws, self.method)

    def _fit_batch(self, lap, seed, scale, Q, G):
        """z with input scale ``scale`` fitted by (3.19) in one batch to the
        rows of Q (n, dim) and the residual gradients G (n, dim), and V = z +
        Laplace (held on the ball of Q's farthest Laplace distance with
        ``laplace_tail``).  Returns (net, V, lambda, that radius)."""
        net, V, lam = self.make_surrogate(lap, seed, scale)
        trainer = SMWTrainer(self.n_hidden, self.potential.dim, lam)
        _resolve(trainer, net, list(zip(Q, G)))
        net.output_weights = trainer.weights
        V.weights = [1.0, 1.0]
        radius = float(np.max(_laplace_distance(V, Q)))
        if isinstance(V, ClampedSum):
            V.radius = radius
        return net, V, lam, radius

    def _choose_input_scale(self, lap, seed, Q, G, U):
        """The input scale of ``input_scale="auto"`` after surrogate NUTS's
        warm-up: of :data:`INPUT_SCALES`, the one whose fit (3.19) on four
        fifths of the recorded points (an even subsample of at most
        ``MAX_SELECTION_POINTS``) predicts the highest exact-test acceptance
        on the other fifth (a seeded random choice; U - V there, V = z +
        Laplace), the rule by which surrogate NUTS chooses its own.
        Returns (scale, {scale: predicted acceptance})."""
        n = Q.shape[0]
        held = np.zeros(n, dtype=bool)
        held[np.random.default_rng(seed).choice(n, max(n // 5, 2), replace=False)] = True
        tr = np.flatnonzero(~held)
        if tr.shape[0] > MAX_SELECTION_POINTS:
            tr = tr[even_indices(tr.shape[0], MAX_SELECTION_POINTS)]
        ho = np.flatnonzero(held)[:MAX_SELECTION_POINTS]
        scores = {}
        for c in INPUT_SCALES:
            V = self._fit_batch(lap, seed, c, Q[tr], G[tr])[1]
            err = U[ho] - np.array([V.value(q) for q in Q[ho]])
            scores[c] = predicted_acceptance(err) if np.all(np.isfinite(err)) else -1.0
        best = max(scores, key=lambda c: scores[c])
        return best, scores

    def chain(self, ctx, lap, seed, mu_fn, t_max):
        """One chain: train for t0 iterations, freeze V, finish the warm-up, sample."""
        net, V, lam = self.make_surrogate(lap, seed)
        st = ctx.state = _VHMCChain(net=net, V=V, lam=lam, t0=0, curve=_new_curve([]))
        inv_metric = self._inv_metric(lap)
        step0 = self.step_size if self.step_size is not None else (1.0 if self.adapt else 0.1)
        trainer = SMWTrainer(self.n_hidden, self.potential.dim, lam)
        chain = ctx.chain = Chain(V, V, ctx.q0, ctx.generator, step_size=step0,
                                  n_steps=self.n_steps, random_n_steps=self.random_n_steps,
                                  inv_metric=inv_metric, max_energy_error=self.max_energy_error)
        if ctx.index == 0:          # the bar shows chain 0's phase
            ctx.run.describe(f"{self.method}: train (score matching)")
        with ctx.phase("train"):
            if self.adapt:
                if self.step_size is None:
                    chain.find_step_size()
                chain.start_adaptation(self.target_accept)
            st.t0, hook = self.train(chain, ctx.warm, ctx, t_max, net, V, trainer, mu_fn,
                                     st.curve)
            if self.adapt:
                chain.finish_adaptation()
        if ctx.index == 0:
            ctx.run.describe(f"{self.method}: warmup and sample")
        # frozen from here on: V = V_{t0}
        if self.exact and self.transitions is not None:
            ctx.main["inner_accept_prob"] = np.full(ctx.run.n_draws, np.nan)
            ctx.warm["inner_accept_prob"] = np.full(ctx.run.n_warmup, np.nan)
            with ctx.phase("tune"):
                chain, tinfo = tune_transitions(self, chain, V, self.transitions, self.inner,
                                                stop=ctx.stop)
            ctx.chain = chain
            tinfo["chain"] = ctx.index
            ctx.run.info.setdefault("transitions", []).append(tinfo)
        elif self.exact:
            chain = ctx.chain = Chain(V, self.potential, chain.position, chain.generator,
                                      step_size=chain.step_size, n_steps=self.n_steps,
                                      random_n_steps=self.random_n_steps, inv_metric=inv_metric,
                                      max_energy_error=self.max_energy_error,
                                      delayed_acceptance=self.delayed_acceptance)
        learn = None
        if self.learn_outside and not self.exact and isinstance(V, ClampedSum):
            st.outside = learn = ctx.track(_OutsidePoints(self.potential.dim))
        n_warmup = ctx.run.n_warmup
        if st.t0 < n_warmup:
            with ctx.phase("warmup"):
                readapt = self.adapt and n_warmup - st.t0 >= 50
                if readapt:
                    chain.start_adaptation(self.target_accept)
                self._frozen_span(ctx, chain, ctx.warm, st.t0, n_warmup, "warmup", lap,
                                  trainer, hook, learn)
                if readapt:
                    chain.finish_adaptation()
        st.outside_start = learn.n if learn is not None else 0
        with ctx.phase("sample"):
            self._frozen_span(ctx, chain, ctx.main, 0, ctx.run.n_draws, "sample", lap, trainer,
                              hook, learn)

    def _frozen_span(self, ctx, chain, trace, start, stop, key, lap, trainer, hook, learn):
        """Rows start..stop-1 of `trace` on the frozen V.  With ``learn`` (an
        :class:`_OutsidePoints`: ``learn_outside``), in spans of ``window``
        iterations, after each of which the span's states beyond the
        training ball join the fit: their exact gradients update z's output
        weights (the SMW step (3.20)-(3.21); a re-solve of (3.19) from every
        point after a numerical breakdown) and the ball grows to hold them.
        What a span does depends on its draws alone (never on time), and a
        span replayed from a checkpoint skips it (the saved state has it)."""
        if learn is None:
            ctx.run_span(chain, trace, start, stop, key)
            return
        st = ctx.state
        net, V = st.net, st.V
        i = start
        while i < stop:
            lo = i
            i = ctx.run_span(chain, trace, i, min(i + self.window, stop), key)
            if ctx.replayed or i == lo:
                continue
            Q = trace["draws"][lo:i]
            r = _laplace_distance(V, Q)
            far = r > V.radius * (1 + 1e-9)
            if not far.any():
                continue
            Q, r = Q[far], r[far]
            G = np.array([self.potential.grad(q) for q in Q]) \
                - gaussian_base_terms(lap.potential, Q)[1]
            ok = np.all(np.isfinite(G), axis=1)
            if not ok.any():
                continue
            Q, G, r = Q[ok], G[ok], r[ok]
            A = net.grad_features_batch(Q)
            learn.add(Q, G)
            try:
                trainer.update_many(A, G)
            except TrainingError:
                # lost definiteness after many updates: re-solve (3.19) from
                # every point, the training set's and those learnt since
                Q0, G0 = hook.points()
                Q1, G1 = learn.points()
                _resolve(trainer, net, list(zip(np.concatenate([Q0, Q1]),
                                                np.concatenate([G0, G1]))))
            net.output_weights = trainer.weights
            V.radius = max(float(V.radius), float(r.max()))
            st.train_radius = float(V.radius)
            # V changed: the chain's cached V and grad V at its state are stale
            chain.set_position(chain.position)

    def finish(self, run):
        if "laplace" not in run.info:
            return
        lap = run.info["laplace"]
        run.info.update(self._info(lap, run))
        run.surrogate = run.info["surrogates"][0]
        outside = self._outside_training(run)
        run.info["outside_training"] = outside
        far = [c for c, f in enumerate(outside) if f > _OUTSIDE_WARN]
        if far:
            run.info.setdefault("warnings", []).append(
                f"chain(s) {far} spent {max(outside[c] for c in far):.1%} or more of their "
                "draws beyond every training point of the surrogate (the training set's ball in "
                "the Laplace approximation's metric), where V is extrapolated: "
                + ("the exact test keeps the draws exact, but mixing there is poor"
                   if self.exact else "exp(-V) there is not a fitted approximation of the "
                   "posterior" + (" until the chain has learnt it (learn_outside)"
                                  if self.learn_outside and self.laplace_tail else "")
                   + "; check the draws against an exact run (exact=True)"))

    def _outside_training(self, run):
        """Per chain: the fraction of its kept draws farther from the MAP, in
        the Laplace approximation's metric, than every training point (with
        ``learn_outside``: than every point learnt before it)."""
        out = []
        for ctx in run.ctxs:
            st = _chain_state(ctx)
            V, radius = st.V, st.train_radius
            n = ctx.done.get("sample", 0)
            if V is None or radius is None or n == 0:
                out.append(0.0)
                continue
            if st.outside is not None:     # learnt where they fell: the ball grew
                out.append((st.outside.n - st.outside_start) / n)
                continue
            r = _laplace_distance(V, ctx.main["draws"][:n])
            out.append(float(np.mean(r > radius * (1 + 1e-9))))
        return out

    def _info(self, lap, run):
        """The run's info from every chain's training curve and counts."""
        train_evals, sample_evals, curves = [], [], []
        states = [_chain_state(ctx) for ctx in run.ctxs]
        for ctx, st in zip(run.ctxs, states):
            c = st.curve
            if c is None:           # the chain never started
                continue
            cv = {"iteration": np.asarray(c["iteration"], dtype=np.int64),
                  "sq_error": np.asarray(c["sq_error"], dtype=float),
                  "sq_grad": np.asarray(c["sq_grad"], dtype=float),
                  "mu": np.asarray(c["mu"], dtype=float),
                  "weight_change": np.asarray(c["weight_change"], dtype=float).reshape(-1, 2),
                  "resolves": np.asarray(c["resolves"], dtype=np.int64)}
            curves.append(cv)
            train_evals.append(int(cv["iteration"].shape[0]))
            if self.exact:
                nw, ns = ctx.done.get("warmup", 0), ctx.done.get("sample", 0)
                # + 1: the exact chain's start evaluates U at the state it takes over
                sample_evals.append(int(ctx.warm["judge_evaluated"][st.t0:nw].sum())
                                    + int(ctx.main["judge_evaluated"][:ns].sum()) + 1)
            else:
                sample_evals.append(st.outside.n if st.outside is not None else 0)
        Vs = [st.V for st in states]
        lap_evals = 0 if self.laplace is not None else int(lap.info.get("n_evaluations", 0))
        return {
            "t0": [st.t0 for st in states],
            "mu_final": [float(V.weights[0]) if V is not None else np.nan for V in Vs],
            "lambda": states[-1].lam,
            "n_hidden": self.n_hidden,
            "input_scale": run.info.get("input_scale", self.input_scale),
            "training_curve": curves,
            "learnt_outside": [st.outside.n if st.outside is not None else 0 for st in states],
            "exact_evaluations": {"laplace": lap_evals, "train": train_evals,
                                  "after_t0": sample_evals},
            "networks": [st.net for st in states],
            "surrogates": Vs,
            "target": ("exact posterior (surrogate-driven leapfrog, exact Metropolis test)"
                       if self.exact else
                       "surrogate-induced distribution exp(-V) (approximate; V = "
                       + ("mu z + Laplace" if self.laplace_tail
                          or self._warmup_for(run.n_warmup) != "paper"
                          else "mu z + (1 - mu) Laplace") + ", frozen at t0)"),
        }


def _laplace_distance(V, Q):
    """The distance of the rows of Q (n, dim) from the MAP in the Laplace
    approximation's metric, sqrt((q - q_MAP)^T H (q - q_MAP)), H the precision
    of V's second term (the Laplace Gaussian): ClampedSum's r(q)."""
    L = V.potentials[1]
    D = np.asarray(Q, dtype=float) - L.mean
    return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", D, L.precision, D), 0.0))


def _resolve(trainer, net, points, chunk=256):
    """Replace the trainer's state by the batch solution of (3.19) for `points`
    [(q, grad U(q)), ...], in O(s^2) memory: the Gram matrix sum A^T A and
    sum A^T g are accumulated in chunks, then handed to the batch solver as
    s / d pseudo-points with the same normal equations (R^T R = Gram,
    R^T c = sum A^T g)."""
    s, d = trainer.n_hidden, trainer.dim
    G = np.zeros((s, s))
    b = np.zeros(s)
    Q = np.array([p[0] for p in points])
    Gs = np.array([p[1] for p in points])
    for lo in range(0, len(points), chunk):
        A = net.grad_features_batch(Q[lo:lo + chunk]).reshape(-1, s)   # stacked (d, s) blocks
        G += A.T @ A
        b += A.T @ Gs[lo:lo + chunk].reshape(-1)
    # R from the eigen-decomposition, with the eigenvalues of a rank-deficient
    # Gram matrix clipped at 0; the trainer adds its own ridge on top
    w, V = np.linalg.eigh(0.5 * (G + G.T))
    w = np.maximum(w, 0.0)
    R = np.sqrt(w)[:, None] * V.T                     # R^T R = G
    c = np.where(w > 0, (V.T @ b) / np.sqrt(np.where(w > 0, w, 1.0)), 0.0)   # R^T c = b
    n_blocks = -(-s // d)
    Rp = np.zeros((n_blocks * d, s))
    cp = np.zeros(n_blocks * d)
    Rp[:s], cp[:s] = R, c
    trainer.solve_batch(Rp.reshape(n_blocks, d, s), cp.reshape(n_blocks, d))


def training_curve(result, window=100, chain=0):
    """The score-matching error over the training iterations, in windows.

    Returns a dict of arrays, one entry per window of ``window`` iterations
    that contains training points: ``iteration`` (window end), ``mse`` (mean
    over the window's points of ||grad z(q) - grad U(q)||^2 / dim, each
    measured before the point was absorbed), ``relative`` (sqrt of the sum
    of squared errors over the sum of ||grad U||^2 in the window), ``mu``
    (mu_t at the window end) and ``points`` (training points in the window).
    """
    window = check_int("window", window, 1)
    cv = result.info["training_curve"][chain]
    it, err, g2, mu = cv["iteration"], cv["sq_error"], cv["sq_grad"], cv["mu"]
    d = result.dim
    n_it = mu.shape[0]
    out = {k: [] for k in ("iteration", "mse", "relative", "mu", "points")}
    for lo in range(0, n_it, window):
        hi = min(lo + window, n_it)
        sel = (it >= lo) & (it < hi)
        if not np.any(sel):
            continue
        out["iteration"].append(hi)
        out["mse"].append(float(err[sel].mean() / d))
        out["relative"].append(float(np.sqrt(err[sel].sum() / max(g2[sel].sum(), 1e-300))))
        out["mu"].append(float(mu[hi - 1]))
        out["points"].append(int(sel.sum()))
    return {k: np.asarray(v) for k, v in out.items()}
