"""VHMC paper, Figure 3 as a table: Bayesian probit regression, error of the
posterior-mean estimate against the number of likelihood evaluations, for
VHMC, exact HMC, the Laplace approximation and the paper's two variational
baselines, VBEM and FF-Minibatch (:mod:`._vhmc_fig3_vb`).

    PYTHONPATH=. python bench/paper_vhmc_fig3.py [--quick] [--out FILE] [--cache FILE]

Data and model (Zhang, Shahbaba & Zhao 2018, section 4.2): N = 10000, d = 5,
X ~ N(0, I), beta ~ N(0, I), y ~ Bernoulli(Phi(X beta))
(``fs.datasets.simulate_probit``), prior N(0, 100 I):
``fs.models.ProbitRegression(X, y, prior_sd=10)``.

One likelihood evaluation = one pass over the data (U and/or grad U at one
point).  Counts:

* Laplace: the optimiser's evaluations, Newton polish and the Hessian (the
  model's Fisher information plus the prior: one pass, counted as one).
* exact HMC (``fs.HMC(model, n_steps=10, metric="dense")``, 300 warm-up
  iterations with step-size and metric adaptation, started at uniform
  [-2, 2]^5): every gradient evaluation, counted by a
  ``fs.RecordingPotential``; each iteration costs its number of leapfrog steps,
  the warm-up (and the step-size search) what it cost.  The estimate after E
  evaluations is the mean of the post-warm-up draws done by then.
* VHMC (``fs.VHMC(model, n_train=--train)``, defaults otherwise: s = 400
  units, n_s = t0 / 10): Laplace, then one exact gradient per accepted
  training state, then nothing: every later draw is free.  Its estimate at
  any E past that point is the mean of all its draws (``--draws``).
* VBEM (Ormerod & Wand 2010, :func:`._vhmc_fig3_vb.vbem_probit`), from the
  prior: X'X is one pass, each iteration one more (``--vbem-iter``
  iterations; deterministic, so one run serves every rep).
* FF-Minibatch (Salimans & Knowles 2013 with the Hessian,
  :func:`._vhmc_fig3_vb.ff_minibatch_probit`), from the prior: minibatches
  of ``--ff-batch`` rows, each costing batch / N of a pass, ``--ff-iter``
  iterations, step w = 1 / sqrt(iterations) (their default); its estimate
  after t iterations is its second-half average.
  The paper ran both with Salimans & Knowles' code and settings, which are
  not given; these are ours.

A method that has stopped (VHMC, Laplace, VBEM, FF-Minibatch, HMC past its
last draw) keeps its last estimate at larger budgets.

--quick (2 reps), RMSE to the exact posterior mean: FF-Minibatch leads up to
~30 evaluations (0.022 at 10 against VBEM's 0.22), VBEM reaches the MAP's
0.00059 by 300, FF-Minibatch stays at its minibatch noise (0.0017 after 400;
its full-batch fixed point is at 0.00016), VHMC 0.00033 after ~820, exact HMC
0.00036 after ~18000.  Against the true beta every method ends at the
statistical floor (0.015).

Errors: RMSE of the estimate against the true beta (the paper's measure; its
floor is the distance between the exact posterior mean and the truth,
statistical error that no sampler removes) and RMSE against the exact
posterior mean (a long HMC run with the Laplace metric, cached), which
separates each method's own error from that floor.  Means over ``--reps``
seeds (data fixed).
"""
import argparse
import os
import platform
import time

import numpy as np

import fastsurrogate as fs
from ._report import cache_dir, cpu_model, log, machine_line  # noqa: F401
from ._vhmc_fig3_vb import ff_minibatch_probit, vbem_probit


BUDGETS = (3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000)


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - b) ** 2)))


def load_or_run_truth(model, lap, args):
    key = f"probit_n{args.n_obs}_d{args.dim}_data{args.data_seed}"
    path = args.cache or os.path.join(cache_dir(), f"vhmc_fig3_truth_{key}.npz")
    if os.path.exists(path):
        with np.load(path) as f:
            if str(f["key"]) == key and int(f["n_draws"]) >= args.truth_draws:
                return f["mean"], int(f["n_draws"]), float(f["rem_floor"]), f"cached {path}"
    log(f"ground truth: exact HMC, 4 chains x {args.truth_draws // 4} draws ...")
    t0 = time.perf_counter()
    res = fs.HMC(model, n_steps=10, metric=lap.cov).sample(
        args.truth_draws // 4, 500, chains=4, seed=12345, init=lap.mean, progress=False)
    mean = res.draws.mean(axis=(0, 1))
    floor = float(np.sqrt(np.mean(fs.diagnostics.mcse_mean(res.draws) ** 2)))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    np.savez(path, mean=mean, n_draws=np.int64(res.chains * res.n_draws),
             rem_floor=np.float64(floor), key=np.str_(key))
    return mean, res.chains * res.n_draws, floor, f"computed now ({time.perf_counter() - t0:.0f} s)"


def hmc_curve(model, args, seed):
    rec = fs.RecordingPotential(model, 1)
    res = fs.HMC(rec, n_steps=10, metric="dense").sample(args.hmc_draws, 300, chains=1,
                                                          seed=seed, progress=False)
    steps = res.stats["n_steps"][0].astype(np.int64)
    pre = rec.n_seen - int(steps.sum())
    evals = pre + np.cumsum(steps)
    running = np.cumsum(res.draws[0], axis=0) / np.arange(1, res.n_draws + 1)[:, None]
    return evals, running, float(res.acceptance_rate.mean()), res


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--train", type=int, default=1000, help="VHMC training iterations t0")
    ap.add_argument("--draws", type=int, default=20000, help="VHMC draws after t0")
    ap.add_argument("--hmc-draws", type=int, default=12000)
    ap.add_argument("--truth-draws", type=int, default=40000)
    ap.add_argument("--n-obs", type=int, default=10000)
    ap.add_argument("--dim", type=int, default=5)
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--vbem-iter", type=int, default=300, help="VBEM iterations (one pass each)")
    ap.add_argument("--ff-iter", type=int, default=20000, help="FF-Minibatch iterations")
    ap.add_argument("--ff-batch", type=int, default=500, help="FF-Minibatch minibatch size")
    ap.add_argument("--ff-full-iter", type=int, default=1000,
                    help="iterations of the full-batch FF run giving its fixed point")
    ap.add_argument("--cache", metavar="FILE")


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    if args.quick:
        args.reps, args.hmc_draws, args.draws = 2, 3000, 5000
        args.ff_iter = min(args.ff_iter, 8000)
    t_start = time.perf_counter()
    X, y, beta = fs.datasets.simulate_probit(args.n_obs, args.dim, seed=args.data_seed)
    model = fs.models.ProbitRegression(X, y, prior_sd=10.0)
    t0 = time.perf_counter()
    lap = fs.surrogates.laplace_approximation(model)
    t_lap = time.perf_counter() - t0
    # the Fisher information is one more pass over the data
    lap_evals = lap.info["n_evaluations"] + 1
    truth, n_truth, truth_floor, src = load_or_run_truth(model, lap, args)
    hmc_rows, vhmc_rows = _reps(model, lap, lap_evals, args)
    curves = {"exact HMC": [(e, m) for e, m, _, _ in hmc_rows],
              "VHMC": [(np.array([e]), m[None]) for e, m, _, _ in vhmc_rows],
              "Laplace": [(np.array([lap_evals]), lap.mean[None])]}
    vb_curves, ff_full = _vb_runs(X, y, args)
    curves.update(vb_curves)
    errors = _Errors(curves, beta, truth, args.reps)
    L = ["# VHMC paper, Figure 3: probit regression, error vs likelihood evaluations", ""]
    L += _settings_lines(model, lap, lap_evals, t_lap, hmc_rows, vhmc_rows, args)
    L += _vb_lines(curves, ff_full, beta, truth, args)
    L += [f"- exact posterior mean: {n_truth} HMC draws ({src}); its RMSE to the true beta "
          f"(the floor of the first number) is {rmse(truth, beta):.5f}; its own Monte Carlo "
          f"RMSE ~{truth_floor:.1e}",
          f"- {args.reps} reps (sampler seeds), means over reps; elapsed "
          f"{time.perf_counter() - t_start:.0f} s",
          ""]
    L += errors.table_lines()
    report = "\n".join(L) + "\n"
    return report


def _reps(model, lap, lap_evals, args):
    """(HMC rows, VHMC rows), one per rep: HMC's (evaluations, running mean,
    acceptance, timings) and VHMC's (total evaluations, mean of its draws,
    acceptance, timings)."""
    hmc_rows, vhmc_rows = [], []
    for r in range(args.reps):
        log(f"rep {r}: HMC ...")
        evals, running, acc, hres = hmc_curve(model, args, 100 + r)
        hmc_rows.append((evals, running, acc, hres.timings))
        log(f"rep {r}: VHMC ...")
        res = fs.VHMC(model, laplace_tail=False, n_train=args.train, laplace=lap).sample(
            args.draws, args.train, chains=1, seed=200 + r, progress=False)
        ev = res.info["exact_evaluations"]
        assert ev["after_t0"] == [0]
        e_v = lap_evals + ev["train"][0]
        vhmc_rows.append((e_v, res.draws[0].mean(axis=0), float(res.acceptance_rate.mean()),
                          res.timings))
    return hmc_rows, vhmc_rows


def _vb_runs(X, y, args):
    """({"VBEM": [(evaluations, means)], "FF-Minibatch": one (evaluations,
    means) per rep}: the variational baselines from the prior; FF's fixed
    point, the estimate of a full-batch run of ``--ff-full-iter`` iterations)."""
    log("VBEM ...")
    ev, means, _ = vbem_probit(X, y, 100.0, args.vbem_iter)
    out = {"VBEM": [(ev, means)], "FF-Minibatch": []}
    for r in range(args.reps):
        log(f"rep {r}: FF-Minibatch ...")
        out["FF-Minibatch"].append(ff_minibatch_probit(
            X, y, 100.0, args.ff_iter, min(args.ff_batch, len(y)), 1.0 / np.sqrt(args.ff_iter),
            np.random.default_rng(300 + r)))
    n = args.ff_full_iter
    _, full = ff_minibatch_probit(X, y, 100.0, n, len(y), 1.0 / np.sqrt(n),
                                  np.random.default_rng(299))
    return out, full[-1]


def _vb_lines(curves, ff_full, beta, truth, args):
    """The bullets on VBEM's and FF-Minibatch's runs."""
    ev, _ = curves["VBEM"][0]
    return [f"- VBEM: from the prior, {len(ev)} iterations ({int(ev[-1])} evaluations: X'X, "
            f"then one pass per iteration); deterministic, one run for all reps",
            f"- FF-Minibatch: from the prior, {args.ff_iter} iterations of {args.ff_batch} rows "
            f"({curves['FF-Minibatch'][0][0][-1]:g} evaluations), step "
            f"w = 1/sqrt({args.ff_iter}) = {1.0 / np.sqrt(args.ff_iter):.4f}, "
            f"estimate = average over the second half of the iterations done; its fixed point "
            f"(the Gaussian VB mean: full batches, {args.ff_full_iter} iterations, "
            f"{args.ff_full_iter} evaluations, not in the table) is at {rmse(ff_full, beta):.5f} "
            f"/ {rmse(ff_full, truth):.5f}, minibatch noise aside"]


class _Errors:
    """Each method's errors after a number of likelihood evaluations.

    ``curves``: method -> list of runs, each (evaluations (n,), increasing;
    estimates (n, d)), estimate k being available after evaluations[k].
    """

    def __init__(self, curves, beta, truth, reps):
        self.curves, self.beta, self.truth, self.reps = curves, beta, truth, reps

    def at(self, E):
        """Per method: (mean RMSE to beta, to the posterior mean, runs with an
        estimate, runs) over its runs, or None when no run has one yet."""
        out = {}
        for name, runs in self.curves.items():
            b, t = [], []
            for evals, est in runs:
                k = int(np.searchsorted(evals, E, side="right"))
                if k >= 1:
                    b.append(rmse(est[k - 1], self.beta))
                    t.append(rmse(est[k - 1], self.truth))
            out[name] = (np.mean(b), np.mean(t), len(b), len(runs)) if b else None
        return out

    @staticmethod
    def cell(x):
        return "-" if x is None else f"{x[0]:.5f} / {x[1]:.5f}" + (
            f" ({x[2]}/{x[3]})" if x[2] < x[3] else "")

    def table_lines(self):
        """The table over BUDGETS and the line on the whole runs."""
        names = list(self.curves)
        L = ["Each cell: RMSE to the true beta / RMSE to the exact posterior mean "
             "(\"-\": the method has not produced an estimate with that many evaluations).",
             "",
             "| likelihood evaluations | " + " | ".join(names) + " |",
             "|---:|" + "---|" * len(names)]
        for E in BUDGETS:
            cells = self.at(E)
            L.append(f"| {E} | " + " | ".join(self.cell(cells[n]) for n in names) + " |")
        end = self.at(np.inf)
        L += ["", "At the end: " + "; ".join(
            f"{n} {self.cell(end[n])} after "
            f"{np.mean([e[-1] for e, _ in self.curves[n]]):.0f} evaluations" for n in names) + "."]
        return L


def _settings_lines(model, lap, lap_evals, t_lap, hmc_rows, vhmc_rows, args):
    """The bullets on the machine, the data and each method's run."""
    e_v = [e for e, _, _, _ in vhmc_rows]
    h_pre = [int(evals[0] - 1) for evals, _, _, _ in hmc_rows]
    return [
        f"- machine: {os.cpu_count()} CPUs, python {platform.python_version()}, numpy "
        f"{np.__version__}; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"- data: simulate_probit({args.n_obs}, {args.dim}, seed={args.data_seed}); "
        "ProbitRegression(prior_sd=10)",
        f"- Laplace: {lap_evals} evaluations ({t_lap:.2f} s), Hessian from "
        f"{lap.info['hessian_source']}",
        f"- exact HMC: n_steps 10 (uniform 1..10), dense metric adapted over 300 warm-up "
        f"iterations; warm-up cost {min(h_pre)}-{max(h_pre)} evaluations; {args.hmc_draws} "
        f"draws; acceptance {np.mean([a for _, _, a, _ in hmc_rows]):.3f}",
        f"- VHMC: t0 = {args.train}, s = {fs.VHMC(model).n_hidden}, then {args.draws} draws with "
        f"no evaluation; total evaluations {min(e_v)}-{max(e_v)}; acceptance "
        f"{np.mean([a for _, _, a, _ in vhmc_rows]):.3f}; training "
        f"{np.mean([t['train'] for *_, t in vhmc_rows]):.1f} s, sampling "
        f"{np.mean([t['sample'] for *_, t in vhmc_rows]):.2f} s per run"]
