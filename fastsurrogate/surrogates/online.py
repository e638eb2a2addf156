"""The online output layer of ARNS-HMC's random network: recursive least
squares (Sherman-Morrison-Woodbury blocks, or Greville's pseudo-inverse
recursion) with a constant feature for the bias, and its batch re-solve."""
import numpy as np

from ..core._potential import TrainingError
from ._online import GrevilleTrainer, SMWTrainer, centred_bias

__all__ = ["OnlineOutputLayer", "with_bias", "centred_rows", "set_output_weights"]


class OnlineOutputLayer:
    """The output layer's online least squares (with a constant feature).

    Ridge > 0: recursive ridge least squares, absorbing each chunk of up to
    ``block`` points in one Sherman-Morrison-Woodbury block update (BLAS 3;
    the same estimator as point-by-point recursion, many times faster).
    Ridge = 0: Greville's pseudo-inverse recursion, point by point.
    A numerical breakdown, or ``resync_every`` points, triggers a batch
    re-solve from every point seen (``data()`` supplies them).

    ``centre`` (s,), optional: the rows H are (h - centre, 1), the hidden
    features h shifted by a fixed centre (ARNS-HMC: the start set's mean
    features; :meth:`rows` builds them).  The features of a random network
    share a large common component, and on uncentred rows the normal
    equations' condition number grows by the features' second moment over
    their variance; centring once, at a point that stays fixed, keeps the
    least squares the same (the bias column absorbs the shift) and
    conditioned like the batch trainer's.

    ARNS-HMC runs the updates in C (``OnlineLayerHook`` on this layer's
    ``trainer``) and calls :meth:`resolve` when the hook pauses; :meth:`absorb`
    is the same update in Python, the reference the hook is tested against.
    """

    def __init__(self, H, y, ridge, block, resync_every, centre=None):
        self.ridge, self.block, self.resync_every = ridge, block, resync_every
        self.centre = None if centre is None else np.array(centre, dtype=float)
        self.n_resolves = 0
        self._since = 0
        if ridge > 0:
            self._smw = SMWTrainer(H.shape[1], block, ridge)
            self._smw.solve_batch(*_blocks(H, y, block))
            self._greville = None
        else:
            self._smw = None
            self._greville = GrevilleTrainer.from_batch(H, y)
        self.n_seen = H.shape[0]

    @property
    def weights(self):
        return self.trainer.weights

    def rows(self, F):
        """The trainer's rows (n, s + 1) for hidden features F (n, s): (F - centre, 1)."""
        return centred_rows(F, self.centre)

    @property
    def trainer(self):
        """The C trainer: an SMWTrainer (ridge > 0) or a GrevilleTrainer."""
        return self._smw if self._smw is not None else self._greville

    def resolve(self, H, y):
        """Replace the state by the batch solution for every point (H, y)."""
        if self._smw is not None:
            self._smw.solve_batch(*_blocks(H, y, self.block))
        else:
            self._greville.resync(H, y)
        self._since = 0
        self.n_resolves += 1

    def absorb(self, H, y, data):
        try:
            if self._smw is not None:
                A, g = _blocks(H, y, self.block)
                for j in range(A.shape[0]):
                    self._smw.update(A[j], g[j])
            else:
                self._greville.update_many(H, y)
            failed = False
        except TrainingError:
            failed = True
        self.n_seen += H.shape[0]
        self._since += H.shape[0]
        if failed or (self.resync_every and self._since >= self.resync_every):
            self.resolve(*data())


def _blocks(H, y, k):
    """(n, s) rows and (n,) targets as (ceil(n/k), k, s) and (., k) blocks, zero-padded
    (a zero row with a zero target adds nothing to the least squares)."""
    n, s = H.shape
    nb = -(-n // k)
    A = np.zeros((nb * k, s))
    g = np.zeros(nb * k)
    A[:n], g[:n] = H, y
    return A.reshape(nb, k, s), g.reshape(nb, k)


def with_bias(H):
    """Feature rows H (n, s) with a constant column appended (the output bias)."""
    return np.hstack([H, np.ones((H.shape[0], 1))])


def centred_rows(F, centre):
    """Layer rows (n, s + 1) for hidden features F (n, s): (F - centre, 1),
    or (F, 1) when ``centre`` is None."""
    F = np.asarray(F, dtype=float)
    return with_bias(F if centre is None else F - centre)


def set_output_weights(net, w, offset, centre=None):
    """Write layer weights w (s + 1,: the last is the bias) into `net`, its
    bias shifted by offset (and by -w[:-1] . centre for rows centred at
    ``centre``, as :class:`OnlineOutputLayer` builds them)."""
    net.output_weights = w[:-1]
    net.out_bias = centred_bias(w, centre, offset)
