"""WeightedSum, ClampedSum, TrustedDrive and RecordingPotential (csrc/fs_compose.c)."""
import pickle

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import models
from fastsurrogate.surrogates._network import RandomNetwork


def _gauss(rng, d):
    A = rng.standard_normal((d, d))
    return models.Gaussian(rng.standard_normal(d), A @ A.T + d * np.eye(d))


def test_weighted_sum_matches_numpy():
    rng = np.random.default_rng(0)
    d = 5
    terms = [_gauss(rng, d), models.StandardNormal(d), _gauss(rng, d)]
    w = np.array([0.3, -1.25, 2.0])
    s = fs.WeightedSum(terms, w)
    for _ in range(5):
        q = rng.standard_normal(d)
        u, g = s.value_and_grad(q)
        u_ref = sum(wk * t.value(q) for wk, t in zip(w, terms))
        g_ref = sum(wk * t.grad(q) for wk, t in zip(w, terms))
        assert u == pytest.approx(u_ref, rel=1e-13)
        np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)
        assert s.value(q) == pytest.approx(u_ref, rel=1e-13)
        np.testing.assert_allclose(s.grad(q), g_ref, rtol=1e-12, atol=1e-12)


def test_weighted_sum_finite_differences():
    rng = np.random.default_rng(1)
    d = 4
    s = fs.WeightedSum([_gauss(rng, d), models.Banana(n=10) if d == 2 else _gauss(rng, d)],
                       [0.7, 0.4])
    q = rng.standard_normal(d)
    h = 1e-5
    fd = np.array([(s.value(q + h * e) - s.value(q - h * e)) / (2 * h) for e in np.eye(d)])
    np.testing.assert_allclose(s.grad(q), fd, rtol=1e-7, atol=1e-8)


def test_weighted_sum_zero_weight_skips_term():
    calls = []

    def f(q):
        calls.append(1)
        return 0.5 * q @ q, q

    cb = fs.Potential.from_callable(f, 3)
    s = fs.WeightedSum([models.StandardNormal(3), cb], [1.0, 0.0])
    s.value_and_grad(np.ones(3))
    assert calls == []
    s.weights = [1.0, 2.0]
    u, g = s.value_and_grad(np.ones(3))
    assert calls == [1]
    assert u == pytest.approx(1.5 + 3.0)
    np.testing.assert_allclose(g, 3 * np.ones(3))


def test_weighted_sum_errors_and_pickle():
    with pytest.raises(ValueError):
        fs.WeightedSum([])
    with pytest.raises(TypeError):
        fs.WeightedSum([1.0])
    with pytest.raises(ValueError):
        fs.WeightedSum([models.StandardNormal(2), models.StandardNormal(3)])
    with pytest.raises(ValueError):
        fs.WeightedSum([models.StandardNormal(2)], [np.nan])
    s = fs.WeightedSum([models.StandardNormal(2)], [2.0])
    with pytest.raises(ValueError):
        s.weights = [1.0, 2.0]
    assert s.thread_safe
    net = RandomNetwork.random(2, 7, seed=0)
    s = fs.WeightedSum([net, net], [2.0, -0.5])
    t = pickle.loads(pickle.dumps(s))
    q = np.array([0.3, -0.2])
    assert t.value(q) == pytest.approx(1.5 * net.value(q), rel=1e-14)


def test_weighted_sum_propagates_callback_error():
    def bad(q):
        raise KeyError("boom")

    s = fs.WeightedSum([models.StandardNormal(2), fs.Potential.from_callable(bad, 2)])
    with pytest.raises(Exception):
        s.value(np.zeros(2))


def test_recorder_stores_every_gradient_evaluation():
    rng = np.random.default_rng(2)
    g = _gauss(rng, 3)
    rec = fs.RecordingPotential(g, capacity=4)
    qs = rng.standard_normal((6, 3))
    rec.value(qs[0])                       # value only: not stored
    for q in qs[1:]:
        rec.grad(q)
    Q, G, U = rec.points()
    assert rec.n_seen == 5 and rec.n_stored == 4
    np.testing.assert_array_equal(Q, qs[1:5])
    np.testing.assert_allclose(G, np.array([g.grad(q) for q in qs[1:5]]), rtol=1e-14)
    assert np.all(np.isnan(U))
    rec.clear()
    u, gr = rec.value_and_grad(qs[0])
    Q, G, U = rec.points()
    assert U[0] == pytest.approx(u) and np.allclose(G[0], gr)
    rec.active = False
    rec.grad(qs[1])
    assert rec.n_stored == 1


def test_recorder_with_record_values_stores_value_only_calls_with_their_gradient():
    # the judge of a surrogate chain's warm-up: a value-only call asks the
    # potential for U and grad U together and is stored like a gradient call
    rng = np.random.default_rng(5)
    g = _gauss(rng, 3)
    rec = fs.RecordingPotential(g, capacity=8, record_values=True)
    qs = rng.standard_normal((3, 3))
    vals = [rec.value(q) for q in qs]
    np.testing.assert_allclose(vals, [g.value(q) for q in qs], rtol=1e-14)
    Q, G, U = rec.points()
    assert rec.n_seen == 3 and rec.record_values
    np.testing.assert_array_equal(Q, qs)
    np.testing.assert_allclose(G, np.array([g.grad(q) for q in qs]), rtol=1e-14)
    np.testing.assert_allclose(U, vals, rtol=1e-14)
    back = pickle.loads(pickle.dumps(rec))
    assert back.record_values and back.n_stored == 3
    rec.active = False                     # inactive: a plain value call
    rec.value(qs[0])
    assert rec.n_seen == 3
    plain = fs.RecordingPotential(g, capacity=8)
    plain.value(qs[0])
    assert plain.n_seen == 0 and not plain.record_values


def test_recorder_thinning_and_nonfinite():
    def f(q):
        return (np.nan, q) if q[0] > 10 else (0.5 * q @ q, q)

    rec = fs.RecordingPotential(fs.Potential.from_callable(f, 2), capacity=10, every=2)
    for i in range(5):
        rec.value_and_grad(np.array([float(i), 0.0]))
    rec.value_and_grad(np.array([20.0, 0.0]))       # non-finite: skipped
    Q, _, _ = rec.points()
    np.testing.assert_array_equal(Q[:, 0], [0.0, 2.0, 4.0])
    with pytest.raises(ValueError):
        fs.RecordingPotential(models.StandardNormal(2), capacity=0)


def test_recorder_collects_one_point_per_leapfrog_step():
    d = 3
    target = models.StandardNormal(d)
    rec = fs.RecordingPotential(target, capacity=10_000)
    res = fs.HMC(rec, step_size=0.3, n_steps=5, random_n_steps=False, adapt=False).sample(
        n_draws=50, n_warmup=0, chains=1, seed=3, progress=False)
    # gradients at the initial point, then L per iteration
    assert 5 * 50 < rec.n_stored <= 5 * 50 + 2   # + the initial point(s)
    Q, G, _ = rec.points()
    np.testing.assert_allclose(G, Q, rtol=1e-15)
    assert res.draws.shape == (1, 50, d)


@pytest.mark.parametrize("capacity", [2, 3, 5, 8])
def test_recorder_decimation_keeps_an_even_spread(capacity):
    # a full decimating recorder keeps every other point and doubles `every`:
    # the stored points are the counted evaluations whose index is a
    # multiple of the current `every`, in order, whatever the capacity
    g = models.Gaussian(np.zeros(2), np.eye(2))
    rec = fs.RecordingPotential(g, capacity, decimate=True, need_value=True)
    for i in range(61):
        q = np.array([float(i), 1.0])
        if i % 7 == 3:
            rec.grad(q)                  # gradient only: U computed if it is stored
        elif i % 11 == 5:
            rec.value(q)                 # value only: passes through, not counted
        else:
            rec.value_and_grad(q)
    counted = np.array([float(i) for i in range(61) if i % 7 == 3 or i % 11 != 5])
    Q, G, U = rec.points()
    assert rec.n_seen == counted.size
    want = counted[::rec.every]
    np.testing.assert_array_equal(Q[:, 0], want)
    assert capacity // 2 <= rec.n_stored <= capacity
    np.testing.assert_array_equal(U, 0.5 * (want ** 2 + 1.0))
    np.testing.assert_array_equal(G, np.stack([want, np.ones_like(want)], axis=1))
    # the state pickles (every and the flags included) and goes on the same way
    r2 = pickle.loads(pickle.dumps(rec))
    assert (r2.every, r2.decimate, r2.need_value) == (rec.every, True, True)
    for r in (rec, r2):
        for i in range(61, 140):
            r.value_and_grad(np.array([float(i), 1.0]))
    np.testing.assert_array_equal(rec.points()[0], r2.points()[0])
    with pytest.raises(ValueError, match="capacity >= 2"):
        fs.RecordingPotential(g, 1, decimate=True)


def test_recorder_without_decimation_stops_at_capacity():
    g = models.Gaussian(np.zeros(2), np.eye(2))
    rec = fs.RecordingPotential(g, 4)
    for i in range(10):
        rec.value_and_grad(np.array([float(i), 0.0]))
    np.testing.assert_array_equal(rec.points()[0][:, 0], [0.0, 1.0, 2.0, 3.0])
    assert rec.every == 1 and rec.n_seen == 10


def _clamped_reference(net, mean, cov, weights, radius, q):
    """NumPy: V = w0 z(p(q)) + w1 L(q), p the radial projection onto the sphere
    r = radius in L's metric; the gradient by the chain rule."""
    P = np.linalg.inv(cov)
    x = q - mean
    L, gL = 0.5 * x @ P @ x, P @ x
    r = np.sqrt(2 * L)
    if r <= radius:
        return weights[0] * net.value(q) + weights[1] * L, weights[0] * net.grad(q) + weights[1] * gL
    s = radius / r
    p = mean + s * x
    gz = net.grad(p)
    # d p / d q = s I - s x (grad r)^T / r, grad r = gL / r
    J = s * np.eye(len(q)) - s * np.outer(x, gL) / r ** 2
    return weights[0] * net.value(p) + weights[1] * L, weights[0] * J.T @ gz + weights[1] * gL


def _clamped_case(seed=0, d=4):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d))
    cov, mean = A @ A.T + np.eye(d), rng.normal(size=d)
    net = RandomNetwork.random(d, 30, activation="softplus", seed=seed)
    net.output_weights = rng.normal(size=30)
    return rng, net, mean, cov


def test_clamped_sum_matches_numpy_inside_and_outside_the_ball():
    from fastsurrogate.core import ClampedSum
    rng, net, mean, cov = _clamped_case()
    L = models.Gaussian(mean, cov)
    V = ClampedSum(net, L, [0.7, 1.3], mean, radius=1.5)
    # Gaussian's value has no constant here: L(mean) = 0 is its minimum
    for scale in (0.05, 0.5, 3.0, 30.0):
        q = mean + scale * rng.normal(size=4)
        u, g = V.value_and_grad(q)
        u_ref, g_ref = _clamped_reference(net, mean, cov, [0.7, 1.3], 1.5, q)
        u_ref += 1.3 * L.value(mean)
        np.testing.assert_allclose(u, u_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-12)
        assert np.isclose(V.distance(q), np.sqrt((q - mean) @ np.linalg.solve(cov, q - mean)))


def test_clamped_sum_finite_differences_radius_and_pickle():
    from fastsurrogate.core import ClampedSum
    from fastsurrogate.diagnostics import check_gradient
    rng, net, mean, cov = _clamped_case(1)
    L = models.Gaussian(mean, cov)
    V = ClampedSum(net, L, [1.0, 1.0], mean, radius=2.0)
    for scale in (0.3, 5.0):          # inside, outside (away from the sphere's kink)
        q = mean + scale * rng.normal(size=4)
        assert check_gradient(V, q).ok
    far = mean + 50.0 * rng.normal(size=4)
    # beyond the ball z is held on the sphere: V - L is bounded there
    assert abs(V.value(far) - L.value(far)) < np.abs(net.output_weights).sum() * 50
    V.radius = 1e300                  # no clamp: V = z + L everywhere
    np.testing.assert_allclose(V.value(far), net.value(far) + L.value(far), rtol=1e-12)
    V.radius = 2.0
    W = pickle.loads(pickle.dumps(V))
    assert W.radius == 2.0 and np.array_equal(W.centre, V.centre)
    np.testing.assert_array_equal(W.value_and_grad(far)[1], V.value_and_grad(far)[1])
    with pytest.raises(ValueError, match="radius"):
        V.radius = -1.0
    with pytest.raises(ValueError, match="centre"):
        ClampedSum(net, L, [1.0, 1.0], mean[:2])
    V.weights = [0.0, 2.0]            # z's weight 0: z is not evaluated
    np.testing.assert_allclose(V.value(far), 2.0 * L.value(far), rtol=1e-12)


def _trusted_case(seed=2, d=4):
    rng, net, mean, cov = _clamped_case(seed, d)
    exact = models.Gaussian(mean, cov)
    W = np.linalg.inv(np.linalg.cholesky(cov))
    return rng, net, exact, mean, cov, W


def test_trusted_drive_matches_numpy_and_counts_each_side():
    from fastsurrogate.core import TrustedDrive
    rng, net, exact, mean, cov, W = _trusted_case()
    W_upper = W + np.triu(rng.normal(size=W.shape), 1)     # only the lower triangle counts
    V = TrustedDrive(net, exact, mean, W_upper, radius=2.0)
    n_in = n_out = 0
    for scale in (0.05, 0.5, 1.0, 3.0, 30.0):
        for _ in range(4):
            q = mean + scale * rng.normal(size=4)
            r = np.sqrt((q - mean) @ np.linalg.solve(cov, q - mean))   # the NumPy reference
            ref = net if r <= 2.0 else exact
            n_in, n_out = n_in + (r <= 2.0), n_out + (r > 2.0)
            u, g = V.value_and_grad(q)
            u_ref, g_ref = ref.value_and_grad(q)
            assert u == u_ref and np.array_equal(g, g_ref)
            assert V.distance(q) == pytest.approx(r, rel=1e-12)
    assert n_in > 0 and n_out > 0
    assert (V.n_surrogate, V.n_exact) == (n_in, n_out)
    Q = mean + rng.normal(size=(7, 4))
    np.testing.assert_allclose(V.distance(Q), [V.distance(q) for q in Q], rtol=1e-12)
    V.reset_counts()
    assert (V.n_surrogate, V.n_exact) == (0, 0)
    V.value(np.full(4, np.nan))         # a NaN distance goes to the exact potential
    assert V.n_exact == 1


def test_trusted_drive_finite_differences_radius_pickle_and_bad_input():
    from fastsurrogate.core import TrustedDrive
    from fastsurrogate.diagnostics import check_gradient
    rng, net, exact, mean, cov, W = _trusted_case(3)
    V = TrustedDrive(net, exact, mean, W, radius=1.5)
    for scale in (0.2, 6.0):            # inside, outside (away from the sphere)
        q = mean + scale * rng.normal(size=4)
        assert check_gradient(V, q).ok
    far = mean + 40.0 * rng.normal(size=4)
    V.radius = 1e300                    # the network everywhere
    assert V.value(far) == net.value(far)
    V.radius = 0.0                      # the exact potential everywhere but the centre
    assert V.value(far) == exact.value(far)
    V.radius = 1.5
    W2 = pickle.loads(pickle.dumps(V))
    assert W2.radius == 1.5 and np.array_equal(W2.whiten, V.whiten)
    assert np.array_equal(W2.value_and_grad(far)[1], V.value_and_grad(far)[1])
    with pytest.raises(ValueError, match="radius"):
        V.radius = np.nan
    with pytest.raises(ValueError, match="centre"):
        TrustedDrive(net, exact, mean[:2], W, 1.0)
    with pytest.raises(ValueError, match="whiten"):
        TrustedDrive(net, exact, mean, W[:3], 1.0)
    with pytest.raises(ValueError, match="same dim"):
        TrustedDrive(net, models.StandardNormal(3), mean, W, 1.0)
    with pytest.raises(TypeError, match="exact"):
        TrustedDrive(net, exact.value, mean, W, 1.0)


def test_trusted_drive_from_points_holds_the_quantile():
    from fastsurrogate.core import TrustedDrive
    rng, net, exact, mean, cov, _ = _trusted_case(4)
    Q = rng.multivariate_normal(mean, cov, size=400)
    V = TrustedDrive.from_points(net, exact, Q, 0.9)
    r = V.distance(Q)
    assert np.mean(r <= V.radius) == pytest.approx(0.9, abs=1.0 / 400)
    C = np.cov(Q.T)
    ref = np.sqrt(np.einsum("ij,ij->i", Q - Q.mean(0), np.linalg.solve(C, (Q - Q.mean(0)).T).T))
    np.testing.assert_allclose(r, ref, rtol=1e-9)
    assert TrustedDrive.from_points(net, exact, Q, 1.0).radius == pytest.approx(ref.max())
    # points in a plane (a singular covariance): the floor keeps W finite
    flat = np.column_stack([Q[:, :3], np.zeros(400)])
    assert np.all(np.isfinite(TrustedDrive.from_points(net, exact, flat, 0.99).whiten))
    for bad in (0.0, 1.5, np.nan):
        with pytest.raises(ValueError, match="quantile"):
            TrustedDrive.from_points(net, exact, Q, bad)
    with pytest.raises(ValueError, match="n >= 2"):
        TrustedDrive.from_points(net, exact, Q[:1], 0.9)
