"""What checkpoints cost: RNS-HMC on the simulated logistic regression,
without checkpoints, with ``checkpoint_every``, and resumed from the final
checkpoint (every span copied, the training repeated); interleaved repeats,
medians, in one run.

    python bench/checkpoint_cost.py [--n 20000 --d 20 --repeats 3 --every 100]
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

import fastsurrogate as fs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak import cpu_model  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--n-hidden", type=int, default=500)
    p.add_argument("--n-warmup", type=int, default=1000)
    p.add_argument("--n-draws", type=int, default=2000)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    X, y, _ = fs.datasets.simulate_logistic(args.n, args.d, seed=0)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    opts = dict(n_hidden=args.n_hidden, step_size=0.045, n_steps=6, adapt=False, guard=None)
    path = os.path.join(tempfile.mkdtemp(prefix="fs_ckcost_"), "ck.npz")
    kw = dict(chains=1, seed=1, progress=False)
    times = {"plain": [], "checkpoint": [], "resume": []}
    ref = None
    for _ in range(args.repeats):
        for case in times:
            t0 = time.perf_counter()
            if case == "plain":
                res = fs.RNSHMC(model, **opts).sample(args.n_draws, args.n_warmup, **kw)
            elif case == "checkpoint":
                res = fs.RNSHMC(model, **opts).sample(args.n_draws, args.n_warmup, **kw,
                                                      checkpoint=path,
                                                      checkpoint_every=args.every)
            else:
                res = fs.RNSHMC(model, **opts).sample(args.n_draws, args.n_warmup, **kw,
                                                      resume=path)
            times[case].append(time.perf_counter() - t0)
            ref = res if ref is None else ref
            assert np.array_equal(res.draws, ref.draws)
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"# {cpu_model()}; N={args.n} d={args.d} s={args.n_hidden} warmup={args.n_warmup} "
          f"draws={args.n_draws} checkpoint_every={args.every}; medians of {args.repeats}")
    print(f"no checkpoint            {med['plain']:8.2f} s")
    print(f"checkpoint_every={args.every:<6d}  {med['checkpoint']:8.2f} s  "
          f"({med['checkpoint'] / med['plain']:.3f}x)")
    print(f"resume of the finished run {med['resume']:6.2f} s  "
          f"({med['resume'] / med['plain']:.3f}x; draws identical)")
    print(f"checkpoint file {os.path.getsize(path) / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
