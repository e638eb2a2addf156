"""Moved to the installed package: ``fastsurrogate reproduce sg-rem`` (the code is in
fastsurrogate/reproduce/_sg_rem.py).  This caller keeps the old command working:

    OPENBLAS_NUM_THREADS=1 python bench/sg_baselines.py [--quick] [--out DIR] [table options]

``fastsurrogate reproduce sg-rem --help`` lists the table's options.
"""
import sys

from fastsurrogate.reproduce import main

if __name__ == "__main__":
    sys.exit(main(["sg-rem", *sys.argv[1:]]))
