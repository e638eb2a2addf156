"""Machinery every sampler shares: seeds, initial points, warm-up windows,
running chains (in threads when the potentials allow it) with a progress
bar, interruption and timing.  No per-iteration Python here: each chunk of
iterations is one call into C."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait, FIRST_EXCEPTION

import numpy as np

from ..core._hmc import Chain, new_trace, STATUS_INTERRUPTED

__all__ = ["chain_generators", "initial_points", "warmup_windows", "ChainContext",
           "run_chains", "Interrupted", "check_int", "check_positive"]


class Interrupted(Exception):
    """Raised inside a chain's worker when the run is asked to stop."""


def check_int(name, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_positive(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}") from None
    if not (v > 0 and np.isfinite(v)):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return v


def chain_generators(seed, chains):
    """One numpy Generator per chain from `seed` (int, SeedSequence, Generator or None).

    Chain k always gets child k of the seed's SeedSequence, so chain 0 of a
    many-chain run equals a one-chain run with the same seed.
    """
    if isinstance(seed, np.random.Generator):
        return seed.spawn(chains)
    if isinstance(seed, np.random.SeedSequence):
        ss = seed
    elif seed is None or isinstance(seed, (int, np.integer)):
        ss = np.random.SeedSequence(seed)
    else:
        raise TypeError("seed must be None, an int, a SeedSequence or a numpy Generator")
    return [np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(chains)]


def initial_points(potential, init, generators, radius=2.0, tries=100):
    """Initial positions, shape (chains, dim).

    `init` None: uniform on [-radius, radius]^dim (as Stan), redrawn until
    U and its gradient are finite.  Otherwise an array (dim,) shared by all
    chains or (chains, dim).
    """
    d, chains = potential.dim, len(generators)
    if init is not None:
        init = np.asarray(init, dtype=np.float64)
        if init.shape == (d,):
            init = np.tile(init, (chains, 1))
        if init.shape != (chains, d):
            raise ValueError(f"init must have shape ({d},) or ({chains}, {d}), got {init.shape}")
        if not np.all(np.isfinite(init)):
            raise ValueError("init contains NaN or inf")
        return init.copy()
    out = np.empty((chains, d))
    for k, g in enumerate(generators):
        for _ in range(tries):
            q = g.uniform(-radius, radius, size=d)
            u, gr = potential.value_and_grad(q)
            if np.isfinite(u) and np.all(np.isfinite(gr)):
                break
        else:
            raise ValueError(
                f"no finite initial point found in {tries} uniform draws on "
                f"[-{radius}, {radius}]^{d}; pass init=")
        out[k] = q
    return out


def warmup_windows(n_warmup, init_buffer=75, term_buffer=50, base_window=25):
    """Ends (exclusive) of Stan's metric-adaptation windows within n_warmup.

    Returns (start_of_first_window, [window ends]).  With a short warm-up
    the buffers shrink to 15 % / 10 % as in Stan.
    """
    if n_warmup < 20:
        return n_warmup, []
    if init_buffer + base_window + term_buffer > n_warmup:
        init_buffer = int(0.15 * n_warmup)
        term_buffer = int(0.1 * n_warmup)
        base_window = n_warmup - init_buffer - term_buffer
    ends = []
    start, width = init_buffer, base_window
    last = n_warmup - term_buffer
    while start + width <= last:
        end = start + width
        # the last window stretches to the terminal buffer
        if end + 2 * width > last:
            end = last
        ends.append(end)
        start, width = end, 2 * width
    return init_buffer, ends


def regularized_metric(draws, kind):
    """Stan's regularised (co)variance estimate of a window of draws."""
    n = draws.shape[0]
    w = n / (n + 5.0)
    if kind == "dense":
        cov = np.cov(draws, rowvar=False) if n > 1 else np.eye(draws.shape[1])
        return w * np.atleast_2d(cov) + 1e-3 * (5.0 / (n + 5.0)) * np.eye(draws.shape[1])
    var = draws.var(axis=0, ddof=1) if n > 1 else np.ones(draws.shape[1])
    return w * var + 1e-3 * (5.0 / (n + 5.0))


class ChainContext:
    """What a chain's worker needs: progress reporting, the stop flag, timing."""

    def __init__(self, index, stop, report):
        self.index = index
        self.stop = stop
        self._report = report
        self.timings = {}
        self.done = {}
        self.chunk = 10
        self.target_seconds = 0.2

    def phase(self, name):
        ctx = self

        class _Timer:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                ctx.timings[name] = ctx.timings.get(name, 0.0) + time.perf_counter() - self.t0
                return False
        return _Timer()

    def run_span(self, chain, trace, start, stop_row, key, hook=None):
        """Run rows start..stop_row-1 of `trace` in chunks of about 0.2 s.

        ``self.done[key]`` counts the rows filled so far (for partial results).
        ``hook`` (a ChainHook) runs in C after each iteration; when it pauses
        the run (a positive status), this returns early, at the row after the
        paused iteration, for the hook's owner to act.  Returns the next row.
        """
        i = start
        while i < stop_row:
            n = min(self.chunk, stop_row - i)
            t0 = time.perf_counter()
            n_done, status = chain.run(trace, i, n, self.stop, hook)
            dt = time.perf_counter() - t0
            i += n_done
            self.done[key] = i
            self._report(n_done)
            if status == STATUS_INTERRUPTED:
                raise Interrupted
            if status > 0:
                return i
            if n_done == n:
                per = max(dt / max(n_done, 1), 1e-7)
                self.chunk = int(min(max(self.target_seconds / per, 1), 20000))
        return i


def run_chains(worker, chains, total, parallel, progress=True, desc="sampling"):
    """Run ``worker(ctx)`` for each chain and return (results, interrupted, error).

    parallel: run chains in threads (their potentials must release the GIL).
    The progress bar counts iterations over all chains.  On Ctrl-C every
    chain stops before its next iteration and ``interrupted`` is True.  An
    exception in a worker stops the other chains; it is returned (not
    raised) so the caller can attach the partial draws to it.
    """
    stop = np.zeros(1, dtype=np.int32)
    lock = threading.Lock()
    bar = _make_bar(total, progress, desc)
    results = [None] * chains
    interrupted = False
    error = None

    def report(n):
        if bar is not None and n:
            with lock:
                bar.update(n)

    ctxs = [ChainContext(k, stop, report) for k in range(chains)]

    def call(k):
        try:
            results[k] = worker(ctxs[k])
        except Interrupted:
            results[k] = None
            raise

    try:
        if parallel and chains > 1:
            with ThreadPoolExecutor(max_workers=chains) as ex:
                futures = [ex.submit(call, k) for k in range(chains)]
                try:
                    pending = set(futures)
                    while pending:
                        done, pending = wait(pending, timeout=0.1, return_when=FIRST_EXCEPTION)
                        for f in done:
                            exc = f.exception()
                            if exc is not None and not isinstance(exc, Interrupted):
                                stop[0] = 1
                                if error is None:
                                    error = exc
                except KeyboardInterrupt:
                    stop[0] = 1
                    interrupted = True
                    wait(futures)
                for f in futures:
                    exc = f.exception()
                    if isinstance(exc, Interrupted):
                        interrupted = interrupted or error is None
        else:
            for k in range(chains):
                if stop[0]:
                    break
                try:
                    call(k)
                except KeyboardInterrupt:
                    stop[0] = 1
                    interrupted = True
                    break
                except Interrupted:
                    interrupted = True
                    break
                except Exception as exc:  # noqa: BLE001 - handed back to the caller
                    error = exc
                    stop[0] = 1
                    break
    finally:
        if bar is not None:
            bar.close()
    return results, ctxs, interrupted, error


def _make_bar(total, progress, desc):
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="it", smoothing=0.1, leave=False)
