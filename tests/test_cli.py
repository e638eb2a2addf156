"""The ``fastsurrogate`` console script: --help lists every subcommand, one line each."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastsurrogate.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parent.parent


def _run(*args):
    env = dict(os.environ)
    # the package under test (installed, or built in place in the checkout)
    import fastsurrogate
    env["PYTHONPATH"] = str(Path(fastsurrogate.__file__).resolve().parent.parent)
    return subprocess.run([sys.executable, "-m", "fastsurrogate", *args], capture_output=True,
                          text=True, env=env, cwd=str(ROOT / "tests"), timeout=120)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_subcommand_on_one_line(flag):
    out = _run(flag)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("usage: fastsurrogate")
    assert {"demo", "reproduce"} <= set(COMMANDS)
    for name in COMMANDS:
        mine = [ln for ln in lines if ln.split()[:1] == [name]]
        assert len(mine) == 1, (name, out.stdout)
        # a one-line description after the name
        assert len(mine[0].split(None, 1)[1]) > 20


def test_subcommand_help_and_unknown_command():
    out = _run("reproduce", "--help")
    assert out.returncode == 0 and "usage" in out.stdout.lower()
    # a table's own options (the general help was printed instead)
    out = _run("reproduce", "sg-rem", "--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: fastsurrogate reproduce sg-rem") and \
        "--truth-draws" in out.stdout
    out = _run("frobnicate")
    assert out.returncode == 2 and "fastsurrogate --help" in out.stderr


def test_console_script_entry_point_is_main():
    try:
        import tomllib
    except ImportError:                                   # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    if "project" not in meta:
        pytest.skip("not run from the source tree")
    assert meta["project"]["scripts"]["fastsurrogate"] == "fastsurrogate.__main__:main"
    assert "matplotlib" in " ".join(meta["project"]["optional-dependencies"]["plot"])
