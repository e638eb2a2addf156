"""RNS-HMC paper, Figure 6 as a table: one- and two-dimensional posterior
marginals of beta_1, beta_11, beta_21, beta_31, beta_41 of the simulated
logistic regression, exact HMC against RNS-HMC.

    fastsurrogate reproduce rns-fig6 [--quick] [--n-obs N] [--coefficients ...]

What the paper shows (Zhang, Shahbaba & Zhao 2017, Figure 6, section 5.1):
the one- and two-dimensional posterior marginals of five coefficients drawn
by HMC and by RNS-HMC on the simulated logistic regression (N = 100000,
d = 50), to show that RNS-HMC samples the right posterior.  It is a picture:
the paper gives no number for it.

What this table measures
------------------------
The problem and settings of ``rns-table1``'s "sim" row (section 5.1 and
Table 1): ``fs.datasets.simulate_logistic(--n-obs, --dim, seed=--data-seed)``
(X = (0.1 1, X1), X1 ~ N(0, I / 100), beta ~ U[0, 1]^d), prior N(0, 100 I),
data sums on ``--threads`` threads; step 0.045, L = 6 drawn from 1..L each
iteration, identity metric, no adaptation; both chains start at the MAP
(L-BFGS), RNS-HMC with another seed (``--seed + 1``: independent
chains).  HMC: ``--burn-in`` iterations (default ``--explore``, the
paper's 5000), then ``--draws`` draws.  RNS-HMC (``fs.RNSHMC(n_hidden=2000,
training="states", guard=None, trust=None)``): ``--explore`` exact-HMC exploration
iterations whose states after the first 20 % train a softplus random
network (the package's default ridge and input-scale choice), then
``--draws`` draws on its gradient with the exact Metropolis test.

Per coefficient (1-based, as the paper numbers them): the posterior mean
with its MCSE (bulk-ESS based) and sd with its MCSE from each sampler;
z = (mean_RNS - mean_HMC) / sqrt(MCSE_RNS^2 + MCSE_HMC^2) and the same for
the sds; the two-sample Kolmogorov-Smirnov distance sup |F_HMC - F_RNS| of
the marginals, beside the distance expected between two independent samples
of the two chains' effective sizes (the smaller of the bulk and tail ESS):
0.87 sqrt(1/n1 + 1/n2), the median of the Kolmogorov limit (the chains'
draws are correlated, so this is a scale, not a test); the coefficient's true value in the simulation.  With five
coefficients and two z each, |z| above 2.8 (two-sided 5 % with a
Bonferroni correction over the ten) flags a disagreement.  Where matplotlib
is installed: a PNG of the marginals (histograms on the diagonal) and the
pairwise contours of both samplers.

Duration: the full run (N = 100000, 5000 + 5000 iterations each) took 479 s
on the shared 2-vCPU AMD EPYC at load 5-7 (acceptance HMC 0.75, RNS-HMC
0.76, the paper's Table 1: 0.76 and 0.76); ``--quick`` (N = 20000, HMC
500 + 1500, RNS-HMC 2000 + 1500) 10-25 s at load 1-3.  The network needs
the paper's s = 2000 and 1600 training states: with s = 1000 or 800 states
its acceptance at N = 20000 fell to 0.4-0.5 in a trial.
"""
import os
import time

import numpy as np
import scipy.optimize as so
from scipy.stats import ks_2samp, norm

import fastsurrogate as fs
from ._report import log, machine_line, markdown_table

NO_PAPER = "n/a (the paper gives no number)"
COEFFICIENTS = (1, 11, 21, 31, 41)


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--n-obs", type=int, default=100000, help="N, observations")
    ap.add_argument("--dim", type=int, default=50, help="d, coefficients")
    ap.add_argument("--coefficients", type=int, nargs="+", default=list(COEFFICIENTS),
                    help="1-based indices of the coefficients shown")
    ap.add_argument("--n-hidden", type=int, default=2000, help="s, the network's hidden units")
    ap.add_argument("--step", type=float, default=0.045)
    ap.add_argument("--n-steps", type=int, default=6, help="L (drawn from 1..L)")
    ap.add_argument("--explore", type=int, default=5000,
                    help="burn-in (HMC) and exploration (RNS-HMC) iterations")
    ap.add_argument("--burn-in", type=int, default=None,
                    help="HMC's burn-in from the MAP (default: --explore, the paper's)")
    ap.add_argument("--draws", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=2, help="data-sum threads")
    ap.add_argument("--data-seed", type=int, default=2017)
    ap.add_argument("--seed", type=int, default=2017)


def _check(args):
    if args.dim < 2 or min(args.coefficients) < 1 or max(args.coefficients) > args.dim:
        raise ValueError(f"--coefficients must be in 1..--dim ({args.dim})")
    if args.explore < 50 or args.draws < 20 or args.n_hidden < 1:
        raise ValueError("--explore must be >= 50, --draws >= 20 and --n-hidden >= 1")
    if args.burn_in is not None and args.burn_in < 0:
        raise ValueError(f"--burn-in must be >= 0, got {args.burn_in}")


def run_chains(args):
    """(HMC result, RNS-HMC result, true beta, MAP) of the simulated regression."""
    X, y, beta = fs.datasets.simulate_logistic(args.n_obs, args.dim, seed=args.data_seed)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=args.threads)
    q0 = so.minimize(model.value_and_grad, np.zeros(args.dim), jac=True, method="L-BFGS-B",
                     options=dict(maxiter=5000, gtol=1e-8)).x
    common = dict(n_draws=args.draws, n_warmup=args.explore, chains=1, seed=args.seed, init=q0,
                  step_size=args.step, n_steps=args.n_steps, random_n_steps=True, adapt=False,
                  metric="unit", progress=False)
    burn = args.explore if args.burn_in is None else args.burn_in
    log(f"  HMC: {burn} + {args.draws} on N = {args.n_obs}, d = {args.dim} ...")
    hmc = fs.sample(model, method="hmc", **dict(common, n_warmup=burn))
    log(f"  RNS-HMC: s = {args.n_hidden} ...")
    # another seed: with the same one the two chains share their exploration and, where
    # the network's trajectory ends where the exact one does, every draw (coupled
    # chains would agree more closely than two independent samples of the posterior)
    rns = fs.sample(model, method="rns-hmc", training="states", n_hidden=args.n_hidden,
                    guard=None, trust=None, **dict(common, seed=args.seed + 1))
    return hmc, rns, beta, q0


def marginal_stats(draws):
    """Per column of ``draws`` (chains, n, k): mean, its MCSE, sd, its MCSE,
    and the smaller of the bulk and tail ESS."""
    flat = draws.reshape(-1, draws.shape[-1])
    return dict(mean=flat.mean(axis=0), se=np.asarray(fs.diagnostics.mcse_mean(draws)),
                sd=flat.std(axis=0, ddof=1), se_sd=np.asarray(fs.diagnostics.mcse_sd(draws)),
                ess=np.minimum(fs.diagnostics.ess_bulk(draws), fs.diagnostics.ess_tail(draws)))


def compare(hmc_draws, rns_draws):
    """Per column: both samplers' statistics, z of the means and of the
    sds, the KS distance and its independent-sample scale."""
    h, r = marginal_stats(hmc_draws), marginal_stats(rns_draws)
    z_mean = (r["mean"] - h["mean"]) / np.sqrt(r["se"] ** 2 + h["se"] ** 2)
    z_sd = (r["sd"] - h["sd"]) / np.sqrt(r["se_sd"] ** 2 + h["se_sd"] ** 2)
    k = hmc_draws.shape[-1]
    hf, rf = hmc_draws.reshape(-1, k), rns_draws.reshape(-1, k)
    ks = np.array([ks_2samp(hf[:, j], rf[:, j]).statistic for j in range(k)])
    ks_scale = 0.87 * np.sqrt(1.0 / h["ess"] + 1.0 / r["ess"])
    return dict(hmc=h, rns=r, z_mean=z_mean, z_sd=z_sd, ks=ks, ks_scale=ks_scale)


def _rows(cmp, coefs, beta):
    h, r = cmp["hmc"], cmp["rns"]
    rows = []
    for j, c in enumerate(coefs):
        rows.append([f"beta_{c}", f"{beta[c - 1]:.3f}",
                     f"{h['mean'][j]:.4f} +- {h['se'][j]:.4f}",
                     f"{r['mean'][j]:.4f} +- {r['se'][j]:.4f}", f"{cmp['z_mean'][j]:+.2f}",
                     f"{h['sd'][j]:.4f} +- {h['se_sd'][j]:.4f}",
                     f"{r['sd'][j]:.4f} +- {r['se_sd'][j]:.4f}", f"{cmp['z_sd'][j]:+.2f}",
                     f"{cmp['ks'][j]:.3f} ({cmp['ks_scale'][j]:.3f})", NO_PAPER])
    return rows


def reproduce(args):
    """Run both chains; return the Markdown report."""
    _check(args)
    t0 = time.perf_counter()
    hmc, rns, beta, q0 = run_chains(args)
    idx = [c - 1 for c in args.coefficients]
    cmp = compare(hmc.draws[..., idx], rns.draws[..., idx])
    bar = float(norm.ppf(1 - 0.025 / (2 * len(idx))))
    worst = float(max(np.max(np.abs(cmp["z_mean"])), np.max(np.abs(cmp["z_sd"]))))
    acc = {k: float(np.mean(v.stats["accept_prob"])) for k, v in (("HMC", hmc), ("RNS", rns))}
    lines = [machine_line(), "",
             f"simulated logistic regression: simulate_logistic({args.n_obs}, {args.dim}, "
             f"seed={args.data_seed}), prior N(0, 100 I); step {args.step}, L = {args.n_steps} "
             f"(drawn from 1..L), from the MAP; HMC "
             f"{args.explore if args.burn_in is None else args.burn_in} burn-in, RNS-HMC "
             f"{args.explore} exploration, then {args.draws} draws each; s = {args.n_hidden} "
             f"(training {rns.timings.get('train', 0.0):.1f} s). Acceptance: HMC "
             f"{acc['HMC']:.3f}, RNS-HMC {acc['RNS']:.3f} "
             f"({time.perf_counter() - t0:.0f} s in all).", "",
             "Posterior mean and sd +- MCSE; z = difference / sqrt(MCSE_HMC^2 + MCSE_RNS^2); "
             "KS = sup |F_HMC - F_RNS| (in brackets: its median for independent samples of the "
             "chains' effective sizes, min of bulk and tail ESS).", "",
             markdown_table(["coefficient", "true value", "mean HMC", "mean RNS-HMC", "z (mean)",
                             "sd HMC", "sd RNS-HMC", "z (sd)", "KS distance (scale)", "paper"],
                            _rows(cmp, args.coefficients, beta)), "",
             f"Largest |z| {worst:.2f} against the bar {bar:.2f} (two-sided 5 %, Bonferroni over "
             f"{2 * len(idx)} z): the two samplers' marginals "
             f"{'agree' if worst <= bar else 'DISAGREE'} within Monte Carlo error. The paper "
             f"shows the same comparison as a picture and gives no number for it."]
    if getattr(args, "quick", False):
        lines += ["", f"--quick: N = {args.n_obs} instead of the paper's 100000, shorter runs "
                      "and a shorter HMC burn-in (the chains start at the MAP)."]
    out = getattr(args, "out_dir", None)
    if out:
        os.makedirs(out, exist_ok=True)
        png = marginals_png(os.path.join(out, "rns-fig6-marginals.png"), hmc.draws[..., idx],
                            rns.draws[..., idx], args.coefficients)
        if png:
            lines += ["", f"![posterior marginals]({os.path.basename(png)})"]
    return "\n".join(lines)


def _contour(ax, a, b, colour, lim):
    """Contours of a smoothed 2-d histogram of (a, b) at 3 mass levels."""
    H, xe, ye = np.histogram2d(a, b, bins=24, range=lim)
    H = H.T
    K = np.array([0.25, 0.5, 0.25])
    H = np.apply_along_axis(lambda v: np.convolve(v, K, mode="same"), 0, H)
    H = np.apply_along_axis(lambda v: np.convolve(v, K, mode="same"), 1, H)
    s = np.sort(H.ravel())[::-1]
    cum = np.cumsum(s) / s.sum()
    levels = sorted({float(s[min(np.searchsorted(cum, m), len(s) - 1)]) for m in (0.9, 0.6, 0.3)})
    if len(levels) > 1:
        xc, yc = 0.5 * (xe[1:] + xe[:-1]), 0.5 * (ye[1:] + ye[:-1])
        ax.contour(xc, yc, H, levels=levels, colors=colour, linewidths=0.8)


def marginals_png(path, hd, rd, coefs):
    """Corner plot: histograms of each coefficient on the diagonal, contours
    of each pair below it (HMC red, RNS-HMC blue).  None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    k = hd.shape[-1]
    hf, rf = hd.reshape(-1, k), rd.reshape(-1, k)
    both = np.vstack([hf, rf])
    lims = [tuple(np.quantile(both[:, j], [0.002, 0.998])) for j in range(k)]
    fig, axes = plt.subplots(k, k, figsize=(2.1 * k, 2.1 * k), squeeze=False)
    for i in range(k):
        for j in range(k):
            ax = axes[i][j]
            if j > i:
                ax.axis("off")
                continue
            if i == j:
                bins = np.linspace(*lims[j], 31)
                ax.hist(hf[:, j], bins=bins, density=True, histtype="step", color="red",
                        label="HMC")
                ax.hist(rf[:, j], bins=bins, density=True, histtype="step", color="blue",
                        label="RNS-HMC")
                ax.set_yticks([])
            else:
                for d, colour in ((hf, "red"), (rf, "blue")):
                    _contour(ax, d[:, j], d[:, i], colour, [lims[j], lims[i]])
                ax.set_ylim(*lims[i])
            ax.set_xlim(*lims[j])
            ax.tick_params(labelsize=6)
            if i == k - 1:
                ax.set_xlabel(f"beta_{coefs[j]}", fontsize=8)
            if j == 0 and i > 0:
                ax.set_ylabel(f"beta_{coefs[i]}", fontsize=8)
    axes[0][0].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.05, 1.0))
    fig.suptitle("RNS-HMC paper, Figure 6: posterior marginals, HMC (red) and RNS-HMC (blue)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
