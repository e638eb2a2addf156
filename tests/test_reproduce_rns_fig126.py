"""RNS-HMC paper Figures 1, 2 and 6 (``fastsurrogate reproduce rns-fig1`` /
``rns-fig2`` / ``rns-fig6``): tiny runs of each table checking what it
measures (the GP interpolates, the exact HMC accepts nearly everything on
the banana, the two samplers' marginals agree), the pieces they are built
from (the leapfrog of the force map, the marginal comparison) and that each
report carries the paper's figures in a "paper" column.  Nothing is asserted
about time."""
import argparse
import math
import warnings

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.reproduce import TABLES, run_table
from fastsurrogate.reproduce import _rns_fig1, _rns_fig2, _rns_fig6
from fastsurrogate.reproduce._plots import markdown_tables, number


def _table(text, first_cell):
    """The Markdown table of ``text`` whose header starts with ``first_cell``."""
    for head, rows in markdown_tables(text):
        if head[0] == first_cell:
            return head, rows
    raise AssertionError(f"no table headed {first_cell!r} in the report")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """name -> (report text, output folder) of one tiny run of each table."""
    out = tmp_path_factory.mktemp("rnsfigs")
    argv = {
        "rns-fig1": ["--repeats", "4"],
        "rns-fig2": ["--hidden", "30", "--bases", "1", "--explore", "400", "--draws", "400",
                     "--step", "0.05", "--n-steps", "10", "--traj-steps", "8"],
        "rns-fig6": ["--n-obs", "3000", "--explore", "300", "--draws", "300", "--n-hidden",
                     "300", "--threads", "1"],
    }
    with warnings.catch_warnings():          # short chains: ESS and training-size warnings
        warnings.simplefilter("ignore")
        return {name: (run_table(name, a, out=str(out)), out) for name, a in argv.items()}


def test_the_three_figures_are_registered_in_paper_order():
    names = list(TABLES)
    assert names.index("rns-fig1") < names.index("rns-fig2") < names.index("rns-fig3")
    assert names.index("rns-fig5") < names.index("rns-fig6") < names.index("rns-fig7")
    for name in ("rns-fig1", "rns-fig2", "rns-fig6"):
        assert "Figure" in TABLES[name].paper and TABLES[name].paper_figures


# -- Figure 1 -------------------------------------------------------------------------------
def test_fig1_gp_interpolates_and_the_softplus_net_improves_with_n():
    args = argparse.Namespace(sizes=[10, 20, 40], repeats=4, n_hidden=5, n_inducing=5,
                              n_grid=121, data_seed=2017, seed=2017)
    x = np.random.default_rng(args.data_seed).standard_normal(40)
    fits, grid = _rns_fig1.fit_curves(x, args.sizes, args)
    assert set(fits) == {10, 20, 40} and grid[0] == -3.0 and grid[-1] == 3.0
    truth = 0.5 * grid ** 2
    for per in fits.values():
        assert per["GP (full)"]["curves"].shape == (1, 121)        # one deterministic fit
        assert per["GP (full)"]["train_err"] < 1e-2                 # it interpolates
        assert per["FITC (M = 5)"]["curves"].shape == (4, 121)
    rmse = {N: math.sqrt(np.mean((per["RN softplus (s = 5)"]["curves"].mean(axis=0) - truth)
                                 ** 2)) for N, per in fits.items()}
    assert rmse[40] < rmse[10] < 0.05


def test_fig1_report(reports):
    text, out = reports["rns-fig1"]
    head, rows = _table(text, "N")
    assert head[-1] == "paper"
    assert len(rows) == 3 * 5
    assert {r[0] for r in rows} == {"10", "20", "40"}
    for r in rows:
        assert r[-1] == "n/a (the paper gives no number)"
        assert math.isfinite(number(r[2])) and number(r[2]) >= 0
    assert "FITC generalises better than the full GP" in text


def test_fig1_png(reports):
    pytest.importorskip("matplotlib")
    text, out = reports["rns-fig1"]
    assert (out / "rns-fig1-fits.png").stat().st_size > 10000
    assert "(rns-fig1-fits.png)" in text


# -- Figure 2 -------------------------------------------------------------------------------
def test_fig2_leapfrog_is_reversible_and_nearly_conserves_energy():
    model = fs.models.Banana()
    q0 = _rns_fig2.upper_mode(model)
    assert np.allclose(model.value_and_grad(q0)[1], 0.0, atol=1e-3)   # |grad| ~ 25 a unit off
    p0 = np.array([0.7, -1.1])
    path, q, p = _rns_fig2.leapfrog(model, q0, p0, 0.01, 50)
    assert path.shape == (51, 2) and np.array_equal(path[0], q0) and np.array_equal(path[-1], q)
    h0, h1 = model.value(q0) + 0.5 * p0 @ p0, model.value(q) + 0.5 * p @ p
    assert abs(h1 - h0) < 1e-2
    back, qb, pb = _rns_fig2.leapfrog(model, q, -p, 0.01, 50)
    assert np.allclose(qb, q0, atol=1e-9) and np.allclose(-pb, p0, atol=1e-9)


def test_fig2_report(reports):
    text, out = reports["rns-fig2"]
    head, rows = _table(text, "method")
    assert head[-1] == "paper"
    byname = {r[0]: r for r in rows}
    assert set(byname) == {"HMC", "RNS-HMC"}
    acc_h, acc_r = number(byname["HMC"][2]), number(byname["RNS-HMC"][2])
    assert acc_h > 0.9                        # exact HMC, step 0.05, L = 10
    assert 0.0 <= acc_r <= 1.0
    assert 0.0 <= number(byname["RNS-HMC"][3]) < math.inf
    # the paper's figures, never n/a: it quotes both acceptances
    assert byname["HMC"][-1] == "0.97"
    assert byname["RNS-HMC"][-1].startswith("0.88")
    assert all("n/a" not in r[-1] for r in rows)


def test_fig2_png(reports):
    pytest.importorskip("matplotlib")
    text, out = reports["rns-fig2"]
    assert (out / "rns-fig2-banana.png").stat().st_size > 10000
    assert "(rns-fig2-banana.png)" in text


# -- Figure 6 -------------------------------------------------------------------------------
def test_fig6_compare_finds_a_shift_and_not_a_copy():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(1, 2000, 2))
    same = _rns_fig6.compare(a, a.copy())
    assert np.allclose(same["z_mean"], 0.0) and np.allclose(same["ks"], 0.0)
    b = rng.normal(size=(1, 2000, 2))
    fair = _rns_fig6.compare(a, b)
    assert np.all(np.abs(fair["z_mean"]) < 4.5) and np.all(fair["ks"] < 0.1)
    shifted = _rns_fig6.compare(a, b + np.array([0.0, 0.5]))
    assert abs(shifted["z_mean"][1]) > 8 and abs(shifted["z_mean"][0]) < 4.5
    assert shifted["ks"][1] > 0.1


def test_fig6_report(reports):
    text, out = reports["rns-fig6"]
    head, rows = _table(text, "coefficient")
    assert head[-1] == "paper"
    assert [r[0] for r in rows] == ["beta_1", "beta_11", "beta_21", "beta_31", "beta_41"]
    zcols = [head.index("z (mean)"), head.index("z (sd)")]
    for r in rows:
        assert all(math.isfinite(number(r[k])) for k in zcols)
        assert r[-1] == "n/a (the paper gives no number)"
    assert "Largest |z|" in text


def test_fig6_png(reports):
    pytest.importorskip("matplotlib")
    text, out = reports["rns-fig6"]
    assert (out / "rns-fig6-marginals.png").stat().st_size > 10000
