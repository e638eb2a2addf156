"""RNS-HMC paper, Figure 5 as a table: acceptance of RNS-HMC against the
number of hidden units s and the training size N (the number of exploration
states the network is fitted to).

    fastsurrogate reproduce rns-fig5 [--quick] [--train-sizes ...] [--hidden ...]

The paper plots the acceptance probability of RNS-HMC as s and N vary; its
exact problem sizes are not quoted in this project's texts, so the settings
here are ours, with the machinery of Figure 4 (``_rns_fig4.explore``): the
simulated logistic regression (``fs.datasets.simulate_logistic(n_obs, d)``,
prior N(0, 100 I)), n_obs = 20000, d = 20 (``--n-obs``, ``--dim``); exact
HMC (identity metric, L drawn from 1..6) with its step adapted to 0.8 in a
pilot, then ``--explore`` exploration iterations at that step.  The states
after the first 20 % are the training pool; for each N in ``--train-sizes``
the network is fitted to N of them spread evenly over the pool (every
(pool / N)-th state, so small N still covers the whole exploration rather
than its last stretch), for each s in ``--hidden`` (softplus random
networks, ``train_random_network`` with its default ridge / input-scale
choice, the same basis seed for every cell).  Each network drives
``fs.RNSHMC(surrogate=..., guard=None, trust=None)`` with exact HMC's step and L from the
last exploration state for ``--draws`` iterations with the exact Metropolis
test, so every cell's chain targets the posterior and only the acceptance
varies.  Cells: mean acceptance probability; the "exact HMC" column is exact
HMC's acceptance with the same step and L (it does not depend on N).

Duration: the full run (6 N x 7 s cells, 1000 iterations each) took 93 s on
the shared 2-vCPU AMD EPYC at load 4-10 (2 data-sum threads); ``--quick``
(3 N x 3 s cells, 300 iterations, 1500 exploration iterations) 10 s at load
~4.
"""
import time

import numpy as np

import fastsurrogate as fs
from ._report import log, machine_line, markdown_table
from ._rns_fig4 import explore


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--dim", type=int, default=20, help="d, the number of coefficients")
    ap.add_argument("--train-sizes", type=int, nargs="+",
                    default=[50, 100, 200, 500, 1000, 4000],
                    help="N, exploration states used for training")
    ap.add_argument("--hidden", type=int, nargs="+", default=[10, 20, 50, 100, 200, 500, 1000],
                    help="s, hidden units")
    ap.add_argument("--n-obs", type=int, default=20000)
    ap.add_argument("--explore", type=int, default=5000,
                    help="exploration iterations (the first 20 %% are not used for training)")
    ap.add_argument("--draws", type=int, default=1000, help="RNS-HMC iterations per cell")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2017)


def _check(args):
    if args.dim < 1 or args.n_obs < 2 or args.explore < 5 or args.draws < 1:
        raise ValueError("--dim, --n-obs, --explore and --draws must be positive "
                         "(--explore >= 5)")
    if min(args.train_sizes) < 2 or min(args.hidden) < 1:
        raise ValueError("--train-sizes must be >= 2 and --hidden >= 1")


def subset(n_pool, n):
    """Indices of ``n`` states spread evenly over a pool of ``n_pool`` (all of
    them when n >= n_pool), in chain order."""
    if n >= n_pool:
        return np.arange(n_pool)
    return np.unique(np.round(np.linspace(0, n_pool - 1, n)).astype(np.intp))


def reproduce(args):
    """Run the sweep; return the Markdown report."""
    _check(args)
    t_start = time.perf_counter()
    d = args.dim
    model, hmc_kw, Q, U, q0, hmc = explore(d, args.n_obs, args.explore, args.draws, args.seed,
                                           args.threads)
    hmc_acc = float(np.mean(hmc.acceptance_rate))
    rows = []
    for n in sorted(args.train_sizes):
        idx = subset(len(Q), n)
        cells = [str(len(idx)), f"{hmc_acc:.3f}"]
        for s in args.hidden:
            net = fs.surrogates.train_random_network(Q[idx], U[idx], n_hidden=s,
                                                     activation="softplus", seed=args.seed + 3)
            res = fs.RNSHMC(model, surrogate=net, guard=None, trust=None, **hmc_kw).sample(
                args.draws, 0, chains=1, seed=args.seed + 2, init=q0, progress=False)
            acc = float(np.mean(res.acceptance_rate))
            cells.append(f"{acc:.3f}")
            log(f"    N = {len(idx)}, s = {s}: acceptance {acc:.3f}")
        rows.append(cells)
    head = ["N", "exact HMC"] + [f"s = {s}" for s in args.hidden]
    lines = [machine_line(),
             f"simulated logistic regression, n_obs = {args.n_obs}, d = {d}, prior N(0, 100 I); "
             f"L from 1..6, identity metric, step {hmc_kw['step_size']:.4f} (adapted to 0.8, then "
             f"fixed); {args.explore} exploration iterations, a pool of {len(Q)} training "
             f"states (the last 80 %), N of them spread evenly over the pool; {args.draws} "
             f"RNS-HMC iterations per cell; {time.perf_counter() - t_start:.0f} s", "",
             "Mean acceptance probability by training size N (rows) and hidden units s "
             "(columns); exact Metropolis test, so every chain targets the posterior:", "",
             markdown_table(head, rows)]
    return "\n".join(lines)
