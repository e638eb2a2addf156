"""The user guide's "writing your own sampler" example (docs/guide.md), run as it stands."""
import re
from pathlib import Path

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide.md"


@pytest.fixture(scope="module")
def laplace_hmc():
    if not GUIDE.is_file():
        pytest.skip("docs/guide.md is not beside the tests")
    text = GUIDE.read_text()
    m = re.search(r"<!-- own-sampler:start -->\s*```python\n(.*?)```", text, re.S)
    assert m, "docs/guide.md lost its own-sampler example"
    code = m.group(1)
    assert len(code.strip().splitlines()) <= 40
    namespace = {}
    exec(compile(code, str(GUIDE), "exec"), namespace)
    yield namespace["LaplaceHMC"]
    fs.samplers.SAMPLERS.pop("laplace-hmc", None)


def test_readme_sampler_targets_the_posterior(laplace_hmc):
    mean = np.array([1.0, -2.0, 0.5])
    sd = np.array([0.1, 1.0, 10.0])
    corr = np.array([[1.0, 0.9, 0.0], [0.9, 1.0, -0.3], [0.0, -0.3, 1.0]])
    cov = corr * np.outer(sd, sd)
    res = fs.sample(fs.models.Gaussian(mean, cov), method="laplace-hmc", n_draws=2000,
                    n_warmup=300, chains=2, seed=5, progress=False)
    assert isinstance(res, fs.Result) and res.method == "laplace-hmc"
    assert res.draws.shape == (2, 2000, 3)
    assert set(res.timings) >= {"laplace", "warmup", "sample"}
    z = (res.draws.mean(axis=(0, 1)) - mean) / diagnostics.mcse_mean(res.draws)
    assert np.all(np.abs(z) < 4.5), z
    # variances: E (q - mean)^2, with the MCSE of that mean
    sq = (res.draws - mean) ** 2
    zv = (sq.mean(axis=(0, 1)) - np.diag(cov)) / diagnostics.mcse_mean(sq)
    assert np.all(np.abs(zv) < 4.5), zv
    np.testing.assert_allclose(res.info["laplace"].cov, cov, rtol=1e-4, atol=1e-8)


def test_readme_sampler_keeps_the_base_class_contract(laplace_hmc):
    target = fs.models.StandardNormal(2)
    with pytest.raises(ValueError, match="n_draws"):
        laplace_hmc(target).sample(-1)
    with pytest.raises(ValueError, match="init"):
        laplace_hmc(target).sample(10, init=np.zeros(3))
    calls = {"n": 0}

    def f(q):
        calls["n"] += 1
        if calls["n"] == 400:
            raise RuntimeError("boom")
        return 0.5 * q @ q, q

    with pytest.raises(RuntimeError, match="boom") as info:
        laplace_hmc(fs.Potential.from_callable(f, 2)).sample(500, n_warmup=100, chains=1,
                                                            progress=False, seed=1)
    assert info.value.result.interrupted
    assert np.all(np.isfinite(info.value.result.warmup_draws))
