"""Fingerprint the draws of every sampler for fixed seeds, to check that a
refactor leaves them unchanged bit for bit.

    python bench/same_draws.py save before.npz     # on the old tree
    python bench/same_draws.py check before.npz    # on the new tree
    python bench/same_draws.py check before.npz --stan

``--stan`` passes ``adaptation="stan"`` to the samplers that adapt a metric
(hmc, nuts, rns-hmc, arns-hmc, nnghmc) when the installed version has the
option: the old warm-up under its new name, which must give the old draws.

Each case runs a small problem (a simulated logistic regression, a
correlated Gaussian) with a fixed seed and stores the draws, warm-up draws
and acceptance statistics; ``check`` reports, per case, whether every array
is identical and otherwise the largest difference.
"""
import inspect
import sys

import numpy as np

import fastsurrogate as fs


def _cases(stan=False):
    adaptive = ("hmc", "nuts", "rns-hmc", "arns-hmc", "nnghmc")
    has_option = "adaptation" in inspect.signature(fs.HMC).parameters

    def sample(model, method, *args, **kw):
        if stan and has_option and method in adaptive:
            kw["adaptation"] = "stan"
        return fs.sample(model, method, *args, **kw)

    X, y, _ = fs.datasets.simulate_logistic(n=2000, d=5, seed=3)
    logit = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    cov = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]])
    gauss = fs.models.Gaussian(np.array([1.0, -1.0, 0.5]), cov)
    common = dict(progress=False, seed=11)
    return {
        "hmc": lambda: sample(logit, "hmc", 300, 300, chains=2, **common),
        "nuts": lambda: sample(logit, "nuts", 300, 300, chains=2, surrogate=False, **common),
        "nuts-gauss": lambda: sample(gauss, "nuts", 300, 300, chains=2, surrogate=False,
                                     **common),
        "hmc-dense": lambda: sample(gauss, "hmc", 300, 300, chains=2, metric="dense", **common),
        "rns-hmc": lambda: sample(logit, "rns-hmc", 300, 400, chains=2, n_hidden=100, **common),
        "rns-hmc-da-laplace": lambda: sample(logit, "rns-hmc", 300, 400, chains=1, n_hidden=100,
                                                delayed_acceptance=True, base="laplace", **common),
        "rns-hmc-guard": lambda: sample(logit, "rns-hmc", 400, 200, chains=1, n_hidden=5,
                                           guard=0.99, guard_window=50, **common),
        "arns-hmc": lambda: sample(logit, "arns-hmc", 300, 300, chains=1, n_hidden=60,
                                      n_start=100, **common),
        "arns-hmc-stop": lambda: sample(logit, "arns-hmc", 300, 300, chains=1, n_hidden=60,
                                           n_start=100, max_points=200, **common),
        "vhmc": lambda: sample(gauss, "vhmc", 300, 300, chains=2, n_hidden=40, **common),
        "vhmc-auto-exact": lambda: sample(gauss, "vhmc", 200, 400, chains=1, n_hidden=40,
                                             n_train="auto", exact=True, **common),
        "nnghmc": lambda: sample(gauss, "nnghmc", 300, 400, chains=2, n_hidden=20,
                                    n_steps=8, **common),
    }


def fingerprint(stan=False):
    out = {}
    for name, run in _cases(stan).items():
        res = run()
        out[f"{name}/draws"] = res.draws
        if res.warmup_draws is not None:
            out[f"{name}/warmup"] = res.warmup_draws
        for k in ("accept_prob", "n_steps", "potential"):
            out[f"{name}/{k}"] = res.stats[k]
    return out


def main(argv):
    stan = "--stan" in argv
    argv = [a for a in argv if a != "--stan"]
    if len(argv) != 3 or argv[1] not in ("save", "check"):
        print(__doc__)
        return 2
    now = fingerprint(stan)
    if argv[1] == "save":
        np.savez(argv[2], **now)
        print(f"saved {len(now)} arrays to {argv[2]}")
        return 0
    ref = np.load(argv[2])
    bad = 0
    for key in sorted(set(ref.files) | set(now)):
        if key not in now or key not in ref.files:
            print(f"{key}: missing on one side")
            bad += 1
            continue
        a, b = ref[key], now[key]
        same = a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
        if not same:
            bad += 1
            diff = (np.nanmax(np.abs(a - b)) if a.shape == b.shape else f"shape {a.shape} vs {b.shape}")
            print(f"{key}: DIFFERENT ({diff})")
    print(f"{len(now)} arrays, {bad} different")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
