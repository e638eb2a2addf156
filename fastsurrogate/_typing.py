"""Type aliases of the public API's annotations (numpy.typing and typing;
nothing here runs at sampling time).  The lowest module of the package."""
import os
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["ArrayLike", "FloatArray", "IntArray", "BoolArray", "SeedLike", "PathLike"]

FloatArray: TypeAlias = NDArray[np.float64]
IntArray: TypeAlias = NDArray[np.int64]
BoolArray: TypeAlias = NDArray[np.bool_]
# what seed= takes: chain k uses child k of its SeedSequence
SeedLike: TypeAlias = int | np.random.SeedSequence | np.random.Generator | None
PathLike: TypeAlias = str | os.PathLike[str]
