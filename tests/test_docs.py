"""The documentation site: it builds with every warning an error and every cross-reference
resolved (``nitpicky``), every public name has a page, its mathematics is LaTeX typeset by
a MathJax the site serves itself (no ASCII formula left outside code blocks), and the
measured tables of its pages are the README's blocks, written from the benchmarks' committed
JSON lines. The notebooks are not executed here (the documentation job executes them,
``docs/check_in_browser.py`` checks the pages in a browser)."""
import importlib
import json
import inspect
import pathlib
import re
import subprocess
import sys
from html.parser import HTMLParser

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

FORMULA = re.compile(r"\^[\w{(\-]|\|\||\bsqrt\(|\bargmin_|\bargmax_|\wᵀ|\w⁻")
"""ASCII mathematics: a superscript (``X^T``, ``C^{-1}``, ``m^2``; ``Xᵀ``, ``C⁻¹`` in
Unicode), a norm ``||w||``, a ``sqrt(`` or an ``argmin_``."""

sys.path.insert(0, str(ROOT / "benchmarks"))
from lib.registry import BLOCKS, PAGES  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_nb")
    pytest.importorskip("sphinx_book_theme")
    tmp = tmp_path_factory.mktemp("docs")
    out = tmp / "html"
    r = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-E", "-b", "html",
                        "-D", "nb_execution_mode=off", "-d", str(tmp / "doctrees"),
                        str(ROOT / "docs"), str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


class _Prose(HTMLParser):
    """The text of a page outside code blocks, scripts and typeset mathematics (inline
    code spans count: a formula in a code span is what the test is for)."""

    VOID = {"br", "img", "meta", "link", "input", "hr", "wbr", "col", "source"}

    def __init__(self):
        super().__init__()
        self.stack, self.skip, self.text = [], 0, []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = (tag in ("pre", "script", "style", "math") or "math" in classes
                or any(c.startswith("highlight") for c in classes))
        self.stack.append(skip)
        self.skip += skip

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.skip -= self.stack.pop()

    def handle_data(self, data):
        if not self.skip:
            self.text.append(data)


def prose(path):
    parser = _Prose()
    parser.feed(path.read_text(encoding="utf-8"))
    return "".join(parser.text)


def pages(site):
    skip = {"genindex.html", "search.html", "py-modindex.html"}
    return [p for p in site.rglob("*.html")
            if not {"_modules", "_static", "_sources"} & set(p.relative_to(site).parts)
            and p.name not in skip]


def test_every_public_name_has_a_page_and_the_guide_pages_exist(site):
    built = {p.stem for p in (site / "generated").glob("*.html")}
    for modname in ("rankjax", "rankjax.io", "rankjax.estimators", "rankjax.scale", "rankjax.plot",
                    "rankjax.solvers"):
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            if not inspect.ismodule(getattr(mod, name)):
                assert f"{modname}.{name}" in built, f"{modname}.{name} has no page"
    for page in ("math", "design", "guide", "reference", "which_solver", "from_lightgbm", "from_rax",
                 "jax_transformations", "writing_a_solver", "precision", "examples/quickstart",
                 "examples/at_scale"):
        assert (site / f"{page}.html").exists(), page


def test_no_ascii_formula_outside_code_blocks(site):
    """Every formula of the pages and the public docstrings is LaTeX (``$...$``,
    ``:math:``): the scan of the built text outside code blocks and typeset math finds no
    ``^T``, ``^{-1}``, ``||w||`` ..."""
    found = {}
    for page in pages(site):
        text = prose(page)
        hits = [text[max(0, m.start() - 30):m.end() + 20] for m in FORMULA.finditer(text)]
        if hits:
            found[str(page.relative_to(site))] = hits[:3]
    assert not found, found


def test_the_scan_finds_an_ascii_formula(tmp_path):
    """The scan above fails on what it is for: a formula in a code span or in prose, not in
    a code block or typeset math."""
    page = tmp_path / "p.html"
    page.write_text('<p>the system <code class="literal">X^T L X</code></p>'
                    '<pre>w = X.T @ X  # X^T X</pre><span class="math">\\(X^T\\)</span>')
    assert FORMULA.findall(prose(page)) == ["^T"]
    page.write_text("<p>costs O(m b^2) and ||w||</p>")
    assert FORMULA.findall(prose(page)) == ["^2", "||", "||"]


def test_mathematics_is_typeset_by_a_mathjax_the_site_serves(site):
    math = (site / "math.html").read_text(encoding="utf-8")
    sources = re.findall(r'<script[^>]+src="([^"]*mathjax[^"]*)"', math, flags=re.I)
    assert sources, "math.html loads no MathJax"
    for src in sources:
        assert not src.startswith(("http:", "https:", "//")), src
        assert (site / src.split("?")[0]).exists(), src
    assert math.count('class="math') >= 40          # its formulas are math nodes, not code
    fit = (site / "generated" / "rankjax.fit.html").read_text(encoding="utf-8")
    assert r"\operatorname{argmin}" in fit


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_measured_blocks_are_written_from_the_committed_lines(name):
    """Each measured table lives in one documentation page (``PAGES``) and is what its
    benchmark writes from the committed JSON lines, byte for byte: no figure typed by hand,
    and none in the README."""
    script, lines = BLOCKS[name]
    start, end = f"<!-- {name}: start -->", f"<!-- {name}: end -->"
    page = (ROOT / PAGES[name]).read_text(encoding="utf-8")
    assert start in page and end in page, name
    assert start not in README, name
    block = page.split(start, 1)[1].split(end, 1)[0]
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--lines",
                        str(ROOT / "benchmarks" / "lines" / lines)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert block.strip() == r.stdout.strip()


def test_every_measured_block_of_the_pages_is_registered():
    """A page's block markers name registered blocks, each in the page ``PAGES`` says."""
    for page in (ROOT / "docs").glob("*.md"):
        named = re.findall(r"<!-- ([\w-]+): start -->", page.read_text(encoding="utf-8"))
        for name in named:
            assert name in BLOCKS and (ROOT / PAGES[name]) == page, (page.name, name)


def _line_values():
    """Every number of the committed JSON lines (``benchmarks/lines``, the report's run)."""
    out = []

    def walk(v):
        if isinstance(v, dict):
            [walk(x) for x in v.values()]
        elif isinstance(v, list):
            [walk(x) for x in v]
        elif isinstance(v, float):
            out.append(v)
    files = [*(ROOT / "benchmarks" / "lines").glob("*.jsonl"),
             ROOT / "benchmarks" / "report" / "results.jsonl"]
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.startswith("{"):
                walk(json.loads(line))
    return np.asarray(out)


def test_every_figure_of_the_readme_and_docs_is_read_from_a_committed_line():
    """A measured figure (a number with decimals) in the prose of the README and the
    documentation is a value of a committed JSON line (to its stated digits), of a measured
    block written from them, or of the report (``benchmarks/REPORT.md``, written from its
    run's lines): none typed from a run nobody kept (issue 89). Typeset formulas and code
    are not prose; ``float32_tests.md`` prints the precision log of a test run (its table is
    that log's, its command beside it)."""
    block = re.compile(r"<!-- ([\w-]+): start -->(.*?)<!-- \1: end -->", re.S)
    number = re.compile(r"\b\d+\.\d+\b")
    pages = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md")
                                         if p.name != "float32_tests.md")]
    known = set(number.findall((ROOT / "benchmarks" / "REPORT.md").read_text(encoding="utf-8")))
    for page in pages:
        known |= {x for m in block.finditer(page.read_text(encoding="utf-8"))
                  for x in number.findall(m.group(2))}
    values = _line_values()
    typed = {}
    for page in pages:
        text = re.sub(r"```.*?```", "", block.sub("", page.read_text(encoding="utf-8")),
                      flags=re.S)
        for x in number.findall(re.sub(r"\$[^$]*\$", "", text)):
            half = 0.5 * 10.0 ** -len(x.split(".")[1])
            if x not in known and not np.any(np.abs(values - float(x)) <= half):
                typed.setdefault(page.name, []).append(x)
    assert not typed, typed
