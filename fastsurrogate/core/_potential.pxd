# The Cython face of the fs_potential contract (csrc/fs_potential.h).
#
# Other packages can `from fastsurrogate.core._potential cimport Potential` and call
# `pot.pot.eval(pot.pot.state, q, &value, grad)` with no Python in the loop
# (the GIL may be released when `pot.thread_safe` is true).

from fastsurrogate.core._common cimport fs_potential

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
