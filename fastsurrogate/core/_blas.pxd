from fastsurrogate.core._common cimport fs_blas

cdef const fs_blas *blas_table() noexcept nogil
