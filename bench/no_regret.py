"""No-regret defaults: each exact surrogate sampler with DEFAULT settings
against exact NUTS with default settings, min bulk ESS per second of the
whole run (wall clock around ``fs.sample``: exploration / warm-up, training,
trial and sampling all included).

    python bench/no_regret.py [--problems sim bank a9a a9a-std pdb] [--n-warmup 500]
                              [--n-draws 500] [--paper] [--rows P:M ...] [--out FILE]

The surrogate samplers run with their defaults, which include the no-regret
rule (``no_regret=None``: on); ``--paper`` passes ``no_regret=False`` (the
papers' algorithms, always switching, HMC exploration) for the side-by-side
with the behaviour before the rule became the default; ``--rows sim:rns-hmc eight_schools:nuts`` runs only those
(problem prefix : method) rows, each independently (a problem's NUTS row is
the baseline of its other rows, so run it in the same invocation).  Every
finished row is appended to ``--out`` at once, so a long run keeps its
partial results.

One chain per method, same n_warmup and n_draws for all, one run per problem
(methods in turn: NUTS, HMC, RNS-HMC, ARNS-HMC, NNgHMC; the exact
baselines NUTS and HMC first, each row's ratio against the best of them
run so far for that problem), the logistic models on
2 threads.  Bar: ratio = method's min ESS/s over NUTS's >= 0.9, or the
sampler fell back to NUTS and said so (``info["fallback"]``).  Problems:
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

METHODS = ("nuts", "hmc", "rns-hmc", "arns-hmc", "nnghmc")
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
    return dict(ess=ess, wall=wall, rate=ess / wall, fallback=fb, trial=trial,
                switched=switched, rule=nr is not None)


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

    lines = [machine_line(), f"1 chain, {args.n_warmup} warm-up + {args.n_draws} draws, seed "
             f"{args.seed}; whole-run wall clock; "
             f"{'no_regret=False (papers)' if args.paper else 'default settings (no_regret on)'}",
             "", "| problem | method | min ESS | whole run s | min ESS/s | / best exact | decision "
             "| load |", "|---|---|---|---|---|---|---|---|"]
    header, lines = lines, []
    for line in header:
        keep(line)
    for name, model in problems(args.problems):
        base = None
        for m in METHODS:
            if not wanted(name, m):
                continue
            log(f"{name} {m}")
            r = one(model, m, args.n_warmup, args.n_draws, args.seed, args.paper)
            if m in BASELINES:
                base = max(base or 0.0, r["rate"])
            fb = r["fallback"]
            if m in BASELINES:
                decision = "-"
            elif fb is not None:
                decision = "fallback: " + fb["reason"].split(":")[0]
            elif r["switched"]:
                decision = ("switched" if r["trial"] is None
                            else f"switched (predicted {r['trial']:.2f}x)")
            else:
                decision = "surrogate" if not r["rule"] else "no switch"
            ratio = f"{r['rate'] / base:.2f}" if base else "n/a"
            keep(f"| {name} | {m} | {r['ess']:.0f} | {r['wall']:.1f} | {r['rate']:.1f} | "
                 f"{ratio} | {decision} | {os.getloadavg()[0]:.1f} |")


if __name__ == "__main__":
    main()
