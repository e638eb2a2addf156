# Declarations of csrc/fs_metric.h, csrc/fs_metrics.h and csrc/fs_rmhmc.h.
from fastsurrogate.core._common cimport fs_potential, fs_rng, fs_blas
from fastsurrogate.core._hmc cimport fs_hmc_info, fs_hmc_trace, fs_dual_avg

cdef extern from "fs_metric.h" nogil:
    ctypedef int (*fs_metric_eval_fn)(void *state, const double *q, double *G) noexcept nogil
    ctypedef int (*fs_metric_contract_fn)(void *state, const double *q, const double *Ginv,
                                          const double *u, double *tr,
                                          double *quad) noexcept nogil
    ctypedef int (*fs_metric_matvec_fn)(void *state, const double *q, const double *v,
                                        double *out) noexcept nogil
    ctypedef int (*fs_metric_matvec_exact_fn)(void *state, const double *q) noexcept nogil
    ctypedef struct fs_metric:
        void *state
        fs_metric_eval_fn eval
        fs_metric_contract_fn contract
        int dim
        fs_metric_matvec_fn matvec
        fs_metric_matvec_exact_fn matvec_exact

cdef extern from "fs_metrics.h" nogil:
    ctypedef struct fs_glm_metric:
        pass
    ctypedef struct fs_network_metric:
        int fast
    int fs_glm_metric_eval(void *state, const double *q, double *G)
    int fs_glm_metric_contract(void *state, const double *q, const double *Ginv,
                               const double *u, double *tr, double *quad)
    int fs_glm_metric_matvec(void *state, const double *q, const double *v, double *out)
    int fs_glm_weight_deriv(int family, double sigma, double t, double *w, double *dw)
    int fs_network_metric_eval(void *state, const double *q, double *G)
    int fs_network_metric_contract(void *state, const double *q, const double *Ginv,
                                   const double *u, double *tr, double *quad)
    void fs_network_metric_free(fs_network_metric *s)
    int fs_network_metric_matvec(void *state, const double *q, const double *v, double *out)
    int fs_network_metric_matvec_exact(void *state, const double *q)
    void fs_glm_metric_free(fs_glm_metric *s)
    void fs_softabs(double l, double alpha, double *f, double *fp)

cdef extern from "fs_rmhmc.h" nogil:
    enum:
        FS_RMHMC_NOT_CONVERGED
    ctypedef struct fs_rmhmc_config:
        int dim
        double step_size
        int n_steps
        int random_n_steps
        double max_energy_error
        int max_fixed_point
        double fixed_point_tol
        int overlap
    ctypedef struct fs_rmhmc_point:
        double *q
        double *grad
        double *L
        double *Ginv
        double *tr
        double logdet
        double u_drive
        double u_judge
        double *Lj
        double logdet_judge
    ctypedef struct fs_rmhmc_info:
        fs_hmc_info hmc
        int not_converged
        int fixed_point_iterations
    size_t fs_rmhmc_workspace_size(int dim)
    int fs_rmhmc_point_init(const fs_rmhmc_config *cfg, const fs_potential *drive,
                            const fs_metric *dmetric, const fs_potential *judge,
                            const fs_metric *jmetric, fs_rmhmc_point *cur, double *work)
    int fs_rmhmc_leapfrog(const fs_rmhmc_config *cfg, double eps, int n_steps,
                          const fs_potential *drive, const fs_metric *metric,
                          fs_rmhmc_point *pt, double *p, double *work, int *fp_iter)
    int fs_rmhmc_transition(const fs_rmhmc_config *cfg, const fs_potential *drive,
                            const fs_metric *dmetric, const fs_potential *judge,
                            const fs_metric *jmetric, fs_rng *rng, fs_rmhmc_point *cur,
                            double *work, fs_rmhmc_info *info)
    int fs_rmhmc_run(const fs_rmhmc_config *cfg, const fs_potential *drive,
                     const fs_metric *dmetric, const fs_potential *judge,
                     const fs_metric *jmetric, fs_rng *rng, fs_rmhmc_point *cur,
                     fs_dual_avg *adapt, long n_iter, const fs_hmc_trace *trace,
                     double *work, const int *stop, long *n_done,
                     double *step_size_out, long *n_not_converged)
    int fs_rmhmc_find_step_size(const fs_rmhmc_config *cfg, const fs_potential *drive,
                                const fs_metric *dmetric, const fs_potential *judge,
                                const fs_metric *jmetric, fs_rng *rng,
                                const fs_rmhmc_point *cur, double *work, double *step_size)
    int fs_rmhmc_cholesky(double *A, int dim, double *logdet)


cdef class Metric:
    # The C metric; subclasses fill met.state/eval/contract.
    cdef fs_metric met
    cdef object _keep
    cdef public object _error
    cdef int check_status(self, int status) except -1
