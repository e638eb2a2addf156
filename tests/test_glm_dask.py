"""GLMs on Dask arrays: U and its gradient as one distributed reduction equal the
in-memory model's; RNS-HMC with X on a LocalCluster samples the exact posterior."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def _data(family, n=2300, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    t = X @ rng.standard_normal(d)
    if family is fs.models.LogisticRegression or family is fs.models.ProbitRegression:
        y = (rng.random(n) < 1 / (1 + np.exp(-t))).astype(float)
    elif family is fs.models.PoissonRegression:
        y = rng.poisson(np.exp(t)).astype(float)
    else:
        y = t + rng.standard_normal(n)
    return X, y


FAMILIES = [(fs.models.LogisticRegression, {}), (fs.models.ProbitRegression, {}),
            (fs.models.PoissonRegression, {}), (fs.models.LinearRegression, {"sigma": 0.7})]


@pytest.mark.parametrize("family, kw", FAMILIES)
def test_equals_the_in_memory_model(client, family, kw):
    X, y = _data(family)
    prior = dict(prior_sd=np.linspace(1.0, 3.0, 5), prior_mean=0.3)
    ref = family(X, y, **prior, **kw)
    # uneven row chunks (the last is shorter), y as a NumPy array
    dist = family(da.from_array(X, chunks=(600, 2)), y, **prior, **kw)
    assert dist.distributed.n_chunks == 4 and dist.n_obs == X.shape[0]
    assert isinstance(dist, family) and dist.thread_safe
    rng = np.random.default_rng(1)
    for beta in rng.standard_normal((4, 5)):
        u0, g0 = ref.value_and_grad(beta)
        u1, g1 = dist.value_and_grad(beta)
        assert abs(u1 - u0) <= 1e-12 * abs(u0)
        assert np.max(np.abs(g1 - g0)) <= 1e-12 * np.max(np.abs(g0))
        assert abs(dist.value(beta) - ref.value(beta)) <= 1e-12 * abs(u0)
    assert np.array_equal(dist.prior_sd, ref.prior_sd)
    assert "Dask" in repr(dist)


def test_flat_prior_and_bad_labels(client):
    X, y = _data(fs.models.LogisticRegression)
    ref = fs.models.LogisticRegression(X, y, prior_sd=None)
    dist = fs.models.LogisticRegression(da.from_array(X, chunks=(1000, 5)),
                                        da.from_array(y, chunks=1000), prior_sd=None)
    b = np.full(5, 0.2)
    assert abs(dist.value(b) - ref.value(b)) <= 1e-12 * abs(ref.value(b))
    bad = y.copy()
    bad[1500] = 2.0
    with pytest.raises(ValueError, match="labels 0 and 1"):
        fs.models.LogisticRegression(da.from_array(X, chunks=(1000, 5)), bad)
    with pytest.raises(ValueError, match="prior_sd"):
        fs.models.LogisticRegression(da.from_array(X, chunks=(1000, 5)), y, prior_sd=-1.0)
    with pytest.raises(TypeError, match="Dask arrays"):
        dist.fisher_information(b)
    # a bad value is reported at its row in the data set, not in its chunk
    with pytest.raises(ValueError, match=r"y\[1500\] = 2"):
        fs.models.LogisticRegression(da.from_array(X, chunks=(1000, 5)), bad)
    badx = X.copy()
    badx[2123, 3] = np.nan
    with pytest.raises(ValueError, match=r"X\[2123, 3\]"):
        fs.models.LogisticRegression(da.from_array(badx, chunks=(1000, 5)), y)
    with pytest.raises(TypeError, match="fixed when it is built"):
        dist.n_threads = 2


def test_numpy_x_is_chunked_like_y_and_dask_frames_are_refused(client):
    X, y = _data(fs.models.LogisticRegression)
    ref = fs.models.LogisticRegression(X, y)
    dist = fs.models.LogisticRegression(X, da.from_array(y, chunks=1000))
    assert dist.distributed.n_chunks == 3          # was one chunk on one worker
    b = np.full(5, 0.2)
    assert abs(dist.value(b) - ref.value(b)) <= 1e-12 * abs(ref.value(b))
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    with pytest.raises(TypeError, match=r"X is a Dask .*to_dask_array\(lengths=True\)"):
        fs.models.LogisticRegression(frame, y)
    with pytest.raises(TypeError, match="y is a Dask"):
        fs.models.LogisticRegression(da.from_array(X, chunks=(1000, 5)),
                                     dd.from_pandas(pd.Series(y), npartitions=3))


def test_rns_hmc_with_x_on_the_cluster_is_exact(client):
    X, y, _ = fs.datasets.simulate_logistic(2000, 4, seed=5)
    ref_model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    ref = fs.sample(ref_model, method="hmc", n_draws=4000, n_warmup=500, chains=4, seed=2,
                    progress=False, n_steps=8)
    model = fs.models.LogisticRegression(da.from_array(X, chunks=(1000, 4)), y, prior_sd=10.0)
    # about 1500 exact calls on the cluster (a few ms each on an idle machine)
    res = fs.sample(model, method="rns-hmc", n_draws=1000, n_warmup=150, chains=1, seed=3,
                    progress=False, n_steps=8, n_hidden=100)
    assert res.potential is model and res.surrogate is not None
    # one exact U per kept iteration, none for the surrogate trajectory
    assert res.info["exact_evaluations"] <= 1000
    a, b = res.draws, ref.draws
    zm = (a.mean(axis=(0, 1)) - b.mean(axis=(0, 1))) / np.hypot(
        diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    zs = (a.std(axis=(0, 1)) - b.std(axis=(0, 1))) / np.hypot(
        diagnostics.mcse_sd(a), diagnostics.mcse_sd(b))
    assert np.all(np.abs(zm) < 4), zm
    assert np.all(np.abs(zs) < 4), zs
