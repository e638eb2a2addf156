"""Cost of the elliptic PDE potential (RNS-HMC paper, section 5.2).

    PYTHONPATH=. python bench/pde_cost.py [--mesh 30] [--modes 20] [--repeats 9]

Target (issue 17): one U + gradient evaluation (forward solve + adjoint
solve) costs at most 2x one forward solve (U only), measured in the same run.
For each solver ("banded": LAPACK banded Cholesky; "splu": SuperLU with the
same fixed natural ordering) it times, interleaved, medians of `repeats`
rounds of `inner` calls each:
  forward      U(theta) through the Potential (the C callback path)
  U + grad     U and the adjoint gradient through the Potential
  factor only  assembly + factorisation (no solve), for the breakdown
  GN diag      the Gauss-Newton Hessian diagonal (n_modes extra solves)
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import machine_line  # noqa: E402

import fastsurrogate as fs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mesh", type=int, default=30)
    ap.add_argument("--modes", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--inner", type=int, default=50)
    a = ap.parse_args()
    print(machine_line())
    models = {s: fs.models.EllipticPDE(n_mesh=a.mesh, n_modes=a.modes, solver=s)
              for s in ("banded", "splu")}
    theta = models["banded"].theta_true + 0.1
    jobs = {}
    for s, m in models.items():
        c = m.coefficient(theta)
        jobs[(s, "forward")] = (lambda m=m: m.value(theta), a.inner)
        jobs[(s, "U + grad")] = (lambda m=m: m.value_and_grad(theta), a.inner)
        jobs[(s, "factor only")] = (lambda m=m, c=c: m._factor(c), a.inner)
        jobs[(s, "GN diag")] = (lambda m=m: m.gauss_newton_diag(theta), max(1, a.inner // 5))
    times = {k: [] for k in jobs}
    for _ in range(a.repeats):
        for k, (f, n) in jobs.items():
            f()
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            times[k].append((time.perf_counter() - t0) / n)
    print(f"mesh {a.mesh} x {a.mesh}, d = {a.modes}, {models['banded'].free.size} unknowns, "
          f"half bandwidth {models['banded'].half_bandwidth}; medians of {a.repeats} "
          f"interleaved rounds")
    for s in models:
        med = {w: statistics.median(times[(s, w)]) for w in ("forward", "U + grad",
                                                              "factor only", "GN diag")}
        ratio = med["U + grad"] / med["forward"]
        print(f"  {s:6s}: forward {med['forward'] * 1e3:7.3f} ms | U + grad "
              f"{med['U + grad'] * 1e3:7.3f} ms | ratio {ratio:4.2f} (target <= 2: "
              f"{'met' if ratio <= 2 else 'NOT met'}) | assembly + factor "
              f"{med['factor only'] * 1e3:7.3f} ms | GN diag {med['GN diag'] * 1e3:7.3f} ms")
    fb = statistics.median(times[("banded", "forward")])
    fl = statistics.median(times[("splu", "forward")])
    print(f"  splu forward / banded forward: {fl / fb:4.2f}")


if __name__ == "__main__":
    main()
