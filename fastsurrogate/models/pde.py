"""The elliptic PDE inverse problem of the RNS-HMC paper (section 5.2).

    div(c(x, theta) grad u(x)) = 0   on [0, 1]^2,
    u = x1 on x2 = 0,  u = 1 - x1 on x2 = 1,  c du/dx1 = 0 on x1 = 0 and x1 = 1,

with log c a Karhunen-Loeve expansion of a Gaussian process, bilinear finite
elements on a uniform mesh, and noisy point observations of u.  The forward
model is a sparse SPD solve, whose cost dominates.  The mesh, the KL basis
and the observation operator are set up in NumPy/SciPy once; each
evaluation (KL expansion, assembly of the banded stiffness matrix, banded
Cholesky, forward and adjoint solves, the adjoint contraction) is one C
call (csrc/fs_pde.c, models/_pde.pyx), so the chain loop never enters
Python for it.  ``solver="splu"`` keeps a SciPy
SuperLU path behind the Python callback trampoline.
"""
import numbers

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from fastsurrogate._typing import ArrayLike
from fastsurrogate.core._potential import CallbackPotential
from fastsurrogate.models._pde import PDEKernel

__all__ = ["EllipticPDE"]

# Stiffness of the bilinear element on a square (any side: independent of h
# in 2-D), local nodes counter-clockwise from the lower-left corner.
_K_REF = np.array([[4.0, -1.0, -2.0, -1.0],
                   [-1.0, 4.0, -1.0, -2.0],
                   [-2.0, -1.0, 4.0, -1.0],
                   [-1.0, -2.0, -1.0, 4.0]]) / 6.0
# Mass matrix of the unit square element (times h^2).
_M_REF = np.array([[4.0, 2.0, 1.0, 2.0],
                   [2.0, 4.0, 2.0, 1.0],
                   [1.0, 2.0, 4.0, 2.0],
                   [2.0, 1.0, 2.0, 4.0]]) / 36.0


def _int_arg(obj, name, lo, hi):
    if isinstance(obj, (bool, np.bool_)) or not isinstance(obj, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {obj!r}")
    if not lo <= obj <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {obj}")
    return int(obj)


def _pos_arg(obj, name):
    if isinstance(obj, (bool, np.bool_)) or not isinstance(obj, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {obj!r}")
    x = float(obj)
    if not (np.isfinite(x) and x > 0.0):
        raise ValueError(f"{name} must be positive and finite, got {obj!r}")
    return x


def _bilinear_matrix(points, m):
    """Sparse (n_points, (m+1)^2) bilinear interpolation on the m x m mesh."""
    h = 1.0 / m
    n1 = m + 1
    rows, cols, vals = [], [], []
    for r, (x1, x2) in enumerate(points):
        i = min(int(np.floor(x1 / h)), m - 1)
        j = min(int(np.floor(x2 / h)), m - 1)
        s, t = x1 / h - i, x2 / h - j
        for di, dj, w in ((0, 0, (1 - s) * (1 - t)), (1, 0, s * (1 - t)),
                          (1, 1, s * t), (0, 1, (1 - s) * t)):
            if w != 0.0:
                rows.append(r)
                cols.append((i + di) + n1 * (j + dj))
                vals.append(w)
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(points), n1 * n1))


class EllipticPDE(PDEKernel):
    """Posterior of the KL coefficients of an elliptic PDE's coefficient
    (RNS-HMC paper, section 5.2; a Potential).

    Forward model: ``div(c grad u) = 0`` on the unit square, ``u = x1`` on
    ``x2 = 0``, ``u = 1 - x1`` on ``x2 = 1``, zero flux on ``x1 = 0, 1``
    (the Dirichlet data disagree with the zero-flux condition at the corners,
    so u is not smooth there; the problem is well posed all the same).
    Discretisation: bilinear finite elements on a uniform ``n_mesh x n_mesh``
    mesh, c constant on each element (its value at the element centre).

    Coefficient: ``log c(x) = sum_k theta_k sqrt(lambda_k) phi_k(x)``, the
    Karhunen-Loeve expansion of a Gaussian process with covariance
    ``variance * exp(-|x - y|^2 / (2 length_scale^2))`` truncated at
    ``n_modes`` terms.  The kernel is a product over the two coordinates, so
    the eigenpairs are products of the 1-D eigenpairs (Nystrom on the element
    centres, computed once); they are ordered by decreasing lambda (ties by
    the first index), and each 1-D eigenvector is signed to be positive at
    the first centre, so the basis is reproducible.

    Observations: u at an ``n_obs_side x n_obs_side`` uniform grid of
    ``[0, 1]^2`` (bilinear interpolation of the finite-element solution)
    plus N(0, noise_sd^2) noise; when ``y`` is not given they are simulated
    from ``theta_true`` (default a draw from the prior with ``seed``) on the
    same mesh.  Prior ``theta_k ~ N(0, prior_sd^2)``::

        U(theta) = |y - O u(theta)|^2 / (2 noise_sd^2) + |theta|^2 / (2 prior_sd^2)

    The gradient is the adjoint method: one more solve with the same
    Cholesky factor.  :meth:`gauss_newton_hessian` (and its diagonal) uses
    ``n_modes`` more solves with that factor.  :meth:`fisher_metric` is that
    metric with its derivative (second-order adjoints) for RMHMC:
    ``fs.RMHMC(model, metric="fisher")``.

    Solver: the stiffness matrix of the free nodes, in the natural
    (lexicographic) node order, is banded (half bandwidth n_mesh + 2).  With
    ``solver="banded"`` (default) U and its gradient are one C call
    (csrc/fs_pde.c): the band is assembled from the element coefficients
    through a precomputed element-to-free-node map and factorised by a
    banded Cholesky (a sparse direct solve whose ordering and symbolic
    structure are fixed once; no Python per evaluation, thread-safe).
    :meth:`solve`, :meth:`observe` and :meth:`jacobian` use the same band
    with LAPACK's ``scipy.linalg.cholesky_banded``.  ``solver="splu"`` uses
    SuperLU on the CSC matrix with the same fixed (natural, banded) ordering
    instead, behind the Python callback trampoline (for comparison).

    Parameters
    ----------
    n_mesh : int
        Elements per side (default 30).
    n_modes : int
        KL modes d = dim (default 20).
    n_obs_side : int
        Observation grid points per side (default 11).
    noise_sd, prior_sd : float
        Observation noise sd (0.1) and prior sd of theta (0.5).
    length_scale, variance : float
        Of the squared-exponential GP of log c (0.2 and 1).
    y : array_like, shape (n_obs_side**2,), optional
        Observations (grid order: x1 fastest).
    theta_true : array_like, shape (n_modes,), optional
    seed : int
        Seed of theta_true (when not given) and of the noise.
    solver : {"banded", "splu"}

    Examples
    --------
    >>> import numpy as np, fastsurrogate as fs
    >>> model = fs.models.EllipticPDE(n_mesh=10, n_modes=4, seed=1)
    >>> U, g = model.value_and_grad(np.zeros(4))
    >>> g.shape
    (4,)
    """

    def __init__(self, n_mesh: int = 30, n_modes: int = 20, n_obs_side: int = 11,
                 noise_sd: float = 0.1, prior_sd: float = 0.5, length_scale: float = 0.2,
                 variance: float = 1.0, y: ArrayLike | None = None,
                 theta_true: ArrayLike | None = None, seed: int = 2017,
                 solver: str = "banded") -> None:
        m = _int_arg(n_mesh, "n_mesh", 2, 2000)
        d = _int_arg(n_modes, "n_modes", 1, m * m)
        no = _int_arg(n_obs_side, "n_obs_side", 2, 10000)
        self.noise_sd = _pos_arg(noise_sd, "noise_sd")
        self.prior_sd = _pos_arg(prior_sd, "prior_sd")
        self.length_scale = _pos_arg(length_scale, "length_scale")
        self.variance = _pos_arg(variance, "variance")
        if solver not in ("banded", "splu"):
            raise ValueError(f"solver must be 'banded' or 'splu', got {solver!r}")
        self.solver = solver
        self.n_mesh, self.n_modes, self.n_obs_side, self.seed = m, d, no, seed
        self._build_mesh(m)
        self._build_kl(d)
        grid = np.linspace(0.0, 1.0, no)
        self.obs_points = np.array([(a, b) for b in grid for a in grid])
        O = _bilinear_matrix(self.obs_points, m).tocsc()
        self._O_free = O[:, self.free].tocsr()
        self._O_free_T = self._O_free.T.tocsr()
        self._obs_const = O[:, self.dirichlet] @ self._g_full[self.dirichlet]
        if theta_true is None:
            theta_true = self.prior_sd * np.random.default_rng(seed).standard_normal(d)
        tt = np.asarray(theta_true, dtype=np.float64)
        if tt.shape != (d,) or not np.all(np.isfinite(tt)):
            raise ValueError(f"theta_true must be finite with shape ({d},), got {tt.shape}")
        self.theta_true = tt
        if y is None:
            u_obs = self.observe(tt)
            noise = np.random.default_rng([seed, 1]).standard_normal(u_obs.shape[0])
            y = u_obs + self.noise_sd * noise
        ya = np.asarray(y, dtype=np.float64)
        if ya.shape != (no * no,) or not np.all(np.isfinite(ya)):
            raise ValueError(f"y must be finite with shape ({no * no},), got {ya.shape}")
        self.y = ya.copy()
        self.y.flags.writeable = False
        self._names = [f"theta[{k}]" for k in range(d)]
        if solver == "banded":
            el_free = self._fmap[self.elements]
            el_g = np.where(el_free >= 0, 0.0, self._g_full[self.elements])
            Of = self._O_free
            self._init_kernel(el_free, el_g, _K_REF, self._Phi, Of.indptr, Of.indices, Of.data,
                              self._obs_const, self.y, self.free.size, self.half_bandwidth,
                              self.noise_sd ** 2, self.prior_sd ** 2)
        else:
            self._init_delegate(CallbackPotential(self._value_and_grad, d, value=self._value,
                                                  thread_safe=True, names=self._names))

    @property
    def param_names(self):
        """``theta[0]``, ..., ``theta[n_modes - 1]``."""
        return list(self._names)

    # -- set-up ------------------------------------------------------------
    def _build_mesh(self, m):
        n1 = m + 1
        h = 1.0 / m
        self.h = h
        self.n_nodes = n1 * n1
        ii, jj = np.meshgrid(np.arange(m), np.arange(m), indexing="xy")
        ii, jj = ii.ravel(), jj.ravel()                 # element e = i + m j
        k00 = ii + n1 * jj
        self.elements = np.stack([k00, k00 + 1, k00 + 1 + n1, k00 + n1], axis=1)
        self.centres = np.stack([(ii + 0.5) * h, (jj + 0.5) * h], axis=1)
        xn = np.tile(np.arange(n1) * h, n1)
        yn = np.repeat(np.arange(n1) * h, n1)
        self.nodes = np.stack([xn, yn], axis=1)
        jn = np.repeat(np.arange(n1), n1)
        dirichlet = (jn == 0) | (jn == m)
        self.dirichlet = np.flatnonzero(dirichlet)
        self.free = np.flatnonzero(~dirichlet)
        g = np.zeros(self.n_nodes)
        g[jn == 0] = xn[jn == 0]
        g[jn == m] = 1.0 - xn[jn == m]
        self._g_full = g
        n_el = m * m
        nf = self.free.size
        fmap = -np.ones(self.n_nodes, dtype=np.int64)
        fmap[self.free] = np.arange(nf)
        self._fmap = fmap
        # every element contribution (e, a, b)
        e_idx = np.repeat(np.arange(n_el), 16)
        a_idx = np.tile(np.repeat(np.arange(4), 4), n_el)
        b_idx = np.tile(np.arange(4), 4 * n_el)
        rows = self.elements[e_idx, a_idx]
        cols = self.elements[e_idx, b_idx]
        vals = _K_REF[a_idx, b_idx]
        # full stiffness pattern (CSR, row-major unique order): data = S_full @ c
        lin = rows * self.n_nodes + cols
        uniq, inv = np.unique(lin, return_inverse=True)
        self._S_full = sp.csr_matrix((vals, (inv, e_idx)), shape=(uniq.size, n_el))
        self._K_indptr = np.searchsorted(uniq // self.n_nodes, np.arange(self.n_nodes + 1))
        self._K_indices = (uniq % self.n_nodes).astype(np.int32)
        # free-free block
        fr, fc = fmap[rows], fmap[cols]
        ff = (fr >= 0) & (fc >= 0)
        self.half_bandwidth = p = int(np.max(fr[ff] - fc[ff]))
        lower = ff & (fr >= fc)
        band_lin = (fr[lower] - fc[lower]) * nf + fc[lower]
        self._S_band = sp.csr_matrix((vals[lower], (band_lin, e_idx[lower])),
                                     shape=((p + 1) * nf, n_el))
        lin_ff = fr[ff] * nf + fc[ff]
        uff, inv_ff = np.unique(lin_ff, return_inverse=True)
        self._S_ff = sp.csr_matrix((vals[ff], (inv_ff, e_idx[ff])), shape=(uff.size, n_el))
        self._ff_indptr = np.searchsorted(uff // nf, np.arange(nf + 1))
        self._ff_indices = (uff % nf).astype(np.int32)
        # right-hand side of the default Dirichlet data: rhs = -R @ c
        fd = (fr >= 0) & (fc < 0)
        self._R = sp.csr_matrix((vals[fd] * g[cols[fd]], (fr[fd], e_idx[fd])), shape=(nf, n_el))
        # scatter of element-local vectors (n_el * 4) to free nodes
        loc_nodes = self.elements.ravel()
        keep = fmap[loc_nodes] >= 0
        self._scatter_free = sp.csr_matrix(
            (np.ones(int(keep.sum())), (fmap[loc_nodes[keep]], np.flatnonzero(keep))),
            shape=(nf, n_el * 4))

    def _build_kl(self, d):
        m, h = self.n_mesh, self.h
        xc = (np.arange(m) + 0.5) * h
        C1 = np.exp(-(xc[:, None] - xc[None, :]) ** 2 / (2.0 * self.length_scale ** 2))
        nu, V = np.linalg.eigh(h * C1)
        order = np.argsort(-nu, kind="stable")
        nu, V = np.clip(nu[order], 0.0, None), V[:, order]
        V = V * np.where(V[0] < 0, -1.0, 1.0)
        psi = V / np.sqrt(h)                              # L2-normalised on [0, 1]
        lam2 = self.variance * np.outer(nu, nu)           # lam2[i, j]
        idx = np.argsort(-lam2.ravel(), kind="stable")[:d]
        pi, pj = np.unravel_index(idx, lam2.shape)
        self.kl_eigenvalues = lam2[pi, pj]
        self.kl_index = np.stack([pi, pj], axis=1)
        ie = np.arange(m * m) % m
        je = np.arange(m * m) // m
        self._Phi = np.ascontiguousarray(
            psi[ie][:, pi] * psi[je][:, pj] * np.sqrt(self.kl_eigenvalues)[None, :])

    # -- the forward model -------------------------------------------------
    def coefficient(self, theta):
        """c on the elements, shape (n_mesh**2,) (element e = i + n_mesh j)."""
        return np.exp(self._Phi @ theta)

    def _factor(self, c):
        if self.solver == "banded":
            ab = (self._S_band @ c).reshape(self.half_bandwidth + 1, -1)
            cb = scipy.linalg.cholesky_banded(ab, lower=True, check_finite=False)
            return lambda r: scipy.linalg.cho_solve_banded((cb, True), r, check_finite=False)
        from scipy.sparse.linalg import splu
        nf = self.free.size
        A = sp.csc_matrix((self._S_ff @ c, self._ff_indices, self._ff_indptr), shape=(nf, nf))
        lu = splu(A, permc_spec="NATURAL", diag_pivot_thresh=0.0,
                  options=dict(SymmetricMode=True))
        return lu.solve

    def _solve_full(self, c, g=None, f_nodes=None):
        """u on all nodes for element coefficients c, Dirichlet values g (on
        all nodes, only the Dirichlet ones read; default the problem's) and a
        nodal source f (default 0).  Returns (u_full, solve)."""
        solve = self._factor(c)
        if g is None:
            g = self._g_full
            rhs = -(self._R @ c)
        else:
            g = np.asarray(g, dtype=np.float64)
            K = sp.csr_matrix((self._S_full @ c, self._K_indices, self._K_indptr),
                              shape=(self.n_nodes, self.n_nodes))
            gd = np.zeros(self.n_nodes)
            gd[self.dirichlet] = g[self.dirichlet]
            rhs = -(K @ gd)[self.free]
        if f_nodes is not None:
            Mf = ((np.asarray(f_nodes)[self.elements] @ _M_REF) * self.h ** 2).ravel()
            rhs = rhs + self._scatter_free @ Mf
        u = np.array(g, dtype=np.float64, copy=True)
        u[self.free] = solve(rhs)
        return u, solve

    def solve(self, theta):
        """The finite-element solution u on the nodes, shape ((n_mesh+1)**2,)."""
        return self._solve_full(self.coefficient(self._theta(theta)))[0]

    def observe(self, theta):
        """u at the observation points, shape (n_obs_side**2,)."""
        u = self.solve(theta)
        return self._O_free @ u[self.free] + self._obs_const

    def _theta(self, theta):
        t = np.asarray(theta, dtype=np.float64)
        if t.shape != (self.n_modes,):
            raise ValueError(f"theta must have shape ({self.n_modes},), got {t.shape}")
        return t

    # -- the potential -----------------------------------------------------
    def _coefficient_or_none(self, theta):
        """c, or None when theta is so far out that c over/underflows (then
        the stiffness matrix is not numerically SPD: U = inf, a divergence)."""
        if not np.all(np.isfinite(theta)):
            return None
        with np.errstate(over="ignore", under="ignore"):
            c = self.coefficient(theta)
        if not (np.all(np.isfinite(c)) and np.all(c > 0.0)):
            return None
        return c

    def _solve_or_none(self, c):
        try:
            return self._solve_full(c)
        except (np.linalg.LinAlgError, RuntimeError):
            return None

    def _value(self, theta):
        c = self._coefficient_or_none(theta)
        sol = None if c is None else self._solve_or_none(c)
        if sol is None:
            return np.inf
        u = sol[0]
        r = self._O_free @ u[self.free] + self._obs_const - self.y
        return 0.5 * (r @ r) / self.noise_sd ** 2 + 0.5 * (theta @ theta) / self.prior_sd ** 2

    def _value_and_grad(self, theta):
        c = self._coefficient_or_none(theta)
        sol = None if c is None else self._solve_or_none(c)
        if sol is None:
            return np.inf, np.full(self.n_modes, np.nan)
        u, solve = sol
        s2 = self.noise_sd ** 2
        r = self._O_free @ u[self.free] + self._obs_const - self.y
        U = 0.5 * (r @ r) / s2 + 0.5 * (theta @ theta) / self.prior_sd ** 2
        lam = np.zeros(self.n_nodes)
        lam[self.free] = solve(self._O_free_T @ (r / s2))       # adjoint solve
        u_loc = u[self.elements]
        dc = -np.einsum("ea,ea->e", lam[self.elements] @ _K_REF, u_loc)
        g = self._Phi.T @ (c * dc) + theta / self.prior_sd ** 2
        return U, g

    def _sensitivities(self, theta, c=None):
        """(c, u, solve, du) at theta: element coefficients (``c`` when the
        caller has them), u on all nodes, the factorised solve, and du/dtheta
        on the free nodes (n_free, n_modes) by forward sensitivities
        (n_modes solves, one factor)."""
        if c is None:
            c = self.coefficient(theta)
        u, solve = self._solve_full(c)
        ku = (u[self.elements] @ _K_REF) * c[:, None]           # (n_el, 4)
        rhs = self._scatter_free @ (ku[:, :, None] * self._Phi[:, None, :]).reshape(-1, self.n_modes)
        du = solve(rhs)
        du *= -1.0
        return c, u, solve, du

    def jacobian(self, theta):
        """d(observations)/d(theta), shape (n_obs_side**2, n_modes): n_modes
        solves with one factorisation (forward sensitivities)."""
        return self._O_free @ self._sensitivities(self._theta(theta))[3]

    def gauss_newton_hessian(self, theta):
        """J^T J / noise_sd^2 + I / prior_sd^2 at theta, shape (n_modes, n_modes):
        the Fisher information of theta plus the prior precision (positive
        definite); the metric of :meth:`fisher_metric`."""
        J = self.jacobian(theta)
        return J.T @ J / self.noise_sd ** 2 + np.eye(self.n_modes) / self.prior_sd ** 2

    def gauss_newton_diag(self, theta):
        """The diagonal of :meth:`gauss_newton_hessian`, shape (n_modes,)."""
        J = self.jacobian(theta)
        return (J * J).sum(axis=0) / self.noise_sd ** 2 + 1.0 / self.prior_sd ** 2

    def fisher_metric(self):
        """The Riemannian metric of RMHMC on this posterior: G(theta) =
        :meth:`gauss_newton_hessian` (the Fisher information of the Gaussian
        observations plus the prior precision; Girolami & Calderhead 2011),
        with the contractions of its derivative the generalized leapfrog
        needs, ``tr(G^-1 dG/dtheta_k)`` and ``u^T dG/dtheta_k u``, by
        second-order adjoints (:class:`_FisherContractions`): n_modes forward
        sensitivities per position (shared with G), n_modes adjoint solves
        for the trace and one per ``u``, all with one banded factorisation;
        the (n_modes, n_modes, n_obs) second derivative of the forward map
        is never formed.  A :class:`~fastsurrogate.core.CallableMetric`
        (NumPy/SciPy under the GIL: RMHMC chains run one at a time).
        ``fs.RMHMC(model, metric="fisher")`` uses it."""
        # here, not at the top: core._rmhmc cimports models._glm, so this module
        # is first imported while core._rmhmc is still initialising
        from ..core._rmhmc import CallableMetric
        parts = _FisherContractions(self)
        return CallableMetric(parts.G, None, self.n_modes, contract=parts.contract)

    def __reduce__(self):
        return (_rebuild, (dict(n_mesh=self.n_mesh, n_modes=self.n_modes,
                                n_obs_side=self.n_obs_side, noise_sd=self.noise_sd,
                                prior_sd=self.prior_sd, length_scale=self.length_scale,
                                variance=self.variance, y=np.array(self.y),
                                theta_true=self.theta_true, seed=self.seed,
                                solver=self.solver),))

    def __repr__(self):
        return (f"<EllipticPDE dim={self.n_modes} mesh={self.n_mesh}x{self.n_mesh} "
                f"obs={self.y.size} solver={self.solver}>")


def _rebuild(kwargs):
    return EllipticPDE(**kwargs)


class _FisherContractions:
    """G(theta) = J^T J / s2 + I / sp2 of an EllipticPDE and the contractions
    of dG_k = (T_k^T J + J^T T_k) / s2, T_k = d J / d theta_k, for
    :meth:`EllipticPDE.fisher_metric`; cached per position.

    With A the free-node stiffness, u~ the solution on all nodes, du_j its
    sensitivities and x^T (dK/dtheta_k) y = sum_e c_e Phi_ek x_e^T K_ref y_e
    over elements e (local nodes), differentiating A du_j = -(dK/dtheta_j) u~:

        A d(du_j)/dtheta_k = -[(dK_k) du_j + (dK_j) du_k + (dK_kj) u~],

    so for any free-node weights m, m^T d(du_j)/dtheta_k = -lam^T [...] with
    A lam = m (A is symmetric):
      tr(G^-1 dG_k) = 2/s2 sum_j (O^T M_j)^T d(du_j)/dtheta_k,  M = J G^-1,
      u^T dG_k u    = 2/s2 (O^T J u)^T d(du . u)/dtheta_k,
    each a sum over elements once the adjoints (n_modes of them for the
    trace, one for the quadratic form) are solved."""

    def __init__(self, model):
        self.m = model
        self.q = None

    def _at(self, q):
        if self.q is not None and np.array_equal(q, self.q):
            return self.ok
        m = self.m
        self.q = np.array(q, dtype=np.float64, copy=True)
        self.ok = False
        c = m._coefficient_or_none(self.q)
        if c is None:
            return False
        try:
            c, u, solve, du = m._sensitivities(self.q, c)
        except (np.linalg.LinAlgError, RuntimeError, ValueError):
            return False
        if not (np.all(np.isfinite(du)) and np.all(np.isfinite(u))):
            return False
        self.c, self.u, self.solve, self.du = c, u, solve, du
        self.J = m._O_free @ du
        self.du_loc = None     # the element-local parts, when a contraction asks (not G)
        self.ok = True
        return True

    def _element_parts(self):
        if self.du_loc is None:
            self.du_loc = self._local(self.du)                     # (n_el, 4, d)
            self.Kdu = np.matmul(_K_REF, self.du_loc)              # K_ref du_e
            self.Ku = self.u[self.m.elements] @ _K_REF             # (n_el, 4), K_ref symmetric

    def _local(self, x):
        """Free-node vector(s) -> element-local values (zero on Dirichlet nodes)."""
        m = self.m
        full = np.zeros((m.n_nodes,) + x.shape[1:])
        full[m.free] = x
        return full[m.elements]

    def G(self, q):
        m = self.m
        if not self._at(q):
            return np.full((m.n_modes, m.n_modes), np.nan)
        return self.J.T @ self.J / m.noise_sd ** 2 + np.eye(m.n_modes) / m.prior_sd ** 2

    def contract(self, q, Ginv, v):
        m = self.m
        d = m.n_modes
        if not self._at(q):
            nan = np.full(d, np.nan)
            return nan, nan
        self._element_parts()
        Phi, c, k2 = m._Phi, self.c, -2.0 / m.noise_sd ** 2
        tr = quad = None
        if Ginv is not None:
            lam = self._local(self.solve(m._O_free_T @ (self.J @ Ginv)))   # (n_el, 4, d)
            s1 = np.einsum("eaj,eaj->e", lam, self.Kdu)         # sum_j lam_j^T K du_j
            mu = np.einsum("ej,eaj->ea", Phi, lam)              # sum_j Phi_ej lam_j
            s3 = np.einsum("ea,ea->e", mu, self.Ku)
            tr = k2 * (Phi.T @ (c * (s1 + s3)) + np.einsum("ea,eak->k", c[:, None] * mu, self.Kdu))
        if v is not None:
            kap = self._local(self.solve(m._O_free_T @ (self.J @ v)))      # (n_el, 4)
            w_loc = self.du_loc @ v                                      # d u / d v
            pv = Phi @ v
            a = np.einsum("ea,ea->e", kap, w_loc @ _K_REF)
            b = np.einsum("ea,ea->e", kap, self.Ku)
            quad = k2 * (Phi.T @ (c * (a + pv * b))
                         + np.einsum("ea,eak->k", (c * pv)[:, None] * kap, self.Kdu))
        return tr, quad
