"""Exact HMC against posteriordb reference posteriors."""
import numpy as np
import pytest

import fastsurrogate as fs
from fastsurrogate import diagnostics
from fastsurrogate.models import posteriordb as pdb


def compare_to_reference(res, ref, n_se=4.0):
    """Means and sds of every constrained quantity within n_se combined MCSE;
    ``res`` is a Result or a dict name -> (chains, draws)."""
    draws = res if isinstance(res, dict) else res.constrained()
    bad = []
    for name, r in ref.items():
        x = np.asarray(draws[name])
        r = np.asarray(r)
        se_m = np.hypot(diagnostics.mcse_mean(x), diagnostics.mcse_mean(r))
        se_s = np.hypot(diagnostics.mcse_sd(x), diagnostics.mcse_sd(r))
        zm = (x.mean() - r.mean()) / se_m
        zs = (x.std() - r.std()) / se_s
        if abs(zm) > n_se or abs(zs) > n_se:
            bad.append((name, round(float(zm), 2), round(float(zs), 2)))
    assert not bad, f"(name, z of mean, z of sd) outside {n_se} MCSE: {bad}"


@pytest.mark.parametrize("cls, kw", [
    (pdb.SBLRC_BLR, dict(n_steps=10)),
    (pdb.EightSchoolsNoncentered, dict(n_steps=10, target_accept=0.9)),
])
def test_hmc_reproduces_reference_posterior(data_dir, cls, kw):
    model = cls.from_posteriordb(data_dir)
    pot = pdb.as_potential(model)
    ref = cls.reference_draws(data_dir)
    res = fs.sample(pot, method="hmc", n_draws=4000, n_warmup=1000, chains=4, seed=2024, progress=False,
                    **kw)
    assert res.stats["divergent"].mean() < 0.01
    compare_to_reference(res, ref)


def test_vhmc_exact_mixes_on_eight_schools(data_dir):
    """VHMC with exact=True and its default warm-up (surrogate NUTS's): every
    chain mixes.  With the paper's warm-up, whose training iterations V_t
    judges, one chain drifted to mu = -32 and accepted 2 % after t0 (R-hat
    1.59, seed 2024; see VHMC's ``warmup``).  The Laplace mode (log tau =
    3.4) is far from the posterior's mass, and the input scale chosen on
    held-out warm-up points keeps the acceptance above 0.5 (the fixed 0.5
    it replaced accepted 0.19-0.28 at 1000 draws)."""
    cls = pdb.EightSchoolsNoncentered
    pot = pdb.as_potential(cls.from_posteriordb(data_dir))
    with np.errstate(all="ignore"):
        res = fs.sample(pot, method="vhmc", exact=True, n_draws=4000, n_warmup=1000, chains=4,
                        seed=2024, progress=False)
    assert res.exact and res.info["warmup"]
    assert np.max(diagnostics.rhat(res.draws)) <= 1.01
    assert np.nanmean(res.stats["accept_prob"], axis=1).min() > 0.5
    assert res.info["input_scale"] < 0.5
    compare_to_reference(res, cls.reference_draws(data_dir))


def test_arns_hmc_defaults_mix_on_eight_schools(data_dir):
    """ARNS-HMC with every default (the paper's online data, the chain's
    states) on eight schools (non-centred).  Fed every proposal instead, the
    default before, two of four chains accepted 0.12-0.13 and the smallest
    bulk ESS was 151 (R-hat 1.055; states: 844 and 1.007; Intel Xeon)."""
    cls = pdb.EightSchoolsNoncentered
    pot = pdb.as_potential(cls.from_posteriordb(data_dir))
    with np.errstate(all="ignore"):
        res = fs.sample(pot, method="arns-hmc", chains=4, seed=2024, progress=False,
                        warn=False)
    assert res.exact
    assert np.max(diagnostics.rhat(res.draws)) <= 1.02
    assert np.min(diagnostics.ess_bulk(res.draws)) >= 500
    assert np.nanmean(res.stats["accept_prob"], axis=1).min() > 0.3
    compare_to_reference(res, cls.reference_draws(data_dir))
