"""RNS-HMC paper Figures 7 and 8 (``fastsurrogate reproduce rns-fig7``:
ARNS-HMC's acceptance against the training points; ``rns-fig8``: REM
against wall time for HMC, RNS-HMC and ARNS-HMC): the L2 REM against NumPy,
and tiny runs of both tables checking their structure and that each REM is
within a Monte Carlo bound.

The tiny runs use wall-time budgets of a fraction of a second on a small
simulated regression; nothing is asserted about time itself: a budget a
loaded machine does not reach is reported as such and left out."""
import argparse
import math

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.reproduce import run_table
from fastsurrogate.reproduce._plots import markdown_tables, number


# -- the L2 REM ---------------------------------------------------------------------------
def test_rem_l2_matches_numpy():
    rng = np.random.default_rng(3)
    draws = rng.normal(size=(3, 40, 6))
    truth = rng.normal(size=6)
    mean = draws.reshape(-1, 6).mean(axis=0)
    want = np.linalg.norm(mean - truth) / np.linalg.norm(truth)
    got = fs.diagnostics.relative_error_mean(draws, truth, norm="l2")
    assert got == pytest.approx(want, rel=1e-12)
    # the default stays the L1 form of the VHMC paper
    want1 = np.abs(mean - truth).sum() / np.abs(truth).sum()
    assert fs.diagnostics.relative_error_mean(draws, truth) == pytest.approx(want1, rel=1e-12)
    assert fs.diagnostics.relative_error_mean(draws, truth, norm="l1") == pytest.approx(want1)
    # 2-D draws, hand-computed: mean (2, 2), truth (3, 4): ||(-1, -2)|| / 5
    assert fs.diagnostics.relative_error_mean(np.array([[1.0, 2.0], [3.0, 2.0]]), [3.0, 4.0],
                                              norm="l2") == pytest.approx(math.sqrt(5) / 5)


def test_rem_l2_bad_inputs():
    d = np.ones((5, 2))
    with pytest.raises(ValueError, match="norm"):
        fs.diagnostics.relative_error_mean(d, [1.0, 1.0], norm="l3")
    with pytest.raises(ValueError, match="all zeros"):
        fs.diagnostics.relative_error_mean(d, [0.0, 0.0], norm="l2")


# -- rns-fig8 (REM against time) ------------------------------------------------------------------------------
def _tiny_args(**kw):
    a = dict(problems=["sim"], chains=2, budgets=[0.15, 0.3], explore=200, n_hidden=100,
             truth_iter=3000, rem="l2", n_obs=2000, dim=5, data_seed=1, n_mesh=8, n_modes=4,
             threads=1, seed=5, quick=False)
    a.update(kw)
    return argparse.Namespace(**a)


def _within_mcse(rem, scale, truth, n_se=5.0):
    """REM within n_se error scales (the chain's and the truth's MCSE, in quadrature)."""
    tr = math.sqrt(float(np.sum(np.asarray(truth["mcse"]) ** 2)))
    return rem <= n_se * math.hypot(scale, tr) / float(np.linalg.norm(truth["mean"]))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTSURROGATE_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_rns_fig8_tiny_problem_rem_within_mcse(cache):
    from fastsurrogate.reproduce import _rns_fig8 as f7
    args = _tiny_args()
    text, data = f7.run_problem("sim", args)
    (head, rows), = markdown_tables(text)
    assert head == ["budget s", "HMC median", "HMC 5 %", "HMC 95 %", "RNS-HMC median",
                    "RNS-HMC 5 %", "RNS-HMC 95 %", "ARNS-HMC median", "ARNS-HMC 5 %",
                    "ARNS-HMC 95 %", "chains (HMC / RNS-HMC / ARNS-HMC)", "lowest median"]
    assert [number(r[0]) for r in rows] == [0.15, 0.3]
    assert text.startswith("### sim")
    truth = data["truth"]
    for method in ("HMC", "RNS-HMC", "ARNS-HMC"):
        curves = data["curves"][method]
        assert len(curves) == args.chains
        for c in curves:
            assert len(c) == 2
            done = [x for x in c if x[1] is not None]
            # every REM a chain reports is within its Monte Carlo error, or the REM falls
            # with the budget
            for n, rem, reached, scale in done:
                assert reached and n > 0 and rem >= 0
                falls = len(done) == 2 and done[1][1] <= done[0][1]
                assert falls or (math.isfinite(scale) and _within_mcse(rem, scale, truth)), \
                    (method, n, rem, scale)
    # the table's medians are the medians of the chains' REMs
    for j, r in enumerate(rows):
        vals = [c[j][1] for c in data["curves"]["HMC"] if c[j][1] is not None]
        if vals:
            assert number(r[1]) == pytest.approx(float(np.median(vals)), rel=1e-2)


def test_rns_fig8_command_writes_tables_and_plots(cache):
    out = cache / "reports"
    text = run_table("rns-fig8", ["--problems", "sim", "--chains", "1", "--budgets", "0.1",
                                  "0.2", "--explore", "150", "--n-hidden", "60",
                                  "--truth-iter", "2000", "--n-obs", "1000", "--dim", "4",
                                  "--threads", "1"], out=str(out))
    assert text.startswith("# RNS-HMC paper")
    assert "### sim" in text and "REM = ||mean - truth||_2 / ||truth||_2" in text
    heads = [line for line in text.splitlines() if line.startswith("| budget s")]
    assert len(heads) == 1 and heads[0].rstrip().endswith("| paper |")
    assert (out / "rns-fig8.md").exists()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    png = out / "rns-fig8-rem-1.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "Figure 8: REM against wall time, sim" in text


def test_rns_fig8_bad_options(cache):
    from fastsurrogate.reproduce import _rns_fig8 as f7
    with pytest.raises(ValueError, match="chains"):
        f7.reproduce(_tiny_args(chains=0))
    with pytest.raises(ValueError, match="budgets"):
        f7.reproduce(_tiny_args(budgets=[0.0, 1.0]))


# -- rns-fig7 (ARNS-HMC's acceptance) ------------------------------------------------------------------------------
def test_rns_fig7_tiny_has_the_band_three_curves_and_l2(cache):
    text = run_table("rns-fig7", ["--problems", "sim", "--n-obs", "2000", "--dim", "5",
                                  "--n-hidden", "100", "--explore", "250", "--burn-in", "100",
                                  "--rns-explore", "300", "--acc-iters", "200", "--window", "50",
                                  "--budgets", "0.2", "0.4", "--truth-iter", "2000",
                                  "--threads", "1", "--replicates", "2",
                                  "--band-replicates", "2"],
                     out=str(cache / "reports"))
    tables = markdown_tables(text.split("## Measured here", 1)[1])
    assert len(tables) == 3
    (band_head, band_rows), (acc_head, acc_rows), (rem_head, rem_rows) = tables
    # the paper's Figure 7: acceptance against the training points (200 start states
    # plus one per iteration), median and band over the 2 replicates and 2 ARNS-only runs
    assert "over 4 independent ARNS-HMC runs" in text
    assert any(number(r[2]) < number(r[3]) for r in band_rows)
    assert band_head[:5] == ["training points", "ARNS-HMC median", "ARNS-HMC 5 %",
                             "ARNS-HMC 95 %", "exact HMC"]
    assert [number(r[0]) for r in band_rows[:2]] == [250, 300]
    for r in band_rows:
        lo, med, hi = number(r[2]), number(r[1]), number(r[3])
        assert 0.0 <= lo <= med <= hi <= 1.0
    assert acc_head[:4] == ["iterations", "ARNS-HMC", "RNS-HMC", "exact HMC"]
    assert rem_head[:4] == ["budget s", "HMC REM", "RNS-HMC REM", "ARNS REM"]
    assert [number(r[0]) for r in rem_rows] == [0.2, 0.4]
    assert "(L2, the RNS-HMC paper's)" in text
    for r in acc_rows:
        for c in r[1:4]:
            v = number(c)
            assert math.isnan(v) or 0.0 <= v <= 1.0
    for r in rem_rows:
        for c in r[1:4]:
            v = number(c)
            assert math.isnan(v) or v >= 0.0


def test_plot_titles_name_the_section_and_bands_are_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    from fastsurrogate.reproduce._plots import PlotSpec, plot_report, table_sections
    text = ("### bank\n\n| budget s | A median | A 5 % | A 95 % |\n|---|---|---|---|\n"
            "| 1 | 0.2 | 0.1 | 0.3 |\n| 2 | 0.1 | 0.05 | 0.2 |\n\n### pde\n\n"
            "| budget s | A median | A 5 % | A 95 % |\n|---|---|---|---|\n| 1 | 0.3 | 0.2 | 0.4 |\n")
    assert table_sections(text) == ["bank", "pde"]
    spec = PlotSpec("rem-2", "REM, {section}", "budget s", ("A median",),
                    bands=(("A 5 %", "A 95 %"),), table=1)
    assert plot_report(text, "t", [spec], str(tmp_path)) == ["![REM, pde](t-rem-2.png)"]
    assert (tmp_path / "t-rem-2.png").read_bytes()[:4] == b"\x89PNG"
