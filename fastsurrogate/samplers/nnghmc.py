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
from types import SimpleNamespace

import numpy as np

from ..core._hmc import Chain, new_trace
from ..core._potential import RecordingPotential
from ._base import (chain_generators, initial_points, run_chains, check_int, check_positive)
from .hmc import HMC
from .rns_hmc import surrogate_seed

__all__ = ["NNGHMC", "affine_start_network"]

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


def affine_start_network(Q, G, n_hidden, blocks=1, activation="softplus", ridge=1e-6,
                         seed=None):
    """A gradient network equal to the least-squares affine fit of G on Q.

    A starting point for backpropagation: in standardised coordinates
    (inputs and outputs by the mean and sd of Q and G) the affine map of each
    output block, A_b = U S V^T, is written exactly with pairs of hidden units,
    since softplus(t) - softplus(-t) = t (and relu(t) - relu(-t) = t): unit
    pair k has input weights +-sqrt(s_k) v_k and output weights
    +-sqrt(s_k) u_k.  A block with h units keeps the h // 2 largest singular
    values; its remaining units get Glorot-uniform input weights and zero
    output weights.  Near a Gaussian-like posterior grad U is nearly affine,
    so training starts close to the answer (200-d logistic regression of the
    NNgHMC paper, 8 blocks of 50 units, 6000 points: held-out relative error
    1.4 % before training, 0.95 % after 104 L-BFGS iterations in 14 s, against
    1.1 % after 1600 iterations in 135 s from a random start).

    Parameters
    ----------
    Q, G : ndarray (N, dim)
        Positions and grad U there.
    n_hidden : int
        Hidden units per block.
    blocks : int
        Output blocks (sizes as :func:`fastsurrogate.surrogates._mlp.split_blocks`).
    activation : {"softplus", "relu"}
    ridge : float
        Relative ridge of the least squares (times N, standardised inputs).
    seed : None, int or Generator
        For the input weights of the units beyond the affine pairs.

    Returns
    -------
    GradientNetwork
    """
    from ..surrogates._mlp import GradientNetwork, split_blocks
    if activation not in ("softplus", "relu"):
        raise ValueError(f"an affine start needs softplus or relu units, got {activation!r}")
    Q = np.asarray(Q, dtype=np.float64)
    G = np.asarray(G, dtype=np.float64)
    n, d = Q.shape
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    shift, scale = Q.mean(axis=0), Q.std(axis=0)
    out_shift, out_scale = G.mean(axis=0), G.std(axis=0)
    scale[~(scale > 0)] = 1.0
    out_scale[~(out_scale > 0)] = 1.0
    X = (Q - shift) / scale
    T = (G - out_shift) / out_scale
    A = np.linalg.solve(X.T @ X + ridge * n * np.eye(d), X.T @ T).T        # (d_out, d_in)
    W1, W2 = [], []
    first = 0
    for m in split_blocks(d, blocks):
        U, s, Vt = np.linalg.svd(A[first:first + m], full_matrices=False)
        first += m
        r = min(s.shape[0], n_hidden // 2)
        c = np.sqrt(s[:r])
        w = c[:, None] * Vt[:r]
        v = U[:, :r] * c[None, :]
        extra = n_hidden - 2 * r
        a = np.sqrt(6.0 / (d + n_hidden))
        W1.append(np.vstack([w, -w, rng.uniform(-a, a, (extra, d))]))
        W2.append(np.hstack([v, -v, np.zeros((m, extra))]))
    H = sum(w.shape[0] for w in W1)
    return GradientNetwork(np.vstack(W1), np.zeros(H), W2, np.zeros(d), activation,
                           shift, scale, out_shift, out_scale)


def _default_trainer(Q, G, **options):
    from ..surrogates.gradient_network import fit_gradient_network
    return fit_gradient_network(Q, G, **options)


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
        iterations excluded) of the first training.
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
    **hmc_options
        step_size, n_steps, random_n_steps, metric, adapt, target_accept,
        max_energy_error, as for :class:`HMC`.

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

    def __init__(self, potential, *, n_hidden=100, blocks=1, activation="softplus",
                 holdout=0.1, burn_in=0.2, train_start=0.5, train_every=0.1, train_end=None,
                 trial_length=50, switch_fraction=0.9, record_every=1, max_train=None,
                 start="affine", warm_start=True, trainer=None, trainer_options=None,
                 surrogate=None, **hmc_options):
        super().__init__(potential, **hmc_options)
        self.n_hidden = check_int("n_hidden", n_hidden, 1)
        self.blocks = check_int("blocks", blocks, 1)
        if self.blocks > potential.dim:
            raise ValueError(f"blocks must be <= dim = {potential.dim}, got {blocks}")
        if activation not in ("softplus", "tanh", "relu"):
            raise ValueError(f"activation must be softplus, tanh or relu; got {activation!r}")
        self.activation = activation
        h = float(holdout)
        if not 0.0 <= h < 1.0:
            raise ValueError(f"holdout must be in [0, 1), got {holdout!r}")
        self.holdout = h
        self.burn_in = _check_iterations("burn_in", burn_in)
        self.train_start = _check_iterations("train_start", train_start)
        self.train_every = _check_iterations("train_every", train_every)
        self.train_end = None if train_end is None else _check_iterations("train_end", train_end)
        self.trial_length = check_int("trial_length", trial_length, 1)
        sf = float(switch_fraction)
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
        self.warm_start = bool(warm_start)
        if trainer is not None and not callable(trainer):
            raise TypeError(f"trainer must be callable, got {type(trainer).__name__}")
        self.trainer = trainer
        if trainer_options is not None and not isinstance(trainer_options, dict):
            raise TypeError("trainer_options must be a dict")
        self.trainer_options = dict(trainer_options or {})
        if surrogate is not None:
            self._check_potential(surrogate)
            if surrogate.dim != potential.dim:
                raise ValueError(f"surrogate has dim {surrogate.dim}; the potential has {potential.dim}")
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

    def train(self, Q, G, seed, previous=None):
        """Fit the gradient network on (Q, G) (from ``previous`` with warm starts)."""
        trainer = self.trainer if self.trainer is not None else _default_trainer
        opts = dict(n_hidden=self.n_hidden, blocks=self.blocks, activation=self.activation,
                    holdout=self.holdout, seed=seed)
        if self.warm_start and previous is not None:
            opts["init"] = previous
        elif self.start == "affine":
            opts["init"] = affine_start_network(Q, G, self.n_hidden, self.blocks,
                                                self.activation, seed=seed)
        opts.update(self.trainer_options)
        net = trainer(Q, G, **opts)
        self._check_potential(net)
        if net.dim != self.potential.dim:
            raise ValueError(f"the trainer returned a network of dim {net.dim}; "
                             f"the potential has dim {self.potential.dim}")
        return net

    def _trial_chain(self, chain, net):
        return Chain(net, self.potential, chain.position, chain.generator,
                     step_size=chain.step_size, n_steps=self.n_steps,
                     random_n_steps=self.random_n_steps, inv_metric=chain.inv_metric,
                     max_energy_error=self.max_energy_error)

    # -- the public entry point -------------------------------------------------
    def sample(self, n_draws=1000, n_warmup=1000, *, chains=1, seed=None, init=None,
               progress=True, keep_warmup=True):
        """Burn in, explore and train on the schedule, then draw n_draws.

        Parameters are those of :meth:`HMC.sample`; ``n_warmup`` is the
        exploration budget (exact HMC iterations, trials not counted).

        Returns
        -------
        Result
            ``draws`` (chains, n_draws, dim) from the network-driven chain
            (or from exact HMC when no trial succeeded); ``surrogate`` the
            last trained network; ``timings`` the seconds of ``burn_in``,
            ``explore`` (together ``warmup``), ``train``, ``trial`` and
            ``sample``; ``info["events"]`` the
            schedule's decisions (``train``, ``trial``, then ``switch`` or
            ``keep_exact``), ``info["switched"]``, ``info["switch_iteration"]``,
            ``info["n_train"]``, ``info["hmc_acceptance"]``,
            ``info["trial_acceptance"]`` and ``info["warmup_stage"]`` (one
            code per warm-up row: 0 burn-in, 1 explore, 2 trial).
        """
        n_draws = check_int("n_draws", n_draws, 0)
        n_warmup = check_int("n_warmup", n_warmup, 0)
        chains = check_int("chains", chains, 1)
        burn, start, every, end = self.schedule(n_warmup)
        if self.surrogate is None and start > end:
            raise ValueError(
                f"the schedule has no training: train_start = {start} iterations (at least "
                f"burn_in + 1 = {burn + 1}) is after train_end = {end}; increase n_warmup "
                f"(now {n_warmup}) or move train_start / burn_in")
        trainings = [] if self.surrogate is not None else list(range(start, end + 1, every))
        gens = chain_generators(seed, chains)
        net_seed = surrogate_seed(gens[0])
        q0 = initial_points(self.potential, init, gens)
        d = self.potential.dim
        steps_per_iter = self.n_steps + 1
        capacity = max((n_warmup - burn) * steps_per_iter // self.record_every + 8, 8)
        recorders = [RecordingPotential(self.potential, capacity, every=self.record_every)
                     for _ in range(chains)]
        n_rows = n_warmup + self.trial_length * len(trainings)
        warm = [new_trace(n_rows, d) for _ in range(chains)]
        main = [new_trace(n_draws, d) for _ in range(chains)]
        stage = np.zeros(n_rows, dtype=np.int8)
        exact = [None] * chains           # exact chains (recorder drives and judges)
        current = [None] * chains         # the chain each worker continues
        acc = [SimpleNamespace(done={"warmup": 0, "sample": 0}, timings={}) for _ in range(chains)]
        events = []
        info = {"events": events, "switched": False, "switch_iteration": None, "n_train": 0,
                "hmc_acceptance": None, "trial_acceptance": None}
        parallel = self.potential.thread_safe
        state = SimpleNamespace(row=0, iteration=0, net=self.surrogate, switched=False)

        def absorb(ctxs, key):
            for a, c in zip(acc, ctxs):
                for k, v in c.timings.items():
                    a.timings[k] = a.timings.get(k, 0.0) + v
                if key in c.done:
                    a.done[key] = c.done[key]

        def run(worker, n_iter, key, desc, par):
            """Run one stage on every chain; returns True when the run must stop."""
            _, ctxs, interrupted, error = run_chains(worker, chains, chains * n_iter, par,
                                                     progress, desc)
            absorb(ctxs, key)
            if interrupted or error is not None:
                state.stop = (interrupted, error)
                return True
            return False

        def exact_span(first, last, record):
            """Exact HMC for exploration iterations first..last-1 (rows continue).

            The span starting at iteration 0 is the burn-in: it adapts the
            step size (and metric) when ``adapt``."""
            row0 = state.row
            n = last - first

            def worker(ctx):
                k = ctx.index
                if exact[k] is None:
                    recorders[k].active = False
                    exact[k] = self.make_chain(q0[k], gens[k], drive=recorders[k],
                                               judge=recorders[k])
                    current[k] = exact[k]
                chain = exact[k]
                recorders[k].active = record
                with ctx.phase("warmup"), ctx.phase("explore" if record else "burn_in"):
                    if first == 0 and row0 == 0:
                        self.warmup(chain, warm[k], ctx, n, key="warmup")
                    else:
                        ctx.run_span(chain, warm[k], row0, row0 + n, "warmup")
                return chain

            stopped = run(worker, n, "warmup", "explore" if record else "burn-in", parallel)
            stage[row0:row0 + n] = STAGE_EXPLORE if record else STAGE_BURN_IN
            state.row += n
            state.iteration = last
            return stopped

        def trial_span(net):
            row0 = state.row
            n = self.trial_length

            def worker(ctx):
                k = ctx.index
                chain = self._trial_chain(exact[k], net)
                current[k] = chain
                with ctx.phase("trial"):
                    ctx.run_span(chain, warm[k], row0, row0 + n, "warmup")
                return chain

            stopped = run(worker, n, "warmup", "trial", parallel and net.thread_safe)
            stage[row0:row0 + n] = STAGE_TRIAL
            state.row += n
            return stopped

        state.stop = None
        try:
            # 1. burn-in (adaptation), not recorded
            if burn > 0 and exact_span(0, burn, record=False):
                return self._finish(warm, main, acc, exact, current, state, stage, info,
                                    keep_warmup)
            if self.surrogate is not None:
                if n_warmup > burn and exact_span(burn, n_warmup, record=False):
                    return self._finish(warm, main, acc, exact, current, state, stage, info,
                                        keep_warmup)
                events.append({"event": "given_surrogate", "iteration": state.iteration})
                state.switched = True
            else:
                # 2-3. explore and the training schedule
                for j, t in enumerate(trainings):
                    if t > state.iteration and exact_span(state.iteration, t, record=True):
                        return self._finish(warm, main, acc, exact, current, state, stage, info,
                                            keep_warmup)
                    Q, G = self._training_set(recorders, net_seed, j)
                    t0 = time.perf_counter()
                    net = self.train(Q, G, int(np.random.SeedSequence([net_seed, j])
                                                .generate_state(1)[0] >> 1), state.net)
                    secs = time.perf_counter() - t0
                    for a in acc:
                        a.timings["train"] = a.timings.get("train", 0.0) + secs
                    state.net = net
                    info["n_train"] = int(Q.shape[0])
                    ev = {"event": "train", "iteration": t, "n_points": int(Q.shape[0]),
                          "seconds": secs}
                    for key, value in dict(getattr(net, "info", None) or {}).items():
                        if key not in ev and isinstance(value, (int, float, str, bool, np.number)):
                            ev[key] = value
                    events.append(ev)
                    hmc_acc = self._hmc_acceptance(warm, stage, state.row)
                    t0 = time.perf_counter()
                    trial_row = state.row
                    if trial_span(net):
                        return self._finish(warm, main, acc, exact, current, state, stage, info,
                                            keep_warmup)
                    trial_acc = float(np.mean([w["accept_prob"][trial_row:state.row]
                                               for w in warm]))
                    switch = bool(trial_acc >= self.switch_fraction * hmc_acc)
                    events.append({"event": "trial", "iteration": t, "acceptance": trial_acc,
                                   "hmc_acceptance": hmc_acc,
                                   "ratio": trial_acc / hmc_acc if hmc_acc > 0 else np.inf,
                                   "switch": switch, "seconds": time.perf_counter() - t0})
                    info["hmc_acceptance"], info["trial_acceptance"] = hmc_acc, trial_acc
                    if switch:
                        state.switched = True
                        events.append({"event": "switch", "iteration": t})
                        break
                    for k in range(chains):     # back to exact HMC where the trial ended
                        exact[k].set_position(current[k].position)
                        current[k] = exact[k]
                if not state.switched:
                    events.append({"event": "keep_exact", "iteration": state.iteration,
                                   "reason": "no trial reached switch_fraction * exact "
                                             "acceptance by train_end" if trainings else
                                             "no training"})
            # 4. sample
            info["switched"] = state.switched
            info["switch_iteration"] = state.iteration if state.switched else None
            for r in recorders:
                r.active = False

            def sample_worker(ctx):
                k = ctx.index
                if exact[k] is None:      # n_warmup == 0 with a given surrogate
                    exact[k] = self.make_chain(q0[k], gens[k])
                    current[k] = exact[k]
                if state.switched:
                    chain = current[k]
                    if chain.drive is not state.net:
                        chain = self._trial_chain(current[k], state.net)
                else:
                    chain = self.make_chain(current[k].position, gens[k])
                    chain.step_size = exact[k].step_size
                    chain.set_inv_metric(exact[k].inv_metric)
                current[k] = chain
                with ctx.phase("sample"):
                    ctx.run_span(chain, main[k], 0, n_draws, "sample")
                return chain

            par = parallel and (not state.switched or state.net.thread_safe)
            run(sample_worker, n_draws, "sample", self.method, par)
            return self._finish(warm, main, acc, exact, current, state, stage, info, keep_warmup)
        finally:
            for r in recorders:
                r.active = False

    # -- pieces ------------------------------------------------------------------
    def _training_set(self, recorders, net_seed, j):
        Q = np.concatenate([r.points()[0] for r in recorders])
        G = np.concatenate([r.points()[1] for r in recorders])
        if Q.shape[0] < 2:
            raise RuntimeError("the exploration recorded fewer than 2 training points")
        if self.max_train is not None and Q.shape[0] > self.max_train:
            rng = np.random.default_rng([net_seed, j, 1])
            idx = np.sort(rng.choice(Q.shape[0], size=self.max_train, replace=False))
            Q, G = Q[idx], G[idx]
        return Q, G

    @staticmethod
    def _hmc_acceptance(warm, stage, n_rows):
        rows = np.flatnonzero(stage[:n_rows] == STAGE_EXPLORE)
        if rows.size == 0:
            rows = np.arange(n_rows)
        if rows.size == 0:
            return 1.0
        return float(np.mean([w["accept_prob"][rows] for w in warm]))

    def _finish(self, warm, main, acc, exact, current, state, stage, info, keep_warmup):
        interrupted, error = state.stop if state.stop is not None else (False, None)
        partial = interrupted or error is not None
        rows = min(a.done.get("warmup", 0) for a in acc) if partial else state.row
        warm_cut = [{k: v[:rows] for k, v in w.items()} for w in warm]
        for a in acc:
            a.done["warmup"] = min(a.done.get("warmup", 0), rows)
        info["warmup_stage"] = stage[:rows].copy()
        info["stage_names"] = dict(_STAGE_NAMES)
        info["events"] = list(info["events"])
        chains_used = [c if c is not None else e for c, e in zip(current, exact)]
        res = self._result(warm_cut, main, acc, chains_used, partial, keep_warmup,
                           info=info, surrogate=state.net)
        if error is not None:
            error.result = res
            raise error
        return res

