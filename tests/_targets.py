"""Test targets with known moments, shared by the sampler tests.

``five_d()`` is issue 38's target: three blocks, each hard for a surrogate in
its own way, with analytic means and standard deviations.

- q0, q1: a banana, q0 ~ N(0, 1), q1 | q0 ~ N(b (q0^2 - 1), 1), b = 1/2:
  E q1 = 0, Var q1 = 1 + b^2 Var(q0^2) = 1 + 2 b^2 = 3/2.
- q2: a skew normal, density 2 phi(q2) Phi(alpha q2), alpha = 4:
  E q2 = delta sqrt(2 / pi), Var q2 = 1 - 2 delta^2 / pi, delta = alpha / sqrt(1 + alpha^2).
- q3, q4: a mild funnel, q3 ~ N(0, 1), q4 | q3 ~ N(0, exp(q3)):
  E q4 = 0, Var q4 = E exp(q3) = exp(1/2).
"""
import numpy as np
from scipy.special import log_ndtr

import fastsurrogate as fs

_B = 0.5
_ALPHA = 4.0
_DELTA = _ALPHA / np.sqrt(1.0 + _ALPHA ** 2)

FIVE_D_MEAN = np.array([0.0, 0.0, _DELTA * np.sqrt(2.0 / np.pi), 0.0, 0.0])
FIVE_D_SD = np.sqrt([1.0, 1.0 + 2.0 * _B ** 2, 1.0 - 2.0 * _DELTA ** 2 / np.pi, 1.0,
                     np.exp(0.5)])


def _five_d(q):
    x0, x1, x2, x3, x4 = q
    r = x1 - _B * (x0 * x0 - 1.0)
    # skew normal: -log Phi(alpha x2), its derivative -alpha phi / Phi = -alpha exp(log phi - log Phi)
    log_cdf = log_ndtr(_ALPHA * x2)
    ratio = np.exp(-0.5 * (_ALPHA * x2) ** 2 - 0.5 * np.log(2.0 * np.pi) - log_cdf)
    e = np.exp(-x3)
    u = (0.5 * x0 * x0 + 0.5 * r * r
         + 0.5 * x2 * x2 - log_cdf
         + 0.5 * x3 * x3 + 0.5 * x3 + 0.5 * x4 * x4 * e)
    g = np.array([x0 - 2.0 * _B * x0 * r,
                  r,
                  x2 - _ALPHA * ratio,
                  x3 + 0.5 - 0.5 * x4 * x4 * e,
                  x4 * e])
    return float(u), g


def five_d_draws(n, rng):
    """n independent exact draws (n, 5) of the 5-d target."""
    from scipy.stats import skewnorm
    q = np.empty((n, 5))
    q[:, 0] = rng.normal(size=n)
    q[:, 1] = _B * (q[:, 0] ** 2 - 1.0) + rng.normal(size=n)
    q[:, 2] = skewnorm(_ALPHA).rvs(size=n, random_state=rng)
    q[:, 3] = rng.normal(size=n)
    q[:, 4] = np.exp(0.5 * q[:, 3]) * rng.normal(size=n)
    return q


def five_d():
    """The 5-d target as a Potential (NumPy callback), and its (mean, sd)."""
    pot = fs.Potential.from_callable(_five_d, 5, names=["banana0", "banana1", "skew",
                                                        "funnel_log_var", "funnel"])
    return pot, FIVE_D_MEAN, FIVE_D_SD
