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
    assert "SGLD Amari to W0" in text and "- SGLD: " in text
    assert "Amari-distance floor" in text and "computed in" in text
    assert (tmp_path / "out" / "vhmc-fig5.md").exists()
    text2 = run_table("vhmc-fig5", argv, out=str(tmp_path / "out"))
    assert "(cached " in text2


# ---- SGLD (fastsurrogate/reproduce/_vhmc_fig5_sgld.py) ----------------------------

def test_sgld_minibatch_gradient_averages_to_the_full_gradient():
    from fastsurrogate.reproduce import _vhmc_fig5_sgld as sgld
    X, _, W_true = fs.datasets.simulate_ica(n=600, d=3, seed=2)
    model = fs.models.ICA(X, prior_var=100.0)
    W = W_true + 0.1 * np.random.default_rng(0).standard_normal((3, 3))
    full = model.grad(W.ravel()).reshape(3, 3)
    # one batch of every row is the model's own gradient
    np.testing.assert_allclose(sgld.ica_minibatch_grad(W, X, 600, 100.0), full,
                               rtol=1e-10, atol=1e-8)
    # the mean over a partition into 6 batches of 100 (shuffled) is too
    perm = np.random.default_rng(1).permutation(600)
    parts = [sgld.ica_minibatch_grad(W, X[perm[i:i + 100]], 600, 100.0)
             for i in range(0, 600, 100)]
    np.testing.assert_allclose(np.mean(parts, axis=0), full, rtol=1e-10, atol=1e-8)
    # and one batch alone is not (the estimate is noisy)
    assert np.max(np.abs(parts[0] - full)) > 1e-3
    # central finite differences of U
    h = 1e-6
    fd = [(model.value(W.ravel() + h * e) - model.value(W.ravel() - h * e)) / (2 * h)
          for e in np.eye(9)]
    np.testing.assert_allclose(full.ravel(), fd, rtol=1e-5, atol=1e-4)


def test_sgld_step_sizes_decrease_as_a_power():
    from fastsurrogate.reproduce._vhmc_fig5_sgld import sgld_step_sizes
    eps = sgld_step_sizes(2.0, 10.0, np.arange(0, 1000, 10))
    assert eps[0] == pytest.approx(2.0 * 10.0 ** -0.55)
    assert np.all(np.diff(eps) < 0)
    assert sgld_step_sizes(2.0, 10.0, 90) / sgld_step_sizes(2.0, 10.0, 0) == pytest.approx(
        10.0 ** -0.55)


def test_sgld_tiny_run_stays_near_the_posterior():
    # 2 channels, 400 rows: from the Laplace mean, 3000 iterations of batch
    # 50 at half the stability limit; the mean of the iterates within 1
    # posterior sd (Laplace) of the Laplace mean on every entry (seeds 3-7:
    # at most 0.13)
    from fastsurrogate.reproduce._vhmc_fig5_sgld import sgld_ica
    model, lap = _small_ica()
    eps0 = 2.0 * np.linalg.eigvalsh(lap.cov).min()
    out = sgld_ica(np.asarray(model.X), 100.0, lap.mean, eps0 * 1000.0 ** 0.55, 1000.0, 50,
                   60.0, np.random.default_rng(3), block=20, max_iter=3000)
    assert out["n_iter"] == 3000 and out["block_means"].shape == (150, 4)
    assert np.all(np.diff(out["times"]) >= 0)
    assert out["eps_first"] == pytest.approx(eps0) and out["eps_last"] < eps0
    sd = np.sqrt(np.diag(lap.cov))
    z = (out["block_means"].mean(axis=0) - lap.mean) / sd
    assert np.all(np.abs(z) < 1.0), z
