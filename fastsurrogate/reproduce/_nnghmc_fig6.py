"""NNgHMC paper, Figure 6: the time series of section 4.3, 1000 observations
simulated from a GARCH(2, 1) model, on which Table 1 compares exact HMC and
NNgHMC (``nnghmc-tables``, problem ``garch``).

    fastsurrogate reproduce nnghmc-fig6 [--n-obs T] [--seed S]

The paper's coefficients are not stated; the series here is the one
``nnghmc-tables`` fits: ``fs.datasets.simulate_garch(1000, 0.1, [0.2, 0.1],
[0.5])`` (alpha0 = 0.1, alpha = (0.2, 0.1), beta = 0.5: persistence 0.8,
stationary variance 0.5), seed 2019.  The table gives the series' summary
statistics beside those of the model (the stationary variance and, for
Gaussian innovations, the excess kurtosis of a GARCH(2, 1), which has no
short closed form and is estimated from one long simulation), and the
autocorrelation of y (none in the model) and of y^2 (volatility
clustering).  The paper plots the series and gives no numbers.  The PNG
draws the series and its conditional standard deviation sigma_t.
"""
import os

import numpy as np

import fastsurrogate as fs
from ._report import machine_line, markdown_table

COEF = dict(alpha0=0.1, alphas=[0.2, 0.1], betas=[0.5])
_NO_NUMBER = "n/a (the paper plots the series; no number)"


def options(ap):
    """Add this table's own options to ``ap``."""
    ap.add_argument("--n-obs", type=int, default=1000, help="length of the series (T)")
    ap.add_argument("--seed", type=int, default=2019)


def conditional_sd(y, alpha0, alphas, betas):
    """sigma_t of the GARCH recursion along ``y`` (shape (T,)), started at the
    stationary variance alpha0 / (1 - sum(alphas) - sum(betas))."""
    a, b = np.asarray(alphas, float), np.asarray(betas, float)
    s2 = np.full(len(y), alpha0 / (1.0 - a.sum() - b.sum()))
    for t in range(len(y)):
        past_y = [y[t - i] ** 2 if t - i >= 0 else s2[0] for i in range(1, len(a) + 1)]
        past_s = [s2[t - j] if t - j >= 0 else s2[0] for j in range(1, len(b) + 1)]
        s2[t] = alpha0 + a @ past_y + b @ past_s
    return np.sqrt(s2)


def _acf1(x):
    x = x - x.mean()
    return float(x[1:] @ x[:-1] / (x @ x))


def _stats(y):
    z = (y - y.mean()) / y.std()
    return [f"{y.mean():+.3f}", f"{y.var():.3f}", f"{float(np.mean(z ** 4)) - 3:.2f}",
            f"{_acf1(y):+.3f}", f"{_acf1(y ** 2):+.3f}"]


def reproduce(args):
    """Simulate the series; return the Markdown report (and draw the PNG)."""
    if args.n_obs < 10:
        raise ValueError(f"--n-obs must be >= 10, got {args.n_obs}")
    y = fs.datasets.simulate_garch(args.n_obs, seed=args.seed, **COEF)
    long = fs.datasets.simulate_garch(200000, seed=args.seed + 1, **COEF)
    var = COEF["alpha0"] / (1 - sum(COEF["alphas"]) - sum(COEF["betas"]))
    kurt = float(np.mean(((long - long.mean()) / long.std()) ** 4)) - 3
    model_row = ["0", f"{var:.3f}", f"{kurt:.2f} (200000-step simulation)", "0",
                 f"{_acf1(long ** 2):+.3f} (same simulation)"]
    rows = [["the series (T = %d, seed %d)" % (args.n_obs, args.seed)] + _stats(y) + [_NO_NUMBER],
            ["the model"] + model_row + [_NO_NUMBER]]
    lines = [f"- {machine_line()}",
             f"- GARCH(2, 1): alpha0 = {COEF['alpha0']}, alpha = {tuple(COEF['alphas'])}, "
             f"beta = {tuple(COEF['betas'])}, Gaussian innovations (the series nnghmc-tables "
             "fits)", "",
             markdown_table(["", "mean", "variance", "excess kurtosis", "autocorrelation of y, "
                             "lag 1", "autocorrelation of y^2, lag 1", "paper"], rows)]
    out = getattr(args, "out_dir", None)
    if out:
        png = _png(os.path.join(out, "nnghmc-fig6-series.png"), y,
                   conditional_sd(y, **COEF))
        if png:
            lines += ["", f"![the GARCH(2, 1) series]({os.path.basename(png)})"]
    return "\n".join(lines)


def _png(path, y, sd):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 3))
    t = np.arange(1, len(y) + 1)
    ax.plot(t, y, lw=0.6, color="k", label="y_t")
    ax.plot(t, 2 * sd, lw=0.8, color="C3", label="+-2 sigma_t")
    ax.plot(t, -2 * sd, lw=0.8, color="C3")
    ax.set_xlabel("t")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title("NNgHMC paper, Figure 6: a GARCH(2, 1) series", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
