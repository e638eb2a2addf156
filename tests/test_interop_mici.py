"""mici's samplers driven by a fastsurrogate potential (interop.mici)."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics

mici = pytest.importorskip("mici")
from fastsurrogate.interop.mici import mici_kwargs, mici_system  # noqa: E402


def test_kwargs_give_value_and_gradient_from_one_evaluation():
    pot = fs.models.Gaussian(np.zeros(2), np.diag([1.0, 4.0]))
    kw = mici_kwargs(pot)
    q = np.array([1.0, 2.0])
    g, u = kw["grad_neg_log_dens"](q)
    np.testing.assert_allclose(u, pot.value(q))
    np.testing.assert_allclose(g, pot.grad(q))
    assert kw["neg_log_dens"](q) == pot.value(q)
    with pytest.raises(TypeError, match="Potential"):
        mici_kwargs(lambda q: 0.0)


def test_mici_nuts_samples_a_gaussian():
    mean = np.array([1.0, -2.0, 0.5])
    A = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.2, -0.3, 1.5]])
    cov = A @ A.T
    pot = fs.models.Gaussian(mean, cov)
    system = mici_system(pot)
    integrator = mici.integrators.LeapfrogIntegrator(system)
    sampler = mici.samplers.DynamicMultinomialHMC(system, integrator, np.random.default_rng(5))
    adapters = [mici.adapters.DualAveragingStepSizeAdapter(0.8)]
    inits = [np.random.default_rng(k).normal(size=3) for k in range(2)]
    out = sampler.sample_chains(500, 2000, inits, adapters=adapters, n_worker=1,
                                display_progress=False)
    draws = np.stack(out.traces["pos"])              # (chains, draws, dim)
    assert draws.shape == (2, 2000, 3)
    z = (draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(draws)
    assert np.all(np.abs(z) < 4), z
    flat = draws.reshape(-1, 3)
    sd = flat.std(axis=0)
    z_sd = (sd - np.sqrt(np.diag(cov))) / diagnostics.mcse_sd(draws)
    assert np.all(np.abs(z_sd) < 4), z_sd
