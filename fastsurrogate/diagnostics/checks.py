"""Checks around a run: the gradient before it, the draws after it.

:func:`check_gradient` compares a potential's gradient with central finite
differences of its value along random directions at a few points, and
looks for the most common slip with a hand-written potential: passing
log p where U = -log p is expected (``log_density=True`` forgotten), which
makes exp(-U) grow without bound.  :func:`run_warnings` lists what went
wrong in a finished run, in Stan's and ArviZ's tradition: R-hat above
1.01, bulk or tail ESS below 100 per chain, divergences, trees that hit
the maximum depth, chains that never moved.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .._typing import ArrayLike, SeedLike

if TYPE_CHECKING:                     # annotations only (result imports this module)
    from ..core._potential import Potential
    from ..result import Result

__all__ = ["GradientCheck", "check_gradient", "run_warnings", "GradientCheckError",
           "SamplingWarning", "check_gradient_before"]


class SamplingWarning(RuntimeWarning):
    """A run finished but its draws need care (:func:`run_warnings`)."""


class GradientCheckError(ValueError):
    """A potential whose gradient disagrees with its value, or whose value
    falls without bound (log p passed as U)."""


@dataclass
class GradientCheck:
    """What :func:`check_gradient` found.

    Attributes
    ----------
    points : ndarray (n_points, dim)
        Where the gradient was checked.
    relative_error : ndarray (n_points, n_directions)
        ``|g.v - fd| / max(|g.v|, |fd|, abs_floor)`` for each direction v.
    sign_flipped : bool
        The directional derivatives agree in size with the finite
        differences but have the opposite sign (the gradient of log p
        returned as grad U).
    unbounded : bool
        Along every ray checked U was lower far out and still falling (log
        p passed as U: ``log_density=True`` forgotten).
    tol : float
        The relative error above which a direction counts as a mismatch.
    """
    points: np.ndarray
    relative_error: np.ndarray
    sign_flipped: bool
    unbounded: bool
    tol: float
    notes: list = field(default_factory=list)

    @property
    def ok(self):
        finite = np.isfinite(self.relative_error)
        return (not self.sign_flipped and not self.unbounded and finite.any()
                and bool(np.all(self.relative_error[finite] <= self.tol)))

    def message(self):
        """A readable verdict (one paragraph)."""
        if self.unbounded:
            return ("U falls without bound along every direction checked: exp(-U) is not a "
                    "density.  Did the callable return log p (pass log_density=True) where "
                    "U = -log p is expected?")
        if self.sign_flipped:
            return ("the gradient has the wrong sign: it matches minus the finite "
                    "differences of the value.  Return grad U = -grad log p (or pass "
                    "log_density=True with both value and gradient of log p).")
        finite = self.relative_error[np.isfinite(self.relative_error)]
        worst = float(finite.max()) if finite.size else float("nan")
        if self.ok:
            return (f"the gradient agrees with central finite differences of the value at "
                    f"{len(self.points)} points (largest relative error {worst:.1e})")
        return (f"the gradient disagrees with central finite differences of the value: "
                f"largest relative error {worst:.1e} (tolerance {self.tol:g}) at "
                f"{len(self.points)} points checked; check the gradient's formula")

    def __repr__(self):
        return f"<GradientCheck ok={self.ok}: {self.message()}>"


def _finite(potential, q):
    try:
        u, g = potential.value_and_grad(q)
    except ArithmeticError:
        return None
    if np.isfinite(u) and np.all(np.isfinite(g)):
        return float(u), np.asarray(g, dtype=np.float64)
    return None


def _unbounded(potential, points, rng):
    """True when, along every ray tried, U is lower far out than at the
    start AND still falling there (its slope outward negative): exp(-U)
    then grows without bound, as it does when log p is passed as U.  A
    proper posterior's U rises far out in every direction."""
    falls = []
    d = points.shape[1]
    for q in points[:2]:
        start = _finite(potential, q)
        if start is None:
            continue
        scale = 1.0 + np.linalg.norm(q) / np.sqrt(d)
        for _ in range(2):
            v = rng.standard_normal(d)
            v /= np.linalg.norm(v)
            far = None
            for t in (10.0, 100.0):
                ug = _finite(potential, q + t * scale * v)
                if ug is not None:
                    far = ug
            if far is None:
                continue
            falls.append(far[0] < start[0] and float(far[1] @ v) < 0.0)
    return bool(falls) and all(falls)


def check_gradient(potential: Potential, q: ArrayLike | None = None, *, n_points: int = 3,
                   n_directions: int = 4, tol: float = 1e-4, seed: SeedLike = 0,
                   radius: float = 2.0) -> GradientCheck:
    """Compare ``potential``'s gradient with finite differences of its value.

    Parameters
    ----------
    potential : Potential
    q : array (dim,) or (n, dim), optional
        Where to check; default ``n_points`` uniform draws on [-radius,
        radius]^dim (Stan's initial points) where U and its gradient are
        finite.
    n_directions : int
        Random unit directions v per point; each costs two values of U.
        The directional derivative g.v is compared with
        (U(q + h v) - U(q - h v)) / (2 h), ``h = 1e-5 (1 + |q|)``.
    tol : float
        Relative error that counts as a mismatch.
    seed : int
        The points and directions (not the chains' streams).

    Returns
    -------
    GradientCheck
        ``.ok``, ``.message()``, per-direction relative errors.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> pot = fs.Potential.from_callable(lambda q: (0.5 * q @ q, -q), 3)   # wrong sign
    >>> fs.check_gradient(pot).sign_flipped
    True
    """
    from ..samplers._checks import check_potential
    potential = check_potential(potential)
    d = potential.dim
    rng = np.random.default_rng(seed)
    if q is None:
        pts = []
        for _ in range(100 * n_points):
            x = rng.uniform(-radius, radius, size=d)
            if _finite(potential, x) is not None:
                pts.append(x)
            if len(pts) == n_points:
                break
        if not pts:
            raise GradientCheckError(f"no point of [-{radius}, {radius}]^{d} has a finite U and "
                                     "gradient: pass q=")
        points = np.array(pts)
    else:
        points = np.atleast_2d(np.asarray(q, dtype=np.float64))
        if points.shape[1] != d:
            raise ValueError(f"q must have shape ({d},) or (n, {d}), got {np.shape(q)}")
    err = np.full((points.shape[0], n_directions), np.nan)
    same, opposite = 0, 0
    for i, x in enumerate(points):
        ug = _finite(potential, x)
        if ug is None:
            continue
        g = ug[1]
        h = 1e-5 * (1.0 + np.linalg.norm(x) / np.sqrt(d))
        for j in range(n_directions):
            v = rng.standard_normal(d)
            v /= np.linalg.norm(v)
            try:
                fd = (float(potential.value(x + h * v)) - float(potential.value(x - h * v))) / (2 * h)
            except ArithmeticError:
                continue
            gv = float(g @ v)
            scale = max(abs(gv), abs(fd), 1e-6 * (1.0 + np.linalg.norm(g)))
            err[i, j] = abs(gv - fd) / scale
            if abs(gv + fd) / scale <= tol and abs(gv) > 1e-8 * (1.0 + np.linalg.norm(g)):
                opposite += 1
            elif err[i, j] <= tol:
                same += 1
    flipped = opposite > 0 and same == 0
    return GradientCheck(points=points, relative_error=err, sign_flipped=flipped,
                         unbounded=_unbounded(potential, points, rng), tol=tol)


def check_gradient_before(potential):
    """The cheap check a sampler runs before sampling a Python potential (a
    callable, a JAX or PyMC model, a posteriordb model, a C function given
    by address): one point, three
    directions; raises :class:`GradientCheckError` with the verdict when it
    fails.  Compiled models are checked by their own tests and skipped.

    It refuses only a relative error above 1e-2 (a wrong sign, log p passed
    as U, a term missing or a coordinate off by a factor): the gradient of a
    model that runs an adaptive ODE solver is the gradient of the discrete
    solution, and central differences of its value see the step-size
    controller's jumps (a relative error of about 1e-3 in the Lotka-Volterra
    example of docs/examples), which is no reason to refuse it."""
    from ..core._potential import CallbackPotential, CFunctionPotential
    if not isinstance(potential, (CallbackPotential, CFunctionPotential)):
        return
    try:
        found = check_gradient(potential, n_points=1, n_directions=3, tol=1e-2)
    except GradientCheckError:
        return           # no finite point to check at: the sampler says so itself
    if not found.ok:
        raise GradientCheckError(f"the potential's gradient check failed: {found.message()} "
                                 "(fastsurrogate.check_gradient(potential) shows the "
                                 "details; warn=False skips this check)")


def run_warnings(res: Result, rhat_max: float = 1.01, min_ess_per_chain: float = 100,
                 min_move: float = 0.05) -> list[str]:
    """What went wrong in a finished run: a list of sentences (empty when
    nothing did).  Stan's and ArviZ's checks: R-hat above ``rhat_max``, bulk
    or tail ESS below ``min_ess_per_chain`` times the chains, divergences,
    trees at the maximum depth, chains that never moved or moved in fewer
    than ``min_move`` of their draws; and the sampler's own (a list of
    sentences in ``res.info["warnings"]``, such as VHMC's draws beyond its
    training points)."""
    from .mcmc import rhat, ess_bulk, ess_tail
    out: list[str] = []
    draws = res.draws
    n_chains, n = draws.shape[0], draws.shape[1]
    if n < 4 or not np.all(np.isfinite(draws)):
        return out
    moves = np.any(draws[:, 1:] != draws[:, :-1], axis=2).mean(axis=1)    # (chains,)
    stuck = [c for c in range(n_chains) if moves[c] == 0]
    if stuck:
        out.append(f"chain(s) {stuck} never moved in {n} draws: a step size too large or too "
                   "small, or a starting point where the gradient is wrong")
    slow = [c for c in range(n_chains) if c not in stuck and moves[c] < min_move]
    if slow:
        out.append(f"chain(s) {slow} moved in only {min(moves[c] for c in slow):.1%} to "
                   f"{max(moves[c] for c in slow):.1%} of their draws: they are stuck where the "
                   "proposals are poor (a surrogate that is wrong there, or a step size that "
                   "does not fit this region); their draws add little")
    info = res.info if isinstance(res.info, dict) else {}
    out.extend(info.get("warnings", []))
    names = list(res.param_names)
    if n_chains > 1:
        r = np.asarray(rhat(draws))
        bad = np.flatnonzero(~(r <= rhat_max))
        if bad.size:
            worst = bad[np.argmax(np.where(np.isfinite(r[bad]), r[bad], np.inf))]
            out.append(f"R-hat above {rhat_max} for {bad.size} parameter(s) (largest "
                       f"{r[worst]:.3f}, {names[worst]}): the chains disagree; run longer or "
                       "check for multimodality")
    need = min_ess_per_chain * n_chains
    for label, fn in (("bulk", ess_bulk), ("tail", ess_tail)):
        e = np.asarray(fn(draws))
        low = np.flatnonzero(~(e >= need))
        if low.size:
            k = low[np.argmin(np.where(np.isfinite(e[low]), e[low], -np.inf))]
            out.append(f"{label} ESS below {need} ({min_ess_per_chain} per chain) for "
                       f"{low.size} parameter(s) (smallest {e[k]:.0f}, {names[k]}): "
                       "estimates are unreliable; run longer")
    stats = res.stats
    if "divergent" in stats:
        n_div = int(np.sum(stats["divergent"]))
        if n_div:
            out.append(f"{n_div} divergent transition(s) after warm-up: the posterior has "
                       "regions the step size cannot resolve; raise target_accept or "
                       "reparameterise")
    depth = stats.get("tree_depth")
    max_depth = res.info.get("max_tree_depth") if isinstance(res.info, dict) else None
    if depth is not None and max_depth:
        hit = int(np.sum(np.asarray(depth) >= max_depth))
        if hit:
            out.append(f"{hit} tree(s) reached the maximum depth {max_depth}: the "
                       "trajectories were cut short; raise max_tree_depth")
    return out
