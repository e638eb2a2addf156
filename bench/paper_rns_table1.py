"""Moved to the installed package: ``fastsurrogate reproduce rns-table1`` (the code is in
fastsurrogate/reproduce/).  This caller keeps the old command working:

    python bench/paper_rns_table1.py [--quick] [--out DIR] [table options]

``fastsurrogate reproduce rns-table1 --help`` lists the table's options.
"""
import sys

from fastsurrogate.reproduce import main

if __name__ == "__main__":
    sys.exit(main(["rns-table1", *sys.argv[1:]]))
