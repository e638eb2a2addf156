"""fastsurrogate NUTS against NumPyro NUTS, min ESS per second of the whole run, in one run.

    python bench/nuts_vs_numpyro.py [--repeats 3] [--n-warmup 500] [--n-draws 500]
                                    [--chains 4] [--numpyro-method sequential vectorized]

Posterior: the RNS-HMC paper's simulated logistic regression
(fs.datasets.simulate_logistic(n=100000, d=50, seed=1)), prior N(0, 100 I),
no intercept beyond X's first column.  Both samplers with their DEFAULT
settings (Stan-style warm-up: dual averaging to 0.8, diagonal metric
windows; max tree depth 10), float64, the same chains, warm-up and draw
counts, default initialisation each.

- fastsurrogate: ``fs.sample(model, "nuts", chains=C)``; the model with
  its default ``n_threads=1``, the chains in threads (2 cores).
- NumPyro: its native jnp model (``Normal(0, 10)`` prior on beta,
  ``Bernoulli(logits=X @ beta)``), ``jax_enable_x64``, ``NUTS(model)``,
  ``MCMC(..., chain_method=M)`` for each M given (JAX's CPU backend uses
  both cores inside one matrix product).

Figure: min over parameters of the bulk ESS (fastsurrogate.diagnostics, the
same estimator for both) over the WHOLE wall clock of the call (warm-up and
sampling; for NumPyro also tracing and XLA compilation, which a user pays
too; its compile time is printed separately from a tiny run).  Repeats
interleaved, medians.  Agreement: for every parameter
z = (mean_ours - mean_numpyro) / sqrt(mcse_ours^2 + mcse_numpyro^2) from the
first repeat; with 50 parameters, max |z| is about 2.2-3 under agreement.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import log, machine_line  # noqa: E402


def data():
    import fastsurrogate as fs
    X, y, beta = fs.datasets.simulate_logistic(n=100000, d=50, seed=1)
    return X, y, beta


def run_ours(X, y, chains, n_warmup, n_draws, seed):
    import fastsurrogate as fs
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    t0 = time.perf_counter()
    res = fs.sample(model, "nuts", n_draws=n_draws, n_warmup=n_warmup, chains=chains,
                    seed=seed, progress=False)
    wall = time.perf_counter() - t0
    steps = float(res.stats["n_steps"].sum() + res.warmup_stats["n_steps"].sum()) \
        if res.warmup_stats else float(res.stats["n_steps"].sum())
    return dict(draws=np.asarray(res.draws), wall=wall, grads=steps,
                step=float(np.mean(res.step_size)),
                depth=float(res.stats["tree_depth"].mean()))


def numpyro_runner(X, y, chains, n_warmup, n_draws, method):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    Xj, yj = jnp.asarray(X), jnp.asarray(y)
    d = X.shape[1]

    def model(X, y):
        beta = numpyro.sample("beta", dist.Normal(jnp.zeros(d), 10.0).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    def run(seed, n_warmup=n_warmup, n_draws=n_draws):
        mcmc = MCMC(NUTS(model), num_warmup=n_warmup, num_samples=n_draws, num_chains=chains,
                    chain_method=method, progress_bar=False)
        t0 = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(seed), Xj, yj, extra_fields=("num_steps",))
        draws = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])
        wall = time.perf_counter() - t0
        nsteps = np.asarray(mcmc.get_extra_fields(group_by_chain=True)["num_steps"])
        return dict(draws=draws, wall=wall, sample_steps=float(nsteps.sum()),
                    step=float(np.mean(np.asarray(
                        mcmc.last_state.adapt_state.step_size))))
    return run


def summarise(r):
    from fastsurrogate import diagnostics
    x = r["draws"]
    ess = diagnostics.ess_bulk(x)
    r.update(ess=float(np.min(ess)), rate=float(np.min(ess)) / r["wall"],
             mean=x.mean(axis=(0, 1)), mcse=diagnostics.mcse_mean(x),
             rhat=float(np.max(diagnostics.rhat(x))))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-warmup", type=int, default=500)
    ap.add_argument("--n-draws", type=int, default=500)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--numpyro-method", nargs="+", default=["sequential", "vectorized"])
    args = ap.parse_args()
    print(machine_line(), flush=True)
    X, y, _ = data()
    runners = {f"numpyro {m}": numpyro_runner(X, y, args.chains, args.n_warmup, args.n_draws, m)
               for m in args.numpyro_method}
    compile_s = {}
    for name, run in runners.items():           # compile time alone, from a tiny run
        t = run(0, n_warmup=2, n_draws=2)["wall"]
        compile_s[name] = t
        log(f"{name}: tiny run (2 + 2 iterations, mostly tracing and compilation) {t:.1f} s")
    out = {"fastsurrogate": []}
    out.update({k: [] for k in runners})
    for rep in range(args.repeats):
        seed = 1 + rep
        log(f"round {rep}: fastsurrogate")
        out["fastsurrogate"].append(summarise(
            run_ours(X, y, args.chains, args.n_warmup, args.n_draws, seed)))
        r = out["fastsurrogate"][-1]
        log(f"  wall {r['wall']:.1f} s, min ESS {r['ess']:.0f}, {r['rate']:.2f}/s")
        for name, run in runners.items():
            log(f"round {rep}: {name}")
            out[name].append(summarise(run(seed)))
            r = out[name][-1]
            log(f"  wall {r['wall']:.1f} s, min ESS {r['ess']:.0f}, {r['rate']:.2f}/s")
    print(f"\nsimulated logistic regression N = 100000, d = 50, float64; {args.chains} chains, "
          f"{args.n_warmup} warm-up + {args.n_draws} draws each, default settings; "
          f"medians of {args.repeats} interleaved repeats; whole-run wall clock\n")
    print("| sampler | whole run s | min bulk ESS | min ESS/s | ours / this | max R-hat "
          "| step size | notes |")
    print("|---|---|---|---|---|---|---|---|")
    ours = np.median([r["rate"] for r in out["fastsurrogate"]])
    for name, rs in out.items():
        rate = np.median([r["rate"] for r in rs])
        note = (f"mean tree depth {np.mean([r['depth'] for r in rs]):.2f}" if name == "fastsurrogate"
                else f"tiny-run (compile) {compile_s[name]:.1f} s")
        print(f"| {name} | {np.median([r['wall'] for r in rs]):.1f} | "
              f"{np.median([r['ess'] for r in rs]):.0f} | {rate:.2f} | {ours / rate:.2f}x | "
              f"{max(r['rhat'] for r in rs):.3f} | {np.median([r['step'] for r in rs]):.4f} | "
              f"{note} |")
    print("\nper-repeat min ESS/s:", {k: [round(r["rate"], 2) for r in v] for k, v in out.items()})
    a = out["fastsurrogate"][0]
    for name in runners:
        b = out[name][0]
        z = (a["mean"] - b["mean"]) / np.sqrt(a["mcse"] ** 2 + b["mcse"] ** 2)
        print(f"agreement with {name} (repeat 0): max |z| of the means over {z.size} "
              f"parameters {np.max(np.abs(z)):.2f}, |z| > 3: {int(np.sum(np.abs(z) > 3))}")


if __name__ == "__main__":
    main()
