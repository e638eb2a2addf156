"""A downstream extension built against the installed package.

Like numpy's test_extending: a tiny Cython module that cimports
fastsurrogate's Potential, is compiled at test time against
``fastsurrogate.get_include()`` and the shipped ``.pxd`` files, and calls the
C struct with the GIL released.  Also the ctypes path through the
``"fastsurrogate.potential_v1"`` capsule.
"""
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import fastsurrogate as fs

DOWNSTREAM_PYX = textwrap.dedent('''
    # cython: language_level=3, boundscheck=False, wraparound=False
    from fastsurrogate.core._potential cimport Potential
    from fastsurrogate.core._common cimport fs_potential, FS_OK
    import numpy as np

    def value_and_grad_nogil(Potential pot, const double[::1] q, long repeats=1):
        """(status, U, grad U) from the C struct, evaluated without the GIL."""
        cdef fs_potential p = pot.pot
        if q.shape[0] != p.dim:
            raise ValueError("q has the wrong length")
        g_arr = np.empty(p.dim)
        cdef double[::1] g = g_arr
        cdef double value = 0.0
        cdef int status = FS_OK
        cdef long i
        with nogil:
            for i in range(repeats):
                status = p.eval(p.state, &q[0], &value, &g[0])
                if status != FS_OK:
                    break
        return status, value, g_arr

    def dim_of(Potential pot):
        return pot.pot.dim
''')

SETUP_PY = textwrap.dedent('''
    from Cython.Build import cythonize
    from setuptools import Extension, setup
    # include_dirs = [fastsurrogate.get_include(), numpy.get_include()]
    ext = Extension("fs_downstream", ["fs_downstream.pyx"],
                    include_dirs={include_dirs!r},
                    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])
    setup(name="fs_downstream", ext_modules=cythonize([ext], include_path=[{pkg_parent!r}]))
''')


def _models():
    rng = np.random.default_rng(3)
    X = np.column_stack([np.ones(400), rng.normal(size=(400, 4))])
    y = (rng.uniform(size=400) < 1 / (1 + np.exp(-X @ [0.3, 1.0, -0.5, 0.2, 0.0]))).astype(float)
    glm = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    from fastsurrogate.surrogates.random_network import train_random_network
    Q = rng.normal(size=(300, 5)) * 0.3
    u = np.array([glm.value(q) for q in Q])
    sur = train_random_network(Q, u, n_hidden=60, seed=1)
    return {"glm": glm, "surrogate": sur}


@pytest.fixture(scope="module")
def downstream(tmp_path_factory):
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    build = tmp_path_factory.mktemp("downstream")
    pkg_parent = str(Path(fs.__file__).resolve().parent.parent)
    (build / "fs_downstream.pyx").write_text(DOWNSTREAM_PYX)
    (build / "setup.py").write_text(SETUP_PY.format(
        pkg_parent=pkg_parent, include_dirs=[fs.get_include(), np.get_include()]))
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"],
                          cwd=build, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sys.path.insert(0, str(build))
    try:
        import fs_downstream
    finally:
        sys.path.remove(str(build))
    return fs_downstream


def test_the_pxd_and_headers_are_installed():
    pkg = Path(fs.__file__).resolve().parent
    for pxd in ("core/_potential.pxd", "core/_common.pxd"):
        assert (pkg / pxd).is_file(), pxd
    for h in ("fs_potential.h", "fs_common.h", "fs_compose.h"):
        assert (Path(fs.get_include()) / h).is_file(), h


@pytest.mark.parametrize("which", ["glm", "surrogate"])
def test_downstream_cython_extension_calls_the_c_struct(downstream, which):
    pot = _models()[which]
    assert downstream.dim_of(pot) == pot.dim
    q = np.linspace(-0.5, 0.5, pot.dim)
    status, u, g = downstream.value_and_grad_nogil(pot, q, 3)
    assert status == 0
    u_ref, g_ref = pot.value_and_grad(q)
    np.testing.assert_allclose(u, u_ref, rtol=1e-13)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)


def test_downstream_rejects_what_is_not_a_potential(downstream):
    with pytest.raises(TypeError):
        downstream.dim_of(object())


class _FsPotential(ctypes.Structure):
    # Must match fs_potential in fs_potential.h.
    _fields_ = [("state", ctypes.c_void_p),
                ("eval", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                          ctypes.POINTER(ctypes.c_double),
                                          ctypes.POINTER(ctypes.c_double),
                                          ctypes.POINTER(ctypes.c_double))),
                ("dim", ctypes.c_int)]


@pytest.mark.parametrize("which", ["glm", "surrogate"])
def test_ctypes_through_the_capsule(which):
    pot = _models()[which]
    cap = pot.capsule
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ptr = get(cap, b"fastsurrogate.potential_v1")
    st = ctypes.cast(ptr, ctypes.POINTER(_FsPotential)).contents
    assert st.dim == pot.dim
    q = np.linspace(-0.5, 0.5, pot.dim)
    g = np.empty(pot.dim)
    u = ctypes.c_double()
    dp = ctypes.POINTER(ctypes.c_double)
    status = st.eval(st.state, q.ctypes.data_as(dp), ctypes.byref(u), g.ctypes.data_as(dp))
    assert status == 0
    u_ref, g_ref = pot.value_and_grad(q)
    np.testing.assert_allclose(u.value, u_ref, rtol=1e-13)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)
    del cap
