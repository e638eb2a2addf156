"""save / load for trained surrogates: a versioned .npz, no pickle (the
format: :mod:`fastsurrogate.surrogates._format`).

Saved classes: :class:`RandomNetwork` (RNS-HMC, ARNS-HMC with its final
online weights, VHMC's z), :class:`GradientNetwork` (NNgHMC),
:class:`~fastsurrogate.WeightedSum` of saved classes (VHMC's V, base +
network), :class:`~fastsurrogate.models.Gaussian` (a Laplace base), and
ARNS-HMC's :class:`~fastsurrogate.surrogates.online.OnlineOutputLayer` (its
Greville or SMW state: loaded, it absorbs further points exactly as the
saved one would).
"""
import numpy as np

from ..core._npz import write_npz
from ..core._potential import WeightedSum
from ..models._models import Gaussian
from ._format import FORMAT, VERSION, decode, read_surrogate, write_surrogate
from ._mlp import GradientNetwork
from ._network import RandomNetwork
from ._online import GrevilleTrainer, SMWTrainer
from .online import OnlineOutputLayer

__all__ = ["save", "load", "FORMAT", "VERSION"]


def _classes():
    return {c.__name__: c for c in (RandomNetwork, GradientNetwork, WeightedSum, Gaussian)}


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
    write_surrogate(surrogate, path, _classes())


def load(path):
    """The surrogate saved in `path` by :func:`save` (no pickle, no training data).

    Returns
    -------
    Potential
        A RandomNetwork, GradientNetwork, Gaussian or WeightedSum, bitwise
        equal in its values and gradients to the one saved.
    """
    tree, arrays = read_surrogate(path)
    if tree.get("cls") == "OnlineOutputLayer":
        return _load_layer(tree["layer"], arrays)
    return decode(tree, arrays, _classes())
