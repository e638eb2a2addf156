"""The NNgHMC paper's synthetic examples on this machine (Li, Holbrook,
Shahbaba & Baldi 2019, section 4.1): acceptance of NNgHMC beside exact HMC.

    python bench/paper_nnghmc_toy.py [--problems banana gauss30] [--out FILE]

Problems and settings
  banana   the 2-d banana of eq. 23 (fastsurrogate.models.Banana: 100
           observations y_i ~ N(q0 + q1^2, 2^2), q ~ N(0, I)); step 0.1,
           L = 5, h = 100 hidden units (the paper's settings).
  twisted  the twisted banana of the paper's eq. 23 (fastsurrogate.models.
           TwistedBanana: q0 ~ N(0, A), q1 | q0 ~ N(C - B q0^2, 1), A = 100,
           B = 0.03, C = 3); step 0.5, L = 20 (this module's choice), h = 100;
           its exact moments are printed beside the draws'.
  gauss30  the 30-d ill-conditioned Gaussian N(0, diag(v)), variances v
           log-spaced from 0.1 to 1000; identity mass matrix, step 0.3,
           L = 20 (this script's choice: exact HMC's acceptance is about 0.9;
           the paper does not state them), h = 100.
Both: the number of leapfrog steps is drawn from 1..L every iteration (as in
the authors' code), fixed step size (no adaptation), 4 chains started at the
posterior mode, 2000 warm-up iterations (for NNgHMC: the exploration budget
of its training schedule, with the package defaults: record from 20 %, first
training at 50 %, then every 10 %, trials of 50 iterations, switch at 0.9 x
exact HMC's acceptance), 5000 draws per chain.

Columns: AP (mean acceptance probability of the draws), ESS min / median /
max (Geyer, 4 x 5000 draws), schedule (switch iteration, training points,
trainings), train s.  Bar of the issue for the banana: |AP(NNgHMC) -
AP(HMC)| <= 0.05.
"""
import argparse
import time

import numpy as np
import scipy.optimize as so

import fastsurrogate as fs
from ._report import cache_dir, cpu_model, log, machine_line  # noqa: F401

N_HIDDEN = 100


def problem(name):
    if name == "banana":
        model = fs.models.Banana()
        return model, dict(step_size=0.1, n_steps=5)
    if name == "gauss30":
        var = np.logspace(-1, 3, 30)
        model = fs.models.Gaussian(np.zeros(30), np.diag(var))
        return model, dict(step_size=0.3, n_steps=20)
    if name == "twisted":
        return fs.models.TwistedBanana(A=100.0, B=0.03, C=3.0), dict(step_size=0.5, n_steps=20)
    raise ValueError(name)


def mode(model):
    r = so.minimize(model.value_and_grad, np.full(model.dim, 0.5), jac=True, method="L-BFGS-B",
                    options=dict(maxiter=5000, gtol=1e-10))
    return r.x


def run(name, seed, n_warmup, n_draws):
    model, cfg = problem(name)
    common = dict(n_draws=n_draws, n_warmup=n_warmup, chains=4, seed=seed, init=mode(model),
                  adapt=False, metric="unit", random_n_steps=True, progress=False, **cfg)
    out = {"HMC": fs.sample(model, method="hmc", **common),
           "NNgHMC": fs.sample(model, method="nnghmc",
                               n_hidden=N_HIDDEN, **common)}
    return model, cfg, out


def table(name, model, cfg, out):
    lines = [f"### {name}: dim {model.dim}, step {cfg['step_size']}, L = {cfg['n_steps']}, "
             f"h = {N_HIDDEN}", "",
             "| method | AP | ESS min / median / max | schedule | train s |",
             "|---|---|---|---|---|"]
    ap = {}
    for m, res in out.items():
        t = res.summary().overall
        ap[m] = t["acceptance"]
        sched = "-"
        if m == "NNgHMC":
            info = res.info
            n_tr = sum(e["event"] == "train" for e in info["events"])
            sched = (f"switch at {info['switch_iteration']}, {info['n_train']} points, "
                     f"{n_tr} training(s)" if info["switched"] else
                     f"no switch ({n_tr} trainings)")
        lines.append(f"| {m} | {t['acceptance']:.3f} | {t['ess_min']:.0f} / {t['ess_median']:.0f} / "
                     f"{t['ess_max']:.0f} | {sched} | {res.timings.get('train', 0.0):.1f} |")
    if hasattr(model, "moments"):
        mean, cov = model.moments()
        for m, res in out.items():
            dr = res.draws.reshape(-1, model.dim)
            se = fs.diagnostics.mcse_mean(res.draws)
            lines.append(f"\n{m}: mean {np.round(dr.mean(axis=0), 3).tolist()} "
                         f"(MCSE {np.round(se, 3).tolist()}; exact {np.round(mean, 3).tolist()}), "
                         f"variance {np.round(dr.var(axis=0), 2).tolist()} "
                         f"(exact {np.round(np.diag(cov), 2).tolist()})")
    diff = ap["NNgHMC"] - ap["HMC"]
    bar = (f"\nbar: |AP(NNgHMC) - AP(HMC)| = {abs(diff):.3f} <= 0.05: "
           f"{'met' if abs(diff) <= 0.05 else 'NOT met'}" if name == "banana" else
           f"\nAP(NNgHMC) - AP(HMC) = {diff:+.3f}")
    lines.append(bar)
    return "\n".join(lines), ap


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    ap.add_argument("--problems", nargs="+", default=["banana", "twisted", "gauss30"])
    ap.add_argument("--n-warmup", type=int, default=2000)
    ap.add_argument("--n-draws", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=2019)


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    t0 = time.perf_counter()
    parts = [machine_line()]
    for name in args.problems:
        model, cfg, out = run(name, args.seed, args.n_warmup, args.n_draws)
        text, _ = table(name, model, cfg, out)
        parts.append(text)
        log(text)
    parts.append(f"\n({time.perf_counter() - t0:.0f} s in all)")
    return "\n\n".join(parts)
