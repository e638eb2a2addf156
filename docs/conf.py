"""Sphinx configuration of the fastsurrogate documentation.

Build (from the repository root, with ``pip install ".[docs]"``)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The tutorials in ``docs/tutorials/`` are MyST-NB text notebooks, executed
during the build (results cached in ``docs/_build/.jupyter_cache``, so an
unchanged notebook is not run again); the API pages under
``docs/api/generated/`` are written by autosummary on every build.
"""
import os

import fastsurrogate

# -- project -------------------------------------------------------------------
project = "fastsurrogate"
author = "the fastsurrogate developers"
copyright = "2026, the fastsurrogate developers"
release = fastsurrogate.__version__
version = release

# -- extensions ------------------------------------------------------------------
extensions = [
    "myst_nb",                  # Markdown pages and executed text notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",                 # the docstrings' Parameters / Returns sections
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "jupyter_execute", "examples", "**.ipynb_checkpoints",
                    "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# no intersphinx: CI has no network
nitpicky = False

# -- autodoc / autosummary / numpydoc -------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"          # the numpydoc sections carry the types
numpydoc_show_class_members = False  # the class template lists the methods
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()   # numpydoc's style lint is not a build error

# command lines ("--quick", "--out") and code-like text stay as typed: no
# en dashes or curly quotes
smartquotes = False

# -- MyST / MyST-NB --------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
nb_execution_mode = os.environ.get("FS_DOCS_EXECUTE", "cache")
nb_execution_timeout = 180           # seconds per cell
nb_execution_raise_on_error = True   # a failing cell fails the build
nb_execution_show_tb = True
nb_merge_streams = True
nb_execution_excludepatterns = []

# -- HTML --------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"fastsurrogate {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_static_path = ["_static"]
html_css_files = ["custom.css"]
# the tutorials and the reports are read one at a time, from their index
# pages; without the left sidebar their code and tables get its width
html_sidebars = {"tutorials/*": [], "papers/*": []}
html_show_sourcelink = False
