"""NNgHMC paper, Figures 7 and 8: the GP regression of section 4.3, exact
HMC against NNgHMC: the hyper-parameters' posteriors (Figure 7) and the
posterior predictive mean along one direction of the inputs (Figure 8).

    fastsurrogate reproduce nnghmc-fig7 [--quick] [--n-draws N]
    fastsurrogate reproduce nnghmc-fig8 [--quick] [--n-draws N]

The problem and the samplers are Table nnghmc-tables' "gpreg" row
(``_nnghmc_tables.build`` and its settings ``PROBLEMS["gpreg"]``): a
Matern 3/2 GP on 500 x 4 simulated inputs (``--n-obs``: the first rows;
``--quick`` fits 200, an exact gradient then costing a sixteenth of the
full one's) with the signal variance fixed at
1, parameters (log length scale, log noise variance) with N(0, 3^2)
priors; step 0.05, L drawn from 1..20, identity metric, one chain each from
the MAP, one BLAS thread (as that table).  HMC: ``--burn-in`` iterations,
then ``--n-draws``.  NNgHMC: the same burn-in, ``--n-record`` exact
iterations recording every leapfrog step's (q, grad U), one training of a
network with 100 softplus units, then ``--n-draws`` network-driven draws.
The paper draws 10000 times and trains on the gradients of the first 1000
draws; the default here is that table's 3000 draws and 30 recorded
iterations (about 300 points, enough for a 2-d gradient).  Both figures
come from one run (cached within a process: ``reproduce nnghmc-fig7
nnghmc-fig8`` samples once).

Figure 7: per hyper-parameter (on the sampled log scale), both samplers'
posterior means and sds, NNgHMC's against HMC's as z = difference over the
combined MCSE; acceptance beside the paper's Table 2.  PNG: the marginal
histograms, HMC left, NNgHMC right.
Figure 8: the GP's posterior predictive mean E[f(x) | y] along the line x
= t u (u the unit vector along the first input), averaged over the
hyper-parameter draws (every ``--thin``-th draw), at t = -2, -1, 0, 1, 2,
with z between the samplers over the MCSE of the per-draw predictive
means.  PNG: per-draw predictive means (grey) and their average, HMC left,
NNgHMC right.

Measured (full run, 470 s on the shared 2-vCPU AMD EPYC at load 3-4, one
BLAS thread): acceptance 0.948 (HMC) and 0.951 (NNgHMC) against Table 2's
0.83 and 0.84; |z| at most 2.7 over the two hyper-parameters' means and
sds, 1.2 over the predictive means and sds at t = -2 .. 2.
"""
import functools
import time

import numpy as np
import scipy.linalg

import fastsurrogate as fs
from fastsurrogate.core._blas_threads import blas_threads
from fastsurrogate.diagnostics import mcse_mean, mcse_sd
from ._nnghmc_figs import NO_NUMBER, finish, fmt_z, one_training, write_png
from ._nnghmc_tables import PROBLEMS, build, map_estimate
from ._report import log, machine_line, markdown_table

PAPER_ACCEPTANCE = {"HMC": "0.83 (Table 2)", "NNgHMC": "0.84 (Table 2)"}
NAMES = ("log length scale", "log noise variance")
LINE = np.linspace(-2.5, 2.5, 41)


def options(ap):
    """Add the options of Figures 7 and 8 (defaults: nnghmc-tables' gpreg) to ``ap``."""
    ap.add_argument("--n-obs", type=int, default=500, help="fit the first N_OBS rows")
    ap.add_argument("--n-draws", type=int, default=PROBLEMS["gpreg"]["n_draws"])
    ap.add_argument("--burn-in", type=int, default=PROBLEMS["gpreg"]["burn_in"])
    ap.add_argument("--n-record", type=int, default=PROBLEMS["gpreg"]["explore"])
    ap.add_argument("--thin", type=int, default=10, help="Figure 8: every THIN-th draw")
    ap.add_argument("--optimizer", choices=["adam", "lbfgs"], default="lbfgs",
                    help="the network's trainer: Adam (the paper's) or L-BFGS")
    ap.add_argument("--seed", type=int, default=2019)


fig8_options = options


@functools.lru_cache(maxsize=2)
def runs(seed, n_obs, n_draws, burn_in, n_record, optimizer="adam"):
    """The model and both samplers' results: (model, {name: Result})."""
    cfg = PROBLEMS["gpreg"]
    model = build("gpreg", seed, 1)
    if n_obs < model.X.shape[0]:
        y = np.asarray(model.y[:n_obs])
        model = fs.models.GPRegression(np.asarray(model.X[:n_obs]), y - y.mean())
    q0 = map_estimate(model)
    hmc = dict(step_size=cfg["step_size"], n_steps=cfg["n_steps"],
               random_n_steps=cfg["random_steps"])
    with blas_threads(1):
        log(f"  HMC: {burn_in} burn-in, {n_draws} draws ...")
        out = {"HMC": fs.sample(model, method="hmc", n_draws=n_draws, n_warmup=burn_in,
                                chains=1, seed=seed, init=q0, metric="unit", adapt=False,
                                progress=False, **hmc)}
        log(f"  NNgHMC: {burn_in} burn-in, {n_record} recorded, training, {n_draws} draws ...")
        out["NNgHMC"] = one_training(model, n_record, n_draws, q0, seed + 1, cfg["n_hidden"],
                                     burn_in=burn_in, optimizer=optimizer, **hmc)
    return model, out


def _runs(args):
    if min(args.n_draws, args.n_record, args.thin) < 1 or args.burn_in < 0 or args.n_obs < 2:
        raise ValueError("--n-draws, --n-record and --thin must be >= 1, --burn-in >= 0, "
                         "--n-obs >= 2")
    return runs(args.seed, args.n_obs, args.n_draws, args.burn_in, args.n_record,
                args.optimizer)


def z_rows(labels, values):
    """Rows comparing the samplers: label, HMC mean (sd), NNgHMC mean (z), sd (z).
    ``values``: {name: (draws, n)} per-draw values of each label, shape (1, n, k)."""
    h, n = values["HMC"], values["NNgHMC"]
    zm = (n.mean(axis=(0, 1)) - h.mean(axis=(0, 1))) / np.sqrt(mcse_mean(h) ** 2
                                                            + mcse_mean(n) ** 2)
    zs = (n.std(axis=(0, 1)) - h.std(axis=(0, 1))) / np.sqrt(mcse_sd(h) ** 2 + mcse_sd(n) ** 2)
    return [[lab, f"{h[0, :, j].mean():+.4f}", f"{n[0, :, j].mean():+.4f} ({fmt_z(zm[j])})",
             f"{h[0, :, j].std():.4f}", f"{n[0, :, j].std():.4f} ({fmt_z(zs[j])})", NO_NUMBER]
            for j, lab in enumerate(labels)]


def _tables(out, heading, first, rows):
    """The acceptance table, then ``heading`` over the comparison table ``rows``."""
    acc = [[name, f"{res.summary().overall['acceptance']:.3f}",
            f"{res.summary().overall['ess_min']:.0f}", PAPER_ACCEPTANCE[name]]
           for name, res in out.items()]
    return [markdown_table(["method", "acceptance", "ESS min", "paper"], acc), "",
            f"#### {heading}", "",
            markdown_table([first, "HMC mean", "NNgHMC mean (z)", "HMC sd", "NNgHMC sd (z)",
                            "paper"], rows)]


def reproduce(args):
    """Figure 7: the hyper-parameters' posteriors; the Markdown report (and PNG)."""
    t0 = time.perf_counter()
    model, out = _runs(args)
    net = out["NNgHMC"].surrogate
    lines = [machine_line(), "",
             f"### GP regression, {model.X.shape[0]} x 4 inputs: step "
             f"{PROBLEMS['gpreg']['step_size']}, L = "
             f"1..{PROBLEMS['gpreg']['n_steps']}, burn-in {args.burn_in}, {args.n_draws} "
             f"draws each; network 100 hidden, trained on {net.info['n_train']} + "
             f"{net.info['n_holdout']} points (held-out relative gradient error "
             f"{net.info['holdout_rel_error']:.4f})", "",
             *_tables(out, "the hyper-parameters' posteriors (sampled scale)", "parameter",
                      z_rows(NAMES, {k: r.draws for k, r in out.items()})), "",
             "z: NNgHMC's value minus HMC's over their combined MCSE."]
    png = write_png(getattr(args, "out_dir", None), "nnghmc-fig7.png",
                    lambda axes: draw_hist(axes, out), shape=(2, 2), size=(3.6, 2.6),
                    title="NNgHMC paper, Figure 7: GP hyper-parameters, HMC (left), NNgHMC "
                          "(right)")
    return finish(lines, png, t0)


def draw_hist(axes, out):
    """Histograms of the two hyper-parameters: rows parameters, columns samplers."""
    for j, lab in enumerate(NAMES):
        both = np.concatenate([r.draws[0, :, j] for r in out.values()])
        bins = np.linspace(both.min(), both.max(), 30)
        for col, (name, res) in enumerate(out.items()):
            axes[j, col].hist(res.draws[0, :, j], bins=bins, color=f"C{col}", alpha=0.8)
            axes[j, col].set_title(f"{name}: {lab}", fontsize=8)
            axes[j, col].tick_params(labelsize=7)


def predictive_means(model, draws, t):
    """E[f(t u) | y, theta] for each hyper-parameter draw theta (rows of
    ``draws``), u the first input's unit vector: shape (n_draws, len(t))."""
    X, y = np.asarray(model.X), np.asarray(model.y)
    Xs = np.zeros((t.size, X.shape[1]))
    Xs[:, 0] = t
    r = np.linalg.norm(X[:, None, :] - X[None, :, :], axis=2)
    rs = np.linalg.norm(Xs[:, None, :] - X[None, :, :], axis=2)
    sf2 = float(model.signal_variance)
    out = np.empty((draws.shape[0], t.size))
    for i, (log_l, log_sn2) in enumerate(draws):
        a, b = np.sqrt(3.0) * r / np.exp(log_l), np.sqrt(3.0) * rs / np.exp(log_l)
        K = sf2 * (1.0 + a) * np.exp(-a) + np.exp(log_sn2) * np.eye(X.shape[0])
        Ks = sf2 * (1.0 + b) * np.exp(-b)
        out[i] = Ks @ scipy.linalg.cho_solve(scipy.linalg.cho_factor(K), y)
    return out


def fig8_reproduce(args):
    """Figure 8: the predictive mean along a line; the Markdown report (and PNG)."""
    t0 = time.perf_counter()
    model, out = _runs(args)
    with blas_threads(1):
        pred = {k: predictive_means(model, r.draws[0, ::args.thin], LINE)[None]
                for k, r in out.items()}
    marks = [i for i, t in enumerate(LINE) if np.isclose(t, np.round(t)) and abs(t) <= 2]
    labels = [f"t = {LINE[i]:+.0f}" for i in marks]
    lines = [machine_line(), "",
             f"### GP regression: posterior predictive mean at x = t e1, averaged over every "
             f"{args.thin}-th of {args.n_draws} hyper-parameter draws", "",
             *_tables(out, "predictive mean E[f(t e1) | y] (mean over draws; sd over "
                      "draws)", "point",
                      z_rows(labels, {k: p[:, :, marks] for k, p in pred.items()})), "",
             "z: NNgHMC's value minus HMC's over their combined MCSE (of the per-draw "
             "predictive means)."]
    png = write_png(getattr(args, "out_dir", None), "nnghmc-fig8.png",
                    lambda axes: draw_lines(axes, pred), shape=(1, 2), size=(4.0, 3.0),
                    title="NNgHMC paper, Figure 8: GP predictions along x = t e1")
    return finish(lines, png, t0)


def draw_lines(axes, pred):
    """Per-draw predictive means (grey) and their average; HMC left, NNgHMC right."""
    for col, (name, p) in enumerate(pred.items()):
        ax = axes[0, col]
        for row in p[0]:
            ax.plot(LINE, row, "-", color="0.7", lw=0.5)
        ax.plot(LINE, p[0].mean(axis=0), "-", color=f"C{col}", lw=1.5)
        ax.set_title(f"{name}: predictive mean per draw", fontsize=8)
        ax.set_xlabel("t", fontsize=8)
        ax.tick_params(labelsize=7)
