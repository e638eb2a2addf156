"""pytest-benchmark: the fused logistic-regression U + grad against NumPy and the
memory floor (one plain read of X), one group per problem size.

    python -m pytest bench/test_bench_glm.py --benchmark-only

Every benchmark also checks its result.  Speed claims are ratios within one
run: see bench/glm_ratios.py, which prints the acceptance ratios.

NumPy's BLAS threads: limited with threadpoolctl when it is installed (the
NumPy benchmark then runs with 1 and with 2 BLAS threads); otherwise NumPy
uses whatever BLAS threads it started with (set OPENBLAS_NUM_THREADS before
running pytest to choose), recorded in the benchmark's extra_info.
"""
import contextlib
import os

import numpy as np
import pytest

from fastsurrogate.models._glm import LogisticRegression, _read_floor
from glm_ratios import PRIOR_SD, make_problem, numpy_logistic

SIZES = [(100_000, 50), (50_000, 200)]

try:
    from threadpoolctl import threadpool_limits
    BLAS_THREADS = [1, 2]
except ImportError:   # no portable way to change BLAS threads after import
    threadpool_limits = None
    BLAS_THREADS = [None]


@pytest.fixture(scope="module", params=SIZES, ids=[f"N{n}_d{d}" for n, d in SIZES])
def problem(request):
    n, d = request.param
    X, y, beta = make_problem(n, d)
    value, grad = numpy_logistic(X, y, beta)
    return dict(n=n, d=d, X=X, y=y, beta=beta, value=value, grad=grad, total=X.sum())


def group(problem):
    return f"logistic U+grad N={problem['n']} d={problem['d']}"


def check(problem, result):
    value, grad = result
    assert value == pytest.approx(problem["value"], rel=1e-10)
    np.testing.assert_allclose(grad, problem["grad"], rtol=1e-9,
                               atol=1e-9 * np.abs(problem["grad"]).max())


@pytest.mark.parametrize("n_threads", [1, 2])
def test_c_logistic(benchmark, problem, n_threads):
    benchmark.group = group(problem)
    benchmark.extra_info["n_threads"] = n_threads
    model = LogisticRegression(problem["X"], problem["y"], prior_sd=PRIOR_SD,
                               n_threads=n_threads)
    check(problem, benchmark(model.value_and_grad, problem["beta"]))


@pytest.mark.parametrize("blas_threads", BLAS_THREADS)
def test_numpy_logistic(benchmark, problem, blas_threads):
    benchmark.group = group(problem)
    if blas_threads is None:
        ctx = contextlib.nullcontext()
        benchmark.extra_info["blas_threads"] = (
            "default (threadpoolctl not installed; OPENBLAS_NUM_THREADS="
            f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})")
    else:
        ctx = threadpool_limits(blas_threads, user_api="blas")
        benchmark.extra_info["blas_threads"] = blas_threads
    with ctx:
        result = benchmark(numpy_logistic, problem["X"], problem["y"], problem["beta"])
    check(problem, result)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_read_floor(benchmark, problem, n_threads):
    benchmark.group = group(problem)
    benchmark.extra_info["n_threads"] = n_threads
    total = benchmark(_read_floor, problem["X"], n_threads)
    assert total == pytest.approx(problem["total"], rel=1e-9, abs=1e-6)
