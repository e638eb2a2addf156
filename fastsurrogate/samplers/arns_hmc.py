"""ARNS-HMC: adaptive random-network-surrogate HMC (Zhang, Shahbaba & Zhao
2017, Algorithm 4 and Proposition 1).

Phases (per chain)
------------------
1. explore: exact HMC for ``n_warmup`` iterations (adaptation in the first
   half when ``adapt``); its last ``n_start`` states start the surrogate.
2. start: a random-basis network is fitted to those points; a Greville
   trainer (fastsurrogate._online) holds the pseudo-inverse state of the
   output layer, with a constant feature for the output bias.
3. adapt-and-sample: the network drives the leapfrog, the exact U judges.
   Every new state (q, U(q)) updates the trainer (O(s^2) per point, in C);
   the chain switches to the updated weights with probability a_t =
   t^(-exponent), t the iterations since the start (a_t -> 0, sum a_t =
   infinity for exponent <= 1), so adaptation
   vanishes and the chain stays ergodic for the exact target.

The loop runs in chunks of ``update_every`` iterations in C; after each
chunk the trainer absorbs the chunk's states and one coin with probability
1 - prod(1 - a_t) over the chunk decides the switch (the per-iteration coins
of Algorithm 4, collapsed to the chunk).
"""
import numpy as np

from .._hmc import Chain, new_trace
from .._online import GrevilleTrainer
from .._potential import PotentialError
from ..surrogates.random_network import train_random_network
from ._base import chain_generators, initial_points, run_chains, check_int, check_positive
from .rns_hmc import RNSHMC, surrogate_seed

__all__ = ["ARNSHMC"]


class ARNSHMC(RNSHMC):
    """Adaptive RNS-HMC with online Greville updates of the output weights.

    Parameters
    ----------
    potential : Potential
    n_start : int
        Exploration states the surrogate starts from.
    update_every : int
        Iterations per C chunk between trainer updates / switch decisions.
    exponent : float
        a_t = t^(-exponent), t = iterations since the start; in (0, 1].
    online_ridge : float or None
        0: Greville's pseudo-inverse recursion (the paper's Proposition 1);
        > 0: recursive ridge least squares with that absolute penalty; None
        (default): ridge least squares with the batch trainer's relative
        penalty ``ridge`` times the mean squared feature norm of the start
        set.  Random features of a low-dimensional q are nearly collinear, and
        the pure pseudo-inverse then amplifies rounding; a tiny ridge keeps
        the recursion stable.  If an update still breaks down numerically,
        the output layer is re-solved in batch from every point seen.
    resync_every : int
        Re-solve the output layer by a batch solve over all points every
        this many updates (0: never); bounds rounding drift.
    **options
        n_hidden, activation, standardize, delayed_acceptance and the HMC
        options, as for :class:`RNSHMC`.
    """

    method = "arns-hmc"

    def __init__(self, potential, *, n_start=200, update_every=10, exponent=0.5,
                 online_ridge=None, resync_every=0, **options):
        options.setdefault("guard", None)
        super().__init__(potential, **options)
        self.n_start = check_int("n_start", n_start, 2)
        self.update_every = check_int("update_every", update_every, 1)
        self.exponent = float(exponent)
        if not 0 < self.exponent <= 1:
            raise ValueError("exponent must be in (0, 1]")
        if online_ridge is not None and not (online_ridge >= 0 and np.isfinite(online_ridge)):
            raise ValueError("online_ridge must be None or >= 0")
        self.online_ridge = None if online_ridge is None else float(online_ridge)
        self.resync_every = check_int("resync_every", resync_every, 0)

    def sample(self, n_draws=1000, n_warmup=400, *, chains=1, seed=None, init=None,
               progress=True, keep_warmup=True):
        """Explore for n_warmup exact iterations, start the surrogate from the
        last n_start states, then adapt-and-sample for n_draws iterations.

        ``info`` holds per-chain switch iterations and the trainer's final
        number of points.
        """
        n_draws = check_int("n_draws", n_draws, 0)
        n_warmup = check_int("n_warmup", n_warmup, self.n_start)
        chains = check_int("chains", chains, 1)
        gens = chain_generators(seed, chains)
        base_seed = surrogate_seed(gens[0])
        q0 = initial_points(self.potential, init, gens)
        d = self.potential.dim
        warm = [new_trace(n_warmup, d) for _ in range(chains)]
        main = [new_trace(n_draws, d) for _ in range(chains)]
        chain_objs = [None] * chains
        nets = [None] * chains
        switches = [[] for _ in range(chains)]
        n_seen = [0] * chains
        resyncs = [0] * chains

        def worker(ctx):
            k = ctx.index
            chain = self.make_chain(q0[k], gens[k])
            chain_objs[k] = chain
            with ctx.phase("warmup"):
                self.explore(chain, warm[k], ctx, n_warmup)
            with ctx.phase("train"):
                Q = warm[k]["draws"][n_warmup - self.n_start:]
                U = warm[k]["potential"][n_warmup - self.n_start:]
                net = train_random_network(Q, U, n_hidden=self.n_hidden,
                                           activation=self.activation, ridge=self.ridge,
                                           standardize=self.standardize,
                                           input_scale=self.input_scale,
                                           seed=[base_seed, k])
                offset = float(U.min())
                H = _with_bias(net.features(Q))
                lam = self.online_ridge
                if lam is None:
                    lam = self.ridge * float(np.mean(np.einsum("ij,ij->i", H, H)))
                trainer = GrevilleTrainer.from_batch(H, U - offset, ridge=lam,
                                                     resync_every=self.resync_every)
                _set_weights(net, trainer.weights, offset)
                nets[k] = net
            n_resync = 0
            chain = self._continue_chain(chain, net, ctx)
            chain_objs[k] = chain
            gen = chain.generator
            t, i = 0, 0
            with ctx.phase("sample"):
                while i < n_draws:
                    first, end = i, min(i + self.update_every, n_draws)
                    i = ctx.run_span(chain, main[k], first, end, "sample")
                    Qn = main[k]["draws"][first:i]
                    Un = main[k]["potential"][first:i]
                    try:
                        trainer.update_many(_with_bias(net.features(Qn)), Un - offset)
                        due = trainer.resync_due
                    except PotentialError:
                        due = True          # numerical breakdown: re-solve in batch
                    if due:
                        Qh = np.concatenate([Q, main[k]["draws"][:i]])
                        Uh = np.concatenate([U, main[k]["potential"][:i]])
                        trainer.resync(_with_bias(net.features(Qh)), Uh - offset)
                        n_resync += 1
                    ts = np.arange(t + 1, t + Qn.shape[0] + 1, dtype=float)
                    t += Qn.shape[0]
                    a = ts ** (-self.exponent)
                    if gen.uniform() < 1.0 - np.prod(1.0 - a):
                        _set_weights(net, trainer.weights, offset)
                        switches[k].append(i)
            n_seen[k] = trainer.n_seen
            resyncs[k] = n_resync
            return chain

        _, ctxs, interrupted, error = run_chains(
            worker, chains, chains * (n_warmup + n_draws), self.potential.thread_safe,
            progress, self.method)
        info = {"switch_iterations": switches, "n_seen": n_seen, "n_start": self.n_start,
                "batch_resolves": resyncs}
        res = self._result(warm, main, ctxs, chain_objs, interrupted or error is not None,
                           keep_warmup, info=info, surrogate=nets[0])
        res.info["surrogates"] = nets
        if error is not None:
            error.result = res
            raise error
        return res


def _with_bias(H):
    return np.hstack([H, np.ones((H.shape[0], 1))])


def _set_weights(net, w, offset):
    net.output_weights = w[:-1]
    net.out_bias = float(w[-1]) + offset
