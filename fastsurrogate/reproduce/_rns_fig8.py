"""RNS-HMC paper, Figure 8 as a table: adaptive RNS-HMC (ARNS-HMC) against
exact HMC on the simulated logistic regression, by acceptance over the
iterations and by the error of the posterior mean at fixed wall time.

    PYTHONPATH=. python bench/paper_arns_fig8.py [--quick] [--out FILE] [--cache FILE]

What the paper reports (Zhang, Shahbaba & Zhao 2017, Stat. Comput. 27,
Figure 8): ARNS-HMC starts its surrogate from only 200 exploration states
and keeps updating the network's output layer online (Greville's recursion) as
new states arrive, switching to the updated surrogate with a vanishing
probability.  Its acceptance starts low and climbs to the level of exact HMC,
and because each iteration needs only one exact U (no exact gradients), its
relative error of the posterior mean falls faster in wall time than HMC's.

What this script measures, on this machine
------------------------------------------
Data: ``fs.datasets.simulate_logistic(100000, 50, seed)``; model
``fs.models.LogisticRegression(X, y, prior_sd=10, n_threads=2)``.  Every sampler:
step 0.045, L = 6 with the number of steps uniform on 1..6, identity metric,
no adaptation, one chain started at beta = 0.

1. Ground truth: the posterior mean of a long exact-HMC run (burn-in 500),
   cached in a .npz file (``--cache``; default under bench/.cache/); a cached
   run at least as long as requested is reused.  Its Monte Carlo error
   (sum of MCSE from the Geyer ESS, as a fraction of sum|truth|) is printed: REM
   values of that order cannot be told apart from the truth's own error.
2. Exact HMC: ``fs.HMC`` with ``n_warmup`` = the exploration length (the same
   500 exact iterations ARNS explores with) and enough draws to fill the
   largest budget.
3. ARNS-HMC: ``fs.ARNSHMC(model, no_regret=False, n_start=200, n_hidden=2000, ...)`` with
   ``n_warmup`` = the exploration length (500 exact iterations; the surrogate
   starts from the last 200 of them), then surrogate-driven sampling with the
   exact Metropolis test and online updates, enough draws for the largest budget.
   With the same seed and start, its exploration chain is identical to HMC's
   burn-in.
4. (a) Acceptance (mean acceptance probability) in windows of 250 iterations
   after the burn-in / exploration, ARNS next to HMC, and the first window whose
   ARNS acceptance reaches 90% of HMC's mean acceptance.  Bar: within 3000
   iterations.
5. (b) REM = sum|mean_hat - truth| / sum|truth| (``relative_error_mean``) of the
   states each sampler has produced when the wall clock reaches each budget:
   all states after the first 300 (``--burn-in``) of the chain, i.e. the
   shared exploration states 301-500 followed by the sampler's own.  Elapsed
   time includes exploration and (ARNS) training.  Each sampler runs ONCE for
   the largest budget; the time at which a state is done is mapped from the
   per-phase timings assuming a constant cost per iteration within a phase
   (exploration: t_explore / 500 per iteration; HMC sampling: t_sample /
   n_draws), and for ARNS from the clock marks it records at the end of every
   chunk (``info["sample_clock"]``).  While ARNS adapts, an iteration costs
   one exact U, the surrogate leapfrog, and an O(s^2) trainer update per
   state; with ``--max-points`` the updates stop after that many points
   (finite adaptation; the chain stays exact) and an iteration costs one
   exact U and the surrogate leapfrog.  Bar: ARNS's REM below HMC's at a
   fixed budget.

The run lengths are set from a short pilot of each sampler; if the machine
slows down so that a run ends before a budget, that budget's entry says so.
REM of a single chain is itself random: ``--replicates R`` repeats both runs
with R independent seeds and reports the mean REM per budget.
"""
import argparse
import math
import os
import platform
import time

import numpy as np

import fastsurrogate as fs
from ._report import cache_dir, cpu_model, log, machine_line  # noqa: F401




def machine_lines():
    model = cpu_model()
    return [
        f"- machine: platform.processor() = {platform.processor()!r}, "
        f"os.cpu_count() = {os.cpu_count()}, machine = {platform.machine()}, "
        f"cpu model = {model or 'unknown'}",
        f"- python {platform.python_version()}, numpy {np.__version__}, "
        f"fastsurrogate {fs.__version__}; load average at start "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]


def truth_key(args):
    return (f"n{args.n_obs}_d{args.dim}_data{args.data_seed}_eps{args.step}_L{args.n_steps}"
            f"_seed{args.seed}")


def load_or_run_truth(model, args, n_iter):
    """Posterior mean of a long exact-HMC run, cached; returns (dict, source)."""
    path = args.cache or os.path.join(cache_dir(), f"fig8_truth_{truth_key(args)}.npz")
    if os.path.exists(path):
        with np.load(path) as f:
            data = {k: f[k] for k in f.files}
        if str(data.get("key")) == truth_key(args) and int(data["n_iter"]) >= n_iter:
            return data, f"cached {path}"
        log(f"cache {path} is for other settings or shorter ({int(data['n_iter'])} < {n_iter}); rerunning")
    log(f"ground truth: exact HMC, {n_iter} iterations after 500 burn-in ...")
    t0 = time.perf_counter()
    res = fs.HMC(model, step_size=args.step, n_steps=args.n_steps, random_n_steps=True,
                 metric="unit", adapt=False).sample(
        n_iter, 500, chains=1, seed=args.seed + 100, init=np.zeros(args.dim), progress=False)
    secs = time.perf_counter() - t0
    ess = fs.diagnostics.ess_geyer(res.draws)
    sd = res.draws[0].std(axis=0, ddof=1)
    data = dict(mean=res.draws[0].mean(axis=0), sd=sd, ess=ess, mcse=sd / np.sqrt(ess),
                n_iter=np.int64(n_iter), seconds=np.float64(secs),
                acceptance=np.float64(np.mean(res.acceptance_rate)), key=np.str_(truth_key(args)))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez(path, **data)
    return data, f"computed now ({secs:.0f} s), saved to {path}"


def make_hmc(model, args):
    return fs.HMC(model, step_size=args.step, n_steps=args.n_steps, random_n_steps=True,
                  metric="unit", adapt=False)


def make_arns(model, args):
    return fs.ARNSHMC(model, no_regret=False,
                      n_start=args.n_start, n_hidden=args.n_hidden, step_size=args.step,
                      n_steps=args.n_steps, random_n_steps=True, metric="unit", adapt=False,
                      update_every=args.update_every, max_points=args.max_points)


def phase_times(res):
    t = res.timings
    pre = float(t.get("warmup", 0.0)) + float(t.get("train", 0.0))
    per = float(t["sample"]) / res.n_draws
    return pre, per


def chain_clock(res):
    """(states, t): the exploration chain followed by the sampling chain, and
    t[i] the wall-clock second at which state i was done, mapped linearly within
    each phase: exploration at t_explore / n_explore per iteration, then the
    training time (ARNS), then t_sample / n_draws per iteration."""
    t = res.timings
    nw, ns = res.warmup_draws.shape[1], res.n_draws
    t_w, t_tr, t_s = float(t.get("warmup", 0.0)), float(t.get("train", 0.0)), float(t["sample"])
    tw = t_w * np.arange(1, nw + 1) / nw
    marks = res.info.get("sample_clock")
    if marks is not None and len(marks[0]):
        # ARNS records (iteration, seconds) at every chunk's end: piecewise
        # linear within chunks (the cost per iteration changes when the
        # online updates stop)
        it, sec = marks[0][:, 0], marks[0][:, 1]
        ts = t_w + t_tr + np.interp(np.arange(1, ns + 1), np.r_[0.0, it], np.r_[0.0, sec])
    else:
        ts = t_w + t_tr + t_s * np.arange(1, ns + 1) / ns
    return np.concatenate([res.warmup_draws[0], res.draws[0]]), np.concatenate([tw, ts])


def rem_at(res, budget, burn_in, truth):
    """(number of post-burn-in states done at `budget` s, their REM or None, run end time)."""
    draws, clock = chain_clock(res)
    k = int(np.searchsorted(clock, budget, side="right"))      # states done by `budget`
    used = draws[burn_in:k]
    rem = fs.diagnostics.relative_error_mean(used, truth) if len(used) else None
    return len(used), rem, float(clock[-1])


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    ap.add_argument("--cache", metavar="FILE",
                    help="ground-truth .npz (default bench/.cache/fig8_truth_<settings>.npz)")
    ap.add_argument("--truth-iter", type=int, help="exact-HMC iterations of the truth run "
                    "(default 50000, quick 3000; a longer cached run is reused)")
    ap.add_argument("--budgets", type=float, nargs="+", help="wall-time budgets in seconds")
    ap.add_argument("--n-hidden", type=int, help="ARNS hidden units (default 2000, quick 500)")
    ap.add_argument("--n-start", type=int, default=200, help="exploration states ARNS starts from")
    ap.add_argument("--explore", type=int, default=500,
                    help="exact exploration / burn-in iterations (both samplers)")
    ap.add_argument("--burn-in", type=int, default=300,
                    help="first states of the (shared) exploration chain left out of the REM")
    ap.add_argument("--window", type=int, default=250)
    ap.add_argument("--update-every", type=int, default=10,
                    help="ARNS iterations per online update chunk")
    ap.add_argument("--max-points", type=int, default=None,
                    help="ARNS: stop the online updates after this many points (default: never)")
    ap.add_argument("--step", type=float, default=0.045)
    ap.add_argument("--n-steps", type=int, default=6)
    ap.add_argument("--n-obs", type=int, default=100000)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-seed", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--replicates", type=int, default=1,
                    help="independent (HMC, ARNS) pairs for the REM table (seeds seed + 7919 r); "
                         "the acceptance table shows the first")


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    budgets = sorted(args.budgets or ([5.0, 10.0] if args.quick else [10.0, 20.0, 40.0, 80.0]))
    n_truth = args.truth_iter or (3000 if args.quick else 50000)
    if args.n_hidden is None:
        args.n_hidden = 500 if args.quick else 2000
    if args.explore < args.n_start:
        raise ValueError("--explore must be >= --n-start")
    if not 0 <= args.burn_in <= args.explore:
        raise ValueError("--burn-in must be between 0 and --explore")
    t_start = time.perf_counter()

    X, y, beta = fs.datasets.simulate_logistic(args.n_obs, args.dim, seed=args.data_seed)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=args.threads)
    truth, truth_src = load_or_run_truth(model, args, n_truth)
    tmean = truth["mean"]
    truth_floor = math.sqrt(2 / math.pi) * float(np.sum(truth["mcse"])) / float(np.sum(np.abs(tmean)))

    init = np.zeros(args.dim)
    run_kw = dict(chains=1, seed=args.seed, init=init, progress=False)
    bmax = budgets[-1]

    # pilots: per-iteration costs, to size the main runs
    log("pilots ...")
    p = make_hmc(model, args).sample(300, 0, chains=1, seed=args.seed + 1, init=tmean, progress=False)
    c_hmc = phase_times(p)[1]
    p = make_arns(model, args).sample(250, args.explore, **run_kw)
    pre_arns, c_arns = phase_times(p)
    if args.max_points:
        # once the updates stop an iteration is cheaper: size the run by that cost
        fixed = argparse.Namespace(**{**vars(args), "max_points": args.n_start})
        c_arns = min(c_arns, phase_times(make_arns(model, fixed).sample(250, args.explore, **run_kw))[1])
    # 1.5x margin: the machine is shared, and a pilot's cost per iteration is only a guess
    n_hmc = int(1.5 * max(bmax - args.explore * c_hmc, 0) / c_hmc) + 100
    n_arns = int(1.5 * max(bmax - pre_arns, 0) / c_arns) + 100
    # (a) needs ARNS to run past 3000 iterations; HMC's acceptance is stationary, so its
    # windows are shown where its (budget-sized) run has them
    n_hmc, n_arns = max(n_hmc, 1000), max(n_arns, 3000 + args.window)

    log(f"exact HMC: {args.explore} burn-in + {n_hmc} draws (pilot {c_hmc * 1e3:.2f} ms/iter) ...")
    hmc = make_hmc(model, args).sample(n_hmc, args.explore, **run_kw)
    log(f"ARNS-HMC: {args.explore} exploration + {n_arns} draws (pilot {c_arns * 1e3:.2f} ms/iter) ...")
    arns = make_arns(model, args).sample(n_arns, args.explore, **run_kw)
    same_explore = bool(np.array_equal(hmc.warmup_draws, arns.warmup_draws))

    # (a) acceptance in windows
    a_h = hmc.stats["accept_prob"][0]
    a_a = arns.stats["accept_prob"][0]
    acc_h = float(a_h.mean())
    w = args.window
    n_win = len(a_a) // w
    first = None
    win_rows = []
    for k in range(n_win):
        ma = float(a_a[k * w:(k + 1) * w].mean())
        mh = float(a_h[k * w:(k + 1) * w].mean()) if (k + 1) * w <= len(a_h) else None
        if first is None and ma >= 0.9 * acc_h:
            first = (k + 1) * w
        win_rows.append((k * w, (k + 1) * w, ma, mh))
    bar_a = first is not None and first <= 3000

    # (b) REM at fixed wall time, for every replicate pair
    pairs = [(hmc, arns)]
    for r in range(1, args.replicates):
        kw = dict(run_kw, seed=args.seed + 7919 * r)
        log(f"replicate {r}: exact HMC and ARNS-HMC, seed {kw['seed']} ...")
        pairs.append((make_hmc(model, args).sample(n_hmc, args.explore, **kw),
                      make_arns(model, args).sample(n_arns, args.explore, **kw)))
    rem_rows = []
    rep_rows = []
    for b in budgets:
        row = [b]
        for res in (hmc, arns):
            row.append(rem_at(res, b, args.burn_in, tmean))
        rem_rows.append(row)
        reps = [(rem_at(h, b, args.burn_in, tmean)[1], rem_at(a, b, args.burn_in, tmean)[1])
                for h, a in pairs]
        rep_rows.append((b, reps))

    pre_h, per_h = phase_times(hmc)
    pre_a, per_a = phase_times(arns)
    elapsed = time.perf_counter() - t_start
    L = ["# RNS-HMC paper, Figure 8: ARNS-HMC vs exact HMC, simulated logistic regression", ""]
    L += machine_lines()
    L += [
        f"- data: simulate_logistic({args.n_obs}, {args.dim}, seed={args.data_seed}); "
        f"LogisticRegression(prior_sd=10, n_threads={args.threads})",
        f"- leapfrog: step {args.step}, L = {args.n_steps} (steps uniform on 1..L), identity metric, "
        f"adapt=False; one chain per sampler, seed {args.seed}, start at beta = 0",
        f"- ARNS-HMC: n_start = {args.n_start}, n_hidden = {args.n_hidden} (softplus), exploration = "
        f"{args.explore} exact iterations (HMC uses the same {args.explore} as burn-in; the two "
        f"exploration chains are {'identical' if same_explore else 'NOT identical'}), update_every = {args.update_every}, "
        f"switch probability t^-0.5, online updates "
        + (f"stop after {args.max_points} points (at iteration {arns.info['adaptation_stopped'][0]})"
           if args.max_points else "for the whole run"),
        f"- truth: posterior mean of {int(truth['n_iter'])} exact-HMC iterations ({truth_src}); "
        f"its own Monte Carlo error is about REM {truth_floor:.2g}",
        f"- exact HMC: exploration {pre_h:.2f} s, {hmc.n_draws} draws at {per_h * 1e3:.2f} ms/iter, "
        f"acceptance {acc_h:.3f}",
        f"- ARNS-HMC: exploration {arns.timings.get('warmup', 0):.2f} s + training "
        f"{arns.timings.get('train', 0):.2f} s, {arns.n_draws} draws at {per_a * 1e3:.2f} ms/iter, "
        f"acceptance {float(a_a.mean()):.3f}, {len(arns.info['switch_iterations'][0])} surrogate "
        f"switches, {arns.info['batch_resolves'][0]} batch re-solves",
        f"- elapsed: {elapsed:.1f} s (load average at the end: "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())})",
        "",
        f"## (a) acceptance in windows of {w} iterations after exploration",
        "",
        "| iterations | ARNS-HMC | exact HMC |",
        "|---|---:|---:|",
    ]
    shown = min(n_win, max(16, math.ceil(3000 / w) + 4))
    for lo, hi, ma, mh in win_rows[:shown]:
        L.append(f"| {lo + 1}-{hi} | {ma:.3f} | {'-' if mh is None else format(mh, '.3f')} |")
    block = 8 * w                        # later: means over blocks of 8 windows
    for lo in range(shown * w, n_win * w, block):
        hi = min(lo + block, n_win * w)
        rest_h = a_h[lo:hi]
        L.append(f"| {lo + 1}-{hi} (mean) | {float(a_a[lo:hi].mean()):.3f} | "
                 f"{format(float(rest_h.mean()), '.3f') if len(rest_h) else '-'} |")
    L.append(f"| all (mean) | {float(a_a.mean()):.3f} | {acc_h:.3f} |")
    L += ["",
          f"First window with ARNS acceptance >= 90% of HMC's mean ({0.9 * acc_h:.3f}): "
          + (f"iterations {first - w + 1}-{first}" if first else f"none in {n_win * w} iterations")
          + f".  Bar (within 3000 iterations): {'MET' if bar_a else 'NOT MET'}.",
          "",
          "## (b) relative error of the posterior mean (REM) at fixed wall time",
          "",
          f"REM of all states after the first {args.burn_in} of the chain (the shared exploration "
          "states, then each sampler's own) that are done when the wall clock reaches the budget; "
          "elapsed time includes exploration and training; the time of each state is mapped "
          "linearly within each phase from the per-phase timings (ARNS: within each chunk, "
          "from the clock marks it records; see the docstring).",
          "",
          "| budget s | HMC states | HMC REM | ARNS states | ARNS REM | lower |",
          "|---:|---:|---:|---:|---:|---|"]
    wins = []
    for b, (kh, rh, eh), (ka, ra, ea) in rem_rows:
        def cell(k, r, end):
            note = f" (run ended at {end:.1f} s)" if b > end else ""
            return ("-" if r is None else f"{r:.4f}") + note
        if rh is None or ra is None:
            lower = "-"
        elif ra == rh:
            lower = "equal (same states)"
        else:
            lower = "ARNS" if ra < rh else "HMC"
        wins.append(lower == "ARNS")
        L.append(f"| {b:g} | {kh} | {cell(kh, rh, eh)} | {ka} | {cell(ka, ra, ea)} | {lower} |")
    L += ["",
          "Bar (ARNS REM below HMC's at a fixed budget): "
          + ("MET at " + ", ".join(f"{b:g} s" for b, ok in zip(budgets, wins) if ok)
             if any(wins) else "NOT MET at any budget")
          + f".  Truth error floor ~{truth_floor:.2g}."]
    if len(pairs) > 1:
        L += ["", f"### REM over {len(pairs)} independent replicate pairs (the first is the table above)",
              "", "| budget s | HMC REM mean | ARNS REM mean | ARNS lower in |", "|---:|---:|---:|---|"]
        for b, reps in rep_rows:
            ok = [(h, a) for h, a in reps if h is not None and a is not None]
            if not ok:
                L.append(f"| {b:g} | - | - | - |")
                continue
            hm = float(np.mean([h for h, _ in ok]))
            am = float(np.mean([a for _, a in ok]))
            L.append(f"| {b:g} | {hm:.4f} | {am:.4f} | {sum(a < h for h, a in ok)} of {len(ok)} |")
    report = "\n".join(L) + "\n"
    return report
