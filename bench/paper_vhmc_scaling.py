"""Moved to the installed package: ``fastsurrogate reproduce vhmc-cost`` (the code is in
fastsurrogate/reproduce/).  This caller keeps the old command working:

    python bench/paper_vhmc_scaling.py [--quick] [--out DIR] [table options]

``fastsurrogate reproduce vhmc-cost --help`` lists the table's options.
"""
import sys

from fastsurrogate.reproduce import main

if __name__ == "__main__":
    sys.exit(main(["vhmc-cost", *sys.argv[1:]]))
