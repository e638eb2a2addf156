"""NNgHMC paper, Figure 4: a network trained under one prior reused under
another (section 4.2) on the 200-d logistic regression.

    fastsurrogate reproduce nnghmc-fig4 [--quick] [--n-obs N] [--n-draws N]

The problem
  Table nnghmc-tables' 200-d logistic regression (``_nnghmc_tables.build``:
  X ~ N(0, I_200), 50000 rows, beta ~ U(-1, 1)^200, y ~ Bernoulli(logistic(
  X beta)); ``--n-obs`` keeps its first rows, ``--dim`` its first columns:
  ``--quick`` fits 50 coefficients to 2000 rows, where a network trained
  in a few seconds drives well; with 200 coefficients and 5000 rows a
  network with a held-out relative gradient error of 0.017 still gave
  energy errors near 18 and no acceptance, measured), with the priors of the
  paper's Figure 4: N(0, 10 I) (the "old", diffuse prior the network is
  trained under) and N(0, 0.1 I) (the "new", concentrated one).

The runs (step 0.01, L = 20, exactly L steps, identity metric, one chain
each, from the MAP under its prior)
  HMC, old prior         the reference for the training posterior;
  NNgHMC, old prior      ``--burn-in`` exact iterations, then ``--n-record``
                         exact iterations recording every leapfrog step's
                         (q, grad U_old) (the paper: 200 draws, 4000
                         points), one training of the paper's block network
                         (Remark 1: 8 disjoint hidden layers of 50 units
                         over 25-d blocks; random start, the paper's
                         Adam), then draws driven by it;
  HMC, new prior         the reference for the new posterior;
  NNgHMC, new prior      the same network, not retrained, plus grad(-log
                         new prior) - grad(-log old prior) =
                         q (1 / 0.1 - 1 / 10) (the paper's prior swap:
                         :func:`fastsurrogate.surrogates.swap_prior`, a
                         compiled weighted sum), drives; the exact U under
                         the new prior judges, so the chain is exact;
  control                the old network alone drives under the new prior.
  Every NNgHMC chain is exact whatever drives it, so the swap shows in the
  acceptance (swap against control); the moments check the chain.

Measured
  Acceptance and ESS of the four runs; for the first ``--coefficients``
  coefficients under the new prior, HMC's and NNgHMC's posterior means and
  sds with z = difference / combined MCSE, and how far the new prior moved
  HMC's mean from the old (in new-posterior sds); the largest |z| over all
  coefficients against the Bonferroni bound.  PNG: marginal densities
  (Gaussian KDE) of those coefficients, HMC left, NNgHMC right, old prior
  dashed, new solid (the paper's layout).

Measured (full run, 879 s of wall time on the shared 2-vCPU AMD EPYC at
load 5-7): the new prior moved HMC's means by 1.8 new-posterior sds
(median over the 200 coefficients); acceptance HMC 0.76 / NNgHMC 0.70
under the old prior (paper ~0.8 / ~0.6), HMC 0.70 / swapped NNgHMC 0.58
under the new one, and 0.00 for the old network without the swap; max |z|
between swapped NNgHMC and HMC 2.5 (means) and 3.8 (sds), under the
Bonferroni bound 4.2.
"""
import time

import numpy as np
import scipy.stats

import fastsurrogate as fs
from fastsurrogate.diagnostics import mcse_mean, mcse_sd
from fastsurrogate.surrogates import swap_prior
from ._nnghmc_figs import NO_NUMBER, finish, fmt_z, one_training, write_png
from ._nnghmc_tables import build, map_estimate
from ._report import log, machine_line, markdown_table

#: section 4.2's text (the run the network is trained in: the old prior's)
PAPER_ACCEPTANCE = {"HMC": "~0.8 (section 4.2, 50000 rows)",
                    "NNgHMC": "~0.6 (section 4.2, 50000 rows)"}


def options(ap):
    """Add this figure's options (defaults: the paper's settings) to ``ap``."""
    ap.add_argument("--n-obs", type=int, default=50000)
    ap.add_argument("--dim", type=int, default=200, help="keep the first DIM columns of X")
    ap.add_argument("--n-draws", type=int, default=1000)
    ap.add_argument("--burn-in", type=int, default=50)
    ap.add_argument("--n-record", type=int, default=200)
    ap.add_argument("--old-var", type=float, default=10.0, help="prior variance for training")
    ap.add_argument("--new-var", type=float, default=0.1, help="prior variance swapped in")
    ap.add_argument("--step-size", type=float, default=0.01)
    ap.add_argument("--n-steps", type=int, default=20)
    ap.add_argument("--coefficients", type=int, default=4)
    ap.add_argument("--start", choices=["affine", "random"], default="affine",
                    help="the network's initial weights")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2019)


def models(args):
    """The two posteriors and the two priors as potentials: ({"old" | "new":
    (posterior, prior)})."""
    full = build("logistic", args.seed, args.threads)
    X = np.ascontiguousarray(full.X[:args.n_obs, :args.dim])
    y = np.ascontiguousarray(full.y[:args.n_obs])
    out = {}
    for key, var in (("old", args.old_var), ("new", args.new_var)):
        post = fs.models.LogisticRegression(X, y, prior_sd=np.sqrt(var), n_threads=args.threads)
        prior = fs.models.Gaussian(np.zeros(X.shape[1]), var * np.eye(X.shape[1]))
        out[key] = (post, prior)
    return out


def n_blocks(dim):
    """Remark 1's blocks: one hidden layer of 50 units per 25 outputs."""
    return max(1, int(round(dim / 25)))


def run(args):
    """The runs: {(method, "old" | "new" | "new, no swap"): Result}, and the network."""
    pots = models(args)
    common = dict(n_draws=args.n_draws, n_warmup=args.burn_in, chains=1, metric="unit",
                  adapt=False, progress=False, step_size=args.step_size,
                  n_steps=args.n_steps, random_n_steps=False)
    runs, init = {}, {key: map_estimate(pots[key][0]) for key in pots}
    for key in ("old", "new"):
        log(f"  HMC, {key} prior: {args.burn_in} burn-in, {args.n_draws} draws ...")
        runs["HMC", key] = fs.sample(pots[key][0], method="hmc", seed=args.seed,
                                     init=init[key], **common)
    log(f"  NNgHMC, old prior: {args.n_record} recorded iterations, training ...")
    runs["NNgHMC", "old"] = one_training(
        pots["old"][0], args.n_record, args.n_draws, init["old"], args.seed + 1, 50,
        blocks=n_blocks(args.dim), burn_in=args.burn_in, start=args.start,
        **{k: common[k] for k in ("step_size", "n_steps", "random_n_steps")})
    net = runs["NNgHMC", "old"].surrogate
    drives = {"new": swap_prior(net, pots["old"][1], pots["new"][1]), "new, no swap": net}
    for key, drive in drives.items():
        log(f"  NNgHMC, new prior, driven by the old network ({key}) ...")
        runs["NNgHMC", key] = fs.sample(pots["new"][0], method="nnghmc", surrogate=drive,
                                        seed=args.seed + 1, init=init["new"], **common)
    return runs, net


LABELS = {("HMC", "old"): "HMC", ("NNgHMC", "old"): "NNgHMC", ("HMC", "new"): "HMC",
          ("NNgHMC", "new"): "NNgHMC: old network + prior swap",
          ("NNgHMC", "new, no swap"): "NNgHMC: old network, no swap (control)"}


def run_rows(runs, args):
    """One row per run: prior variance, acceptance, ESS."""
    out = []
    for name, key in LABELS:
        s = runs[name, key].summary().overall
        paper = PAPER_ACCEPTANCE[name] if key == "old" else NO_NUMBER
        out.append([LABELS[name, key], f"{args.old_var if key == 'old' else args.new_var:g}",
                    f"{s['acceptance']:.3f}", f"{s['ess_min']:.0f} / {s['ess_median']:.0f}",
                    paper])
    return out


def compare(a, b):
    """Means, sds and the z-scores of b's against a's (combined MCSE), per coordinate."""
    ma, mb = a.mean(axis=(0, 1)), b.mean(axis=(0, 1))
    sa, sb = a.std(axis=(0, 1), ddof=1), b.std(axis=(0, 1), ddof=1)
    zm = (mb - ma) / np.sqrt(mcse_mean(a) ** 2 + mcse_mean(b) ** 2)
    zs = (sb - sa) / np.sqrt(mcse_sd(a) ** 2 + mcse_sd(b) ** 2)
    return ma, mb, sa, sb, zm, zs


def coefficient_rows(runs, k):
    """Rows for the first k coefficients under the new prior, and the all-200 z-scores."""
    h, n = runs["HMC", "new"].draws, runs["NNgHMC", "new"].draws
    ma, mb, sa, sb, zm, zs = compare(h, n)
    shift = (ma - runs["HMC", "old"].draws.mean(axis=(0, 1))) / sa
    rows = [[f"beta_{j + 1}", f"{ma[j]:+.4f}", f"{mb[j]:+.4f} ({fmt_z(zm[j])})", f"{sa[j]:.4f}",
             f"{sb[j]:.4f} ({fmt_z(zs[j])})", f"{shift[j]:+.2f}", NO_NUMBER]
            for j in range(min(k, h.shape[-1]))]
    return rows, zm, zs, shift


def reproduce(args):
    """Run Figure 4's experiment; return the Markdown report (and write the PNG)."""
    if min(args.n_obs, args.n_draws, args.n_record, args.n_steps, args.coefficients) < 1 or \
            not 1 <= args.dim <= 200:
        raise ValueError("--n-obs, --n-draws, --n-record, --n-steps, --coefficients must be "
                         ">= 1 and --dim in [1, 200]")
    if not (args.old_var > 0 and args.new_var > 0):
        raise ValueError("prior variances must be positive")
    t0 = time.perf_counter()
    runs, net = run(args)
    rows, zm, zs, shift = coefficient_rows(runs, args.coefficients)
    dim = zm.size
    bound = scipy.stats.norm.ppf(1.0 - 0.01 / (4 * dim))
    lines = [machine_line(), "",
             f"### logistic regression, {dim} coefficients, {args.n_obs} rows: step "
             f"{args.step_size:g}, L = {args.n_steps}, burn-in {args.burn_in}, {args.n_draws} "
             f"draws per run; network {n_blocks(dim)} x 50 hidden (blocks of about 25 "
             f"outputs) trained under prior N(0, {args.old_var:g} I) on "
             f"{net.info['n_train']} + {net.info['n_holdout']} leapfrog points of "
             f"{args.n_record} iterations (held-out relative gradient error "
             f"{net.info['holdout_rel_error']:.4f})", "",
             markdown_table(["run", "prior variance", "acceptance", "ESS min / median",
                             "paper"], run_rows(runs, args)), "",
             f"#### under the new prior N(0, {args.new_var:g} I): HMC against NNgHMC with the "
             "swapped prior", "",
             markdown_table(["coefficient", "HMC mean", "NNgHMC mean (z)", "HMC sd",
                             "NNgHMC sd (z)", "HMC mean shift from the old prior (sds)",
                             "paper"], rows), "",
             f"z: NNgHMC's value minus HMC's over their combined MCSE. Over all {dim} "
             f"coefficients: max |z| of the means {np.max(np.abs(zm)):.2f}, of the sds "
             f"{np.max(np.abs(zs)):.2f} (Bonferroni bound for the {2 * dim} tests at "
             f"family-wise 0.01: {bound:.2f}); the new prior moved HMC's means by "
             f"{np.median(np.abs(shift)):.2f} new-posterior sds (median over coefficients)."]
    png = write_png(getattr(args, "out_dir", None), "nnghmc-fig4.png",
                    lambda axes: draw(axes, runs), shape=(min(args.coefficients, 3), 2),
                    size=(4.0, 2.4), title="NNgHMC paper, Figure 4: HMC (left), NNgHMC "
                    "(right); old prior dashed, new solid")
    return finish(lines, png, t0)


def draw(axes, runs):
    """Marginal densities of the first coefficients: rows coefficients,
    columns HMC / NNgHMC, dashed the old prior, solid the new."""
    for j in range(axes.shape[0]):
        vals = [runs[m, k].draws[0, :, j] for m in ("HMC", "NNgHMC") for k in ("old", "new")]
        lo, hi = min(v.min() for v in vals), max(v.max() for v in vals)
        grid = np.linspace(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo), 200)
        for col, name in enumerate(("HMC", "NNgHMC")):
            ax = axes[j, col]
            for key, style in (("old", "--"), ("new", "-")):
                x = runs[name, key].draws[0, :, j]
                if np.ptp(x) > 0:
                    ax.plot(grid, scipy.stats.gaussian_kde(x)(grid), style, color=f"C{col}",
                            label=f"{key} prior")
            ax.set_title(f"{name}: beta_{j + 1}", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=7)
