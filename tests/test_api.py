"""Public surface: docstrings with examples; module layering (docs/design.md)."""
import ast
import inspect
import pathlib

import rankjax as rj
from rankjax import estimators, io, plot

PKG = pathlib.Path(rj.__file__).parent
ORDER = ["_core", "runtime", "_version", "_solution", "io", "metrics", "graphs", "kernels",
         "features", "_problem", "scale",
         "solvers", "learners", "selection", "_solve", "estimators", "plot", "cli", "__main__",
         "__init__"]


def public_names():
    for mod in (rj, io, estimators, plot):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{mod.__name__}.{name}", obj


def test_every_public_name_has_a_docstring_with_an_example():
    missing = [n for n, obj in public_names()
               if not obj.__doc__ or (inspect.isfunction(obj) and ">>>" not in obj.__doc__)]
    assert not missing, f"public names without a docstring/example: {missing}"


def test_modules_import_only_from_modules_above():
    """The one-way pipeline: a module (or subpackage) imports only from those above it
    in ``ORDER``; inside a subpackage ``from ..x`` is a package-level import."""
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        name = rel.parts[0] if len(rel.parts) > 1 else path.stem
        if name not in ORDER:
            raise AssertionError(f"{name} is not placed in the layering order of test_api.py")
        rank = ORDER.index(name)
        depth = len(rel.parts) - 1                      # 0: package level, 1: in a subpackage
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == depth + 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
                for t in targets:
                    t = t.split(".")[0]
                    if t in ORDER:
                        assert ORDER.index(t) < rank, f"{rel} imports {t} from below"
