"""Worked example: an ODE posterior written in JAX and in PyMC.

Lotka-Volterra predator-prey dynamics,

    du/dt = alpha u - beta u v,     dv/dt = -gamma v + delta u v,

observed at t = 1, ..., 20 with log-normal noise, as in Carpenter's Stan case
study on the Hudson's Bay Company pelts (here the data are simulated from
known parameters, so that we can check the posterior covers them).  Every
evaluation of the log density solves the ODE; every gradient solves its
adjoint: the kind of model whose gradient is expensive and where a surrogate
should pay.

Run it:  python docs/examples/lotka_volterra.py  [--quick]

It needs jax and diffrax (``pip install jax diffrax``) for the JAX model, and
pymc with numba for the PyMC one (skipped when absent).  It prints, for each
model, exact NUTS against ``fs.sample``'s default (NUTS driven by a
surrogate, with an exact correction), both over the whole run, and the 90 %
posterior intervals beside the true parameters.
"""
import argparse
import sys

import numpy as np
from scipy.integrate import solve_ivp

import fastsurrogate as fs

NAMES = ["alpha", "beta", "gamma", "delta", "u0", "v0", "sigma"]
TRUE = dict(alpha=0.55, beta=0.028, gamma=0.80, delta=0.024, u0=33.0, v0=6.0, sigma=0.25)
TIMES = np.arange(1.0, 21.0)


def simulate(seed=1):
    """Observations (20, 2) of (prey, predators) from the true parameters."""
    p = TRUE

    def rhs(t, z):
        u, v = z
        return [p["alpha"] * u - p["beta"] * u * v, -p["gamma"] * v + p["delta"] * u * v]
    sol = solve_ivp(rhs, (0.0, TIMES[-1]), [p["u0"], p["v0"]], t_eval=TIMES,
                    rtol=1e-10, atol=1e-10)
    rng = np.random.default_rng(seed)
    return sol.y.T * np.exp(p["sigma"] * rng.normal(size=(TIMES.size, 2)))


# Priors (on the positive parameters, sampled on the log scale):
#   alpha, gamma ~ log-normal(log 1, 0.5);  beta, delta ~ log-normal(log 0.05, 0.5)
#   u0, v0 ~ log-normal(log 10, 1);  sigma ~ log-normal(log 0.25, 1)
PRIOR_LOC = np.log([1.0, 0.05, 1.0, 0.05, 10.0, 10.0, 0.25])
PRIOR_SCALE = np.array([0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0])


# -- the model in JAX, with diffrax ------------------------------------------------

def jax_model(y):
    """(logdensity, example, constrain) for fs.from_jax."""
    import jax
    import jax.numpy as jnp
    import diffrax

    jax.config.update("jax_enable_x64", True)
    y = jnp.asarray(y)
    loc, scale = jnp.asarray(PRIOR_LOC), jnp.asarray(PRIOR_SCALE)

    def rhs(t, z, theta):
        alpha, beta, gamma, delta = theta
        u, v = z
        return jnp.stack([alpha * u - beta * u * v, -gamma * v + delta * u * v])

    def trajectory(theta, z0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs), diffrax.Tsit5(), t0=0.0, t1=float(TIMES[-1]), dt0=0.1,
            y0=z0, args=theta, saveat=diffrax.SaveAt(ts=jnp.asarray(TIMES)),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
            max_steps=4096, throw=False, adjoint=diffrax.ForwardMode())
        # far out in a warm-up trajectory the solver may give up: its failure
        # becomes an infinite potential (a divergence), not an error
        return jnp.where(sol.result == diffrax.RESULTS.successful, sol.ys, jnp.nan)

    def logdensity(log_p):
        p = jnp.exp(log_p)
        z = trajectory(p[:4], p[4:6])
        sigma = p[6]
        # log-normal likelihood of the observations given the trajectory
        r = (jnp.log(y) - jnp.log(z)) / sigma
        loglik = -0.5 * jnp.sum(r ** 2) - y.size * jnp.log(sigma)
        # log-normal priors on p = normal priors on log p (no Jacobian needed)
        logprior = -0.5 * jnp.sum(((log_p - loc) / scale) ** 2)
        return loglik + logprior

    def constrain(log_p):
        p = jnp.exp(log_p)
        return {n: p[i] for i, n in enumerate(NAMES)}

    return logdensity, jnp.asarray(PRIOR_LOC), constrain


# -- the same model in PyMC, with a fixed-step Runge-Kutta in PyTensor ----------------

def pymc_model(y, steps_per_unit=10):
    """A pymc.Model of the same posterior: RK4 with 10 steps per time unit
    (PyTensor has no adaptive solver with gradients that compiles to numba)."""
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    h = 1.0 / steps_per_unit
    with pm.Model(coords={"time": TIMES, "species": ["prey", "predator"]}) as model:
        log_p = {n: pm.Normal(f"log_{n}", PRIOR_LOC[i], PRIOR_SCALE[i])
                 for i, n in enumerate(NAMES)}
        p = {n: pm.Deterministic(n, pt.exp(v)) for n, v in log_p.items()}

        def f(z, alpha, beta, gamma, delta):
            u, v = z[0], z[1]
            return pt.stack([alpha * u - beta * u * v, -gamma * v + delta * u * v])

        def rk4_step(z, *theta):
            k1 = f(z, *theta)
            k2 = f(z + 0.5 * h * k1, *theta)
            k3 = f(z + 0.5 * h * k2, *theta)
            k4 = f(z + h * k3, *theta)
            return z + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)

        z0 = pt.stack([p["u0"], p["v0"]])
        # the parameters go in as non_sequences: PyMC replaces random variables
        # by their values only in graphs it can see, not in a closure of scan's
        steps = pytensor.scan(rk4_step, outputs_info=[z0],
                              non_sequences=[p[n] for n in ("alpha", "beta", "gamma", "delta")],
                              n_steps=TIMES.size * steps_per_unit, return_updates=False)
        zs = steps[steps_per_unit - 1::steps_per_unit]          # at t = 1, ..., 20
        pm.Deterministic("z", zs, dims=("time", "species"))
        pm.Normal("log_y", mu=pt.log(zs), sigma=p["sigma"], observed=np.log(y),
                  dims=("time", "species"))
        # y is log-normal: the observed log y adds a constant Jacobian, which
        # the sampler does not see
    return model


# -- sampling and the report ------------------------------------------------------

def report(label, res, truth):
    c = res.constrained()
    s = res.summary().overall
    print(f"  {label:<26} min ESS {s['ess_min']:7.0f}  whole run {res.timings['total']:6.1f} s"
          f"  min ESS/s {s['min_ess_per_second']:7.1f}   {res.report_line()}")
    covered = []
    for n in NAMES:
        lo, hi = np.quantile(np.asarray(c[n]), [0.05, 0.95])
        covered.append(lo <= truth[n] <= hi)
    return covered, c


def run(label, pot, quick, seed=1):
    n = 250 if quick else 1000
    kw = dict(n_draws=n, n_warmup=n, chains=2 if quick else 4, seed=seed, progress=False)
    print(f"{label}: {pot.dim} parameters")
    exact = fs.sample(pot, surrogate=False, **kw)
    default = fs.sample(pot, **kw)
    cov_e, _ = report("exact NUTS", exact, TRUE)
    cov_d, c = report("fs.sample default", default, TRUE)
    ratio = (default.summary().overall["min_ess_per_second"]
             / exact.summary().overall["min_ess_per_second"])
    print(f"  default / exact, whole-run min ESS/s: {ratio:.2f}x")
    print(f"  {'':8}{'true':>9}{'5 %':>10}{'median':>10}{'95 %':>10}")
    for n in NAMES:
        q = np.quantile(np.asarray(c[n]), [0.05, 0.5, 0.95])
        print(f"  {n:8}{TRUE[n]:9.3f}{q[0]:10.3f}{q[1]:10.3f}{q[2]:10.3f}")
    return exact, default, cov_e, cov_d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2 chains x (250 + 250) instead of 4 x (1000 + 1000)")
    args = ap.parse_args(argv)
    y = simulate()
    out = {}
    try:
        import diffrax  # noqa: F401
    except ImportError:
        print("JAX model skipped: pip install jax diffrax")
    else:
        logdensity, example, constrain = jax_model(y)
        # seven parameters: forward-mode derivatives through the solver are
        # cheaper than its adjoint (2.2 against 3.5 ms per gradient here)
        pot = fs.from_jax(logdensity, example, constrain=constrain, grad="forward")
        out["jax"] = run("JAX + diffrax", pot, args.quick)
    try:
        import pymc  # noqa: F401
        import numba  # noqa: F401
    except ImportError:
        print("PyMC model skipped: pip install pymc numba")
    else:
        pot = fs.from_pymc(pymc_model(y))
        out["pymc"] = run("PyMC + RK4", pot, args.quick)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
