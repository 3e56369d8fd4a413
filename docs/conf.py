"""Sphinx configuration of the rankjax documentation.

autodoc + napoleon for the docstrings, autosummary for one page per public name, MyST for
the Markdown pages with ``$...$`` / ``$$...$$`` mathematics, myst-nb for the notebooks,
executed at build through jupyter-cache (a cell that raises fails the build; unchanged
notebooks come from the cache). MathJax 3 is served from the site's own files
(``sphinx-mathjax-offline``): the pages typeset their formulas with no network.

The theme is ``sphinx-book-theme``, the one of JAX and optax: its readers know its layout
(search, the page's outline on the right, light and dark), and its main column is wide
enough for the examples' code. Build (the ``[docs]`` extra; on a 2-core CPU 2 min 47 s from
a clean checkout, the notebooks executed, and 20 s when jupyter-cache has them):
``python -m sphinx -W -b html docs docs/_build/html``."""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rankjax  # noqa: E402

project = "rankjax"
author = "the rankjax developers"
release = version = rankjax.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon",
              "sphinx.ext.mathjax", "sphinx-mathjax-offline", "sphinx.ext.viewcode", "myst_nb"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "generated/*.md"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
nb_execution_mode = "cache"
nb_execution_raise_on_error = True
nb_execution_timeout = 900
nb_execution_cache_path = str(pathlib.Path(__file__).parent / "_build" / ".jupyter_cache")
autosummary_generate = True
templates_path = ["_templates"]                 # a class page: its docstring and members, no tables
autosummary_imported_members = True
autodoc_default_options = {"members": True}
autodoc_typehints = "none"                      # the docstrings state shapes and types
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True                        # Attributes: as fields (no duplicate entries)
html_theme = "sphinx_book_theme"
html_title = f"rankjax {release}"
html_theme_options = {"show_toc_level": 2, "use_download_button": True,
                      "use_fullscreen_button": False, "navigation_with_keys": False}
html_show_sourcelink = True
html_static_path = ["_static"]
html_css_files = ["custom.css"]                 # wide code blocks
suppress_warnings = ["myst.header"]
nitpicky = True
# the names of other projects (no intersphinx: the build reads no network)
nitpick_ignore = [("py:class", n) for n in ("numpy.ndarray", "jax.Array", "jax.jaxlib._jax.Array",
                                             "jax.sharding.Mesh", "jax._src.mesh.Mesh",
                                             "enum.IntEnum")]

# the notebooks are the examples: copied beside the pages at each build (not committed twice)
import shutil  # noqa: E402

shutil.copytree(ROOT / "notebooks", pathlib.Path(__file__).parent / "examples",
                dirs_exist_ok=True, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))

# the reference: one autosummary table per public namespace, one page per public name
MODULES = {"rankjax": "The library", "rankjax.estimators": "scikit-learn estimators",
           "rankjax.solvers": "Writing a solver (the extension API)",
           "rankjax.io": "Data and model files",
           "rankjax.scale": "Several devices and data larger than memory",
           "rankjax.plot": "Plots (the [plot] extra)"}


def _reference() -> str:
    import importlib
    import inspect
    out = ["API reference", "=============", "",
           "Every public name, one page each, from its docstring (shapes, formula, paper, "
           "example).", ""]
    for name, title in MODULES.items():
        mod = importlib.import_module(name)
        head = f"``{name}`` — {title}"
        out += [head, "-" * len(head), "", f".. automodule:: {name}", "   :no-members:", "",
                f".. currentmodule:: {name}", "", ".. autosummary::", "   :toctree: generated",
                "   :nosignatures:", ""]
        names = [n for n in sorted(getattr(mod, "__all__", []))
                 if not inspect.ismodule(getattr(mod, n))]      # modules: their own section
        out += [f"   {n}" for n in names] + [""]
    return "\n".join(out)


(pathlib.Path(__file__).parent / "reference.rst").write_text(_reference(), encoding="utf-8")
# the pages of the reference are written afresh at each build: a page of a name that left
# the namespace would otherwise stay behind, outside every table of contents
shutil.rmtree(pathlib.Path(__file__).parent / "generated", ignore_errors=True)


def _skip(app, what, name, obj, skip, options):
    """scikit-learn's metadata-routing setters (``set_fit_request`` ...) are not ours."""
    return True if name.startswith("set_") and name.endswith("_request") else skip


def setup(app):
    app.connect("autodoc-skip-member", _skip)
