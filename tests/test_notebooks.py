"""Every notebook's code cells run top to bottom (shell/magic lines skipped, no display)."""
import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cells = json.loads(path.read_text())["cells"]
    code = [l for c in cells if c["cell_type"] == "code" for l in "".join(c["source"]).splitlines()
            if not l.lstrip().startswith(("!", "%"))]
    namespace = {}
    exec(compile("\n".join(code), str(path), "exec"), namespace)
    assert namespace, "the notebook defined nothing"
