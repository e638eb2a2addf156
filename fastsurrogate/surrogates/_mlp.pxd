# Declarations of csrc/fs_mlp.h (gradient networks, NNgHMC).
# The struct fields declared here must match the C header.

from fastsurrogate.core._common cimport fs_blas, fs_pool
from fastsurrogate.core._potential cimport Potential

cdef extern from "fs_mlp.h" nogil:
    enum:
        FS_MLP_SOFTPLUS
        FS_MLP_TANH
        FS_MLP_RELU
        FS_MLP_ROWS

    ctypedef struct fs_mlp:
        int n_in
        int n_out
        int n_blocks
        int n_hidden
        int activation
        size_t n_params
        const fs_blas *blas
        const int *block_hidden
        const int *block_out
        const double *theta
        const double *in_shift
        const double *in_inv_scale
        const double *out_shift
        const double *out_scale
        fs_pool pool
        int rows

    size_t fs_mlp_n_params(int n_in, int n_blocks, const int *block_hidden,
                           const int *block_out)
    int fs_mlp_init(fs_mlp *net, const fs_blas *blas, int n_in, int n_blocks,
                    const int *block_hidden, const int *block_out, int activation,
                    const double *theta, const double *in_shift, const double *in_scale,
                    const double *out_shift, const double *out_scale)
    void fs_mlp_free(fs_mlp *net)
    int fs_mlp_set_params(fs_mlp *net, const double *theta)
    size_t fs_mlp_workspace_size(const fs_mlp *net)
    int fs_mlp_forward(const fs_mlp *net, const double *q, double *g, double *work)
    int fs_mlp_potential_eval(void *state, const double *q, double *value, double *grad)
    size_t fs_mlp_batch_workspace_size(const fs_mlp *net, size_t n)
    int fs_mlp_forward_batch(const fs_mlp *net, size_t n, const double *Q, double *G,
                             double *work)
    int fs_mlp_loss_grad(const fs_mlp *net, const double *theta, size_t n,
                         const double *X, const double *Y, double weight_decay,
                         int standardise, double *loss, double *grad, double *work)
    int fs_mlp_activation(int activation, size_t n, const double *t, double *a,
                          double *da)


cdef class GradientNetwork(Potential):
    # The C state (owns copies of the parameters and the standardisation).
    cdef fs_mlp net
    cdef str _activation
    # Standardisation as given (None when absent), kept for pickling and repr.
    cdef object _shift, _scale, _out_shift, _out_scale
    # Training summary set by the trainers (losses, iterations, time, ...).
    cdef public dict info

    cdef object _as_points(self, Q, str name, int width)
