"""Cost per online update, as a function of the network size s and of the
number of points already seen (one run; medians over repeats).

    python bench/online_scaling.py [--blas-threads 1] [--repeats 9] [--only smw|greville]

Greville (ARNS-HMC): s in {100, 200, 400, 800}, points seen n in {100, 1000,
5000}.  The claim: the cost does not depend on n (no data are kept) and
grows like s^2, so cost(2s) / cost(s) ~ 4.  While n < s the row opens a new
direction (Greville's c != 0 branch: Phi is read twice and both Phi and
Theta change), which costs a constant factor more than the c = 0 branch
taken once the row space is full; the table marks those cells with '*'.

SMW (VHMC gradient matching): d = 10 with s in {100, 200, 400, 800}, and
d = 50 with s in {200, 400}; points seen t in {100, 1000, 10000}.  The
claim: flat in t, about d s^2 (3 d s^2 flops: C A^T, then the rank-d
downdate of C).

Each Greville cell: the state for n points is made by a batch solve
(untimed), then BLOCK updates are timed together through ``update_many``;
the median over repeats of (time / BLOCK) is printed.  Each SMW cell: the
trainer is grown point by point to t points (untimed, fresh random data),
then ``repeats`` successive blocks of BLOCK updates are timed (t grows by
at most BLOCK x repeats during the timing); the median of (time / BLOCK).
"""
import argparse
import os
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blas-threads", default="1",
                    help="OPENBLAS/OMP/MKL thread count for the BLAS calls (default 1; "
                         "'keep' leaves the environment alone)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--block", type=int, default=40)
    ap.add_argument("--only", choices=["greville", "smw"], help="run one of the two tables")
    return ap.parse_args()


ARGS = parse()
if ARGS.blas_threads != "keep":
    # must be set before NumPy/SciPy load OpenBLAS
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = ARGS.blas_threads

import numpy as np  # noqa: E402

from fastsurrogate.surrogates._online import GrevilleTrainer, SMWTrainer  # noqa: E402


def median_per_update(prepare, run, block, repeats):
    ts = []
    for _ in range(repeats):
        prepare()
        t0 = time.perf_counter()
        run()
        ts.append((time.perf_counter() - t0) / block)
    return float(np.median(ts))


def greville_table(sizes, seen, block, repeats):
    rng = np.random.default_rng(0)
    cost = {}
    branch = {}
    for s in sizes:
        n_max = max(seen) + block
        H = rng.standard_normal((n_max, s))
        y = rng.standard_normal(n_max)
        tr = GrevilleTrainer(s)
        for n in seen:
            Hn, yn = H[:n], y[:n]
            Hb, yb = H[n:n + block], y[n:n + block]
            cost[s, n] = median_per_update(lambda: tr.resync(Hn, yn),
                                           lambda: tr.update_many(Hb, yb), block, repeats)
            branch[s, n] = tr.n_new_direction > 0
            assert np.allclose(tr.weights, np.linalg.lstsq(H[:n + block], y[:n + block],
                                                            rcond=None)[0], atol=1e-6)
    return cost, branch


def smw_table(d, sizes, seen, block, repeats):
    rng = np.random.default_rng(1)
    cost = {}
    chunk = 500
    for s in sizes:
        tr = SMWTrainer(s, d, 1.0)
        for t in sorted(seen):
            while tr.n_seen < t:
                n = min(chunk, t - tr.n_seen)
                tr.update_many(rng.standard_normal((n, d, s)), rng.standard_normal((n, d)))
            times = []
            for _ in range(repeats):
                Ab, gb = rng.standard_normal((block, d, s)), rng.standard_normal((block, d))
                t0 = time.perf_counter()
                tr.update_many(Ab, gb)
                times.append((time.perf_counter() - t0) / block)
            cost[s, t] = float(np.median(times))
            assert np.all(np.isfinite(tr.weights))
    return cost


def print_smw(d, sizes, seen, cost):
    print(f"\nSMW update (VHMC, d = {d}), microseconds per point")
    print("   s " + "".join(f"{'t=' + str(t):>12}" for t in seen)
          + "   max/min over t   ns per d*s^2 (median over t)")
    for s in sizes:
        row = [cost[s, t] for t in seen]
        cells = "".join(f"{c * 1e6:12.1f}" for c in row)
        print(f"{s:4d} {cells}   {max(row) / min(row):14.2f}   "
              f"{np.median(row) / (d * s * s) * 1e9:10.3f}")
    print("cost(2s)/cost(s), t = " + ", ".join(str(t) for t in seen) + "  (d s^2 scaling: 4)")
    for s0, s1 in zip(sizes[:-1], sizes[1:]):
        if s1 == 2 * s0:
            print(f"  {s1:4d}/{s0:<4d} " + "".join(f"{cost[s1, t] / cost[s0, t]:8.2f}"
                                                  for t in seen))


def main():
    print(f"BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'library default')}; "
          f"block {ARGS.block} updates, median of {ARGS.repeats}; "
          f"numpy {np.__version__}, python {sys.version.split()[0]}")

    if ARGS.only != "smw":
        greville_report()
    if ARGS.only != "greville":
        tseen = [100, 1000, 10000]
        for d, ssizes in ((10, [100, 200, 400, 800]), (50, [200, 400])):
            print_smw(d, ssizes, tseen, smw_table(d, ssizes, tseen, ARGS.block, ARGS.repeats))


def greville_report():
    sizes, seen = [100, 200, 400, 800], [100, 1000, 5000]
    cost, branch = greville_table(sizes, seen, ARGS.block, ARGS.repeats)
    print("\nGreville update (ARNS-HMC), microseconds per point "
          "(* = n < s: new-direction branch)")
    print("   s " + "".join(f"{'n=' + str(n):>12}" for n in seen)
          + "   max/min over n (n >= s)")
    for s in sizes:
        cells = "".join(f"{cost[s, n] * 1e6:11.1f}{'*' if branch[s, n] else ' '}" for n in seen)
        flat = [cost[s, n] for n in seen if not branch[s, n]]
        spread = max(flat) / min(flat) if flat else float("nan")
        print(f"{s:4d} {cells}   {spread:6.2f}")
    print("cost(2s)/cost(s), n = " + ", ".join(str(n) for n in seen) + "  (s^2 scaling: 4)")
    for s0, s1 in zip(sizes[:-1], sizes[1:]):
        print(f"  {s1:4d}/{s0:<4d} " + "".join(f"{cost[s1, n] / cost[s0, n]:8.2f}" for n in seen))


if __name__ == "__main__":
    main()
