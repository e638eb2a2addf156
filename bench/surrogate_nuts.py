"""NUTS with its default surrogate against exact NUTS, over the WHOLE run.

    python bench/surrogate_nuts.py [--problems bank a9a sim pde dask pdb]
                                   [--chains 4] [--n-warmup 1000] [--n-draws 1000]
                                   [--seed 1] [--repeats R] [--out FILE]

Each problem runs exact NUTS (``surrogate=False``) and NUTS with its
defaults (``surrogate="auto"``: the surrogate where the cost check says so),
4 chains x (1000 warm-up + 1000 draws), one after the other in the same
process, and reports for each:

- whole-run seconds: the wall clock around ``fs.sample`` (the cost check,
  Laplace start, recording, fits and refits, warm-up and sampling), and
  the seconds of the fits within it (the chains wait for them);
- exact calls: every U-and-gradient and every U-only call of the model.
  For exact NUTS, the leapfrog steps of warm-up and sampling (one call
  each; the step-size searches' few calls are not counted); for the
  surrogate run ``info["surrogate"]["exact_calls"]`` (Laplace optimiser and
  finite-difference Hessian, the recorded exact blocks, every correction);
- min bulk ESS over parameters (fastsurrogate.diagnostics.ess_bulk, all
  chains), and max R-hat;
- the ratios of min ESS per exact call and min ESS per second, surrogate
  run over exact NUTS.

``--with-dense`` adds exact NUTS with a dense metric (Stan's windows,
``metric="dense"``): the surrogate run's metric is dense (the Laplace
covariance), so this row says how much of its gain is the metric's.
``--repeats R`` runs the pair R times, alternating (exact, surrogate,
exact, ...), with the same seed: the draws and counts repeat exactly, and
the seconds reported are the medians (a shared machine's load moves single
timings of these short runs by tens of percent).

Problems: bank (Bank Marketing, 24 features + intercept), a9a (60-d random
projection of a9a, raw inputs), sim (fs.datasets.simulate_logistic(n=100000,
d=50, seed=1)), pde (fs.models.EllipticPDE() at its default mesh), dask (sim
with X and y as Dask arrays on a 2-worker LocalCluster), pdb (the five
posteriordb references).  Logistic models: prior N(0, 100 I), one BLAS-free
thread per chain (the chains run in threads).  The CPU and load are printed
first; every ratio is within one run.
"""
import argparse
import os
import sys
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate import diagnostics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import machine_line  # noqa: E402


def logistic(name):
    if name == "sim":
        X, y, _ = fs.datasets.simulate_logistic(n=100000, d=50, seed=1)
    elif name == "bank":
        X, y = fs.datasets.load_bank_marketing()
    else:
        X, y = fs.datasets.load_a9a()
        X = fs.datasets.random_projection(X, 60, seed=2017)
    return fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1)


def problems(names):
    for name in names:
        if name == "pdb":
            from fastsurrogate.models import posteriordb as pdb
            for post, cls in pdb.MODELS.items():
                yield post, pdb.as_potential(cls.from_posteriordb()), None
        elif name == "pde":
            yield name, fs.models.EllipticPDE(), None
        elif name == "dask":
            from dask.distributed import Client, LocalCluster
            import dask.array as da
            cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
            X, y, _ = fs.datasets.simulate_logistic(n=100000, d=50, seed=1)
            Xd = da.from_array(X, chunks=(50000, X.shape[1]))
            yd = da.from_array(y, chunks=50000)
            yield name, fs.models.LogisticRegression(Xd, yd, prior_sd=10.0), (client, cluster)
        elif name in ("bank", "a9a", "sim"):
            yield name, logistic(name), None
        else:
            raise SystemExit(f"unknown problem {name!r}: bank a9a sim pde dask pdb")


def exact_calls(res):
    info = res.info.get("surrogate", {})
    if info.get("used"):
        return int(info["exact_calls"])
    n = int(np.sum(res.stats["n_steps"]))
    if res.warmup_stats is not None:
        n += int(np.sum(res.warmup_stats["n_steps"]))
    return n


def one(model, surrogate, args, metric=None):
    t0 = time.perf_counter()
    res = fs.NUTS(model, surrogate=surrogate, metric=metric).sample(
        args.n_draws, args.n_warmup, chains=args.chains, seed=args.seed, progress=False)
    secs = time.perf_counter() - t0
    ess = float(np.min(diagnostics.ess_bulk(res.draws)))
    fit = res.timings.get("fit", 0.0) if isinstance(res.timings, dict) else 0.0
    return {"seconds": secs, "fit": float(fit), "calls": exact_calls(res), "ess": ess,
            "rhat": float(np.max(diagnostics.rhat(res.draws))),
            "accept": float(np.mean(res.stats["accept_prob"])),
            "share": res.info.get("surrogate", {}).get("surrogate_share", 0.0),
            "decided": res.info.get("surrogate", {}).get("decided_by", "")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=["bank", "a9a", "sim", "pde", "pdb"])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--n-warmup", type=int, default=1000)
    ap.add_argument("--n-draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--with-dense", action="store_true",
                    help="also exact NUTS with Stan's dense metric adaptation")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = open(args.out, "a") if args.out else None

    def emit(line):
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    emit(machine_line())
    emit(f"NUTS with defaults against exact NUTS: {args.chains} chains x ({args.n_warmup} + "
         f"{args.n_draws}), seed {args.seed}; whole run")
    emit("| problem | sampler | whole-run s | fit s | exact calls | min ESS | max R-hat | accept | "
         "surrogate share | min ESS / exact call (x NUTS) | min ESS / s (x NUTS) |")
    emit("|---|---|---|---|---|---|---|---|---|---|---|")
    configs = [("exact NUTS", False, None), ("NUTS (defaults)", "auto", None)]
    if args.with_dense:
        configs.insert(1, ("exact NUTS, dense metric", False, "dense"))
    for name, model, extra in problems(args.problems):
        try:
            rows = {}
            for rep in range(args.repeats):
                for label, sur, metric in configs:
                    r = one(model, sur, args, metric)
                    rows.setdefault(label, []).append(r)
            for label in rows:
                runs = rows[label]
                r = dict(runs[0])
                r["seconds"] = float(np.median([x["seconds"] for x in runs]))
                rows[label] = r
            for label, r in rows.items():
                base = rows["exact NUTS"]
                per_call = (r["ess"] / r["calls"]) / (base["ess"] / base["calls"])
                per_sec = (r["ess"] / r["seconds"]) / (base["ess"] / base["seconds"])
                emit(f"| {name} | {label}{' [' + r['decided'] + ']' if r['decided'] else ''} "
                     f"| {r['seconds']:.2f} | {r['fit']:.2f} | {r['calls']} | {r['ess']:.0f} "
                     f"| {r['rhat']:.3f} "
                     f"| {r['accept']:.2f} | {r['share']:.2f} | {per_call:.1f} | {per_sec:.2f} |")
        finally:
            if extra is not None:
                extra[0].close()
                extra[1].close()
    if out:
        out.close()


if __name__ == "__main__":
    main()
