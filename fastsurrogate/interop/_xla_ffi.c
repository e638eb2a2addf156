/* _xla_ffi.c: an XLA FFI handler that evaluates a fastsurrogate potential.
 *
 * Compiled on first use by fastsurrogate/interop/_xla_ffi.py against the XLA
 * FFI C API header that jaxlib ships (jax.ffi.include_dir()), so neither the
 * wheel nor its build needs jax.  Registered as the CPU custom-call target
 * "fastsurrogate_potential_v1" and called through jax.ffi.ffi_call by
 * fastsurrogate.interop.to_jax.  C11 (the header repeats typedefs, which C99
 * forbids; the code itself is C99) + POSIX threads, no Python.h.
 *
 * The call, as XLA sees it:
 *   operand  q    f64[..., dim]     one or more positions (leading axes: vmap)
 *   result   u    f64[...]          U(q) for every row
 *   result   g    f64[..., dim]     dU/dq for every row (optional: with one
 *                                   result only the value is computed)
 *   attribute potential  u64        address of the fs_potential to evaluate
 *   attribute serial     s32        1: hold a process-wide lock around each
 *                                   evaluation (the potential is not thread-safe)
 *
 * The address is only meaningful in the process that made the call; the
 * Python side keeps the Potential alive as long as any traced function can
 * run it.  Statuses map as Potential.value_and_grad's callers in the JAX
 * bridge expect: FS_OK -> the values; FS_ENOMEM -> RESOURCE_EXHAUSTED;
 * FS_ECALLBACK (a Python callback raised) -> INTERNAL; any other failure
 * (non-finite value, singular matrix, ...) -> U = +inf and a NaN gradient,
 * which NumPyro and BlackJAX treat as a divergence.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "xla/ffi/api/c_api.h"
#include "fs_common.h"
#include "fs_potential.h"

#if defined(__GNUC__) || defined(__clang__)
#  define FS_XLA_EXPORT __attribute__((visibility("default")))
#else
#  define FS_XLA_EXPORT
#endif

/* One lock for every potential not marked thread-safe: XLA:CPU may run two
 * independent custom calls of one program at once, and several Python
 * threads may run compiled functions at once. */
static pthread_mutex_t fs_xla_serial_lock = PTHREAD_MUTEX_INITIALIZER;

static XLA_FFI_Error *fs_xla_error(const XLA_FFI_CallFrame *frame,
                                   XLA_FFI_Error_Code code, const char *msg)
{
    XLA_FFI_Error_Create_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    args.extension_start = NULL;
    args.message = msg;
    args.errc = code;
    return frame->api->XLA_FFI_Error_Create(&args);
}

/* The metadata query XLA makes when the target is registered: which FFI
 * API version this handler was compiled against, and no special traits. */
static XLA_FFI_Error *fs_xla_fill_metadata(const XLA_FFI_CallFrame *frame,
                                           XLA_FFI_Metadata_Extension *ext)
{
    XLA_FFI_Metadata *md = ext->metadata;
    if (md == NULL || md->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
        return fs_xla_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "fastsurrogate: XLA FFI metadata struct is too small");
    md->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
    md->api_version.extension_start = NULL;
    md->api_version.major_version = XLA_FFI_API_MAJOR;
    md->api_version.minor_version = XLA_FFI_API_MINOR;
    md->traits = 0;
    /* a stateless handler: no state type (newer metadata structs have it) */
    if (md->struct_size >= offsetof(XLA_FFI_Metadata, state_type_id) + sizeof md->state_type_id)
        md->state_type_id.type_id = 0;
    return NULL;
}

/* The scalar attribute `name` of the call, or NULL when absent. */
static const XLA_FFI_Scalar *fs_xla_scalar_attr(const XLA_FFI_CallFrame *frame,
                                                const char *name)
{
    size_t len = strlen(name);
    int64_t i;
    for (i = 0; i < frame->attrs.size; i++) {
        const XLA_FFI_ByteSpan *nm = frame->attrs.names[i];
        if (nm->len == len && memcmp(nm->ptr, name, len) == 0) {
            if (frame->attrs.types[i] != XLA_FFI_AttrType_SCALAR)
                return NULL;
            return (const XLA_FFI_Scalar *)frame->attrs.attrs[i];
        }
    }
    return NULL;
}

/* Rows in a buffer whose last axis has length `dim` (-1: wrong shape). */
static int64_t fs_xla_rows(const XLA_FFI_Buffer *b, int64_t dim, int vector)
{
    int64_t n = 1, k, lead = vector ? b->rank - 1 : b->rank;
    if (b->dtype != XLA_FFI_DataType_F64 || lead < 0)
        return -1;
    if (vector && b->dims[b->rank - 1] != dim)
        return -1;
    for (k = 0; k < lead; k++)
        n *= b->dims[k];
    return n;
}

/* XLA FFI handler (execute stage): U(q) and, with two results, dU/dq for
 * every row of q, by the fs_potential named in the attributes.  This is the
 * potential of the sampler's target (RNS-HMC paper eq. 1: U = -log posterior);
 * the handler adds no mathematics, only the calling convention.  It checks
 * dtypes, ranks and the trailing dimension; it trusts the address. */
FS_XLA_EXPORT XLA_FFI_Error *fs_xla_potential(XLA_FFI_CallFrame *frame)
{
    const XLA_FFI_Scalar *a_pot, *a_serial;
    const fs_potential *pot;
    const XLA_FFI_Buffer *qb;
    const XLA_FFI_Buffer *ub, *gb = NULL;
    const double *q;
    double *u, *g;
    int64_t n, i, dim;
    int serial, status = FS_OK;
    char msg[160];

    if (frame->extension_start != NULL &&
        frame->extension_start->type == XLA_FFI_Extension_Metadata)
        return fs_xla_fill_metadata(frame,
                                    (XLA_FFI_Metadata_Extension *)frame->extension_start);
    if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE)
        return fs_xla_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "fastsurrogate: XLA FFI call frame is older than the handler");
    if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE)
        return NULL;

    a_pot = fs_xla_scalar_attr(frame, "potential");
    a_serial = fs_xla_scalar_attr(frame, "serial");
    if (a_pot == NULL || a_pot->dtype != XLA_FFI_DataType_U64 ||
        a_serial == NULL || a_serial->dtype != XLA_FFI_DataType_S32)
        return fs_xla_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "fastsurrogate: the call needs attributes potential (uint64) "
                            "and serial (int32)");
    pot = (const fs_potential *)(uintptr_t)(*(const uint64_t *)a_pot->value);
    serial = *(const int32_t *)a_serial->value != 0;
    if (pot == NULL || pot->eval == NULL || pot->dim <= 0)
        return fs_xla_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "fastsurrogate: the potential is not initialised");
    dim = pot->dim;

    if (frame->args.size != 1 || frame->args.types[0] != XLA_FFI_ArgType_BUFFER ||
        frame->rets.size < 1 || frame->rets.size > 2 ||
        frame->rets.types[0] != XLA_FFI_RetType_BUFFER ||
        (frame->rets.size == 2 && frame->rets.types[1] != XLA_FFI_RetType_BUFFER))
        return fs_xla_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                            "fastsurrogate: expected one operand q and results (u) or (u, g)");
    qb = (const XLA_FFI_Buffer *)frame->args.args[0];
    ub = (const XLA_FFI_Buffer *)frame->rets.rets[0];
    if (frame->rets.size == 2)
        gb = (const XLA_FFI_Buffer *)frame->rets.rets[1];
    n = fs_xla_rows(qb, dim, 1);
    if (n < 0 || fs_xla_rows(ub, dim, 0) != n || (gb != NULL && fs_xla_rows(gb, dim, 1) != n)) {
        snprintf(msg, sizeof msg,
                 "fastsurrogate: shapes must be q f64[..., %lld], u f64[...], g f64[..., %lld]",
                 (long long)dim, (long long)dim);
        return fs_xla_error(frame, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
    }

    q = (const double *)qb->data;
    u = (double *)ub->data;
    g = gb != NULL ? (double *)gb->data : NULL;
    for (i = 0; i < n; i++) {
        double *gi = g != NULL ? g + i * dim : NULL;
        if (serial)
            pthread_mutex_lock(&fs_xla_serial_lock);
        status = pot->eval(pot->state, q + i * dim, u + i, gi);
        if (serial)
            pthread_mutex_unlock(&fs_xla_serial_lock);
        if (status == FS_ENOMEM)
            return fs_xla_error(frame, XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                                "fastsurrogate: the potential ran out of memory");
        if (status == FS_ECALLBACK)
            return fs_xla_error(frame, XLA_FFI_Error_Code_INTERNAL,
                                "fastsurrogate: a Python callback inside the potential "
                                "raised (potential._take_error() holds it)");
        if (status != FS_OK) {          /* a divergence, not an error */
            int64_t k;
            u[i] = HUGE_VAL;
            if (gi != NULL)
                for (k = 0; k < dim; k++)
                    gi[k] = NAN;
        }
    }
    return NULL;
}
