"""RNS-HMC paper, Figure 3 as a table: GP, FITC and random-network surrogates
of a 32-d Gaussian as the training set grows.

    PYTHONPATH=. python bench/paper_rns_fig3.py [--quick] [--out FILE]

What the paper reports (Zhang, Shahbaba & Zhao 2017, "Hamiltonian Monte Carlo
acceleration using surrogate functions with random bases", Stat. Comput. 27,
Figure 3): on a Gaussian target with one wide direction, surrogate-driven HMC
with an exact Metropolis test was run with surrogates fitted to N exact-HMC
states.  The full GP gave the highest acceptance for small N, but its cost
(O(N^3) fitting, O(N) per gradient, N centres) grows quickly with N; FITC
(sparse GP with a fixed number of inducing points) is cheaper but less
accurate; random networks (random-basis, single hidden layer, output layer by
least squares) reach a comparable acceptance at a cost that scales best with N.

What this script measures, on this machine
------------------------------------------
Target: N(0, S) in 32 dimensions, S = 0.01 I + 0.99 u u^T, u = (1,...,1)/sqrt(32)
(eigenvalue 1 along u, 0.01 in every orthogonal direction).

1. Exact HMC with the identity metric: the step size is found by dual averaging
   (target acceptance 0.8) with L leapfrog steps, then FIXED; the number of steps
   is drawn uniformly from 1..L every iteration (the package default and the
   paper's practice; it avoids resonance with the narrow directions).
2. Training data: one exact-HMC run with that step size, after a warm-up,
   thinned by ceil(iterations / min ESS) of a pilot so that the kept states are
   roughly independent.  The training sets are nested (the first N thinned
   states); a disjoint set of later thinned states is the test set for the
   gradient error and supplies the starting point of every sampling run.
3. For every N: full GP (``fit_gp``, isotropic SE kernel, maximum marginal
   likelihood), FITC (``fit_fitc``, min(100, N) inducing points), a softplus
   random network (s = max(1000, 2N) capped at 4000 unless ``--softplus-hidden``:
   at least twice the training size, away from the interpolation peak at s ~ N
   where the ridge least squares is ill-conditioned) and an RBF random network
   (all training points as centres, s = N capped at 2000).
4. Each surrogate drives ``fs.RNSHMC(target, surrogate=..., guard=None, trust=None,
   adapt=False)`` with the same step size and L as the exact baseline; the
   Metropolis test uses the exact U, so all chains target the exact Gaussian.
   Reported: acceptance (mean acceptance probability), min over the 32
   coordinates of the Geyer ESS (``fs.diagnostics.ess_geyer``), sampling seconds
   (``res.timings['sample']``), min ESS per sampling second, fit seconds, and
   the relative gradient error sqrt(sum |g_sur - g|^2 / sum |g|^2) on the test
   states.

Read the numbers with this in mind: the exact gradient of this target is one
32 x 32 matrix-vector product, cheaper than any surrogate gradient, so exact HMC
has by far the best ESS per second here.  The paper's point in Figure 3 is the
comparison AMONG surrogates (acceptance reached for a given N and what the
surrogate costs), which is what the table is for; surrogates only pay off when
U is expensive (see bench/paper_arns_fig8.py).  Every number is one run with
one seed on a shared machine.
"""
import argparse
import math
import os
import time

import numpy as np

import fastsurrogate as fs
from ._report import cache_dir, cpu_model, log, machine_line, machine_lines  # noqa: F401

DIM = 32
STUCK = 0.05          # acceptance below this: the chain is (nearly) stuck


def make_target():
    u = np.ones(DIM) / math.sqrt(DIM)
    cov = 0.01 * np.eye(DIM) + 0.99 * np.outer(u, u)
    return fs.models.Gaussian(np.zeros(DIM), cov)


def grad_error(pot, target, Qtest):
    num = den = 0.0
    for q in Qtest:
        g = target.value_and_grad(q)[1]
        gs = pot.value_and_grad(q)[1]
        num += float(np.sum((gs - g) ** 2))
        den += float(np.sum(g ** 2))
    return math.sqrt(num / den)


def chain_stats(res):
    ess = np.nan_to_num(fs.diagnostics.ess_geyer(res.draws), nan=0.0)   # constant chain: 0
    t = float(res.timings["sample"])
    return dict(acc=float(np.mean(res.acceptance_rate)), ess=float(ess.min()), t=t,
                ess_s=float(ess.min()) / t if t > 0 else float("nan"))


def softplus_hidden(N, fixed):
    return int(fixed) if fixed else int(min(max(1000, 2 * N), 4000))


def fit_surrogates(Q, U, N, args, seed):
    """Yield (method, size label, potential, fit seconds, GPSurrogate or None)."""
    t0 = time.perf_counter()
    gp = fs.surrogates.fit_gp(Q, U, seed=seed)
    yield "GP (full)", f"M={N}", gp.potential, time.perf_counter() - t0, gp
    m = min(args.fitc_inducing, N)
    t0 = time.perf_counter()
    fitc = fs.surrogates.fit_fitc(Q, U, n_inducing=m, seed=seed)
    yield "FITC", f"M={m}", fitc.potential, time.perf_counter() - t0, fitc
    s = softplus_hidden(N, args.softplus_hidden)
    t0 = time.perf_counter()
    net = fs.surrogates.train_random_network(Q, U, n_hidden=s, activation="softplus", seed=seed)
    yield "RN softplus", f"s={s}", net, time.perf_counter() - t0, None
    s = min(N, args.rbf_hidden)
    t0 = time.perf_counter()
    net = fs.surrogates.train_random_network(Q, U, n_hidden=s, activation="rbf", seed=seed)
    yield "RN rbf", f"s={s}", net, time.perf_counter() - t0, None


def fmt(x, spec):
    return "nan" if x is None or not np.isfinite(x) else format(x, spec)


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    ap.add_argument("--sizes", type=int, nargs="+", help="training-set sizes N")
    ap.add_argument("--draws", type=int, help="sampling iterations per run (default 10000, quick 2000)")
    ap.add_argument("--n-steps", type=int, default=20, help="L, maximum leapfrog steps (default 20)")
    ap.add_argument("--fitc-inducing", type=int, default=100)
    ap.add_argument("--softplus-hidden", type=int, default=None,
                    help="fixed s of the softplus network (default max(1000, 2N) capped at 4000)")
    ap.add_argument("--rbf-hidden", type=int, default=2000, help="cap on the RBF network's s (= N)")
    ap.add_argument("--n-test", type=int, default=300, help="held-out states for the gradient error")
    ap.add_argument("--seed", type=int, default=2017)


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    sizes = args.sizes or ([100, 400] if args.quick else [100, 200, 400, 800, 1600])
    n_draws = args.draws or (2000 if args.quick else 10000)
    t_start = time.perf_counter()
    target = make_target()
    pool = _training_pool(target, sizes, args)
    rows = _runs(target, pool, sizes, n_draws, args)
    elapsed = time.perf_counter() - t_start
    lines = ["# RNS-HMC paper, Figure 3: surrogates of a 32-d Gaussian vs training size", ""]
    lines += machine_lines()
    lines += _settings_lines(pool, n_draws, elapsed, args)
    lines += _table_lines(rows)
    lines += _summary_lines(rows, sizes)
    report = "\n".join(lines) + "\n"
    return report


def _training_pool(target, sizes, args):
    """Steps 1 and 2: the exact-HMC step size for ~0.8 acceptance (dual
    averaging in a pilot, identity metric), then one exact run at that fixed
    step, thinned to ``max(sizes) + args.n_test`` states: the nested training
    sets and, after them, the held-out states."""
    L = args.n_steps
    # 1. step size for ~0.8 acceptance (dual averaging, identity metric), then fixed
    log("tuning the exact-HMC step size ...")
    pilot = fs.HMC(target, n_steps=L, metric="unit", adapt=True, target_accept=0.8).sample(
        2000, 1000, chains=1, seed=args.seed, progress=False)
    eps = float(pilot.step_size[0])
    pilot_ess = float(np.nanmin(fs.diagnostics.ess_geyer(pilot.draws)))
    thin = max(1, math.ceil(pilot.n_draws / pilot_ess))

    # 2. training pool: one exact run at the fixed step size, thinned
    n_pool = max(sizes) + args.n_test
    log(f"step size {eps:.4g}; training pool: {n_pool} states thinned by {thin} ...")
    pool = fs.HMC(target, step_size=eps, n_steps=L, metric="unit", adapt=False).sample(
        n_pool * thin, 500, chains=1, seed=args.seed + 1, progress=False)
    Qpool = pool.draws[0, thin - 1::thin][:n_pool]
    Upool = pool.stats["potential"][0, thin - 1::thin][:n_pool]
    return dict(eps=eps, pilot_draws=pilot.n_draws, pilot_ess=pilot_ess, thin=thin,
                Q=Qpool, U=Upool, Qtest=Qpool[max(sizes):])


def _runs(target, pool, sizes, n_draws, args):
    """Steps 3 and 4: the exact-HMC baseline, then every surrogate of every
    training size driving RNS-HMC; rows (method, N, size, fit s, gradient
    error, chain statistics), the baseline first."""
    hmc_kw = dict(step_size=pool["eps"], n_steps=args.n_steps, metric="unit", adapt=False)
    run_kw = dict(chains=1, seed=args.seed + 2, init=pool["Qtest"][-1], progress=False)

    # 3. exact HMC baseline
    log("exact HMC baseline ...")
    base = chain_stats(fs.HMC(target, **hmc_kw).sample(n_draws, 0, **run_kw))
    rows = [("exact HMC", "-", "-", "-", "0", base)]

    # 4. surrogates
    for N in sizes:
        Q, U = pool["Q"][:N], pool["U"][:N]
        for method, size, pot, t_fit, gp in fit_surrogates(Q, U, N, args, args.seed + 3):
            gerr = grad_error(pot, target, pool["Qtest"])
            res = fs.RNSHMC(target,
                            surrogate=pot, guard=None, trust=None,
                            **hmc_kw).sample(n_draws, 0, **run_kw)
            st = chain_stats(res)
            extra = ""
            if gp is not None:
                extra = (f" (l={np.exp(gp.theta[1]):.2g}, {gp.info['n_iter']} it"
                         + ("" if gp.info["converged"] else ", not converged") + ")")
            rows.append((method, str(N), size + extra, fmt(t_fit, ".3f"), fmt(gerr, ".3f"), st))
            log(f"  N={N:5d} {method:12s} {size:7s} fit {t_fit:7.3f}s grad err {gerr:6.3f} "
                f"acc {st['acc']:.3f} min ESS/s {st['ess_s']:.0f}")
    return rows


def _settings_lines(pool, n_draws, elapsed, args):
    """The bullets after the machine lines: target, leapfrog, training states, runs."""
    return [
        f"- target: N(0, S), d = {DIM}, S = 0.01 I + 0.99 u u^T, u = 1/sqrt({DIM})",
        f"- leapfrog: step size {pool['eps']:.4g} (dual averaging to 0.8 in a pilot, then fixed), "
        f"L = {args.n_steps} (steps uniform on 1..L), identity metric; exact Metropolis test "
        f"everywhere",
        f"- training states: exact HMC at that step size, thinned by {pool['thin']} "
        f"(pilot: {pool['pilot_draws']} draws, min Geyer ESS {pool['pilot_ess']:.0f}); nested "
        f"sets of N; {args.n_test} disjoint held-out states for the gradient error",
        f"- every sampling run: {n_draws} iterations, no warm-up, started at a held-out state, "
        f"same seed; `fs.RNSHMC(target, surrogate=..., guard=None, adapt=False)`",
        f"- GP / FITC: isotropic SE kernel, hyper-parameters by maximum marginal likelihood "
        f"(l = fitted length scale in standardised units, it = L-BFGS-B iterations); FITC with min({args.fitc_inducing}, N) "
        f"inducing points; softplus network s = "
        + (f"{args.softplus_hidden}" if args.softplus_hidden else "max(1000, 2N) capped at 4000")
        + f"; RBF network s = min(N, {args.rbf_hidden})",
        f"- elapsed: {elapsed:.1f} s (load average at the end: "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())})",
        "",
    ]


def _table_lines(rows):
    """The table, one line per row; a note when a chain was (nearly) stuck."""
    lines = [
        "| method | N | size | fit s | grad rel. err | acceptance | min ESS | sample s | min ESS / s |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for method, N, size, t_fit, gerr, st in rows:
        mark = " *" if st["acc"] < STUCK else ""
        lines.append(f"| {method} | {N} | {size} | {t_fit} | {gerr} | {st['acc']:.3f} | "
                     f"{st['ess']:.0f}{mark} | {st['t']:.3f} | {fmt(st['ess_s'], '.0f')}{mark} |")
    if any(r[5]["acc"] < STUCK for r in rows):
        lines += ["", f"\\* acceptance below {STUCK}: the chain barely moved, so its ESS "
                  "estimate (and ESS/s) is not meaningful; read it as 'no useful samples'."]
    return lines


def _summary_lines(rows, sizes):
    """What the table shows, computed from its rows: the best surrogate per N
    and, per method, the change from the smallest to the largest N."""
    base = rows[0][5]
    lines = ["", "Computed from the table above (no hand-written claims):", ""]
    for N in sizes:
        sub = [r for r in rows[1:] if r[1] == str(N)]
        best_acc = max(sub, key=lambda r: r[5]["acc"])
        best_ess = max(sub, key=lambda r: np.nan_to_num(r[5]["ess_s"]))
        lines.append(f"- N = {N}: highest acceptance {best_acc[0]} ({best_acc[5]['acc']:.3f}); "
                     f"best surrogate min ESS/s {best_ess[0]} ({fmt(best_ess[5]['ess_s'], '.0f')}), "
                     f"exact HMC {fmt(base['ess_s'], '.0f')}")
    if len(sizes) > 1:
        n0, n1 = str(sizes[0]), str(sizes[-1])
        for method in ("GP (full)", "FITC", "RN softplus", "RN rbf"):
            a = [r for r in rows if r[0] == method and r[1] == n0][0]
            b = [r for r in rows if r[0] == method and r[1] == n1][0]
            lines.append(f"- {method}: fit {a[3]} s -> {b[3]} s, sampling {a[5]['t']:.3f} s -> "
                         f"{b[5]['t']:.3f} s, acceptance {a[5]['acc']:.3f} -> {b[5]['acc']:.3f} "
                         f"(N = {n0} -> {n1})")
    return lines
