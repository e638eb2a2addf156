"""The contract and the engine: ``Potential`` (a C ``fs_potential`` behind a
Python face, with composition: ``WeightedSum``, ``RecordingPotential``), the
HMC chain loop in C (``Chain``), and the BLAS table the C code calls."""
from ._potential import (Potential, PotentialError, TrainingError, WeightedSum,
                         RecordingPotential)
from ._hmc import Chain, new_trace

__all__ = ["Potential", "PotentialError", "TrainingError", "WeightedSum",
           "RecordingPotential", "Chain", "new_trace"]
