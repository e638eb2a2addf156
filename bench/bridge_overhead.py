"""What the JAX bridge (fastsurrogate.interop.to_jax) adds per gradient call.

Same run, interleaved repeats, medians.  Every figure is microseconds per
gradient, measured as n gradients inside one jitted ``jax.lax.scan`` (what
NumPyro / BlackJAX pay per leapfrog step) unless it says "call":

  kernel         pot._eval_loop: the C kernel called n times from C (no Python)
  python         pot.value_and_grad(q) from Python (what mici / PyMC pay)
  scan, no call  the scan with a trivial body (the loop's own cost)
  floor          the scan calling a trivial jax.pure_callback that returns its
                 input: the least any pure_callback bridge can cost
  cb raw         pure_callback(pot.value_and_grad) with no wrapper of ours
  cb bridge      to_jax(backend="callback"): pure_callback + custom_vjp, one
                 callback for value and gradient (the fallback path)
  cb 2 calls     value and gradient in two separate callbacks
  ffi            to_jax(backend="ffi"): the XLA FFI handler + custom_vjp
  cb/ffi vmap    jax.vmap over 4 chains inside the scan, per chain gradient
                 (callback with vmap_method sequential / expand_dims; ffi)
  call floor     jax.jit(identity)(q) dispatched from Python, per call
  cb/ffi call    jax.jit(jax.grad(logp))(q) dispatched from Python, per call

"beyond kernel" is the median over repeats of (figure - kernel) within the
same repeat, with its quartiles, and "min - min" the difference of the
fastest repeats (on a loaded machine the least disturbed); the target is at
most 20 us for the bridge (cb bridge, ffi).  Last, cProfile splits one
identity-callback scan: where the callback floor goes inside JAX's Python
callback wrapper.
Run: python bench/bridge_overhead.py [--repeats 7] [--n 1000]
"""
import argparse
import os
import sys
import time

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import fastsurrogate as fs  # noqa: E402
from fastsurrogate.interop import to_jax  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import cpu_model  # noqa: E402

CHAINS = 4


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


def scan_of(step, n):
    """jit(scan) of n steps; step(q) -> gradient-shaped array."""
    @jax.jit
    def run(q0):
        def body(q, _):
            g = step(q)
            return q + 1e-9 * g, g[..., 0]
        return jax.lax.scan(body, q0, None, length=n)[1]
    return run


def cases(pot, n):
    """name -> (function of no arguments running n gradients, gradients per call)."""
    d = pot.dim
    q = np.full(d, 0.1)
    jq = jnp.asarray(q)
    jQ = jnp.asarray(np.tile(q, (CHAINS, 1)))
    vec = jax.ShapeDtypeStruct((d,), jnp.float64)
    sca = jax.ShapeDtypeStruct((), jnp.float64)

    def identity_cb(x):
        return jax.pure_callback(lambda a: a, vec, x, vmap_method="sequential")

    def raw_cb(x):
        return jax.pure_callback(lambda a: pot.value_and_grad(a)[1], vec, x,
                                 vmap_method="sequential")

    def two_cb(x):
        u = jax.pure_callback(lambda a: np.float64(pot.value(a)), sca, x,
                              vmap_method="sequential")
        g = jax.pure_callback(lambda a: pot.grad(a), vec, x, vmap_method="sequential")
        return g + 0.0 * u

    cb = jax.grad(to_jax(pot, backend="callback"))
    ffi = jax.grad(to_jax(pot, backend="ffi"))
    cb_seq = jax.vmap(jax.grad(to_jax(pot, backend="callback", vmap_method="sequential")))
    cb_exp = jax.vmap(jax.grad(to_jax(pot, backend="callback", vmap_method="expand_dims")))
    ffi_v = jax.vmap(ffi)
    ident_call = jax.jit(lambda x: x)
    cb_call, ffi_call = jax.jit(cb), jax.jit(ffi)

    def scanned(step, x0, per):
        run = scan_of(step, n)
        run(x0).block_until_ready()                  # compile
        return (lambda: run(x0).block_until_ready()), per

    def called(f):
        f(jq).block_until_ready()
        return (lambda: [f(jq).block_until_ready() for _ in range(n)]), 1

    return {
        "kernel": ((lambda: pot._eval_loop(q, n, True, True)), 1),
        "python": ((lambda: [pot.value_and_grad(q) for _ in range(n)]), 1),
        "scan, no call": scanned(lambda x: x, jq, 1),
        "floor (identity cb)": scanned(identity_cb, jq, 1),
        "cb raw": scanned(raw_cb, jq, 1),
        "cb bridge": scanned(cb, jq, 1),
        "cb 2 calls": scanned(two_cb, jq, 1),
        "ffi": scanned(ffi, jq, 1),
        f"cb vmap {CHAINS} sequential": scanned(cb_seq, jQ, CHAINS),
        f"cb vmap {CHAINS} expand_dims": scanned(cb_exp, jQ, CHAINS),
        f"ffi vmap {CHAINS}": scanned(ffi_v, jQ, CHAINS),
        "call floor (jit identity)": called(ident_call),
        "cb call": called(cb_call),
        "ffi call": called(ffi_call),
    }


def profile_floor(n):
    """cProfile of n identity pure_callbacks in a scan: us per callback (under
    the profiler, so inflated) in JAX's callback wrapper, in its device_put
    of the arguments, and in the user function."""
    import cProfile
    import pstats
    vec = jax.ShapeDtypeStruct((5,), jnp.float64)

    def user(a):
        return a

    run = scan_of(lambda x: jax.pure_callback(user, vec, x, vmap_method="sequential"), n)
    q = jnp.ones(5)
    run(q).block_until_ready()
    pr = cProfile.Profile()
    pr.enable()
    run(q).block_until_ready()
    pr.disable()
    st = pstats.Stats(pr).stats          # (file, line, name) -> (cc, nc, tt, ct, callers)
    total = sum(v[2] for v in st.values())

    def cum(name, file_part=""):
        return sum(v[3] for k, v in st.items() if k[2] == name and file_part in k[0])
    print(f"\nidentity pure_callback under cProfile, us per callback: all Python "
          f"{1e6 * total / n:.1f}; jax pure_callback_impl {1e6 * cum('pure_callback_impl') / n:.1f}, "
          f"of which jax.device_put of the arguments {1e6 * cum('device_put', 'api.py') / n:.1f}; "
          f"the user function {1e6 * cum('user') / n:.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=1000)
    args = ap.parse_args()
    n = args.n
    from fastsurrogate.interop import _xla_ffi
    if _xla_ffi.target() is None:
        sys.exit(f"the FFI handler is unavailable: {_xla_ffi.unavailable_reason()}")
    print(f"CPU: {cpu_model()}; jax {jax.__version__}; n = {n} gradients per repeat, "
          f"{args.repeats} interleaved repeats, medians; us per gradient")
    print(f"load average {tuple(round(x, 2) for x in os.getloadavg())}; thread wake-up "
          f"round trip {thread_wakeup_us():.1f} us (a host callback pays about one)")
    # the medium model: n / 10 gradients (each costs about a millisecond)
    models = {"Gaussian d=5": (fs.models.StandardNormal(5), n),
              "logistic N=100 d=5": (logistic(100, 5), n),
              "logistic N=10000 d=50": (logistic(10000, 50), max(n // 10, 10))}
    for name, (pot, n_model) in models.items():
        cs = cases(pot, n_model)
        runs = {k: [] for k in cs}
        for _ in range(args.repeats):
            for k, (fn, per) in cs.items():
                runs[k].append(per_call(fn, n_model * per))
        kern = 1e6 * np.asarray(runs["kernel"])
        print(f"\n{name} ({n_model} gradients): {'us/grad':>10s} {'beyond kernel':>14s} "
              f"{'(quartiles)':>18s} {'min - min':>10s}")
        for k, v in runs.items():
            # beyond kernel: the median of the paired differences (same repeat)
            diff = 1e6 * np.asarray(v) - kern
            over = float(np.median(diff))
            q1, q3 = np.percentile(diff, [25, 75])
            mark = ""
            if k in ("cb bridge", "ffi") or k.startswith("ffi vmap"):
                mark = "  target <= 20: " + ("met" if over <= 20 else "NOT met")
            # min - min: the least-disturbed repeats (load only adds time)
            mm = 1e6 * float(np.min(v)) - float(np.min(kern))
            print(f"  {k:30s} {1e6 * float(np.median(v)):10.2f} {over:14.2f} "
                  f"{f'({q1:.1f}, {q3:.1f})':>18s} {mm:10.2f}{mark}")
    profile_floor(min(n, 500))


if __name__ == "__main__":
    main()
