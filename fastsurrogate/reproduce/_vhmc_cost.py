"""After training, VHMC touches no data: its cost per iteration must not depend
on the number of observations N.  Logistic regression at N = 10000 and
N = 100000, same dimension, same network size.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python bench/paper_vhmc_scaling.py [--dim 20] [--out FILE]

For each N: ``fs.datasets.simulate_logistic(N, dim)``,
``fs.models.LogisticRegression(prior_sd=10, n_threads=1)``, then
``fs.VHMC(model, laplace_tail=False, n_train=t0, n_steps=10)`` (default s for the dimension) with
``--draws`` draws after t0; its sampling-phase seconds per iteration is the
first figure.  Then, to average out the load of a shared machine, the
post-t0 loop is re-run in ``--repeats`` interleaved rounds (N = 10000, then
N = 100000, then again ...): a ``Chain`` with the frozen surrogate as drive
and judge (exactly what the sampler runs after t0), the chain's step size and
metric, ``--block`` iterations per round; the median seconds per iteration
per N is the second figure.  Exact HMC's cost per iteration at both N, with
the same leapfrog settings, is shown for reference.

Bar (issue 4): the two N within 20 % of each other per iteration.
"""
import argparse
import os
import platform
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.core._hmc import Chain, new_trace
from ._report import cache_dir, cpu_model, log, machine_line  # noqa: F401


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    ap.add_argument("--dim", type=int, default=20)
    ap.add_argument("--train", type=int, default=1500)
    ap.add_argument("--draws", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--block", type=int, default=20000)


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    sizes = (10000, 100000)
    t_start = time.perf_counter()
    out = {}
    for n in sizes:
        X, y, _ = fs.datasets.simulate_logistic(n, args.dim, seed=3)
        model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1)
        res = fs.VHMC(model, laplace_tail=False, n_train=args.train, n_steps=10).sample(
            args.draws, args.train, chains=1, seed=5, progress=False)
        assert res.info["exact_evaluations"]["after_t0"] == [0]
        hmc = fs.HMC(model, n_steps=10, metric=res.info["laplace"].cov,
                     step_size=float(res.step_size[0]), adapt=False).sample(
            500, 0, chains=1, seed=6, init=res.draws[0, -1], progress=False)
        out[n] = dict(res=res, per=res.timings["sample"] / res.n_draws,
                      hmc=hmc.timings["sample"] / hmc.n_draws, rounds=[])
    for r in range(args.repeats):
        for n in sizes:
            res = out[n]["res"]
            chain = Chain(res.surrogate, res.surrogate, res.draws[0, -1],
                          np.random.default_rng(100 + r), step_size=float(res.step_size[0]),
                          n_steps=10, random_n_steps=True, inv_metric=res.inv_metric[0])
            trace = new_trace(args.block, res.dim)
            t0 = time.perf_counter()
            chain.run(trace, 0, args.block)
            out[n]["rounds"].append((time.perf_counter() - t0) / args.block)
    a, b = (np.median(out[n]["rounds"]) for n in sizes)
    ratio = b / a
    s = out[sizes[0]]["res"].info["n_hidden"]
    L = ["# VHMC cost per iteration after training: N = 10000 vs N = 100000", "",
         f"- machine: {os.cpu_count()} CPUs (shared; timings approximate), python "
         f"{platform.python_version()}, OPENBLAS_NUM_THREADS="
         f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; load average at the end "
         f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}",
         f"- simulate_logistic(N, {args.dim}), LogisticRegression(prior_sd=10, n_threads=1); "
         f"VHMC s = {s}, t0 = {args.train}, n_steps 10 (uniform 1..10); {args.draws} draws; "
         f"{args.repeats} interleaved rounds of {args.block} post-t0 iterations; elapsed "
         f"{time.perf_counter() - t_start:.0f} s",
         "",
         "| N | VHMC sampling phase, ms/iter | post-t0 loop, median of rounds, ms/iter | "
         "rounds min-max | acceptance | exact HMC ms/iter (reference) |",
         "|---:|---:|---:|---|---:|---:|"]
    for n in sizes:
        o = out[n]
        L.append(f"| {n} | {o['per'] * 1e3:.4f} | {np.median(o['rounds']) * 1e3:.4f} | "
                 f"{min(o['rounds']) * 1e3:.4f}-{max(o['rounds']) * 1e3:.4f} | "
                 f"{float(o['res'].acceptance_rate.mean()):.3f} | {o['hmc'] * 1e3:.3f} |")
    L += ["",
          f"Ratio (N = 100000 over N = 10000), post-t0 loop medians: {ratio:.3f}; sampling "
          f"phases: {out[sizes[1]]['per'] / out[sizes[0]]['per']:.3f}; exact HMC: "
          f"{out[sizes[1]]['hmc'] / out[sizes[0]]['hmc']:.2f}.",
          f"Bar (within 20 %): {'MET' if abs(ratio - 1) <= 0.2 else 'NOT MET'}."]
    report = "\n".join(L) + "\n"
    return report
