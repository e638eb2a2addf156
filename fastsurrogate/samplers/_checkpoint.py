"""Checkpoint and resume, and continuing a run from its Result.

Checkpoint file
---------------
One ``.npz`` file (NumPy's zip of ``.npy`` arrays, read with
``allow_pickle=False``) whose member ``__header__`` is UTF-8 JSON (a uint8
array): format name and version, the call (method, sizes, chains, a
fingerprint of the sampler's options), each chain's SeedSequence and, per
chain, the log described below.  Every other member is a plain array
(``c<k>/...``).  It is written to ``<path>.tmp<pid>`` and moved over
``path`` with ``os.replace``, so a reader sees the old file or the new one,
never half of one.

What is saved, and how a resume continues bit for bit
-----------------------------------------------------
A sampler's phases are Python code between spans of C iterations
(:meth:`ChainContext.run_span`).  For each chain the checkpoint holds

- the end state of every span the chain finished (position, drive
  gradient, U values, step size, dual-averaging state, adaptation flag:
  ``Chain.get_state``; the random stream's state), and
- a snapshot at the last checkpoint boundary (every ``checkpoint_every``
  iterations of that chain, at a chunk boundary): the span it is in, the
  row reached, the chain's state, its metric, its random stream;
- every trace row written so far (exploration and kept draws).

A resumed run executes the sampler's phases again from the start, but a
span the checkpoint covers does no C work: its rows are copied from the
file and the chain is put in the state it had at the span's end, so the
Python between spans (step-size searches, metric windows, training on the
pooled exploration states, guard decisions) sees exactly what it saw the
first time and makes the same, deterministic, decisions.  At the span and
row of the snapshot the chain gets its saved state and the run goes on for
real.  The draws are then bit-for-bit those of an uninterrupted run: the C
chain loop's results do not depend on where chunks end.  Work between spans
is done again (training the surrogate, the step-size search): resuming
costs that, not the iterations.

State that C changes inside a span besides the chain's own (ARNS-HMC's
online layer and its Greville / SMW trainer, VHMC's score-matching hook and
trainer, the networks they update, NNgHMC's recorded leapfrog steps) is
tracked: the sampler calls ``ctx.track(obj)`` when it creates it, and the
object's state is saved with the chain's (small, what Python reads between
spans, at every span end; everything at the snapshot).  Python work that a
replayed span's pause asks for (a batch re-solve) is skipped when
``ctx.replayed``: the snapshot's full state replaces its result.

Chains in other processes
-------------------------
With ``executor=`` a ProcessPoolExecutor or a Dask Client
(samplers/_executors.py) each chain's phase runs elsewhere.  The chain's
:class:`_ChainLog` goes with it, pickled with its state (so the log's trace
dicts are the chain's arrays there), inside a :class:`RemoteCheckpointer`:
the same hooks (:class:`_Hooks`), so ``run_span`` is unchanged and a
resume's replay happens there too.  At a boundary it sends the chain's
snapshot, the spans before it and the trace rows made since its previous
message (:func:`_delta`, pickled: a message's size does not grow with the
run) through a channel to the calling process, whose :class:`Checkpointer`
appends them to what it has of the chain (:meth:`Checkpointer.merge`,
newest per chain) and writes one file of every chain as above.  When the phase
returns, the chain's log comes back with its state and replaces the local
one (:meth:`Checkpointer.returned`), so later phases, here or elsewhere, go
on from it.  Tracked trainers and hooks, whose C state does not pickle,
stay behind with the phase and the log keeps their last state
(:class:`_Frozen`).  Where a phase runs changes neither the draws nor the
snapshots: the file is the one a run in threads writes, and either kind of
run resumes the other's.

RMHMC / SG chains have no saved state yet: those runs are refused with a
ValueError (``Sampler.checkpoint_support``).
"""

import hashlib
import os
import pickle
import threading
import warnings

import numpy as np

from ..core._hmc import Chain, LowRankMetric
from ..core._npz import read_npz, write_npz
from ._checks import check_int

__all__ = ["FORMAT", "VERSION", "Checkpointer", "RemoteCheckpointer", "load", "setup",
           "continuation", "continued_chains"]

FORMAT = "fastsurrogate-checkpoint"
VERSION = 1
DEFAULT_EVERY = 1000

_CHAIN_ARRAYS = ("q", "grad", "dual_avg", "metric_adapt")

# state the replay cannot restore yet (C hooks and recorders between spans,
# other chain types)
_UNSUPPORTED = {
    "rmhmc": "its RMChain has no saved state yet", "rns-rmhmc": "its RMChain has no saved "
    "state yet", "sgld": "SG chains have no saved state yet", "sghmc": "SG chains have no "
    "saved state yet"}


# -- what identifies a run ------------------------------------------------------------

def _option_bytes(v):
    """What identifies one option value (arrays by content, potentials by type and dim)."""
    if isinstance(v, np.ndarray):
        return np.ascontiguousarray(v).tobytes()
    if v is None or isinstance(v, (bool, int, float, str, np.number)):
        return repr(v).encode()
    if hasattr(v, "dim") and hasattr(v, "value"):
        return f"{type(v).__name__}/{v.dim}".encode()
    if isinstance(v, (tuple, list)) and all(
            isinstance(x, (bool, int, float, str, type(None))) for x in v):
        return repr(v).encode()
    return type(v).__name__.encode()


def _options(sampler):
    return [(name, getattr(sampler, name)) for name in sorted(vars(sampler))
            if not name.startswith("_")]


def fingerprint(sampler):
    """A hash of the sampler's options (arrays by content, potentials by type and dim)."""
    h = hashlib.sha256(type(sampler).__name__.encode())
    for name, v in _options(sampler):
        h.update(name.encode())
        h.update(_option_bytes(v))
    return h.hexdigest()[:16]


def option_texts(sampler):
    """name -> short text of each option (for the message when a resume's
    options differ from the checkpoint's): the value, or an array's shape
    and a hash of its content."""
    out = {}
    for name, v in _options(sampler):
        b = _option_bytes(v)
        if isinstance(v, np.ndarray) or len(b) > 80:
            shape = f"array {v.shape} " if isinstance(v, np.ndarray) else ""
            out[name] = f"{shape}sha256 {hashlib.sha256(b).hexdigest()[:8]}"
        else:
            out[name] = b.decode("utf-8", "replace")
    return out


def _options_differ(there, here):
    """': name: A there, B here; ...' for the options that differ (``there``
    the checkpoint's :func:`option_texts`, absent in older files), or ''."""
    if not isinstance(there, dict):
        return ""
    names = sorted(set(there) | set(here))
    diff = [f"{n}: {there.get(n, 'absent')} there, {here.get(n, 'absent')} here"
            for n in names if there.get(n) != here.get(n)]
    return f": {'; '.join(diff)}" if diff else ""


def _seed_record(generator):
    ss = generator.bit_generator.seed_seq
    ent = ss.entropy
    return {"bit_generator": type(generator.bit_generator).__name__,
            "entropy": [int(x) for x in ent] if isinstance(ent, (list, tuple, np.ndarray))
            else int(ent),
            "spawn_key": [int(x) for x in ss.spawn_key], "pool_size": int(ss.pool_size),
            "n_children_spawned": int(ss.n_children_spawned)}


def _generator(record, state=None):
    ss = np.random.SeedSequence(record["entropy"], spawn_key=tuple(record["spawn_key"]),
                                pool_size=record["pool_size"],
                                n_children_spawned=record["n_children_spawned"])
    g = np.random.Generator(getattr(np.random, record["bit_generator"])(ss))
    if state is not None:
        g.bit_generator.state = state
    return g


# -- objects a sampler asks to be saved with its chain (ChainContext.track) -------------
#
# Each gives (scalars, arrays) in two sizes: "small", what Python reads
# between spans (saved at every span end), and "full" (saved at the
# snapshot).  A restore at a span end takes the small scalars with the
# snapshot's full arrays: everything stored in arrays only grows (histories,
# recorded points), so its first rows are the earlier state's.

def _state_of(obj, full):
    if hasattr(obj, "_ckpt_state"):            # trainers and hooks (surrogates/_online.pyx)
        return obj._ckpt_state(full)
    kind = type(obj).__name__
    if kind == "RandomNetwork":
        return {"out_bias": float(obj.out_bias)}, {"v": obj.output_weights}
    if kind == "RecordingPotential":
        sc = {"count": int(obj.n_stored), "seen": int(obj.n_seen), "active": bool(obj.active),
              "every": int(obj.every)}
        if not full:
            return sc, {}
        Q, G, U = obj.points()
        return sc, {"Q": Q, "G": G, "U": U}
    if kind == "OnlineOutputLayer":
        return {"n_seen": int(obj.n_seen), "n_resolves": int(obj.n_resolves),
                "since": int(obj._since)}, {}
    raise TypeError(f"checkpoints cannot save a {kind}")


def _restore(obj, sc, arr):
    if hasattr(obj, "_ckpt_restore"):
        obj._ckpt_restore(sc, arr)
        return
    kind = type(obj).__name__
    if kind == "RandomNetwork":
        obj.output_weights = arr["v"]
        obj.out_bias = sc["out_bias"]
    elif kind == "RecordingPotential":
        n = sc["count"]
        # a decimating recorder's rows are not a prefix of a later state's:
        # restored whole only at the snapshot (its count and every match
        # the arrays); at an earlier span end, rows beyond the snapshot's
        # are not there and nothing reads them before the snapshot's restore
        n = min(n, arr["Q"].shape[0])
        obj._restore(arr["Q"][:n], arr["G"][:n], arr["U"][:n], sc["seen"], sc["active"],
                     sc.get("every"))
    elif kind == "OnlineOutputLayer":
        obj.n_seen, obj.n_resolves, obj._since = sc["n_seen"], sc["n_resolves"], sc["since"]


def _objects_state(log, full):
    return [_state_of(o, full) for o in log.objects]


def _restore_objects(log, states, full_states):
    for i, (sc, arr) in enumerate(states):
        merged = dict(full_states[i][1]) if full_states is not None else {}
        merged.update(arr)
        _restore(log.objects[i], sc, merged)


# -- the per-chain log ----------------------------------------------------------------

class _ChainLog:
    def __init__(self):
        self.n_iter = 0          # iterations this chain ran in run_span, all spans
        self.spans = []          # finished spans: dicts (key, trace, start, end, state, rng)
        self.traces = []         # distinct trace dicts in order of first use
        self.names = {}          # id(trace) -> name
        self.current = None      # (key, trace name, start) of the span in progress
        self.snap = None         # the last boundary snapshot
        self.replay = None       # loaded (spans, snap, arrays) while replaying
        self.objects = []        # tracked objects (ChainContext.track), in order
        self.replayed = False    # the last span was replayed whole

    def __getstate__(self):
        # the id map is this process's: rebuilt from the traces where the log
        # lands (pickled with the chain's state, so the traces are its arrays)
        return {k: v for k, v in self.__dict__.items() if k != "names"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.names = {id(t): f"t{i}" for i, t in enumerate(self.traces)}

    def name(self, trace):
        n = self.names.get(id(trace))
        if n is None:
            n = f"t{len(self.traces)}"
            self.names[id(trace)] = n
            self.traces.append(trace)   # keeps it alive: ids are not reused
        return n


def _chain_state(ctx, chain):
    return {"state": chain.get_state(),
            "rng": ctx.generator.bit_generator.state}


def _set_chain_state(ctx, chain, st):
    chain.set_state(st["state"])
    ctx.generator.bit_generator.state = st["rng"]


class _Hooks:
    """The hooks ``ChainContext.run_span`` calls (:meth:`enter_span`,
    :meth:`chunk`, :meth:`boundary`, :meth:`leave_span`) and
    :meth:`track` / :meth:`replayed`, on one chain's :class:`_ChainLog`
    (:meth:`log_of`).  :class:`Checkpointer` holds every chain's log in the
    calling process and writes the file at a boundary;
    :class:`RemoteCheckpointer` goes with one chain to another process and
    sends its snapshots back (:meth:`saved`)."""

    path = None
    every = DEFAULT_EVERY

    def log_of(self, ctx):  # pragma: no cover - abstract
        raise NotImplementedError

    def saved(self, ctx):  # pragma: no cover - abstract
        """Chain ctx took a boundary snapshot."""
        raise NotImplementedError

    def enter_span(self, ctx, chain, trace, start, stop_row, key):
        """(row, finished): where the span continues, and whether the replay did all of it."""
        log = self.log_of(ctx)
        name = log.name(trace)
        j = len(log.spans)
        log.current = (key, name, start)
        log.replayed = False
        if log.replay is None:
            return start, False
        spans, snap, arrays = log.replay
        entry = spans[j] if j < len(spans) else snap
        if j > len(spans) or entry["key"] != key or entry["start"] != start \
                or entry["trace"] != name:
            raise RuntimeError(
                f"chain {ctx.index}: the resumed run does not retrace the checkpoint (span "
                f"{j}: {key!r} from row {start}, checkpoint: {entry['key']!r} from row "
                f"{entry['start']}); resume with the same sampler options and sizes")
        end = entry["end"] if j < len(spans) else snap["row"]
        tr = arrays["traces"][name]
        for field, a in tr.items():
            if field in trace:
                trace[field][start:end] = a[start:end]
        st = arrays["spans"][j] if j < len(spans) else arrays["snap"]
        _set_chain_state(ctx, chain, st)
        full = arrays["snap"]["objs"]
        if len(st["objs"]) != len(log.objects):
            raise RuntimeError(f"chain {ctx.index}: the resumed run tracks {len(log.objects)} "
                               f"objects at span {j}, the checkpoint {len(st['objs'])}")
        _restore_objects(log, st["objs"], full)
        ctx.done[key] = end
        ctx.report(end - start)
        if j < len(spans):
            log.n_iter += end - start
            log.spans.append(dict(entry, _arrays=st))
            log.replayed = True
            return end, True
        # the snapshot: the metric too, then run on for real
        chain.set_inv_metric(_metric_of(st, chain))
        log.n_iter = snap["n_iter"]
        log.snap = dict(snap, _arrays=st)
        log.replay = None
        return end, False

    def chunk(self, ctx, n):
        """n capped so that chunks end on the checkpoint boundaries."""
        if self.path is None:
            return n
        left = self.every - self.log_of(ctx).n_iter % self.every
        return min(n, left)

    def boundary(self, ctx, chain, row, n_done, status):
        """After a chunk: count it; at a boundary, snapshot this chain and save it."""
        log = self.log_of(ctx)
        log.n_iter += n_done
        if self.path is None or status != 0 or n_done == 0 or log.n_iter % self.every:
            return
        key, name, start = log.current
        st = _chain_state(ctx, chain)
        st["objs"] = _objects_state(log, True)
        _put_metric(st, chain.inv_metric)
        log.snap = {"key": key, "trace": name, "start": start, "row": row,
                    "n_iter": log.n_iter, "span": len(log.spans), "_arrays": st}
        self.saved(ctx)

    def leave_span(self, ctx, chain, row):
        log = self.log_of(ctx)
        key, name, start = log.current
        st = _chain_state(ctx, chain)
        st["objs"] = _objects_state(log, False)
        log.spans.append({"key": key, "trace": name, "start": start, "end": row,
                          "_arrays": st})
        log.current = None

    def track(self, ctx, obj):
        """Save obj's state with chain ctx's checkpoints (see ChainContext.track)."""
        _state_of(obj, False)        # a TypeError now for what cannot be saved
        self.log_of(ctx).objects.append(obj)

    def replayed(self, ctx):
        return self.log_of(ctx).replayed


class Checkpointer(_Hooks):
    """Writes a run's checkpoints and, when resuming, replays the spans the
    loaded checkpoint covers.  One per run (``run.checkpoint``), in the
    calling process.  A chain whose phase runs in another process
    (samplers/_executors.py) takes its log there in a
    :class:`RemoteCheckpointer` (:meth:`remote`); its snapshots come back
    through :meth:`merge` and its log at the phase's end through
    :meth:`returned`."""

    def __init__(self, run, path, every, header, loaded=None):
        self.run = run
        self.path = None if path is None else os.fspath(path)
        self.every = every
        self.header = header
        self.lock = threading.Lock()
        self.logs = [_ChainLog() for _ in run.ctxs]
        self.pending = {}       # chain -> its latest snapshot sent from another process
        self.n_writes = 0
        if loaded is not None:
            lh, arrays = loaded
            for k, log in enumerate(self.logs):
                rec = lh["logs"][k]
                if rec["snap"] is not None:
                    log.replay = (rec["spans"], rec["snap"], _chain_arrays(arrays, k))

    def log_of(self, ctx):
        return self.logs[ctx.index]

    def saved(self, ctx):
        self.write()

    # -- chains in other processes ------------------------------------------------------
    def remote(self, k, channel):
        """Chain k's hooks for a phase in another process (pickle it with
        the chain's state: its log holds the chain's trace arrays)."""
        return RemoteCheckpointer(k, self.logs[k], self.path is not None, self.every, channel)

    def merge(self, data):
        """A snapshot that a RemoteCheckpointer sent (bytes, :func:`_delta`):
        its rows go after the first ``start`` rows of what is kept of the
        chain, and the whole is kept for the writes until the chain's phase
        returns.  False (and not kept) when this chain's kept snapshot is as
        late (a rerun of a lost worker's phase sends the same snapshots
        again; the rows it replays are the same)."""
        k, delta = pickle.loads(data)
        with self.lock:
            old = self.pending.get(k)
            if old is not None and old["snap"]["n_iter"] >= delta["snap"]["n_iter"]:
                return False
            base_payload = old or _payload(self.logs[k]) or {"traces": {}, "spans": []}
            base = base_payload["traces"]
            first, spans = delta["spans"]
            if len(base_payload["spans"]) < first:
                raise RuntimeError(f"chain {k}'s snapshot continues its spans at {first}, "
                                   "beyond the spans received")
            spans = base_payload["spans"][:first] + spans
            traces = {}
            for name, (start, rows) in delta["traces"].items():
                head = base.get(name, {})
                if start and any(len(head.get(f, ())) < start for f in rows):
                    raise RuntimeError(f"chain {k}'s snapshot continues trace {name} at "
                                       f"row {start}, beyond the rows received")
                traces[name] = {f: np.concatenate([head[f][:start], a]) if start else a
                                for f, a in rows.items()}
            self.pending[k] = {"snap": delta["snap"], "spans": spans, "traces": traces}
        return True

    def returned(self, k, log):
        """Chain k's phase came back with its log (the chain's traces are
        the arrays that came back with it)."""
        with self.lock:
            self.logs[k] = log
            self.pending.pop(k, None)

    # -- writing ----------------------------------------------------------------------
    def write(self):
        """Write every chain's last snapshot (and the rows and spans before it)."""
        with self.lock:
            header = dict(self.header, logs=[])
            arrays = {}
            for k, log in enumerate(self.logs):
                payload = self.pending.get(k) or _payload(log)
                header["logs"].append(_put_payload(arrays, k, payload))
            write_npz(self.path, header, arrays)
            self.n_writes += 1


class RemoteCheckpointer(_Hooks):
    """One chain's hooks for a phase that runs in another process (a worker
    of a ProcessPoolExecutor, a Dask worker): the chain's log travels with
    its state, the replay of a resume happens there, and each boundary
    snapshot goes to the calling process through ``channel`` (an object
    with ``put(bytes)``), whose Checkpointer writes the file."""

    def __init__(self, index, log, writing, every, channel):
        self.index = index
        self.log = log
        self.path = "remote" if writing else None
        self.every = every
        self.channel = channel
        # what the calling process has of the chain: (spans, trace -> rows)
        self.sent = (log.snap["span"] if log.snap is not None else 0), _rows(log)

    def log_of(self, ctx):
        return self.log

    def saved(self, ctx):
        delta, self.sent = _delta(self.log, self.sent)
        self.channel.put(pickle.dumps((self.index, delta), protocol=pickle.HIGHEST_PROTOCOL))

    def finish(self):
        """The log to send back at the phase's end: tracked trainers and hooks
        (C state that does not pickle; they stay in this process with the
        phase's worker) are replaced by their last state."""
        log = self.log
        log.objects = [_Frozen(o) if hasattr(o, "_ckpt_state") else o for o in log.objects]
        return log


class _Frozen:
    """The last state of a tracked object left behind in another process."""

    def __init__(self, obj):
        self.small, self.full = _state_of(obj, False), _state_of(obj, True)

    def _ckpt_state(self, full):
        return self.full if full else self.small

    def _ckpt_restore(self, sc, arr):
        self.small = (sc, {k: arr[k] for k in self.small[1] if k in arr})
        self.full = (sc, dict(arr))


def _rows(log):
    """Trace name -> the rows of it up to the chain's last snapshot."""
    snap = log.snap
    if snap is None:
        return {}
    rows = {}
    for s in log.spans[:snap["span"]] + [dict(snap, end=snap["row"])]:
        rows[s["trace"]] = max(rows.get(s["trace"], 0), s["end"])
    return rows


def _payload(log):
    """What a write stores of one chain: its last snapshot, the spans before
    it and the trace rows up to it (None before its first snapshot)."""
    if log.snap is None:
        return None
    traces = {name: {field: a[:n] for field, a in log.traces[int(name[1:])].items()}
              for name, n in _rows(log).items()}
    return {"snap": log.snap, "spans": log.spans[:log.snap["span"]], "traces": traces}


def _delta(log, sent):
    """The chain's last snapshot with what the receiver lacks, and what the
    receiver then has.  ``sent`` = (spans, trace name -> rows) it has; the
    message carries the spans after those as (start, spans) and of each
    trace the rows after its start as name -> (start, rows)."""
    n_spans, have = sent
    rows = _rows(log)
    traces = {}
    for name, n in rows.items():
        start = min(have.get(name, 0), n)
        traces[name] = (start, {field: a[start:n]
                                for field, a in log.traces[int(name[1:])].items()})
    end = log.snap["span"]
    first = min(n_spans, end)
    delta = {"snap": log.snap, "spans": (first, log.spans[first:end]), "traces": traces}
    return delta, (end, rows)


def _put_payload(arrays, k, payload):
    """Chain k's arrays into ``arrays``; returns its header record."""
    if payload is None:
        return {"snap": None, "spans": []}
    snap, spans = payload["snap"], payload["spans"]
    for name, trace in payload["traces"].items():
        for field, a in trace.items():
            arrays[f"c{k}/traces/{name}/{field}"] = a
    for j, s in enumerate(spans):
        _put_state(arrays, f"c{k}/spans/{j}", s["_arrays"])
    _put_state(arrays, f"c{k}/snap", snap["_arrays"])
    return {"snap": {x: v for x, v in snap.items() if x != "_arrays"},
            "spans": [{x: v for x, v in s.items() if x != "_arrays"} for s in spans],
            "states": [_state_scalars(s["_arrays"]) for s in spans],
            "snap_state": _state_scalars(snap["_arrays"])}


def _put_metric(st, inv):
    """The chain's metric into a snapshot: an array, or a low-rank metric's
    packed buffer (``inv_metric_low_rank``)."""
    if isinstance(inv, LowRankMetric):
        st["inv_metric_low_rank"] = inv.packed()[0]
    elif inv is not None:
        st["inv_metric"] = inv


def _metric_of(st, chain):
    if "inv_metric_low_rank" in st:
        return LowRankMetric.from_packed(st["inv_metric_low_rank"], chain.position.shape[0])
    return st.get("inv_metric")


def _state_scalars(st):
    s = {k: v for k, v in st["state"].items() if k not in _CHAIN_ARRAYS}
    return {"state": s, "rng": st["rng"], "has_inv_metric": "inv_metric" in st,
            "has_low_rank_metric": "inv_metric_low_rank" in st,
            "objs": [{"scalars": sc, "arrays": sorted(arr)} for sc, arr in st["objs"]]}


def _put_state(arrays, prefix, st):
    for k in _CHAIN_ARRAYS:
        arrays[f"{prefix}/{k}"] = st["state"][k]
    for k in ("inv_metric", "inv_metric_low_rank"):
        if k in st:
            arrays[f"{prefix}/{k}"] = st[k]
    for i, (_, arr) in enumerate(st["objs"]):
        for name, a in arr.items():
            arrays[f"{prefix}/o{i}/{name}"] = np.asarray(a)


def _get_state(arrays, prefix, scalars):
    state = dict(scalars["state"])
    for k in _CHAIN_ARRAYS:
        if f"{prefix}/{k}" in arrays:     # metric_adapt: absent from older files
            state[k] = arrays[f"{prefix}/{k}"]
    st = {"state": state, "rng": scalars["rng"]}
    if scalars["has_inv_metric"]:
        st["inv_metric"] = arrays[f"{prefix}/inv_metric"]
    if scalars.get("has_low_rank_metric"):
        st["inv_metric_low_rank"] = arrays[f"{prefix}/inv_metric_low_rank"]
    st["objs"] = [(o["scalars"], {name: arrays[f"{prefix}/o{i}/{name}"] for name in o["arrays"]})
                  for i, o in enumerate(scalars["objs"])]
    return st


def _chain_arrays(arrays, k):
    """Chain k's traces and states from the loaded arrays (filled in by :func:`load`)."""
    return arrays["_chains"][k]


def load(path):
    """(header, arrays) of a checkpoint, chain states and traces regrouped per chain."""
    header, flat = read_npz(path, FORMAT, VERSION)
    chains = []
    for k, rec in enumerate(header["logs"]):
        pre = f"c{k}/"
        traces = {}
        for key, a in flat.items():
            if key.startswith(pre + "traces/"):
                _, _, name, field = key.split("/", 3)
                traces.setdefault(name, {})[field] = a
        c = {"traces": traces, "spans": [], "snap": None}
        if rec["snap"] is not None:
            c["spans"] = [_get_state(flat, f"{pre}spans/{j}", s)
                          for j, s in enumerate(rec["states"])]
            c["snap"] = _get_state(flat, f"{pre}snap", rec["snap_state"])
        chains.append(c)
    return header, {"_chains": chains}


# -- entry points used by Sampler.sample ----------------------------------------------

def _check_every(checkpoint_every, total=None):
    """checkpoint_every, checked; None: DEFAULT_EVERY, or a quarter of a
    shorter run's ``total`` iterations per chain (a run shorter than the
    interval would write no checkpoint at all)."""
    if checkpoint_every is None:
        if total:
            return min(DEFAULT_EVERY, max(1, -(-int(total) // 4)))
        return DEFAULT_EVERY
    return check_int("checkpoint_every", checkpoint_every, 1)


def setup(sampler, *, n_draws, n_warmup, chains, keep_warmup, generators, checkpoint,
          checkpoint_every, resume, seed=None):
    """Check the checkpoint arguments before any work.  Returns (generators,
    make_checkpointer): the chains' generators (the checkpoint's, when
    resuming) and a function run -> Checkpointer."""
    reason = _UNSUPPORTED.get(sampler.method) or sampler.checkpoint_support()
    if reason is not None:
        raise ValueError(f"checkpoint/resume is not available for this {sampler.method} "
                         f"run: {reason}")
    every = _check_every(checkpoint_every, n_warmup + n_draws)
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
        raise TypeError(f"checkpoint must be a path, got {type(checkpoint).__name__}")
    if checkpoint is not None and resume is None and every > n_warmup + n_draws:
        warnings.warn(f"checkpoint_every={every} is more than this run's {n_warmup + n_draws} "
                      "iterations per chain: no checkpoint will be written",
                      UserWarning, stacklevel=4)
    if checkpoint is not None:
        folder = os.path.dirname(os.path.abspath(os.fspath(checkpoint)))
        if not os.path.isdir(folder):
            raise ValueError(f"checkpoint: folder {folder!r} does not exist")
    call = {"method": sampler.method, "dim": sampler.potential.dim, "n_draws": n_draws,
            "n_warmup": n_warmup, "chains": chains, "keep_warmup": bool(keep_warmup),
            "options": fingerprint(sampler)}
    texts = option_texts(sampler)
    loaded = None
    if resume is not None:
        if not isinstance(resume, (str, os.PathLike)):
            raise TypeError(f"resume must be a checkpoint path or a Result, got "
                            f"{type(resume).__name__}")
        header, arrays = load(resume)
        for key, mine in call.items():       # the potential's dim before the options
            if header.get(key) == mine:
                continue
            if key == "options":
                raise ValueError(
                    f"resume={os.fspath(resume)!r}: the sampler's options differ from the "
                    f"checkpoint's{_options_differ(header.get('option_texts'), texts)}; "
                    "call sample with the options of the checkpointed run")
            what = "the potential's dim" if key == "dim" else key
            raise ValueError(
                f"resume={os.fspath(resume)!r}: {what} differs from the checkpoint's "
                f"({header.get(key)!r} there, {mine!r} here); call sample with the "
                "potential and arguments of the checkpointed run")
        if seed is not None and [_seed_record(g) for g in generators] != header["seeds"]:
            raise ValueError(f"resume={os.fspath(resume)!r}: the seed differs from the "
                             "checkpointed run's (omit seed= to take the checkpoint's)")
        generators = [_generator(r) for r in header["seeds"]]
        loaded = (header, arrays)
        if checkpoint is None:
            checkpoint = resume
        if checkpoint_every is None:
            every = header.get("checkpoint_every", every)
    header = dict(call, format=FORMAT, version=VERSION, checkpoint_every=every,
                  seeds=[_seed_record(g) for g in generators], option_texts=texts,
                  sampler=type(sampler).method)

    def make(run):
        return Checkpointer(run, checkpoint, every, header, loaded)

    return generators, make


# -- continuing from a Result ---------------------------------------------------------

_POTENTIAL = "__potential__"


def _ref(p, potential):
    """The run's potential (or a recorder of it: NNgHMC) as a marker: the
    continuation is given the potential again, and a pickled Result stays small."""
    if p is potential or getattr(p, "potential", None) is potential:
        return _POTENTIAL
    return p


def continuation(run):
    """What ``sample(..., resume=result)`` needs, per chain: the last chain's
    drive and judge, options, state, metric and random stream.  None when a
    chain has no chain (stopped before it started)."""
    out = []
    for ctx in run.ctxs:
        chain = ctx.chain
        if chain is None or not hasattr(chain, "get_config"):
            return None
        out.append({
            "drive": _ref(chain.drive, run.potential),
            "judge": _ref(chain.judge, run.potential),
            "config": chain.get_config(), "state": chain.get_state(),
            "step_size": chain.step_size, "inv_metric": chain.inv_metric,
            "seed": _seed_record(ctx.generator), "rng": ctx.generator.bit_generator.state})
    return {"method": run.sampler.method, "dim": run.potential.dim, "chains": out}


def continued_chains(sampler, res, n_draws):
    """The chains of `res`, set to run n_draws more iterations from where
    they stopped: (generators, q0, worker, parallel) for a Run of `sampler`
    (``Sampler._continue`` runs them)."""
    cont = getattr(res, "_continuation", None)
    if cont is None:
        raise ValueError("this Result cannot be continued: it was made by a sampler run "
                         "that stopped before its chains started, or by an older version")
    if cont["method"] != sampler.method:
        raise ValueError(f"resume: the Result is from {cont['method']!r}, this sampler is "
                         f"{sampler.method!r}")
    if cont["dim"] != sampler.potential.dim:
        raise ValueError(f"resume: the Result has dim {cont['dim']}, the potential "
                         f"{sampler.potential.dim}")
    recs = cont["chains"]
    generators = [_generator(r["seed"], r["rng"]) for r in recs]
    q0 = np.stack([r["state"]["q"] for r in recs])
    pot = sampler.potential

    def worker(ctx):
        r = recs[ctx.index]
        drive = pot if r["drive"] == _POTENTIAL else r["drive"]
        judge = pot if r["judge"] == _POTENTIAL else r["judge"]
        chain = Chain(drive, judge, r["state"]["q"], ctx.generator, step_size=r["step_size"],
                      inv_metric=r["inv_metric"], **r["config"])
        chain.set_state(r["state"])
        ctx.chain = chain
        with ctx.phase("sample"):
            ctx.run_span(chain, ctx.main, 0, n_draws, "sample")

    drives = [pot if r["drive"] == _POTENTIAL else r["drive"] for r in recs]
    parallel = pot.thread_safe and all(d.thread_safe for d in drives)
    return generators, q0, worker, parallel
