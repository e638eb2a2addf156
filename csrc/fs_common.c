#include "fs_common.h"

const char *fs_strerror(int status)
{
    switch (status) {
    case FS_OK: return "success";
    case FS_ENOMEM: return "out of memory";
    case FS_ENONFINITE: return "non-finite value";
    case FS_ESINGULAR: return "singular matrix";
    case FS_ECALLBACK: return "a callback raised an error";
    case FS_EINVAL: return "invalid argument";
    case FS_ELAPACK: return "LAPACK error";
    case FS_EINTERRUPT: return "interrupted";
    case FS_EUNDEFINED: return "not defined by this potential (a gradient-only surrogate has no value)";
    default: return "unknown error";
    }
}

#include <stdlib.h>

int fs_pool_init(fs_pool *pool, size_t slot_doubles)
{
    int i;
    if (slot_doubles == 0) slot_doubles = 1;
    pool->slot_doubles = slot_doubles;
    pool->mem = (double *)malloc(sizeof(double) * slot_doubles * FS_POOL_SLOTS);
    for (i = 0; i < FS_POOL_SLOTS; i++) pool->busy[i] = 0;
    return pool->mem ? FS_OK : FS_ENOMEM;
}

void fs_pool_free(fs_pool *pool)
{
    free(pool->mem);
    pool->mem = NULL;
}

double *fs_pool_take(fs_pool *pool)
{
    int i;
    for (i = 0; i < FS_POOL_SLOTS; i++) {
        if (__atomic_exchange_n(&pool->busy[i], 1, __ATOMIC_ACQUIRE) == 0)
            return pool->mem + (size_t)i * pool->slot_doubles;
    }
    return (double *)malloc(sizeof(double) * pool->slot_doubles);
}

void fs_pool_give(fs_pool *pool, double *buf)
{
    ptrdiff_t off = buf - pool->mem;
    if (buf != NULL && off >= 0 && off < (ptrdiff_t)(pool->slot_doubles * FS_POOL_SLOTS)) {
        __atomic_store_n(&pool->busy[off / (ptrdiff_t)pool->slot_doubles], 0, __ATOMIC_RELEASE);
    } else {
        free(buf);
    }
}
