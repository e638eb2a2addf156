"""Not a figure of the VHMC paper: its Figure 1 (beta-binomial) in 2-d
banana form: the variational approximation exp(-V) of a banana-shaped
posterior against s, the number of hidden units.

    fastsurrogate reproduce vhmc-banana [--quick] [--hidden ...] [--seeds K]

The paper's Figure 1 (``vhmc-fig1``) draws exp(-V) for increasing s on the
beta-binomial posterior, which is skewed but has one mode; a banana with two
arms is a harder test of the same fit.  The banana here is the RNS-HMC
paper's (same authors),
``fs.models.Banana()``: y_i ~ N(q0 + q1^2, 2^2), i = 1..100 simulated with
q0 + q1^2 = 1 (seed 2017), prior q0, q1 ~ N(0, 1).

What is measured, for s in ``--hidden`` and ``--seeds`` random bases each:

* The regulariser (``--regulariser``).  VHMC's V_t fades from a Gaussian
  (the paper's: the Laplace approximation at the MAP) to the network, whose
  inputs that Gaussian also whitens.  This banana has two symmetric modes
  (q1 = +-0.66, a saddle 0.125 nats higher between them), so the Laplace
  approximation at either covers one arm, and trained from it exp(-V) put
  its mass where the posterior has none for most random bases at every s
  (full run, 5 bases: median Hellinger 1 at s = 10, 20, 50, 200 and 0.24 at
  s = 100).  The default (``pilot``) is therefore the Gaussian with the
  mean and covariance of a short exact pilot run (``--pilot`` NUTS draws,
  default 1000, 500 warm-up, from the prior's mean), which covers both arms
  and is what a user can compute: the VHMC paper's own exploration is such
  a run.  ``--regulariser moments`` takes the posterior's exact mean and
  covariance (by quadrature on the grid: an oracle a real problem lacks,
  the default until it was replaced), ``--regulariser laplace`` the paper's
  choice.  The chain starts at the Gaussian's mean.
* VHMC: ``fs.VHMC(model, n_hidden=s, laplace=<the regulariser>,
  input_scale=--input-scale)`` (softplus units, relative ridge 1e-6,
  input_scale 0.5: the package's defaults),
  trained online by score matching for ``--train`` iterations
  (mu_t = 1 - exp(-t / n_s), n_s = train / 10), then frozen:
  V = mu z + (1 - mu) Laplace; ``--draws`` draws on exp(-V) for the
  acceptance column.
* On a ``--n-grid`` x ``--n-grid`` grid over the box where the posterior
  exceeds 1e-6 x its maximum (its mass outside is ~5e-8), both densities
  normalised on the box: the Hellinger distance H = sqrt(1 - sum sqrt(p q)
  cell) (in [0, 1], symmetric, finite even where one density has mass the
  other lacks), KL(exp(-V) || posterior) in nats, and the score-matching
  distance (1/2) E_post ||grad V - grad U||^2.  Also H on the posterior's
  core (density above 1e-3 x its maximum, both renormalised there) and the
  mass exp(-V) puts outside the core: far from the chain's states the
  softplus units extrapolate linearly and V can fall below its values on the
  banana, which puts exp(-V)'s mass at the box's edge (H near 1); these two
  columns separate that from the fit on the banana.  All by quadrature from
  the densities: no Monte Carlo error; the spread over seeds is the bases'.
* The same numbers for the regulariser alone (row "regulariser").
* Where matplotlib is installed, a PNG of contour panels: the posterior and
  exp(-V) for each s (first basis), with that run's draws.

Duration: the full run (s = 10, 20, 50, 100, 200, 5 bases each, 3000
training iterations, 301 x 301 grid) took 54 s on the shared 2-vCPU AMD
EPYC at load 2-3 (245 s at load 7-8, another full table beside it); ``--quick`` (s =
10, 50, 200, 3 bases, 2000 iterations, 151 x 151 grid) 35 s at load ~10
(9 s of user CPU).
"""
import os
import time

import numpy as np

import fastsurrogate as fs
from ..diagnostics.approximation import (_evaluate, _log_normalised, grid, kl_divergence_grid,
                                         score_matching_distance_grid)
from ..surrogates.laplace import LaplaceApproximation
from ._report import log, machine_line, markdown_table

CORE = 1e-3     # the posterior's core: density above CORE x its maximum


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--hidden", type=int, nargs="+", default=[10, 20, 50, 100, 200],
                    help="s, hidden units")
    ap.add_argument("--seeds", type=int, default=5, help="random bases per s")
    ap.add_argument("--train", type=int, default=3000, help="training iterations t0")
    ap.add_argument("--draws", type=int, default=1000, help="VHMC draws after training")
    ap.add_argument("--n-grid", type=int, default=301)
    ap.add_argument("--input-scale", type=float, default=0.5)
    ap.add_argument("--regulariser", choices=["pilot", "moments", "laplace"], default="pilot",
                    help="VHMC's Gaussian regulariser: the mean and covariance of a short "
                         "exact NUTS pilot run (default), the posterior's exact mean and "
                         "covariance (an oracle), or the Laplace approximation at one mode "
                         "(the paper's)")
    ap.add_argument("--pilot", type=int, default=1000,
                    help="draws of the exact pilot run (--regulariser pilot)")
    ap.add_argument("--seed", type=int, default=2018)


def _check(args):
    if min(args.hidden) < 1 or args.seeds < 1 or args.train < 10 or args.draws < 1:
        raise ValueError("--hidden and --seeds must be >= 1, --train >= 10, --draws >= 1")
    if args.pilot < 10:
        raise ValueError(f"--pilot must be >= 10, got {args.pilot}")
    if args.n_grid < 11:
        raise ValueError(f"--n-grid must be >= 11, got {args.n_grid}")
    if not (args.input_scale > 0 and np.isfinite(args.input_scale)):
        raise ValueError(f"--input-scale must be positive, got {args.input_scale}")


def log_density(pot, Q, cell):
    """log p at the grid points Q, normalised so that sum p cell = 1."""
    return _log_normalised(_evaluate(pot, Q, False)[0], cell)


def hellinger(la, lb, cell):
    """Hellinger distance sqrt(1 - sum sqrt(p_a p_b) cell) from two log
    densities normalised on one grid of cell volume ``cell``."""
    bc = float(np.sum(np.exp(0.5 * (la + lb))) * cell)
    return float(np.sqrt(max(0.0, 1.0 - bc)))


def posterior_box(model, rel=1e-6, n_grid=201):
    """The bounding box of {q : p(q) > rel x max p} (on a 201 x 201 grid over
    a box widened from [-3, 3]^2 until the exact mass in its outer cells is
    below 1e-8), and the exact posterior's mass outside it."""
    lo, hi = np.array([-3.0, -3.0]), np.array([3.0, 3.0])
    for _ in range(10):
        Q, cell, shape = grid(list(zip(lo, hi)), n_grid)
        lp = log_density(model, Q, cell)
        p = np.exp(lp).reshape(shape) * cell
        edges = {(0, 0): p[0].sum(), (0, 1): p[-1].sum(), (1, 0): p[:, 0].sum(),
                 (1, 1): p[:, -1].sum()}
        bad = [k for k, v in edges.items() if v > 1e-8 / 4]
        if not bad:
            break
        for axis, side in bad:
            w = hi[axis] - lo[axis]
            if side == 0:
                lo[axis] -= 0.5 * w
            else:
                hi[axis] += 0.5 * w
    keep = lp > lp.max() + np.log(rel)
    blo, bhi = Q[keep].min(axis=0), Q[keep].max(axis=0)
    inside = np.all((Q >= blo) & (Q <= bhi), axis=1)
    return ([(float(a), float(b)) for a, b in zip(blo, bhi)],
            float(np.exp(lp[~inside]).sum() * cell))


def contour_png(path, model, panels, bounds, n_grid=151, ncols=None,
                title="exp(-V) (red) against the banana posterior (grey)", labels=("q0", "q1")):
    """Contour panels of each exp(-V) and, last, the posterior; ``panels`` is
    a list of (title, potential, draws or None), laid out ``ncols`` to a row
    (default: one row).  Returns the path, or None when matplotlib is not
    installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    Q, cell, shape = grid(bounds, n_grid)
    lo, hi = np.array(bounds).T
    X, Y = Q[:, 0].reshape(shape), Q[:, 1].reshape(shape)
    pe = np.exp(log_density(model, Q, cell)).reshape(shape)
    levels = pe.max() * np.array([0.01, 0.05, 0.2, 0.4, 0.6, 0.8, 0.95])
    k = len(panels) + 1
    ncols = ncols or k
    nrows = -(-k // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.8 * ncols, 2.8 * nrows + 0.3),
                             sharex=True, sharey=True, squeeze=False)
    axes = axes.ravel()
    for ax, (name, pot, pts) in zip(axes, panels):
        pa = np.exp(log_density(pot, Q, cell)).reshape(shape)
        ax.contour(X, Y, pe, levels=levels, colors="0.75", linewidths=0.6)
        ax.contour(X, Y, pa, levels=pa.max() * levels / pe.max(), colors="C3", linewidths=0.8)
        if pts is not None and len(pts):
            inside = np.all((pts >= lo) & (pts <= hi), axis=1)
            ax.plot(pts[inside, 0], pts[inside, 1], ".", ms=1, color="C0", alpha=0.3)
            if not inside.all():        # a chain that ran off (few units): say so
                name += f" ({np.mean(~inside):.0%} of draws off the box)"
        ax.set_title(name, fontsize=9)
    axes[k - 1].contour(X, Y, pe, levels=levels, colors="k", linewidths=0.8)
    axes[k - 1].set_title("posterior", fontsize=9)
    for ax in axes[k:]:
        ax.set_visible(False)
    for ax in axes[:k]:
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_xlabel(labels[0], fontsize=8)
        ax.set_ylabel(labels[1], fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def reproduce(args):
    """Run the sweep; return the Markdown report."""
    _check(args)
    t_start = time.perf_counter()
    model = fs.models.Banana()
    bounds, outside = posterior_box(model)
    Q, cell, _ = grid(bounds, args.n_grid)
    le = log_density(model, Q, cell)
    lap, reg_name = _regulariser(model, args, Q, cell, le)
    measure = _measurer(model, bounds, args.n_grid, Q, cell, le)
    rows, panels, med = _sweep(model, lap, measure, args)
    lines = _report_lines(args, reg_name, bounds, outside, rows, med, t_start)
    out = getattr(args, "out_dir", None)
    if out:
        os.makedirs(out, exist_ok=True)
        png = contour_png(os.path.join(out, "vhmc-banana-contours.png"), model, panels, bounds)
        if png:
            lines += ["", f"![exp(-V) against s]({os.path.basename(png)})"]
    return "\n".join(lines)


def _regulariser(model, args, Q, cell, le):
    """(VHMC's Gaussian regulariser as a LaplaceApproximation, the report's
    words for it), by ``args.regulariser``; ``le``: the exact log density
    at the grid points Q (cells of volume ``cell``)."""
    if args.regulariser == "laplace":
        # the banana is symmetric in q1 with two modes (q1 = +-0.66); from zeros
        # the optimiser stops at the saddle q1 = 0: start it in the upper arm
        lap = fs.surrogates.laplace_approximation(model, init=np.array([0.5, 0.5]))
        return lap, (f"the Laplace approximation at the mode ({lap.mean[0]:.3f}, "
                     f"{lap.mean[1]:.3f}) (the paper's regulariser)")
    if args.regulariser == "pilot":
        pilot = fs.sample(model, "nuts", n_draws=args.pilot, n_warmup=500, chains=1,
                          seed=args.seed, init=np.zeros(2), progress=False)
        X = pilot.draws.reshape(-1, 2)
        mean, cov = X.mean(axis=0), np.cov(X, rowvar=False)
        lap = LaplaceApproximation(mean, np.linalg.inv(0.5 * (cov + cov.T)))
        return lap, (f"the Gaussian with the mean ({mean[0]:.3f}, {mean[1]:.3f}) and covariance "
                     f"of an exact NUTS pilot run ({args.pilot} draws after 500 warm-up), not "
                     f"the paper's Laplace approximation: see --regulariser")
    p = np.exp(le) * cell
    mean = p @ Q
    cov = (Q - mean).T @ ((Q - mean) * p[:, None])
    lap = LaplaceApproximation(mean, np.linalg.inv(0.5 * (cov + cov.T)))
    return lap, (f"the Gaussian with the posterior's exact mean ({mean[0]:.3f}, "
                 f"{mean[1]:.3f}) and covariance (by quadrature on the grid: an oracle), "
                 f"not the paper's Laplace approximation: see --regulariser")


def _measurer(model, bounds, n_grid, Q, cell, le):
    """measure(pot) -> the distances of exp(-pot) to the posterior on the
    grid: KL, Hellinger (on the box and on the core), the mass outside the
    core, the score-matching distance."""
    core = le > le.max() + np.log(CORE)
    lc = le[core] - np.log(np.sum(np.exp(le[core])) * cell)

    def measure(pot):
        la = log_density(pot, Q, cell)
        spurious = float(np.sum(np.exp(la[~core])) * cell)
        lac = la[core] - np.log(max(np.sum(np.exp(la[core])) * cell, 1e-300))
        return dict(kl=kl_divergence_grid(pot, model, bounds, n_grid),
                    h=hellinger(la, le, cell), h_core=hellinger(lac, lc, cell),
                    spurious=spurious,
                    sm=score_matching_distance_grid(pot, model, bounds, n_grid))
    return measure


def _fmt(x):
    return f"{x:.3g}"


def _sweep(model, lap, measure, args):
    """(table rows: the regulariser's, then one per s with the medians over
    the random bases; contour panels of each s's first basis; s -> medians)."""
    m_l = measure(lap.potential)
    rows = [["regulariser", _fmt(m_l["h"]), "-", _fmt(m_l["h_core"]), _fmt(m_l["spurious"]),
             _fmt(m_l["kl"]), _fmt(m_l["sm"]), "-", "-"]]
    panels = []
    med = {}
    for s in args.hidden:
        ms, accs, secs = [], [], []
        for k in range(args.seeds):
            res = fs.VHMC(model, laplace_tail=False,
                          n_hidden=s, laplace=lap, input_scale=args.input_scale).sample(
                args.draws, args.train, chains=1, seed=args.seed + k, init=lap.mean,
                progress=False)
            ms.append(measure(res.surrogate))
            accs.append(float(np.mean(res.acceptance_rate)))
            secs.append(float(res.timings.get("train", 0.0)))
            if k == 0:
                panels.append((f"exp(-V), s = {s}", res.surrogate, res.draws[0]))
            log(f"  s = {s}, seed {k}: " + ", ".join(f"{a} {b:.4g}" for a, b in ms[-1].items()))
        col = {key: np.array([x[key] for x in ms]) for key in ms[0]}
        med[s] = {key: float(np.median(v)) for key, v in col.items()}
        rows.append([str(s), _fmt(med[s]["h"]), ", ".join(f"{x:.2f}" for x in col["h"]),
                     _fmt(med[s]["h_core"]), _fmt(med[s]["spurious"]), _fmt(med[s]["kl"]),
                     _fmt(med[s]["sm"]), f"{np.mean(accs):.3f}", f"{np.mean(secs):.2f}"])
    return rows, panels, med


def _report_lines(args, reg_name, bounds, outside, rows, med, t_start):
    """The report: settings, the table, whether the distance falls with s."""
    head = ["s", "Hellinger: median", "per basis", "Hellinger on the core: median",
            "exp(-V) mass outside the core: median", "KL(exp(-V) \\|\\| posterior), nats: "
            "median", "score-matching distance: median", "acceptance", "training s"]
    s_lo, s_hi = min(args.hidden), max(args.hidden)
    falls = med[s_hi]["h"] < 0.9 * med[s_lo]["h"]
    return [machine_line(),
            f"banana (the RNS-HMC paper's, fs.models.Banana(): 100 observations, sigma_y = 2, "
            f"prior N(0, I)); VHMC's regulariser (and input whitening, and the chain's "
            f"start): {reg_name}; VHMC with {args.train} training "
            f"iterations (n_s = {max(1, args.train // 10)}), input_scale {args.input_scale}, "
            f"{args.draws} draws after training, {args.seeds} random bases per s; grid "
            f"{args.n_grid} x {args.n_grid} over the box q0 in [{bounds[0][0]:.2f}, "
            f"{bounds[0][1]:.2f}], q1 in [{bounds[1][0]:.2f}, {bounds[1][1]:.2f}] (where the "
            f"posterior exceeds 1e-6 x its maximum; exact mass outside {outside:.1e}); the "
            f"core is where it exceeds {CORE:g} x its maximum; "
            f"{time.perf_counter() - t_start:.0f} s", "",
            "Distance between exp(-V) (normalised on the box) and the posterior, by "
            "quadrature on the grid (no Monte Carlo error; the spread is over random bases). "
            "Hellinger distance in [0, 1]; 1 means exp(-V) puts its mass where the posterior "
            "has none: far from the chain's states the softplus units extrapolate linearly "
            "and V can fall below its values on the banana (mass at the box's edge; with few "
            "units the chain itself can run off). The core columns separate the shape on "
            "the banana from that spurious mass.", "",
            markdown_table(head, rows), "",
            f"Hellinger distance, median over bases: s = {s_lo}: {med[s_lo]['h']:.3g}, "
            f"s = {s_hi}: {med[s_hi]['h']:.3g}: "
            f"{'falls' if falls else 'does NOT fall'} (by 10 % or more) from the smallest to the "
            f"largest s."]
