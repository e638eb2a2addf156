"""2 threads against 1 for the GLM data-sum kernel on a busy machine.

    python bench/busy_threads.py [--repeats 15] [--n 100000] [--d 50]

Logistic regression U + gradient at N = 100000, d = 50 (one fused pass over
X, csrc/fs_glm.c, OpenMP).  For 0, 1 and 2 other processes keeping the
cores busy (``python -c "while True: pass"``, started here and killed
afterwards), a child process times n_threads = 1 and 2 in interleaved
repeats (medians of ms per evaluation), and exact HMC (one chain, step
0.045, L = 6) in ms per iteration, under two OpenMP waiting policies:

- ``spin``:    GNU OpenMP's own default (GOMP_SPINCOUNT=300000: a thread
               that finished its share spins ~ms before sleeping), what
               fastsurrogate ran with before it set the policy;
- ``passive``: what ``import fastsurrogate`` sets now when the user set
               nothing (OMP_WAIT_POLICY=PASSIVE).

Prints the CPU model and the ratio 2-thread / 1-thread per row (below 1:
two threads win).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKER = r"""
import json, sys, time
import numpy as np
import fastsurrogate as fs
n, d, repeats, n_iter = (int(a) for a in sys.argv[1:5])
X, y, beta = fs.datasets.simulate_logistic(n=n, d=d, seed=1)
model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=1)
q = np.ascontiguousarray(beta * 0.9)
per_call = 20
model._eval_loop(q, 5, True, True)            # warm the runtime and the cache
times = {1: [], 2: []}
for r in range(repeats):
    for nt in ((1, 2) if r % 2 == 0 else (2, 1)):
        model.n_threads = nt
        t0 = time.perf_counter()
        model._eval_loop(q, per_call, True, True)
        times[nt].append((time.perf_counter() - t0) / per_call * 1e3)
# exact HMC, one chain, the paper's step and L = 6 fixed: ms per iteration
hmc = {1: [], 2: []}
for r in range(3):
    for nt in ((1, 2) if r % 2 == 0 else (2, 1)):
        model.n_threads = nt
        res = fs.sample(model, "hmc", n_draws=n_iter, n_warmup=0, chains=1, seed=r,
                        init=beta, step_size=0.045, n_steps=6, random_n_steps=False,
                        adapt=False, metric="unit", progress=False)
        hmc[nt].append(res.seconds_per_iteration() * 1e3)
print(json.dumps({"1": float(np.median(times[1])), "2": float(np.median(times[2])),
                  "hmc1": float(np.median(hmc[1])), "hmc2": float(np.median(hmc[2])),
                  "policy": fs._OMP_WAIT_POLICY}))
"""

POLICIES = {
    "spin": {"GOMP_SPINCOUNT": "300000"},
    "passive": {},
}




def cpu_model():
    from fastsurrogate.reproduce._report import cpu_model as model
    return model() or "unknown CPU"


def run_worker(policy, args):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(POLICIES[policy])
    env["OPENBLAS_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", WORKER, str(args.n), str(args.d),
                          str(args.repeats), str(args.hmc_iter)], env=env, cwd=HERE, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--d", type=int, default=50)
    ap.add_argument("--busy", type=int, nargs="*", default=[0, 1, 2])
    ap.add_argument("--hmc-iter", type=int, default=60,
                    help="iterations of each exact-HMC timing (3 interleaved repeats)")
    args = ap.parse_args()
    print(f"CPU: {cpu_model()}, {os.cpu_count()} CPUs; N = {args.n}, d = {args.d}, "
          f"medians of {args.repeats} interleaved repeats of 20 evaluations")
    print("U + gradient: ms per evaluation; HMC: ms per iteration (L = 6, 1 chain)")
    print(f"{'busy':>4} {'policy':>8} {'U+grad 1 thr':>13} {'2 thr':>7} {'2 / 1':>6}"
          f" {'HMC 1 thr':>10} {'2 thr':>7} {'2 / 1':>6}")
    for n_busy in args.busy:
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(n_busy)]
        try:
            time.sleep(0.5)
            for policy in POLICIES:
                r = run_worker(policy, args)
                print(f"{n_busy:>4} {policy:>8} {r['1']:>13.2f} {r['2']:>7.2f} "
                      f"{r['2'] / r['1']:>6.2f} {r['hmc1']:>10.1f} {r['hmc2']:>7.1f} "
                      f"{r['hmc2'] / r['hmc1']:>6.2f}", flush=True)
        finally:
            for h in hogs:
                h.kill()
                h.wait()


if __name__ == "__main__":
    main()
