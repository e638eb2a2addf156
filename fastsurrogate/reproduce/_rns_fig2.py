"""RNS-HMC paper, Figure 2 as a table: exact HMC against RNS-HMC (the
paper's NNS-HMC) on a 2-d banana: acceptance, the network's gradient error,
and (as a PNG) the force map and trajectories from one start and momentum.

    fastsurrogate reproduce rns-fig2 [--quick] [--hidden ...] [--bases K]

What the paper shows (Zhang, Shahbaba & Zhao 2017, Figure 2, section 3.4):
on a 2-d banana-shaped distribution (its reference [5], Girolami and
Calderhead 2011), the force map -grad U of the exact Hamiltonian flow beside
that of the network surrogate, and HMC and NNS-HMC trajectories from the
same start with the same momenta, the proposals at their ends.  Its one
number: the overall acceptance probability falls from 0.97 (HMC) to 0.88
(NNS-HMC).  The paper gives neither the banana's constants nor the step
size, L or the number of hidden units s.

What this table measures
------------------------
The banana is ``fs.models.Banana()``: y_i ~ N(q0 + q1^2, 2^2), i = 1..100,
simulated with q0 + q1^2 = 1 (seed 2017), prior q0, q1 ~ N(0, 1), the
banana the package documents as the RNS-HMC paper's.  The paper's reference
[5] is Girolami and Calderhead (2011, JRSS B, with its discussion), whose
text is not here: the constants are the package's, not read from [5].  Its
posterior has two arms meeting at q1 = 0.  Every chain starts at the mode
in the upper arm (L-BFGS from (0.5, 0.5)) with the identity metric, step
``--step`` 0.1 and L = ``--n-steps`` 5 fixed (the NNgHMC paper's settings
for its banana example, as ``nnghmc-4.1`` runs them on this banana; the
RNS-HMC paper gives none).

* HMC: ``--explore`` burn-in iterations, then ``--draws`` draws.
* RNS-HMC: ``fs.RNSHMC(n_hidden=s, training="states", guard=None, trust=None)``: the
  same number of exact-HMC exploration iterations, whose states after the
  first 20 % (with their exact U) train a softplus random network (the
  package's default ridge and input-scale choice), then ``--draws`` draws
  whose leapfrog uses the network's gradient and whose Metropolis test uses
  the exact U.  For each s in ``--hidden``, ``--bases`` random bases (seeds
  ``--seed + k``).

Columns: the overall acceptance probability (mean of min(1, exp(-dH)) over
the draws; RNS-HMC: median over bases and their range); the relative
gradient error sqrt(sum |grad z - grad U|^2 / sum |grad U|^2) on the
training states and on 500 held-out posterior states (HMC's draws).  Where
matplotlib is installed, a PNG: the force map (exact in red, the network of
s = ``--map-hidden``, first basis, in blue) over the training states, and
the trajectories of HMC and RNS-HMC from the mode with the same
``--trajectories`` momenta, ``--traj-steps`` leapfrog steps each at the
chain's step size (longer than the sampler's L, so that the paths show),
their end points (the proposals) marked; the report lists each
trajectory's exact acceptance probability.

Duration: the full run (s = 10, 20, 50, 100, 5 bases, 2000 + 5000
iterations) took 2 s on the shared 2-vCPU AMD EPYC at load ~3; ``--quick``
(s = 10, 20, 50, 3 bases, 1000 + 2000) 1 s.
"""
import os
import time
import warnings

import numpy as np
import scipy.optimize as so

import fastsurrogate as fs
from ._report import log, machine_line, markdown_table

PAPER_HMC = "0.97"
PAPER_RNS = "0.88 (NNS-HMC; s not given)"
N_HELD_OUT = 500


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--hidden", type=int, nargs="+", default=[10, 20, 50, 100],
                    help="s, hidden units of the network")
    ap.add_argument("--bases", type=int, default=5, help="random bases per s")
    ap.add_argument("--step", type=float, default=0.1, help="leapfrog step size")
    ap.add_argument("--n-steps", type=int, default=5, help="L, leapfrog steps (fixed)")
    ap.add_argument("--explore", type=int, default=2000,
                    help="exact-HMC burn-in / exploration iterations")
    ap.add_argument("--draws", type=int, default=5000, help="draws after it")
    ap.add_argument("--map-hidden", type=int, default=20,
                    help="s of the network drawn in the PNG (the nearest in --hidden)")
    ap.add_argument("--trajectories", type=int, default=3, help="momenta drawn in the PNG")
    ap.add_argument("--traj-steps", type=int, default=20, help="leapfrog steps of those paths")
    ap.add_argument("--seed", type=int, default=2017)


def _check(args):
    if min(args.hidden) < 1 or args.bases < 1 or args.n_steps < 1 or args.traj_steps < 1:
        raise ValueError("--hidden, --bases, --n-steps and --traj-steps must be >= 1")
    if not (args.step > 0 and np.isfinite(args.step)):
        raise ValueError(f"--step must be positive, got {args.step}")
    if args.explore < 50 or args.draws < 10:
        raise ValueError("--explore must be >= 50 and --draws >= 10")


def upper_mode(model):
    """The posterior mode in the upper arm (L-BFGS from (0.5, 0.5))."""
    r = so.minimize(model.value_and_grad, np.array([0.5, 0.5]), jac=True, method="L-BFGS-B",
                    options=dict(maxiter=2000, gtol=1e-10))
    return r.x


def gradients(pot, Q):
    """grad U of ``pot`` at each row of Q, shape (n, 2)."""
    return np.array([pot.value_and_grad(q)[1] for q in Q])


def grad_error(net, model, Q):
    """sqrt(sum |grad z - grad U|^2 / sum |grad U|^2) over the rows of Q."""
    g, gz = gradients(model, Q), gradients(net, Q)
    return float(np.sqrt(np.sum((gz - g) ** 2) / np.sum(g ** 2)))


def run_chains(model, q0, args):
    """(HMC result, {s: [RNS-HMC results, one per basis]}).  The banana's two
    arms make every chain's ESS small; its warnings are silenced here (the
    acceptance is what is measured)."""
    kw = dict(step_size=args.step, n_steps=args.n_steps, metric="unit", adapt=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fs.SamplingWarning)
        hmc = fs.HMC(model, **kw).sample(args.draws, args.explore, chains=1, seed=args.seed,
                                         init=q0, progress=False)
        rns = {s: [fs.RNSHMC(model, n_hidden=s, training="states", guard=None, trust=None,
                             **kw).sample(
            args.draws, args.explore, chains=1, seed=args.seed + k, init=q0, progress=False)
            for k in range(args.bases)] for s in args.hidden}
    for s in args.hidden:
        log(f"  s = {s}: acceptance "
            + ", ".join(f"{np.mean(r.stats['accept_prob']):.3f}" for r in rns[s]))
    return hmc, rns


def _rows(model, hmc, rns, args):
    """Table rows: HMC, then one per s."""
    held = hmc.draws[0, np.linspace(0, args.draws - 1, min(N_HELD_OUT, args.draws)).astype(int)]
    acc_h = float(np.mean(hmc.stats["accept_prob"]))
    rows = [["HMC", "-", f"{acc_h:.3f}", "0", "0", PAPER_HMC]]
    k0 = int(0.2 * args.explore)
    for s, runs in rns.items():
        acc = np.array([np.mean(r.stats["accept_prob"]) for r in runs])
        e_tr = np.median([grad_error(r.surrogate, model, r.warmup_draws[0, k0:]) for r in runs])
        e_ho = np.median([grad_error(r.surrogate, model, held) for r in runs])
        spread = "" if len(acc) == 1 else f" ({acc.min():.3f}-{acc.max():.3f})"
        rows.append(["RNS-HMC", str(s), f"{np.median(acc):.3f}{spread}", f"{e_tr:.3f}",
                     f"{e_ho:.3f}", PAPER_RNS])
    return rows, acc_h


def leapfrog(pot, q, p, step, n_steps):
    """Positions along a leapfrog path driven by ``pot``'s gradient, and the
    end point (q, p)."""
    q, p = np.array(q, dtype=float), np.array(p, dtype=float)
    path = [q.copy()]
    p -= 0.5 * step * pot.value_and_grad(q)[1]
    for i in range(n_steps):
        q += step * p
        g = pot.value_and_grad(q)[1]
        p -= (step if i < n_steps - 1 else 0.5 * step) * g
        path.append(q.copy())
    return np.array(path), q, p


def trajectories(model, net, q0, args):
    """{"HMC": [...], "RNS-HMC": [...]} of (path, exact acceptance
    probability), from q0 with the same momenta for both."""
    momenta = np.random.default_rng(args.seed).standard_normal((args.trajectories, 2))
    h0 = [model.value(q0) + 0.5 * p @ p for p in momenta]
    out = {}
    for name, pot in (("HMC", model), ("RNS-HMC", net)):
        out[name] = []
        for p, h in zip(momenta, h0):
            path, q, pe = leapfrog(pot, q0, p, args.step, args.traj_steps)
            out[name].append((path, float(min(1.0, np.exp(h - model.value(q) - 0.5 * pe @ pe)))))
    return out


def reproduce(args):
    """Run the chains; return the Markdown report."""
    _check(args)
    t0 = time.perf_counter()
    model = fs.models.Banana()
    q0 = upper_mode(model)
    hmc, rns = run_chains(model, q0, args)
    rows, acc_h = _rows(model, hmc, rns, args)
    s_map = min(args.hidden, key=lambda s: abs(s - args.map_hidden))
    net = rns[s_map][0].surrogate
    traj = trajectories(model, net, q0, args)
    lines = [machine_line(), "",
             f"banana: fs.models.Banana() (100 observations, sigma_y = 2, prior N(0, I)); start "
             f"at the upper mode ({q0[0]:.3f}, {q0[1]:.3f}); step {args.step}, L = "
             f"{args.n_steps}, identity metric; {args.explore} exploration (burn-in) + "
             f"{args.draws} draws per chain; RNS-HMC: {args.bases} random bases per s "
             f"({time.perf_counter() - t0:.1f} s).", "",
             markdown_table(["method", "s", "acceptance (ours): median (range over bases)",
                             "gradient error on the training states",
                             f"gradient error on {min(N_HELD_OUT, args.draws)} held-out "
                             "posterior states", "paper"], rows), "",
             f"The paper's acceptance falls by 0.09 from HMC to NNS-HMC (0.97 to 0.88); ours "
             "falls by " + ", ".join(f"{acc_h - float(r[2].split()[0]):.3f} (s = {r[1]})"
                                      for r in rows[1:]) + ".", "",
             f"Trajectories in the PNG ({args.traj_steps} steps of {args.step} from the mode, "
             f"the network of s = {s_map}, first basis), exact acceptance probability of "
             "their end points: HMC " + ", ".join(f"{a:.2f}" for _, a in traj["HMC"])
             + "; RNS-HMC " + ", ".join(f"{a:.2f}" for _, a in traj["RNS-HMC"]) + "."]
    out = getattr(args, "out_dir", None)
    if out:
        os.makedirs(out, exist_ok=True)
        train = rns[s_map][0].warmup_draws[0, int(0.2 * args.explore):]
        png = force_png(os.path.join(out, "rns-fig2-banana.png"), model, net, train, q0, traj,
                        s_map)
        if png:
            lines += ["", f"![force map and trajectories]({os.path.basename(png)})"]
    return "\n".join(lines)


def force_png(path, model, net, train, q0, traj, s):
    """Three panels: the force maps over the training states, then the HMC
    and RNS-HMC trajectories on the posterior's contours.  Returns the path,
    or None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    lo, hi = train.min(axis=0), train.max(axis=0)
    pad = 0.15 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 120), np.linspace(lo[1], hi[1], 120))
    U = np.array([model.value(q) for q in np.c_[gx.ravel(), gy.ravel()]]).reshape(gx.shape)
    dens = np.exp(-(U - U.min()))
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.3), sharex=True, sharey=True)
    for ax in axes:
        ax.contour(gx, gy, dens, levels=[0.01, 0.1, 0.3, 0.6, 0.9], colors="0.6",
                   linewidths=0.7)
    ax = axes[0]
    ax.plot(train[:, 0], train[:, 1], ".", ms=1, color="0.75")
    ax_, ay_ = np.meshgrid(np.linspace(lo[0], hi[0], 15), np.linspace(lo[1], hi[1], 15))
    Q = np.c_[ax_.ravel(), ay_.ravel()]
    # arrows: the force's direction, length log(1 + |F|) scaled to the grid spacing
    cell = 0.9 * min((hi - lo) / 14)
    forces = {name: -gradients(pot, Q) for name, pot in (("exact", model), ("net", net))}
    top = max(np.log1p(np.linalg.norm(F, axis=1)).max() for F in forces.values())
    for (name, F), colour in zip(forces.items(), ("red", "blue")):
        size = np.maximum(np.linalg.norm(F, axis=1, keepdims=True), 1e-12)
        F = F / size * np.log1p(size) / top * cell
        ax.quiver(Q[:, 0], Q[:, 1], F[:, 0], F[:, 1], color=colour, alpha=0.8,
                  label="exact -grad U" if name == "exact" else f"network, s = {s}",
                  angles="xy", scale_units="xy", scale=1.0, width=0.004)
    ax.set_title("force map (arrow length log(1 + |F|))", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    for ax, name in zip(axes[1:], ("HMC", "RNS-HMC")):
        for pth, a in traj[name]:
            ax.plot(pth[:, 0], pth[:, 1], "-", color="k", lw=1.0)
            ax.plot(pth[-1, 0], pth[-1, 1], "o", color="C0", ms=6)
            ax.annotate(f"{a:.2f}", pth[-1], fontsize=7, xytext=(4, 4),
                        textcoords="offset points")
        ax.plot(q0[0], q0[1], "s", color="red", ms=7)
        ax.set_title(f"{name} trajectories (end: proposal, its acceptance prob.)", fontsize=9)
    for ax in axes:
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_xlabel("q0")
    axes[0].set_ylabel("q1")
    fig.suptitle("RNS-HMC paper, Figure 2: banana, exact against network gradients", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
