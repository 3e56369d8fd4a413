"""The on-disk program cache of the estimators and the command line (rankjax.runtime.cache):
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


KEPT = """
import numpy as np, rankjax as rj
from rankjax.runtime.programs import STORE
from rankjax.estimators import RankRLSCV
d = rj.make_ranking_data(8, num_features=3, seed=0)
for kw in ({}, {"kernel": "gaussian"}):
    m = RankRLSCV(lams=[0.1, 1.0], **kw).fit(d.X, d.y, qid=d.qid)
    print("PRED", kw, m.lam_, np.asarray(m.predict(d.X)).round(6).tolist())
print("STATS", STORE.stats["read"], STORE.stats["exported"])
print("DIR", "")
"""


def test_a_later_process_reads_the_traced_programs_back(tmp_path):
    """The second process neither traces nor lowers the hold-outs and the selection
    (rankjax.runtime.programs) and fits the same models; a cache the user configured keeps it off."""
    def fit(**env):
        r = subprocess.run([sys.executable, "-c", KEPT], capture_output=True, text=True, timeout=600,
                           env={**{k: v for k, v in os.environ.items()
                                   if not k.startswith(("JAX_COMPILATION_CACHE", "RANKJAX_DISK"))},
                                "XDG_CACHE_HOME": str(tmp_path / "xdg"), "JAX_PLATFORMS": "cpu", **env})
        assert r.returncode == 0, r.stderr[-2000:]
        lines = r.stdout.splitlines()
        stats = [ln for ln in lines if ln.startswith("STATS")][0].split()[1:]
        return [ln for ln in lines if ln.startswith("PRED")], [int(s) for s in stats]

    first, (read, exported) = fit()
    assert read == 0 and exported >= 3          # two hold-outs, one selection (same shapes)
    again, (read, exported) = fit()
    assert again == first and read >= 3 and exported == 0
    kept = tmp_path / "xdg" / "rankjax" / "jax-programs"
    assert len(programs(kept / "executables") + programs(kept / "exported")) >= 3
    _, (read, exported) = fit(RANKJAX_DISK_CACHE="0")
    assert read == exported == 0


COUNTED = """
import logging, numpy as np, jax, rankjax as rj
from rankjax.estimators import RankRLSCV
names = []
class H(logging.Handler):
    def emit(self, r):
        t = r.getMessage()
        if t.startswith("Finished XLA compilation of jit("):
            names.append(t.split("jit(")[1].split(")")[0])
jax.config.update("jax_log_compiles", True)
log = logging.getLogger("jax"); log.addHandler(H()); log.setLevel(logging.DEBUG); log.propagate = False
d = rj.make_ranking_data(40, num_features=6, seed=0) if not RAW else rj.make_web_data(20, seed=0)
X, y = np.asarray(d.X, np.float32), np.asarray(d.y, np.float32)
X = X if RAW else (X - X.min(0)) / np.ptp(X, axis=0)          # the README's [0, 1] features
RankRLSCV(kernel=KERNEL).fit(X, y, qid=d.qid)
first = sorted(names); names.clear()
RankRLSCV(kernel=KERNEL).fit(X[:-d.X.shape[0] // 4], y[:-d.X.shape[0] // 4], qid=d.qid[:-d.X.shape[0] // 4])
print("DIR", first, sorted(names))
"""


@pytest.mark.parametrize("kernel, holdout, raw", [(None, "_primal_holdout", False),
                                                  ("'gaussian'", "_dual_holdout", False),
                                                  ("'gaussian'", "_dual_holdout", True)])
def test_a_first_fit_compiles_its_hold_out_and_its_selection_alone(tmp_path, kernel, holdout,
                                                                     raw):
    """The README's count: a first RankRLSCV fit compiles two programs and a fit on another
    row count those two again (no staging or conversion program of the checks, no program of
    the feature map: on the CPU it is learned and applied on the rows' host view), on raw
    features as on [0, 1] ones."""
    script = COUNTED.replace("KERNEL", str(kernel)).replace("RAW", str(raw))
    out = run(tmp_path, script, RANKJAX_DISK_CACHE="0")
    want = sorted([holdout, "_selection"])
    assert out == f"{want} {want}", out
