"""VHMC paper, Figure 4 as a table: Bayesian logistic regression on a9a reduced
to 50 features by a random projection; relative error of the mean (REM) and of
the covariance (REC) at fixed wall-time budgets, VHMC against exact HMC, and
time-normalised effective sample size.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python bench/paper_vhmc_fig4.py [--quick] [--out FILE]

Data and model: ../shared/data/a9a.libsvm.gz (32561 rows, 123 binary
features), ``fs.datasets.random_projection(X, 50, seed=2017)`` (Gaussian
projection, standardised, plus an intercept: 51 parameters),
``fs.models.LogisticRegression(X, y, prior_sd=10, n_threads=1)``.

Samplers (one chain each; clocks start before the Laplace fit):

* VHMC, the paper's settings: s = 2000 hidden units, mu_t = 1 - exp(-t/500)
  (``n_s=500``), trained for t0 = ``--train`` iterations (default 2500: mu =
  0.993), then frozen; Laplace-whitened softplus units, input_scale 0.5,
  relative ridge 1e-6, dense Laplace metric, n_steps 10 (uniform 1..10),
  step size by dual averaging during training.  Draws after t0 are capped at
  ``--vhmc-draws`` (its REM is then at its bias floor; later budgets reuse
  them and say so).
* exact HMC, tuned: the same Laplace fit as a dense metric, the same
  n_steps, 500 warm-up iterations of step-size adaptation, started at the MAP.
  The strongest exact baseline we have; the bars are judged against it.
* exact HMC, identity metric: step size adapted over 500 warm-up iterations,
  n_steps 10 (uniform), started at the MAP.  (The RNS-HMC paper's fixed a9a
  step 0.012 started at 0 never accepted a proposal here: acceptance 0.000
  over 17000 iterations.)

Ground truth: mean and covariance of a long tuned-HMC run (4 chains), cached
in bench/.cache; its own Monte Carlo floor (sqrt(2/pi) sum MCSE / sum |mean|)
is printed: REM differences below it are not resolved.

REM / REC at a budget use the post-warm-up (HMC) or post-t0 (VHMC) draws done
when the clock reaches the budget; each sampler runs ONCE for the largest
budget and the time of each draw is mapped linearly within each phase from
the per-phase timings.  Budgets: the paper's first budget is 300 s on its
machine; VHMC's training here takes 60-80 s on the shared machine, so the
default budgets are 120, 240, 360 s (the first about a minute after
training ends; scaled to this machine; ``--budgets``).

ESS: mean over parameters of the bulk ESS (rank-normalised) of each
sampler's whole sampling phase, per second of sampling phase and per second
of the whole run (including Laplace, warm-up, training).

Bars (issue 4): VHMC's REM below tuned exact HMC's at the first budget; VHMC's
time-normalised mean ESS at least 10x HMC's.

Second part, the paper's own drawing (``_vhmc_fig4_sweep``): one run of T =
``--sweep-budget`` seconds (default 300) per algorithm and setting (HMC L =
50..1, VHMC L = 50..5, SGLD step 2e-3..1e-5, batch 500), REM and REC at T
against the same truth, against the time-normalised mean ESS, as a table and
a scatter PNG; ``--no-sweep`` skips it.
"""
import argparse
import os
import platform
import time

import numpy as np

import fastsurrogate as fs
from ._report import cache_dir, cpu_model, log, machine_line  # noqa: F401
from fastsurrogate.diagnostics import relative_error_mean, ess_bulk, mcse_mean
from ._vhmc_fig4_sweep import errors_at, sweep_options, sweep_report




def load_or_run_truth(model, lap, args):
    key = f"a9a_k{args.k}_proj{args.proj_seed}_draws{args.truth_draws}"
    path = args.cache or os.path.join(cache_dir(), f"vhmc_fig4_truth_{key}.npz")
    if os.path.exists(path):
        with np.load(path) as f:
            if str(f["key"]) == key:
                return {k: f[k] for k in f.files}, f"cached {path}"
    log(f"ground truth: tuned HMC, 4 chains x {args.truth_draws // 4} draws ...")
    t0 = time.perf_counter()
    res = fs.HMC(model, n_steps=10, metric=lap.cov).sample(
        args.truth_draws // 4, 1000, chains=4, seed=777, init=lap.mean, progress=False)
    pooled = res.draws.reshape(-1, res.dim)
    mean = pooled.mean(axis=0)
    floor = float(np.sqrt(2 / np.pi) * np.sum(mcse_mean(res.draws)) / np.sum(np.abs(mean)))
    data = dict(mean=mean, cov=np.cov(pooled, rowvar=False), rem_floor=np.float64(floor),
                rhat_max=np.float64(np.max(fs.diagnostics.rhat(res.draws))),
                seconds=np.float64(time.perf_counter() - t0), key=np.str_(key))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez(path, **data)
    return data, f"computed now ({data['seconds']:.0f} s), saved to {path}"


def clock(res, pre):
    """Wall-clock second at which each draw of res (one chain) was done."""
    t = res.timings
    start = pre + sum(float(t.get(k, 0.0)) for k in ("laplace", "warmup", "train"))
    n = res.n_draws
    return start + float(t["sample"]) * np.arange(1, n + 1) / n


at_budget = errors_at     # (draws done by the budget, REM, REC) of one chain


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    ap.add_argument("--budgets", type=float, nargs="+")
    ap.add_argument("--train", type=int, help="VHMC training iterations t0 (default 2500)")
    ap.add_argument("--n-hidden", type=int, help="default 2000")
    ap.add_argument("--vhmc-draws", type=int, default=200000)
    ap.add_argument("--truth-draws", type=int, help="default 40000 (quick 8000)")
    ap.add_argument("--k", type=int, default=50, help="projected features")
    ap.add_argument("--proj-seed", type=int, default=2017)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", metavar="FILE")
    sweep_options(ap)


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    budgets = sorted(args.budgets or ([30.0, 60.0] if args.quick else [120.0, 240.0, 360.0]))
    args.train = args.train or (1000 if args.quick else 2500)
    args.n_hidden = args.n_hidden or (500 if args.quick else 2000)
    args.truth_draws = args.truth_draws or (8000 if args.quick else 40000)
    t_start = time.perf_counter()
    prob = _problem(args)
    runs = _runs(prob["model"], prob["lap"], prob["t_lap"], args, budgets[-1])
    rows = _budget_rows(runs, budgets, prob["truth"])
    ess = _ess(runs)
    L = ["# VHMC paper, Figure 4: a9a-50, REM / REC at fixed wall time, VHMC vs exact HMC", ""]
    L += _settings_lines(prob, runs, ess, args, budgets, t_start)
    L += _budget_table(rows) + _ess_table(runs, ess) + _bars(rows, ess, budgets)
    L += sweep_report(prob, runs, args)
    report = "\n".join(L) + "\n"
    return report


def _problem(args):
    """The a9a-50 model, its Laplace approximation (and the seconds it took),
    the ground truth and the Laplace mean's and covariance's own errors."""
    X, y = fs.datasets.load_a9a()
    X = fs.datasets.random_projection(X, args.k, seed=args.proj_seed)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1)
    t0 = time.perf_counter()
    lap = fs.surrogates.laplace_approximation(model)
    t_lap = time.perf_counter() - t0
    truth, truth_src = load_or_run_truth(model, lap, args)
    lap_rem = relative_error_mean(lap.mean[None], truth["mean"])
    lap_rec = float(np.abs(lap.cov - truth["cov"]).sum() / np.abs(truth["cov"]).sum())
    return dict(n_rows=X.shape[0], model=model, lap=lap, t_lap=t_lap, truth=truth,
                truth_src=truth_src, lap_rem=lap_rem, lap_rec=lap_rec)


def _runs(model, lap, t_lap, args, bmax):
    """{"VHMC", "HMC tuned", "HMC identity"}: one chain each, HMC sized from a
    pilot to run past the largest budget ``bmax``; every Result's timings
    include the Laplace fit's ``t_lap``."""
    # pilots: cost per iteration, to size the runs
    log("pilots ...")
    p = fs.HMC(model, n_steps=10, metric=lap.cov, step_size=0.5, adapt=False).sample(
        200, 0, chains=1, seed=0, init=lap.mean, progress=False)
    c_hmc = p.timings["sample"] / p.n_draws
    n_hmc = int(1.3 * bmax / c_hmc) + 1000

    log(f"VHMC: t0 = {args.train}, s = {args.n_hidden}, {args.vhmc_draws} draws ...")
    vhmc = fs.VHMC(model, laplace_tail=False,
                   n_hidden=args.n_hidden, n_s=500, n_train=args.train, laplace=lap,
                   n_steps=10).sample(args.vhmc_draws, args.train, chains=1, seed=args.seed,
                                      progress=False)
    vhmc.timings["laplace"] = t_lap
    log(f"tuned HMC: 500 warm-up + {n_hmc} draws (pilot {c_hmc * 1e3:.2f} ms/iter) ...")
    hmc = fs.HMC(model, n_steps=10, metric=lap.cov).sample(
        n_hmc, 500, chains=1, seed=args.seed, init=lap.mean, progress=False)
    hmc.timings["laplace"] = t_lap
    log(f"identity-metric HMC: 500 warm-up + {n_hmc} draws ...")
    hmc_p = fs.HMC(model, n_steps=10, metric="unit").sample(
        n_hmc, 500, chains=1, seed=args.seed, init=lap.mean, progress=False)
    hmc_p.timings["laplace"] = t_lap
    return {"VHMC": vhmc, "HMC tuned": hmc, "HMC identity": hmc_p}


def _budget_rows(runs, budgets, truth):
    """Per budget: [budget, (draws, REM, REC, run end) of each run]."""
    rows = []
    for b in budgets:
        row = [b]
        for name, res in runs.items():
            times = clock(res, 0.0)
            k, rem, rec = at_budget(res.draws[0], times, b, truth)
            row.append((k, rem, rec, float(times[-1])))
        rows.append(row)
    return rows


def _ess(runs):
    """name -> (mean bulk ESS, per second of sampling, per second of the
    whole run, seconds per sampling iteration)."""
    ess = {}
    for name, res in runs.items():
        e = ess_bulk(res.draws)
        t = res.timings
        total = sum(float(t.get(k, 0.0)) for k in ("laplace", "warmup", "train", "sample"))
        ess[name] = (float(np.mean(e)), float(np.mean(e)) / float(t["sample"]),
                     float(np.mean(e)) / total, float(t["sample"]) / res.n_draws)
    return ess


def _settings_lines(prob, runs, ess, args, budgets, t_start):
    """The bullets: machine, data, Laplace, truth, each sampler's run, budgets."""
    vhmc, hmc, hmc_p = runs["VHMC"], runs["HMC tuned"], runs["HMC identity"]
    lap, truth = prob["lap"], prob["truth"]
    return [
        f"- machine: {os.cpu_count()} CPUs (shared with other work; timings approximate), "
        f"python {platform.python_version()}, numpy {np.__version__}, OPENBLAS_NUM_THREADS="
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; load average at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"- data: a9a {prob['n_rows']} rows, random projection to {args.k} features + intercept "
        f"= {prob['model'].dim} parameters; LogisticRegression(prior_sd=10, n_threads=1)",
        f"- Laplace: {prob['t_lap']:.2f} s, {lap.info['n_evaluations']} evaluations; its own REM "
        f"{prob['lap_rem']:.4f}, REC {prob['lap_rec']:.4f}",
        f"- truth: {args.truth_draws} tuned-HMC draws ({prob['truth_src']}); Monte Carlo floor "
        f"REM ~{float(truth['rem_floor']):.1e}, max R-hat {float(truth['rhat_max']):.3f}",
        f"- VHMC: training {vhmc.timings['train']:.1f} s for t0 = {args.train} "
        f"({vhmc.info['exact_evaluations']['train'][0]} exact gradients, mu_t0 = "
        f"{vhmc.info['mu_final'][0]:.4f}), then {vhmc.n_draws} draws in "
        f"{vhmc.timings['sample']:.1f} s ({ess['VHMC'][3] * 1e3:.3f} ms/iter), acceptance "
        f"{float(vhmc.acceptance_rate.mean()):.3f}, step {float(vhmc.step_size[0]):.3f}",
        f"- tuned HMC: warm-up {hmc.timings['warmup']:.1f} s, {hmc.n_draws} draws in "
        f"{hmc.timings['sample']:.1f} s ({ess['HMC tuned'][3] * 1e3:.3f} ms/iter), acceptance "
        f"{float(hmc.acceptance_rate.mean()):.3f}, step {float(hmc.step_size[0]):.3f}",
        f"- identity-metric HMC: warm-up {hmc_p.timings['warmup']:.1f} s, {hmc_p.n_draws} draws "
        f"in {hmc_p.timings['sample']:.1f} s ({ess['HMC identity'][3] * 1e3:.3f} ms/iter), "
        f"acceptance {float(hmc_p.acceptance_rate.mean()):.3f}, step "
        f"{float(hmc_p.step_size[0]):.4f}",
        f"- budgets {', '.join(f'{b:g}' for b in budgets)} s (the paper's first is 300 s on its "
        f"machine; scaled to this one so that the first comes about a minute after VHMC's "
        f"training); "
        f"elapsed {time.perf_counter() - t_start:.0f} s",
        ""]


def _budget_table(rows):
    """The REM / REC table, one line per budget."""
    L = ["| budget s | VHMC draws | VHMC REM | VHMC REC | HMC tuned draws | REM | REC | "
         "HMC identity-metric draws | REM | REC |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def fmt(x, b):
        k, rem, rec, end = x
        note = f" (run ended at {end:.0f} s)" if b > end else ""
        if rem is None:
            return f"{k} | - | -"
        return f"{k}{note} | {rem:.4f} | {rec:.4f}"
    for row in rows:
        b = row[0]
        L.append(f"| {b:g} | " + " | ".join(fmt(x, b) for x in row[1:]) + " |")
    return L


def _ess_table(runs, ess):
    """The time-normalised ESS table, one line per sampler."""
    L = ["",
         "| sampler | mean bulk ESS | per s of sampling | per s of the whole run | ms / iteration |",
         "|---|---:|---:|---:|---:|"]
    for name, (e, es, et, per) in ess.items():
        L.append(f"| {name} ({runs[name].n_draws} draws) | {e:.0f} | {es:.1f} | {et:.1f} | "
                 f"{per * 1e3:.3f} |")
    return L


def _bars(rows, ess, budgets):
    """The two bars of issue 4, and the ESS ratios against identity-metric HMC."""
    ratio_s = ess["VHMC"][1] / ess["HMC tuned"][1]
    ratio_t = ess["VHMC"][2] / ess["HMC tuned"][2]
    first = rows[0]
    bar1 = first[1][1] is not None and first[2][1] is not None and first[1][1] < first[2][1]
    return ["",
            f"Bar 1 (VHMC REM below tuned HMC's at the first budget, {budgets[0]:g} s): "
            f"{'MET' if bar1 else 'NOT MET'}"
            + (f" ({first[1][1]:.4f} vs {first[2][1]:.4f})" if first[1][1] is not None
               and first[2][1] is not None else "") + ".",
            f"Bar 2 (time-normalised mean ESS >= 10x tuned HMC's): per second of sampling "
            f"{ratio_s:.1f}x, per second of the whole run {ratio_t:.1f}x: "
            f"{'MET' if ratio_s >= 10 else 'NOT MET'} on sampling time"
            f"{'' if ratio_t >= 10 else ', NOT on whole-run time'}.",
            f"Against identity-metric HMC: ESS/s ratio {ess['VHMC'][1] / ess['HMC identity'][1]:.0f}x "
            f"(sampling), {ess['VHMC'][2] / ess['HMC identity'][2]:.0f}x (whole run)."]
