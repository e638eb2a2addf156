"""Surrogate gradient: the C random-basis network beside NumPy (group "network-grad").

    python -m pytest bench/test_bench_network.py --benchmark-group-by=group

Each benchmark asserts its result against the NumPy reference.  For the
ratios measured in one run, use ``python bench/network_ratios.py``.
"""
import numpy as np
import pytest
from scipy.special import expit

from fastsurrogate.surrogates._network import RandomNetwork

SIZES = [(2000, 50), (1000, 24), (2500, 60)]
IDS = [f"s{s}-d{d}" for s, d in SIZES]


def _setup(s, d):
    net = RandomNetwork.random(d, s, "softplus", seed=0)
    rng = np.random.default_rng(1)
    net.output_weights = rng.standard_normal(s) / np.sqrt(s)
    q = rng.standard_normal(d)
    W, b, v = np.array(net.W), np.array(net.bias), net.output_weights
    expected = W.T @ (v * expit(W @ q + b))
    return net, q, W, b, v, expected


@pytest.mark.benchmark(group="network-grad")
@pytest.mark.parametrize("s,d", SIZES, ids=IDS)
def test_grad_c(benchmark, s, d):
    net, q, W, b, v, expected = _setup(s, d)
    g = benchmark(net.grad, q)
    np.testing.assert_allclose(g, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.benchmark(group="network-grad")
@pytest.mark.parametrize("s,d", SIZES, ids=IDS)
def test_grad_c_loop(benchmark, s, d):
    """100 gradients in one C loop (no Python per call); the time is per 100."""
    net, q, W, b, v, expected = _setup(s, d)
    benchmark(net._eval_loop, q, 100, False, True)
    np.testing.assert_allclose(net.grad(q), expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.benchmark(group="network-grad")
@pytest.mark.parametrize("s,d", SIZES, ids=IDS)
def test_grad_numpy(benchmark, s, d):
    net, q, W, b, v, expected = _setup(s, d)

    def numpy_grad():
        t = W @ q + b
        return W.T @ (v * expit(t))

    g = benchmark(numpy_grad)
    np.testing.assert_allclose(g, net.grad(q), rtol=0, atol=1e-12 * np.abs(g).max())
