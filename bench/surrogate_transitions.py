"""Surrogate transitions with an exact correction against exact NUTS and HMC.

    python bench/surrogate_transitions.py [--problems a9a sim] [--draws N] [--warmup N] [--seed S]

a9a: a9a reduced to 60 features by a Gaussian random projection (raw, as
bench/paper_rns_table1.py "a9a"), logistic regression, prior sd 10, chains
start at the MAP.  Figures: min ESS (over parameters, fastsurrogate's
ess_bulk) per exact U evaluation (a value or a value + gradient: one pass
over X either way), counting every phase (warm-up / exploration, tuning,
sampling); means and sds of each sampler against exact NUTS's, as z-scores
with both samplers' MCSEs (max |z| over parameters).
sim: fs.datasets.simulate_logistic(100000, 50): min ESS per second of the
whole run, HMC (step 0.045, L = 6 random) and NUTS exact, RNS-HMC with and
without transitions.  One chain each; the machine's CPU model is printed.
"""
import argparse
import time

import numpy as np
import scipy.optimize as so

import fastsurrogate as fs
from fastsurrogate import diagnostics

from _benchutil import log, machine_line


def map_estimate(model):
    r = so.minimize(model.value_and_grad, np.zeros(model.dim), jac=True, method="L-BFGS-B",
                    options=dict(maxiter=5000, gtol=1e-8))
    return r.x


def exact_evals(res):
    """Passes over the data of a whole run."""
    ws = res.warmup_stats or {}
    if res.method in ("hmc", "nuts"):
        # each leapfrog step: U and its gradient; HMC: + its start
        return int(res.stats["n_steps"].sum() + ws.get("n_steps", np.zeros(1)).sum())
    info = res.info
    explore = int(ws["n_steps"].sum())        # exploration: exact leapfrog steps
    tune = sum(t.get("tuning_exact_evaluations", 0) for t in info.get("transitions", []))
    return explore + tune + int(res.stats["judge_evaluated"].sum())


def summary(res, wall):
    x = res.draws
    ess = diagnostics.ess_bulk(x)
    return dict(res=res, x=x, ess=float(np.min(ess)), wall=wall, evals=exact_evals(res),
                mean=x.mean(axis=(0, 1)), sd=x.std(axis=(0, 1)),
                mcse_m=diagnostics.mcse_mean(x), mcse_s=diagnostics.mcse_sd(x),
                acc=float(res.stats["accepted"].mean()))


def zmax(a, ref):
    zm = (a["mean"] - ref["mean"]) / np.sqrt(a["mcse_m"] ** 2 + ref["mcse_m"] ** 2)
    zs = (a["sd"] - ref["sd"]) / np.sqrt(a["mcse_s"] ** 2 + ref["mcse_s"] ** 2)
    return float(np.abs(zm).max()), float(np.abs(zs).max())


def timed(model, **kw):
    t0 = time.perf_counter()
    res = fs.sample(model, keep_warmup=True, progress=False, **kw)
    return summary(res, time.perf_counter() - t0)


def a9a(args):
    X, y = fs.datasets.load_a9a()
    X = fs.datasets.random_projection(X, 60, seed=2017)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    q0 = map_estimate(model)
    common = dict(n_draws=args.draws, n_warmup=args.warmup, chains=1, seed=args.seed, init=q0[None])
    rns = dict(n_hidden=2500, standardize="whiten", ridge=1e-4, input_scale=0.2, guard=None,
               n_steps=10)
    runs = {}
    log("a9a: NUTS")
    runs["NUTS (exact)"] = timed(model, method="nuts", **common)
    log("a9a: RNS-HMC")
    runs["RNS-HMC"] = timed(model, method="rns-hmc", training="states", **rns, **common)
    configs = [("RNS-HMC, transitions=4, inner=nuts", dict(transitions=4, inner="nuts")),
               ("RNS-HMC, transitions=auto, inner=nuts", dict(transitions="auto", inner="nuts")),
               ("RNS-HMC, transitions=auto, inner=hmc", dict(transitions="auto", inner="hmc")),
               ("RNS-HMC, Laplace base, transitions=auto, inner=nuts",
                dict(transitions="auto", inner="nuts", base="laplace")),
               ("RNS-HMC, Laplace base, transitions=auto, inner=nuts, explore=nuts",
                dict(transitions="auto", inner="nuts", base="laplace", explore="nuts"))]
    for label, extra in configs:
        if args.configs and not any(c in label for c in args.configs):
            continue
        log("a9a: " + label)
        runs[label] = timed(model, method="rns-hmc", training="states", **rns, **extra, **common)
    ref = runs["NUTS (exact)"]
    lines = [f"a9a-60d (raw projection), N = {X.shape[0]}, d = {model.dim}; "
             f"{args.warmup} warm-up + {args.draws} draws, 1 chain, seed {args.seed}",
             "| sampler | k | acceptance | min ESS | exact U evals | min ESS / 1000 evals "
             "| vs NUTS | max abs z (mean, sd) vs NUTS | s |",
             "|---|---|---|---|---|---|---|---|---|"]
    base = ref["ess"] / ref["evals"]
    for label, r in runs.items():
        k = ",".join(str(t["k"]) for t in r["res"].info.get("transitions", [])) or "-"
        zm, zs = zmax(r, ref) if r is not ref else (0.0, 0.0)
        per = r["ess"] / r["evals"]
        lines.append(f"| {label} | {k} | {r['acc']:.2f} | {r['ess']:.0f} | {r['evals']} | "
                     f"{1000 * per:.2f} | {per / base:.1f}x | {zm:.1f}, {zs:.1f} | {r['wall']:.1f} |")
    return "\n".join(lines)


def sim(args):
    X, y, _ = fs.datasets.simulate_logistic(100000, 50, seed=2017)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    q0 = map_estimate(model)
    common = dict(n_draws=args.draws, n_warmup=args.warmup, chains=1, seed=args.seed, init=q0[None])
    fixed = dict(step_size=0.045, n_steps=6, random_n_steps=True, adapt=False)
    configs = [("HMC (exact, step 0.045, L = 6)", dict(method="hmc", **fixed)),
               ("NUTS (exact)", dict(method="nuts")),
               ("RNS-HMC (s = 2000)", dict(method="rns-hmc", training="states",
                                           n_hidden=2000, guard=None, **fixed)),
               ("RNS-HMC, transitions=auto, inner=hmc",
                dict(method="rns-hmc", training="states",
                     n_hidden=2000, guard=None, transitions="auto", **fixed)),
               ("RNS-HMC, transitions=auto, inner=nuts",
                dict(method="rns-hmc", training="states",
                     n_hidden=2000, guard=None, transitions="auto",
                     inner="nuts", **fixed))]
    runs = {label: [] for label, _ in configs}
    for rep in range(args.repeats):               # interleaved repeats
        for label, kw in configs:
            log(f"sim round {rep}: {label}")
            runs[label].append(timed(model, **kw, **common))
    ref = runs["NUTS (exact)"]
    lines = [f"simulated logistic regression N = 100000, d = 50; {args.warmup} warm-up + "
             f"{args.draws} draws, 1 chain; medians of {args.repeats} interleaved repeats",
             "| sampler | k | acceptance | min ESS | whole-run s | min ESS/s | vs NUTS | vs HMC "
             "| max abs z (mean, sd) vs NUTS |", "|---|---|---|---|---|---|---|---|---|"]
    med = {lab: np.median([r["ess"] / r["wall"] for r in rs]) for lab, rs in runs.items()}
    hmc = med["HMC (exact, step 0.045, L = 6)"]
    for label, rs in runs.items():
        r = rs[0]
        k = ",".join(str(t["k"]) for t in r["res"].info.get("transitions", [])) or "-"
        zm, zs = zmax(r, ref[0]) if rs is not ref else (0.0, 0.0)
        lines.append(f"| {label} | {k} | {r['acc']:.2f} | {np.median([x['ess'] for x in rs]):.0f}"
                     f" | {np.median([x['wall'] for x in rs]):.1f} | {med[label]:.1f} | "
                     f"{med[label] / med['NUTS (exact)']:.1f}x | {med[label] / hmc:.1f}x | "
                     f"{zm:.1f}, {zs:.1f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", nargs="+", default=["a9a", "sim"])
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--configs", nargs="*", default=None,
                    help="a9a: run only the surrogate configurations whose label contains "
                         "one of these strings (NUTS and plain RNS-HMC always run)")
    args = ap.parse_args()
    print(machine_line())
    for p in args.problems:
        print(a9a(args) if p == "a9a" else sim(args))
        print()


if __name__ == "__main__":
    main()
