"""No-regret defaults: each exact surrogate sampler with DEFAULT settings
against exact NUTS with default settings, min bulk ESS per second of the
whole run (wall clock around ``fs.sample``: exploration / warm-up, training,
trial and sampling all included).

    python bench/no_regret.py [--problems sim bank a9a a9a-std pdb] [--n-warmup 500]
                              [--n-draws 500] [--replicates R] [--paper] [--rows P:M ...]
                              [--out FILE]

The surrogate samplers run with their defaults, which include the no-regret
rule (``no_regret=None``: on); ``--paper`` passes ``no_regret=False`` (the
papers' algorithms, always switching, HMC exploration) for the side-by-side
with the behaviour before the rule became the default; ``--rows sim:rns-hmc eight_schools:nuts`` runs only those
(problem prefix : method) rows, each independently (a problem's NUTS row is
the baseline of its other rows, so run it in the same invocation).  Every
finished row is appended to ``--out`` at once, so a long run keeps its
partial results.

One chain per method, same n_warmup and n_draws for all; ``--replicates R``
runs every row with seeds seed..seed+R-1 (methods in turn within each
replicate: NUTS, HMC, RNS-HMC, ARNS-HMC, NNgHMC, RNS-RMHMC, so load drifts hit all
rows alike) and reports medians over the replicates, each row's median
min ESS/s against NUTS's and against the best of the exact baselines NUTS
and HMC; a single run's min ESS is itself noisy (NUTS on garch11, 500 draws:
0.30-0.59 effective samples per draw, 5-95 % over windows).  The logistic
models run on
2 threads.  Bar: ratio = method's min ESS/s over NUTS's >= 0.9, or the
sampler fell back to an exact sampler and said so (``info["fallback"]``);
the decision column names the exact sampler the rule chose from the
exploration's timed window (NUTS or HMC, ``info["no_regret"]["exact"]``):
the one it measured the surrogate against and fell back to.  Problems:
sim (fs.datasets.simulate_logistic(n=100000, d=50, seed=1)), bank (Bank
Marketing), a9a / a9a-std (60-d random projection, raw / standardised
inputs, as bench/paper_rns_table1.py), pdb (the five posteriordb
posteriors of fs.models.posteriordb).  Prior N(0, 100 I) for the logistic
models; every chain starts from the sampler's default initialisation.
"""
import argparse
import os
import sys
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate import diagnostics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import machine_line, log  # noqa: E402

METHODS = ("nuts", "hmc", "rns-hmc", "arns-hmc", "nnghmc", "rns-rmhmc")
BASELINES = ("nuts", "hmc")


def logistic(name, threads=2):
    if name == "sim":
        X, y, _ = fs.datasets.simulate_logistic(n=100000, d=50, seed=1)
    elif name == "bank":
        X, y = fs.datasets.load_bank_marketing()
    else:
        X, y = fs.datasets.load_a9a()
        X = fs.datasets.random_projection(X, 60, seed=2017, standardize_input=name == "a9a-std")
    return fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=threads)


def problems(names):
    for name in names:
        if name == "pdb":
            from fastsurrogate.models import posteriordb as pdb
            for post, cls in pdb.MODELS.items():
                yield post, pdb.as_potential(cls.from_posteriordb())
        else:
            yield name, logistic(name)


def one(model, method, n_warmup, n_draws, seed, paper=False):
    kw = dict(no_regret=False) if paper and method not in BASELINES else {}
    t0 = time.perf_counter()
    res = fs.sample(model, method, n_draws=n_draws, n_warmup=n_warmup, chains=1, seed=seed,
                    progress=False, **kw)
    wall = time.perf_counter() - t0
    ess = float(np.nanmin(diagnostics.ess_bulk(res.draws)))
    fb = res.info.get("fallback")
    nr = res.info.get("no_regret")
    nr = nr[0] if isinstance(nr, list) else nr
    t = (nr or {}).get("trial", {})
    trial = t.get("whole_run_ratio", t.get("ratio"))
    switched = bool((nr or {}).get("switched"))
    events = res.info.get("events") or []          # NNgHMC: trials are events
    if method == "nnghmc" and nr is not None:
        trials = [e for e in events if e["event"] == "trial" and e.get("no_regret")]
        t = trials[-1]["no_regret"] if trials else {}
        trial = t.get("whole_run_ratio", t.get("ratio"))
        switched = any(e["event"] == "switch" for e in events)
    exact = ((nr or {}).get("exact") or {}).get("chosen")
    return dict(ess=ess, wall=wall, rate=ess / wall, fallback=fb, trial=trial,
                switched=switched, rule=nr is not None, exact=exact and exact.upper())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=["sim", "bank", "a9a", "a9a-std", "pdb"])
    ap.add_argument("--n-warmup", type=int, default=500)
    ap.add_argument("--n-draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--paper", action="store_true",
                    help="no_regret=False for the surrogate samplers (the papers' algorithms)")
    ap.add_argument("--rows", nargs="*", default=None,
                    help="problem:method pairs to run (problem matched as a prefix)")
    ap.add_argument("--replicates", type=int, default=1,
                    help="seeds per row (seed, seed + 1, ...); the table gives medians")
    ap.add_argument("--out")
    args = ap.parse_args()

    def wanted(name, m):
        return args.rows is None or any(
            name.startswith(r.split(":")[0]) and m == r.split(":")[1] for r in args.rows)

    def keep(line):
        lines.append(line)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")

    R = args.replicates
    lines = [machine_line(), f"1 chain, {args.n_warmup} warm-up + {args.n_draws} draws, seeds "
             f"{args.seed}..{args.seed + R - 1} (medians over {R} replicate(s), methods "
             "interleaved within each replicate); whole-run wall clock; "
             f"{'no_regret=False (papers)' if args.paper else 'default settings (no_regret on)'}",
             "", "| problem | method | min ESS | whole run s | min ESS/s | / NUTS | / best exact "
             "| decision | load |", "|---|---|---|---|---|---|---|---|---|"]
    header, lines = lines, []
    for line in header:
        keep(line)
    for name, model in problems(args.problems):
        runs = {m: [] for m in METHODS if wanted(name, m)}
        for rep in range(R):
            for m in runs:
                log(f"{name} {m} (seed {args.seed + rep})")
                r = one(model, m, args.n_warmup, args.n_draws, args.seed + rep, args.paper)
                r["load"] = os.getloadavg()[0]
                runs[m].append(r)
        med = {m: float(np.median([r["rate"] for r in rs])) for m, rs in runs.items()}
        nuts = med.get("nuts")
        best = max([med[m] for m in BASELINES if m in med], default=None)
        for m, rs in runs.items():
            keep(f"| {name} | {m} | {np.median([r['ess'] for r in rs]):.0f} | "
                 f"{np.median([r['wall'] for r in rs]):.1f} | {med[m]:.1f} | "
                 f"{(f'{med[m] / nuts:.2f}' if nuts else 'n/a')} | "
                 f"{(f'{med[m] / best:.2f}' if best else 'n/a')} | "
                 f"{'-' if m in BASELINES else decisions(rs, nuts)} | "
                 f"{min(r['load'] for r in rs):.1f}-{max(r['load'] for r in rs):.1f} |")


def decisions(rs, nuts=None):
    """The rule's decisions over the replicates, e.g. "switched 2/3 (predicted
    1.4-3.1x; got 1.1, 1.3x NUTS), fallback: budget 1/3": for the switched
    replicates the predicted whole-run ratio and each one's min ESS/s over
    the median NUTS rate."""
    out, sw, got = {}, [], []
    for r in rs:
        fb = r["fallback"]
        to = f" to {r['exact']}" if r.get("exact") else ""
        if fb is not None:
            key = f"fallback{to}: " + fb["reason"].split(":")[0]
        elif r["switched"]:
            key = f"switched (against {r['exact']})" if r.get("exact") else "switched"
            if r["trial"] is not None:
                sw.append(r["trial"])
            if nuts:
                got.append(r["rate"] / nuts)
        else:
            key = "surrogate" if not r["rule"] else "no switch"
        out[key] = out.get(key, 0) + 1
    parts = []
    for k, n in out.items():
        txt = f"{k} {n}/{len(rs)}" if len(rs) > 1 else k
        if k.startswith("switched") and (sw or got):
            pred = ("" if not sw else f"predicted {min(sw):.2f}x" if len(sw) == 1 else
                    f"predicted {min(sw):.2f}-{max(sw):.2f}x")
            real = "" if not got else "got " + ", ".join(f"{g:.2f}" for g in got) + "x NUTS"
            txt += " (" + "; ".join(x for x in (pred, real) if x) + ")"
        parts.append(txt)
    return ", ".join(parts)


if __name__ == "__main__":
    main()
