"""Standalone cost of the compiled PDE potential (csrc/fs_pde.c), no Python
in the timed loop: writes the model's arrays to a temporary folder, builds
bench/pde_kernel_c.c with gcc -O3 (the extension's flags) and runs it (best
of 1000 single calls: less sensitive to a shared machine's load than
medians of loops).

    PYTHONPATH=. python bench/pde_kernel_c.py [--mesh 30] [--modes 20]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchutil import machine_line  # noqa: E402

import fastsurrogate as fs  # noqa: E402
from fastsurrogate.models import pde as pde_mod  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mesh", type=int, default=30)
    ap.add_argument("--modes", type=int, default=20)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    m = fs.models.EllipticPDE(n_mesh=a.mesh, n_modes=a.modes)
    theta = m.theta_true + 0.1
    el_free = m._fmap[m.elements].astype(np.int32)
    arrays = dict(el_free=el_free, el_g=np.where(el_free >= 0, 0.0, m._g_full[m.elements]),
                  kref=pde_mod._K_REF, phi=m._Phi, optr=m._O_free.indptr.astype(np.int32),
                  oidx=m._O_free.indices.astype(np.int32), oval=m._O_free.data,
                  oc=m._obs_const, y=m.y, theta=theta)
    with tempfile.TemporaryDirectory() as tmp:
        for name, arr in arrays.items():
            np.ascontiguousarray(arr).tofile(os.path.join(tmp, name))
        exe = os.path.join(tmp, "pde_kernel_c")
        subprocess.run(["gcc", "-std=c99", "-O3", "-D_GNU_SOURCE", "-fno-math-errno",
                        "-I" + os.path.join(root, "csrc"),
                        os.path.join(root, "bench", "pde_kernel_c.c"),
                        os.path.join(root, "csrc", "fs_pde.c"),
                        os.path.join(root, "csrc", "fs_common.c"), "-lm", "-fopenmp",
                        "-o", exe], check=True)
        with open("/proc/loadavg") as f:
            print(machine_line(), "| load", " ".join(f.read().split()[:3]))
        out = subprocess.run([exe, tmp, str(m.elements.shape[0]), str(m.dim), str(m.free.size),
                              str(m.half_bandwidth), str(m.y.size), str(m._O_free.nnz),
                              repr(m.noise_sd ** 2), repr(m.prior_sd ** 2)],
                             check=True, capture_output=True, text=True).stdout
    print(f"mesh {a.mesh} x {a.mesh}, d = {a.modes}, {m.free.size} unknowns, half bandwidth "
          f"{m.half_bandwidth}: {out.strip()}")
    print(f"(through the Potential: U = {m.value(theta):.15g})")


if __name__ == "__main__":
    main()
