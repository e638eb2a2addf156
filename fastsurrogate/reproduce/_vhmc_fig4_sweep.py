"""VHMC paper, Figure 4 as the paper draws it: final error at time T against
the mixing rate, each algorithm run at several settings (section 4.3).

One run of T seconds (``--sweep-budget``, default 300 s, the paper's first
budget) per algorithm and setting, one chain each, all started at the
Laplace mean (the Laplace fit's seconds are charged to every run):

* HMC, L = 50, 40, 30, 20, 10, 5, 1 (``n_steps``; L uniform on 1..L), dense
  Laplace metric, step size adapted over 500 warm-up iterations (target
  acceptance 0.8; the paper: "around 70 %").
* VHMC, L = 50, 40, 30, 20, 10, 5: the table's VHMC (s, t0, n_s = 500,
  Laplace metric) with that L; its training counts in the T seconds.
* SGLD, fixed step sizes 2e-3, 1e-3, 5e-4, 1e-4, 5e-5, 1e-5 (``fs.SGLD``,
  step_decay 0: eps_t = eps, the noise variance of Welling & Teh's eq. 4),
  batch 500 (the paper's, section 4.3), no preconditioning, no burn-in
  beyond the MAP start.  SGLD is approximate: its REM / REC level off at
  its bias whatever T.

Per run: the mixing rate (mean over the 51 parameters of the bulk ESS of the
draws done by T, divided by T: the paper's time-normalised mean ESS;
training, warm-up and the Laplace fit included), and REM / REC (eq. 4.1) of
the draws done by T against the table's ground truth.  A draw's time is
its phase's start plus its share of the phase (as in the table above).
HMC and VHMC runs are sized from the table's own runs (seconds per gradient,
per training iteration and per surrogate iteration at L = 10, scaled by
(L + 1) / 11); SGLD runs in chunks from a pilot's cost, thinned to at most
``--sweep-keep`` draws (ESS, REM and REC are then those of the thinned
chain; the report says where).
"""
import math
import os
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.diagnostics import ess_bulk, relative_error_cov, relative_error_mean
from ._nnghmc_figs import write_png
from ._report import log, markdown_table

__all__ = ["SETTINGS", "QUICK_SETTINGS", "mixing_rate", "errors_at", "sweep_options",
           "sweep_report", "plot_sweep"]

SETTINGS = {"HMC": [50, 40, 30, 20, 10, 5, 1], "VHMC": [50, 40, 30, 20, 10, 5],
            "SGLD": [2e-3, 1e-3, 5e-4, 1e-4, 5e-5, 1e-5]}
QUICK_SETTINGS = {"HMC": [10, 1], "VHMC": [10, 5], "SGLD": [1e-3, 1e-4]}
QUICK_BUDGET = 2.5
SGLD_BATCH = 500
PAPER_CELL = "n/a (the paper plots these; no number)"


def mixing_rate(draws, seconds):
    """Time-normalised mean ESS: the mean over parameters of the bulk ESS of
    ``draws`` (draws, dim) or (chains, draws, dim), per second of ``seconds``."""
    d = np.asarray(draws, dtype=float)
    return float(np.mean(ess_bulk(d[None] if d.ndim == 2 else d))) / float(seconds)


def errors_at(draws, times, budget, truth):
    """(draws done by ``budget``, REM, REC) of one chain's ``draws`` (n, dim)
    with completion ``times`` (n,); REM / REC are None under 10 draws."""
    k = int(np.searchsorted(times, budget, side="right"))
    if k < 10:
        return k, None, None
    used = draws[:k]
    return k, relative_error_mean(used, truth["mean"]), relative_error_cov(used, truth["cov"])


def sweep_options(ap):
    """The sweep's options, added to the table's parser."""
    ap.add_argument("--sweep-budget", type=float, help="T of each sweep run in seconds "
                    "(default 300, the paper's first budget; 3000 is its second: 19 runs x "
                    f"3000 s is over 15 hours here, so it is not the default; quick "
                    f"{QUICK_BUDGET:g})")
    ap.add_argument("--sweep-keep", type=int, default=100000,
                    help="SGLD draws kept per run (thinned evenly beyond this)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the sweep")


def _phase_times(res, pre, n_draws=None):
    """Completion time of each kept draw: ``pre`` + warm-up / training, then
    the sampling phase shared evenly."""
    t = res.timings
    start = pre + sum(float(t.get(k, 0.0)) for k in ("warmup", "train"))
    n = res.n_draws
    return start + float(t["sample"]) * np.arange(1, n + 1) / n


def _run_hmc(model, lap, pre, L, T, c_grad, seed, n_warm):
    c_iter = c_grad * (L + 1) / 2
    n = max(100, int(1.15 * (T - pre) / c_iter) - n_warm)
    res = fs.HMC(model, n_steps=L, metric=lap.cov).sample(
        n, n_warm, chains=1, seed=seed, init=lap.mean, progress=False, warn=False)
    return res.draws[0], _phase_times(res, pre), dict(
        acc=float(res.acceptance_rate.mean()), step=float(res.step_size[0]), note="")


def _run_vhmc(model, lap, pre, L, T, costs, args):
    c_train, c_iter = costs["vhmc_train"] * (L + 1) / 11, costs["vhmc_iter"] * (L + 1) / 11
    if pre + args.train * c_train > T:
        return None, None, dict(note=f"not run: its training alone would take about "
                                     f"{args.train * c_train:.0f} s > T (estimated from L = 10)")
    n = int(1.2 * (T - pre - args.train * c_train) / c_iter) + 100
    cap = min(n, args.vhmc_draws)
    res = fs.VHMC(model, laplace_tail=False, n_hidden=args.n_hidden, n_s=500,
                  n_train=args.train, laplace=lap, n_steps=L).sample(
        cap, args.train, chains=1, seed=args.seed, progress=False, warn=False)
    times = _phase_times(res, pre)
    note = (f"draws capped at {cap} (--vhmc-draws), run ended at {times[-1]:.2f} s"
            if times[-1] < T else "")
    return res.draws[0], times, dict(acc=float(res.acceptance_rate.mean()),
                                     step=float(res.step_size[0]), note=note)


def _run_sgld(model, lap, pre, eps, T, keep, seed):
    """SGLD in chunks from the MAP, each continuing from the last state (a
    constant step makes the chain memoryless beyond its position)."""
    sampler = fs.SGLD(model, step_size=eps, step_decay=0.0, batch_size=SGLD_BATCH)
    pilot = sampler.sample(2000, 0, chains=1, seed=seed + 10**6, init=lap.mean,
                           progress=False, warn=False)
    c_iter = pilot.timings["sample"] / 2000
    n_total = int(1.1 * (T - pre) / c_iter) + 100
    thin = max(1, math.ceil(n_total / keep))
    chunk = thin * max(1, min(n_total, 200000) // thin)
    kept, times, q, clock, k = [], [], lap.mean, pre, 0
    while clock < T:
        res = sampler.sample(chunk, 0, chains=1, seed=seed + k, init=q, progress=False,
                             warn=False)
        d = res.draws[0]
        if not np.all(np.isfinite(d)):
            return None, None, dict(note=f"diverged (non-finite draws) at step {eps:g}")
        t = clock + float(res.timings["sample"]) * np.arange(1, chunk + 1) / chunk
        kept.append(d[thin - 1::thin])
        times.append(t[thin - 1::thin])
        q, clock, k = d[-1], float(t[-1]), k + 1
    note = f"thinned by {thin}" if thin > 1 else ""
    return np.concatenate(kept), np.concatenate(times), dict(acc=float("nan"), step=eps,
                                                             note=note)


def _costs(runs, args):
    """Seconds per exact gradient (tuned HMC, L uniform on 1..10: 5.5 on
    average), per VHMC training iteration and per VHMC draw, at L = 10."""
    h, v = runs["HMC tuned"], runs["VHMC"]
    return dict(grad=float(h.timings["sample"]) / h.n_draws / 5.5,
                vhmc_train=float(v.timings["train"]) / args.train,
                vhmc_iter=float(v.timings["sample"]) / v.n_draws)


def _one(alg, setting, prob, costs, args, T):
    model, lap, pre = prob["model"], prob["lap"], prob["t_lap"]
    if alg == "HMC":
        return _run_hmc(model, lap, pre, setting, T, costs["grad"], args.seed,
                        200 if getattr(args, "quick", False) else 500)
    if alg == "VHMC":
        return _run_vhmc(model, lap, pre, setting, T, costs, args)
    keep = min(args.sweep_keep, 20000) if getattr(args, "quick", False) else args.sweep_keep
    return _run_sgld(model, lap, pre, setting, T, keep, args.seed)


def sweep_points(prob, runs, args):
    """[(algorithm, setting, draws by T, mixing rate, REM, REC, note)] of the sweep."""
    quick = getattr(args, "quick", False)
    T = args.sweep_budget or (QUICK_BUDGET if quick else 300.0)
    settings = QUICK_SETTINGS if quick else SETTINGS
    costs = _costs(runs, args)
    points = []
    for alg, values in settings.items():
        for s in values:
            log(f"sweep: {alg} {'L = ' if alg != 'SGLD' else 'step '}{s:g}, T = {T:g} s ...")
            draws, times, info = _one(alg, s, prob, costs, args, T)
            if draws is None:
                points.append((alg, s, 0, None, None, None, info["note"]))
                continue
            k, rem, rec = errors_at(draws, times, T, prob["truth"])
            seconds = min(T, float(times[-1]))
            rate = mixing_rate(draws[:k], seconds) if k >= 10 else None
            points.append((alg, s, k, rate, rem, rec, info["note"]))
    return T, points


def _cell(x, fmt):
    return "-" if x is None else format(x, fmt)


def sweep_report(prob, runs, args):
    """The sweep's section of the report (Markdown lines), its PNG beside it."""
    if getattr(args, "no_sweep", False):
        return []
    t0, c0 = time.perf_counter(), time.process_time()
    T, points = sweep_points(prob, runs, args)
    rows = []
    for alg, s, k, rate, rem, rec, note in points:
        bias = "; approximate: REM / REC level off at its bias" if alg == "SGLD" else ""
        rows.append([alg, f"{'L = ' if alg != 'SGLD' else 'eps = '}{s:g}", k,
                     _cell(rate, ".2f"), _cell(rem, ".4f"), _cell(rec, ".4f"),
                     (note + bias).lstrip("; ") or "", PAPER_CELL])
    L = ["", f"## The paper's sweep: error at T = {T:g} s against mixing rate", "",
         f"One run of T = {T:g} s per algorithm and setting (the paper's Figure 4, left "
         "panels; its right panels, T = 3000 s, are `--sweep-budget 3000`: 19 runs x 3000 s "
         "is over 15 hours here, so the default runs only T = 300 s; --quick: T = "
         f"{QUICK_BUDGET:g} s, two settings per algorithm). Mixing rate: mean over "
         "parameters of the bulk ESS of the draws done by T, per second of T (Laplace fit, "
         "warm-up and VHMC's training included). HMC: Laplace metric, step adapted over "
         f"{200 if getattr(args, 'quick', False) else 500} warm-up iterations. VHMC: s = "
         f"{args.n_hidden}, t0 = {args.train} (a setting whose training alone would pass T, "
         "estimated from the L = 10 run above, is not run). SGLD: batch "
         f"{SGLD_BATCH} (the paper's, section 4.3), fixed step, no preconditioning, from the "
         "MAP; thinned evenly where it would keep more draws than --sweep-keep; approximate, "
         "so its REM / REC level off at its bias.", "",
         markdown_table(["algorithm", "setting", "draws by T", "mixing rate (ESS/s)",
                         "REM at T", "REC at T", "note", "paper"], rows)]
    png = plot_sweep(points, T, getattr(args, "out_dir", None))
    if png:
        L += ["", f"![Figure 4: error at T = {T:g} s against mixing rate]"
                  f"({os.path.basename(png)})"]
    L.append(f"\n(sweep: {time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s "
             f"CPU; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return L


def plot_sweep(points, T, out_dir):
    """The paper's Figure 4 for one T: REM (top) and REC (bottom) against
    the mixing rate, one marker per algorithm, points labelled by setting.
    Returns the PNG's path, or None (no folder, no matplotlib, no points)."""
    ok = [p for p in points if p[3] is not None and p[4] is not None]
    if not ok:
        return None
    markers = {"HMC": "s", "VHMC": "o", "SGLD": "^"}

    def draw(axes):
        for ax, j, name in zip(axes[:, 0], (4, 5), ("REM", "REC")):
            for alg, m in markers.items():
                pts = [p for p in ok if p[0] == alg]
                if pts:
                    ax.scatter([p[3] for p in pts], [p[j] for p in pts], marker=m, label=alg,
                               s=40)
                for i, p in enumerate(pts):     # SGLD's labels above, the others right,
                    tag = f"L={p[1]:g}" if alg != "SGLD" else f"eps={p[1]:.0e}"  # alternating
                    sg = alg == "SGLD"
                    ax.annotate(tag, (p[3], p[j]), textcoords="offset points", fontsize=7,
                                xytext=(0 if sg else 5, 6 if sg or i % 2 == 0 else -10),
                                ha="center" if sg else "left")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.margins(0.12)                    # room for the labels at the edges
            ax.set_ylabel(f"{name} at T = {T:g} s")
            ax.legend(fontsize=8)
        axes[1, 0].set_xlabel("mixing rate: mean bulk ESS per second")
    name = "vhmc-fig4-sweep.png"
    line = write_png(out_dir, name, draw, shape=(2, 1), size=(6.0, 3.5),
                     title=f"Figure 4 (a9a-50): final error at T = {T:g} s vs mixing rate")
    return os.path.join(out_dir, name) if line else None
