"""The RNS-HMC paper (Zhang, Shahbaba & Zhao 2017, "Hamiltonian Monte Carlo
acceleration using surrogate functions with random bases", Stat. Comput. 27):
Table 1 (logistic regressions, elliptic PDE), Figure 3 (GP, FITC and
random networks), Figure 8 (ARNS-HMC).

The logistic-regression rows, Figure 3 and Figure 8 live in ``_rns_table1``,
``_rns_fig3`` and ``_rns_fig8`` (moved from bench/); the elliptic PDE row is
here (:func:`pde_reproduce`).
"""
import time

import numpy as np
import scipy.optimize as so

from ._report import log, machine_line
from ._rows import efficiency_table
from . import Table

PAPER = "RNS-HMC paper (Zhang, Shahbaba & Zhao 2017)"

TABLES = [
    Table("rns-table1", PAPER + ", Table 1",
          "logistic regression: simulated (N = 100000, d = 50), Bank Marketing, a9a "
          "(60 projected features)", "._rns_table1",
          quick=dict(problems=["sim", "bank", "a9a-std"]),
          needs=("bank_marketing.npz", "a9a.libsvm.gz"),
          missing="The RMHMC / RNS-RMHMC rows on the logistic regressions are not run here: "
                  "one RMHMC iteration costs about 36x an exact-HMC iteration on the "
                  "simulated regression (bench/rmhmc_ratios.py), hours at the paper's lengths."),
    Table("rns-table1-pde", PAPER + ", Table 1 (elliptic PDE rows, section 5.2)",
          "elliptic PDE inverse problem: HMC and RNS-HMC, s = 1000, step 0.16, L = 10",
          ".rns_hmc", entry="pde_", quick=dict(n_warmup=600, n_draws=600),
          missing="RMHMC / RNS-RMHMC rows: not run. `fs.RMHMC` needs a metric with its "
                  "derivative (G, dG); `fs.models.EllipticPDE` supplies the Gauss-Newton "
                  "metric (`gauss_newton_hessian`) but not its derivative in theta."),
    Table("rns-fig3", PAPER + ", Figure 3", "GP, FITC and random-network surrogates of a 32-d "
          "Gaussian against the training size", "._rns_fig3"),
    Table("rns-fig8", PAPER + ", Figure 8", "ARNS-HMC against exact HMC on the simulated "
          "logistic regression: acceptance over iterations, REM at fixed wall time",
          "._rns_fig8", quick=dict(max_points=3000, update_every=25)),
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
    ap.add_argument("--seed", type=int, default=2017)


def pde_reproduce(args):
    """HMC and RNS-HMC on ``fs.models.EllipticPDE`` from the MAP, the papers'
    Table-1 columns; returns the Markdown report."""
    import fastsurrogate as fs
    model = fs.models.EllipticPDE(n_mesh=args.n_mesh, n_modes=args.n_modes, seed=args.seed)
    r = so.minimize(model.value_and_grad, np.zeros(model.dim), jac=True, method="L-BFGS-B",
                    options=dict(maxiter=2000))
    common = dict(n_draws=args.n_draws, n_warmup=args.n_warmup, chains=1, seed=args.seed,
                  init=r.x, step_size=args.step, n_steps=args.n_steps, random_n_steps=True,
                  adapt=False, metric="unit", progress=False)
    t0 = time.perf_counter()
    model.value_and_grad(r.x)
    runs = {}
    log(f"  PDE: HMC, {args.n_warmup} + {args.n_draws} ...")
    runs["HMC"] = fs.sample(model, method="hmc", **common)
    log(f"  PDE: RNS-HMC, s = {args.n_hidden} ...")
    runs[f"RNS-HMC (s = {args.n_hidden})"] = fs.sample(model, method="rns-hmc",
                                                       n_hidden=args.n_hidden, guard=None, **common)
    lines = [machine_line(),
             f"elliptic PDE: {args.n_mesh} x {args.n_mesh} mesh, {model.dim} parameters, "
             f"step {args.step}, L = {args.n_steps} (drawn from 1..L), identity metric, one chain "
             f"from the MAP, {args.n_warmup} exact-HMC burn-in (RNS-HMC: its exploration), "
             f"{args.n_draws} draws ({time.perf_counter() - t0:.0f} s)", "",
             efficiency_table(runs)]
    return "\n".join(lines)
