"""Old import path of :mod:`fastsurrogate.diagnostics.approximation` (kept working)."""
from .diagnostics.approximation import *          # noqa: F401,F403
from .diagnostics.approximation import __all__    # noqa: F401
