/* fs_common.h: status codes, qualifiers, the random-number and BLAS tables
 * shared by every kernel family of fastsurrogate.
 *
 * Plain C99; no Python.h; no global state.  The random-number source and
 * the BLAS table are structs of function pointers that the caller fills (the
 * Cython layer fills them from NumPy's bit generator and from
 * scipy.linalg.cython_blas / cython_lapack).  The one thing here that owns
 * memory is the scratch pool (fs_pool): it allocates its buffers in
 * fs_pool_init and frees them in fs_pool_free.
 */
#ifndef FS_COMMON_H
#define FS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes: every public function returns one ------------------ */
enum {
    FS_OK = 0,
    FS_ENOMEM = -1,       /* an allocation failed                           */
    FS_ENONFINITE = -2,   /* a non-finite value was produced or supplied     */
    FS_ESINGULAR = -3,    /* a factorisation met a (numerically) singular matrix */
    FS_ECALLBACK = -4,    /* a user callback raised; the caller holds the error */
    FS_EINVAL = -5,       /* an argument is out of its documented range      */
    FS_ELAPACK = -6,      /* a LAPACK routine returned info != 0             */
    FS_EINTERRUPT = -7,   /* the caller asked the loop to stop               */
    FS_EUNDEFINED = -8    /* the potential does not define the quantity asked
                             for (the value of a gradient-only surrogate)   */
};

#if defined(__GNUC__) || defined(__clang__)
#  define FS_RESTRICT __restrict__
#  define FS_UNUSED __attribute__((unused))
#elif defined(_MSC_VER)
#  define FS_RESTRICT __restrict
#  define FS_UNUSED
#else
#  define FS_RESTRICT
#  define FS_UNUSED
#endif

/* Finite test that survives -ffast-math style flags (x - x is 0 only for finite x). */
static inline int fs_isfinite(double x) { return (x - x) == 0.0; }

/* ---- random numbers ---------------------------------------------------- */
/* A source of random numbers.  `state` is opaque (NumPy's bitgen_t* when
 * called from Python); `normal` draws a standard normal, `uniform` a double
 * in [0, 1).  One fs_rng must not be used by two threads at once. */
typedef struct fs_rng {
    void *state;
    double (*normal)(void *state);
    double (*uniform)(void *state);
} fs_rng;

/* ---- BLAS / LAPACK ----------------------------------------------------- */
/* Fortran-convention function pointers (all arguments by pointer, column
 * major), filled from scipy.linalg.cython_blas / cython_lapack when the
 * extension module loads.  C code calls BLAS only through this table. */
typedef double (*fs_ddot_fn)(const int *n, const double *x, const int *incx,
                             const double *y, const int *incy);
typedef void (*fs_daxpy_fn)(const int *n, const double *a, const double *x,
                            const int *incx, double *y, const int *incy);
typedef void (*fs_dgemv_fn)(const char *trans, const int *m, const int *n,
                            const double *alpha, const double *a, const int *lda,
                            const double *x, const int *incx, const double *beta,
                            double *y, const int *incy);
typedef void (*fs_dger_fn)(const int *m, const int *n, const double *alpha,
                           const double *x, const int *incx, const double *y,
                           const int *incy, double *a, const int *lda);
typedef void (*fs_dgemm_fn)(const char *transa, const char *transb, const int *m,
                            const int *n, const int *k, const double *alpha,
                            const double *a, const int *lda, const double *b,
                            const int *ldb, const double *beta, double *c,
                            const int *ldc);
typedef void (*fs_dsyrk_fn)(const char *uplo, const char *trans, const int *n,
                            const int *k, const double *alpha, const double *a,
                            const int *lda, const double *beta, double *c,
                            const int *ldc);
typedef void (*fs_dsymv_fn)(const char *uplo, const int *n, const double *alpha,
                            const double *a, const int *lda, const double *x,
                            const int *incx, const double *beta, double *y,
                            const int *incy);
typedef void (*fs_dtrsv_fn)(const char *uplo, const char *trans, const char *diag,
                            const int *n, const double *a, const int *lda,
                            double *x, const int *incx);
typedef void (*fs_dtrsm_fn)(const char *side, const char *uplo, const char *transa,
                            const char *diag, const int *m, const int *n,
                            const double *alpha, const double *a, const int *lda,
                            double *b, const int *ldb);
typedef void (*fs_dpotrf_fn)(const char *uplo, const int *n, double *a,
                             const int *lda, int *info);
typedef void (*fs_dpotrs_fn)(const char *uplo, const int *n, const int *nrhs,
                             const double *a, const int *lda, double *b,
                             const int *ldb, int *info);
typedef void (*fs_dpotri_fn)(const char *uplo, const int *n, double *a,
                             const int *lda, int *info);
typedef void (*fs_dsyev_fn)(const char *jobz, const char *uplo, const int *n,
                            double *a, const int *lda, double *w, double *work,
                            const int *lwork, int *info);
typedef void (*fs_dgelsd_fn)(const int *m, const int *n, const int *nrhs,
                             double *a, const int *lda, double *b, const int *ldb,
                             double *s, const double *rcond, int *rank,
                             double *work, const int *lwork, int *iwork, int *info);

typedef void (*fs_dtrmm_fn)(const char *side, const char *uplo, const char *transa,
                            const char *diag, const int *m, const int *n,
                            const double *alpha, const double *a, const int *lda,
                            double *b, const int *ldb);

typedef struct fs_blas {
    fs_ddot_fn ddot;
    fs_daxpy_fn daxpy;
    fs_dgemv_fn dgemv;
    fs_dger_fn dger;
    fs_dgemm_fn dgemm;
    fs_dsyrk_fn dsyrk;
    fs_dsymv_fn dsymv;
    fs_dtrsv_fn dtrsv;
    fs_dtrsm_fn dtrsm;
    fs_dpotrf_fn dpotrf;
    fs_dpotrs_fn dpotrs;
    fs_dsyev_fn dsyev;
    fs_dgelsd_fn dgelsd;
    fs_dpotri_fn dpotri;    /* appended: members above keep their offsets */
    fs_dtrmm_fn dtrmm;      /* appended */
} fs_blas;

/* ---- scratch pool ------------------------------------------------------ */
/* A potential's eval has no workspace argument (see fs_potential.h), yet may
 * be called from several threads at once.  A potential that needs scratch
 * keeps an fs_pool: FS_POOL_SLOTS buffers of `slot_doubles` doubles, each
 * taken and given back with an atomic flag.  When every slot is busy,
 * fs_pool_take allocates a fresh buffer, which fs_pool_give frees.
 * The slots are allocated once, at fs_pool_init, not per evaluation. */
#define FS_POOL_SLOTS 8
typedef struct fs_pool {
    size_t slot_doubles;
    double *mem;                 /* FS_POOL_SLOTS * slot_doubles */
    volatile int busy[FS_POOL_SLOTS];
} fs_pool;

int fs_pool_init(fs_pool *pool, size_t slot_doubles);
void fs_pool_free(fs_pool *pool);
/* Returns a buffer of slot_doubles doubles, or NULL when out of memory. */
double *fs_pool_take(fs_pool *pool);
void fs_pool_give(fs_pool *pool, double *buf);

/* A short, static, human-readable name for a status code. */
const char *fs_strerror(int status);

#ifdef __cplusplus
}
#endif
#endif /* FS_COMMON_H */
