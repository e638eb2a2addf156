"""Stochastic-gradient baselines (issue 16, beside the VHMC paper's Figure 4):
REM of the posterior mean against wall time for SGLD, SGHMC, VHMC and exact
HMC on one logistic regression with N = 100000, in one run.

    fastsurrogate reproduce sg-rem [--quick] [--budgets ...] [--truth-draws N]

Problem: ``fs.datasets.simulate_logistic(n=100000, d=50, seed=1)``,
``LogisticRegression(prior_sd=10, n_threads=--threads)``; every sampler one
chain started at the MAP (the Laplace mean; its time is charged to VHMC only,
which needs the Laplace fit).  Truth: a long exact-HMC run (4 chains,
step 0.045, L = 6), cached under ``fastsurrogate.reproduce._report.cache_dir()``.
REM (VHMC paper eq. 4.1, sum |mean - truth| / sum |truth|) of the draws kept
by each wall-clock budget; a draw's time is the sampler's set-up + warm-up /
training + its share of the sampling phase.

Samplers: SGLD (batch 1000, step a (b + t)^-0.55, a = 3e-4 * 1000^0.55,
b = 1000), SGHMC (batch 1000, step 0.004 fixed, friction 5, 5 steps per
iteration), exact HMC (step 0.045, L drawn from 1..6, identity metric),
VHMC (s = 2000, n_s = 500, t0 = 2500 training iterations, then free draws
with the surrogate test).  SGLD, SGHMC and VHMC are approximate samplers:
their REM stops falling at their bias; exact HMC's keeps falling.
"""
import os
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.diagnostics import mcse_mean, relative_error_mean, rhat
from ._report import cache_dir, log, machine_line, markdown_table, plot_curves


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--budgets", type=float, nargs="+", default=[2.0, 5.0, 10.0, 20.0, 40.0],
                    help="wall-time budgets (s)")
    ap.add_argument("--truth-draws", type=int, default=40000)
    ap.add_argument("--vhmc-hidden", type=int, default=2000)
    ap.add_argument("--vhmc-train", type=int, default=2500)
    ap.add_argument("--vhmc-draws", type=int, default=200000)
    ap.add_argument("--threads", type=int, default=1, help="threads of the data-sum kernel")


def _truth(fs, model, q0, draws):
    key = f"sim_logistic_n100000_d50_seed1_hmc{draws}"
    path = os.path.join(cache_dir(), f"sg_truth_{key}.npz")
    if os.path.exists(path):
        with np.load(path) as f:
            if str(f["key"]) == key:
                return {k: f[k] for k in f.files}, "cached"
    log(f"  truth: exact HMC, 4 chains x {draws // 4} draws ...")
    t0 = time.perf_counter()
    res = fs.HMC(model, n_steps=6, step_size=0.045, adapt=False, metric="unit").sample(
        draws // 4, 200, chains=4, seed=777, init=q0, progress=False)
    mean = res.draws.reshape(-1, res.dim).mean(axis=0)
    floor = float(np.sqrt(2 / np.pi) * np.sum(mcse_mean(res.draws)) / np.sum(np.abs(mean)))
    data = dict(mean=mean, rem_floor=np.float64(floor),
                rhat_max=np.float64(np.max(rhat(res.draws))),
                seconds=np.float64(time.perf_counter() - t0), key=np.str_(key))
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        np.savez(path, **data)
    except OSError:
        pass
    return data, f"computed now, {float(data['seconds']):.0f} s"


def _clock(res, pre):
    t = res.timings
    start = pre + sum(float(t.get(k, 0.0)) for k in ("warmup", "train", "explore"))
    n = res.n_draws
    return start + float(t["sample"]) * np.arange(1, n + 1) / n


def reproduce(args):
    """Run the comparison; return the Markdown report."""
    budgets = sorted(args.budgets)
    bmax = budgets[-1]
    X, y, _ = fs.datasets.simulate_logistic(n=100000, d=50, seed=1)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=args.threads)
    t0 = time.perf_counter()
    lap = fs.surrogates.laplace_approximation(model)
    t_lap = time.perf_counter() - t0
    q0 = lap.mean
    truth, src = _truth(fs, model, q0, args.truth_draws)

    def per_iter(sampler, n):
        r = sampler.sample(n, 0, chains=1, seed=0, init=q0, progress=False)
        return r.timings["sample"] / n

    k = 1000
    makers = {
        "SGLD": lambda: fs.SGLD(model, step_size=3e-4 * 1000 ** 0.55, step_offset=1000.0,
                                step_decay=0.55, batch_size=k),
        "SGHMC": lambda: fs.SGHMC(model, step_size=0.004, step_decay=0.0, friction=5.0,
                                  n_steps=5, batch_size=k),
        "HMC": lambda: fs.HMC(model, n_steps=6, step_size=0.045, adapt=False, metric="unit"),
    }
    pilots = {"SGLD": 2000, "SGHMC": 500, "HMC": 50}
    runs = {}
    for name, make in makers.items():
        c = per_iter(make(), pilots[name])
        n = int(1.2 * bmax / c) + 100
        log(f"  {name}: {n} draws ({c * 1e3:.3f} ms/iter pilot) ...")
        runs[name] = (make().sample(n, 0, chains=1, seed=1, init=q0, progress=False), 0.0)
    log(f"  VHMC: s = {args.vhmc_hidden}, t0 = {args.vhmc_train}, {args.vhmc_draws} draws ...")
    v = fs.VHMC(model, laplace_tail=False,
                n_hidden=args.vhmc_hidden, n_s=500, n_train=args.vhmc_train,
                laplace=lap, n_steps=10)
    runs["VHMC"] = (v.sample(args.vhmc_draws, args.vhmc_train, chains=1, seed=1, init=q0,
                             progress=False), t_lap)
    names = ["SGLD", "SGHMC", "VHMC", "HMC"]
    L = [machine_line() + f"; data-sum threads {args.threads}; OPENBLAS_NUM_THREADS="
         f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; load average at the end "
         f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}", "",
         "Simulated logistic regression, N = 100000, d = 50, prior N(0, 100 I); one chain per "
         "sampler from the MAP. SGLD: batch 1000, step 3e-4 (1 + t/1000)^-0.55; SGHMC: batch "
         "1000, step 0.004, friction 5, 5 steps; HMC: step 0.045, L from 1..6; VHMC: s = "
         f"{args.vhmc_hidden}, t0 = {args.vhmc_train}. REM = sum |mean - truth| / sum |truth| of "
         "the draws done by each budget (set-up, warm-up and training included).", "",
         f"- truth: {args.truth_draws} exact-HMC draws ({src}); its own REM floor "
         f"~{float(truth['rem_floor']):.1e}, max R-hat {float(truth['rhat_max']):.3f}"]
    for name in names:
        r, pre = runs[name]
        L.append(f"- {name}: set-up {pre:.2f} s, warm-up/training "
                 f"{sum(float(r.timings.get(x, 0)) for x in ('warmup', 'train', 'explore')):.1f} s, "
                 f"{r.n_draws} draws at {r.timings['sample'] / r.n_draws * 1e3:.3f} ms/iter, "
                 f"{'exact' if r.exact else 'approximate'}, acceptance "
                 f"{float(np.mean(r.acceptance_rate)):.3f}")
    rows, curves = [], {n: ([], []) for n in names}
    for b in budgets:
        cells = [f"{b:g}"]
        for name in names:
            r, pre = runs[name]
            kk = int(np.searchsorted(_clock(r, pre), b, side="right"))
            if kk < 10:
                cells.append("- (no draws yet)")
                continue
            rem = relative_error_mean(r.draws[0, :kk], truth["mean"])
            cells.append(f"{rem:.4f}")
            curves[name][0].append(b)
            curves[name][1].append(rem)
        rows.append(cells)
    L += ["", markdown_table(["budget s"] + [f"{n} REM" for n in names], rows), "",
          markdown_table(["", *names], [["REM of all kept draws", *(
              f"{relative_error_mean(runs[n][0].draws, truth['mean']):.4f}" for n in names)]])]
    if getattr(args, "out_dir", None):
        png = plot_curves(os.path.join(args.out_dir, "sg-rem.png"),
                          {n: c for n, c in curves.items() if c[0]}, "wall time (s)", "REM",
                          "SGLD / SGHMC / VHMC / HMC, logistic N = 100000", logy=True)
        if png:
            L += ["", f"![REM against wall time]({os.path.basename(png)})"]
    return "\n".join(L)
