"""NNgHMC: HMC driven by a neural network that predicts grad U (Li, Holbrook,
Shahbaba & Baldi 2019, Algorithm 1 and the training schedule of section 3),
with an exact Metropolis test.

Stages
------
1. burn-in: exact HMC (step size and metric adaptation when ``adapt``);
   nothing is recorded.  Under the no-regret rule (the default) the
   adaptation goes on into the exploration, to half the warm-up
   (:meth:`NNGHMC.adaptation_end`).
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

import numpy as np

from ..core._hmc import Chain
from ..core._potential import RecordingPotential
from ..surrogates.gradient_network import affine_start_network, fit_gradient_network
from ._base import check_int, check_potential, check_tree_depth
from ._base import check_flag, check_number
from .hmc import HMC
from .rns_hmc import surrogate_seed
from . import _noregret

__all__ = ["NNGHMC"]

# rows of result.warmup_draws, by stage
STAGE_BURN_IN, STAGE_EXPLORE, STAGE_TRIAL = 0, 1, 2
_STAGE_NAMES = {STAGE_BURN_IN: "burn-in", STAGE_EXPLORE: "explore", STAGE_TRIAL: "trial"}
# under the no-regret rule: the first training (a fraction of n_warmup, when
# train_start is not given), and the trial acceptance, as a fraction of the
# exact HMC window's, at which a network drives as well as the exact gradient
RULE_TRAIN_START = 0.7
AS_GOOD_AS_EXACT = 0.95


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
    train_start : int, float or None
        Exploration iteration (counted from the start of the warm-up, trial
        iterations excluded) of the first training.  None (default): 0.5
        (the paper's schedule), or 0.7 under the no-regret rule, whose
        exact chain adapts until ``2 * train_every`` before it
        (:meth:`adaptation_end`).
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
    start : {"affine", "random"}
        Weights the first training starts from: ``"affine"`` (softplus and
        relu only) the least-squares affine fit of grad U written exactly as
        hidden-unit pairs (:func:`affine_start_network`; passed to the
        trainer as ``init=``), ``"random"`` the trainer's own random start.
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
    explore : {"hmc", "nuts"} or None
        The exact kernel of the burn-in and exploration phases (and, with
        ``no_regret=False``, of the draws when no switch happens): NUTS
        (every leapfrog step of its trajectories is recorded likewise) or
        HMC (the paper's).  None (default): NUTS under the no-regret rule
        (the default), HMC with ``no_regret=False``.
    max_tree_depth : int
        NUTS: at most 2**max_tree_depth - 1 leapfrog steps per transition.
    no_regret : None or bool
        The no-regret rule (:mod:`fastsurrogate.samplers._noregret`), on by
        default (None: on, except in checkpointed runs, as for
        :class:`RNSHMC`): explore with exact NUTS (unless ``explore`` says
        otherwise), adapted over half the warm-up (the burn-in and the
        exploration up to ``2 * train_every`` before the first training,
        at 0.7 of the warm-up by default: :meth:`adaptation_end`); before
        the first training, a cost check (a network gradient against an
        exact one) may end the schedule at once; a trial switches only
        when, on top of the acceptance test, its min ESS per second beats
        the better exact sampler of the exploration spans so far (each half
        NUTS, half exact HMC at NUTS's step size and metric, pooled over the
        spans; ``info["no_regret"]["exact"]``); a trial that misses it with
        a network that drove as well as the exact gradient ends the schedule
        (:meth:`futile_retraining`); when no switch happens the draws come
        from that exact sampler and ``result.info["fallback"]`` says why
        (after a cost or retraining check its step size and metric are
        adapted again over the warm-up left; after failed trials its metric
        is re-estimated from the adaptation's last window and the later
        exploration's NUTS rows).  False: the paper's schedule (exploration
        with HMC by default), bit-reproducible.
    **hmc_options
        step_size, n_steps, random_n_steps, metric, adapt, target_accept,
        max_energy_error, as for :class:`HMC`.

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
    ...                 n_steps=8, n_hidden=30, seed=1, progress=False, no_regret=False)
    >>> [e["event"] for e in res.info["events"]]
    ['train', 'trial', 'switch']
    >>> res.surrogate.dim
    3
    """

    method = "nnghmc"
    # its chains hold the recording potential and trainer state: they stay in this process
    remote_chains = False

    def __init__(self, potential, *, n_hidden=100, blocks=1, activation="softplus",
                 holdout=0.1, burn_in=0.2, train_start=None, train_every=0.1, train_end=None,
                 trial_length=50, switch_fraction=0.9, record_every=1, max_train=None,
                 start="affine", warm_start=True, trainer=None, trainer_options=None,
                 surrogate=None, explore=None, max_tree_depth=10, no_regret=None,
                 **hmc_options):
        if hmc_options.get("transitions") is not None or "inner" in hmc_options:
            raise ValueError("NNgHMC has no surrogate transitions: its gradient network has no "
                             "value V, so the exact test min(1, exp(-U(q') + U(q) + V(q') - "
                             "V(q))) cannot be formed; use RNS-HMC, ARNS-HMC (max_points) or "
                             "VHMC (exact=True)")
        hmc_options.pop("transitions", None)
        super().__init__(potential, **hmc_options)
        self._n_steps_given = "n_steps" in hmc_options
        self._matched_n_steps = None
        self.no_regret, self.explore_with, self._no_regret_defaulted = _noregret.resolve(
            no_regret, explore)
        self.max_tree_depth = check_tree_depth(max_tree_depth)
        self.n_hidden = check_int("n_hidden", n_hidden, 1)
        self.blocks = check_int("blocks", blocks, 1)
        if self.blocks > potential.dim:
            raise ValueError(f"blocks must be <= dim = {potential.dim}, got {blocks}")
        if activation not in ("softplus", "tanh", "relu"):
            raise ValueError(f"activation must be softplus, tanh or relu; got {activation!r}")
        self.activation = activation
        h = check_number("holdout", holdout)
        if not 0.0 <= h < 1.0:
            raise ValueError(f"holdout must be in [0, 1), got {holdout!r}")
        self.holdout = h
        self.burn_in = _check_iterations("burn_in", burn_in)
        self.train_start = (None if train_start is None
                            else _check_iterations("train_start", train_start))
        self.train_every = _check_iterations("train_every", train_every)
        if self.train_every == 0:
            raise ValueError("train_every must be >= 1 iteration (or a fraction > 0), got 0")
        self.train_end = None if train_end is None else _check_iterations("train_end", train_end)
        self.trial_length = check_int("trial_length", trial_length, 1)
        sf = check_number("switch_fraction", switch_fraction)
        if not (0.0 <= sf and np.isfinite(sf)):
            raise ValueError(f"switch_fraction must be >= 0 and finite, got {switch_fraction!r}")
        self.switch_fraction = sf
        self.record_every = check_int("record_every", record_every, 1)
        self.max_train = None if max_train is None else check_int("max_train", max_train, 2)
        if start not in ("affine", "random"):
            raise ValueError(f'start must be "affine" or "random", got {start!r}')
        if start == "affine" and activation == "tanh":
            start = "random"       # tanh(t) - tanh(-t) is not linear: no exact affine start
        self.start = start
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
    def checkpoint_support(self):
        if self.no_regret:
            return ("no_regret=True decides on measured wall-clock time, which a resumed run "
                    "cannot replay (pass no_regret=False)")
        return None

    def schedule(self, n_warmup):
        """(burn_in, train_start, train_every, train_end) in iterations for this n_warmup."""
        burn = min(_iterations("burn_in", self.burn_in, n_warmup), n_warmup)
        start = _iterations("train_start", self.train_start if self.train_start is not None
                            else (RULE_TRAIN_START if self.no_regret else 0.5), n_warmup)
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
        if self.trainer is None and progress is not None:
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
                     step_size=chain.step_size, n_steps=self._matched_n_steps or self.n_steps,
                     random_n_steps=self.random_n_steps, inv_metric=chain.inv_metric,
                     max_energy_error=self.max_energy_error)

    # -- the algorithm -----------------------------------------------------------
    default_chains = 1

    def check_sizes(self, n_draws, n_warmup):
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
        iteration, the held-out relative gradient error).  While it runs, ``run.row`` is the next warm-up
        row, ``run.iteration`` the exploration iteration reached and
        ``run.net`` the latest network.
        """
        burn, start, every, end = self.schedule(run.n_warmup)
        trainings = [] if self.surrogate is not None else list(range(start, end + 1, every))
        seed = surrogate_seed(run.generators[0])
        # under the rule a trial that would switch runs up to MAX_TRIAL_ROUNDS
        # rounds of trial_length (see trial)
        rounds = _noregret.MAX_TRIAL_ROUNDS if self.no_regret else 1
        rows = run.n_warmup + self.trial_length * len(trainings) * rounds
        run.start(warm_rows=rows)
        capacity = max((run.n_warmup - burn) * (self.n_steps + 1) // self.record_every + 8, 8)
        for ctx in run.ctxs:
            ctx.recorder = ctx.track(RecordingPotential(self.potential, capacity,
                                                        every=self.record_every))
            ctx.exact = None
        run.row, run.iteration, run.net, run.stage = 0, 0, self.surrogate, np.zeros(rows, np.int8)
        run.info.update(events=[], switched=False, switch_iteration=None, n_train=0,
                        hmc_acceptance=None, trial_acceptance=None, training_curve=[])
        adapt_end = (burn if self.surrogate is not None
                     else self.adaptation_end(burn, start, every))
        run.adapt_end = adapt_end
        try:
            if adapt_end > burn:        # 1. burn-in, not recorded, and under the rule the
                self.adapt_span(run, burn, adapt_end)   # exploration's first rows: one adaptation
            elif burn > 0:                                      # 1. burn-in, not recorded
                self.exact_span(run, burn, record=False)
            for ctx in run.ctxs:            # (a fallback re-estimates the metric there)
                ctx.adapted_from = adapt_end if self.no_regret else None
            if self.surrogate is not None:
                if run.n_warmup > burn:
                    self.exact_span(run, run.n_warmup, record=False)
                run.info["events"].append({"event": "given_surrogate",
                                           "iteration": run.iteration})
                switched = True
            else:                                               # 2-3. explore, train, trial
                switched = self.explore_and_train(run, trainings, seed)
            run.info["switched"] = switched
            run.info["switch_iteration"] = run.iteration if switched else None
            for ctx in run.ctxs:
                ctx.recorder.active = False
            parallel = self.potential.thread_safe and (not switched or run.net.thread_safe)
            run.each_chain(lambda ctx: self.draw(ctx, switched), run.n_draws,
                           self.method if switched else "exact", parallel)   # 4. sample
            if not switched and run.info.get("fallback") is not None:
                run.info["fallback"]["metric_refit"] = [getattr(c, "refit", None)
                                                        for c in run.ctxs]
        finally:
            for ctx in run.ctxs:
                ctx.recorder.active = False

    def finish(self, run):
        if not hasattr(run, "stage"):
            return
        rows = min(c.done.get("warmup", 0) for c in run.ctxs)
        run.info["warmup_stage"] = run.stage[:rows].copy()
        run.info["stage_names"] = dict(_STAGE_NAMES)
        run.surrogate = run.net

    # -- stages --------------------------------------------------------------------
    def explore_and_train(self, run, trainings, seed):
        """Exact HMC recording every leapfrog step; at each scheduled iteration,
        train on every point so far and trial the network.  True on a switch."""
        events = run.info["events"]
        for j, t in enumerate(trainings):
            # the progress bars say which of the (at most) len(trainings)
            # explore / train / trial cycles runs
            run.cycle_label = f" ({j + 1} of <= {len(trainings)})"
            if t > run.iteration:
                self.exact_span(run, t, record=True)
            if self.no_regret:
                # exact HMC only with a margin (SWITCH_FACTOR) over NUTS: on the
                # simulated regression HMC chosen at 1.01-1.29x NUTS's rate in
                # windows of 100-350 rows mixed at about half NUTS's rate per
                # draw (0.52-0.62 against 1.1-1.46), and its fallbacks ran
                # 0.26-0.60x NUTS's whole-run rate
                exact = _noregret.choose_exact(run.ctxs, margin=_noregret.SWITCH_FACTOR)
                if exact is not None:
                    run.info.setdefault("no_regret", {})["exact"] = exact
            Q, G = self._training_set(run, seed, j) if self.no_regret else (None, None)
            if self.no_regret:
                record = (self.cost_check(run, Q) if j == 0 else
                          self.retraining_check(run, Q.shape[0], last))
                if record is not None:
                    return self._fall_back_early(run, record, self.readapt)
            else:
                Q, G = self._training_set(run, seed, j)
            t0 = time.perf_counter()
            desc = f"train (gradient network {j + 1} of <= {len(trainings)})"
            with run.phase("train"), run.training_progress(desc) as progress:
                net = self.train(Q, G, int(np.random.SeedSequence([seed, j])
                                           .generate_state(1)[0] >> 1), run.net, progress)
            secs = time.perf_counter() - t0
            last = (secs, int(Q.shape[0]))
            run.net = net
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
                ctx.exact.set_position(ctx.chain.position)
                ctx.chain = ctx.exact
            record = self.futile_retraining(run, events[-1]) if self.no_regret else None
            if record is not None:
                return self._fall_back_early(run, record, self.continue_exact)
        reason = ("no trial reached switch_fraction * exact acceptance by train_end"
                  if trainings else "no training")
        if self.no_regret and trainings:
            reason = ("no trial reached switch_fraction * exact acceptance and "
                      f"{_noregret.SWITCH_FACTOR:g}x the exact sampler's min ESS per second by train_end")
            trials = [e.get("no_regret") for e in events if e["event"] == "trial"]
            run.info["fallback"] = {"reason": "trial: " + reason, "measured": trials}
        events.append({"event": "keep_exact", "iteration": run.iteration, "reason": reason})
        return False

    @staticmethod
    def _fall_back_early(run, record, warm_up_left):
        """A fallback before the schedule's end: ``record`` in ``info``, a
        keep_exact event, then ``warm_up_left(run)``; False (no switch)."""
        run.info["fallback"] = record
        run.info["events"].append({"event": "keep_exact", "iteration": run.iteration,
                                   "reason": record["reason"]})
        warm_up_left(run)
        return False

    def futile_retraining(self, run, event):
        """After a failed trial under the rule: the fallback record when no
        retraining can make the next trial pass, else None.  That is when the
        network already drove as well as the exact gradient (the trial's
        acceptance at least AS_GOOD_AS_EXACT times the timed window's exact
        HMC, at the same step size and metric) and the trial still missed
        the rate: the network-driven chain is then HMC with a random path
        length as the exact one is, a better network cannot make it mix
        better, and every retraining and trial adds to the seconds paid.
        The warm-up left runs the exact NUTS chain (:meth:`continue_exact`).

        Why: on the simulated regression (N = 100000, d = 50, 1000 + 1000)
        the network chain mixed as exact HMC did from the same state with
        its settings (min ESS 0.51 and 0.52 per draw, acceptance 0.85 both),
        at about half NUTS's rate per draw, and NNgHMC retrained up to six
        times (a fallback at 0.64x NUTS's whole-run rate)."""
        measured = event.get("no_regret") or {}
        if event.get("switch") or measured.get("check") != "rate":
            return None
        rows = [c.exact_windows["hmc"][0] for c in run.ctxs
                if "hmc" in (getattr(c, "exact_windows", None) or {})]
        if len(rows) != len(run.ctxs):
            return None
        hmc_acc = float(np.mean([c.warm["accept_prob"][r] for c, r in zip(run.ctxs, rows)]))
        trial_acc = float(event["acceptance"])
        if not trial_acc >= AS_GOOD_AS_EXACT * hmc_acc:
            return None
        measured = dict(measured, exact_hmc_acceptance=hmc_acc)
        return {"reason": "trial: the network drove as well as the exact gradient (trial "
                          f"acceptance {trial_acc:.3f}, exact HMC's {hmc_acc:.3f}) and the "
                          "surrogate chain still missed the rate: retraining cannot pay",
                "measured": measured}

    def retraining_check(self, run, n_points, last):
        """Before a retraining (a trial failed): the budget check again, with
        the training time predicted from the last one measured (seconds x
        points ratio) against the largest saving left.  None to go on, or
        the fallback record.  Without it NNgHMC retrained a network whose
        saving could never repay it (posteriordb garch11: two trainings of
        2.1 and 2.6 s for a largest saving of 0.93 s)."""
        cost = (run.info.get("no_regret") or {}).get("cost") or {}
        saving = cost.get("largest_saving_seconds")
        if saving is None:
            return None
        secs, points = last
        predicted = secs * n_points / max(points, 1)
        cost = dict(cost, predicted_retraining_seconds=predicted)
        run.info["no_regret"]["cost"] = cost
        if saving >= predicted:
            return None
        return {"reason": "budget: the largest possible saving over the kept draws "
                          f"({saving:.3g} s) is below the predicted retraining cost "
                          f"({predicted:.3g} s, from the last training's {secs:.3g} s)",
                "measured": cost}

    def cost_check(self, run, Q=None):
        """Rule 1 of the no-regret default on chain 0's exploration: None, or
        the fallback record.  ``Q`` (n, dim): the training points, for the
        built-in trainer's predicted training time
        (``_noregret.gradient_training_seconds``)."""
        ctx = run.ctxs[0]
        net = _noregret.untrained_network("mlp", self.potential.dim, self.n_hidden * self.blocks,
                                          self.activation)
        self._matched_n_steps = None
        if self.explore_with == "nuts" and not self._n_steps_given:
            # the network-driven chain travels as far as NUTS (see _noregret.matched_steps)
            mean = _noregret.exploration_steps(run.ctxs)
            if mean is not None:
                self._matched_n_steps = _noregret.matched_steps(mean, self.random_n_steps)
        record, measured = _noregret.cost_check(
            self.potential, net, ctx.chain.position, _noregret.exploration_steps([ctx]) or 1.0,
            _noregret.steps_per_iteration(self._matched_n_steps or self.n_steps,
                                          self.random_n_steps),
            n_draws=run.n_draws, n_points=sum(c.recorder.points()[0].shape[0] for c in run.ctxs),
            s=1000, trial_length=self.trial_length, train_seconds=self._training_prediction(Q),
            exact_name=getattr(ctx, "exact_name", "NUTS"))
        run.info.setdefault("no_regret", {}).update(cost=measured,
                                                    surrogate_n_steps=self._matched_n_steps)
        return record

    def _training_prediction(self, Q):
        """Predicted seconds of the built-in trainer on Q; None (the generic
        proxy) for a user's trainer."""
        if Q is None or self.trainer is not None or Q.shape[0] < 2:
            return None
        return _noregret.gradient_training_seconds(
            Q, self.n_hidden, self.blocks, self.activation,
            self.trainer_options.get("max_iter", 500), self.holdout)

    def exact_span(self, run, last, record):
        """Exact HMC from exploration iteration run.iteration to `last` (rows
        continue); the span at row 0 is the burn-in and adapts (``adapt``)."""
        row0, n = run.row, last - run.iteration
        run.stage[row0:row0 + n] = STAGE_EXPLORE if record else STAGE_BURN_IN

        def worker(ctx):
            if ctx.exact is None:
                self._start_exploration(ctx)
            ctx.recorder.active = record
            with ctx.phase("warmup"), ctx.phase("explore" if record else "burn_in"):
                t0 = time.perf_counter()
                if row0 == 0:
                    self.warmup(ctx.exact, ctx.warm, ctx, n, key="warmup")
                elif record and self.no_regret and self.explore_with == "nuts":
                    # half NUTS, half exact HMC at NUTS's step size and metric:
                    # the rule measures against the better (_noregret.exact_windows)
                    # (pooled with the earlier spans': one span between
                    # trainings is 50 iterations, 25 of them NUTS)
                    last = _noregret.exact_windows(ctx, ctx.exact, ctx.warm, row0, row0 + n,
                                                   "warmup", self._exact_hmc_options(),
                                                   pool=True)
                    if last is not ctx.exact:
                        ctx.exact.set_position(last.position)
                    ctx.chain = ctx.exact
                    return
                else:
                    ctx.run_span(ctx.exact, ctx.warm, row0, row0 + n, "warmup")
                if record:
                    # the spans after the burn-in pool, as above; not the
                    # span from row 0 (burn_in=0), which adapted
                    before = getattr(ctx, "exact_rows", None) if row0 > 0 else None
                    if before is not None and before[0][0] == 0:
                        before = None
                    ctx.exact_rows = _noregret.pooled_window(before, row0, row0 + n,
                                                             time.perf_counter() - t0, None)[:2]
                    ctx.exact_windows = None

        run.each_chain(worker, n, ("explore" + getattr(run, "cycle_label", "")) if record
                       else "burn-in")
        run.row += n
        run.iteration = last

    def _start_exploration(self, ctx):
        """The chain's exact exploration chain (NUTS or HMC) through its
        recorder, recording off, from its starting point."""
        ctx.recorder.active = False
        ctx.exact = ctx.chain = self.make_chain(ctx.q0, ctx.generator, drive=ctx.recorder,
                                                judge=ctx.recorder,
                                                **_noregret.explore_options(self))

    def adaptation_end(self, burn, start, every):
        """Warm-up iterations the exact chain adapts over (Stan's windows):
        the burn-in, and under the no-regret rule (with ``adapt`` and an
        adapted metric) the exploration up to ``2 * every`` iterations
        before the first training too, recorded as exploration
        (:meth:`adapt_span`); those last ``2 * every`` iterations, half NUTS
        and half HMC, are the first timed window.  With the defaults: 500
        of 1000 iterations, the first training at 700.

        Why: the rule compares the network with the exploration's exact
        chains and falls back to them.  Adapted over the burn-in alone (a
        fifth of the warm-up, whose last metric window is 50 draws of a
        1000-iteration warm-up), NUTS mixed at 0.47-0.84 effective samples
        per row in the timed windows, against 0.96-1.14 per row over
        windows of the same lengths of a NUTS run adapted over 1000
        (simulated regression, N = 100000, d = 50), and the rule switched
        at predicted whole-run ratios of 1.50x and 1.46x in runs that ended
        at 0.47x and 0.86x NUTS's (README, No-regret item 13)."""
        adapt_metric = isinstance(self.metric, str) and self.metric != "unit"
        if not (self.no_regret and self.adapt and adapt_metric and burn > 0):
            return burn
        return max(burn, start - 2 * every)

    def adapt_span(self, run, burn, last):
        """The burn-in (rows 0 .. burn, not recorded) and the exploration's
        rows burn .. last (recorded) as ONE adaptation of the exact chain
        (Stan's windows over ``last`` iterations; :meth:`adaptation_end`)."""
        run.stage[:burn] = STAGE_BURN_IN
        run.stage[burn:last] = STAGE_EXPLORE

        def worker(ctx):
            self._start_exploration(ctx)

            def span(chain, trace, a, b, key):
                # rows before `burn` are the burn-in (not recorded), the rest
                # exploration; a window of the adaptation may straddle the two
                if a < burn:
                    with ctx.phase("burn_in"):
                        ctx.recorder.active = False
                        i = ctx.run_span(chain, trace, a, min(b, burn), key)
                    if b <= burn or i < burn:
                        return i
                    a = burn
                with ctx.phase("explore"):
                    ctx.recorder.active = True
                    return ctx.run_span(chain, trace, a, b, key)

            with ctx.phase("warmup"):
                self.warmup(ctx.exact, ctx.warm, ctx, last, key="warmup", span=span)
            ctx.recorder.active = False

        run.each_chain(worker, last, "burn-in and adaptation")
        run.row += last
        run.iteration = last

    def continue_exact(self, run):
        """After a fallback before the schedule's end, when the exact chain
        has adapted over half the warm-up (under the rule:
        :meth:`adaptation_end`): the warm-up left runs the exploration's NUTS
        chain (not adapted, not recorded), and its rows join the re-estimate
        of the metric before the kept draws (:meth:`draw`: the adaptation's
        last window and every later NUTS row), as in a plain NUTS warm-up
        whose last window is that long.  A second adaptation over the
        warm-up left (:meth:`readapt`) would start again from Stan's short
        windows: on posteriordb's sblrc-blr (1000 + 1000) its fallbacks had
        min ESS 80-106 against NUTS's 222-310."""
        n = run.n_warmup - run.iteration
        if n <= 0:
            return
        row0 = run.row
        run.stage[row0:row0 + n] = STAGE_EXPLORE

        def worker(ctx):
            ctx.recorder.active = False
            if ctx.chain is not ctx.exact:
                ctx.exact.set_position(ctx.chain.position)
            ctx.chain = ctx.exact
            with ctx.phase("warmup"), ctx.phase("explore"):
                ctx.run_span(ctx.exact, ctx.warm, row0, row0 + n, "warmup")

        run.each_chain(worker, n, "exact (warm-up left)")
        run.row += n
        run.iteration = run.n_warmup

    def readapt(self, run):
        """After a fallback at the cost check: the exploration iterations the
        schedule would still have run become a second adaptation of the exact
        chain (Stan's windows: step size and metric), which will draw the
        kept draws; the burn-in alone (burn_in of n_warmup) adapts too little
        for them (measured, simulated regression, 500 + 500: the fallback's
        min ESS 228 against NUTS's 498).  Under the rule, whose exact chain
        has already adapted over half the warm-up, the warm-up left runs it
        on instead (:meth:`continue_exact`)."""
        if (getattr(run, "adapt_end", 0) > self.schedule(run.n_warmup)[0]
                and self.explore_with == "nuts"):
            self.continue_exact(run)
            return
        n = run.n_warmup - run.iteration
        if n <= 0 or not self.adapt:
            return
        row0 = run.row
        run.stage[row0:row0 + n] = STAGE_BURN_IN

        def worker(ctx):
            ctx.recorder.active = False
            ctx.adapted_from = None         # adapted again: no refit (draw)
            with ctx.phase("warmup"), ctx.phase("burn_in"):
                self.warmup(ctx.exact, ctx.warm, ctx, n, key="warmup", offset=row0)
            ctx.chain = ctx.exact

        run.each_chain(worker, n, "burn-in")
        run.row += n
        run.iteration = run.n_warmup

    def trial(self, run, t):
        """trial_length iterations of every chain driven by the network; True
        when their acceptance reaches switch_fraction times exact HMC's (and,
        under the no-regret rule, when the trial's verdict is a switch: a
        switch verdict is confirmed over more rounds of trial_length, up to
        the exact window's time, as for RNS-HMC; measured on the simulated
        regression: a 50-iteration trial put the network chain's ESS per
        iteration at 0.88x NUTS's, the kept draws gave 0.56x)."""
        hmc_acc = self._hmc_acceptance(run)
        t0 = time.perf_counter()
        row0, n = run.row, self.trial_length
        for ctx in run.ctxs:
            ctx.chain = self._trial_chain(ctx.exact, run.net)
            ctx.trial_seconds = 0.0

        def worker(ctx):
            with ctx.phase("trial"):
                t1 = time.perf_counter()
                ctx.run_span(ctx.chain, ctx.warm, run.row, run.row + n, "warmup")
                ctx.trial_seconds += time.perf_counter() - t1

        rounds = 0
        while True:
            run.stage[run.row:run.row + n] = STAGE_TRIAL
            run.each_chain(worker, n, f"trial{getattr(run, 'cycle_label', '')}, round "
                           f"{rounds + 1}", self.potential.thread_safe and run.net.thread_safe)
            run.row += n
            rounds += 1
            trial_acc = float(np.mean([c.warm["accept_prob"][row0:run.row] for c in run.ctxs]))
            switch = bool(trial_acc >= self.switch_fraction * hmc_acc)
            event = {"event": "trial", "iteration": t, "acceptance": trial_acc,
                     "hmc_acceptance": hmc_acc,
                     "ratio": trial_acc / hmc_acc if hmc_acc > 0 else np.inf}
            if not self.no_regret:
                break
            ctxs = run.ctxs
            fast, event["no_regret"] = _noregret.trial_verdict(
                *_noregret.exact_sample(ctxs),
                np.stack([c.warm["draws"][row0:run.row] for c in ctxs]),
                float(np.mean([c.trial_seconds for c in ctxs])), trial_acc,
                ess_floor=min(_noregret.ESS_FLOOR, 0.2 * n * rounds * len(ctxs)),
                paid_seconds=_noregret.paid_seconds(run), n_draws=run.n_draws,
                exact_name=getattr(ctxs[0], "exact_name", "NUTS"))
            event["no_regret"]["rounds"] = rounds
            accepted, switch = switch, switch and fast
            # a failed acceptance check is final; a switch is confirmed and a
            # trial shorter than the exact window extended as for RNS-HMC
            # (_noregret.extend_trial); a near miss is not (the next
            # training brings another trial)
            if not (accepted and _noregret.extend_trial(event["no_regret"], rounds, switch,
                                                        near_miss=False)):
                break
        event.update(switch=switch, seconds=time.perf_counter() - t0)
        run.info["events"].append(event)
        run.info["hmc_acceptance"], run.info["trial_acceptance"] = hmc_acc, trial_acc
        return switch

    def draw(self, ctx, switched):
        """The kept draws: network-driven after a switch, else exact HMC."""
        if ctx.exact is None:               # n_warmup == 0 with a given surrogate
            ctx.exact = ctx.chain = self.make_chain(ctx.q0, ctx.generator,
                                                    **_noregret.explore_options(self))
        refit = None
        if switched:
            if ctx.chain.drive is not ctx.run.net:
                ctx.chain = self._trial_chain(ctx.chain, ctx.run.net)
        else:
            # the better exact sampler of the no-regret window (NUTS or HMC;
            # _noregret.choose_exact), at the exploration's step size and metric
            options = ({} if getattr(ctx, "exact_name", None) == "HMC"
                       else _noregret.explore_options(self))
            chain = self.make_chain(ctx.chain.position, ctx.generator, **options)
            chain.step_size = ctx.exact.step_size
            chain.set_inv_metric(ctx.exact.inv_metric)
            ctx.chain = chain
            # the burn-in (burn_in of n_warmup) adapted the metric on few draws:
            # re-estimate it with the exploration's NUTS rows (its exact HMC
            # rows, tree depth 0, mix worse; all of them with an HMC exploration)
            run = ctx.run
            later = np.flatnonzero(run.stage[:run.row] == STAGE_EXPLORE)
            if self.explore_with == "nuts":
                later = later[ctx.warm["tree_depth"][later] >= 1]
            refit = ctx.refit = _noregret.refit_fallback_metric(self, ctx, later)
        with ctx.phase("sample"):       # (without a refit: one plain span)
            retune = _noregret.draw_fallback(self, ctx, refit)
        if retune is not None:
            ctx.refit = dict(refit, step_retune=retune)

    def _training_set(self, run, seed, j):
        Q = np.concatenate([c.recorder.points()[0] for c in run.ctxs])
        G = np.concatenate([c.recorder.points()[1] for c in run.ctxs])
        if Q.shape[0] < 2:
            raise RuntimeError("the exploration recorded fewer than 2 training points")
        if self.max_train is not None and Q.shape[0] > self.max_train:
            rng = np.random.default_rng([seed, j, 1])
            idx = np.sort(rng.choice(Q.shape[0], size=self.max_train, replace=False))
            Q, G = Q[idx], G[idx]
        return Q, G

    @staticmethod
    def _hmc_acceptance(run):
        rows = np.flatnonzero(run.stage[:run.row] == STAGE_EXPLORE)
        adapted = rows[rows >= getattr(run, "adapt_end", 0)]    # after the adaptation
        if adapted.size:
            rows = adapted
        if rows.size == 0:
            rows = np.arange(run.row)
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
