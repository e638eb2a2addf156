"""Surrogate transitions with an exact correction: the Python side shared by
the surrogate samplers (RNS-HMC, ARNS-HMC after ``max_points``, VHMC with
``exact=True``).

Liu (2001, sec. 9.4.3) and Christen & Fox (2005): k transitions of a kernel
that leaves exp(-V) invariant (HMC or NUTS on the surrogate V alone, no data
cost), then one Metropolis-Hastings test of the composite move with
acceptance min(1, exp(-U(q') + U(q) + V(q') - V(q))).  The exact posterior
exp(-U) stays invariant for every V and every k; one exact U per k surrogate
transitions.  The move runs in C (csrc/fs_surrogate.c, ``Chain(...,
surrogate_steps=k)``).

Tuning (before the kept draws; k and the step size are FIXED afterwards, so
the chain that produces the draws is a time-homogeneous exact kernel):

1. step size: dual averaging of the inner kernel's step size to
   ``target_accept`` on a chain driven AND judged by V (``n_tune``
   iterations; no exact evaluation), started from the current state; the
   sampling chain keeps its own state.
2. k = "auto": the composite chain runs ``per_rung`` iterations at each k of
   the ladder 1, 2, 4, ..., ``max_k``, and measures the expected squared
   jump distance per iteration (ESJD, each coordinate scaled by the spread of
   the tuning draws): since every iteration costs one exact U, ESJD is the
   movement bought per exact evaluation.  It grows with k while the inner
   chain decorrelates and the exact test still accepts, then levels off (the
   composite move approaches an independence sampler with proposal exp(-V))
   or falls (the test rejects).  k = the smallest rung whose ESJD is within
   ``saturation`` (0.9) of the best measured: more surrogate work than that
   buys little.  These tuning iterations (per_rung times the number of
   rungs, each with one exact U) are not kept.
"""
import numpy as np

from ..core._hmc import Chain, new_trace
from ..core._hmc import STATUS_INTERRUPTED
from ._chain import Interrupted
from ._checks import check_int

__all__ = ["check_transitions", "transition_chain", "tune_transitions", "LADDER_MAX_K"]

LADDER_MAX_K = 16
INNER = ("hmc", "nuts")


def check_transitions(transitions, inner):
    """None (off), an int k >= 1 or "auto"; inner "hmc" or "nuts" (None:
    "hmc"), which needs transitions: an option that would be ignored is
    refused.  Returns (transitions, inner)."""
    if transitions is not None:
        if isinstance(transitions, str):
            if transitions != "auto":
                raise ValueError(f'transitions must be None, an integer >= 1 or "auto", '
                                 f'got {transitions!r}')
        else:
            transitions = check_int("transitions", transitions, 1)
    if inner is None:
        return transitions, "hmc"
    if not isinstance(inner, str) or inner not in INNER:
        raise ValueError(f'inner must be "hmc" or "nuts", got {inner!r}')
    if transitions is None:
        raise ValueError(f"inner={inner!r} is the kernel of surrogate transitions: it needs "
                         "transitions= (an integer k or \"auto\"), without them it would be "
                         "ignored")
    return transitions, inner


def transition_chain(sampler, chain, drive, k, inner, step_size=None):
    """A chain making surrogate transitions (k per exact test) from where `chain` is."""
    return Chain(drive, sampler.potential, chain.position, chain.generator,
                 step_size=chain.step_size if step_size is None else step_size,
                 n_steps=sampler.n_steps,
                 random_n_steps=sampler.random_n_steps and inner == "hmc",
                 inv_metric=chain.inv_metric, max_energy_error=sampler.max_energy_error,
                 algorithm=inner, max_tree_depth=getattr(sampler, "max_tree_depth", 10),
                 surrogate_steps=max(int(k), 1))


def _adapt_inner_step(sampler, chain, drive, inner, n_tune, stop):
    """Dual averaging of the inner step size on V alone (no exact evaluation)."""
    v = Chain(drive, drive, chain.position, chain.generator, step_size=chain.step_size,
              n_steps=sampler.n_steps, random_n_steps=sampler.random_n_steps and inner == "hmc",
              inv_metric=chain.inv_metric, max_energy_error=sampler.max_energy_error,
              algorithm=inner, max_tree_depth=getattr(sampler, "max_tree_depth", 10))
    v.start_adaptation(sampler.target_accept)
    tr = new_trace(n_tune, chain.position.shape[0])
    if v.run(tr, 0, n_tune, stop)[1] == STATUS_INTERRUPTED:
        raise Interrupted
    return v.finish_adaptation()


def tune_transitions(sampler, chain, drive, transitions, inner, n_tune=200, per_rung=100,
                     max_k=LADDER_MAX_K, saturation=0.9, stop=None):
    """The sampling chain for surrogate transitions, and what tuning found.

    chain: the chain so far (its position, generator and metric are taken
    over).  Returns ``(new_chain, info)``; info has ``k``, ``inner``,
    ``step_size`` and, for "auto", ``ladder`` (k -> ESJD, acceptance) and
    ``tuning_exact_evaluations``.
    """
    step = _adapt_inner_step(sampler, chain, drive, inner, n_tune, stop) if sampler.adapt \
        else chain.step_size
    info = {"inner": inner, "step_size": float(step)}
    if transitions != "auto":
        info["k"] = int(transitions)
        return transition_chain(sampler, chain, drive, transitions, inner, step), info
    d = chain.position.shape[0]
    ch = transition_chain(sampler, chain, drive, 1, inner, step)
    ladder, evals, best, k = {}, 0, 0.0, 1
    rows = []
    while k <= max_k:
        ch.surrogate_steps = k
        tr = new_trace(per_rung, d)
        start = ch.position
        n_done, status = ch.run(tr, 0, per_rung, stop)
        if status == STATUS_INTERRUPTED:
            raise Interrupted
        evals += int(tr["judge_evaluated"][:n_done].sum())
        rows.append((k, np.vstack([start, tr["draws"][:n_done]]), tr["accepted"][:n_done].mean()))
        if n_done < per_rung:
            break
        k *= 2
    spread = np.concatenate([r[1] for r in rows]).std(axis=0)
    spread[~(spread > 0)] = 1.0
    for kk, q, acc in rows:
        jumps = np.diff(q, axis=0) / spread
        esjd = float(np.mean(np.sum(jumps ** 2, axis=1)))
        ladder[kk] = {"esjd": esjd, "acceptance": float(acc)}
    best = max(v["esjd"] for v in ladder.values())
    chosen = min(kk for kk, v in ladder.items() if v["esjd"] >= saturation * best)
    ch.surrogate_steps = chosen
    info.update(k=chosen, ladder=ladder, tuning_exact_evaluations=evals)
    return ch, info
