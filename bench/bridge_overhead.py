"""What the JAX bridge (fastsurrogate.interop.to_jax) adds per gradient call.

Same run, interleaved repeats, medians.  For each model:

  kernel      pot._eval_loop: the C kernel called n times from C (no Python)
  python      pot.value_and_grad(q) from Python (what mici / PyMC pay)
  jax scan    jax.lax.scan of n gradients through the bridge inside one jit
              (what NumPyro / BlackJAX pay per leapfrog step)
  jax call    jax.jit(jax.grad(logp))(q) from Python, one call

The bridge's overhead is (jax scan - kernel) per gradient; the target is at
most 20 us.  Run: python bench/bridge_overhead.py [--repeats 7] [--n 2000]
"""
import argparse
import platform
import time

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import fastsurrogate as fs  # noqa: E402
from fastsurrogate.interop import to_jax  # noqa: E402


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def logistic(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, d - 1)) / np.sqrt(d)])
    y = (rng.uniform(size=n) < 0.5).astype(float)
    return fs.models.LogisticRegression(X, y, prior_sd=10.0)


def thread_wakeup_us(n=300):
    """Round trip of two Python threads waking each other (scheduler latency)."""
    import threading
    a, b = threading.Event(), threading.Event()

    def other():
        for _ in range(n):
            a.wait()
            a.clear()
            b.set()
    t = threading.Thread(target=other)
    t.start()
    t0 = time.perf_counter()
    for _ in range(n):
        a.set()
        b.wait()
        b.clear()
    t.join()
    return 1e6 * (time.perf_counter() - t0) / n


def per_call(fn, n):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=2000)
    args = ap.parse_args()
    n = args.n
    print(f"CPU: {cpu_model()}; jax {jax.__version__}; n = {n} calls per repeat, "
          f"{args.repeats} interleaved repeats, medians")
    import os
    print(f"load average {os.getloadavg()}; thread wake-up round trip "
          f"{thread_wakeup_us():.1f} us (a host callback pays about one)")
    models = {"small: logistic N=100 d=5": logistic(100, 5),
              "medium: logistic N=10000 d=50": logistic(10000, 50)}
    print(f"{'model':32s} {'kernel us':>10s} {'python us':>10s} {'jax scan us':>12s} "
          f"{'jax call us':>12s} {'overhead us':>12s}")
    for name, pot in models.items():
        q = np.full(pot.dim, 0.1)
        logp = to_jax(pot)
        grad = jax.grad(logp)

        @jax.jit
        def scan_grads(q0):
            def body(q, _):
                g = grad(q)
                return q + 1e-9 * g, g[0]
            return jax.lax.scan(body, q0, None, length=n)[1]

        call = jax.jit(grad)
        jq = jnp.asarray(q)
        scan_grads(jq).block_until_ready()            # compile
        call(jq).block_until_ready()
        runs = {"kernel": [], "python": [], "scan": [], "call": []}
        for _ in range(args.repeats):
            runs["kernel"].append(per_call(lambda: pot._eval_loop(q, n, True, True), n))
            runs["python"].append(per_call(lambda: [pot.value_and_grad(q) for _ in range(n)], n))
            runs["scan"].append(per_call(lambda: scan_grads(jq).block_until_ready(), n))
            runs["call"].append(per_call(
                lambda: [call(jq).block_until_ready() for _ in range(n)], n))
        med = {k: 1e6 * float(np.median(v)) for k, v in runs.items()}
        over = med["scan"] - med["kernel"]
        print(f"{name:32s} {med['kernel']:10.2f} {med['python']:10.2f} {med['scan']:12.2f} "
              f"{med['call']:12.2f} {over:12.2f}  target <= 20: "
              f"{'met' if over <= 20 else 'NOT met'}")


if __name__ == "__main__":
    main()
