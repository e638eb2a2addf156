"""The NNgHMC paper's Table 5, census-income rows (Li, Holbrook, Shahbaba &
Baldi 2019): Bayesian logistic regression on the Adult (census income) data
set, exact HMC against NNgHMC trained on 10 %, 15 % and 20 % of the run,
training included.

    fastsurrogate reproduce nnghmc-table5 [--quick] [--n-draws N] [--fractions F ...]

The data
  a9a (``fastsurrogate.datasets.load_a9a``): the LIBSVM binary version of UCI
  Adult, 32561 training rows, 123 binary (one-hot) features.  The paper's
  preprocessing of census income is not given in this project's texts, so
  all 123 features are used as they are, with an intercept column (124
  parameters), prior N(0, 100 I) (the prior of the RNS-HMC paper's a9a runs;
  the NNgHMC paper's is not quoted here).  The data-sum kernel runs on 2
  threads (``LogisticRegression(n_threads=2)``).

The parameterisation, step size and L (chosen by measurement; the paper's are not known here)
  The one-hot columns of each attribute sum to the intercept column, so some
  directions of the posterior are set by the prior alone: sds along the
  Laplace covariance's axes run from 0.006 to 10 (condition number
  ~2.7e6).  An identity metric would leave those directions unexplored in any affordable run, for both
  samplers.  Both therefore sample the whitened coefficients z = L^-1 beta,
  with L the Cholesky factor of the Laplace covariance (the inverse Hessian
  of U at the MAP, found by Newton's method): the likelihood on the design
  X L (the same C data-sum kernel, the same cost), plus the prior N(0, 100 I)
  on beta written as a Gaussian in z (a ``WeightedSum``, evaluated in C).
  This is HMC with a fixed dense metric (the Laplace covariance; what Stan's
  ``dense_e`` adapts towards), stated as a linear change of variables so that
  the gradient network learns a well-scaled target: trained on beta's raw
  gradients, whose scale differs by 10^3 between directions, the network's
  held-out error was 13-34 % and its trials accepted nothing with 1000-3000
  points (measured in quick runs; whitened: 4-6 % and 0.63 with 3000).
  Draws, ESS, MCSE and the exactness check are on beta = L z.  Exact HMC's
  burn-in adapts the step size (dual averaging, target acceptance 0.8);
  NNgHMC then uses that step, without adaptation.  Exactly L leapfrog steps
  per iteration.

The samplers
  One chain each, started at the MAP, the same number of burn-in iterations.
  As in the paper, exact HMC draws ``--n-draws`` iterations, and each NNgHMC
  run spends a fraction f of them (``--fractions``, the paper's 10 %, 15 %
  and 20 %) collecting training data with exact HMC and draws the rest
  with the network.  NNgHMC: after its burn-in it explores with exact HMC
  for E = f x n_draws iterations
  recording every leapfrog step (q, grad U(q)), trains a backprop gradient
  network (8 blocks of 50 softplus units, from the affine start, which 8
  blocks of 15-16 outputs hold exactly; on a random subset of at most 6000
  recorded points), runs a 50-iteration trial and switches when the trial's
  acceptance is at least 0.9 x exact HMC's (else explores E more and
  retrains, up to ``--trainings`` times); then draws n_draws - E iterations, the
  network's gradient driving the leapfrog and the exact U in the Metropolis
  test (so the chain is exact).

Columns (as the other NNgHMC tables here; min ESS rather than median)
  AP (mean acceptance probability of the draws), ESS min / median / max over
  the 124 parameters (Geyer), s/iter (sampling phase), min ESS/s with the
  CPU time: HMC its draws; NNgHMC exploration + training + trials + draws
  (everything after the shared burn-in: training included), speed-up (ratio
  of min ESS/s to HMC's, and of median ESS/s, the paper's measure), train s.
Exactness check: z = (mean_NNgHMC - mean_HMC) / sqrt(MCSE_NNgHMC^2 +
MCSE_HMC^2) for every parameter, against the two-sided Bonferroni bound at
family-wise level 0.01 over the 124 parameters.
"""
import time

import numpy as np
import scipy.linalg
import scipy.stats

import fastsurrogate as fs
from fastsurrogate.diagnostics import mcse_mean, summary
from ._report import log, machine_line, markdown_table

# paper settings not known: these were chosen by measurement (see docs/benchmarks.md)
DEFAULTS = dict(n_draws=10000, burn_in=300, trainings=1, max_train=6000, n_steps=10,
                n_hidden=50, blocks=8)
FRACTIONS = (0.10, 0.15, 0.20)        # the paper's training fractions
PRIOR_SD = 10.0
HEAD = ["method", "AP", "ESS min / median / max", "s/iter", "min ESS/s (training included)",
        "median ESS/s", "speed-up (min / median)", "train s"]


def load(threads, data_dir=None):
    """a9a: X (n, 124) = intercept + the 123 binary features, y in {0, 1}."""
    X, y = fs.datasets.load_a9a(data_dir)
    return np.hstack([np.ones((X.shape[0], 1)), np.asarray(X, dtype=np.float64)]), y


def laplace(model, X, tol=1e-10, max_iter=50):
    """MAP by damped Newton (U is strictly convex) and the inverse Hessian there."""
    q = np.zeros(model.dim)
    u, g = model.value_and_grad(q)
    for _ in range(max_iter):
        step = np.linalg.solve(model.fisher_information(q), g)     # the Hessian (canonical link)
        t = 1.0
        while True:
            u_new, g_new = model.value_and_grad(q - t * step)
            if u_new <= u - 1e-4 * t * (g @ step) or t < 1e-8:
                break
            t *= 0.5
        q, u, g = q - t * step, u_new, g_new
        if g @ step < tol:
            break
    C = np.linalg.inv(model.fisher_information(q))
    return q, 0.5 * (C + C.T)


def cpu_time(res):
    """Seconds charged to a run: HMC its draws; NNgHMC everything after the burn-in."""
    t = res.timings
    if res.method == "hmc":
        return t.get("sample", 0.0)
    return sum(t.get(k, 0.0) for k in ("explore", "train", "trial", "sample"))


def beta_draws(res, L):
    """Draws of beta = L z, shape (chains, draws, dim)."""
    return res.draws @ L.T


def exactness(a, b, level=0.01):
    """Per-parameter z-scores of the difference of two runs' posterior means
    (draws (chains, n, dim) each), and the two-sided Bonferroni bound at
    family-wise ``level``."""
    z = (a.mean(axis=(0, 1)) - b.mean(axis=(0, 1))) / np.sqrt(mcse_mean(a) ** 2
                                                              + mcse_mean(b) ** 2)
    bound = scipy.stats.norm.ppf(1.0 - level / (2 * z.size))
    return z, bound


def run(args):
    """Both runs; returns (settings, {"HMC": res, "NNgHMC": res}, L)."""
    X, y = load(args.threads)
    model = fs.models.LogisticRegression(X, y, prior_sd=PRIOR_SD, n_threads=args.threads)
    t0 = time.perf_counter()
    q_map, cov = laplace(model, X)
    L = np.linalg.cholesky(cov)
    Linv = scipy.linalg.solve_triangular(L, np.eye(L.shape[0]), lower=True)
    lik = fs.models.LogisticRegression(X @ L, y, prior_sd=None, n_threads=args.threads)
    prior = fs.models.Gaussian(np.zeros(L.shape[0]), PRIOR_SD ** 2 * (Linv @ Linv.T))
    target = fs.WeightedSum([lik, prior])
    z0 = Linv @ q_map
    t_map = time.perf_counter() - t0
    sd = np.sqrt(np.diag(cov))
    B = args.burn_in
    common = dict(n_draws=args.n_draws, chains=1, seed=args.seed, init=z0, n_steps=args.n_steps,
                  random_n_steps=False, metric="unit", progress=False, n_warmup=B)
    hmc = fs.sample(target, method="hmc", adapt=True, target_accept=0.8, **common)
    step = float(np.asarray(hmc.stats["step_size"]).ravel()[-1])
    runs = {"HMC": hmc}
    for f in args.fractions:
        E = explore_length(f, args.n_draws)
        common.update(n_warmup=B + args.trainings * E, n_draws=args.n_draws - E)
        runs[nnghmc_label(f)] = fs.sample(
            target, method="nnghmc", adapt=False, step_size=step, burn_in=B,
            train_start=B + E, train_every=E, trial_length=50, switch_fraction=0.9,
            n_hidden=args.n_hidden, blocks=args.blocks, max_train=args.max_train or None,
            **common)
    cfg = dict(step_size=step, t_map=t_map, sd_min=sd.min(), sd_max=sd.max(),
               n=X.shape[0], dim=model.dim)
    return cfg, runs, L


def explore_length(fraction, n_draws):
    """Exact exploration iterations of an NNgHMC run given ``fraction`` of the draws."""
    return min(n_draws - 1, max(1, int(round(fraction * n_draws))))


def nnghmc_label(fraction):
    """The row label of the NNgHMC run trained on ``fraction`` of the run."""
    return f"NNgHMC ({100 * fraction:g} %)"


def rows(runs, L):
    """The table's rows (formatted cells), HMC first; ESS of beta = L z."""
    rate, medrate = {}, {}
    out = []
    for m, res in runs.items():
        s = res.summary().overall
        ess = np.asarray(summary(beta_draws(res, L))["ess"], dtype=float)
        lo, med, hi = ess.min(), np.median(ess), ess.max()
        rate[m] = lo / cpu_time(res)
        medrate[m] = med / cpu_time(res)
        out.append([m, f"{s['acceptance']:.3f}", f"{lo:.0f} / {med:.0f} / {hi:.0f}",
                    f"{s['seconds_per_iteration']:.2e}", f"{rate[m]:.2f}", f"{medrate[m]:.2f}",
                    f"{rate[m] / rate['HMC']:.1f} / {medrate[m] / medrate['HMC']:.1f}",
                    f"{res.timings.get('train', 0.0):.1f}"])
    return out, rate


def report(cfg, runs, L, args):
    """The Markdown text of one run."""
    table_rows, rate = rows(runs, L)
    lines = [f"### census income (a9a): N = {cfg['n']}, dim {cfg['dim']} (intercept + 123 "
             f"binary features), prior N(0, 100 I); whitened by the Laplace covariance (a "
             f"dense metric), step {cfg['step_size']:.3g} (adapted in HMC's burn-in), L = "
             f"{args.n_steps}, {args.n_draws} iterations after a burn-in of {args.burn_in}; "
             f"NNgHMC explores {', '.join(f'{100 * f:g} %' for f in args.fractions)} of them "
             f"(up to {args.trainings} training(s), on at most {args.max_train} points), "
             f"network {args.blocks} x {args.n_hidden} hidden", "",
             markdown_table(HEAD, table_rows), "",
             f"Laplace approximation (Newton) and whitening: {cfg['t_map']:.1f} s, marginal "
             f"sds {cfg['sd_min']:.3f} .. {cfg['sd_max']:.2f}.  HMC: burn-in "
             f"{runs['HMC'].timings.get('warmup', 0):.1f} s, sample "
             f"{runs['HMC'].timings.get('sample', 0):.1f} s."]
    for name, res in runs.items():
        if name != "HMC":
            lines += ["", f"{name}:"] + _nnghmc_lines(res, runs["HMC"], rate[name],
                                                       rate["HMC"], L)
    return "\n".join(lines)


def _nnghmc_lines(nng, hmc, rate, hmc_rate, L):
    """Stages, schedule, load check and exactness of one NNgHMC run."""
    t = nng.timings
    lines = [f"stages (s): burn-in {t.get('burn_in', 0):.1f}, explore {t.get('explore', 0):.1f}, "
             f"train {t.get('train', 0):.1f}, trial {t.get('trial', 0):.2f}, sample "
             f"{t.get('sample', 0):.1f}."]
    ev = nng.info["events"]
    trains = [e for e in ev if e["event"] == "train"]
    trials = [e for e in ev if e["event"] == "trial"]
    lines.append("Schedule: " + ("; ".join(
        f"train at {a['iteration']} on {a['n_points']} points ({a['seconds']:.1f} s, held-out "
        f"relative error {a.get('holdout_rel_error', float('nan')):.3f}), trial AP "
        f"{b['acceptance']:.3f} vs HMC {b['hmc_acceptance']:.3f} -> "
        f"{'switch' if b['switch'] else 'keep exact'}" for a, b in zip(trains, trials))
        or "no training") + ".")
    n_explore = int(np.sum(nng.info["warmup_stage"] == 1))
    if n_explore:
        per_iter = t.get("explore", 0.0) / n_explore
        hmc_per_iter = hmc.seconds_per_iteration()
        alt = hmc_rate * hmc_per_iter / per_iter
        lines.append(f"Load check: an exact iteration cost {1e3 * hmc_per_iter:.1f} ms in HMC's "
                     f"draws and {1e3 * per_iter:.1f} ms in NNgHMC's exploration; with the "
                     f"latter for HMC the speed-up is {rate / alt:.1f}.")
    z, bound = exactness(beta_draws(nng, L), beta_draws(hmc, L))
    worst = int(np.argmax(np.abs(z)))
    lines.append(f"Exactness: NNgHMC's posterior means of beta against exact HMC's, z = "
                 f"difference / combined MCSE over the {z.size} coefficients: max |z| = "
                 f"{abs(z[worst]):.2f} (beta[{worst}]), {int(np.sum(np.abs(z) > bound))} "
                 f"beyond the Bonferroni bound {bound:.2f} (family-wise level 0.01); "
                 f"{int(np.sum(np.abs(z) > 2))} beyond 2 (expected ~{0.0455 * z.size:.1f} "
                 f"if independent).")
    return lines


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    for k, v in DEFAULTS.items():
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    ap.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS),
                    help="fractions of --n-draws NNgHMC spends collecting training data "
                         "(one NNgHMC run each; the paper's 0.10 0.15 0.20)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2019)


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    if not all(0.0 < f < 1.0 for f in args.fractions):
        raise ValueError(f"--fractions must be in (0, 1), got {args.fractions}")
    t0 = time.perf_counter()
    cfg, runs, L = run(args)
    text = report(cfg, runs, L, args)
    log(text)
    return (f"{machine_line()} (shared: timings approximate); data-sum threads "
            f"{args.threads}\n\n{text}\n\n({time.perf_counter() - t0:.0f} s in all)")
