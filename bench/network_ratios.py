"""Surrogate gradient of the random-basis network: C against NumPy in one run.

    PYTHONPATH=. python bench/network_ratios.py [--repeats 9]   (from the repo root)

For each (s hidden units, d inputs), softplus nodes, one thread: the median
microseconds per gradient of
  C loop   - n gradients in one C loop without the GIL (Potential._eval_loop)
  C call   - RandomNetwork.grad(q) from Python (adds the call overhead)
  NumPy    - t = W @ q + d; g = W.T @ (v * expit(t))
  read W   - one plain read of W (a sum), also in a C loop: the floor
and the ratio NumPy / C loop.  Bar for (2000, 50): C loop <= 15 us and
ratio >= 2 (the absolute figure depends on the machine: W is 800 KB and is
read from L2 where it fits, from L3 where it does not).
"""
import argparse
import os
import time

import numpy as np
from scipy.special import expit

from fastsurrogate.models._glm import _read_floor
from fastsurrogate.surrogates._network import RandomNetwork

SIZES = [(2000, 50), (1000, 24), (2500, 60)]


def median_us(fn, n_inner, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) / n_inner)
    return float(np.median(ts)) * 1e6


def measure(s, d, repeats=9):
    net = RandomNetwork.random(d, s, "softplus", seed=0)
    rng = np.random.default_rng(1)
    net.output_weights = rng.standard_normal(s) / np.sqrt(s)
    q = rng.standard_normal(d)
    W, b, v = np.array(net.W), np.array(net.bias), net.output_weights

    def numpy_grad():
        return W.T @ (v * expit(W @ q + b))

    ref = numpy_grad()
    got = net.grad(q)
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 1e-12, f"C and NumPy gradients differ: {err:.2e}"
    n_loop = max(200, int(2e5 // s))
    n_py = max(50, int(4e4 // s))

    def c_loop():
        net._eval_loop(q, n_loop, False, True)

    def c_call():
        for _ in range(n_py):
            net.grad(q)

    def np_call():
        for _ in range(n_py):
            numpy_grad()

    def read_w():
        # the floor: plain reads of the hidden weights (warm in cache) in one
        # C loop, as the C loop of gradients runs
        _read_floor(W, 1, repeat=n_loop)

    # interleave them so that machine noise hits them alike
    res = {"c_loop": [], "c_call": [], "numpy": [], "read_w": []}
    for _ in range(repeats):
        res["read_w"].append(median_us(read_w, n_loop, 1))
        res["c_loop"].append(median_us(c_loop, n_loop, 1))
        res["c_call"].append(median_us(c_call, n_py, 1))
        res["numpy"].append(median_us(np_call, n_py, 1))
    out = {k: float(np.median(x)) for k, x in res.items()}
    out["ratio"] = out["numpy"] / out["c_loop"]
    out["rel_err"] = float(err)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "default"
    print(f"softplus network gradient, 1 thread in C (BLAS threads for NumPy: {threads})")
    print(f"{'s':>5} {'d':>4} {'C loop us':>10} {'C call us':>10} {'NumPy us':>9} {'NumPy/C':>8}"
          f" {'read W us':>10}")
    for s, d in SIZES:
        r = measure(s, d, args.repeats)
        bar = ""
        if (s, d) == (2000, 50):
            ok_abs = r["c_loop"] <= 15.0
            ok_ratio = r["ratio"] >= 2.0
            bar = (f"  bar: <= 15 us {'met' if ok_abs else 'NOT met'}, "
                   f">= 2x {'met' if ok_ratio else 'NOT met'}")
        print(f"{s:>5} {d:>4} {r['c_loop']:>10.2f} {r['c_call']:>10.2f} {r['numpy']:>9.2f} "
              f"{r['ratio']:>8.2f} {r['read_w']:>10.2f}{bar}")
    print("read W: one plain read of the weights (sum, 1 thread, timed in a C loop like "
          "'C loop') - the floor of any gradient, which reads every row of W at least once")


if __name__ == "__main__":
    main()
