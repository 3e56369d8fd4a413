"""Every module-qualified rankjax name the documentation writes in a code span resolves:
``solvers.ridge.eigh_floor``, ``rankjax.solvers.base.solver``, ``rj.scale.shard`` (issue 67:
docs/design.md named six functions that no longer existed)."""
import importlib
import pathlib
import pkgutil
import re

import rankjax

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
SPAN = re.compile(r"`+([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`+")
TOP = {m.name for m in pkgutil.iter_modules(rankjax.__path__)}


def resolves(dotted):
    parts = dotted.split(".")
    if parts[0] in ("rj", "rankjax"):
        parts = parts[1:]
    obj = rankjax
    path = "rankjax"
    for part in parts:
        if hasattr(obj, part):
            obj = getattr(obj, part)
            path = f"{path}.{part}"
            continue
        try:
            obj = importlib.import_module(f"{path}.{part}")
            path = f"{path}.{part}"
        except ImportError:
            return False
    return True


def names():
    out = set()
    for md in sorted(DOCS.glob("*.md")):
        for name in SPAN.findall(md.read_text()):
            head = name.split(".")[0]
            if head in ("rj", "rankjax") or head in TOP:
                out.add((md.name, name))
    return out


def test_every_module_qualified_name_in_the_docs_resolves():
    found = names()
    assert len(found) > 20                      # the scan sees the names
    missing = sorted(f"{md}: {name}" for md, name in found if not resolves(name))
    assert not missing, missing
