"""RNS-HMC: HMC driven by a random-basis network surrogate (Zhang, Shahbaba &
Zhao 2017, Algorithm 3), with an exact Metropolis test.

Phases
------
1. explore: exact HMC (the paper's; or NUTS, ``explore="nuts"``; warm-up
   adaptation first, when ``adapt``); the states after the warming-up
   period, with their exact U, are the training set (pooled over chains);
   when they are too few for the dimension, every point their trajectories
   evaluated is (``training="auto"``).
2. train: a random-basis network is fitted to (q, U(q)) by ridge least
   squares (Algorithm 2).
3. exploit: the leapfrog uses the network's gradient; the Metropolis test
   uses the exact U (one value-only evaluation per iteration), so every
   chain still targets the exact posterior.  Optionally, delayed acceptance
   first screens each proposal with the surrogate Hamiltonian.

A guard watches the exploitation acceptance in windows: when it falls below
``guard`` times the exploration acceptance, the chain retrains its surrogate
on the data it has (``guard_action="retrain"``) or returns to exact HMC
(``"exact"``); the result records every such event in ``info["guard_events"]``.
"""
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core._hmc import Chain
from ..core._potential import Potential, RecordingPotential, TrustedDrive, WeightedSum
from ..models._models import Gaussian
from ..surrogates.laplace import laplace_approximation
from ..surrogates.random_network import train_random_network
from ..surrogates.subspace import active_subspace
from ._chain import surrogate_seed
from ._checks import check_int, check_positive, check_potential, check_tree_depth
from ._checks import check_explore, check_flag, check_number, check_int_or_auto
from ._transitions import check_transitions, tune_transitions, transition_chain
from .hmc import HMC
from .surrogate_nuts import check_warmup, check_warmup_size, surrogate_nuts_warmup

__all__ = ["RNSHMC", "surrogate_seed", "auto_hidden", "quadratic_count"]


def _auto_or_number(name, value, minimum):
    """"auto", or a finite number > minimum (>= 0 when minimum is 0.0; > 0 when None)."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f'{name} must be a number or "auto", got {value!r}')
        return value
    if minimum is None:
        return check_positive(name, value)
    v = float(value)
    if not (v >= minimum and np.isfinite(v)):
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return v


@dataclass
class RNSChainState:
    """An RNS-HMC chain's own state in the exploration (its ``ctx.state``;
    ARNS-HMC's extends it)."""
    recorder: RecordingPotential | None = None   # its trajectory recorder, or None
    record_from: int = 0                 # the first exploration row the recorder records


@dataclass
class RNSRunState:
    """RNS-HMC's run-wide state (``run.state``; ARNS-HMC's too)."""
    record_capacity: int = 0             # points each chain's recorder keeps (0: none)


def explore_options(sampler):
    """Chain options of a surrogate sampler's exact exploration (``explore``:
    NUTS or HMC)."""
    if sampler.explore_with == "nuts":
        return {"algorithm": "nuts", "max_tree_depth": sampler.max_tree_depth}
    return {}


def exploration_metric(options):
    """The papers' samplers' default warm-up: the diagonal metric from draws
    and gradients (``adaptation="fisher", metric="diag"``).  Not the
    low-rank one: its step size, right for U in a nearly isotropic metric,
    is too long for the surrogates' trajectories (ARNS-HMC on arK: step
    0.87, 25 % divergent iterations, min ESS 14 of 12000 draws; with the
    diagonal: step 0.31, none, 1615; with Stan's windows: 0.12, none,
    816)."""
    adaptation = options.get("adaptation", "fisher")
    out = {"adaptation": adaptation}
    if adaptation == "fisher" and options.get("metric") is None:
        out["metric"] = "diag"
    return out


class RNSHMC(HMC):
    """Random-network-surrogate HMC (exact).

    Parameters
    ----------
    potential : Potential
        The exact target.
    n_hidden : int or "auto"
        Hidden units s of the random network.  "auto" (default): 1000, or
        1.5 times the coefficients of a quadratic in the network's k inputs,
        1.5 (k + 1)(k + 2) / 2 rounded up, when that is more (k > 35), at
        most 4000
        (:func:`auto_hidden`; k = dim, or ``subspace``).
    activation : {"softplus", "sigmoid", "tanh", "rbf"}
    ridge : float or "auto"
        Relative ridge parameter of the output least squares ("auto": chosen
        on held-out exploration states).
    standardize : bool or "whiten"
        Standardise the network's inputs by the training set's mean and sd
        (True), or whiten them by its mean and covariance ("whiten": for
        ill-conditioned, correlated posteriors; see
        :func:`fastsurrogate.surrogates.train_random_network`).
    input_scale : float or "auto"
        Spread of the standardised inputs seen by the nodes ("auto": chosen
        with the ridge on held-out exploration states; see
        :func:`fastsurrogate.surrogates.train_random_network`).
    training : {"auto", "states", "accepted", "trajectory"}
        Train on every exploration state (the authors' code), on the
        accepted proposals only (the paper's Algorithm 3), or on every point
        the exploration's trajectories evaluated from iteration
        ``train_from`` on (the adaptation's later iterations included: U is
        exact wherever a trajectory went; NUTS computes U and its gradient
        at its 2^depth - 1 points per iteration, HMC at L, U then computed
        only at the points kept).  Not in the paper: a network fitted to U values needs more
        points than a quadratic in its k inputs has coefficients,
        (k + 1)(k + 2) / 2, and the states alone are often fewer (1326 at
        d = 50, where the default exploration keeps 500 states).  The
        trajectory points are evenly thinned to at most 4 times that count
        (at least 2 times, or all when fewer), and points with U above the
        highest state's U plus dim + 20 (far beyond any kinetic energy the
        trajectories start with: a diverging trajectory's) are left out.
        "auto" (default): "trajectory" when the states after ``train_from``
        (pooled over chains) are fewer than the count (when the run warns
        otherwise: :func:`warn_few_training_points`) and the network
        is fitted to U itself (no ``base``), else "states": runs with
        enough states train as the paper does.  ``info["training_set"]``
        says which was used ("kind") and the counts (states; with
        trajectories the points evaluated, recorded and left out, and each
        chain's final thinning ``every``).
    train_from : float or int
        Exploration iterations discarded before training data are taken
        (a fraction of ``n_warmup`` when < 1).  At least the adaptation part.
    delayed_acceptance : bool
        Screen proposals with the surrogate Hamiltonian before paying for
        the exact U; exact either way.
    guard : float or None
        Act when a window's acceptance falls below ``guard`` times the
        exploration acceptance (None: never, the paper's Algorithm 3, which
        has no guard).  0.5 (default; a deviation, not in the paper): a
        network that turns out poor where the chain goes is retrained, or
        replaced by the exact potential (``guard_action``), instead of
        leaving the chain to reject most of its proposals for the rest of
        the run.
    guard_window : int
        Iterations per guard window.
    guard_action : {"retrain", "exact"}
        What the guard does: retrain the network on the states so far
        ("retrain", default), or finish the run with exact HMC ("exact").
    trust : float or None
        Where the surrogate drives (a deviation, not in the paper): inside
        the ellipsoid around the training set (its mean and covariance)
        that holds this fraction of its points, with the exact gradient
        beyond (:class:`~fastsurrogate.core.TrustedDrive`); None: the
        surrogate everywhere, as in the paper.  Exact either way (the
        leapfrog with any force that depends on q alone is reversible and
        volume-preserving, and the exact U judges); the exact gradient where
        the network has no data lets the chain follow the posterior's
        tails.  0.99 (default): on issue 38's 5-d target (4 x (2000 +
        4000), seeds 11-50, Intel Xeon) the funnel sd's z averages -0.4
        (-0.9 with the network everywhere; exact HMC -0.3), the largest
        absolute z of any mean or sd is 3.4 (4.6), 23 of 400 beyond 2 (30;
        18 expected), at exact gradients for about 2 % of the drive's
        evaluations (at most 2.7 % in a chain of seeds 11-13).  The cost,
        2 x (1000 + 3000) on the simulated logistic regression (N = 100000,
        d = 50; Intel Xeon, interleaved with ``trust=None``): 0.9-1.6 %
        exact, whole run 16.4-16.5 s against 16.0-16.6 s, the same ESS; on
        the elliptic PDE (30 x 30 mesh, 20 modes, 2 x (1000 + 2000)):
        4-7 % exact, sampling phase 0.7 s against 0.5 s, whole run 2.5-2.7 s
        against 2.4 s, ESS 1852-1916 against 1836-2052.  RNS-RMHMC
        has no ``trust``.  ``info["trust"]`` has, per chain, the
        radius and the numbers of the drive's evaluations by the surrogate
        and by the exact U.
    surrogate : Potential, optional
        Use this surrogate instead of training one (e.g. a GP surrogate, or a
        network from an earlier run); the exploration still runs for warm-up.
    base : None, "laplace" or Potential
        Fit the network to the residual U - B of a base potential B and drive
        the leapfrog with B + network (a :class:`WeightedSum`).  "laplace":
        B is the Laplace approximation of the target (MAP by optimisation
        from the best exploration state, Hessian from the model or finite
        differences; :func:`fastsurrogate.surrogates.laplace_approximation`).
        Not in the paper.  In tens of dimensions a few thousand random
        features fitted to U values miss much of the curvature that the
        leapfrog needs; with the quadratic taken out, the network only has
        to learn the non-Gaussian remainder.  None (default): the paper's
        network alone.  ``result.surrogate`` is then the sum, and
        ``result.info["base"]`` the base.
    subspace : None or int
        Fit the network on the k-dimensional active subspace of U - B (B
        the base; U itself without one): the k leading eigen-directions of
        the mean outer product of its gradient, in the exploration states'
        whitened coordinates
        (:func:`fastsurrogate.surrogates.subspace.active_subspace`).  The
        gradients are computed at ``subspace_points`` exploration states
        evenly spaced over the training set: that many exact gradient
        evaluations, paid in the train phase.  Not in the paper.  On the
        20-parameter elliptic PDE (s = 1000, with ``base="laplace"``) k = 12
        lifts the acceptance from 0.79 to 0.87 (docs/guide.md).  None
        (default): the network sees every coordinate.
        ``result.info["subspace"]`` records k and the eigenvalues.
    subspace_points : int
        Exploration states at which the gradients for ``subspace`` are taken.
    transitions : None, int or "auto"
        Surrogate transitions with an exact correction (Liu 2001, sec.
        9.4.3; Christen & Fox 2005): each kept iteration makes k
        transitions of ``inner`` on the surrogate V alone (no data cost),
        then ONE Metropolis-Hastings test with acceptance
        min(1, exp(-U(q') + U(q) + V(q') - V(q))): exact for any k, one
        exact U per k surrogate transitions.  None (default): the paper's
        exploitation (one surrogate-driven HMC proposal per exact test).
        "auto": k chosen before the kept draws from the expected squared
        jump per exact evaluation on the ladder 1, 2, 4, 8, 16 (100 tuning
        iterations each, not kept; see
        :mod:`fastsurrogate.samplers._transitions`), then fixed.  With
        ``adapt`` the inner step size is re-adapted on V alone (200
        iterations, no exact evaluation).  ``info["transitions"]`` (per
        chain) records k, the step size and the ladder.
    inner : {"hmc", "nuts"} or None
        The kernel on V for ``transitions``: HMC with this sampler's
        ``n_steps`` / ``random_n_steps``, or NUTS (``max_tree_depth``).
        None (default): HMC.  Refused without ``transitions``.
    explore : {"hmc", "nuts"}
        The exact kernel of the exploration phase: HMC (the paper's,
        default) or NUTS (Stan's multinomial NUTS; its step size then starts
        the exploitation).
    max_tree_depth : int
        NUTS (``inner`` or ``explore``): at most 2**max_tree_depth - 1
        leapfrog steps per transition.
    warmup : {"paper", "surrogate-nuts"}
        "paper" (default): the exploration above.  "surrogate-nuts" (a
        deviation, not in the paper): the warm-up of surrogate-driven NUTS
        (:func:`~fastsurrogate.samplers.surrogate_nuts.surrogate_nuts_warmup`:
        Laplace start, exact NUTS recorded, then NUTS on a value-and-gradient
        surrogate with every exact correction recorded); the network is
        trained on every point it recorded, and the exploitation starts
        from each chain's adapted state, step size and metric.  ``explore``,
        ``training``, ``train_from`` and ``adapt`` do not apply.
    **hmc_options
        step_size, n_steps, random_n_steps, metric, adapt, target_accept,
        max_energy_error, adaptation, as for :class:`HMC`, except that the
        metric defaults to "diag" (adapted from draws and gradients): the
        low-rank metric's step size is too long for the surrogate's
        trajectories.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> X, y, _ = fs.datasets.simulate_logistic(2000, 5, seed=0)
    >>> model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    >>> res = fs.sample(model, method="rns-hmc", n_draws=200, n_warmup=400, chains=1,
    ...                 n_hidden=200, seed=1, progress=False)
    >>> res.surrogate.n_hidden
    200
    """

    method = "rns-hmc"
    _warmup_ends = ("fixed",)    # training reads the whole exact warm-up

    def __init__(self, potential: Potential, *, n_hidden: int | str = "auto",
                 activation: str = "softplus", ridge: float | str = "auto",
                 standardize: bool | str = True, input_scale: float | str = "auto",
                 training: str = "auto", train_from: float = 0.2,
                 delayed_acceptance: bool = False, guard: float | None = 0.5,
                 guard_window: int = 200, guard_action: str = "retrain",
                 surrogate: Potential | None = None, base: str | Potential | None = None,
                 transitions: int | str | None = None, inner: str | None = None,
                 explore: str = "hmc", max_tree_depth: int = 10, subspace: int | None = None,
                 subspace_points: int = 1000, warmup: str = "paper",
                 trust: float | None = 0.99, **hmc_options: Any) -> None:
        hmc_options.update(exploration_metric(hmc_options))
        super().__init__(potential, **hmc_options)
        self.warmup_kind = check_warmup(warmup, self.method)
        self.transitions, self.inner = check_transitions(transitions, inner)
        self.explore_with = check_explore(explore)
        self.max_tree_depth = check_tree_depth(max_tree_depth)
        if self.transitions is not None and delayed_acceptance:
            raise ValueError("delayed_acceptance does not apply with transitions: the exact "
                             "test already comes once per k surrogate transitions")
        n_hidden = check_int_or_auto("n_hidden", n_hidden)
        if activation not in ("softplus", "sigmoid", "tanh", "rbf"):
            raise ValueError(f"activation must be softplus, sigmoid, tanh or rbf; got {activation!r}")
        self.activation = activation
        self.ridge = _auto_or_number("ridge", ridge, minimum=0.0)
        if standardize not in (True, False, "whiten"):
            raise ValueError(f'standardize must be True, False or "whiten", got {standardize!r}')
        self.standardize = standardize
        self.input_scale = _auto_or_number("input_scale", input_scale, minimum=None)
        if training not in ("auto", "states", "accepted", "trajectory"):
            raise ValueError("training must be 'auto', 'states', 'accepted' or 'trajectory', "
                             f"got {training!r}")
        self.training = training
        if isinstance(train_from, (bool, np.bool_)) or not isinstance(
                train_from, (int, float, np.integer, np.floating)):
            raise TypeError(f"train_from must be a number, got {type(train_from).__name__}")
        if not (train_from >= 0 and np.isfinite(train_from)):
            raise ValueError(f"train_from must be finite and >= 0, got {train_from!r}")
        self.train_from = train_from
        self.delayed_acceptance = check_flag("delayed_acceptance", delayed_acceptance)
        self.guard = None if guard is None else check_number("guard", guard)
        if self.guard is not None and not 0 <= self.guard < 1:
            raise ValueError("guard must be in [0, 1) or None")
        self.guard_window = check_int("guard_window", guard_window, 10)
        if guard_action not in ("retrain", "exact"):
            raise ValueError("guard_action must be 'retrain' or 'exact'")
        self.guard_action = guard_action
        self.trust = check_trust(trust)
        self._set_surrogate_options(potential.dim, surrogate, base, subspace)
        self.subspace_points = check_int("subspace_points", subspace_points, 2)
        self.n_hidden = (auto_hidden(potential.dim, self.subspace) if n_hidden == "auto"
                         else n_hidden)
        self._subspace_info = None

    def _set_surrogate_options(self, dim, surrogate, base, subspace):
        """Set ``surrogate``, ``base`` and ``subspace``, checked against each
        other and the network's options (``activation``, ``standardize``)."""
        if surrogate is not None:
            check_potential(surrogate, "surrogate", dim)
        self.surrogate = surrogate
        if isinstance(base, str) and base != "laplace":
            raise ValueError(f'base must be None, "laplace" or a Potential, got {base!r}')
        if base is not None and surrogate is not None:
            raise ValueError("base and surrogate exclude each other: a given surrogate is used as is")
        if base is not None and not isinstance(base, str):
            check_potential(base, "base", dim)
        self.base = base
        if subspace is not None:
            subspace = check_int("subspace", subspace, 1)
            if subspace > dim:
                raise ValueError(f"subspace must be <= dim = {dim}, got {subspace}")
            if surrogate is not None:
                raise ValueError("subspace applies to a network trained here, not to a given "
                                 "surrogate")
            if self.activation == "rbf" or self.standardize is False:
                raise ValueError("subspace needs additive nodes on standardised inputs (not "
                                 "activation='rbf' or standardize=False)")
        self.subspace = subspace

    # -- the algorithm -----------------------------------------------------------

    def check_sizes(self, n_draws, n_warmup):
        if self.warmup_kind != "paper":
            check_warmup_size(self.method, n_warmup)
            return
        if self.surrogate is None and n_warmup < 10:
            raise ValueError("n_warmup must be >= 10: the exploration phase provides the training data")
        tf = self.train_from
        if self.surrogate is None and tf >= 1 and int(tf) > n_warmup - 2:
            raise ValueError(
                f"train_from={tf!r} discards all but {max(n_warmup - int(tf), 0)} of the "
                f"{n_warmup} exploration states; it must leave at least 2 (train_from <= "
                f"{n_warmup - 2}, or a fraction < 1)")

    def phases(self, run):
        """Explore with exact HMC or NUTS (``explore``), train the network on
        the pooled states, exploit.

        ``result.surrogate`` is the trained network, ``warmup_draws`` the
        exploration chain and ``timings`` the seconds of ``warmup``
        (exploration), ``train`` and ``sample`` (exploitation).  ``info``
        holds the training-set size, the exploration acceptance, guard
        events and the exact evaluations made (and, with delayed
        acceptance, saved).
        """
        self._subspace_info = None
        seed, Q, U = self.explore_phase(run)
        if self.surrogate is None and self.base is None:
            warn_few_training_points(self.method, Q.shape[0], self.potential.dim, self.subspace)
        with run.phase("train"), run.training_progress("train (random network)") as progress:
            # "laplace": this run's own Laplace approximation
            base = self._laplace_base(Q, U) if isinstance(self.base, str) else self.base
            net = (self.surrogate if self.surrogate is not None
                   else self.train(Q, U, seed, base, progress=progress))
        if base is not None:
            run.info["base"] = base
        if self._subspace_info is not None:
            run.info["subspace"] = self._subspace_info
        run.info.update(n_train=int(Q.shape[0]), train_rmse=getattr(net, "info", {}).get(
            "train_rmse") if hasattr(net, "info") else None, guard_events=[], trust=[])
        run.info["training_curve"] = _training_curve(net)
        run.surrogate = net
        self._surrogate_ready(run, net)
        run.each_chain(lambda ctx: self.exploit(ctx, net, Q, U, seed, base), run.n_draws,
                       "exploit", parallel=self._chains_parallel(net))

    def _surrogate_ready(self, run, net):
        """Hook after training, before the exploitation (RNS-RMHMC checks its
        surrogate)."""

    def finish(self, run):
        judge_evals = sum(int(c.main["judge_evaluated"][:c.done.get("sample", 0)].sum())
                          for c in run.ctxs if c.main is not None)
        n_iter = sum(c.done.get("sample", 0) for c in run.ctxs)
        run.info["exact_evaluations"] = judge_evals
        run.info["exact_evaluations_saved"] = n_iter - judge_evals
        by_chain = {rec.pop("chain"): rec for rec in run.info.get("trust", [])}
        run.info["trust"] = [by_chain.get(k) for k in range(len(run.ctxs))]

    # -- phases ------------------------------------------------------------------
    def explore_phase(self, run):
        """Start the chains and explore with exact HMC (or NUTS); returns
        (basis seed, Q, U): the training set pooled over the chains."""
        run.start()
        seed = surrogate_seed(run.generators[0])
        if self.warmup_kind == "surrogate-nuts":
            return (seed,) + self._surrogate_nuts_exploration(run)
        start = self._train_start(run.n_warmup)
        run.state = RNSRunState(record_capacity=self._trajectory_capacity(run, start))
        for ctx in run.ctxs:
            ctx.state = RNSChainState()
        run.each_chain(self.explore, run.n_warmup, "explore")
        Q, U = self.training_set([c.warm for c in run.ctxs], start)
        if run.state.record_capacity:
            Q, U = self.trajectory_set(run, U)
        else:
            kind = ("given" if self.surrogate is not None else
                    "states" if self.training == "auto" else self.training)
            run.info["training_set"] = {"setting": self.training, "kind": kind,
                                        "n_states": int(Q.shape[0])}
        run.info["exploration_acceptance"] = [
            float(c.warm["accept_prob"][start:].mean()) if run.n_warmup > start else 1.0
            for c in run.ctxs]
        return seed, Q, U

    def _surrogate_nuts_exploration(self, run):
        """``warmup="surrogate-nuts"``: (Q, U) of every recorded point; the
        guard's reference acceptance is each chain's over its warm-up's
        second half."""
        w = surrogate_nuts_warmup(self, run)
        Q, U = w.Q, w.U
        run.info["training_set"] = {"setting": "surrogate-nuts", "kind": "warm-up points",
                                    "n_states": int(Q.shape[0])}
        half = run.n_warmup // 2
        run.info["exploration_acceptance"] = [float(c.warm["accept_prob"][half:].mean())
                                              for c in run.ctxs]
        return Q, U

    def _n_adapt(self, n_warmup):
        return n_warmup // 2 if self.adapt else 0

    def _train_start(self, n_warmup):
        return min(max(self._record_start(n_warmup), self._n_adapt(n_warmup)),
                   max(n_warmup - 2, 0))

    def _trajectory_capacity(self, run, start):
        """Points each chain's recorder keeps (0: no recording): with
        ``training`` "trajectory", or "auto" when the pooled states after
        ``start`` are fewer than the quadratic count."""
        if self.surrogate is not None or self.training in ("states", "accepted"):
            return 0
        need = quadratic_count(self.potential.dim, self.subspace)
        if self.training == "auto" and (self.base is not None
                                        or run.chains * (run.n_warmup - start) >= need):
            return 0
        # pooled: between 2 and 4 times the count after decimation
        return recorder_capacity(-(-4 * need // run.chains), self.potential.dim)

    def _record_span(self, ctx, chain, trace, a, b, key="warmup"):
        """Rows a..b-1 of the exploration, the recorder on from row
        ``ctx.state.record_from`` (split there); returns the row reached."""
        rec, start = ctx.state.recorder, ctx.state.record_from
        if rec is None:
            return ctx.run_span(chain, trace, a, b, key)
        if a < start < b:
            rec.active = False
            a = ctx.run_span(chain, trace, a, start, key)
            if a < start:
                return a
        rec.active = a >= start
        try:
            return ctx.run_span(chain, trace, a, b, key)
        finally:
            rec.active = False

    def _record_start(self, n_warmup):
        """First exploration row whose trajectories are recorded: train_from
        alone (the adaptation's later rows included: a trajectory point's U is
        exact whatever the step size and metric that led there)."""
        tf = self.train_from
        start = int(tf * n_warmup) if tf < 1 else int(tf)
        return min(start, max(n_warmup - 2, 0))

    def explore(self, ctx):
        """Exact HMC: adaptation on the first half (when adapting), then fixed.
        With trajectory training, a recorder between the chain and the exact
        U collects every point evaluated from the training start (the
        chain's ``ctx.state``, an :class:`RNSChainState`, holds it)."""
        n_warmup = ctx.run.n_warmup
        n_adapt = self._n_adapt(n_warmup)
        drive = {}
        capacity, st = ctx.run.state.record_capacity, ctx.state
        if capacity:
            st.recorder = ctx.track(RecordingPotential(
                self.potential, capacity, decimate=True, need_value=True))
            st.recorder.active = False
            st.record_from = self._record_start(n_warmup)
            drive = {"drive": st.recorder, "judge": st.recorder}
        ctx.chain = self.make_chain(ctx.q0, ctx.generator, **drive, **explore_options(self))
        span = lambda chain, trace, a, b, key: self._record_span(ctx, chain, trace, a, b, key)
        with ctx.phase("warmup"):
            self.warmup(ctx.chain, ctx.warm, ctx, n_adapt, key="warmup", span=span)
            self._record_span(ctx, ctx.chain, ctx.warm, n_adapt, n_warmup)

    def surrogate_chain(self, ctx, net):
        """The surrogate-driven chain of the exploitation, from where the
        exploration ended."""
        if self.transitions is not None:
            return self.start_transitions(ctx, net)
        return self._continue_chain(ctx.chain, net)

    def _chains_parallel(self, net):
        """Whether the surrogate-driven chains (exploitation) may run in threads."""
        return self.potential.thread_safe and net.thread_safe

    def start_transitions(self, ctx, drive):
        """The sampling chain with surrogate transitions, tuned before the kept draws."""
        if "inner_accept_prob" not in ctx.main:
            ctx.main["inner_accept_prob"] = np.full(ctx.main["potential"].shape[0], np.nan)
        with ctx.phase("tune"):
            ctx.chain, tinfo = tune_transitions(self, ctx.chain, drive, self.transitions,
                                                self.inner, stop=ctx.stop)
        tinfo["chain"] = ctx.index
        ctx.run.info.setdefault("transitions", []).append(tinfo)
        return ctx.chain

    def training_set(self, traces, start):
        Q = np.concatenate([t["draws"][start:] for t in traces])
        U = np.concatenate([t["potential"][start:] for t in traces])
        if self.training == "accepted":
            acc = np.concatenate([t["accepted"][start:] for t in traces]).astype(bool)
            Q, U = Q[acc], U[acc]
        ok = np.isfinite(U) & np.all(np.isfinite(Q), axis=1)
        return Q[ok], U[ok]

    def trajectory_set(self, run, U_states):
        """The training set from the exploration's recorded trajectory
        points, pooled over chains: (Q, U); ``info["training_set"]`` records
        the sizes (:func:`trajectory_points`)."""
        Q, U, counts = trajectory_points([c.state.recorder for c in run.ctxs], U_states,
                                         self.potential.dim)
        run.info["training_set"] = {"setting": self.training, "kind": "trajectory",
                                    "n_states": int(U_states.size), **counts}
        return Q, U

    def train(self, Q, U, seed, base=None, progress=None):
        """The surrogate fitted to (Q, U): the network, or base + network.
        ``progress(n_done, n_total)`` is called after each candidate fit."""
        if Q.shape[0] < 2:
            raise RuntimeError("the exploration phase produced fewer than 2 training points")
        directions = self._active_directions(Q, base) if self.subspace is not None else None
        if base is not None:
            U = U - np.array([base.value(q) for q in Q])
        net = train_random_network(Q, U, n_hidden=self.n_hidden, activation=self.activation,
                                   ridge=self.ridge, standardize=self.standardize,
                                   input_scale=self.input_scale, seed=seed, progress=progress,
                                   directions=directions)
        return net if base is None else WeightedSum([net, base], [1.0, 1.0])

    def _active_directions(self, Q, base):
        """The (k, dim) active subspace of U - base from exact gradients at
        ``subspace_points`` training states; None when k = dim or Q has too
        few points to whiten."""
        k, dim = self.subspace, self.potential.dim
        if k >= dim or Q.shape[0] <= dim:
            self._subspace_info = {"k": k, "used": False, "n_gradients": 0}
            return None
        idx = np.unique(np.linspace(0, Q.shape[0] - 1, min(self.subspace_points, Q.shape[0]))
                        .astype(np.int64))
        G = np.array([self.potential.grad(q) for q in Q[idx]])
        if base is not None:
            G -= np.array([base.grad(q) for q in Q[idx]])
        ok = np.all(np.isfinite(G), axis=1)
        P, ev = active_subspace(Q, G[ok], k)
        self._subspace_info = {"k": k, "used": True, "n_gradients": int(idx.size),
                               "eigenvalues": ev}
        return P

    def _laplace_base(self, Q, U):
        """The Laplace approximation of the target as a Gaussian potential."""
        best = Q[int(np.argmin(U))]
        lap = laplace_approximation(self.potential, best)
        return Gaussian(lap.mean, lap.cov)

    def exploit(self, ctx, net, Q, U, seed, base=None):
        """Surrogate-driven sampling, watched by the guard in windows."""
        drives = [self.trusted(ctx, net, Q)]
        ctx.chain = self.surrogate_chain(ctx, drives[-1])
        n_draws, trace = ctx.run.n_draws, ctx.main
        explore_acc = ctx.run.info["exploration_acceptance"][ctx.index]
        i = 0
        with ctx.phase("sample"):
            while i < n_draws:
                end = min(i + self.guard_window, n_draws) if self.guard is not None else n_draws
                i = ctx.run_span(ctx.chain, trace, i, end, "sample")
                if self.guard is None or ctx.chain.drive_is_judge or i >= n_draws:
                    continue
                acc = float(trace["accept_prob"][max(0, i - self.guard_window):i].mean())
                if acc >= self.guard * explore_acc:
                    continue
                ctx.run.info["guard_events"].append(
                    {"chain": ctx.index, "iteration": i, "acceptance": acc,
                     "exploration_acceptance": explore_acc, "action": self.guard_action})
                drive = self.potential
                if self.guard_action == "retrain":
                    Q = np.concatenate([Q, trace["draws"][:i]])
                    U = np.concatenate([U, trace["potential"][:i]])
                    with ctx.phase("train"):
                        drive = self.trusted(ctx, self.train(Q, U, [seed, ctx.index, i], base), Q)
                    drives.append(drive)
                ctx.chain = self._continue_chain(ctx.chain, drive)
        rec = trust_record(drives)
        if rec is not None:
            ctx.run.info["trust"].append({"chain": ctx.index, **rec})

    def trusted(self, ctx, net, Q):
        """The drive: ``net`` trusted inside the ellipsoid that holds ``trust``
        of the training points Q, the exact potential beyond (``net`` itself
        with ``trust=None``)."""
        if self.trust is None:
            return net
        return ctx.track(TrustedDrive.from_points(net, self.potential, Q, self.trust))

    def _continue_chain(self, chain, drive):
        """A chain driven by `drive` and judged by the exact U, from where `chain` is."""
        if (self.transitions is not None and drive is not self.potential
                and chain.surrogate_steps > 0):
            # a guard retrain keeps the tuned k and step size
            return transition_chain(self, chain, drive, chain.surrogate_steps, self.inner)
        return Chain(drive, self.potential, chain.position, chain.generator,
                     step_size=chain.step_size, n_steps=self.n_steps,
                     random_n_steps=self.random_n_steps, inv_metric=chain.inv_metric,
                     max_energy_error=self.max_energy_error,
                     delayed_acceptance=self.delayed_acceptance and drive is not self.potential)


def check_trust(trust):
    """``trust``: None or a fraction in (0, 1]."""
    if trust is None:
        return None
    trust = check_number("trust", trust)
    if not 0 < trust <= 1:
        raise ValueError(f"trust must be in (0, 1] or None, got {trust!r}")
    return trust


def trust_record(drives):
    """``info["trust"]``'s record of a chain's drives (a guard retrain makes a
    new one): None without ``trust``, else the last one's radius and the
    evaluations by the surrogate and by the exact U over all of them, and
    the exact ones' fraction."""
    drives = [d for d in drives if isinstance(d, TrustedDrive)]
    if not drives:
        return None
    n_exact = sum(d.n_exact for d in drives)
    n_net = sum(d.n_surrogate for d in drives)
    return {"radius": drives[-1].radius, "n_exact": n_exact, "n_network": n_net,
            "exact_fraction": n_exact / max(1, n_exact + n_net)}


def recorder_capacity(points, dim):
    """Points a decimating trajectory recorder keeps: ``points``, at least 16
    and at most what 64 MB of recorded q and gradient hold."""
    return int(max(16, min(points, 2 ** 26 // (16 * dim))))


def trajectory_points(recorders, U_states, dim):
    """The recorders' points pooled: (Q, U, counts).  Points with U above the
    highest state's U (``U_states``: the exploration's states after the
    training start) + dim + 20 (a diverging trajectory's) are left out;
    ``counts`` has n_evaluated, n_recorded, n_far_out and each recorder's
    final thinning ``every``."""
    parts = [r.points() for r in recorders]
    Q = np.concatenate([p[0] for p in parts])
    U = np.concatenate([p[2] for p in parts])
    ok = np.isfinite(U) & np.all(np.isfinite(Q), axis=1)
    n_recorded = int(ok.sum())
    U_states = np.asarray(U_states)
    U_states = U_states[np.isfinite(U_states)]
    if U_states.size:
        ok &= U <= float(np.max(U_states)) + dim + 20.0
    counts = {"n_evaluated": int(sum(r.n_seen for r in recorders)), "n_recorded": n_recorded,
              "n_far_out": n_recorded - int(ok.sum()), "every": [int(r.every) for r in recorders]}
    return np.ascontiguousarray(Q[ok]), np.ascontiguousarray(U[ok]), counts


def quadratic_count(dim, subspace=None):
    """(k + 1)(k + 2) / 2, the coefficients of a quadratic in the network's
    k inputs (k = dim, or the active subspace's k)."""
    k = dim if subspace is None or subspace >= dim else subspace
    return (k + 1) * (k + 2) // 2


def auto_hidden(dim, subspace=None):
    """The default hidden-unit count s: 1000, or 1.5 times
    :func:`quadratic_count` (rounded up) when that is more, at most 4000.

    Measured on the simulated logistic regression (N = 100000, d = 50, count
    1326), networks fitted to 3500 NUTS trajectory points, error of the
    gradient in the posterior's metric at posterior draws: s = 1000 1.7
    (RNS-HMC acceptance 0.49), s = 2000 0.09 (0.84).  At d <= 35 it is 1000,
    the paper's default.
    """
    return int(min(4000, max(1000, (3 * quadratic_count(dim, subspace) + 1) // 2)))


def warn_few_training_points(method, n_train, dim, subspace=None):
    """Warn when a network fitted to U values alone has fewer training points
    than a quadratic in its k inputs has coefficients, (k + 1)(k + 2) / 2.

    Below that count the values cannot pin down U's curvature, so the
    network's gradient and Hessian are off.  Measured on simulated logistic
    regressions (N = 20000, d = 10 and 20; N = 100000, d = 50), networks
    fitted after a NUTS exploration, error of the gradient in the
    posterior's metric (sqrt(e^T G^-1 e), G the Fisher information) at a
    posterior draw:
    - n_train = 1/4 of the count: 2.5 (d = 10, 20);
    - 1/2: 1.0-1.3;
    - the count: 0.12-0.25 (d = 50, n_train 1500 of 1326: 0.12);
    - twice the count: 0.004-0.011.
    The Riemannian step adapted on the network's SoftAbs metric went from
    0.016-0.025 to 0.38-0.55 across the same range (the Fisher metric's is
    about 0.5).
    """
    k = dim if subspace is None or subspace >= dim else subspace
    need = quadratic_count(dim, subspace)
    if n_train < need:
        warnings.warn(
            f"{method}: the network is fitted to {n_train} training points, fewer than the "
            f"{need} coefficients of a quadratic in {k} variables ((k + 1)(k + 2) / 2). "
            f"Fitted to U values alone it then gets U's curvature wrong (its gradient and "
            f"Hessian), and the surrogate chain mixes slowly. Explore longer (n_warmup; "
            f"training takes each chain's states after train_from), run more chains (their "
            f"states are pooled), train on every point of the exploration's trajectories "
            f'(training="trajectory"), or fit the network to U minus a Gaussian base '
            f'(base="laplace").',
            UserWarning, stacklevel=2)


def _training_curve(net):
    """The batch fit's record for ``info["training_curve"]``: held-out RMSE of U
    of each candidate (input scale, relative ridge) the fit tried, in the order
    tried, and the chosen network's RMSE on all training points; None for a
    surrogate that was not fitted here."""
    info = getattr(net, "info", None)
    if isinstance(net, WeightedSum) or not isinstance(info, dict) or "train_rmse" not in info:
        nets = getattr(net, "potentials", None) or []
        info = next((getattr(p, "info", None) for p in nets
                     if isinstance(getattr(p, "info", None), dict)
                     and "train_rmse" in p.info), None)
        if info is None:
            return None
    val = info.get("validation_rmse", {})
    return {"candidate": list(val), "holdout_rmse": np.array(list(val.values()), dtype=float),
            "chosen": f"{info['input_scale']:g}/{info['ridge']:g}",
            "train_rmse": float(info["train_rmse"]), "n_train": int(info["n_train"])}
