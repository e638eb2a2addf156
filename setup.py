"""Build the compiled parts of fastsurrogate.

Only the extension list, the static library every extension links
(csrc/fs_common.c) and the Cython directives live here; metadata is in
pyproject.toml.  Environment switches:

FASTSURROGATE_DEBUG=1    boundscheck/wraparound on, -O0 -g, no -march flags
FASTSURROGATE_SANITIZE=1 the debug build with AddressSanitizer and UBSan (run
                         Python with LD_PRELOAD=$(gcc -print-file-name=libasan.so);
                         see .ci/sanitize)
FASTSURROGATE_NO_OPENMP=1 build without OpenMP even where the compiler has it
"""
import hashlib
import os
import shutil
import sys
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = "csrc"
SANITIZE = os.environ.get("FASTSURROGATE_SANITIZE", "0") == "1"
DEBUG = SANITIZE or os.environ.get("FASTSURROGATE_DEBUG", "0") == "1"


def _compiler_accepts(flags, source="int main(void){return 0;}\n"):
    """True when the C compiler builds `source` with `flags` (and links it)."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler
    cc = new_compiler()
    customize_compiler(cc)
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write(source)
        try:
            objs = cc.compile([src], output_dir=tmp, extra_postargs=flags)
            cc.link_executable(objs, os.path.join(tmp, "probe"), extra_postargs=flags)
        except Exception:
            return False
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _openmp_flags():
    if os.environ.get("FASTSURROGATE_NO_OPENMP", "0") == "1" or sys.platform == "win32":
        return []
    probe = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
    return ["-fopenmp"] if _compiler_accepts(["-fopenmp"], probe) else []


OPENMP = _openmp_flags()
if DEBUG:
    CFLAGS = ["-O0", "-g", "-std=c99"]
else:
    # Hot kernels carry their own target_clones (AVX-512 / AVX2+FMA / baseline),
    # so the wheel stays portable; no -march=native here.
    CFLAGS = ["-O3", "-std=c99", "-fno-math-errno"]
CFLAGS = CFLAGS + ["-D_GNU_SOURCE"] + OPENMP
LDFLAGS = list(OPENMP)
if SANITIZE:
    _SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer"]
    CFLAGS += _SAN
    LDFLAGS += _SAN

NP_RANDOM_LIB = os.path.join(os.path.dirname(np.__file__), "random", "lib")

# C sources that more than one extension needs are compiled once, into static
# libraries that the extensions link (build_clib), with the extensions' flags
# (sanitizers included) and position-independent code, since they end up
# inside shared objects.  Each extension takes from an archive only the
# objects it references; a source listed by two extensions would otherwise
# be compiled twice, and in a parallel build_ext (-j) the two compilations
# race on one object file.
#   fs_common: status messages, the scratch pool (every extension)
#   fs_chain: adaptation, transitions, the HMC / NUTS / surrogate chain loops
#             (core._hmc, core._rmhmc)
#   fs_glm: the data-sum GLM kernels (models._glm, core._rmhmc, core._sg)
#   fs_network: random-network kernels (surrogates._network, core._rmhmc)
LIB_CFLAGS = CFLAGS + ([] if sys.platform == "win32" else ["-fPIC"])


def _library(name, sources):
    return (name, {
        "sources": [os.path.join(CSRC, s) for s in sources],
        "include_dirs": [CSRC],
        "cflags": LIB_CFLAGS,
        # every header: a change to one rebuilds the library
        "obj_deps": {"": sorted(os.path.join(CSRC, f) for f in os.listdir(CSRC)
                                if f.endswith(".h"))},
    })


# in link order: a library before the ones it uses
LIBRARIES = [
    _library("fs_chain", ["fs_adapt.c", "fs_transition.c", "fs_hmc.c", "fs_nuts.c",
                          "fs_surrogate.c"]),
    _library("fs_glm", ["fs_glm.c"]),
    _library("fs_network", ["fs_network.c"]),
    _library("fs_common", ["fs_common.c"]),
]


def ext(name, sources, rng=False):
    """The extension fastsurrogate.<name> ("core._hmc") from <name>.pyx and csrc/
    sources; every extension also links the LIBRARIES above (built first by
    build_ext_after_clib), before NumPy's random library (fs_transition.c
    draws from it)."""
    kw = dict(
        include_dirs=[CSRC, np.get_include()],
        extra_compile_args=CFLAGS,
        extra_link_args=LDFLAGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        libraries=[lib for lib, _ in LIBRARIES],
    )
    if rng:
        kw["library_dirs"] = [NP_RANDOM_LIB]
        kw["libraries"] += ["npyrandom", "m"]
    srcs = [f"fastsurrogate/{name.replace('.', '/')}.pyx"] + [os.path.join(CSRC, s) for s in sources]
    return Extension(f"fastsurrogate.{name}", srcs, **kw)


ALL_EXTENSIONS = [
    # core: the contract, the chain loop, BLAS
    ext("core._blas", []),
    ext("core._potential", ["fs_compose.c"]),
    ext("core._hmc", [], rng=True),
    # Riemannian-manifold HMC: metrics and the generalized leapfrog
    ext("core._rmhmc", ["fs_rmhmc.c", "fs_metrics.c"], rng=True),
    # models: data-sum GLM kernels and the other compiled models
    ext("models._glm", []),
    # stochastic-gradient baselines (SGLD, SGHMC) on GLM minibatches
    ext("core._sg", ["fs_sg.c"], rng=True),
    ext("models._models", ["fs_models.c", "fs_garch.c", "fs_gpreg.c"]),
    ext("models._papers", ["fs_papers.c"]),
    ext("models._pde", ["fs_pde.c"]),
    # surrogates: random networks, their online trainers, gradient networks
    ext("surrogates._network", []),
    ext("surrogates._online", ["fs_greville.c", "fs_smw.c"]),
    ext("surrogates._mlp", ["fs_mlp.c"]),
]
# Development convenience: FASTSURROGATE_EXTENSIONS=_blas,_glm builds a subset
# (by the module's last name).
_only = os.environ.get("FASTSURROGATE_EXTENSIONS")
EXTENSIONS = [e for e in ALL_EXTENSIONS
              if not _only or e.name.split(".")[-1] in _only.split(",")]


class build_clib_by_flags(build_clib):
    """build_clib into a folder of its own for each set of LIB_CFLAGS, so that
    a build with other flags in the same tree (FASTSURROGATE_DEBUG,
    FASTSURROGATE_SANITIZE) never reuses objects or an archive compiled with
    the old ones; build_ext links from that folder."""

    def finalize_options(self):
        super().finalize_options()
        flags = "clib-" + hashlib.sha256(" ".join(LIB_CFLAGS).encode()).hexdigest()[:12]
        self.build_clib = os.path.join(self.build_clib, flags)
        self.build_temp = os.path.join(self.build_temp, flags)


class build_ext_after_clib(build_ext):
    """build_ext that builds the static LIBRARIES first: `setup.py build`
    and pip run build_clib before build_ext anyway, `setup.py build_ext
    --inplace` alone would not (run_command runs it once either way).
    The extensions compile on every core: no two of them share a source
    (test_packaging checks it), so no two compilations write one object file."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self):
        if self.distribution.has_c_libraries():
            self.run_command("build_clib")
            # an extension links the archives statically: relink it when one
            # is newer (else an in-place rebuild after a change to csrc/*.c
            # keeps the old code in every extension whose .pyx did not change)
            clib = self.get_finalized_command("build_clib")
            archives = [os.path.join(clib.build_clib, clib.compiler.library_filename(
                lib, lib_type="static")) for lib, _ in LIBRARIES] if clib.compiler else []
            for e in self.extensions:
                e.depends = list(e.depends or []) + [a for a in archives if a not in e.depends]
        super().run()


class build_py_with_headers(build_py):
    """Ship the C headers inside the package (fastsurrogate.get_include())."""

    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "fastsurrogate", "include")
        os.makedirs(dest, exist_ok=True)
        for fn in os.listdir(os.path.join(HERE, CSRC)):
            if fn.endswith(".h"):
                shutil.copy(os.path.join(HERE, CSRC, fn), dest)


DIRECTIVES = dict(
    language_level=3,
    boundscheck=DEBUG,
    wraparound=DEBUG,
    initializedcheck=DEBUG,
    cdivision=True,
    embedsignature=True,
)

setup(
    ext_modules=cythonize(EXTENSIONS, compiler_directives=DIRECTIVES,
                          include_path=[HERE],
                          # in parallel where multiprocessing forks (elsewhere
                          # its workers would import this script again)
                          nthreads=(os.cpu_count() or 1) if sys.platform == "linux" else 0),
    libraries=LIBRARIES,
    cmdclass={"build_py": build_py_with_headers, "build_clib": build_clib_by_flags,
              "build_ext": build_ext_after_clib},
)
