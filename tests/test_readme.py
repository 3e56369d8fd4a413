"""Every code block of README.md, then of docs/guide.md and docs/tour.md (which continue its
examples), runs as written; the README is a front door (issue 89).

Python blocks run top to bottom in one namespace (as a reader pastes them into one
session), all but the per-host start of a cluster (``jax.distributed.initialize``; its
complete script, ``examples/multihost.py``, runs in ``test_distributed``); bash blocks
after the set-up block run in a scratch folder beside a link to ``../shared`` with
``.venv/bin/python`` standing for this interpreter. The set-up block (it installs) is
checked for the two commands the project promises instead.
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TOUR = (ROOT / "docs" / "tour.md").read_text(encoding="utf-8")
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", "\n".join((README, GUIDE, TOUR)), flags=re.S)
SHARED = ROOT.parent / "shared"


def test_the_readme_is_a_front_door():
    """At most 300 lines; what it is first; a Python example before line 90 and the command
    line on one's own file before line 160; no measured figure (the tables live in docs/,
    written from their lines: tests/test_docs.py)."""
    lines = README.splitlines()
    assert len(lines) <= 300
    assert lines[0] == "# rankjax" and lines[2].startswith("Learning to rank")
    first = lambda pred: next(i for i, ln in enumerate(lines) if pred(ln)) + 1  # noqa: E731
    assert first(lambda ln: ln.startswith("```python")) < 90
    assert first(lambda ln: "-m rankjax train --train" in ln) < 160
    assert "<!--" not in README and not re.search(r"\b0\.[5-9]\d{3}\b", README)


def test_readme_starts_with_the_two_setup_commands():
    lang, setup = BLOCKS[0]
    lines = [ln for ln in setup.splitlines() if ln.strip()]
    assert lang == "bash" and len(lines) == 2
    assert all(ln.startswith("python3 -m venv") and ".venv/bin/python -m pip install -e" in ln
               for ln in lines)
    assert ".venv/bin/python -m rankjax" in lines[0] and ".venv/bin/python -m pytest" in lines[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert lines[1].split("&&", 1)[1].split("#")[0].strip() in ci or "pytest" in ci


def test_later_commands_use_the_virtual_environment():
    for lang, code in BLOCKS[1:]:
        if lang == "bash":
            for ln in re.sub(r"\\\n", " ", code).splitlines():     # join continued lines
                if ln.strip() and not ln.lstrip().startswith("#"):
                    assert re.match(r"\s*\.venv/bin/python ", ln), ln


@pytest.mark.skipif(not (SHARED / "data" / "lambdarank_sample").exists(),
                    reason="../shared/data is absent")
def test_python_blocks_run_as_written(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(ROOT)                        # the blocks name ../shared/data/...
    namespace = {}
    for i, (lang, code) in enumerate(BLOCKS):
        # a per-host block joins a cluster; test_distributed runs its script on two processes
        if lang == "python" and "jax.distributed.initialize" not in code:
            exec(compile(code, f"README.md block {i}", "exec"), namespace)
    import matplotlib.pyplot as plt
    plt.close("all")
    assert "model" in namespace and "fit" in namespace


@pytest.mark.skipif(not (SHARED / "data" / "lambdarank_sample").exists(),
                    reason="../shared/data is absent")
def test_bash_blocks_run_as_written(tmp_path):
    work = tmp_path / "work"
    (work / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / "shared").symlink_to(SHARED)
    (work / "examples").symlink_to(ROOT / "examples")
    py = work / ".venv" / "bin" / "python"
    py.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    py.chmod(0o755)
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    for lang, code in BLOCKS[1:]:
        if lang != "bash" or "pip install" in code:   # installs: the docs block is built
            continue                                  # by tests/test_docs.py
        r = subprocess.run(["bash", "-e", "-c", code], cwd=work, capture_output=True, text=True,
                           env=env, timeout=900)
        assert r.returncode == 0, (code, r.stdout[-2000:], r.stderr[-2000:])
    assert (work / "model.npz").exists() and (work / "scores.txt").exists()


def test_every_guarantee_names_a_test_that_exists_and_runs_by_default():
    """Each bullet of the guarantees (docs/guide.md) ends with the tests that fail when it
    breaks; each named test is defined in its file and not marked slow."""
    section = GUIDE.split("## Guarantees", 1)[1].split("\n### ", 1)[0]
    bullets = re.split(r"\n(?=- \*\*)", section.strip())[1:]
    assert len(bullets) >= 10
    for bullet in bullets:
        named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", bullet)
        assert named, f"no test named for: {bullet[:60]}"
        for file, name in named:
            lines = (ROOT / file).read_text(encoding="utf-8").splitlines()
            at = [i for i, line in enumerate(lines) if line.startswith(f"def {name}(")]
            assert at, f"{file}::{name} does not exist"
            i = at[0]
            while i > 0 and lines[i - 1].strip() and not lines[i - 1].startswith(("def ", "#")):
                i -= 1                                  # its decorators
            decorators = "\n".join(lines[i:at[0]])
            assert "@pytest.mark.slow" not in decorators, f"{file}::{name} is marked slow"


