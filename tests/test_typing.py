"""The package's type hints (PEP 561): the py.typed marker and the stubs of
the compiled modules are installed, and every signature a stub declares
matches the compiled module's (parameter names and order), so that the stubs
cannot drift from the .pyx files unnoticed.  mypy itself runs in .ci/run's
typecheck step."""
import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import fastsurrogate

PKG = Path(fastsurrogate.__file__).resolve().parent
STUBS = ["core/_potential.pyi", "models/_glm.pyi", "models/_models.pyi", "models/_papers.pyi"]


def test_the_marker_and_the_stubs_are_installed():
    assert (PKG / "py.typed").is_file()
    for stub in STUBS:
        assert (PKG / stub).is_file(), stub


def _stub_params(fn):
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args] + (["*" + a.vararg.arg] if a.vararg else [])
    names += [p.arg for p in a.kwonlyargs] + (["**" + a.kwarg.arg] if a.kwarg else [])
    return [n for n in names if n not in ("self", "cls")]


def _pyx_params(pyx_text, cls, method):
    """Parameter names of ``cls.method`` in the .pyx source (a cdef class's
    special methods, __init__ and __call__, have no introspectable signature)."""
    head = re.search(rf"^(cdef )?class {cls}\b.*$", pyx_text, re.M)
    body = pyx_text[head.end():]
    nxt = re.search(r"^\S", body, re.M)
    body = body[:nxt.start()] if nxt else body
    m = re.search(rf"^    def {method}\((.*?)\):", body, re.M | re.S)
    if m is None:
        return None
    out = []
    for part in re.sub(r"\s+", " ", m.group(1)).split(","):
        part = part.split("=")[0].replace("not None", "").strip()
        if part and part != "*":
            star = "**" if part.startswith("**") else "*" if part.startswith("*") else ""
            out.append(star + part.lstrip("*").split()[-1])
    return [n for n in out if n != "self"]


def _runtime_params(obj):
    params = inspect.signature(obj).parameters.values()
    return [("*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else "")
            + p.name for p in params if p.name not in ("self", "cls")]


def _declared():
    """(stub, qualified name, stub parameters, runtime parameters) of every
    function and method the stubs declare (properties and __getattr__ aside)."""
    for stub in STUBS:
        path = PKG / stub
        module = importlib.import_module("fastsurrogate." + stub[:-4].replace("/", "."))
        pyx = path.with_suffix(".pyx")
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            fns = [(None, node)] if isinstance(node, ast.FunctionDef) else []
            if isinstance(node, ast.ClassDef):
                fns = [(node.name, f) for f in node.body if isinstance(f, ast.FunctionDef)]
            for cls, fn in fns:
                decorators = {ast.unparse(d) for d in fn.decorator_list}
                if fn.name == "__getattr__" or "property" in decorators or any(
                        d.endswith(".setter") for d in decorators):
                    continue
                owner = getattr(module, cls) if cls else module
                runtime = _runtime_params(getattr(owner, fn.name))
                if runtime == ["*args", "**kwargs"] and fn.name.startswith("__"):
                    runtime = _pyx_params(pyx.read_text(), cls, fn.name) if pyx.is_file() else None
                yield stub, f"{cls}.{fn.name}" if cls else fn.name, _stub_params(fn), runtime


def test_the_stubs_match_the_compiled_signatures():
    declared = list(_declared())
    assert len(declared) > 30
    if not (PKG / "core" / "_potential.pyx").is_file():
        pytest.skip("no .pyx beside the package: __init__ signatures cannot be read")
    wrong = [f"{stub}: {name}: stub {params}, compiled {runtime}"
             for stub, name, params, runtime in declared
             if runtime is not None and params != runtime]
    assert not wrong, "\n".join(wrong)


def test_the_public_samplers_and_checks_are_annotated():
    """Every parameter of the samplers' constructors and of the run checks has
    a type hint (mypy checks them in CI; disallow_incomplete_defs)."""
    from fastsurrogate.diagnostics import check_gradient, run_warnings
    names = ["HMC", "NUTS", "RNSHMC", "ARNSHMC", "VHMC", "NNGHMC"]
    targets = [getattr(fastsurrogate, n).__init__ for n in names] + [check_gradient, run_warnings]
    bare = [f"{fn.__qualname__}({p.name})" for fn in targets
            for p in inspect.signature(fn).parameters.values()
            if p.name != "self" and p.annotation is inspect.Parameter.empty]
    assert not bare, bare
    assert all(inspect.signature(fn).return_annotation is not inspect.Parameter.empty
               for fn in targets)
