"""The benchmark suite as one suite: every script named by its registry
(``benchmarks/lib/registry.py``), helpers shared through the public ``lib`` package, no
script importing another script or a private name, and every ``rankjax`` name a benchmark
imports present today (no fallback to a module that is gone)."""
import ast
import importlib
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
from lib import registry  # noqa: E402

SCRIPTS = sorted(p.name for p in BENCH.glob("*.py"))
RUNNERS = {"guard.py", "report.py"}            # what runs the others
FILES = sorted(BENCH.glob("*.py")) + sorted((BENCH / "lib").glob("*.py"))


def _imports(path):
    """``(module, [names], level)`` of every import statement of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node.module or "", [a.name for a in node.names], node.level
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], 0


def test_every_script_is_in_the_registry_and_every_entry_exists():
    named = set(registry.scripts())
    assert set(SCRIPTS) - RUNNERS == named, (set(SCRIPTS) - RUNNERS) ^ named
    assert set(registry.LINES) == {p.name for p in (BENCH / "lines").glob("*.jsonl")}
    assert set(registry.LINES.values()) <= named


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(BENCH)))
def test_no_script_imports_another_script_or_a_private_name(path):
    scripts = {s[:-3] for s in SCRIPTS}
    for module, names, level in _imports(path):
        top = module.split(".")[0]
        assert top not in scripts, f"{path.name} imports the script {module}: share it in lib/"
        if top == "lib" or level:
            private = [n for n in names if n.startswith("_")]
            assert not private, f"{path.name} imports private {private} of {module}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(BENCH)))
def test_every_rankjax_name_a_benchmark_imports_exists(path):
    for module, names, _ in _imports(path):
        if module.split(".")[0] != "rankjax":
            continue
        mod = importlib.import_module(module)
        for n in names:
            if not hasattr(mod, n):
                importlib.import_module(f"{module}.{n}")        # a submodule
