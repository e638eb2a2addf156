"""Laplace approximation of a posterior: the regulariser of VHMC.

The MAP is found by SciPy's optimiser on the exact U and its gradient; the
Hessian of U at the MAP comes from the model when it provides one (a
``hessian(q)`` method, a GLM's ``fisher_information(q)`` -- likelihood
information plus prior precision, the Hessian for canonical links -- or a
Gaussian's ``precision``), otherwise from central finite differences of the
gradient, symmetrised.  The result is the Gaussian N(q_MAP, H^{-1}), whose
potential (1/2)(q - q_MAP)^T H (q - q_MAP) is the quadratic term of the VHMC
surrogate V_t = mu_t z_t + (1 - mu_t) Laplace (Zhang, Shahbaba & Zhao 2018,
section 3.3).
"""
import warnings

import numpy as np
import scipy.optimize as so

from ..core._potential import Potential
from ..models._models import Gaussian

__all__ = ["LaplaceApproximation", "laplace_approximation", "finite_difference_hessian",
           "guarded_objective"]

_HESSIAN_SOURCES = ("auto", "model", "fd")


class LaplaceApproximation:
    """N(mean, cov) fitted at the MAP of a potential.

    Attributes
    ----------
    mean : ndarray (dim,)
        The MAP q_MAP.
    hessian : ndarray (dim, dim)
        Hessian of U at the MAP (the precision), symmetric positive definite.
    cov : ndarray (dim, dim)
        Its inverse.
    sd : ndarray (dim,)
        sqrt(diag(cov)).
    potential : fastsurrogate.models.Gaussian
        U_L(q) = 0.5 (q - mean)^T hessian (q - mean), a compiled Potential.
    u_map : float
        The exact U at the MAP.
    info : dict
        ``hessian_source`` ("hessian", "fisher_information", "precision",
        "fd" or "given"), ``n_evaluations`` (exact U/gradient evaluations
        spent: optimiser plus finite differences), ``optimizer`` (SciPy's
        message, iterations, final gradient norm), ``clipped_eigenvalues``.
    """

    def __init__(self, mean, hessian, u_map=np.nan, info=None):
        mean = np.array(mean, dtype=np.float64).ravel()
        H = np.array(hessian, dtype=np.float64)
        d = mean.shape[0]
        if H.shape != (d, d):
            raise ValueError(f"hessian must have shape ({d}, {d}), got {H.shape}")
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(H))):
            raise ValueError("mean and hessian must be finite")
        H = 0.5 * (H + H.T)
        try:
            L = np.linalg.cholesky(H)
        except np.linalg.LinAlgError:
            raise ValueError("hessian must be positive definite") from None
        Linv = np.linalg.inv(L)
        cov = Linv.T @ Linv
        self.mean = mean
        self.hessian = H
        self.cov = 0.5 * (cov + cov.T)
        self.sd = np.sqrt(np.diag(self.cov))
        self.u_map = float(u_map)
        self.info = dict(info or {})
        self.potential = Gaussian(self.mean, self.cov)

    @property
    def dim(self):
        return self.mean.shape[0]

    def sample(self, n, seed=None):
        """n draws from N(mean, cov), shape (n, dim)."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        L = np.linalg.cholesky(self.cov)
        return self.mean + rng.standard_normal((int(n), self.dim)) @ L.T

    def __repr__(self):
        return (f"<LaplaceApproximation dim={self.dim} hessian from "
                f"{self.info.get('hessian_source', '?')}>")


def finite_difference_hessian(grad, q, step=None):
    """Symmetrised central-difference Hessian of a gradient function at q.

    H[:, j] = (grad(q + h_j e_j) - grad(q - h_j e_j)) / (2 h_j), then
    (H + H^T) / 2.  Default ``h_j = eps^(1/3) max(1, |q_j|)`` (eps the double
    machine epsilon), balancing truncation and rounding error.  Costs 2 dim
    gradient evaluations.
    """
    q = np.asarray(q, dtype=np.float64)
    d = q.shape[0]
    if step is None:
        h = np.cbrt(np.finfo(float).eps) * np.maximum(1.0, np.abs(q))
    else:
        h = np.broadcast_to(np.asarray(step, dtype=np.float64), (d,)).copy()
        if not np.all(h > 0):
            raise ValueError("finite-difference steps must be positive")
    H = np.empty((d, d))
    for j in range(d):
        e = np.zeros(d)
        e[j] = h[j]
        H[:, j] = (np.asarray(grad(q + e)) - np.asarray(grad(q - e))) / (2.0 * h[j])
    return 0.5 * (H + H.T)


def _model_hessian(potential, q):
    """(H, source) from the model itself, or (None, None)."""
    if callable(getattr(potential, "hessian", None)):
        return np.asarray(potential.hessian(q), dtype=np.float64), "hessian"
    if callable(getattr(potential, "fisher_information", None)):
        return np.asarray(potential.fisher_information(q), dtype=np.float64), "fisher_information"
    prec = getattr(potential, "precision", None)
    if isinstance(prec, np.ndarray):
        d = potential.dim
        H = np.diag(prec) if prec.shape == (d,) else np.array(prec)
        return H, "precision"
    return None, None


def guarded_objective(potential):
    """``(fun, counter)`` for ``scipy.optimize.minimize(fun, x0, jac=True)``:
    fun(q) is ``potential.value_and_grad(q)``, or ``(inf, zeros)`` where U or
    its gradient is not finite (the line search then backs off); counter[0]
    counts its calls."""
    counter = [0]

    def fun(q):
        counter[0] += 1
        u, g = potential.value_and_grad(q)
        if not (np.isfinite(u) and np.all(np.isfinite(g))):
            return np.inf, np.zeros_like(q)
        return u, g

    return fun, counter


def laplace_approximation(potential, init=None, *, hessian="auto", method="L-BFGS-B",
                          gtol=1e-8, maxiter=10000, fd_step=None, min_eigenvalue=1e-10):
    """Laplace approximation N(q_MAP, H^{-1}) of exp(-U).

    Parameters
    ----------
    potential : Potential
        The exact target U.
    init : array (dim,), optional
        Starting point of the optimiser (default zeros).
    hessian : {"auto", "model", "fd"} or array (dim, dim)
        "auto": from the model when it provides one (``hessian(q)``,
        ``fisher_information(q)`` or a Gaussian's ``precision``), else finite
        differences of the gradient; "model": from the model or a
        ValueError; "fd": always finite differences; an array: used as given.
    method : str
        ``scipy.optimize.minimize`` method (with the exact gradient).
    gtol, maxiter : optimiser tolerance on the gradient and iteration cap.
    fd_step : float or array (dim,), optional
        Finite-difference steps (see :func:`finite_difference_hessian`).
    min_eigenvalue : float
        A Hessian eigenvalue below ``min_eigenvalue`` times the largest
        (the MAP is not a strict minimum numerically, or the finite
        differences were too noisy) is raised to that floor, with a warning.

    Returns
    -------
    LaplaceApproximation

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> target = fs.models.Gaussian(np.array([1.0, -1.0]), np.array([[2.0, 0.5], [0.5, 1.0]]))
    >>> lap = fs.surrogates.laplace_approximation(target)
    >>> bool(np.allclose(lap.mean, [1.0, -1.0]) and np.allclose(lap.cov, target.cov))
    True
    """
    hessian, x0, g0 = _checked_start(potential, hessian, init)
    fun, counter = guarded_objective(potential)
    res = so.minimize(fun, x0, jac=True, method=method,
                      options=dict(maxiter=int(maxiter), gtol=float(gtol)))
    q_map = np.asarray(res.x, dtype=np.float64)
    u_map, g_map = potential.value_and_grad(q_map)
    n_eval = counter[0] + 2
    H, source, n_h = _hessian_at(potential, hessian, q_map, fd_step)
    n_eval += n_h
    d = potential.dim
    if H.shape != (d, d) or not np.all(np.isfinite(H)):
        raise ValueError(f"the Hessian at the MAP is not a finite ({d}, {d}) matrix")
    q_map, u_map, g_map, H, newton, n_newton = _newton_polish(potential, hessian, fd_step,
                                                              q_map, u_map, g_map, H)
    n_eval += n_newton
    gnorm = float(np.linalg.norm(g_map))
    if gnorm > 1e-4 * max(1.0, float(np.linalg.norm(g0))):
        warnings.warn(f"the MAP search did not converge ({res.message}); gradient norm "
                      f"{gnorm:.3g} at the returned point", RuntimeWarning, stacklevel=2)
    H, clipped = _floored_hessian(H, min_eigenvalue)
    info = {"hessian_source": source, "n_evaluations": int(n_eval),
            "optimizer": {"success": bool(res.success), "message": str(res.message),
                          "iterations": int(getattr(res, "nit", -1)), "grad_norm": gnorm,
                          "newton_steps": newton},
            "clipped_eigenvalues": clipped}
    return LaplaceApproximation(q_map, H, u_map, info)


def _checked_start(potential, hessian, init):
    """(hessian, x0, grad U(x0)) for :func:`laplace_approximation`: the
    ``hessian`` argument checked (an array as float64), the optimiser's start
    (zeros by default) checked, U and its gradient finite there."""
    if not isinstance(potential, Potential):
        raise TypeError(f"potential must be a fastsurrogate Potential, got {type(potential).__name__}")
    d = potential.dim
    if isinstance(hessian, str):
        if hessian not in _HESSIAN_SOURCES:
            raise ValueError(f"hessian must be one of {_HESSIAN_SOURCES} or an array, got {hessian!r}")
    else:
        hessian = np.asarray(hessian, dtype=np.float64)
        if hessian.shape != (d, d):
            raise ValueError(f"a hessian array must have shape ({d}, {d}), got {hessian.shape}")
    x0 = np.zeros(d) if init is None else np.array(init, dtype=np.float64).ravel()
    if x0.shape != (d,):
        raise ValueError(f"init must have shape ({d},), got {np.shape(init)}")
    if not np.all(np.isfinite(x0)):
        raise ValueError("init contains NaN or inf")
    u0, g0 = potential.value_and_grad(x0)
    if not (np.isfinite(u0) and np.all(np.isfinite(g0))):
        raise ValueError("U or its gradient is not finite at the optimiser's start; pass init=")
    return hessian, x0, g0


def _hessian_at(potential, hessian, q, fd_step):
    """(H, source, exact evaluations spent) at q, from the ``hessian``
    argument of :func:`laplace_approximation` (a source name or an array)."""
    if isinstance(hessian, np.ndarray):
        return hessian.copy(), "given", 0
    H, source = (None, None) if hessian == "fd" else _model_hessian(potential, q)
    if H is not None:
        return H, source, 0
    if hessian == "model":
        raise ValueError(f"{type(potential).__name__} provides no Hessian "
                         "(hessian, fisher_information or precision); use hessian='fd'")
    return finite_difference_hessian(potential.grad, q, fd_step), "fd", 2 * potential.dim


def _newton_polish(potential, hessian, fd_step, q_map, u_map, g_map, H):
    """Up to three Newton steps from the optimiser's q_MAP.

    Quasi-Newton optimisers stop at a relative decrease of U (q_MAP good to
    ~1e-7); a Newton step or two with the Hessian brings it to rounding level
    (one step is exact for a quadratic U).  A step is kept only when it lowers
    the gradient norm without raising U.  Returns (q_map, u_map, g_map, H,
    Newton steps kept, exact evaluations spent)."""
    newton = n_eval = 0
    for _ in range(3):
        try:
            step = np.linalg.solve(0.5 * (H + H.T), g_map)
        except np.linalg.LinAlgError:
            break
        q_new = q_map - step
        u_new, g_new = potential.value_and_grad(q_new)
        n_eval += 1
        if not (np.isfinite(u_new) and np.all(np.isfinite(g_new))
                and np.linalg.norm(g_new) < np.linalg.norm(g_map)
                and u_new <= u_map + 1e-12 * max(1.0, abs(u_map))):
            break
        q_map, u_map, g_map = q_new, u_new, g_new
        newton += 1
        H, _, n_h = _hessian_at(potential, hessian, q_map, fd_step)
        n_eval += n_h
        if np.linalg.norm(step) <= 1e-14 * max(1.0, np.linalg.norm(q_map)):
            break
    return q_map, u_map, g_map, H, newton, n_eval


def _floored_hessian(H, min_eigenvalue):
    """(H symmetrised, with its eigenvalues below ``min_eigenvalue`` x the
    largest raised to that floor (with a warning), number raised)."""
    H = 0.5 * (H + H.T)
    w, V = np.linalg.eigh(H)
    floor = min_eigenvalue * max(float(w.max()), np.finfo(float).tiny)
    clipped = int(np.sum(w < floor))
    if clipped:
        # stacklevel 3: the caller of laplace_approximation
        warnings.warn(f"the Hessian at the MAP has {clipped} eigenvalue(s) below "
                      f"{min_eigenvalue:g} x the largest (smallest {w.min():.3g}); raised to that "
                      "floor: the Laplace approximation is unreliable in those directions",
                      RuntimeWarning, stacklevel=3)
        H = (V * np.maximum(w, floor)) @ V.T
        H = 0.5 * (H + H.T)
    return H, clipped
