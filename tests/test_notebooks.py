"""Every notebook's code cells run top to bottom (shell/magic lines skipped, no display),
and every committed notebook carries its outputs with at least one plot."""
import json
import pathlib

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    cells = json.loads(path.read_text())["cells"]
    code = [l for c in cells if c["cell_type"] == "code" for l in "".join(c["source"]).splitlines()
            if not l.lstrip().startswith(("!", "%"))]
    namespace = {}
    exec(compile("\n".join(code), str(path), "exec"), namespace)
    assert namespace, "the notebook defined nothing"
    import matplotlib.pyplot as plt
    plt.close("all")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_from_a_fresh_copy_without_shared_data(path, tmp_path, monkeypatch, capsys):
    """As on Colab: a copy of the repository's tracked files with no ``shared/`` beside it
    or above it; the notebook runs on data it makes or the repository ships, and one that
    would read the shared sets says what it uses instead."""
    import shutil
    import subprocess
    root = path.parents[1]
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    import tempfile
    free = [d for d in (tmp_path, pathlib.Path.home() / ".cache")
            if d.is_dir() and not any((e / "shared").exists() for e in [d, *d.parents])]
    if not free:
        pytest.skip("every temporary folder here has a shared/ folder above it")
    copy = pathlib.Path(tempfile.mkdtemp(dir=free[0])) / "clone"
    try:
        for f in files:
            (copy / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / f, copy / f)
        monkeypatch.chdir(copy / "notebooks")
        test_notebook_runs(copy / "notebooks" / path.name, monkeypatch)
        if "shared" in path.read_text():
            assert "built-in LETOR-like data" in capsys.readouterr().out
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_with_outputs_and_a_plot(path):
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    assert all(c.get("outputs") for c in cells[1:]), "a code cell has no committed output"
    kinds = {k for c in cells for o in c["outputs"] for k in o.get("data", {})}
    assert "image/png" in kinds, "no plot in the committed outputs"
    assert not any(o.get("output_type") == "error" for c in cells for o in c["outputs"])


def _install_code(path):
    src = "".join(next(c for c in json.loads(path.read_text())["cells"]
                       if c["cell_type"] == "code")["source"])
    a = src.index("# Install rankjax when it is not importable")
    return src[a:src.index("subprocess.check_call", a)] + "calls.append(spec)\n"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_install_cell_works_without_a_package_index(path, tmp_path, monkeypatch):
    """The first cell installs from the clone, a wheel beside the notebook, or
    RANKJAX_SOURCE — never from a package index rankjax is not on — or says what to do."""
    import importlib.util
    code = _install_code(path)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    repo = path.parents[1]

    def run(cwd):
        monkeypatch.chdir(cwd)
        ns = {"calls": []}
        exec(code, ns)
        return ns["calls"]

    import re
    extras = re.search(r'source \+ "(\[[\w,]+\])"', code).group(1)    # what the notebook needs
    assert {"plot", "sklearn"} <= set(extras[1:-1].split(","))
    assert run(repo / "notebooks") == [f"{repo}{extras}"]
    monkeypatch.delenv("RANKJAX_SOURCE", raising=False)
    with pytest.raises(RuntimeError, match="RANKJAX_SOURCE"):
        run(tmp_path)
    monkeypatch.setenv("RANKJAX_SOURCE", "git+https://example.org/rankjax")
    assert run(tmp_path) == [f"rankjax{extras} @ git+https://example.org/rankjax"]
    (tmp_path / "rankjax-0.1.0-py3-none-any.whl").write_bytes(b"")
    assert run(tmp_path) == [f"rankjax-0.1.0-py3-none-any.whl{extras}"]
