"""Online output-weight trainers against batch NumPy references.

GrevilleTrainer (ARNS-HMC, Greville's pseudo-inverse recursion / recursive
ridge) is compared with ``np.linalg.pinv(H) @ y`` and the ridge solve;
SMWTrainer (VHMC gradient matching, eq. 3.19-3.21) with the normal equations
of (3.19) solved by ``np.linalg.solve``.  Acceptance bar: 1e-8 relative after
500 single-point updates with s = 200 (and d = 10 for SMW).
"""
import threading

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.surrogates._online import GrevilleTrainer, SMWTrainer

S = 200
N = 500
RTOL = 1e-8


def rel_err(a, b):
    return np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b)


def pinv_solution(H, y):
    return np.linalg.pinv(H) @ y


def ridge_solution(H, y, lam):
    return np.linalg.solve(H.T @ H + lam * np.eye(H.shape[1]), H.T @ y)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def random_features(rng, n, s, d=20):
    """Hidden features of a random sigmoid network at n Gaussian points."""
    W = rng.standard_normal((s, d)) / np.sqrt(d) * 2.0
    b = rng.standard_normal(s)
    Q = rng.standard_normal((n, d))
    return sigmoid(Q @ W.T + b)


# ---- Greville: pseudo-inverse mode ------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 3])
def test_greville_single_updates_match_pinv(seed):
    """500 one-point updates, s = 200: n < s (minimum norm) and n > s."""
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((N, S))
    y = rng.standard_normal(N)
    tr = GrevilleTrainer(S)
    checkpoints = {50, 150, 199, 200, 201, 350, N}
    for k in range(N):
        tr.update(H[k], y[k])
        n = k + 1
        if n in checkpoints:
            assert tr.n_seen == n
            assert tr.rank == min(n, S)
            assert rel_err(tr.weights, pinv_solution(H[:n], y[:n])) < RTOL, n
    assert tr.n_new_direction == S
    assert tr.n_in_span == N - S


def test_greville_state_matches_definitions():
    """Phi = I - H^+ H and Theta = H^+ H^+T after the updates (Prop. 1)."""
    rng = np.random.default_rng(11)
    H = rng.standard_normal((N, S))
    y = rng.standard_normal(N)
    tr = GrevilleTrainer(S)
    for n_to in (120, N):
        tr.update_many(H[tr.n_seen:n_to], y[tr.n_seen:n_to])
        P = np.linalg.pinv(H[:n_to])
        Theta = P @ P.T
        Phi = np.eye(S) - P @ H[:n_to]
        assert np.abs(tr.Phi - Phi).max() < 1e-10
        assert np.abs(tr.Theta - Theta).max() < RTOL * np.abs(Theta).max()
        assert np.array_equal(tr.Theta, tr.Theta.T)
        assert np.array_equal(tr.Phi, tr.Phi.T)
        # minimum norm: v lies in the row space of H
        assert np.linalg.norm(tr.Phi @ tr.weights) < 1e-10 * np.linalg.norm(tr.weights)


def test_greville_network_features():
    """Features of a random sigmoid network (the ARNS-HMC use) fit like pinv."""
    rng = np.random.default_rng(2)
    s = 60
    H = random_features(rng, 400, s)
    y = np.sin(H @ rng.standard_normal(s))
    assert np.linalg.cond(H) < 1e5            # a well-posed pinv for the reference
    tr = GrevilleTrainer(s)
    for k in range(len(y)):
        tr.update(H[k], y[k])
    ref = pinv_solution(H, y)
    assert rel_err(tr.weights, ref) < RTOL
    assert rel_err(H @ tr.weights, H @ ref) < RTOL


def test_greville_rank_deficient_min_norm():
    """Rows in a 120-dimensional subspace of R^200: after the 120 new
    directions every row takes the c = 0 branch, and the minimum-norm
    least-squares solution is what pinv gives."""
    rng = np.random.default_rng(4)
    basis = rng.standard_normal((120, S)) / np.sqrt(120)
    H = rng.standard_normal((N, 120)) @ basis
    y = rng.standard_normal(N)
    tr = GrevilleTrainer(S)
    for k in range(N):
        tr.update(H[k], y[k])
    assert tr.rank == 120
    assert tr.n_new_direction == 120
    assert tr.n_in_span == N - 120
    assert rel_err(tr.weights, np.linalg.pinv(H, rcond=1e-10) @ y) < RTOL


def test_greville_duplicate_and_collinear_rows():
    """Repeated rows, scaled rows and a zero row while n < s (c = 0 branch)."""
    rng = np.random.default_rng(6)
    base = rng.standard_normal((80, S))
    H = np.vstack([base[:40], base[:10], -3.0 * base[10:20], base[40:],
                   np.zeros((1, S)), 0.5 * base[:5] + 2.0 * base[5:10]])
    y = rng.standard_normal(len(H))
    tr = GrevilleTrainer(S)
    for k in range(len(H)):
        tr.update(H[k], y[k])
    assert tr.rank == 80
    assert tr.n_in_span == len(H) - 80
    assert rel_err(tr.weights, pinv_solution(H, y)) < RTOL


def test_greville_tol_controls_new_directions():
    """A row whose new component is below tol * ||h|| is treated as in the span."""
    rng = np.random.default_rng(7)
    H = rng.standard_normal((30, 50))
    extra = H[:30].T @ rng.standard_normal(30)
    extra += 1e-7 * np.linalg.norm(extra) * rng.standard_normal(50) / np.sqrt(50)
    for tol, expect_rank in ((1e-10, 31), (1e-4, 30)):
        tr = GrevilleTrainer(50, tol=tol)
        tr.update_many(H, np.zeros(30))
        tr.update(extra, 1.0)
        assert tr.rank == expect_rank


def test_greville_update_many_equals_update():
    rng = np.random.default_rng(8)
    H = rng.standard_normal((120, 40))
    y = rng.standard_normal(120)
    a, b = GrevilleTrainer(40), GrevilleTrainer(40)
    a.update_many(H, y)
    for k in range(len(y)):
        b.update(H[k], y[k])
    assert np.array_equal(a.weights, b.weights)
    assert np.array_equal(a.Theta, b.Theta)
    assert a.n_seen == b.n_seen == 120


def test_greville_weights_is_a_copy():
    tr = GrevilleTrainer(5)
    w = tr.weights
    tr.update(np.ones(5), 1.0)
    assert np.all(w == 0.0)
    assert np.allclose(tr.weights, 0.2)


# ---- Greville: ridge mode ----------------------------------------------------

@pytest.mark.parametrize("lam", [1e-2, 1.0, 10.0])
def test_greville_ridge_matches_ridge_solve(lam):
    rng = np.random.default_rng(9)
    H = rng.standard_normal((N, S))
    y = rng.standard_normal(N)
    tr = GrevilleTrainer(S, ridge=lam)
    assert tr.Phi is None
    for k in range(N):
        tr.update(H[k], y[k])
        if k + 1 in (150, N):
            assert rel_err(tr.weights, ridge_solution(H[:k + 1], y[:k + 1], lam)) < RTOL
    P = np.linalg.inv(H.T @ H + lam * np.eye(S))
    assert np.abs(tr.Theta - P).max() < RTOL * np.abs(P).max()


# ---- Greville: batch start and re-synchronisation ----------------------------

@pytest.mark.parametrize("n0", [1, 100, 199, 200, 300])
def test_greville_batch_then_updates_equals_batch_on_all_rows(n0):
    rng = np.random.default_rng(10)
    H = rng.standard_normal((N, S))
    y = rng.standard_normal(N)
    tr = GrevilleTrainer.from_batch(H[:n0], y[:n0])
    assert tr.n_seen == n0
    assert tr.rank == min(n0, S)
    assert rel_err(tr.weights, pinv_solution(H[:n0], y[:n0])) < RTOL
    for k in range(n0, N):
        tr.update(H[k], y[k])
    full = GrevilleTrainer.from_batch(H, y)
    assert rel_err(full.weights, pinv_solution(H, y)) < 1e-12
    assert rel_err(tr.weights, full.weights) < RTOL
    assert np.abs(tr.Theta - full.Theta).max() < RTOL * np.abs(full.Theta).max()


def test_greville_ridge_batch_then_updates():
    rng = np.random.default_rng(12)
    H = rng.standard_normal((N, S))
    y = rng.standard_normal(N)
    tr = GrevilleTrainer.from_batch(H[:100], y[:100], ridge=0.5)
    assert rel_err(tr.weights, ridge_solution(H[:100], y[:100], 0.5)) < 1e-12
    tr.update_many(H[100:], y[100:])
    full = GrevilleTrainer.from_batch(H, y, ridge=0.5)
    assert rel_err(tr.weights, full.weights) < RTOL
    assert rel_err(full.weights, ridge_solution(H, y, 0.5)) < 1e-12


def test_greville_empty_batch_is_empty_state():
    tr = GrevilleTrainer.from_batch(np.zeros((0, 7)), np.zeros(0))
    assert tr.n_seen == 0 and tr.rank == 0
    assert np.array_equal(tr.Phi, np.eye(7))
    assert np.array_equal(tr.Theta, np.zeros((7, 7)))


def test_greville_resync_repairs_an_ill_conditioned_path():
    """Row 200 nearly dependent on the first 199 (cond(H_200) ~ 1e8) spoils
    the recursion (errors ~ eps cond^2); a resync with the data repairs it,
    and updates continue correctly from there."""
    rng = np.random.default_rng(5)
    H = rng.standard_normal((400, S))
    y = rng.standard_normal(400)
    H[199] = H[:199].T @ rng.standard_normal(199) / 14 + 1e-6 * rng.standard_normal(S)
    tr = GrevilleTrainer(S, resync_every=400)
    for k in range(399):
        tr.update(H[k], y[k])
    assert not tr.resync_due
    tr.update(H[399], y[399])
    assert tr.resync_due
    ref = pinv_solution(H, y)
    before = rel_err(tr.weights, ref)
    tr.resync(H, y)
    assert not tr.resync_due and tr.n_seen == 400
    after = rel_err(tr.weights, ref)
    assert after < 1e-12 and after < before
    H2 = np.vstack([H, rng.standard_normal((50, S))])
    y2 = np.r_[y, rng.standard_normal(50)]
    tr.update_many(H2[400:], y2[400:])
    assert rel_err(tr.weights, pinv_solution(H2, y2)) < RTOL


def test_greville_reset():
    rng = np.random.default_rng(13)
    tr = GrevilleTrainer(10)
    tr.update_many(rng.standard_normal((5, 10)), rng.standard_normal(5))
    tr.reset()
    assert tr.n_seen == 0 and tr.rank == 0
    assert np.array_equal(tr.weights, np.zeros(10))


# ---- Greville: validation ----------------------------------------------------

def test_greville_validation():
    with pytest.raises(ValueError, match="n_hidden"):
        GrevilleTrainer(0)
    with pytest.raises(TypeError, match="n_hidden"):
        GrevilleTrainer(3.5)
    with pytest.raises(ValueError, match="ridge"):
        GrevilleTrainer(4, ridge=-1.0)
    with pytest.raises(ValueError, match="ridge"):
        GrevilleTrainer(4, ridge=np.nan)
    with pytest.raises(ValueError, match="tol"):
        GrevilleTrainer(4, tol=-1e-3)
    tr = GrevilleTrainer(4)
    with pytest.raises(ValueError, match=r"h must have shape \(4,\)"):
        tr.update(np.ones(5), 1.0)
    with pytest.raises(ValueError, match=r"h must have shape"):
        tr.update(np.ones((1, 4)), 1.0)
    with pytest.raises(ValueError, match="non-finite"):
        tr.update(np.array([1.0, np.nan, 0.0, 0.0]), 1.0)
    with pytest.raises(ValueError, match="y must be finite"):
        tr.update(np.ones(4), np.inf)
    with pytest.raises(TypeError, match="h must be an array"):
        tr.update("abcd", 1.0)
    with pytest.raises(TypeError, match="y must be a real number"):
        tr.update(np.ones(4), "x")
    with pytest.raises(ValueError, match=r"H must have shape \(n, 4\)"):
        tr.update_many(np.ones((3, 5)), np.ones(3))
    with pytest.raises(ValueError, match=r"y must have shape \(3,\)"):
        tr.update_many(np.ones((3, 4)), np.ones(2))
    with pytest.raises(ValueError, match="non-finite"):
        tr.update_many(np.full((3, 4), np.inf), np.ones(3))
    with pytest.raises(ValueError, match=r"H must have shape"):
        tr.resync(np.ones((3, 5)), np.ones(3))
    with pytest.raises(ValueError, match=r"H must have shape"):
        GrevilleTrainer.from_batch(np.ones(4), np.ones(4))
    assert tr.n_seen == 0                     # nothing reached the C state
    tr.update_many(np.ones((0, 4)), np.ones(0))
    assert tr.n_seen == 0


# ---- SMW gradient matching ---------------------------------------------------

def gradient_features(rng, n_points, s, d):
    """A_t (d x s): column i = sigmoid'(w_i . q_t + b_i) w_i, and gradients g_t
    of a quadratic-plus-quartic potential at Gaussian points q_t."""
    W = rng.standard_normal((s, d))
    b = rng.standard_normal(s)
    Q = rng.standard_normal((n_points, d))
    Z = Q @ W.T + b                                   # (N, s)
    dact = sigmoid(Z) * (1.0 - sigmoid(Z))
    As = np.einsum("ns,sd->nds", dact, W)             # (N, d, s)
    gs = Q + 0.1 * Q ** 3
    return As, gs


def smw_batch(As, gs, lam):
    s = As.shape[2]
    G = np.einsum("nds,ndr->sr", As, As) + lam * np.eye(s)
    rhs = np.einsum("nds,nd->s", As, gs)
    return np.linalg.solve(G, rhs), G


@pytest.mark.parametrize("lam", [1e-2, 1.0])
def test_smw_single_updates_match_batch(lam):
    rng = np.random.default_rng(20)
    d = 10
    As, gs = gradient_features(rng, N, S, d)
    tr = SMWTrainer(S, d, lam)
    for t in range(N):
        tr.update(As[t], gs[t])
        if t + 1 in (50, N):
            ref, _ = smw_batch(As[:t + 1], gs[:t + 1], lam)
            assert rel_err(tr.weights, ref) < RTOL, t + 1
    assert tr.n_seen == N
    ref, G = smw_batch(As, gs, lam)
    C = tr.C
    assert np.array_equal(C, C.T)                     # exactly symmetric
    Cref = np.linalg.inv(G)
    assert np.abs(C - Cref).max() < RTOL * np.abs(Cref).max()
    assert np.linalg.eigvalsh(C).min() > 0.0


def test_smw_gaussian_features():
    rng = np.random.default_rng(21)
    d, s = 10, S
    As = rng.standard_normal((N, d, s))
    gs = rng.standard_normal((N, d))
    tr = SMWTrainer(s, d, 0.1)
    for t in range(N):
        tr.update(As[t], gs[t])
    assert rel_err(tr.weights, smw_batch(As, gs, 0.1)[0]) < RTOL


def test_smw_solve_batch_and_restart():
    rng = np.random.default_rng(22)
    d, s = 10, S
    As, gs = gradient_features(rng, 300, s, d)
    tr = SMWTrainer(s, d, 0.3)
    w = tr.solve_batch(As[:200], gs[:200])
    ref, G = smw_batch(As[:200], gs[:200], 0.3)
    assert rel_err(w, ref) < 1e-10
    assert tr.n_seen == 200
    assert np.array_equal(tr.C, tr.C.T)
    assert np.abs(tr.C - np.linalg.inv(G)).max() < 1e-10 * np.abs(np.linalg.inv(G)).max()
    for t in range(200, 300):                  # online updates continue from the batch
        tr.update(As[t], gs[t])
    assert rel_err(tr.weights, smw_batch(As, gs, 0.3)[0]) < RTOL


def test_smw_update_many_equals_update():
    rng = np.random.default_rng(23)
    As, gs = gradient_features(rng, 40, 30, 4)
    a, b = SMWTrainer(30, 4, 1.0), SMWTrainer(30, 4, 1.0)
    a.update_many(As, gs)
    for t in range(40):
        b.update(As[t], gs[t])
    assert np.array_equal(a.weights, b.weights)
    assert np.array_equal(a.C, b.C)


def test_smw_reset_and_empty_batch():
    rng = np.random.default_rng(24)
    As, gs = gradient_features(rng, 5, 8, 3)
    tr = SMWTrainer(8, 3, 2.0)
    tr.update_many(As, gs)
    tr.reset()
    assert tr.n_seen == 0
    assert np.array_equal(tr.C, np.eye(8) / 2.0)
    assert np.array_equal(tr.solve_batch(np.zeros((0, 3, 8)), np.zeros((0, 3))), np.zeros(8))


def test_smw_validation():
    with pytest.raises(ValueError, match="ridge must be > 0"):
        SMWTrainer(5, 2, 0.0)
    with pytest.raises(ValueError, match="dim"):
        SMWTrainer(5, 0, 1.0)
    with pytest.raises(TypeError, match="n_hidden"):
        SMWTrainer("5", 2, 1.0)
    tr = SMWTrainer(5, 2, 1.0)
    with pytest.raises(ValueError, match=r"A must have shape \(2, 5\)"):
        tr.update(np.ones((5, 2)), np.ones(2))
    with pytest.raises(ValueError, match=r"g must have shape \(2,\)"):
        tr.update(np.ones((2, 5)), np.ones(3))
    with pytest.raises(ValueError, match="non-finite"):
        tr.update(np.full((2, 5), np.nan), np.ones(2))
    with pytest.raises(ValueError, match="non-finite"):
        tr.update(np.ones((2, 5)), np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match=r"As must have shape \(n, 2, 5\)"):
        tr.update_many(np.ones((3, 5, 2)), np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"gs must have shape \(3, 2\)"):
        tr.solve_batch(np.ones((3, 2, 5)), np.ones((2, 2)))
    assert tr.n_seen == 0


def test_trainer_failure_is_a_training_error():
    # A trainer's failure is a TrainingError, still a PotentialError for the
    # code that catches that.
    assert issubclass(fs.TrainingError, fs.PotentialError)
    assert "TrainingError" in fs.__all__
    tr = GrevilleTrainer(4)
    with pytest.raises(fs.TrainingError, match="non-finite"):
        tr.update(np.full(4, 1e200), 1.0)


# ---- threads -----------------------------------------------------------------

def test_trainers_release_gil_and_serialise():
    """Updates from two threads on separate trainers give the same results as
    sequential ones; two threads on one trainer do not corrupt it."""
    rng = np.random.default_rng(30)
    H = rng.standard_normal((300, 100))
    y = rng.standard_normal(300)
    ref = GrevilleTrainer(100)
    ref.update_many(H, y)
    trainers = [GrevilleTrainer(100) for _ in range(2)]
    threads = [threading.Thread(target=tr.update_many, args=(H, y)) for tr in trainers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for tr in trainers:
        assert np.array_equal(tr.weights, ref.weights)
    shared = GrevilleTrainer(100)
    halves = [(H[:150], y[:150]), (H[150:], y[150:])]
    threads = [threading.Thread(target=shared.update_many, args=a) for a in halves]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert shared.n_seen == 300
    assert rel_err(shared.weights, pinv_solution(H, y)) < RTOL
