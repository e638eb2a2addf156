# The Cython face of the fs_potential contract (csrc/fs_potential.h), and the
# declarations of csrc/fs_compose.h used by _potential.pyx.
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


# csrc/fs_compose.h: the weighted sum of potentials, the trusted drive and the
# recording wrapper (WeightedSum, ClampedSum, TrustedDrive and
# RecordingPotential in _potential.pyx).
cdef extern from "fs_compose.h" nogil:
    ctypedef struct fs_weighted_sum:
        int dim
        int n_terms
        const fs_potential *terms
        const double *weights
        fs_pool pool
    int fs_weighted_sum_init(fs_weighted_sum *st, int dim, int n_terms,
                             const fs_potential *terms, const double *weights)
    void fs_weighted_sum_free(fs_weighted_sum *st)
    int fs_weighted_sum_eval(void *state, const double *q, double *value, double *grad)

    ctypedef struct fs_clamped_sum:
        const fs_weighted_sum *sum
        const double *centre
        double base_min
        const double *radius
    int fs_clamped_sum_eval(void *state, const double *q, double *value, double *grad)

    ctypedef struct fs_trusted:
        fs_potential surrogate
        fs_potential exact
        const double *centre
        const double *whiten
        const double *radius
        long n_exact
        long n_surrogate
    double fs_trusted_distance2(const fs_trusted *st, const double *q)
    int fs_trusted_eval(void *state, const double *q, double *value, double *grad)

    ctypedef struct fs_recorder:
        fs_potential inner
        long capacity
        long count
        long seen
        long every
        int active
        int decimate
        int need_value
        double *q_buf
        double *g_buf
        double *u_buf
        double *value_grad
    int fs_recorder_eval(void *state, const double *q, double *value, double *grad)


cdef class WeightedSum(Potential):
    # st.weights points into _weights (read at every evaluation): C code that
    # holds this object may write new weights there between evaluations.
    cdef fs_weighted_sum st
    cdef bint _ready
    cdef cnp.ndarray _terms_mem
    cdef cnp.ndarray _weights
    cdef readonly tuple potentials


cdef class ClampedSum(WeightedSum):
    # gst.radius points into _radius (read at every evaluation): C code that
    # holds this object may grow the radius between evaluations.
    cdef fs_clamped_sum gst
    cdef cnp.ndarray _radius
    cdef readonly cnp.ndarray centre


cdef class TrustedDrive(Potential):
    # st.radius points into _radius (read at every evaluation)
    cdef fs_trusted st
    cdef cnp.ndarray _radius
    cdef readonly cnp.ndarray centre
    cdef readonly cnp.ndarray whiten
    cdef readonly Potential surrogate
    cdef readonly Potential exact
