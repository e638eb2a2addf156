"""What fs.from_pymc costs per gradient, and how chains in threads scale.

Model: a PyMC logistic regression, N rows x D features (default 5000 x 20;
X and y as pm.Data), beta ~ N(0, 1), intercept ~ N(0, 5).  Same run,
interleaved repeats, medians (quartiles in brackets).

(a) microseconds per gradient (value and gradient) at one point:

  numba loop    PyTensor's jitted graph (the very function the cfunc calls)
                called n times from a numba loop: the floor
  C loop        pot._eval_loop: the fs_potential trampoline -> cfunc -> graph,
                n times from C without the GIL (what the chain loop pays)
  python        pot.value_and_grad(q) from Python, per call
  fs NUTS       fastsurrogate's exact NUTS, 1 chain: whole-run seconds (warm-up
                + draws) / gradients (leapfrog steps)
  nutpie NUTS   nutpie.sample on nutpie.compile_pymc_model(model), 1 chain, the
                same iterations: seconds / gradients (its n_steps)

  acceptance: C loop / numba loop <= 1.3

(b) iterations per second of exact HMC (fixed 10 leapfrog steps, so every
    iteration costs the same) with 1 chain and with 2 chains in threads
    (the potential is thread_safe: the chains run in parallel);
    acceptance: 2 chains / 1 chain >= 1.6 on 2 cores.  nutpie's 2 cores vs 1
    is shown beside it.

numba's linear algebra calls SciPy's OpenBLAS; every timed block runs with
OpenBLAS on one thread (fastsurrogate.core._blas_threads), and the table
says what the load average was.

Run: python bench/from_pymc.py [--rows 5000] [--cols 20] [--repeats 5] [--n 2000]
     [--iters 400] [--no-nutpie]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _benchutil import cpu_model, machine_line  # noqa: E402


def model(rows, cols, seed=0):
    import pymc as pm
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, cols)) / np.sqrt(cols)
    beta = rng.normal(size=cols)
    y = (rng.uniform(size=rows) < 1.0 / (1.0 + np.exp(-(X @ beta - 0.5)))).astype(np.int64)
    with pm.Model() as m:
        Xd = pm.Data("X", X)
        yd = pm.Data("y", y)
        b = pm.Normal("beta", 0.0, 1.0, shape=cols)
        a = pm.Normal("intercept", 0.0, 5.0)
        pm.Bernoulli("obs", logit_p=Xd @ b + a, observed=yd)
    return m


def numba_loop(pot):
    """A numba function loop(q, n, *shared) calling the potential's jitted
    graph n times (the same dispatcher the cfunc calls)."""
    import numba
    fn = pot.keep_alive["functions"][0]
    shared = [np.array(v.get_value(borrow=True), order="C", copy=True) for v in fn.get_shared()]
    args = "".join(f", s{k}" for k in range(len(shared)))
    src = (f"def loop(q, n{args}):\n"
           "    acc = 0.0\n"
           "    for i in range(n):\n"
           f"        out = jit_fn(q{args})\n"
           "        acc += out[0][()] + out[1][0]\n"
           "    return acc\n")
    ns = {"jit_fn": fn.vm.jit_fn}
    exec(src, ns)
    loop = numba.njit(ns["loop"])
    q = np.zeros(pot.dim)
    loop(q, 1, *shared)                  # compile
    return lambda q, n: loop(q, n, *shared)


def per_call(f, n):
    t = time.perf_counter()
    f(n)
    return (time.perf_counter() - t) / n * 1e6


def median_q(xs):
    xs = sorted(xs)
    if len(xs) < 3:
        return statistics.median(xs), xs[0], xs[-1]
    q = statistics.quantiles(xs, n=4)
    return statistics.median(xs), q[0], q[2]


def fmt(xs, digits=2):
    m, lo, hi = median_q(xs)
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--cols", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=2000, help="gradients per timing of (a)")
    ap.add_argument("--iters", type=int, default=400,
                    help="warm-up and draws per chain in the sampler timings")
    ap.add_argument("--no-nutpie", action="store_true")
    opts = ap.parse_args()

    import fastsurrogate as fs
    from fastsurrogate.core._blas_threads import blas_threads

    load0 = os.getloadavg()
    m = model(opts.rows, opts.cols)
    t = time.perf_counter()
    pot = fs.from_pymc(m)
    t_build = time.perf_counter() - t
    assert pot.thread_safe
    loop = numba_loop(pot)
    q = 0.1 * np.random.default_rng(1).normal(size=pot.dim)
    u, g = pot.value_and_grad(q)
    assert np.isclose(loop(q, 1), -u - g[0])     # the same function

    compiled = None
    if not opts.no_nutpie:
        try:
            import nutpie
            t = time.perf_counter()
            compiled = nutpie.compile_pymc_model(m)
            t_nutpie_build = time.perf_counter() - t
        except ImportError:
            compiled = None

    n, it = opts.n, opts.iters
    rows = {k: [] for k in ("numba", "C", "python", "ratio", "fs_nuts", "nutpie_nuts",
                            "ips1", "ips2", "scale", "nutpie_scale")}
    with blas_threads(1):
        loop(q, 200)
        pot._eval_loop(q, 200)
        for r in range(opts.repeats):
            a = per_call(lambda k: loop(q, k), n)
            c = per_call(lambda k: pot._eval_loop(q, k), n)
            a2 = per_call(lambda k: loop(q, k), n)
            base = 0.5 * (a + a2)
            rows["numba"].append(base)
            rows["C"].append(c)
            rows["ratio"].append(c / base)
            rows["python"].append(per_call(
                lambda k: [pot.value_and_grad(q) for _ in range(k)], max(n // 4, 50)))

            # fastsurrogate exact NUTS, one chain: seconds per gradient
            res = fs.sample(pot, "nuts", n_draws=it, n_warmup=it, chains=1, seed=r,
                            progress=False, warn=False, surrogate=False, keep_warmup=True)
            grads = res.stats["n_steps"].sum() + res.warmup_stats["n_steps"].sum()
            rows["fs_nuts"].append(res.timings["total"] / grads * 1e6)
            if compiled is not None:
                t = time.perf_counter()
                tr = nutpie.sample(compiled, draws=it, tune=it, chains=1, cores=1, seed=r,
                                   progress_bar=False, save_warmup=True)
                secs = time.perf_counter() - t
                grads = int(tr.sample_stats["n_steps"].sum())
                if "warmup_sample_stats" in tr.groups():
                    grads += int(tr.warmup_sample_stats["n_steps"].sum())
                rows["nutpie_nuts"].append(secs / grads * 1e6)

            # (b) HMC, fixed 10 steps: 1 chain, then 2 chains in threads
            kw = dict(n_draws=it, n_warmup=it, n_steps=10, random_n_steps=False,
                      progress=False, warn=False, seed=100 + r)
            r1 = fs.sample(pot, "hmc", chains=1, **kw)
            r2 = fs.sample(pot, "hmc", chains=2, **kw)
            ips1 = 2 * it / r1.timings["total"]
            ips2 = 2 * 2 * it / r2.timings["total"]
            rows["ips1"].append(ips1)
            rows["ips2"].append(ips2)
            rows["scale"].append(ips2 / ips1)
            if compiled is not None:
                t = time.perf_counter()
                nutpie.sample(compiled, draws=it, tune=it, chains=2, cores=1, seed=r,
                              progress_bar=False)
                s1 = time.perf_counter() - t
                t = time.perf_counter()
                nutpie.sample(compiled, draws=it, tune=it, chains=2, cores=2, seed=r,
                              progress_bar=False)
                s2 = time.perf_counter() - t
                rows["nutpie_scale"].append(s1 / s2)
    load1 = os.getloadavg()

    print(f"# fs.from_pymc: logistic regression {opts.rows} x {opts.cols} "
          f"(dim {pot.dim}), {opts.repeats} repeats")
    print(f"CPU: {cpu_model()} ({os.cpu_count()} CPUs)")
    print(machine_line())
    print(f"load average before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"after {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print(f"build: from_pymc {t_build:.1f} s"
          + (f", nutpie.compile_pymc_model {t_nutpie_build:.1f} s" if compiled is not None else ""))
    print()
    print("| (a) per gradient                         | us, median [quartiles] |")
    print("|------------------------------------------|------------------------|")
    print(f"| numba loop (the jitted graph, floor)     | {fmt(rows['numba'])} |")
    print(f"| C loop (trampoline -> cfunc, no GIL)     | {fmt(rows['C'])} |")
    print(f"| C loop / numba loop (accept <= 1.3)      | {fmt(rows['ratio'], 3)} |")
    print(f"| from Python, pot.value_and_grad          | {fmt(rows['python'])} |")
    print(f"| fs NUTS 1 chain, whole run / gradients   | {fmt(rows['fs_nuts'])} |")
    if rows["nutpie_nuts"]:
        print(f"| nutpie NUTS 1 chain, run / gradients     | {fmt(rows['nutpie_nuts'])} |")
    print()
    print("| (b) HMC, 10 steps, iterations per second | median [quartiles] |")
    print("|------------------------------------------|--------------------|")
    print(f"| 1 chain                                  | {fmt(rows['ips1'], 1)} |")
    print(f"| 2 chains in threads (total)              | {fmt(rows['ips2'], 1)} |")
    print(f"| 2 chains / 1 chain (accept >= 1.6)       | {fmt(rows['scale'], 3)} |")
    if rows["nutpie_scale"]:
        print(f"| nutpie 2 chains: cores=2 vs cores=1      | {fmt(rows['nutpie_scale'], 3)} |")


if __name__ == "__main__":
    main()
