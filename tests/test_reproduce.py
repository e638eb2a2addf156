"""The command line: ``fastsurrogate`` / ``python -m fastsurrogate`` with its
subcommands demo and reproduce (fastsurrogate/reproduce/)."""
import os
import shutil
import subprocess
import sys

import pytest

from fastsurrogate.__main__ import main
from fastsurrogate.reproduce import TABLES, run_table
from fastsurrogate.reproduce import main as reproduce_main


def test_help_lists_the_subcommands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "demo" in out and "reproduce" in out


def test_python_m_help_lists_the_subcommands():
    r = subprocess.run([sys.executable, "-m", "fastsurrogate", "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0
    assert "demo" in r.stdout and "reproduce" in r.stdout


def test_console_script_help():
    exe = shutil.which("fastsurrogate")
    if exe is None:
        pytest.skip("the fastsurrogate console script is not installed (in-place build)")
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    assert "demo" in r.stdout and "reproduce" in r.stdout


def test_unknown_command_is_an_error(capsys):
    assert main(["frobnicate"]) == 2
    assert "demo, reproduce" in capsys.readouterr().err


def test_list_names_every_table(capsys):
    assert reproduce_main(["--list"]) == 0
    out = capsys.readouterr().out
    for name, t in TABLES.items():
        assert name in out
        for f in t.needs:
            assert f in out
    # the three papers, and the experiments added with their models
    for name in ("rns-table1", "rns-table1-pde", "rns-fig8", "vhmc-fig5", "nnghmc-4.1"):
        assert name in TABLES


def test_unknown_table_is_an_error():
    with pytest.raises(SystemExit):
        reproduce_main(["no-such-table", "--out", "unused"])


def test_quick_table_writes_markdown(tmp_path):
    # one small table at --quick, fewer draws still: the section 4.1 banana
    out = tmp_path / "reports"
    code = reproduce_main(["nnghmc-4.1", "--quick", "--out", str(out), "--problems", "banana",
                           "--n-warmup", "600", "--n-draws", "400"])
    assert code == 0
    text = (out / "nnghmc-4.1.md").read_text()
    assert text.startswith("# NNgHMC paper")
    assert "machine:" in text and "fastsurrogate " in text and "--quick run" in text
    assert "| HMC |" in text and "| NNgHMC |" in text
    assert (out / "README.md").exists()
    # the papers' figures beside ours: every table has a "paper" column
    assert "## The paper's figures" in text
    for head in [line for line in text.splitlines() if line.startswith("| method")]:
        assert head.rstrip().endswith("| paper |")


def test_absent_data_skips_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTSURROGATE_DATA", str(tmp_path / "nowhere"))
    text = run_table("vhmc-fig2", quick=True, out=str(tmp_path))
    assert "SKIPPED" in text and "cancer_mortality.csv" in text
    assert (tmp_path / "vhmc-fig2.md").exists()


def test_amari_distance():
    import numpy as np
    from fastsurrogate.reproduce.vhmc import amari_distance
    rng = np.random.default_rng(0)
    W0 = rng.standard_normal((4, 4))
    P = np.eye(4)[[2, 0, 3, 1]] * np.array([1.0, -2.0, 0.5, 3.0])
    assert amari_distance(P @ W0, W0) == pytest.approx(0.0, abs=1e-12)
    assert 0.0 < amari_distance(W0, np.eye(4)) <= 1.0


def test_demo_still_runs(capsys):
    assert main(["demo", "--quick", "--n", "2000", "--draws", "200", "--methods", "hmc",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "HMC" in out and "min ESS/s" in out


def test_paper_column_fills_known_figures_and_na():
    from fastsurrogate.reproduce._paper import add_paper_column
    text = ("### gpreg: dim 4\n\n| method | AP |\n|---|---|\n| HMC | 0.9 |\n| NNgHMC | 0.9 |\n"
            "\nfree text\n")
    out = add_paper_column(text, "nnghmc-tables").splitlines()
    assert out[2] == "| method | AP | paper |"
    assert out[3] == "|---|---|---|"
    assert out[4].endswith("| AP 0.83, median ESS/s 3.14, speed-up 1 (Table 2) |")
    assert out[5].endswith("| AP 0.84, median ESS/s 123.4, speed-up 39.3 (Table 2) |")
    assert out[-1] == "free text"
    # a table with no quoted figure gets n/a, never a number
    out = add_paper_column("| N | GP |\n|---:|---|\n| 100 | 0.003 |", "rns-fig3")
    assert out.splitlines()[-1] == "| 100 | 0.003 | n/a |"


def test_numbers_read_back_from_cells():
    import math
    from fastsurrogate.reproduce._plots import markdown_tables, number
    assert number("0.0014 (run ended at 40 s)") == 0.0014
    assert number("2251-2500") == 2500.0
    assert math.isnan(number("- (no draws yet)"))
    assert math.isnan(number("Laplace"))
    assert number("0.931 / 0.930 / 0.929", pick=2) == 0.929
    assert number("1.5e-05") == 1.5e-05
    (head, rows), = markdown_tables("x\n\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n")
    assert head == ["a", "b"] and rows == [["1", "2"], ["3", "4"]]


def test_plots_from_a_report(tmp_path):
    pytest.importorskip("matplotlib")
    from fastsurrogate.reproduce._plots import PlotSpec, plot_report
    text = ("| method | N | acceptance |\n|---|---:|---:|\n| GP | 100 | 0.1 |\n"
            "| GP | 400 | 0.5 |\n| RN | 100 | 0.4 |\n| RN | 400 | 0.8 |\n")
    spec = PlotSpec("acc", "acceptance against N", "N", ("acceptance",), group="method")
    links = plot_report(text, "t", [spec], str(tmp_path))
    assert links == ["![acceptance against N](t-acc.png)"]
    assert (tmp_path / "t-acc.png").read_bytes()[:4] == b"\x89PNG"


def test_every_plot_spec_names_a_table():
    from fastsurrogate.reproduce._plots import PlotSpec
    for t in TABLES.values():
        for p in t.plots:
            assert isinstance(p, PlotSpec) and p.suffix and p.y


def test_rns_fig4_tiny_writes_table_and_plot(tmp_path):
    text = run_table("rns-fig4", ["--dims", "3", "--multiples", "2", "10", "--explore", "200",
                                  "--draws", "60", "--n-obs", "500", "--threads", "1"],
                     out=str(tmp_path))
    assert "| d | step | exact HMC | s = 2 d | s = 10 d | paper |" in text
    row = [line for line in text.splitlines() if line.startswith("| 3 |")][0]
    accs = [float(c) for c in row.strip("|").split("|")[2:5]]
    assert all(0.0 <= a <= 1.0 for a in accs)
    assert row.rstrip().endswith("| n/a |")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "rns-fig4-acceptance.png").exists()


def test_rns_table1_pde_tiny_runs_every_row(tmp_path):
    """The PDE rows at toy size: HMC, RNS-HMC, RMHMC (Gauss-Newton metric)
    and RNS-RMHMC each give a row with posterior means near HMC's, and the
    paper's 6.07x lands in the RNS-HMC row of the Table 1 columns."""
    text = run_table("rns-table1-pde", ["--n-mesh", "8", "--n-modes", "3", "--n-warmup", "300",
                                        "--n-draws", "300", "--n-hidden", "60", "--subspace",
                                        "0", "--reference-draws", "0"], out=str(tmp_path))
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()
            if line.startswith("| ") and "---" not in line}
    for name in ("HMC", "RNS-HMC (s = 60)", "RMHMC", "RNS-RMHMC (s = 60)"):
        assert name in rows, name
    eff = text[text.index("### elliptic PDE, the Table 1 columns"):]
    assert "| AP 0.75, min ESS/s 7.10, speed-up 6.07 |" in [
        line for line in eff.splitlines() if line.startswith("| RNS-HMC")][0]
    assert "| AP 0.91, min ESS/s 1.17, speed-up 1 |" in [
        line for line in eff.splitlines() if line.startswith("| HMC |")][0]
    assert "speed-up 3.74 |" in [line for line in eff.splitlines()
                                 if line.startswith("| RNS-RMHMC")][0]
    # each row's posterior means against the HMC row's draws: within 4.5
    # MCSE (the report's own bar is a 5 % Bonferroni test, which one of the
    # rows fails by chance on some machine's draws)
    zrows = [line for line in text[text.index("| method | max abs z"):].splitlines()[2:]
             if line.startswith("| ")]
    assert len(zrows) == 4
    for line in zrows:
        assert float(line.split("|")[2]) < 4.5, line


def test_one_failing_table_does_not_lose_the_others(tmp_path, monkeypatch):
    """A table that raises is marked FAILED in the run's index; the next
    tables still run and main returns 1."""
    import fastsurrogate.reproduce as rp
    ran = []

    def fake(name, rest, quick=False, out=None):
        ran.append(name)
        if name == "rns-fig3":
            raise RuntimeError("boom")
        return "ok"

    monkeypatch.setattr(rp, "run_table", fake)
    code = rp.main(["rns-fig3", "rns-fig4", "--out", str(tmp_path)])
    assert code == 1 and ran == ["rns-fig3", "rns-fig4"]
    index = (tmp_path / "README.md").read_text()
    assert "| rns-fig3 | FAILED: RuntimeError: boom |" in index
    assert "| rns-fig4 | done |" in index


def test_rns_table1_rows_carry_the_papers_figures():
    """Every HMC and RNS-HMC row of Table 1's logistic regressions has the
    paper's acceptance, min ESS/s and speed-up beside it (read from the paper);
    ARNS-HMC, which Table 1 does not have, says where the paper has it."""
    from fastsurrogate.reproduce._paper import add_paper_column
    want = {"sim": ("0.76, min ESS/s 14.17", "speed-up 8.72", "speed-up 0.004", "speed-up 0.15"),
            "bank": ("0.70, min ESS/s 6.52", "speed-up 8.01", "speed-up 0.09", "speed-up 2.21"),
            "a9a": ("0.72, min ESS/s 11.96", "speed-up 6.84", "speed-up 0.02", "speed-up 0.22")}
    for name, (hmc, rns, rm, rnsrm) in want.items():
        text = (f"### {name}: N = 10, d = 2, s = 5, step 0.1, L = 6\n\n| method | AP |\n|---|---|\n"
                "| HMC | 0.9 |\n| RNS-HMC | 0.8 |\n| ARNS-HMC | 0.8 |\n| RMHMC | 0.8 |\n"
                "| RNS-RMHMC | 0.8 |\n| RNS-HMC+DA | 0.8 |\n")
        rows = add_paper_column(text, "rns-table1").splitlines()[4:10]
        assert rows[0].endswith(f"| AP {hmc}, speed-up 1 |"), rows[0]
        assert rows[1].endswith(f"{rns} |"), rows[1]
        assert rows[3].endswith(f"{rm} |") and rows[4].endswith(f"{rnsrm} |"), rows[3:5]
        assert "n/a" not in "".join(rows[:2] + rows[3:5])
        assert "Figures 7 and 8" in rows[2]
        assert rows[5].endswith("| n/a |")          # not a row of the paper


def test_nnghmc_tables_rows_carry_the_papers_figures():
    """Every row of the NNgHMC tables with a counterpart in the paper has the
    paper's figure beside it, never n/a (Tables 1-5 and section 4.2's text)."""
    from fastsurrogate.reproduce._paper import add_paper_column
    cases = [("nnghmc-tables", "### logistic: dim 200", ["HMC", "NNgHMC"], ["1.5", "6.75"]),
             ("nnghmc-tables", "### garch: dim 4", ["HMC", "NNgHMC"], ["0.60", "4.98"]),
             ("nnghmc-tables", "### gpreg: dim 2", ["HMC", "NNgHMC"], ["3.14", "39.3"]),
             ("nnghmc-table3", "### Bank Marketing", ["HMC", "NNgHMC", "SGHMC + MH"],
              ["0.05", "5.77", "3.64"]),
             ("nnghmc-table4", "", ["10", "20", "40"], ["0.97", "0.91", "0.87"]),
             ("nnghmc-table5", "### census income (a9a)",
              ["HMC", "NNgHMC (10 %)", "NNgHMC (15 %)", "NNgHMC (20 %)"],
              ["5.23", "2.04", "2.19", "1.95"])]
    for table, heading, rows, figures in cases:
        body = "".join(f"| {r} | 0.5 |\n" for r in rows)
        out = add_paper_column(f"{heading}\n\n| method | AP |\n|---|---|\n{body}", table)
        got = [ln for ln in out.splitlines() if ln.startswith("| ")][1:]
        for line, fig in zip(got, figures):
            assert fig in line.rsplit("|", 2)[-2] and "n/a" not in line, (table, line)


def test_list_covers_every_table_and_figure_of_the_papers(capsys):
    """Every table and figure of the three papers (8 figures and Table 1 of
    RNS-HMC, 5 figures of VHMC, 10 figures and 5 tables of NNgHMC) is run by
    a table named as the paper numbers it, or --list says why it is not."""
    from fastsurrogate.reproduce import NOT_REPRODUCED, PAPER_ITEMS, coverage
    cov = coverage()
    assert sum(map(len, PAPER_ITEMS.values())) == len(cov) == 29
    for (paper, item), names in cov.items():
        assert names or (paper, item) in NOT_REPRODUCED, (paper, item)
        kind, k = item.split()
        short = {"RNS-HMC paper": "rns", "VHMC paper": "vhmc", "NNgHMC paper": "nnghmc"}[paper]
        own = f"{short}-{'fig' if kind == 'Figure' else 'table'}{k}"
        assert not names or own in names or kind == "Table", (item, names)
    assert reproduce_main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "not reproduced here yet" not in out
    for paper, item in NOT_REPRODUCED:
        assert f"{paper}, {item}: not reproduced: " in out


def test_a_report_has_one_page_title():
    # the table's own "# ..." heading goes under "## Measured here" as "### ...";
    # code blocks keep their "#" lines
    from fastsurrogate.reproduce import demote_headings
    text = "# A\n\ntext\n\n## B\n\n```\n# a comment\n```\n### C"
    assert demote_headings(text) == "### A\n\ntext\n\n#### B\n\n```\n# a comment\n```\n##### C"
    assert demote_headings("#### D") == "#### D" and demote_headings("no heading") == "no heading"
