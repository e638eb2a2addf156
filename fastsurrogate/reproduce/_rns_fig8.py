"""RNS-HMC paper, Figure 8 as tables: the relative error of the posterior mean
(REM, L2) against wall time for exact HMC, RNS-HMC and ARNS-HMC on the four
Table-1 problems, median and 5 %-95 % band over independent chains.

    fastsurrogate reproduce rns-fig8 [--quick] [--problems sim bank a9a a9a-std pde]
        [--chains R] [--budgets S ...]

What the paper shows (Zhang, Shahbaba & Zhao 2017, Stat. Comput. 27,
Figure 8): for the simulated logistic regression (N = 100000, d = 50), Bank
Marketing, a9a (60 projected features) and the elliptic PDE inverse
problem, REM = ||mean_hat - truth||_2 / ||truth||_2 of the running posterior
mean against running time, HMC, RNS-HMC and ARNS-HMC.  The surrogate samplers
pay their exploration and training first (all three are exact HMC until
then), then their cheaper iterations make the REM fall faster; ARNS-HMC,
which starts from fewer points, tends to be lowest early on.

What this table measures
------------------------
Problems and settings (Table 1, as ``rns-table1`` and ``rns-table1-pde``):
``sim`` ``simulate_logistic(100000, 50, seed=1)``, s = 2000, step 0.045, L = 6;
``bank`` s = 1000, step 0.012, L = 45; ``a9a`` 60-feature projection (seed
2017), s = 2500, step 0.012, L = 10, whitened network inputs (ridge 1e-4,
input scale 0.2, as ``rns-table1``); ``a9a-std`` (not in the paper, which
draws one a9a panel) ``rns-table1``'s better-conditioned projection, the
features standardised before it (at the paper's step HMC accepts about 0.6
there, 0.33 on ``a9a``, the paper's 0.72), whitened inputs (ridge 1e-6,
input scale 0.1), and ARNS-HMC started from its exploration's trajectory
points (``training="auto"``); ``pde`` ``EllipticPDE(30 x 30 mesh, 20
modes, seed 2017)``, s = 1000, step 0.16, L = 10.  Logistic priors N(0, 100
I), data sums on 2 threads.  L is drawn uniformly from 1..L each iteration;
identity metric, no adaptation.

Every chain starts at the MAP (L-BFGS; not counted in the time) and runs
``--explore`` exact-HMC iterations (HMC: its burn-in; RNS-HMC: its
exploration, whose states after the first 20 % train the network, the
paper's Algorithm 3 with no guard; ARNS-HMC: its exploration, whose last
200 states start the network, then updated online with every non-divergent
proposal, ``update_every`` 10), then draws.  R
independent chains per method (seeds ``seed + 7919 r``; chain r of HMC and
of RNS-HMC share a seed, so their exploration chains coincide), each RNS-HMC
chain training its own network.  The REM at budget b uses every state done
by b seconds after the first 20 % of the exploration (the exploration states,
then the method's own); elapsed time counts exploration, training and
sampling, the time of each state mapped linearly within each phase from the
per-phase timings.  The truth is the posterior mean of a long exact-HMC run
from the MAP (another seed), cached under ``cache_dir()`` (the PDE's is the
``rns-table1-pde`` reference, 20000 draws); its own Monte Carlo error
(about sqrt(sum MCSE^2) / ||truth||) is printed: REM values of that order
cannot be told apart from zero.  The runs are sized from pilots (100 HMC
iterations; one RNS-HMC exploration, training and 200 draws) and, after the
first chain, from the measured costs (margins 1.5x, RNS-HMC and ARNS-HMC 1.8x); a chain
whose run ends before a budget is left out of that
budget's statistics, which say how many chains reached it.

Duration.  Full run (R = 10, the default budgets: sim, a9a and pde up to
60 s, bank up to 90 s): a chain triple costs about 5x its largest budget
(HMC is sized 1.5x, the surrogate samplers 1.8x past it, so that a loaded
machine still reaches it), so about 10 x 5 x 270 s = 3.8 h, plus pilots and
the truths (sim 50000, bank 30000, a9a 30000 exact iterations, about 15
minutes when not cached): about 4 h.  One problem, before ARNS-HMC was
added: ``--problems pde`` took 32 minutes (1912 s, load 4-8).
``--quick`` (about 40 s): only the PDE on a 12 x 12 mesh, R = 3, s = 500,
1000 exploration iterations, budgets 0.75, 1.5 and 3 s, a 4000-draw truth; the
logistic problems are dropped.
"""
import glob
import math
import os
import time

import numpy as np
import scipy.optimize as so

import fastsurrogate as fs
from ..datasets import find_data_dir
from ._report import ARNS_ONLINE, cache_dir, log, machine_line, markdown_table, problems_report
from ._rns_table1 import ARNS, SURROGATE, load

# per problem: the paper's Table-1 settings, the exploration / burn-in length,
# the default budgets (s) and the truth's length
PROBLEMS = {
    "sim": dict(n_hidden=2000, step_size=0.045, n_steps=6, explore=2000,
                budgets=(7.5, 15, 30, 60), truth=50000),
    "bank": dict(n_hidden=1000, step_size=0.012, n_steps=45, explore=2000,
                 budgets=(22.5, 45, 90), truth=30000, arns=ARNS["bank"]),
    "a9a": dict(n_hidden=2500, step_size=0.012, n_steps=10, explore=2000,
                budgets=(7.5, 15, 30, 60), truth=30000,
                surrogate=SURROGATE["a9a"]),
    # rns-table1's better-conditioned projection (the features standardised
    # before it; HMC accepts about 0.6 at the paper's step, against 0.33 on
    # "a9a"), with table 1's whitened inputs for both networks; ARNS-HMC
    # starts from its exploration's trajectory points (training "auto"): the
    # paper's 200 states are too few for 61 parameters (acceptance 0.002-0.008
    # from them, 0.56-0.58 from trajectory points; one chain, 2000 + 1500)
    "a9a-std": dict(n_hidden=2500, step_size=0.012, n_steps=10, explore=2000,
                    budgets=(7.5, 15, 30, 60), truth=30000, surrogate=SURROGATE["a9a-std"],
                    arns=dict(SURROGATE["a9a-std"], training="auto")),
    "pde": dict(n_hidden=1000, step_size=0.16, n_steps=10, explore=2000,
                budgets=(7.5, 15, 30, 60), truth=20000),
}
ORDER = ("sim", "bank", "a9a", "a9a-std", "pde")
SEED_STRIDE = 7919


# -- the problems ---------------------------------------------------------------------
def make_problem(name, args):
    """(model, MAP, description, data key) of one problem."""
    if name == "sim":
        X, y, _ = fs.datasets.simulate_logistic(args.n_obs, args.dim, seed=args.data_seed)
        desc = f"simulate_logistic({args.n_obs}, {args.dim}, seed={args.data_seed})"
        key = f"n{args.n_obs}_d{args.dim}_data{args.data_seed}"
    elif name in ("bank", "a9a", "a9a-std"):
        X, y = load(name, False)
        desc = {"bank": "Bank Marketing",
                "a9a": "a9a, 60-feature Gaussian random projection (seed 2017), standardised",
                "a9a-std": "a9a, its 123 features standardised, then a 60-feature Gaussian "
                           "random projection (seed 2017), standardised (rns-table1's a9a-std)",
                }[name] + f", N = {X.shape[0]}, d = {X.shape[1]}"
        key = name
    elif name == "pde":
        model = fs.models.EllipticPDE(n_mesh=args.n_mesh, n_modes=args.n_modes, seed=2017)
        q0 = _map(model, 2000)
        return (model, q0, f"EllipticPDE({args.n_mesh} x {args.n_mesh} mesh, {args.n_modes} "
                f"modes, seed 2017)", f"pde-m{args.n_mesh}-d{args.n_modes}")
    else:
        raise ValueError(f"unknown problem {name!r}; expected one of {', '.join(ORDER)}")
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=args.threads)
    return model, _map(model, 5000), desc + ", prior N(0, 100 I)", key


DATA = {"bank": "bank_marketing.npz", "a9a": "a9a.libsvm.gz", "a9a-std": "a9a.libsvm.gz"}


def missing_data(name):
    """The data file ``name`` needs when the data folder lacks it, else None."""
    if name not in DATA:
        return None
    d = find_data_dir(required=False)
    return None if d is not None and os.path.exists(os.path.join(d, DATA[name])) else DATA[name]


def _map(model, maxiter):
    r = so.minimize(model.value_and_grad, np.zeros(model.dim), jac=True, method="L-BFGS-B",
                    options=dict(maxiter=maxiter, gtol=1e-8))
    return r.x


def settings(name, args):
    """The problem's settings with the command line's overrides."""
    cfg = dict(PROBLEMS[name])
    for k in ("n_hidden", "explore"):
        v = getattr(args, k, None)
        if v is not None:
            cfg[k] = v
    if getattr(args, "budgets", None):
        cfg["budgets"] = tuple(sorted(args.budgets))
    if getattr(args, "truth_iter", None):
        cfg["truth"] = args.truth_iter
    return cfg


def hmc_sampler(model, cfg):
    return fs.HMC(model, step_size=cfg["step_size"], n_steps=cfg["n_steps"],
                  random_n_steps=True, metric="unit", adapt=False)


def arns_sampler(model, cfg):
    opts = {"training": "states", **ARNS_ONLINE, **cfg.get("arns", {})}
    return fs.ARNSHMC(model, n_start=min(200, cfg["explore"]), n_hidden=cfg["n_hidden"],
                      step_size=cfg["step_size"], n_steps=cfg["n_steps"], random_n_steps=True,
                      metric="unit", adapt=False, update_every=10, **opts)


def rns_sampler(model, cfg):
    return fs.RNSHMC(model, guard=None, trust=None, training="states", n_hidden=cfg["n_hidden"],
                     step_size=cfg["step_size"], n_steps=cfg["n_steps"], random_n_steps=True,
                     metric="unit", adapt=False, **cfg.get("surrogate", {}))


# -- the truth ------------------------------------------------------------------------
def truth_path(name, key, cfg, n_iter):
    if name == "pde":
        # the file rns-table1-pde's reference writes (fastsurrogate.reproduce.rns_hmc)
        m, d = key.split("-")[1:]
        return os.path.join(cache_dir(), f"pde-ref-{m}-{d}-s2017-e{cfg['step_size']}-"
                                         f"L{cfg['n_steps']}-n{n_iter}.npz")
    # the simulated problem's file is the one rns-fig7 writes
    return os.path.join(cache_dir(), f"fig8_truth_{key}_eps{cfg['step_size']}_L{cfg['n_steps']}"
                                     f"_seed2017.npz")


def _cached_truth(name, key, cfg, n_iter):
    """A cached truth at least ``n_iter`` long, or None."""
    if name == "pde":
        pat = truth_path(name, key, cfg, 0)[:-len("0.npz")] + "*.npz"
        for p in sorted(glob.glob(pat)):
            n = int(p.rsplit("-n", 1)[1][:-4])
            if n >= n_iter:
                with np.load(p) as z:
                    return dict(mean=z["mean"], mcse=z["mcse"], n_iter=n), f"cached {p}"
        return None
    p = truth_path(name, key, cfg, n_iter)
    if os.path.exists(p):
        with np.load(p) as z:
            if int(z["n_iter"]) >= n_iter and "mcse" in z.files:
                return dict(mean=z["mean"], mcse=z["mcse"], n_iter=int(z["n_iter"])), f"cached {p}"
    return None


def load_or_run_truth(name, model, q0, key, cfg, n_iter, seed=2017):
    """Posterior mean and its MCSE from a long exact-HMC run from ``q0`` (500
    burn-in, seed ``seed + 100``), cached; returns (dict, where it came from)."""
    hit = _cached_truth(name, key, cfg, n_iter)
    if hit is not None:
        return hit
    log(f"  [{name}] truth: exact HMC, {n_iter} iterations after 500 burn-in ...")
    t0 = time.perf_counter()
    res = hmc_sampler(model, cfg).sample(n_iter, 500, chains=1, seed=seed + 100, init=q0,
                                         progress=False)
    secs = time.perf_counter() - t0
    d = res.draws
    mean = d.mean(axis=(0, 1))
    mcse = fs.diagnostics.mcse_mean(d)
    sd = d.reshape(-1, d.shape[-1]).std(axis=0, ddof=1)
    data = dict(mean=mean, mcse=mcse, sd=sd, seconds=np.float64(secs), n_iter=np.int64(n_iter),
                acceptance=np.float64(np.mean(res.acceptance_rate)), key=np.str_(key))
    path = truth_path(name, key, cfg, n_iter)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        np.savez(path, **data)
    except OSError:
        pass
    return dict(mean=mean, mcse=mcse, n_iter=n_iter), f"computed now ({secs:.0f} s), saved to {path}"


def truth_floor(truth):
    """The L2 REM of the truth's own Monte Carlo error: sqrt(sum MCSE^2) / ||truth||."""
    return float(np.sqrt(np.sum(truth["mcse"] ** 2)) / np.linalg.norm(truth["mean"]))


# -- the clock and the REM curve --------------------------------------------------------
def chain_clock(res, chain=0):
    """(states, t): the exploration / burn-in chain followed by the sampling
    chain, and t[i] the wall-clock second at which state i was done, mapped
    linearly within each phase (exploration, then training, then sampling;
    ARNS-HMC's sampling from the clock marks of ``info["sample_clock"]``)."""
    t = res.timings_per_chain[chain] if getattr(res, "timings_per_chain", None) else res.timings
    nw, ns = res.warmup_draws.shape[1], res.n_draws
    t_w, t_tr, t_s = float(t.get("warmup", 0.0)), float(t.get("train", 0.0)), float(t["sample"])
    tw = t_w * np.arange(1, nw + 1) / max(nw, 1)
    marks = res.info.get("sample_clock") if isinstance(res.info, dict) else None
    if marks is not None and len(marks[chain]):
        it, sec = marks[chain][:, 0], marks[chain][:, 1]
        ts = t_w + t_tr + np.interp(np.arange(1, ns + 1), np.r_[0.0, it], np.r_[0.0, sec])
    else:
        ts = t_w + t_tr + t_s * np.arange(1, ns + 1) / ns
    return (np.concatenate([res.warmup_draws[chain], res.draws[chain]]),
            np.concatenate([tw, ts]))


def rem_curve(res, budgets, burn_in, truth_mean, norm="l2"):
    """[(states used, REM or None, reached, error scale)] at each budget: the
    running mean of the states after ``burn_in`` that are done by the budget;
    ``reached`` is False when the run ended before the budget (REM then None);
    the error scale is sqrt(sum_i MCSE_i^2) of that mean (MCSE from the bulk
    ESS of the states used; NaN under 8 states), the expected size of its L2
    error."""
    draws, clock = chain_clock(res)
    csum = np.cumsum(draws[burn_in:], axis=0)
    out = []
    for b in budgets:
        k = int(np.searchsorted(clock, b, side="right"))
        n = k - burn_in
        if b > clock[-1]:
            out.append((n, None, False, math.nan))
        elif n < 1:
            out.append((0, None, True, math.nan))
        else:
            scale = math.nan
            if n >= 8:
                se = fs.diagnostics.mcse_mean(draws[burn_in:k][None])
                scale = float(np.sqrt(np.nansum(np.asarray(se) ** 2)))
            out.append((n, fs.diagnostics.relative_error_mean(csum[n - 1][None] / n, truth_mean,
                                                              norm=norm), True, scale))
    return out


def band(values):
    """(median, 5 %, 95 %) of the values (NaN when there are none)."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return (math.nan,) * 3
    return float(np.median(v)), float(np.quantile(v, 0.05)), float(np.quantile(v, 0.95))


def fmt(x):
    return "-" if x is None or not math.isfinite(x) else f"{x:.2e}"


def pilot_cost(run, n, min_seconds=0.3):
    """(seconds before sampling, seconds per sampling iteration) from
    ``run(n)``, rerun with more draws while its sampling took under
    ``min_seconds`` (a short pilot's fixed overheads inflate its cost)."""
    while True:
        res = run(n)
        t = float(res.timings["sample"])
        if t >= min_seconds or n >= 200000:
            pre = float(res.timings.get("warmup", 0.0)) + float(res.timings.get("train", 0.0))
            return pre, t / n
        n = int(n * min(max(2 * min_seconds / max(t, 1e-3), 2.0), 20.0))


def size_runs(pre, per, bmax, margin=1.5):
    """Draws needed after ``pre`` seconds of exploration (and training) for the
    clock to pass ``bmax`` at ``per`` seconds an iteration, with a margin."""
    return int(margin * max(bmax - pre, 0.0) / max(per, 1e-9)) + 50


# -- one problem ---------------------------------------------------------------------------
METHODS = ("HMC", "RNS-HMC", "ARNS-HMC")
# run-length margins past the largest budget: the surrogate samplers' cheap draws
# make the overshoot cheap, and their exploration and training times vary with the load
MARGIN = {"HMC": 1.5, "RNS-HMC": 1.8, "ARNS-HMC": 1.8}


def _sampler(method, model, cfg):
    return {"HMC": hmc_sampler, "RNS-HMC": rns_sampler, "ARNS-HMC": arns_sampler}[method](
        model, cfg)


def _pilots(model, q0, cfg, seed):
    """{method: (seconds before sampling, seconds per iteration)} from short
    pilot runs (seed + 1, not kept): HMC 100 iterations from the MAP; the
    surrogate samplers their exploration (and training), then draws."""
    explore = cfg["explore"]
    out = {"HMC": pilot_cost(lambda n: hmc_sampler(model, cfg).sample(
        n, 0, chains=1, seed=seed + 1, init=q0, progress=False), 100)}
    out["HMC"] = (explore * out["HMC"][1], out["HMC"][1])
    for m in METHODS[1:]:
        out[m] = pilot_cost(lambda n, m=m: _sampler(m, model, cfg).sample(
            n, explore, chains=1, seed=seed + 1, init=q0, progress=False), explore)
    return out


def _budget_rows(curves, budgets):
    rows = []
    for j, b in enumerate(budgets):
        row, reach, meds = [f"{b:g}"], [], {}
        for m in METHODS:
            vals = [c[j][1] for c in curves[m]]
            med, lo, hi = band(vals)
            row += [fmt(med), fmt(lo), fmt(hi)]
            reach.append(str(sum(v is not None for v in vals)))
            if math.isfinite(med):
                meds[m] = med
        row += [" / ".join(reach), min(meds, key=meds.get) if meds else "-"]
        rows.append(row)
    return rows


def run_problem(name, args):
    """Run R chains of each method on one problem; (Markdown, data for plots)."""
    cfg = settings(name, args)
    budgets = tuple(sorted(cfg["budgets"]))
    model, q0, desc, key = make_problem(name, args)
    truth, src = load_or_run_truth(name, model, q0, key, cfg, cfg["truth"])
    explore = cfg["explore"]
    burn_in = int(0.2 * explore)
    cost = _pilots(model, q0, cfg, args.seed)
    curves = {m: [] for m in METHODS}
    stats = {m: [] for m in METHODS}
    for r in range(args.chains):
        kw = dict(chains=1, seed=args.seed + SEED_STRIDE * r, init=q0, progress=False)
        for m in METHODS:
            n = size_runs(*cost[m], budgets[-1], margin=MARGIN[m])
            log(f"  [{name}] chain {r + 1}/{args.chains}: {m} {explore} + {n} ...")
            res = _sampler(m, model, cfg).sample(n, explore, **kw)
            t = res.timings
            pre = float(t.get("warmup", 0.0)) + float(t.get("train", 0.0))
            cost[m] = (pre, float(t["sample"]) / n)
            curves[m].append(rem_curve(res, budgets, burn_in, truth["mean"], norm=args.rem))
            stats[m].append(dict(acc=float(np.mean(res.stats["accept_prob"])),
                                 per=cost[m][1], pre=pre, train=float(t.get("train", 0.0))))
    floor = truth_floor(truth)
    return (_problem_lines(name, desc, cfg, explore, burn_in, truth, src, floor, stats,
                           _budget_rows(curves, budgets), args),
            dict(curves=curves, budgets=budgets, floor=floor, truth=truth))


def _problem_lines(name, desc, cfg, explore, burn_in, truth, src, floor, stats, rows, args):
    def med(m, k):
        return float(np.median([x[k] for x in stats[m]]))

    norm_txt = ("||mean - truth||_2 / ||truth||_2" if args.rem == "l2"
                else "sum |mean - truth| / sum |truth| (L1)")
    runs = "; ".join(f"{m}: acceptance {med(m, 'acc'):.2f}, {med(m, 'per') * 1e3:.2f} ms/iter"
                     + ("" if m == "HMC" else f", exploration + training {med(m, 'pre'):.1f} s "
                        f"(training {med(m, 'train'):.1f} s)") for m in METHODS)
    head = ["budget s"] + [f"{m} {q}" for m in METHODS for q in ("median", "5 %", "95 %")]
    return "\n".join([
        f"### {name}", "", f"- {desc}",
        f"- s = {cfg['n_hidden']}, step {cfg['step_size']}, L = {cfg['n_steps']} (drawn from "
        f"1..L), {explore} exact exploration / burn-in iterations from the MAP, REM over the "
        f"states after the first {burn_in}; {args.chains} independent chains per method; "
        + ("ARNS-HMC starts its network from its exploration's trajectory points (200 "
           "states are too few for 61 parameters) and updates it online"
           if cfg.get("arns", {}).get("training", "states") != "states" else
           "ARNS-HMC starts its network from the last 200 exploration states and updates it "
           "online"),
        f"- truth: posterior mean of {truth['n_iter']} exact-HMC draws ({src}); its own "
        f"error is about REM {floor:.1e}",
        f"- {runs} (medians over chains)", "",
        f"REM = {norm_txt} of the running posterior mean at each wall-time budget "
        f"(exploration and training included): median and 5 % / 95 % quantiles over "
        f"chains.", "",
        markdown_table(head + ["chains (" + " / ".join(METHODS) + ")", "lowest median"], rows)])


def options(ap):
    """Add this table's own options (defaults: the settings described above) to ``ap``."""
    ap.add_argument("--problems", nargs="+", default=list(ORDER), choices=ORDER)
    ap.add_argument("--chains", type=int, default=10, help="independent chains per method (R)")
    ap.add_argument("--budgets", type=float, nargs="+",
                    help="wall-time budgets in seconds (default: per problem, see --help text)")
    ap.add_argument("--explore", type=int, help="exact exploration / burn-in iterations "
                    "(default 2000; quick 400)")
    ap.add_argument("--n-hidden", type=int, help="s (default: the paper's, per problem)")
    ap.add_argument("--truth-iter", type=int, help="exact-HMC iterations of the truth run "
                    "(default per problem; a longer cached run is reused)")
    ap.add_argument("--rem", choices=("l2", "l1"), default="l2",
                    help="REM norm: l2 (the RNS-HMC paper's) or l1 (the VHMC paper's)")
    ap.add_argument("--n-obs", type=int, default=100000, help="sim: N")
    ap.add_argument("--dim", type=int, default=50, help="sim: d")
    ap.add_argument("--data-seed", type=int, default=1, help="sim: data seed")
    ap.add_argument("--n-mesh", type=int, default=30, help="pde: mesh cells per side")
    ap.add_argument("--n-modes", type=int, default=20, help="pde: Karhunen-Loeve modes (d)")
    ap.add_argument("--threads", type=int, default=2, help="data-sum threads (logistic)")
    ap.add_argument("--seed", type=int, default=2017)


def reproduce(args):
    """Run the experiment with the options in ``args`` (plus ``args.quick``); return the Markdown report."""
    if args.chains < 1:
        raise ValueError("--chains must be >= 1")
    if args.budgets and min(args.budgets) <= 0:
        raise ValueError("--budgets must be positive")
    parts = problems_report(
        [f"{machine_line()}; load average at start "
         f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"],
        args.problems, lambda name: run_problem(name, args)[0], missing_data,
        "--quick: the PDE only, on a coarse mesh, with few short chains: a smoke run; the full "
        "command runs all four problems at the paper's sizes."
        if getattr(args, "quick", False) else None)
    return "\n\n".join(parts)
