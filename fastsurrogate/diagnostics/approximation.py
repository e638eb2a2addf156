"""How good is an approximate posterior?  Diagnostics for surrogate-induced
distributions (VHMC) and other approximations.

* On a grid (dim <= 2), where the normalising constants can be computed:
  :func:`kl_divergence_grid` (KL(approx || exact)) and
  :func:`score_matching_distance_grid` (the expected squared distance between
  the two scores, the quantity score matching minimises).
* Against a long exact run (any dim): :func:`relative_errors`, the REM and
  REC of the VHMC paper (eq. 4.1).
* In closed form for two Gaussians: :func:`gaussian_kl` (a check of the grid
  computation, and the KL of a Laplace approximation to a Gaussian target).

A density is given by its potential U = -log density (up to a constant): a
:class:`~fastsurrogate.Potential` (e.g. ``result.surrogate`` of VHMC: the
frozen V whose exp(-V) the draws target) or a function ``f(q) -> (U, grad U)``.
"""
from typing import Any, Callable, TypeAlias

import numpy as np

from .._typing import ArrayLike, FloatArray
from . import mcmc as _diag
from ..core._potential import Potential

# a Potential or a function q -> (U, grad U)
PotentialLike: TypeAlias = Potential | Callable[..., Any]

__all__ = ["grid", "kl_divergence_grid", "score_matching_distance_grid", "gaussian_kl",
           "relative_errors"]


def _bounds(bounds):
    b = np.asarray(bounds, dtype=np.float64)
    if b.ndim == 1 and b.shape == (2,):
        b = b[None, :]
    if b.ndim != 2 or b.shape[1] != 2 or b.shape[0] not in (1, 2):
        raise ValueError("bounds must be [(lo, hi)] or [(lo1, hi1), (lo2, hi2)]: the grid "
                         f"diagnostics work in 1 or 2 dimensions; got shape {b.shape}")
    if not np.all(np.isfinite(b)) or np.any(b[:, 1] <= b[:, 0]):
        raise ValueError(f"every bound needs finite lo < hi, got {b.tolist()}")
    return b


def grid(bounds: ArrayLike,
         n_grid: int = 201) -> tuple[FloatArray, float, tuple[int, ...]]:
    """A regular grid: (points (n, dim), cell volume, shape)."""
    b = _bounds(bounds)
    n_grid = int(n_grid)
    if n_grid < 3:
        raise ValueError(f"n_grid must be >= 3, got {n_grid}")
    axes = [np.linspace(lo, hi, n_grid) for lo, hi in b]
    mesh = np.meshgrid(*axes, indexing="ij")
    pts = np.stack([m.ravel() for m in mesh], axis=1)
    cell = float(np.prod([(hi - lo) / (n_grid - 1) for lo, hi in b]))
    return pts, cell, mesh[0].shape


def _evaluate(pot, Q, want_grad):
    """U (n,) and, when asked, grad U (n, dim) at the rows of Q."""
    d = Q.shape[1]
    if isinstance(pot, Potential):
        if pot.dim != d:
            raise ValueError(f"a potential has dim {pot.dim}; the grid has dim {d}")
        if want_grad and hasattr(pot, "value_and_gradient_batch"):
            u, g = pot.value_and_gradient_batch(Q)
            return np.asarray(u, float), np.asarray(g, float)
        if not want_grad and hasattr(pot, "value_batch"):
            return np.asarray(pot.value_batch(Q), float), None
        f = pot.value_and_grad
    elif callable(pot):
        f = pot
    else:
        raise TypeError(f"expected a Potential or a callable f(q) -> (U, grad), got {type(pot).__name__}")
    u = np.empty(Q.shape[0])
    g = np.empty(Q.shape) if want_grad else None
    for i, q in enumerate(Q):
        ui, gi = f(q)
        u[i] = ui
        if want_grad:
            g[i] = gi
    return u, g


def _log_normalised(u, cell):
    """log p on the grid from U, normalised so that sum p * cell = 1."""
    if not np.any(np.isfinite(u)):
        raise ValueError("U is not finite anywhere on the grid")
    lp = -u
    lp = np.where(np.isfinite(lp), lp, -np.inf)
    m = lp.max()
    logz = m + np.log(np.sum(np.exp(lp - m)) * cell)
    return lp - logz


def _edge_mass(logp, cell, shape):
    """Probability mass in the outermost grid cells: a check that the grid
    holds (nearly) all of the distribution."""
    p = np.exp(logp).reshape(shape) * cell
    inner = p[(slice(1, -1),) * p.ndim].sum()
    return float(max(p.sum() - inner, 0.0))


def kl_divergence_grid(approx: PotentialLike, exact: PotentialLike, bounds: ArrayLike,
                       n_grid: int = 201, return_details: bool = False
                       ) -> float | tuple[float, dict[str, float]]:
    """KL(approx || exact) = E_approx[log p_approx - log p_exact], in nats.

    Both densities are normalised on a regular grid over ``bounds``
    (Riemann sums with ``n_grid`` points per axis), so the grid must hold
    essentially all of both distributions; the mass of the outer grid cells
    is reported with ``return_details`` (keep it below ~1e-6).

    Parameters
    ----------
    approx, exact : Potential or callable f(q) -> (U, grad)
        The approximation (e.g. ``result.surrogate``) and the exact U.
    bounds : [(lo, hi)] or [(lo1, hi1), (lo2, hi2)]
    n_grid : int
    return_details : bool
        Also return a dict with ``edge_mass_approx``, ``edge_mass_exact``.

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> from fastsurrogate.approximation import kl_divergence_grid, gaussian_kl
    >>> p = fs.models.Gaussian(np.zeros(2), np.eye(2))
    >>> q = fs.models.Gaussian(np.array([0.5, 0.0]), np.eye(2) * 2.0)
    >>> kl = kl_divergence_grid(q, p, [(-12, 12), (-12, 12)], n_grid=301)
    >>> bool(abs(kl - gaussian_kl([0.5, 0], np.eye(2) * 2, np.zeros(2), np.eye(2))) < 1e-6)
    True
    """
    Q, cell, shape = grid(bounds, n_grid)
    la = _log_normalised(_evaluate(approx, Q, False)[0], cell)
    le = _log_normalised(_evaluate(exact, Q, False)[0], cell)
    pa = np.exp(la)
    mask = pa > 0
    if np.any(~np.isfinite(le[mask])):
        kl = np.inf
    else:
        kl = float(np.sum(pa[mask] * (la[mask] - le[mask])) * cell)
    if return_details:
        return kl, {"edge_mass_approx": _edge_mass(la, cell, shape),
                    "edge_mass_exact": _edge_mass(le, cell, shape)}
    return kl


def score_matching_distance_grid(approx: PotentialLike, exact: PotentialLike, bounds: ArrayLike,
                                 n_grid: int = 201, under: str = "exact") -> float:
    """Score-matching (Fisher) distance (1/2) E_p ||grad log p_approx - grad log p_exact||^2.

    The expectation is under the exact posterior (``under="exact"``, the
    objective that score matching estimates from posterior points) or
    under the approximation (``under="approx"``), computed on the grid.
    """
    if under not in ("exact", "approx"):
        raise ValueError(f"under must be 'exact' or 'approx', got {under!r}")
    Q, cell, _ = grid(bounds, n_grid)
    ua, ga = _evaluate(approx, Q, True)
    ue, ge = _evaluate(exact, Q, True)
    w = np.exp(_log_normalised(ue if under == "exact" else ua, cell))
    diff = np.sum((ga - ge) ** 2, axis=1)
    ok = w > 0
    return float(0.5 * np.sum(w[ok] * diff[ok]) * cell)


def gaussian_kl(mean_p: ArrayLike, cov_p: ArrayLike, mean_q: ArrayLike,
                cov_q: ArrayLike) -> float:
    """KL(N(mean_p, cov_p) || N(mean_q, cov_q)) in nats, in closed form."""
    mp = np.atleast_1d(np.asarray(mean_p, dtype=np.float64))
    mq = np.atleast_1d(np.asarray(mean_q, dtype=np.float64))
    Sp = np.atleast_2d(np.asarray(cov_p, dtype=np.float64))
    Sq = np.atleast_2d(np.asarray(cov_q, dtype=np.float64))
    d = mp.shape[0]
    if mq.shape != (d,) or Sp.shape != (d, d) or Sq.shape != (d, d):
        raise ValueError("means must be (dim,) and covariances (dim, dim), all of one dim")
    Lq = np.linalg.cholesky(Sq)
    Lp = np.linalg.cholesky(Sp)
    A = np.linalg.solve(Lq, Lp)
    b = np.linalg.solve(Lq, mq - mp)
    logdet = 2.0 * (np.sum(np.log(np.diag(Lq))) - np.sum(np.log(np.diag(Lp))))
    return float(0.5 * (np.sum(A * A) + b @ b - d + logdet))


def relative_errors(draws: ArrayLike, reference: ArrayLike) -> dict[str, Any]:
    """REM and REC (VHMC paper, eq. 4.1) of ``draws`` against a reference run.

    Parameters
    ----------
    draws : array (draws, dim) or (chains, draws, dim), or a Result
    reference : array (n, dim) or (chains, n, dim), or a Result
        A long exact run (its pooled mean and covariance are the truth).

    Returns
    -------
    dict
        ``rem``, ``rec``, and the reference's own Monte Carlo floor
        ``rem_floor`` (``sqrt(2/pi) sum_i MCSE_i / sum_i |mean_i|``: the REM that
        the reference's own error alone would give; smaller differences
        cannot be resolved).
    """
    d = np.asarray(getattr(draws, "draws", draws), dtype=np.float64)
    r = np.asarray(getattr(reference, "draws", reference), dtype=np.float64)
    if r.ndim not in (2, 3) or d.ndim not in (2, 3) or r.shape[-1] != d.shape[-1]:
        raise ValueError(f"draws and reference must be (n, dim) or (chains, n, dim) arrays of "
                         f"one dim, got shapes {d.shape} and {r.shape}")
    r3 = r if r.ndim == 3 else r[None]
    pooled = r3.reshape(-1, r3.shape[-1])
    mean = pooled.mean(axis=0)
    cov = np.atleast_2d(np.cov(pooled, rowvar=False))
    floor = np.nan
    if r3.shape[1] >= 4:
        mcse = _diag.mcse_mean(r3)
        floor = float(np.sqrt(2 / np.pi) * np.sum(mcse) / np.sum(np.abs(mean)))
    return {"rem": _diag.relative_error_mean(d, mean), "rec": _diag.relative_error_cov(d, cov),
            "rem_floor": floor}
