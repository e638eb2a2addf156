"""RNS-HMC paper, Figure 7 as tables: the acceptance of adaptive RNS-HMC
(ARNS-HMC) against the number of training points, median and 90 % band over
independent runs, beside exact HMC's, on the four Table-1 problems
(simulated logistic regression, Bank Marketing, a9a, elliptic PDE); also
RNS-HMC's acceptance and every sampler's error of the posterior mean at
fixed wall times (``rns-fig8`` draws those against time).

    fastsurrogate reproduce rns-fig7 [--quick] [--problems sim bank a9a pde]
        [--replicates R] [--band-replicates B] [--rem l2|l1]

What the paper reports (Zhang, Shahbaba & Zhao 2017, Stat. Comput. 27,
Figure 7): ARNS-HMC starts its surrogate from only 200 exploration states
and keeps updating the network's output layer online (Greville's recursion) as
new points arrive, switching to the updated surrogate with a vanishing
probability.  Its acceptance (median and a 90 % band over runs) starts low
and climbs, as the training points accumulate, to the level of exact HMC
(a line in the figure).  Figure 8 (``rns-fig8``) shows what that buys in
wall time.

What this table measures, on this machine
------------------------------------------
Per problem (``--problems``, default all four; settings as ``rns-fig8``:
Table 1's step, L and s; ARNS-HMC on Bank Marketing with whitened inputs as
in ``rns-table1``): every sampler uses the paper's step and L with the
number of steps uniform on 1..L, identity metric, no adaptation, one chain
(``--replicates`` R: R independent ones, medians) started at beta = 0 for
the simulated problem (this table's earlier setting) and at the MAP for the
others.

1. Ground truth: the posterior mean of a long exact-HMC run (burn-in 500),
   cached (``rns-fig8``'s files: the two tables share their truths); its own
   Monte Carlo error is printed: REM values of that order cannot be told
   apart from the truth's own error.
2. Exact HMC: ``fs.HMC`` with ``n_warmup`` = the exploration length (the same
   500 exact iterations ARNS explores with) and enough draws to fill the
   largest budget.
3. ARNS-HMC: ``fs.ARNSHMC(model, n_start=200, ...)`` with
   ``n_warmup`` = the exploration length (500 exact iterations; the surrogate
   starts from the last 200 of them), then surrogate-driven sampling with the
   exact Metropolis test and online updates.  With the same seed and start,
   its exploration chain is identical to HMC's burn-in.
4. RNS-HMC (new; ``--rns-explore``, default 2000 exact exploration
   iterations, 0 leaves it out): the paper's Algorithm 3 (no guard), its
   network trained once on the exploration states after the first 20 %.
5. (a) Acceptance (mean acceptance probability) in windows of 250 iterations
   after the exploration, ARNS and RNS-HMC next to HMC, and the first window
   whose ARNS acceptance reaches 90% of HMC's mean acceptance.  Bar: within
   ``--acc-iters`` (3000) iterations.
6. (b) REM of the states each sampler has produced when the wall clock
   reaches each budget: all states after the first 300 (``--burn-in``) of
   the chain (exploration states included).  REM is the RNS-HMC paper's L2
   form, ||mean_hat - truth||_2 / ||truth||_2 (``--rem l2``, default; before
   it was the L1 form sum |mean_hat - truth| / sum |truth|, which ``--rem
   l1 --problems sim --rns-explore 0`` still computes for the earlier
   runs).  Elapsed time includes exploration and training; the time of each
   state is mapped linearly within each phase from the per-phase timings
   (ARNS: within each chunk, from the clock marks it records,
   ``info["sample_clock"]``).  While ARNS adapts, an iteration costs one
   exact U, the surrogate leapfrog, and an O(s^2) trainer update per state;
   with ``--max-points`` the updates stop after that many points (finite
   adaptation; the chain stays exact).  Bar: ARNS's REM below HMC's at a
   fixed budget.

The run lengths are set from short pilots (RNS-HMC: one exploration,
training and as many draws, seed + 1) with a 2x margin; if the machine slows down so that a run ends
before a budget, that budget's entry says so.

Duration: full run (4 problems, budgets 10-80 s, 1 replicate; each run is
sized 2x past the largest budget) about 4 x 9 minutes plus the truths when
not cached (about 15 minutes): about 50 minutes.  ``--problems pde`` took
531 s (load 5-8).
``--quick`` (36 s at load 3): only the PDE on a 12 x 12 mesh, s = 500,
1000 exploration iterations for RNS-HMC, the ARNS updates stopped at 1500
points, windows of 100 and the acceptance bar at 1000 iterations, budgets
2 and 4 s, a 4000-iteration truth (shared with rns-fig8's --quick); the
three logistic regressions are dropped.  Table (a), the paper's Figure 7,
gives ARNS-HMC's window means against the training points, median and
5 % / 95 % quantiles over independent runs: the ``--replicates`` ones and
``--band-replicates`` (default 9, quick 2) ARNS-HMC-only runs just long
enough for the table's windows (their wall time does not matter there; a
full run's nine cost about 10-60 s per problem each).
"""
import argparse
import math
import os
import time

import numpy as np

import fastsurrogate as fs
from . import _rns_fig8 as f8
from ._report import (ARNS_ONLINE, cache_dir, cpu_model, log, machine_line, machine_lines,  # noqa: F401
                      markdown_table, problems_report)
from ._rns_fig8 import PROBLEMS, missing_data
from ._rns_table1 import ARNS


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
    return fs.ARNSHMC(model, training="states",
                      n_start=args.n_start, n_hidden=args.n_hidden, step_size=args.step,
                      n_steps=args.n_steps, random_n_steps=True, metric="unit", adapt=False,
                      update_every=args.update_every, max_points=args.max_points,
                      **{**ARNS_ONLINE, **getattr(args, "arns_options", {})})


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
    ap.add_argument("--problems", nargs="+", default=["sim", "bank", "a9a", "pde"],
                    choices=["sim", "bank", "a9a", "pde"])
    ap.add_argument("--rem", choices=("l2", "l1"), default="l2",
                    help="REM norm: l2 (the RNS-HMC paper's, default) or l1 (sum |error| / "
                         "sum |truth|, this table's norm before; with --problems sim and "
                         "--rns-explore 0 the earlier tables' numbers)")
    ap.add_argument("--cache", metavar="FILE",
                    help="ground-truth .npz of the simulated problem (default: under cache_dir())")
    ap.add_argument("--truth-iter", type=int, help="exact-HMC iterations of the truth run "
                    "(default: rns-fig8's per problem, quick 3000; a longer cached run is reused)")
    ap.add_argument("--budgets", type=float, nargs="+",
                    help="wall-time budgets in seconds (default 10 20 40 80)")
    ap.add_argument("--n-hidden", type=int, help="s of ARNS-HMC and RNS-HMC (default: the "
                    "paper's per problem, quick 500)")
    ap.add_argument("--n-start", type=int, default=200, help="exploration states ARNS starts from")
    ap.add_argument("--explore", type=int, default=500,
                    help="exact exploration / burn-in iterations (HMC and ARNS-HMC)")
    ap.add_argument("--rns-explore", type=int, default=2000,
                    help="exact exploration iterations of RNS-HMC, whose network is trained "
                         "once on the states after the first 20 %% (0: no RNS-HMC curve)")
    ap.add_argument("--burn-in", type=int, default=300,
                    help="first states of every chain left out of the REM")
    ap.add_argument("--window", type=int, default=250)
    ap.add_argument("--acc-iters", type=int, default=3000,
                    help="the acceptance bar: ARNS within 90 %% of HMC's within this many "
                         "iterations (ARNS runs at least this long)")
    ap.add_argument("--update-every", type=int, default=10,
                    help="ARNS iterations per online update chunk")
    ap.add_argument("--max-points", type=int, default=None,
                    help="ARNS: stop the online updates after this many points (default: never)")
    ap.add_argument("--step", type=float, help="step size (default: the paper's per problem)")
    ap.add_argument("--n-steps", type=int, help="L (default: the paper's per problem)")
    ap.add_argument("--n-obs", type=int, default=100000, help="sim: N")
    ap.add_argument("--dim", type=int, default=50, help="sim: d")
    ap.add_argument("--n-mesh", type=int, default=30, help="pde: mesh cells per side")
    ap.add_argument("--n-modes", type=int, default=20, help="pde: Karhunen-Loeve modes")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-seed", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--band-replicates", type=int, default=None,
                    help="extra ARNS-HMC-only runs for table (a)'s band, each as long as the "
                         "table's windows (seeds seed + 7919 r after the replicates'; default "
                         "9, quick 2)")
    ap.add_argument("--replicates", type=int, default=1,
                    help="independent (HMC, RNS-HMC, ARNS-HMC) triples for the REM table (seeds "
                         "seed + 7919 r; medians over them); the acceptance table shows the first")


def _problem_args(name, args):
    """A copy of ``args`` with this problem's settings filled in."""
    cfg = PROBLEMS[name]
    a = argparse.Namespace(**vars(args))
    a.step = args.step if args.step is not None else cfg["step_size"]
    a.n_steps = args.n_steps if args.n_steps is not None else cfg["n_steps"]
    a.n_hidden = args.n_hidden or (500 if args.quick else cfg["n_hidden"])
    a.arns_options = ARNS.get(name, {})
    a.rns_options = cfg.get("surrogate", {})
    return a


def make_rns(model, args):
    return fs.RNSHMC(model, guard=None, trust=None, training="states", n_hidden=args.n_hidden,
                     step_size=args.step, n_steps=args.n_steps, random_n_steps=True,
                     metric="unit", adapt=False, **args.rns_options)


def _rem(res, budget, burn_in, truth, norm):
    """(states used, REM or None, run end time) at ``budget`` s, in the given norm."""
    draws, clock = chain_clock(res)
    k = int(np.searchsorted(clock, budget, side="right"))
    used = draws[burn_in:k]
    rem = fs.diagnostics.relative_error_mean(used, truth, norm=norm) if len(used) else None
    return len(used), rem, float(clock[-1])



def _options_text(options):
    """", k=v, ..." of a sampler's extra options for the report ("" for none)."""
    return ", " + ", ".join(f"{k}={v}" for k, v in options.items()) if options else ""

def _one_problem(name, args, budgets):
    """The report section of one problem: truth, pilots, the runs, tables (a) and (b)."""
    t_start = time.perf_counter()
    args = _problem_args(name, args)
    model, q0, desc, key = f8.make_problem(name, args)
    # the simulated problem starts at beta = 0 (this table's earlier setting); the others at
    # the MAP, as rns-table1
    init = np.zeros(model.dim) if name == "sim" else q0
    truth, truth_src, floor = _truth(name, model, init, key, args)
    runs = _runs(name, model, init, args, budgets[-1], truth["mean"])
    band = [a for _, _, a in runs] + _band_runs(name, model, init, args)
    acc = _acceptance(runs[0], args)
    rem_rows, wins = _rem_table(runs, budgets, args, truth["mean"])
    L = (_settings_lines(name, desc, args, runs, truth, truth_src, floor, t_start)
         + _band_lines(name, args, _acceptance_band(band, runs, args), len(band))
         + _acceptance_lines(name, args, acc)
         + _rem_lines(name, args, budgets, len(runs), rem_rows, wins, floor))
    return "\n".join(L)


def _truth(name, model, init, key, args):
    """(truth, where it came from, its Monte Carlo floor in REM units): the
    posterior mean of a long exact-HMC run, cached."""
    cfg = dict(step_size=args.step, n_steps=args.n_steps)
    n_truth = args.truth_iter or (3000 if args.quick else f8.PROBLEMS[name]["truth"])
    if args.cache and name == "sim":
        truth, truth_src = load_or_run_truth(model, args, n_truth)
    else:
        truth, truth_src = f8.load_or_run_truth(name, model, init, key, cfg, n_truth,
                                                seed=args.seed)
    tmean = truth["mean"]
    mcse = np.asarray(truth["mcse"])
    floor = (math.sqrt(2 / math.pi) * float(np.sum(mcse)) / float(np.sum(np.abs(tmean)))
             if args.rem == "l1" else float(np.sqrt(np.sum(mcse ** 2)) / np.linalg.norm(tmean)))
    return truth, truth_src, floor


def _run_lengths(name, model, args, bmax, tmean, run_kw):
    """(HMC, RNS-HMC, ARNS-HMC) draws that fill the largest budget ``bmax``
    twice over, from short pilots (rerun longer while a pilot's sampling is
    too short to time, see rns-fig8's pilot_cost)."""
    log(f"  [{name}] pilots ...")
    c_hmc = f8.pilot_cost(lambda n: make_hmc(model, args).sample(
        n, 0, chains=1, seed=args.seed + 1, init=tmean, progress=False), 300)[1]
    pre_arns, c_arns = f8.pilot_cost(lambda n: make_arns(model, args).sample(
        n, args.explore, **run_kw), 250)
    if args.max_points:
        fixed = argparse.Namespace(**{**vars(args), "max_points": args.n_start})
        c_arns = min(c_arns, f8.pilot_cost(lambda n: make_arns(model, fixed).sample(
            n, args.explore, **run_kw), 250)[1])
    n_hmc = max(int(2.0 * max(bmax - args.explore * c_hmc, 0) / c_hmc) + 100, 1000)
    n_arns = max(int(2.0 * max(bmax - pre_arns, 0) / c_arns) + 100, args.acc_iters + args.window)
    n_rns = 0
    if args.rns_explore > 0:
        pre_rns, c_rns = f8.pilot_cost(lambda n: make_rns(model, args).sample(
            n, args.rns_explore, **dict(run_kw, seed=args.seed + 1)), args.rns_explore)
        n_rns = int(2.0 * max(bmax - pre_rns, 0) / c_rns) + 100
    return n_hmc, n_rns, n_arns


def _runs(name, model, init, args, bmax, tmean):
    """[(HMC, RNS-HMC or None, ARNS-HMC)] Results, one triple per replicate."""
    run_kw = dict(chains=1, seed=args.seed, init=init, progress=False)
    n_hmc, n_rns, n_arns = _run_lengths(name, model, args, bmax, tmean, run_kw)

    def triple(seed):
        kw = dict(run_kw, seed=seed)
        h = make_hmc(model, args).sample(n_hmc, args.explore, **kw)
        r = (make_rns(model, args).sample(n_rns, args.rns_explore, **kw)
             if args.rns_explore > 0 else None)
        a = make_arns(model, args).sample(n_arns, args.explore, **kw)
        return h, r, a

    log(f"  [{name}] HMC {args.explore} + {n_hmc}, RNS-HMC {args.rns_explore} + {n_rns}, "
        f"ARNS-HMC {args.explore} + {n_arns} ...")
    runs = [triple(args.seed)]
    for r in range(1, args.replicates):
        log(f"  [{name}] replicate {r}, seed {args.seed + 7919 * r} ...")
        runs.append(triple(args.seed + 7919 * r))
    return runs


def _band_windows(args):
    """The windows table (a) shows (at least 16, past ``acc_iters``)."""
    return max(16, math.ceil(args.acc_iters / args.window) + 4)


def _band_runs(name, model, init, args):
    """ARNS-HMC-only runs for table (a)'s band: as many as ``band_replicates``
    (default 9, quick 2), each just long enough for the table's windows
    (their wall time does not matter), seeds after the replicates'."""
    n = args.band_replicates if args.band_replicates is not None else (2 if args.quick else 9)
    n_iter = _band_windows(args) * args.window
    out = []
    for r in range(args.replicates, args.replicates + n):
        log(f"  [{name}] ARNS-HMC band run {r - args.replicates + 1} of {n}, "
            f"{args.explore} + {n_iter}, seed {args.seed + 7919 * r} ...")
        out.append(make_arns(model, args).sample(
            n_iter, args.explore, chains=1, seed=args.seed + 7919 * r, init=init,
            progress=False))
    return out


def _acceptance(triple, args):
    """Table (a) of the first replicate: a dict with the rows (windows of
    ``args.window`` iterations, then blocks of 8 windows, then all), HMC's
    mean acceptance, the end of the first window where ARNS reaches 90 % of
    it (or None), the number of windows and whether the bar is met."""
    hmc, rns, arns = triple
    a_h = hmc.stats["accept_prob"][0]
    a_a = arns.stats["accept_prob"][0]
    a_r = rns.stats["accept_prob"][0] if rns is not None else np.empty(0)
    acc_h = float(a_h.mean())
    w = args.window
    n_win = len(a_a) // w
    first = None
    win_rows = []

    def wmean(a, lo, hi):
        return format(float(a[lo:hi].mean()), ".3f") if hi <= len(a) else "-"

    for k in range(n_win):
        ma = float(a_a[k * w:(k + 1) * w].mean())
        if first is None and ma >= 0.9 * acc_h:
            first = (k + 1) * w
        win_rows.append((k * w, (k + 1) * w))
    shown = min(n_win, _band_windows(args))
    rows = [[f"{lo + 1}-{hi}", wmean(a_a, lo, hi), wmean(a_r, lo, hi), wmean(a_h, lo, hi)]
            for lo, hi in win_rows[:shown]]
    block = 8 * w
    for lo in range(shown * w, n_win * w, block):
        hi = min(lo + block, n_win * w)
        rows.append([f"{lo + 1}-{hi} (mean)", format(float(a_a[lo:hi].mean()), ".3f"),
                     format(float(a_r[lo:hi].mean()), ".3f") if len(a_r[lo:hi]) else "-",
                     format(float(a_h[lo:hi].mean()), ".3f") if len(a_h[lo:hi]) else "-"])
    rows.append(["all (mean)", f"{float(a_a.mean()):.3f}",
                 f"{float(a_r.mean()):.3f}" if len(a_r) else "-", f"{acc_h:.3f}"])
    return dict(rows=rows, acc_h=acc_h, first=first, n_win=n_win,
                bar=first is not None and first <= args.acc_iters)


def _acceptance_band(arns_runs, runs, args):
    """The paper's Figure 7 as a table: ARNS-HMC's mean acceptance in each
    window against the training points it has by the window's end (the
    ``n_start`` start states plus one per iteration: every non-divergent
    proposal, capped at ``max_points``), median and 5 % / 95 % quantiles over
    ``arns_runs`` (the replicates' and the band runs'), and exact HMC's mean
    acceptance (median over the replicates ``runs``)."""
    w = args.window
    n_win = min([len(a.stats["accept_prob"][0]) // w for a in arns_runs]
                + [_band_windows(args)])
    acc = np.array([[float(np.mean(a.stats["accept_prob"][0][k * w:(k + 1) * w]))
                     for k in range(n_win)] for a in arns_runs])
    hmc = float(np.median([np.mean(h.stats["accept_prob"][0]) for h, _, _ in runs]))
    cap = args.max_points or math.inf
    rows = []
    for k in range(n_win):
        med, lo, hi = f8.band(acc[:, k])
        points = min(args.n_start + (k + 1) * w, cap)
        rows.append([f"{points:g}", f"{med:.3f}", f"{lo:.3f}", f"{hi:.3f}", f"{hmc:.3f}"])
        if points >= cap:               # the network is fixed from here on
            break
    return rows


def _band_lines(name, args, rows, n_runs):
    return [f"#### {name} (a): acceptance against the training points", "",
            f"The paper's Figure 7.  Mean acceptance probability of ARNS-HMC in windows of {args.window} iterations "
            f"after the exploration, against the points its network has been fitted to by the "
            f"window's end ({args.n_start} exploration states, then one per iteration: every "
            f"non-divergent proposal"
            + (f", up to {args.max_points}" if args.max_points else "")
            + f"); median and 5 % / 95 % quantiles over {n_runs} independent ARNS-HMC runs "
            "(the REM table's and ARNS-HMC-only ones as long as these windows, seeds seed + "
            "7919 r); exact HMC's mean acceptance (median over the REM table's runs) is the "
            "reference.", "",
            markdown_table(["training points", "ARNS-HMC median", "ARNS-HMC 5 %",
                            "ARNS-HMC 95 %", "exact HMC"], rows), ""]


def _rem_table(runs, budgets, args, tmean):
    """Table (b): one row per budget (medians over the replicates, the
    lowest, the first replicate's states), and per budget whether ARNS's
    REM is below HMC's."""
    rem_rows, wins = [], []
    for b in budgets:
        cells, meds = [], []
        for j in range(3):
            vals = [_rem(t[j], b, args.burn_in, tmean, args.rem) for t in runs
                    if t[j] is not None]
            ok = [v[1] for v in vals if v[1] is not None and b <= v[2]]
            med = float(np.median(ok)) if ok else None
            meds.append(med)
            if not vals:
                cells.append("-")
            elif med is None:
                cells.append(f"- (run ended at {min(v[2] for v in vals):.1f} s)")
            else:
                cells.append(f"{med:.4f}" + (f" ({len(ok)} of {len(vals)})"
                                               if len(ok) < len(vals) else ""))
        named = [(m, v) for m, v in zip(("HMC", "RNS-HMC", "ARNS"), meds) if v is not None]
        lowest = "-" if not named else min(named, key=lambda x: x[1])[0]
        if len(named) > 1 and len({v for _, v in named}) == 1:
            lowest = "equal (same states)"
        h0, a0 = meds[0], meds[2]
        wins.append(h0 is not None and a0 is not None and a0 < h0)
        nstates = " / ".join(str(_rem(t, b, args.burn_in, tmean, args.rem)[0])
                             if t is not None else "-" for t in runs[0])
        rem_rows.append([f"{b:g}", *cells, lowest, nstates])
    return rem_rows, wins


def _settings_lines(name, desc, args, runs, truth, truth_src, floor, t_start):
    """The section's heading and the bullets that say what ran and how long it took."""
    hmc, rns, arns = runs[0]
    a_r = rns.stats["accept_prob"][0] if rns is not None else np.empty(0)
    same_explore = bool(np.array_equal(hmc.warmup_draws, arns.warmup_draws))
    pre_h, per_h = phase_times(hmc)
    pre_a, per_a = phase_times(arns)
    return [
        f"### {name}", "",
        f"- data: {desc}; step {args.step}, L = {args.n_steps} (steps uniform on 1..L), identity "
        f"metric, adapt=False; start at {'beta = 0' if name == 'sim' else 'the MAP'}; seed "
        f"{args.seed}",
        f"- ARNS-HMC: n_start = {args.n_start}, n_hidden = {args.n_hidden} (softplus"
        + _options_text(args.arns_options)
        + f"), exploration = {args.explore} exact iterations (HMC uses the same "
        f"{args.explore} as burn-in; the two exploration chains are "
        f"{'identical' if same_explore else 'NOT identical'}), update_every = "
        f"{args.update_every}, switch probability t^-0.5, online updates "
        + (f"stop after {args.max_points} points (at iteration "
           f"{arns.info['adaptation_stopped'][0]})" if args.max_points else "for the whole run"),
        (f"- RNS-HMC (Algorithm 3, no guard): {args.rns_explore} exact "
         f"exploration iterations, the network (s = {args.n_hidden}"
         + _options_text(args.rns_options)
         + f") trained once on the states after the first 20 %: exploration "
         f"{rns.timings.get('warmup', 0):.2f} s + training {rns.timings.get('train', 0):.2f} s, "
         f"{rns.n_draws} draws at {phase_times(rns)[1] * 1e3:.2f} ms/iter, acceptance "
         f"{float(a_r.mean()):.3f}") if rns is not None else "- RNS-HMC: not run (--rns-explore 0)",
        f"- truth: posterior mean of {int(truth['n_iter'])} exact-HMC iterations ({truth_src}); "
        f"its own Monte Carlo error is about REM {floor:.2g}",
        f"- exact HMC: exploration {pre_h:.2f} s, {hmc.n_draws} draws at {per_h * 1e3:.2f} "
        f"ms/iter, acceptance {float(hmc.stats['accept_prob'][0].mean()):.3f}",
        f"- ARNS-HMC: exploration {arns.timings.get('warmup', 0):.2f} s + training "
        f"{arns.timings.get('train', 0):.2f} s, {arns.n_draws} draws at {per_a * 1e3:.2f} "
        f"ms/iter, acceptance {float(arns.stats['accept_prob'][0].mean()):.3f}, "
        f"{len(arns.info['switch_iterations'][0])} surrogate switches, "
        f"{arns.info['batch_resolves'][0]} batch re-solves",
        f"- {time.perf_counter() - t_start:.0f} s for this problem",
        ""]


def _acceptance_lines(name, args, acc):
    """Subsection (a): the acceptance table and its bar."""
    w, first, acc_h = args.window, acc["first"], acc["acc_h"]
    return [
        f"#### {name} (a2): acceptance over the iterations, first replicate", "",
        f"Mean acceptance probability in windows of {w} iterations after the exploration "
        "(later: means over blocks of 8 windows).", "",
        markdown_table(["iterations", "ARNS-HMC", "RNS-HMC", "exact HMC"], acc["rows"]), "",
        f"First window with ARNS acceptance >= 90% of HMC's mean ({0.9 * acc_h:.3f}): "
        + (f"iterations {first - w + 1}-{first}" if first
           else f"none in {acc['n_win'] * w} iterations")
        + f".  Bar (within {args.acc_iters} iterations): {'MET' if acc['bar'] else 'NOT MET'}.",
        ""]


def _rem_lines(name, args, budgets, n_runs, rem_rows, wins, floor):
    """Subsection (b): the REM table at fixed wall time and its bar."""
    norm_txt = ("||mean - truth||_2 / ||truth||_2 (L2, the RNS-HMC paper's)" if args.rem == "l2"
                else "sum |mean - truth| / sum |truth| (L1)")
    return [
        f"#### {name} (b): REM at fixed wall time", "",
        f"REM = {norm_txt} of all states after the first {args.burn_in} of each chain "
        "(exploration states included) done when the wall clock reaches the budget; elapsed "
        "time includes exploration and training, mapped linearly within each phase from the "
        "per-phase timings (ARNS: within each chunk, from the clock marks it records)"
        + (f"; medians over {n_runs} independent replicates (cells say how many reached "
           "the budget when not all did); states: the first replicate's" if n_runs > 1
           else "") + ".", "",
        markdown_table(["budget s", "HMC REM", "RNS-HMC REM", "ARNS REM", "lowest",
                        "states (HMC / RNS / ARNS)"], rem_rows), "",
        "Bar (ARNS REM below HMC's at a fixed budget): "
        + ("MET at " + ", ".join(f"{b:g} s" for b, ok in zip(budgets, wins) if ok)
           if any(wins) else "NOT MET at any budget")
        + f".  Truth error floor ~{floor:.2g}."]


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    budgets = sorted(args.budgets or ([5.0, 10.0] if args.quick else [10.0, 20.0, 40.0, 80.0]))
    if args.explore < args.n_start:
        raise ValueError("--explore must be >= --n-start")
    if not 0 <= args.burn_in <= args.explore:
        raise ValueError("--burn-in must be between 0 and --explore")
    if args.rns_explore and args.rns_explore < args.burn_in:
        raise ValueError("--rns-explore must be 0 or >= --burn-in")
    if args.replicates < 1:
        raise ValueError("--replicates must be >= 1")
    if args.band_replicates is not None and args.band_replicates < 0:
        raise ValueError("--band-replicates must be >= 0")
    parts = problems_report(
        ["\n".join(machine_lines())], args.problems,
        lambda name: _one_problem(name, args, budgets), missing_data,
        "--quick: a smoke run (see the table's options for what it shortens); the full command "
        "runs the four problems at the paper's sizes." if getattr(args, "quick", False) else None)
    return "\n\n".join(parts) + "\n"
