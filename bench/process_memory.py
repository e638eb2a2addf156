"""Peak memory of chains in a ProcessPoolExecutor, X in memory or memory-mapped.

    python bench/process_memory.py [--rows 1000000] [--dim 50] [--mode both|memory|mmap]

X (rows x dim, standard normal) is saved to a temporary .npy file; each mode
runs in a fresh process: X loaded into memory (``np.load(path)``) or mapped
(``np.load(path, mmap_mode="r")``), a LogisticRegression on it, NUTS (10 +
10 iterations, tree depth <= 4, 2 chains) on a ``ProcessPoolExecutor(2)``
(spawn).  Printed: the caller's peak RSS and the largest worker's (a mapped
file's pages count in the RSS of every process that touched them, but are
one copy in memory).
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile


def child(path, mode):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    import numpy as np
    import fastsurrogate as fs
    X = np.load(path, mmap_mode="r" if mode == "mmap" else None)
    y = (np.asarray(X[:, 0]) > 0).astype(float)
    m = fs.models.LogisticRegression(X, y)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        fs.sample(m, "nuts", n_draws=10, n_warmup=10, chains=2, seed=1, executor=ex,
                  max_tree_depth=4, progress=False)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"{mode:6s}: X {X.nbytes / 1e9:.2f} GB; caller peak RSS {me:.2f} GB, largest worker "
          f"peak RSS {kids:.2f} GB", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--mode", choices=["both", "memory", "mmap"], default="both")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(*args.child)
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "X.npy")
        np.save(path, np.random.default_rng(0).standard_normal((args.rows, args.dim)))
        for mode in (["memory", "mmap"] if args.mode == "both" else [args.mode]):
            subprocess.run([sys.executable, __file__, "--child", path, mode], check=True)


if __name__ == "__main__":
    main()
