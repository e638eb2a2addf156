"""NNgHMC: HMC driven by a neural network that predicts grad U (Li, Holbrook,
Shahbaba & Baldi 2019, Algorithm 1 and the training schedule of section 3),
with an exact Metropolis test.

Stages
------
1. burn-in: exact HMC (step size and metric adaptation when ``adapt``);
   nothing is recorded.
2. explore: exact HMC through a :class:`~fastsurrogate.RecordingPotential`,
   so every leapfrog step's (q, grad U(q)) becomes a training point (not
   only the chain's states: a trajectory of L steps gives L points).
3. schedule: at exploration iteration ``train_start`` and every
   ``train_every`` iterations after it, up to ``train_end``, a gradient
   network is trained on every point recorded so far (pooled over chains);
   then every chain runs a short trial of ``trial_length`` iterations with
   the network's gradient driving the leapfrog and the exact U judging.
   When the trial's acceptance reaches ``switch_fraction`` times exact
   HMC's (measured on the recorded exploration iterations), the sampler
   switches; otherwise exact HMC goes on recording.  If no trial succeeds
   by ``train_end``, the draws come from exact HMC.
4. sample: the network's gradient drives, the exact U (value only, one
   evaluation per iteration) judges: the leapfrog with any gradient field is
   still volume preserving and reversible, so the chain targets the exact
   posterior.

Every decision is an event in ``result.info["events"]``; the wall time of
each stage is in ``result.timings``: ``burn_in``, ``explore`` (their sum is
``warmup``), ``train``, ``trial``, ``sample``.  The trial iterations are genuine
transitions of the chain and stay in ``result.warmup_draws``;
``result.info["warmup_stage"]`` says which stage each warm-up row belongs to.
"""
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..core._hmc import Chain
from ..core._potential import Potential, RecordingPotential
from ..surrogates.gradient_network import affine_start_network, fit_gradient_network
from ._chain import surrogate_seed
from ._checks import check_int, check_potential, check_tree_depth
from ._checks import check_explore, check_flag, check_number
from .hmc import HMC
from .rns_hmc import explore_options, exploration_metric
from .surrogate_nuts import check_warmup, check_warmup_size, surrogate_nuts_warmup

__all__ = ["NNGHMC"]

# rows of result.warmup_draws, by stage
STAGE_BURN_IN, STAGE_EXPLORE, STAGE_TRIAL = 0, 1, 2
_STAGE_NAMES = {STAGE_BURN_IN: "burn-in", STAGE_EXPLORE: "explore", STAGE_TRIAL: "trial"}


def _iterations(name, value, n_warmup):
    """An iteration count: an int as given, or a float in [0, 1] as a fraction of n_warmup."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer or a fraction in [0, 1], got {value!r}")
    if isinstance(value, (int, np.integer)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
        return int(value)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an integer or a fraction in [0, 1], "
                        f"got {type(value).__name__}") from None
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} as a fraction of n_warmup must be in [0, 1], got {value!r}")
    return int(round(v * n_warmup))


def _check_iterations(name, value):
    """Validate at construction time (the fraction is resolved in sample())."""
    _iterations(name, value, 1)
    return value


def _check_training(start: str, optimizer: str, activation: str) -> tuple[str, str]:
    """NNgHMC's ``start`` and ``optimizer``, checked (a tanh network has no
    exact affine start: tanh(t) - tanh(-t) is not linear)."""
    if start not in ("affine", "random"):
        raise ValueError(f'start must be "affine" or "random", got {start!r}')
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f'optimizer must be "adam" or "lbfgs", got {optimizer!r}')
    return ("random" if activation == "tanh" else start), optimizer


def _check_fraction(name: str, value: float, upper: float = 1.0) -> float:
    """``value`` as a float in [0, upper) (finite)."""
    v = check_number(name, value)
    if not (0.0 <= v < upper and np.isfinite(v)):
        bound = f"in [0, {upper:g})" if np.isfinite(upper) else ">= 0 and finite"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return v


@dataclass
class _NNGHMCChain:
    """An NNgHMC chain's own state (its ``ctx.state``)."""
    recorder: RecordingPotential | None = None    # records the exploration's (q, grad U)
    exact: Chain | None = None            # its exact chain (burn-in, exploration), once made


@dataclass
class _NNGHMCRun:
    """NNgHMC's run-wide state (``run.state``); a remote worker gets a copy."""
    net: Potential | None = None          # the latest network (or the given surrogate)
    row: int = 0                          # the next warm-up row
    iteration: int = 0                    # the exploration iteration reached
    stage: np.ndarray | None = None       # each warm-up row's stage (STAGE_*)
    cycle_label: str = ""                 # " (j of <= n)": the cycle the progress bars show


class NNGHMC(HMC):
    """Neural-network-gradient HMC (exact).

    Parameters
    ----------
    potential : Potential
        The exact target U.  It is asked for values and gradients during the
        exploration, and for values only while the network drives.
    n_hidden : int
        Hidden units of the gradient network (of each block when ``blocks > 1``).
    blocks : int
        Output blocks (the paper's Remark 1): the dim outputs split into
        ``blocks`` groups, each with its own hidden layer.
    activation : {"softplus", "tanh", "relu"}
    holdout : float
        Fraction of the training points held out for early stopping.
    burn_in : int or float
        Exact HMC iterations before recording starts (a fraction of
        ``n_warmup`` when a float); adaptation (``adapt=True``) runs in them.
    train_start : int or float
        Exploration iteration (counted from the start of the warm-up, trial
        iterations excluded) of the first training (default 0.5: the
        paper's schedule).
    train_every : int or float
        Exact iterations between trainings while trials fail (k).
    train_end : int, float or None
        Last iteration at which a training may happen (default ``n_warmup``).
    trial_length : int
        Iterations of each trial run with the network gradient, per chain.
    switch_fraction : float
        Switch when trial acceptance >= switch_fraction * exact HMC acceptance.
    record_every : int
        Record one leapfrog step in ``record_every`` (1: every step, the paper).
    max_train : int or None
        Train on a random subset of at most this many recorded points.
    start : {"random", "affine"}
        Weights the first training starts from: ``"random"`` (default, the
        paper's) the trainer's own random (Glorot) start; ``"affine"``
        (softplus and relu only; a deviation, not in the paper) the
        least-squares affine fit of grad U written exactly as hidden-unit
        pairs (:func:`affine_start_network`; passed to the trainer as
        ``init=``).  The affine start suits a nearly Gaussian posterior,
        whose gradient is nearly affine, and can trap the fit elsewhere: on
        the NNgHMC paper's banana (``reproduce nnghmc-fig2``) it left
        held-out relative gradient errors of 28 to 2083 and no accepted
        proposal, where the random start gave 0.02 to 0.04.
    optimizer : {"adam", "lbfgs"}
        How the built-in trainer fits the network (its ``method``):
        mini-batch Adam (default; the paper's) or full-batch L-BFGS (a
        deviation, not in the paper; the default before 0.1.0.dev0 changed it).
        On smooth targets L-BFGS reaches a 2-3 times lower error in the
        same time from one second of training on
        (:mod:`fastsurrogate.surrogates.gradient_network`), and with few
        points it fits where Adam's early stopping does not: on the paper's
        banana (``reproduce nnghmc-fig2 --quick``, 1000 training draws, h =
        100) Adam's held-out relative gradient error was 0.96 and 0.91 and
        NNgHMC accepted 0.35, against 0.04 and 0.12 and 0.57 and 0.79 with
        L-BFGS (exact HMC 0.62 and 0.75); on the 30-d Gaussian of the
        paper's Figure 3 from 20 recorded iterations, 0.29 against 0.80.
        But on posteriordb's eight schools (non-centred; 4 chains x (1000 +
        1000), seed 2024, Intel Xeon) L-BFGS's network left mu and log tau
        mixing slowly at the same acceptance, 0.67-0.85: smallest bulk ESS
        114 and R-hat 1.039, against Adam's 1766 and 1.003 (exact HMC 1916);
        on the other four posteriordb references the two agreed (smallest
        bulk ESS within 7 %), and on issue 38's 5-d target (4 x (2000 +
        4000), seeds 1-5) Adam kept every mean and sd within 2.2 MCSE,
        acceptance 0.81-0.89.  On the NNgHMC paper's 200-d logistic
        regression (``reproduce nnghmc-tables``, 6000 to 18002 recorded
        gradients) Adam's network accepted 0.15 to 0.50 in its trials
        against exact HMC's 0.76 and the run stayed exact; L-BFGS's passed
        at its second training (0.71).  ``trainer_options`` can override
        it.
    warm_start : bool
        Start each retraining from the previous network's weights (the
        trainer gets ``init=`` the previous network).
    trainer : callable, optional
        ``trainer(Q, G, n_hidden=, blocks=, activation=, holdout=, seed=,
        [init=,] **trainer_options) -> Potential`` whose gradient predicts
        grad U (default :func:`fastsurrogate.surrogates.fit_gradient_network`).
    trainer_options : dict, optional
        Extra keyword arguments for the trainer.
    surrogate : Potential, optional
        A trained gradient network (e.g. from an earlier run, or
        :func:`fastsurrogate.surrogates.swap_prior`): no schedule; after
        ``n_warmup`` exact iterations it drives the sampling directly.
    explore : {"hmc", "nuts"}
        The exact kernel of the burn-in and exploration phases, and of the
        draws when no switch happens: HMC (the paper's, default) or NUTS
        (every leapfrog step of its trajectories is recorded likewise).
    max_tree_depth : int
        NUTS: at most 2**max_tree_depth - 1 leapfrog steps per transition.
    warmup : {"paper", "surrogate-nuts"}
        "paper" (default): burn-in, exploration and the training schedule
        above.  "surrogate-nuts" (a deviation, not in the paper): the
        warm-up of surrogate-driven NUTS
        (:func:`~fastsurrogate.samplers.surrogate_nuts.surrogate_nuts_warmup`:
        Laplace start, exact NUTS recorded, then NUTS on a value-and-gradient
        surrogate whose every exact correction is recorded with its
        gradient); the gradient network is trained once on every recorded
        (q, grad U) and drives the draws from each chain's adapted state,
        step size and metric.  No schedule and no trial: ``burn_in``,
        ``train_start``, ``train_every``, ``train_end``, ``trial_length``,
        ``switch_fraction`` and ``explore`` do not apply.
    **hmc_options
        step_size, n_steps, random_n_steps, metric, adapt, target_accept,
        max_energy_error, adaptation, as for :class:`HMC`, except that the
        metric defaults to "diag" (adapted from draws and gradients), as
        for RNS-HMC.

    Notes
    -----
    NNgHMC has no surrogate transitions (``transitions=``): its network
    predicts grad U only and has no value V, so the exact correction
    min(1, exp(-U(q') + U(q) + V(q') - V(q))) cannot be formed (a V
    recovered by integrating the predicted gradient along a path would
    depend on the path, since the network's output is not a gradient field).
    Asking for it raises a ValueError.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> model = fs.models.Gaussian(np.zeros(3), np.diag([1.0, 2.0, 4.0]))
    >>> res = fs.sample(model, method="nnghmc", n_draws=300, n_warmup=400, chains=1,
    ...                 n_steps=8, n_hidden=30, seed=1, progress=False)
    >>> [e["event"] for e in res.info["events"]]
    ['train', 'trial', 'switch']
    >>> res.surrogate.dim
    3
    """

    method = "nnghmc"
    _warmup_ends = ("fixed",)    # training reads the whole exact warm-up
    # its chains hold the recording potential and trainer state: they stay in this process
    remote_chains = False

    def __init__(self, potential: Potential, *, n_hidden: int = 100, blocks: int = 1,
                 activation: str = "softplus", holdout: float = 0.1, burn_in: float = 0.2,
                 train_start: float = 0.5, train_every: float = 0.1,
                 train_end: float | None = None, trial_length: int = 50,
                 switch_fraction: float = 0.9, record_every: int = 1,
                 max_train: int | None = None, start: str = "random",
                 optimizer: str = "adam", warm_start: bool = True,
                 trainer: Callable[..., Potential] | None = None,
                 trainer_options: dict[str, Any] | None = None,
                 surrogate: Potential | None = None, explore: str = "hmc",
                 max_tree_depth: int = 10, warmup: str = "paper",
                 **hmc_options: Any) -> None:
        if hmc_options.get("transitions") is not None or "inner" in hmc_options:
            raise ValueError("NNgHMC has no surrogate transitions: its gradient network has no "
                             "value V, so the exact test min(1, exp(-U(q') + U(q) + V(q') - "
                             "V(q))) cannot be formed; use RNS-HMC, ARNS-HMC (max_points) or "
                             "VHMC (exact=True)")
        hmc_options.pop("transitions", None)
        hmc_options.update(exploration_metric(hmc_options))    # as RNS-HMC's
        super().__init__(potential, **hmc_options)
        self.warmup_kind = check_warmup(warmup, self.method)
        if self.warmup_kind != "paper" and surrogate is not None:
            raise ValueError("warmup='surrogate-nuts' trains the network: pass no surrogate")
        self.explore_with = check_explore(explore)
        self.max_tree_depth = check_tree_depth(max_tree_depth)
        self.n_hidden = check_int("n_hidden", n_hidden, 1)
        self.blocks = check_int("blocks", blocks, 1)
        if self.blocks > potential.dim:
            raise ValueError(f"blocks must be <= dim = {potential.dim}, got {blocks}")
        if activation not in ("softplus", "tanh", "relu"):
            raise ValueError(f"activation must be softplus, tanh or relu; got {activation!r}")
        self.activation = activation
        self.holdout = _check_fraction("holdout", holdout)
        self.burn_in = _check_iterations("burn_in", burn_in)
        self.train_start = _check_iterations("train_start", train_start)
        self.train_every = _check_iterations("train_every", train_every)
        if self.train_every == 0:
            raise ValueError("train_every must be >= 1 iteration (or a fraction > 0), got 0")
        self.train_end = None if train_end is None else _check_iterations("train_end", train_end)
        self.trial_length = check_int("trial_length", trial_length, 1)
        self.switch_fraction = _check_fraction("switch_fraction", switch_fraction, np.inf)
        self.record_every = check_int("record_every", record_every, 1)
        self.max_train = None if max_train is None else check_int("max_train", max_train, 2)
        self.start, self.optimizer = _check_training(start, optimizer, activation)
        self.warm_start = check_flag("warm_start", warm_start)
        if trainer is not None and not callable(trainer):
            raise TypeError(f"trainer must be callable, got {type(trainer).__name__}")
        self.trainer = trainer
        if trainer_options is not None and not isinstance(trainer_options, dict):
            raise TypeError("trainer_options must be a dict")
        self.trainer_options = dict(trainer_options or {})
        if surrogate is not None:
            check_potential(surrogate, "surrogate", potential.dim)
        self.surrogate = surrogate

    # -- the schedule ------------------------------------------------------------
    def schedule(self, n_warmup):
        """(burn_in, train_start, train_every, train_end) in iterations for this n_warmup."""
        burn = min(_iterations("burn_in", self.burn_in, n_warmup), n_warmup)
        start = _iterations("train_start", self.train_start, n_warmup)
        every = max(_iterations("train_every", self.train_every, n_warmup), 1)
        end = n_warmup if self.train_end is None else _iterations("train_end", self.train_end, n_warmup)
        end = min(end, n_warmup)
        start = max(start, burn + 1)
        return burn, start, every, end

    def train(self, Q, G, seed, previous=None, progress=None):
        """Fit the gradient network on (Q, G) (from ``previous`` with warm starts);
        ``progress(iteration, max_iter)`` reaches the built-in trainer only."""
        trainer = self.trainer if self.trainer is not None else fit_gradient_network
        opts = dict(n_hidden=self.n_hidden, blocks=self.blocks, activation=self.activation,
                    holdout=self.holdout, seed=seed)
        if self.trainer is None:
            opts["method"] = self.optimizer
            if progress is not None:
                opts["progress"] = progress
        if self.warm_start and previous is not None:
            opts["init"] = previous
        elif self.start == "affine":
            opts["init"] = affine_start_network(Q, G, self.n_hidden, self.blocks,
                                                self.activation, seed=seed)
        opts.update(self.trainer_options)
        return check_potential(trainer(Q, G, **opts), "the trainer's network",
                               self.potential.dim)

    def _trial_chain(self, chain, net):
        """A chain driven by the network and judged by the exact U, from where `chain` is."""
        return Chain(net, self.potential, chain.position, chain.generator,
                     step_size=chain.step_size, n_steps=self.n_steps,
                     random_n_steps=self.random_n_steps, inv_metric=chain.inv_metric,
                     max_energy_error=self.max_energy_error)

    # -- the algorithm -----------------------------------------------------------

    def check_sizes(self, n_draws, n_warmup):
        if self.warmup_kind != "paper":
            check_warmup_size(self.method, n_warmup)
            return
        burn, start, every, end = self.schedule(n_warmup)
        if self.surrogate is None and start > end:
            raise ValueError(
                f"the schedule has no training: train_start = {start} iterations (at least "
                f"burn_in + 1 = {burn + 1}) is after train_end = {end}; increase n_warmup "
                f"(now {n_warmup}) or move train_start / burn_in")

    def phases(self, run):
        """Burn in, explore and train on the schedule, then draw n_draws.

        ``n_warmup`` is the exploration budget (exact HMC iterations, trials
        not counted).  ``draws`` come from the network-driven chain (or from
        exact HMC when no trial succeeded); ``surrogate`` is the last trained
        network; ``timings`` the seconds of ``burn_in``, ``explore``
        (together ``warmup``), ``train``, ``trial`` and ``sample``;
        ``info["events"]`` the schedule's decisions (``train``, ``trial``,
        then ``switch`` or ``keep_exact``), ``info["switched"]``,
        ``info["switch_iteration"]``, ``info["n_train"]``,
        ``info["hmc_acceptance"]``, ``info["trial_acceptance"]`` and
        ``info["warmup_stage"]`` (one code per warm-up row: 0 burn-in,
        1 explore, 2 trial); ``info["training_curve"]`` one record per
        training (its iteration, training and held-out loss per optimiser
        iteration, the held-out relative gradient error).  While it runs,
        ``run.state`` (a ``_NNGHMCRun``) holds the next warm-up row, the
        exploration iteration reached and the latest network; each chain's
        ``ctx.state`` its recorder and exact chain.
        """
        if self.warmup_kind == "surrogate-nuts":
            return self._after_surrogate_nuts_warmup(run)
        burn, start, every, end = self.schedule(run.n_warmup)
        trainings = [] if self.surrogate is not None else list(range(start, end + 1, every))
        seed = surrogate_seed(run.generators[0])
        rows = run.n_warmup + self.trial_length * len(trainings)
        run.start(warm_rows=rows)
        capacity = max((run.n_warmup - burn) * (self.n_steps + 1) // self.record_every + 8, 8)
        for ctx in run.ctxs:
            ctx.state = _NNGHMCChain(recorder=ctx.track(RecordingPotential(
                self.potential, capacity, every=self.record_every)))
        run.state = _NNGHMCRun(net=self.surrogate, stage=np.zeros(rows, np.int8))
        run.info.update(events=[], switched=False, switch_iteration=None, n_train=0,
                        hmc_acceptance=None, trial_acceptance=None, training_curve=[])
        try:
            if burn > 0:                                        # 1. burn-in, not recorded
                self.exact_span(run, burn, record=False)
            if self.surrogate is not None:
                if run.n_warmup > burn:
                    self.exact_span(run, run.n_warmup, record=False)
                run.info["events"].append({"event": "given_surrogate",
                                           "iteration": run.state.iteration})
                switched = True
            else:                                               # 2-3. explore, train, trial
                switched = self.explore_and_train(run, trainings, seed)
            run.info["switched"] = switched
            run.info["switch_iteration"] = run.state.iteration if switched else None
            for ctx in run.ctxs:
                ctx.state.recorder.active = False
            parallel = self.potential.thread_safe and (not switched or run.state.net.thread_safe)
            run.each_chain(lambda ctx: self.draw(ctx, switched), run.n_draws,
                           self.method if switched else "exact", parallel)   # 4. sample
        finally:
            for ctx in run.ctxs:
                ctx.state.recorder.active = False

    def _after_surrogate_nuts_warmup(self, run):
        """``warmup="surrogate-nuts"``: that warm-up, one training on every
        (q, grad U) it recorded, the draws driven by the network."""
        seed = surrogate_seed(run.generators[0])
        run.start()
        w = surrogate_nuts_warmup(self, run)
        Q, G = w.Q, w.G
        run.info.update(events=[], switched=True, switch_iteration=run.n_warmup,
                        hmc_acceptance=None, trial_acceptance=None, training_curve=[])
        run.state = _NNGHMCRun()
        Q, G = self._subsample(Q, G, seed, 0)
        if Q.shape[0] < 2:
            raise RuntimeError("the warm-up recorded fewer than 2 training points")
        with run.phase("train"), run.training_progress("train (gradient network)") as progress:
            run.state.net = self.train(Q, G, seed, None, progress)
        run.info["n_train"] = int(Q.shape[0])
        run.info["training_curve"].append(_training_record(run.n_warmup, run.state.net))
        run.info["events"].append({"event": "train", "iteration": run.n_warmup,
                                   "n_points": int(Q.shape[0])})
        for ctx in run.ctxs:        # the warm-up's state gives way to NNgHMC's
            ctx.state = _NNGHMCChain(exact=ctx.chain)
        run.each_chain(lambda ctx: self.draw(ctx, True), run.n_draws, self.method,
                       self.potential.thread_safe and run.state.net.thread_safe)

    def finish(self, run):
        if not isinstance(run.state, _NNGHMCRun):     # stopped before it was made
            return
        if self.warmup_kind != "paper":
            run.surrogate = run.state.net
            return
        rows = min(c.done.get("warmup", 0) for c in run.ctxs)
        run.info["warmup_stage"] = run.state.stage[:rows].copy()
        run.info["stage_names"] = dict(_STAGE_NAMES)
        run.surrogate = run.state.net

    # -- stages --------------------------------------------------------------------
    def explore_and_train(self, run, trainings, seed):
        """Exact HMC recording every leapfrog step; at each scheduled iteration,
        train on every point so far and trial the network.  True on a switch."""
        events = run.info["events"]
        for j, t in enumerate(trainings):
            # the progress bars say which of the (at most) len(trainings)
            # explore / train / trial cycles runs
            run.state.cycle_label = f" ({j + 1} of <= {len(trainings)})"
            if t > run.state.iteration:
                self.exact_span(run, t, record=True)
            Q, G = self._training_set(run, seed, j)
            t0 = time.perf_counter()
            desc = f"train (gradient network {j + 1} of <= {len(trainings)})"
            with run.phase("train"), run.training_progress(desc) as progress:
                net = self.train(Q, G, int(np.random.SeedSequence([seed, j])
                                           .generate_state(1)[0] >> 1), run.state.net, progress)
            secs = time.perf_counter() - t0
            run.state.net = net
            run.info["training_curve"].append(_training_record(t, net))
            run.info["n_train"] = int(Q.shape[0])
            ev = {"event": "train", "iteration": t, "n_points": int(Q.shape[0]), "seconds": secs}
            for key, value in dict(getattr(net, "info", None) or {}).items():
                if key not in ev and isinstance(value, (int, float, str, bool, np.number)):
                    ev[key] = value
            events.append(ev)
            if self.trial(run, t):
                events.append({"event": "switch", "iteration": t})
                return True
            for ctx in run.ctxs:            # back to exact HMC where the trial ended
                ctx.state.exact.set_position(ctx.chain.position)
                ctx.chain = ctx.state.exact
        reason = ("no trial reached switch_fraction * exact acceptance by train_end"
                  if trainings else "no training")
        events.append({"event": "keep_exact", "iteration": run.state.iteration,
                       "reason": reason})
        return False

    def exact_span(self, run, last, record):
        """Exact HMC from exploration iteration run.state.iteration to `last` (rows
        continue); the span at row 0 is the burn-in and adapts (``adapt``)."""
        row0, n = run.state.row, last - run.state.iteration
        run.state.stage[row0:row0 + n] = STAGE_EXPLORE if record else STAGE_BURN_IN

        def worker(ctx):
            if ctx.state.exact is None:
                self._start_exploration(ctx)
            ctx.state.recorder.active = record
            with ctx.phase("warmup"), ctx.phase("explore" if record else "burn_in"):
                if row0 == 0:
                    self.warmup(ctx.state.exact, ctx.warm, ctx, n, key="warmup")
                else:
                    ctx.run_span(ctx.state.exact, ctx.warm, row0, row0 + n, "warmup")

        run.each_chain(worker, n, ("explore" + run.state.cycle_label) if record
                       else "burn-in")
        run.state.row += n
        run.state.iteration = last

    def _start_exploration(self, ctx):
        """The chain's exact exploration chain (NUTS or HMC) through its
        recorder, recording off, from its starting point."""
        st = ctx.state
        st.recorder.active = False
        st.exact = ctx.chain = self.make_chain(ctx.q0, ctx.generator, drive=st.recorder,
                                               judge=st.recorder, **explore_options(self))

    def trial(self, run, t):
        """trial_length iterations of every chain driven by the network; True
        when their acceptance reaches switch_fraction times exact HMC's."""
        hmc_acc = self._hmc_acceptance(run)
        t0 = time.perf_counter()
        row0, n = run.state.row, self.trial_length
        for ctx in run.ctxs:
            ctx.chain = self._trial_chain(ctx.state.exact, run.state.net)

        def worker(ctx):
            with ctx.phase("trial"):
                ctx.run_span(ctx.chain, ctx.warm, row0, row0 + n, "warmup")

        run.state.stage[row0:row0 + n] = STAGE_TRIAL
        run.each_chain(worker, n, f"trial{run.state.cycle_label}",
                       self.potential.thread_safe and run.state.net.thread_safe)
        run.state.row += n
        trial_acc = float(np.mean([c.warm["accept_prob"][row0:run.state.row]
                                   for c in run.ctxs]))
        switch = bool(trial_acc >= self.switch_fraction * hmc_acc)
        run.info["events"].append(
            {"event": "trial", "iteration": t, "acceptance": trial_acc, "hmc_acceptance": hmc_acc,
             "ratio": trial_acc / hmc_acc if hmc_acc > 0 else np.inf, "switch": switch,
             "seconds": time.perf_counter() - t0})
        run.info["hmc_acceptance"], run.info["trial_acceptance"] = hmc_acc, trial_acc
        return switch

    def draw(self, ctx, switched):
        """The kept draws: network-driven after a switch, else exact HMC (or
        NUTS, ``explore``) at the exploration's step size and metric."""
        if ctx.state.exact is None:               # n_warmup == 0 with a given surrogate
            ctx.state.exact = ctx.chain = self.make_chain(ctx.q0, ctx.generator,
                                                    **explore_options(self))
        if switched:
            if ctx.chain.drive is not ctx.run.state.net:
                ctx.chain = self._trial_chain(ctx.chain, ctx.run.state.net)
        else:
            # on the potential itself, not through the exploration's recorder
            chain = self.make_chain(ctx.chain.position, ctx.generator, **explore_options(self))
            chain.step_size = ctx.state.exact.step_size
            chain.set_inv_metric(ctx.state.exact.inv_metric)
            ctx.chain = chain
        with ctx.phase("sample"):
            ctx.run_span(ctx.chain, ctx.main, 0, ctx.run.n_draws, "sample")

    def _training_set(self, run, seed, j):
        Q = np.concatenate([c.state.recorder.points()[0] for c in run.ctxs])
        G = np.concatenate([c.state.recorder.points()[1] for c in run.ctxs])
        if Q.shape[0] < 2:
            raise RuntimeError("the exploration recorded fewer than 2 training points")
        return self._subsample(Q, G, seed, j)

    def _subsample(self, Q, G, seed, j):
        """At most ``max_train`` of the points (Q, G), at random."""
        if self.max_train is not None and Q.shape[0] > self.max_train:
            rng = np.random.default_rng([seed, j, 1])
            idx = np.sort(rng.choice(Q.shape[0], size=self.max_train, replace=False))
            Q, G = Q[idx], G[idx]
        return Q, G

    @staticmethod
    def _hmc_acceptance(run):
        rows = np.flatnonzero(run.state.stage[:run.state.row] == STAGE_EXPLORE)
        if rows.size == 0:
            rows = np.arange(run.state.row)
        if rows.size == 0:
            return 1.0
        return float(np.mean([c.warm["accept_prob"][rows] for c in run.ctxs]))


def _training_record(iteration, net):
    """One training of the gradient network for ``info["training_curve"]``:
    the warm-up iteration it ran at, the training loss and the held-out loss
    per optimiser iteration (standardised units) and the final held-out
    relative gradient error ||g_hat - g|| / ||g||."""
    info = dict(getattr(net, "info", None) or {})
    return {"iteration": int(iteration),
            "loss": np.asarray(info.get("history", []), dtype=float),
            "holdout_loss": np.asarray(info.get("holdout_history", []), dtype=float),
            "holdout_rel_error": info.get("holdout_rel_error"),
            "n_points": int(info.get("n_train", 0)) + int(info.get("n_holdout", 0))}
