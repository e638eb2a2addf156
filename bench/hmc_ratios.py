"""Chain-loop overhead and exact-HMC cost, as ratios measured in one run.

    python bench/hmc_ratios.py [--threads 1 2]

1. Leapfrog overhead on a 50-d standard normal (gradient = q): seconds of a
   whole chain run minus the same number of gradient calls made alone,
   per leapfrog step.  Bar: <= 0.5 us.
2. Exact HMC on the RNS-HMC paper's simulated logistic regression
   (N = 100000, d = 50, step 0.045, L = 6 fixed): seconds per iteration over
   the seconds of 6 gradient evaluations measured alone.  Bar: <= 1.15.
"""
import argparse
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.core._hmc import Chain, new_trace


def median_time(fn, repeats=7):
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def leapfrog_overhead(dim=50, n_iter=20000, n_steps=10, repeats=7):
    pot = fs.models.StandardNormal(dim)
    q = np.random.default_rng(0).standard_normal(dim)
    chain = Chain(pot, pot, q, np.random.default_rng(1), step_size=0.15, n_steps=n_steps)
    trace = new_trace(n_iter, dim)
    t_chain = median_time(lambda: chain.run(trace, 0, n_iter), repeats)
    n_grad = n_iter * n_steps
    t_grad = median_time(lambda: pot._eval_loop(q, n_grad), repeats)
    per_step = (t_chain - t_grad) / n_grad
    return dict(chain_s=t_chain, grads_s=t_grad, overhead_us_per_step=per_step * 1e6,
                accept=float(trace["accept_prob"].mean()))


def exact_hmc_logistic(n_threads=1, n_iter=200, repeats=5):
    X, y, beta = fs.datasets.simulate_logistic(100000, 50, seed=1)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=n_threads)
    chain = Chain(model, model, beta, np.random.default_rng(2), step_size=0.045, n_steps=6)
    trace = new_trace(n_iter, 50)
    t_iter = median_time(lambda: chain.run(trace, 0, n_iter), repeats) / n_iter
    t_grad6 = median_time(lambda: model._eval_loop(beta, 6 * n_iter), repeats) / n_iter
    return dict(n_threads=n_threads, s_per_iter=t_iter, s_6_grads=t_grad6,
                ratio=t_iter / t_grad6, accept=float(trace["accept_prob"].mean()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    r = leapfrog_overhead()
    print(f"leapfrog overhead, 50-d standard normal: chain {r['chain_s']:.4f} s, "
          f"gradients alone {r['grads_s']:.4f} s -> {r['overhead_us_per_step']:.3f} us/step "
          f"beyond the gradient (bar <= 0.5)")
    for nt in args.threads:
        r = exact_hmc_logistic(nt)
        print(f"exact HMC, logistic N=100000 d=50, {nt} thread(s): {r['s_per_iter'] * 1e3:.3f} ms/iter, "
              f"6 gradients alone {r['s_6_grads'] * 1e3:.3f} ms -> ratio {r['ratio']:.3f} "
              f"(bar <= 1.15), acceptance {r['accept']:.3f}")


if __name__ == "__main__":
    main()
