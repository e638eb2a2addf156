"""How the package is built (setup.py), and how it behaves when imported
from its own source checkout."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SRC_PKG = REPO / "fastsurrogate"


def _has_compiled(pkg):
    return any(p.name.startswith("_potential.") and p.suffix in (".so", ".pyd")
               for p in (pkg / "core").iterdir())


def test_import_from_uncompiled_checkout_says_what_to_do():
    if not (SRC_PKG / "__init__.py").is_file():
        pytest.skip("no source checkout beside the tests")
    if _has_compiled(SRC_PKG):
        pytest.skip("the checkout is built in place: importing from it works")
    proc = subprocess.run([sys.executable, "-c", "import fastsurrogate"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "source checkout with no compiled extensions" in proc.stderr
    assert "Run Python from another directory" in proc.stderr


def test_installed_package_imports_from_outside_the_checkout(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", "import fastsurrogate, sys; print(fastsurrogate.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("__init__.py")


def test_the_top_level_namespace_holds_public_names_and_subpackages_only():
    import types

    import fastsurrogate as fs
    public = {n for n in dir(fs) if not n.startswith("_")}
    extra = public - set(fs.__all__)
    # subpackages and modules of the package appear once imported; nothing else
    assert all(isinstance(getattr(fs, n), types.ModuleType)
               and getattr(fs, n).__name__.startswith("fastsurrogate.") for n in extra), extra
    assert "inspect" not in public and "plots" in fs.__all__
    assert all(hasattr(fs, n) for n in fs.__all__)


def test_the_license_is_in_the_checkout():
    root = Path(__file__).resolve().parents[1]
    text = (root / "LICENSE").read_text()
    assert "BSD 3-Clause" in text
    assert 'license = "BSD-3-Clause"' in (root / "pyproject.toml").read_text()


def _named_in_setup(tree, filename):
    """Lines of setup.py's string constants that name csrc/<filename>."""
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and n.value.split("/")[-1] == filename]


@pytest.mark.skipif(not (REPO / "setup.py").is_file(), reason="no setup.py beside the tests")
def test_every_c_source_is_compiled_once():
    # each csrc/*.c is named once in setup.py: a source of one extension, or
    # of a static library that the extensions link.  One named by two
    # extensions is compiled twice, and `build_ext -j` races on its object
    # file (a clean install once got a _rmhmc.so with an undefined symbol).
    tree = ast.parse((REPO / "setup.py").read_text())
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call)
             and isinstance(c.func, ast.Name) and c.func.id == "ext"]
    assert len(calls) >= 12                  # the extension list is read
    lists = {c.args[0].value: [e.value for e in c.args[1].elts] for c in calls}
    assert "fs_mlp.c" in lists["surrogates._mlp"]
    sources = sorted(p.name for p in (REPO / "csrc").glob("*.c"))
    assert len(sources) >= 20 and "fs_common.c" in sources and "fs_glm.c" in sources
    counts = {name: len(_named_in_setup(tree, name)) for name in sources}
    assert {name: n for name, n in counts.items() if n != 1} == {}
    assert not [name for name, srcs in lists.items() if "fs_common.c" in srcs]
    assert len(_named_in_setup(ast.parse('x = ["fs_common.c", "csrc/fs_common.c"]'),
                               "fs_common.c")) == 2


def test_sdist_manifest_ships_the_docs_changelog_and_license():
    """The sdist carries what the README links to: CHANGELOG.md, LICENSE and
    the documentation's sources (not its build output)."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    manifest = root / "MANIFEST.in"
    if not manifest.exists():
        pytest.skip("no source checkout here")
    lines = manifest.read_text().splitlines()
    first = lines[0].split()
    assert first[0] == "include" and {"CHANGELOG.md", "LICENSE", "README.md"} <= set(first)
    assert any(ln.startswith("recursive-include docs ") and "*.md" in ln for ln in lines)
    assert "prune docs/_build" in lines
