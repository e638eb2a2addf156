"""The record of one reproducible table (the lowest module of reproduce/:
the papers' modules list their tables with it, the command runs them)."""
import dataclasses

__all__ = ["Table"]


@dataclasses.dataclass(frozen=True)
class Table:
    """One reproducible table or figure.

    name : the command-line name (``rns-table1``); paper : which paper and
    which table or figure; module : the module holding ``options(ap)`` and
    ``reproduce(args)``; quick : option values for ``--quick``; needs : data
    files (in the data folder) without which it is skipped; paper_figures :
    the paper's own figures, in Markdown, shown beside ours; missing : rows of
    the paper that cannot be run here, and why; entry : prefix of the
    module's ``<entry>options`` / ``<entry>reproduce`` functions.
    """
    name: str
    paper: str
    title: str
    module: str
    quick: dict = dataclasses.field(default_factory=dict)
    needs: tuple = ()
    paper_figures: str = ""
    missing: str = ""
    entry: str = ""
    plots: tuple = ()
