"""``fs.sample`` and ``fs.resume``: a method's name to its sampler, and a
checkpointed run continued.  Above the samplers (it reads their registry,
``SAMPLERS``) and below the package's face, which re-exports both."""
import inspect
from typing import Any

from ._typing import PathLike
from .core._potential import Potential
from .result import Result
from .samplers import SAMPLERS
from .samplers._checkpoint import FORMAT, VERSION, read_npz

__all__ = ["sample", "resume"]


def _init_params(cls: type) -> set[str]:
    """Keyword names a sampler's constructor accepts, through **options chains."""
    names = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters
        names |= {n for n, p in params.items()
                  if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            break
    return names - {"self", "potential"}


def sample(potential: Potential, method: str = "nuts", n_draws: int = 1000,
           n_warmup: int | None = None, **kwargs: Any) -> Result:
    """Sample from ``potential`` with the named method.

    ``fs.sample(model)`` runs NUTS with its defaults: 4 chains x (1000
    warm-up + 1000 draws), its trees driven by a surrogate trained on the
    warm-up's own leapfrog points where the gradient is expensive enough to
    matter, and exact NUTS otherwise (``result.info["surrogate"]`` says
    which and why; exact either way).  ``fs.sample(model, "nuts", 1000,
    1000, chains=4)`` is ``fs.NUTS(model).sample(1000, 1000, chains=4)``.

    Parameters
    ----------
    potential : Potential
        The target: a model (``fs.models``; a posteriordb model is wrapped
        for you), a trained surrogate, or ``fs.Potential.from_callable(f, dim)``.
    method : str
        A key of ``fastsurrogate.SAMPLERS`` (case and "_" / "-" ignored),
        default "nuts": "hmc", "nuts", "rns-hmc", "arns-hmc", "vhmc", "nnghmc", "rmhmc",
        "rns-rmhmc", "sgld", "sghmc".
    n_draws : int
        Kept draws per chain.
    n_warmup : int, optional
        Warm-up (or exploration) iterations per chain; default the sampler's
        ``default_warmup`` (1000; 400 for ARNS-HMC).
    **kwargs
        Go to the sampler's constructor (e.g. ``step_size``, ``n_steps``,
        ``n_hidden``) or to its ``sample`` method
        (``chains``, ``seed``, ``init``, ``progress``, ``keep_warmup``,
        ``checkpoint``, ``checkpoint_every``, ``resume``, ``executor``),
        whichever accepts them; an argument
        neither accepts is a TypeError.

    Returns
    -------
    Result
        ``draws`` (chains, n_draws, dim), per-draw ``stats``, ``timings``,
        ``summary()``, ``to_arviz()``.
    """
    key = str(method).lower().replace("_", "-")
    if key not in SAMPLERS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(SAMPLERS)}")
    cls = SAMPLERS[key]
    init_params = _init_params(cls)
    run_params = set(inspect.signature(cls.sample).parameters) - {"self"}
    unknown = set(kwargs) - init_params - run_params
    if unknown:
        raise TypeError(f"{cls.__name__} got unexpected arguments: {sorted(unknown)}")
    ctor = {k: v for k, v in kwargs.items() if k in init_params}
    run = {k: v for k, v in kwargs.items() if k in run_params and k not in init_params}
    return cls(potential, **ctor).sample(n_draws, n_warmup, **run)


def resume(path: PathLike, potential: Potential, **options: Any) -> Result:
    """Continue the run checkpointed in `path` (written by ``sample(...,
    checkpoint=path)``).

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint file.
    potential : Potential
        The same target (the checkpoint does not hold the data).
    **options
        The same sampler options as the checkpointed run (``step_size``,
        ``n_hidden``, ...); they are checked against the checkpoint's
        fingerprint.  Sizes, chains and seeds come from the checkpoint;
        ``progress`` and ``checkpoint_every`` may be given.

    Returns
    -------
    Result
        Bit for bit the Result of the uninterrupted run (timings aside).

    Examples
    --------
    >>> import fastsurrogate as fs, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "run.npz")
    >>> m = fs.models.StandardNormal(2)
    >>> a = fs.sample(m, "hmc", 100, 100, chains=1, seed=1, progress=False, checkpoint=path,
    ...               checkpoint_every=50)
    >>> b = fs.resume(path, m, progress=False)
    >>> bool((a.draws == b.draws).all())
    True
    """
    header, _ = read_npz(path, FORMAT, VERSION)
    # the sampler's key in fs.SAMPLERS: "method" is the run's (VHMC with
    # exact=True calls itself "vhmc-exact"; files before "sampler" was kept)
    key = header.get("sampler") or {"vhmc-exact": "vhmc"}.get(header["method"],
                                                              header["method"])
    return sample(potential, key, header["n_draws"], header["n_warmup"],
                     chains=header["chains"], keep_warmup=header["keep_warmup"],
                     resume=path, **options)
