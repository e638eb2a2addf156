"""The XLA FFI handler of the JAX bridge: compiled on first use, cached per user.

``_xla_ffi.c`` (shipped beside this file) evaluates an ``fs_potential``
inside a compiled JAX program, with no Python and no host-callback machinery
in the call.  It needs the XLA FFI C header that jaxlib ships, so it cannot
be built with the wheel (pip builds in isolation, without jax); instead the
first :func:`target` call in a process compiles it with the C compiler that
built Python (``sysconfig``, or ``$CC``) into a per-user cache folder, keyed
by a hash of everything the binary depends on, and registers it with
``jax.ffi.register_ffi_target``.  Later processes load the cached library.

When there is no compiler (or the compile fails) :func:`target` returns
None and says why in :func:`unavailable_reason`; the bridge then falls back
to ``jax.pure_callback``.
"""
import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading

from .._headers import get_include

TARGET = "fastsurrogate_potential_v1"
_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_xla_ffi.c")

_lock = threading.Lock()
_state = {"done": False, "target": None, "reason": None, "lib": None, "path": None}


def cache_dir():
    """Folder of the compiled handler: ``$FASTSURROGATE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/fastsurrogate``, else ``~/.cache/fastsurrogate``."""
    d = os.environ.get("FASTSURROGATE_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fastsurrogate")


def compiler():
    """The C compiler command (a list), or None: ``$CC``, else the compiler
    that built Python."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC")
    if not cc or os.name == "nt":
        return None
    cmd = shlex.split(cc)
    if not cmd or shutil.which(cmd[0]) is None:
        return None
    return cmd


def _headers(jax):
    ffi_inc = jax.ffi.include_dir()
    fs_inc = get_include()
    files = [_SOURCE, os.path.join(ffi_inc, "xla", "ffi", "api", "c_api.h"),
             os.path.join(fs_inc, "fs_common.h"), os.path.join(fs_inc, "fs_potential.h")]
    return ffi_inc, fs_inc, files


def _build(jax, cc):
    """Path of the compiled handler (compiling it if the cache lacks it)."""
    ffi_inc, fs_inc, files = _headers(jax)
    # C11: c_api.h repeats typedefs, which C99 forbids
    flags = ["-O2", "-std=c11", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden"]
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            h.update(fh.read())
    h.update(repr((cc, flags, platform.machine(), sys.platform)).encode())
    out_dir = cache_dir()
    path = os.path.join(out_dir, f"xla_ffi_{h.hexdigest()[:20]}.so")
    if os.path.isfile(path):
        return path
    os.makedirs(out_dir, exist_ok=True)
    # compile beside the target, then rename: atomic, so concurrent first
    # uses (several processes) never load a half-written file
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=out_dir)
    os.close(fd)
    try:
        cmd = cc + flags + ["-I", ffi_inc, "-I", fs_inc, _SOURCE, "-o", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise OSError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()[-2000:]}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def target():
    """The registered FFI target name, or None when the handler is unavailable.

    The first call compiles (or loads from the cache) and registers the
    handler; the outcome is kept for the life of the process.
    """
    with _lock:
        if _state["done"]:
            return _state["target"]
        _state["done"] = True
        import jax
        if os.environ.get("FASTSURROGATE_JAX_FFI", "1") == "0":
            _state["reason"] = "FASTSURROGATE_JAX_FFI=0 turns the FFI path off"
            return None
        cc = compiler()
        if cc is None:
            _state["reason"] = ("no C compiler found (set CC, or install the compiler "
                                f"that built Python: {sysconfig.get_config_var('CC')!r})")
            return None
        try:
            path = _build(jax, cc)
            lib = ctypes.CDLL(path)
            jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.fs_xla_potential),
                                        platform="cpu")
        except Exception as exc:    # a compile, load or registration failure
            _state["reason"] = f"{type(exc).__name__}: {exc}"
            return None
        _state.update(target=TARGET, lib=lib, path=path)
        return TARGET


def unavailable_reason():
    """Why :func:`target` returned None (None when it did not)."""
    return _state["reason"]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = (ctypes.py_object, ctypes.c_char_p)


def potential_address(potential):
    """Address of the ``fs_potential`` struct inside a Potential (valid while
    the Potential lives)."""
    return _get_pointer(potential.capsule, b"fastsurrogate.potential_v1")
