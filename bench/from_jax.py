"""What fs.from_jax adds per call beyond the compiled JAX function.

Same run, interleaved repeats, medians; microseconds per call of value and
gradient:

  jit          jax.jit(jax.value_and_grad(logp))(q) from Python, the outputs
               left as JAX arrays: what a user calling their own function pays
  executable   the ahead-of-time compiled executable from_jax builds (value
               and gradient in one array) + np.asarray: the function itself
  C loop       pot._eval_loop: the potential called n times from C, as the
               chain loop calls it (GIL taken, q copied in, gradient out)
  overhead     C loop - executable, within each repeat (median, quartiles)

A cheap model (a 10-d correlated Gaussian) and an expensive one (logistic
regression, N = 100000 rows, d = 50): the overhead is a fixed cost per call,
a large share of the cheap model and a small one of the expensive model.
Last, 1 chain against 2 chains in threads on a logistic regression with
N = 20000 (exact NUTS, same settings): the executable runs without the GIL, so two chains overlap.

Run: python bench/from_jax.py [--repeats 7]
"""
import argparse
import os
import platform
import subprocess
import sys
import time

import numpy as np

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import fastsurrogate as fs  # noqa: E402


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def gaussian(d=10):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(d, d))
    P = jnp.asarray(A @ A.T / d + np.eye(d))
    return (lambda x: -0.5 * x @ P @ x), jnp.zeros(d)


def logistic(n=100_000, d=50):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    beta = rng.normal(size=d)
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    X, y = jnp.asarray(X), jnp.asarray(y)

    def logp(b):
        eta = X @ b
        return jnp.sum(y * eta - jnp.logaddexp(0.0, eta)) - 0.5 * b @ b / 25.0
    return logp, jnp.zeros(d)


def per_call(fn, n):
    t = time.perf_counter()
    fn(n)
    return (time.perf_counter() - t) / n * 1e6


def measure(logp, example, n, repeats):
    pot = fs.from_jax(logp, example)
    q = np.asarray(jax.random.normal(jax.random.PRNGKey(0), example.shape)) * 0.1
    jitted = jax.jit(jax.value_and_grad(logp))
    jitted(q)[1].block_until_ready()
    exe = pot._jax_both                       # the executable from_jax compiled

    def run_jit(k):
        for _ in range(k):
            out = jitted(q)
        out[1].block_until_ready()

    def run_exe(k):
        for _ in range(k):
            np.asarray(exe(q))

    def run_c(k):
        pot._eval_loop(q, k, True, True)

    rows = {"jit": [], "executable": [], "C loop": []}
    for _ in range(repeats):
        rows["jit"].append(per_call(run_jit, n))
        rows["executable"].append(per_call(run_exe, n))
        rows["C loop"].append(per_call(run_c, n))
    over = np.subtract(rows["C loop"], rows["executable"])
    return {k: float(np.median(v)) for k, v in rows.items()}, over, pot


def threads(repeats):
    pot = fs.from_jax(*logistic(n=20_000, d=50))
    kw = dict(n_draws=200, n_warmup=200, seed=1, progress=False, surrogate=False, warn=False)
    one, two = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        r1 = fs.sample(pot, chains=1, **kw)
        one.append(r1.draws.shape[1] * 2 / (time.perf_counter() - t))
        t = time.perf_counter()
        r2 = fs.sample(pot, chains=2, **kw)       # a thread-safe potential: chains in threads
        two.append(2 * r2.draws.shape[1] * 2 / (time.perf_counter() - t))
    return float(np.median(np.divide(two, one)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"CPU: {cpu_name()}; load {os.getloadavg()[0]:.2f}; jax {jax.__version__}; "
          f"fastsurrogate {fs.__version__}; {args.repeats} interleaved repeats, medians")
    print(f"{'model':<28}{'jit':>9}{'executable':>12}{'C loop':>9}"
          f"{'overhead (q1..q3)':>22}{'share':>8}   us per call")
    for name, (logp, example), n in (("Gaussian d=10", gaussian(), 20000),
                                     ("logistic N=100000 d=50", logistic(), 200)):
        med, over, _ = measure(logp, example, n, args.repeats)
        q1, q2, q3 = np.percentile(over, [25, 50, 75])
        print(f"{name:<28}{med['jit']:>9.1f}{med['executable']:>12.1f}{med['C loop']:>9.1f}"
              f"{q2:>10.1f} ({q1:.1f}..{q3:.1f}){q2 / med['C loop']:>8.0%}")
    ratio = threads(max(3, args.repeats // 2))
    print(f"logistic N=20000 d=50, exact NUTS 200+200: 2 chains in threads / 1 chain, iterations "
          f"per second: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
