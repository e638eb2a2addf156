# Declarations of csrc/fs_network.h (random-basis networks).
# The struct layout here must match the C header.

cimport numpy as cnp

from fastsurrogate.core._common cimport fs_pool
from fastsurrogate.core._potential cimport Potential

cdef extern from "fs_network.h" nogil:
    enum:
        FS_NETWORK_SOFTPLUS
        FS_NETWORK_SIGMOID
        FS_NETWORK_TANH
        FS_NETWORK_RBF
        FS_NETWORK_BLOCK

    ctypedef struct fs_network:
        int dim
        int n_hidden
        int activation
        const double *W
        const double *bias
        const double *width
        const double *v
        double out_bias
        const double *shift
        const double *inv_scale
        fs_pool pool

    size_t fs_network_workspace_size(int dim, int n_hidden)
    int fs_network_init(fs_network *net, int dim, int n_hidden, int activation,
                        const double *W, const double *bias, const double *width,
                        const double *v, double out_bias, const double *shift,
                        const double *inv_scale)
    void fs_network_free(fs_network *net)

    int fs_network_value(const fs_network *net, const double *q, double *value,
                         double *work)
    int fs_network_grad(const fs_network *net, const double *q, double *grad,
                        double *work)
    int fs_network_value_grad(const fs_network *net, const double *q, double *value,
                              double *grad, double *work)
    int fs_network_potential_eval(void *state, const double *q, double *value,
                                  double *grad)
    int fs_network_hessian_vector(const fs_network *net, const double *q, const double *v,
                                  double *out, double *work)
    int fs_network_hessian(const fs_network *net, const double *q, double *hess,
                           double *work)
    int fs_network_hessian_diag(const fs_network *net, const double *q, double *hdiag,
                                double *work)
    int fs_network_third_contractions(const fs_network *net, const double *q,
                                      const double *A, const double *u,
                                      double *out_tr, double *out_quad, double *work)
    int fs_network_third_diag(const fs_network *net, const double *q, const double *a,
                              double *out, double *work)
    int fs_network_features(const fs_network *net, size_t n, const double *Q,
                            double *H, double *work)
    int fs_network_grad_features(const fs_network *net, const double *q, double *A,
                                 double *work)
    int fs_network_grad_features_batch(const fs_network *net, size_t n,
                                       const double *Q, double *out, double *work)

    int fs_network_exp(size_t n, const double *x, double *out, int scalar)
    int fs_network_activation(int activation, int order, size_t n, const double *t,
                              double *out, int scalar)


cdef class RandomNetwork(Potential):
    # The C state; its pointers point into the arrays below.
    cdef fs_network net
    cdef cnp.ndarray _W, _bias, _width, _v, _shift, _scale, _inv_scale
    cdef str _activation
    # Training summary set by the trainers (train RMSE, points, ridge, ...).
    cdef public dict info

    cdef object _as_points(self, Q, str name)
    cdef object _as_vec(self, a, str name)


# The kernels above for other extensions (cimport these: the C functions are
# compiled into this module only).
cdef int network_features(const fs_network *net, size_t n, const double *Q, double *H,
                          double *work) noexcept nogil
cdef int network_grad_features(const fs_network *net, const double *q, double *A,
                               double *work) noexcept nogil
