"""Helpers shared by the paper bench scripts (run as ``python bench/<script>.py``)."""
import os
import platform
import sys

import numpy as np

import fastsurrogate as fs


def log(msg):
    """Progress message to stderr (the tables go to stdout or --out)."""
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


def save(text, out):
    """Write ``text`` and a newline to the file ``out`` (nothing when ``out`` is None)."""
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def emit(report, out=None):
    """Print a script's report, and also write it to the file ``out`` if given."""
    print(report)
    if out:
        with open(out, "w") as f:
            f.write(report)
