"""Static checks of csrc/ that the compiler does not make.

Every function that takes or returns a GNU vector type (``typedef double
fs__v4 __attribute__((vector_size(32)))``) must be ``FS__INLINE`` (static
inline, always_inline).  The hot kernels are compiled for several ISAs
(target_clones); an out-of-line helper with a vector argument is compiled
once, for the baseline ISA, and the AVX clones call it with another
argument-passing convention.  At -O3 gcc happened to inline such helpers;
the -O0 build (FASTSURROGATE_DEBUG=1, the sanitizer build) crashed in
fs_greville.c's fs__symv on the first call.  Skipped when csrc/ is not
next to the tests (an installed package).
"""
import os
import re

import pytest

CSRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")

pytestmark = pytest.mark.skipif(not os.path.isdir(CSRC), reason="csrc/ not present")


def _strip(text):
    """C text without comments, string literals and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    return text


def _top_level_heads(text):
    """The text of each file-scope declaration or definition head: what lies
    between the previous top-level ';' or '}' and the next top-level ';' or '{'."""
    heads, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                heads.append((text[start:i], True))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif ch == ";" and depth == 0:
            heads.append((text[start:i], False))
            start = i + 1
    return heads


def _sources():
    return sorted(os.path.join(CSRC, f) for f in os.listdir(CSRC) if f.endswith((".c", ".h")))


def vector_types():
    """Names of the GNU vector typedefs in csrc/."""
    names = set()
    for path in _sources():
        with open(path) as f:
            text = _strip(f.read())
        names.update(re.findall(
            r"typedef\s+[\w\s]*?\b(\w+)\s*__attribute__\s*\(\(\s*vector_size",
            text))
    return names


def vector_functions():
    """(file, function, is FS__INLINE) for every function with a vector type in
    its return type or parameters."""
    vtypes = vector_types()
    found = []
    pat = re.compile(r"\b(" + "|".join(sorted(vtypes)) + r")\b") if vtypes else None
    for path in _sources():
        with open(path) as f:
            raw = f.read()
        # FS__INLINE is a macro: mark it before the preprocessor lines go
        text = _strip(raw.replace("FS__INLINE", "__FS_INLINE_MARK__"))
        # a body given by a macro (fs_vmath.h: `... f(double e) FS__X_BODY(double, )`)
        text = re.sub(r"\b[A-Z][A-Z0-9_]*_BODY\s*\([^()]*\)", " {} ", text)
        for head, _ in _top_level_heads(text):
            head = " ".join(head.split())
            if head.startswith("typedef") or "(" not in head or "=" in head.split("(")[0]:
                continue
            m = re.match(r"(.*?)\b(\w+)\s*\((.*)\)\s*(__attribute__.*)?$", head)
            if not m:
                continue
            ret, name, params = m.group(1), m.group(2), m.group(3)
            if name in ("__attribute__", "sizeof") or not ret.strip():
                continue
            if pat and (pat.search(ret) or pat.search(params)):
                found.append((os.path.basename(path), name, "__FS_INLINE_MARK__" in ret))
    return found


def test_the_scanner_sees_the_vector_helpers():
    # guards the test itself: the parser must find the known helpers
    vt = vector_types()
    assert {"fs__v4", "fs__g4"} <= vt
    names = {n for _, n, _ in vector_functions()}
    assert {"fs__g4_ld", "fs__g4_st", "fs__net_act4", "fs__mlp_act4"} <= names


def test_vector_functions_are_always_inline():
    bad = [f"{f}: {n}" for f, n, inline in vector_functions() if not inline]
    assert not bad, ("functions taking or returning a GNU vector type must be FS__INLINE "
                     "(an out-of-line copy is compiled for the baseline ISA only and "
                     "crashes the target_clones callers at -O0): " + ", ".join(bad))


def test_the_scanner_flags_an_out_of_line_helper(tmp_path, monkeypatch):
    src = tmp_path / "fs_bad.c"
    src.write_text("typedef double fs__w4 __attribute__((vector_size(32)));\n"
                   "/* a helper */\nstatic fs__w4 fs__twice(fs__w4 v) { return v + v; }\n"
                   "FS__INLINE fs__w4 fs__ok(fs__w4 v) { return v; }\n"
                   "int fs_plain(const double *x) { return x[0] > 0; }\n")
    monkeypatch.setattr(__import__(__name__), "CSRC", str(tmp_path))
    found = vector_functions()
    assert ("fs_bad.c", "fs__twice", False) in found
    assert ("fs_bad.c", "fs__ok", True) in found
    assert all(n != "fs_plain" for _, n, _ in found)
