"""Stochastic-gradient baselines (issue 16): REM against wall time for SGLD,
SGHMC, VHMC and exact HMC on one logistic regression, in one run.

Problem: fs.datasets.simulate_logistic(n=100000, d=50, seed=1),
LogisticRegression(prior_sd=10, n_threads=1), every sampler one chain
started at the MAP (the Laplace mean; its time is charged to VHMC only,
which needs the Laplace fit).  Truth: a long exact HMC run (4 chains,
step 0.045, L = 6), cached in bench/.cache.  REM (VHMC paper eq. 4.1) of
the kept draws available at each wall-clock budget; a draw's time is the
sampler's set-up + warm-up + its share of the sampling phase.

Run: OPENBLAS_NUM_THREADS=1 python bench/sg_baselines.py [--quick]
"""
import argparse
import os
import sys
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.diagnostics import relative_error_mean, mcse_mean, rhat

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import log, machine_line, emit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def truth_run(model, q0, draws):
    key = f"sim_logistic_n100000_d50_seed1_hmc{draws}"
    path = os.path.join(HERE, ".cache", f"sg_truth_{key}.npz")
    if os.path.exists(path):
        with np.load(path) as f:
            if str(f["key"]) == key:
                return {k: f[k] for k in f.files}, f"cached {path}"
    log(f"truth: exact HMC, 4 chains x {draws // 4} draws ...")
    t0 = time.perf_counter()
    res = fs.HMC(model, n_steps=6, step_size=0.045, adapt=False, metric="unit").sample(
        draws // 4, 200, chains=4, seed=777, init=q0, progress=False)
    mean = res.draws.reshape(-1, res.dim).mean(axis=0)
    floor = float(np.sqrt(2 / np.pi) * np.sum(mcse_mean(res.draws)) / np.sum(np.abs(mean)))
    data = dict(mean=mean, rem_floor=np.float64(floor),
                rhat_max=np.float64(np.max(rhat(res.draws))),
                seconds=np.float64(time.perf_counter() - t0), key=np.str_(key))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, **data)
    return data, f"computed now ({float(data['seconds']):.0f} s), saved to {path}"


def clock(res, pre):
    t = res.timings
    start = pre + sum(float(t.get(k, 0.0)) for k in ("warmup", "train", "explore"))
    n = res.n_draws
    return start + float(t["sample"]) * np.arange(1, n + 1) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="budgets 2, 5, 10 s, short truth")
    ap.add_argument("--truth-draws", type=int)
    ap.add_argument("--budgets", type=float, nargs="+")
    ap.add_argument("--out", metavar="FILE")
    args = ap.parse_args()
    budgets = sorted(args.budgets or ([2.0, 5.0, 10.0] if args.quick
                                      else [2.0, 5.0, 10.0, 20.0, 40.0]))
    truth_draws = args.truth_draws or (8000 if args.quick else 40000)
    bmax = budgets[-1]

    X, y, _ = fs.datasets.simulate_logistic(n=100000, d=50, seed=1)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1)
    t0 = time.perf_counter()
    lap = fs.surrogates.laplace_approximation(model)
    t_lap = time.perf_counter() - t0
    q0 = lap.mean
    truth, src = truth_run(model, q0, truth_draws)

    # pilots: seconds per iteration, to size each run to the largest budget
    def per_iter(sampler, n):
        r = sampler.sample(n, 0, chains=1, seed=0, init=q0, progress=False)
        return r.timings["sample"] / n

    k = 1000
    sgld = lambda: fs.SGLD(model, step_size=3e-4 * 1000 ** 0.55, step_offset=1000.0,  # noqa: E731
                           step_decay=0.55, batch_size=k)
    sghmc = lambda: fs.SGHMC(model, step_size=0.004, step_decay=0.0, friction=5.0,  # noqa: E731
                             n_steps=5, batch_size=k)
    hmc = lambda: fs.HMC(model, n_steps=6, step_size=0.045, adapt=False, metric="unit")  # noqa
    c = {"SGLD": per_iter(sgld(), 2000), "SGHMC": per_iter(sghmc(), 500),
         "HMC": per_iter(hmc(), 50)}
    runs = {}
    for name, make in (("SGLD", sgld), ("SGHMC", sghmc), ("HMC", hmc)):
        n = int(1.2 * bmax / c[name]) + 100
        log(f"{name}: {n} draws ({c[name] * 1e3:.3f} ms/iter pilot) ...")
        runs[name] = (make().sample(n, 0, chains=1, seed=1, init=q0, progress=False), 0.0)
    s_h, t0v, nv = (500, 1000, 30000) if args.quick else (2000, 2500, 200000)
    log(f"VHMC: s = {s_h}, t0 = {t0v}, {nv} draws ...")
    v = fs.VHMC(model, n_hidden=s_h, n_s=500, n_train=t0v, laplace=lap, n_steps=10)
    vr = v.sample(nv, t0v, chains=1, seed=1, init=q0, progress=False)
    runs["VHMC"] = (vr, t_lap)

    names = ["SGLD", "SGHMC", "VHMC", "HMC"]
    L = ["# Stochastic-gradient baselines: REM vs wall time, simulated logistic N = 100000, d = 50",
         "", f"- {machine_line()}; OPENBLAS_NUM_THREADS="
         f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; load average at the end "
         f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}",
         f"- truth: {truth_draws} exact HMC draws ({src}); REM floor "
         f"~{float(truth['rem_floor']):.1e}, max R-hat {float(truth['rhat_max']):.3f}"]
    for name in names:
        r, pre = runs[name]
        L.append(f"- {name}: set-up {pre:.2f} s, warm-up/training "
                 f"{sum(float(r.timings.get(x, 0)) for x in ('warmup', 'train', 'explore')):.1f} s, "
                 f"{r.n_draws} draws at {r.timings['sample'] / r.n_draws * 1e3:.3f} ms/iter, "
                 f"exact={r.exact}, acceptance {float(np.mean(r.acceptance_rate)):.3f}")
    L += ["", "| budget (s) | " + " | ".join(f"{n} REM" for n in names) + " |",
          "|---:|" + "---:|" * len(names)]
    for b in budgets:
        cells = []
        for name in names:
            r, pre = runs[name]
            times = clock(r, pre)
            kk = int(np.searchsorted(times, b, side="right"))
            cells.append("-" if kk < 10 else f"{relative_error_mean(r.draws[0, :kk], truth['mean']):.4f}")
        L.append(f"| {b:g} | " + " | ".join(cells) + " |")
    L.append("")
    L.append("| | " + " | ".join(names) + " |")
    L.append("|---|" + "---|" * len(names))
    L.append("| REM of all kept draws | " + " | ".join(
        f"{relative_error_mean(runs[n][0].draws, truth['mean']):.4f}" for n in names) + " |")
    emit("\n".join(L), args.out)


if __name__ == "__main__":
    main()
