# Type stub of the compiled module fastsurrogate.models._models (_models.pyx):
# the public API, partial (names left out here are Any, see __getattr__).
from typing import Any

from .._typing import ArrayLike, FloatArray, IntArray, PathLike
from ..core._potential import Potential

class Gaussian(Potential):
    mean: FloatArray
    cov: FloatArray
    precision: FloatArray
    def __init__(self, mean: ArrayLike, cov: ArrayLike) -> None: ...
    @property
    def covariance(self) -> FloatArray: ...

def StandardNormal(dim: int) -> Gaussian: ...

class Banana(Potential):
    y: FloatArray
    def __init__(self, y: ArrayLike | None = None, sigma_y: float = 2.0, sigma_q: float = 1.0,
                 n: int = 100, seed: int | None = 2017) -> None: ...

class BetaBinomial(Potential):
    y: IntArray
    n: IntArray
    def __init__(self, y: ArrayLike, n: ArrayLike) -> None: ...
    @classmethod
    def from_cancer_mortality(cls, data_dir: PathLike | None = None) -> BetaBinomial: ...

class Garch(Potential):
    y: FloatArray
    m: int
    r: int
    h0: float
    log_alpha0_mean: float
    log_alpha0_sd: float
    def __init__(self, y: ArrayLike, m: int = 2, r: int = 1, h0: float | None = None,
                 log_alpha0_mean: float = 0.0, log_alpha0_sd: float = 5.0) -> None: ...
    @property
    def T(self) -> int: ...

class GPRegression(Potential):
    X: FloatArray
    y: FloatArray
    prior_mean: FloatArray
    prior_sd: FloatArray
    def __init__(self, X: ArrayLike, y: ArrayLike, signal_variance: float | None = 1.0,
                 prior_mean: float | ArrayLike = 0.0,
                 prior_sd: float | ArrayLike = 3.0) -> None: ...
    @property
    def n_obs(self) -> int: ...

def __getattr__(name: str) -> Any: ...
