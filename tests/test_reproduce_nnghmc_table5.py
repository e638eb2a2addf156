"""NNgHMC Table 5's census-income row (fastsurrogate/reproduce/_nnghmc_table5.py):
the table runs at a tiny length on a9a and writes its columns; its
whitened parameterisation is the same posterior; skipped without the data."""
import os

import numpy as np
import pytest
import scipy.linalg

import fastsurrogate as fs
from fastsurrogate.reproduce import TABLES, run_table
from fastsurrogate.reproduce import _nnghmc_table5 as t5


@pytest.fixture
def a9a_env(data_dir, monkeypatch):
    if not (data_dir / "a9a.libsvm.gz").exists():
        pytest.skip("a9a.libsvm.gz is not in the data folder")
    monkeypatch.setenv("FASTSURROGATE_DATA", str(data_dir))
    return data_dir


def test_registered_with_its_data():
    t = TABLES["nnghmc-table5"]
    assert t.needs == ("a9a.libsvm.gz",)
    assert "census" in t.paper.lower() or "census" in t.title.lower()
    assert "other real-data rows" in t.missing
    assert "nnghmc-table5" in TABLES["nnghmc-tables"].missing


def test_whitened_target_is_the_same_posterior(a9a_env):
    # U_z(z) = U(L z) (the Gaussian prior's constant is dropped by both) and
    # grad U_z = L^T grad U, at random points around the MAP
    X, y = t5.load(1)
    model = fs.models.LogisticRegression(X, y, prior_sd=t5.PRIOR_SD)
    q, cov = t5.laplace(model, X)
    u, g = model.value_and_grad(q)
    assert np.abs(g).max() < 1e-6 * max(1.0, abs(u))      # Newton reached the mode
    L = np.linalg.cholesky(cov)
    Li = scipy.linalg.solve_triangular(L, np.eye(L.shape[0]), lower=True)
    target = fs.WeightedSum([fs.models.LogisticRegression(X @ L, y, prior_sd=None),
                             fs.models.Gaussian(np.zeros(L.shape[0]),
                                                t5.PRIOR_SD ** 2 * (Li @ Li.T))])
    rng = np.random.default_rng(0)
    for _ in range(3):
        z = Li @ q + rng.standard_normal(L.shape[0])
        uz, gz = target.value_and_grad(z)
        uq, gq = model.value_and_grad(L @ z)
        assert uz == pytest.approx(uq, rel=1e-10, abs=1e-8)
        np.testing.assert_allclose(gz, L.T @ gq, rtol=1e-8, atol=1e-8 * np.abs(gq).max())


def test_tiny_run_writes_the_columns(a9a_env, tmp_path):
    argv = ["--n-draws", "60", "--burn-in", "20", "--max-train", "300",
            "--n-steps", "3", "--n-hidden", "20", "--threads", "1"]
    text = run_table("nnghmc-table5", argv, quick=True, out=str(tmp_path))
    assert (tmp_path / "nnghmc-table5.md").read_text() == text
    head = [ln for ln in text.splitlines() if ln.startswith("| method")]
    assert len(head) == 1
    for col in ("AP", "ESS min / median / max", "s/iter", "min ESS/s", "speed-up", "train s",
                "paper"):
        assert col in head[0]
    hmc = [ln for ln in text.splitlines() if ln.startswith("| HMC |")]
    nng = [ln for ln in text.splitlines() if ln.startswith("| NNgHMC (")]
    assert len(hmc) == 1 and len(nng) == 3
    # the paper's census income rows (Table 5, 10 / 15 / 20 % training) beside ours
    assert hmc[0].rstrip().endswith("| census income: AP 0.84, median ESS/s 5.23, speed-up 1 |")
    for row, pct, speedup in zip(nng, (10, 15, 20), ("2.04", "2.19", "1.95")):
        assert row.startswith(f"| NNgHMC ({pct} %) |") and "n/a" not in row
        assert row.rstrip().endswith(f"speed-up {speedup} |")
    assert text.count("Exactness:") == 3 and "Bonferroni" in text
    with pytest.raises(ValueError, match="--fractions"):
        run_table("nnghmc-table5", argv + ["--fractions", "1.5"], out=str(tmp_path))
    assert "Not reproduced here" in text
