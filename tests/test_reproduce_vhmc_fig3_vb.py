"""VHMC paper Figure 3's variational baselines
(fastsurrogate/reproduce/_vhmc_fig3_vb.py): VBEM's fixed point, its ELBO,
and FF-Minibatch's convergence, on a small probit problem."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.reproduce import _vhmc_fig3_vb as vb

PRIOR_VAR = 100.0


@pytest.fixture(scope="module")
def probit():
    X, y, beta = fs.datasets.simulate_probit(300, 3, seed=4)
    model = fs.models.ProbitRegression(X, y, prior_sd=np.sqrt(PRIOR_VAR))
    lap = fs.surrogates.laplace_approximation(model)
    return X, y, model, lap


def test_probit_grad_hess_matches_the_model_and_finite_differences(probit):
    X, y, model, _ = probit
    theta = np.array([0.3, -0.5, 1.1])
    g, H = vb.probit_grad_hess(theta, X, 2.0 * y - 1.0, 1.0, PRIOR_VAR)
    np.testing.assert_allclose(g, -model.grad(theta), rtol=1e-9, atol=1e-9)
    h = 1e-5
    fd = np.array([(model.grad(theta - h * e) - model.grad(theta + h * e)) / (2 * h)
                   for e in np.eye(3)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-5)


def test_vbem_mean_is_the_posterior_mode_and_its_elbo_increases(probit):
    # VBEM's fixed-point equation for the mean is the MAP's (docstring of
    # vbem_probit): from the prior it converges to the Laplace mean to 1e-6
    X, y, _, lap = probit
    evals, means, cov, elbos = vb.vbem_probit(X, y, PRIOR_VAR, 500, tol=1e-12, elbo=True)
    np.testing.assert_allclose(means[-1], lap.mean, atol=1e-6)
    assert evals[0] == 2.0 and np.all(np.diff(evals) == 1.0)
    # coordinate ascent: the ELBO never decreases, over every half-step
    assert np.all(np.diff(elbos) >= -1e-8 * np.abs(elbos[:-1])), np.diff(elbos).min()
    assert elbos[-1] > elbos[0] + 1.0
    # the extra factorisation: VBEM's covariance is smaller than Laplace's
    assert np.all(np.linalg.eigvalsh(lap.cov - cov) > 0)


def test_ff_full_batch_converges_near_the_laplace_mean(probit):
    # the Gaussian VB mean differs from the mode by O(1/N): within 0.15
    # posterior sd of the Laplace mean on every coordinate
    X, y, _, lap = probit
    evals, means = vb.ff_minibatch_probit(X, y, PRIOR_VAR, 1500, len(y), 1.0 / np.sqrt(1500),
                                          np.random.default_rng(0))
    assert evals[-1] == pytest.approx(1500.0)
    sd = np.sqrt(np.diag(lap.cov))
    assert np.all(np.abs(means[-1] - lap.mean) < 0.15 * sd), (means[-1] - lap.mean) / sd
    # from the prior it starts far away
    assert np.max(np.abs(means[0] - lap.mean) / sd) > 1.0


def test_ff_minibatch_counts_passes_and_gets_close(probit):
    X, y, _, lap = probit
    evals, means = vb.ff_minibatch_probit(X, y, PRIOR_VAR, 1500, 50, 1.0 / np.sqrt(1500),
                                          np.random.default_rng(1))
    assert evals[0] == pytest.approx(50 / 300) and evals[-1] == pytest.approx(250.0)
    sd = np.sqrt(np.diag(lap.cov))
    assert np.all(np.abs(means[-1] - lap.mean) < 0.3 * sd), (means[-1] - lap.mean) / sd
