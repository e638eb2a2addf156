"""The RNS-HMC paper (Zhang, Shahbaba & Zhao 2017, "Hamiltonian Monte Carlo
acceleration using surrogate functions with random bases", Stat. Comput. 27):
Table 1 (logistic regressions, elliptic PDE), Figure 1 (GP, FITC and
random-network fits of x^2 / 2), Figure 2 (force map and trajectories on a
banana), Figure 3 (GP, FITC and random networks), Figures 4 and 5
(acceptance against s, d and N), Figure 6 (posterior marginals, HMC against
RNS-HMC), Figure 7 (REM against time, HMC and RNS-HMC), Figure 8
(ARNS-HMC).

The logistic-regression rows and the figures live in ``_rns_table1`` and
``_rns_fig1`` ... ``_rns_fig8``; the elliptic PDE row is here
(:func:`pde_reproduce`).
"""
import os
import time

import numpy as np
import scipy.optimize as so

import fastsurrogate as fs
from ._report import cache_dir, log, machine_line
from ._rows import efficiency_table
from ._plots import PlotSpec
from ._table import Table

PAPER = "RNS-HMC paper (Zhang, Shahbaba & Zhao 2017)"

TABLES = [
    Table("rns-table1", PAPER + ", Table 1",
          "logistic regression: simulated (N = 100000, d = 50), Bank Marketing, a9a "
          "(60 projected features)", "._rns_table1",
          quick=dict(problems=["sim"]),
          needs=("bank_marketing.npz", "a9a.libsvm.gz")),
    Table("rns-table1-pde", PAPER + ", Table 1 (elliptic PDE rows, section 5.2)",
          "elliptic PDE inverse problem: HMC and RNS-HMC, s = 1000, step 0.16, L = 10 "
          "(network on a 12-d active subspace over a Laplace base); RMHMC (Gauss-Newton "
          "metric) and RNS-RMHMC (diagonal SoftAbs metric of the network)",
          ".rns_hmc", entry="pde_",
          quick=dict(n_warmup=400, n_draws=400, reference_draws=0, rm_steps=3)),
    Table("rns-fig1", PAPER + ", Figure 1", "fits of U = x^2 / 2 from N = 10, 20, 40 nested "
          "N(0, 1) points: full GP, FITC (5 inducing points), random networks (5 softplus or "
          "RBF units), FITC and networks averaged over 100 repetitions", "._rns_fig1",
          quick=dict(repeats=20),
          paper_figures="The paper gives no number for Figure 1 (RNS-HMC paper, section 3.3 "
                        "and the Figure 1 caption, read from ../shared/papers): its settings "
                        "(N = 10, 20, 40 nested draws of N(0, 1), 5 inducing points, 5 hidden "
                        "units, 100 repetitions averaged) are taken from there, and its "
                        "qualitative reading is checked under the table."),
    Table("rns-fig2", PAPER + ", Figure 2", "2-d banana: force map of the exact and the "
          "network gradient, HMC and RNS-HMC (the paper's NNS-HMC) trajectories from one "
          "start and momentum, overall acceptance", "._rns_fig2",
          quick=dict(hidden=[10, 20, 50], bases=3, explore=1000, draws=2000),
          paper_figures="RNS-HMC paper, Figure 2 caption (read from ../shared/papers): the "
                        "overall acceptance probability is 0.97 with HMC and 0.88 with "
                        "NNS-HMC (RNS-HMC) on the banana it cites from its reference [5] "
                        "(Girolami and Calderhead 2011, JRSS B); the paper gives neither the "
                        "banana's constants nor the step size, L or s, so this table runs "
                        "fs.models.Banana() at step 0.1, L = 5 (the NNgHMC paper's settings "
                        "for its banana example, as nnghmc-4.1 runs them on this banana)."),
    Table("rns-fig3", PAPER + ", Figure 3", "GP, FITC and random-network surrogates of a 32-d "
          "Gaussian against the training size", "._rns_fig3",
          plots=(PlotSpec("acceptance", "Figure 3: acceptance against training size N", "N",
                          ("acceptance",), group="method", logx=True, ylabel="acceptance"),)),
    Table("rns-fig4", PAPER + ", Figure 4", "acceptance of RNS-HMC against s and d (simulated "
          "logistic regression, our sizes)", "._rns_fig4",
          quick=dict(dims=[10, 30], multiples=[2, 10, 40], explore=1000, draws=400),
          plots=(PlotSpec("acceptance", "Figure 4: acceptance against d, per s / d", "d",
                          tuple(range(2, 12)), ylabel="acceptance"),)),
    Table("rns-fig5", PAPER + ", Figure 5", "acceptance of RNS-HMC against s and the "
          "training size N (simulated logistic regression, our sizes)", "._rns_fig5",
          quick=dict(train_sizes=[100, 400, 1200], hidden=[20, 100, 500], explore=1500,
                     draws=300),
          plots=(PlotSpec("acceptance", "Figure 5: acceptance against training size N, per s",
                          "N", tuple(range(1, 12)), logx=True, ylabel="acceptance"),)),
    Table("rns-fig6", PAPER + ", Figure 6", "one- and two-dimensional posterior marginals "
          "of beta_1, beta_11, beta_21, beta_31, beta_41 of the simulated logistic regression "
          "(N = 100000, d = 50), HMC against RNS-HMC (s = 2000)", "._rns_fig6",
          quick=dict(n_obs=20000, explore=2000, burn_in=500, draws=1500),
          paper_figures="The paper gives no number for Figure 6 (RNS-HMC paper, section 5.1 "
                        "and the Figure 6 caption, read from ../shared/papers): it shows the "
                        "marginals as plots only. The settings (N = 100000, d = 50, step "
                        "0.045, L = 6, s = 2000, 5000 burn-in and 5000 draws) are section "
                        "5.1's and Table 1's."),
    Table("rns-fig7", PAPER + ", Figure 7", "ARNS-HMC's acceptance against the number of "
          "training points, median and 5-95 % band over independent runs, beside exact HMC's "
          "(also RNS-HMC's acceptance and REM at fixed wall time): simulated logistic "
          "regression, Bank Marketing, a9a, elliptic PDE", "._rns_fig7",
          quick=dict(problems=["pde"], n_mesh=12, n_hidden=500, explore=500, rns_explore=0,
                     acc_iters=1000, window=100, max_points=1500, update_every=25,
                     budgets=[2.0, 4.0], truth_iter=4000, replicates=3),
          missing="The paper's acceptance curves are drawn, not quoted; --quick leaves "
                  "RNS-HMC out (rns-fig8 runs it).",
          plots=tuple(p for k in range(4) for p in (
              PlotSpec(f"acceptance-{k + 1}", "Figure 7: ARNS-HMC, {section}", "training points",
                       ("ARNS-HMC median", "exact HMC"),
                       bands=(("ARNS-HMC 5 %", "ARNS-HMC 95 %"),), table=3 * k,
                       ylabel="acceptance (median, 5-95 % band)",
                       xlabel="training points"),
              PlotSpec(f"rem-{k + 1}", "REM at fixed wall time, {section}",
                       "budget s", ("HMC REM", "RNS-HMC REM", "ARNS REM"), table=3 * k + 2,
                       logy=True, xlabel="wall time (s)", ylabel="REM (L2)")))),
    Table("rns-fig8", PAPER + ", Figure 8", "REM (L2) of the posterior mean against wall "
          "time, exact HMC, RNS-HMC and ARNS-HMC, median and 5-95 % band over independent "
          "chains: simulated logistic regression, Bank Marketing, a9a, elliptic PDE",
          "._rns_fig8",
          quick=dict(problems=["pde"], chains=3, n_mesh=12, n_hidden=500, explore=1000,
                     budgets=[0.75, 1.5, 3.0], truth_iter=4000),
          missing="The paper's running times are on its machine and its REM values are not "
                  "quoted in this project's texts; the budgets here are ours.",
          plots=tuple(PlotSpec(f"rem-{k + 1}", "Figure 8: REM against wall time, {section}",
                               "budget s", ("HMC median", "RNS-HMC median", "ARNS-HMC median"),
                               bands=(("HMC 5 %", "HMC 95 %"), ("RNS-HMC 5 %", "RNS-HMC 95 %"),
                                      ("ARNS-HMC 5 %", "ARNS-HMC 95 %")),
                               table=k, logy=True, xlabel="wall time (s)",
                               ylabel="REM (L2): median, 5-95 % band")
                      for k in range(5))),
]


def pde_options(ap):
    """Options of the elliptic PDE rows (defaults: the paper's settings)."""
    ap.add_argument("--n-hidden", type=int, default=1000, help="s, the network's hidden units")
    ap.add_argument("--step", type=float, default=0.16)
    ap.add_argument("--n-steps", type=int, default=10, help="L (steps drawn from 1..L)")
    ap.add_argument("--n-warmup", type=int, default=5000,
                    help="exact-HMC burn-in / exploration iterations")
    ap.add_argument("--n-draws", type=int, default=5000)
    ap.add_argument("--n-mesh", type=int, default=30)
    ap.add_argument("--n-modes", type=int, default=20, help="parameters (Karhunen-Loeve modes)")
    ap.add_argument("--reference-draws", type=int, default=20000,
                    help="draws of the long exact-HMC reference run for the posterior means "
                         "(cached; 0: compare against the HMC row's own draws)")
    ap.add_argument("--seed", type=int, default=2017)
    # the surrogate: the paper fixes s, the step and L; the rest is ours (README, issue 17)
    ap.add_argument("--base", choices=("laplace", "none"), default="laplace",
                    help="Gaussian base the network's residual is taken against "
                         "(RNSHMC base=; none: the paper's network alone)")
    ap.add_argument("--subspace", type=int, default=12,
                    help="k of the network's active subspace (RNSHMC subspace=; 0: every "
                         "coordinate, as the paper)")
    ap.add_argument("--input-scale", default="0.1",
                    help='input scale of the random basis (a number or "auto")')
    ap.add_argument("--ridge", default="1e-8", help='relative ridge (a number or "auto")')
    ap.add_argument("--train-from", type=float, default=0.0,
                    help="exploration states discarded before training (RNSHMC train_from=; "
                         "the chain starts at the MAP, so every state is a posterior state)")
    # the Riemannian rows: the paper's step sizes and L for them are not quoted here
    ap.add_argument("--rm-steps", type=int, default=6,
                    help="RMHMC's L (drawn from 1..L; its step adapted over the burn-in, "
                         "Gauss-Newton metric); 0 skips the RMHMC row")
    ap.add_argument("--rns-rm-step", type=float, default=0.5,
                    help="RNS-RMHMC's step size (fixed, like the other rows' steps)")
    ap.add_argument("--rns-rm-steps", type=int, default=6,
                    help="RNS-RMHMC's L (drawn from 1..L); 0 skips the RNS-RMHMC row")


def _surrogate_options(args):
    """RNSHMC options of the table's surrogate from the command line."""
    num = (lambda v: v if v == "auto" else float(v))
    out = dict(input_scale=num(getattr(args, "input_scale", "0.1")),
               ridge=num(getattr(args, "ridge", "1e-8")),
               train_from=getattr(args, "train_from", 0.0))
    base = getattr(args, "base", "laplace")
    out["base"] = None if base == "none" else base
    k = getattr(args, "subspace", 12)
    out["subspace"] = k if k and k > 0 else None
    return out


def _surrogate_line(opts):
    return (f"surrogate: base {opts['base'] or 'none (the paper)'}, "
            f"{'active subspace k = ' + str(opts['subspace']) if opts['subspace'] else 'all coordinates (the paper)'}, "
            f"input scale {opts['input_scale']}, ridge {opts['ridge']}, train_from "
            f"{opts['train_from']:g}")


def _pde_reference(model, args, init, common):
    """Mean, MCSE of the mean and sd of a long exact-HMC run (another seed),
    cached under :func:`cache_dir` by its settings."""
    key = (f"pde-ref-m{args.n_mesh}-d{args.n_modes}-s{args.seed}-e{args.step}-L{args.n_steps}"
           f"-n{args.reference_draws}")
    path = os.path.join(cache_dir(), key + ".npz")
    if os.path.exists(path):
        z = np.load(path)
        return z["mean"], z["mcse"], z["sd"], float(z["seconds"]), True
    log(f"  PDE: exact-HMC reference, {args.reference_draws} draws (cached in {path}) ...")
    t0 = time.perf_counter()
    ref = fs.sample(model, method="hmc", **dict(common, n_draws=args.reference_draws,
                                                   seed=args.seed + 1))
    d = ref.draws
    mean, mcse = d.mean(axis=(0, 1)), fs.diagnostics.mcse_mean(d)
    sd = d.reshape(-1, d.shape[-1]).std(axis=0, ddof=1)
    secs = time.perf_counter() - t0
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        np.savez(path, mean=mean, mcse=mcse, sd=sd, seconds=secs)
    except OSError:
        pass
    return mean, mcse, sd, secs, False


def _pde_marginals(out_dir, runs, ref_mean, k=4):
    """PNG of the first ``k`` posterior marginals (histograms) of each run
    (the paper's Figure 6 shows posterior marginals); None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    k = min(k, len(ref_mean))
    fig, axes = plt.subplots(1, k, figsize=(3 * k, 3), squeeze=False)
    axes = axes[0]
    for j, ax in enumerate(axes):
        for name, res in runs.items():
            ax.hist(res.draws[..., j].ravel(), bins=40, density=True, histtype="step",
                    label=name)
        ax.axvline(ref_mean[j], color="k", lw=0.8, ls="--", label="reference mean")
        ax.set_title(f"theta_{j + 1}", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.suptitle("elliptic PDE: posterior marginals", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, "rns-table1-pde-marginals.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def pde_reproduce(args):
    """HMC and RNS-HMC on ``fs.models.EllipticPDE`` from the MAP, the papers'
    Table-1 columns, and the RNS-HMC posterior means against a long exact-HMC
    run (MCSE z-scores); returns the Markdown report."""
    model = fs.models.EllipticPDE(n_mesh=args.n_mesh, n_modes=args.n_modes, seed=args.seed)
    r = so.minimize(model.value_and_grad, np.zeros(model.dim), jac=True, method="L-BFGS-B",
                    options=dict(maxiter=2000))
    common = dict(n_draws=args.n_draws, n_warmup=args.n_warmup, chains=1, seed=args.seed,
                  init=r.x, step_size=args.step, n_steps=args.n_steps, random_n_steps=True,
                  adapt=False, metric="unit", progress=False)
    t0 = time.perf_counter()
    model.value_and_grad(r.x)
    sopts = _surrogate_options(args)
    runs = _pde_runs(model, args, common, sopts)
    elapsed = time.perf_counter() - t0
    lines = _pde_settings_lines(model, args, runs, sopts, elapsed)
    # a heading, so that the "paper" column finds this table's rows (the
    # caption line above a table names its section otherwise)
    lines += ["### elliptic PDE, the Table 1 columns", "", efficiency_table(runs)]
    ref_mean, ref_mcse, ref_sd, ref_name = _pde_reference_for(model, args, r.x, common, runs)
    lines += _pde_mean_lines(model, runs, ref_mean, ref_mcse, ref_sd, ref_name)
    lines += _pde_bars(runs, f"RNS-HMC (s = {args.n_hidden})")
    if getattr(args, "out_dir", None):
        os.makedirs(args.out_dir, exist_ok=True)
        png = _pde_marginals(args.out_dir, runs, ref_mean)
        if png:
            lines += ["", f"![posterior marginals]({os.path.basename(png)})"]
    return "\n".join(lines)


def _pde_runs(model, args, common, sopts):
    """name -> Result: HMC and RNS-HMC, then RMHMC and RNS-RMHMC unless their
    L is 0."""
    runs = {}
    log(f"  PDE: HMC, {args.n_warmup} + {args.n_draws} ...")
    runs["HMC"] = fs.sample(model, method="hmc", **common)
    log(f"  PDE: RNS-HMC, s = {args.n_hidden} ...")
    rns_name = f"RNS-HMC (s = {args.n_hidden})"
    runs[rns_name] = fs.sample(model, method="rns-hmc", training="states",
                               n_hidden=args.n_hidden, guard=None, **sopts,
                               **common)
    rm_steps, rns_rm_steps = getattr(args, "rm_steps", 6), getattr(args, "rns_rm_steps", 6)
    rns_rm_step = getattr(args, "rns_rm_step", 0.5)
    if rm_steps > 0:
        log(f"  PDE: RMHMC, L = {rm_steps} ...")
        rm_common = {k: v for k, v in common.items()
                     if k not in ("step_size", "n_steps", "adapt", "metric")}
        runs["RMHMC"] = fs.sample(model, method="rmhmc", metric="fisher", n_steps=rm_steps,
                                  adapt=True, **rm_common)
    if rns_rm_steps > 0:
        log(f"  PDE: RNS-RMHMC, s = {args.n_hidden} ...")
        runs[f"RNS-RMHMC (s = {args.n_hidden})"] = fs.sample(
            model, method="rns-rmhmc", training="states", n_hidden=args.n_hidden,
            diagonal_metric=True, rm_step_size=rns_rm_step, rm_n_steps=rns_rm_steps, **sopts,
            **{k: v for k, v in common.items() if k != "metric"})
    return runs


def _pde_settings_lines(model, args, runs, sopts, elapsed):
    """The problem, the surrogate and the Riemannian rows' settings."""
    rm_steps, rns_rm_steps = getattr(args, "rm_steps", 6), getattr(args, "rns_rm_steps", 6)
    rns_rm_step = getattr(args, "rns_rm_step", 0.5)
    lines = [machine_line(),
             f"elliptic PDE: {args.n_mesh} x {args.n_mesh} mesh, {model.dim} parameters, "
             f"step {args.step}, L = {args.n_steps} (drawn from 1..L), identity metric, one chain "
             f"from the MAP, {args.n_warmup} exact-HMC burn-in (RNS-HMC: its exploration), "
             f"{args.n_draws} draws ({elapsed:.0f} s)", "", _surrogate_line(sopts) + ".", ""]
    if rm_steps > 0:
        lines += [f"RMHMC: the Gauss-Newton (Fisher) metric `EllipticPDE.fisher_metric()` "
                  f"with its derivative by second-order adjoints, L = {rm_steps} (drawn from "
                  f"1..L), step adapted (dual averaging, target 0.8) over the {args.n_warmup} "
                  f"burn-in iterations, {runs['RMHMC'].info.get('not_converged', 0)} fixed "
                  f"points not converged (divergences, warm-up included).", ""]
    if rns_rm_steps > 0:
        name = f"RNS-RMHMC (s = {args.n_hidden})"
        lines += [f"RNS-RMHMC: the RNS-HMC row's exploration and surrogate; the generalized "
                  f"leapfrog with the SoftAbs metric of the network's Hessian diagonal (the "
                  f"paper's choice for this non-convex U), step {rns_rm_step}, L = "
                  f"{rns_rm_steps} (drawn from 1..L), the exact U and the surrogate metric in "
                  f"the Metropolis test; {runs[name].info.get('not_converged', 0)} fixed points "
                  f"not converged.", ""]
    return lines


def _pde_reference_for(model, args, init, common, runs):
    """(mean, MCSE of the mean, sd, description) of the reference the rows
    are compared with: a long exact-HMC run, or the HMC row's own draws."""
    if args.reference_draws > 0:
        ref_mean, ref_mcse, ref_sd, ref_secs, cached = _pde_reference(model, args, init, common)
        ref_name = (f"a long exact-HMC run ({args.reference_draws} draws after {args.n_warmup} "
                    f"burn-in, seed {args.seed + 1}, same step and L; "
                    f"{'cached' if cached else f'{ref_secs:.0f} s'})")
        return ref_mean, ref_mcse, ref_sd, ref_name
    d = runs["HMC"].draws
    ref_mean, ref_mcse = d.mean(axis=(0, 1)), fs.diagnostics.mcse_mean(d)
    ref_sd = d.reshape(-1, d.shape[-1]).std(axis=0, ddof=1)
    return ref_mean, ref_mcse, ref_sd, "the HMC row's own draws (--reference-draws 0)"


def _pde_mean_lines(model, runs, ref_mean, ref_mcse, ref_sd, ref_name):
    """Each row's posterior means against the reference: z-scores against a
    Bonferroni bar over the d coordinates, two-sided 5 %: |z| <= z_(1 - 0.025 / d)."""
    from scipy.stats import norm
    zcrit = float(norm.ppf(1 - 0.025 / model.dim))
    lines = ["", f"Posterior means against {ref_name}: z = (mean - reference) / sqrt(MCSE^2 + "
             f"MCSE_ref^2) per coordinate (MCSE from the bulk ESS); bar |z| <= {zcrit:.2f} "
             f"(two-sided 5 % with a Bonferroni correction over {model.dim} coordinates).", "",
             "| method | max abs z | coordinates with abs z > bar | max abs error / reference sd "
             "| within MCSE |", "|---|---|---|---|---|"]
    for name, res in runs.items():
        d = res.draws
        m, se = d.mean(axis=(0, 1)), fs.diagnostics.mcse_mean(d)
        z = (m - ref_mean) / np.sqrt(se ** 2 + ref_mcse ** 2)
        bad = int(np.sum(np.abs(z) > zcrit))
        lines.append(f"| {name} | {np.max(np.abs(z)):.2f} | {bad} of {model.dim} | "
                     f"{np.max(np.abs(m - ref_mean) / ref_sd):.3f} | "
                     f"{'yes' if bad == 0 else 'NO'} |")
    return lines


def _pde_bars(runs, rns_name):
    """Issue 17's bars: RNS-HMC's acceptance and min ESS/s speed-up over HMC."""
    t = {k: v.summary().overall for k, v in runs.items()}
    sp = t[rns_name]["min_ess_per_sampling_second"] / t["HMC"]["min_ess_per_sampling_second"]
    ap = t[rns_name]["acceptance"]
    return ["", f"Bars (issue 17): RNS-HMC acceptance {ap:.2f} >= 0.7: "
            f"{'met' if ap >= 0.7 else 'NOT met'}; min ESS/s speed-up {sp:.1f} >= 5 (paper "
            f"6.07): {'met' if sp >= 5 else 'NOT met'}."]
