"""VHMC paper, Figure 5 (section 4.4): Bayesian ICA, the Amari distance of
the running posterior mean of W to a reference W0 against wall time, VHMC
against exact HMC and SGLD.

Setup (the paper's, with simulated data): 5 channels, N = 17730
observations, 25 parameters; sources with density p(y) = 1 / (4 cosh^2(y/2))
(the logistic density; the paper writes log p(y) = -2 log(2 cosh(y/2))),
prior W ~ N(0, 100) entrywise (:class:`fastsurrogate.models.ICA`).  The
paper's MEG recordings are not available: ``fs.datasets.simulate_ica`` mixes
5 logistic sources of the same size.

W0, as in the paper, is the posterior mean of a long exact-HMC run (Laplace
metric, step adapted by dual averaging, another seed than the compared
chains), cached under :func:`._report.cache_dir` keyed by a hash of the data
and the sampler settings (a cached run at least as long as asked for is
reused).  Its Monte Carlo error sets a floor below which no Amari distance to
it means anything: the median Amari distance between W0 and W0 perturbed by
its own MCSE, reported beside the table.  The distance to the true
(simulated) unmixing matrix is a second column, for information only: with
finite N the posterior mean is not the truth, and both samplers level off at
that statistical error.

The paper gives no step size or number of leapfrog steps for this figure in
this project's texts, so both samplers use L = 10 (drawn uniformly from 1..L
each iteration) and step sizes adapted by dual averaging (target 0.8).
VHMC is the paper's Algorithm 2: surrogate Metropolis test after training
(``exact=False``): its draws target exp(-V), so its distance levels off at
the surrogate's bias; its cost per iteration after training does not grow
with N, exact HMC's does.

SGLD (Welling & Teh 2011; :func:`._vhmc_fig5_sgld.sgld_ica`, NumPy): plain
minibatch SGLD, not the paper's natural-gradient variant; batch 500 as in the
paper, step eps_t = a (b + t)^-0.55 with b = ``--sgld-b`` and a set so that
eps_0 = ``--sgld-c`` times the smallest variance of the Laplace
approximation (c = 2: half the stability limit 4 / lambda_max of exact
gradients); the paper's a, b and exponent 0.5 are for the natural gradient
and do not carry over.  It starts at the Laplace mean like the others, every
iterate counts, and it runs for the largest budget (Laplace time included).
--quick (N = 5000, 4-12 s): SGLD 0.0018 at 4 and 8 s against VHMC 0.00086
and exact HMC 0.0008-0.0011, all three within 0.0002 of W0's floor
(0.00069) by 12 s; SGLD ahead of HMC at 4 s only on a loaded machine (HMC
0.0027 there).

    fastsurrogate reproduce vhmc-fig5 [--quick] [--reference-draws N] [--budgets S ...]
"""
import hashlib
import os
import time

import numpy as np

import fastsurrogate as fs
from ..diagnostics import amari_distance
from ._report import cache_dir, log, machine_line, markdown_table, plot_curves
from ._vhmc_fig5_sgld import sgld_ica

__all__ = ["options", "reproduce", "reference_w0", "amari_floor", "running_distance"]

_REF_WARMUP = 1000


def options(ap):
    """Options of Figure 5 (defaults: the paper's sizes)."""
    ap.add_argument("--n-obs", type=int, default=17730, help="observations (the MEG data's size)")
    ap.add_argument("--channels", type=int, default=5)
    ap.add_argument("--n-hidden", type=int, default=1000, help="VHMC's s")
    ap.add_argument("--train", type=int, default=2000, help="VHMC training iterations t0")
    ap.add_argument("--n-steps", type=int, default=10,
                    help="leapfrog steps L of both samplers (uniform on 1..L)")
    ap.add_argument("--vhmc-draws", type=int, default=100000, help="VHMC draws after training")
    ap.add_argument("--hmc-warmup", type=int, default=500, help="exact HMC's warm-up")
    ap.add_argument("--budgets", type=float, nargs="+",
                    default=[40.0, 60.0, 80.0, 120.0, 160.0, 240.0], help="wall-time budgets (s)")
    ap.add_argument("--reference-draws", type=int, default=20000,
                    help="draws of the long exact-HMC run whose mean is W0 (cached)")
    ap.add_argument("--reference-seed", type=int, default=None,
                    help="seed of the reference run (default: --seed + 1)")
    ap.add_argument("--cache", metavar="FILE",
                    help="reference .npz (default <cache dir>/vhmc_fig5_ref_<hash>.npz)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the ICA data sum")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--sgld-batch", type=int, default=500, help="SGLD minibatch size")
    ap.add_argument("--sgld-c", type=float, default=2.0,
                    help="SGLD's first step / the smallest Laplace variance")
    ap.add_argument("--sgld-b", type=float, default=10000.0,
                    help="b of SGLD's schedule a (b + t)^-0.55")


def reference_key(X, prior_var, n_steps, seed):
    """A short hash of the data and of the reference run's settings."""
    h = hashlib.sha1()
    h.update(np.ascontiguousarray(X, dtype=np.float64).tobytes())
    h.update(f"prior{prior_var!r}_L{n_steps}_seed{seed}_warm{_REF_WARMUP}_laplace".encode())
    return h.hexdigest()[:16]


def reference_w0(model, lap, n_draws, seed, n_steps=10, path=None):
    """W0: the posterior mean of a long exact-HMC run, cached on disk.

    Exact HMC with the Laplace covariance as inverse metric, L = ``n_steps``
    (uniform on 1..L), step adapted in 1000 warm-up iterations, one chain of
    ``n_draws`` from the Laplace mean, seeded by ``seed``.  The file (default
    ``<cache_dir()>/vhmc_fig5_ref_<key>.npz``, the key a hash of the data and
    these settings) is reused when it holds at least ``n_draws`` draws.

    Returns (dict with ``mean`` (d*d,), ``mcse`` (d*d,), ``ess`` (d*d,),
    ``n_draws``, ``seconds``, ``acceptance``, ``step_size``, ``key``; source),
    source being ``"cached <path>"`` or ``"computed, saved to <path>"``.
    """
    key = reference_key(model.X, model.prior_var, n_steps, seed)
    path = path or os.path.join(cache_dir(), f"vhmc_fig5_ref_{key}.npz")
    if os.path.exists(path):
        try:
            with np.load(path) as f:
                data = {k: f[k] for k in f.files}
            if str(data.get("key")) == key and int(data["n_draws"]) >= n_draws:
                return data, f"cached {path}"
            log(f"  reference cache {path} is for other settings or shorter "
                f"({int(data.get('n_draws', 0))} < {n_draws} draws); rerunning")
        except (OSError, ValueError, KeyError):
            log(f"  reference cache {path} is unreadable; rerunning")
    log(f"  ICA reference: exact HMC, {_REF_WARMUP} warm-up + {n_draws} draws ...")
    t0 = time.perf_counter()
    res = fs.HMC(model, n_steps=n_steps, metric=lap.cov).sample(
        n_draws, _REF_WARMUP, chains=1, seed=seed, init=lap.mean, progress=False)
    secs = time.perf_counter() - t0
    draws = res.draws
    data = dict(mean=draws[0].mean(axis=0), mcse=fs.diagnostics.mcse_mean(draws),
                ess=fs.diagnostics.ess_bulk(draws),
                n_draws=np.int64(n_draws), seconds=np.float64(secs),
                acceptance=np.float64(np.mean(res.acceptance_rate)),
                step_size=np.float64(np.ravel(res.step_size)[0]), key=np.str_(key))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **data)
    os.replace(tmp, path)
    return data, f"computed in {secs:.0f} s, saved to {path}"


def amari_floor(W0, mcse, n=400, seed=0):
    """The Amari distance that W0's own Monte Carlo error implies: the median
    of amari_distance(W0 + mcse * z, W0) over ``n`` standard normal z."""
    rng = np.random.default_rng(seed)
    d = W0.shape[0]
    m = np.asarray(mcse, dtype=float).reshape(d, d)
    return float(np.median([amari_distance(W0 + m * rng.standard_normal((d, d)), W0)
                            for _ in range(n)]))


def _clock(res):
    """Wall-clock second at which each kept draw was done: every phase before
    the draws (Laplace, warm-up, training), then the sampling time spread
    evenly over the draws (SGLD's blocks carry their own ``clock``)."""
    if hasattr(res, "clock"):
        return res.clock
    t = res.timings
    start = sum(float(t.get(k, 0.0)) for k in ("laplace", "warmup", "train", "tune"))
    return start + float(t["sample"]) * np.arange(1, res.n_draws + 1) / res.n_draws


def running_distance(draws, times, budgets, targets, min_draws=10):
    """Amari distance of the running mean of ``draws`` (n, d*d) to each of
    ``targets`` (d, d) at each budget: a list, per budget, of (k, [distances])
    with k the draws done by then, or (k, None) with fewer than ``min_draws``."""
    d = int(round(np.sqrt(draws.shape[1])))
    out = []
    for b in budgets:
        k = int(np.searchsorted(times, b, side="right"))
        if k < min_draws:
            out.append((k, None))
            continue
        W = draws[:k].mean(axis=0).reshape(d, d)
        out.append((k, [amari_distance(W, T) for T in targets]))
    return out


def reproduce(args):
    """VHMC (surrogate test), exact HMC and SGLD on ``fs.models.ICA``; the Amari
    distance of each running posterior mean of W to W0 (long exact-HMC run)
    and to the true W at each budget."""
    d = args.channels
    X, A, W_true = fs.datasets.simulate_ica(n=args.n_obs, d=d, seed=args.seed)
    model = fs.models.ICA(X, prior_var=100.0, n_threads=args.threads)
    t0 = time.perf_counter()
    lap = fs.surrogates.laplace_approximation(model, init=W_true.ravel())
    t_lap = time.perf_counter() - t0
    ref_seed = args.reference_seed if args.reference_seed is not None else args.seed + 1
    ref, ref_src = reference_w0(model, lap, args.reference_draws, ref_seed,
                                n_steps=args.n_steps, path=args.cache)
    W0 = ref["mean"].reshape(d, d)
    floor = amari_floor(W0, ref["mcse"])
    runs = _runs(model, lap, t_lap, ref, args)
    targets = (W0, W_true)
    rows, curves = _budget_rows(runs, targets, args.budgets)
    lines = [machine_line(), _settings_text(args, t_lap), ""]
    lines += _run_lines(runs, lap, targets, ref, ref_seed, ref_src, floor)
    lines += ["", markdown_table(["budget s", "HMC draws", "exact HMC Amari to W0",
                                  "HMC to true W", "VHMC draws", "VHMC Amari to W0",
                                  "VHMC to true W", "SGLD iterations", "SGLD Amari to W0",
                                  "SGLD to true W"], rows)]
    if getattr(args, "out_dir", None):
        os.makedirs(args.out_dir, exist_ok=True)
        # W0's own Monte Carlo error: distances near it are indistinguishable
        curves["floor (W0's MCSE)"] = (list(args.budgets), [floor] * len(args.budgets))
        png = plot_curves(os.path.join(args.out_dir, "vhmc-fig5.png"), curves, "wall time (s)",
                          "Amari distance to W0 (long exact-HMC run)",
                          "VHMC paper, Figure 5 (simulated ICA)", logy=True)
        if png:
            lines += ["", f"![Amari distance against time]({os.path.basename(png)})"]
    return "\n".join(lines)


def _runs(model, lap, t_lap, ref, args):
    """{"exact HMC", "VHMC", "SGLD"}: one chain each from the Laplace mean, HMC sized
    from a pilot to reach the largest budget; every Result's timings include
    the Laplace fit's ``t_lap``."""
    bmax = max(args.budgets)
    # pilot: the cost of an exact iteration, to size the HMC run to the largest budget
    p = fs.HMC(model, n_steps=args.n_steps, step_size=float(ref["step_size"]), metric=lap.cov,
               adapt=False).sample(50, 0, chains=1, seed=args.seed, init=lap.mean,
                                   progress=False)
    c_hmc = p.timings["sample"] / p.n_draws
    # (warm-up included) with a 30 % margin; budgets past its end use every draw
    n_hmc = max(200, int(1.3 * (bmax - t_lap) / c_hmc) - args.hmc_warmup)
    log(f"  ICA: exact HMC (Laplace metric, adapted step), {args.hmc_warmup} warm-up + "
        f"{n_hmc} draws ...")
    hmc = fs.HMC(model, n_steps=args.n_steps, metric=lap.cov).sample(
        n_hmc, args.hmc_warmup, chains=1, seed=args.seed, init=lap.mean, progress=False)
    log(f"  ICA: VHMC, s = {args.n_hidden}, t0 = {args.train}, {args.vhmc_draws} draws ...")
    vh = fs.VHMC(model, laplace_tail=False,
                 n_hidden=args.n_hidden, n_train=args.train, laplace=lap,
                 n_steps=args.n_steps)
    vhmc = vh.sample(args.vhmc_draws, args.train, chains=1, seed=args.seed, init=lap.mean,
                     progress=False)
    for res in (hmc, vhmc):
        res.timings["laplace"] = t_lap
    return {"exact HMC": hmc, "VHMC": vhmc, "SGLD": _sgld_run(model, lap, t_lap, args)}


class _SGLDRun:
    """SGLD's blocks of iterates in the shape :func:`_budget_rows` reads:
    ``draws[0]`` the block means, ``clock`` their times (Laplace included),
    ``per_draw`` iterations per block; ``info`` the run's settings."""

    def __init__(self, out, t_lap, block, settings):
        self.draws = out["block_means"][None]
        self.clock = t_lap + out["times"]
        self.per_draw = block
        self.info = dict(out, **settings)


def _sgld_run(model, lap, t_lap, args):
    """Plain minibatch SGLD from the Laplace mean up to the largest budget."""
    eps0 = args.sgld_c * float(np.linalg.eigvalsh(lap.cov).min())
    a = eps0 * args.sgld_b ** 0.55
    X = np.asarray(model.X)
    batch = min(args.sgld_batch, X.shape[0])
    seconds = max(max(args.budgets) - t_lap, 0.5)
    log(f"  ICA: SGLD, batch {batch}, eps_0 {eps0:.3g}, for {seconds:.1f} s ...")
    out = sgld_ica(X, model.prior_var, lap.mean, a, args.sgld_b, batch, seconds,
                   np.random.default_rng(args.seed + 2), block=20)
    return _SGLDRun(out, t_lap, 20, dict(a=a, b=args.sgld_b, batch=batch))


def _budget_rows(runs, targets, budgets):
    """(table rows: per budget, each run's draws and Amari distances to the
    targets; curves: name -> (budgets, distances to W0) for the plot)."""
    dist = {name: running_distance(res.draws[0], _clock(res), budgets, targets)
            for name, res in runs.items()}
    rows = []
    curves = {name: ([], []) for name in runs}
    for i, b in enumerate(budgets):
        cells = [f"{b:g}"]
        for name in runs:
            k, ds = dist[name][i]
            k *= getattr(runs[name], "per_draw", 1)
            if ds is None:
                cells += [str(k), "- (no draws yet)", "-"]
            else:
                cells += [str(k), f"{ds[0]:.5f}", f"{ds[1]:.4f}"]
                curves[name][0].append(b)
                curves[name][1].append(ds[0])
        rows.append(cells)
    return rows, curves


def _settings_text(args, t_lap):
    """The paragraph that says what was run."""
    d = args.channels
    return (
        f"simulated ICA (`fs.datasets.simulate_ica`, seed {args.seed}): N = {args.n_obs}, {d} "
        f"channels ({d * d} parameters), logistic sources p(y) = 1 / (4 cosh^2(y/2)), prior "
        f"W ~ N(0, 100); data sum on {args.threads} threads. Both samplers: L = {args.n_steps} "
        f"(uniform on 1..L), step adapted by dual averaging (target 0.8; the paper's step and "
        f"L for this figure are not in this project's texts), start at the Laplace mean. "
        f"Exact HMC: Laplace metric, {args.hmc_warmup} warm-up iterations. VHMC (Algorithm 2, "
        f"surrogate Metropolis test, approximate, as in the paper): s = {args.n_hidden}, "
        f"t0 = {args.train} training iterations (score matching), then {args.vhmc_draws} "
        f"draws. Time includes the Laplace approximation ({t_lap:.1f} s), warm-up and "
        f"training; draws are timed evenly within the sampling phase. SGLD (Welling & Teh, "
        f"plain gradient, not the paper's natural gradient): batch {args.sgld_batch} (the "
        f"paper's), eps_t = a ({args.sgld_b:g} + t)^-0.55, eps_0 = {args.sgld_c:g} x the smallest "
        f"Laplace variance, from the Laplace mean, every iterate counted, timed per block of "
        f"20 iterations.")


def _run_lines(runs, lap, targets, ref, ref_seed, ref_src, floor):
    """The bullets on W0, each run, and the whole-run means' distances."""
    hmc, vhmc = runs["exact HMC"], runs["VHMC"]
    d = targets[0].shape[0]
    end = {name: float(_clock(res)[-1]) for name, res in runs.items()}
    full = {name: [fs.diagnostics.amari_distance(res.draws[0].mean(axis=0).reshape(d, d), T)
                   for T in targets] for name, res in runs.items()}
    amari_lap = [fs.diagnostics.amari_distance(lap.mean.reshape(d, d), T) for T in targets]
    vt = vhmc.timings
    sg = runs["SGLD"].info
    return [
        f"- W0 (reference): exact HMC, {int(ref['n_draws'])} draws after {_REF_WARMUP} warm-up, "
        f"seed {ref_seed}, acceptance {float(ref['acceptance']):.3f}, step "
        f"{float(ref['step_size']):.4f}, min ESS {float(np.min(ref['ess'])):.0f}, "
        f"{float(ref['seconds']):.0f} s ({ref_src}). Its MCSE implies an Amari-distance "
        f"floor of {floor:.5f} (median distance of W0 perturbed by its MCSE): distances to "
        f"W0 near that floor are indistinguishable from 0.",
        f"- exact HMC: warm-up {hmc.timings.get('warmup', 0):.1f} s, "
        f"{hmc.timings['sample'] / hmc.n_draws * 1e3:.2f} ms/iter, acceptance "
        f"{float(np.mean(hmc.acceptance_rate)):.3f}, step {float(np.ravel(hmc.step_size)[0]):.4f};"
        f" run ended at {end['exact HMC']:.1f} s",
        f"- VHMC: training {vt.get('train', 0):.1f} s + frozen warm-up {vt.get('warmup', 0):.1f} s"
        f", {vt['sample'] / vhmc.n_draws * 1e3:.3f} ms/iter, acceptance "
        f"{float(np.mean(vhmc.acceptance_rate)):.3f}, step "
        f"{float(np.ravel(vhmc.step_size)[0]):.4f}; run ended at {end['VHMC']:.1f} s",
        f"- SGLD: {sg['n_iter']} iterations of {sg['batch']} rows in {sg['seconds']:.1f} s "
        f"({sg['seconds'] / max(sg['n_iter'], 1) * 1e3:.3f} ms/iter), eps_t = {sg['a']:.3g} "
        f"({sg['b']:g} + t)^-0.55, from {sg['eps_first']:.3g} to {sg['eps_last']:.3g}; run "
        f"ended at {end['SGLD']:.1f} s",
        f"- whole-run means, Amari distance to W0 / to the true W: exact HMC "
        f"{full['exact HMC'][0]:.5f} / {full['exact HMC'][1]:.4f}, VHMC {full['VHMC'][0]:.5f} "
        f"/ {full['VHMC'][1]:.4f}, SGLD {full['SGLD'][0]:.5f} / {full['SGLD'][1]:.4f}; the "
        f"Laplace mean (MAP) {amari_lap[0]:.5f} / {amari_lap[1]:.4f}"]
