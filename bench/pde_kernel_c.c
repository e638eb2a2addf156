/* Standalone timing of csrc/fs_pde.c on the arrays bench/pde_kernel_c.py
 * writes (no Python in the loop): best of `rounds` single calls of U,
 * U + grad and the banded Cholesky alone.  Built and run by that script. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "fs_pde.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void *rd(const char *dir, const char *name, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    void *b = malloc(bytes);
    if (!f || !b || fread(b, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: dir n_el d nf p n_obs nnz noise_var prior_var\n");
        return 2;
    }
    const char *dir = argv[1];
    int n_el = atoi(argv[2]), d = atoi(argv[3]), nf = atoi(argv[4]), p = atoi(argv[5]);
    int no = atoi(argv[6]), nnz = atoi(argv[7]);
    double nv = atof(argv[8]), pv = atof(argv[9]);
    int *ef = rd(dir, "el_free", sizeof(int) * 4 * n_el), *op = rd(dir, "optr", sizeof(int) * (no + 1));
    int *oi = rd(dir, "oidx", sizeof(int) * nnz);
    double *eg = rd(dir, "el_g", 8 * 4 * n_el), *kr = rd(dir, "kref", 8 * 16);
    double *ph = rd(dir, "phi", 8 * (size_t)n_el * d), *ov = rd(dir, "oval", 8 * nnz);
    double *oc = rd(dir, "oc", 8 * no), *y = rd(dir, "y", 8 * no), *th = rd(dir, "theta", 8 * d);
    fs_pde m;
    if (fs_pde_init(&m, n_el, d, nf, p, no, ef, eg, kr, ph, op, oi, ov, oc, y, nv, pv) != FS_OK)
        return 1;
    const size_t ld = (size_t)p + FS_PDE_NB;
    double *g = malloc(8 * d), *ab = calloc(ld * nf, 8), *B = malloc(8 * ld * nf), U = 0.0;
    /* a diagonally dominant band of the same shape for the Cholesky alone */
    srand(1);
    for (int j = 0; j < nf; ++j)
        for (int i = 0; i <= p && j + i < nf; ++i)
            ab[j * ld + i] = i == 0 ? 2.0 * p + 2 : (double)rand() / RAND_MAX - 0.5;
    double bu = 1e9, bg = 1e9, bc = 1e9;
    for (int r = 0; r < 1000; ++r) {
        double t0 = now();
        fs_pde_eval(&m, th, &U, NULL);
        double t = now() - t0;
        if (t < bu) bu = t;
        t0 = now();
        fs_pde_eval(&m, th, &U, g);
        t = now() - t0;
        if (t < bg) bg = t;
        memcpy(B, ab, 8 * ld * nf);
        t0 = now();
        fs_band_cholesky(nf, p, B);
        t = now() - t0;
        if (t < bc) bc = t;
    }
    printf("U = %.15g; best of 1000 calls: U %.1f us | U + grad %.1f us | ratio %.2f | "
           "banded Cholesky alone %.1f us\n", U, bu * 1e6, bg * 1e6, bg / bu, bc * 1e6);
    fs_pde_free(&m);
    return 0;
}
