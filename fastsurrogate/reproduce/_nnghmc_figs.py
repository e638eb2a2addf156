"""Helpers shared by the NNgHMC paper's figure modules (``_nnghmc_fig*``):
the paper-column text, z-scores against a reference, a NNgHMC run with the
paper's one-off training (no trial-and-retrain schedule), and PNG output."""
import os
import time

import numpy as np

import fastsurrogate as fs
from fastsurrogate.diagnostics import mcse_mean, mcse_sd
from ._report import log

__all__ = ["NO_NUMBER", "fmt_z", "moment_z", "one_training", "relative_errors", "write_png",
           "finish"]

#: the "paper" cell of a row whose figure the paper gives no number for
NO_NUMBER = "n/a (the paper gives no number)"


def fmt_z(z):
    """A z-score as a signed cell with one decimal ("-" when not finite)."""
    return f"{z:+.1f}" if np.isfinite(z) else "-"


def moment_z(draws, mean=None, sd=None):
    """Per coordinate: the draws' mean and sd and their z-scores in MCSE units.

    Parameters
    ----------
    draws : ndarray (chains, draws, dim)
    mean, sd : ndarray (dim,), optional
        The reference values (the exact moments); NaN z-scores without them.

    Returns
    -------
    dict of ndarray (dim,)
        ``mean``, ``sd``, ``mcse_mean``, ``mcse_sd``, ``z_mean``, ``z_sd``.
    """
    flat = draws.reshape(-1, draws.shape[-1])
    m, s = flat.mean(axis=0), flat.std(axis=0, ddof=1)
    se_m, se_s = mcse_mean(draws), mcse_sd(draws)
    nan = np.full_like(m, np.nan)
    return {"mean": m, "sd": s, "mcse_mean": se_m, "mcse_sd": se_s,
            "z_mean": nan if mean is None else (m - mean) / se_m,
            "z_sd": nan if sd is None else (s - sd) / se_s}


def one_training(model, n_record, n_draws, init, seed, n_hidden, blocks=1, burn_in=0,
                 start="random", **hmc):
    """NNgHMC as the paper's experiments run it: exact HMC for ``burn_in``
    iterations (not recorded), then ``n_record`` iterations recording every
    leapfrog step's (q, grad U), one training on all of them, and
    ``n_draws`` draws driven by the network (a switch whatever the trial's
    acceptance: ``switch_fraction=0``).  ``start``: the training's initial
    weights (``"random"``, the paper's, or the package's ``"affine"``);
    ``hmc``: step_size, n_steps, random_n_steps and other options of
    :class:`fastsurrogate.NNGHMC`.  Returns the :class:`fastsurrogate.Result`."""
    n_warmup = burn_in + n_record
    return fs.sample(model, method="nnghmc", n_draws=n_draws, n_warmup=n_warmup, chains=1,
                     seed=seed, init=init, burn_in=burn_in, train_start=n_warmup,
                     train_every=n_warmup, train_end=n_warmup, switch_fraction=0.0,
                     n_hidden=n_hidden, blocks=blocks, start=start, metric="unit", adapt=False,
                     progress=False, **hmc)


def relative_errors(net, Q, G):
    """||g_hat(q) - g(q)|| / ||g(q)|| at each row of Q (G: the exact gradients)."""
    err = np.linalg.norm(net.gradient_batch(Q) - G, axis=1)
    return err / np.maximum(np.linalg.norm(G, axis=1), 1e-300)


def write_png(out_dir, name, draw, shape=(1, 1), size=(4.0, 3.5), title=None):
    """Draw a figure with ``draw(axes)`` (axes: a 2-d array of the subplot
    grid ``shape``) and write ``out_dir/name``; returns the Markdown image
    line, or None when there is no ``out_dir`` or matplotlib is absent."""
    if not out_dir:
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    os.makedirs(out_dir, exist_ok=True)
    rows, cols = shape
    fig, axes = plt.subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows),
                             squeeze=False)
    draw(axes)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=100)
    plt.close(fig)
    return f"![{title or name}]({name})"


def finish(lines, png, t0):
    """The report: ``lines``, the PNG's image line (when one was written) and
    the seconds since ``t0``, joined; logged to stderr and returned."""
    text = "\n".join(list(lines) + (["", png] if png else [])
                     + [f"\n({time.perf_counter() - t0:.0f} s in all)"])
    log(text)
    return text
