# Declarations of csrc/fs_greville.h and csrc/fs_smw.h, and the trainer types.
# The struct layouts here must match the C headers.
#
# Other Cython code may `from fastsurrogate.surrogates._online cimport GrevilleTrainer`
# and call fs_greville_update(&trainer.state, h, y, trainer.work) directly
# (without the GIL), provided it holds no other reference that updates the
# same trainer at the same time.

from fastsurrogate.core._common cimport fs_blas

cdef extern from "fs_greville.h" nogil:
    ctypedef struct fs_greville:
        int s
        int ridge
        double lambda_ "lambda"
        double tol
        long n_seen
        int rank
        long n_new_direction
        long n_in_span
        long resync_every
        long since_resync
        const fs_blas *blas
        double *v
        double *Phi
        double *Theta
        double *mem

    int fs_greville_init(fs_greville *g, const fs_blas *blas, int s, double lambda_,
                         double tol)
    void fs_greville_free(fs_greville *g)
    void fs_greville_reset(fs_greville *g)
    size_t fs_greville_workspace_size(int s)
    size_t fs_greville_batch_workspace_size(const fs_greville *g, long n)
    int fs_greville_update(fs_greville *g, const double *h, double y, double *work)
    int fs_greville_update_many(fs_greville *g, const double *H, const double *y,
                                long n, double *work, long *n_done)
    int fs_greville_resync(fs_greville *g, const double *H, const double *y, long n,
                           double *work)
    int fs_greville_init_batch(fs_greville *g, const fs_blas *blas, int s,
                               double lambda_, double tol, const double *H,
                               const double *y, long n, double *work)
    int fs_greville_resync_due(const fs_greville *g)

cdef extern from "fs_smw.h" nogil:
    ctypedef struct fs_smw:
        int s
        int d
        double lambda_ "lambda"
        long n_seen
        const fs_blas *blas
        double *v
        double *C
        double *mem

    int fs_smw_init(fs_smw *st, const fs_blas *blas, int s, int d, double lambda_)
    void fs_smw_free(fs_smw *st)
    void fs_smw_reset(fs_smw *st)
    size_t fs_smw_workspace_size(int s, int d)
    size_t fs_smw_batch_workspace_size(int s)
    int fs_smw_update(fs_smw *st, const double *A, const double *g, double *work)
    int fs_smw_update_many(fs_smw *st, const double *As, const double *gs, long N,
                           double *work, long *n_done)
    int fs_smw_solve_batch(fs_smw *st, const double *As, const double *gs, long N,
                           double *work)


cdef class GrevilleTrainer:
    cdef fs_greville state
    cdef double *work          # fs_greville_workspace_size(s) doubles
    cdef object _lock          # serialises calls from Python threads


cdef class SMWTrainer:
    cdef fs_smw state
    cdef double *work          # fs_smw_workspace_size(s, d) doubles
    cdef object _lock
