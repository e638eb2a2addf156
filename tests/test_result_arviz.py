"""Result.to_arviz: vector variables and ArviZ's sample-stat names."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.result import _gather_vectors

az = pytest.importorskip("arviz")


def _result(method="nuts"):
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(200), rng.normal(size=(200, 4))])
    y = (rng.uniform(size=200) < 0.5).astype(float)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    return fs.sample(model, method=method, n_draws=50, n_warmup=50, chains=2, seed=1,
                     progress=False)


def test_indexed_names_become_one_variable_with_a_dimension():
    res = _result()
    idata = res.to_arviz()
    names = list(idata.posterior.data_vars)
    assert len(names) == 1, names
    v = idata.posterior[names[0]]
    assert v.shape == (2, 50, 5)
    np.testing.assert_array_equal(v.values, res.draws)
    assert v.dims[2] == f"{names[0]}_dim_0"


def test_names_dims_and_coords_are_settable():
    res = _result()
    base = list(res.to_arviz().posterior.data_vars)[0]
    labels = ["intercept", "a", "b", "c", "d"]
    idata = res.to_arviz(rename={base: "beta"}, dims={"beta": ["feature"]},
                         coords={"feature": labels})
    assert idata.posterior["beta"].dims == ("chain", "draw", "feature")
    assert list(idata.posterior["feature"].values) == labels


def test_sample_stats_use_arviz_names():
    idata = _result("nuts").to_arviz()
    st = idata.sample_stats
    for k in ("acceptance_rate", "diverging", "energy", "step_size", "n_steps", "lp",
              "tree_depth"):
        assert k in st, k
    assert st["diverging"].dtype == bool
    assert "tree_depth" not in _result("hmc").to_arviz().sample_stats


def test_gather_keeps_incomplete_groups_and_one_based_indices():
    x = np.zeros((2, 3))
    out, dims, coords = _gather_vectors(
        {"theta[1]": x, "theta[2]": x + 1, "mu": x, "w[0]": x, "w[2]": x,
         "m[0,0]": x, "m[0,1]": x + 1, "m[1,0]": x + 2, "m[1,1]": x + 3}, {})
    assert out["theta"].shape == (2, 3, 2)
    assert list(coords["theta_dim_0"]) == [1, 2]
    assert "w[0]" in out and "w[2]" in out          # a gap: left as scalars
    assert out["m"].shape == (2, 3, 2, 2) and out["m"][0, 0, 1, 0] == 2
    assert dims["m"] == ["m_dim_0", "m_dim_1"]


def test_include_warmup_without_kept_warmup_says_so():
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(200), rng.normal(size=(200, 4))])
    y = (rng.uniform(size=200) < 0.5).astype(float)
    res = fs.sample(fs.models.LogisticRegression(X, y), "nuts", 30, 30, chains=1, seed=1,
                    progress=False, keep_warmup=False)
    with pytest.warns(RuntimeWarning, match="kept no warm-up draws"):
        idata = res.to_arviz(include_warmup=True)
    assert "warmup_posterior" not in idata.groups()
    assert "warmup_posterior" in _result().to_arviz(include_warmup=True).groups()


def test_repeated_parameter_names_are_refused_not_merged():
    """Two parameters named "a" were one ArviZ variable (the second's draws)."""
    f = lambda q: (0.5 * float(q @ q), q.copy())           # noqa: E731
    with pytest.raises(ValueError, match=r"names repeat \['a'\]"):
        fs.Potential.from_callable(f, 3, names=["a", "a", "b"])
    res = fs.sample(fs.models.StandardNormal(3), "nuts", 20, 20, chains=1, seed=1,
                    progress=False)
    res.param_names = ["a", "a", "b"]                # a Result built by hand
    with pytest.raises(ValueError, match=r"parameter names repeat \['a'\]"):
        res.to_arviz()
