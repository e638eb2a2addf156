"""NUTS against exact HMC, as ratios measured in one run.

    python bench/nuts_ratios.py [--repeats 5] [--n-draws 500]

On the RNS-HMC paper's simulated logistic regression (N = 100000, d = 50,
prior sd 10, one thread):

1. Cost per gradient evaluation: seconds per iteration over the mean number
   of leapfrog steps, for NUTS and for HMC (L = 6 fixed) at the same step
   size (0.045) and unit metric without adaptation, runs interleaved,
   medians of the repeats.  Bar: NUTS / HMC <= 1.2.
2. Minimum bulk ESS per second of NUTS and of HMC, each with its default
   settings (Stan-style warm-up), 2 chains; seconds of the sampling phase
   and of the whole run.
"""
import argparse
import os
import sys
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.core._hmc import Chain, new_trace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import machine_line  # noqa: E402


def logistic():
    X, y, beta = fs.datasets.simulate_logistic(n=100000, d=50, seed=1)
    return fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1), beta


def cost_per_gradient(model, q0, step_size=0.045, repeats=5, n_hmc=30, n_nuts=10):
    """Median seconds per leapfrog step of HMC (L = 6) and NUTS, interleaved."""
    hmc = Chain(model, model, q0, np.random.default_rng(1), step_size=step_size, n_steps=6)
    nuts = Chain(model, model, q0, np.random.default_rng(2), step_size=step_size,
                 algorithm="nuts")
    t_hmc, t_nuts, depth = [], [], []
    for c, n in ((hmc, n_hmc), (nuts, n_nuts)):       # move both into the typical set
        c.run(new_trace(n, q0.size), 0, n)
    for _ in range(repeats):
        for c, n, out in ((hmc, n_hmc, t_hmc), (nuts, n_nuts, t_nuts)):
            tr = new_trace(n, q0.size)
            t0 = time.perf_counter()
            c.run(tr, 0, n)
            out.append((time.perf_counter() - t0) / tr["n_steps"].sum())
            if c is nuts:
                depth.append(tr["tree_depth"].mean())
    return float(np.median(t_hmc)), float(np.median(t_nuts)), float(np.mean(depth))


def ess_per_second(model, method, n_draws, n_warmup, chains=2, seed=3):
    res = fs.sample(model, method, n_draws=n_draws, n_warmup=n_warmup, chains=chains,
                    seed=seed, progress=False)
    ess = float(np.min(diagnostics.ess_bulk(res.draws)))
    t_sample = res.timings["sample"]
    t_total = t_sample + res.timings.get("warmup", 0.0)
    return dict(ess=ess, t_sample=t_sample, t_total=t_total,
                per_s=ess / t_sample, per_s_total=ess / t_total,
                steps=float(res.stats["n_steps"].mean()), step_size=float(np.mean(res.step_size)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n-draws", type=int, default=500)
    ap.add_argument("--n-warmup", type=int, default=500)
    args = ap.parse_args()
    print(machine_line())
    model, beta = logistic()
    h, n, depth = cost_per_gradient(model, beta, repeats=args.repeats)
    print(f"cost per gradient, logistic N=100000 d=50, step 0.045, unit metric: "
          f"HMC (L=6) {h * 1e3:.3f} ms, NUTS {n * 1e3:.3f} ms (mean tree depth {depth:.2f}) "
          f"-> NUTS/HMC {n / h:.3f} (bar <= 1.2)")
    rows = {m: ess_per_second(model, m, args.n_draws, args.n_warmup) for m in ("hmc", "nuts")}
    for m, r in rows.items():
        print(f"{m:>4} defaults, 2 chains x {args.n_warmup}+{args.n_draws}: min bulk ESS "
              f"{r['ess']:.0f}, {r['steps']:.1f} steps/iter at step {r['step_size']:.4f}, "
              f"sampling {r['t_sample']:.1f} s -> {r['per_s']:.1f} ESS/s "
              f"({r['per_s_total']:.1f} ESS/s counting warm-up)")
    print(f"min ESS/s NUTS / HMC: {rows['nuts']['per_s'] / rows['hmc']['per_s']:.2f} "
          f"(sampling), {rows['nuts']['per_s_total'] / rows['hmc']['per_s_total']:.2f} "
          f"(whole run)")


if __name__ == "__main__":
    main()
