"""ARNS-HMC: adaptive random-network-surrogate HMC (Zhang, Shahbaba & Zhao
2017, Algorithm 4 and Proposition 1).

Phases (per chain)
------------------
1. explore: exact HMC (the paper's; or NUTS, ``explore="nuts"``) for
   ``n_warmup`` iterations (adaptation in the first half when ``adapt``);
   its last ``n_start`` states start the surrogate (or, when they are too
   few for the network, every point its trajectories evaluated from
   ``train_from`` on: ``training``).
2. start: a random-basis network is fitted to those points; a Greville
   trainer (fastsurrogate.surrogates._online) holds the pseudo-inverse state of the
   output layer, with a constant feature for the output bias.
3. adapt-and-sample: the network drives the leapfrog (inside the ellipsoid
   that holds 99 % of the start set, ``trust``; the exact gradient beyond:
   a deviation, not in the paper), the exact U judges.
   Every new state (q, U(q)) updates the trainer (O(s^2) per point, in C;
   or every non-divergent proposal, ``online_data="proposals"``);
   the chain switches to the updated weights with probability a_t =
   t^(-exponent), t the iterations since the start (a_t -> 0, sum a_t =
   infinity for exponent <= 1), so adaptation
   vanishes and the chain stays ergodic for the exact target.
   With ``max_points`` the updates stop once the trainer has seen that
   many points: finite adaptation, after which the surrogate is fixed.

The loop runs in C; after every block of ``update_every`` iterations a
chain hook (in C, without Python) absorbs the block's points and one coin
with probability 1 - prod(1 - a_t) over the block, from the chain's own
stream, decides the switch (the per-iteration coins of Algorithm 4,
collapsed to the block).
"""
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core._blas_threads import blas_threads
from ..core._potential import Potential, TrustedDrive
from ..surrogates._network import RandomNetwork
from ..surrogates._online import OnlineLayerHook
from ..surrogates.online import OnlineOutputLayer, centred_rows, set_output_weights
from ..surrogates.random_network import train_random_network
from ._chain import surrogate_seed
from ._checks import check_int, check_int_or_auto, check_number, refuse_options
from .rns_hmc import (RNSHMC, RNSChainState, RNSRunState, quadratic_count, recorder_capacity,
                      trajectory_points, trust_record)
from .surrogate_nuts import check_warmup_size, surrogate_nuts_warmup
from ..surrogates.value_gradient import even_indices

__all__ = ["ARNSHMC"]


@dataclass
class _ARNSChain(RNSChainState):
    """An ARNS-HMC chain's own state (its ``ctx.state``): the exploration's
    (the recorder) and its online surrogate's."""
    start_set: tuple | None = None        # (Q, U) the network is fitted to first
    training_set: dict | None = None      # what start_set is (info["training_set"])
    net: RandomNetwork | None = None      # the network, its output layer trained online
    drive: Any = None                     # what drives the leapfrog: net, or net trusted (trust)
    trainer: OnlineOutputLayer | None = None    # the online output layer
    offset: float = 0.0                   # the start set's lowest U (the layer fits U - offset)
    switches: list = field(default_factory=list)    # iterations of the switch coins' heads
    stopped: int | None = None            # iteration the online updates stopped (max_points)
    clock: list = field(default_factory=list)       # (iteration, seconds) per sampling span
    curve: list = field(default_factory=list)       # (iteration, held-out, RMSE) per span


def _chain_state(ctx):
    """The chain's _ARNSChain; its defaults when the run stopped before the
    chain had one (or in the surrogate-NUTS warm-up, whose state it holds)."""
    return ctx.state if isinstance(ctx.state, _ARNSChain) else _ARNSChain()


def _check_options(options: dict[str, Any]) -> str:
    """Refuse RNS-HMC's options that ARNS-HMC has no use for; fill in its
    defaults (no guard, training "auto") and return ``training``."""
    if options.get("base") is not None:
        raise ValueError("ARNS-HMC has no base option: its online trainer fits U itself")
    refuse_options("ARNS-HMC", options, ("surrogate", "guard", "guard_window", "guard_action"),
                   "each chain trains its own network online, from its exploration, and "
                   "has no guard (its online updates follow the chain)")
    if options.get("subspace") is not None:
        raise ValueError("ARNS-HMC has no subspace option: its online trainer sees every "
                         "coordinate")
    options.setdefault("guard", None)
    training = options.setdefault("training", "auto")
    if training not in ("auto", "states", "trajectory"):
        raise ValueError("ARNS-HMC's training must be 'auto', 'states' or 'trajectory', "
                         f"got {training!r}")
    return training


class ARNSHMC(RNSHMC):
    """Adaptive RNS-HMC (Algorithm 4): online updates of the output weights
    (Greville's recursion with ``online_ridge=0``; a penalised one by default).

    Parameters
    ----------
    potential : Potential
    n_start : int
        Exploration states the surrogate starts from.
    update_every : int
        Iterations per C chunk between trainer updates / switch decisions.
    exponent : float
        a_t = t^(-exponent), t = iterations since the start; in (0, 1].
    online_ridge : float or None
        0: Greville's pseudo-inverse recursion (the paper's Proposition 1);
        > 0: recursive ridge least squares with that absolute penalty; None
        (default; a deviation, not in the paper): a penalised recursion.
        Greville's recursion fits every point exactly while it can, and on
        issue 38's 5-d target (``tests/_targets.py``, 4 x (2000 + 4000),
        seed 4) it left the banana block's sds 3.6 and 4.8 MCSE low (with
        the chain's states fed to it, as in the paper, 4.3 and 5.7), where
        the default passes at every seed 1-5 (within 2.8 MCSE).  The
        default's penalty: with a start set of trajectory points (``training``),
        the batch fit's penalty (:func:`online_penalty`: its relative
        ``ridge``, at least 1e-12, on its scale) on rows of hidden features
        centred at the start set's mean (a fixed centre; the bias absorbs
        it), so the online layer starts from the batch fit and goes on
        adding points; with the paper's start set of states, the batch
        trainer's relative ``ridge`` (at least 1e-8) times the mean squared
        norm of the uncentred rows, a penalty 1e2-1e5 times the batch
        fit's, which the fixed input scale and ridge of that start were
        tuned with and which keeps its recursion stable (random features of
        a low-dimensional q are nearly collinear, and the batch fit's
        penalty let one chain's recursion blow up on posteriordb's garch11,
        d = 4).  On Bank Marketing's trajectory points the larger penalty
        raised the network's RMSE on its start points from 0.048 (the
        batch fit) to 2.0.  If an update still breaks down
        numerically, the output layer is re-solved in batch from every point
        seen.
    resync_every : int
        Re-solve the output layer by a batch solve over all points every
        this many updates (0: never); bounds rounding drift.
    max_points : int or None
        Stop the online updates once the trainer has seen this many points
        (start set included) and switch, once, to the final weights; the
        surrogate is then fixed for the rest of the run.  Adaptation that
        stops after a finite time keeps the chain exact (from then on it is a
        time-homogeneous HMC kernel with the exact Metropolis test), and the
        rest of the run no longer pays the O(s^2) update per point.  None
        (default): the paper's Algorithm 4, updates for the whole run.
        ``transitions`` (surrogate transitions, see :class:`RNSHMC`) need it:
        they start once the updates have stopped, with the fixed surrogate
        (k tuned then, off the trace, and fixed for the rest of the run).
    online_data : {"states", "proposals"}
        What feeds the online trainer: the chain's state after each
        iteration with its exact U (the default: the paper's Algorithm 4,
        which updates with (q^(t+1), U(q^(t+1))), a rejection repeating the
        state), or every iteration's proposal with its exact U, computed
        anyway by the Metropolis test, except divergent ones (a deviation,
        not in the paper).  Proposals carry new points where the chain
        rejects, but they also fall where U is far above the typical set,
        and those points pull the least squares away from where the chain
        is.  Measured on posteriordb's eight schools (non-centred, every
        other default, 4 chains x (1000 + 1000), seeds 2024, 1, 2, 3;
        Intel Xeon): smallest bulk ESS 844, 1147, 859, 772 with states,
        151, 139, 486, 287 with proposals (R-hat up to 1.055; chains that
        accept 0.12-0.17 beside chains at 0.6).  On the simulated logistic
        regression (N = 20000, d = 50, defaults): acceptance 0.77 with
        states, 0.80 with proposals, smallest bulk ESS 2115 and 2374.  With
        the paper's start set of 200 states instead (``reproduce rns-fig7
        --quick``, N = 100000) proposals do better: acceptance over
        iterations 1601-6400 about 0.72 against 0.49.  On issue 38's 5-d
        target (``tests/_targets.py``, 4 x (2000 + 4000), seeds 1-5) both
        have R-hat at most 1.002; the largest absolute z of a mean or sd was
        4.1 with states (seed 2, the banana's sd) and 2.3 with proposals
        before a switch of weights refreshed the chain's gradient, 1.9 with
        states since (Notes).  A divergent proposal (its energy error
        beyond ``max_energy_error``) lies far outside the posterior, and its
        U would dominate the least squares: fed to the layer on the 5-d
        target, such proposals blew up the recursion and left 1 to 3 chains
        of 4 stuck in 5 of 5 seeds, so they are never fed.
    training : {"auto", "states", "trajectory"}
        The start set: the last ``n_start`` exploration states (the
        paper's), or every point the exploration's trajectories evaluated
        from iteration ``train_from`` on (this chain's: each chain has its
        own network), evenly thinned to 2-4 times (k + 1)(k + 2) / 2, the
        coefficients of a quadratic in the network's k = dim inputs, with
        a diverging trajectory's points left out, as for :class:`RNSHMC`.
        Not in the paper.  "auto" (default): the trajectory points when
        ``n_start`` is below that count (d >= 19 with the default 200),
        else the states.  Measured on the simulated logistic regression
        (N = 100000, d = 50, 1000 warm-up + 5000 draws, defaults): started
        from 200 states, the network's chain accepted 0.04; from 2964
        trajectory points with s = 1989 it accepted 0.79.
        ``info["training_set"]`` has one record per
        chain (kind and counts).  The online updates then add the
        chain's states (``online_data``).
    n_hidden : int or "auto"
        Hidden units s.  "auto" (default): the paper's 1000 with a start
        set of states; with trajectory points RNS-HMC's :func:`auto_hidden`
        (1000 up to d = 35, then 1.5 (d + 1)(d + 2) / 2, at most 4000: 1989
        at d = 50, where s = 1000 accepted 0.31).
    trust : float or None
        Where the network drives (a deviation, not in the paper): inside
        the ellipsoid around the start set (its mean and covariance) that
        holds this fraction of its points, and the exact gradient beyond
        (:class:`~fastsurrogate.core.TrustedDrive`); None: the network
        everywhere, as in the paper.  The chain stays exact either way (the
        leapfrog with any force that depends on q alone is reversible and
        volume-preserving, and the exact U judges); the exact gradient
        where the network has no data is what lets the chain follow its
        tails (Notes).  0.99 (default) costs exact gradients at about 4 %
        of the drive's evaluations on issue 38's 5-d target (at most 13 %
        in a chain), about 0.2 per iteration beside the Metropolis test's
        one; on the simulated logistic regression (N = 100000, d = 50,
        2 x (1000 + 3000), Intel Xeon) at 2.4-3.4 %, the sampling phase
        9.0-9.3 s against 8.0-8.1 s with ``trust=None`` (whole run 6 %
        longer), the same acceptance (0.830) and ESS.  ``info["trust"]``
        has, per chain, the radius and the numbers of the drive's
        evaluations by the network and by the exact U.
    **options
        activation, standardize, delayed_acceptance, train_from, explore,
        ridge, input_scale, transitions, inner, max_tree_depth,
        subspace_points, warmup and the HMC options, as for :class:`RNSHMC`
        (``surrogate`` and the ``guard`` options are refused: each chain
        trains its own network online).  With ``warmup="surrogate-nuts"``
        (a deviation, not in the paper) the chains warm up together with
        surrogate-driven NUTS, and each chain's start set is the points it
        recorded, pooled and evenly thinned to at most 2000 or
        4 (k + 1)(k + 2) / 2, whichever is larger (``n_start``,
        ``training`` and ``explore`` do not apply); the online updates then
        run as above.

    Notes
    -----
    Tails.  On issue 38's 5-d target (``tests/_targets.py``: a banana, a
    skew-normal and a mild funnel block; 4 x (2000 + 4000), Intel Xeon) the
    funnel coordinate's sd came out low more often than its MCSE allows
    with the network driving everywhere (``trust=None``).  It was tail
    mixing that the MCSE does not see, not a wrong target, and ``trust``
    (the default since 2026-11-30) is the fix:

    - the kernel is exact for any drive: 10^5 chains started from exact
      draws, with a drive blind to the funnel (its q4 term a unit
      Gaussian), are still exact draws after 10 iterations (paired z of
      E q^2 within 1.9; ``tests/test_five_d.py``), yet the same drive in
      4 x (1000 + 40000) runs gives the funnel sd 5-12 % low in 5 of 6
      seeds (7 % high in the sixth), R-hat at most 1.006 and z down to
      -8.6: excursions into the funnel's mouth that the drive does not
      follow are rare and long, and the MCSE, estimated from runs that saw
      few of them, is too small;
    - with ``trust=None`` the funnel sd's z averages -1.2 over seeds 11-30
      (exact HMC, same seeds, -0.4; the mean of 20 z has a standard error
      of 0.22), with one z of -5.0 (seed 20), and -0.9 over seeds 31-50
      (exact HMC -0.1).  None of the penalty ten times larger or smaller,
      ``max_points=1600``, ``training="trajectory"``,
      ``online_data="proposals"``, ``n_start=1000``, ``n_hidden=300``,
      ``activation="sigmoid"``, ``input_scale`` 0.25 or 1, ``n_steps=20``,
      ``warmup="surrogate-nuts"`` or ``resync_every=500`` brought it to
      exact HMC's: the network, whatever its training, is poor where it
      has seen few points;
    - with ``trust=0.99`` the exact gradient drives beyond the ball that
      holds 99 % of the start set, and the funnel sd's z averages -0.3
      over seeds 11-30 and -0.4 over seeds 31-50 (exact HMC -0.4 and
      -0.1); the largest absolute z of any mean or sd is 3.3 over seeds
      11-30 and 3.1 over 31-50, 19 of 400 beyond 2 (18 expected), against
      5.0 and 27 of 400 with ``trust=None``.  Exact gradients at 4.1 % of
      the drive's evaluations (at most 13 % in a chain).  With 0.95: -0.4
      and -0.4 at 10 %; with 1 (the farthest start point): -0.9 and -0.3
      at 2.3 %.

    Run longer, or check a surrogate sampler's tails against exact HMC or
    NUTS, when tails matter.
    """

    method = "arns-hmc"
    # the online output layer lives in a C hook of each chain: chains stay in this process
    remote_chains = False

    def __init__(self, potential: Potential, *, n_start: int = 200, update_every: int = 10,
                 exponent: float = 0.5, online_ridge: float | None = None,
                 resync_every: int = 0, online_data: str = "states",
                 max_points: int | None = None, **options: Any) -> None:
        fit_defaulted = {k: k not in options for k in ("input_scale", "ridge")}
        training = _check_options(options)
        hidden_defaulted = check_int_or_auto("n_hidden", options.get("n_hidden", "auto")) == "auto"
        super().__init__(potential, **options)
        if self.transitions is not None and max_points is None:
            raise ValueError("transitions need a fixed surrogate: set max_points (the online "
                             "updates stop there, and surrogate transitions start)")
        self.n_start = check_int("n_start", n_start, 2)
        self.start_kind = ("trajectory" if training == "trajectory" or (
            training == "auto" and self.n_start < quadratic_count(potential.dim))
            or self.warmup_kind != "paper" else "states")
        if "train_from" in options and (self.start_kind != "trajectory"
                                        or self.warmup_kind != "paper"):
            raise ValueError("train_from applies to a start set of exploration trajectory "
                             "points (training='trajectory', or 'auto' in d >= 19); here the "
                             "start set is " + ("the surrogate-nuts warm-up's points"
                                                if self.warmup_kind != "paper" else
                                                f"the last n_start = {self.n_start} states")
                             + " and it would be ignored")
        if self.start_kind == "states" and hidden_defaulted:
            # its online updates cost O(s^2) per point and its start set is
            # n_start points: the paper's s, not RNS-HMC's "auto"
            self.n_hidden = 1000
        if self.start_kind == "states":
            # n_start states: a held-out choice of the input scale on a fifth
            # of them is unreliable, so fixed values (measured on the paper's
            # logistic regression).  Trajectory points keep RNS-HMC's "auto".
            if fit_defaulted["input_scale"]:
                self.input_scale = 0.5
            if fit_defaulted["ridge"]:
                self.ridge = 1e-8
        self.update_every = check_int("update_every", update_every, 1)
        self.exponent = check_number("exponent", exponent)
        if not 0 < self.exponent <= 1:
            raise ValueError("exponent must be in (0, 1]")
        if online_ridge is not None and not (online_ridge >= 0 and np.isfinite(online_ridge)):
            raise ValueError("online_ridge must be None or >= 0")
        self.online_ridge = None if online_ridge is None else float(online_ridge)
        self.resync_every = check_int("resync_every", resync_every, 0)
        if online_data not in ("states", "proposals"):
            raise ValueError("online_data must be 'states' or 'proposals'")
        self.online_data = online_data
        self.max_points = None if max_points is None else check_int("max_points", max_points,
                                                                     self.n_start)

    # -- the algorithm -----------------------------------------------------------
    default_warmup = 400

    def check_sizes(self, n_draws, n_warmup):
        if self.warmup_kind != "paper":
            check_warmup_size(self.method, n_warmup)
            return
        if n_warmup < self.n_start:
            raise ValueError(f"n_warmup must be >= n_start = {self.n_start}, got {n_warmup}")

    def phases(self, run):
        """Each chain on its own: explore, start the surrogate, adapt-and-sample.

        ``info`` holds per-chain switch iterations, the trainer's final
        number of points, the iteration at which the online updates stopped
        (``max_points``; None when they ran to the end) and ``sample_clock``:
        per chain, (iteration, seconds since the sampling phase began) pairs
        at the end of each chunk, since the cost per iteration drops when the
        updates stop; ``training_curve``: per chain, rows (iteration, held-out
        RMSE, RMSE) at the same marks: the RMSE of the network's U against
        the exact U over the span's states, with the output weights from
        before the span (the states were then unseen: held out) and after.
        """
        run.start(proposals=self.online_data == "proposals")
        nuts_warmup = self.warmup_kind == "surrogate-nuts"
        seed = surrogate_seed(run.generators[0])
        if nuts_warmup:
            self._start_sets_from_surrogate_nuts(run)       # sets each chain's state
        else:
            run.state = RNSRunState(record_capacity=self._trajectory_capacity(
                run, self._train_start(run.n_warmup)))
            for ctx in run.ctxs:
                ctx.state = _ARNSChain()

        def chain(ctx):
            if not nuts_warmup:
                self.explore(ctx)
                ctx.state.start_set = self.start_set(ctx)
            with ctx.phase("train"):
                self.start_surrogate(ctx, seed)
            with ctx.phase("sample"):
                self.adapt_and_sample(ctx)

        # The online block updates call dgemm/dsyrk on s x s matrices between
        # chunks of the chain; OpenBLAS's own threads would fight the chains'
        # and the model's threads (measured: 5.4 against 2.5 ms per iteration
        # on 2 cores), so BLAS runs on one thread while the chains run.
        with blas_threads(1):
            run.each_chain(chain, run.n_draws if nuts_warmup else run.n_warmup + run.n_draws,
                           self.method)

    def _start_sets_from_surrogate_nuts(self, run):
        """``warmup="surrogate-nuts"``: the warm-up (all chains together);
        every chain's start set is an even subsample of the points it
        recorded, pooled (at most 2000 or 4 times the quadratic count,
        whichever is larger)."""
        w = surrogate_nuts_warmup(self, run)
        Q, U = w.Q, w.U
        cap = max(4 * quadratic_count(self.potential.dim), 2000)
        if Q.shape[0] > cap:
            idx = even_indices(Q.shape[0], cap)
            Q, U = Q[idx], U[idx]
        for ctx in run.ctxs:        # the warm-up's state gives way to ARNS-HMC's
            ctx.state = _ARNSChain(start_set=(Q, U), training_set={
                "setting": "surrogate-nuts", "kind": "warm-up points",
                "n_states": int(Q.shape[0])})

    def finish(self, run):
        states = [_chain_state(ctx) for ctx in run.ctxs]
        run.info.update({
            "switch_iterations": [st.switches for st in states],
            "n_seen": [st.trainer.n_seen if st.trainer else 0 for st in states],
            "n_start": self.n_start,
            "training_set": [st.training_set for st in states],
            "batch_resolves": [st.trainer.n_resolves if st.trainer else 0 for st in states],
            "adaptation_stopped": [st.stopped for st in states],
            "sample_clock": [np.array(st.clock, dtype=float).reshape(-1, 2) for st in states],
            "training_curve": [np.array(st.curve, dtype=float).reshape(-1, 3)
                               for st in states],
            "surrogates": [st.net for st in states],
            "trust": [trust_record([st.drive]) for st in states]})
        run.surrogate = run.info["surrogates"][0]

    def _trajectory_capacity(self, run, start):
        """Points each chain's recorder keeps (0: no recording): each chain
        fits its own network, so each records 4 times the quadratic count."""
        if self.start_kind != "trajectory":
            return 0
        need = quadratic_count(self.potential.dim)
        return recorder_capacity(4 * need, self.potential.dim)

    def start_set(self, ctx):
        """This chain's start set (Q, U): its last n_start exploration states,
        or its recorded trajectory points (``training``); sets the chain's
        ``info["training_set"]`` record."""
        n_warmup, st = ctx.run.n_warmup, ctx.state
        Q = ctx.warm["draws"][n_warmup - self.n_start:]
        U = ctx.warm["potential"][n_warmup - self.n_start:]
        st.training_set = {"setting": self.training, "kind": self.start_kind,
                           "n_states": int(Q.shape[0])}
        if st.recorder is None:
            return Q, U
        Q, U, counts = trajectory_points(
            [st.recorder], ctx.warm["potential"][self._train_start(n_warmup):],
            self.potential.dim)
        counts["every"] = counts["every"][0]
        st.training_set.update(counts)
        return Q, U

    def start_surrogate(self, ctx, seed):
        """Fit the network to the chain's start set (:meth:`start_set`); set up
        the trainer."""
        st = ctx.state
        Q, U = st.start_set
        if Q.shape[0] < 2:
            raise RuntimeError("the exploration phase produced fewer than 2 training points")
        net = train_random_network(Q, U, n_hidden=self.n_hidden, activation=self.activation,
                                   ridge=self.ridge, standardize=self.standardize,
                                   input_scale=self.input_scale, seed=[seed, ctx.index])
        st.offset = float(U.min())
        F = net.features(Q)
        lam = self.online_ridge
        if self.start_kind == "trajectory":
            # centred rows and the batch fit's penalty: the layer starts from the batch fit
            centre = F.mean(axis=0)
            H = centred_rows(F, centre)
            if lam is None:
                lam = online_penalty(F, net.info["ridge"])
        else:
            # the paper's start (n_start states, fixed input scale and ridge,
            # tuned with this penalty): uncentred rows, the penalty at least
            # 1e-8 times their mean squared norm, far above the batch fit's;
            # the batch fit's penalty made the recursion blow up on
            # posteriordb's garch11 (d = 4, s = 200, 300 states: one chain's
            # U error reached 1e47, 17 % of its iterations divergent)
            centre = None
            H = centred_rows(F, None)
            if lam is None:
                lam = max(net.info["ridge"], 1e-8) * float(np.mean(np.einsum("ij,ij->i", H, H)))
        st.trainer = OnlineOutputLayer(H, U - st.offset, lam, self.update_every,
                                       self.resync_every, centre=centre)
        set_output_weights(net, st.trainer.weights, st.offset, centre)
        st.net = net
        st.drive = net if self.trust is None else TrustedDrive.from_points(
            net, self.potential, Q, self.trust)
        for obj in (net, st.trainer, st.trainer.trainer, st.drive):    # saved with checkpoints
            ctx.track(obj)
        ctx.chain = self._continue_chain(ctx.chain, st.drive)

    def adapt_and_sample(self, ctx):
        """Adapt-and-sample (Algorithm 4) for the kept draws.

        The online updates and the switch coins run in C after each iteration
        (:class:`~fastsurrogate.surrogates._online.OnlineLayerHook`); Python is
        entered at the end of each span of iterations (a clock mark), when
        ``max_points`` stops the updates, and for a batch re-solve (a numerical
        breakdown, or ``resync_every``).
        """
        st, n_draws = ctx.state, ctx.run.n_draws
        trainer, net, offset = st.trainer, st.net, st.offset
        t_start = time.perf_counter()
        hook = None
        if self.max_points is None or trainer.n_seen < self.max_points:
            Q, U = st.start_set
            hook = OnlineLayerHook(net, trainer.trainer, offset, self.update_every,
                                   self.exponent, n_draws, Q, U, max_points=self.max_points,
                                   resync_every=self.resync_every,
                                   proposals=self.online_data == "proposals",
                                   centre=trainer.centre)
            ctx.track(hook)
        else:
            st.stopped = 0                  # the start set already fills max_points
            if self.transitions is not None:
                self.start_transitions(ctx, st.drive)
        span, i = max(self.update_every, 250), 0
        st.curve = []
        while i < n_draws:
            before = (np.array(net.output_weights), float(net.out_bias))
            i0 = i
            i = ctx.run_span(ctx.chain, ctx.main, i, min(i + span, n_draws), "sample", hook)
            st.curve.append(_span_errors(net, ctx.main, i0, i, before))
            if hook is not None and hook.pending and not ctx.replayed:
                # (a span replayed from a checkpoint: its saved state has the result)
                Qh, Uh = hook.history()
                trainer.resolve(trainer.rows(net.features(Qh)), Uh - offset)
                if hook.finish_block():     # new weights: the next trajectory starts
                    ctx.chain.refresh_drive()   # from their gradient (as in the hook)
            st.clock.append((i, time.perf_counter() - t_start))
            if hook is not None:
                trainer.n_seen = hook.n_seen
                st.switches, st.stopped = list(hook.switches), hook.stopped
                if self.transitions is not None and hook.stopped is not None:
                    # the surrogate is fixed from here on: surrogate transitions
                    self.start_transitions(ctx, st.drive)
                    hook = None


def online_penalty(F, ridge):
    """The online layer's absolute ridge penalty for start-set features F (n, s):
    the batch trainer's, ``ridge`` times the centred features' sum of
    squares over s, trace(Fc^T Fc) / s (as in ``_ridge_path``), so the
    online layer starts from the batch fit; at least 1e-12 relative (the
    batch's smallest).

    Until 2026-11 it was max(ridge, 1e-8) times the mean squared norm of the
    uncentred feature rows, a penalty 1e2-1e5 times the batch's (s / n
    times the features' mean second moment over their mean variance, times
    max(ridge, 1e-8) / ridge)."""
    Fc = F - F.mean(axis=0)
    scale = max(float(np.einsum("ij,ij->", Fc, Fc)) / F.shape[1], np.finfo(float).tiny)
    return max(float(ridge), 1e-12) * scale


def _span_errors(net, trace, start, stop, before):
    """(stop, held-out RMSE, RMSE) of the network's U over trace rows start..stop-1,
    with the output weights ``before`` = (v, b) the span began with, and now."""
    Q, U = trace["draws"][start:stop], trace["potential"][start:stop]
    ok = np.isfinite(U) & np.all(np.isfinite(Q), axis=1)
    if not ok.any():
        return (stop, np.nan, np.nan)
    H = net.features(Q[ok])
    v0, b0 = before
    held = H @ v0 + b0 - U[ok]
    now = H @ np.asarray(net.output_weights) + float(net.out_bias) - U[ok]
    return (stop, float(np.sqrt(np.mean(held ** 2))), float(np.sqrt(np.mean(now ** 2))))

