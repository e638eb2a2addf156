"""Speed of the fused GLM kernel, as ratios measured in ONE run.

    python bench/glm_ratios.py [--repeats 15] [--sizes 100000x50,50000x200]
                               [--cache cold|warm] [--x-pages default|huge]

For each problem size (N rows, d columns) it times, round-robin (so that a
slow spell of a shared machine hits every contender alike), the median of
``--repeats`` calls after warm-up:

* C   : LogisticRegression.value_and_grad, n_threads = 1 and 2
* NumPy: ``t = X @ b``; value ``sum(logaddexp(0, t) - y t)``; ``X.T @ (expit(t) - y)``
* floor: ``_read_floor`` (one plain read of X), 1 and 2 threads

and prints the ratios, with the acceptance bars, which apply at
N = 100000, d = 50 (other sizes are reported without a bar):

* NumPy(1 thread) / C(1 thread)      bar: >= 3.5
* C(2 threads) / floor(2 threads)    bar: <= 1.3

The exit status is 0 when the bars are met at every size that has them.

Cache state (``--cache``).  The floor is the memory-bandwidth floor: one read
of X from memory.  With ``cold`` (the default), every timed call is preceded
by an untimed read of a scratch array of ``--evict-mb`` MB (64: twice the
32 MB L3 of the development machine; raise it on a machine with a larger
last-level cache), so that every contender reads X from memory.  With
``warm``, calls follow each other with nothing in between, and a part of a
40 MB X can still be in the L3 from the call before: the plain read gains
from that far more than the kernel, which is bound by its arithmetic there.

Pages (``--x-pages``).  ``default`` times X as NumPy allocates it; ``huge``
copies X into a 2 MB-aligned buffer advised MADV_HUGEPAGE (Linux), which
makes the plain read faster (fewer TLB misses) and leaves the kernel, whose
software prefetch already hides them, as it was.

NumPy's BLAS threads: with threadpoolctl installed, NumPy is timed with 1 and
with 2 BLAS threads.  Without it, OPENBLAS_NUM_THREADS / OMP_NUM_THREADS /
MKL_NUM_THREADS are set to 1 before NumPy is imported (unless already set),
so NumPy runs on 1 thread only (BLAS threads cannot be changed portably after
import).  The C kernel's thread count is explicit and is not affected.
"""
import argparse
import importlib.util
import os
import sys

HAVE_THREADPOOLCTL = importlib.util.find_spec("threadpoolctl") is not None
if not HAVE_THREADPOOLCTL and __name__ == "__main__":
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import contextlib  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy.special import expit  # noqa: E402

from fastsurrogate.models._glm import LogisticRegression, _read_floor  # noqa: E402

SIZES = [(100_000, 50), (50_000, 200)]
BAR_SIZE = (100_000, 50)   # the size the acceptance bars are set for
PRIOR_SD = 10.0


def make_problem(n, d, seed=0):
    """Simulated logistic regression: X (n, d) C-contiguous float64, y in {0, 1}, beta."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    beta_true = rng.standard_normal(d)
    y = (rng.random(n) < expit(X @ beta_true)).astype(np.float64)
    beta = beta_true + 0.1 * rng.standard_normal(d)
    return X, y, beta


def numpy_logistic(X, y, beta, prec=1.0 / PRIOR_SD ** 2):
    """The NumPy reference: U and grad U of the logistic regression potential."""
    t = X @ beta
    value = np.sum(np.logaddexp(0.0, t) - y * t) + 0.5 * prec * (beta @ beta)
    grad = X.T @ (expit(t) - y) + prec * beta
    return value, grad


def blas_limits():
    """{n: context manager limiting NumPy's BLAS to n threads} and a note."""
    if HAVE_THREADPOOLCTL:
        from threadpoolctl import threadpool_limits
        return ({1: lambda: threadpool_limits(1, user_api="blas"),
                 2: lambda: threadpool_limits(2, user_api="blas")},
                "threadpoolctl: NumPy timed with 1 and 2 BLAS threads")
    n = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    note = (f"threadpoolctl not installed: NumPy BLAS threads fixed at import "
            f"(OPENBLAS_NUM_THREADS={n})")
    label = int(n) if n.isdigit() else 0
    return {label: contextlib.nullcontext}, note


def huge_page_copy(X):
    """A copy of X in a 2 MB-aligned anonymous mapping advised MADV_HUGEPAGE.

    The array's base chain holds the mapping, which lives as long as it does.
    """
    import mmap
    align = 2 << 20
    m = mmap.mmap(-1, X.nbytes + align)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE)
    buf = np.frombuffer(m, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    Xh = buf[off:off + X.nbytes].view(np.float64).reshape(X.shape)
    Xh[...] = X
    return Xh


def evictor(megabytes):
    """A callable that reads ``megabytes`` MB of scratch memory (2 threads)."""
    scratch = np.ones(int(megabytes * 2**20) // 8)
    return lambda: _read_floor(scratch, 2)


def time_round_robin(fns, repeats, warmup=3, before=None):
    """Seconds of ``repeats`` calls of each callable, one call of each per round.

    ``fns`` maps a label to ``fn`` or to ``(fn, context_factory)``; the
    context (e.g. a BLAS thread limit) is entered outside the timed call.
    ``before``, when given, is called (untimed) before every timed call.
    """
    fns = {k: v if isinstance(v, tuple) else (v, contextlib.nullcontext)
           for k, v in fns.items()}
    for fn, ctx in fns.values():
        with ctx():
            for _ in range(warmup):
                fn()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, (fn, ctx) in fns.items():
            with ctx():
                if before is not None:
                    before()
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
    return times


def run(sizes=SIZES, repeats=15, out=sys.stdout, cache="cold", x_pages="default",
        evict_mb=64):
    limits, note = blas_limits()
    before = evictor(evict_mb) if cache == "cold" else None
    print(f"# {note}", file=out)
    print(f"# {os.cpu_count()} CPUs; median of {repeats} repeats after warm-up", file=out)
    if cache == "cold":
        print(f"# cache: cold (a {evict_mb} MB read before every timed call: X comes "
              "from memory)", file=out)
    else:
        print("# cache: warm (calls back to back: part of X may be in cache)", file=out)
    print(f"# X pages: {x_pages}", file=out)
    results = {}
    all_ok = True
    for n, d in sizes:
        X, y, beta = make_problem(n, d)
        if x_pages == "huge":
            X = huge_page_copy(X)
        c1 = LogisticRegression(X, y, prior_sd=PRIOR_SD, n_threads=1)
        c2 = LogisticRegression(X, y, prior_sd=PRIOR_SD, n_threads=2)
        v_np, g_np = numpy_logistic(X, y, beta)
        for model in (c1, c2):         # every contender computes the same thing
            v, g = model.value_and_grad(beta)
            assert abs(v - v_np) <= 1e-10 * abs(v_np), (v, v_np)
            assert np.allclose(g, g_np, rtol=1e-9, atol=1e-9 * np.abs(g_np).max())
        assert np.isclose(_read_floor(X, 2), X.sum(), rtol=1e-9, atol=1e-6)

        fns = {"C, 1 thread": lambda: c1.value_and_grad(beta),
               "C, 2 threads": lambda: c2.value_and_grad(beta),
               "floor, 1 thread": lambda: _read_floor(X, 1),
               "floor, 2 threads": lambda: _read_floor(X, 2)}
        np_key = None
        for k, ctx in limits.items():
            label = (f"NumPy, {k} BLAS thread{'s' if k != 1 else ''}" if k
                     else "NumPy, default BLAS")
            fns[label] = (lambda: numpy_logistic(X, y, beta), ctx)
            if k == 1:
                np_key = label
        times = time_round_robin(fns, repeats, before=before)
        med = {k: float(np.median(v)) for k, v in times.items()}
        best = {k: float(np.min(v)) for k, v in times.items()}

        print(f"\n## logistic U + grad, N = {n}, d = {d} (X = {X.nbytes / 1e6:.0f} MB)", file=out)
        print(f"  {'':<24s} {'median':>8s}    {'min':>8s}", file=out)
        for k in med:
            print(f"  {k:<24s} {med[k] * 1e3:8.3f} ms {best[k] * 1e3:8.3f} ms", file=out)

        def ratio(a, b):
            return med[a] / med[b], best[a] / best[b]

        print("  ratios (of medians; of minima in brackets)", file=out)
        c1f = ratio("C, 1 thread", "floor, 1 thread")
        print(f"  C(1)/floor(1)            {c1f[0]:8.2f}  ({c1f[1]:.2f})", file=out)
        has_bar = (n, d) == BAR_SIZE

        def verdict(ok, bar):
            return f"   bar {bar}  {'PASS' if ok else 'FAIL'}" if has_bar else ""

        if np_key is not None:
            r1 = ratio(np_key, "C, 1 thread")
            ok1 = r1[0] >= 3.5
            print(f"  NumPy(1)/C(1)            {r1[0]:8.2f}  ({r1[1]:.2f})"
                  f"{verdict(ok1, '>= 3.5')}", file=out)
        else:
            r1, ok1 = (float("nan"), float("nan")), False
            print("  NumPy(1)/C(1)            n/a (NumPy's BLAS thread count unknown)", file=out)
        r2 = ratio("C, 2 threads", "floor, 2 threads")
        ok2 = r2[0] <= 1.3
        print(f"  C(2)/floor(2)            {r2[0]:8.2f}  ({r2[1]:.2f})"
              f"{verdict(ok2, '<= 1.3')}", file=out)
        for k in med:
            if k.startswith("NumPy, 2 "):
                r = ratio(k, "C, 2 threads")
                print(f"  NumPy(2)/C(2)            {r[0]:8.2f}  ({r[1]:.2f})", file=out)
        results[(n, d)] = dict(median=med, min=best, numpy_over_c1=r1[0],
                               c2_over_floor2=r2[0])
        if has_bar:
            all_ok = all_ok and ok1 and ok2
    return results, all_ok


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--sizes", default=",".join(f"{n}x{d}" for n, d in SIZES),
                   help="comma-separated NxD list")
    p.add_argument("--cache", choices=["cold", "warm"], default="cold",
                   help="cold: evict X from the caches before every timed call")
    p.add_argument("--evict-mb", type=float, default=64.0,
                   help="MB read to evict X (cold cache); at least twice the last-level cache")
    p.add_argument("--x-pages", choices=["default", "huge"], default="default",
                   help="huge: X in a 2 MB-aligned MADV_HUGEPAGE buffer")
    args = p.parse_args(argv)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    _, ok = run(sizes, args.repeats, cache=args.cache, x_pages=args.x_pages,
                evict_mb=args.evict_mb)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
