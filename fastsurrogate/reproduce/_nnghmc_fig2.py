"""NNgHMC paper, Figure 2: the banana of eq. (23), exact HMC against NNgHMC:
gradient fields (exact and the network's), draws and two long leapfrog
trajectories.

    fastsurrogate reproduce nnghmc-fig2 [--quick] [--n-draws N] [--abc A B C ...]

The target (eq. 23)
  U(x) = (A x1)^2 / 200 + (C x2 + B (A x1)^2 - 100 B)^2 / 2, so x1 ~ N(0,
  (10 / A)^2) and x2 | x1 ~ N((100 B - B (A x1)^2) / C, 1 / C^2): its
  moments are exact (E x1 = E x2 = 0, sd x1 = 10 / A, Var x2 = 2 (100 B /
  C)^2 + 1 / C^2).  The paper does not state A, B and C.  This table runs
  two settings, both with A = 10 and C = 10 (x1 on a unit scale, x2 = k (1 -
  x1^2) plus noise of sd 0.1, k = 100 B / C):
  B = 0.1 (k = 1): exact HMC at the paper's settings accepts about as often
      as the paper's (0.48-0.66 over seeds 1-3, paper 0.58); but the
      curvature across the ridge, C sqrt(1 + 4 k^2 x1^2), passes the
      leapfrog's stability limit 2 / step = 20 at |x1| = 0.87, so neither
      sampler reaches the arms: their sds fall short of the exact ones;
  B = 0.05 (k = 0.5): the arms are stable out to |x1| = 1.7 and both
      samplers cover most of the banana, at an acceptance near 0.8.

The samplers (the paper's settings)
  Step 0.1, L = 5, identity metric, one chain from the mode (0, k), no
  adaptation.  The number of leapfrog steps is drawn from 1..L every
  iteration, as in the authors' code (``--steps fixed``: exactly L).
  HMC: 5000 draws.  The network (h = 100 softplus units, random start,
  the package's L-BFGS trainer with early stopping on a held-out 10 %, not
  the paper's 50 epochs of Adam) is trained on grad U at HMC's first 1000
  draws (the paper's "gradient values collected during the first 1000
  draws"); NNgHMC then draws 5000 times from the mode, driven by the
  network and judged by the exact U.

Measured
  Acceptance, ESS and the draws' moments against the exact ones (z in
  MCSE units); the network's relative gradient error ||g_hat - g|| / ||g||
  at HMC's draws after the first 1000 (the training region, points the
  network was not trained on); two leapfrog trajectories of
  ``--trajectory-steps`` steps from the same start and momentum with the
  exact and the network's gradient: the largest distance between them and
  the exact energy error at their ends (a path that leaves the box |x| <
  1000 is cut there and reported as diverged).
"""
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.surrogates import fit_gradient_network
from ._nnghmc_figs import NO_NUMBER, finish, fmt_z, moment_z, relative_errors, write_png
from ._report import log, machine_line, markdown_table

PAPER_ACCEPTANCE = {"HMC": "0.58", "NNgHMC": "0.57"}


def options(ap):
    """Add this figure's options (defaults: the paper's settings) to ``ap``."""
    ap.add_argument("--abc", nargs="+", type=float, default=[10.0, 0.1, 10.0, 10.0, 0.05, 10.0],
                    help="eq. 23's A, B, C, three numbers per setting")
    ap.add_argument("--n-draws", type=int, default=5000)
    ap.add_argument("--n-record", type=int, default=1000,
                    help="HMC's first draws, whose gradients train the network")
    ap.add_argument("--n-hidden", type=int, default=100)
    ap.add_argument("--optimizer", choices=["adam", "lbfgs"], default="lbfgs",
                    help="the network's trainer: Adam (the paper's) or L-BFGS")
    ap.add_argument("--step-size", type=float, default=0.1)
    ap.add_argument("--n-steps", type=int, default=5)
    ap.add_argument("--steps", choices=["random", "fixed"], default="random")
    ap.add_argument("--trajectory-steps", type=int, default=300)
    ap.add_argument("--seed", type=int, default=2019)


class Banana23:
    """Eq. (23) of the NNgHMC paper with its A, B, C (vectorised U and grad U)."""

    def __init__(self, A, B, C):
        if not (A > 0 and C > 0 and B >= 0):
            raise ValueError(f"need A > 0, C > 0 and B >= 0, got {A}, {B}, {C}")
        self.A, self.B, self.C = float(A), float(B), float(C)

    def u_and_grad(self, Q):
        """U (n,) and grad U (n, 2) at the rows of Q (n, 2)."""
        Q = np.atleast_2d(Q)
        a = self.A * Q[:, 0]
        r = self.C * Q[:, 1] + self.B * a * a - 100.0 * self.B
        U = a * a / 200.0 + 0.5 * r * r
        G = np.column_stack([self.A * a / 100.0 + 2.0 * self.B * self.A * a * r, self.C * r])
        return U, G

    def potential(self):
        """The target as a :class:`fastsurrogate.Potential` (a Python callable)."""
        def f(q):
            U, G = self.u_and_grad(q)
            return float(U[0]), G[0]
        return fs.Potential.from_callable(f, 2, value=lambda q: f(q)[0], names=["x1", "x2"])

    def mode(self):
        return np.array([0.0, 100.0 * self.B / self.C])

    def moments(self):
        """Exact (mean (2,), sd (2,))."""
        k = 100.0 * self.B / self.C
        return np.zeros(2), np.array([10.0 / self.A, np.sqrt(2.0 * k * k + 1.0 / self.C ** 2)])

    def sample(self, n, rng):
        x1 = rng.standard_normal(n) * 10.0 / self.A
        x2 = (100.0 * self.B - self.B * (self.A * x1) ** 2 + rng.standard_normal(n)) / self.C
        return np.column_stack([x1, x2])


def leapfrog_path(grad, q, p, step_size, n_steps, bound=1e3):
    """A leapfrog trajectory driven by ``grad(q (2,)) -> (2,)``: its positions
    (up to n_steps + 1, 2), final momentum and the step at which it left the
    box |q| < ``bound`` (None when it stayed in)."""
    path = [q.copy()]
    g = grad(q)
    for k in range(n_steps):
        p = p - 0.5 * step_size * g
        q = q + step_size * p
        if not np.all(np.abs(q) < bound):
            return np.vstack(path), p, k + 1
        g = grad(q)
        p = p - 0.5 * step_size * g
        path.append(q.copy())
    return np.vstack(path), p, None


def trajectories(target, net, args):
    """Two trajectories each with the exact and the network's gradient, from
    the mode and from the ridge at x1 = 0.5 sd, momenta drawn from ``--seed``.
    Returns a list of {"exact" | "network": (path, energy error, diverged at)}."""
    rng = np.random.default_rng([args.seed, 2])
    x1 = 0.5 * 10.0 / target.A
    starts = [target.mode(), np.array([x1, (100 * target.B - target.B * (target.A * x1) ** 2)
                                       / target.C])]
    exact = (lambda q: target.u_and_grad(q[None])[1][0])
    drive = (lambda q: net.gradient_batch(q[None])[0])
    out = []
    for q0 in starts:
        p0 = rng.standard_normal(2)
        h0 = target.u_and_grad(q0[None])[0][0] + 0.5 * p0 @ p0
        pair = {}
        for name, g in (("exact", exact), ("network", drive)):
            path, p, diverged = leapfrog_path(g, q0, p0, args.step_size, args.trajectory_steps)
            dh = np.nan if diverged else target.u_and_grad(path[-1:])[0][0] + 0.5 * p @ p - h0
            pair[name] = (path, dh, diverged)
        out.append(pair)
    return out


def run(target, args):
    """HMC, then the network trained on the gradients at HMC's first
    ``--n-record`` draws, then NNgHMC driven by it; returns ({name: Result}, network)."""
    model = target.potential()
    hmc = dict(n_draws=args.n_draws, n_warmup=0, chains=1, seed=args.seed, init=target.mode(),
               metric="unit", adapt=False, progress=False, step_size=args.step_size,
               n_steps=args.n_steps, random_n_steps=args.steps == "random")
    log(f"  HMC: {args.n_draws} draws ...")
    runs = {"HMC": fs.sample(model, method="hmc", **hmc)}
    Q = runs["HMC"].draws[0, :args.n_record]
    net = fit_gradient_network(Q, target.u_and_grad(Q)[1], n_hidden=args.n_hidden,
                               seed=args.seed, method=args.optimizer)
    log(f"  NNgHMC: {args.n_draws} draws driven by the network ...")
    runs["NNgHMC"] = fs.sample(model, method="nnghmc", surrogate=net,
                               **dict(hmc, seed=args.seed + 1))
    return runs, net


def sampler_rows(target, runs, first):
    """Rows of the sampler table: acceptance, ESS, moments against the exact ones;
    the paper's acceptance beside the first setting's rows, qualified beside the others'."""
    mean, sd = target.moments()
    note = "" if first else " (the paper's banana, A, B, C not stated)"
    rows = []
    for name, res in runs.items():
        s = res.summary().overall
        mz = moment_z(res.draws, mean, sd)
        rows.append([name, f"{s['acceptance']:.3f}", f"{s['ess_min']:.0f}"]
                    + [f"{mz['mean'][i]:+.3f} ({fmt_z(mz['z_mean'][i])})" for i in range(2)]
                    + [f"{mz['sd'][i]:.3f} ({fmt_z(mz['z_sd'][i])})" for i in range(2)]
                    + [PAPER_ACCEPTANCE[name] + note])
    rows.append(["exact", "-", "-", "0", "0", f"{sd[0]:.3f}", f"{sd[1]:.3f}", NO_NUMBER])
    return rows


def _trajectory_cell(pair):
    """Largest distance between the exact and network paths; their end energy errors."""
    n = min(len(pair["exact"][0]), len(pair["network"][0]))
    gap = np.max(np.linalg.norm(pair["exact"][0][:n] - pair["network"][0][:n], axis=1))
    ends = [f"diverged at step {pair[k][2]}" if pair[k][2] else f"{pair[k][1]:+.3f}"
            for k in ("exact", "network")]
    return f"{gap:.3f} over {n - 1} steps; {ends[0]} / {ends[1]}"


def network_rows(target, runs, net, paths, n_record):
    """Rows of the network table: gradient errors and trajectory gaps."""
    Q = runs["HMC"].draws[0, n_record:]
    rel = relative_errors(net, Q, target.u_and_grad(Q)[1]) if len(Q) else np.full(1, np.nan)
    rows = [[f"relative gradient error at HMC's draws {n_record + 1}-{n_record + len(Q)}: "
             "median / 90th percentile", f"{np.median(rel):.4f} / {np.quantile(rel, 0.9):.4f}",
             NO_NUMBER],
            ["relative gradient error on the training's held-out 10 %",
             f"{net.info.get('holdout_rel_error', float('nan')):.4f}", NO_NUMBER]]
    for k, pair in enumerate(paths):
        rows.append([f"trajectory {k + 1}: largest distance exact vs network path; exact "
                     "energy error at the end (exact path / network path)",
                     _trajectory_cell(pair), NO_NUMBER])
    return rows


def _check(args):
    if min(args.n_draws, args.n_hidden, args.n_steps, args.trajectory_steps) < 1:
        raise ValueError("--n-draws, --n-hidden, --n-steps and --trajectory-steps must be >= 1")
    if not 2 <= args.n_record <= args.n_draws:
        raise ValueError(f"--n-record must be in [2, --n-draws], got {args.n_record}")
    if len(args.abc) % 3:
        raise ValueError(f"--abc takes three numbers (A, B, C) per setting, got {args.abc}")


def one_setting(target, args, png_name, first):
    """Figure 2's experiment on one (A, B, C): the report's section and the PNG line."""
    runs, net = run(target, args)
    paths = trajectories(target, net, args)
    steps = f"1..{args.n_steps} (drawn)" if args.steps == "random" else f"{args.n_steps}"
    lines = [f"### eq. (23) with A = {target.A:g}, B = {target.B:g}, C = {target.C:g}: step "
             f"{args.step_size:g}, L = {steps}, {args.n_draws} draws each; network h = "
             f"{args.n_hidden} trained on grad U at HMC's first {args.n_record} draws", "",
             markdown_table(["method", "acceptance", "ESS min", "mean x1 (z)", "mean x2 (z)",
                             "sd x1 (z)", "sd x2 (z)", "paper"], sampler_rows(target, runs, first)),
             "", "z: the difference from the exact value in MCSE units (with an ESS below "
             "about 100 the MCSE, and so z, is itself rough).", "",
             f"#### A = {target.A:g}, B = {target.B:g}, C = {target.C:g}: the network's "
             "gradient field and leapfrog trajectories", "",
             markdown_table(["quantity", "ours", "paper"],
                            network_rows(target, runs, net, paths, args.n_record))]
    png = write_png(getattr(args, "out_dir", None), png_name,
                    lambda axes: draw(axes, target, runs, net, paths), shape=(3, 2),
                    size=(4.2, 3.4), title=f"NNgHMC paper, Figure 2 (A = {target.A:g}, B = "
                    f"{target.B:g}, C = {target.C:g}): exact HMC (left), NNgHMC (right)")
    return lines + (["", png] if png else [])


def reproduce(args):
    """Run Figure 2's experiment per (A, B, C); return the Markdown report (and write PNGs)."""
    _check(args)
    t0 = time.perf_counter()
    lines = [machine_line()]
    for i in range(0, len(args.abc), 3):
        target = Banana23(*args.abc[i:i + 3])
        log(f"  A, B, C = {args.abc[i:i + 3]}")
        name = "nnghmc-fig2.png" if i == 0 else f"nnghmc-fig2-{i // 3 + 1}.png"
        lines += [""] + one_setting(target, args, name, i == 0)
    return finish(lines, None, t0)


def _box(target):
    """Plot bounds (x1 range, x2 range) holding 99.8 % of the exact banana."""
    S = target.sample(20000, np.random.default_rng(0))
    lo, hi = np.quantile(S, 0.001, axis=0), np.quantile(S, 0.999, axis=0)
    pad = 0.08 * (hi - lo)
    return (lo[0] - pad[0], hi[0] + pad[0]), (lo[1] - pad[1], hi[1] + pad[1])


def draw(axes, target, runs, net, paths):
    """The 3 x 2 panels: gradient fields, draws, trajectories; exact HMC left."""
    (x0, x1), (y0, y1) = _box(target)
    gx, gy = np.meshgrid(np.linspace(x0, x1, 200), np.linspace(y0, y1, 200))
    dens = np.exp(-target.u_and_grad(np.column_stack([gx.ravel(), gy.ravel()]))[0])
    dens = dens.reshape(gx.shape)
    qx, qy = np.meshgrid(np.linspace(x0, x1, 19), np.linspace(y0, y1, 19))
    Qg = np.column_stack([qx.ravel(), qy.ravel()])
    fields = [target.u_and_grad(Qg)[1], net.gradient_batch(Qg)]
    for col, (name, res) in enumerate(runs.items()):
        F = -fields[col]
        norm = np.linalg.norm(F, axis=1)
        ax = axes[0, col]
        ax.quiver(qx, qy, F[:, 0] / norm, F[:, 1] / norm, np.log10(norm), cmap="viridis",
                  scale=25, width=0.004)
        ax.set_title(("exact" if col == 0 else "network") + " -grad U (direction; colour "
                     "log10 |grad U|)", fontsize=8)
        d = res.draws[0]
        axes[1, col].plot(d[:, 0], d[:, 1], ".", ms=1.5, alpha=0.4, color="C0")
        axes[1, col].set_title(f"{name}: {len(d)} draws, acceptance "
                               f"{res.summary().overall['acceptance']:.2f}", fontsize=8)
        for k, pair in enumerate(paths):
            path = pair["exact" if col == 0 else "network"][0]
            axes[2, col].plot(path[:, 0], path[:, 1], "-", lw=0.8, color=f"C{k + 1}")
            axes[2, col].plot(path[:1, 0], path[:1, 1], "o", ms=4, color=f"C{k + 1}")
        axes[2, col].set_title(("exact" if col == 0 else "network") + " gradient: two long "
                               "leapfrog paths", fontsize=8)
        for row in range(3):
            ax = axes[row, col]
            ax.contour(gx, gy, dens, levels=dens.max() * np.array([0.01, 0.1, 0.5]),
                       colors="0.6", linewidths=0.6)
            ax.set_xlim(x0, x1)
            ax.set_ylim(y0, y1)
            ax.set_xlabel("x1", fontsize=8)
            ax.set_ylabel("x2", fontsize=8)
            ax.tick_params(labelsize=7)
