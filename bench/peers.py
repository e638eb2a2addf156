"""Our samplers beside NumPyro, BlackJAX and nutpie on one posterior, in one run.

The posterior is the RNS-HMC paper's simulated logistic regression
(fastsurrogate.datasets.simulate_logistic: N = 100000, d = 50, prior
N(0, 10^2 I)), the settings are the paper's (step size 0.045, L = 6
leapfrog steps; here L is fixed, not drawn from 1..6, because NumPyro's and
BlackJAX's HMC take a fixed number of steps), every chain starts at the MAP
and there is one chain per contender (2 shared cores).

Contenders (each library's own model, and where it makes sense our C
potential through the bridges of fastsurrogate.interop):

  ours hmc / rns-hmc / nnghmc  step 0.045, L = 6, unit metric, no adaptation
  ours vhmc                    its own settings (adapted step, Laplace metric);
                               approximate: its draws target exp(-V)
  numpyro hmc                  HMC(step_size=0.045, num_steps=6,
                               trajectory_length=None, no adaptation)
  numpyro nuts                 default NUTS (adapted step and diagonal metric)
                               (NumPyro's kernels run in a jitted lax.scan
                               compiled ahead of time, as in MCMC.run)
  blackjax hmc                 blackjax.hmc(step 0.045, 6 steps, unit metric)
                               in a jitted lax.scan
  nutpie nuts                  nutpie on the PyMC model (numba backend)

"native" = the library's own model (jax.numpy / PyMC), "bridge" = our
LogisticRegression potential through to_jax / to_pytensor.

Per contender: the min over the 50 coefficients of the bulk ESS
(fastsurrogate.diagnostics.ess_bulk) divided by the seconds of the sampling
phase (training, warm-up and compilation excluded, as in the papers' tables;
nutpie cannot time its tuning apart, so its seconds include tuning),
seconds per iteration, and the acceptance.  The fixed-step HMC contenders
run the same algorithm with the same step and L, so their ESS per
iteration agree in expectation; the seconds per iteration of ours and
NumPyro's are also measured in interleaved short repeats (medians), which
is the less noisy ratio.

Run: python bench/peers.py [--draws 1000] [--burn 200] [--out report.md]
"""
import argparse
import os
import sys
import time

import numpy as np

# before JAX: fastsurrogate sets OpenMP's passive waiting at import, which only
# works before another package loads an OpenMP runtime
import fastsurrogate as fs
from fastsurrogate.diagnostics import ess_bulk

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import cpu_model, emit, log  # noqa: E402

STEP, L, PRIOR_SD = 0.045, 6, 10.0


def min_ess(draws):
    """Min over coordinates of the bulk ESS of draws (chains, n, dim)."""
    return float(np.min(ess_bulk(np.asarray(draws, dtype=np.float64))))


def row(name, draws, seconds, n_iter, accept, note=""):
    e = min_ess(draws)
    return {"name": name, "ess": e, "seconds": seconds, "spi": seconds / n_iter,
            "ess_s": e / seconds, "accept": accept, "note": note}


# -- ours ---------------------------------------------------------------------------

def ours(model, method, q0, args, **kw):
    opts = dict(n_draws=args.draws, n_warmup=args.burn, chains=1, seed=args.seed, init=q0,
                progress=False, step_size=STEP, n_steps=L, random_n_steps=False, adapt=False,
                metric="unit")
    opts.update(kw)
    res = fs.sample(model, method=method, **opts)
    return res, res.sampling_seconds()


# -- NumPyro --------------------------------------------------------------------------

def numpyro_model(X, y):
    import numpyro
    import numpyro.distributions as dist
    Xj, yj = jnp.asarray(X), jnp.asarray(y)

    def model():
        beta = numpyro.sample("beta", dist.Normal(0.0, PRIOR_SD).expand([X.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=Xj @ beta), obs=yj)
    return model


def numpyro_chain(kernel, q0, n_burn, seed, native):
    """NumPyro's kernel initialised at q0 (``n_burn`` warm-up iterations, when it
    adapts) and a function compiling ``n`` of its transitions into one
    jitted ``lax.scan`` (the loop NumPyro's MCMC runs, compiled ahead of time
    so that compilation is not timed; ``MCMC.run`` recompiles on every call)."""
    init = {"beta": jnp.asarray(q0)} if native else jnp.asarray(q0)
    k_init, k_burn, k_draw = jax.random.split(jax.random.PRNGKey(seed), 3)
    state = kernel.init(k_init, n_burn, init, (), {})

    def compiled(n, state):
        def loop(state):
            def one(state, _):
                state = kernel.sample(state, (), {})
                z = state.z["beta"] if native else state.z
                return state, (z, state.accept_prob)
            return jax.lax.scan(one, state, None, length=n)
        return jax.jit(loop).lower(state).compile()

    if n_burn:
        state, _ = compiled(n_burn, state)(state)
    return state, compiled


def numpyro_run(kernel, q0, n_burn, n_draws, seed, native):
    """(draws (1, n, d), sampling seconds, acceptance) of one NumPyro chain."""
    state, compiled = numpyro_chain(kernel, q0, n_burn, seed, native)
    draw = compiled(n_draws, state)
    t0 = time.perf_counter()
    state, (z, acc) = draw(state)
    jax.block_until_ready(z)
    secs = time.perf_counter() - t0
    return np.asarray(z)[None], secs, float(np.mean(acc))


def numpyro_hmc(model_or_potential, native):
    from numpyro.infer import HMC
    kw = dict(step_size=STEP, num_steps=L, trajectory_length=None, adapt_step_size=False,
              adapt_mass_matrix=False, dense_mass=False)
    return HMC(model_or_potential, **kw) if native else HMC(potential_fn=model_or_potential, **kw)


# -- BlackJAX -------------------------------------------------------------------------

def blackjax_hmc_run(logdensity, q0, n_burn, n_draws, seed):
    """One jitted lax.scan of blackjax.hmc steps, compiled ahead of time (not timed)."""
    import blackjax
    hmc = blackjax.hmc(logdensity, step_size=STEP, inverse_mass_matrix=jnp.ones(q0.shape[0]),
                       num_integration_steps=L)

    def loop(state, key, n):
        def one(state, k):
            state, info = hmc.step(k, state)
            return state, (state.position, info.acceptance_rate)
        return jax.lax.scan(one, state, jax.random.split(key, n))

    state = hmc.init(jnp.asarray(q0))
    k_burn, k_draw = jax.random.split(jax.random.PRNGKey(seed))
    burn = jax.jit(lambda s, k: loop(s, k, n_burn)).lower(state, k_burn).compile()
    state, _ = burn(state, k_burn)
    draw = jax.jit(lambda s, k: loop(s, k, n_draws)).lower(state, k_draw).compile()
    t0 = time.perf_counter()
    state, (pos, acc) = draw(state, k_draw)
    jax.block_until_ready(pos)
    secs = time.perf_counter() - t0
    return np.asarray(pos)[None], secs, float(np.mean(acc))


def native_logdensity(X, y):
    Xj, yj = jnp.asarray(X), jnp.asarray(y)

    def logdensity(beta):
        t = Xj @ beta
        # log p(y | t) = y t - log(1 + e^t)
        return jnp.sum(yj * t - jnp.logaddexp(0.0, t)) - 0.5 * jnp.sum(beta ** 2) / PRIOR_SD ** 2
    return logdensity


# -- nutpie ---------------------------------------------------------------------------

def nutpie_run(X, y, q0, n_burn, n_draws, seed, glm=None):
    import nutpie
    import pymc as pm
    with pm.Model() as model:
        if glm is None:
            beta = pm.Normal("beta", 0.0, PRIOR_SD, shape=X.shape[1], initval=q0)
            pm.Bernoulli("y", logit_p=pm.math.dot(X, beta), observed=y)
        else:
            from fastsurrogate.interop import to_pytensor
            beta = pm.Flat("beta", shape=X.shape[1], initval=q0)
            pm.Potential("fs_logp", to_pytensor(glm)(beta))
    compiled = nutpie.compile_pymc_model(model, backend="numba")
    t0 = time.perf_counter()
    idata = nutpie.sample(compiled, draws=n_draws, tune=n_burn, chains=1, seed=seed,
                          progress_bar=False, cores=1)
    secs = time.perf_counter() - t0
    draws = idata.posterior["beta"].values
    steps = idata.sample_stats["n_steps"].values
    # nutpie's tuning cannot be timed apart: its seconds include tuning, so the
    # iterations counted are tuning + draws
    return draws, secs, n_burn + n_draws, float(np.mean(idata.sample_stats["mean_tree_accept"])), \
        float(np.mean(steps))


# -- the run --------------------------------------------------------------------------

def interleaved_spi(model, np_model, q0, n, repeats, seed):
    """Median seconds per iteration of our HMC and NumPyro's (native model) in
    interleaved short runs of n iterations (NumPyro's loop compiled once)."""
    ours_t, np_t = [], []
    state, compiled = numpyro_chain(numpyro_hmc(np_model, True), q0, 0, seed, True)
    draw = compiled(n, state)
    for r in range(repeats):
        res = fs.sample(model, method="hmc", n_draws=n, n_warmup=0, chains=1, seed=seed + r,
                        init=q0, progress=False, step_size=STEP, n_steps=L,
                        random_n_steps=False, adapt=False, metric="unit")
        ours_t.append(res.sampling_seconds() / n)
        t0 = time.perf_counter()
        out, (z, _) = draw(state)
        jax.block_until_ready(z)
        np_t.append((time.perf_counter() - t0) / n)
        state = out
    return float(np.median(ours_t)), float(np.median(np_t)), ours_t, np_t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100000, help="observations (paper: 100000)")
    ap.add_argument("--draws", type=int, default=1000, help="kept draws per contender")
    ap.add_argument("--burn", type=int, default=200,
                    help="burn-in of the fixed-step HMCs (from the MAP), and NUTS's warm-up")
    ap.add_argument("--explore", type=int, default=1000,
                    help="exploration iterations of RNS-HMC / NNgHMC, warm-up of VHMC")
    ap.add_argument("--n-hidden", type=int, default=1000, help="RNS-HMC hidden units")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved timing repeats")
    ap.add_argument("--repeat-iters", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2,
                    help="threads of our data kernel (XLA uses every core too)")
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--skip", default="", help="comma-separated contender names to skip")
    ap.add_argument("--out", default=None, help="also write the Markdown report here")
    args = ap.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    t_all = time.perf_counter()
    X, y, _ = fs.datasets.simulate_logistic(args.n, 50, seed=args.seed)
    model = fs.models.LogisticRegression(X, y, prior_sd=PRIOR_SD, n_threads=args.threads)
    import scipy.optimize as so
    q0 = so.minimize(model.value_and_grad, np.zeros(50), jac=True, method="L-BFGS-B").x
    from fastsurrogate.interop import to_jax
    bridge = to_jax(model)
    logp = native_logdensity(X, y)
    rows = []

    def attempt(name, fn):
        if name in skip:
            return
        log(f"{name} ...")
        t = time.perf_counter()
        try:
            r = fn()
        except Exception as exc:  # noqa: BLE001 - a peer that fails is reported, not fatal
            rows.append({"name": name, "error": f"{type(exc).__name__}: {exc}"[:200]})
            log(f"{name} failed: {exc!r}")
            return
        rows.append(r)
        log(f"{name}: min ESS {r['ess']:.0f}, {r['spi'] * 1e3:.2f} ms/iter, "
            f"min ESS/s {r['ess_s']:.1f} ({time.perf_counter() - t:.0f} s)")
        if args.out:        # the table so far, in case the run is stopped
            with open(args.out, "w") as f:
                f.write(report(rows, None, args, time.perf_counter() - t_all) + "\n")

    def our(method, label, note="", **kw):
        res, secs = ours(model, method, q0, args, **kw)
        return row(label, res.draws, secs, args.draws, float(np.nanmean(res.stats["accept_prob"])),
                   note + (f"; training {res.timings.get('train', 0.0):.1f} s"
                           if "train" in res.timings else ""))

    attempt("ours hmc", lambda: our("hmc", "ours hmc"))
    attempt("ours rns-hmc", lambda: our("rns-hmc", "ours rns-hmc", f"s = {args.n_hidden}",
                                        n_warmup=args.explore, n_hidden=args.n_hidden,
                                        input_scale=0.5, guard=None))
    attempt("ours nnghmc", lambda: our("nnghmc", "ours nnghmc", "h = 100",
                                       n_warmup=args.explore, n_hidden=100))
    attempt("ours vhmc", lambda: (lambda res: row(
        "ours vhmc", res.draws, res.sampling_seconds(), args.draws,
        float(np.nanmean(res.stats["accept_prob"])),
        f"approximate (targets exp(-V)); s = 500, own adapted step; training "
        f"{res.timings.get('train', 0.0):.1f} s"))(
        fs.sample(model, method="vhmc", n_draws=args.draws, n_warmup=args.explore, chains=1,
                  seed=args.seed, n_hidden=500, progress=False)))

    def np_hmc(native):
        d, s, a = numpyro_run(numpyro_hmc(numpyro_model(X, y) if native else bridge.potential_fn,
                                          native), q0, args.burn, args.draws, args.seed, native)
        return row("numpyro hmc " + ("native" if native else "bridge"), d, s, args.draws, a,
                   "trajectory_length=None")

    def np_nuts(native):
        from numpyro.infer import NUTS
        k = NUTS(numpyro_model(X, y)) if native else NUTS(potential_fn=bridge.potential_fn)
        d, s, a = numpyro_run(k, q0, args.burn, args.draws, args.seed, native)
        return row("numpyro nuts " + ("native" if native else "bridge"), d, s, args.draws, a,
                   f"adapted, {args.burn} warm-up")

    def bj_hmc(native):
        d, s, a = blackjax_hmc_run(logp if native else bridge, q0, args.burn, args.draws,
                                   args.seed)
        return row("blackjax hmc " + ("native" if native else "bridge"), d, s, args.draws, a)

    def np_nutpie(native):
        d, s, n_iter, a, steps = nutpie_run(X, y, q0, args.burn, args.draws, args.seed,
                                            None if native else model)
        return row("nutpie nuts " + ("native" if native else "bridge"), d, s, n_iter, a,
                   f"seconds include {args.burn} tuning iterations; {steps:.1f} "
                   "leapfrog steps/iter")

    attempt("numpyro hmc native", lambda: np_hmc(True))
    attempt("numpyro hmc bridge", lambda: np_hmc(False))
    attempt("numpyro nuts native", lambda: np_nuts(True))
    attempt("blackjax hmc native", lambda: bj_hmc(True))
    attempt("blackjax hmc bridge", lambda: bj_hmc(False))
    attempt("nutpie nuts native", lambda: np_nutpie(True))
    attempt("nutpie nuts bridge", lambda: np_nutpie(False))

    spi = None
    if args.repeats > 0 and "numpyro hmc native" not in skip:
        log("interleaved timing: ours hmc / numpyro hmc native ...")
        spi = interleaved_spi(model, numpyro_model(X, y), q0, args.repeat_iters,
                              args.repeats, args.seed)
    emit(report(rows, spi, args, time.perf_counter() - t_all), args.out)
    return 0


def report(rows, spi, args, wall):
    by = {r["name"]: r for r in rows if "error" not in r}
    lines = [f"CPU: {cpu_model()} ({os.cpu_count()} CPUs, shared; load average "
             f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end)",
             f"jax {jax.__version__}, float64; our kernel on {args.threads} thread(s); "
             f"N = {args.n}, d = 50, step {STEP}, L = {L} (fixed), from the MAP, one chain each; "
             f"{args.draws} draws after {args.burn} burn-in ({args.explore} exploration for "
             "RNS-HMC / NNgHMC, warm-up for VHMC)", "",
             "| contender | min ESS | s / iter (ms) | min ESS / s | acceptance | note |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | - | - | - | - | failed: {r['error']} |")
            continue
        lines.append(f"| {r['name']} | {r['ess']:.0f} | {r['spi'] * 1e3:.2f} | "
                     f"{r['ess_s']:.1f} | {r['accept']:.2f} | {r['note']} |")
    lines.append("")
    base = by.get("numpyro hmc native")
    if base:
        for name, target in (("ours hmc", 3.0), ("ours rns-hmc", 10.0)):
            if name in by:
                ratio = by[name]["ess_s"] / base["ess_s"]
                lines.append(f"- {name} / numpyro hmc native, min ESS/s: {ratio:.1f}x "
                             f"(target {target:g}x: {'met' if ratio >= target else 'NOT met'})")
        if "ours hmc" in by:
            lines.append(f"- numpyro hmc native / ours hmc, s per iteration (the long runs): "
                         f"{base['spi'] / by['ours hmc']['spi']:.2f}x")
    if spi is not None:
        o, n, ot, nt = spi
        lines.append(f"- interleaved, {args.repeats} x {args.repeat_iters} iterations, medians: "
                     f"ours hmc {o * 1e3:.2f} ms/iter, numpyro hmc native {n * 1e3:.2f} ms/iter: "
                     f"{n / o:.2f}x (all: ours {', '.join(f'{t * 1e3:.2f}' for t in ot)}; "
                     f"numpyro {', '.join(f'{t * 1e3:.2f}' for t in nt)})")
    lines.append(f"- whole run {wall:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
