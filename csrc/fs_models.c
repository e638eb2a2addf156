#include "fs_models.h"

#include <math.h>

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

/* ---- special functions --------------------------------------------------- */

#define FS_PI 3.14159265358979323846264338328

/* lgamma for x > 0 without touching the global signgam where the C library
   offers a re-entrant variant. */
static double lgamma_pos(double x)
{
#if defined(__GLIBC__)
    int sign;
    return lgamma_r(x, &sign);
#else
    return lgamma(x);
#endif
}

/* S(z) = sum_k B_2k / (2k z^2k): psi(z) = log z - 1/(2z) - S(z), z >= 10
   (seven terms: truncation error below 5e-17 there). */
static double digamma_tail(double z)
{
    const double w = 1.0 / (z * z);
    return w * (1.0 / 12 - w * (1.0 / 120 - w * (1.0 / 252 - w * (1.0 / 240
           - w * (1.0 / 132 - w * (691.0 / 32760 - w * (1.0 / 12)))))));
}

/* Stirling correction lgamma(z) - [(z - 1/2) log z - z + log(2 pi)/2], z >= 10. */
static double stirling_corr(double z)
{
    const double w = 1.0 / (z * z);
    return (1.0 / 12 - w * (1.0 / 360 - w * (1.0 / 1260 - w * (1.0 / 1680
           - w * (1.0 / 1188 - w * (691.0 / 360360 - w * (1.0 / 156))))))) / z;
}

double fs_digamma(double x)
{
    double acc = 0.0;
    if (x != x) return x;
    if (x <= 0.0) {
        double f = floor(x), rem;
        if (x == f) return NAN;                       /* pole */
        /* psi(x) = psi(1 - x) - pi / tan(pi x); tan from the reduced argument */
        rem = x - f;                                  /* in (0, 1) */
        return fs_digamma(1.0 - x) - FS_PI / tan(FS_PI * rem);
    }
    if (x < 1e-8)                                     /* psi(x) = -1/x - gamma + O(x) */
        return -1.0 / x - 0.57721566490153286061 + 1.6449340668482264365 * x;
    while (x < 10.0) {                                /* psi(x) = psi(x + 1) - 1/x */
        acc += 1.0 / x;
        x += 1.0;
    }
    return log(x) - 0.5 / x - digamma_tail(x) - acc;
}

double fs_log_rising(double x, int64_t c)
{
    if (c <= 0) return 0.0;
    if (c <= 8) {
        double s = 0.0;
        int64_t k;
        for (k = 0; k < c; k++) s += log(x + (double)k);
        return s;
    }
    if (x >= 10.0) {
        const double dc = (double)c, xc = x + dc;
        return (x - 0.5) * log1p(dc / x) + dc * log(xc) - dc
               + (stirling_corr(xc) - stirling_corr(x));
    }
    return lgamma_pos(x + (double)c) - lgamma_pos(x);
}

double fs_digamma_diff(double x, int64_t c)
{
    if (c <= 0) return 0.0;
    if (c <= 8) {
        double s = 0.0;
        int64_t k;
        for (k = c - 1; k >= 0; k--) s += 1.0 / (x + (double)k);
        return s;
    }
    if (x >= 10.0) {
        const double dc = (double)c, xc = x + dc;
        return log1p(dc / x) + 0.5 * dc / (x * xc) - (digamma_tail(xc) - digamma_tail(x));
    }
    return fs_digamma(x + (double)c) - fs_digamma(x);
}

/* ---- beta-binomial ------------------------------------------------------- */

/* log(1 + exp(x)) and 1 / (1 + exp(-x)), stable for any x. */
static double softplus(double x)
{
    return (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x)));
}

static double sigmoid(double x)
{
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    {
        const double e = exp(x);
        return e / (1.0 + e);
    }
}

int fs_betabinom_eval(void *state, const double *q, double *value, double *grad)
{
    const fs_betabinom *bb = (const fs_betabinom *)state;
    const double m = sigmoid(q[0]), om = sigmoid(-q[0]);    /* m, 1 - m */
    const double K = exp(q[1]);
    const double a = K * m, b = K * om;
    double f = 0.0, fa = 0.0, fb = 0.0;
    int j;
    if (value == NULL && grad == NULL) return FS_OK;
    for (j = 0; j < bb->J; j++) {
        const int64_t y = bb->y[j], n = bb->n[j];
        if (value)
            f += fs_log_rising(a, y) + fs_log_rising(b, n - y) - fs_log_rising(K, n);
        if (grad) {
            const double pk = fs_digamma_diff(K, n);
            fa += fs_digamma_diff(a, y) - pk;
            fb += fs_digamma_diff(b, n - y) - pk;
        }
    }
    if (value) *value = -f - q[1] + 2.0 * softplus(q[1]);
    if (grad) {
        /* da/dq0 = a (1 - m) = K m (1 - m) = -db/dq0;  da/dq1 = a, db/dq1 = b */
        grad[0] = -(fa - fb) * a * om;
        grad[1] = -(fa * a + fb * b) - 1.0 + 2.0 * sigmoid(q[1]);
    }
    return FS_OK;
}
