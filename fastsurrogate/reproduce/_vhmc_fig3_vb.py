"""The two variational baselines of the VHMC paper's Figure 3 (section 4.2),
for Bayesian probit regression y_n ~ Bernoulli(Phi(x_n . theta)) with the
prior theta ~ N(0, prior_var I); NumPy, for the reproduce table only (not
package samplers).

* :func:`vbem_probit`: VBEM (Beal & Ghahramani 2002; Ormerod & Wand 2010,
  section 3.3): the auxiliary-variable mean-field approximation
  q(theta) q(z) with closed-form coordinate updates.
* :func:`ff_minibatch_probit`: FF-Minibatch (Salimans & Knowles 2013,
  "Fixed-form variational posterior approximation through stochastic linear
  regression", the Gaussian algorithm using the Hessian, with minibatches):
  a full-covariance Gaussian q fitted by stochastic linear regression.

Both start from the prior, as in the paper, and return their estimate of
the posterior mean after each iteration together with the cost in
likelihood evaluations (data passes; a minibatch of b rows costs b / N).
"""
import numpy as np
from scipy.special import log_ndtr

__all__ = ["inverse_mills", "probit_grad_hess", "vbem_elbo", "vbem_probit",
           "ff_minibatch_probit"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def inverse_mills(u):
    """phi(u) / Phi(u), stable far in both tails (through ``log_ndtr``)."""
    u = np.asarray(u, dtype=float)
    return np.exp(-0.5 * u * u - _LOG_SQRT_2PI - log_ndtr(u))


def probit_grad_hess(theta, X, s, scale, prior_var):
    """Gradient and Hessian of log p(theta) + scale * sum_n log Phi(s_n x_n . theta).

    ``s`` = 2 y - 1 (+-1); ``scale`` is N / b for a minibatch of b of the N
    rows (1 for all of them).  With u = s t, t = x . theta and
    lam = phi(u) / Phi(u): d/dt log Phi(s t) = s lam and
    d^2/dt^2 log Phi(s t) = -lam (u + lam).
    """
    u = s * (X @ theta)
    lam = inverse_mills(u)
    g = scale * (X.T @ (s * lam)) - theta / prior_var
    w = lam * (u + lam)
    H = -scale * (X.T @ (w[:, None] * X)) - np.eye(X.shape[1]) / prior_var
    return g, H


def vbem_elbo(X, s, prior_var, mu, cov, c):
    """The evidence lower bound of VBEM's q(theta) = N(mu, cov), q(z_n)
    = N(c_n, 1) truncated to the side s_n z_n > 0.

    With m_n = x_n . mu and lam_n = s_n phi(c_n) / Phi(s_n c_n)
    (= E_q z_n - c_n)::

        ELBO = sum_n [log Phi(s_n c_n) - lam_n (c_n - m_n) - (c_n - m_n)^2 / 2
                      - x_n' cov x_n / 2]
               - (|mu|^2 + tr cov) / (2 prior_var) + log|cov| / 2
               + d / 2 - d log(prior_var) / 2
    """
    d = X.shape[1]
    m = X @ mu
    lam = s * inverse_mills(s * c)
    quad = np.einsum("ij,jk,ik->", X, cov, X)
    lik = np.sum(log_ndtr(s * c) - lam * (c - m) - 0.5 * (c - m) ** 2) - 0.5 * quad
    prior = (-(mu @ mu + np.trace(cov)) / (2.0 * prior_var)
             + 0.5 * np.linalg.slogdet(cov)[1] + 0.5 * d - 0.5 * d * np.log(prior_var))
    return float(lik + prior)


def vbem_probit(X, y, prior_var, n_iter, tol=0.0, elbo=False):
    """VBEM for probit regression with the auxiliary variables z_n ~ N(x_n .
    theta, 1), y_n = 1{z_n > 0} (Ormerod & Wand 2010), from the prior.

    Coordinate ascent on q(theta) q(z), each step in closed form::

        q(z_n)   = N(x_n . mu, 1) truncated to s_n z_n > 0,
                   E z_n = x_n . mu + s_n phi(x_n . mu) / Phi(s_n x_n . mu)
        q(theta) = N(mu, cov), cov = (X'X + I / prior_var)^-1 (fixed),
                   mu = cov X' E z

    starting from q(theta) = prior (mu = 0).  The fixed point's mean solves
    mu / prior_var = sum_n x_n s_n phi / Phi (x_n . mu), the posterior
    mode's equation, so VBEM's mean converges to the MAP; its covariance
    (X'X + I/prior_var)^-1 is smaller than the posterior's (the extra
    factorisation of q(theta) q(z)).  Each iteration is one data pass (X mu
    and X' E z); X'X is one more, counted first.

    Parameters
    ----------
    X : ndarray (N, d); y : ndarray (N,) of 0 / 1; prior_var : float
    n_iter : int
        Iterations at most.
    tol : float
        Stop when max |mu change| <= tol (0: run every iteration).
    elbo : bool
        Also return the ELBO after each half-step (z, then theta).

    Returns
    -------
    evals : ndarray (n,)
        Data passes done after each iteration (1 + iteration).
    means : ndarray (n, d)
        mu after each iteration.
    cov : ndarray (d, d)
    elbos : ndarray (2 n,), only with ``elbo=True``
    """
    s = 2.0 * np.asarray(y, dtype=float) - 1.0
    d = X.shape[1]
    cov = np.linalg.inv(X.T @ X + np.eye(d) / prior_var)
    mu = np.zeros(d)
    means, elbos = [], []
    for _ in range(n_iter):
        c = X @ mu                                   # q(z) update: centres
        if elbo:
            elbos.append(vbem_elbo(X, s, prior_var, mu, cov, c))
        new = cov @ (X.T @ (c + s * inverse_mills(s * c)))   # q(theta) update
        if elbo:
            elbos.append(vbem_elbo(X, s, prior_var, new, cov, c))
        done = np.max(np.abs(new - mu)) <= tol
        mu = new
        means.append(mu)
        if done:
            break
    evals = 1.0 + np.arange(1, len(means) + 1)
    out = (evals, np.array(means), cov)
    return out + (np.array(elbos),) if elbo else out


def ff_minibatch_probit(X, y, prior_var, n_iter, batch, step, rng):
    """FF-Minibatch: Salimans & Knowles' (2013) Gaussian fixed-form VB by
    stochastic linear regression with the Hessian, on minibatches, from the
    prior.

    q = N(m, P^-1).  Iteration t draws x* ~ q_t and a minibatch B (``batch``
    rows without replacement), takes the gradient g_t and Hessian H_t of
    log p(theta) + (N / b) sum_{n in B} log p(y_n | theta) at x*
    (:func:`probit_grad_hess`), and updates, with step w::

        a_{t+1} = (1 - w) a_t + w g_t
        P_{t+1} = (1 - w) P_t - w H_t
        z_{t+1} = (1 - w) z_t + w x*
        m_{t+1} = P_{t+1}^-1 a_{t+1} + z_{t+1}

    from a_1 = 0, z_1 = m_1 = 0, P_1 = I / prior_var (the prior).  Its
    returned estimate is the unweighted second-half average
    m = Pbar^-1 abar + zbar, the bars being means of g_t, -H_t, x* over the
    iterations (t / 2, t]; the estimate after t iterations here is that one
    (what the algorithm returns if stopped at t).

    Returns
    -------
    evals : ndarray (n_iter,)
        Data passes after each iteration (t b / N).
    means : ndarray (n_iter, d)
        The second-half-average estimate after each iteration.
    """
    N, d = X.shape
    s = 2.0 * np.asarray(y, dtype=float) - 1.0
    scale = N / batch
    a, z, P = np.zeros(d), np.zeros(d), np.eye(d) / prior_var
    G, Hs, Z = np.empty((n_iter, d)), np.empty((n_iter, d, d)), np.empty((n_iter, d))
    for t in range(n_iter):
        m = np.linalg.solve(P, a) + z
        L = np.linalg.cholesky(np.linalg.inv(P))
        x_star = m + L @ rng.standard_normal(d)
        rows = rng.choice(N, batch, replace=False) if batch < N else slice(None)
        g, H = probit_grad_hess(x_star, X[rows], s[rows], scale, prior_var)
        a = (1.0 - step) * a + step * g
        P = (1.0 - step) * P - step * H
        z = (1.0 - step) * z + step * x_star
        G[t], Hs[t], Z[t] = g, H, x_star
    cG, cH, cZ = (np.concatenate([np.zeros((1,) + A.shape[1:]), np.cumsum(A, axis=0)])
                  for A in (G, Hs, Z))
    means = np.empty((n_iter, d))
    for t in range(1, n_iter + 1):
        h = t // 2
        k = t - h
        means[t - 1] = (np.linalg.solve(-(cH[t] - cH[h]) / k, (cG[t] - cG[h]) / k)
                        + (cZ[t] - cZ[h]) / k)
    return np.arange(1, n_iter + 1) * (batch / N), means
