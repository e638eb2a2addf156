"""Helpers shared by the paper bench scripts (run as ``python bench/<script>.py``)."""
import sys


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


def emit(report, out=None):
    """Print a script's report, and also write it to the file ``out`` if given."""
    print(report)
    if out:
        with open(out, "w") as f:
            f.write(report)
