"""VHMC paper, Figure 1: the surrogate-induced density exp(-V) of the
beta-binomial posterior (stomach-cancer mortality, section 4.1) for
increasing s, beside the exact posterior.

    fastsurrogate reproduce vhmc-fig1 [--quick] [--hidden ...] [--train T]

The paper draws exp(-V) as contours for several numbers of hidden units s,
with the exact posterior in the last panel; Figure 2 (``vhmc-fig2``) gives
the distances of the same surrogates to the posterior.  The model is
``fs.models.BetaBinomial`` on ``cancer_mortality.csv`` (20 Missouri cities),
sampled as q = (logit m, log K).

Settings (the paper's where it gives them): VHMC in the paper's form
(``laplace_tail=False``: V = mu z + (1 - mu) Laplace), mu_t = 1 - exp(-t /
200) (the paper's schedule: ``--train`` 2000 training iterations with n_s =
t0 / 10), the step size adapted to 0.85 (the paper sets HMC for about 85 %
acceptance), softplus units with ``input_scale`` 1.0 (as in ``vhmc-fig2``:
the posterior is skewed), one random basis per s (``--seed``), then
``--draws`` draws on the frozen exp(-V).  The grid is Albert's box of this
posterior (logit m in [-8, -4.5], log K in [3, 16.5]), on which both
densities are normalised; the exact posterior has 2.8e-4 of its mass
outside it.

Per s the table gives the Hellinger distance and KL(exp(-V) || posterior)
on the box (quadratures: no Monte Carlo error), the acceptance of the draws
on exp(-V), the fraction of them outside the box (the paper's form can put
mass far from the data when s is small), and the draws' mean against the exact posterior mean.  The
paper gives no numbers for this figure (it draws contours), so its "paper"
column says so.  The PNG has one contour panel per s (red: exp(-V), grey:
the posterior, blue: the draws) and the posterior alone at the bottom right.
"""
import os
import time

import numpy as np

import fastsurrogate as fs
from ..diagnostics.approximation import grid, kl_divergence_grid
from ._report import log, machine_line, markdown_table
from ._vhmc_banana import contour_png, hellinger, log_density
from ._vhmc_fig2 import ALBERT_BOX

_NO_NUMBER = "n/a (the paper draws contours; no number)"


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--hidden", type=int, nargs="+", default=[10, 20, 50, 100, 200],
                    help="s, hidden units (one panel each)")
    ap.add_argument("--train", type=int, default=2000,
                    help="training iterations t0 (n_s = t0 / 10)")
    ap.add_argument("--draws", type=int, default=2000, help="draws on the frozen exp(-V)")
    ap.add_argument("--n-grid", type=int, default=201)
    ap.add_argument("--input-scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1000)


def _check(args):
    if min(args.hidden) < 1 or args.train < 10 or args.draws < 10:
        raise ValueError("--hidden must be >= 1, --train and --draws >= 10")
    if args.n_grid < 11:
        raise ValueError(f"--n-grid must be >= 11, got {args.n_grid}")


def _off_box(D):
    lo, hi = np.array(ALBERT_BOX).T
    return float(np.mean(np.any((D < lo) | (D > hi), axis=1)))


def _exact_mean(le, Q, cell):
    return np.exp(le) @ Q * cell


def reproduce(args):
    """Fit exp(-V) for each s; return the Markdown report (and draw the PNG)."""
    _check(args)
    t_start = time.perf_counter()
    deaths, at_risk = fs.datasets.load_cancer_mortality()
    model = fs.models.BetaBinomial(deaths, at_risk)
    lap = fs.surrogates.laplace_approximation(model)
    Q, cell, _ = grid(ALBERT_BOX, args.n_grid)
    le = log_density(model, Q, cell)
    mean = _exact_mean(le, Q, cell)
    rows, panels = [], []
    for s in args.hidden:
        res = fs.VHMC(model, laplace_tail=False, n_hidden=s, laplace=lap,
                      input_scale=args.input_scale, target_accept=0.85).sample(
            args.draws, args.train, chains=1, seed=args.seed, progress=False)
        lv = log_density(res.surrogate, Q, cell)
        D = res.draws.reshape(-1, 2)
        z = (D.mean(axis=0) - mean) / np.asarray(fs.diagnostics.mcse_mean(res.draws))
        rows.append([str(s), f"{hellinger(lv, le, cell):.4f}",
                     f"{kl_divergence_grid(res.surrogate, model, ALBERT_BOX, args.n_grid):.4g}",
                     f"{float(res.acceptance_rate.mean()):.3f}", f"{_off_box(D):.1%}",
                     ", ".join(f"{x:+.1f}" for x in z), _NO_NUMBER])
        panels.append((f"s = {s}", res.surrogate, D))
        log(f"  s = {s}: Hellinger {rows[-1][1]}, KL {rows[-1][2]}")
    lh = log_density(lap.potential, Q, cell)
    rows.append(["Laplace", f"{hellinger(lh, le, cell):.4f}",
                 f"{kl_divergence_grid(lap.potential, model, ALBERT_BOX, args.n_grid):.4g}",
                 "-", "-", "-", _NO_NUMBER])
    lines = [f"- {machine_line()}",
             f"- data: {len(deaths)} cities, {int(deaths.sum())} deaths; "
             f"q = (logit m, log K); exact posterior mean on the box "
             f"{np.round(mean, 4).tolist()}",
             f"- VHMC (the paper's form, laplace_tail=False): {args.train} training iterations, "
             f"mu_t = 1 - exp(-t / {args.train // 10}), target acceptance 0.85, input_scale "
             f"{args.input_scale}, seed {args.seed}, then {args.draws} draws on exp(-V)",
             f"- grid: {args.n_grid} x {args.n_grid} over Albert's box logit m in [-8, -4.5], "
             f"log K in [3, 16.5]; {time.perf_counter() - t_start:.0f} s", "",
             markdown_table(["s", "Hellinger", "KL (nats)", "acceptance", "draws off the box",
                             "draws' mean - exact, MCSE (logit m, log K)", "paper"], rows)]
    out = getattr(args, "out_dir", None)
    if out:
        os.makedirs(out, exist_ok=True)
        png = contour_png(os.path.join(out, "vhmc-fig1-contours.png"), model, panels,
                          ALBERT_BOX, ncols=3, labels=("logit m", "log K"),
                          title="VHMC paper, Figure 1: exp(-V) (red) against the "
                                "beta-binomial posterior (grey) for increasing s")
        if png:
            lines += ["", f"![exp(-V) against s]({os.path.basename(png)})"]
    return "\n".join(lines)
