"""Helpers shared by the paper bench scripts (run as ``python bench/<script>.py``)."""
# the machine description and progress messages are the ones the installed
# `fastsurrogate reproduce` writes
from fastsurrogate.reproduce._report import log, cpu_model, machine_line  # noqa: F401


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
