"""Issue 38's 5-d target (tests/_targets.py: a banana block, a skew-normal
coordinate and a mild funnel block, analytic moments) under the surrogate
samplers: R-hat, and each mean's and standard deviation's error against the
truth in Monte Carlo standard errors (z), per method and seed.

    PYTHONPATH=. python bench/five_d.py [--seeds 1 2 3 4 5] [--methods ...]
        [--n-warmup 2000] [--n-draws 4000]

Prints one line per (method, seed) and, per method, the largest |z| and
R-hat over the seeds; for approximate methods (default VHMC) the relative
errors of the means (in sd units) and sds instead of z.
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from _targets import five_d  # noqa: E402

import fastsurrogate as fs  # noqa: E402
from fastsurrogate.diagnostics import rhat, mcse_mean, mcse_sd  # noqa: E402

# NUTS is the exact reference: surrogate=False pins it (with "auto" the one
# up-front cost check decides, and this Python-callback target's ratio sits
# near the threshold: measured 3.9 against 4, so runs differed)
METHODS = {
    "rns-hmc": {}, "arns-hmc": {}, "nnghmc": {}, "vhmc-exact": {"exact": True},
    "vhmc": {}, "hmc": {}, "nuts": {"surrogate": False},
}


def one(method, seed, n_warmup, n_draws):
    pot, mean, sd = five_d()
    kw = dict(METHODS[method])
    name = "vhmc" if method.startswith("vhmc") else method
    t = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = fs.sample(pot, method=name, n_draws=n_draws, n_warmup=n_warmup, chains=4,
                        seed=seed, progress=False, **kw)
    D = res.draws
    m, s = D.mean(axis=(0, 1)), D.std(axis=(0, 1))
    return {"rhat": float(np.max(rhat(D))), "max_abs": float(np.abs(D).max()),
            "z_mean": (m - mean) / np.asarray(mcse_mean(D)),
            "z_sd": (s - sd) / np.asarray(mcse_sd(D)),
            "err_mean": (m - mean) / sd, "err_sd": s / sd - 1, "exact": res.exact,
            "outside": res.info.get("outside_training"), "seconds": time.perf_counter() - t}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--n-warmup", type=int, default=2000)
    ap.add_argument("--n-draws", type=int, default=4000)
    a = ap.parse_args()
    np.set_printoptions(precision=2, suppress=True)
    for method in a.methods:
        rows = [one(method, s, a.n_warmup, a.n_draws) for s in a.seeds]
        for seed, r in zip(a.seeds, rows):
            if r["exact"]:
                print(f"{method:10s} seed {seed}: R-hat {r['rhat']:.3f}  z(mean) {r['z_mean']}  "
                      f"z(sd) {r['z_sd']}  max|q| {r['max_abs']:.1f}  {r['seconds']:.0f} s")
            else:
                print(f"{method:10s} seed {seed}: R-hat {r['rhat']:.3f}  mean err/sd "
                      f"{r['err_mean']}  sd err {r['err_sd']}  max|q| {r['max_abs']:.1f}  "
                      f"outside {np.round(r['outside'], 3) if r['outside'] else None}")
        worst_r = max(r["rhat"] for r in rows)
        if rows[0]["exact"]:
            zm = max(np.abs(r["z_mean"]).max() for r in rows)
            zs = max(np.abs(r["z_sd"]).max() for r in rows)
            zf = np.mean([r["z_sd"][4] for r in rows]) * np.sqrt(len(rows))
            print(f"{method:10s} over seeds {a.seeds}: max R-hat {worst_r:.3f}, max |z| mean "
                  f"{zm:.1f}, sd {zs:.1f}; funnel sd's z summed / sqrt(seeds) {zf:.1f}")
        else:
            em = max(np.abs(r["err_mean"]).max() for r in rows)
            es = max(np.abs(r["err_sd"]).max() for r in rows)
            print(f"{method:10s} over seeds {a.seeds}: max R-hat {worst_r:.3f}, largest mean "
                  f"error {em:.3f} sd, largest sd error {es:.1%}, max |q| "
                  f"{max(r['max_abs'] for r in rows):.1f}")


if __name__ == "__main__":
    main()
