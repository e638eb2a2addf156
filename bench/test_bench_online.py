"""Microbenchmarks of the online output-weight trainers.

    python -m pytest bench/test_bench_online.py --benchmark-group-by=group -p no:cacheprovider

Groups: "greville" (one ARNS-HMC point: pseudo-inverse recursion in its two
branches, and ridge RLS) and "smw" (one VHMC gradient-matching point, d = 10).
Each benchmark times a block of BLOCK updates through ``update_many`` (so the
Python call overhead is amortised) and checks the trained weights against
the NumPy batch solution.  For stable numbers run with OPENBLAS_NUM_THREADS=1:
at these sizes a threaded BLAS spends more on thread wake-ups than on work.
"""
import numpy as np
import pytest

from fastsurrogate.surrogates._online import GrevilleTrainer, SMWTrainer

BLOCK = 50


def rel_err(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


@pytest.mark.parametrize("s", [100, 200, 400])
@pytest.mark.benchmark(group="greville")
def test_greville_in_span(benchmark, s):
    """c = 0 branch (n > s): the steady state of ARNS-HMC."""
    rng = np.random.default_rng(s)
    n0 = 2 * s
    H = rng.standard_normal((n0 + BLOCK, s))
    y = rng.standard_normal(n0 + BLOCK)
    tr = GrevilleTrainer.from_batch(H[:n0], y[:n0])

    def setup():
        tr.resync(H[:n0], y[:n0])
        return (H[n0:], y[n0:]), {}

    benchmark.pedantic(tr.update_many, setup=setup, rounds=20, iterations=1)
    assert tr.n_seen == n0 + BLOCK
    assert rel_err(tr.weights, np.linalg.pinv(H) @ y) < 1e-8


@pytest.mark.parametrize("s", [100, 200, 400])
@pytest.mark.benchmark(group="greville")
def test_greville_new_direction(benchmark, s):
    """c != 0 branch (n < s): Phi and Theta both change."""
    rng = np.random.default_rng(s + 1)
    n0 = s // 4
    H = rng.standard_normal((n0 + BLOCK, s))
    y = rng.standard_normal(n0 + BLOCK)
    tr = GrevilleTrainer.from_batch(H[:n0], y[:n0])

    def setup():
        tr.resync(H[:n0], y[:n0])
        return (H[n0:], y[n0:]), {}

    benchmark.pedantic(tr.update_many, setup=setup, rounds=20, iterations=1)
    assert tr.n_new_direction == BLOCK
    assert rel_err(tr.weights, np.linalg.pinv(H) @ y) < 1e-8


@pytest.mark.parametrize("s", [100, 200, 400])
@pytest.mark.benchmark(group="greville")
def test_greville_ridge(benchmark, s):
    rng = np.random.default_rng(s + 2)
    n0 = 2 * s
    lam = 0.1
    H = rng.standard_normal((n0 + BLOCK, s))
    y = rng.standard_normal(n0 + BLOCK)
    tr = GrevilleTrainer.from_batch(H[:n0], y[:n0], ridge=lam)

    def setup():
        tr.resync(H[:n0], y[:n0])
        return (H[n0:], y[n0:]), {}

    benchmark.pedantic(tr.update_many, setup=setup, rounds=20, iterations=1)
    ref = np.linalg.solve(H.T @ H + lam * np.eye(s), H.T @ y)
    assert rel_err(tr.weights, ref) < 1e-8


@pytest.mark.parametrize("s", [100, 200, 400])
@pytest.mark.benchmark(group="smw")
def test_smw_update(benchmark, s):
    d = 10
    rng = np.random.default_rng(s + 3)
    n0 = 100
    As = rng.standard_normal((n0 + BLOCK, d, s))
    gs = rng.standard_normal((n0 + BLOCK, d))
    tr = SMWTrainer(s, d, 1.0)

    def setup():
        tr.solve_batch(As[:n0], gs[:n0])
        return (As[n0:], gs[n0:]), {}

    benchmark.pedantic(tr.update_many, setup=setup, rounds=20, iterations=1)
    G = np.einsum("nds,ndr->sr", As, As) + np.eye(s)
    ref = np.linalg.solve(G, np.einsum("nds,nd->s", As, gs))
    assert rel_err(tr.weights, ref) < 1e-8
