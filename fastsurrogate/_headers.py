"""Where the C headers are, for extensions built on fastsurrogate (the
lowest module of the package: it imports nothing of it)."""
import os

__all__ = ["get_include"]


def get_include() -> str:
    """Folder with the C headers (fs_potential.h, ...) for extensions built on fastsurrogate.

    An installed package ships them in ``fastsurrogate/include``; a checkout
    built in place has them in ``csrc/`` beside the package.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    inc = os.path.join(here, "include")
    csrc = os.path.join(os.path.dirname(here), "csrc")
    if not os.path.isdir(inc) and os.path.isfile(os.path.join(csrc, "fs_potential.h")):
        return csrc
    return inc
