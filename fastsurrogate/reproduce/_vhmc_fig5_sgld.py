"""SGLD (Welling & Teh 2011) on the ICA posterior of the VHMC paper's Figure 5
(section 4.4), in NumPy, for the reproduce table only: ``fs.SGLD`` handles
GLMs, not :class:`fastsurrogate.models.ICA`.

The model's potential (see ``fs.models.ICA``), with W (d, d) and rows x_n::

    U(W) = -N log|det W| + sum_n sum_i 2 log(2 cosh((W x_n)_i / 2)) + |W|_F^2 / (2 prior_var)

so, the log-determinant being one term per observation,

    grad U(W) = sum_n [-W^-T + tanh(W x_n / 2) x_n'] + W / prior_var

and a minibatch B of b rows estimates the data sum by N / b times its own
(:func:`ica_minibatch_grad`).  The paper's SGLD uses a natural gradient
(Amari et al. 1996); this one is the plain SGLD of Welling & Teh with the
polynomial schedule eps_t = a (b0 + t)^-0.55 (:func:`sgld_ica`).
"""
import time

import numpy as np

__all__ = ["ica_minibatch_grad", "sgld_step_sizes", "sgld_ica"]


def ica_minibatch_grad(W, Xb, n_obs, prior_var):
    """Unbiased estimate of grad U at W from the rows ``Xb`` (b, d) of the
    data: -N W^-T + (N / b) sum_{n in B} tanh(W x_n / 2) x_n' + W / prior_var.

    Averaged over the batches of any partition of the rows into equal
    batches it is the full gradient (the model's ``grad``, reshaped (d, d)).
    """
    scale = n_obs / Xb.shape[0]
    T = np.tanh(0.5 * (Xb @ W.T))
    return -n_obs * np.linalg.inv(W).T + scale * (T.T @ Xb) + W / prior_var


def sgld_step_sizes(a, b0, t, gamma=0.55):
    """Welling & Teh's polynomial schedule eps_t = a (b0 + t)^-gamma (t from 0)."""
    return a * (b0 + np.asarray(t, dtype=float)) ** -gamma


def sgld_ica(X, prior_var, init, a, b0, batch, seconds, rng, block=20, max_iter=None):
    """Plain minibatch SGLD on the ICA posterior for ``seconds`` of wall time
    (or ``max_iter`` iterations, whichever comes first)::

        W_{t+1} = W_t - (eps_t / 2) g_t(W_t) + sqrt(eps_t) xi_t,   xi_t ~ N(0, I)

    g_t being :func:`ica_minibatch_grad` on the next ``batch`` rows of a
    fresh random permutation of X each epoch, eps_t from
    :func:`sgld_step_sizes`.  Every iterate counts (no burn-in: the chain
    starts at ``init``, e.g. the Laplace mean); to keep memory small the
    iterates are stored as means of consecutive blocks of ``block``, so the
    running mean at each block's end is exact.

    Returns
    -------
    dict with ``block_means`` (k, d*d), ``times`` (k,) (seconds since the
    start at each block's end), ``n_iter``, ``eps_first``, ``eps_last``,
    ``seconds``.
    """
    N, d = X.shape
    W = np.array(init, dtype=float).reshape(d, d)
    perm, pos, t = rng.permutation(N), 0, 0
    means, times = [], []
    t0 = time.perf_counter()
    while (max_iter is None or t < max_iter) and time.perf_counter() - t0 < seconds:
        eps = sgld_step_sizes(a, b0, np.arange(t, t + block))
        noise = rng.standard_normal((block, d, d)) * np.sqrt(eps)[:, None, None]
        acc = np.zeros((d, d))
        for k in range(block):
            if pos + batch > N:
                perm, pos = rng.permutation(N), 0
            g = ica_minibatch_grad(W, X[perm[pos:pos + batch]], N, prior_var)
            pos += batch
            W = W - 0.5 * eps[k] * g + noise[k]
            acc += W
        t += block
        means.append(acc.ravel() / block)
        times.append(time.perf_counter() - t0)
    return dict(block_means=np.array(means).reshape(-1, d * d), times=np.array(times),
                n_iter=t, eps_first=float(sgld_step_sizes(a, b0, 0)),
                eps_last=float(sgld_step_sizes(a, b0, max(t - 1, 0))),
                seconds=time.perf_counter() - t0)
