"""The package's file format: one ``.npz`` (NumPy's zip of ``.npy`` arrays,
read with ``allow_pickle=False``) whose member ``__header__`` is UTF-8 JSON,
written atomically and checked against a digest of its arrays when read.
Checkpoints (:mod:`fastsurrogate.samplers._checkpoint`) and saved surrogates
(:mod:`fastsurrogate.surrogates._persist`) are such files."""
import hashlib
import json
import os

import numpy as np

__all__ = ["write_npz", "read_npz"]


def _jsonable(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def write_npz(path, header, arrays):
    """Write header (JSON) + arrays to `path` atomically: a tmp file, fsynced,
    moved over `path` with os.replace, and the directory fsynced (the rename
    itself durable).  A tmp file left by a writer that was killed (its pid
    no longer runs) is removed first."""
    path = os.fspath(path)
    _remove_stale_tmp(path)
    tmp = f"{path}.tmp{os.getpid()}"
    header = dict(header, digest=_digest(arrays))
    blob = np.frombuffer(json.dumps(header, default=_jsonable).encode("utf-8"), dtype=np.uint8)
    try:
        with open(tmp, "wb") as f:
            np.savez(f, __header__=blob, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(os.path.dirname(os.path.abspath(path)))


def _digest(arrays):
    """BLAKE2b of every array's name, dtype, shape and bytes, in name order:
    a file whose members were rewritten, added or removed after it was
    written (still a valid zip) no longer matches it."""
    h = hashlib.blake2b(digest_size=32)
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode("utf-8"))
        h.update(a.view(np.uint8).reshape(-1) if a.size else b"")
    return h.hexdigest()


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:                 # pragma: no cover - a folder we may not open
        return
    try:
        os.fsync(fd)
    except OSError:                 # pragma: no cover - file systems without it
        pass
    finally:
        os.close(fd)


def _remove_stale_tmp(path):
    """Remove ``<path>.tmp<pid>`` files whose writer is gone."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        pid = entry[len(name) + 4:]
        if not (entry.startswith(name + ".tmp") and pid.isdigit()) or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)            # still running: its file, leave it
        except ProcessLookupError:
            try:
                os.remove(os.path.join(folder, entry))
            except OSError:
                pass
        except (PermissionError, OverflowError, OSError):
            pass


def read_npz(path, fmt, version):
    """(header, arrays) of a file written by :func:`write_npz`; checks format and version."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise ValueError(f"{path!r} is not a readable .npz file: {exc}") from None
    if magic[:2] != b"PK":       # np.load would take it for a pickle
        raise ValueError(f"{path!r} is not a readable .npz file (no zip header): not a {fmt} "
                         "file")
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - OSError, ValueError, zipfile.BadZipFile, ...
        raise ValueError(f"{path!r} is not a readable .npz file: {exc}") from None
    with z:
        if "__header__" not in z.files:
            raise ValueError(f"{path!r} has no __header__: not a {fmt} file")
        try:
            header = json.loads(bytes(z["__header__"]).decode("utf-8"))
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            raise ValueError(f"{path!r}: its header is damaged ({type(exc).__name__}: "
                             f"{exc}); not a readable {fmt} file") from None
        if not isinstance(header, dict):
            raise ValueError(f"{path!r}: its header is not a {fmt} header")
        if header.get("format") != fmt:
            raise ValueError(f"{path!r} is a {header.get('format')!r} file, not {fmt!r}")
        if header.get("version", 0) > version:
            raise ValueError(f"{path!r} has {fmt} version {header['version']}; this "
                             f"fastsurrogate reads up to version {version}")
        arrays = {}
        for k in z.files:
            if k == "__header__":
                continue
            try:
                arrays[k] = z[k]
            except Exception as exc:  # noqa: BLE001 - ValueError, OSError, zlib.error, BadZipFile
                raise ValueError(f"{path!r}: its member {k!r} is damaged ({exc})") from None
    if "digest" in header and _digest(arrays) != header["digest"]:
        raise ValueError(f"{path!r}: its arrays do not match the digest written with them "
                         f"(members were changed, added or removed after it was written); "
                         f"refusing to read it as a {fmt} file")
    return header, arrays
