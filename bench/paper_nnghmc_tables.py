"""Moved to the installed package: ``fastsurrogate reproduce nnghmc-tables`` (the code is in
fastsurrogate/reproduce/).  This caller keeps the old command working:

    python bench/paper_nnghmc_tables.py [--quick] [--out DIR] [table options]

``fastsurrogate reproduce nnghmc-tables --help`` lists the table's options.
"""
import sys

from fastsurrogate.reproduce import main

if __name__ == "__main__":
    sys.exit(main(["nnghmc-tables", *sys.argv[1:]]))
