"""save / load for trained surrogates: a versioned .npz, no pickle.

The file is NumPy's ``.npz`` (read with ``allow_pickle=False``) whose member
``__header__`` is UTF-8 JSON: ``{"format": "fastsurrogate-surrogate",
"version": 1, "object": <tree>}``.  The tree describes the surrogate by its
constructor arguments (what ``__reduce__`` gives): a node is ``{"v": x}``
(a JSON scalar: None, bool, int, float, str), ``{"a": name}`` (an array
member of the zip), ``{"l": [...]}`` (a list), or ``{"cls": name, "args":
[...], "info": {...}}`` for one of the classes below.  Floats in JSON are
written with ``repr`` and read back exactly; arrays are stored as they
are, so a loaded surrogate gives bitwise the same values and gradients.
No training data are stored: a surrogate is its weights.

Saved classes: :class:`RandomNetwork` (RNS-HMC, ARNS-HMC with its final
online weights, VHMC's z), :class:`GradientNetwork` (NNgHMC),
:class:`~fastsurrogate.WeightedSum` of saved classes (VHMC's V, base +
network), :class:`~fastsurrogate.models.Gaussian` (a Laplace base), and
ARNS-HMC's :class:`~fastsurrogate.surrogates.online.OnlineOutputLayer` (its
Greville or SMW state: loaded, it absorbs further points exactly as the
saved one would).
"""
import numbers

import numpy as np

from ..core._npz import read_npz, write_npz
from ..core._potential import WeightedSum
from ..models._models import Gaussian
from ._mlp import GradientNetwork
from ._network import RandomNetwork
from ._online import GrevilleTrainer, SMWTrainer
from .online import OnlineOutputLayer

__all__ = ["save", "load", "FORMAT", "VERSION"]

FORMAT = "fastsurrogate-surrogate"
VERSION = 1


def _classes():
    return {c.__name__: c for c in (RandomNetwork, GradientNetwork, WeightedSum, Gaussian)}


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


def _decode(node, arrays, classes):
    if "v" in node:
        return node["v"]
    if "a" in node:
        return arrays[node["a"]]
    if "l" in node:
        return [_decode(v, arrays, classes) for v in node["l"]]
    cls = classes.get(node.get("cls"))
    if cls is None:
        raise ValueError(f"unknown surrogate class {node.get('cls')!r} in the file")
    obj = cls(*[_decode(a, arrays, classes) for a in node["args"]])
    if node.get("info") and hasattr(obj, "info"):
        obj.info = dict(node["info"])
    return obj


def _save_layer(layer, path):
    """ARNS-HMC's online output layer: its trainer's full state (Greville or
    SMW matrices and weights) and counters, so that more points can be
    absorbed after loading; no data (a batch re-solve needs the caller's)."""
    tr = layer.trainer
    sc, arr = tr._ckpt_state(True)
    kind = "smw" if layer._smw is not None else "greville"
    head = {"ridge": float(layer.ridge), "block": int(layer.block),
            "resync_every": int(layer.resync_every), "n_resolves": int(layer.n_resolves),
            "since": int(layer._since), "n_seen": int(layer.n_seen), "kind": kind,
            "n_hidden": int(tr.n_hidden), "trainer": sc}
    if kind == "greville":
        head["tol"] = float(tr.tol)
    if getattr(layer, "centre", None) is not None:
        arr = dict(arr, layer_centre=layer.centre)
    write_npz(path, {"format": FORMAT, "version": VERSION,
                     "object": {"cls": "OnlineOutputLayer", "layer": head}}, arr)


def _load_layer(head, arrays):
    layer = OnlineOutputLayer.__new__(OnlineOutputLayer)
    layer.ridge, layer.block = head["ridge"], head["block"]
    layer.resync_every, layer.n_resolves = head["resync_every"], head["n_resolves"]
    layer._since, layer.n_seen = head["since"], head["n_seen"]
    layer.centre = np.array(arrays["layer_centre"]) if "layer_centre" in arrays else None
    if head["kind"] == "smw":
        layer._smw = SMWTrainer(head["n_hidden"], head["block"], head["ridge"])
        layer._greville = None
    else:
        layer._smw = None
        layer._greville = GrevilleTrainer(head["n_hidden"], ridge=0.0, tol=head["tol"])
    layer.trainer._ckpt_restore(head["trainer"], arrays)
    return layer


def save(surrogate, path):
    """Write `surrogate` to `path` (.npz with a JSON header; atomic).

    Parameters
    ----------
    surrogate : RandomNetwork, GradientNetwork, Gaussian, a WeightedSum of them,
        or an OnlineOutputLayer
    path : str or os.PathLike

    Examples
    --------
    >>> import numpy as np, os, tempfile, fastsurrogate as fs
    >>> net = fs.surrogates.RandomNetwork.random(3, 20, seed=0)
    >>> path = os.path.join(tempfile.mkdtemp(), "net.npz")
    >>> fs.surrogates.save(net, path)
    >>> bool(fs.surrogates.load(path).value(np.ones(3)) == net.value(np.ones(3)))
    True
    """
    if type(surrogate).__name__ == "OnlineOutputLayer":
        return _save_layer(surrogate, path)
    arrays = {}
    tree = _encode(surrogate, arrays, _classes())
    if "cls" not in tree:
        raise TypeError(f"cannot save a {type(surrogate).__name__}: not a surrogate")
    write_npz(path, {"format": FORMAT, "version": VERSION, "object": tree}, arrays)


def load(path):
    """The surrogate saved in `path` by :func:`save` (no pickle, no training data).

    Returns
    -------
    Potential
        A RandomNetwork, GradientNetwork, Gaussian or WeightedSum, bitwise
        equal in its values and gradients to the one saved.
    """
    header, arrays = read_npz(path, FORMAT, VERSION)
    if header["object"].get("cls") == "OnlineOutputLayer":
        return _load_layer(header["object"]["layer"], arrays)
    return _decode(header["object"], arrays, _classes())
