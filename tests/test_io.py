import pathlib
import sys
import numpy as np
import pytest
import scipy.sparse as sp

from conftest import LAMBDARANK
from rankjax import io

needs_data = pytest.mark.skipif(not (LAMBDARANK / "rank.train").exists(),
                                reason="../shared/data/lambdarank_sample not present")


@needs_data
def test_reads_lambdarank_sample():
    d = io.read_svmlight(LAMBDARANK / "rank.train")
    assert d.X.shape == (3005, 300)
    assert set(np.unique(d.y)) <= {0, 1, 2, 3, 4}
    sizes = io.read_groups(LAMBDARANK / "rank.train.query")
    assert len(sizes) == 201 and sizes.sum() == 3005
    np.testing.assert_array_equal(io.qid_to_groups(d.qid), sizes)
    s = io.read_svmlight(LAMBDARANK / "rank.test", sparse=True, num_features=300)
    assert sp.issparse(s.X) and s.X.shape == (768, 300) and len(np.unique(s.qid)) == 50
    assert 0.0 <= s.X.min() and s.X.max() <= 1.0


def test_write_then_read_round_trips(tmp_path, rng):
    X = np.where(rng.random((20, 7)) < 0.5, 0.0, rng.standard_normal((20, 7)))
    y = rng.integers(0, 5, 20).astype(float)
    qid = np.repeat([10, 3, 7, 42], 5)
    comments = [f"doc{i}" if i % 3 else "" for i in range(20)]
    path = tmp_path / "data.txt"
    io.write_svmlight(path, X, y, qid, comments)
    d = io.read_svmlight(path, num_features=7)
    np.testing.assert_array_equal(d.X, X)
    np.testing.assert_array_equal(d.y, y)
    np.testing.assert_array_equal(d.qid, qid)
    assert d.comments == comments
    # group files instead of qid
    io.write_svmlight(tmp_path / "g.txt", X, y)
    io.write_groups(tmp_path / "g.txt.query", io.qid_to_groups(qid))
    g = io.read_svmlight(tmp_path / "g.txt", num_features=7)
    np.testing.assert_array_equal(io.qid_to_groups(g.qid), [5, 5, 5, 5])
    # preferences
    io.write_preferences(tmp_path / "p.txt", [0, 2], [1, 0], [1.5, 2.0])
    h, t, mag = io.read_preferences(tmp_path / "p.txt")
    assert h.tolist() == [0, 2] and t.tolist() == [1, 0] and mag.tolist() == [1.5, 2.0]


@pytest.mark.parametrize("line,msg", [
    ("1 qid:1 3:0.5 x:1", "line 2"),
    ("abc qid:1 1:0.5", "line 2"),
    ("1 qid:z 1:0.5", "line 2"),
    ("1 qid:1 0:0.5", "line 2"),
    ("1 qid:1 2:0.5 1:0.3", "line 2"),
    ("1 2:0.5", "line 2"),
])
def test_malformed_lines_name_the_line(tmp_path, line, msg):
    path = tmp_path / "bad.txt"
    path.write_text("0 qid:1 1:0.25 # ok\n" + line + "\n")
    with pytest.raises(ValueError, match=msg):
        io.read_svmlight(path)


def test_nan_and_inf_values_read_and_write_as_the_trees_files_have_them(tmp_path):
    """``nan`` and ``inf`` feature values (a missing value in LightGBM's and XGBoost's text
    files) read and write back as they are; labels stay finite."""
    path = tmp_path / "d.txt"
    path.write_text("0 qid:1 1:nan 2:3\n1 qid:1 1:2 2:-inf\n")
    d = io.read_svmlight(path)
    assert np.isnan(d.X[0, 0]) and d.X[1, 1] == -np.inf and d.X[0, 1] == 3
    io.write_svmlight(tmp_path / "e.txt", d.X, d.y, d.qid)
    assert (tmp_path / "e.txt").read_text() == path.read_text()
    with pytest.raises(ValueError, match="line 1: the label is not finite"):
        (tmp_path / "f.txt").write_text("nan qid:1 1:1\n")
        io.read_svmlight(tmp_path / "f.txt")


def test_other_file_errors(tmp_path):
    (tmp_path / "e.txt").write_text("\n# only a comment\n")
    with pytest.raises(ValueError, match="no data"):
        io.read_svmlight(tmp_path / "e.txt")
    (tmp_path / "q.txt").write_text("1 1:1\n0 1:2\n")
    (tmp_path / "q.txt.query").write_text("3\n")
    with pytest.raises(ValueError, match="add up"):
        io.read_svmlight(tmp_path / "q.txt")
    (tmp_path / "p.txt").write_text("0 1\n0 x\n")
    with pytest.raises(ValueError, match="line 2"):
        io.read_preferences(tmp_path / "p.txt")
    (tmp_path / "w.txt").write_text("1 qid:1 5:1\n")
    with pytest.raises(ValueError, match="num_features"):
        io.read_svmlight(tmp_path / "w.txt", num_features=3)
    with pytest.raises(ValueError, match="contiguous"):
        io.qid_to_groups([1, 2, 1])


def test_normalize_per_query_and_bcoo(rng):
    X = rng.standard_normal((12, 3))
    qid = np.repeat([5, 1, 9], 4)
    Z = io.normalize_per_query(X, qid)
    for q in (5, 1, 9):
        rows = Z[qid == q]
        np.testing.assert_allclose(rows.min(0), 0)
        np.testing.assert_allclose(rows.max(0), 1)
    B = io.to_bcoo(sp.csr_matrix(np.where(X > 0, X, 0)))
    np.testing.assert_array_equal(np.asarray(B.todense()), np.where(X > 0, X, 0))


CUT_WRITE = """
import os, resource, signal, sys
import numpy as np
from rankjax import io
folder, what = sys.argv[1], sys.argv[2]
path = os.path.join(folder, "out")
X = np.random.default_rng(0).random((4000, 20))
write = {"svmlight": lambda: io.write_svmlight(path, X, np.arange(4000) % 3, qid=np.arange(4000) // 10),
         "model": lambda: io.save_model(path + ".npz", X, lam=1.0)}[what]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # a write past the limit raises EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    write()
except OSError as e:
    print("cut", e.errno)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork") or sys.platform == "darwin",
                    reason="a file-size limit (RLIMIT_FSIZE) of a Linux process")
@pytest.mark.parametrize("what, name", [("svmlight", "out"), ("model", "out.npz")])
def test_a_write_cut_halfway_leaves_the_old_file_and_no_temporary(tmp_path, what, name):
    """The README's promise: a write that fails after it has begun writing (here a file-size
    limit of 100 kB hit halfway through a 4,000-row file) leaves the old file as it was and
    no temporary file beside it."""
    import subprocess
    old = b"the old file\n"
    (tmp_path / name).write_bytes(old)
    r = subprocess.run([sys.executable, "-c", CUT_WRITE, str(tmp_path), what],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("cut"), r.stdout + r.stderr[-2000:]
    assert (tmp_path / name).read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_failed_writes_leave_the_old_file_intact(tmp_path):
    p = tmp_path / "d.txt"
    io.write_svmlight(p, np.ones((2, 2)), [1.0, 0.0], qid=[1, 1])
    before = p.read_text()
    with pytest.raises(ValueError, match="finite"):
        io.write_svmlight(p, np.array([[np.nan, 1.0], [0.0, 1.0]]), [np.nan, 0.0], qid=[1, 1])
    with pytest.raises(ValueError, match="qid must hold integers"):
        io.write_svmlight(p, np.ones((2, 2)), [1.0, 0.0], qid=[1.5, 2.0])
    assert p.read_text() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["d.txt"]      # no temporary left
    m = tmp_path / "m.npz"
    io.save_model(m, np.ones(3), lam=1.0)
    with pytest.raises(TypeError, match="'note'"):
        io.save_model(m, np.zeros(3), note=None)
    with pytest.raises(TypeError, match="'cfg'"):
        io.save_model(m, np.zeros(3), cfg={"a": 1})
    np.testing.assert_array_equal(io.load_model(m)[0], np.ones(3))
    with pytest.raises(ValueError, match="integers"):
        io.write_groups(tmp_path / "g.query", [2.5, 1])
    with pytest.raises(ValueError, match="integers"):
        io.groups_to_qid([2.5])
    with pytest.raises(ValueError, match="integers"):
        io.write_preferences(tmp_path / "p.txt", [0.5], [1])


def test_model_files_carry_a_format_version(tmp_path):
    """Version 3: a zip with a UTF-8 ``header.json`` (format, version, library version)
    and ``.npy`` arrays; version 2 (header as a numpy string) is still read; other
    versions, foreign and damaged files are errors naming the problem."""
    import json
    import os
    import zipfile
    import rankjax
    m = tmp_path / "m.npz"
    io.save_model(m, np.ones(3), lam=1.0, name="ünïcode")
    with zipfile.ZipFile(m) as z:
        header = json.loads(z.read("header.json").decode("utf-8"))
        members = {n: z.read(n) for n in z.namelist()}
    assert header["format"] == io.MODEL_FORMAT and header["version"] == io.MODEL_VERSION == 3
    assert header["rankjax_version"] == rankjax.__version__ and header["meta"]["name"] == "ünïcode"
    with np.load(m) as z:                       # numpy reads the arrays directly
        np.testing.assert_array_equal(z[header["model"]["array"]], np.ones(3))
    old = os.umask(0o027)
    try:
        io.save_model(tmp_path / "mode.npz", np.ones(3))
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "mode.npz").st_mode & 0o777 == 0o640      # follows the umask
    header["version"] = io.MODEL_VERSION + 1
    with zipfile.ZipFile(tmp_path / "future.npz", "w") as z:
        for n, b in members.items():
            z.writestr(n, json.dumps(header) if n == "header.json" else b)
    with pytest.raises(ValueError, match="format version 4"):
        io.load_model(tmp_path / "future.npz")
    v2 = dict(header, version=2)                 # the previous layout stays readable
    np.savez(tmp_path / "v2.npz", header=np.asarray(json.dumps(v2)), a0=np.ones(3))
    w, meta = io.load_model(tmp_path / "v2.npz")
    assert w.tolist() == [1.0, 1.0, 1.0] and meta["lam"] == 1.0
    (tmp_path / "text.npz").write_text("1 qid:1 1:0.5\n")
    with pytest.raises(ValueError, match="not a rankjax model file") as e:
        io.load_model(tmp_path / "text.npz")
    assert "pickle" not in str(e.value)
    np.savez(tmp_path / "v1.npz", weights=np.ones(3), format=np.asarray("rankjax-linear-model"),
             version=np.asarray(1))
    with pytest.raises(ValueError, match="format version 1"):
        io.load_model(tmp_path / "v1.npz")
    np.savez(tmp_path / "foreign.npz", weights=np.ones(3))
    with pytest.raises(ValueError, match="not a rankjax model"):
        io.load_model(tmp_path / "foreign.npz")
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(ValueError, match="not a readable rankjax model"):
        io.load_model(tmp_path / "junk.npz")
    full = m.read_bytes()
    (tmp_path / "cut.npz").write_bytes(full[: len(full) // 2])
    with pytest.raises(ValueError, match="rankjax model"):
        io.load_model(tmp_path / "cut.npz")


def test_reader_refuses_huge_dense_and_out_of_range_ids(tmp_path):
    p = tmp_path / "wide.txt"
    p.write_text("1 qid:1 1000000000:1\n0 qid:1 1:1\n")
    with pytest.raises(ValueError, match="GiB; read it with sparse=True"):
        io.read_svmlight(p)
    d = io.read_svmlight(p, sparse=True)
    assert d.X.shape == (2, 10**9) and d.X.nnz == 2
    big = sp.csr_matrix((np.ones(1), (np.zeros(1, np.int64), np.array([3 * 10**9]))),
                        shape=(1, 3 * 10**9 + 1))
    with pytest.raises(ValueError, match="int32"):
        io.to_bcoo(big)
    p.write_text(f"1 qid:1 {3 * 10**9}:1\n")
    with pytest.raises(ValueError, match="beyond 2"):
        io.read_svmlight(p, sparse=True)
    q = tmp_path / "q.txt"
    q.write_text(f"1 qid:{2**64} 1:1\n")
    with pytest.raises(ValueError, match="line 1: qid is outside the int64 range"):
        io.read_svmlight(q)
    with pytest.raises(ValueError, match="NaN"):
        io.normalize_per_query(np.array([[np.nan, 1.0], [0.0, 2.0]]), [0, 0])


def _every_model():
    """``(data, [one model or path of every type])``, the precomputed-kernel ones scoring
    a test kernel ``[m_test, m]``, the rest features ``[m_test, n]``."""
    import rankjax as rj
    from rankjax.solvers import MappedModel, ScaledModel
    d = rj.make_ranking_data(6, num_features=4, seed=0)
    g = rj.query_graph(d.qid)
    K = d.X @ d.X.T
    kern = rj.gaussian_kernel(0.3)
    nys = rj.fit(rj.Problem(d.X, d.y, g), rj.Nystrom(kern, 8), lam=1.0).value
    return d, [
        rj.fit(rj.Problem(d.X, d.y, g), rj.Primal(), lam=1.0).value,
        rj.fit(rj.Problem(K, d.y, g, precomputed=True), rj.Dual(), lam=1.0).value,
        rj.fit(rj.Problem(d.X, d.y, g), rj.Dual(kern), lam=1.0).value,
        nys,
        ScaledModel(np.array([1.0, 0.5, 2.0, 1.0]), nys),
        MappedModel(rj.learn_feature_map(d.X * 10), nys),
        rj.BlendModel(nys, rj.fit(rj.Problem(d.X, d.y, g), rj.Primal(), lam=1.0).value,
                      np.array(0.25)),
        rj.path(rj.Problem(d.X, d.y, g), rj.Primal(), lams=[1.0, 2.0]).value,
        rj.path(rj.Problem(K, d.y, g, precomputed=True), rj.Dual(), lams=[1.0]).value,
        rj.path(rj.Problem(d.X, d.y, g), rj.Nystrom(rj.polynomial_kernel(2), 8), lams=[1.0]).value,
        rj.kpcrank(K, d.y, g, components=3),
        rj.ranksvm_l2(d.X, d.y, d.qid),
        rj.ranksvm_kernel(d.X, d.y, d.qid, kernel=kern, basis=10),
        rj.rankboost(d.X, d.y, d.qid, rounds=3),
        rj.fit(rj.Problem(d.X, d.y, g), rj.CG(), lam=1.0),
        gp_pairwise_gaussian(K, [0, 1], [1, 2], [1.0, 0.5], noise_var=1.0),
    ]


def _takes_kernel(model):
    import rankjax as rj
    return isinstance(model, (rj.DualModel, DualPath, KPCModel, PairwiseGP))


def test_every_model_type_round_trips(tmp_path):
    import jax
    import rankjax as rj
    d, models = _every_model()
    for i, model in enumerate(models):
        path = tmp_path / f"m{i}.npz"
        io.save_model(path, model, names=["a", "b", "c", "d"])
        back, meta = io.load_model(path)
        assert type(back) is type(model) and meta == {"names": ["a", "b", "c", "d"]}
        for a, b in zip(jax.tree.leaves(model), jax.tree.leaves(back)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), strict=True)  # 0-d too
        if hasattr(model, "predict") and not _takes_kernel(model):
            np.testing.assert_array_equal(rj.predict(back, d.X), rj.predict(model, d.X))


def test_every_model_type_exports_with_a_symbolic_batch():
    """``jax.export`` of ``predict`` taking the model as an argument, the batch of test rows
    symbolic: exported, serialized, loaded and run on 7 rows (and on 3), equal to
    ``predict``. Kernel models score a symbolic batch in row blocks."""
    pytest.importorskip("flatbuffers")
    import jax
    import jax.numpy as jnp
    from jax import export
    import rankjax as rj
    d, models = _every_model()
    K = d.X @ d.X.T
    (b,) = export.symbolic_shape("b")
    for model in models:
        if not hasattr(model, "predict"):
            continue
        T = K if _takes_kernel(model) else d.X
        spec = jax.ShapeDtypeStruct((b, T.shape[1]), jnp.asarray(T).dtype)
        exp = export.export(jax.jit(lambda m, X: rj.predict(m, X)))(model, spec)
        back = export.deserialize(exp.serialize())
        for rows in (7, 3):
            want = np.asarray(rj.predict(model, T[:rows]))
            got = np.asarray(back.call(model, jnp.asarray(T[:rows])))
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(want).max()),
                                       err_msg=type(model).__name__)


def test_vectorised_reader_equals_scikit_learn_on_ragged_sparse_files(tmp_path):
    skd = pytest.importorskip("sklearn.datasets")
    import scipy.sparse as sp
    rng = np.random.default_rng(0)
    X = sp.random(300, 50, density=0.1, random_state=1, format="csr")
    X.data = np.round(X.data * 10 - 5, 4)
    y, qid = rng.integers(0, 4, 300).astype(float), np.sort(rng.integers(0, 20, 300))
    io.write_svmlight(tmp_path / "r.txt", X.toarray(), y, qid,
                      comments=[f"doc {i}" if i % 7 == 0 else "" for i in range(300)])
    ours = io.read_svmlight(tmp_path / "r.txt", sparse=True, num_features=50)
    Xs, ys, qs = skd.load_svmlight_file(str(tmp_path / "r.txt"), n_features=50, query_id=True)
    assert abs(ours.X - Xs).max() == 0 and np.array_equal(ours.y, ys) and np.array_equal(ours.qid, qs)
    assert ours.comments[7] == "doc 7" and ours.comments[1] == ""
    lines = (tmp_path / "r.txt").read_text().splitlines()
    lines[150] = lines[150].replace(":", "::", 1)          # one malformed token: the line is named
    (tmp_path / "bad.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 151"):
        io.read_svmlight(tmp_path / "bad.txt")


def test_drop_extra_features_reads_with_the_training_width(tmp_path):
    X = np.arange(12.0).reshape(3, 4) + 1
    io.write_svmlight(tmp_path / "w.txt", X, np.ones(3), np.array([0, 0, 1]))
    with pytest.raises(ValueError, match="drop_extra"):
        io.read_svmlight(tmp_path / "w.txt", num_features=2)
    d = io.read_svmlight(tmp_path / "w.txt", num_features=2, drop_extra=True)
    np.testing.assert_array_equal(d.X, X[:, :2])


def test_compressed_svmlight_reads_like_the_plain_file(tmp_path):
    import bz2
    import gzip
    import lzma
    src = pathlib.Path(__file__).parents[2] / "shared" / "data" / "mq2008" / "S1.txt.gz"
    if not src.exists():
        pytest.skip("../shared/data/mq2008 is absent")
    plain = tmp_path / "S1.txt"
    plain.write_bytes(gzip.open(src).read())
    ref = io.read_svmlight(plain)
    for mod, ext in ((gzip, "gz"), (bz2, "bz2"), (lzma, "xz")):
        path = tmp_path / f"S1.txt.{ext}"
        with mod.open(path, "wb") as fh:
            fh.write(plain.read_bytes()[:200_000].rsplit(b"\n", 1)[0] + b"\n")
        part = io.read_svmlight(path)
        n = part.X.shape[0]
        np.testing.assert_array_equal(part.X, ref.X[:n, :part.X.shape[1]])
        np.testing.assert_array_equal(part.qid, ref.qid[:n])
    d = io.read_svmlight(src)
    np.testing.assert_array_equal(d.X, ref.X)
    np.testing.assert_array_equal(d.y, ref.y)
    np.testing.assert_array_equal(d.qid, ref.qid)
    assert d.comments == ref.comments


def test_iter_svmlight_reads_lightgbm_query_files(tmp_path):
    """A file without qid: streams with the queries of its ``.query`` file (as
    ``read_svmlight``); sizes that do not add up, or both kinds of queries, are errors."""
    from rankjax import make_ranking_data
    d = make_ranking_data(9, num_features=4, seed=2)
    p = tmp_path / "d.train"
    io.write_svmlight(p, d.X, d.y)
    io.write_groups(str(p) + ".query", io.qid_to_groups(d.qid))
    ref = io.read_svmlight(p)
    chunks = list(io.iter_svmlight(p, num_features=4, chunk_rows=25, dtype=np.float64))
    assert len(chunks) > 1
    np.testing.assert_array_equal(np.concatenate([c[0] for c in chunks]), np.asarray(ref.X))
    np.testing.assert_array_equal(np.concatenate([c[2] for c in chunks]), np.asarray(ref.qid))
    for c in chunks:                                # whole queries in every chunk
        assert not set(c[2]) & set(np.concatenate([o[2] for o in chunks if o is not c]))
    io.write_groups(tmp_path / "short.query", io.qid_to_groups(d.qid)[:-1])
    with pytest.raises(ValueError, match="add up"):
        list(io.iter_svmlight(p, num_features=4, query_file=tmp_path / "short.query"))
    q = tmp_path / "q.train"
    io.write_svmlight(q, d.X, d.y, d.qid)
    with pytest.raises(ValueError, match="give one"):
        list(io.iter_svmlight(q, num_features=4, query_file=str(p) + ".query"))


def test_write_svmlight_round_trips_exactly_with_comments(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 7)) * 10.0 ** rng.integers(-8, 8, (50, 7))
    X[rng.random((50, 7)) < 0.4] = 0
    X[0, 0], X[1, 1] = 3.0, -2.0                      # whole numbers written as integers
    y = rng.integers(0, 5, 50).astype(float)
    qid = np.repeat(np.arange(10), 5)
    p = tmp_path / "w.txt"
    io.write_svmlight(p, X, y, qid, comments=["c"] * 49 + [""])
    r = io.read_svmlight(p)
    np.testing.assert_array_equal(np.asarray(r.X), X)
    np.testing.assert_array_equal(r.y, y)
    np.testing.assert_array_equal(r.qid, qid)
    first = p.read_text().splitlines()[0]
    assert first.startswith(f"{int(y[0])} qid:0 1:3 ") and first.endswith(" # c")


def test_readers_refuse_split_tokens_and_truncated_npy(tmp_path):
    p = tmp_path / "d.txt"
    for text in ("1 qid:1 3: 1\n0 qid:1 1:2\n", "1 qid:1 3 :1\n", "1 qid:1 3:\n"):
        p.write_text(text)
        with pytest.raises(ValueError, match="line 1"):
            io.read_svmlight(p)
        with pytest.raises(ValueError, match="line 1"):
            list(io.iter_svmlight(p, num_features=3))
    p.write_text("1 qid:1 3:1 # a: b\n0 qid:1 1:2\n")     # a colon in a comment is fine
    assert io.read_svmlight(p).X.shape == (2, 3)
    X = np.ones((50, 3))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", np.ones(50))
    np.save(tmp_path / "q.npy", np.arange(50))
    full = (tmp_path / "X.npy").read_bytes()
    (tmp_path / "X.npy").write_bytes(full[:-100])
    with pytest.raises(ValueError, match="X.npy is truncated"):
        io.iter_npy(tmp_path / "X.npy", tmp_path / "y.npy", tmp_path / "q.npy")


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402
from rankjax.learners.gp import PairwiseGP, gp_pairwise_gaussian  # noqa: E402
from rankjax.learners.kpcrank import KPCModel  # noqa: E402
from rankjax.solvers.models import DualPath  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["io.read_svmlight"] = [
        (lambda d: io.read_svmlight(d.bad_file), E(ValueError, "line 2")),
        (lambda d: io.read_svmlight(d.tmp / "missing.txt"), E(FileNotFoundError, "missing")),
        (lambda d: io.read_svmlight(d.good_file, num_features=0), E(ValueError, "num_features")),
        (lambda d: io.read_svmlight(d.good_file, num_features=1), E(ValueError, "num_features|feature 2")),
    ]
BAD_INPUT["io.write_svmlight"] = [
        (lambda d: io.write_svmlight(d.keep, d.X, np.full(d.y.shape, np.nan)), E(ValueError, "y")),
        (lambda d: io.write_svmlight(d.keep, d.X, d.y, d.qid + 0.5), E((TypeError, ValueError), "qid")),
        (lambda d: io.write_svmlight(d.keep, d.X, d.y[:-1]), E(ValueError, "y")),
    ]
BAD_INPUT["io.read_groups"] = [
        (lambda d: io.read_groups(d.bad_file), E(ValueError, "line")),
    ]
BAD_INPUT["io.write_groups"] = [
        (lambda d: io.write_groups(d.keep, [2.5, 3]), E((TypeError, ValueError), "sizes must hold integers")),
        (lambda d: io.write_groups(d.keep, [2, 0]), E(ValueError, "sizes")),
    ]
BAD_INPUT["io.groups_to_qid"] = [
        (lambda d: io.groups_to_qid([2, -1]), E(ValueError, "sizes")),
        (lambda d: io.groups_to_qid([2.0, 1.5]), E((TypeError, ValueError), "sizes must hold integers")),
    ]
BAD_INPUT["io.qid_to_groups"] = [
        (lambda d: io.qid_to_groups(np.array([0, 1, 0])), E(ValueError, "contiguous|sorted")),
        (lambda d: io.qid_to_groups(np.array([0.5, 1.0])), E((TypeError, ValueError), "qid")),
    ]
BAD_INPUT["io.read_preferences"] = [
        (lambda d: io.read_preferences(d.bad_file), E(ValueError, "line")),
    ]
BAD_INPUT["io.write_preferences"] = [
        (lambda d: io.write_preferences(d.keep, [0.5], [1]), E((TypeError, ValueError), "head")),
        (lambda d: io.write_preferences(d.keep, [0, 1], [1]), E(ValueError, "length")),
    ]
BAD_INPUT["io.normalize_per_query"] = [
        (lambda d: io.normalize_per_query(d.nanv[:, None], d.qid), E(ValueError, "X")),
        (lambda d: io.normalize_per_query(d.X, d.qid[:-1]), E(ValueError, "qid")),
        (lambda d: io.normalize_per_query(np.ones((3, 1)), np.zeros(3, int)),   # constant: 0
         V(lambda Z: np.all(Z == 0))),
    ]
BAD_INPUT["io.to_bcoo"] = [
        (lambda d: io.to_bcoo(np.ones((2, 2, 2))), E(ValueError, "2-D")),
    ]
BAD_INPUT["io.segment_ids"] = [
        (lambda d: io.segment_ids(np.array([1.5, "a"], dtype=object)), E(TypeError, "qid")),
        (lambda d: io.segment_ids(np.array(["b", "a", "b"])),
         V(lambda s: s.seg.tolist() == [1, 0, 1] and s.num_queries == 2)),
    ]
BAD_INPUT["io.save_model"] = [
        (lambda d: io.save_model(d.keep, np.ones(3), note=None), E(TypeError, "note")),
        (lambda d: io.save_model(d.keep, np.r_[np.nan, 1.0]), E(ValueError, "weights")),
    ]
BAD_INPUT["io.load_model"] = [
        (lambda d: io.load_model(d.foreign), E(ValueError, "model file")),
        (lambda d: io.load_model(d.bad_file), E(ValueError, "model file")),
    ]
BAD_INPUT["io.iter_npy"] = [
        (lambda d: io.iter_npy(d.X[:, 0], d.y, d.qid), E(ValueError, "X")),
        (lambda d: io.iter_npy(d.X, d.y[:-1], d.qid), E(ValueError, "y")),
        (lambda d: io.iter_npy(d.X, d.y, d.qid, chunk_rows=1.5), E(TypeError, "chunk_rows")),
        (lambda d: io.iter_npy(d.bad_file, d.y, d.qid), E(ValueError, "npy")),
    ]
BAD_INPUT["io.iter_svmlight"] = [
        (lambda d: list(io.iter_svmlight(d.bad_file, num_features=2)), E(ValueError, "line 2")),
        (lambda d: io.iter_svmlight(d.tmp / "missing.txt", num_features=2),
         E(ValueError, "exist")),
        (lambda d: list(io.iter_svmlight(d.good_file, num_features=1)),
         E(ValueError, "num_features")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)


def test_io_failed_writes_leave_the_old_file(surface):
    for call, _ in (BAD_INPUT["io.write_svmlight"] + BAD_INPUT["io.write_groups"]
                    + BAD_INPUT["io.save_model"]):
        with pytest.raises((ValueError, TypeError)):
            call(surface)
        assert surface.keep.read_text() == "old contents\n"


def test_written_cells_read_back_bit_for_bit_and_match_repr_parsing(tmp_path):
    """The digit-arithmetic cells (decimals up to 9 places) and the repr fallback (any
    other float) read back exactly; every cell parses to the same float as Python's repr."""
    from rankjax.io.cells import format_cells
    rng = np.random.default_rng(5)
    v = np.concatenate([
        [round(x, int(d)) for x, d in zip(rng.random(2000), rng.integers(0, 10, 2000))],
        rng.normal(size=500) * 10.0 ** rng.integers(-12, 12, 500),      # any float
        [1 / 3, -2.5, 1e-9, 123456789.125, 2.0 ** 52 + 1, 2.0 ** 60, -1e300, 5e-324,
         0.1 + 0.2, 1.0, -7.0, 9.999999999, 0.000000001, 4503599627370495.5]])
    cols = rng.integers(1, 10 ** 6, v.size)
    buf, n = format_cells(cols, v)
    cells = buf.tobytes().decode().split(" ")[:-1]
    assert len(cells) == v.size and n.sum() == buf.size
    got = np.array([float(c.split(":")[1]) for c in cells])
    np.testing.assert_array_equal(got, v)
    assert [int(c.split(":")[0]) for c in cells] == cols.tolist()
    fixed = [c.split(":")[1] for c in cells if "e" not in c]
    assert all(not (t.endswith("0") and "." in t) or t.endswith(".0") for t in fixed)  # shortest
    X = np.zeros((60, 50))
    X.ravel()[rng.choice(3000, 1500, replace=False)] = v[:1500]
    y, qid = rng.integers(0, 5, 60).astype(float), np.repeat(np.arange(6), 10)
    io.write_svmlight(tmp_path / "x.txt", X, y, qid, comments=["c"] * 30 + [""] * 30)
    d = io.read_svmlight(tmp_path / "x.txt", num_features=50, dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(d.X), X)
    np.testing.assert_array_equal(d.y, y)
    np.testing.assert_array_equal(d.qid, qid)
