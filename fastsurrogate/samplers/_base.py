"""The skeleton every sampler shares.

A sampler is a class whose constructor takes (and checks) its options and
whose :meth:`Sampler.phases` runs the paper's algorithm box, phase by
phase, on a :class:`Run`.  :meth:`Sampler.sample` owns everything else:
argument checks, seeds (child k of the seed's SeedSequence for chain k),
initial points, the chains over threads (or one after another), progress
bars, Ctrl-C, the partial result attached to an exception, and the
:class:`~fastsurrogate.Result`.  The checks themselves are in
``_checks.py``, the seeds, initial points and warm-up windows in
``_chain.py``; those two, ``_checkpoint.py`` and ``_executors.py`` sit below
this module and never import it.

No per-iteration Python here: each chunk of iterations is one call into C
(:meth:`ChainContext.run_span`).
"""

import sys
import threading
import time
import warnings
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .._typing import ArrayLike, PathLike, SeedLike
from ..core._hmc import new_trace, STATUS_INTERRUPTED
from ..core._potential import Potential
from ..result import Result
from ..diagnostics.checks import run_warnings, check_gradient_before, SamplingWarning
from . import _checkpoint, _executors
from ._chain import (Interrupted, chain_generators, initial_points, warmup_windows,
                     regularized_metric)
from ._checks import (MAX_INT, check_int, check_int_or_auto, check_flag, check_number,
                      check_positive, refuse_options, check_potential, check_metric,
                      check_tree_depth, check_explore, check_init, check_trace_memory)

# Sampler, Run and ChainContext are this module's; the other names moved to
# _chain and _checks and are still importable from here
__all__ = ["Sampler", "Run", "ChainContext", "chain_generators", "initial_points",
           "warmup_windows", "regularized_metric", "check_int", "check_int_or_auto",
           "check_positive", "check_potential", "check_metric", "check_tree_depth",
           "check_explore", "check_flag", "check_number", "refuse_options", "Interrupted",
           "MAX_INT"]


class _Stopped(Exception):
    """Raised by Run.each_chain when a chain was interrupted or failed."""


def warn_if_interrupted(run, res, n_draws, n_warmup):
    """A RuntimeWarning when Ctrl-C stopped the run: the Result it returns
    holds fewer draws than asked for, which a notebook would not show."""
    if run.interrupted and run.error is None:
        warm = "" if res.warmup_n_done is None or not n_warmup else \
            f" (warm-up: {res.warmup_n_done.tolist()} of {n_warmup})"
        warnings.warn(f"sampling was interrupted: the chains completed {res.n_done.tolist()} "
                      f"of {n_draws} draws{warm}; the Result holds them (result.interrupted "
                      "is True)", RuntimeWarning, stacklevel=4)


# -- one chain, one run -----------------------------------------------------------

class _Timer:
    def __init__(self, timings_list, name):
        self.timings_list, self.name = timings_list, name

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        dt = time.perf_counter() - self.t0
        for timings in self.timings_list:
            timings[self.name] = timings.get(self.name, 0.0) + dt
        return False


class ChainContext:
    """One chain of a run: its random stream, starting point, trace arrays,
    the :class:`~fastsurrogate.core.Chain` in use, timings and progress.

    ``warm`` and ``main`` are trace dicts (:func:`new_trace`) for the
    warm-up and the kept draws; ``done[key]`` counts the rows of trace
    ``key`` ("warmup" or "sample") filled so far; ``chain`` is the Chain
    whose step size and metric the result reports; ``warmup_converged_at``
    the warm-up iteration at which its metric adaptation converged
    (``warmup_end="converged"``), else None.

    The attributes are the ones ``__init__`` declares (tests/test_structure.py
    checks that no sampler module sets another).  A sampler's phases set
    ``chain`` and ``warmup_converged_at`` (the result reports them), may move
    ``q0`` before the first span, and keep whatever else they need per chain
    in ``state``: an object of the sampler's own (a dataclass of its
    module), which pickles with the context to a remote executor and back.
    """

    def __init__(self, run, index, generator):
        self.run = run                  # the Run (a stub of it in a remote worker)
        self.index = index              # the chain's number, 0 .. chains - 1
        self.generator = generator      # the chain's numpy Generator
        self.q0 = None                  # its starting point (Run.start; phases may move it)
        self.warm = self.main = None    # its warm-up and kept-draw traces (Run.start)
        self.chain = None               # the Chain in use: set by the phases, reported
        self.timings = {}               # seconds per phase name (ChainContext.phase)
        self.done = {}                  # rows filled per trace key ("warmup", "sample")
        self.chunk = 10                 # iterations per call into C (run_span adapts it)
        self.target_seconds = 0.2       # the wall time run_span aims at per chunk
        self.warmup_converged_at = None  # set by the phases (warmup_end="converged")
        self.state = None               # the sampler's per-chain state, None until it sets one

    @property
    def stop(self):
        """The run's stop flag (int32 array of one element) that C checks."""
        return self.run.stop

    def phase(self, name):
        """Context manager adding the wall time of a block to ``timings[name]``."""
        return _Timer([self.timings], name)

    def report(self, n):
        """Advance the progress bar by n iterations."""
        self.run.report(n)

    def track(self, obj):
        """Save `obj` (a trainer, hook, network or recorder that C changes
        while the chain runs) with this chain's checkpoints; returns obj."""
        if self.run.checkpoint is not None:
            self.run.checkpoint.track(self, obj)
        return obj

    @property
    def replayed(self):
        """True when the last run_span was replayed from a checkpoint (no C
        ran): work its pause asks for may be skipped, the checkpoint's state
        replaces it."""
        ck = self.run.checkpoint
        return ck is not None and ck.replayed(self)

    def run_span(self, chain, trace, start, stop_row, key, hook=None):
        """Run rows start..stop_row-1 of `trace` in chunks of about 0.2 s.

        ``hook`` (a :class:`~fastsurrogate.core.ChainHook`) runs in C after
        every iteration; when it pauses the run (a positive status), this
        returns early, at the row after the paused iteration, for the hook's
        owner to act.  Returns the row reached.
        """
        i = start
        ck = self.run.checkpoint
        if ck is not None:
            i, replayed = ck.enter_span(self, chain, trace, start, stop_row, key)
            if replayed:
                return i
        while i < stop_row:
            n = min(self.chunk, stop_row - i)
            if ck is not None:
                n = ck.chunk(self, n)
            t0 = time.perf_counter()
            out = None
            try:
                out = chain.run(trace, i, n, self.run.stop, hook)
            finally:
                # rows filled before an exception (or Ctrl-C) count too: a
                # Chain records them in n_done_last before raising
                n_done = out[0] if out is not None else getattr(chain, "n_done_last", 0)
                i += n_done
                self.done[key] = i
                self.report(n_done)
            status = out[1]
            dt = time.perf_counter() - t0
            if ck is not None:
                ck.boundary(self, chain, i, n_done, status)
            if status == STATUS_INTERRUPTED:
                raise Interrupted
            if status > 0:
                break
            if n_done == n:
                per = max(dt / max(n_done, 1), 1e-7)
                self.chunk = int(min(max(self.target_seconds / per, 1), 20000))
        if ck is not None:
            ck.leave_span(self, chain, i)
        return i


class Run:
    """One call of :meth:`Sampler.sample`: its sizes, its chains and what the
    phases leave for the result.

    The attributes are the ones ``__init__`` declares (tests/test_structure.py
    checks that no sampler module sets another).  A sampler's phases and
    ``finish`` fill ``info`` and set ``surrogate`` and ``exact``, which
    :meth:`result` reports, and keep their own run-wide state in ``state``
    (an object of the sampler's own, e.g. NNgHMC's latest network; a remote
    executor's workers get a copy of it, and what they change there stays
    there).  ``interrupted``, ``error``, ``checkpoint`` and ``spill`` are the
    run machinery's (this module, ``_checkpoint``, ``_executors``).
    """

    def __init__(self, sampler, n_draws, n_warmup, generators, init, progress, keep_warmup,
                 executor=None):
        self.sampler = sampler                  # the Sampler whose phases run
        self.executor = executor                # executor= (None: threads or in turn)
        self.potential = sampler.potential      # the exact potential
        self.n_draws, self.n_warmup = n_draws, n_warmup     # iterations per chain
        self.generators = generators            # one numpy Generator per chain
        self.chains = len(generators)           # the number of chains
        self.init = init                        # the user's init (chains, dim), or None
        self.progress = progress                # show progress bars
        self.keep_warmup = keep_warmup          # the result keeps the warm-up draws
        self.stop = np.zeros(1, dtype=np.int32)     # the stop flag C checks (Ctrl-C, errors)
        self.t_start = time.perf_counter()      # the whole run's wall clock (timings["total"])
        self.ctxs = [ChainContext(self, k, g) for k, g in enumerate(generators)]  # the chains
        self.info = {}                          # result.info: filled by the phases and finish
        self.surrogate = None                   # result.surrogate: set by the phases or finish
        self.exact = True                       # result.exact: set by the phases
        self.state = None                       # the sampler's run-wide state, None until set
        self.interrupted = False                # Ctrl-C stopped the run
        self.error = None                       # the exception that stopped it
        self.checkpoint = None      # a samplers._checkpoint.Checkpointer when checkpointing
        self.spill = None           # _executors' files of arrays its process workers map
        self._lock = threading.Lock()           # guards the progress bar
        self._bar = None                        # the running phase's progress bar
        self._pool = None                       # the chains' thread pool (_in_threads)

    def start(self, q0=None, warm_rows=None, proposals=False):
        """Allocate the traces and set the starting points.

        q0 (chains, dim): default the user's ``init``, else Stan's uniform
        draws (:func:`initial_points`).  warm_rows: rows of the warm-up trace
        (default n_warmup).  proposals: the kept draws' traces also record
        each iteration's proposal and its U.
        """
        d = self.potential.dim
        if q0 is None:
            q0 = self.init if self.init is not None else initial_points(self.potential,
                                                                        self.generators)
        rows = self.n_warmup if warm_rows is None else warm_rows
        check_trace_memory(rows + self.n_draws * (2 if proposals else 1), d, self.chains)
        for ctx in self.ctxs:
            ctx.q0 = q0[ctx.index]
            ctx.warm = new_trace(rows, d)
            ctx.main = new_trace(self.n_draws, d, proposals=proposals)

    def phase(self, name):
        """Context manager for a phase that serves every chain (e.g. training on
        their pooled states): its wall time is added to every chain's timings."""
        return _Timer([c.timings for c in self.ctxs], name)

    def report(self, n):
        if self._bar is not None and n:
            with self._lock:
                self._bar.update(n)

    def describe(self, desc):
        """Rename the progress bar of the running phase (e.g. when a chain moves
        from training its surrogate to sampling)."""
        if self._bar is not None:
            with self._lock:
                self._bar.set_description_str(desc, refresh=False)

    @contextmanager
    def training_progress(self, desc):
        """Progress of a phase that runs outside the chain loop (training a
        surrogate): yields ``progress(n_done, n_total)``, which a trainer calls
        after each of its steps; the bar (named ``desc``, total ``n_total``)
        opens at the first call and closes with the block."""
        state = {"bar": None, "n": 0}

        def progress(n_done, n_total):
            if not self.progress:
                return
            if state["bar"] is None:
                state["bar"] = _make_bar(int(n_total), True, desc)
                if state["bar"] is None:
                    return
            step = int(n_done) - state["n"]
            if step > 0:
                state["bar"].update(step)
                state["n"] = int(n_done)

        try:
            yield progress
        finally:
            if state["bar"] is not None:
                state["bar"].close()

    def each_chain(self, worker, n_iter, desc, parallel=None):
        """Run ``worker(ctx)`` for every chain.

        parallel: in threads (default: when the potential releases the GIL),
        else one after another.  The progress bar counts ``n_iter`` per chain.
        On Ctrl-C every chain stops before its next iteration; an exception in
        a worker stops the others.  Either way :class:`_Stopped` is raised
        after every worker has returned, with ``interrupted`` / ``error`` set.
        """
        if parallel is None:
            parallel = self.potential.thread_safe
        self._bar = _make_bar(self.chains * n_iter, self.progress, desc)
        try:
            if self.executor is not None:
                _executors.run_chains(self, worker, parallel, desc)
            elif parallel and self.chains > 1:
                self._in_threads(worker)
            else:
                self._in_turn(worker)
        finally:
            if self._bar is not None:
                self._bar.close()
            self._bar = None
        if self.interrupted or self.error is not None:
            raise _Stopped

    def _in_threads(self, worker):
        """The chains in this run's thread pool (made at the first phase, kept
        for the next: a sampler that runs many short phases, as NUTS with a
        surrogate does between its decisions, starts its threads once)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.chains)
        _executors._local(self, worker, self._pool)

    def close(self):
        """Shut the run's thread pool down (after the last phase)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _in_turn(self, worker):
        for ctx in self.ctxs:
            try:
                worker(ctx)
            except (KeyboardInterrupt, Interrupted):
                self.stop[0] = 1
                self.interrupted = True
                return
            except BaseException as exc:  # noqa: BLE001 - handed back with the partial result
                # (SystemExit and the like too: a potential that calls sys.exit
                # still leaves the rows made so far in the exception's result)
                self.stop[0] = 1
                self.error = exc
                return

    def result(self):
        """The :class:`Result` of the rows every chain completed."""
        sampler = self.sampler
        done = self._counts("sample")
        draws, stats = _stack([c.main for c in self.ctxs], done, self.potential.dim)
        wd = ws = wdone = None
        if self.keep_warmup:
            wdone = self._counts("warmup")
            wd, ws = _stack([c.warm for c in self.ctxs], wdone, self.potential.dim)
        timings = {}
        for c in self.ctxs:
            for k, v in c.timings.items():
                timings[k] = max(timings.get(k, 0.0), v)
        timings["total"] = time.perf_counter() - self.t_start
        chains = [c.chain for c in self.ctxs]
        return Result(
            draws=draws, stats=stats, method=sampler.method, potential=self.potential,
            param_names=self.potential.param_names, warmup_draws=wd, warmup_stats=ws,
            step_size=np.array([c.step_size if c is not None else np.nan for c in chains]),
            inv_metric=[c.inv_metric if c is not None else None for c in chains],
            timings=timings, timings_per_chain=[dict(c.timings) for c in self.ctxs],
            interrupted=self.interrupted or self.error is not None, exact=self.exact,
            info=self.info, surrogate=self.surrogate, n_done=done, warmup_n_done=wdone,
            continuation=_checkpoint.continuation(self))

    def _counts(self, key):
        """Rows of trace ``key`` each chain completed, shape (chains,)."""
        return np.array([c.done.get(key, 0) for c in self.ctxs], dtype=np.int64)


def _stack(traces, counts, dim):
    """Per-chain traces as (chains, n, dim) draws and (chains, n) stats, n the
    largest count: chain k's rows past counts[k] are NaN (0 in integer stats)."""
    n = int(max(counts)) if len(counts) else 0
    if any(t is None for t in traces):  # stopped before the traces were allocated
        n = 0 if all(t is None for t in traces) else n
    ref = next((t for t in traces if t is not None), None)
    if ref is None:
        return np.empty((len(traces), 0, dim)), {}
    draws = np.full((len(traces), n, dim), np.nan)
    stats = {k: np.full((len(traces), n), np.nan) if ref[k].dtype.kind == "f"
             else np.zeros((len(traces), n), dtype=ref[k].dtype)
             for k in ref if k not in ("draws", "proposals")}
    for j, (t, m) in enumerate(zip(traces, counts)):
        if t is None or m == 0:
            continue
        draws[j, :m] = t["draws"][:m]
        for k in stats:
            stats[k][j, :m] = t[k][:m]
    return draws, stats


def _make_bar(total, progress, desc):
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="it", smoothing=0.1, leave=False)


# -- the sampler -------------------------------------------------------------------

class Sampler:
    """Base of every sampler: set-up, chains, interrupts, errors, the Result.

    A subclass sets ``method`` (its name in ``fastsurrogate.SAMPLERS``),
    checks its options in ``__init__`` and implements :meth:`phases`;
    :meth:`check_sizes` and :meth:`finish` are optional.
    """

    method = "base"
    # False: the chains' state does not pickle, so executor= takes only a
    # ThreadPoolExecutor (see samplers/_executors.py)
    remote_chains = True
    default_chains = 4
    default_warmup = 1000

    def __init__(self, potential: Potential) -> None:
        self.potential = check_potential(potential)

    def sample(self, n_draws: int = 1000, n_warmup: int | None = None, *,
               chains: int | None = None, seed: SeedLike = None, init: ArrayLike | None = None,
               progress: bool = True, keep_warmup: bool = True,
               checkpoint: PathLike | None = None, checkpoint_every: int | None = None,
               resume: PathLike | Result | None = None, executor: Any = None,
               warn: bool = True) -> Result:
        """Run the chains.

        Parameters
        ----------
        n_draws : int
            Draws kept per chain after the warm-up.
        n_warmup : int, optional
            Warm-up iterations per chain (adaptation, exploration, training: the phases
            before the kept draws); default ``default_warmup`` (1000 for most samplers).
        chains : int, optional
            Default 4 (``default_chains``), for every method; in threads when the
            potentials release the GIL (compiled potentials), else in turn.
        seed : int, numpy.random.SeedSequence or Generator, optional
            Chain k uses child k of the seed's SeedSequence.
        init : array (dim,) or (chains, dim), optional
            Initial positions; default uniform on [-2, 2]^dim (Stan's).
        progress, keep_warmup : bool
            Show progress bars; keep the warm-up draws in ``result.warmup_draws``.
        warn : bool
            Refuse a Python potential whose gradient fails :func:`fastsurrogate.check_gradient`,
            and warn after the run (``SamplingWarning``: R-hat, ESS, divergences, ...).
        checkpoint : str or os.PathLike, optional
            Save the run's state to this file (atomically: a versioned ``.npz``
            with a JSON header, no pickle) every ``checkpoint_every`` iterations of
            each chain, at a chunk boundary; after Ctrl-C, an exception or a kill it
            holds the last boundary, which ``resume=`` continues (any executor below).
        checkpoint_every : int, optional
            Iterations per chain between checkpoints (1000, or a quarter of a shorter run).
        resume : str, os.PathLike or Result, optional
            A checkpoint path: continue that run, its draws bit for bit the
            uninterrupted run's (call ``sample`` with the same sampler options and
            sizes; seeds come from the file).  A Result: ``n_draws`` more draws of each
            chain from its last state (position, step size, metric, surrogate, random
            stream), no warm-up (docs/guide.md, "Checkpoint and resume", says what equals what).
        executor : concurrent.futures.Executor or dask distributed.Client, optional
            Where the per-chain phases run (a ThreadPoolExecutor, ProcessPoolExecutor
            or Dask cluster; default: threads for compiled potentials, in turn for
            Python ones); training on pooled chains stays in this process.  Same seed,
            same draws and checkpoints whatever the executor; other Executors take no
            ``checkpoint=`` (ValueError; :mod:`fastsurrogate.samplers._executors`).

        Returns
        -------
        Result
            ``draws`` (chains, n_draws, dim).  On Ctrl-C: each chain's completed rows
            (``n_done``; NaN-padded), ``interrupted=True``.  An exception of a potential,
            trainer or phase propagates unchanged with this partial Result as ``result``.
        """
        progress, keep_warmup = check_flag("progress", progress), check_flag("keep_warmup",
                                                                               keep_warmup)
        n_draws, n_warmup, chains = self._sizes(n_draws, n_warmup, chains)
        return self._checked(check_flag("warn", warn), n_draws, n_warmup, chains, seed, init,
                             progress, keep_warmup, checkpoint, checkpoint_every, resume,
                             executor)

    def _sizes(self, n_draws, n_warmup, chains):
        """The checked run sizes, with the sampler's defaults."""
        n_draws = check_int("n_draws", n_draws, 0)
        n_warmup = check_int("n_warmup", self.default_warmup if n_warmup is None else n_warmup, 0)
        chains = check_int("chains", self.default_chains if chains is None else chains, 1)
        self.check_sizes(n_draws, n_warmup)
        return n_draws, n_warmup, chains

    def _checked(self, warn, *args):
        """_sample(*args), with the gradient check before and the warnings
        after it when ``warn``."""
        n_draws, n_warmup, chains = args[:3]
        check_trace_memory(n_warmup + n_draws, self.potential.dim, chains)   # before any work
        if warn and args[-2] is None:                # not a resume
            check_gradient_before(self.potential)
        res = self._sample(*args)
        if warn and not res.interrupted:
            for message in run_warnings(res):
                warnings.warn(message, SamplingWarning, stacklevel=3)
        return res

    def _sample(self, n_draws, n_warmup, chains, seed, init, progress, keep_warmup,
                checkpoint, checkpoint_every, resume, executor):
        if isinstance(resume, Result):
            return self._continue(resume, n_draws, progress, keep_warmup)
        generators = chain_generators(seed, chains)
        init = check_init(init, self.potential.dim, chains)
        executor = _executors.check_executor(executor, self)
        make_checkpointer = None
        if checkpoint is not None or resume is not None:
            _executors.check_checkpointing(executor)
            generators, make_checkpointer = _checkpoint.setup(
                self, n_draws=n_draws, n_warmup=n_warmup, chains=chains,
                keep_warmup=keep_warmup, generators=generators, checkpoint=checkpoint,
                checkpoint_every=checkpoint_every, resume=resume, seed=seed)
        elif checkpoint_every is not None:
            raise ValueError("checkpoint_every needs checkpoint=path")
        run = Run(self, n_draws, n_warmup, generators, init, progress, keep_warmup,
                  executor=executor)
        if make_checkpointer is not None:
            run.checkpoint = make_checkpointer(run)
        self._run_phases(run)
        res = run.result()
        warn_if_interrupted(run, res, n_draws, n_warmup)
        if progress and res.surrogate_report() is not None:
            print(res.report_line(), file=sys.stderr, flush=True)
        if run.error is not None:
            run.error.result = res
            raise run.error
        return res

    def _continue(self, res, n_draws, progress, keep_warmup):
        """n_draws more iterations of every chain of `res`, from where they stopped."""
        generators, q0, worker, parallel = _checkpoint.continued_chains(self, res, n_draws)
        run = Run(self, n_draws, 0, generators, q0, progress, keep_warmup)
        run.exact = res.exact
        run.surrogate = res.surrogate
        run.info = {"continued": True, "continued_from_draws": int(res.n_done.min())}
        run.start(q0, warm_rows=0)
        try:
            run.each_chain(worker, n_draws, "continue", parallel=parallel)
        except _Stopped:
            pass
        except KeyboardInterrupt:
            run.interrupted = True
        finally:
            run.close()
        out = run.result()
        warn_if_interrupted(run, out, n_draws, 0)
        if run.error is not None:
            run.error.result = out
            raise run.error
        return out

    def _run_phases(self, run):
        """phases, then finish; an early stop (Ctrl-C, an exception) is recorded
        on `run`, so that the caller can assemble the partial Result."""
        try:
            self.phases(run)
        except _Stopped:
            pass
        except KeyboardInterrupt:
            run.interrupted = True
        except BaseException as exc:  # noqa: BLE001 - re-raised by sample with the partial result
            run.error = exc
        finally:
            run.close()
        try:
            self.finish(run)
        except BaseException as exc:  # noqa: BLE001
            if run.error is None and not run.interrupted:
                raise
            run.info["finish_error"] = repr(exc)   # keep the first failure

    def check_sizes(self, n_draws, n_warmup):
        """Reject run sizes this sampler cannot use (before any work)."""

    def checkpoint_support(self):
        """None when checkpoint/resume can restore this sampler's runs bit for
        bit, else the reason (see :mod:`fastsurrogate.samplers._checkpoint`)."""
        return None

    def phases(self, run):
        """The algorithm: start the chains (``run.start()``), then run phase
        after phase with ``run.each_chain(worker, n_iter, name)``."""
        raise NotImplementedError

    def finish(self, run):
        """Fill ``run.info`` from what the phases left; runs after an
        interruption too."""
