"""NNgHMC paper, Figures 9 and 10: Bayesian logistic regression with a
Laplace prior (Bank Marketing in place of Cover Type): marginal posteriors
of exact HMC, SGHMC and NNgHMC (Figure 9) and trace plots of NNgHMC and
SGHMC with the Metropolis correction (Figure 10).

    fastsurrogate reproduce nnghmc-fig9 [--quick] [--coefficients J ...]
    fastsurrogate reproduce nnghmc-fig10 [--quick] [--coefficients J ...]

The runs are Table nnghmc-table3's (``_nnghmc_table3.run``, its options
and defaults: Bank Marketing's training 80 %, Laplace(0, 1) priors, one
chain each from the MAP, identity metric, HMC's step adapted in its
burn-in and used by all; NNgHMC's schedule; SGHMC with a minibatch of
1000 rows, with and without the Metropolis test); see that table for the
settings.  One run serves both figures (cached within a process).  The
paper's SGHMC of Figure 9 runs at step sizes 5e-6 to 5e-8, which are not
used here: its SGHMC runs at HMC's step.

Figure 9: for the coefficients ``--coefficients`` (0 is the intercept),
each sampler's posterior mean and sd, and their z-scores against exact
HMC's (difference over the combined MCSE; the approximate SGHMC may be
biased, the exact chains should not be).  PNG: histograms, HMC solid,
SGHMC dashed, NNgHMC dotted (the paper's line styles).
Figure 10: per chain, acceptance, the ESS and lag-1 autocorrelation of
those coefficients, for nnghmc-table3's four runs and two more at the
paper's settings of its SGHMC-with-MH comparison (L = 10, step 0.001,
minibatches of 5000 rows: Table 3's SG row): NNgHMC driven by
nnghmc-table3's network (not retrained) and SGHMC + MH; Table 3's
acceptance and ESS for Cover Type beside them.  PNG: the traces of those
two (NNgHMC top, SGHMC + MH bottom).
"""
import functools
import time
from types import SimpleNamespace

import numpy as np

import fastsurrogate as fs
from fastsurrogate.diagnostics import autocorrelation, ess_bulk, mcse_mean, mcse_sd
from . import _nnghmc_table3 as table3
from ._nnghmc_figs import NO_NUMBER, finish, fmt_z, write_png
from ._nnghmc_tables import map_estimate
from ._report import log, machine_line, markdown_table

#: Table 3 (Cover Type), read from the paper: acceptance; ESS (min, median, max)
PAPER_TABLE3 = {"HMC": "Cover Type: AP 0.80, ESS (73, 143, 10,000) (Table 3; L = 50, step "
                       "0.002)",
                "NNgHMC, L = 10, step 0.001": "Cover Type: AP 0.67, ESS (57, 186, 7174) "
                                             "(Table 3)",
                "SGHMC + MH, L = 10, step 0.001, batch 5000": "Cover Type: AP 0.33, ESS (49, "
                                                             "59, 246) (Table 3)"}
#: the paper's settings of its SGHMC-with-MH comparison (section 4.4)
PAPER_L, PAPER_STEP, PAPER_BATCH = 10, 0.001, 5000
STYLES = {"HMC": "-", "SGHMC": "--", "NNgHMC": ":"}


def options(ap):
    """Table nnghmc-table3's options, and this figure's coefficients."""
    table3.options(ap)
    ap.add_argument("--coefficients", type=int, nargs="+", default=[1, 2],
                    help="coefficient indices (0: the intercept)")


fig10_options = options


@functools.lru_cache(maxsize=2)
def _cached(key):
    args = SimpleNamespace(**dict(key))
    table3._check(args)
    return table3.run(args)


def runs(args):
    """nnghmc-table3's four runs for these options: {name: Result}."""
    key = tuple(sorted((k, v) for k, v in vars(args).items()
                       if k not in ("coefficients", "quick", "out_dir")))
    cfg, out, _ = _cached(key)
    dim = cfg["dim"]
    if not all(0 <= j < dim for j in args.coefficients):
        raise ValueError(f"--coefficients must be in [0, {dim - 1}], got {args.coefficients}")
    return out


def fig9_rows(out, coefficients):
    """Per coefficient and sampler: mean (z), sd (z) against exact HMC's."""
    ref = out["HMC"].draws
    rows = []
    for j in coefficients:
        h = ref[:, :, j]
        for name, res in out.items():
            d = res.draws[:, :, j]
            if name == "HMC":
                zm = zs = np.nan
            else:
                zm = (d.mean() - h.mean()) / np.hypot(mcse_mean(d), mcse_mean(h))
                zs = (d.std() - h.std()) / np.hypot(mcse_sd(d), mcse_sd(h))
            rows.append([f"beta_{j}", name, f"{d.mean():+.4f} ({fmt_z(zm)})",
                         f"{d.std():.4f} ({fmt_z(zs)})", NO_NUMBER])
    return rows


def reproduce(args):
    """Figure 9: marginal posteriors; the Markdown report (and PNG)."""
    t0 = time.perf_counter()
    out = runs(args)
    lines = [machine_line(), "",
             f"### Bank Marketing (in place of Cover Type), the runs of nnghmc-table3: "
             f"{args.n_draws} draws each, L = {args.n_steps}, burn-in {args.burn_in}", "",
             markdown_table(["coefficient", "method", "mean (z vs HMC)", "sd (z vs HMC)",
                             "paper"], fig9_rows(out, args.coefficients)), "",
             "z: the difference from exact HMC's value over the combined MCSE; SGHMC without "
             "the test is approximate, the other chains are exact. Figure 9 itself gives no "
             "numbers."]
    png = write_png(getattr(args, "out_dir", None), "nnghmc-fig9.png",
                    lambda axes: draw_marginals(axes, out, args.coefficients),
                    shape=(1, len(args.coefficients)), size=(4.0, 3.0),
                    title="NNgHMC paper, Figure 9: HMC solid, SGHMC dashed, NNgHMC dotted")
    return finish(lines, png, t0)


def draw_marginals(axes, out, coefficients):
    """Step histograms of each coefficient for HMC, SGHMC and NNgHMC."""
    for ax, j in zip(axes[0], coefficients):
        vals = {m: out[m].draws[0, :, j] for m in STYLES}
        lo = min(v.min() for v in vals.values())
        hi = max(v.max() for v in vals.values())
        for m, v in vals.items():
            ax.hist(v, bins=np.linspace(lo, hi, 30), histtype="step", density=True,
                    linestyle=STYLES[m], color="k", label=m)
        ax.set_title(f"beta_{j}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)


def paper_setting_runs(args, net):
    """Figure 10's comparison at the paper's settings for it (L = 10, step 0.001,
    minibatch 5000 rows): NNgHMC driven by nnghmc-table3's network (not
    retrained) and SGHMC with the Metropolis test, on the same posterior."""
    X, y = fs.datasets.load_bank_marketing()
    Xtr, ytr, _, _ = table3.split(np.asarray(X, dtype=np.float64),
                                  np.asarray(y, dtype=np.float64), args.test_fraction, args.seed)
    model = fs.models.LaplaceLogisticRegression(Xtr, ytr, scale=args.prior_scale,
                                                n_threads=args.threads)
    q0 = map_estimate(model)
    base = dict(chains=1, seed=args.seed + 1, init=q0, progress=False)
    log("  Figure 10's settings: NNgHMC and SGHMC + MH, L = 10, step 0.001 ...")
    return {"NNgHMC, L = 10, step 0.001": fs.sample(
                model, method="nnghmc", surrogate=net, n_draws=args.n_draws,
                n_warmup=args.burn_in, step_size=PAPER_STEP, n_steps=PAPER_L,
                random_n_steps=False, metric="unit", adapt=False, **base),
            "SGHMC + MH, L = 10, step 0.001, batch 5000": fs.SGHMC(
                model, step_size=PAPER_STEP, batch_size=PAPER_BATCH, n_steps=PAPER_L,
                mh=True).sample(args.n_draws, args.burn_in, **base)}


def mixing_rows(out, coefficients):
    """Per chain: acceptance, bulk ESS and lag-1 autocorrelation of the coefficients."""
    rows = []
    for name, res in out.items():
        ess = ess_bulk(res.draws[:, :, coefficients])
        rho = [autocorrelation(res.draws[0, :, j])[1] for j in coefficients]
        acc = f"{res.summary().overall['acceptance']:.3f}" if res.exact else "- (no test)"
        rows.append([name, acc, " / ".join(f"{e:.0f}" for e in ess),
                     " / ".join(f"{r:.3f}" for r in rho), PAPER_TABLE3.get(name, NO_NUMBER)])
    return rows


def fig10_reproduce(args):
    """Figure 10: mixing of each chain in the chosen coefficients; report (and PNG)."""
    t0 = time.perf_counter()
    out = dict(runs(args))
    paper = paper_setting_runs(args, out["NNgHMC"].surrogate)
    coefs = ", ".join(f"beta_{j}" for j in args.coefficients)
    lines = [machine_line(), "",
             f"### Bank Marketing (in place of Cover Type): the runs of nnghmc-table3 "
             f"(L = {args.n_steps}, HMC's adapted step) and two at the paper's settings for "
             f"Figure 10 and Table 3's SG row; {args.n_draws} draws each; mixing in {coefs}", "",
             markdown_table(["method", "acceptance", f"bulk ESS ({coefs})",
                             f"lag-1 autocorrelation ({coefs})", "paper"],
                            mixing_rows({**out, **paper}, args.coefficients))]
    png = write_png(getattr(args, "out_dir", None), "nnghmc-fig10.png",
                    lambda axes: draw_traces(axes, paper, args.coefficients[0]), shape=(2, 1),
                    size=(7.0, 2.2), title=f"NNgHMC paper, Figure 10: traces of beta_"
                    f"{args.coefficients[0]}, NNgHMC (top), SGHMC + MH (bottom)")
    return finish(lines, png, t0)


def draw_traces(axes, out, j):
    """Trace of coefficient j of each run in ``out`` (NNgHMC first), one panel each."""
    for ax, (name, res) in zip(axes[:, 0], out.items()):
        ax.plot(res.draws[0, :, j], "-", lw=0.6, color="k")
        ax.set_ylabel(f"beta_{j}", fontsize=8)
        ax.set_title(f"{name}: acceptance {res.summary().overall['acceptance']:.2f}",
                     fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("iteration", fontsize=8)
