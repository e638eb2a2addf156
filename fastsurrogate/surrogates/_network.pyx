"""Random-basis networks (csrc/fs_network.c): the surrogate of RNS-HMC.

Zhang, Shahbaba & Zhao (2017), eq. 12: a one-hidden-layer network whose
hidden weights are drawn at random and kept fixed,

    z(q) = sum_i v_i a_i(x) + b,      x = (q - shift) / scale,

with additive nodes a_i(x) = a(w_i . x + d_i), a in {softplus, sigmoid, tanh},
or RBF nodes a_i(x) = exp(-||x - c_i||^2 / (2 l_i^2)).  Only the output
weights v (and b) are trained, by least squares on the hidden-layer features
(ELM), by Greville's online pseudo-inverse (ARNS-HMC), or by gradient matching
(VHMC).  A RandomNetwork is a Potential: U(q) = z(q).
"""

from libc.stdlib cimport malloc, free

import numpy as np
cimport numpy as cnp

from fastsurrogate.core._common cimport FS_OK
from fastsurrogate.core._potential cimport Potential
from fastsurrogate.core._potential import raise_for_status
from fastsurrogate.surrogates._format import read_network, write_surrogate
from fastsurrogate.core._checks import real_array, activation_code

cnp.import_array()

ACTIVATIONS = {"softplus": FS_NETWORK_SOFTPLUS, "sigmoid": FS_NETWORK_SIGMOID,
               "tanh": FS_NETWORK_TANH, "rbf": FS_NETWORK_RBF}
_ACTIVATION_NAMES = {v: k for k, v in ACTIVATIONS.items()}


def _activation_code(activation):
    return activation_code(activation, ACTIVATIONS)


cdef inline const double *_cptr(cnp.ndarray a):
    return <const double *>cnp.PyArray_DATA(a) if a is not None else NULL


cdef class RandomNetwork(Potential):
    """A random-basis network z(q) (RNS-HMC paper, eq. 12) as a Potential.

    Parameters
    ----------
    W : array_like, shape (n_hidden, dim)
        Hidden weights w_i (additive nodes) or centres c_i (RBF nodes), in
        standardised coordinates x.
    bias : array_like, shape (n_hidden,), or None
        Hidden biases d_i of additive nodes (None means zeros); must be None
        for RBF nodes.
    v : array_like, shape (n_hidden,)
        Output weights.
    out_bias : float
        Output bias b.
    activation : {"softplus", "sigmoid", "tanh", "rbf"}
    width : float or array_like, shape (n_hidden,), optional
        RBF widths l_i > 0 (required for RBF nodes, None otherwise).
    shift, scale : array_like, shape (dim,), optional
        Standardisation x = (q - shift) / scale (computed as
        (q - shift) * (1 / scale)); scale must be positive.

    Notes
    -----
    The network evaluates U(q) = z(q) and its derivatives in C; every method
    releases the GIL, and concurrent evaluations from several threads are
    safe (``thread_safe`` is True).  Assigning :attr:`output_weights` or
    :attr:`out_bias` while another thread evaluates the network is not.

    Examples
    --------
    >>> import numpy as np
    >>> from fastsurrogate.surrogates._network import RandomNetwork
    >>> net = RandomNetwork.random(dim=2, n_hidden=50, seed=0)
    >>> Q = np.random.default_rng(1).standard_normal((200, 2))
    >>> H = net.features(Q)                           # (200, 50)
    >>> y = 0.5 * (Q ** 2).sum(axis=1)                # the potential to fit
    >>> A = np.column_stack([H, np.ones(len(Q))])
    >>> coef = np.linalg.lstsq(A, y, rcond=None)[0]
    >>> net.output_weights, net.out_bias = coef[:-1], coef[-1]
    >>> g = net.grad(np.zeros(2))                     # shape (2,)
    """

    def __cinit__(self, *args, **kwargs):
        self.net.pool.mem = NULL
        self._activation = None
        self.info = {}

    def __dealloc__(self):
        fs_network_free(&self.net)

    def __init__(self, W, bias, v, out_bias=0.0, activation="softplus", width=None,
                 shift=None, scale=None):
        cdef int status, code
        if self.net.pool.mem != NULL:
            raise TypeError("RandomNetwork is already initialised")
        name, code = _activation_code(activation)
        W = real_array("W", W, 2)
        n_hidden, dim = W.shape
        if n_hidden < 1 or dim < 1:
            raise ValueError(f"W must have shape (n_hidden, dim) with both >= 1, got {W.shape}")
        if n_hidden > 2**31 - 1 or dim > 2**31 - 1:
            raise ValueError("W is too large")
        v = real_array("v", v, 1)
        if v.shape != (n_hidden,):
            raise ValueError(f"v must have shape ({n_hidden},) to match W, got {v.shape}")
        if code == FS_NETWORK_RBF:
            if bias is not None:
                raise ValueError("RBF nodes have no bias; pass bias=None")
            if width is None:
                raise ValueError("RBF nodes need width (a positive float or shape (n_hidden,))")
            width = real_array("width", width)
            if width.ndim == 0:
                width = np.full(n_hidden, float(width))
            if width.shape != (n_hidden,):
                raise ValueError(f"width must be a float or have shape ({n_hidden},), got {width.shape}")
            if np.any(width <= 0):
                raise ValueError("width must be positive")
        else:
            if width is not None:
                raise ValueError(f"width applies to RBF nodes only, not {name}")
            bias = np.zeros(n_hidden) if bias is None else real_array("bias", bias, 1)
            if bias.shape != (n_hidden,):
                raise ValueError(f"bias must have shape ({n_hidden},) to match W, got {bias.shape}")
        if shift is not None:
            shift = real_array("shift", shift, 1)
            if shift.shape != (dim,):
                raise ValueError(f"shift must have shape ({dim},), got {shift.shape}")
        inv_scale = None
        if scale is not None:
            scale = real_array("scale", scale, 1)
            if scale.shape != (dim,):
                raise ValueError(f"scale must have shape ({dim},), got {scale.shape}")
            if np.any(scale <= 0):
                raise ValueError("scale must be positive")
            with np.errstate(over="ignore"):
                inv_scale = 1.0 / scale
            if not np.all(np.isfinite(inv_scale)):
                raise ValueError("scale is too small (1 / scale overflows)")
        out_bias = float(out_bias)
        if not np.isfinite(out_bias):
            raise ValueError("out_bias must be finite")
        for a in (W, bias, width, shift, scale, inv_scale):
            if a is not None:
                a.flags.writeable = False
        self._W, self._bias, self._width, self._v = W, bias, width, v
        self._shift, self._scale, self._inv_scale = shift, scale, inv_scale
        self._activation = name
        status = fs_network_init(&self.net, <int>dim, <int>n_hidden, code, _cptr(W),
                                 _cptr(bias), _cptr(width), _cptr(v), out_bias,
                                 _cptr(shift), _cptr(inv_scale))
        if status != FS_OK:
            raise_for_status(status, "RandomNetwork")
        self.pot.dim = <int>dim
        self.pot.state = <void *>&self.net
        self.pot.eval = fs_network_potential_eval
        self.thread_safe = True

    @classmethod
    def random(cls, dim, n_hidden, activation="softplus", seed=None, shift=None,
               scale=None, centres=None, rbf_scale=1.0):
        """A network with the RNS-HMC paper's random hidden layer and v = 0, b = 0.

        Additive nodes: w_i ~ N(0, I / dim) (rows of W, drawn first), then
        d_i ~ N(0, 1).  RBF nodes: centres c_i are ``n_hidden`` rows of
        ``centres`` (points in q coordinates, e.g. the training inputs; a random
        subset without replacement when there are more rows, all rows in order
        when there are exactly n_hidden), standardised with shift/scale, or
        c_i ~ N(0, I) when ``centres`` is None; the widths are all
        ``rbf_scale * sqrt(dim)`` (the typical distance between two
        standardised points is sqrt(2 dim)).

        Parameters
        ----------
        dim, n_hidden : int
        activation : {"softplus", "sigmoid", "tanh", "rbf"}
        seed : None, int or numpy.random.Generator
        shift, scale : array_like, shape (dim,), optional
            Standardisation of q (e.g. the mean and sd of the training inputs).
        centres : array_like, shape (m, dim), m >= n_hidden, optional
        rbf_scale : float
        """
        name, code = _activation_code(activation)
        for label, n in (("dim", dim), ("n_hidden", n_hidden)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
                raise ValueError(f"{label} must be a positive integer, got {n!r}")
        dim, n_hidden = int(dim), int(n_hidden)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        v = np.zeros(n_hidden)
        if code != FS_NETWORK_RBF:
            if centres is not None:
                raise ValueError("centres apply to RBF nodes only")
            W = rng.standard_normal((n_hidden, dim)) / np.sqrt(dim)
            d = rng.standard_normal(n_hidden)
            return cls(W, d, v, 0.0, name, None, shift, scale)
        rbf_scale = float(rbf_scale)
        if not (rbf_scale > 0 and np.isfinite(rbf_scale)):
            raise ValueError(f"rbf_scale must be positive and finite, got {rbf_scale}")
        if centres is None:
            C = rng.standard_normal((n_hidden, dim))
        else:
            C = real_array("centres", centres, 2)
            if C.shape[1] != dim:
                raise ValueError(f"centres must have {dim} columns, got shape {C.shape}")
            if C.shape[0] < n_hidden:
                raise ValueError(f"centres has {C.shape[0]} rows; need at least n_hidden = {n_hidden}")
            if C.shape[0] > n_hidden:
                C = C[np.sort(rng.choice(C.shape[0], n_hidden, replace=False))]
            if shift is not None:
                C = C - real_array("shift", shift, 1)
            if scale is not None:
                C = C / real_array("scale", scale, 1)
        width = np.full(n_hidden, rbf_scale * np.sqrt(dim))
        return cls(C, None, v, 0.0, name, width, shift, scale)

    # -- persistence (fastsurrogate.surrogates._format) -------------------------
    def save(self, path):
        """Write this network to `path`: a versioned .npz with a JSON header, no
        pickle, no training data; :meth:`load` gives it back bitwise."""
        write_surrogate(self, path, {"RandomNetwork": RandomNetwork})

    @staticmethod
    def load(path):
        """The network saved by :meth:`save` (values and gradients bitwise equal)."""
        return read_network(path, RandomNetwork)

    # -- properties ----------------------------------------------------------
    @property
    def n_hidden(self):
        """Number of hidden units s."""
        return self.net.n_hidden

    @property
    def activation(self):
        """"softplus", "sigmoid", "tanh" or "rbf"."""
        return self._activation

    @property
    def W(self):
        """Hidden weights or RBF centres, read-only (n_hidden, dim)."""
        return self._W

    @property
    def bias(self):
        """Hidden biases, read-only (n_hidden,); None for RBF nodes."""
        return self._bias

    @property
    def width(self):
        """RBF widths, read-only (n_hidden,); None for additive nodes."""
        return self._width

    @property
    def shift(self):
        """Standardisation shift (dim,) or None."""
        return self._shift

    @property
    def scale(self):
        """Standardisation scale (dim,) or None."""
        return self._scale

    @property
    def output_weights(self):
        """Output weights v, shape (n_hidden,) (a copy; assign to update in place)."""
        return self._v.copy()

    @output_weights.setter
    def output_weights(self, value):
        arr = real_array("output_weights", value, 1)
        if arr.shape != (self.net.n_hidden,):
            raise ValueError(f"output_weights must have shape ({self.net.n_hidden},), got {arr.shape}")
        np.copyto(self._v, arr)

    @property
    def out_bias(self):
        """Output bias b (float)."""
        return self.net.out_bias

    @out_bias.setter
    def out_bias(self, value):
        b = float(value)
        if not np.isfinite(b):
            raise ValueError("out_bias must be finite")
        self.net.out_bias = b

    def __reduce__(self):
        return (RandomNetwork, (self._W, self._bias, self._v.copy(), self.net.out_bias,
                                self._activation, self._width, self._shift, self._scale),
                {"info": dict(self.info)})

    def __setstate__(self, state):
        self.info = dict(state.get("info", {}))

    def __repr__(self):
        std = "" if self._shift is None and self._scale is None else ", standardised"
        return (f"<RandomNetwork dim={self.net.dim} n_hidden={self.net.n_hidden} "
                f"activation={self._activation!r}{std}>")

    # -- helpers -------------------------------------------------------------
    cdef object _as_points(self, Q, str name):
        if self.pot.eval == NULL:
            raise TypeError("RandomNetwork is not initialised")
        arr = np.asarray(Q)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != self.net.dim:
            raise ValueError(f"{name} must have shape (n, {self.net.dim}), got {np.shape(Q)}")
        return arr

    cdef object _as_vec(self, a, str name):
        arr = np.asarray(a)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float64)
        if arr.shape != (self.net.dim,):
            raise ValueError(f"{name} must have shape ({self.net.dim},), got {np.shape(a)}")
        return arr

    # -- derivatives ---------------------------------------------------------
    def hessian(self, q):
        """Hessian of z at q, shape (dim, dim) (exactly symmetric)."""
        cdef cnp.ndarray qa = self._as_q(q)
        cdef int d = self.net.dim
        cdef cnp.ndarray H = np.empty((d, d))
        cdef int status
        with nogil:
            status = fs_network_hessian(&self.net, <const double *>cnp.PyArray_DATA(qa),
                                        <double *>cnp.PyArray_DATA(H), NULL)
        self.check_status(status)
        return H

    def hessian_vector(self, q, v):
        """Hessian of z at q times v, shape (dim,), in O(n_hidden dim) without
        forming the Hessian (additive activations; TypeError for RBF units).

        Example: ``net.hessian_vector(q, v)`` equals ``net.hessian(q) @ v``
        to rounding.
        """
        cdef cnp.ndarray qa = self._as_q(q)
        cdef cnp.ndarray va = np.ascontiguousarray(
            real_array("v", v, shape=(self.net.dim,), copy=False, allow_nonfinite=True))
        cdef cnp.ndarray out = np.empty(self.net.dim)
        cdef int status
        if self.net.activation == FS_NETWORK_RBF:
            raise TypeError("hessian_vector needs an additive activation, not rbf")
        with nogil:
            status = fs_network_hessian_vector(&self.net, <const double *>cnp.PyArray_DATA(qa),
                                               <const double *>cnp.PyArray_DATA(va),
                                               <double *>cnp.PyArray_DATA(out), NULL)
        self.check_status(status)
        return out

    def hessian_diag(self, q):
        """Diagonal of the Hessian of z at q, shape (dim,)."""
        cdef cnp.ndarray qa = self._as_q(q)
        cdef cnp.ndarray h = np.empty(self.net.dim)
        cdef int status
        with nogil:
            status = fs_network_hessian_diag(&self.net, <const double *>cnp.PyArray_DATA(qa),
                                             <double *>cnp.PyArray_DATA(h), NULL)
        self.check_status(status)
        return h

    def third_contractions(self, q, A, u):
        """Third-derivative contractions of the metric G = hessian(z) at q.

        Returns ``(out_tr, out_quad)``, each of shape (dim,) (or None when
        ``A``, respectively ``u``, is None):
        ``out_tr[k] = tr(A dG/dq_k)`` with A symmetric (dim, dim), and
        ``out_quad[k] = u^T (dG/dq_k) u`` with u of shape (dim,).
        These are the terms of the generalized leapfrog of RMHMC with
        G^{-1} for A (the log-determinant term) and G^{-1} p for u.
        """
        cdef cnp.ndarray qa = self._as_q(q)
        cdef int d = self.net.dim
        cdef cnp.ndarray Aa = None, ua = None, tr = None, quad = None
        cdef const double *Ap = NULL
        cdef const double *up = NULL
        cdef double *trp = NULL
        cdef double *quadp = NULL
        cdef int status
        if A is not None:
            Aa = np.asarray(A)
            if Aa.dtype.kind not in "biuf":
                raise TypeError(f"A must be a real numeric array, got dtype {Aa.dtype}")
            Aa = np.ascontiguousarray(Aa, dtype=np.float64)
            if (<object>Aa).shape != (d, d):
                raise ValueError(f"A must have shape ({d}, {d}), got {np.shape(A)}")
            tr = np.empty(d)
            Ap = <const double *>cnp.PyArray_DATA(Aa)
            trp = <double *>cnp.PyArray_DATA(tr)
        if u is not None:
            ua = self._as_vec(u, "u")
            quad = np.empty(d)
            up = <const double *>cnp.PyArray_DATA(ua)
            quadp = <double *>cnp.PyArray_DATA(quad)
        with nogil:
            status = fs_network_third_contractions(
                &self.net, <const double *>cnp.PyArray_DATA(qa), Ap, up, trp, quadp, NULL)
        self.check_status(status)
        return tr, quad

    def third_diag(self, q, a):
        """``out[k] = sum_j a[j] d(hessian_jj)/dq_k``, shape (dim,).

        The contraction for a diagonal metric G = diag(hessian_diag(q)):
        ``tr(G^{-1} dG/dq_k)`` with ``a = 1 / hessian_diag(q)``, and
        ``p^T G^{-1} (dG/dq_k) G^{-1} p`` with ``a = (p / hessian_diag(q))**2``.
        """
        cdef cnp.ndarray qa = self._as_q(q)
        cdef cnp.ndarray aa = self._as_vec(a, "a")
        cdef cnp.ndarray out = np.empty(self.net.dim)
        cdef int status
        with nogil:
            status = fs_network_third_diag(&self.net, <const double *>cnp.PyArray_DATA(qa),
                                           <const double *>cnp.PyArray_DATA(aa),
                                           <double *>cnp.PyArray_DATA(out), NULL)
        self.check_status(status)
        return out

    # -- features for training ----------------------------------------------
    def features(self, Q):
        """Hidden-layer features H[n, i] = a_i(x_n) of the rows of Q (n, dim) -> (n, n_hidden).

        z(Q[n]) = H[n] @ output_weights + out_bias: H is the design matrix of
        the least-squares fit of the output weights.
        """
        cdef cnp.ndarray Qa = self._as_points(Q, "Q")
        cdef size_t n = Qa.shape[0]
        cdef cnp.ndarray H = np.empty((n, self.net.n_hidden))
        cdef int status
        with nogil:
            status = fs_network_features(&self.net, n, <const double *>cnp.PyArray_DATA(Qa),
                                         <double *>cnp.PyArray_DATA(H), NULL)
        self.check_status(status)
        return H

    def grad_features(self, q):
        """Gradient features at q: A[k, i] = d a_i / d q_k, shape (dim, n_hidden).

        grad z(q) = A @ output_weights: the design matrix of gradient (score)
        matching.
        """
        cdef cnp.ndarray qa = self._as_q(q)
        cdef cnp.ndarray A = np.empty((self.net.dim, self.net.n_hidden))
        cdef int status
        with nogil:
            status = fs_network_grad_features(&self.net, <const double *>cnp.PyArray_DATA(qa),
                                              <double *>cnp.PyArray_DATA(A), NULL)
        self.check_status(status)
        return A

    def grad_features_batch(self, Q):
        """grad_features for each row of Q (n, dim) -> (n, dim, n_hidden)."""
        cdef cnp.ndarray Qa = self._as_points(Q, "Q")
        cdef size_t n = Qa.shape[0]
        cdef cnp.ndarray out = np.empty((n, self.net.dim, self.net.n_hidden))
        cdef int status
        with nogil:
            status = fs_network_grad_features_batch(
                &self.net, n, <const double *>cnp.PyArray_DATA(Qa),
                <double *>cnp.PyArray_DATA(out), NULL)
        self.check_status(status)
        return out

    # -- batches ---------------------------------------------------------------
    def _batch(self, Q, bint want_value, bint want_grad):
        cdef cnp.ndarray Qa = self._as_points(Q, "Q")
        cdef size_t n = Qa.shape[0], p
        cdef int d = self.net.dim
        cdef cnp.ndarray vals = np.empty(n), grads = np.empty((n, d))
        cdef const double *qp = <const double *>cnp.PyArray_DATA(Qa)
        cdef double *vp = <double *>cnp.PyArray_DATA(vals)
        cdef double *gp = <double *>cnp.PyArray_DATA(grads)
        cdef double *work = <double *>malloc(fs_network_workspace_size(d, self.net.n_hidden)
                                             * sizeof(double))
        cdef int status = FS_OK
        if work == NULL:
            raise MemoryError("RandomNetwork: workspace")
        try:
            with nogil:
                for p in range(n):
                    status = fs_network_value_grad(&self.net, qp + p * d,
                                                   vp + p if want_value else NULL,
                                                   gp + p * d if want_grad else NULL, work)
                    if status != FS_OK:
                        break
        finally:
            free(work)
        self.check_status(status)
        return vals, grads

    def value_batch(self, Q):
        """z at each row of Q (n, dim) -> (n,)."""
        return self._batch(Q, True, False)[0]

    def gradient_batch(self, Q):
        """dz/dq at each row of Q (n, dim) -> (n, dim)."""
        return self._batch(Q, False, True)[1]

    def value_and_gradient_batch(self, Q):
        """``(values (n,), gradients (n, dim))`` at the rows of Q (n, dim)."""
        return self._batch(Q, True, True)


# -- C entry points for other extensions (declared in _network.pxd) ---------------
cdef int network_features(const fs_network *net, size_t n, const double *Q, double *H,
                          double *work) noexcept nogil:
    return fs_network_features(net, n, Q, H, work)


cdef int network_grad_features(const fs_network *net, const double *q, double *A,
                               double *work) noexcept nogil:
    return fs_network_grad_features(net, q, A, work)


# -- test hooks ------------------------------------------------------------------
def _exp(x, bint scalar=False):
    """exp(x) by the C kernel the networks use (`scalar`: the portable code path)."""
    cdef cnp.ndarray xa = np.ascontiguousarray(x, dtype=np.float64).ravel()
    cdef cnp.ndarray out = np.empty_like(xa)
    cdef size_t n = xa.shape[0]
    cdef int status
    with nogil:
        status = fs_network_exp(n, <const double *>cnp.PyArray_DATA(xa),
                                <double *>cnp.PyArray_DATA(out), scalar)
    raise_for_status(status, "_exp")
    return out.reshape(np.shape(x))


def _activation(activation, int order, t, bint scalar=False):
    """The order-th derivative (0..3) of an additive activation at t, by the C kernels."""
    name, code = _activation_code(activation)
    if code == FS_NETWORK_RBF:
        raise ValueError("_activation covers the additive activations only")
    cdef cnp.ndarray ta = np.ascontiguousarray(t, dtype=np.float64).ravel()
    cdef cnp.ndarray out = np.empty_like(ta)
    cdef size_t n = ta.shape[0]
    cdef int c = code
    cdef int status
    with nogil:
        status = fs_network_activation(c, order, n, <const double *>cnp.PyArray_DATA(ta),
                                       <double *>cnp.PyArray_DATA(out), scalar)
    raise_for_status(status, "_activation")
    return out.reshape(np.shape(t))
