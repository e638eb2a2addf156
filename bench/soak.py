"""Soak test (not run in CI): RNS-HMC with periodic checkpoints, stopped and
resumed from its own checkpoint again and again, watching memory.

    python bench/soak.py                       # 30 minutes
    python bench/soak.py --minutes 3 --n 20000 --d 20

Each cycle runs RNS-HMC on the RNS-HMC paper's simulated logistic
regression with ``checkpoint=`` and stops it after a random number of
seconds (SIGINT to itself: the same path as Ctrl-C), then resumes from the
checkpoint until that run finishes; then the next run starts (a new seed).
The first run is also made uninterrupted and compared bit for bit
(``--no-verify`` skips that).  RSS (VmRSS from /proc/self/status, and the
peak from getrusage) is printed at the start, every ``--report`` seconds
and at the end.
"""
import argparse
import os
import resource
import signal
import sys
import tempfile
import threading
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.reproduce._report import cpu_model


def rss_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0




def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--n", type=int, default=100000, help="rows of X (paper: 100000)")
    p.add_argument("--d", type=int, default=50, help="columns of X (paper: 50)")
    p.add_argument("--n-hidden", type=int, default=500)
    p.add_argument("--n-warmup", type=int, default=1000)
    p.add_argument("--n-draws", type=int, default=2000)
    p.add_argument("--every", type=int, default=100, help="checkpoint_every (iterations)")
    p.add_argument("--stop-after", type=float, default=8.0,
                   help="mean seconds before each simulated Ctrl-C")
    p.add_argument("--report", type=float, default=60.0, help="seconds between RSS lines")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--dir", default=None, help="folder for the checkpoint (default: a temp dir)")
    args = p.parse_args(argv)

    X, y, _ = fs.datasets.simulate_logistic(args.n, args.d, seed=0)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    opts = dict(n_hidden=args.n_hidden, step_size=0.045, n_steps=6, adapt=False,
                guard=None)
    folder = args.dir or tempfile.mkdtemp(prefix="fs_soak_")
    path = os.path.join(folder, "soak.npz")
    rng = np.random.default_rng(1)
    t_start = time.perf_counter()
    deadline = t_start + 60.0 * args.minutes
    # a shell starts background jobs with SIGINT ignored, and Python then keeps
    # it ignored: put Python's handler back, or the simulated Ctrl-C never lands
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"# {cpu_model()}; N={args.n} d={args.d} s={args.n_hidden} "
          f"warmup={args.n_warmup} draws={args.n_draws} checkpoint_every={args.every}")
    print(f"start: RSS {rss_mb():.1f} MB (peak {peak_mb():.1f} MB)", flush=True)
    next_report = t_start + args.report
    runs = stops = resumes = 0
    verified = None
    while time.perf_counter() < deadline:
        seed = runs + 1
        if os.path.exists(path):
            os.remove(path)
        kw = dict(chains=1, seed=seed, progress=False, checkpoint=path,
                  checkpoint_every=args.every)
        res = None
        first = True
        while res is None or res.interrupted:
            wait = float(rng.exponential(args.stop_after))
            timer = threading.Timer(wait, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            try:
                if first or not os.path.exists(path):
                    res = fs.RNSHMC(model, **opts).sample(args.n_draws, args.n_warmup, **kw)
                else:
                    res = fs.RNSHMC(model, **opts).sample(args.n_draws, args.n_warmup,
                                                          resume=path, **kw)
                    resumes += 1
            except KeyboardInterrupt:     # landed outside the sampler's own handling
                res = None
            finally:
                timer.cancel()
            first = False
            if res is None or res.interrupted:
                stops += 1
            now = time.perf_counter()
            if now >= next_report:
                print(f"{(now - t_start) / 60:6.1f} min: RSS {rss_mb():.1f} MB (peak "
                      f"{peak_mb():.1f} MB), runs {runs}, stops {stops}, resumes {resumes}",
                      flush=True)
                next_report = now + args.report
            if now >= deadline:
                break
        if res is None or res.interrupted:
            break
        runs += 1
        if runs == 1 and not args.no_verify:
            ref = fs.RNSHMC(model, **opts).sample(args.n_draws, args.n_warmup, chains=1,
                                                  seed=seed, progress=False)
            verified = bool(np.array_equal(ref.draws, res.draws)
                            and np.array_equal(ref.warmup_draws, res.warmup_draws))
            print(f"run 1 (stopped and resumed {resumes} times) equals the uninterrupted "
                  f"run bit for bit: {verified}", flush=True)
    now = time.perf_counter()
    print(f"end after {(now - t_start) / 60:.1f} min: RSS {rss_mb():.1f} MB (peak "
          f"{peak_mb():.1f} MB), finished runs {runs}, simulated stops {stops}, "
          f"resumes {resumes}", flush=True)
    return 0 if verified is not False else 1


if __name__ == "__main__":
    sys.exit(main())
