"""Gradient networks (NNgHMC): the C kernels beside NumPy (group "mlp").

    python -m pytest bench/test_bench_mlp.py --benchmark-group-by=group

* single-point forward (the sampler's hot path, one call per leapfrog step):
  dim 50 with 100 hidden units, and dim 200 in 8 blocks of 25 outputs with
  50 hidden units each (the paper's Remark 1); from Python (``grad``) and
  100 calls in one C loop (``_eval_loop``, no Python per call);
* batched loss and gradient on 4000 x 50 (100 hidden units), the training
  kernel, with one BLAS thread;
* a full default fit (100 units, 4000 points, 50-d) in group "mlp-train".

Each benchmark asserts its result against a NumPy reference.

    PYTHONPATH=. python bench/test_bench_mlp.py [--budget 8]

runs the optimiser comparison quoted in fastsurrogate/surrogates/
gradient_network.py: held-out relative gradient error of L-BFGS and Adam
after fixed wall-time budgets, on a correlated 50-d Gaussian and on a 50-d
logistic regression posterior cloud.
"""
import argparse
import time

import numpy as np
import pytest
from scipy.special import expit

from fastsurrogate.surrogates import GradientNetwork, fit_gradient_network
from fastsurrogate.core._blas_threads import blas_threads

SINGLE = [(50, 100, 1), (200, 50, 8)]
SINGLE_IDS = ["d50-h100", "d200-8x50"]


def _net(dim, n_hidden, blocks, seed=0):
    rng = np.random.default_rng(seed)
    net = GradientNetwork.random(dim, n_hidden, blocks, seed=seed,
                                 shift=rng.standard_normal(dim), scale=rng.uniform(0.5, 2, dim),
                                 out_shift=rng.standard_normal(dim),
                                 out_scale=rng.uniform(0.5, 2, dim))
    net.set_params(net.get_params() + 0.05 * rng.standard_normal(net.n_params))
    return net


def _numpy_forward(net):
    W1, b1, W2, b2 = net.W1, net.b1, net.W2_dense, net.b2
    shift, inv, osh, osc = net.shift, 1.0 / net.scale, net.out_shift, net.out_scale

    def forward(q):
        return osc * (W2 @ np.logaddexp(0.0, W1 @ ((q - shift) * inv) + b1) + b2) + osh

    return forward


@pytest.mark.benchmark(group="mlp")
@pytest.mark.parametrize("dim,n_hidden,blocks", SINGLE, ids=SINGLE_IDS)
def test_forward_c(benchmark, dim, n_hidden, blocks):
    net = _net(dim, n_hidden, blocks)
    q = np.random.default_rng(1).standard_normal(dim)
    g = benchmark(net.grad, q)
    expected = _numpy_forward(net)(q)
    np.testing.assert_allclose(g, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.benchmark(group="mlp")
@pytest.mark.parametrize("dim,n_hidden,blocks", SINGLE, ids=SINGLE_IDS)
def test_forward_c_loop(benchmark, dim, n_hidden, blocks):
    """100 forward passes in one C loop (no Python per call); the time is per 100."""
    net = _net(dim, n_hidden, blocks)
    q = np.random.default_rng(1).standard_normal(dim)
    benchmark(net._eval_loop, q, 100, False, True)
    expected = _numpy_forward(net)(q)
    np.testing.assert_allclose(net.grad(q), expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.benchmark(group="mlp")
@pytest.mark.parametrize("dim,n_hidden,blocks", SINGLE, ids=SINGLE_IDS)
def test_forward_numpy(benchmark, dim, n_hidden, blocks):
    net = _net(dim, n_hidden, blocks)
    q = np.random.default_rng(1).standard_normal(dim)
    g = benchmark(_numpy_forward(net), q)
    np.testing.assert_allclose(g, net.grad(q), rtol=0, atol=1e-12 * np.abs(g).max())


def _batch_problem(n=4000, dim=50, n_hidden=100):
    net = _net(dim, n_hidden, 1)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((n, dim))
    Y = rng.standard_normal((n, dim))
    return net, net.get_params(), X, Y


def _numpy_loss_grad(net, theta, X, Y):
    """Standardised-data loss and gradient (plain network), by NumPy."""
    H, d = net.n_hidden, net.dim
    W1 = theta[:H * d].reshape(H, d)
    b1 = theta[H * d:H * d + H]
    W2 = theta[H * d + H:H * d + H + d * H].reshape(d, H)
    b2 = theta[-d:]
    Z = X @ W1.T + b1
    A = np.logaddexp(0.0, Z)
    R = A @ W2.T + b2 - Y
    D = (R @ W2) * expit(Z)
    n = len(X)
    g = np.concatenate([(D.T @ X).ravel() / n, D.sum(0) / n, (R.T @ A).ravel() / n, R.sum(0) / n])
    return 0.5 * np.sum(R * R) / n, g


@pytest.mark.benchmark(group="mlp")
def test_loss_grad_c(benchmark):
    net, theta, X, Y = _batch_problem()
    with blas_threads(1):
        loss, g = benchmark(net.loss_and_grad, theta, X, Y, 0.0, True)
    rl, rg = _numpy_loss_grad(net, theta, X, Y)
    np.testing.assert_allclose(loss, rl, rtol=1e-12)
    np.testing.assert_allclose(g, rg, rtol=0, atol=1e-10 * np.abs(rg).max())


@pytest.mark.benchmark(group="mlp")
def test_loss_grad_numpy(benchmark):
    net, theta, X, Y = _batch_problem()
    with blas_threads(1):
        loss, g = benchmark(_numpy_loss_grad, net, theta, X, Y)
    np.testing.assert_allclose(loss, net.loss_and_grad(theta, X, Y, 0.0, True)[0], rtol=1e-12)


# ---- training ------------------------------------------------------------------

def gaussian_data(n=4000, dim=50, seed=0):
    """A correlated Gaussian: grad U = P q at draws q ~ N(0, P^-1)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((dim, dim))
    S = A @ A.T / dim + 0.1 * np.eye(dim)
    Q = rng.multivariate_normal(np.zeros(dim), S, size=n)
    return Q, Q @ np.linalg.inv(S).T


def logistic_data(n=4000, dim=50, n_obs=1000, seed=0):
    """Logistic regression (prior N(0, 100 I)): grad U at a cloud of positions
    around the true coefficients, twice as wide as the Laplace posterior."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_obs, dim))
    beta = 0.3 * rng.standard_normal(dim)
    y = (rng.random(n_obs) < expit(X @ beta)).astype(float)
    p = expit(X @ beta)
    H = X.T @ (X * (p * (1 - p))[:, None]) + np.eye(dim) / 100.0
    B = rng.multivariate_normal(beta, 4.0 * np.linalg.inv(H), size=n)
    return B, -(y - expit(B @ X.T)) @ X + B / 100.0


@pytest.mark.benchmark(group="mlp-train")
def test_fit_default(benchmark):
    """The default fit: 100 units, 4000 points, 50-d (seconds, not minutes)."""
    Q, G = gaussian_data()
    net = benchmark.pedantic(fit_gradient_network, args=(Q, G),
                             kwargs=dict(n_hidden=100, seed=1), rounds=1, iterations=1)
    assert net.info["holdout_rel_error"] < 0.05, net.info["holdout_rel_error"]


def compare_optimisers(budget=8.0, n_hidden=100):
    """Held-out relative error of L-BFGS and Adam after wall-time budgets."""
    from scipy.optimize import minimize
    from fastsurrogate.surrogates.gradient_network import _moments

    checkpoints = [budget / 16, budget / 8, budget / 2, budget]
    for label, (Q, G) in (("gaussian", gaussian_data()), ("logistic", logistic_data())):
        rng = np.random.default_rng(1)
        perm = rng.permutation(len(Q))
        ho, tr = perm[:400], perm[400:]
        sh, sc = _moments(Q[tr])
        osh, osc = _moments(G[tr])
        X, T = (Q[tr] - sh) / sc, (G[tr] - osh) / osc
        net = GradientNetwork.random(Q.shape[1], n_hidden, seed=2, shift=sh, scale=sc,
                                     out_shift=osh, out_scale=osc)
        theta0 = net.get_params()

        def rel_error(theta):
            net.set_params(theta)
            return np.linalg.norm(net.gradient_batch(Q[ho]) - G[ho]) / np.linalg.norm(G[ho])

        def lbfgs(memory):
            t0, marks, out = time.perf_counter(), list(checkpoints), []

            def callback(intermediate_result):
                while marks and time.perf_counter() - t0 >= marks[0]:
                    marks.pop(0)
                    out.append(rel_error(intermediate_result.x))
                if not marks:
                    raise StopIteration

            minimize(lambda th: net.loss_and_grad(th, X, T, 1e-6, True), theta0, jac=True,
                     method="L-BFGS-B", callback=callback,
                     options=dict(maxiter=10**6, maxfun=10**6, maxcor=memory, ftol=0, gtol=0))
            return out

        def adam(lr, batch):
            t0, marks, out = time.perf_counter(), list(checkpoints), []
            th, m, v, k = theta0.copy(), np.zeros_like(theta0), np.zeros_like(theta0), 0
            order_rng = np.random.default_rng(0)
            while marks:
                order = order_rng.permutation(len(X))
                for s in range(0, len(X), batch):
                    i = order[s:s + batch]
                    _, g = net.loss_and_grad(th, X[i], T[i], 1e-6, True)
                    k += 1
                    m = 0.9 * m + 0.1 * g
                    v = 0.999 * v + 0.001 * g * g
                    th = th - lr * (m / (1 - 0.9 ** k)) / (np.sqrt(v / (1 - 0.999 ** k)) + 1e-8)
                while marks and time.perf_counter() - t0 >= marks[0]:
                    marks.pop(0)
                    out.append(rel_error(th))
            return out

        runs = [("L-BFGS m=10", lambda: lbfgs(10)), ("L-BFGS m=20", lambda: lbfgs(20))]
        runs += [(f"Adam lr={lr:g} batch={b}", lambda lr=lr, b=b: adam(lr, b))
                 for lr, b in ((1e-3, 128), (3e-3, 128), (1e-2, 128), (3e-3, 32), (3e-3, 512))]
        print(f"\n{label}: held-out ||g_hat - g|| / ||g|| after " +
              ", ".join(f"{c:g} s" for c in checkpoints))
        with blas_threads(1):
            for name, run in runs:
                errs = run()
                print(f"  {name:24s}" + "".join(f"  {e:9.3g}" for e in errs), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=8.0, help="largest wall-time budget (s)")
    compare_optimisers(ap.parse_args().budget)
