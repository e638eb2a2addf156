"""The shape of fastsurrogate/samplers/: its modules import one another one
way only (imports inside functions count), no function is longer than 60
lines, and the deleted no-regret module stays deleted.  Read from the
source files of the installed package."""
import ast
import importlib.util
from pathlib import Path

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
