"""The papers' own figures, shown in a "paper" column beside ours.

The figures are read from the papers (``../shared/papers``, plain text;
each table's source says where); a cell reads "n/a" where the paper has
no counterpart for that row, and no number is made up.  :func:`add_paper_column` appends the column to every Markdown
table of a report, looking each row up by the report's name, the nearest
section heading above the table (``###``/``####``) and the row's first cell.
"""
import re

__all__ = ["PAPER_FIGURES", "SOURCES", "paper_cell", "add_paper_column"]

# table name -> list of (section regex or None, row regex, the paper's figure); the
# row regex is searched in the row's cells joined by " | " (a blank first cell
# takes the first cell of the row above, as in tables grouped by problem)
PAPER_FIGURES = {
    "rns-table1-pde": [
        (r"^elliptic PDE", r"^HMC \|", "AP 0.91, min ESS/s 1.17, speed-up 1"),
        (r"^elliptic PDE", r"^RMHMC", "AP 0.80, min ESS/s 0.23, speed-up 0.20"),
        (r"^elliptic PDE", r"^RNS-HMC", "AP 0.75, min ESS/s 7.10, speed-up 6.07"),
        (r"^elliptic PDE", r"^RNS-RMHMC", "AP 0.66, min ESS/s 4.38, speed-up 3.74"),
    ],
    "rns-table1": [
        (r"^sim", r"^HMC \|", "AP 0.76, min ESS/s 14.17, speed-up 1"),
        (r"^sim", r"^RNS-HMC \|", "AP 0.76, min ESS/s 123.56, speed-up 8.72"),
        (r"^sim", r"^RMHMC", "AP 0.80, min ESS/s 0.06, speed-up 0.004"),
        (r"^sim", r"^RNS-RMHMC", "AP 0.82, min ESS/s 2.17, speed-up 0.15"),
        (r"^bank", r"^RMHMC", "AP 0.92, min ESS/s 0.56, speed-up 0.09"),
        (r"^bank", r"^RNS-RMHMC", "AP 0.90, min ESS/s 14.41, speed-up 2.21"),
        (r"^a9a", r"^RMHMC", "AP 0.82, min ESS/s 0.29, speed-up 0.02"),
        (r"^a9a", r"^RNS-RMHMC", "AP 0.79, min ESS/s 2.68, speed-up 0.22"),
        (r"^bank", r"^HMC \|", "AP 0.70, min ESS/s 6.52, speed-up 1"),
        (r"^bank", r"^RNS-HMC \|", "AP 0.70, min ESS/s 52.22, speed-up 8.01"),
        (r"^a9a", r"^HMC \|", "AP 0.72, min ESS/s 11.96, speed-up 1"),
        (r"^a9a", r"^RNS-HMC \|", "AP 0.68, min ESS/s 81.80, speed-up 6.84"),
        (None, r"^ARNS-HMC", "not in Table 1 (ARNS-HMC is in Figures 7 and 8: rns-fig7, rns-fig8)"),
    ],
    "nnghmc-tables": [
        (r"^logistic", r"^HMC \|", "AP ~0.8, ESS/s 1.5, speed-up 1 (section 4.2 text)"),
        (r"^logistic", r"^NNgHMC", "AP ~0.6, ESS/s 6.75, speed-up 4.5 (section 4.2 text)"),
        (r"^garch", r"^HMC \|", "AP 0.72, median ESS/s 0.60, speed-up 1 (Table 1)"),
        (r"^garch", r"^NNgHMC", "AP 0.70, median ESS/s 2.98, speed-up 4.98 (Table 1)"),
        (r"^gpreg", r"^HMC \|", "AP 0.83, median ESS/s 3.14, speed-up 1 (Table 2)"),
        (r"^gpreg", r"^NNgHMC", "AP 0.84, median ESS/s 123.4, speed-up 39.3 (Table 2)"),
    ],
    "nnghmc-table3": [
        (None, r"^HMC \|", "Cover Type: AP 0.80, median ESS/s 0.05, speed-up 1"),
        (None, r"^NNgHMC", "Cover Type: AP 0.67, median ESS/s 0.26, speed-up 5.77"),
        (None, r"^SGHMC \+ MH", "Cover Type: AP 0.33, median ESS/s 0.17, speed-up 3.64"),
        (None, r"^SGHMC \|", "not in Table 3 (the paper's SG row is SGHMC with MH)"),
    ],
    "nnghmc-table4": [
        (None, r"^10 \|", "GP 0.65 / 0.61 / 0.57, NN 0.95 / 0.96 / 0.97 (500 / 1000 / 2000 points)"),
        (None, r"^20 \|", "GP 0.64 / 0.65 / 0.62, NN 0.82 / 0.87 / 0.91 (500 / 1000 / 2000 points)"),
        (None, r"^40 \|", "GP 0.31 / 0.32 / 0.32, NN 0.61 / 0.75 / 0.87 (500 / 1000 / 2000 points)"),
    ],
    "nnghmc-table5": [
        (None, r"^HMC \|", "census income: AP 0.84, median ESS/s 5.23, speed-up 1"),
        (None, r"^NNgHMC \(10 %\)", "census income, 10 %: AP 0.60, median ESS/s 10.68, "
                                   "speed-up 2.04"),
        (None, r"^NNgHMC \(15 %\)", "census income, 15 %: AP 0.68, median ESS/s 11.45, "
                                   "speed-up 2.19"),
        (None, r"^NNgHMC \(20 %\)", "census income, 20 %: AP 0.76, median ESS/s 10.21, "
                                   "speed-up 1.95"),
    ],
    "sg-rem": [
        (None, r".*", "n/a (issue 16 asks for this comparison; no paper table)"),
    ],
}

# where each entered figure was quoted
SOURCES = {
    "rns-table1-pde": "RNS-HMC paper Table 1, elliptic PDE rows (acceptance, min ESS per "
                      "second on the paper's machine, speed-up over HMC), read from the "
                      "paper (../shared/papers).",
    "rns-table1": "RNS-HMC paper Table 1, logistic regression rows (simulated s = 2000, Bank "
                  "Marketing s = 1000, a9a-60d s = 2500): acceptance, min ESS per second on "
                  "the paper's machine, speed-up over HMC, read from the paper "
                  "(../shared/papers), RMHMC and RNS-RMHMC rows included.",
    "nnghmc-tables": "NNgHMC paper, section 4.2 (200-d logistic regression: HMC 1.5, NNgHMC "
                     "6.75 effective draws per second, given in the text) and Tables 1 (GARCH) "
                     "and 2 (GP regression), read from the paper.",
    "nnghmc-table5": "NNgHMC paper Table 5, its census income rows (the a9a data run here is "
                     "the same UCI Adult set), read from the paper; its Online News "
                     "Popularity and Dota2 rows have no data here.",
    "nnghmc-table4": "NNgHMC paper Table 4: acceptance of HMC driven by a GP gradient and by "
                     "the network gradient, d = 10, 20, 40, with 500 / 1000 / 2000 training "
                     "points, read from the paper.",
    "nnghmc-table3": "NNgHMC paper Table 3 (Cover Type, which is not here; the rows run here "
                     "are Bank Marketing): acceptance, median ESS/s and speed-up on the "
                     "paper's machine, read from the paper.",
    "vhmc-fig4": "VHMC paper Figure 4: the paper's first budget is 300 s on its machine "
                 "(a setting, not a result); its REM/REC values are not quoted here.",
}

_TABLE_LINE = re.compile(r"^\s*\|")
_RULE = re.compile(r"^\s*\|(\s*:?-+:?\s*\|)+\s*$")
_HEADING = re.compile(r"^#{2,6}\s+(.*)$")


def paper_cell(table, section, row_text):
    """The paper's figure for one row (its cells joined by " | "), or "n/a"
    when it is not known to us."""
    for sec, row, fig in PAPER_FIGURES.get(table, ()):
        if sec is not None and not (section and re.search(sec, section)):
            continue
        if re.search(row, row_text.strip()):
            return fig
    return "n/a"


def _strip_pipe(line):
    line = line.rstrip()
    return line[:-1].rstrip() if line.endswith("|") else line


def _cells(line):
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def add_paper_column(text, table):
    """``text`` with a "paper" column appended to every Markdown table.

    A table is a header line, a rule line (``|---|``) and rows, all starting
    with ``|``.  The section used for the lookup is the last heading (or
    ``###``-style line) above the table, else the line just above it."""
    lines = text.split("\n")
    out = []
    section = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _HEADING.match(line)
        if m:
            section = m.group(1)
        is_head = (_TABLE_LINE.match(line) and i + 1 < len(lines) and _RULE.match(lines[i + 1]))
        if not is_head:
            if line.strip() and not _TABLE_LINE.match(line) and not m:
                # a caption line above a table also names its section
                if i + 2 < len(lines) and not lines[i + 1].strip() and \
                        _TABLE_LINE.match(lines[i + 2]):
                    section = line
            out.append(line)
            i += 1
            continue
        if "paper" in [c.lower() for c in _cells(line)]:
            out.append(line)
            i += 1
            continue
        out.append(_strip_pipe(line) + " | paper |")
        out.append(_strip_pipe(lines[i + 1]) + "|---|")
        i += 2
        group = ""
        while i < len(lines) and _TABLE_LINE.match(lines[i]):
            cells = _cells(lines[i])
            group = cells[0] or group
            key = " | ".join([group] + cells[1:])
            out.append(_strip_pipe(lines[i]) + f" | {paper_cell(table, section, key)} |")
            i += 1
    return "\n".join(out)
