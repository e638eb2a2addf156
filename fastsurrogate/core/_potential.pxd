# The Cython face of the fs_potential contract (csrc/fs_potential.h).
#
# Other packages can `from fastsurrogate.core._potential cimport Potential` and call
# `pot.pot.eval(pot.pot.state, q, &value, grad)` with no Python in the loop
# (the GIL may be released when `pot.thread_safe` is true).

cimport numpy as cnp

from fastsurrogate.core._common cimport fs_potential, fs_pool

cdef class Potential:
    cdef fs_potential pot
    cdef readonly bint thread_safe
    # Python objects whose buffers the C state points into (kept alive here).
    cdef object _keep
    # Exception raised inside a Python callback during eval; see check_status.
    cdef public object _error
    cdef object __weakref__

    cdef int check_status(self, int status) except -1
    cdef object _as_q(self, q)


cdef extern from "fs_compose.h" nogil:
    ctypedef struct fs_weighted_sum:
        int dim
        int n_terms
        const fs_potential *terms
        const double *weights
        fs_pool pool


cdef class WeightedSum(Potential):
    # st.weights points into _weights (read at every evaluation): C code that
    # holds this object may write new weights there between evaluations.
    cdef fs_weighted_sum st
    cdef bint _ready
    cdef cnp.ndarray _terms_mem
    cdef cnp.ndarray _weights
    cdef readonly tuple potentials
