"""The faults a user's disk and files bring (issue 89): model files that run no code and are
checked at load, a program store that is a cache (a bad entry is ignored and replaced),
no temporary file left behind, and the command line's one-line read errors."""
import gzip
import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import rankjax as rj
from rankjax import cli
from rankjax._core.atomic import atomic_write

pytest.importorskip("sklearn")


# ---------------------------------------------------------------------------- model files

@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory):
    """A kernel estimator's file (its rows behind the default feature map), the estimator
    and its data."""
    from rankjax.estimators import RankRLS
    d = rj.make_ranking_data(12, num_features=4, seed=0)
    est = RankRLS(kernel="gaussian", lam=1.0).fit(d.X, d.y, qid=d.qid)
    path = tmp_path_factory.mktemp("model") / "k.npz"
    est.save(path)
    return path, est, d


def _rewrite(src, dst, edit):
    """``src``'s model file with ``edit(header, arrays)`` applied, written to ``dst``."""
    with zipfile.ZipFile(src) as z:
        header = json.loads(z.read("header.json"))
        arrays = {n[:-4]: np.load(z.open(n)) for n in z.namelist() if n.endswith(".npy")}
    edit(header, arrays)
    with zipfile.ZipFile(dst, "w") as z:
        z.writestr("header.json", json.dumps(header))
        for k, a in arrays.items():
            with z.open(k + ".npy", "w") as fh:
                np.lib.format.write_array(fh, a)
    return dst


def _holders(tree, field):
    """The structures in a header holding the array ``field``."""
    if isinstance(tree, dict):
        f = tree.get("fields", {})
        if isinstance(f.get(field), dict) and "array" in f[field]:
            yield tree
        for v in tree.values():
            yield from _holders(v, field)
    elif isinstance(tree, list):
        for v in tree:
            yield from _holders(v, field)


def _array(header, field):
    return next(_holders(header["model"], field))["fields"][field]["array"]


def test_a_file_naming_a_module_is_refused_without_importing_it(kernel_file, tmp_path,
                                                                 monkeypatch):
    from rankjax.estimators import load
    (tmp_path / "side_effect_mod.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('ran')\n"
        "class FeatureMap: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def to_module(header, arrays):
        next(_holders(header["model"], "scale"))["module"] = "side_effect_mod"
    bad = _rewrite(kernel_file[0], tmp_path / "m.npz", to_module)
    with pytest.raises(ValueError, match="m.npz: .*side_effect_mod.*imports nothing"):
        load(bad)
    assert not (tmp_path / "RAN").exists() and "side_effect_mod" not in sys.modules


@pytest.mark.parametrize("fault,field", [("nan_coef", "coef"), ("row_less", "X_train"),
                                         ("scale_less", "scale")])
def test_a_damaged_array_is_refused_at_load_naming_file_and_field(kernel_file, tmp_path,
                                                                  fault, field):
    from rankjax.estimators import load

    def edit(header, arrays):
        key = _array(header, {"nan_coef": "coef", "row_less": "X_train",
                              "scale_less": "scale"}[fault])
        a = arrays[key].copy()
        if fault == "nan_coef":
            a.flat[0] = np.nan
        arrays[key] = a if fault == "nan_coef" else a[:-1]
    bad = _rewrite(kernel_file[0], tmp_path / f"{fault}.npz", edit)
    with pytest.raises(ValueError, match=rf"{fault}.npz: [\w.]*{field}: ") as e:
        load(bad)
    assert "\n" not in str(e.value)
    _, est, d = kernel_file
    np.testing.assert_allclose(load(kernel_file[0]).predict(d.X), est.predict(d.X), rtol=1e-6)


def test_a_linear_model_file_with_a_nan_weight_is_refused(tmp_path):
    path = tmp_path / "w.npz"
    rj.io.save_model(path, rj.LinearModel(np.array([1.0, 2.0])))
    bad = _rewrite(path, tmp_path / "bad.npz",
                   lambda h, a: a.__setitem__(_array(h, "weights"), np.array([1.0, np.nan])))
    with pytest.raises(ValueError, match="bad.npz: weights: holds NaN"):
        rj.io.load_model(bad)


def _repeated(path):
    """The arrays of at least 10 values a model file holds more than once."""
    with zipfile.ZipFile(path) as z:
        blobs = [z.read(n) for n in z.namelist() if n.endswith(".npy")]
    big = [b for b in blobs if np.load(__import__("io").BytesIO(b)).size >= 10]
    return len(big) - len(set(big))


def test_a_model_file_holds_each_array_once(kernel_file, tmp_path):
    from rankjax.estimators import RankRLSCV
    assert _repeated(kernel_file[0]) == 0
    _, _, d = kernel_file
    est = RankRLSCV(kernel="gaussian", lams=[0.1, 1.0]).fit(d.X, d.y, qid=d.qid)
    est.save(tmp_path / "cv.npz")              # its selection holds the model and the map too
    assert _repeated(tmp_path / "cv.npz") == 0


# ------------------------------------------------------------------ temporary files

def test_a_killed_save_leaves_nothing_behind_after_the_next(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".m.npz.{dead}.abcd.tmp"          # a save killed mid-write
    stale.write_bytes(b"half")
    live = tmp_path / f".m.npz.{os.getpid()}.efgh.tmp"    # a write of this process, going on
    live.write_bytes(b"going on")
    with atomic_write(tmp_path / "m.npz", "wb") as fh:
        fh.write(b"x")
    assert not stale.exists() and live.exists()
    with pytest.raises(RuntimeError), atomic_write(tmp_path / "m.npz", "wb") as fh:
        fh.write(b"y")
        raise RuntimeError("killed")
    assert (tmp_path / "m.npz").read_bytes() == b"x"
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name, "m.npz"]


# --------------------------------------------------------------------- program store

def test_bad_program_store_entries_are_ignored_and_replaced(tmp_path):
    """Swapped, truncated, random, FIFO and folder entries: each process predicts as one
    without the store, and the entries are replaced by readable files; no temporary file."""
    code = ("import numpy as np, rankjax as rj\n"
            "from rankjax.estimators import RankRLSCV\n"
            "d = rj.make_ranking_data(10, num_features=4, seed=1)\n"
            "p = [RankRLSCV(kernel=k, lams=[0.1, 1.0, 10.0]).fit(d.X, d.y, qid=d.qid)\n"
            "     .predict(d.X[:4]) for k in (None, 'gaussian')]\n"
            "print(np.asarray(p, np.float64).ravel().tolist())\n")

    def run(store):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}
        env.update(RANKJAX_DISK_CACHE=str(store) if store else "0", JAX_PLATFORMS="cpu")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    store = tmp_path / "store"
    want = run(None)
    np.testing.assert_allclose(run(store), want, rtol=1e-6)
    a, b, c = sorted((store / "executables").glob("*.pkl"))[:3]
    from rankjax.runtime.entries import read_entry

    def replaced():
        np.testing.assert_allclose(run(store), want, rtol=1e-6)
        for p in (a, b, c):
            assert p.is_file() and read_entry(p, p.stem) is not None, p.name

    ta, tb = a.read_bytes(), b.read_bytes()
    a.write_bytes(tb)
    b.write_bytes(ta)                                       # swapped
    c.write_bytes(c.read_bytes()[:100])                     # truncated
    replaced()
    a.write_bytes(os.urandom(4096))                         # random
    b.unlink()
    if hasattr(os, "mkfifo"):
        os.mkfifo(b)                                        # a FIFO: never opened
    c.unlink()
    c.mkdir()                                               # a folder
    replaced()
    assert not [p for p in store.rglob("*.tmp")]


# ------------------------------------------------------------------------ command line

def _cli(argv, capsys):
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.err.strip().splitlines()


@pytest.fixture(scope="module")
def letor(tmp_path_factory):
    d = rj.make_ranking_data(6, num_features=3, seed=0)
    path = tmp_path_factory.mktemp("cli") / "train.txt"
    rj.io.write_svmlight(path, np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid))
    return path


def test_a_truncated_gz_is_one_line_naming_the_file(letor, tmp_path, capsys):
    whole = gzip.compress(letor.read_bytes() * 20)
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    code, err = _cli(["--train", str(cut), "--test", str(letor), "--quiet"], capsys)
    assert code == 2 and len(err) == 1 and str(cut) in err[0] and "truncated" in err[0]
    flipped = bytearray(whole)
    flipped[-6] ^= 0xFF                                     # the CRC
    (tmp_path / "crc.txt.gz").write_bytes(bytes(flipped))
    code, err = _cli(["--train", str(tmp_path / "crc.txt.gz"), "--test", str(letor), "--quiet"],
                     capsys)
    assert code == 2 and len(err) == 1 and "crc.txt.gz" in err[0]


def test_a_file_that_is_not_utf8_names_its_line(letor, tmp_path, capsys):
    lines = letor.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"".join(lines[:2]) + b"0 qid:9 1:\xff\n" + b"".join(lines[2:]))
    code, err = _cli(["--train", str(bad), "--test", str(letor), "--quiet"], capsys)
    assert code == 2 and len(err) == 1 and "bad.txt: line 3: not UTF-8" in err[0]


@pytest.mark.parametrize("label", ["-1", "1.5"])
def test_labels_that_are_not_grades_are_refused(letor, tmp_path, capsys, label):
    lines = letor.read_text().splitlines(keepends=True)
    bad = tmp_path / "labels.txt"
    bad.write_text(lines[0] + label + lines[1][lines[1].index(" "):] + "".join(lines[2:]))
    code, err = _cli(["--train", str(bad), "--test", str(letor), "--learner", "rankrls",
                      "--quiet"], capsys)
    assert code == 2 and len(err) == 1 and "relevance grades" in err[0] and "row 2" in err[0]


def test_the_dense_memory_hint_names_the_command_lines_flag(letor, capsys, monkeypatch):
    import rankjax.io.svmlight as svm
    monkeypatch.setattr(svm, "memory_limit", lambda: 8)
    code, err = _cli(["--train", str(letor), "--test", str(letor), "--learner", "rankrls",
                      "--quiet"], capsys)
    assert code == 2 and len(err) == 1 and "--sparse" in err[0] and "sparse=True" not in err[0]
    monkeypatch.undo()
    code, _ = _cli(["--train", str(letor), "--test", str(letor), "--learner", "rankrls",
                    "--sparse", "--quiet"], capsys)
    assert code == 0


def test_the_model_file_of_the_command_line_holds_each_array_once(letor, tmp_path, capsys):
    path = tmp_path / "m.npz"
    assert _cli(["--train", str(letor), "--test", str(letor), "--save", str(path), "--quiet"],
                capsys)[0] == 0
    assert _repeated(path) == 0
