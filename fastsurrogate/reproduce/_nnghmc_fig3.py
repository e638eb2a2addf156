"""NNgHMC paper, Figure 3: the 30-d ill-conditioned Gaussian of section 4.1,
exact HMC against NNgHMC in the two extreme dimensions.

    fastsurrogate reproduce nnghmc-fig3 [--quick] [--n-draws N] [--seed S]

The target (the paper's construction)
  q ~ N_30(0, Sigma), Sigma diagonal: variance 0.1 in dimension 1, 1000 in
  dimension 30, the 28 others drawn uniformly from [1, 100] (seeded by
  ``--seed``).  (Table nnghmc-4.1's 30-d Gaussian spaces its variances
  logarithmically instead; this figure follows the paper's text.)

The samplers (the paper's settings)
  Step 0.5, L = 100, identity metric, no adaptation, one chain from a
  N(0, I) draw (the authors' code's default start).  The number of
  leapfrog steps is drawn from 1..L every iteration, as in the authors'
  code (``--steps fixed``: exactly L; measured, fixed L = 100 resonates
  with the narrowest dimension: ESS 33 of 2000 for its sd).
  HMC: ``--burn-in`` iterations, then ``--n-draws`` draws.  NNgHMC: the
  same burn-in (the chain converges, from this start, within it), then 50
  exact iterations recording every leapfrog step's (q, grad U) (the
  paper's "until 50 iterations after convergence"), one training of a
  network with h = 100 softplus units (random start; the package's L-BFGS
  trainer with early stopping, not the paper's 10 epochs of Adam), then
  ``--n-draws`` draws driven by the network, judged by the exact U.

Measured
  Acceptance; in dimensions 1 and 30, the draws' mean and sd against the
  exact ones (0; sqrt 0.1 and sqrt 1000), z in MCSE units, and the bulk
  ESS; the network's relative gradient error on its held-out 10 %.  PNG:
  draws of (q1, q30) of both samplers over the exact 1, 2, 3 sd ellipses.
"""
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.diagnostics import ess_bulk
from ._nnghmc_figs import NO_NUMBER, finish, fmt_z, moment_z, one_training, write_png
from ._report import log, machine_line, markdown_table

PAPER_ACCEPTANCE = {"HMC": "~0.7", "NNgHMC": "~0.5"}


def options(ap):
    """Add this figure's options (defaults: the paper's settings) to ``ap``."""
    ap.add_argument("--n-draws", type=int, default=3000)
    ap.add_argument("--burn-in", type=int, default=50)
    ap.add_argument("--n-record", type=int, default=50,
                    help="exact iterations after the burn-in whose leapfrog steps train")
    ap.add_argument("--n-hidden", type=int, default=100)
    ap.add_argument("--optimizer", choices=["adam", "lbfgs"], default="lbfgs",
                    help="the network's trainer: Adam (the paper's) or L-BFGS")
    ap.add_argument("--step-size", type=float, default=0.5)
    ap.add_argument("--n-steps", type=int, default=100)
    ap.add_argument("--steps", choices=["random", "fixed"], default="random")
    ap.add_argument("--seed", type=int, default=2019)


def variances(seed, dim=30):
    """The paper's diagonal: 0.1 first, 1000 last, U(1, 100) between."""
    rng = np.random.default_rng([seed, 3])
    return np.concatenate([[0.1], rng.uniform(1.0, 100.0, dim - 2), [1000.0]])


def run(args):
    """Both samplers on N(0, diag(variances)); returns (variances, {name: Result})."""
    var = variances(args.seed)
    model = fs.models.Gaussian(np.zeros(var.size), np.diag(var))
    init = np.random.default_rng([args.seed, 4]).standard_normal(var.size)
    hmc = dict(step_size=args.step_size, n_steps=args.n_steps,
               random_n_steps=args.steps == "random")
    log(f"  HMC: {args.burn_in} burn-in, {args.n_draws} draws ...")
    runs = {"HMC": fs.sample(model, method="hmc", n_draws=args.n_draws, n_warmup=args.burn_in,
                             chains=1, seed=args.seed, init=init, metric="unit", adapt=False,
                             progress=False, **hmc)}
    log(f"  NNgHMC: {args.burn_in} burn-in, {args.n_record} recorded, training, "
        f"{args.n_draws} draws ...")
    runs["NNgHMC"] = one_training(model, args.n_record, args.n_draws, init, args.seed + 1,
                                  args.n_hidden, burn_in=args.burn_in,
                                  optimizer=args.optimizer, **hmc)
    return var, runs


def rows(var, runs):
    """The table's rows: acceptance and the extreme dimensions' moments."""
    sd = np.sqrt(var)
    ends = [0, var.size - 1]
    out = []
    for name, res in runs.items():
        mz = moment_z(res.draws, np.zeros(var.size), sd)
        ess = ess_bulk(res.draws)
        cells = [name, f"{res.summary().overall['acceptance']:.3f}"]
        for i in ends:
            cells += [f"{mz['mean'][i]:+.3f} ({fmt_z(mz['z_mean'][i])})",
                      f"{mz['sd'][i]:.3f} ({fmt_z(mz['z_sd'][i])})", f"{ess[i]:.0f}"]
        out.append(cells + [PAPER_ACCEPTANCE[name]])
    out.append(["exact", "-", "0", f"{sd[0]:.3f}", "-", "0", f"{sd[-1]:.3f}", "-", NO_NUMBER])
    return out


def reproduce(args):
    """Run Figure 3's experiment; return the Markdown report (and write the PNG)."""
    if min(args.n_draws, args.n_record, args.n_hidden, args.n_steps) < 1 or args.burn_in < 0:
        raise ValueError("--n-draws, --n-record, --n-hidden and --n-steps must be >= 1, "
                         "--burn-in >= 0")
    t0 = time.perf_counter()
    var, runs = run(args)
    net = runs["NNgHMC"].surrogate
    steps = f"1..{args.n_steps} (drawn)" if args.steps == "random" else f"{args.n_steps}"
    head = ["method", "acceptance", "mean q1 (z)", "sd q1 (z)", "ESS q1", "mean q30 (z)",
            "sd q30 (z)", "ESS q30", "paper"]
    lines = [machine_line(), "",
             f"### N_30(0, Sigma), variances 0.1, 28 from U(1, 100), 1000: step "
             f"{args.step_size:g}, L = {steps}, burn-in {args.burn_in}, {args.n_draws} draws "
             f"each", "", markdown_table(head, rows(var, runs)), "",
             "z: the difference from the exact value in MCSE units; ESS: bulk.", "",
             f"Network: h = {args.n_hidden}, trained once on the {net.info['n_train']} + "
             f"{net.info['n_holdout']} (held out) leapfrog points of {args.n_record} exact "
             f"iterations; relative gradient error on the held-out points "
             f"{net.info['holdout_rel_error']:.4f}; training {net.info['time']:.1f} s."]
    png = write_png(getattr(args, "out_dir", None), "nnghmc-fig3.png",
                    lambda axes: draw(axes, var, runs), shape=(2, 1), size=(6.0, 3.0),
                    title="NNgHMC paper, Figure 3: q1 (variance 0.1) against q30 (1000)")
    return finish(lines, png, t0)


def draw(axes, var, runs):
    """One panel per sampler: (q30, q1) draws over the exact 1, 2, 3 sd ellipses."""
    sd = np.sqrt(var[[-1, 0]])
    t = np.linspace(0.0, 2.0 * np.pi, 200)
    for ax, (name, res) in zip(axes[:, 0], runs.items()):
        d = res.draws[0]
        ax.plot(d[:, -1], d[:, 0], ".", ms=2, alpha=0.4, color="C0" if name == "HMC" else "C1")
        for k in (1, 2, 3):
            ax.plot(k * sd[0] * np.cos(t), k * sd[1] * np.sin(t), "-", lw=0.6, color="0.5")
        ax.set_xlim(-4 * sd[0], 4 * sd[0])
        ax.set_ylim(-4 * sd[1], 4 * sd[1])
        ax.set_xlabel("q30 (sd 31.6)", fontsize=8)
        ax.set_ylabel("q1 (sd 0.32)", fontsize=8)
        ax.set_title(f"{name}: {len(d)} draws, acceptance "
                     f"{res.summary().overall['acceptance']:.2f}", fontsize=9)
        ax.tick_params(labelsize=7)
