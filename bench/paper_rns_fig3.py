"""Moved to the installed package: ``fastsurrogate reproduce rns-fig3`` (the code is in
fastsurrogate/reproduce/).  This caller keeps the old command working:

    python bench/paper_rns_fig3.py [--quick] [--out DIR] [table options]

``fastsurrogate reproduce rns-fig3 --help`` lists the table's options.
"""
import sys

from fastsurrogate.reproduce import main

if __name__ == "__main__":
    sys.exit(main(["rns-fig3", *sys.argv[1:]]))
