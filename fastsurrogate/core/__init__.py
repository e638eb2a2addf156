"""The contract and the engine: ``Potential`` (a C ``fs_potential`` behind a
Python face, with composition: ``WeightedSum``, ``ClampedSum``,
``TrustedDrive``, ``RecordingPotential``), the
HMC chain loop in C (``Chain``, with its factored ``LowRankMetric``), the Riemannian metrics of RMHMC (``Metric``:
``FisherMetric``, ``SoftAbsMetric``, ``CallableMetric``), and the BLAS table
the C code calls."""
from ._potential import (Potential, PotentialError, TrainingError, WeightedSum, ClampedSum,
                         TrustedDrive, RecordingPotential, CFunctionPotential)
from ._hmc import Chain, LowRankMetric, new_trace
from ._rmhmc import Metric, FisherMetric, SoftAbsMetric, CallableMetric

__all__ = ["Potential", "PotentialError", "TrainingError", "WeightedSum", "ClampedSum",
           "TrustedDrive", "RecordingPotential", "CFunctionPotential", "Chain", "LowRankMetric", "new_trace", "Metric", "FisherMetric",
           "SoftAbsMetric", "CallableMetric"]
