"""Moved to the installed package: ``fastsurrogate reproduce vhmc-fig2`` (the code is in
fastsurrogate/reproduce/).  This caller keeps the old command working:

    python bench/paper_vhmc_fig2.py [--quick] [--out DIR] [table options]

``fastsurrogate reproduce vhmc-fig2 --help`` lists the table's options.
"""
import sys

from fastsurrogate.reproduce import main

if __name__ == "__main__":
    sys.exit(main(["vhmc-fig2", *sys.argv[1:]]))
