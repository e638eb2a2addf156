"""Every table and figure of the three papers that our data allow, from one
command::

    python -m fastsurrogate reproduce [TABLE ...] [--quick] [--out DIR] [--list]
    fastsurrogate reproduce --list

One module per paper (:mod:`.rns_hmc`, :mod:`.vhmc`, :mod:`.nnghmc`) lists
its tables as :class:`Table` records; each table's experiment takes the
papers' settings as its defaults and returns a Markdown report, which
:func:`run_table` writes to ``DIR/<table>.md`` under a header giving the
paper, the paper's own figures, the machine (CPU model from /proc/cpuinfo),
the package version and the run's duration.  Figures are written as tables,
and as PNG plots beside them when matplotlib is installed.  ``--quick``
shortens every experiment (the whole set in under 15 minutes on 2 cores);
tables whose data files are absent from the data folder
(:func:`fastsurrogate.datasets.find_data_dir`,
``$FASTSURROGATE_DATA``) are skipped with a note.
"""
import argparse
import importlib
import os
import re
import sys
import time
import traceback

from ..datasets import find_data_dir
from ._table import Table     # before the papers' modules: rns_hmc takes it from here
from . import nnghmc, rns_hmc, vhmc
from ._paper import SOURCES, add_paper_column
from ._plots import plot_report
from ._report import log, machine_line

__all__ = ["Table", "TABLES", "run_table", "main", "coverage", "PAPER_ITEMS", "NOT_REPRODUCED"]


_NO_PAPER = ("The paper gives no number for this figure (it is drawn), so the \"paper\" "
             "column is n/a throughout.")
_PAPER_NOTE = ("The \"paper\" column of each table below gives the paper's own figure for that "
               "row, read from the paper, and \"n/a\" where the paper gives none (no figure is "
               "guessed).")


def demote_headings(text, top=3):
    """`text` (Markdown) with its headings moved down so that the highest
    is level `top` (a report's own "# ..." under "## Measured here" would
    otherwise be a second page title); fenced code is left alone."""
    lines, fenced, levels = text.split("\n"), False, []
    for ln in lines:
        fenced ^= ln.startswith("```")
        m = None if fenced else re.match(r"(#+) ", ln)
        if m:
            levels.append(len(m.group(1)))
    shift = max(0, top - min(levels)) if levels else 0
    out, fenced = [], False
    for ln in lines:
        fenced ^= ln.startswith("```")
        out.append("#" * shift + ln if shift and not fenced and re.match(r"#+ ", ln) else ln)
    return "\n".join(out)


def _collect():
    tables = {}
    for mod in (rns_hmc, vhmc, nnghmc):
        for t in mod.TABLES:
            tables[t.name] = t
    return tables


TABLES = _collect()

# every table and figure of the three papers, by the papers' numbering
PAPER_ITEMS = {
    "RNS-HMC paper": [f"Figure {k}" for k in range(1, 9)] + ["Table 1"],
    "VHMC paper": [f"Figure {k}" for k in range(1, 6)],
    "NNgHMC paper": [f"Figure {k}" for k in range(1, 11)] + [f"Table {k}" for k in range(1, 6)],
}
# the ones no table runs, and why
NOT_REPRODUCED = {
    ("NNgHMC paper", "Figure 1"): "a schematic of the cost of sampling before and after the "
                                  "network takes over (a drawing, no data or numbers)",
}


def _items_of(table):
    """(paper, item) pairs that ``table`` reproduces, read from its ``paper``
    string: "..., Figure 3", "..., Tables 1-2", "..., Table 5 (census income)"."""
    paper = next((p for p in PAPER_ITEMS if table.paper.startswith(p)), None)
    if paper is None or "not a figure of the paper" in table.paper:
        return []
    head = table.paper.split("), ", 1)[1] if "), " in table.paper else ""
    m = re.match(r"(Figure|Table)s? (\d+)(?:-(\d+))?\b", head)
    if m is None or " baselines" in head:     # "Figure 4 baselines": a part of one
        return []
    lo, hi = int(m.group(2)), int(m.group(3) or m.group(2))
    return [(paper, f"{m.group(1)} {k}") for k in range(lo, hi + 1)]


def coverage():
    """{(paper, item): [table names]} for every table and figure of the three
    papers (an empty list: not reproduced, see ``NOT_REPRODUCED``)."""
    out = {(p, item): [] for p, items in PAPER_ITEMS.items() for item in items}
    for t in TABLES.values():
        for key in _items_of(t):
            out[key].append(t.name)
    return out


def _parser(table):
    ap = argparse.ArgumentParser(prog=f"fastsurrogate reproduce {table.name}",
                                 description=table.title)
    mod = importlib.import_module(table.module, __name__)
    getattr(mod, table.entry + "options")(ap)
    return ap, getattr(mod, table.entry + "reproduce")


def missing_data(table):
    """Data files of ``table`` that the data folder lacks (all of them when there is no folder)."""
    if not table.needs:
        return []
    d = find_data_dir(required=False)
    return [f for f in table.needs if d is None or not os.path.exists(os.path.join(d, f))]


def run_table(name, argv=(), quick=False, out=None):
    """Run one table and write ``out/<name>.md``; return the Markdown text.

    ``argv``: the table's own options (``fastsurrogate reproduce NAME --help``
    lists them).  A table whose data are absent returns a one-line note."""
    table = TABLES[name]
    ap, reproduce = _parser(table)
    args = ap.parse_args(list(argv))
    if quick:
        given = {a.split("=")[0] for a in argv if a.startswith("--")}
        for k, v in table.quick.items():
            if "--" + k.replace("_", "-") not in given:
                setattr(args, k, v)
    args.quick = quick
    args.out_dir = out
    absent = missing_data(table)
    head = [f"# {table.paper}: {table.title}", "",
            f"- command: `fastsurrogate reproduce {name}{' --quick' if quick else ''}"
            f"{' ' + ' '.join(argv) if argv else ''}`",
            f"- {machine_line()}"]
    if absent:
        text = "\n".join(head + [f"- SKIPPED: data file(s) {', '.join(absent)} not found in the "
                                 "data folder (set FASTSURROGATE_DATA)", ""])
    else:
        log(f"[{name}] {table.title} ({'quick' if quick else 'full'}) ...")
        t0 = time.perf_counter()
        body = add_paper_column(reproduce(args).strip(), name)
        links = []
        if out:
            os.makedirs(out, exist_ok=True)
            links = plot_report(body, name, table.plots, out)
        secs = time.perf_counter() - t0
        head.append(f"- {'--quick run' if quick else 'full run'}: {secs:.0f} s")
        parts = ["\n".join(head)]
        paper = "\n\n".join(x for x in (table.paper_figures.strip(), SOURCES.get(name, "")) if x)
        parts.append("## The paper's figures\n\n" + (paper or _NO_PAPER) + "\n\n" + _PAPER_NOTE)
        if table.missing:
            parts.append("## Not reproduced here\n\n" + table.missing.strip())
        parts.append("## Measured here\n\n" + demote_headings(body.strip()))
        if links:
            parts.append("## Plots\n\n" + "\n\n".join(links))
        text = "\n\n".join(parts) + "\n"
        log(f"[{name}] done in {secs:.0f} s")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"{name}.md"), "w") as f:
            f.write(text)
    return text


def _list():
    lines = []
    w = max(map(len, TABLES))
    for t in TABLES.values():
        note = f"  [needs {', '.join(t.needs)}]" if t.needs else ""
        lines.append(f"{t.name.ljust(w)}  {t.paper}: {t.title}{note}")
    for (paper, item), names in coverage().items():
        if not names:
            why = NOT_REPRODUCED.get((paper, item), "not reproduced here yet")
            lines.append(f"{'-'.ljust(w)}  {paper}, {item}: not reproduced: {why}")
    return "\n".join(lines)


def main(argv=None):
    """``fastsurrogate reproduce`` (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(
        prog="fastsurrogate reproduce",
        description="Rerun the papers' tables and figures on this machine; each is written "
                    "as DIR/<table>.md (and PNG plots where matplotlib is installed).",
        epilog="Tables:\n" + _list() + "\n\nA table's own options: fastsurrogate reproduce "
               "TABLE --help (run one table alone to pass them).",
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False)
    # -h is ours: with one TABLE it shows that table's options (argparse's own
    # help action would print this parser's help first)
    ap.add_argument("-h", "--help", action="store_true",
                    help="show this help and exit (with one TABLE: that table's options)")
    ap.add_argument("tables", nargs="*", metavar="TABLE", help="tables to run (default: all)")
    ap.add_argument("--quick", action="store_true",
                    help="reduced lengths: the whole set in under 15 minutes on 2 cores")
    ap.add_argument("--out", metavar="DIR", default="reproduce-out",
                    help="folder of the reports (default ./reproduce-out)")
    ap.add_argument("--list", action="store_true", help="list the tables and exit")
    args, rest = ap.parse_known_args(argv)
    if args.help:
        if len(args.tables) == 1 and args.tables[0] in TABLES:
            _parser(TABLES[args.tables[0]])[0].print_help()
        else:
            ap.print_help()
        return 0
    if args.list:
        print(_list())
        return 0
    unknown = [t for t in args.tables if t not in TABLES]
    if unknown:
        ap.error(f"unknown table(s) {unknown}; --list shows them")
    if rest and len(args.tables) != 1:
        ap.error(f"table options {rest} need exactly one TABLE")
    names = args.tables or list(TABLES)
    t0 = time.perf_counter()
    summary = []
    for name in names:
        t1 = time.perf_counter()
        try:
            text = run_table(name, rest, quick=args.quick, out=args.out)
        except Exception as exc:  # noqa: BLE001 - one table's failure must not lose the others
            if len(names) == 1:
                raise
            traceback.print_exc()
            text = ""
            status = f"FAILED: {type(exc).__name__}: {exc}"
        else:
            status = "skipped (data absent)" if "- SKIPPED:" in text else "done"
        summary.append(f"| {name} | {status} | {time.perf_counter() - t1:.0f} |")
    total = time.perf_counter() - t0
    index = ["# Reproduction run", "", f"- {'--quick' if args.quick else 'full'} run, "
             f"{total:.0f} s in all", "", "| table | status | seconds |", "|---|---|---|", *summary]
    index.insert(3, f"- {machine_line()}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(index) + "\n")
    print("\n".join(index))
    print(f"reports in {os.path.abspath(args.out)}")
    return 1 if any("FAILED" in line for line in summary) else 0
