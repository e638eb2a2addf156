"""NUTS's warm-up adaptations side by side, every warm-up gradient counted.

    python bench/adaptation.py [--problems pdb sim bank a9a] [--variants stan fisher fisher-lr nutpie nutpie-lr]
                               [--chains 4] [--n-warmup 1000] [--n-draws 1000]
                               [--seed 1] [--out FILE]

For each posterior, exact NUTS (``surrogate=False``) with each adaptation,
4 chains x (warm-up + 1000 draws), and nutpie's own sampler on the same
potential (``nutpie.compiled_pyfunc.from_pyfunc`` around our U and
gradient, so the two samplers see the same density):

- stan: Stan's windows (the variance of each window's draws);
- fisher: the metric from draws and gradients, nutpie's schedule, in C
  (``adaptation="fisher"``);
- fisher-lr: the same with the low-rank-plus-diagonal metric
  (``metric="low-rank"``);
- nutpie, nutpie-lr: nutpie's diagonal and low-rank adaptations with the
  same warm-up length.

Reported: warm-up and total gradients (leapfrog steps; nutpie's
``n_steps``), min bulk ESS over parameters (fastsurrogate.diagnostics, all
chains, post-warm-up draws), max R-hat, min ESS per 1000 gradients over the
whole run and over the sampling phase alone, and the whole-run ratio to
``stan``.  The last lines give the medians over posteriors.  Problems: pdb
(the five posteriordb references), sim (simulate_logistic(n=100000, d=50,
seed=1)), bank (Bank Marketing), a9a (a9a, 60-d random projection); the
logistic ones with prior N(0, 100 I).  Wall clock is not reported: nutpie
calls Python per gradient here, so its seconds say nothing.
"""
import argparse
import os
import sys

import numpy as np

import fastsurrogate as fs
from fastsurrogate import diagnostics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import machine_line  # noqa: E402
from surrogate_nuts import logistic  # noqa: E402


def problems(names):
    for name in names:
        if name == "pdb":
            from fastsurrogate.models import posteriordb as pdb
            for post, cls in pdb.MODELS.items():
                yield post, pdb.as_potential(cls.from_posteriordb())
        elif name in ("sim", "bank", "a9a"):
            yield name, logistic(name)
        else:
            raise SystemExit(f"unknown problem {name!r}: pdb sim bank a9a")


def ours(model, variant, args):
    adaptation, metric = {"stan": ("stan", "diag"), "fisher": ("fisher", "diag"),
                          "fisher-lr": ("fisher", "low-rank")}[variant]
    res = fs.NUTS(model, surrogate=False, adaptation=adaptation, metric=metric).sample(
        args.n_draws, args.n_warmup, chains=args.chains, seed=args.seed, progress=False)
    return (res.draws, int(np.sum(res.warmup_stats["n_steps"])),
            int(np.sum(res.stats["n_steps"])))


def nutpie_run(model, args, low_rank):
    import nutpie
    from nutpie.compiled_pyfunc import from_pyfunc
    d = model.dim

    def make_logp():
        def logp(x):
            u, g = model.value_and_grad(np.asarray(x, dtype=np.float64))
            return -u, -g
        return logp

    def make_expand(*_):
        def expand(x, **_kw):
            return {"x": np.asarray(x, dtype=np.float64)}
        return expand

    rng = np.random.default_rng(args.seed)
    compiled = from_pyfunc(d, make_logp, make_expand, [np.dtype("float64")], [(d,)], ["x"],
                           make_initial_point_fn=lambda seed: rng.uniform(-2, 2, d))
    tr = nutpie.sample(compiled, draws=args.n_draws, tune=args.n_warmup, chains=args.chains,
                       cores=1, seed=args.seed, progress_bar=False, save_warmup=True,
                       low_rank_modified_mass_matrix=low_rank)
    draws = np.asarray(tr.posterior["x"])
    warm = int(np.asarray(tr.warmup_sample_stats["n_steps"]).sum())
    samp = int(np.asarray(tr.sample_stats["n_steps"]).sum())
    return draws, warm, samp


def run(model, variant, args):
    if variant in ("stan", "fisher", "fisher-lr"):
        return ours(model, variant, args)
    return nutpie_run(model, args, low_rank=variant == "nutpie-lr")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=["pdb", "sim", "bank", "a9a"])
    ap.add_argument("--variants", nargs="+",
                    default=["stan", "fisher", "fisher-lr", "nutpie", "nutpie-lr"])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--n-warmup", type=int, default=1000)
    ap.add_argument("--n-draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = open(args.out, "a") if args.out else None

    def emit(line):
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    emit(machine_line())
    emit(f"exact NUTS, {args.chains} chains x ({args.n_warmup} + {args.n_draws}), "
         f"seed {args.seed}; gradients counted over the whole run")
    emit("| posterior | adaptation | warm-up grads | total grads | min ESS | max R-hat | "
         "min ESS / 1000 grads | sampling only | x stan |")
    emit("|---|---|---|---|---|---|---|---|---|")
    ratios = {v: [] for v in args.variants}
    warm_ratios = {v: [] for v in args.variants}
    for name, model in problems(args.problems):
        rows = {}
        for v in args.variants:
            draws, warm, samp = run(model, v, args)
            ess = float(np.min(diagnostics.ess_bulk(draws)))
            rows[v] = {"warm": warm, "total": warm + samp, "ess": ess,
                       "rhat": float(np.max(diagnostics.rhat(draws))),
                       "per": 1000 * ess / (warm + samp), "samp": 1000 * ess / samp}
        base = rows.get("stan")
        for v, r in rows.items():
            x = r["per"] / base["per"] if base else float("nan")
            ratios[v].append(x)
            if base:
                warm_ratios[v].append(r["warm"] / base["warm"])
            emit(f"| {name} | {v} | {r['warm']} | {r['total']} | {r['ess']:.0f} | "
                 f"{r['rhat']:.3f} | {r['per']:.2f} | {r['samp']:.2f} | {x:.2f} |")
    for v in args.variants:
        emit(f"median over posteriors, {v}: whole-run min ESS per gradient "
             f"{np.median(ratios[v]):.2f}x stan's; warm-up gradients "
             f"{np.median(warm_ratios[v]) if warm_ratios[v] else float('nan'):.2f}x stan's")
    if out:
        out.close()


if __name__ == "__main__":
    main()
