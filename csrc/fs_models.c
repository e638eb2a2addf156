#include "fs_models.h"

int fs_gaussian_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_gaussian *g = (const fs_gaussian *)state;
    const int d = g->dim;
    double u = 0.0;
    int i, j;
    if (g->diagonal) {
        for (i = 0; i < d; i++) {
            const double r = q[i] - g->mean[i];
            const double pr = g->prec[i] * r;
            u += r * pr;
            if (grad) grad[i] = pr;
        }
    } else {
        for (i = 0; i < d; i++) {
            const double *row = g->prec + (size_t)i * d;
            double s = 0.0;
            for (j = 0; j < d; j++) s += row[j] * (q[j] - g->mean[j]);
            u += (q[i] - g->mean[i]) * s;
            if (grad) grad[i] = s;
        }
    }
    if (value) *value = 0.5 * u;
    return FS_OK;
}

int fs_banana_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_banana *b = (const fs_banana *)state;
    const double m = q[0] + q[1] * q[1];
    const double sy2 = b->sigma_y * b->sigma_y, sq2 = b->sigma_q * b->sigma_q;
    if (value)
        *value = (b->sum_y2 - 2.0 * m * b->sum_y + b->n * m * m) / (2.0 * sy2)
                 + (q[0] * q[0] + q[1] * q[1]) / (2.0 * sq2);
    if (grad) {
        const double dm = (b->n * m - b->sum_y) / sy2;   /* dU/dm */
        grad[0] = dm + q[0] / sq2;
        grad[1] = 2.0 * q[1] * dm + q[1] / sq2;
    }
    return FS_OK;
}
