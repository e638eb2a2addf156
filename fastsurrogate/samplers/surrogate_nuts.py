"""Surrogate-driven NUTS: NUTS whose trees run on a cheap surrogate V of U,
each selected point corrected with one exact U, the surrogate trained on the
exact warm-up's own leapfrog points and watched at every iteration.

The transition (csrc/fs_surrogate.c with k = 1): from q, one Stan
multinomial NUTS transition on V alone selects q'; it is accepted with
probability

    min(1, exp(V(q') - U(q') - V(q) + U(q))).

NUTS on V is reversible for exp(-V) (with the momentum refreshed), so the
composite move is reversible for exp(-U) whatever V is (Liu 2001, sec.
9.4.3; Christen & Fox 2005): exact, and a tree of 2^k surrogate leapfrog
steps costs ONE exact value of U.  The log ratio is V's error where the chain
goes, measured at every iteration for nothing; its acceptance is what the
policy watches.

The run (:class:`SurrogateNUTS`, the phases of :class:`~.nuts.NUTS` with a
surrogate):

1. Start.  L-BFGS from chain 0's initial point to the mode of U, and a
   finite-difference Hessian there (2 dim gradients): the Laplace
   approximation N(m, S) (a Pathfinder-like start).  Each chain starts at a
   draw from it, with S as its metric (dense up to ``dense_max``
   dimensions, else its diagonal).  When the optimiser fails, chains start
   where plain NUTS would, with Stan's metric, and V has no base.
2. Exact warm-up, recorded.  Chains run exact NUTS in blocks of ``block``
   iterations; every leapfrog point, with U and grad U, is recorded (2^k per
   tree of depth k), pooled over chains.  After each block V = (Laplace
   Gaussian) + (random-basis network) is fitted to the pooled values AND
   gradients (:func:`~fastsurrogate.surrogates.value_gradient.fit_value_gradient`),
   the newest blocks held out; when its predicted correction acceptance on
   the held-out points reaches ``min_accept``, the chains switch to
   surrogate-driven NUTS.  Fits are made only when the recorded points
   have doubled since the last one, so a run makes O(log n) fits whatever
   happens, and a run whose V never becomes good stays exact NUTS (as it
   would have been) at the price of those few fits.
3. Surrogate warm-up, monitored.  Step size (dual averaging of the inner
   trees' acceptance statistic, as Stan's) and metric (Stan's windows, the
   window's covariance shrunk toward the current metric) go on adapting.
   Each exact correction asks for U and its gradient together (one exact
   call, about U's price where the gradient shares its work: 1.04x for a
   GLM, 1.2x for the elliptic PDE) and its point joins the training data:
   the proposals, accepted or not, are where V's errors matter.
   After each block a chain whose correction acceptance fell below
   ``min_accept`` runs its next block with exact NUTS, recorded, and then
   returns to V; its points join the pooled data, and the refit that
   doubling allows replaces V when it predicts better on the newest points
   than the V in use (and at least ``min_accept``).
4. Sampling.  Each chain keeps the kernel it ended the warm-up with (V, or
   exact NUTS when its last block was exact), time-homogeneous and exact:
   all adaptation (V, step size, metric, the switches) happens in the
   warm-up, as Stan's does.

Every decision depends on the seed and on counts (iterations, points,
acceptance statistics), never on a time measured during the run.  The one
time measurement is the up-front cost check of ``surrogate="auto"``
(:func:`cost_check`), reported in ``result.info["surrogate"]``; ``True`` and
``False`` skip it.
"""
import time
import warnings
from dataclasses import dataclass, asdict

import numpy as np
import scipy.optimize as so

from ..core._hmc import Chain
from ..core._potential import RecordingPotential
from ..surrogates.laplace import guarded_objective, laplace_approximation
from ..surrogates.value_gradient import FITS, even_indices, fit_surrogate, predicted_acceptance
from ..surrogates._network import RandomNetwork
from ._chain import warmup_windows, regularized_metric, surrogate_seed
from ._checks import check_int, check_number

__all__ = ["SurrogatePolicy", "SurrogateNUTS", "cost_check", "check_surrogate",
           "surrogate_nuts_warmup", "check_warmup", "check_warmup_size", "WARMUPS"]


@dataclass(frozen=True)
class SurrogatePolicy:
    """The settings of surrogate-driven NUTS (all of them).

    Attributes
    ----------
    min_accept : float
        The exact correction's acceptance V must reach: predicted on
        held-out warm-up points before V drives, observed over a block after
        (below it the chain runs exact NUTS and the data are refitted).
        0.6: a kernel accepting 60 % of its tree selections costs at most
        about 1 / 0.6 of the iterations exact NUTS needs for the same
        draws, while a tree costs one exact value instead of 2^k gradients.
    block : int
        Warm-up iterations between decisions (fits, switches), 25: Stan's
        first metric window.
    n_hidden : int
        Hidden units of the network on top of the Gaussian base (300; 0:
        the base alone).  The network costs 2 n_hidden dim multiply-adds a
        leapfrog step, and a fit O(points n_hidden^2).
    max_points : int
        Recorded points kept per chain (evenly thinned when more are
        evaluated), 1000.
    cost_ratio : float
        ``surrogate="auto"``: use V when one exact U-and-gradient costs at
        least this many evaluations of a network of ``n_hidden`` units
        (4), measured once before the run.  With V at a quarter of U's
        cost a tree of 2^k steps costs 2^k / 4 + 1 exact calls' time
        against 2^k; the five posteriordb references (Python potentials of
        ratio 5-20 on an Intel Xeon) ran 1.6-23x faster over the whole run
        with the surrogate than without.
    dense_max : int
        Largest dimension with a dense metric (the Laplace covariance),
        200; above it the diagonal.
    laplace : bool
        Start from the Laplace approximation (True); False: Stan's start
        and metric, V without a base.
    fit : str
        What V is on top of the base: ``"network"`` (the random-basis
        network fitted to values and gradients together, the default),
        ``"score"`` (the same network fitted to the gradients alone: the
        gradient (score) matching of Variational HMC, eq. 3.19 there) or
        ``"fitc"`` (the mean of a FITC sparse Gaussian process fitted to
        the values alone, with ``n_hidden`` inducing points: the FITC-HMC
        surrogate of the RNS-HMC paper, section 3.3; its fit costs
        O(points n_hidden^2) per likelihood evaluation, so ``n_hidden=100``
        or fewer suits it).
    """
    min_accept: float = 0.6
    block: int = 25
    n_hidden: int = 300
    max_points: int = 1000
    cost_ratio: float = 4.0
    dense_max: int = 200
    laplace: bool = True
    fit: str = "network"

    def __post_init__(self) -> None:
        a = check_number("min_accept", self.min_accept)
        if not 0.0 < a < 1.0:
            raise ValueError(f"min_accept must be in (0, 1), got {self.min_accept}")
        check_int("block", self.block, 5)
        check_int("n_hidden", self.n_hidden, 0)
        check_int("max_points", self.max_points, 10)
        if not check_number("cost_ratio", self.cost_ratio) >= 0:
            raise ValueError(f"cost_ratio must be >= 0, got {self.cost_ratio}")
        check_int("dense_max", self.dense_max, 0)
        if not isinstance(self.laplace, (bool, np.bool_)):
            raise TypeError(f"laplace must be True or False, got {self.laplace!r}")
        if not isinstance(self.fit, str) or self.fit not in FITS:
            raise ValueError(f"fit must be one of {FITS}, got {self.fit!r}")
        if self.fit == "fitc" and self.n_hidden < 1:
            raise ValueError("fit='fitc' needs n_hidden >= 1 inducing points")


#: the policy of NUTS(policy=None)
DEFAULT_POLICY = SurrogatePolicy()


def check_surrogate(surrogate, policy):
    """``surrogate`` ("auto", True or False) and ``policy`` (None, a dict of
    :class:`SurrogatePolicy` fields, or a SurrogatePolicy)."""
    if not (surrogate == "auto" and isinstance(surrogate, str)) and \
            not isinstance(surrogate, (bool, np.bool_)):
        raise TypeError(f'surrogate must be "auto", True or False, got {surrogate!r}')
    if policy is None:
        policy = DEFAULT_POLICY
    elif isinstance(policy, dict):
        unknown = set(policy) - set(SurrogatePolicy.__dataclass_fields__)
        if unknown:
            raise TypeError(f"unknown policy settings {sorted(unknown)}; the settings are "
                            f"{sorted(SurrogatePolicy.__dataclass_fields__)}")
        policy = SurrogatePolicy(**policy)
    elif not isinstance(policy, SurrogatePolicy):
        raise TypeError(f"policy must be None, a dict or a SurrogatePolicy, got "
                        f"{type(policy).__name__}")
    return (surrogate if isinstance(surrogate, str) else bool(surrogate)), policy


def _calls_for(fn, q, seconds):
    """How many calls of fn(q) take at least ``seconds`` (doubling)."""
    n = 1
    while n < 1 << 20:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(q)
        if time.perf_counter() - t0 >= seconds:
            break
        n *= 2
    return n


def _seconds_per_call(fn, q, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn(q)
    return (time.perf_counter() - t0) / n


def cost_check(potential, q, policy, rounds=3, seconds=1e-3):
    """The one time measurement: exact U-and-gradient against a network of
    the policy's size, in batches of about ``seconds`` each, interleaved,
    the fastest of ``rounds`` batches each (the least disturbed by other
    load; about 10 ms in all).  Returns a dict with both times, their ratio
    and the decision (ratio >= ``policy.cost_ratio``)."""
    d = potential.dim
    net = RandomNetwork.random(d, max(policy.n_hidden, 1), seed=0)
    fns = (potential.value_and_grad, net.value_and_grad)
    counts = [_calls_for(f, q, seconds) for f in fns]
    tu, tv = (min(_seconds_per_call(f, q, n) for _ in range(rounds))
              for f, n in zip(fns, counts))
    ratio = tu / max(tv, 1e-12)
    return {"exact_seconds": tu, "network_seconds": tv, "ratio": float(ratio),
            "cost_ratio": policy.cost_ratio, "used": bool(ratio >= policy.cost_ratio),
            "decided_by": "cost check"}


class _ChainState:
    """What the policy keeps per chain between blocks: the chain's
    ``ctx.state`` while surrogate-NUTS phases run (a paper's sampler
    replaces it with its own after :func:`surrogate_nuts_warmup`)."""

    def __init__(self, potential, capacity):
        # one block's leapfrog points, evenly thinned to `capacity`
        self.recorder = RecordingPotential(potential, capacity, decimate=True)
        # the exact corrections of a surrogate warm-up block: each asks for U
        # and its gradient (about U's price where they share work) and is kept
        self.judge = RecordingPotential(potential, capacity, decimate=True,
                                        record_values=True)
        self.mode = "exact"
        self.blocks = []            # (Q, G, U) of each block, oldest first
        self.gradient_calls = 0     # exact U-and-gradient calls (the exact blocks' leapfrog
        #                             steps, the warm-up's corrections)
        self.value_calls = 0        # exact U-only calls (the sampling's corrections)
        self.history = []           # (first row, end row, kernel, mean acceptance)
        self.n_new = 0              # blocks added since the last fit

    def take_block(self, recorder=None):
        """Move a recorder's points (the leapfrog's, or with ``judge`` the
        corrections') into ``blocks``; True when there were any."""
        rec = self.recorder if recorder is None else recorder
        q, g, u = rec.points()
        if rec is self.recorder:
            self.gradient_calls += rec.n_seen
        rec.clear()
        keep = np.isfinite(u)
        if keep.any():
            self.blocks.append((q[keep], g[keep], u[keep]))
            self.n_new += 1
            return True
        return False


def _state(ctx):
    """The chain's _ChainState, None when the phases stopped before it had one."""
    return ctx.state if isinstance(ctx.state, _ChainState) else None


class SurrogateNUTS:
    """The phases of NUTS with a surrogate (see the module docstring).

    ``sampler`` is the :class:`~.nuts.NUTS` whose options apply (step
    size start, target_accept, max_tree_depth, max_energy_error).
    """

    def __init__(self, sampler, policy, decision):
        self.sampler = sampler
        self.policy = policy
        self.decision = decision
        self.potential = sampler.potential
        self.V = None
        self.fit_info = None
        self.fits = []
        self.n_at_last_try = 0
        self.laplace = None
        self.exact_calls = {"laplace": 0}

    # -- set-up ----------------------------------------------------------------
    def _start(self, run):
        """The Laplace approximation (pooled) and each chain's start and metric."""
        d = self.potential.dim
        q0 = np.array([ctx.q0 for ctx in run.ctxs])
        metric = None
        if self.policy.laplace:
            with run.phase("laplace"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = self._best_mode(q0)
                try:
                    self.laplace = laplace_approximation(self.potential, start, hessian="fd",
                                                         maxiter=1000)
                except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                    self.laplace = None
            if self.laplace is not None:
                self.exact_calls["laplace"] += int(self.laplace.info.get("n_evaluations", 0))
                ok = self.laplace.info.get("optimizer", {})
                if isinstance(ok, dict) and ok.get("success") is False and \
                        not np.all(np.isfinite(self.laplace.cov)):
                    self.laplace = None
        if self.laplace is not None:
            lap = self.laplace
            metric = lap.cov if d <= self.policy.dense_max else np.diag(lap.cov).copy()
            for ctx in run.ctxs:
                q = lap.sample(1, seed=ctx.generator)[0]
                u, g = self.potential.value_and_grad(q)
                self.exact_calls["laplace"] += 1
                if np.isfinite(u) and np.all(np.isfinite(g)):
                    ctx.q0 = q
        self.metric0 = metric

    def _best_mode(self, q0):
        """The lowest-U end of L-BFGS runs from every chain's start.

        One optimisation from one start can end in a minor mode (an ODE
        posterior whose trajectory misses the data has one, with a large
        noise scale), and every chain would start there; the chains' own
        starts, as Stan draws them, find the main mode when any does.  Their
        calls count as the Laplace phase's."""
        if q0.shape[0] == 1:
            return q0[0]
        fun, calls = guarded_objective(self.potential)
        best, best_u = q0[0], np.inf
        for q in q0:
            try:
                res = so.minimize(fun, q, jac=True, method="L-BFGS-B",
                                  options=dict(maxiter=1000))
            except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                continue
            if np.isfinite(res.fun) and res.fun < best_u:
                best, best_u = np.asarray(res.x, dtype=np.float64), float(res.fun)
        self.exact_calls["laplace"] += calls[0]
        return best

    def _exact_chain(self, ctx, st, q, step, inv_metric):
        s = self.sampler
        return Chain(st.recorder, st.recorder, q, ctx.generator, step_size=step,
                     inv_metric=inv_metric, max_energy_error=s.max_energy_error,
                     algorithm="nuts", max_tree_depth=s.max_tree_depth)

    def _surrogate_chain(self, ctx, q, step, inv_metric):
        s = self.sampler
        return Chain(self.V, ctx.state.judge, q, ctx.generator, step_size=step,
                     inv_metric=inv_metric, max_energy_error=s.max_energy_error,
                     algorithm="nuts", max_tree_depth=s.max_tree_depth, surrogate_steps=1)

    def _switch(self, ctx, mode):
        """Move ctx.chain to `mode` ("exact" / "surrogate") at the same state."""
        st = ctx.state
        old = ctx.chain
        if mode == "surrogate":
            new = self._surrogate_chain(ctx, old.position, old.step_size, old.inv_metric)
            st.gradient_calls += 1            # U (and, recorded, its gradient) at the chain's point
        else:
            new = self._exact_chain(ctx, st, old.position, old.step_size, old.inv_metric)
        # the step size's dual averaging goes on where it was
        state, kept = new.get_state(), old.get_state()
        for key in ("step_size", "adapting", "dual_avg"):
            state[key] = kept[key]
        new.set_state(state)
        ctx.chain = new
        st.mode = mode

    # -- the phases ------------------------------------------------------------
    def phases(self, run):
        self.run_warmup(run)
        run.each_chain(self._sample, run.n_draws, "nuts with surrogate")

    def run_warmup(self, run):
        """Phases 1-3: the start, the exact and the surrogate warm-up; each
        chain's ``ctx.chain`` ends at its adapted state and kernel."""
        self._start(run)
        pol = self.policy
        for ctx in run.ctxs:
            st = _ChainState(self.potential, pol.max_points)
            ctx.state = st
            ctx.chain = self._exact_chain(ctx, st, ctx.q0, 1.0 if self.sampler.step_size is None
                                          else self.sampler.step_size, self.metric0)
        run.each_chain(self._find_step, 0, "nuts (step size)")
        self._warmup(run)

    def training_points(self, run):
        """Every point the warm-up recorded, all chains, below the energy
        cut (:meth:`_energy_cut`): ``(Q, G, U)``, shapes (n, dim), (n, dim),
        (n,)."""
        blocks = [b for ctx in run.ctxs for b in ctx.state.blocks]
        if not blocks:
            d = self.potential.dim
            return np.empty((0, d)), np.empty((0, d)), np.empty(0)
        Q, G, U = (np.concatenate(x) for x in zip(*blocks))
        keep = U <= self._energy_cut(U)
        return Q[keep], G[keep], U[keep]

    def _find_step(self, ctx):
        if self.sampler.step_size is None:
            self._search_step(ctx)
        ctx.chain.start_adaptation(self.sampler.target_accept)

    @staticmethod
    def _search_step(ctx):
        """Stan's step-size heuristic; an exact chain's trial steps are
        counted as exact calls but are no training data (called between
        blocks, when the recorder holds nothing of the chain's)."""
        ctx.chain.find_step_size()
        st = ctx.state
        if st.mode == "exact":
            st.gradient_calls += st.recorder.n_seen
            st.recorder.clear()

    def _blocks(self, n_warmup):
        """Block ends within the warm-up: every ``block`` iterations and at
        Stan's metric-window ends.  Returns (ends, window ends)."""
        first, windows = warmup_windows(n_warmup)
        ends = set(range(self.policy.block, n_warmup, self.policy.block))
        ends.update(windows)
        ends.add(n_warmup)
        return sorted(e for e in ends if 0 < e <= n_warmup), set(windows), first

    def _warmup(self, run):
        n = run.n_warmup
        if n == 0:
            return
        ends, windows, first = self._blocks(n)
        # V changes only while a metric window is open to adapt to it
        self.last_refit_row = max(windows) if windows else 0
        start_row = 0
        window_start = first
        for end in ends:
            def block(ctx, a=start_row, b=end):
                with ctx.phase("warmup"):
                    ctx.run_span(ctx.chain, ctx.warm, a, b, "warmup")
            run.each_chain(block, end - start_row, f"warm-up {end}/{n}")
            self._decide(run, start_row, end, final=end == ends[-1])
            if end in windows:
                for ctx in run.ctxs:
                    self._update_metric(ctx, window_start, end)
                window_start = end
            start_row = end
        for ctx in run.ctxs:
            ctx.chain.finish_adaptation()

    def _update_metric(self, ctx, a, b):
        draws = ctx.warm["draws"][a:b]
        cur = ctx.chain.inv_metric
        if cur is None:
            new = regularized_metric(draws, "diag")
        elif cur.ndim == 2:
            n, d = draws.shape
            w = n / (n + d + 5.0)
            S = np.cov(draws, rowvar=False).reshape(d, d) if n > 1 else cur
            new = w * S + (1.0 - w) * cur
        else:
            n, d = draws.shape
            w = n / (n + 5.0)
            new = w * draws.var(axis=0, ddof=1) + (1.0 - w) * cur
        ctx.chain.set_inv_metric(new)
        self._search_step(ctx)
        ctx.chain.start_adaptation(self.sampler.target_accept)

    def _decide(self, run, a, b, final=False):
        """After rows a..b of every chain: watch each chain, then fit.  After
        the last block a chain whose last block was exact (V failed it just
        before) stays exact for the sampling."""
        pol = self.policy
        new_data = False
        for ctx in run.ctxs:
            st = ctx.state
            tr = ctx.warm
            acc = float(np.mean(tr["accept_prob"][a:b]))
            st.history.append((a, b, st.mode, acc))
            if st.mode == "surrogate":
                st.gradient_calls += int(tr["judge_evaluated"][a:b].sum())   # U + gradient
                new_data |= st.take_block(st.judge)
                if acc < pol.min_accept:
                    self._switch(ctx, "exact")      # one exact block, recorded
            else:
                new_data |= st.take_block()
                if self.V is not None and not final:
                    self._switch(ctx, "surrogate")  # back to V after it
        if new_data and (self.V is None or b <= self.last_refit_row):
            self._fit(run, b)

    def _fit(self, run, row):
        """Fit V to the pooled points when they have doubled since the last
        fit (the first time: at once); keep it when it predicts
        ``min_accept`` and beats the V in use on the same held-out points."""
        n_recorded = sum(q.shape[0] for c in run.ctxs for q, _, _ in c.state.blocks)
        if n_recorded < 2 * self.n_at_last_try:
            for c in run.ctxs:          # their blocks are training data next time
                c.state.n_new = 0
            return
        self.n_at_last_try = n_recorded
        Q, G, U, held = self._pooled(run)
        if Q.shape[0] < 8 or held.all() or not held.any():
            return
        base = None if self.laplace is None else self.laplace.potential
        with run.phase("fit"):
            try:
                scales = {} if self.fit_info is None or "input_scale" not in self.fit_info \
                    else {"input_scales": (self.fit_info["input_scale"],)}
                V, info = fit_surrogate(
                    Q, U, G, fit=self.policy.fit, base=base, n_hidden=self.policy.n_hidden,
                    held_out=held,
                    seed=surrogate_seed(run.ctxs[0].generator) + len(self.fits), **scales)
            except (ValueError, np.linalg.LinAlgError) as exc:
                self.fits.append({"row": row, "n_points": int(Q.shape[0]), "error": str(exc)})
                return
        info["row"] = row
        if self.V is not None:
            Qh, Uh = Q[held], U[held]
            info["current_acceptance"] = predicted_acceptance(
                Uh - np.array([self.V.value(q) for q in Qh]))
        self.fits.append(info)
        if info["predicted_acceptance"] < max(self.policy.min_accept,
                                              info.get("current_acceptance", 0.0)):
            return
        info["kept"] = True
        self.V, self.fit_info = V, info
        for ctx in run.ctxs:
            self._switch(ctx, "surrogate")

    def _pooled(self, run):
        """The chains' recorded points and which are held out: the blocks
        recorded since the last decision (when older ones exist; else the
        last third of each chain's points).  Older blocks are evenly thinned
        to ``max_points`` per chain."""
        cap = self.policy.max_points
        parts = []                       # (Q, G, U, held)
        for ctx in run.ctxs:
            st = ctx.state
            blocks, n_new = st.blocks, st.n_new
            st.n_new = 0
            if not blocks:
                continue
            old, new = blocks[:len(blocks) - n_new], blocks[len(blocks) - n_new:]
            if old:
                Q, G, U = (np.concatenate(x) for x in zip(*old))
                if Q.shape[0] > cap:
                    idx = even_indices(Q.shape[0], cap)
                    Q, G, U = Q[idx], G[idx], U[idx]
                parts.append((Q, G, U, False))
            for Q, G, U in new:
                parts.append((Q, G, U, True))
        if all(p[3] for p in parts):
            split = []
            for Q, G, U, _ in parts:
                k = (2 * Q.shape[0]) // 3
                split += [(Q[:k], G[:k], U[:k], False), (Q[k:], G[k:], U[k:], True)]
            parts = split
        Q = np.concatenate([p[0] for p in parts])
        G = np.concatenate([p[1] for p in parts])
        U = np.concatenate([p[2] for p in parts])
        held = np.concatenate([np.full(p[0].shape[0], p[3]) for p in parts])
        keep = U <= self._energy_cut(U)
        return Q[keep], G[keep], U[keep], held[keep]

    def _energy_cut(self, U):
        """The highest U a training point may have: U_min + dim + 6 sqrt(dim) + 10.

        A trajectory starts at an energy H = U + K with U - U_min about
        Gamma(dim / 2) and K about Gamma(dim / 2): H - U_min has mean dim
        and sd sqrt(dim), and U <= H along a trajectory that does not
        diverge.  Points above the cut come from diverging trajectories or
        the first steps of a step-size search; a handful of them (U - B of
        1e5 where the typical set's spread is 1) would dominate the fit."""
        d = self.potential.dim
        u_min = float(np.min(U))
        if self.laplace is not None and np.isfinite(self.laplace.u_map):
            u_min = min(u_min, self.laplace.u_map)
        return u_min + d + 6.0 * np.sqrt(d) + 10.0

    def _sample(self, ctx):
        ctx.state.judge.active = False     # V is fixed: U alone from here
        with ctx.phase("sample"):
            ctx.run_span(ctx.chain, ctx.main, 0, ctx.run.n_draws, "sample")

    # -- the report --------------------------------------------------------------
    def exact_calls_per_chain(self, run):
        """Exact calls of each chain: (U-and-gradient, U-only)."""
        out = []
        for ctx in run.ctxs:
            st = _state(ctx)
            if st is None:
                out.append((0, 0))
                continue
            grad = st.gradient_calls + st.recorder.n_seen
            value = st.value_calls
            n = ctx.done.get("sample", 0)
            if st.mode == "surrogate" and ctx.main is not None:
                value += int(ctx.main["judge_evaluated"][:n].sum())
            out.append((int(grad), int(value)))
        return out

    def finish(self, run):
        calls = self.exact_calls_per_chain(run)
        chains = []
        for ctx, (g, v) in zip(run.ctxs, calls):
            st = _state(ctx)
            if st is None:
                continue
            surrogate_rows = sum(b - a for a, b, mode, _ in st.history if mode == "surrogate")
            n = ctx.done.get("sample", 0)
            if st.mode == "surrogate":
                surrogate_rows += n
            chains.append({"sampling_kernel": st.mode, "gradient_calls": g, "value_calls": v,
                           "surrogate_iterations": int(surrogate_rows),
                           "warmup_blocks": [{"rows": (a, b), "kernel": mode,
                                              "acceptance": acc}
                                             for a, b, mode, acc in st.history]})
        lap = self.exact_calls["laplace"]
        info = dict(self.decision)
        info.update(
            policy=asdict(self.policy), used=True, fits=self.fits, fit=self.fit_info,
            chains=chains, laplace_calls=lap,
            exact_gradient_calls=lap + sum(c["gradient_calls"] for c in chains),
            exact_value_calls=sum(c["value_calls"] for c in chains),
            n_refits=max(sum(1 for f in self.fits if f.get("kept")) - 1, 0))
        info["exact_calls"] = info["exact_gradient_calls"] + info["exact_value_calls"]
        total = sum(run.n_warmup + ctx.done.get("sample", 0) for ctx in run.ctxs)
        info["surrogate_share"] = (sum(c["surrogate_iterations"] for c in chains) / total
                                   if total else 0.0)
        run.info["surrogate"] = info
        run.surrogate = self.V


#: the warm-ups of the papers' samplers (their ``warmup`` option)
WARMUPS = ("paper", "surrogate-nuts")


def check_warmup(warmup, method):
    """``warmup`` of a paper's sampler: "paper" (its own exploration) or
    "surrogate-nuts" (:func:`surrogate_nuts_warmup`)."""
    if not isinstance(warmup, str) or warmup not in WARMUPS:
        raise ValueError(f"{method}: warmup must be one of {WARMUPS}, got {warmup!r}")
    return warmup


def check_warmup_size(method, n_warmup):
    """``warmup="surrogate-nuts"`` needs at least two blocks of warm-up."""
    need = 2 * DEFAULT_POLICY.block
    if n_warmup < need:
        raise ValueError(f"{method} with warmup='surrogate-nuts' needs n_warmup >= {need}, "
                         f"got {n_warmup}")


def surrogate_nuts_warmup(sampler, run):
    """The warm-up of surrogate-driven NUTS for a paper's sampler
    (``warmup="surrogate-nuts"``, not in the papers): the Laplace start,
    exact NUTS recorded in blocks, V fitted to values and gradients and
    driving NUTS once good, every correction recorded; Stan's step size and
    metric adaptation throughout (target acceptance 0.8, the sampler's
    ``max_tree_depth`` and ``max_energy_error``), with the default
    :class:`SurrogatePolicy`.

    Each chain's ``ctx.chain`` ends at its adapted state, step size and
    metric, from which the sampler's own kernel continues; its ``ctx.state``
    is the warm-up's, for the sampler to replace with its own.  Returns a
    :class:`WarmupPoints`: every recorded point, pooled (``Q``, ``G``,
    ``U``: shapes (n, dim), (n, dim), (n,)), for the sampler's own
    surrogate, and the Laplace approximation of the start (or None).
    ``run.info["warmup"]`` says what the warm-up did (exact calls, fits,
    the share of its iterations V drove).
    Call after ``run.start()``.
    """
    opts = _WarmupOptions(sampler)
    engine = SurrogateNUTS(opts, DEFAULT_POLICY,
                           {"used": True, "decided_by": 'warmup="surrogate-nuts"'})
    engine.run_warmup(run)
    Q, G, U = engine.training_points(run)
    calls = engine.exact_calls_per_chain(run)
    surrogate_rows = sum(b - a for ctx in run.ctxs
                         for a, b, mode, _ in ctx.state.history if mode == "surrogate")
    n_rows = run.n_warmup * len(run.ctxs)
    run.info["warmup"] = {
        "kind": "surrogate-nuts", "n_points": int(Q.shape[0]), "fits": engine.fits,
        "laplace_calls": engine.exact_calls["laplace"],
        "exact_gradient_calls": engine.exact_calls["laplace"] + sum(g for g, _ in calls),
        "exact_value_calls": sum(v for _, v in calls),
        "surrogate_share": surrogate_rows / n_rows if n_rows else 0.0}
    return WarmupPoints(Q, G, U, engine.laplace)


@dataclass(frozen=True)
class WarmupPoints:
    """What :func:`surrogate_nuts_warmup` leaves a paper's sampler."""
    Q: np.ndarray
    G: np.ndarray
    U: np.ndarray
    laplace: object


class _WarmupOptions:
    """The NUTS options :class:`SurrogateNUTS` reads, for a paper's sampler."""

    def __init__(self, sampler):
        self.potential = sampler.potential
        self.step_size = None
        self.target_accept = 0.8
        self.max_tree_depth = getattr(sampler, "max_tree_depth", 10)
        self.max_energy_error = sampler.max_energy_error
