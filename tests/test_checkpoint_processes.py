"""checkpoint= and resume= with the chains in other processes (a
ProcessPoolExecutor; a Dask cluster in the slow test): the file is written
while a phase runs there, the draws are the threads' draws for the same
seed, and a run whose calling process is killed with SIGKILL resumes bit
for bit, with processes or with threads (and a threads' checkpoint with
processes)."""
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest

import fastsurrogate as fs
from fastsurrogate.samplers import _checkpoint, _executors
from test_checkpoint import MODEL, SAMPLERS, assert_same, run
from test_executors import _KillsItsProcessOnce
from _slow_gauss import gauss_run, slow_gauss

HERE = Path(__file__).resolve().parent
# fork (Linux's default) where there is one: a spawned worker imports the
# package again, seconds on a loaded machine (test_executors.py covers spawn)
FORK = multiprocessing.get_context(
    "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


@pytest.fixture(scope="module")
def processes():
    with ProcessPoolExecutor(max_workers=2, mp_context=FORK) as ex:
        yield ex


def _snapshots(path):
    """Each chain's snapshot (span key, n_iter) in the checkpoint at path
    (None before the chain's first)."""
    header, _ = _checkpoint.read_npz(path, _checkpoint.FORMAT, _checkpoint.VERSION)
    return [None if c["snap"] is None else (c["snap"]["key"], c["snap"]["n_iter"])
            for c in header["logs"]]


def _copying_merge(tmp_path, path, copies, sizes):
    """Checkpointer.merge that also writes the file and copies it at every
    snapshot a remote chain sends (in the receiving thread, before the chain
    goes on: a copy of every state the file goes through), and records each
    message's size in bytes."""
    merge = _checkpoint.Checkpointer.merge

    def merge_and_copy(self, data):
        sizes.append(len(data))
        new = merge(self, data)
        if new:
            self.write()
            copies.append(tmp_path / f"c{len(copies)}.npz")
            shutil.copy(path, copies[-1])
        return new

    return mock.patch.object(_checkpoint.Checkpointer, "merge", merge_and_copy)


@pytest.mark.parametrize("method", ["hmc", "nuts", "rns-hmc", "vhmc"])
def test_processes_write_checkpoints_and_resume_bit_for_bit(tmp_path, processes, method):
    """The file is written while the chains run in the pool, the draws are the
    threads' draws, and a checkpoint from the middle of the run resumes, in
    the pool, to the same Result (RNS-HMC: exploration and exploitation in
    the pool, training here between; VHMC: the whole chain, its score-matching
    hook and trainer included, there)."""
    ref = run(method, MODEL)
    path = tmp_path / "ck.npz"
    copies, sizes = [], []
    with _copying_merge(tmp_path, path, copies, sizes):
        res = run(method, MODEL, checkpoint=path, checkpoint_every=40, executor=processes)
    assert_same(res, ref)
    # a message carries the rows since the chain's previous one, not all of
    # them: the last ones are no larger than the first ones
    assert max(sizes[-4:]) <= 1.25 * max(sizes[:4]), sizes
    total = sum(SAMPLERS[method][2:])
    # a snapshot of each chain every 40 iterations, each one in a file copy
    assert len(copies) == 2 * (total // 40), len(copies)
    assert _snapshots(copies[0]).count(None) == 1
    # the finished run's file: both chains' last boundary
    assert _snapshots(path) == [("sample", total // 40 * 40)] * 2
    mid = copies[len(copies) // 2]
    assert all(s[1] < total for s in _snapshots(mid))
    assert_same(run(method, MODEL, resume=mid, executor=processes), ref)
    if method == "hmc":
        # a process-made checkpoint resumed in threads, a threads-made one in processes
        assert_same(run(method, MODEL, resume=copies[3]), ref)
        thread_copies = []
        write = _checkpoint.Checkpointer.write

        def write_and_copy(self):
            write(self)
            if self.n_writes == 5:
                thread_copies.append(tmp_path / "threads.npz")
                shutil.copy(tmp_path / "t.npz", thread_copies[-1])

        with mock.patch.object(_checkpoint.Checkpointer, "write", write_and_copy):
            assert_same(run(method, MODEL, checkpoint=tmp_path / "t.npz", checkpoint_every=40),
                        ref)
        assert_same(run(method, MODEL, resume=thread_copies[0], executor=processes), ref)


# -- the calling process killed -------------------------------------------------------

KILLED = """
import multiprocessing, sys
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, {here!r})
from _slow_gauss import gauss_run
with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context({method!r})) as ex:
    gauss_run(executor=ex, checkpoint={path!r}, checkpoint_every=20)
print("finished")
"""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs POSIX process groups")
def test_a_killed_caller_resumes_bit_for_bit_in_processes_and_threads(tmp_path, processes):
    """The calling process and its pool (one process group, as a batch system
    kills a job) get SIGKILL once both chains' snapshots in the file are in
    the sampling phase; resumed with a ProcessPoolExecutor, and the same file
    with threads, the draws are the uninterrupted run's."""
    ref = gauss_run()
    path = tmp_path / "ck.npz"
    env = dict(os.environ, FS_TEST_SLOW="0.001")
    proc = subprocess.Popen([sys.executable, "-c", KILLED.format(here=str(HERE), path=str(path),
                                                   method=FORK.get_start_method())],
                            env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        t0 = time.monotonic()
        snaps = None
        while time.monotonic() - t0 < 60 and proc.poll() is None:
            if path.exists():
                snaps = _snapshots(path)
                if all(s is not None and s[0] == "sample" for s in snaps):
                    break
            time.sleep(0.01)
        alive = proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        out, err = proc.communicate(timeout=30)
    assert alive, f"the run ended before the kill: {out!r} {err.decode()[-2000:]}"
    assert proc.returncode == -signal.SIGKILL
    assert all(s[1] < 400 for s in snaps), snaps
    copy = tmp_path / "copy.npz"
    shutil.copy(path, copy)
    assert_same(gauss_run(resume=path, executor=processes), ref)
    assert_same(gauss_run(resume=copy), ref)


# the names of this process's threads at each fork it makes while a test
# records (os.register_at_fork has no way to unregister: a flag turns it on)
_FORKS = {"on": False, "seen": []}
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _FORKS["on"] and _FORKS["seen"].append(
        sorted(t.name for t in threading.enumerate())))


def test_a_worker_lost_mid_phase_with_a_checkpoint(tmp_path):
    """A worker process killed mid-phase: the chains' phase runs again from
    its start on a new pool (_rerun_broken) and sends its snapshots again;
    the draws and the final file are those of a run in threads.  The new
    pool forks with the snapshot receiver and writer stopped: a fork while
    they ran copied whatever lock they held, and a rerun chain's process
    once waited on one forever (CI hung here)."""
    kw = dict(method="hmc", n_draws=200, n_warmup=100, chains=2, seed=6, progress=False,
              n_steps=5, warn=False)
    ref = fs.sample(fs.Potential.from_callable(slow_gauss, 2), **kw)
    pot = fs.Potential.from_callable(_KillsItsProcessOnce(tmp_path / "killed"), 2)
    path = tmp_path / "ck.npz"
    _FORKS["seen"].clear()
    _FORKS["on"] = FORK.get_start_method() == "fork"
    try:
        with ProcessPoolExecutor(2, mp_context=FORK) as ex, \
                pytest.warns(RuntimeWarning, match="worker process of the executor died"):
            res = fs.sample(pot, executor=ex, checkpoint=path, checkpoint_every=30, **kw)
    finally:
        _FORKS["on"] = False
    assert (tmp_path / "killed").exists()
    if FORK.get_start_method() == "fork":
        assert len(_FORKS["seen"]) >= 3          # two workers, then at least one for the rerun
        assert not [names for names in _FORKS["seen"] if "fastsurrogate-checkpoint" in names]
    assert_same(res, ref)
    assert _snapshots(path) == [("sample", 300)] * 2
    assert_same(fs.sample(fs.Potential.from_callable(slow_gauss, 2), resume=path, **kw), ref)



def test_the_snapshot_receiver_survives_a_worker_lost_mid_handshake():
    """A worker killed while it connects to the snapshot receiver (before it
    answers the receiver's challenge) must not end the receiver's thread:
    pause() connects to it and waits for its answer, and with the thread
    gone it waited forever (CI hung in
    test_a_worker_lost_mid_phase_with_a_checkpoint)."""
    import socket
    merged = []
    ck = SimpleNamespace(merge=lambda data: merged.append(data) or 1, write=lambda: None)
    drain = _executors._Drain(ck, None, "process")
    drain.start()
    try:
        s = socket.socket(socket.AF_UNIX)      # connects, takes the challenge and goes
        s.connect(drain.listener.address)      # before it answers: the receiver's
        s.recv(4096)                           # accept() then sees EOFError
        s.close()

        def after():                            # a worker's snapshot, then a pause
            drain.sender.put(b"snapshot")
            drain.pause()

        done = threading.Thread(target=after, daemon=True)
        done.start()
        done.join(60)                           # a hang guard, not a timing
        assert not done.is_alive(), "the receiver had ended: no one answered the handshake"
        assert merged == [b"snapshot"]
    finally:
        drain.listener.close()

@pytest.mark.slow
def test_dask_cluster_checkpoints_and_resumes(tmp_path):
    """Chains on a Dask cluster send their snapshots through a
    distributed.Queue: same draws as threads; a mid-run copy resumes there."""
    distributed = pytest.importorskip("distributed")
    ref = run("rns-hmc", MODEL)
    path = tmp_path / "ck.npz"
    copies, sizes = [], []
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        with _copying_merge(tmp_path, path, copies, sizes):
            assert_same(run("rns-hmc", MODEL, checkpoint=path, checkpoint_every=40,
                            executor=client), ref)
        assert len(copies) == 2 * (300 // 40)
        assert_same(run("rns-hmc", MODEL, resume=copies[len(copies) // 2], executor=client),
                    ref)


def test_executors_that_cannot_send_snapshots_back_are_refused(tmp_path):
    """Any other concurrent.futures.Executor (its workers may be anywhere)."""
    from concurrent.futures import Executor

    class Elsewhere(Executor):
        def submit(self, fn, *args, **kwargs):  # pragma: no cover - refused before
            raise AssertionError("not reached")

    with pytest.raises(ValueError, match="ProcessPoolExecutor or a Dask"):
        run("hmc", MODEL, checkpoint=tmp_path / "ck.npz", executor=Elsewhere())
    assert not (tmp_path / "ck.npz").exists()
    with pytest.raises(ValueError, match="not a Elsewhere"):
        run("hmc", MODEL, resume=tmp_path / "ck.npz", executor=Elsewhere())
    _executors.check_checkpointing(None)


def test_the_snapshot_receiver_waits_out_failed_accepts(tmp_path, processes):
    """accept() failing (out of file descriptors, say) on the listener that
    takes the workers' snapshots: the receiver tries again after growing
    pauses (not in a busy loop), and the run and its file are unchanged."""
    from multiprocessing.connection import Listener

    accept, calls, pauses = Listener.accept, [], []

    def flaky_accept(self):
        calls.append(len(pauses))
        if len(calls) <= 4:
            raise OSError(24, "Too many open files")
        return accept(self)

    ref = run("hmc", MODEL)
    with mock.patch.object(Listener, "accept", flaky_accept), \
            mock.patch.object(_executors, "time", SimpleNamespace(sleep=pauses.append)):
        res = run("hmc", MODEL, checkpoint=tmp_path / "ck.npz", checkpoint_every=40,
                  executor=processes)
    assert_same(res, ref)
    total = sum(SAMPLERS["hmc"][2:])
    assert _snapshots(tmp_path / "ck.npz") == [("sample", total // 40 * 40)] * 2
    # four failures, each followed by a longer pause before the next accept
    assert calls[:5] == [0, 1, 2, 3, 4] and pauses == [0.02, 0.04, 0.08, 0.16]
