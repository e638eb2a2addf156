"""Riemannian-manifold HMC (Girolami & Calderhead 2011) and its random-network
surrogate version RNS-RMHMC (Zhang, Shahbaba & Zhao 2017, sections 2.2 and
3.4).  The generalized leapfrog, the Metropolis test and the chain loop run
in C (csrc/fs_rmhmc.c); these classes hold only the phases.
"""

import os
from typing import Any, Callable, TypeAlias

import numpy as np

from ..core._blas_threads import blas_threads
from ..core._hmc import new_trace
from ..core._rmhmc import RMChain, Metric, FisherMetric, SoftAbsMetric, CallableMetric
from ..models._glm import GeneralizedLinearModel
from ..models._models import Gaussian
from ..core._potential import Potential, WeightedSum
from ..surrogates._network import RandomNetwork
from ._base import Sampler
from ._checks import check_int, check_int_or_auto, check_positive
from ._checks import check_flag, check_number, refuse_options
from .rns_hmc import RNSHMC

__all__ = ["RMHMC", "RNSRMHMC", "as_metric"]

# what metric= takes: "fisher", a Metric, or a pair (G, dG) of callables
MetricLike: TypeAlias = str | Metric | tuple[Callable[..., Any], Callable[..., Any]]


def as_metric(metric, potential):
    """A :class:`Metric` from ``"fisher"`` (a GLM's Fisher information, or the
    model's own ``fisher_metric()``: EllipticPDE's Gauss-Newton metric), a
    Metric, or a pair ``(G, dG)`` of callables."""
    if isinstance(metric, Metric):
        if metric.dim != potential.dim:
            raise ValueError(f"metric has dim {metric.dim}, the potential {potential.dim}")
        return metric
    if isinstance(metric, str):
        if metric != "fisher":
            raise ValueError(f'metric must be "fisher", a Metric or a (G, dG) pair; got {metric!r}')
        if isinstance(potential, GeneralizedLinearModel):
            return FisherMetric(potential)
        if callable(getattr(potential, "fisher_metric", None)):
            return as_metric(potential.fisher_metric(), potential)    # e.g. EllipticPDE
        raise TypeError('metric="fisher" needs a GLM (LogisticRegression, ...) or a model '
                        'with a fisher_metric() (EllipticPDE); pass metric=(G, dG) callables '
                        'or a Metric for other models')
    if isinstance(metric, tuple) and len(metric) == 2:
        return CallableMetric(metric[0], metric[1], potential.dim)
    raise TypeError(f'metric must be "fisher", a Metric or a (G, dG) pair; got {type(metric).__name__}')


class RMHMC(Sampler):
    """Exact Riemannian-manifold HMC with the generalized leapfrog.

    H(q, p) = U(q) + 1/2 log det G(q) + 1/2 p^T G(q)^{-1} p; each step solves
    the implicit momentum and position updates (RNS-HMC paper eq. 7-9) by
    fixed-point iteration; a non-converged fixed point is a divergence
    (``info["not_converged"]`` counts them).

    Parameters
    ----------
    potential : Potential
    metric : "fisher", Metric or (G, dG)
        "fisher": Fisher information plus prior precision of a GLM, or the
        model's ``fisher_metric()`` (:meth:`EllipticPDE.fisher_metric
        <fastsurrogate.models.EllipticPDE.fisher_metric>`);
        ``(G, dG)``: callables ``G(q) -> (dim, dim)``, ``dG(q) -> (dim, dim, dim)``
        (``dG[k] = dG/dq_k``); or any :class:`~fastsurrogate.core.Metric`.
    step_size : float, optional
        With ``adapt``, the start of the dual averaging (Stan's heuristic when
        None); otherwise used as given (default 0.5).
    n_steps : int or "auto"
        Generalized leapfrog steps per iteration (drawn from 1..n_steps
        with ``random_n_steps``).  "auto" (default): 3 while the step size
        adapts, then :func:`auto_rm_steps` of the step size (given or
        adapted): a trajectory of about a quarter period in the metric's
        units, pi / 2 (mean pi / 2 with ``random_n_steps``; where G is the
        posterior's precision each iteration is then nearly an independent
        draw).  ``info["n_steps"]`` lists each chain's.
    random_n_steps : bool
    adapt : bool
        Dual averaging of the step size over the warm-up.
    target_accept, max_energy_error
    max_fixed_point : int
        Iterations of each implicit update.
    fixed_point_tol : float
        Relative convergence tolerance of the fixed points.

    Examples
    --------
    >>> import fastsurrogate as fs
    >>> X, y, _ = fs.datasets.simulate_logistic(1000, 3, seed=0)
    >>> res = fs.sample(fs.models.LogisticRegression(X, y), method="rmhmc", n_draws=100,
    ...                 n_warmup=100, chains=1, seed=1, progress=False)
    >>> res.draws.shape
    (1, 100, 3)
    """

    method = "rmhmc"
    # RMChain (generalized leapfrog state) does not pickle: chains stay in this process
    remote_chains = False

    def __init__(self, potential: Potential, *, metric: MetricLike = "fisher",
                 step_size: float | None = None, n_steps: int | str = "auto",
                 random_n_steps: bool = True, adapt: bool = True, target_accept: float = 0.8,
                 max_energy_error: float = 1000.0, max_fixed_point: int = 20,
                 fixed_point_tol: float = 1e-9) -> None:
        super().__init__(potential)
        self.metric = as_metric(metric, potential)
        self.step_size = check_positive("step_size", step_size, allow_none=True)
        self.n_steps = check_int_or_auto("n_steps", n_steps)
        self.random_n_steps = check_flag("random_n_steps", random_n_steps)
        self.adapt = check_flag("adapt", adapt)
        self.target_accept = check_number("target_accept", target_accept)
        if not 0 < self.target_accept < 1:
            raise ValueError("target_accept must be in (0, 1)")
        self.max_energy_error = check_positive("max_energy_error", max_energy_error)
        self.max_fixed_point = check_int("max_fixed_point", max_fixed_point, 1)
        self.fixed_point_tol = check_positive("fixed_point_tol", fixed_point_tol)

    def make_rm_chain(self, q0, generator, drive, metric, judge=None, judge_metric=None,
                      step_size=None, n_steps=None):
        step = step_size if step_size is not None else (
            self.step_size if self.step_size is not None else (1.0 if self.adapt else 0.5))
        return rm_chain(self, drive, metric, judge, judge_metric, q0, generator, step,
                        n_steps or _start_steps(self.n_steps))

    def rm_warmup(self, chain, trace, ctx, n, key="warmup", search=True):
        if not self.adapt or n == 0:
            ctx.run_span(chain, trace, 0, n, key)
            return
        dual_averaging(chain, ctx, trace, n, self.target_accept, key, search)

    def phases(self, run):
        run.start()
        run.info["not_converged"] = 0
        run.info["n_steps"] = [None] * run.chains
        run.each_chain(self.warmup_and_sample, run.n_warmup + run.n_draws, self.method,
                       parallel=False)

    def warmup_and_sample(self, ctx):
        ctx.chain = self.make_rm_chain(ctx.q0, ctx.generator, self.potential, self.metric)
        # the Fisher metric's passes over X run in the model's own threads and
        # call BLAS (a d x 128 triangular product) from each: OpenBLAS's pool
        # beside them oversubscribes the cores (simulated regression, N = 1e5,
        # d = 50, 2 cores: 236 against 141 ms per iteration on one thread)
        with blas_threads(1 if isinstance(self.metric, FisherMetric) else None):
            self._warmup_and_sample(ctx)
        ctx.run.info["not_converged"] += ctx.chain.n_not_converged

    def _warmup_and_sample(self, ctx):
        if not self.adapt:       # the given step: its L from the first iteration
            set_auto_steps(ctx.chain, self.n_steps, self.random_n_steps)
        with ctx.phase("warmup"):
            self.rm_warmup(ctx.chain, ctx.warm, ctx, ctx.run.n_warmup,
                           search=self.step_size is None)
        if self.adapt:           # the adapted step's L
            set_auto_steps(ctx.chain, self.n_steps, self.random_n_steps)
        ctx.run.info["n_steps"][ctx.index] = ctx.chain.n_steps
        with ctx.phase("sample"):
            ctx.run_span(ctx.chain, ctx.main, 0, ctx.run.n_draws, "sample")


class RNSRMHMC(RNSHMC):
    """Random-network-surrogate RMHMC (RNS-HMC paper, section 3.4; exact).

    Phases: explore (exact HMC, the paper's, or NUTS with
    ``explore="nuts"``; its states train the network exactly as in
    :class:`RNSHMC`), train, adapt (the Riemannian step size, dual
    averaging on the surrogate chain), exploit.  In the exploit
    phase the generalized leapfrog uses the network z for the gradient AND
    for the metric (SoftAbs of the Hessian of z, or of its diagonal with
    ``diagonal_metric``); the Metropolis test uses the exact U, with the
    network's metric (``test_metric="surrogate"``, the default) or, as the
    paper does, the exact metric (``test_metric="exact"``):

        H*(q, p) = U(q) + 1/2 log det G*(q) + 1/2 p^T G*(q)^{-1} p,
        p ~ N(0, G*(q)) at every iteration.

    Why the chain is exact: the generalized leapfrog of the surrogate
    Hamiltonian, followed by a momentum flip, is an involution that
    preserves volume in (q, p) for any smooth surrogate metric (it is the
    symplectic, symmetric integrator of the surrogate Hamiltonian; up to the
    fixed-point tolerance).  A deterministic volume-preserving involution
    accepted with probability min(1, exp(H*(q, p) - H*(q', p'))) leaves
    exp(-H*) invariant for ANY H*, and the momentum refresh from N(0, G*(q))
    is a Gibbs step of the same joint.  The q-marginal of exp(-H*) is
    exp(-U(q)) because the normalising constant of N(0, G*(q)), det G*(q)^{1/2},
    is cancelled by the 1/2 log det G* term.  So the draws target the exact
    posterior whatever the surrogate, with either test metric; the surrogate
    only changes the acceptance rate.  ``test_metric="surrogate"`` uses the
    network's metric in the test (no exact metric evaluation per iteration).

    Parameters
    ----------
    potential : Potential
    metric : "fisher", Metric or (G, dG)
        The exact metric (used in the test with ``test_metric="exact"``).
    rm_step_size : float, optional
        Step size of the Riemannian phase (adapted when None and ``adapt``).
    rm_n_steps : int or "auto"
        Generalized leapfrog steps of the Riemannian chain.  "auto"
        (default): 3 while its step adapts, then :func:`auto_rm_steps`, as
        for :class:`RMHMC`; ``info["rm_n_steps"]`` lists each chain's.  On
        the simulated regression (N = 100000, d = 50, defaults otherwise,
        1500 kept draws; adapted step 0.40-0.44) min ESS was
        192 with 3 steps, 1445 with 8 (auto gives 7) and 1307 with 12, at
        4.4, 6.1 and 7.9 ms per iteration: 5.5x the min ESS per second of
        3 steps at 8.
    rm_target_accept : float
        Target acceptance of the Riemannian step-size adaptation (0.9: on
        the posteriordb SBLRC-BLR posterior, 0.8 adapted a step at which
        3.8 % of the fixed points did not converge, counted as divergences;
        0.9 gave 0.6 % and a higher min ESS, 232 against 142 with the exact
        test metric at 0.8).
    test_metric : {"surrogate", "exact"}
        "surrogate" (default): no exact metric per iteration, one value-only
        exact U.  "exact": the paper's choice, one exact metric per
        iteration.  ``python bench/rmhmc_ratios.py --test-metric surrogate
        --draws 1000``, then ``--skip-cost --test-metric exact --draws
        1000`` (AMD EPYC Zen 1 at cc774c8, load 1-2, each with its own
        RMHMC runs): min ESS/s 16.5x RMHMC's against 4.2x on the simulated
        regression (acceptance 0.84 against 0.83), 12.2x against 3.7x on
        Bank Marketing (0.84 against 0.70).
    base : None, "laplace" or Gaussian
        As for :class:`RNSHMC`: the network is fitted to U - U0 and the
        leapfrog is driven by z + U0, with the metric SoftAbs of the Hessian
        of z + U0 (U0's is its constant precision; ``SoftAbsMetric(offset=)``).
        Only a Gaussian base (constant Hessian) is accepted.  Not the
        paper's method; it is what makes the surrogate chain move on the
        ill-conditioned a9a-60d posterior (docs/benchmarks.md, "Table 1, RMHMC rows").
    diagonal_metric : bool
        SoftAbs of the network's Hessian diagonal (non-convex U).
    softabs_alpha : float
    max_fixed_point, fixed_point_tol : as for :class:`RMHMC`.
    overlap : "auto", True or False
        With the surrogate test metric, the exact U at each proposal can be
        evaluated on a second core while this one runs the next trajectory
        from that proposal, kept when it is accepted (pre-fetching,
        Brockwell 2006; ``RMChain``).  The draws are the same bit for bit
        either way; "auto" (default) times both ways on the chain and keeps
        the faster, checking again now and then.  Used only when the
        potential is thread-safe (the C models are) and two CPUs are
        usable.  ``info["overlap"]`` lists for each chain the setting used
        and, with "auto", the (seconds per iteration, run calls) measured
        each way, "serial" and "overlapped".  On the simulated regression
        (N = 100000, d = 50, s = 2000,
        L = 2; ``bench/rmhmc_ratios.py --overlap off,auto``, Zen 4, load
        1-1.7) an iteration took 2.4 ms against 3.1 ms serial, and on a
        busy machine the serial loop was the faster (docs/benchmarks.md, "Table 1,
        RMHMC rows").
    **options
        Everything :class:`RNSHMC` takes (n_hidden, ridge, ..., step_size and
        n_steps of the exploration), except ``transitions``, ``inner``,
        ``delayed_acceptance`` and the ``guard`` options (refused: the
        exploitation is the generalized-leapfrog chain).

    Examples
    --------
    >>> import fastsurrogate as fs
    >>> X, y, _ = fs.datasets.simulate_logistic(2000, 3, seed=0)
    >>> res = fs.sample(fs.models.LogisticRegression(X, y), method="rns-rmhmc", n_draws=100,
    ...                 n_warmup=300, chains=1, n_hidden=200, seed=1, progress=False)
    >>> res.draws.shape
    (1, 100, 3)
    """

    method = "rns-rmhmc"
    remote_chains = False

    def __init__(self, potential: Potential, *, metric: MetricLike = "fisher",
                 rm_step_size: float | None = None, rm_n_steps: int | str = "auto",
                 rm_target_accept: float = 0.9, test_metric: str = "surrogate",
                 diagonal_metric: bool = False, softabs_alpha: float = 1.0,
                 max_fixed_point: int = 20, fixed_point_tol: float = 1e-9,
                 overlap: str | bool = "auto", **options: Any) -> None:
        base = options.get("base")
        if base is not None and not (isinstance(base, str) or isinstance(base, Gaussian)):
            raise ValueError('RNS-RMHMC\'s base must be None, "laplace" or a '
                             'fastsurrogate.models.Gaussian (the metric needs its constant '
                             f'Hessian); got {type(base).__name__}')
        if isinstance(metric, str) and metric != "fisher":
            # metric= here is the Riemannian metric, not the exploration's mass matrix
            # (metric="unit" was ignored with the surrogate test metric)
            raise ValueError(f'RNS-RMHMC\'s metric is the exact Riemannian metric: "fisher", a '
                             f'Metric or a (G, dG) pair; got {metric!r} (the exploration\'s '
                             f'HMC mass matrix is adapted, "diag")')
        refuse_options("RNS-RMHMC", options, ("transitions", "inner", "delayed_acceptance",
                                              "guard", "guard_window", "guard_action"),
                       "its exploitation is the generalized-leapfrog chain, with one exact "
                       "Metropolis test per iteration and no guard")
        options.setdefault("guard", None)
        if options.setdefault("trust", None) is not None:
            raise ValueError("RNS-RMHMC has no trust option: its generalized leapfrog needs "
                             "the surrogate's metric everywhere")
        super().__init__(potential, **options)
        if test_metric not in ("exact", "surrogate"):
            raise ValueError(f'test_metric must be "exact" or "surrogate", got {test_metric!r}')
        self.test_metric = test_metric
        self.exact_metric = as_metric(metric, potential) if test_metric == "exact" else None
        self.rm_step_size = check_positive("rm_step_size", rm_step_size, allow_none=True)
        self.rm_n_steps = check_int_or_auto("rm_n_steps", rm_n_steps)
        self.rm_target_accept = check_number("rm_target_accept", rm_target_accept)
        if not 0 < self.rm_target_accept < 1:
            raise ValueError(f"rm_target_accept must be in (0, 1), got {rm_target_accept!r}")
        self.diagonal_metric = check_flag("diagonal_metric", diagonal_metric)
        self.softabs_alpha = check_positive("softabs_alpha", softabs_alpha)
        self.max_fixed_point = check_int("max_fixed_point", max_fixed_point, 1)
        self.fixed_point_tol = check_positive("fixed_point_tol", fixed_point_tol)
        if not (overlap == "auto" if isinstance(overlap, str)
                else isinstance(overlap, (bool, np.bool_))):
            raise ValueError(f'overlap must be "auto", True or False, got {overlap!r}')
        self.overlap = overlap if isinstance(overlap, str) else bool(overlap)

    # RNSHMC.phases runs the algorithm (explore, train, exploit); these hooks
    # make its surrogate chain the Riemannian one.
    def _surrogate_ready(self, run, net):
        _metric_parts(net)     # a network, or a network plus a Gaussian base
        run.info.update(not_converged=0, rm_step_size=[], rm_n_steps=[])

    def _chains_parallel(self, net):
        return False

    def surrogate_chain(self, ctx, net):
        """The Riemannian surrogate chain, its step size adapted (called with
        BLAS on one thread: exploit)."""
        chain = self._rm_chain(ctx, net)
        self._adapt_rm(ctx, chain)
        return chain

    def _rm_chain(self, ctx, net):
        network, offset = _metric_parts(net)
        sur_metric = SoftAbsMetric(network, alpha=self.softabs_alpha,
                                   diagonal=self.diagonal_metric, offset=offset)
        step = self.rm_step_size if self.rm_step_size is not None else 1.0
        chain = rm_chain(self, net, sur_metric, self.potential, self.exact_metric,
                         ctx.chain.position, ctx.generator, step, _start_steps(self.rm_n_steps))
        if self.exact_metric is None and self.potential.thread_safe and usable_cpus() >= 2:
            chain.overlap = self.overlap
        return chain

    def exploit(self, ctx, net, Q, U, seed, base=None):
        """The kept draws of the Riemannian surrogate chain, its step adapted first."""
        # the surrogate metric's BLAS calls are small (an s x d x d dgemm, a
        # d x d eigendecomposition): one thread, or OpenBLAS's pool spins
        # beside them (19 % of the exploit phase's CPU time on the simulated
        # regression) and slows them when another process holds a core
        with blas_threads(1):
            ctx.chain = self.surrogate_chain(ctx, net)
            with ctx.phase("sample"):
                ctx.run_span(ctx.chain, ctx.main, 0, ctx.run.n_draws, "sample")
        ctx.run.info["not_converged"] += ctx.chain.n_not_converged
        timings = ctx.chain.overlap_timings
        ctx.run.info.setdefault("overlap", []).append(
            {"setting": ctx.chain.overlap, "serial": timings["serial"],
             "overlapped": timings["overlapped"]})

    def _adapt_rm(self, ctx, chain):
        """Dual averaging of the Riemannian step (when not given), recorded
        in ``info["rm_step_size"]``."""
        if self.rm_step_size is None and self.adapt:
            n_adapt = max(50, ctx.run.n_warmup // 5)
            scratch = new_trace(n_adapt, self.potential.dim)
            with ctx.phase("warmup"):
                dual_averaging(chain, ctx, scratch, n_adapt, self.rm_target_accept, "rm_adapt")
        set_auto_steps(chain, self.rm_n_steps, self.random_n_steps)
        ctx.run.info["rm_step_size"].append(chain.step_size)
        ctx.run.info["rm_n_steps"].append(chain.n_steps)


AUTO_START_STEPS = 3      # "auto" steps while the step size adapts
# at most AUTO_MAX_STEPS; and AUTO_START_STEPS when the quarter period would
# need more than AUTO_HOPELESS_STEPS (a step below 0.05 in the metric's
# units: a metric far from the posterior's precision, a poor network, whose
# chain cannot move far whatever L).  Measured, 500 warm-up + 500 draws:
# Bank's network adapted 0.17 at 3 steps; with 3 steps its chain was
# predicted at 0.21x NUTS's min ESS/s, with 16 it ran at 4.26x (whole run);
# the a9a-60d (raw) network adapted 0.014, and a stretch of its chain at 16
# steps took 11.3 s against 4.9 s for the exact sampler's.
AUTO_MAX_STEPS = 16
AUTO_HOPELESS_STEPS = 64


def _start_steps(n_steps):
    return AUTO_START_STEPS if n_steps == "auto" else n_steps


def auto_rm_steps(step_size, random_n_steps=True):
    """Steps per iteration for a trajectory of a quarter period in the
    metric's units: round(pi / step) with ``random_n_steps`` (L uniform on
    1..n_steps: mean length about pi / 2), else round(pi / (2 step)); at
    least 1 and at most AUTO_MAX_STEPS (16); AUTO_START_STEPS (3) when it
    would be above AUTO_HOPELESS_STEPS (64; a step below 0.05 with random
    L): a step that small means the metric is far from the posterior's
    precision, and the chain cannot move far whatever L.

    Where G(q) is the posterior's precision (a GLM's Fisher metric near the
    mode, a good network's Hessian) the generalized leapfrog is a unit-
    frequency oscillator in the whitened coordinates, and an iteration of
    length t has lag-1 autocorrelation cos(t).  Measured with RMHMC on a
    simulated logistic regression (N = 20000, d = 10; fixed L): t = 0.5
    gave 0.876 (cos 0.878), t = 1.0 gave 0.54 (cos 0.540).  So 3 steps of
    the adapted 0.4 (lengths 0.4-1.2) leave most of each iteration's
    possible move unused.
    """
    t = np.pi if random_n_steps else np.pi / 2
    n = max(1, round(t / step_size))
    return int(AUTO_START_STEPS if n > AUTO_HOPELESS_STEPS else min(n, AUTO_MAX_STEPS))


def set_auto_steps(chain, n_steps, random_n_steps):
    """With n_steps "auto", set the chain's from its step size."""
    if n_steps == "auto":
        chain.n_steps = auto_rm_steps(chain.step_size, random_n_steps)


def usable_cpus():
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def rm_chain(sampler, drive, metric, judge, judge_metric, q0, generator, step_size, n_steps):
    """An RMChain with the sampler's random_n_steps, max_energy_error and
    fixed-point settings (RMHMC's exact chain, RNS-RMHMC's surrogate one)."""
    return RMChain(drive, metric, judge, judge_metric, q0, generator, step_size=step_size,
                   n_steps=n_steps, random_n_steps=sampler.random_n_steps,
                   max_energy_error=sampler.max_energy_error,
                   max_fixed_point=sampler.max_fixed_point,
                   fixed_point_tol=sampler.fixed_point_tol)


def dual_averaging(chain, ctx, trace, n, target_accept, key, search=True):
    """n iterations of the chain into trace rows 0..n with its step size
    adapted by dual averaging towards target_accept (after Stan's step-size
    search when ``search``); the adapted step is kept."""
    if search:
        chain.find_step_size()
    chain.start_adaptation(target_accept)
    ctx.run_span(chain, trace, 0, n, key)
    chain.finish_adaptation()


def _metric_parts(drive):
    """(network, offset) of the surrogate metric for the leapfrog's drive: a
    RandomNetwork z (offset None), or z + a Gaussian base U0 (offset the
    base's precision, the constant Hessian of U0)."""
    if isinstance(drive, RandomNetwork):
        return drive, None
    parts = getattr(drive, "potentials", None) if isinstance(drive, WeightedSum) else None
    if (parts is not None and len(parts) == 2 and isinstance(parts[0], RandomNetwork)
            and isinstance(parts[1], Gaussian) and list(drive.weights) == [1.0, 1.0]):
        return parts[0], np.asarray(parts[1].precision)
    raise TypeError("RNS-RMHMC needs a RandomNetwork surrogate, or a network plus a Gaussian "
                    f"base (their Hessian is the metric); got {type(drive).__name__}")
