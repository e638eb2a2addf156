"""Chain hooks: online trainers run inside the C chain loop (fs_hmc_hook).

The hooks must do what the Python loops they replace did (same draws, same
weights) and must not enter Python per iteration."""
import os
import sys

import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate.core._hmc import Chain, ChainHook, new_trace
from fastsurrogate.surrogates._online import SMWTrainer, ScoreMatchingHook, HOOK_RESOLVE
from fastsurrogate.surrogates.laplace import laplace_approximation
from fastsurrogate.samplers.vhmc import VHMC, _mu_table, _exp_schedule

PKG = os.path.dirname(fs.__file__)


def _vhmc_setup(n_iter, seed=3, d=3, s=20):
    cov = np.array([[1.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 0.5]])[:d, :d]
    exact = fs.models.Gaussian(np.arange(d, dtype=float), cov)
    vh = VHMC(exact, n_hidden=s, n_train=n_iter)
    lap = laplace_approximation(exact)
    net, V, lam = vh.make_surrogate(lap, seed=5)
    trainer = SMWTrainer(s, d, lam)
    chain = Chain(V, V, lap.mean + 0.1, np.random.default_rng(seed), step_size=0.4, n_steps=5,
                  random_n_steps=True, inv_metric=lap.cov)
    mu = _mu_table(_exp_schedule(n_iter / 10.0), n_iter)
    return exact, net, V, lam, trainer, chain, mu


def _python_loop(exact, net, V, trainer, chain, trace, mu):
    """VHMC.train's per-iteration loop before the hook (n_train fixed)."""
    accepted, draws = trace["accepted"], trace["draws"]
    v = np.zeros(trainer.n_hidden)
    errs = []
    for t in range(mu.shape[0] - 1):
        chain.run(trace, t, 1)
        if accepted[t]:
            q = draws[t]
            g = exact.grad(q)
            A = net.grad_features(q)
            r = A @ v - g
            errs.append((t, r @ r, g @ g))
            trainer.update(A, g)
            v = trainer.weights
            net.output_weights = v
        m = mu[t + 1]
        V.weights = (m, 1.0 - m)
        chain.set_position(draws[t])
    return errs


def test_score_matching_hook_matches_the_python_loop_bit_for_bit():
    n = 150
    old = _vhmc_setup(n)
    new = _vhmc_setup(n)
    tr_old, tr_new = new_trace(n, 3), new_trace(n, 3)
    errs = _python_loop(old[0], old[1], old[2], old[4], old[5], tr_old, old[6])
    exact, net, V, lam, trainer, chain, mu = new
    hook = ScoreMatchingHook(exact, net, V, trainer, mu)
    n_done, status = chain.run(tr_new, 0, n, None, hook)
    assert (n_done, status) == (n, 0)
    for k in tr_old:
        np.testing.assert_array_equal(tr_old[k], tr_new[k], err_msg=k)
    np.testing.assert_array_equal(old[4].weights, trainer.weights)
    np.testing.assert_array_equal(net.output_weights, trainer.weights)
    np.testing.assert_array_equal(V.weights, [mu[n], 1.0 - mu[n]])
    assert hook.iteration == n and not hook.pending
    it, e2, g2 = hook.curve()
    np.testing.assert_array_equal(it, [e[0] for e in errs])
    np.testing.assert_allclose(e2, [e[1] for e in errs], rtol=1e-10)
    np.testing.assert_allclose(g2, [e[2] for e in errs], rtol=1e-12)


def test_score_matching_hook_against_numpy_ridge_solution():
    n = 120
    exact, net, V, lam, trainer, chain, mu = _vhmc_setup(n, seed=8)
    hook = ScoreMatchingHook(exact, net, V, trainer, mu)
    trace = new_trace(n, 3)
    chain.run(trace, 0, n, None, hook)
    Q, G = hook.points()
    acc = np.flatnonzero(trace["accepted"])
    np.testing.assert_array_equal(hook.curve()[0], acc)
    np.testing.assert_array_equal(Q, trace["draws"][acc])
    np.testing.assert_allclose(G, [exact.grad(q) for q in Q], rtol=1e-14)
    # (3.19) by the normal equations, and the held-out errors of each prefix
    As = [net.grad_features(q) for q in Q]
    s = net.n_hidden
    Gram, b = lam * np.eye(s), np.zeros(s)
    e2 = []
    for A, g in zip(As, G):
        v = np.linalg.solve(Gram, b)
        e2.append(np.sum((A @ v - g) ** 2))
        Gram += A.T @ A
        b += A.T @ g
    v = np.linalg.solve(Gram, b)
    np.testing.assert_allclose(trainer.weights, v, rtol=1e-6, atol=1e-9 * np.abs(v).max())
    np.testing.assert_allclose(hook.curve()[1], e2, rtol=1e-5, atol=1e-10)


def test_score_matching_hook_argument_checks():
    exact, net, V, lam, trainer, chain, mu = _vhmc_setup(20)
    with pytest.raises(ValueError, match="mu"):
        ScoreMatchingHook(exact, net, V, trainer, np.r_[np.nan, 0.5, 1.5])
    with pytest.raises(ValueError, match="trainer"):
        ScoreMatchingHook(exact, net, V, SMWTrainer(7, 3, 1.0), mu)
    other = fs.WeightedSum([exact, net], [0.0, 1.0])
    with pytest.raises(ValueError, match="WeightedSum"):
        ScoreMatchingHook(exact, net, other, trainer, mu)
    hook = ScoreMatchingHook(exact, net, V, trainer, mu)
    with pytest.raises(RuntimeError, match="not paused"):
        hook.finish_iteration()
    # past t_max the hook refuses (an error, raised by Chain.run)
    trace = new_trace(25, 3)
    with pytest.raises(fs.PotentialError if hasattr(fs, "PotentialError") else Exception):
        chain.run(trace, 0, 25, None, hook)
    assert hook.iteration == 20
    assert isinstance(hook, ChainHook) and HOOK_RESOLVE > 0


def test_score_matching_hook_raises_the_exact_potentials_error():
    exact, net, V, lam, trainer, chain, mu = _vhmc_setup(50)
    calls = {"n": 0}

    def f(q):
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyError("boom")
        return exact.value_and_grad(q)

    cb = fs.Potential.from_callable(f, 3)
    hook = ScoreMatchingHook(cb, net, V, trainer, mu)
    with pytest.raises(KeyError, match="boom"):
        chain.run(new_trace(50, 3), 0, 50, None, hook)


class _Counter:
    """sys.setprofile hook: Python-level calls of functions in fastsurrogate/,
    by name.  ChainContext.run_span reports progress once per Chain.run call,
    so the calls of ``report`` count the chunks."""

    def __init__(self):
        self.calls = {}

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(PKG):
            name = frame.f_code.co_name
            self.calls[name] = self.calls.get(name, 0) + 1

    @property
    def py_calls(self):
        return sum(self.calls.values())

    @property
    def chain_runs(self):
        return self.calls.get("report", 0)


@pytest.mark.parametrize("n_train", [300, 3000])
def test_vhmc_training_enters_python_once_per_chunk(monkeypatch, n_train):
    """Count Python calls while VHMC trains: a few per chunk, independent of the
    number of iterations (the per-iteration loop made >= n_train of each)."""
    counters = []
    orig = VHMC.train

    def counted(self, *args, **kwargs):
        c = _Counter()
        counters.append(c)
        sys.setprofile(c)
        try:
            return orig(self, *args, **kwargs)
        finally:
            sys.setprofile(None)

    monkeypatch.setattr(VHMC, "train", counted)
    target = fs.models.Gaussian(np.zeros(3), np.eye(3))
    res = VHMC(target, n_hidden=30, n_train=n_train).sample(
        10, n_train, chains=1, seed=2, progress=False)
    assert res.info["t0"] == [n_train]
    (c,) = counters
    print(f"n_train={n_train}: {c.chain_runs} Chain.run calls, {c.py_calls} Python calls: "
          f"{c.calls}")
    assert 1 <= c.chain_runs <= 20
    assert c.py_calls <= 4 * c.chain_runs + 15


def test_vhmc_auto_training_checks_once_per_window(monkeypatch):
    target = fs.models.Gaussian(np.zeros(3), np.eye(3))
    res = VHMC(target, n_hidden=30, n_train="auto", window=50, n_s=20).sample(
        10, 1000, chains=1, seed=4, progress=False)
    t0 = res.info["t0"][0]
    wc = res.info["training_curve"][0]["weight_change"]
    # one check per window after the first, at multiples of the window
    np.testing.assert_array_equal(wc[:, 0], np.arange(100, t0 + 1, 50))
    assert t0 < 1000


# ---- ARNS-HMC's online layer ---------------------------------------------------

def _arns_python(s, trace, ctx_chain, net, layer, offset, Q, U, n, block, exponent, max_points):
    """ARNS-HMC's adapt-and-sample loop before the hook (proposals feed the trainer;
    rows centred at ``layer.centre`` when it is set)."""
    from fastsurrogate.surrogates.online import set_output_weights as _set_weights
    chain, gen = ctx_chain, ctx_chain.generator
    hist_Q, hist_U, switches = [Q], [U], []
    t = i = 0
    stopped = None
    while i < n:
        first, i = i, min(i + block, n)
        chain.run(trace, first, i - first)
        Qn, Un = trace["proposals"][first:i], trace["proposal_potential"][first:i]
        ok = np.isfinite(Un)
        Qn, Un = Qn[ok], Un[ok]
        if max_points is not None:
            Qn, Un = Qn[:max_points - layer.n_seen], Un[:max_points - layer.n_seen]
        hist_Q.append(Qn)
        hist_U.append(Un)
        if Qn.shape[0]:
            layer.absorb(layer.rows(net.features(Qn)), Un - offset,
                         lambda: (layer.rows(net.features(np.concatenate(hist_Q))),
                                  np.concatenate(hist_U) - offset))
        ts = np.arange(t + 1, t + (i - first) + 1, dtype=float)
        t += i - first
        if max_points is not None and layer.n_seen >= max_points:
            _set_weights(net, layer.weights, offset, layer.centre)
            chain.refresh_drive()
            switches.append(i)
            stopped = i
            break
        if gen.uniform() < 1.0 - np.prod(1.0 - ts ** (-exponent)):
            _set_weights(net, layer.weights, offset, layer.centre)
            chain.refresh_drive()
            switches.append(i)
    if stopped is not None and i < n:
        chain.run(trace, i, n - i)
    return switches, stopped


def _online_case(ridge, block, resync_every, centred):
    """ARNS-HMC's online layer, set up by hand: a 3-d logistic regression,
    100 start points around 0, a 30-unit network fitted to them and its
    output layer (centred rows or not) -> (model, Q, U, net, offset, layer,
    centre)."""
    from fastsurrogate.surrogates.online import OnlineOutputLayer, with_bias, set_output_weights
    from fastsurrogate.surrogates.random_network import train_random_network
    X, y, _ = fs.datasets.simulate_logistic(500, 3, seed=1)
    model = fs.models.LogisticRegression(X, y, prior_sd=10.0)
    Q = np.random.default_rng(0).normal(0.0, 0.3, (100, 3))
    U = np.array([model.value(q) for q in Q])
    net = train_random_network(Q, U, n_hidden=30, seed=4)
    offset = float(U.min())
    F = net.features(Q)
    centre = F.mean(axis=0) if centred else None
    layer = OnlineOutputLayer(with_bias(F if centre is None else F - centre), U - offset, ridge,
                              block, resync_every, centre=centre)
    set_output_weights(net, layer.weights, offset, centre)
    return model, Q, U, net, offset, layer, centre


@pytest.mark.parametrize("ridge, resync_every, max_points, centred", [
    (1e-6, 0, None, False), (1e-6, 60, None, False), (0.0, 0, None, False),
    (0.0, 45, 230, False), (1e-6, 0, 180, False), (1e-6, 60, None, True),
    (0.0, 45, 230, True)])
def test_online_layer_hook_matches_the_python_loop_bit_for_bit(ridge, resync_every, max_points,
                                                                centred):
    from fastsurrogate.surrogates._online import OnlineLayerHook, HOOK_STOPPED
    n, block, expo = 200, 10, 0.5
    out = []
    for use_hook in (False, True):
        model, Q, U, net, offset, layer, centre = _online_case(ridge, block, resync_every, centred)
        chain = Chain(net, model, Q[-1], np.random.default_rng(9), step_size=0.05, n_steps=8)
        trace = new_trace(n, 3, proposals=True)
        if use_hook:
            hook = OnlineLayerHook(net, layer.trainer, offset, block, expo, n, Q, U,
                                   max_points=max_points, resync_every=resync_every,
                                   centre=centre)
            i, pauses = 0, 0
            while i < n:
                n_done, status = chain.run(trace, i, n - i, None, hook)
                i += n_done
                if hook.pending:
                    Qh, Uh = hook.history()
                    layer.resolve(layer.rows(net.features(Qh)), Uh - offset)
                    if hook.finish_block():
                        chain.refresh_drive()
                    pauses += 1
                else:
                    assert status in (0, HOOK_STOPPED)
            assert pauses == layer.n_resolves
            res = (hook.switches, hook.stopped)
            assert hook.n_seen == (max_points or 100 + int(np.isfinite(trace["proposal_potential"]).sum()))
        else:
            res = _arns_python(30, trace, chain, net, layer, offset, Q, U, n, block, expo,
                               max_points)
        out.append((res, trace, layer.weights, net.output_weights, net.out_bias,
                    layer.n_resolves))
    (r0, t0, w0, v0, b0, n0), (r1, t1, w1, v1, b1, n1) = out
    assert r0 == r1 and len(r0[0]) > 1
    for k in t0:
        np.testing.assert_array_equal(t0[k], t1[k], err_msg=k)
    np.testing.assert_array_equal(w0, w1)
    np.testing.assert_array_equal(v0, v1)
    assert b0 == b1 and n0 == n1
    if resync_every:
        assert n1 > 0


def test_online_layer_switch_refreshes_the_drive_gradient_without_a_judge_call():
    """After the online layer takes new weights, the chain's state carries the
    new network's gradient (a trajectory started from the old one would not
    be reversible, and the Metropolis test not exact), and the refresh costs
    no evaluation of the exact potential."""
    from fastsurrogate.surrogates._online import OnlineLayerHook
    model, Q, U, net, offset, layer, _ = _online_case(1e-6, 10, 0, False)
    calls = [0]

    def judge_fn(q):
        calls[0] += 1
        return model.value_and_grad(q)

    judge = fs.Potential.from_callable(judge_fn, 3)
    chain = Chain(net, judge, Q[-1], np.random.default_rng(9), step_size=0.05, n_steps=8)
    n = 200
    trace = new_trace(n, 3, proposals=True)
    hook = OnlineLayerHook(net, layer.trainer, offset, 10, 0.5, n, Q, U)
    calls[0], checked = 0, 0
    for i in range(0, n, 10):           # one block per call: a switch ends a call
        before = len(hook.switches)
        n_done, status = chain.run(trace, i, 10, None, hook)
        assert n_done == 10 and status == 0
        if len(hook.switches) > before:
            state = chain.get_state()
            np.testing.assert_allclose(state["grad"], net.grad(state["q"]), rtol=1e-12,
                                       atol=1e-12)
            checked += 1
    assert checked > 3
    # one judge call per iteration (the proposal's U), none for the refreshes
    assert calls[0] == n
