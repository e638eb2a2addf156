"""pytest-benchmark: the chain loop and exact HMC (each benchmark checks its result).

    cd bench && python -m pytest test_bench_hmc.py --benchmark-group-by=group

The ratios the acceptance criteria ask for come from bench/hmc_ratios.py,
which measures numerator and denominator in one run.
"""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.core._hmc import Chain, new_trace

DIM, N_ITER, N_STEPS = 50, 2000, 10


@pytest.fixture(scope="module")
def normal50():
    pot = fs.models.StandardNormal(DIM)
    return pot, np.random.default_rng(0).standard_normal(DIM)


@pytest.mark.benchmark(group="leapfrog-50d-normal")
def test_chain_loop(benchmark, normal50):
    pot, q = normal50
    chain = Chain(pot, pot, q, np.random.default_rng(1), step_size=0.15, n_steps=N_STEPS)
    trace = new_trace(N_ITER, DIM)
    benchmark(chain.run, trace, 0, N_ITER)
    assert 0.8 < trace["accept_prob"].mean() <= 1.0
    assert abs(trace["draws"].var() - 1.0) < 0.2


@pytest.mark.benchmark(group="leapfrog-50d-normal")
def test_gradients_alone(benchmark, normal50):
    pot, q = normal50
    benchmark(pot._eval_loop, q, N_ITER * N_STEPS)
    np.testing.assert_array_equal(pot.grad(q), q)


@pytest.fixture(scope="module")
def logistic():
    X, y, beta = fs.datasets.simulate_logistic(100000, 50, seed=1)
    return X, y, beta


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.benchmark(group="exact-hmc-logistic-100000x50")
def test_exact_hmc_iterations(benchmark, logistic, n_threads):
    X, y, beta = logistic
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=n_threads)
    chain = Chain(model, model, beta, np.random.default_rng(2), step_size=0.045, n_steps=6)
    trace = new_trace(50, 50)
    benchmark(chain.run, trace, 0, 50)
    assert trace["accept_prob"].mean() > 0.3


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.benchmark(group="exact-hmc-logistic-100000x50")
def test_six_gradients_per_iteration(benchmark, logistic, n_threads):
    X, y, beta = logistic
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0, n_threads=n_threads)
    benchmark(model._eval_loop, beta, 6 * 50)
    assert np.all(np.isfinite(model.grad(beta)))
