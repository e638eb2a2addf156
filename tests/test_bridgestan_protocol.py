"""Potential speaks BridgeStan's StanModel protocol (and keeps bayes-kit's)."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.models import posteriordb as pdb


def test_bridgestan_signatures():
    pot = fs.models.Gaussian(np.array([1.0, -1.0]), np.diag([1.0, 4.0]))
    q = np.array([0.5, 0.5])
    u, g = pot.value_and_grad(q)
    assert pot.param_unc_num() == pot.dims() == 2
    assert pot.param_num() == 2
    assert pot.param_num(include_tp=True, include_gq=True) == 2
    assert pot.param_unc_names() == list(pot.param_names)
    assert pot.log_density(q) == -u
    assert pot.log_density(q, propto=True, jacobian=True) == -u
    v, lg = pot.log_density_gradient(q, propto=True, jacobian=True)
    assert v == -u
    np.testing.assert_array_equal(lg, -g)
    out = np.empty(2)
    v2, lg2 = pot.log_density_gradient(q, out=out)
    assert lg2 is out and v2 == -u
    np.testing.assert_array_equal(out, -g)
    assert pot.log_density_gradient(q)[0] == -u          # bayes-kit form


def test_unsupported_flags_and_bad_out_raise_value_errors():
    pot = fs.models.StandardNormal(3)
    with pytest.raises(ValueError, match="propto"):
        pot.log_density(np.zeros(3), propto=False)
    with pytest.raises(ValueError, match="jacobian"):
        pot.log_density_gradient(np.zeros(3), jacobian=False)
    with pytest.raises(ValueError, match="out"):
        pot.log_density_gradient(np.zeros(3), out=np.empty(2))


def test_param_num_counts_constrained_quantities(data_dir):
    model = pdb.EightSchoolsNoncentered.from_posteriordb(data_dir)
    pot = pdb.as_potential(model)
    assert pot.param_unc_num() == model.dim
    assert pot.param_num() == sum(np.size(v) for v in model.constrain(np.zeros(model.dim)).values())
