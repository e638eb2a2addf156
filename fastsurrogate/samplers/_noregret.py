"""No-regret defaults of the exact surrogate samplers (RNS-HMC, ARNS-HMC, NNgHMC).

A surrogate pays off only when the exact gradient is expensive and the
surrogate is good.  With ``no_regret`` on (the default: ``no_regret=None``
resolves to :data:`DEFAULT`, True) the samplers explore with exact NUTS
(Stan's multinomial NUTS: the exact baseline a user
would otherwise run) and decide, from measurements made in the same run,
whether to switch to the surrogate or to keep drawing with an exact chain
(the fallback).  The exploration's last, timed window (every row after the
adaptation) runs half with NUTS and half with exact HMC at NUTS's step size
and metric (the sampler's ``n_steps``; NNgHMC's exploration spans
between trainings each do so, pooled), and the better of the two by min
ESS per second (:func:`exact_windows`, :func:`choose_exact`) is what the
rule measures the surrogate against and falls back to: NUTS is not always
the best exact sampler (fixed-length HMC beat it 2.0x on the simulated
logistic regression, 1.4x on garch11, 1.2x on eight_schools, whole runs),
and a surrogate that beats NUTS but not HMC has not paid off.  "NUTS" below
is that chosen exact sampler.  The rule, in two checks:

1. Cost (before training, so a hopeless case pays no training):
   ``c_grad``, ``c_value`` (seconds per exact U + gradient, per exact U) and
   ``c_sur`` (seconds per surrogate gradient of a network of the size that
   would be trained) are timed on the same state through the same Python
   entry point.  One surrogate iteration costs at least
   ``c_value + L_mean * c_sur`` (one exact U for the Metropolis test, L_mean
   surrogate leapfrog steps); one NUTS iteration of the exploration cost
   ``n_mean * c_grad`` (n_mean its mean leapfrog steps).  Fall back when the
   surrogate iteration is not at least ``COST_FACTOR`` (2) times cheaper:
   HMC with random path lengths at NUTS's step size rarely mixes better per
   iteration than NUTS, so a smaller saving cannot repay training.  Fall
   back also when the largest possible saving over the kept draws,
   ``n_draws * (NUTS iteration - surrogate iteration)``, is below
   ``BUDGET_FACTOR`` (2) times the predicted cost of training and trial (a
   saving only equal to that cost would leave the run no faster at best,
   and the largest saving assumes the surrogate chain mixes per iteration
   as well as NUTS; measured on garch11, where ARNS-HMC passed a break-even
   check and ended at 0.69x NUTS's whole-run rate): training is predicted as
   ``TRAIN_FACTOR * t_chol * (1 + n_points / s)`` with ``t_chol`` the timed
   Cholesky factorisation of an s x s matrix (s = n_hidden; 1000 for the
   gradient network, whose Adam / L-BFGS training is of that order), a rough
   figure calibrated on the random network's trainer (measured ratio 6-26
   for 400-2000 points, s = 1000).
2. Trial (after training): every chain runs ``trial_length`` iterations
   driven by the surrogate (exact Metropolis test; the rows are not kept),
   and the minimum over parameters of the bulk ESS per second of those rows
   (pooled over chains) is compared with the same figure for the
   exploration's timed exact window (no adaptation in it), the trial's
   estimated on windows as long as the exact one
   (:func:`matched_min_ess_rate`: the min over parameters of a short
   window's ESS is biased low, and a trial estimated whole was favoured).  The two rates predict the whole run's min ESS per second
   either way: with ``P`` the seconds already paid (exploration, training,
   trial: the same either way) and ``T_s``, ``T_n`` the seconds the kept
   draws would take with the surrogate or with NUTS (n_draws times the
   measured seconds per iteration), ``r_s T_s / (P + T_s)`` against
   ``r_n T_n / (P + T_n)``.  Switch when the first is at least
   ``SWITCH_FACTOR`` (1.25) times the second, else fall back.  With little
   paid this is the ratio of the rates; when the paid part dominates (a
   cheap posterior, where exploration is most of the run) it becomes the
   ratio of ESS per iteration, and a surrogate chain several times cheaper
   per iteration but mixing worse per iteration loses (measured on
   posteriordb's garch11: trial rates 6-51x NUTS's, whole runs 0.21-0.75x
   NUTS's before this).  A switch verdict is final only after the trial has
   run as long as the exact window it is compared with (or
   ``MAX_TRIAL_ROUNDS`` rounds): a slowly mixing chain's ESS is overstated
   by a short window (garch11: min ESS 77 in the 200-iteration trial, 77 in
   the 500 kept draws).  So is a near miss (a ratio within a factor 2 of
   the bar, ``NEAR_MISS``): at d = 50 the min over parameters of one
   round's ESS is a low estimate (:func:`extend_trial`).  The margin above 1 covers the remaining noise: the
   exact side is estimated from the exploration's post-adaptation rows, and
   NUTS's min ESS per iteration over 200 rows of garch11 ranges 0.18-0.62
   (5-95 % over windows of a long run whose own figure is 0.46), so a
   predicted gain of 10 % (the margin until this change) is not evidence of
   a gain.  1.25 is a judgement, not a fit: it must exceed the 10 % that
   let garch11's switches through, and larger margins give up real gains
   (arK's switches were predicted at 1.8-6x).

A fallback sets ``result.info["fallback"] = {"reason": ..., "measured": {...}}``
and the kept draws come from the chosen exact chain (NUTS or HMC), continued from
where the chain is (step size as adapted; every surrogate sampler
re-estimates the metric from the adaptation's last window and the
exploration's later NUTS rows first, :func:`refit_fallback_metric`); a switch records the
measurements in ``result.info["no_regret"]``.  Either way the draws are
exact: the decision is made before the kept draws, on the warm-up's data.
"""
import time

import numpy as np

from ..diagnostics import ess_bulk

__all__ = ["COST_FACTOR", "SWITCH_FACTOR", "DEFAULT", "resolve", "seconds_per_call", "cost_check",
           "min_ess_rate", "trial_verdict", "steps_per_iteration"]

COST_FACTOR = 2.0
BUDGET_FACTOR = 2.0
TRAIN_FACTOR = 10.0
SWITCH_FACTOR = 1.25       # predicted whole-run ratio needed to switch (see trial_verdict)
ESS_FLOOR = 20.0          # trial min ESS below which no rate is estimated
ACCEPT_FRACTION = 0.5     # trial acceptance / exploration acceptance, at least
MAX_TRIAL_ROUNDS = 8      # rounds of trial_length iterations a trial may run (extend_trial)
NEAR_MISS = 0.5           # a ratio >= NEAR_MISS x SWITCH_FACTOR is not final at once (extend_trial)
# What ``no_regret=None`` (the samplers' default) means.  Checkpointed runs
# (``checkpoint=`` / ``resume=``) turn a defaulted rule off: its decision is
# made on wall-clock time, which a resumed run cannot replay.
DEFAULT = True


def explore_options(sampler):
    """Chain options of a surrogate sampler's exact exploration (NUTS or HMC)."""
    if sampler.explore_with == "nuts":
        return {"algorithm": "nuts", "max_tree_depth": sampler.max_tree_depth}
    return {}


def resolve(no_regret, explore):
    """The samplers' ``no_regret`` / ``explore`` arguments -> (no_regret,
    explore, defaulted): None takes :data:`DEFAULT`; the exploration kernel
    defaults to NUTS under the rule and to the paper's HMC without it."""
    from ._base import check_explore, check_flag
    defaulted = no_regret is None
    on = DEFAULT if defaulted else check_flag("no_regret", no_regret)
    explore_defaulted = explore is None
    explore = check_explore(("nuts" if on else "hmc") if explore is None else explore)
    return on, explore, (defaulted, explore_defaulted)


class paper_algorithm_for_checkpoints:
    """Context: a sampler whose ``no_regret`` was defaulted runs the paper's
    algorithm (rule off, HMC exploration unless asked) for a checkpointed
    run, and gets its settings back afterwards.  An explicit
    ``no_regret=True`` is left alone (the checkpoint set-up refuses it)."""

    def __init__(self, sampler, active):
        self.sampler, self.active = sampler, active
        self.saved = None

    def __enter__(self):
        s = self.sampler
        defaulted = getattr(s, "_no_regret_defaulted", (False, False))
        if self.active and defaulted[0] and s.no_regret:
            self.saved = (s.no_regret, s.explore_with)
            s.no_regret = False
            if defaulted[1]:
                s.explore_with = "hmc"
        return s

    def __exit__(self, *exc):
        if self.saved is not None:
            self.sampler.no_regret, self.sampler.explore_with = self.saved
        return False


def seconds_per_run(fn, budget=0.02, max_calls=200):
    """Median seconds of ``fn()`` over 5 batches, within about ``budget`` seconds."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-8)
    per_batch = int(min(max(budget / 5 / one, 1), max_calls))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(per_batch):
            fn()
        times.append((time.perf_counter() - t0) / per_batch)
    return float(np.median(times))


def seconds_per_call(fn, q, budget=0.02, max_calls=200):
    """Median seconds of ``fn(q)`` (:func:`seconds_per_run`)."""
    return seconds_per_run(lambda: fn(q), budget, max_calls)


def steps_per_iteration(n_steps, random_n_steps):
    """Mean surrogate leapfrog steps of an HMC iteration."""
    return (n_steps + 1) / 2.0 if random_n_steps else float(n_steps)


def matched_steps(nuts_steps, random_n_steps, cap=1023):
    """Surrogate leapfrog steps per iteration that travel as far as the
    exploration's NUTS trajectories: NUTS's mean steps (at the step size
    the surrogate chain inherits) as the mean of L, so n_steps = 2 mean - 1
    when L is drawn from 1..n_steps.  With HMC's default n_steps = 10 at
    the step size NUTS adapted, the surrogate chain moves a fraction of a
    NUTS trajectory per iteration (measured on a9a-60d: NUTS 109-187 steps
    per iteration, the surrogate chain's min ESS 1.5 in 500 draws at
    acceptance 0.88).  Surrogate steps cost no data pass, so matching them
    keeps the surrogate iteration cheap."""
    n = 2.0 * float(nuts_steps) - 1.0 if random_n_steps else float(nuts_steps)
    return int(min(max(round(n), 1), cap))


def exploration_steps(ctxs):
    """Mean leapfrog steps per iteration over the chains' timed exploration rows."""
    steps = [c.warm["n_steps"][c.exact_rows[0]] for c in ctxs
             if getattr(c, "exact_rows", None) and c.exact_rows[0].size]
    return float(np.mean(np.concatenate(steps))) if steps else None


def training_seconds(s, n_points):
    """Predicted seconds of a training on n_points with s hidden units (rough)."""
    m = min(int(s), 400)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((m, m)) / np.sqrt(m) + 2.0 * np.eye(m)
    S = A @ A.T
    import scipy.linalg
    from ..core._blas_threads import blas_threads
    # SciPy's LAPACK on one BLAS thread, as the fits run
    # (train_random_network(blas_threads=1)).  This used NumPy's Cholesky,
    # whose OpenBLAS threads spin: at load 5 a 400 x 400 factorisation took
    # 0.52-0.64 s against 0.008-0.012 s here, so the predicted training was
    # ~50x too long (a9a-60d: 337 s predicted for NNgHMC, 56 s measured) and
    # nearly every run fell back on "budget".
    with blas_threads(1):
        scipy.linalg.cholesky(S, lower=True)
        t0 = time.perf_counter()
        scipy.linalg.cholesky(S, lower=True)
        t_chol = (time.perf_counter() - t0) * (s / m) ** 3
    return TRAIN_FACTOR * t_chol * (1.0 + n_points / s)


def gradient_training_seconds(Q, n_hidden, blocks, activation, max_iter, holdout=0.1):
    """Predicted seconds of ``fit_gradient_network`` (NNgHMC's built-in
    trainer) on the points Q (n, dim): one loss-and-gradient pass over the
    training points, timed with a network of the trained size, times
    ``max_iter`` iterations (L-BFGS iterations or Adam epochs, each about one
    pass) and 1.2 for line-search evaluations and the held-out loss.  An upper
    figure: early stopping often ends sooner.  The Cholesky proxy of
    :func:`training_seconds` (calibrated on the random network's ridge
    fits) predicted 1.08 s for a training that took 2.6 s (posteriordb
    garch11, 2378 points: L-BFGS on 4-d inputs costs per point what a
    Cholesky does not see)."""
    from ..surrogates._mlp import GradientNetwork, split_blocks
    from ..core._blas_threads import blas_threads
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    n, dim = Q.shape
    m = max(int(round((1.0 - holdout) * n)), 2)
    X = Q[:min(m, 2000)]            # the pass is linear in the points: time a slice
    net = GradientNetwork.random(dim, int(n_hidden), split_blocks(dim, int(blocks)), activation,
                                 seed=0)
    theta = net.get_params()
    with blas_threads(1):
        t_eval = seconds_per_call(
            lambda x: net.loss_and_grad(theta, x, x, 0.0, standardized=True), X,
            budget=0.05, max_calls=20)
    return 1.2 * int(max_iter) * t_eval * (m / X.shape[0])


def cost_check(potential, surrogate, q, nuts_steps, surrogate_steps, n_draws=None,
               n_points=0, s=1000, trial_length=0, train_seconds=None, extra_seconds=0.0,
               exact_name="NUTS"):
    """The cost check (rule 1): None to go on, or the fallback record.

    potential : the exact target; surrogate : a network of the trained size
    (weights need not be trained); q : (dim,) a state of the exploration;
    nuts_steps : mean leapfrog steps per iteration of the exact sampler
    (``exact_name``, NUTS or HMC: :func:`choose_exact`);
    surrogate_steps : mean surrogate steps per surrogate iteration;
    train_seconds : a predicted training time (default: :func:`training_seconds`);
    extra_seconds : further seconds per surrogate iteration (ARNS-HMC's online updates).
    """
    q = np.ascontiguousarray(q, dtype=np.float64)
    c_grad = seconds_per_call(potential.value_and_grad, q)
    c_value = seconds_per_call(potential.value, q)
    c_sur = seconds_per_call(surrogate.grad, q)
    nuts_iter = nuts_steps * c_grad
    sur_iter = c_value + surrogate_steps * c_sur + float(extra_seconds)
    measured = {"seconds_exact_grad": c_grad, "seconds_exact_value": c_value,
                "seconds_surrogate_grad": c_sur, "extra_seconds_per_iteration": float(extra_seconds),
                "nuts_steps_per_iteration": float(nuts_steps),
                "surrogate_steps_per_iteration": float(surrogate_steps),
                "cost_ratio": nuts_iter / sur_iter, "required": COST_FACTOR}
    if nuts_iter >= COST_FACTOR * sur_iter:
        if n_draws is None:
            return None, measured
        train = training_seconds(s, n_points) if train_seconds is None else float(train_seconds)
        saving = n_draws * (nuts_iter - sur_iter)
        overhead = train + trial_length * sur_iter
        measured.update(predicted_training_seconds=train, largest_saving_seconds=saving)
        if saving >= BUDGET_FACTOR * overhead:
            return None, measured
        return {"reason": "budget: the largest possible saving over the kept draws "
                          f"({saving:.3g} s) is below {BUDGET_FACTOR:g}x the predicted training "
                          f"and trial cost ({overhead:.3g} s)", "measured": measured}, measured
    return {"reason": "cost: a surrogate iteration (one exact U, the surrogate's leapfrog and any "
                      "online updates) "
                      f"is not {COST_FACTOR:g}x cheaper than an exact {exact_name} iteration",
            "measured": measured}, measured


def min_ess_rate(draws, seconds):
    """min over parameters of the bulk ESS of draws (chains, n, dim), per second."""
    draws = np.asarray(draws, dtype=float)
    if draws.shape[1] < 8 or not seconds > 0:
        return float("nan")
    ess = ess_bulk(draws)
    ess = ess[np.isfinite(ess)]
    return float(ess.min()) / seconds if ess.size else float("nan")


def matched_min_ess_rate(draws, seconds, rows, whole=None):
    """min ESS per second of ``draws`` (chains, m, dim) over ``seconds``,
    estimated on windows of ``rows`` rows, as long as the exact window the
    trial is compared with: the mean over the trial's consecutive ``rows``-row
    windows of their min (over parameters) bulk ESS per row, times m /
    seconds.  The min over d parameters of ESS estimates from a short window
    is biased low, the more so the shorter the window; a trial several times
    longer than the exact window, estimated whole, was favoured over the
    exact side.  Measured on the simulated regression (N = 100000, d = 50,
    seed 11): NUTS's min ESS per draw was 1.38 over 5000 draws and 1.01
    (0.71-1.27) averaged over its 250-row windows; ARNS-HMC's 0.51 over 5000,
    0.48 over 1400-row windows, 0.33 over 250-row ones.  Whole when m < rows
    (``whole``: :func:`min_ess_rate` of the same draws, when already known)."""
    draws = np.asarray(draws, dtype=float)
    m = draws.shape[1]
    if rows < 8 or m < rows or not seconds > 0:
        return min_ess_rate(draws, seconds) if whole is None else whole
    per_row = []
    for k in range(m // rows):
        ess = ess_bulk(draws[:, k * rows:(k + 1) * rows])
        ess = ess[np.isfinite(ess)]
        if ess.size:
            per_row.append(float(ess.min()) / rows)
    if not per_row:
        return float("nan")
    return float(np.mean(per_row)) * m / seconds


def trial_verdict(exact_draws, exact_seconds, trial_draws, trial_seconds, accept=None,
                  explore_accept=None, ess_floor=ESS_FLOOR, paid_seconds=None, n_draws=None,
                  exact_name="NUTS"):
    """The trial check (rule 2): (switch, measured).

    Besides the rate (surrogate min ESS/s at least SWITCH_FACTOR times the
    exact one), two floors, because a rate is only as good as the ESS it is
    made of: the trial's min ESS must reach ESS_FLOOR (an ESS of 1 or 2 from
    a chain that barely moved is not an estimate: measured on a9a-60d, a
    surrogate accepting 2 % of its proposals had min ESS 1.25 in 200 trial
    iterations, 1.5x NUTS's rate on paper because its iterations were 100x
    cheaper, and then stuck), and the trial's acceptance must reach
    ACCEPT_FRACTION of the exploration's (the guard's threshold: below it
    the guard would retrain at once).  ``measured["reason"]`` says which
    check failed and ``measured["check"]`` names it: "acceptance",
    "ess_floor" or "rate" (absent on a switch).  NNgHMC's trials are short (50 iterations per chain)
    and its own check already asks for 0.9x the exploration's acceptance,
    so it passes ``ess_floor`` = min(ESS_FLOOR, 0.2 x trial rows).

    With ``paid_seconds`` (wall seconds of the run so far) and ``n_draws``
    (iterations left to draw), the verdict compares the predicted min ESS
    per second of the whole run (module docstring) instead of the bare
    rates; ``measured["whole_run_ratio"]`` records it.  ``exact_name`` names
    the exact sampler of the exact window (:func:`choose_exact`).

    The surrogate's rate is estimated on windows as long (in rows) as the
    exact window (:func:`matched_min_ess_rate`), so both sides carry the
    same short-window bias; ``trial_min_ess`` (the ESS floor's figure) is
    the whole trial's."""
    exact = min_ess_rate(exact_draws, exact_seconds)
    exact_rows = int(np.shape(exact_draws)[1])
    whole_trial = min_ess_rate(trial_draws, trial_seconds)
    trial_ess = whole_trial * trial_seconds if np.isfinite(whole_trial) else float("nan")
    sur = matched_min_ess_rate(trial_draws, trial_seconds, exact_rows, whole_trial)
    measured = {"exact_min_ess_per_second": exact, "surrogate_min_ess_per_second": sur,
                "ratio": sur / exact if exact > 0 else float("nan"),
                "required": SWITCH_FACTOR, "trial_iterations": int(np.shape(trial_draws)[1]),
                "matched_rows": exact_rows,
                "trial_min_ess": trial_ess, "ess_floor": ess_floor,
                "exact_seconds": float(exact_seconds), "trial_seconds": float(trial_seconds),
                "exact_sampler": exact_name}
    if accept is not None:
        measured["trial_acceptance"] = float(accept)
    if explore_accept is not None:
        measured["exploration_acceptance"] = float(explore_accept)
    if accept is not None and explore_accept is not None and \
            not accept >= ACCEPT_FRACTION * explore_accept:
        measured["check"] = "acceptance"
        measured["reason"] = (f"trial: the surrogate's acceptance {accept:.3f} is below "
                              f"{ACCEPT_FRACTION:g}x the exact exploration's {explore_accept:.3f}")
        return False, measured
    if ess_floor > 0 and not trial_ess >= ess_floor:
        measured["check"] = "ess_floor"
        measured["reason"] = (f"trial: {trial_ess:.3g} effective samples (min over parameters) in "
                              f"{measured['trial_iterations']} surrogate iterations, below "
                              f"{ess_floor:g}: too few to estimate a rate")
        return False, measured
    ratio = measured["ratio"]
    whole = whole_run_ratio(exact, exact_seconds, exact_rows, sur, trial_seconds,
                            measured["trial_iterations"], paid_seconds, n_draws)
    if whole is not None:
        measured.update(whole_run_ratio=whole, paid_seconds=float(paid_seconds),
                        n_draws=int(n_draws))
        ratio = whole
    switch = bool(np.isfinite(ratio) and ratio >= SWITCH_FACTOR)
    if not switch:
        what = ("the predicted min ESS per second of the whole run (seconds paid so far "
                "included) with the surrogate" if whole is not None else
                "the surrogate's min ESS per second over the trial")
        measured["check"] = "rate"
        measured["reason"] = (f"trial: {what} was {ratio:.3g}x exact {exact_name}'s, below "
                              f"{SWITCH_FACTOR:g}x")
    return switch, measured


def whole_run_ratio(exact_rate, exact_seconds, exact_rows, trial_rate, trial_seconds, trial_rows,
                    paid_seconds, n_draws):
    """Predicted whole-run min ESS/s with the surrogate over that with NUTS:
    ``(r_s T_s / (P + T_s)) / (r_n T_n / (P + T_n))`` with T = n_draws x
    seconds per iteration of each window; None without the figures."""
    if paid_seconds is None or not n_draws or not (exact_rows > 0 and trial_rows > 0):
        return None
    if not (np.isfinite(exact_rate) and np.isfinite(trial_rate) and exact_rate > 0):
        return None
    paid = max(float(paid_seconds), 0.0)
    t_s = n_draws * trial_seconds / trial_rows
    t_n = n_draws * exact_seconds / exact_rows
    if not (t_s > 0 and t_n > 0):
        return None
    return float((trial_rate * t_s / (paid + t_s)) / (exact_rate * t_n / (paid + t_n)))


HMC_MIN_ROWS = 16          # exact windows shorter than 2x this run NUTS only


def pooled_window(previous, a, b, seconds, chain):
    """Window record (rows, seconds, chain): rows a..b (seconds) of an exact
    sampler added to ``previous`` (a record of the same kernel, or None):
    rows the int64 indices of the warm-up rows, pooled in order, seconds
    their total, chain the latest."""
    rows = np.arange(a, b, dtype=np.int64)
    if previous is not None:
        rows = np.concatenate([previous[0], rows])
        seconds = previous[1] + seconds
    return rows, float(seconds), chain


def exact_windows(ctx, nuts, trace, a, b, key, hmc_options, pool=False):
    """The timed exact window of a no-regret exploration: rows a..m of
    ``trace`` with the exploration's NUTS chain, rows m..b (m the middle)
    with exact HMC at NUTS's adapted step size and metric
    (``hmc_options``: n_steps, random_n_steps, max_energy_error, the
    sampler's own HMC settings).  The rule compares the surrogate with the
    better of the two and falls back to it (:func:`choose_exact`): NUTS is
    not always the best exact sampler (our HMC with its defaults, n_steps
    10 drawn from 1..10, beat NUTS's whole-run min ESS/s 2.0x on the
    simulated regression, 1.4x on posteriordb's garch11 and 1.2x on
    eight_schools),
    and a surrogate that beats NUTS but not HMC has not paid off.  Sets
    ``ctx.exact_windows`` {"nuts": (rows, seconds, chain), "hmc": ...}
    (:func:`pooled_window`); returns the chain that ran last (its position
    is the chain's state).

    ``pool``: add the rows to the windows already there (NNgHMC's spans
    between trainings, all at the same step size and metric).  Its spans
    after the first are 50 iterations (train_every 0.1 of 500), so one
    span's NUTS half was 25 rows, whose min ESS over d = 50 parameters
    is not an estimate: on the simulated regression (seed 1) it put NUTS at
    2.8 effective samples in 25 rows, against about 1 per draw over the
    whole run, and the rule predicted 4.8x for a switch that ran 1.3x."""
    from ..core import Chain
    before = (getattr(ctx, "exact_windows", None) or {}) if pool else {}
    m = a + (b - a) // 2 if b - a >= 2 * HMC_MIN_ROWS else b
    t0 = time.perf_counter()
    i = ctx.run_span(nuts, trace, a, m, key)
    windows = {"nuts": pooled_window(before.get("nuts"), a, i, time.perf_counter() - t0, nuts)}
    last = nuts
    if m < b and i == m:
        hmc = Chain(nuts.drive, nuts.judge, nuts.position, nuts.generator,
                    step_size=nuts.step_size, inv_metric=nuts.inv_metric, **hmc_options)
        t0 = time.perf_counter()
        j = ctx.run_span(hmc, trace, m, b, key)
        windows["hmc"] = pooled_window(before.get("hmc"), m, j, time.perf_counter() - t0, hmc)
        last = hmc
    elif "hmc" in before:
        windows["hmc"] = before["hmc"]
    ctx.exact_windows = windows
    return last


def exact_sample(ctxs):
    """(draws (chains, rows, dim), seconds) of the chains' timed exact rows
    (``ctx.exact_rows``), truncated to the shortest chain's; seconds the
    mean over chains."""
    return _window_sample(ctxs, [c.exact_rows for c in ctxs])


def _window_sample(ctxs, records):
    """(draws (chains, rows, dim), seconds) of each chain's (rows, seconds, ...)
    window record, truncated to the shortest; seconds the mean over chains."""
    rows = min(r[0].size for r in records)
    draws = np.stack([c.warm["draws"][r[0][:rows]] for c, r in zip(ctxs, records)])
    return draws, float(np.mean([r[1] for r in records]))


def choose_exact(ctxs, margin=1.0):
    """Pick the exact sampler the rule compares with and falls back to: the
    window (NUTS or HMC, :func:`exact_windows`) with the higher min ESS per
    second pooled over ``ctxs``, among windows with at least ESS_FLOOR
    effective samples (NUTS, the exploration's kernel, when neither); HMC
    only when its rate is at least ``margin`` times NUTS's (NNgHMC passes
    SWITCH_FACTOR: its first window is 100 rows).  Sets
    every ctx's ``exact_rows`` (rows, seconds: the window's warm-up row
    indices and their seconds; :func:`exact_sample` reads them),
    ``exact_chain`` (moved to the chain's current position) and
    ``exact_name``.  Returns the record for ``info["no_regret"]["exact"]``.

    Tried and not adopted: scoring the windows by the whole run's predicted
    min ESS/s, ``r T / (P + T)`` as the trial does (the paid warm-up counts
    against a cheaper, worse-mixing HMC).  On the five posteriordb
    posteriors, 12 seeds, every surrogate method (AMD EPYC Zen 4), it
    changed 19 of 240 decisions (18 to NUTS), and their whole-run ratios
    to NUTS moved by +4.6 % on average (log scale), within the noise:
    garch11's went down (HMC is 2x NUTS there), eight_schools' and
    SBLRC-BLR's mostly up; unchanged decisions moved by sd 13 %."""
    ctxs = [c for c in ctxs if getattr(c, "exact_windows", None)]
    if not ctxs:
        return None
    record, best, best_rate = {}, "nuts", -np.inf
    for name in ("nuts", "hmc"):
        if not all(name in c.exact_windows for c in ctxs):
            continue
        draws, seconds = _window_sample(ctxs, [c.exact_windows[name] for c in ctxs])
        rows = draws.shape[1]
        if rows < 8:
            continue
        rate = min_ess_rate(draws, seconds)
        steps = float(np.mean(np.concatenate(
            [c.warm["n_steps"][c.exact_windows[name][0]] for c in ctxs])))
        ess = rate * seconds
        record[name] = {"min_ess_per_second": rate, "min_ess": ess, "rows": int(rows),
                        "seconds": seconds, "steps_per_iteration": steps}
        # a rate from fewer than ESS_FLOOR effective samples is not an estimate
        # (as in trial_verdict): a 2-d Gaussian at correlation 0.998 gave HMC's
        # window min ESS 2.7 in 150 rows, 2x NUTS's rate on paper, with 40x
        # cheaper rows; NUTS stays the choice then
        bar = best_rate * margin if name == "hmc" and best_rate > 0 else best_rate
        if np.isfinite(rate) and ess >= ESS_FLOOR and rate > bar:
            best, best_rate = name, rate
    record["chosen"] = best
    for c in ctxs:
        rows, secs, chain = c.exact_windows[best]
        current = getattr(c, "chain", None)
        if current is not None and current is not chain:
            chain.set_position(current.position)
        c.exact_rows, c.exact_chain, c.exact_name = (rows, secs), chain, best.upper()
    return record


def refit_fallback_metric(sampler, ctx, later=None):
    """Before a fallback's kept draws: re-estimate the exact chain's metric
    (Stan's regularised estimator) from the adaptation's last window and the
    exploration's later rows of the same kernel, keeping its step size.
    Returns the record for ``info``, or None when nothing was done (no
    metric adaptation, or no rows beyond the last window).  The adaptation
    ran over warm-up rows 0 .. ``ctx.adapted_from`` - 1; ``later``: the
    indices of the later warm-up rows to add (rows before ``adapted_from``
    are left out) (default: the timed window's
    NUTS half, or every row after the adaptation without one).

    Why: the exploration adapts over the first half of the warm-up only (the
    second half is the timed window and the training data), so its metric
    comes from Stan's last window within that half: 200 draws of a
    1000-iteration warm-up, against 500 when NUTS adapts over all of it.
    Measured on the simulated logistic regression (N = 100000, d = 50, 5000
    draws, seeds 10 and 11): NUTS adapted over 500 iterations had min ESS
    3794 and 4770 against 6424 and 6918 adapted over 1000, at the same cost
    per draw.  The rows added are the window's NUTS half (with a NUTS
    exploration; every post-adaptation row with an HMC one): its HMC half
    is exact too, but at a9a-60d's scales HMC's 125 rows held 4-12
    effective samples against NUTS's 37-51, and rows that informative add
    noise to a variance estimate weighted by row.  The step size is kept: a
    re-tune over Stan's 50-iteration terminal window settled on 5-18 %
    smaller steps and lost the gain (scratch ``fb4.py``, README)."""
    from ._base import regularized_metric, warmup_windows
    a = getattr(ctx, "adapted_from", None)
    if (a is None or not getattr(sampler, "adapt", False) or not isinstance(sampler.metric, str)
            or sampler.metric == "unit"):
        return None
    start, ends = warmup_windows(a)
    if not ends:
        return None
    w0 = ends[-2] if len(ends) > 1 else start
    if later is None:
        windows = getattr(ctx, "exact_windows", None) or {}
        later = windows["nuts"][0] if "nuts" in windows else np.arange(a, ctx.run.n_warmup)
    later = np.asarray(later, dtype=np.int64)
    later = later[later >= a]           # rows of the adaptation itself are not "later"
    draws = ctx.warm["draws"]
    rows = np.concatenate([draws[w0:ends[-1]], draws[later]])
    rows = rows[np.all(np.isfinite(rows), axis=1)]
    if later.size == 0 or rows.shape[0] <= (2 * rows.shape[1] if sampler.metric == "dense"
                                            else 10):
        return None
    ctx.chain.set_inv_metric(regularized_metric(rows, sampler.metric))
    return {"metric_rows": int(rows.shape[0]), "last_window_rows": int(ends[-1] - w0),
            "exploration_rows": int(later.size)}


STEP_CHECK_ROWS = 50      # first kept rows of a fallback its step size is checked on
STEP_CHECK = 0.5          # their mean acceptance / target_accept below which the step is re-tuned
RETUNE_ROWS = 50          # iterations of that re-tune (Stan's terminal window)


def draw_fallback(sampler, ctx, refit):
    """The kept draws of a fallback: ``ctx.chain`` into ``ctx.main`` rows
    0 .. n_draws, after :func:`refit_fallback_metric` (its record
    ``refit``).  The refit keeps the step size, which was adapted for the
    earlier metric; so the first ``STEP_CHECK_ROWS`` kept rows (at most a
    fifth of them) check it.  When their mean acceptance is below
    ``STEP_CHECK`` times ``target_accept``, they are dropped: the step is
    re-tuned as Stan does after a metric update (its heuristic, then dual
    averaging over ``RETUNE_ROWS`` iterations that are not kept) and the
    kept draws start again (the progress bar steps back by the rows
    dropped and re-tuned).  Otherwise the run goes on from those rows, so
    the draws are the same as without the check.  Returns the record of a
    re-tune (for ``refit``), else None.

    Why: NNgHMC at 200 warm-up (a burn-in of 40 iterations; simulated
    logistic regression N = 20000, d = 10, seed 4) fell back with the
    metric re-estimated from 160 rows at the burn-in's step size, 1.56; its
    kept draws accepted 0.10 on average and had a min ESS of 13 in 300
    (NUTS alone: 289-414)."""
    from ..core._hmc import new_trace
    n = ctx.run.n_draws
    k = min(STEP_CHECK_ROWS, n // 5)
    chain = ctx.chain
    target = getattr(sampler, "target_accept", None)
    if refit is None or k < 20 or target is None or not getattr(sampler, "adapt", False):
        ctx.run_span(chain, ctx.main, 0, n, "sample")
        return None
    i = ctx.run_span(chain, ctx.main, 0, k, "sample")
    if i < k:                       # stopped early, as the whole span would have
        return None
    accept = float(np.mean(ctx.main["accept_prob"][:k]))
    if not accept < STEP_CHECK * target:
        ctx.run_span(chain, ctx.main, k, n, "sample")
        return None
    before = float(chain.step_size)
    scratch = new_trace(RETUNE_ROWS, chain.position.shape[0])
    chain.find_step_size()
    chain.start_adaptation(target)
    j = ctx.run_span(chain, scratch, 0, RETUNE_ROWS, "retune")
    chain.finish_adaptation()
    ctx.report(-(k + j))            # the progress bar counts the kept draws only
    ctx.run_span(chain, ctx.main, 0, n, "sample")
    return {"check_rows": int(k), "check_acceptance": accept, "step_size_before": before,
            "step_size": float(chain.step_size), "retune_rows": int(j)}


def paid_seconds(run):
    """Wall seconds since the run started (None when the run does not know)."""
    t0 = getattr(run, "t_start", None)
    return None if t0 is None else time.perf_counter() - t0


def extend_trial(measured, rounds, switch=False, near_miss=True):
    """True when the trial should run another round of trial_length
    iterations: fewer than MAX_TRIAL_ROUNDS rounds ran, it has used less time
    than the exact window it is compared with, and either it failed only on
    ESS_FLOOR (too few effective samples for a rate), or it would switch (a
    switch is confirmed on a window as long in time as the exact one), or it
    missed the rate by less than a factor 1 / NEAR_MISS (its ratio, or the
    whole run's, at least NEAR_MISS x SWITCH_FACTOR: a near miss is
    confirmed like a switch), or it missed the rate on fewer rows than the
    exact window's (``matched_rows``: a short trial's min ESS is biased
    low against the exact window's, :func:`matched_min_ess_rate`).  A clear
    miss on as many rows, or a failed acceptance check, is final at once,
    being safe.  ``near_miss=False`` (NNgHMC, whose failed trial is followed
    by a retraining and another trial): a near miss on as many rows is final.

    Why short misses: NNgHMC's rounds are 50 iterations and its exact
    window, pooled over the spans between trainings, 75-200 NUTS rows.  On
    the simulated regression (500 + 500, seeds 1 and 2) its 50-row trials
    put the network chain at about 0.3 effective samples per draw and the
    whole run at 0.41-0.51x NUTS's, final at once; switched, its kept draws
    had 0.77-0.82 per draw.

    Why near misses: the min ESS over d parameters from one round (200
    iterations) is a noisy, low estimate at large d.  On the simulated
    regression (N = 100000, d = 50, defaults, n_draws = 5000) a trial of one
    round measured min ESS 56.8 (0.28 per iteration) at acceptance 0.85
    and fell back at a predicted 1.14x; another seed's trial ran 8 rounds
    (1600 iterations) and measured 0.89 per iteration, 11x NUTS's rate.
    The extension costs at most the exact window's time."""
    if rounds >= MAX_TRIAL_ROUNDS or not measured["trial_seconds"] < measured["exact_seconds"]:
        return False
    if switch:
        return True
    check = measured.get("check")
    if check == "ess_floor":
        return True
    if check != "rate":
        return False
    if measured.get("trial_iterations", 0) < measured.get("matched_rows", 0):
        return True
    if not near_miss:
        return False
    ratio = measured.get("whole_run_ratio", measured.get("ratio"))
    return ratio is not None and bool(np.isfinite(ratio)) and ratio >= NEAR_MISS * SWITCH_FACTOR


def run_trial(run_round, verdict):
    """The trial's rounds: ``run_round(r)`` runs round r (trial_length more
    surrogate iterations per chain), ``verdict(rounds)`` judges all rounds
    so far -> (switch, measured) (:func:`trial_verdict`); more rounds while
    :func:`extend_trial` asks for them.  Returns (switch, measured) with
    ``measured["rounds"]``."""
    rounds = 0
    while True:
        run_round(rounds)
        rounds += 1
        switch, measured = verdict(rounds)
        if not extend_trial(measured, rounds, switch):
            measured["rounds"] = rounds
            return switch, measured


def fallback_record(measured):
    if "trial" in measured and isinstance(measured["trial"], dict):
        measured = measured["trial"]
    reason = measured.get("reason") or (
        "trial: the surrogate's min ESS per second over the trial was below "
        f"{SWITCH_FACTOR:g}x the exact sampler's over the last exploration iterations")
    return {"reason": reason, "measured": measured}


def untrained_network(kind, dim, n_hidden, activation, seed=0):
    """A network of the given size with random weights, only for timing (rule 1)."""
    rng = np.random.default_rng(seed)
    if kind == "random":
        from ..surrogates._network import RandomNetwork
        act = activation
        return RandomNetwork(rng.standard_normal((n_hidden, dim)), rng.standard_normal(n_hidden),
                             rng.standard_normal(n_hidden), activation=act)
    from ..surrogates._mlp import GradientNetwork
    return GradientNetwork(rng.standard_normal((n_hidden, dim)), rng.standard_normal(n_hidden),
                           rng.standard_normal((dim, n_hidden)), rng.standard_normal(dim),
                           activation=activation)
