"""The exact likelihood on a Dask cluster: cost per exact call, and RNS-HMC vs exact HMC.

    python bench/dask_cluster.py [--quick] [--n-draws 1000] [--n-warmup 1000] [--out FILE]

A LocalCluster (processes, loopback, 2 workers x 1 thread) holds X and y of
the RNS-HMC paper's simulated logistic regression (N = 100000, d = 50) in
two row chunks, one per worker.  Reported, in one run:

1. seconds per exact call (U and gradient; U alone) of the Dask-backed GLM
   against the same model in memory: interleaved repeats, medians, ratios;
2. exact HMC and RNS-HMC (the paper's settings: step 0.045, L = 6 random,
   s = 2000, no adaptation, started at the MAP, one chain), both with the
   Dask-backed model as the exact potential: min ESS per second of the
   sampling phase (the paper's measure) and over the whole run
   (exploration and training included), and RNS-HMC's ratio to HMC.
"""
import argparse
import time

import numpy as np
import scipy.optimize as so

import fastsurrogate as fs
from _benchutil import emit, log, machine_line


def per_call(fn, beta, repeats):
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(beta)
        out.append(time.perf_counter() - t0)
    return out


def call_costs(mem, dist, repeats, rounds):
    """Interleaved rounds of `repeats` calls each; medians of the per-call times."""
    rng = np.random.default_rng(0)
    times = {k: [] for k in ("mem_vg", "dask_vg", "mem_v", "dask_v")}
    for _ in range(rounds):
        beta = 0.05 * rng.standard_normal(mem.dim)
        times["mem_vg"] += per_call(mem.value_and_grad, beta, repeats)
        times["dask_vg"] += per_call(dist.value_and_grad, beta, repeats)
        times["mem_v"] += per_call(mem.value, beta, repeats)
        times["dask_v"] += per_call(dist.value, beta, repeats)
    return {k: float(np.median(v)) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N = 20000 and 300 + 300 iterations")
    ap.add_argument("--n-draws", type=int, default=1000)
    ap.add_argument("--n-warmup", type=int, default=1000)
    ap.add_argument("--hmc-warmup", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import dask.array as da
    from distributed import Client, LocalCluster

    n, d = (20000, 50) if args.quick else (100000, 50)
    n_draws, n_warmup = (300, 300) if args.quick else (args.n_draws, args.n_warmup)
    X, y, _ = fs.datasets.simulate_logistic(n, d, seed=2017)
    mem = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    lines = [f"## The exact likelihood on a Dask cluster (bench/dask_cluster.py)", "",
             machine_line(),
             f"cluster: LocalCluster(processes=True, n_workers=2, threads_per_worker=1, "
             f"host=127.0.0.1); X ({n} x {d}) in 2 row chunks, one per worker", ""]
    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster):
        dist = fs.models.LogisticRegression(da.from_array(X, chunks=(n // 2, d)),
                                            da.from_array(y, chunks=n // 2), prior_sd=10.0)
        log("cost per exact call")
        c = call_costs(mem, dist, repeats=20, rounds=5)
        lines += ["| exact call | in memory (s) | on the cluster (s) | cluster / memory |",
                  "|---|---|---|---|",
                  f"| U and gradient | {c['mem_vg']:.2e} | {c['dask_vg']:.2e} | "
                  f"{c['dask_vg'] / c['mem_vg']:.1f} |",
                  f"| U alone | {c['mem_v']:.2e} | {c['dask_v']:.2e} | "
                  f"{c['dask_v'] / c['mem_v']:.1f} |", "",
                  "(medians of 100 calls each, interleaved in 5 rounds)", ""]

        q0 = so.minimize(mem.value_and_grad, np.zeros(d), jac=True, method="L-BFGS-B",
                         options=dict(maxiter=5000, gtol=1e-8)).x
        common = dict(n_draws=n_draws, n_warmup=n_warmup, chains=1, seed=2017, init=q0,
                      step_size=0.045, n_steps=6, random_n_steps=True, adapt=False,
                      progress=False)
        out = {}
        log("exact HMC on the cluster")
        t0 = time.perf_counter()
        # started at the MAP without adaptation, HMC needs no long warm-up: a
        # shorter one only shortens HMC's whole-run time (in its favour)
        out["HMC"] = (fs.sample(dist, method="hmc", **dict(common, n_warmup=args.hmc_warmup)),
                      time.perf_counter() - t0)
        log("RNS-HMC on the cluster")
        t0 = time.perf_counter()
        out["RNS-HMC"] = (fs.sample(dist, method="rns-hmc", n_hidden=2000, training="states", guard=None,
                                    **common), time.perf_counter() - t0)
    lines += [f"N = {n}, d = {d}, step 0.045, L = 6 (random), s = 2000, {args.hmc_warmup} "
              f"warm-up (HMC) / {n_warmup} exploration (RNS-HMC) + {n_draws} kept iterations, 1 chain, "
              f"both with the Dask-backed model as the exact potential", "",
              "| method | AP | min ESS | s/iter (sampling) | min ESS/s (sampling) | "
              "speed-up | whole run s | min ESS/s (whole run) | speed-up (whole run) |",
              "|---|---|---|---|---|---|---|---|---|"]
    base = whole_base = None
    for m, (res, wall) in out.items():
        t = res.summary().overall
        whole = t["ess_min"] / wall
        if base is None:
            base, whole_base = t["min_ess_per_sampling_second"], whole
        lines.append(f"| {m} | {t['acceptance']:.2f} | {t['ess_min']:.0f} | "
                     f"{t['seconds_per_iteration']:.2e} | {t['min_ess_per_sampling_second']:.2f} | "
                     f"{t['min_ess_per_sampling_second'] / base:.1f} | {wall:.0f} | {whole:.3f} | "
                     f"{whole / whole_base:.1f} |")
    rns = out["RNS-HMC"][0]
    lines += ["", f"RNS-HMC exact evaluations in sampling: {rns.info['exact_evaluations']} "
              f"(U alone, one per iteration); training {rns.timings.get('train', 0.0):.1f} s"]
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
