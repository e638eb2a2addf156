"""Moved to the installed package: ``fastsurrogate reproduce nnghmc-4.1`` (the code is in
fastsurrogate/reproduce/).  This caller keeps the old command working:

    python bench/paper_nnghmc_toy.py [--quick] [--out DIR] [table options]

``fastsurrogate reproduce nnghmc-4.1 --help`` lists the table's options.
"""
import sys

from fastsurrogate.reproduce import main

if __name__ == "__main__":
    sys.exit(main(["nnghmc-4.1", *sys.argv[1:]]))
