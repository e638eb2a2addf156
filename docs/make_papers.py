"""Regenerate docs/papers/: the reports of ``fastsurrogate reproduce``, full
runs where one was made, else ``--quick`` ones.

Run once, by hand, when the reproduce code changes (the documentation build
does not run it: the whole quick set takes about ten minutes on 2 cores)::

    PYTHONPATH=. python docs/make_papers.py              # every table
    PYTHONPATH=. python docs/make_papers.py rns-fig3     # some of them
    PYTHONPATH=. python docs/make_papers.py --index      # only rewrite docs/papers.md
    PYTHONPATH=. python docs/make_papers.py --from DIR   # the reports of one
                                            # `fastsurrogate reproduce --quick --out DIR` run
    PYTHONPATH=. python docs/make_papers.py --full DIR [DIR ...]   # full runs' reports
                                            # (`fastsurrogate reproduce --out DIR TABLE ...`,
                                            # no --quick) in place of those tables' --quick
                                            # ones; one table's runs on different --problems
                                            # in several DIRs make one report

Each table runs in its own process (``python -m fastsurrogate reproduce
--quick --out docs/papers TABLE``), one after the other, so that one table's
failure or memory does not touch the next; the reports ``docs/papers/<table>.md``
and their PNG figures are committed.  ``docs/papers.md`` is written from the
reports present (their header lines: command, machine, duration) and holds
them in its toctree; the run summary ``reproduce`` writes per call
(``README.md``, one table long here) is removed.  The
PNGs are written by the reproduce code itself (``reproduce/_plots.py``, from the
numbers in each report's Markdown tables); this script only re-saves them as
8-bit palette PNGs when Pillow is installed, to keep the committed figures small.
"""
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "papers")
PAGE = os.path.join(HERE, "papers.md")

INTRO = """\
# The papers' tables

fastsurrogate implements the samplers of three papers: RNS-HMC and ARNS-HMC
(Zhang, Shahbaba & Zhao 2017), VHMC (Zhang, Shahbaba & Zhao 2018) and NNgHMC
(Li, Holbrook, Shahbaba & Baldi 2019).  Every table and figure of theirs that
our data allow comes from one command installed with the package:

```
fastsurrogate reproduce --list                  # the tables, and the data each needs
fastsurrogate reproduce --quick --out reports   # all of them, reduced lengths
fastsurrogate reproduce rns-table1 vhmc-fig5    # some, at the papers' settings
```

The pages below are the reports of full runs (`fastsurrogate reproduce
TABLE`, the papers' settings) where one was made on this machine, and of
`--quick` runs for the other tables (`docs/make_papers.py`); the "run"
column says which, with the run's time.  Each page has the PNG figures that
`reproduce` draws.  [The papers' headline numbers
beside ours](headlines.md) sums them up.  Every
table has a "paper" column: the paper's own figure for that row, read from
the paper, and "n/a" where the paper has no number for it (a figure drawn
without numbers, or a row the paper does not have; no figure is guessed).  `--quick` tables are smoke runs: with 600
exploration iterations some surrogates are under-trained, so the full runs
(`fastsurrogate reproduce TABLE`, without `--quick`) are the ones to compare
with the papers.  Tables whose data are absent are skipped with a note; the
papers' Cover Type (NNgHMC Table 3; Bank Marketing stands in), MEG (VHMC
Figure 5; simulated sources are used instead), Online News and Dota2
(NNgHMC Table 5) data are not available.

"""


def tables():
    from fastsurrogate.reproduce import TABLES
    return list(TABLES)


def shrink_png(path):
    """Re-save ``path`` with an adaptive 256-colour palette (lossless-looking for line plots)."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _figures(text):
    """The PNG files a report shows."""
    return re.findall(r"\]\(([\w.-]+\.png)\)", text)


def _header(text, key):
    m = re.search(rf"^- {re.escape(key)}(.*)$", text, re.M)
    return m.group(1).strip() if m else ""


def write_index():
    """docs/papers.md: the intro, one row per report present, and their toctree."""
    readme = os.path.join(OUT, "README.md")
    if os.path.exists(readme):
        os.remove(readme)
    from fastsurrogate.reproduce import TABLES
    names = [n for n in tables() if os.path.exists(os.path.join(OUT, n + ".md"))]
    absent = [n for n in tables() if n not in names]
    rows = ["| table | paper, table or figure | run | figures |", "|---|---|---|---|"]
    entries = []
    total = 0.0
    n_full = 0
    machines = {}                   # machine line -> number of tables
    for n in names:
        with open(os.path.join(OUT, n + ".md")) as f:
            text = f.read()
        title = text.splitlines()[0].lstrip("# ").strip()
        paper = title.split(":")[0]
        if "SKIPPED" in text:
            run = "skipped: " + _header(text, "SKIPPED:").split(" not found")[0]
        else:
            full = _header(text, "full run:")
            run = f"full, {full}" if full else f"--quick, {_header(text, '--quick run:') or '?'}"
            secs = re.search(r"(\d+) s", run)
            total += float(secs.group(1)) if secs else 0.0
            n_full += bool(full)
        m = _header(text, "machine:")
        if m:
            machines[m] = machines.get(m, 0) + 1
        pngs = [f for f in _figures(text) if os.path.exists(os.path.join(OUT, f))]
        rows.append(f"| [{n}](papers/{n}.md) | {paper} | {run} | {len(pngs)} |")
        short = re.sub(r" \([^()]*\d{4}\)", "", paper)     # without the authors
        entries.append(f"{n}: {short} <papers/{n}>")
    for n in absent:
        rows.append(f"| {n} | {TABLES[n].paper} | no report in this snapshot "
                    f"(`python docs/make_papers.py {n}`) | - |")
    machine = "; ".join(f"{m} ({k} {'table' if k == 1 else 'tables'})"
                        for m, k in sorted(machines.items()))
    body = (INTRO + f"{'Machine' if len(machines) == 1 else 'Machines'}: {machine}.  "
            f"{len(names)} tables ({n_full} full runs, the "
            f"others --quick), {total:.0f} s of runs in all (the tables' own timers).\n\n"
            + "\n".join(rows) + "\n\n"
            "```{toctree}\n:maxdepth: 1\n:hidden:\n\n"
            + "\n".join(entries) + "\n```\n")
    with open(PAGE, "w") as f:
        f.write(body)
    print(f"[make_papers] wrote {PAGE}: {len(names)} tables")


def _full_reports():
    """name -> figures of the full-run reports in docs/papers/ (kept by --from)."""
    out = {}
    for f in os.listdir(OUT):
        if f.endswith(".md"):
            with open(os.path.join(OUT, f)) as fh:
                text = fh.read()
            if _header(text, "full run:"):
                out[f[:-3]] = set(_figures(text))
    return out


def copy_from(src):
    """Replace the --quick reports in docs/papers/ by those of one
    ``fastsurrogate reproduce --quick --out SRC`` run (the full runs' reports
    stay)."""
    full = _full_reports()
    keep = set().union(*full.values(), (n + ".md" for n in full))   # files of the full runs
    for f in os.listdir(OUT):
        if f.endswith((".md", ".png")) and f not in keep:
            os.remove(os.path.join(OUT, f))
    for f in sorted(os.listdir(src)):
        if f.endswith((".md", ".png")) and f != "README.md" and f not in keep:
            shutil.copy(os.path.join(src, f), OUT)
            if f.endswith(".png"):
                shrink_png(os.path.join(OUT, f))
    write_index()


def _sections(text):
    """(the title and header lines, {section title: body}) of a report."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return parts[0], {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def merge_reports(texts):
    """One report from several full runs of the same table on disjoint sets
    of problems (``fastsurrogate reproduce TABLE --problems ...``, run at
    different times: a table too long for one sitting).  The first run's
    title, paper figures and notes; every run's command and time in the
    header; each run's "Measured here" (its machine and load lines, its
    problems) and plots in turn.  Returns (text, renames): renames is one
    dict per run, old PNG name -> new, numbering each kind of figure on
    (``rns-fig8-rem-1.png`` of the second run becomes ``rns-fig8-rem-2.png``)."""
    head, first = _sections(texts[0])
    cmds = [_header(t, "command:") for t in texts]
    secs = [_header(t, "full run:") for t in texts]
    machines = list(dict.fromkeys(_header(t, "machine:") for t in texts))
    head = re.sub(r"^- command:.*$", "- command: " + "; ".join(cmds), head, flags=re.M)
    head = re.sub(r"^- machine:.*$", "- machine: " + "; ".join(machines), head, flags=re.M)
    total = sum(float(re.match(r"[\d.]+", x).group()) for x in secs)
    head = re.sub(r"^- full run:.*$", f"- full run: {total:.0f} s ({' + '.join(secs)}, "
                  f"{len(texts)} runs)", head, flags=re.M)
    counters, renames, measured, plots = {}, [], [], []
    for text in texts:
        rename = {}
        for png in _figures(text):
            stem = re.sub(r"(-\d+)?\.png$", "", png)
            counters[stem] = counters.get(stem, 0) + 1
            rename[png] = f"{stem}-{counters[stem]}.png"
        renames.append(rename)
        text = re.sub(r"\]\(([\w.-]+\.png)\)", lambda m: f"]({rename[m.group(1)]})", text)
        _, sec = _sections(text)
        measured.append(sec.get("Measured here", "").strip())
        if sec.get("Plots", "").strip():
            plots.append(sec["Plots"].strip())
    out = head.rstrip() + "\n\n"
    for title, body in first.items():
        if title == "Measured here":
            body = "\n\n".join(measured) + "\n\n"
        elif title == "Plots":
            body = "\n\n".join(plots) + "\n"
        out += f"## {title}\n\n{body.strip()}\n\n"
    return out.rstrip() + "\n", renames


def add_full(*srcs):
    """The full runs' reports in SRC ... (``fastsurrogate reproduce --out SRC
    TABLE ...``, without --quick) and their PNGs, in place of those tables'
    reports here; the other reports stay.  A table whose full runs are in
    several SRCs (one ``--problems`` set each) gets one report of them all
    (:func:`merge_reports`)."""
    found = {}
    for src in srcs:
        for f in sorted(os.listdir(src)):
            if not f.endswith(".md") or f == "README.md":
                continue
            with open(os.path.join(src, f)) as fh:
                text = fh.read()
            if _header(text, "full run:"):      # not a --quick or skipped report
                found.setdefault(f, []).append((src, text))
    added = []
    for f, runs in found.items():
        old = os.path.join(OUT, f)
        if os.path.exists(old):
            with open(old) as fh:
                for png in _figures(fh.read()):
                    if os.path.exists(os.path.join(OUT, png)):
                        os.remove(os.path.join(OUT, png))
        if len(runs) == 1:
            text, renames = runs[0][1], [{png: png for png in _figures(runs[0][1])}]
        else:
            text, renames = merge_reports([t for _, t in runs])
        with open(old, "w") as fh:
            fh.write(text)
        for (src, _), rename in zip(runs, renames):
            for png, new in rename.items():
                shutil.copy(os.path.join(src, png), os.path.join(OUT, new))
                shrink_png(os.path.join(OUT, new))
        added.append(f[:-3] + (f" ({len(runs)} runs)" if len(runs) > 1 else ""))
    print(f"[make_papers] full runs: {added}")
    write_index()


def main(argv):
    if argv == ["--index"]:
        write_index()
        return 0
    if len(argv) == 2 and argv[0] == "--from":
        copy_from(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "--full":
        add_full(*argv[1:])
        return 0
    names = argv or tables()
    os.makedirs(OUT, exist_ok=True)
    started = time.time()
    timings = []
    for name in names:
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "fastsurrogate", "reproduce", "--quick", "--out", OUT, name]
        print("$", " ".join(cmd), flush=True)
        rc = subprocess.call(cmd)
        secs = time.perf_counter() - t0
        timings.append((name, rc, secs))
        print(f"[make_papers] {name}: exit {rc}, {secs:.0f} s", flush=True)
    for f in sorted(os.listdir(OUT)):     # this run's figures only
        path = os.path.join(OUT, f)
        if f.endswith(".png") and os.path.getmtime(path) >= started:
            shrink_png(path)
    total = sum(s for _, _, s in timings)
    write_index()
    print(f"[make_papers] {len(timings)} tables in {total:.0f} s; "
          f"failed: {[n for n, rc, _ in timings if rc] or 'none'}")
    return 1 if any(rc for _, rc, _ in timings) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
