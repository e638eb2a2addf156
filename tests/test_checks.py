"""The gradient check before a run and the warnings after it."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.diagnostics.checks import check_gradient, run_warnings


def _quadratic(value_sign=1.0, grad_scale=1.0):
    return fs.Potential.from_callable(
        lambda q: (value_sign * 0.5 * q @ q, value_sign * grad_scale * q), 4)


def test_a_correct_gradient_passes():
    c = check_gradient(_quadratic())
    assert c.ok and not c.sign_flipped and not c.unbounded
    assert np.nanmax(c.relative_error) < 1e-6
    X, y, _ = fs.datasets.simulate_logistic(n=500, d=3, seed=2)
    assert check_gradient(fs.models.LogisticRegression(X, y, prior_sd=10.0)).ok


def test_a_gradient_of_the_wrong_sign_is_named():
    pot = fs.Potential.from_callable(lambda q: (0.5 * q @ q, -q), 4)
    c = check_gradient(pot)
    assert not c.ok and c.sign_flipped and "wrong sign" in c.message()


def test_log_p_passed_as_u_is_named():
    c = check_gradient(_quadratic(value_sign=-1.0))
    assert not c.ok and c.unbounded and "log_density=True" in c.message()


def test_a_wrong_gradient_is_caught_at_its_size():
    c = check_gradient(_quadratic(grad_scale=1.01))
    assert not c.ok and not c.sign_flipped
    assert 1e-3 < np.nanmax(c.relative_error) < 0.1
    assert "disagrees" in c.message()


def test_a_gradient_off_by_a_factor_in_one_coordinate_is_caught():
    def f(q):
        g = q.copy()
        g[2] *= 3.0
        return 0.5 * q @ q, g
    pot = fs.Potential.from_callable(f, 4)
    c = check_gradient(pot)
    assert not c.ok and not c.sign_flipped and "disagrees" in c.message()
    with pytest.raises(fs.diagnostics.GradientCheckError, match="disagrees"):
        fs.sample(pot, n_draws=10, n_warmup=10, chains=1, progress=False)


def test_check_gradient_refuses_bad_points():
    with pytest.raises(ValueError, match="q must have shape"):
        check_gradient(_quadratic(), q=np.zeros(3))


def test_a_clean_run_has_no_warnings():
    res = fs.sample(fs.models.StandardNormal(2), "nuts", 1000, 500, chains=2, seed=1,
                    progress=False, surrogate=False)
    assert run_warnings(res) == []


def test_warnings_name_what_went_wrong():
    # a step so long every proposal diverges: the chains never move
    stuck = fs.HMC(fs.models.StandardNormal(2), step_size=50.0, adapt=False, n_steps=3).sample(
        50, 0, chains=2, seed=1, progress=False)
    text = " ".join(run_warnings(stuck))
    assert "never moved" in text and "divergent" in text and "ESS below" in text
    # two chains in two wells that a short step never crosses: R-hat
    well = fs.Potential.from_callable(
        lambda q: (float((q[0] ** 2 - 25.0) ** 2 / 4.0 + 0.5 * q[1] ** 2),
                   np.array([q[0] * (q[0] ** 2 - 25.0), q[1]])), 2)
    split = fs.HMC(well, step_size=0.05, n_steps=5, adapt=False).sample(
        300, 0, chains=2, seed=2, init=np.array([[-5.0, 0.0], [5.0, 0.0]]), progress=False)
    assert any("R-hat" in w for w in run_warnings(split))


def test_sample_refuses_a_wrong_gradient_and_warns_after_a_poor_run():
    flipped = fs.Potential.from_callable(lambda q: (0.5 * q @ q, -q), 3)
    with pytest.raises(fs.diagnostics.GradientCheckError, match="wrong sign"):
        fs.sample(flipped, "hmc", 10, 10, chains=1, progress=False)
    logp = fs.Potential.from_callable(lambda q: (-0.5 * q @ q, -q), 3)
    with pytest.raises(ValueError, match="log_density=True"):
        fs.sample(logp, "nuts", 10, 10, chains=1, progress=False)
    good = fs.Potential.from_callable(lambda q: (0.5 * q @ q, q), 3)
    with pytest.warns(fs.diagnostics.SamplingWarning, match="ESS below"):
        fs.sample(good, "nuts", 30, 30, chains=2, seed=1, progress=False, surrogate=False)
    # warn=False: neither the check nor the warnings
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", fs.diagnostics.SamplingWarning)
        res = fs.sample(flipped, "hmc", 10, 10, chains=1, progress=False, warn=False)
    assert res.draws.shape == (1, 10, 3)


def test_a_c_function_potential_is_checked_before_sampling():
    """A PyMC model (or any C function given by address) is checked too:
    a numba cfunc that returns U where log p is expected is refused."""
    numba = pytest.importorskip("numba")
    from numba import types
    from fastsurrogate.core import CFunctionPotential

    sig = types.int32(types.voidptr, types.CPointer(types.float64),
                      types.CPointer(types.float64), types.CPointer(types.float64))

    @numba.cfunc(sig, nopython=True)
    def u_not_logp(user, q, logp, grad):
        logp[0] = 0.5 * (q[0] * q[0] + q[1] * q[1])     # U, but read as log p
        grad[0] = q[0]
        grad[1] = q[1]
        return 0

    pot = CFunctionPotential(u_not_logp, 2)
    with pytest.raises(fs.diagnostics.GradientCheckError, match="log_density=True"):
        fs.sample(pot, n_draws=10, n_warmup=10, chains=1, progress=False)
