"""The on-disk program cache of the estimators and the command line (rankjax._cache):
on by default in the user's cache folder, a switch turns it off, a cache the user
configured is left alone. Each case runs in a fresh process (the suite's conftest
configures a cache of its own)."""
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("sklearn")

FIT = """
import numpy as np, jax, rankjax as rj
from rankjax.estimators import RankRLSCV
d = rj.make_ranking_data(8, num_features=3, seed=0)
jax.numpy.ones(3).sum()                     # something compiled before the first fit
RankRLSCV(lams=[0.1, 1.0]).fit(d.X, d.y, qid=d.qid)
print("DIR", jax.config.jax_compilation_cache_dir)
"""


def run(tmp_path, code, **env):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE", "RANKJAX_DISK"))}
    base.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), JAX_PLATFORMS="cpu", **env)
    r = subprocess.run([sys.executable, "-c", code], env=base, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.split("DIR ")[-1].strip()


def programs(folder):
    return [p for p in pathlib.Path(folder).rglob("*") if p.is_file()]


def test_a_fit_keeps_its_programs_in_the_user_cache_folder(tmp_path):
    folder = run(tmp_path, FIT)
    assert pathlib.Path(folder) == tmp_path / "xdg" / "rankjax" / "jax-programs"
    kept = programs(folder)
    assert kept, "no program was written"
    assert run(tmp_path, FIT) == folder           # a second process reads the same folder


def test_the_switch_turns_it_off(tmp_path):
    assert run(tmp_path, FIT, RANKJAX_DISK_CACHE="0") == "None"
    assert not (tmp_path / "xdg").exists()


def test_a_folder_of_the_switch_is_used(tmp_path):
    target = tmp_path / "mine"
    assert run(tmp_path, FIT, RANKJAX_DISK_CACHE=str(target)) == str(target)
    assert programs(target)


def test_a_cache_the_user_configured_is_left_alone(tmp_path):
    own = tmp_path / "own"
    code = f"import jax; jax.config.update('jax_compilation_cache_dir', {str(own)!r})\n" + FIT
    assert run(tmp_path, code) == str(own)
    assert not (tmp_path / "xdg").exists()


def test_the_command_line_uses_it(tmp_path):
    code = ("import sys, jax\nfrom rankjax.cli import main\n"
            "rc = main(['--quiet'])\nprint('DIR', jax.config.jax_compilation_cache_dir)\n")
    folder = run(tmp_path, code)
    assert pathlib.Path(folder) == tmp_path / "xdg" / "rankjax" / "jax-programs"
