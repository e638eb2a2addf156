"""VHMC paper Figure 5 (ICA, fastsurrogate/reproduce/_vhmc_fig5.py): the Amari
distance, the cached reference W0 from a long exact-HMC run, and a tiny run
of the table."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.diagnostics import amari_distance
from fastsurrogate.reproduce import _vhmc_fig5 as fig5
from fastsurrogate.reproduce import vhmc as vhmc_tables


def test_amari_distance_zero_at_w0_and_invariant_to_rows():
    rng = np.random.default_rng(3)
    W0 = rng.standard_normal((5, 5))
    assert amari_distance(W0, W0) == pytest.approx(0.0, abs=1e-12)
    # the ICA ambiguities: rows permuted, rescaled, sign-flipped
    perm = np.eye(5)[[3, 0, 4, 1, 2]]
    D = np.diag([2.0, -0.5, 3.0, -1.0, 0.1])
    assert amari_distance(D @ perm @ W0, W0) == pytest.approx(0.0, abs=1e-12)
    W = W0 + 0.05 * rng.standard_normal((5, 5))
    d = amari_distance(W, W0)
    assert 0.0 < d < 1.0
    # a row permutation of any W leaves it unchanged (rescaling rows changes
    # the column sums of |W W0^-1|, so that invariance holds only at 0)
    assert amari_distance(perm @ W, W0) == pytest.approx(d, rel=1e-12)
    assert amari_distance(D @ W0, W0) == pytest.approx(0.0, abs=1e-12)
    # the table's module uses the same function
    assert vhmc_tables.amari_distance is amari_distance


def test_amari_floor_scales_with_the_mcse():
    W0 = np.random.default_rng(1).standard_normal((4, 4))
    assert fig5.amari_floor(W0, np.zeros(16)) == pytest.approx(0.0, abs=1e-12)
    small = fig5.amari_floor(W0, np.full(16, 1e-4))
    large = fig5.amari_floor(W0, np.full(16, 1e-2))
    assert 0.0 < small < large
    # first order in the perturbation: 100x the MCSE, about 100x the floor
    assert large / small == pytest.approx(100.0, rel=0.1)


def test_running_distance_counts_the_draws_done_by_each_budget():
    W0 = np.array([[2.0, 1.0], [0.5, 1.0]])
    draws = np.tile(W0.ravel(), (50, 1))
    times = np.arange(1, 51) * 0.1            # draw k done at 0.1 k s
    out = fig5.running_distance(draws, times, [0.5, 1.0, 2.0, 9.0], (W0,))
    assert [k for k, _ in out] == [5, 10, 20, 50]
    assert out[0][1] is None                  # fewer than 10 draws: no estimate
    assert all(ds[0] == pytest.approx(0.0, abs=1e-12) for _, ds in out[1:])


def _small_ica(n=400, seed=5):
    X, A, W_true = fs.datasets.simulate_ica(n=n, d=2, seed=seed)
    model = fs.models.ICA(X, prior_var=100.0)
    lap = fs.surrogates.laplace_approximation(model, init=W_true.ravel())
    return model, lap


def test_reference_is_cached_and_reloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTSURROGATE_CACHE", str(tmp_path))
    model, lap = _small_ica()
    ref, src = fig5.reference_w0(model, lap, 60, seed=7, n_steps=3)
    assert src.startswith("computed")
    files = list(tmp_path.glob("vhmc_fig5_ref_*.npz"))
    assert len(files) == 1
    assert ref["mean"].shape == (4,) and ref["mcse"].shape == (4,)
    assert int(ref["n_draws"]) == 60 and np.all(ref["mcse"] > 0)

    # second call: loads the file, runs no sampler
    def no_hmc(*a, **k):
        raise AssertionError("the cached reference was recomputed")
    monkeypatch.setattr(fs, "HMC", no_hmc)
    again, src2 = fig5.reference_w0(model, lap, 60, seed=7, n_steps=3)
    assert src2 == f"cached {files[0]}"
    np.testing.assert_array_equal(again["mean"], ref["mean"])
    # a shorter request is served by the longer cached run
    shorter, src3 = fig5.reference_w0(model, lap, 30, seed=7, n_steps=3)
    assert src3.startswith("cached")
    np.testing.assert_array_equal(shorter["mean"], ref["mean"])
    # other data or other settings: another key, so another file
    model2, _ = _small_ica(seed=6)
    assert fig5.reference_key(model2.X, 100.0, 3, 7) != fig5.reference_key(model.X, 100.0, 3, 7)
    assert fig5.reference_key(model.X, 100.0, 3, 8) != fig5.reference_key(model.X, 100.0, 3, 7)


def test_reference_mean_is_the_posterior_mean(tmp_path):
    # W0 is an exact-HMC mean: against an independent long run it agrees within
    # 5 combined MCSE on every entry
    model, lap = _small_ica()
    ref, _ = fig5.reference_w0(model, lap, 1500, seed=11, n_steps=5,
                               path=str(tmp_path / "ref.npz"))
    other = fs.HMC(model, n_steps=5, metric=lap.cov).sample(
        1500, 500, chains=1, seed=12, init=lap.mean, progress=False)
    m = other.draws[0].mean(axis=0)
    se = np.hypot(ref["mcse"], fs.diagnostics.mcse_mean(other.draws))
    z = (m - ref["mean"]) / se
    assert np.all(np.abs(z) < 5.0), z


def test_fig5_tiny_run_writes_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTSURROGATE_CACHE", str(tmp_path / "cache"))
    from fastsurrogate.reproduce import run_table
    argv = ["--n-obs", "300", "--channels", "2", "--n-hidden", "40", "--train", "100",
            "--vhmc-draws", "500", "--hmc-warmup", "100", "--reference-draws", "200",
            "--budgets", "0.5", "1", "--threads", "1", "--n-steps", "4"]
    text = run_table("vhmc-fig5", argv, out=str(tmp_path / "out"))
    assert "exact HMC Amari to W0" in text and "VHMC Amari to W0" in text
    assert "Amari-distance floor" in text and "computed in" in text
    assert (tmp_path / "out" / "vhmc-fig5.md").exists()
    text2 = run_table("vhmc-fig5", argv, out=str(tmp_path / "out"))
    assert "(cached " in text2
