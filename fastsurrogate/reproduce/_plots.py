"""PNG plots of the figure-type reports, drawn from their Markdown tables.

Each figure-type table of :mod:`fastsurrogate.reproduce` lists
:class:`PlotSpec` records; after the report is written, :func:`plot_report`
reads the numbers back from the report's Markdown tables (so the plot shows
exactly what the table says) and draws them with matplotlib's Agg backend
beside the report.  Nothing happens when matplotlib is not installed.
"""
import dataclasses
import math
import os
import re

from ._paper import _RULE, _TABLE_LINE, _cells

__all__ = ["PlotSpec", "markdown_tables", "number", "plot_report"]

_NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)")


@dataclasses.dataclass(frozen=True)
class PlotSpec:
    """One PNG from one Markdown table of a report.

    table : index of the table in the report (0 = first); x : the column
    (header text or index) on the x axis; y : columns to draw, each a curve;
    group : a column whose values split the rows into curves (long format;
    then ``y`` has one column); pick : which number of a cell to use when a
    cell holds several ("0.93 / 0.92 / 0.91"); labels : curve names replacing
    the header texts; suffix : file name ``<table>-<suffix>.png``; bands :
    for each column of ``y``, a (low, high) pair of columns drawn as a shaded
    band around its curve (e.g. 5 % and 95 % quantiles over chains).
    """
    suffix: str
    title: str
    x: object
    y: tuple
    table: int = 0
    group: object = None
    pick: int = 0
    xlabel: str = ""
    ylabel: str = ""
    logx: bool = False
    logy: bool = False
    labels: tuple = ()
    bands: tuple = ()


def markdown_tables(text):
    """Every Markdown table of ``text`` as (header cells, list of row cells)."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        if _TABLE_LINE.match(lines[i]) and i + 1 < len(lines) and _RULE.match(lines[i + 1]):
            head = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and _TABLE_LINE.match(lines[i]):
                rows.append(_cells(lines[i]))
                i += 1
            out.append((head, rows))
        else:
            i += 1
    return out


def number(cell, pick=0):
    """The ``pick``-th number in a table cell ("a-b" ranges give b), or NaN."""
    m = _RANGE.match(cell)
    if m and pick == 0:
        return float(m.group(2))
    nums = _NUM.findall(cell.replace("\\", ""))
    if len(nums) <= pick or cell.strip().startswith("-") and not _NUM.match(cell.strip()):
        return math.nan
    return float(nums[pick])


def table_sections(text):
    """The nearest ``##``-``######`` heading above each Markdown table of
    ``text`` (in the order of :func:`markdown_tables`; "" where there is none)."""
    lines = text.split("\n")
    out, section, i = [], "", 0
    while i < len(lines):
        m = re.match(r"^#{2,6}\s+(.*)$", lines[i])
        if m:
            section = m.group(1).strip()
        if _TABLE_LINE.match(lines[i]) and i + 1 < len(lines) and _RULE.match(lines[i + 1]):
            out.append(section)
            i += 2
            while i < len(lines) and _TABLE_LINE.match(lines[i]):
                i += 1
        else:
            i += 1
    return out


def _col(head, key):
    if isinstance(key, int):
        return key
    for j, h in enumerate(head):
        if h == key:
            return j
    for j, h in enumerate(head):
        if h.startswith(key):
            return j
    raise KeyError(f"no column {key!r} in {head}")


def _curves(head, rows, spec):
    jx = _col(head, spec.x)
    curves = {}
    if spec.group is not None:
        jg, jy = _col(head, spec.group), _col(head, spec.y[0])
        for r in rows:
            x, y = number(r[jx]), number(r[jy], spec.pick)
            if math.isfinite(x) and math.isfinite(y):
                xs, ys = curves.setdefault(r[jg], ([], []))
                xs.append(x)
                ys.append(y)
        return curves
    for k, key in enumerate(spec.y):
        if isinstance(key, int) and key >= len(head):
            continue
        jy = _col(head, key)
        name = spec.labels[k] if k < len(spec.labels) else head[jy]
        xs, ys = [], []
        for r in rows:
            if jy >= len(r):
                continue
            x, y = number(r[jx]), number(r[jy], spec.pick)
            if math.isfinite(x) and math.isfinite(y):
                xs.append(x)
                ys.append(y)
        if xs:
            curves[name] = (xs, ys)
    return curves


def plot_report(text, name, specs, out_dir):
    """Write one PNG per spec into ``out_dir``; return Markdown image links
    (empty when matplotlib is absent or nothing could be drawn)."""
    if not specs or not out_dir:
        return []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    tables = markdown_tables(text)
    sections = table_sections(text)
    links = []
    for spec in specs:
        if spec.table >= len(tables):
            continue
        head, rows = tables[spec.table]
        try:
            curves = _curves(head, rows, spec)
        except KeyError:
            continue
        if not curves:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        band_of = {}
        if spec.bands and spec.group is None:
            names = [spec.labels[k] if k < len(spec.labels) else head[_col(head, key)]
                     for k, key in enumerate(spec.y)]
            band_of = dict(zip(names, spec.bands))
        for label, (xs, ys) in curves.items():
            line, = ax.plot(xs, ys, marker="o", label=label)
            if label in band_of:
                lo_hi = [_col(head, c) for c in band_of[label]]
                pts = [(number(r[_col(head, spec.x)]), number(r[lo_hi[0]]), number(r[lo_hi[1]]))
                       for r in rows if max(lo_hi) < len(r)]
                pts = [p for p in pts if all(math.isfinite(v) for v in p)]
                if pts:
                    bx, blo, bhi = zip(*pts)
                    ax.fill_between(bx, blo, bhi, color=line.get_color(), alpha=0.2, lw=0)
        if spec.logx:
            ax.set_xscale("log")
        if spec.logy and all(y > 0 for _, ys in curves.values() for y in ys):
            ax.set_yscale("log")
        ax.set_xlabel(spec.xlabel or head[_col(head, spec.x)])
        ax.set_ylabel(spec.ylabel)
        # "{section}" in a title: the heading above the table (reports with one
        # table per problem, whichever problems were run)
        title = (spec.title.replace("{section}", sections[spec.table])
                 if "{section}" in spec.title else spec.title)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fname = f"{name}-{spec.suffix}.png"
        fig.savefig(os.path.join(out_dir, fname), dpi=100)
        plt.close(fig)
        links.append(f"![{title}]({fname})")
    return links
