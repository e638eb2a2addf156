"""NNgHMC paper, Figure 5 (Remark 1): training loss against epochs of three
gradient networks for the 200-d logistic regression: one hidden layer of
200 units, one of 400, and the block network (8 disjoint hidden layers of
50 units, each predicting a 25-d block of the gradient).

    fastsurrogate reproduce nnghmc-fig5 [--quick] [--epochs E] [--n-obs N]

The training set
  Exact HMC (step 0.01, L = 20, identity metric, from the MAP) on Table
  nnghmc-tables' 200-d logistic regression (``_nnghmc_tables.build``, the
  first ``--n-obs`` rows; prior N(0, 10 I), Figure 4's training prior)
  through a :class:`fastsurrogate.RecordingPotential`: after ``--burn-in``
  iterations, every leapfrog step's (q, grad U) of ``--n-record``
  iterations (the paper: 4000 points from 200 draws).

The networks
  Softplus units, Glorot-random start (the same seed for all three),
  mini-batch Adam at Keras's default, a constant learning rate 1e-3 (the
  paper's; the trainer's own default decays from 1e-2), here batches of 128 for ``--epochs`` epochs on 90 % of the
  points (10 % held out, no early stopping), through
  :func:`fastsurrogate.surrogates.fit_gradient_network` (``blocks=8`` gives
  Remark 1's block network).  The loss is the trainer's: half the squared
  L2 distance between the network's output and the true gradient, both
  standardised per coordinate by the training points' moments, summed over
  the 200 coordinates and averaged over the points (about 100 for a
  network that predicts the mean; the same scale for the three networks,
  so their curves compare).

Measured
  The training loss at a few epochs, the held-out relative gradient error
  ||g_hat - g|| / ||g|| at the end, the weights (without biases: the
  paper's count of "total units") and the training time.  PNG: the three
  loss curves (log scale), small solid, large dotted, block dashed as in
  the paper.

Measured (full run, 61 s on the shared 2-vCPU AMD EPYC): after 100
epochs the training losses are 1.02 (small), 0.40 (large) and 0.76
(block), held-out relative gradient errors 0.115, 0.075 and 0.097: the
block network passes the small one after about 20 epochs but stays above
the large one, which the paper's Figure 5 shows it matching.
"""
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.core import RecordingPotential
from fastsurrogate.surrogates import fit_gradient_network
from ._nnghmc_figs import NO_NUMBER, finish, write_png
from ._nnghmc_tables import build, map_estimate
from ._report import log, machine_line, markdown_table

#: name -> (hidden units per block, blocks, line style, the paper's weight count)
NETWORKS = {"single small": (200, 1, "-", "80,000 (Remark 1: half the large one's)"),
            "single large": (400, 1, ":", "160,000 (Remark 1)"),
            "block": (50, 8, "--", "90,000 (Remark 1)")}


def options(ap):
    """Add this figure's options (defaults: the paper's settings) to ``ap``."""
    ap.add_argument("--n-obs", type=int, default=50000)
    ap.add_argument("--burn-in", type=int, default=50)
    ap.add_argument("--n-record", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2019)


def training_set(args):
    """Every leapfrog step's (q, grad U) of ``--n-record`` exact HMC iterations."""
    full = build("logistic", args.seed, args.threads)
    X = np.ascontiguousarray(full.X[:args.n_obs])
    y = np.ascontiguousarray(full.y[:args.n_obs])
    model = fs.models.LogisticRegression(X, y, prior_sd=np.sqrt(10.0), n_threads=args.threads)
    q0 = map_estimate(model)
    hmc = dict(step_size=0.01, n_steps=20, random_n_steps=False, metric="unit", adapt=False,
               chains=1, progress=False)
    burn = fs.sample(model, method="hmc", n_draws=1, n_warmup=args.burn_in, seed=args.seed,
                     init=q0, **hmc)
    rec = RecordingPotential(model, args.n_record * 21 + 8)
    fs.sample(rec, method="hmc", n_draws=args.n_record, n_warmup=0, seed=args.seed + 1,
              init=burn.draws[0, -1], **hmc)
    Q, G = rec.points()[:2]
    return Q, G


def weights(n_hidden, blocks, dim):
    """Weights without biases: dim -> n_hidden -> dim / blocks, per block."""
    return blocks * (dim * n_hidden + n_hidden * dim // blocks)


def train_all(Q, G, args):
    """The three networks: {name: GradientNetwork} (``info["history"]``: loss per epoch)."""
    nets = {}
    for name, (h, b, _, _) in NETWORKS.items():
        log(f"  {name}: {b} x {h} hidden, {args.epochs} epochs of Adam ...")
        nets[name] = fit_gradient_network(Q, G, n_hidden=h, blocks=b, method="adam",
                                          max_iter=args.epochs, patience=args.epochs + 1,
                                          learning_rate=1e-3, lr_schedule="constant",
                                          seed=args.seed)
    return nets


def rows(nets, dim, epochs):
    """The table's rows: losses at a few epochs, held-out error, weights, seconds."""
    marks = sorted({e for e in (1, 10, 25, epochs) if e <= epochs})
    out = []
    for name, net in nets.items():
        h, b, _, paper = NETWORKS[name]
        hist = np.asarray(net.info["history"], dtype=float)
        losses = " / ".join(f"{hist[e - 1]:.4f}" if e <= hist.size else "-" for e in marks)
        out.append([name, f"{b} x {h}", f"{weights(h, b, dim):,}", losses,
                    f"{net.info['holdout_rel_error']:.4f}", f"{net.info['time']:.1f}", paper])
    return out, marks


def reproduce(args):
    """Run Figure 5's experiment; return the Markdown report (and write the PNG)."""
    if min(args.n_obs, args.n_record, args.epochs) < 1 or args.burn_in < 0:
        raise ValueError("--n-obs, --n-record and --epochs must be >= 1, --burn-in >= 0")
    t0 = time.perf_counter()
    log(f"  exact HMC: {args.burn_in} burn-in, {args.n_record} recorded iterations ...")
    Q, G = training_set(args)
    nets = train_all(Q, G, args)
    table, marks = rows(nets, Q.shape[1], args.epochs)
    lines = [machine_line(), "",
             f"### 200-d logistic regression, {args.n_obs} rows: {Q.shape[0]} training points "
             f"(every leapfrog step of {args.n_record} exact HMC iterations), Adam, "
             f"{args.epochs} epochs", "",
             markdown_table(["network", "blocks x hidden", "weights (no biases)",
                             "training loss at epoch " + " / ".join(map(str, marks)),
                             "held-out relative gradient error", "train s", "paper"], table),
             "", "The paper's column gives its weight counts (Remark 1); its Figure 5 "
             "gives the loss curves without numbers (" + NO_NUMBER + "): the block network "
             "matches the large one and beats the small one. Loss: half the squared L2 error of "
             "the standardised gradient, summed over the 200 coordinates, averaged over the "
             "training points (the same scale for all three)."]
    png = write_png(getattr(args, "out_dir", None), "nnghmc-fig5.png",
                    lambda axes: draw(axes[0, 0], nets), size=(6.0, 4.0),
                    title="NNgHMC paper, Figure 5: training loss of three gradient networks")
    return finish(lines, png, t0)


def draw(ax, nets):
    """The loss curves against epochs, log scale; the paper's line styles."""
    for name, net in nets.items():
        h, b, style, _ = NETWORKS[name]
        hist = np.asarray(net.info["history"], dtype=float)
        ax.plot(np.arange(1, hist.size + 1), hist, style, color="k",
                label=f"{name} ({b} x {h})")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (standardised, half squared L2)")
    ax.legend(fontsize=8)
