"""Chains anywhere: the per-chain phases of a run on an executor.

``sample(..., executor=ex)`` hands every per-chain phase of a run (the
``worker(ctx)`` calls of :meth:`Run.each_chain`: warm-up, exploration,
sampling) to ``ex``:

- a :class:`concurrent.futures.ThreadPoolExecutor`: the workers run in this
  process on the caller's threads (exactly as the default threads do);
- any other :class:`concurrent.futures.Executor` (a ``ProcessPoolExecutor``,
  an MPI or Ray pool with that interface) or a Dask ``distributed.Client``:
  each chain's state (its :class:`~fastsurrogate.core.Chain`, generator,
  trace arrays, timings) is pickled, the worker runs where the executor puts
  it, and the state comes back and replaces the local one.

Everything between the per-chain phases stays in the calling process: the
pooled training, the Result.  What runs where:

- HMC, NUTS: each chain's warm-up and sampling run on the executor;
- RNS-HMC: each chain's exploration and exploitation (with its guard
  retraining) on the executor; the network fitted to the pooled
  exploration states is trained once here and shipped to the chains;
- VHMC: the Laplace approximation here; each chain's whole run (its online
  score-matching hook included) on the executor;
- NNgHMC, ARNS-HMC, RMHMC, RNS-RMHMC, SGLD, SGHMC: their chain state (the
  recording potential and trainer, the online hook, the generalized-leapfrog
  chain, the minibatch chain)
  does not pickle, so they take only a ThreadPoolExecutor (a TypeError
  says so before any work).  What each chain computes does not depend on where it runs: chain k
uses child k of the seed's SeedSequence, its generator travels with it, and
the C kernels give bit-for-bit the same result in every process.  The same
seed gives the same draws with threads, processes or a cluster, with any
number of workers.

Potentials are pickled once per phase beside the chains (not once per
chain) and come back as the caller's own objects (a pickle persistent id),
so ``chain.judge is sampler.potential`` still holds after a remote phase.
A model's data travel with it (a GLM built on NumPy arrays pickles X),
except to a ProcessPoolExecutor, whose workers share this machine: there an
X mapped read-only from a file (``np.load(path, mmap_mode="r")``) goes as
the file's name and offset, and any other array of a potential of at least
SPILL_BYTES (16 MB) is written once per run to a temporary file
(:class:`_Spill`); the workers map the files.  A GLM built on Dask arrays
pickles only references to its persisted chunks.

Checkpoints (``checkpoint=`` / ``resume=``, samplers/_checkpoint.py) work
with a ProcessPoolExecutor and a Dask Client: each chain takes its
checkpoint log with its state (a ``RemoteCheckpointer``), replays there when
resuming, and sends each boundary snapshot back while it runs; a
:class:`_Drain` here receives them and writes the file (one for every
chain, as with threads), so a caller killed mid-phase loses at most
``checkpoint_every`` iterations per chain.  A ProcessPoolExecutor's workers
connect to a Unix socket of the caller (:class:`_SocketSender`: one
authenticated connection per snapshot, answered once it is received, so all
of a phase's snapshots arrive before its reply); a Dask cluster's workers
put them on a ``distributed.Queue`` (through the scheduler).  A chain
rerun after its worker died sends the same snapshots again (the older ones
are ignored).  Other executors (an MPI or Ray pool: workers that may be
anywhere) are refused with a ValueError (:func:`check_checkpointing`).

Not remote: a Ctrl-C stops the waiting, cancels chains that have not
started and keeps each chain's rows up to the previous phase (a remote
chain that is running cannot be told to stop; the checkpoint file keeps
the snapshots it sent); progress bars advance when a chain's phase returns.
"""

import io
import mmap
import os
import pickle
import shutil
import socket
import tempfile
import threading
import time
import warnings
import weakref
from concurrent.futures import (Executor, ProcessPoolExecutor, ThreadPoolExecutor, wait,
                                FIRST_EXCEPTION)
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener

import numpy as np

from ..core._hmc import STATUS_CALLBACK
from ..core._potential import Potential, PotentialError
from ._chain import Interrupted

__all__ = ["check_executor", "check_checkpointing", "run_chains", "executor_kind"]

# Run attributes that stay behind (the remote stub gets the rest: sizes, info,
# and the sampler's run-wide state, run.state, e.g. NNgHMC's latest network)
_RUN_LOCAL = {"sampler", "generators", "ctxs", "stop", "_lock", "_bar", "error",
              "executor", "progress", "interrupted", "spill", "checkpoint"}


def _is_dask_client(obj):
    mod = type(obj).__module__ or ""
    return mod.split(".")[0] == "distributed" and hasattr(obj, "submit") and hasattr(obj, "scatter")


def check_executor(executor, sampler=None):
    """`executor` if it is None, a concurrent.futures.Executor or a Dask Client
    (only a ThreadPoolExecutor for a sampler whose chains stay local)."""
    if executor is None or isinstance(executor, ThreadPoolExecutor):
        return executor
    if isinstance(executor, Executor) or _is_dask_client(executor):
        if sampler is not None and not getattr(sampler, "remote_chains", True):
            raise TypeError(f"{sampler.method} chains cannot leave this process (their state "
                            f"does not pickle); pass executor=None or a ThreadPoolExecutor")
        return executor
    raise TypeError("executor must be None, a concurrent.futures.Executor (ThreadPoolExecutor, "
                    "ProcessPoolExecutor, ...) or a dask distributed.Client; got "
                    f"{type(executor).__name__}")


def executor_kind(executor):
    """"default", "threads", "dask" or "pickled" (any other Executor)."""
    if executor is None:
        return "default"
    if isinstance(executor, ThreadPoolExecutor):
        return "threads"
    if _is_dask_client(executor):
        return "dask"
    return "pickled"


def run_chains(run, worker, parallel, desc):
    """Run ``worker(ctx)`` for every chain of `run` on ``run.executor``; sets
    ``run.error`` / ``run.interrupted`` as :meth:`Run.each_chain` expects."""
    ex = run.executor
    kind = executor_kind(ex)
    placement = run.info.setdefault("executor", {"type": type(ex).__name__, "placement": {}})
    if kind == "threads":
        placement["placement"][desc] = ["local thread"] * run.chains
        if parallel:
            _local(run, worker, ex)
        else:
            run._in_turn(worker)
        return
    where = _remote(run, worker, ex, kind)
    placement["placement"][desc] = where


# -- in this process ----------------------------------------------------------------

def _bare_callback_error(exc):
    """A PotentialError that says only "a callback raised": the callback's own
    exception went to another chain.  Chains in threads share a thread-safe
    callback potential and its one held error, so when two raise at once one
    takes the exception and the other finds none; the run reports the one
    with the user's exception (seen under load in test_reliability's
    chains-in-threads failure, which then got the bare error)."""
    return isinstance(exc, PotentialError) and getattr(exc, "status", None) == STATUS_CALLBACK


def _local(run, worker, ex):
    futures = []
    try:
        # submitting inside the try: a Ctrl-C that lands between two submits
        # (a first chain already running) must stop it too, not leave it to
        # run to its end while the interrupt unwinds
        for ctx in run.ctxs:
            futures.append(ex.submit(worker, ctx))
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
            for f in done:
                exc = f.exception()
                if isinstance(exc, KeyboardInterrupt):   # an interruption, wherever it landed
                    run.stop[0] = 1
                    run.interrupted = True
                elif exc is not None and not isinstance(exc, Interrupted):
                    run.stop[0] = 1
                    if run.error is None or (_bare_callback_error(run.error)
                                             and not _bare_callback_error(exc)):
                        run.error = exc
    except KeyboardInterrupt:
        run.stop[0] = 1
        run.interrupted = True
        wait(futures)
    if any(isinstance(f.exception(), Interrupted) for f in futures):
        run.interrupted = run.interrupted or run.error is None


# -- elsewhere: pickled there and back --------------------------------------------------

_TAG = "fastsurrogate.potential"


def _mapped_file(a):
    """(filename, offset, shape, dtype) when ndarray ``a`` is a C-contiguous
    view into a file mapped read-only (``np.load(path, mmap_mode="r")``, an
    ``np.memmap`` in mode "r"), else None."""
    if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and a.size):
        return None
    m = a                   # the memmap that owns the mapping: its data is at m.offset
    while isinstance(m.base, np.ndarray):       # (a sliced memmap keeps its parent's offset)
        m = m.base
    if not (isinstance(m, np.memmap) and isinstance(m.base, mmap.mmap)) or \
            getattr(m, "mode", None) != "r" or not m.filename:
        return None
    delta = a.__array_interface__["data"][0] - m.__array_interface__["data"][0]
    if delta < 0 or delta + a.nbytes > m.nbytes:
        return None
    return os.fspath(m.filename), int(m.offset) + int(delta), a.shape, a.dtype.str


def _open_mapped(filename, offset, shape, dtype):
    """The worker's side of :func:`_mapped_file` and :class:`_Spill`: the same
    bytes, mapped again, copy-on-write (pages shared until written; a
    potential that updates an array in place changes its own copy)."""
    return np.asarray(np.memmap(filename, dtype=np.dtype(dtype), mode="c", offset=offset,
                                shape=tuple(shape), order="C"))


SPILL_BYTES = 1 << 24       # a potential's array this large goes to workers as a file


class _Spill:
    """Large arrays of a run's potentials (X of a GLM, the data in a Python
    potential's closure), written once per run to files in a temporary
    folder that a ProcessPoolExecutor's workers map (as joblib does for its
    process pools): each worker then shares the caller's page cache instead
    of receiving X each phase.  The folder goes when the run does."""

    def __init__(self):
        self.dir = None
        self.files = {}

    def path(self, a):
        key = (id(a), a.__array_interface__["data"][0], a.shape, a.dtype.str)
        hit = self.files.get(key)
        if hit is not None:
            return hit[0]
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="fastsurrogate-")
            weakref.finalize(self, shutil.rmtree, self.dir, ignore_errors=True)
        path = os.path.join(self.dir, f"array{len(self.files)}.bin")
        with open(path, "wb") as f:
            a.tofile(f)
        self.files[key] = (path, a)          # a is kept: its id stays its own
        return path


def _pickler_base(mapped=False, spill=None):
    """The executors' pickler: cloudpickle's (ships with dask; pickles lambdas
    and closures) or pickle's.  ``mapped`` (a ProcessPoolExecutor: workers on
    this machine): arrays that view a file mapped read-only (a data matrix
    from ``np.load(path, mmap_mode="r")``) go as the file's name and offset,
    so a worker maps the same pages instead of receiving a copy of X (which
    it then held twice over, each phase); with ``spill`` (a :class:`_Spill`)
    so do other C-contiguous arrays of at least SPILL_BYTES, written to a
    file once per run."""
    try:
        import cloudpickle
        base = cloudpickle.CloudPickler
    except ImportError:      # pragma: no cover - plain pickle: bound methods only
        base = pickle.Pickler
    if not mapped:
        return base

    class _Pickler(base):
        def reducer_override(self, obj):
            if isinstance(obj, np.ndarray):
                where = _mapped_file(obj)
                if where is not None:
                    return _open_mapped, where
                if spill is not None and obj.nbytes >= SPILL_BYTES and \
                        obj.flags.c_contiguous and not obj.dtype.hasobject:
                    try:
                        return _open_mapped, (spill.path(obj), 0, obj.shape, obj.dtype.str)
                    except OSError:       # no room in the temporary folder: by value
                        pass
            sup = getattr(super(), "reducer_override", None)
            return sup(obj) if sup is not None else NotImplemented

    return _Pickler


def _dumps(obj, tokens, grow=True, mapped=False):
    """Pickle `obj` with every Potential replaced by a token: tokens maps
    id(potential) -> (token, potential); new potentials are added to it
    (grow) or pickled whole (not grow).  ``mapped``: see :func:`_pickler_base`."""
    base = _pickler_base(mapped)

    class _Pickler(base):
        def persistent_id(self, o):
            if isinstance(o, Potential):
                key = id(o)
                if key not in tokens and not grow:
                    return None
                if key not in tokens:
                    tokens[key] = (len(tokens), o)
                return (_TAG, tokens[key][0])
            return None

    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(obj)
    return buf.getvalue()


def _loads(data, table):
    """Unpickle `data`, its potential tokens resolved through `table` (token -> object)."""
    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            tag, token = pid
            if tag != _TAG:
                raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
            return table[token]

    return _Unpickler(io.BytesIO(data)).load()


class _RemoteRun:
    """What a worker can see of its Run away from the calling process."""

    def __init__(self, fields):
        self.__dict__.update(fields)
        self.stop = np.zeros(1, dtype=np.int32)
        self.reported = 0

    def report(self, n):
        self.reported += int(n)

    def describe(self, desc):
        """The progress bar stays in the calling process: nothing to rename here."""

    def phase(self, name):  # pragma: no cover - per-run phases stay local
        raise RuntimeError("a run-wide phase cannot start inside a chain's worker")


def _snapshot(info):
    return {k: (id(v), len(v) if isinstance(v, list) else None) for k, v in info.items()}


def _info_changes(info, before):
    """What a worker did to run.info: [(key, "extend" | "set", value)]."""
    out = []
    for k, v in info.items():
        old = before.get(k)
        if isinstance(v, list):
            start = old[1] if old is not None and old[0] == id(v) else 0
            if len(v) > start:
                out.append((k, "extend", v[start:]))
        elif old is None or old[0] != id(v):
            out.append((k, "set", v))
    return out


def _run_chain_remote(table_bytes, call_bytes):
    """The remote side: rebuild the potentials and the chain's context (of the
    class the call names: the caller's ChainContext), run the worker, send the
    chain's state back (potentials that came in go back as tokens)."""
    table = pickle.loads(table_bytes)
    worker, context_class, state, run_fields, checkpoint = _loads(call_bytes, table)
    run = _RemoteRun(run_fields)
    run.checkpoint = checkpoint         # a RemoteCheckpointer (its log is the chain's), or None
    ctx = context_class.__new__(context_class)
    ctx.__dict__.update(state)
    ctx.run = run
    before = _snapshot(run.info)
    error = None
    try:
        worker(ctx)
    except BaseException as exc:  # noqa: BLE001 - handed back with the chain's rows
        error = exc
    state = {k: v for k, v in ctx.__dict__.items() if k != "run"}
    back = {id(p): (token, p) for token, p in table.items()}
    reply = (state, _info_changes(run.info, before), run.reported,
             f"{socket.gethostname()}:{os.getpid()}",
             checkpoint.finish() if checkpoint is not None else None)
    return _dumps(reply, back, grow=False), _error_bytes(error, ctx.index)


def _error_bytes(error, index):
    """The chain's exception pickled for the caller: itself when it makes
    the round trip (pickled AND unpickled: an exception whose __init__ wants
    other arguments than its args pickles but fails to load, as a TypeError
    unrelated to it), else a RuntimeError naming its type and text."""
    try:
        data = pickle.dumps(error)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - an exception that does not make the round trip
        return pickle.dumps(RuntimeError(
            f"chain {index} failed with {type(error).__module__}.{type(error).__qualname__}: "
            f"{error!s} (the exception itself does not pickle and unpickle, so it cannot "
            f"be sent back from the executor)"))


def _replies(run, futures):
    """(replies, broken): each chain's reply, None for the chains a broken
    process pool failed (their indices in ``broken``); ``(None, None)`` after
    a Ctrl-C (``run.interrupted``) or a failure of the executor itself
    (``run.error``), the futures cancelled."""
    replies, broken = [None] * len(futures), []
    try:
        for k, f in enumerate(futures):
            try:
                replies[k] = f.result()
            except BrokenProcessPool:
                broken.append(k)
    except KeyboardInterrupt:
        run.interrupted = True
    except Exception as exc:  # noqa: BLE001 - the executor itself failed
        run.error = exc
    else:
        return replies, broken
    for f in futures:
        f.cancel()
    return None, None


def _rerun_broken(run, ex, table_bytes, calls, replies, broken, drain=None):
    """A worker process of ``ex`` died (killed, out of memory, a crash in
    native code), and a ProcessPoolExecutor then fails every chain it had:
    those chains' phase runs again, from the same pickled state, on a fresh
    pool of the same kind (so the draws are the ones the first try would
    have made, as when Dask reschedules a lost worker's task).  A chain lost
    a second time keeps the rows it had before the phase; the run stops
    with a RuntimeError carrying the partial Result.  The chains that
    finished keep their work either way."""
    warnings.warn(f"a worker process of the executor died; chain(s) {broken} run their phase "
                  "again on a new process pool", RuntimeWarning, stacklevel=4)
    ctx_kw = {}
    if getattr(ex, "_mp_context", None) is not None:
        ctx_kw["mp_context"] = ex._mp_context
    lost = []
    if drain is not None:
        drain.pause()       # no thread of ours mid-way through a lock when the new pool forks
    with ProcessPoolExecutor(max_workers=min(len(broken), os.cpu_count() or 1),
                             **ctx_kw) as again:
        futures = {k: again.submit(_run_chain_remote, table_bytes, calls[k]) for k in broken}
        if drain is not None:
            drain.start()   # after the submits, as in _remote (a fork pool forks at the first)
        for k, f in futures.items():
            try:
                replies[k] = f.result()
            except BrokenProcessPool:
                lost.append(k)
    if lost:
        run.stop[0] = 1
        if run.error is None:
            run.error = RuntimeError(
                f"chain(s) {lost} lost their worker process twice (the second time on a new "
                "pool): the potential may crash its process; their rows from before this "
                "phase are kept")


def _remote(run, worker, ex, kind):
    """Ship every chain to `ex`, wait, merge the states back in chain order.
    With a checkpoint, each chain takes its log and a channel back for its
    snapshots, which a thread here writes while the phase runs."""
    mapped = isinstance(ex, ProcessPoolExecutor)      # its workers share this file system
    drain = _Drain(run.checkpoint, ex, kind) if run.checkpoint is not None else None
    try:
        tokens, calls = {}, []
        fields = {k: v for k, v in run.__dict__.items() if k not in _RUN_LOCAL}
        for ctx in run.ctxs:
            state = {k: v for k, v in ctx.__dict__.items() if k != "run"}
            ck = None if drain is None else run.checkpoint.remote(ctx.index, drain.sender)
            try:
                calls.append(_dumps((worker, type(ctx), state, fields, ck), tokens,
                                    mapped=mapped))
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                raise TypeError(
                    f"executor={type(ex).__name__} needs the chains' state and the phase to "
                    f"pickle; {exc}") from exc
        table = {token: p for token, p in tokens.values()}
        buf = io.BytesIO()
        if mapped and run.spill is None:
            run.spill = _Spill()
        spill = run.spill if mapped else None
        _pickler_base(mapped, spill)(buf, protocol=5).dump(table)
        table_bytes = buf.getvalue()
        if kind == "dask":
            shared = ex.scatter(table_bytes, hash=False)
            futures = [ex.submit(_run_chain_remote, shared, c, pure=False) for c in calls]
        else:
            futures = [ex.submit(_run_chain_remote, table_bytes, c) for c in calls]
        if drain is not None:
            drain.start()
        replies, broken = _replies(run, futures)
        if replies is not None and broken:
            _rerun_broken(run, ex, table_bytes, calls, replies, broken, drain)
    finally:
        if drain is not None:
            drain.close(run)          # every snapshot sent is written before the merge
    if replies is None:
        return ["interrupted" if run.interrupted else "failed"] * len(futures)
    return _merge_replies(run, replies, table)


def _merge_replies(run, replies, table):
    """Each chain's state (and checkpoint log) from its reply, in chain
    order; returns where each ran."""
    local = {token: p for token, p in table.items()}
    where = []
    for ctx, reply in zip(run.ctxs, replies):
        if reply is None:           # lost twice: the chain keeps its rows from before
            where.append("lost")
            continue
        data, error_bytes = reply
        state, changes, reported, host, log = _loads(data, local)
        ctx.__dict__.update(state)
        run.generators[ctx.index] = ctx.generator
        if log is not None:
            run.checkpoint.returned(ctx.index, log)
        for key, how, value in changes:
            if how == "extend" and isinstance(run.info.get(key), list):
                run.info[key].extend(value)
            else:
                run.info[key] = value
        run.report(reported)
        where.append(host)
        error = pickle.loads(error_bytes)
        if error is not None and run.error is None:
            run.error = error
            run.stop[0] = 1
    return where


# -- checkpoint snapshots from chains elsewhere -------------------------------------------

def check_checkpointing(executor):
    """A ValueError for an executor whose chains cannot send checkpoint
    snapshots back: any other than None, a ThreadPoolExecutor, a
    ProcessPoolExecutor or a Dask Client."""
    if executor is None or isinstance(executor, (ThreadPoolExecutor, ProcessPoolExecutor)) \
            or _is_dask_client(executor):
        return
    raise ValueError(f"checkpoint= and resume= work with executor=None, a ThreadPoolExecutor, "
                     f"a ProcessPoolExecutor or a Dask distributed.Client, not a "
                     f"{type(executor).__name__} (its workers have no way to send the "
                     "chains' snapshots back)")


class _SocketSender:
    """The remote end of a ProcessPoolExecutor's channel (pickled with each
    chain's phase): one connection to the caller's listener per snapshot,
    answered once the caller has it (so a phase's snapshots all arrive
    before its reply)."""

    def __init__(self, address, authkey):
        self.address, self.authkey = address, authkey

    def put(self, data):
        with Client(self.address, authkey=self.authkey) as conn:
            conn.send_bytes(data)
            conn.recv_bytes()


class _Drain:
    """Threads of the calling process that take the snapshots the chains
    send while a phase runs elsewhere and merge them into the run's
    Checkpointer (the receiver), and write the file (the writer: one write
    for however many snapshots arrived during the previous one, so a chain
    never waits for a write).  A ProcessPoolExecutor's workers connect to a
    listening socket here (a Unix socket: its workers are on this machine);
    a Dask cluster's send through a ``distributed.Queue`` (so through the
    scheduler)."""

    def __init__(self, checkpointer, ex, kind):
        self.ck, self.error = checkpointer, None
        self.cond, self.fresh, self.closed = threading.Condition(), False, False
        self.started = False
        if kind == "dask":
            import distributed
            self.queue = self.sender = distributed.Queue(client=ex)
            self.stopping = threading.Event()
            receive = self._serve_queue
        else:
            self.queue = None
            key = os.urandom(32)
            self.listener = Listener(authkey=key)
            self.sender = _SocketSender(self.listener.address, key)
            receive = self._serve_socket
        self.receive = receive
        self.threads = []

    def start(self):
        """Start the threads (after the submits: a pool that forks its
        workers then forks no thread of ours; what a chain sends before
        waits in the socket's backlog or the queue)."""
        self.closed = False
        self.threads = [threading.Thread(target=f, daemon=True, name="fastsurrogate-checkpoint")
                        for f in (self.receive, self._write_loop)]
        for t in self.threads:
            t.start()
        self.started = True

    def pause(self):
        """Stop the threads once every snapshot sent so far is merged and
        written, the channel left open (chains elsewhere still hold its
        address): before this process forks again (a new pool for the chains
        of a broken one, :func:`_rerun_broken`), since a fork copies the
        locks other threads hold mid-way, and a child that then takes one
        waits forever (seen in CI: a rerun chain's process stuck on a futex
        while the caller waited for its reply).  :meth:`start` resumes."""
        if not self.started:
            return
        if self.queue is None:
            if self.threads[0].is_alive():  # else no one would answer the handshake
                with Client(self.listener.address, authkey=self.sender.authkey) as conn:
                    conn.send_bytes(b"")
        else:
            self.stopping.set()
        self.threads[0].join()
        if self.queue is not None:
            n = self.queue.qsize()
            if n:
                self._take(self.queue.get(batch=n))
            self.stopping.clear()
        with self.cond:
            self.closed = True
            self.cond.notify()
        self.threads[1].join()
        self.started = False

    def _take(self, batch):
        try:
            new = sum(self.ck.merge(data) for data in batch)
        except Exception as exc:  # noqa: BLE001 - reported as the run's error by close()
            self.error = self.error or exc
            return
        if new:
            with self.cond:
                self.fresh = True
                self.cond.notify()

    def _write_loop(self):
        while True:
            with self.cond:
                while not (self.fresh or self.closed):
                    self.cond.wait()
                if not self.fresh:
                    return
                self.fresh = False
            try:
                self.ck.write()
            except Exception as exc:  # noqa: BLE001 - a failed write stops the run, as in threads
                self.error = self.error or exc

    def _serve_socket(self):
        failures = 0
        while True:
            try:
                conn = self.listener.accept()
            except (AuthenticationError, EOFError):
                # not one of our workers, or one lost mid-way through the
                # handshake (a killed worker: EOFError); had this thread ended
                # there, pause() would wait forever for its answer (seen in CI)
                continue
            except OSError:
                # out of file descriptors, a connection reset while queued:
                # the same accept after a pause (no busy loop), until it works
                failures += 1
                time.sleep(min(0.01 * 2 ** failures, 1.0))
                continue
            failures = 0
            with conn:
                try:
                    data = conn.recv_bytes()
                    if not data:            # close() says stop
                        return
                    self._take([data])
                    conn.send_bytes(b"1")
                except (OSError, EOFError):
                    continue

    def _serve_queue(self):
        while not self.stopping.is_set():
            try:
                data = self.queue.get(timeout=0.2)
            except TimeoutError:
                continue
            self._take([data])

    def close(self, run):
        """Stop the threads once every snapshot sent so far is written, and
        close the channel; a failed write becomes the run's error."""
        self.pause()
        if self.queue is None:
            self.listener.close()
        else:
            self.queue.close()          # the scheduler lets it go
        if self.error is not None and run.error is None:
            run.error = self.error
            run.stop[0] = 1
