"""The papers' Table-1 columns for a set of runs against an HMC baseline."""
from ._report import markdown_table

HEAD = ["method", "AP", "ESS min / median / max", "s/iter", "min ESS/s", "speed-up", "train s"]


def efficiency_rows(runs, baseline="HMC"):
    """Rows of acceptance, ESS (Geyer) min / median / max, s/iter of the sampling
    phase, min ESS/s and the speed-up in min ESS/s over ``runs[baseline]``."""
    base = runs[baseline].summary().overall["min_ess_per_sampling_second"]
    rows = []
    for m, res in runs.items():
        t = res.summary().overall
        rows.append([m, f"{t['acceptance']:.2f}",
                     f"{t['ess_min']:.0f} / {t['ess_median']:.0f} / {t['ess_max']:.0f}",
                     f"{t['seconds_per_iteration']:.2e}", f"{t['min_ess_per_sampling_second']:.2f}",
                     f"{t['min_ess_per_sampling_second'] / base:.1f}", f"{res.timings.get('train', 0.0):.1f}"])
    return rows


def efficiency_table(runs, baseline="HMC"):
    return markdown_table(HEAD, efficiency_rows(runs, baseline))
