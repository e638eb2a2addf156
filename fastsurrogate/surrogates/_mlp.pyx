"""Gradient networks (csrc/fs_mlp.c): the surrogate of NNgHMC.

Li, Holbrook, Shahbaba & Baldi (2019), "Neural network gradient Hamiltonian
Monte Carlo": a one-hidden-layer network trained by backpropagation to
predict grad U directly,

    g(q) = out_scale * (W2 act(W1 x + b1) + b2) + out_shift,
    x    = (q - shift) / scale,

with act in {softplus, tanh, relu}.  The outputs may be split into
contiguous blocks, each with its own hidden layer that sees every input
(the paper's Remark 1), which makes W2 block diagonal.

A GradientNetwork is a Potential whose gradient is g(q).  It has no value:
``value(q)`` (and anything else that asks for U, such as a sampler's
Metropolis test with this network as judge) raises
:class:`fastsurrogate.PotentialError` with ``status == FS_EUNDEFINED``
(``fastsurrogate.surrogates._mlp.FS_EUNDEFINED``), the same error whether the request
came from Python or from C.  Use it as the *drive* potential of a sampler
whose Metropolis test uses the exact U.
"""
import operator

from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

import numpy as np
cimport numpy as cnp

from fastsurrogate.core._common cimport FS_OK, FS_EUNDEFINED as _FS_EUNDEFINED
from fastsurrogate.core._blas cimport blas_table
from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.surrogates._format import read_network, write_surrogate
from fastsurrogate.core._checks import real_array, activation_code

cnp.import_array()

FS_EUNDEFINED = _FS_EUNDEFINED
ROWS = FS_MLP_ROWS

ACTIVATIONS = {"softplus": FS_MLP_SOFTPLUS, "tanh": FS_MLP_TANH, "relu": FS_MLP_RELU}
_NAMES = {v: k for k, v in ACTIVATIONS.items()}


# ---- validation helpers ------------------------------------------------------

def _float_view(name, a, shape):
    """A C-contiguous float64 view or copy of `a` with `shape` (None = any).

    Only the dtype and the shape are checked (not finiteness): NaN or inf in
    training data propagate to the loss."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    want = "(" + ", ".join("n" if k is None else str(k) for k in shape) + ("," if len(shape) == 1 else "") + ")"
    if arr.ndim != len(shape) or any(k is not None and k != m for k, m in zip(shape, arr.shape)):
        raise ValueError(f"{name} must have shape {want}, got {np.shape(a)}")
    return arr


def _activation_code(activation):
    return activation_code(activation, ACTIVATIONS)


def _count(x, name, lowest=1):
    if isinstance(x, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    try:
        val = operator.index(x)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(x).__name__}") from None
    if val < lowest or val > 2**28:
        raise ValueError(f"{name} must be an integer in [{lowest}, 2**28], got {val}")
    return int(val)


def split_blocks(n, blocks):
    """Sizes of contiguous blocks of n outputs.

    ``blocks`` is the number of blocks B (the first ``n % B`` blocks get one
    output more than the others) or a sequence of block sizes summing to n.
    Returns a tuple of ints.

    >>> split_blocks(200, 8)
    (25, 25, 25, 25, 25, 25, 25, 25)
    >>> split_blocks(10, 3)
    (4, 3, 3)
    """
    n = _count(n, "n")
    if isinstance(blocks, (list, tuple, np.ndarray)):
        sizes = tuple(_count(b, "block size") for b in blocks)
        if len(sizes) == 0 or sum(sizes) != n:
            raise ValueError(f"block sizes {sizes} must be non-empty and sum to {n}")
        return sizes
    B = _count(blocks, "blocks")
    if B > n:
        raise ValueError(f"blocks = {B} exceeds the number of outputs {n}")
    base, extra = divmod(n, B)
    return tuple(base + (1 if b < extra else 0) for b in range(B))


def _per_block(n_hidden, B):
    """Hidden units per block: one int for every block, or a sequence of B ints."""
    if isinstance(n_hidden, (list, tuple, np.ndarray)):
        sizes = tuple(_count(h, "n_hidden") for h in n_hidden)
        if len(sizes) != B:
            raise ValueError(f"n_hidden has {len(sizes)} entries; expected one per block ({B})")
        return sizes
    return (_count(n_hidden, "n_hidden"),) * B


def _optional_vec(name, a, n, positive=False):
    if a is None:
        return None
    arr = real_array(name, a, 1)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {arr.shape}")
    if positive:
        if np.any(arr <= 0):
            raise ValueError(f"{name} must be positive")
        with np.errstate(over="ignore", divide="ignore"):
            if not np.all(np.isfinite(1.0 / arr)):
                raise ValueError(f"{name} is too small (1 / {name} overflows)")
    arr.flags.writeable = False
    return arr


cdef inline const double *_cptr(cnp.ndarray a):
    return <const double *>cnp.PyArray_DATA(a) if a is not None else NULL


cdef class GradientNetwork(Potential):
    """A gradient network g(q) ~ grad U(q) (NNgHMC) as a Potential.

    Parameters
    ----------
    W1 : array_like, shape (n_hidden, dim)
        Input weights of every hidden unit, the units of block 0 first.
    b1 : array_like, shape (n_hidden,)
        Hidden biases.
    W2 : array_like, shape (dim, n_hidden), or a sequence of B arrays
        Output weights.  One 2-D array is a plain network (one block).  A
        sequence of 2-D arrays of shapes (m_b, h_b) defines B blocks: block b
        maps its h_b hidden units (rows ``sum(h[:b]) .. sum(h[:b+1])`` of W1)
        to its m_b outputs (``sum(m[:b]) .. sum(m[:b+1])``); sum(h_b) must be
        n_hidden and sum(m_b) must be dim.
    b2 : array_like, shape (dim,)
        Output biases.
    activation : {"softplus", "tanh", "relu"}
    shift, scale : array_like, shape (dim,), optional
        Input standardisation x = (q - shift) / scale (scale > 0).
    out_shift, out_scale : array_like, shape (dim,), optional
        Output scaling g = out_scale * raw + out_shift (out_scale > 0).

    Notes
    -----
    The weights act in standardised coordinates; the two affine maps make
    ``grad(q)`` the prediction of grad U at q in the original coordinates.
    The network has as many outputs as inputs (it predicts a gradient).

    ``grad(q)``, ``gradient_batch(Q)`` and the C samplers (through the
    ``fs_potential`` struct) evaluate it without the GIL; concurrent
    evaluations from several threads are safe (``thread_safe`` is True),
    but :meth:`set_params` during an evaluation is not.  ``value(q)`` raises
    :class:`fastsurrogate.PotentialError` (status ``FS_EUNDEFINED``): the
    network predicts the gradient only.

    Parameter vector (:meth:`get_params`, :meth:`set_params`,
    :meth:`loss_and_grad`): ``theta = [W1.ravel(), b1, W2_0.ravel(), ...,
    W2_{B-1}.ravel(), b2]`` (row-major), of length :attr:`n_params`.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.surrogates import GradientNetwork
    >>> net = GradientNetwork.random(dim=4, n_hidden=16, seed=0)
    >>> net.grad(np.zeros(4)).shape
    (4,)
    >>> Q = np.random.default_rng(1).standard_normal((100, 4))
    >>> loss, g = net.loss_and_grad(net.get_params(), Q, Q)   # fit grad U = q
    >>> g.shape == (net.n_params,)
    True
    """

    def __cinit__(self, *args, **kwargs):
        memset(&self.net, 0, sizeof(fs_mlp))
        self._activation = None
        self.info = {}

    def __dealloc__(self):
        fs_mlp_free(&self.net)

    def __init__(self, W1, b1, W2, b2, activation="softplus", shift=None, scale=None,
                 out_shift=None, out_scale=None):
        cdef int status, code
        cdef cnp.ndarray theta, bh, bo
        if self.net.pool.mem != NULL:
            raise TypeError("GradientNetwork is already initialised")
        name, code = _activation_code(activation)
        W1 = real_array("W1", W1, 2)
        H, dim = W1.shape
        if H < 1 or dim < 1:
            raise ValueError(f"W1 must have shape (n_hidden, dim) with both >= 1, got {W1.shape}")
        if H > 2**28 or dim > 2**28:
            raise ValueError(f"W1 is too large: {W1.shape}")
        b1 = real_array("b1", b1, 1)
        if b1.shape != (H,):
            raise ValueError(f"b1 must have shape ({H},) to match W1, got {b1.shape}")
        if W2 is None:
            raise TypeError("W2 must be an array or a sequence of arrays, got None")
        if isinstance(W2, (list, tuple)) and len(W2) > 0 and all(np.ndim(w) == 2 for w in W2):
            blocks = [real_array(f"W2[{b}]", w, 2) for b, w in enumerate(W2)]
        else:
            blocks = [real_array("W2", W2, 2)]
        for b, w in enumerate(blocks):
            if w.shape[0] < 1 or w.shape[1] < 1:
                raise ValueError(f"W2 block {b} must have shape (m_b, h_b) with both >= 1, got {w.shape}")
        hsum = sum(w.shape[1] for w in blocks)
        msum = sum(w.shape[0] for w in blocks)
        if hsum != H:
            raise ValueError(f"the W2 blocks have {hsum} hidden columns in all; W1 has {H} rows")
        if msum != dim:
            raise ValueError(f"the W2 blocks have {msum} output rows in all; a gradient network "
                             f"needs one output per input (dim = {dim})")
        b2 = real_array("b2", b2, 1)
        if b2.shape != (dim,):
            raise ValueError(f"b2 must have shape ({dim},), got {b2.shape}")
        shift = _optional_vec("shift", shift, dim)
        scale = _optional_vec("scale", scale, dim, positive=True)
        out_shift = _optional_vec("out_shift", out_shift, dim)
        out_scale = _optional_vec("out_scale", out_scale, dim, positive=True)
        theta = np.concatenate([W1.ravel(), b1] + [w.ravel() for w in blocks] + [b2])
        bh = np.array([w.shape[1] for w in blocks], dtype=np.intc)
        bo = np.array([w.shape[0] for w in blocks], dtype=np.intc)
        self._shift, self._scale = shift, scale
        self._out_shift, self._out_scale = out_shift, out_scale
        self._activation = name
        status = fs_mlp_init(&self.net, blas_table(), <int>dim, <int>len(blocks),
                             <const int *>cnp.PyArray_DATA(bh), <const int *>cnp.PyArray_DATA(bo),
                             code, <const double *>cnp.PyArray_DATA(theta),
                             _cptr(shift), _cptr(scale), _cptr(out_shift), _cptr(out_scale))
        if status != FS_OK:
            raise_for_status(status, "GradientNetwork")
        self.pot.dim = <int>dim
        self.pot.state = <void *>&self.net
        self.pot.eval = fs_mlp_potential_eval
        self.thread_safe = True

    @classmethod
    def random(cls, dim, n_hidden=100, blocks=1, activation="softplus", seed=None,
               shift=None, scale=None, out_shift=None, out_scale=None):
        """A network with Glorot-uniform weights and zero biases.

        Parameters
        ----------
        dim : int
            Inputs = outputs.
        n_hidden : int or sequence of int
            Hidden units of each block (one int: the same for every block).
        blocks : int or sequence of int
            Number of output blocks (split as evenly as possible, see
            :func:`split_blocks`) or their sizes.
        activation : {"softplus", "tanh", "relu"}
        seed : None, int or numpy.random.Generator
        shift, scale, out_shift, out_scale : array_like, shape (dim,), optional

        Notes
        -----
        W1 rows of a block with h_b units ~ U(-a, a), a = sqrt(6 / (dim + h_b));
        W2_b ~ U(-a, a), a = sqrt(6 / (h_b + m_b)); drawn block by block in
        that order.
        """
        dim = _count(dim, "dim")
        sizes = split_blocks(dim, blocks)
        hidden = _per_block(n_hidden, len(sizes))
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        W1, W2 = [], []
        for h, m in zip(hidden, sizes):
            a1 = np.sqrt(6.0 / (dim + h))
            W1.append(rng.uniform(-a1, a1, (h, dim)))
            a2 = np.sqrt(6.0 / (h + m))
            W2.append(rng.uniform(-a2, a2, (m, h)))
        H = sum(hidden)
        return cls(np.vstack(W1), np.zeros(H), W2, np.zeros(dim), activation,
                   shift, scale, out_shift, out_scale)

    # -- persistence (fastsurrogate.surrogates._format) -------------------------
    def save(self, path):
        """Write this network to `path`: a versioned .npz with a JSON header, no
        pickle, no training data; :meth:`load` gives it back bitwise."""
        write_surrogate(self, path, {"GradientNetwork": GradientNetwork})

    @staticmethod
    def load(path):
        """The network saved by :meth:`save` (values and gradients bitwise equal)."""
        return read_network(path, GradientNetwork)

    # -- shape ---------------------------------------------------------------
    @property
    def n_hidden(self):
        """Hidden units of all blocks together."""
        return self.net.n_hidden

    @property
    def n_out(self):
        """Number of outputs (equal to dim)."""
        return self.net.n_out

    @property
    def n_blocks(self):
        """Number of output blocks B (1 for a plain network)."""
        return self.net.n_blocks

    @property
    def block_hidden(self):
        """Hidden units per block, a tuple of B ints."""
        return tuple(self.net.block_hidden[b] for b in range(self.net.n_blocks))

    @property
    def block_out(self):
        """Outputs per block, a tuple of B ints."""
        return tuple(self.net.block_out[b] for b in range(self.net.n_blocks))

    @property
    def n_params(self):
        """Length of the parameter vector theta."""
        return self.net.n_params

    @property
    def activation(self):
        """"softplus", "tanh" or "relu"."""
        return self._activation

    # -- parameters ------------------------------------------------------------
    def get_params(self):
        """The packed parameters theta, a new array of shape (n_params,)."""
        self._check_init()
        cdef cnp.ndarray out = np.empty(self.net.n_params)
        memcpy(cnp.PyArray_DATA(out), self.net.theta, self.net.n_params * sizeof(double))
        return out

    def set_params(self, theta):
        """Replace every weight and bias by the packed vector theta (n_params,).

        Not safe while another thread evaluates this network."""
        self._check_init()
        t = real_array("theta", theta, 1)
        if t.shape[0] != self.net.n_params:
            raise ValueError(f"theta must have shape ({self.net.n_params},), got {t.shape}")
        self.check_status(fs_mlp_set_params(&self.net, _cptr(t)))

    def _split(self):
        th = self.get_params()
        H, d, m = self.net.n_hidden, self.net.n_in, self.net.n_out
        o = H * d
        W1 = th[:o].reshape(H, d)
        b1 = th[o:o + H]
        o += H
        W2 = []
        for h, mb in zip(self.block_hidden, self.block_out):
            W2.append(th[o:o + mb * h].reshape(mb, h))
            o += mb * h
        return W1, b1, W2, th[o:o + m]

    @property
    def W1(self):
        """Input weights (n_hidden, dim), a copy."""
        return self._split()[0]

    @property
    def b1(self):
        """Hidden biases (n_hidden,), a copy."""
        return self._split()[1]

    @property
    def W2(self):
        """Output weights: a list of B arrays (m_b, h_b), copies."""
        return self._split()[2]

    @property
    def W2_dense(self):
        """Output weights as one (dim, n_hidden) array (zero outside the blocks)."""
        out = np.zeros((self.net.n_out, self.net.n_hidden))
        r = c = 0
        for w in self._split()[2]:
            out[r:r + w.shape[0], c:c + w.shape[1]] = w
            r += w.shape[0]
            c += w.shape[1]
        return out

    @property
    def b2(self):
        """Output biases (dim,), a copy."""
        return self._split()[3]

    @property
    def shift(self):
        """Input standardisation shift (dim,) or None."""
        return self._shift

    @property
    def scale(self):
        """Input standardisation scale (dim,) or None."""
        return self._scale

    @property
    def out_shift(self):
        """Output shift (dim,) or None."""
        return self._out_shift

    @property
    def out_scale(self):
        """Output scale (dim,) or None."""
        return self._out_scale

    # -- pickling ----------------------------------------------------------------
    def __reduce__(self):
        W1, b1, W2, b2 = self._split()
        return (GradientNetwork, (W1, b1, W2, b2, self._activation, self._shift,
                                  self._scale, self._out_shift, self._out_scale),
                {"info": dict(self.info)})

    def __setstate__(self, state):
        self.info = dict(state.get("info", {}))

    def __repr__(self):
        if self._activation is None:
            return "<GradientNetwork (not initialised)>"
        blocks = "" if self.net.n_blocks == 1 else f" blocks={self.net.n_blocks}"
        std = "" if self._shift is None and self._scale is None else ", standardised"
        return (f"<GradientNetwork dim={self.net.n_in} n_hidden={self.net.n_hidden}{blocks} "
                f"activation={self._activation!r}{std}>")

    # -- helpers -------------------------------------------------------------------
    def _check_init(self):
        if self.pot.eval == NULL:
            raise TypeError("GradientNetwork is not initialised")

    cdef object _as_points(self, Q, str name, int width):
        self._check_init()
        return _float_view(name, Q, (None, width))

    def _set_rows(self, rows):
        """Test and benchmark hook: points per row block of the batched kernels."""
        self._check_init()
        self.net.rows = _count(rows, "rows")

    # -- batches -------------------------------------------------------------------
    def gradient_batch(self, Q):
        """Predicted grad U at each row of Q (n, dim) -> (n, dim), by dgemm.

        Agrees with ``grad`` row by row up to rounding."""
        cdef cnp.ndarray Qa = self._as_points(Q, "Q", self.net.n_in)
        cdef size_t n = Qa.shape[0]
        cdef cnp.ndarray G = np.empty((n, self.net.n_out))
        cdef double *work
        cdef int status
        if n == 0:
            return G
        work = <double *>malloc(fs_mlp_batch_workspace_size(&self.net, n) * sizeof(double))
        if work == NULL:
            raise MemoryError("GradientNetwork.gradient_batch: workspace")
        try:
            with nogil:
                status = fs_mlp_forward_batch(&self.net, n, <const double *>cnp.PyArray_DATA(Qa),
                                              <double *>cnp.PyArray_DATA(G), work)
        finally:
            free(work)
        self.check_status(status)
        return G

    def loss_and_grad(self, theta, X, Y, weight_decay=0.0, standardized=False, bint grad=True):
        """Mean squared error of the standardised outputs and its gradient in theta.

        ``loss = 1/(2n) sum_p ||raw_theta(x_p) - t_p||^2
        + weight_decay/2 (||W1||^2 + ||W2||^2)`` (biases not penalised), where
        ``raw_theta`` is the network with parameters ``theta`` (not
        necessarily its own) in standardised coordinates, x_p and t_p the
        standardised inputs and targets.

        Parameters
        ----------
        theta : array_like (n_params,)
        X : array_like (n, dim)
            Inputs: positions q (or standardised x with ``standardized=True``).
        Y : array_like (n, dim)
            Targets: grad U at X (or (grad U - out_shift) / out_scale with
            ``standardized=True``).
        weight_decay : float >= 0
        standardized : bool
            Whether X and Y are already standardised (a training loop
            standardises once and passes True).
        grad : bool
            Compute the gradient (False: the forward pass only, gradient None).

        Returns
        -------
        loss : float, gradient : ndarray (n_params,) or None

        Shapes and dtypes are checked; NaN or inf in the data propagate.
        """
        self._check_init()
        cdef cnp.ndarray th = _float_view("theta", theta, (self.net.n_params,))
        cdef cnp.ndarray Xa = _float_view("X", X, (None, self.net.n_in))
        cdef cnp.ndarray Ya = _float_view("Y", Y, (None, self.net.n_out))
        cdef size_t n = Xa.shape[0]
        cdef double wd, loss = 0.0
        cdef cnp.ndarray g = None
        cdef double *gp = NULL
        cdef double *work
        cdef int status, std = 0 if standardized else 1
        if Ya.shape[0] != n:
            raise ValueError(f"X and Y must have the same number of rows, got {n} and {Ya.shape[0]}")
        if n == 0:
            raise ValueError("X and Y must have at least one row")
        try:
            wd = float(weight_decay)
        except (TypeError, ValueError):
            raise TypeError(f"weight_decay must be a real number, got {type(weight_decay).__name__}") from None
        if not (wd >= 0.0 and np.isfinite(wd)):
            raise ValueError(f"weight_decay must be finite and >= 0, got {weight_decay!r}")
        if grad:
            g = np.empty(self.net.n_params)
            gp = <double *>cnp.PyArray_DATA(g)
        work = <double *>malloc(fs_mlp_batch_workspace_size(&self.net, n) * sizeof(double))
        if work == NULL:
            raise MemoryError("GradientNetwork.loss_and_grad: workspace")
        try:
            with nogil:
                status = fs_mlp_loss_grad(&self.net, <const double *>cnp.PyArray_DATA(th), n,
                                          <const double *>cnp.PyArray_DATA(Xa),
                                          <const double *>cnp.PyArray_DATA(Ya), wd, std,
                                          &loss, gp, work)
        finally:
            free(work)
        self.check_status(status)
        return loss, g

    def loss(self, X, Y, weight_decay=0.0, standardized=False):
        """``loss_and_grad`` at the network's own parameters, the loss only."""
        return self.loss_and_grad(self.get_params(), X, Y, weight_decay, standardized,
                                  grad=False)[0]


# -- test hooks ------------------------------------------------------------------
def _activation(activation, t):
    """(act(t), act'(t)) by the C kernels."""
    name, code = _activation_code(activation)
    cdef cnp.ndarray ta = np.ascontiguousarray(t, dtype=np.float64).ravel()
    cdef cnp.ndarray a = np.empty_like(ta), da = np.empty_like(ta)
    cdef size_t n = ta.shape[0]
    cdef int c = code
    cdef int status
    with nogil:
        status = fs_mlp_activation(c, n, <const double *>cnp.PyArray_DATA(ta),
                                   <double *>cnp.PyArray_DATA(a), <double *>cnp.PyArray_DATA(da))
    raise_for_status(status, "_activation")
    return a.reshape(np.shape(t)), da.reshape(np.shape(t))
