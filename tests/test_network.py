"""Random-basis networks (csrc/fs_network.c) against NumPy references and finite differences."""
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy.special import expit

from fastsurrogate.surrogates._network import RandomNetwork, _activation, _exp

ACTIVATIONS = ["softplus", "sigmoid", "tanh", "rbf"]
ADDITIVE = ["softplus", "sigmoid", "tanh"]


# ---------------------------------------------------------------------------
# NumPy reference implementation
# ---------------------------------------------------------------------------
def act_ref(name, t, order):
    """order-th derivative of an additive activation, in stable NumPy forms."""
    t = np.asarray(t, dtype=np.float64)
    with np.errstate(over="ignore"):
        if name == "tanh":
            tau = np.tanh(t)
            sech2 = 1.0 / np.cosh(t) ** 2
            return [tau, sech2, -2.0 * tau * sech2, -2.0 * sech2 * (1.0 - 3.0 * tau**2)][order]
        sp = expit(t) * expit(-t)          # sigmoid'
        odd = -np.tanh(0.5 * t)            # 1 - 2 sigmoid
        if name == "softplus":
            return [np.logaddexp(0.0, t), expit(t), sp, sp * odd][order]
        return [expit(t), sp, sp * odd, sp * (1.0 - 6.0 * sp)][order]


class Ref:
    """Everything about a network at a point, computed with NumPy."""

    def __init__(self, net):
        self.act = net.activation
        self.W = np.array(net.W)
        self.b = None if net.bias is None else np.array(net.bias)
        self.l = None if net.width is None else np.array(net.width)
        self.v = net.output_weights
        self.c0 = net.out_bias
        d = self.W.shape[1]
        self.shift = np.zeros(d) if net.shift is None else np.array(net.shift)
        self.s = np.ones(d) if net.scale is None else 1.0 / np.array(net.scale)

    def x(self, q):
        return (np.asarray(q) - self.shift) * self.s

    def t(self, x):
        if self.act == "rbf":
            return ((self.W - x) ** 2).sum(axis=1)
        return self.W @ x + self.b

    def features(self, q):
        x = self.x(q)
        if self.act == "rbf":
            return np.exp(-self.t(x) / (2 * self.l**2))
        return act_ref(self.act, self.t(x), 0)

    def value(self, q):
        return self.features(q) @ self.v + self.c0

    def grad_features(self, q):
        """(dim, n_hidden): column i = d a_i / d q."""
        x = self.x(q)
        if self.act == "rbf":
            a = np.exp(-self.t(x) / (2 * self.l**2))
            return self.s[:, None] * ((self.W - x).T * (a / self.l**2))
        return self.s[:, None] * (self.W.T * act_ref(self.act, self.t(x), 1))

    def grad(self, q):
        return self.grad_features(q) @ self.v

    def hessian(self, q):
        x = self.x(q)
        S = np.diag(self.s)
        if self.act == "rbf":
            a = self.v * np.exp(-self.t(x) / (2 * self.l**2))
            D = x - self.W
            H = (D.T * (a / self.l**4)) @ D - np.sum(a / self.l**2) * np.eye(len(x))
        else:
            c = self.v * act_ref(self.act, self.t(x), 2)
            H = (self.W.T * c) @ self.W
        return S @ H @ S

    def third_tensor(self, q):
        """T[k, a, b] = d G_ab / d q_k (dim, dim, dim), G = Hessian."""
        x = self.x(q)
        d = len(x)
        if self.act == "rbf":
            a = self.v * np.exp(-self.t(x) / (2 * self.l**2))
            D = x - self.W
            I = np.eye(d)
            T = np.zeros((d, d, d))
            for ai, Di, li in zip(a, D, self.l):
                T += ai * (-np.einsum("k,ab->kab", Di, np.outer(Di, Di) / li**4 - I / li**2) / li**2
                           + (np.einsum("ak,b->kab", I, Di) + np.einsum("a,bk->kab", Di, I)) / li**4)
        else:
            c = self.v * act_ref(self.act, self.t(x), 3)
            T = np.einsum("i,ik,ia,ib->kab", c, self.W, self.W, self.W)
        return np.einsum("kab,k,a,b->kab", T, self.s, self.s, self.s)


def assert_rel(actual, expected, rtol=1e-12, what=""):
    """Norm-wise relative agreement: max |a - e| <= rtol * max |e|."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = np.max(np.abs(expected))
    err = np.max(np.abs(actual - expected)) if actual.size else 0.0
    assert err <= rtol * scale, f"{what}: max error {err:.3e} vs scale {scale:.3e} (rel {err / scale:.3e})"


def make_net(activation, dim=5, n_hidden=37, standardise=False, seed=0):
    rng = np.random.default_rng(seed)
    shift = scale = None
    if standardise:
        shift = rng.normal(0.5, 1.0, dim)
        scale = rng.uniform(0.5, 2.0, dim)
    if activation == "rbf":
        net = RandomNetwork.random(dim, n_hidden, "rbf", seed=seed, shift=shift, scale=scale,
                                   rbf_scale=0.5)
        net = RandomNetwork(net.W, None, rng.standard_normal(n_hidden), 0.3, "rbf",
                            rng.uniform(0.5, 1.5, n_hidden) * np.sqrt(dim), shift, scale)
    else:
        net = RandomNetwork.random(dim, n_hidden, activation, seed=seed, shift=shift, scale=scale)
        net.output_weights = rng.standard_normal(n_hidden)
        net.out_bias = -0.7
    q = (shift if shift is not None else 0.0) + rng.standard_normal(dim) * (
        scale if scale is not None else 1.0)
    return net, q


CASES = [(a, std) for a in ACTIVATIONS for std in (False, True)]
IDS = [f"{a}-{'std' if s else 'raw'}" for a, s in CASES]


# ---------------------------------------------------------------------------
# against the NumPy reference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("activation,standardise", CASES, ids=IDS)
@pytest.mark.parametrize("dim,n_hidden", [(1, 5), (3, 33), (4, 64), (5, 37), (13, 70), (50, 130)])
def test_value_grad_against_numpy(activation, standardise, dim, n_hidden):
    net, q = make_net(activation, dim, n_hidden, standardise)
    ref = Ref(net)
    assert_rel(net.value(q), ref.value(q), 1e-13, "value")
    assert_rel(net.grad(q), ref.grad(q), 1e-13, "grad")
    v, g = net.value_and_grad(q)
    assert v == net.value(q)
    np.testing.assert_array_equal(g, net.grad(q))


@pytest.mark.parametrize("activation,standardise", CASES, ids=IDS)
def test_second_and_third_derivatives_against_numpy(activation, standardise):
    net, q = make_net(activation, 6, 41, standardise)
    ref = Ref(net)
    H = net.hessian(q)
    np.testing.assert_array_equal(H, H.T)
    assert_rel(H, ref.hessian(q), 1e-12, "hessian")
    assert_rel(net.hessian_diag(q), np.diag(ref.hessian(q)), 1e-12, "hessian_diag")
    rng = np.random.default_rng(3)
    B = rng.standard_normal((6, 6))
    A = B + B.T
    u = rng.standard_normal(6)
    T = ref.third_tensor(q)
    tr, quad = net.third_contractions(q, A, u)
    assert_rel(tr, np.einsum("kab,ab->k", T, A), 1e-12, "out_tr")
    assert_rel(quad, np.einsum("kab,a,b->k", T, u, u), 1e-12, "out_quad")
    tr_only, none = net.third_contractions(q, A, None)
    assert none is None
    np.testing.assert_array_equal(tr_only, tr)
    none, quad_only = net.third_contractions(q, None, u)
    assert none is None
    np.testing.assert_array_equal(quad_only, quad)
    a = rng.uniform(0.5, 2.0, 6)
    assert_rel(net.third_diag(q, a), np.einsum("kaa,a->k", T, a), 1e-12, "third_diag")


@pytest.mark.parametrize("activation,standardise", CASES, ids=IDS)
def test_features_against_numpy(activation, standardise):
    net, q = make_net(activation, 7, 45, standardise)
    ref = Ref(net)
    rng = np.random.default_rng(5)
    Q = q + rng.standard_normal((9, 7))
    H = net.features(Q)
    assert H.shape == (9, 45)
    assert_rel(H, np.array([ref.features(p) for p in Q]), 1e-13, "features")
    assert_rel(H @ net.output_weights + net.out_bias, net.value_batch(Q), 1e-13, "H v + b")
    A = net.grad_features(q)
    assert A.shape == (7, 45)
    assert_rel(A, ref.grad_features(q), 1e-13, "grad_features")
    assert_rel(A @ net.output_weights, net.grad(q), 1e-13, "A v")
    AB = net.grad_features_batch(Q)
    assert AB.shape == (9, 7, 45)
    for p in range(9):
        np.testing.assert_array_equal(AB[p], net.grad_features(Q[p]))
    G = net.gradient_batch(Q)
    V = net.value_batch(Q)
    V2, G2 = net.value_and_gradient_batch(Q)
    for p in range(9):
        np.testing.assert_array_equal(G[p], net.grad(Q[p]))
        assert V[p] == net.value(Q[p])
    np.testing.assert_array_equal(G2, G)
    np.testing.assert_array_equal(V2, V)
    assert net.features(np.empty((0, 7))).shape == (0, 45)


# ---------------------------------------------------------------------------
# against finite differences
# ---------------------------------------------------------------------------
def central_diff(f, q, h):
    cols = []
    for k in range(len(q)):
        e = np.zeros(len(q))
        e[k] = h
        cols.append((np.asarray(f(q + e)) - np.asarray(f(q - e))) / (2 * h))
    return np.array(cols)


@pytest.mark.parametrize("activation,standardise", CASES, ids=IDS)
def test_finite_differences(activation, standardise):
    net, q = make_net(activation, 5, 29, standardise)
    h = 1e-5
    assert_rel(net.grad(q), central_diff(net.value, q, h), 1e-7, "grad vs FD of value")
    assert_rel(net.hessian(q), central_diff(net.grad, q, h), 1e-7, "hessian vs FD of grad")
    A = np.random.default_rng(1).standard_normal((5, 5))
    A = A + A.T
    u = np.random.default_rng(2).standard_normal(5)
    dH = central_diff(net.hessian, q, h)           # dH[k] = dG/dq_k
    tr, quad = net.third_contractions(q, A, u)
    assert_rel(tr, np.einsum("kab,ab->k", dH, A), 1e-7, "out_tr vs FD of hessian")
    assert_rel(quad, np.einsum("kab,a,b->k", dH, u, u), 1e-7, "out_quad vs FD of hessian")
    assert_rel(net.hessian_diag(q), np.diag(net.hessian(q)), 1e-15, "diag")
    assert_rel(net.grad_features(q), central_diff(lambda p: net.features(p[None])[0], q, h),
               1e-7, "grad_features vs FD of features")


# ---------------------------------------------------------------------------
# elementwise kernels: exp and the activations at extreme arguments
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("scalar", [False, True], ids=["vector", "scalar"])
def test_exp_ulp(scalar):
    rng = np.random.default_rng(0)
    x = np.concatenate([np.linspace(-745.0, 709.0, 200001), rng.uniform(-745, 709, 100000),
                        rng.uniform(-1, 1, 100000), [0.0, -0.0, 1e-300, -1e-300, 709.78]])
    out = _exp(x, scalar=scalar)
    ref = np.exp(x.astype(np.longdouble))
    ref64 = ref.astype(np.float64)
    normal = ref64 >= np.finfo(np.float64).tiny
    ulp = np.abs(out[normal] - ref[normal]) / np.spacing(ref64[normal])
    assert ulp.max() <= 2.0, f"max error {ulp.max():.2f} ulp at x = {x[normal][ulp.argmax()]}"
    # subnormal results: a few units of the smallest subnormal
    sub = ~normal
    err = np.abs(out[sub] - ref[sub]) / np.finfo(np.float64).smallest_subnormal
    assert err.max() <= 2.0
    assert np.all(np.abs(out - np.exp(x)) <= 2 * np.spacing(np.exp(x)))
    assert _exp(np.array([0.0]), scalar=scalar)[0] == 1.0
    special = _exp(np.array([710.0, 1e308, np.inf, -746.0, -1e308, -np.inf, np.nan]), scalar=scalar)
    assert np.all(special[:3] == np.inf)
    assert np.all(special[3:6] == 0.0)
    assert np.isnan(special[6])


@pytest.mark.parametrize("scalar", [False, True], ids=["vector", "scalar"])
@pytest.mark.parametrize("name", ADDITIVE)
def test_activation_kernels(name, scalar):
    t = np.concatenate([np.linspace(-800, 800, 16001), np.linspace(-3, 3, 6001),
                        [0.0, -0.0, 1e-300, -1e-300, 1e-9, -1e-9, 35.0, 36.0, 40.0, -40.0,
                         708.0, 709.9, -745.5, -800.0, 800.0]])
    for order in range(4):
        out = _activation(name, order, t, scalar=scalar)
        ref = act_ref(name, t, order)
        assert np.all(np.isfinite(out)), (name, order)
        # elementwise relative accuracy wherever the reference is a normal number
        big = np.abs(ref) > 1e-290
        rel = np.abs(out[big] - ref[big]) / np.abs(ref[big])
        # derivatives that cross zero lose relative accuracy near the crossing
        near_zero = np.abs(ref[big]) < 1e-6 * np.abs(ref).max()
        tol = 1e-13 if order < 2 else 1e-11
        assert np.all((rel <= tol) | near_zero), (name, order, rel.max(), t[big][rel.argmax()])
        assert np.all(np.abs(out - ref) <= tol * np.abs(ref).max() + 1e-300)
    # exact identities at the extremes
    if name == "softplus":
        sp = _activation(name, 0, np.array([40.0, 800.0, -800.0, np.inf, -np.inf]), scalar=scalar)
        np.testing.assert_array_equal(sp, [40.0, 800.0, 0.0, np.inf, 0.0])
    nan = _activation(name, 0, np.array([np.nan]), scalar=scalar)
    assert np.isnan(nan[0])
    for order in range(1, 4):
        assert np.isnan(_activation(name, order, np.array([np.nan]), scalar=scalar)[0])


@pytest.mark.parametrize("name", ADDITIVE)
def test_extreme_preactivations(name):
    """|t| up to 800 through the network kernels: finite and equal to NumPy's forms."""
    t = np.concatenate([np.linspace(-800, 800, 401), [-745.5, -709, 35.5, 709.5]])
    s = t.size
    net = RandomNetwork(np.ones((s, 1)), t, np.ones(s), 0.0, name)
    q = np.zeros(1)
    assert_rel(net.features(q[None])[0], act_ref(name, t, 0), 1e-15, "a(t)")
    assert_rel(net.grad_features(q)[0], act_ref(name, t, 1), 1e-15, "a'(t)")
    for got, order in ((net.value(q), 0), (net.grad(q)[0], 1), (net.hessian_diag(q)[0], 2)):
        terms = act_ref(name, t, order)       # the sums may cancel: compare to sum |terms|
        assert abs(got - terms.sum()) <= 1e-14 * np.abs(terms).sum(), (order, got, terms.sum())
    for k in range(s):      # one unit at a time: relative accuracy of each term
        v = np.zeros(s)
        v[k] = 1.0
        net.output_weights = v
        val, g = net.value_and_grad(q)
        assert np.isfinite(val) and np.all(np.isfinite(g))
        for got, order in ((val, 0), (g[0], 1)):
            want = act_ref(name, t[k], order)
            assert abs(got - want) <= 1e-14 * abs(want) + 1e-300, (t[k], order, got, want)


def test_rbf_far_from_centres():
    net = RandomNetwork(np.zeros((3, 2)), None, np.ones(3), 0.5, "rbf", 1.0)
    q = np.array([1e3, -1e3])
    assert net.value(q) == 0.5
    np.testing.assert_array_equal(net.grad(q), 0.0)
    assert np.all(np.isfinite(net.hessian(q)))
    net.out_bias = 0.0
    q = np.array([30.0, 0.0])          # a = exp(-450), normal
    assert_rel(net.value(q), 3 * np.exp(-450.0), 1e-13, "tail")
    assert_rel(net.grad(q), [-90 * np.exp(-450.0), 0.0], 1e-13, "tail gradient")


def test_non_finite_q_propagates():
    for name in ACTIVATIONS:
        net, q = make_net(name, 3, 10)
        q = q.copy()
        q[1] = np.nan
        v, g = net.value_and_grad(q)
        assert np.isnan(v) and np.all(np.isnan(g))


# ---------------------------------------------------------------------------
# threads, pickling, construction
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_threads_match_serial(activation):
    net, q = make_net(activation, 50, 2000, True)
    Q = q + np.random.default_rng(9).standard_normal((64, 50))
    serial = [net.value_and_grad(p) for p in Q]
    barrier = threading.Barrier(4)

    def work(k):
        barrier.wait()
        out = []
        for rep in range(5):
            for p in Q[k::4]:
                out.append(net.value_and_grad(p))
        return out

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(work, range(4)))
    for k in range(4):
        expect = [serial[i] for i in range(k, 64, 4)] * 5
        for (v, g), (v0, g0) in zip(results[k], expect):
            assert v == v0
            np.testing.assert_array_equal(g, g0)
    # batched kernels from threads too
    with ThreadPoolExecutor(4) as ex:
        grads = list(ex.map(net.gradient_batch, [Q] * 4))
    for G in grads:
        np.testing.assert_array_equal(G, np.array([g for _, g in serial]))


@pytest.mark.parametrize("activation,standardise", CASES, ids=IDS)
def test_pickle_round_trip(activation, standardise):
    net, q = make_net(activation, 4, 20, standardise)
    net2 = pickle.loads(pickle.dumps(net))
    assert type(net2) is RandomNetwork
    assert net2.activation == net.activation and net2.n_hidden == net.n_hidden and net2.dim == 4
    assert net2.value(q) == net.value(q)
    np.testing.assert_array_equal(net2.grad(q), net.grad(q))
    np.testing.assert_array_equal(net2.hessian(q), net.hessian(q))
    np.testing.assert_array_equal(net2.output_weights, net.output_weights)
    assert net2.out_bias == net.out_bias
    for name in ("W", "bias", "width", "shift", "scale"):
        a, b = getattr(net, name), getattr(net2, name)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_output_weights_update_in_place():
    net, q = make_net("softplus", 3, 10)
    ref = Ref(net)
    new = np.arange(10.0)
    net.output_weights = new
    net.out_bias = 2.5
    ref.v, ref.c0 = new, 2.5
    assert_rel(net.value(q), ref.value(q), 1e-14)
    assert_rel(net.grad(q), ref.grad(q), 1e-14)
    new[0] = 100.0                      # the network keeps its own copy
    assert_rel(net.value(q), ref.value(q) - 100.0 * ref.features(q)[0], 1e-13)
    w = net.output_weights
    w[:] = 0.0                          # a copy, too
    assert np.any(net.output_weights != 0.0)
    with pytest.raises(ValueError):
        net.output_weights = np.zeros(9)
    with pytest.raises(ValueError):
        net.output_weights = np.full(10, np.nan)
    with pytest.raises(TypeError):
        net.output_weights = ["a"] * 10
    with pytest.raises(ValueError):
        net.out_bias = np.inf
    for name in ("W", "bias", "shift"):
        arr = getattr(net, name)
        if arr is not None:
            with pytest.raises(ValueError):
                arr[0] = 1.0            # read-only views


def test_random_defaults():
    net = RandomNetwork.random(40, 3000, seed=1)
    assert net.W.shape == (3000, 40) and net.bias.shape == (3000,)
    assert abs(net.W.std() * np.sqrt(40) - 1.0) < 0.01
    assert abs(net.bias.std() - 1.0) < 0.05
    np.testing.assert_array_equal(net.output_weights, 0.0)
    assert net.out_bias == 0.0 and net.width is None and net.shift is None
    again = RandomNetwork.random(40, 3000, seed=1)
    np.testing.assert_array_equal(again.W, net.W)
    rng = np.random.default_rng(1)
    np.testing.assert_array_equal(RandomNetwork.random(40, 3000, seed=rng).W, net.W)
    assert RandomNetwork.random(40, 3000, seed=2).W[0, 0] != net.W[0, 0]
    # RBF: centres from points, standardised
    pts = np.random.default_rng(0).normal(3.0, 2.0, (100, 3))
    shift, scale = pts.mean(0), pts.std(0)
    rbf = RandomNetwork.random(3, 20, "rbf", seed=0, shift=shift, scale=scale, centres=pts,
                               rbf_scale=2.0)
    assert rbf.bias is None
    np.testing.assert_allclose(rbf.width, 2.0 * np.sqrt(3))
    back = rbf.W * scale + shift      # each centre is one of the points
    assert all(np.min(np.abs(pts - c).max(axis=1)) < 1e-12 for c in back)
    assert len({tuple(c) for c in np.round(back, 9)}) == 20
    exact = RandomNetwork.random(3, 100, "rbf", centres=pts)
    np.testing.assert_allclose(exact.W, pts)
    with pytest.raises(ValueError):
        RandomNetwork.random(3, 101, "rbf", centres=pts)
    with pytest.raises(ValueError):
        RandomNetwork.random(3, 10, "softplus", centres=pts)
    with pytest.raises(ValueError):
        RandomNetwork.random(0, 10)
    with pytest.raises(ValueError):
        RandomNetwork.random(3, 10, "rbf", rbf_scale=-1.0)


def test_validation_errors():
    W = np.ones((4, 3))
    ok = dict(W=W, bias=np.zeros(4), v=np.zeros(4))
    RandomNetwork(**ok)
    bad = [
        (ValueError, dict(ok, W=np.ones(3))),
        (ValueError, dict(ok, W=np.ones((0, 3)))),
        (ValueError, dict(ok, W=np.full((4, 3), np.nan))),
        (TypeError, dict(ok, W=[["a", "b", "c"]] * 4)),
        (TypeError, dict(ok, W=np.ones((4, 3)) * 1j)),
        (TypeError, dict(ok, W=None)),
        (ValueError, dict(ok, bias=np.zeros(5))),
        (ValueError, dict(ok, bias=np.array([0, 0, np.inf, 0]))),
        (ValueError, dict(ok, v=np.zeros(3))),
        (ValueError, dict(ok, v=np.zeros((4, 1)))),
        (ValueError, dict(ok, out_bias=np.nan)),
        (ValueError, dict(ok, activation="relu")),
        (TypeError, dict(ok, activation=3)),
        (ValueError, dict(ok, width=1.0)),
        (ValueError, dict(ok, activation="rbf", width=1.0)),          # bias given
        (ValueError, dict(ok, activation="rbf", bias=None)),          # no width
        (ValueError, dict(ok, activation="rbf", bias=None, width=-1.0)),
        (ValueError, dict(ok, activation="rbf", bias=None, width=np.ones(3))),
        (ValueError, dict(ok, shift=np.zeros(4))),
        (ValueError, dict(ok, shift=[0, np.nan, 0])),
        (ValueError, dict(ok, scale=[1, 0, 1])),
        (ValueError, dict(ok, scale=[1, -1, 1])),
        (ValueError, dict(ok, scale=np.ones((3, 1)))),
        (ValueError, dict(ok, scale=[1, 1e-320, 1])),
    ]
    for exc, kw in bad:
        with pytest.raises(exc):
            RandomNetwork(**kw)
    net = RandomNetwork(W, None, np.zeros(4), activation="RBF", width=[1, 2, 3, 4])
    assert net.activation == "rbf"
    net = RandomNetwork(**ok)
    for meth in (net.grad, net.value, net.hessian, net.hessian_diag, net.grad_features):
        with pytest.raises(ValueError):
            meth(np.zeros(4))
    with pytest.raises(ValueError):
        net.features(np.zeros(3))
    with pytest.raises(ValueError):
        net.features(np.zeros((2, 4)))
    with pytest.raises(TypeError):
        net.features(np.array([["a", "b", "c"]]))
    with pytest.raises(ValueError):
        net.grad_features_batch(np.zeros((2, 2)))
    with pytest.raises(ValueError):
        net.gradient_batch(np.zeros(3))
    with pytest.raises(ValueError):
        net.third_contractions(np.zeros(3), np.eye(2), None)
    with pytest.raises(ValueError):
        net.third_contractions(np.zeros(3), None, np.zeros(2))
    with pytest.raises(ValueError):
        net.third_diag(np.zeros(3), np.zeros(4))
    with pytest.raises(TypeError):
        net.__init__(**ok)              # no re-initialisation
    with pytest.raises(ValueError):
        _activation("rbf", 0, np.zeros(2))
    with pytest.raises(Exception):
        _activation("softplus", 4, np.zeros(2))


def test_potential_protocol_and_repr():
    net, q = make_net("tanh", 3, 12, True)
    assert net.thread_safe and net.dim == 3 and net.dims() == 3
    assert net.log_density(q) == -net.value(q)
    lp, glp = net.log_density_gradient(q)
    np.testing.assert_array_equal(glp, -net.grad(q))
    assert "n_hidden=12" in repr(net) and "tanh" in repr(net)
    assert net.capsule is not None


# ---------------------------------------------------------------------------
# as the potential of the C chain loop
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["softplus", "rbf"])
def test_trained_network_drives_hmc_chain(activation):
    from fastsurrogate.core._hmc import Chain, new_trace

    dim = 3
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((2000, dim)) * 1.5
    y = 0.5 * (Q**2).sum(axis=1)                    # U of N(0, I)
    shift, scale = Q.mean(axis=0), Q.std(axis=0)
    kw = dict(centres=Q, rbf_scale=0.7) if activation == "rbf" else {}
    net = RandomNetwork.random(dim, 300, activation, seed=1, shift=shift, scale=scale, **kw)
    H = np.column_stack([net.features(Q), np.ones(len(Q))])
    coef = np.linalg.lstsq(H, y, rcond=1e-10)[0]
    net.output_weights, net.out_bias = coef[:-1], coef[-1]
    test = rng.standard_normal((200, dim))
    resid = net.value_batch(test) - 0.5 * (test**2).sum(axis=1)
    assert np.std(resid) < 0.05
    np.testing.assert_allclose(net.gradient_batch(test), test, atol=0.2)

    chain = Chain(net, net, np.zeros(dim), np.random.default_rng(2), step_size=0.3, n_steps=8)
    trace = new_trace(3000, dim)
    n_done, status = chain.run(trace, 0, 3000)
    assert n_done == 3000 and status == 0
    draws = trace["draws"]
    assert np.all(np.isfinite(draws))
    assert trace["accept_prob"].mean() > 0.8
    assert np.all(np.abs(draws.mean(axis=0)) < 0.2)
    assert np.all(np.abs(draws.std(axis=0) - 1.0) < 0.15)


def test_whitened_inputs_fold_into_the_weights_and_help_correlated_targets():
    from fastsurrogate.surrogates import train_random_network
    from fastsurrogate.surrogates.random_network import whitening
    rng = np.random.default_rng(11)
    d = 6
    A = rng.standard_normal((d, d))
    evals = np.logspace(0, 3, d)                    # condition number 1000
    V = np.linalg.qr(A)[0]
    P = (V * evals) @ V.T                           # precision
    L = np.linalg.cholesky(np.linalg.inv(P))
    Q = rng.standard_normal((1500, d)) @ L.T + 1.0
    u = 0.5 * np.einsum("ni,ij,nj->n", Q - 1.0, P, Q - 1.0)
    shift, T = whitening(Q)
    np.testing.assert_allclose(np.cov(((Q - shift) @ T.T).T), np.eye(d), atol=1e-10)
    test = rng.standard_normal((200, d)) @ L.T + 1.0
    g_true = (test - 1.0) @ P
    errs = {}
    for st in (True, "whiten"):
        net = train_random_network(Q, u, n_hidden=300, standardize=st, input_scale=0.2,
                                   ridge=1e-10, seed=3)
        g = net.gradient_batch(test)
        errs[st] = np.median(np.linalg.norm(g - g_true, axis=1) / np.linalg.norm(g_true, axis=1))
    assert net.info["inputs"] == "whitened"
    assert errs["whiten"] < 0.5 * errs[True], errs
    # fewer points than dimensions: falls back to per-coordinate standardisation
    net = train_random_network(Q[:4], u[:4], n_hidden=10, standardize="whiten", seed=0)
    assert net.info["inputs"] == "standardised"
    with pytest.raises(ValueError):
        train_random_network(Q, u, n_hidden=10, standardize="yes")


@pytest.mark.parametrize("n", [40, 300])
def test_ridge_path_primal_and_dual_agree(n):
    # fewer training points than units (n = 40 < s = 120) takes the dual
    # N x N system; it must solve the same ridge problem as the s x s normal
    # equations (solved here independently by an augmented least squares)
    from fastsurrogate.surrogates.random_network import _ridge_path
    rng = np.random.default_rng(3)
    H = rng.normal(size=(n, 120))
    y = rng.normal(size=n)
    Hc, yc = H - H.mean(axis=0), y - y.mean()
    for r, (v, b) in zip((1e-6, 1e-2), _ridge_path(H, y, (1e-6, 1e-2))):
        lam = r * np.trace(Hc.T @ Hc) / H.shape[1]
        A = np.vstack([Hc, np.sqrt(lam) * np.eye(H.shape[1])])
        ref = np.linalg.lstsq(A, np.concatenate([yc, np.zeros(H.shape[1])]), rcond=None)[0]
        np.testing.assert_allclose(v, ref, rtol=1e-7, atol=1e-9)
        assert b == pytest.approx(y.mean() - H.mean(axis=0) @ ref, rel=1e-8, abs=1e-10)
