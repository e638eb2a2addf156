"""blas_threads: the OpenBLAS thread pools behind SciPy (the fs_blas table)
and behind NumPy (numpy.linalg, ``@``) both run a block on the given count
and get their old counts back."""
import glob
import os
import threading

import numpy as np

from fastsurrogate.core._blas_threads import _functions, blas_threads


def _bundled(package):
    mod = __import__(package)
    folder = os.path.join(os.path.dirname(mod.__file__), os.pardir, f"{package}.libs")
    return bool(glob.glob(os.path.join(folder, "*openblas*")))


def test_both_bundled_openblas_pools_are_found():
    want = int(_bundled("scipy")) + int(_bundled("numpy"))
    assert len(_functions()) == want


def test_a_block_runs_every_pool_on_the_count_and_restores_it():
    funcs = _functions()
    before = [get() for get, _ in funcs]
    with blas_threads(1):
        assert [get() for get, _ in funcs] == [1] * len(funcs)
        with blas_threads(1):                       # nested: the outer one restores
            np.linalg.cholesky(np.eye(50) * 2.0)
        assert [get() for get, _ in funcs] == [1] * len(funcs)
    assert [get() for get, _ in funcs] == before
    with blas_threads(None):                        # None: unchanged
        assert [get() for get, _ in funcs] == before


def test_concurrent_blocks_share_one_save():
    funcs = _functions()
    before = [get() for get, _ in funcs]
    inside = threading.Barrier(3)

    def work():
        with blas_threads(1):
            inside.wait()
            inside.wait()

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert [get() for get, _ in funcs] == [1] * len(funcs)
    inside.wait()
    for t in threads:
        t.join()
    assert [get() for get, _ in funcs] == before
