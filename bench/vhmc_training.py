"""VHMC training time per iteration: the old Python loop (one C chain call per
iteration, then grad U, the features, the SMW update, mu_t and a re-evaluation
of the state in Python) against the C chain hook (ScoreMatchingHook: the same
steps inside the chain loop, Python once per chunk), in one run.

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python bench/vhmc_training.py [--iters 300] [--repeats 5]

Problem: ``fs.datasets.simulate_logistic(n=10000, d=20, seed=1)``,
``fs.models.LogisticRegression(X, y, prior_sd=10, n_threads=1)``, s = 500
hidden units, the VHMC surrogate of ``VHMC.make_surrogate`` (whitened inputs,
ridge 1e-6), L = 10 random steps, step size from the heuristic, no
adaptation, mu_t = 1 - exp(-t / (iters / 10)).  Each repeat runs both paths
from the same state and seed (interleaved: old, new, old, new, ...), checks
that they give the same draws and weights bit for bit, and times them; the
figures are medians over repeats.
"""
import argparse
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.core._blas_threads import blas_threads
from fastsurrogate.core._hmc import Chain, new_trace
from fastsurrogate.surrogates._online import SMWTrainer, ScoreMatchingHook
from fastsurrogate.surrogates.laplace import laplace_approximation
from fastsurrogate.samplers.vhmc import VHMC, _mu_table, _exp_schedule
from _benchutil import emit, machine_line


def _setup(vh, lap, step, mu, seed):
    net, V, lam = vh.make_surrogate(lap, seed=7)
    trainer = SMWTrainer(vh.n_hidden, lap.dim, lam)
    chain = Chain(V, V, lap.mean, np.random.default_rng(seed), step_size=step, n_steps=10,
                  random_n_steps=True, inv_metric=lap.cov)
    return net, V, trainer, chain


def train_python(exact, net, V, trainer, chain, trace, mu):
    """The per-iteration loop of VHMC.train before the hook (n_train fixed, no "auto")."""
    accepted, draws = trace["accepted"], trace["draws"]
    v = np.zeros(trainer.n_hidden)
    for t in range(mu.shape[0] - 1):
        chain.run(trace, t, 1)
        if accepted[t]:
            q = draws[t]
            g = exact.grad(q)
            if np.all(np.isfinite(g)):
                A = net.grad_features(q)
                r = A @ v - g
                trainer.update(A, g)
                v = trainer.weights
                net.output_weights = v
                _ = (float(r @ r), float(g @ g))
        m = mu[t + 1]
        V.weights = (m, 1.0 - m)
        chain.set_position(draws[t])


def train_hook(exact, net, V, trainer, chain, trace, mu):
    """The C hook, one chain call for the whole span (no breakdown at this size)."""
    hook = ScoreMatchingHook(exact, net, V, trainer, mu)
    n = mu.shape[0] - 1
    n_done, status = chain.run(trace, 0, n, None, hook)
    assert n_done == n and status == 0, (n_done, status)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=500)
    ap.add_argument("--out", metavar="FILE")
    args = ap.parse_args()
    X, y, _ = fs.datasets.simulate_logistic(n=10000, d=20, seed=1)
    exact = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1)
    vh = VHMC(exact, n_hidden=args.hidden, n_train=args.iters)
    lap = laplace_approximation(exact)
    mu = _mu_table(_exp_schedule(max(1.0, args.iters / 10.0)), args.iters)
    _, _, _, ch = _setup(vh, lap, 0.5, mu, 0)
    step = ch.find_step_size()
    times = {"python": [], "hook": []}
    with blas_threads(1):
        for rep in range(args.repeats):
            out = {}
            for name, fn in (("python", train_python), ("hook", train_hook)):
                net, V, trainer, chain = _setup(vh, lap, step, mu, 100 + rep)
                trace = new_trace(args.iters, exact.dim)
                t0 = time.perf_counter()
                fn(exact, net, V, trainer, chain, trace, mu)
                times[name].append((time.perf_counter() - t0) / args.iters)
                out[name] = (trace["draws"].copy(), trainer.weights)
            assert np.array_equal(out["python"][0], out["hook"][0]), "draws differ"
            assert np.array_equal(out["python"][1], out["hook"][1]), "weights differ"
    old, new = np.median(times["python"]), np.median(times["hook"])
    acc = float(trace["accepted"].mean())
    report = "\n".join([
        machine_line(),
        f"VHMC training, logistic regression n=10000 d=20, s={args.hidden}, L=10 (random), "
        f"{args.iters} iterations x {args.repeats} interleaved repeats, acceptance {acc:.2f}; "
        f"draws and weights identical on both paths",
        f"  Python loop (Chain.run per iteration): {old * 1e3:8.3f} ms/iteration "
        f"(runs: {' '.join(f'{x * 1e3:.3f}' for x in times['python'])})",
        f"  C hook (ScoreMatchingHook):            {new * 1e3:8.3f} ms/iteration "
        f"(runs: {' '.join(f'{x * 1e3:.3f}' for x in times['hook'])})",
        f"  ratio old / new: {old / new:.3f}",
    ])
    emit(report, args.out)


if __name__ == "__main__":
    main()
