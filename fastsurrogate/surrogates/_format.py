"""The file format of saved surrogates: a versioned .npz, no pickle.

The file is NumPy's ``.npz`` (read with ``allow_pickle=False``) whose member
``__header__`` is UTF-8 JSON: ``{"format": "fastsurrogate-surrogate",
"version": 1, "object": <tree>}``.  The tree describes the surrogate by its
constructor arguments (what ``__reduce__`` gives): a node is ``{"v": x}``
(a JSON scalar: None, bool, int, float, str), ``{"a": name}`` (an array
member of the zip), ``{"l": [...]}`` (a list), or ``{"cls": name, "args":
[...], "info": {...}}`` for one of the classes the caller names.  Floats in
JSON are written with ``repr`` and read back exactly; arrays are stored as
they are, so a loaded surrogate gives bitwise the same values and
gradients.  No training data are stored: a surrogate is its weights.

This module knows no surrogate class: the callers pass the classes they
save and load (:mod:`fastsurrogate.surrogates._persist` all of them, a
network's own ``save`` / ``load`` its class), so the compiled networks use
it without importing the modules above them.
"""
import numbers

import numpy as np

from ..core._npz import read_npz, write_npz

__all__ = ["FORMAT", "VERSION", "write_surrogate", "read_surrogate", "read_network"]

FORMAT = "fastsurrogate-surrogate"
VERSION = 1


def _json_info(info):
    out = {}
    for k, v in dict(info or {}).items():
        if isinstance(v, (bool, str)) or v is None:
            out[str(k)] = v
        elif isinstance(v, numbers.Integral):
            out[str(k)] = int(v)
        elif isinstance(v, numbers.Real):
            out[str(k)] = float(v)
    return out


def _encode(value, arrays, classes):
    if value is None or isinstance(value, (bool, str)):
        return {"v": value}
    if isinstance(value, numbers.Integral):
        return {"v": int(value)}
    if isinstance(value, numbers.Real):
        return {"v": float(value)}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"cannot save an array of dtype {value.dtype}")
        name = f"a{len(arrays)}"
        arrays[name] = np.ascontiguousarray(value)
        return {"a": name}
    if isinstance(value, (list, tuple)):
        return {"l": [_encode(v, arrays, classes) for v in value]}
    name = type(value).__name__
    if name in classes and type(value) is classes[name]:
        cls, args = value.__reduce__()[:2]
        return {"cls": name, "args": [_encode(a, arrays, classes) for a in args],
                "info": _json_info(getattr(value, "info", None))}
    raise TypeError(
        f"cannot save a {name}: save() supports {sorted(classes)} (and WeightedSums of them)")


def decode(node, arrays, classes):
    """The object a tree of :func:`read_surrogate` describes."""
    if "v" in node:
        return node["v"]
    if "a" in node:
        return arrays[node["a"]]
    if "l" in node:
        return [decode(v, arrays, classes) for v in node["l"]]
    cls = classes.get(node.get("cls"))
    if cls is None:
        raise ValueError(f"unknown surrogate class {node.get('cls')!r} in the file")
    obj = cls(*[decode(a, arrays, classes) for a in node["args"]])
    if node.get("info") and hasattr(obj, "info"):
        obj.info = dict(node["info"])
    return obj


def write_surrogate(surrogate, path, classes):
    """Write `surrogate`, an instance of one of `classes` (name -> class) or
    a tree of them, to `path` (atomic)."""
    arrays = {}
    tree = _encode(surrogate, arrays, classes)
    if "cls" not in tree:
        raise TypeError(f"cannot save a {type(surrogate).__name__}: not a surrogate")
    write_npz(path, {"format": FORMAT, "version": VERSION, "object": tree}, arrays)


def read_surrogate(path):
    """(the header's object tree, the arrays) of the file at `path`."""
    header, arrays = read_npz(path, FORMAT, VERSION)
    return header["object"], arrays


def read_network(path, cls):
    """The `cls` instance saved in `path` (a ValueError when the file holds
    another surrogate)."""
    tree, arrays = read_surrogate(path)
    if tree.get("cls") != cls.__name__:
        raise ValueError(f"{path} holds a {tree.get('cls')}, not a {cls.__name__}: load it "
                         "with fastsurrogate.surrogates.load")
    return decode(tree, arrays, {cls.__name__: cls})
