"""RNS-HMC paper, Figure 4 as a table: acceptance of RNS-HMC against the
number of hidden units s, for several dimensions d.

    fastsurrogate reproduce rns-fig4 [--quick] [--dims ...] [--multiples ...]

The paper plots the acceptance probability of RNS-HMC as s and d vary; its
exact problem sizes are not quoted in this project's texts, so the settings
here are ours: the paper's simulated logistic regression recipe
(``fs.datasets.simulate_logistic(N, d)``, prior N(0, 100 I)) with N = 20000
(``--n-obs``) for d in ``--dims``.  For each d: exact HMC (identity metric,
L drawn from 1..6) with its step size adapted to 0.8 in a warm-up and then
fixed; ``--explore`` exploration iterations at that step, whose states
after the first 20 % (positions and exact U) train softplus random networks
(``train_random_network``, default ridge / input scale choice) with
s = m d hidden units for m in ``--multiples``; each network drives
``fs.RNSHMC(surrogate=..., guard=None, trust=None)`` with the same step and L from the
last exploration state, ``--draws`` iterations with the exact Metropolis
test.  Cells: mean acceptance probability; exact HMC's own acceptance with
the same step and L is the reference column.
"""
import time

import numpy as np

import fastsurrogate as fs
from ._report import log, machine_line, markdown_table


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--dims", type=int, nargs="+", default=[10, 20, 30, 50])
    ap.add_argument("--multiples", type=float, nargs="+", default=[1, 2, 5, 10, 20, 40],
                    help="s / d values")
    ap.add_argument("--n-obs", type=int, default=20000)
    ap.add_argument("--explore", type=int, default=2000, help="exploration iterations")
    ap.add_argument("--draws", type=int, default=1000, help="RNS-HMC iterations per cell")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2017)


def explore(d, n_obs, n_explore, n_draws, seed, threads):
    """The shared set-up of Figures 4 and 5 (RNS-HMC paper): the simulated
    logistic regression (N = ``n_obs``, d), exact HMC's step adapted to 0.8
    in a pilot, ``n_explore`` exploration iterations at that step and
    ``n_draws`` exact-HMC iterations from the last state (the reference
    acceptance).  Returns (model, hmc_kw, Q, U, q0, hmc): Q (m, d) and U (m,)
    the exploration states after the first 20 % and their exact U, q0 the
    last state, hmc the reference run."""
    X, y, _ = fs.datasets.simulate_logistic(n_obs, d, seed=seed)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=threads)
    log(f"  d = {d}: step-size pilot and {n_explore} exploration iterations ...")
    pilot = fs.HMC(model, n_steps=6, metric="unit", adapt=True, target_accept=0.8).sample(
        200, 500, chains=1, seed=seed, progress=False)
    eps = float(pilot.step_size[0])
    hmc_kw = dict(step_size=eps, n_steps=6, metric="unit", adapt=False)
    ex = fs.HMC(model, **hmc_kw).sample(n_explore, 0, chains=1, seed=seed + 1,
                                        init=pilot.draws[0, -1], progress=False)
    k0 = n_explore // 5
    Q, U = ex.draws[0, k0:], ex.stats["potential"][0, k0:]
    q0 = ex.draws[0, -1]
    hmc = fs.HMC(model, **hmc_kw).sample(n_draws, 0, chains=1, seed=seed + 2,
                                         init=q0, progress=False)
    return model, hmc_kw, Q, U, q0, hmc


def reproduce(args):
    """Run the sweep; return the Markdown report."""
    t_start = time.perf_counter()
    rows = []
    notes = []
    for d in args.dims:
        model, hmc_kw, Q, U, q0, hmc = explore(d, args.n_obs, args.explore, args.draws,
                                               args.seed, args.threads)
        eps = hmc_kw["step_size"]
        cells = [str(d), f"{eps:.4f}", f"{float(np.mean(hmc.acceptance_rate)):.3f}"]
        for m in args.multiples:
            s = max(1, int(round(m * d)))
            net = fs.surrogates.train_random_network(Q, U, n_hidden=s, activation="softplus",
                                                     seed=args.seed + 3)
            res = fs.RNSHMC(model, surrogate=net, guard=None, trust=None, **hmc_kw).sample(
                args.draws, 0, chains=1, seed=args.seed + 2, init=q0, progress=False)
            acc = float(np.mean(res.acceptance_rate))
            cells.append(f"{acc:.3f}")
            log(f"    s = {s}: acceptance {acc:.3f}")
        rows.append(cells)
        notes.append(f"d = {d}: {len(Q)} training states")
    head = ["d", "step", "exact HMC"] + [f"s = {m:g} d" for m in args.multiples]
    lines = [machine_line(),
             f"simulated logistic regression, N = {args.n_obs}, prior N(0, 100 I); L from 1..6, "
             f"identity metric, step adapted to 0.8 then fixed; {args.explore} exploration "
             f"iterations (training on the last 80 %), {args.draws} RNS-HMC iterations per cell; "
             f"{'; '.join(notes)}; {time.perf_counter() - t_start:.0f} s", "",
             "Mean acceptance probability (exact Metropolis test, so every chain targets the "
             "posterior; only the acceptance varies with the surrogate):", "",
             markdown_table(head, rows)]
    return "\n".join(lines)
