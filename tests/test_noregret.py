"""The opt-in no-regret rule: a surrogate that cannot pay off is not used,
the run says why, and the draws still target the posterior."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics


@pytest.mark.parametrize("method", ["rns-hmc", "nnghmc"])
def test_cheap_posterior_falls_back_to_nuts_and_says_why(method):
    mean = np.array([1.0, -1.0, 0.5])
    cov = np.array([[1.0, 0.6, 0.0], [0.6, 2.0, 0.3], [0.0, 0.3, 0.5]])
    target = fs.models.Gaussian(mean, cov)
    res = fs.sample(target, method=method, n_draws=1500, n_warmup=600, chains=1, seed=3,
                    n_hidden=30, no_regret=True, progress=False)
    fb = res.info.get("fallback")
    assert fb is not None and fb["reason"], res.info.keys()
    z = (res.draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(res.draws)
    assert np.all(np.abs(z) < 4.5), z


def test_no_regret_is_opt_in():
    assert fs.RNSHMC(fs.models.StandardNormal(2)).no_regret is False
    assert fs.NNGHMC(fs.models.StandardNormal(2)).no_regret is False
