"""Cost of the elliptic PDE potential (RNS-HMC paper, section 5.2), its
breakdown, and the cost of one HMC and one RNS-HMC iteration on it.

    PYTHONPATH=. python bench/pde_cost.py [--mesh 30] [--modes 20] [--repeats 3]
                                          [--before REV] [--no-iterations]

Targets (issue 17): one U + gradient evaluation costs at most 2x one forward
solve (U only), same run.  Everything is timed interleaved: `repeats` rounds,
each running every job once (`inner` calls), medians over rounds; the load
(`/proc/loadavg`) is printed before and after.

  evaluations   U and U + grad of the compiled potential (solver="banded":
                csrc/fs_pde.c, one C call), of the SciPy path behind the
                Python callback (solver="splu", and the in-tree SciPy
                reference with LAPACK's banded Cholesky), and, with
                --before REV, of fastsurrogate/models/pde.py as of git REV
  breakdown     the pieces of the SciPy reference path (KL field, band
                assembly, LAPACK factorisation, one solve, observation,
                adjoint right-hand side, adjoint contraction) and the C
                banded Cholesky / solve alone (test hooks, with a copy)
  iterations    seconds per iteration of exact HMC and of RNS-HMC (s = 1000,
                trained once on 1000 exploration states) at the paper's step
                0.16 and L = 10 (drawn from 1..10), from the MAP, 1 chain
"""
import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.linalg
import scipy.optimize as so

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import machine_line  # noqa: E402

import fastsurrogate as fs  # noqa: E402
from fastsurrogate.core._potential import CallbackPotential  # noqa: E402
from fastsurrogate.models import pde as pde_mod  # noqa: E402
from fastsurrogate.models._pde import _band_cholesky, _band_solve  # noqa: E402


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def old_model(rev, kw):
    """EllipticPDE from fastsurrogate/models/pde.py as of git ``rev``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = subprocess.run(["git", "-C", root, "show", f"{rev}:fastsurrogate/models/pde.py"],
                         check=True, capture_output=True, text=True).stdout
    path = os.path.join(tempfile.mkdtemp(), "pde_before.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("pde_before", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.EllipticPDE(**kw)


def timed(jobs, repeats):
    times = {k: [] for k in jobs}
    for _ in range(repeats):
        for k, (f, n) in jobs.items():
            f()
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            times[k].append((time.perf_counter() - t0) / n)
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mesh", type=int, default=30)
    ap.add_argument("--modes", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--inner", type=int, default=200)
    ap.add_argument("--before", default=None, help="git revision of the previous pde.py")
    ap.add_argument("--no-iterations", action="store_true")
    ap.add_argument("--iterations", type=int, default=300, help="sampling iterations per round")
    a = ap.parse_args()
    print(machine_line())
    print(f"load before: {load()}")
    kw = dict(n_mesh=a.mesh, n_modes=a.modes)
    m = fs.models.EllipticPDE(**kw)
    splu = fs.models.EllipticPDE(solver="splu", **kw)
    scipy_ref = CallbackPotential(m._value_and_grad, m.dim, value=m._value, thread_safe=True)
    theta = m.theta_true + 0.1
    n = a.inner
    jobs = {("C kernel", "U"): (lambda: m.value(theta), n),
            ("C kernel", "U + grad"): (lambda: m.value_and_grad(theta), n),
            ("SciPy + LAPACK band, callback", "U"): (lambda: scipy_ref.value(theta), n // 4),
            ("SciPy + LAPACK band, callback", "U + grad"):
                (lambda: scipy_ref.value_and_grad(theta), n // 4),
            ("SciPy splu, callback", "U"): (lambda: splu.value(theta), n // 4),
            ("SciPy splu, callback", "U + grad"): (lambda: splu.value_and_grad(theta), n // 4)}
    if a.before:
        old = old_model(a.before, kw)
        jobs[(f"pde.py at {a.before}", "U")] = (lambda: old.value(theta), n // 4)
        jobs[(f"pde.py at {a.before}", "U + grad")] = (lambda: old.value_and_grad(theta), n // 4)
    # breakdown of the SciPy path, and the C factorisation alone
    c = m.coefficient(theta)
    ab = (m._S_band @ c).reshape(m.half_bandwidth + 1, -1)
    cb = scipy.linalg.cholesky_banded(ab, lower=True, check_finite=False)
    rhs = -(m._R @ c)
    u = np.array(m._g_full)
    u[m.free] = scipy.linalg.cho_solve_banded((cb, True), rhs, check_finite=False)
    r = m._O_free @ u[m.free] + m._obs_const - m.y
    lam = np.zeros(m.n_nodes)
    lam[m.free] = scipy.linalg.cho_solve_banded((cb, True), m._O_free_T @ r, check_finite=False)

    def contraction():
        dc = -np.einsum("ea,ea->e", lam[m.elements] @ pde_mod._K_REF, u[m.elements])
        return m._Phi.T @ (c * dc)

    brk = {"KL field exp(Phi theta)": lambda: m.coefficient(theta),
           "band assembly (sparse product)": lambda: m._S_band @ c,
           "LAPACK banded Cholesky": lambda: scipy.linalg.cholesky_banded(
               ab, lower=True, check_finite=False),
           "one LAPACK banded solve": lambda: scipy.linalg.cho_solve_banded(
               (cb, True), rhs, check_finite=False),
           "observation O u - y": lambda: m._O_free @ u[m.free] + m._obs_const - m.y,
           "adjoint right-hand side O^T r": lambda: m._O_free_T @ r,
           "adjoint contraction": contraction,
           "C banded Cholesky (hook, incl. 2 copies)": lambda: _band_cholesky(ab),
           "C banded solve (hook, incl. 2 copies)": lambda: _band_solve(cb, rhs)}
    for k, f in brk.items():
        jobs[("breakdown", k)] = (f, n // 2)
    jobs[("C kernel", "GN diag")] = (lambda: m.gauss_newton_diag(theta), max(1, n // 20))
    med = timed(jobs, a.repeats)
    print(f"mesh {a.mesh} x {a.mesh}, d = {a.modes}, {m.free.size} unknowns, half bandwidth "
          f"{m.half_bandwidth}; medians of {a.repeats} interleaved rounds; load after: {load()}")
    fwd = med[("C kernel", "U")]
    print("\nevaluations (through Potential.value / value_and_grad):")
    for who in dict.fromkeys(k[0] for k in jobs if k[0] not in ("breakdown",)):
        U, G = med[(who, "U")], med[(who, "U + grad")]
        print(f"  {who:32s} U {U * 1e6:8.1f} us | U + grad {G * 1e6:8.1f} us | ratio "
              f"{G / U:4.2f} (target <= 2: {'met' if G / U <= 2 else 'NOT met'}) | "
              f"U + grad / C kernel's {G / med[('C kernel', 'U + grad')]:5.2f}")
    print(f"  Gauss-Newton diagonal (n_modes solves, SciPy): {med[('C kernel', 'GN diag')] * 1e3:.2f} ms")
    print("\nbreakdown of the SciPy reference path:")
    for k in brk:
        print(f"  {k:42s} {med[('breakdown', k)] * 1e6:8.1f} us")
    print(f"  (C kernel U: {fwd * 1e6:.1f} us)")
    if a.no_iterations:
        return
    # iterations at the paper's settings
    x0 = so.minimize(m.value_and_grad, np.zeros(m.dim), jac=True, method="L-BFGS-B").x
    common = dict(chains=1, init=x0, step_size=0.16, n_steps=10, random_n_steps=True,
                  adapt=False, metric="unit", progress=False)
    t0 = time.perf_counter()
    net = fs.sample(m, method="rns-hmc", n_hidden=1000, guard=None, n_warmup=1000, n_draws=10,
                    seed=1, **common).surrogate
    print(f"\nRNS-HMC network trained on 1000 exploration states ({time.perf_counter() - t0:.0f} s)")
    # the surrogate of `fastsurrogate reproduce rns-table1-pde` (Laplace base + a network on
    # a 12-d active subspace): the same s, its cost per iteration timed beside the paper's
    net_table = fs.sample(m, method="rns-hmc", n_hidden=1000, guard=None, n_warmup=1000,
                          n_draws=10, seed=1, base="laplace", subspace=12,
                          input_scale=0.1, ridge=1e-8, train_from=0, **common).surrogate
    targets = {"": m}
    if a.before:
        targets[f" (pde.py at {a.before})"] = old
    its = {f"{n}{t}": [] for t in targets for n in ("HMC", "RNS-HMC", "RNS-HMC table")}
    acc = {k: [] for k in its}
    for rep in range(a.repeats):
        for tag, model in targets.items():
            for name in ("HMC", "RNS-HMC", "RNS-HMC table"):
                if name == "RNS-HMC table" and tag:
                    continue
                extra = ({} if name == "HMC" else
                         dict(surrogate=net if name == "RNS-HMC" else net_table, guard=None))
                res = fs.sample(model, method=name.split()[0].lower(), n_warmup=20,
                                n_draws=a.iterations, seed=10 + rep, **common, **extra)
                its[name + tag].append(res.seconds_per_iteration())
                acc[name + tag].append(float(np.nanmean(res.acceptance_rate)))
    print(f"iterations ({a.iterations} per round, medians of {a.repeats} interleaved rounds; "
          f"load after: {load()}):")
    if a.before:
        tag = f" (pde.py at {a.before})"
        ho, ro = statistics.median(its["HMC" + tag]), statistics.median(its["RNS-HMC" + tag])
        print(f"  before: exact HMC {ho * 1e3:7.3f} ms/iter, RNS-HMC {ro * 1e3:7.3f} ms/iter, "
              f"s/iter ratio {ho / ro:4.2f}")
    h, rn = statistics.median(its["HMC"]), statistics.median(its["RNS-HMC"])
    print(f"  exact HMC  {h * 1e3:7.3f} ms/iter = {h / med[('C kernel', 'U + grad')]:4.2f} C U + grad "
          f"(acceptance {statistics.median(acc['HMC']):.2f})")
    print(f"  RNS-HMC    {rn * 1e3:7.3f} ms/iter = {rn / fwd:4.2f} C U "
          f"(acceptance {statistics.median(acc['RNS-HMC']):.2f})")
    print(f"  s/iter ratio HMC / RNS-HMC: {h / rn:4.2f}")
    rt = statistics.median(its["RNS-HMC table"])
    print(f"  RNS-HMC, the table's surrogate (Laplace base + 12-d active subspace) "
          f"{rt * 1e3:7.3f} ms/iter = {rt / fwd:4.2f} C U (acceptance "
          f"{statistics.median(acc['RNS-HMC table']):.2f}); s/iter ratio HMC / it: {h / rt:4.2f}")


if __name__ == "__main__":
    main()
