"""fastsurrogate.plots: every plot rendered to PNG with the Agg backend, the
training curves the surrogate samplers record, and clear errors."""
import sys

import numpy as np
import pytest

import fastsurrogate as fs

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.image as mpimg  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check_png(fig, path):
    """fig saved to path is a PNG of several KB whose pixels are not all alike."""
    fig.savefig(path, dpi=60)
    plt.close(fig)
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 3000, len(data)
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 50
    assert float(img[..., :3].std()) > 0.02          # something was drawn


def _model():
    return fs.models.Gaussian(np.array([1.0, -1.0]), np.array([[1.0, 0.3], [0.3, 0.5]]))


@pytest.fixture(scope="module")
def hmc_res():
    return fs.sample(_model(), method="hmc", n_draws=400, n_warmup=300, chains=2, seed=1,
                     progress=False)


@pytest.mark.parametrize("name", ["trace", "marginals", "acceptance", "energy"])
def test_each_sampling_plot_renders_a_png(hmc_res, tmp_path, name):
    fig = getattr(hmc_res, f"plot_{name}")()
    _check_png(fig, tmp_path / f"{name}.png")


def test_trace_with_warmup_and_chosen_parameters(hmc_res, tmp_path):
    fig = hmc_res.plot_trace(params=["q[1]", 0], warmup=True)
    assert len(fig.axes) == 2
    assert fig.axes[0].get_ylabel() == "q[1]"
    # two chains, warm-up and kept draws: two lines per chain
    assert len(fig.axes[0].lines) == 4
    _check_png(fig, tmp_path / "trace_warm.png")


def test_marginals_against_a_reference(hmc_res, tmp_path):
    mean, sd = np.array([1.0, -1.0]), np.sqrt([1.0, 0.5])
    fig = fs.plots.plot_marginals(hmc_res, reference=(mean, sd))
    # the reference density and mean line drawn in each panel
    assert all(any("reference" in (l.get_label() or "") for l in ax.lines)
               or len(ax.lines) >= 3 for ax in fig.axes if ax.get_visible())
    _check_png(fig, tmp_path / "marginals_ref.png")


def test_plots_draw_on_given_axes(hmc_res):
    fig, axs = plt.subplots(1, 2)
    out = hmc_res.plot_marginals(axes=axs)
    assert out is fig
    fig2, ax = plt.subplots()
    assert hmc_res.plot_acceptance(ax=ax) is fig2
    plt.close("all")


def test_bad_arguments_raise_clear_errors(hmc_res):
    with pytest.raises(ValueError, match="unknown parameter"):
        hmc_res.plot_trace(params=["nope"])
    with pytest.raises(ValueError, match="out of range"):
        hmc_res.plot_trace(params=[5])
    with pytest.raises(ValueError, match="shape"):
        hmc_res.plot_marginals(reference=(np.zeros(3), np.ones(3)))
    with pytest.raises(ValueError, match="positive"):
        hmc_res.plot_marginals(reference=(np.zeros(2), np.zeros(2)))
    with pytest.raises(TypeError, match="pair"):
        hmc_res.plot_marginals(reference=1.0)
    with pytest.raises(ValueError, match="window"):
        hmc_res.plot_acceptance(window=0)
    with pytest.raises(ValueError, match="no surrogate training curve"):
        hmc_res.plot_training()
    with pytest.raises(ValueError, match="needs 2 axes"):
        hmc_res.plot_marginals(axes=[plt.subplots()[1]])
    with pytest.raises(TypeError, match="Result"):
        fs.plots.plot_trace(np.zeros((1, 10, 2)))
    plt.close("all")


def test_missing_matplotlib_says_how_to_install(hmc_res, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"fastsurrogate\[plot\]"):
        hmc_res.plot_trace()


# -- the surrogate samplers' training curves ----------------------------------------

def test_rns_hmc_records_and_plots_its_fit(tmp_path):
    res = fs.sample(_model(), method="rns-hmc", n_draws=200, n_warmup=300, chains=1, seed=2,
                    n_hidden=60, progress=False)
    cur = res.info["training_curve"]
    n_cand = len(fs.surrogates.random_network.INPUT_SCALES) * len(
        fs.surrogates.random_network.RIDGES)
    assert len(cur["candidate"]) == n_cand and cur["holdout_rmse"].shape == (n_cand,)
    assert cur["chosen"] in cur["candidate"]
    # the chosen candidate has the smallest held-out error
    assert cur["holdout_rmse"][cur["candidate"].index(cur["chosen"])] == cur["holdout_rmse"].min()
    assert cur["train_rmse"] == res.info["train_rmse"]
    _check_png(res.plot_training(), tmp_path / "rns.png")


def test_arns_hmc_records_held_out_and_fitted_error(tmp_path):
    res = fs.sample(_model(), method="arns-hmc", n_draws=600, n_warmup=300, chains=2, seed=3,
                    n_hidden=60, n_start=200, progress=False)
    for k, cur in enumerate(res.info["training_curve"]):
        # one row per span of 250 iterations: (iteration, held-out RMSE, RMSE)
        # (a re-solve after a numerical breakdown may add a mark between them)
        assert cur.shape[1] == 3 and cur.shape[0] >= 3
        assert {250, 500, 600} <= set(cur[:, 0].tolist()) and cur[-1, 0] == 600
        assert np.all(np.isfinite(cur[:, 1:])) and np.all(cur[:, 1:] >= 0)
        # recomputed from the draws with the final network
        net = res.info["surrogates"][k]
        q, u = res.draws[k, 500:600], res.stats["potential"][k, 500:600]
        rmse = np.sqrt(np.mean((np.array([net.value(x) for x in q]) - u) ** 2))
        assert cur[-1, 2] == pytest.approx(rmse, rel=1e-8)
    _check_png(res.plot_training(), tmp_path / "arns.png")


def test_vhmc_training_curve_plots(tmp_path):
    res = fs.sample(_model(), method="vhmc", n_draws=200, n_warmup=300, chains=1, seed=4,
                    n_hidden=40, progress=False)
    lines = fs.plots.training_curves(res)
    assert len(lines) == 1 and len(lines[0][1]) == len(res.info["training_curve"][0]["iteration"])
    _check_png(res.plot_training(), tmp_path / "vhmc.png")


def test_nnghmc_records_each_training(tmp_path):
    res = fs.sample(_model(), method="nnghmc", n_draws=200, n_warmup=400, chains=1, seed=5,
                    n_hidden=20, progress=False, trainer_options={"max_iter": 60})
    cur = res.info["training_curve"]
    trains = [e for e in res.info["events"] if e["event"] == "train"]
    assert len(cur) == len(trains) >= 1
    for c, e in zip(cur, trains):
        assert c["iteration"] == e["iteration"]
        assert len(c["loss"]) == len(c["holdout_loss"]) == e["iterations"] <= 60
        assert c["holdout_rel_error"] == e["holdout_rel_error"]
    _check_png(res.plot_training(), tmp_path / "nnghmc.png")
