"""What a run's chains start from, and what stops them: one random stream
per chain and the surrogate's basis seed, Stan's initial points, warm-up
windows and regularised metric, and the exception a chain's worker raises
when the run is asked to stop.  (The skeleton that uses them:
:mod:`fastsurrogate.samplers._base`.)
"""

import numpy as np

__all__ = ["Interrupted", "chain_generators", "surrogate_seed", "initial_points",
           "warmup_windows", "regularized_metric"]


class Interrupted(Exception):
    """Raised inside a chain's worker when the run is asked to stop."""


def chain_generators(seed, chains):
    """One numpy Generator per chain from `seed` (int, SeedSequence, Generator or None).

    Chain k gets child k of the seed's SeedSequence, so its stream does not
    depend on how many chains run.  (Its draws do, for samplers that pool
    the chains' states to train one surrogate.)
    """
    if isinstance(seed, np.random.Generator):
        return seed.spawn(chains)
    if isinstance(seed, np.random.SeedSequence):
        ss = seed
    elif isinstance(seed, (bool, np.bool_)):
        raise TypeError("seed must be None, an int, a SeedSequence or a numpy Generator, "
                        "got a bool")
    elif seed is None or isinstance(seed, (int, np.integer)):
        if seed is not None and seed < 0:
            raise ValueError(f"seed must be non-negative, got {seed}")
        ss = np.random.SeedSequence(seed)
    else:
        raise TypeError("seed must be None, an int, a SeedSequence or a numpy Generator")
    return [np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(chains)]


def surrogate_seed(generator):
    """A seed for the random basis, derived from (not drawn from) chain 0's stream."""
    ss = generator.bit_generator.seed_seq
    child = np.random.SeedSequence(entropy=ss.entropy, spawn_key=tuple(ss.spawn_key) + (2 ** 31,))
    return int(child.generate_state(1, np.uint64)[0])


def initial_points(potential, generators, radius=2.0, tries=100):
    """Stan's initial positions, shape (chains, dim): uniform on [-radius, radius]^dim,
    redrawn until U and its gradient are finite."""
    d = potential.dim
    out = np.empty((len(generators), d))
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

