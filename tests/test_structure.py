"""The shape of fastsurrogate/: its modules import one another one way only
(imports inside functions count), in samplers/ and across the whole
package, and few imports of the package sit inside functions; no function
of samplers/ is longer than 60 lines, none of the package longer than 80,
and the deleted no-regret module stays deleted; no module sets attributes
on the run machinery's Run and ChainContext that their __init__ does not declare.
Read from the source files of the installed package; and the C files of
csrc/ include one another's headers one way only (read from the checkout)."""
import ast
import importlib.machinery
import importlib.util
import re
from pathlib import Path

import pytest

import fastsurrogate
import fastsurrogate.samplers

PACKAGE = "fastsurrogate.samplers"
FOLDER = Path(fastsurrogate.samplers.__file__).resolve().parent
MAX_LINES = 60


def _modules():
    """name -> parsed source of every module in samplers/ ("__init__" too)."""
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(FOLDER.glob("*.py"))}


def _imported(node, names):
    """The modules of samplers/ that an Import / ImportFrom node imports."""
    if isinstance(node, ast.Import):
        full = [a.name for a in node.names]
    else:
        base = PACKAGE.rsplit(".", node.level - 1)[0] if node.level else ""
        mod = ".".join(x for x in (base, node.module) if x)
        full = [mod] if mod != PACKAGE else [f"{mod}.{a.name}" for a in node.names]
    out = set()
    for f in full:
        if f == PACKAGE:
            out.add("__init__")
        elif f.startswith(PACKAGE + "."):
            first = f[len(PACKAGE) + 1:].split(".")[0]
            # `from . import SAMPLERS` imports the package itself
            out.add(first if first in names else "__init__")
    return out


def _import_graph():
    mods = _modules()
    return {name: set().union(*[_imported(n, mods) for n in ast.walk(tree)
                                if isinstance(n, (ast.Import, ast.ImportFrom))])
            for name, tree in mods.items()}


def _cycle(graph):
    """One import cycle as a list of modules (first == last), or None."""
    state, path = {}, []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == "open":
                return path[path.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        state[m] = "done"
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_samplers_modules_import_one_another_without_a_cycle():
    # the check itself: it finds a cycle, and the graph is read at all
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    graph = _import_graph()
    assert graph["_base"] >= {"_checkpoint", "_executors"}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in samplers/: " + " -> ".join(cycle)


def test_no_samplers_function_is_longer_than_60_lines():
    long = [f"{name}.py: {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for name, tree in _modules().items() for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_LINES]
    assert not long, long


def test_the_no_regret_module_is_gone():
    assert not list(FOLDER.glob("_noregret*"))
    assert importlib.util.find_spec(f"{PACKAGE}._noregret") is None


# -- the run machinery's objects: no module sets what their class does not declare --

# a Run and a ChainContext declare every attribute in __init__ (samplers/_base.py);
# the modules that make and move them (the checkpoints, the executors) may read
# their __dict__ and the remote stub's own attributes
MACHINERY = {"_base", "_checkpoint", "_executors"}


def _flat(target):
    """The single targets of an assignment target (tuples, lists, starred)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for e in target.elts:
            yield from _flat(e)
    elif isinstance(target, ast.Starred):
        yield from _flat(target.value)
    else:
        yield target


def _stored(node):
    """The single targets a node assigns: =, op=, annotated, for, with ... as."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor,
                           ast.comprehension)):
        targets = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        targets = [node.optional_vars]
    else:
        return []
    return [t for target in targets for t in _flat(target)]


def _declared(tree, cls_name):
    """(attributes __init__ assigns on self, names of the class body) of a class."""
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    attrs = {t.attr for n in ast.walk(init) for t in _stored(n)
             if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
             and t.value.id == "self"}
    members = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return attrs, members


def _context_names(tree):
    """Names a module binds to ChainContexts: ``ctx``, and the loop variables
    of loops and comprehensions over ``<...>.ctxs``."""
    names = {"ctx"}
    for n in ast.walk(tree):
        if isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and \
                isinstance(n.iter, ast.Attribute) and n.iter.attr == "ctxs" and \
                isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return names


def _kind(expr, ctx_names):
    """"ChainContext" or "Run" for an expression naming one, else None:
    ``ctx`` (and the module's other ChainContext names), ``run``,
    ``<ctx>.run``, ``<...>.ctxs[i]``."""
    if isinstance(expr, ast.Name):
        return "Run" if expr.id == "run" else "ChainContext" if expr.id in ctx_names else None
    if isinstance(expr, ast.Attribute) and expr.attr == "run" and \
            _kind(expr.value, ctx_names) == "ChainContext":
        return "Run"
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and \
            expr.value.attr == "ctxs":
        return "ChainContext"
    return None


def _machinery_misuse(tree, declared, reads=True):
    """What a module does to Run / ChainContext objects that their classes do
    not declare: attributes set (and, with ``reads``, read) that __init__
    does not assign, and getattr with a default, hasattr, setattr, delattr
    on them.  ``declared``: class name -> (attributes, members)."""
    ctx_names = _context_names(tree)
    out = []
    for n in ast.walk(tree):
        for t in _stored(n):
            if isinstance(t, ast.Attribute):
                kind = _kind(t.value, ctx_names)
                if kind and t.attr not in declared[kind][0]:
                    out.append(f"line {t.lineno}: sets {kind}.{t.attr}")
        if reads and isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
            kind = _kind(n.value, ctx_names)
            if kind and n.attr not in declared[kind][0] | declared[kind][1]:
                out.append(f"line {n.lineno}: reads {kind}.{n.attr}")
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.args and \
                n.func.id in ("getattr", "hasattr", "setattr", "delattr") and \
                _kind(n.args[0], ctx_names) and (n.func.id != "getattr" or len(n.args) > 2):
            out.append(f"line {n.lineno}: {n.func.id}({ast.unparse(n.args[0])}, ...)")
    return out


def _machinery_declared():
    base = _modules()["_base"]
    return {name: _declared(base, name) for name in ("Run", "ChainContext")}


def test_the_machinery_misuse_reader():
    declared = {"Run": ({"info", "surrogate", "state", "ctxs"}, {"each_chain"}),
                "ChainContext": ({"chain", "state", "run"}, {"phase"})}
    src = """
def f(run, ctx):
    ctx.chain = ctx.state = run.surrogate = None
    ctx.state.net = run.state.row = 1
    run.each_chain(None, 1, "x")
    ctx.net, (run.row, ctx.run.net) = 1, (2, 3)
    ctx.t0 += 1
    run.x: int = 1
    for c in run.ctxs:
        c.y = c.chain
    run.ctxs[0].z = 1
    getattr(ctx, "chain")
    getattr(run, "net", None)
    hasattr(ctx.run, "stage")
    other.w = ctx.q
"""
    found = _machinery_misuse(ast.parse(src), declared)
    assert sorted(f.split(": ", 1)[1] for f in found) == sorted([
        "sets ChainContext.net", "sets Run.row", "sets Run.net", "sets ChainContext.t0",
        "sets Run.x", "sets ChainContext.y", "sets ChainContext.z", "getattr(run, ...)",
        "hasattr(ctx.run, ...)", "reads ChainContext.q"]), found
    declared = _machinery_declared()
    assert {"chain", "state", "run", "warm"} <= declared["ChainContext"][0]
    assert {"info", "surrogate", "exact", "state", "error"} <= declared["Run"][0]


def test_no_module_sets_attributes_run_and_chain_context_do_not_declare():
    """A sampler keeps its own state in ``ctx.state`` / ``run.state`` (an
    object of its module), not in attributes it adds to the run machinery's
    objects; the machinery modules set only declared attributes too."""
    declared = _machinery_declared()
    bad = {name: found for name, tree in _modules().items() if name != "_base"
           for found in [_machinery_misuse(tree, declared, reads=name not in MACHINERY)]
           if found}
    assert not bad, bad


# -- the whole package ---------------------------------------------------------------

ROOT = Path(fastsurrogate.__file__).resolve().parent
TOP = "fastsurrogate"


def _dotted(path):
    parts = list(path.relative_to(ROOT.parent).parts)
    parts[-1] = parts[-1].split(".")[0]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_PYX_IMPORT = re.compile(r"^[ \t]*(from[ \t]+[\w.]+[ \t]+import\b|import[ \t]+\w)")


def _pyx_imports(text):
    """The Python imports of a Cython source (``import`` and ``from ...
    import`` statements; ``cimport`` is a compile-time dependency), parsed
    as a module of those statements alone."""
    lines, body, i = text.splitlines(), [], 0
    while i < len(lines):
        if _PYX_IMPORT.match(lines[i]):
            stmt, first = lines[i].strip(), i
            while (stmt.count("(") > stmt.count(")") or stmt.endswith("\\")) \
                    and i + 1 < len(lines):
                i += 1
                stmt = stmt.rstrip("\\") + " " + lines[i].strip()
            for node in ast.parse(stmt).body:
                node.lineno = first + 1
                body.append(node)
        i += 1
    return ast.Module(body=body, type_ignores=[])


def _pyx_sources():
    """The package's .pyx files: installed beside the extensions, else those of
    the checkout the tests sit in."""
    found = sorted(ROOT.rglob("*.pyx"))
    if not found:
        checkout = Path(__file__).resolve().parent.parent / TOP
        found = [ROOT / p.relative_to(checkout) for p in sorted(checkout.rglob("*.pyx"))]
        return {p: (checkout / p.relative_to(ROOT)).read_text() for p in found}
    return {p: p.read_text() for p in found}


def _package_modules():
    """(dotted name -> parsed source of every .py module and the Python
    imports of every .pyx one, the packages' names, every module's name:
    the compiled extensions too)."""
    py = {_dotted(p): ast.parse(p.read_text(), str(p)) for p in sorted(ROOT.rglob("*.py"))}
    pyx = {_dotted(p): _pyx_imports(text) for p, text in _pyx_sources().items()}
    packages = {_dotted(p) for p in ROOT.rglob("__init__.py")}
    suffixes = (".pyx", *importlib.machinery.EXTENSION_SUFFIXES)
    compiled = {_dotted(p) for p in ROOT.rglob("*") if p.name.endswith(suffixes)}
    return {**py, **pyx}, packages, set(py) | set(pyx) | compiled


def _targets(node, name, packages, modules):
    """The modules of the package that an Import / ImportFrom node in module
    ``name`` imports: ``from x import y`` is module x.y when there is one,
    else x itself (a name defined in x)."""
    if isinstance(node, ast.Import):
        full = [a.name for a in node.names]
    else:
        base = name if name in packages else name.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        mod = ".".join(x for x in (base if node.level else "", node.module) if x)
        full = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod
                for a in node.names]
    out = set()
    for f in full:
        while f and f not in modules:       # `import a.b.c` of a name in a.b
            f = f.rpartition(".")[0]
        if f == TOP or f.startswith(TOP + "."):
            out.add(f)
    return out - {name}


def _package_graph():
    py, packages, modules = _package_modules()
    graph = {m: set() for m in modules}
    for name, tree in py.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= _targets(node, name, packages, modules)
    return graph


def test_the_package_imports_itself_without_a_cycle():
    graph = _package_graph()
    # the graph is read: module-level and function-level imports, relative
    # and absolute, of modules and of names
    assert "fastsurrogate.samplers._checkpoint" in graph["fastsurrogate.samplers._base"]
    assert "fastsurrogate.core._potential" in graph["fastsurrogate.result"]
    assert "fastsurrogate.core._rmhmc" in graph["fastsurrogate.models.pde"]     # in a function
    assert "fastsurrogate.samplers" in graph["fastsurrogate._sample"]
    # ... and the Python imports of the .pyx modules
    assert "fastsurrogate.core._potential" in graph["fastsurrogate.models._glm"]
    assert "fastsurrogate.surrogates._format" in graph["fastsurrogate.surrogates._network"]
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in fastsurrogate/: " + " -> ".join(cycle)


def test_the_pyx_import_reader():
    text = ("cimport numpy as cnp\nfrom fastsurrogate.core._common cimport FS_OK\n"
            "import numbers\nfrom fastsurrogate.core._checks import (real_array,\n"
            "    activation_code)\ncdef f():\n    from ..x import y\n")
    mod = _pyx_imports(text)
    assert [ast.unparse(n) for n in mod.body] == [
        "import numbers", "from fastsurrogate.core._checks import real_array, activation_code",
        "from ..x import y"]
    assert [n.lineno for n in mod.body] == [3, 4, 7]


def test_the_package_is_layered_plots_below_result_and_the_file_format_in_core():
    graph = _package_graph()
    assert "fastsurrogate.result" not in graph["fastsurrogate.plots"]
    assert not {m for m in graph["fastsurrogate.core._npz"] if m.startswith("fastsurrogate")}
    assert not {m for m in graph["fastsurrogate.samplers._checkpoint"]
                if m in ("fastsurrogate", "fastsurrogate._sample")}


# Imports of the package inside functions: few.  A lazy import of an
# optional library (jax, pymc, matplotlib, arviz, dask, ...) is not one of
# them; `import fastsurrogate` inside a function is.
MAX_FUNCTION_IMPORTS = 10


def _function_imports():
    """Imports of the package inside functions: (module, line, source)."""
    py, packages, modules = _package_modules()
    found = {}
    for name, tree in py.items():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if (isinstance(node, (ast.Import, ast.ImportFrom))
                        and _targets(node, name, packages, modules)):
                    found[(name, node.lineno)] = ast.unparse(node)
    return [(m, line, src) for (m, line), src in sorted(found.items())]


def test_at_most_10_imports_of_the_package_inside_functions():
    # the count itself: relative and absolute imports, `import fastsurrogate`
    found = _function_imports()
    assert ("fastsurrogate.models.pde", "from ..core._rmhmc import CallableMetric") in {
        (m, src) for m, _, src in found}
    assert len(found) <= MAX_FUNCTION_IMPORTS, "\n".join(
        [f"{len(found)} imports of fastsurrogate inside functions (at most "
         f"{MAX_FUNCTION_IMPORTS}):"] + [f"  {m}:{line}: {src}" for m, line, src in found])


# -- every function of the package ---------------------------------------------------

MAX_FUNCTION_LINES = 80


def test_no_function_in_the_package_is_longer_than_80_lines():
    # lines of a def from its first line to its last, docstring included
    # (samplers/ keeps its own, tighter bound above)
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) > 50 and ROOT / "samplers" / "_base.py" in files
    long = [f"{path.relative_to(ROOT)}: {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for path in files for n in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long


# -- csrc/: the C files include one another's headers one way only ----------------------

CSRC = Path(__file__).resolve().parent.parent / "csrc"


def _include_graph(folder):
    """module -> the modules whose header its .c or .h includes, a module
    being a .c/.h pair by its name ("fs_hmc": fs_hmc.c and fs_hmc.h)."""
    graph = {}
    for path in sorted(folder.glob("*.[ch]")):
        deps = graph.setdefault(path.stem, set())
        for name in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)\.h"', path.read_text(),
                               flags=re.M):
            if name != path.stem:
                deps.add(name)
    return graph


def test_the_include_reader_finds_a_cycle(tmp_path):
    (tmp_path / "fs_a.c").write_text('#include <math.h>\n#include "fs_a.h"\n#include "fs_b.h"\n')
    (tmp_path / "fs_a.h").write_text('#include "fs_common.h"\n')
    (tmp_path / "fs_b.h").write_text('/* b */\n  #  include "fs_a.h"   /* back */\n')
    graph = _include_graph(tmp_path)
    assert graph == {"fs_a": {"fs_b", "fs_common"}, "fs_b": {"fs_a"}}
    assert _cycle(graph) == ["fs_a", "fs_b", "fs_a"]


@pytest.mark.skipif(not CSRC.is_dir(), reason="csrc/ not present (an installed package)")
def test_csrc_includes_one_another_without_a_cycle():
    graph = _include_graph(CSRC)
    # the graph is read: the chain loop sits above the transitions
    assert {"fs_transition", "fs_nuts", "fs_surrogate", "fs_adapt"} <= graph["fs_hmc"]
    assert "fs_transition" in graph["fs_nuts"] and "fs_nuts" in graph["fs_surrogate"]
    cycle = _cycle(graph)
    assert cycle is None, "#include cycle in csrc/: " + " -> ".join(cycle)
