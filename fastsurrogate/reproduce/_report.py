"""Helpers shared by the reproduction modules: the machine description,
progress messages, the cache folder, Markdown tables and optional plots."""
import os
import time
import platform
import sys

import numpy as np

import fastsurrogate as fs


def log(msg):
    """A progress message to stderr (the reports go to files)."""
    print(msg, file=sys.stderr, flush=True)


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, or "" where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def machine_line():
    """One line naming the machine and the versions a report was made with."""
    return (f"machine: {cpu_model() or platform.machine()}, {os.cpu_count()} CPUs; "
            f"python {platform.python_version()}, numpy {np.__version__}, "
            f"fastsurrogate {fs.__version__}")


def machine_lines():
    """The machine and versions as two Markdown list lines, with the load average."""
    model = cpu_model()
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    return [
        f"- machine: platform.processor() = {platform.processor()!r}, "
        f"os.cpu_count() = {os.cpu_count()}, machine = {platform.machine()}, "
        f"cpu model = {model or 'unknown'}",
        f"- python {platform.python_version()}, numpy {np.__version__}, "
        f"fastsurrogate {fs.__version__}; load average at start "
        f"{', '.join(f'{x:.2f}' if isinstance(x, float) else x for x in load)}",
    ]


def cache_dir():
    """Where long ground-truth runs are cached: ``$FASTSURROGATE_CACHE``, else
    ``~/.cache/fastsurrogate`` (``$XDG_CACHE_HOME`` honoured)."""
    env = os.environ.get("FASTSURROGATE_CACHE")
    if env:
        return os.path.expanduser(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastsurrogate")


def problems_report(head, problems, run_one, missing, quick_note=None):
    """The body of a table run over several problems, one section each:
    ``head`` (lines), ``quick_note`` (under --quick), then ``run_one(name)``'s
    text per problem (each logged as it finishes; a problem whose data file
    ``missing(name)`` names is skipped and says so), then the total seconds
    and the load average at the end."""
    t0 = time.perf_counter()
    parts = list(head) + ([quick_note] if quick_note else [])
    for name in problems:
        absent = missing(name)
        if absent:
            parts.append(f"### {name}\n\nSKIPPED: data file {absent} not found in the data "
                         "folder (set FASTSURROGATE_DATA).")
            continue
        parts.append(run_one(name))
        log(parts[-1])
    parts.append(f"({time.perf_counter() - t0:.0f} s in all; load average at the end "
                 f"{', '.join(f'{x:.2f}' for x in os.getloadavg())})")
    return parts


def markdown_table(head, rows):
    """A Markdown table from a header list and rows of already formatted cells."""
    lines = ["| " + " | ".join(map(str, head)) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def plot_curves(path, curves, xlabel, ylabel, title, logy=False):
    """Write a PNG of named (x, y) curves with matplotlib's Agg backend.

    Returns the path, or None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (x, y) in curves.items():
        ax.plot(x, y, marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ARNS-HMC's online update in the tables whose committed full runs were made
# with it (rns-table1, rns-fig7, rns-fig8): the penalised recursion fed every
# non-divergent proposal, the network driving everywhere (no ``trust``):
# the sampler's defaults when they ran.  Pinned so that the reports in
# docs/papers stay what this code runs whatever ARNS-HMC's defaults become
# (a table rerun with the defaults drops it).
ARNS_ONLINE = dict(online_data="proposals", online_ridge=None, trust=None)
