/* fs_mlp.h: gradient networks (NNgHMC) -- a one-hidden-layer perceptron that
 * predicts grad U directly, trained by backpropagation.
 *
 * Li, Holbrook, Shahbaba & Baldi (2019), "Neural network gradient Hamiltonian
 * Monte Carlo", Computational Statistics 34 (Algorithm 1 and Remark 1):
 *
 *     g(q) = out_scale * (W2 act(W1 x + b1) + b2) + out_shift,
 *     x    = (q - in_shift) / in_scale                      (elementwise,
 *                                   computed as (q - in_shift) * (1 / in_scale))
 *
 * act in {softplus, tanh, relu}; n_in inputs, n_out outputs.  The network
 * works in standardised coordinates (x in, raw = W2 act(W1 x + b1) + b2 out),
 * and the affine maps on both sides make g the prediction of grad U in the
 * original coordinates.
 *
 * Blocks (Remark 1 of the paper).  The outputs are split into n_blocks
 * contiguous blocks of block_out[b] outputs; block b has its own hidden layer
 * of block_hidden[b] units that sees all n_in inputs and feeds only the
 * outputs of block b.  W2 is therefore block diagonal.  n_blocks = 1 is the
 * plain network.  With H = sum_b block_hidden[b] (hidden units of all blocks,
 * block 0 first), n_out = sum_b block_out[b], and offsets
 * c_b = sum_{a<b} block_hidden[a], o_b = sum_{a<b} block_out[a]:
 *
 * Parameter packing (one flat vector theta, n_params doubles):
 *
 *     W1    H x n_in, row-major: row c_b + i holds the input weights of
 *           hidden unit i of block b                      [0, H n_in)
 *     b1    H hidden biases, same order                   [H n_in, H n_in + H)
 *     W2_0, W2_1, ..., W2_{B-1}
 *           block b is block_out[b] x block_hidden[b], row-major: entry (k, i)
 *           is the weight from hidden unit c_b + i to output o_b + k
 *     b2    n_out output biases
 *
 *     n_params = H n_in + H + sum_b block_out[b] block_hidden[b] + n_out.
 *
 * A block network's theta is therefore not the concatenation of its blocks'
 * own theta vectors: the W1 rows (and b1) of all blocks come first.
 *
 * Memory: fs_mlp_init copies everything it is given (block sizes, parameters,
 * standardisation), so the caller's arrays may be freed afterwards.  Besides
 * the packed parameters it keeps padded, 64-byte aligned copies of W1, b1 and
 * W2 for the single-point kernel; fs_mlp_set_params refreshes all of them.
 * The BLAS table is borrowed and must outlive the network.
 *
 * Threads: fs_mlp_forward and fs_mlp_potential_eval may run in several
 * threads at once (scratch from the network's fs_pool when work is NULL);
 * fs_mlp_set_params must not run concurrently with anything else on the
 * same network.  The batched functions take caller-owned workspace.
 *
 * Determinism: the single-point kernel has a fixed summation order; the
 * batched functions cut the N points into row blocks of net->rows and sum
 * the block contributions in order, so results do not depend on the caller's
 * threads (they do depend on the BLAS behind the fs_blas table, and on its
 * own thread count: OpenBLAS rounds differently with 1 and 2 threads).
 *
 * Plain C99, no Python.h.  BLAS only through the fs_blas table.
 */
#ifndef FS_MLP_H
#define FS_MLP_H

#include <stddef.h>
#include "fs_common.h"
#include "fs_potential.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    FS_MLP_SOFTPLUS = 0,   /* act(t) = log(1 + e^t)                        */
    FS_MLP_TANH = 1,       /* act(t) = tanh(t)                             */
    FS_MLP_RELU = 2        /* act(t) = max(t, 0), act'(0) taken as 0       */
};

/* Points per row block of the batched functions (the default of net->rows).
 * Measured (n_in = 50, H = 100, 4000 points, one BLAS thread): 64 to 1024
 * rows within the noise of each other; much smaller blocks starve dgemm. */
#define FS_MLP_ROWS 256

typedef struct fs_mlp {
    int n_in;                /* inputs                                        */
    int n_out;               /* outputs (sum of block_out)                    */
    int n_blocks;            /* B >= 1                                        */
    int n_hidden;            /* H, hidden units of all blocks                 */
    int activation;          /* FS_MLP_*                                      */
    size_t n_params;         /* length of theta                               */
    const fs_blas *blas;     /* borrowed                                      */
    const int *block_hidden; /* B (owned copy)                                */
    const int *block_out;    /* B (owned copy)                                */
    const double *theta;     /* n_params, the packed parameters (owned copy)  */
    const double *in_shift;  /* n_in (owned; zeros when none was given)       */
    const double *in_inv_scale; /* n_in, 1 / in_scale (owned; ones when none) */
    const double *out_shift; /* n_out (owned; zeros when none)                */
    const double *out_scale; /* n_out (owned; ones when none)                 */
    fs_pool pool;            /* scratch of fs_mlp_forward with work == NULL   */
    /* Private, filled by fs_mlp_init / fs_mlp_set_params: */
    int rows;                /* points per row block of the batched functions:
                                FS_MLP_ROWS after init; a caller may change it
                                (>= 1) before sizing the batched workspace   */
    int ld_in;               /* n_in rounded up to a multiple of 4            */
    int n_hidden_pad;        /* sum of block_hidden rounded up to 4 each      */
    int *hid_off;            /* B + 1 offsets c_b into theta's hidden order   */
    int *hid_pad_off;        /* B + 1 offsets into the padded hidden vector   */
    int *out_off;            /* B + 1 offsets o_b                             */
    double *W1p;             /* n_hidden_pad x ld_in, zero padding            */
    double *b1p;             /* n_hidden_pad                                  */
    double *W2p;             /* block b: block_out[b] x round4(block_hidden[b]) */
    size_t *w2p_off;         /* B offsets into W2p                            */
    void *own;               /* the allocation behind every owned array       */
} fs_mlp;

/* Length of theta for this shape (0 when a size is < 1 or would overflow). */
size_t fs_mlp_n_params(int n_in, int n_blocks, const int *block_hidden,
                       const int *block_out);

/* Fill `net`.  block_hidden and block_out hold n_blocks positive sizes;
 * theta (n_params doubles) may be NULL for all-zero parameters; in_shift,
 * in_scale (n_in) and out_shift, out_scale (n_out) may be NULL, meaning
 * zeros and ones.  Returns FS_EINVAL for a size < 1, an unknown activation,
 * a NULL blas table (or one without dgemm), a scale that is not positive,
 * sizes beyond int range; FS_ENOMEM when an allocation fails (net is then
 * left freed).  Does not check that the parameters are finite. */
int fs_mlp_init(fs_mlp *net, const fs_blas *blas, int n_in, int n_blocks,
                const int *block_hidden, const int *block_out, int activation,
                const double *theta, const double *in_shift,
                const double *in_scale, const double *out_shift,
                const double *out_scale);

/* Release everything fs_mlp_init allocated.  Safe to call twice, and after a
 * failed fs_mlp_init (as long as init was called on the struct). */
void fs_mlp_free(fs_mlp *net);

/* Copy theta (n_params doubles) into the network, and refresh the padded
 * copies of the single-point kernel.  Not thread-safe. */
int fs_mlp_set_params(fs_mlp *net, const double *theta);

/* Doubles of workspace of fs_mlp_forward (O(n_in + H + n_out)). */
size_t fs_mlp_workspace_size(const fs_mlp *net);

/* g = the network's prediction of grad U at one point q (n_in doubles in,
 * n_out out): one pass over the padded W1 (four rows at a time sharing the
 * loads of x), the activations four lanes at a time, then for each block
 * the rows of W2_b against that block's activations.  work: at least
 * fs_mlp_workspace_size doubles, or NULL to borrow a slot of the pool. */
int fs_mlp_forward(const fs_mlp *net, const double *q, double *FS_RESTRICT g,
                   double *FS_RESTRICT work);

/* The fs_potential_fn of a gradient network (state = fs_mlp *), for
 * n_in == n_out (FS_EINVAL otherwise).  grad (when not NULL) receives the
 * predicted grad U.  The network has no value: when value is not NULL it is
 * set to NaN and the function returns FS_EUNDEFINED (after filling grad).
 * Thread-safe. */
int fs_mlp_potential_eval(void *state, const double *q, double *value,
                          double *grad);

/* Doubles of workspace of the batched functions below for n points:
 * min(n, FS_MLP_ROWS) (2 H + n_out + n_in). */
size_t fs_mlp_batch_workspace_size(const fs_mlp *net, size_t n);

/* The predictions g(q_p) for the n rows of Q (n x n_in, row-major) into G
 * (n x n_out, row-major), with the network's own parameters, by dgemm over
 * row blocks.  Agrees with fs_mlp_forward up to rounding (the summation
 * order differs).  work: fs_mlp_batch_workspace_size(net, n) doubles. */
int fs_mlp_forward_batch(const fs_mlp *net, size_t n, const double *Q,
                         double *FS_RESTRICT G, double *FS_RESTRICT work);

/* The mean squared error of the standardised outputs and its gradient with
 * respect to the packed parameters `theta` (which need not be the network's
 * own; the network supplies the shape, activation and standardisation):
 *
 *   loss = 1 / (2 n) sum_p || raw_theta(x_p) - t_p ||^2
 *          + weight_decay / 2 (||W1||^2 + sum_b ||W2_b||^2)     (biases free)
 *   x_p = (X_p - in_shift) / in_scale,  t_p = (Y_p - out_shift) / out_scale
 *
 * when `standardise` is nonzero (X: inputs q, Y: grad U, both in the
 * original coordinates), or x_p = X_p, t_p = Y_p when it is zero (the data
 * are already standardised; training loops standardise once and pass 0).
 * X is n x n_in and Y n x n_out, row-major.  grad (n_params) may be NULL for
 * the loss alone (the backward pass is skipped).
 *
 * Per row block (column-major views, A = act(Z), A' = act'(Z)):
 *   Z = W1 X^T + b1,  R = W2 A + b2 - T          (dgemm, one per block b)
 *   gW2_b += A_b R_b^T,  D_b = (W2_b^T R_b) .* A'_b,
 *   gW1 += D X,  gb1 += D 1,  gb2 += R 1,
 * then the sums are scaled by 1/n and the weight decay terms added.
 * n >= 1; work: fs_mlp_batch_workspace_size(net, n) doubles. */
int fs_mlp_loss_grad(const fs_mlp *net, const double *theta, size_t n,
                     const double *X, const double *Y, double weight_decay,
                     int standardise, double *FS_RESTRICT loss,
                     double *FS_RESTRICT grad, double *FS_RESTRICT work);

/* Elementwise activation, as the kernels compute it: a[i] = act(t[i]) and
 * da[i] = act'(t[i]) (either output may be NULL).  Exposed for tests. */
int fs_mlp_activation(int activation, size_t n, const double *t,
                      double *FS_RESTRICT a, double *FS_RESTRICT da);

#ifdef __cplusplus
}
#endif
#endif /* FS_MLP_H */
