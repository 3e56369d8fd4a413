"""A streamed problem (``rj.scale.stream``, out of core) solved by the verbs equals the
in-memory problem (float64), from lists, .npy files, memmaps and SVMlight files;
leave-query-out by chunks equals the in-memory hold-out."""
import logging

import numpy as np
import pytest

import rankjax as rj
from rankjax import io

LAMS = np.array([1e-2, 1.0, 100.0])
GRAPHS = [dict(), dict(exclude_ties=True), dict(normalized=False, query_weights="pairs")]


def _data(seed=0, num_queries=30, n=5):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 25, num_queries)
    qid = np.repeat(rng.permutation(500)[:num_queries], sizes)      # contiguous, unsorted ids
    m = qid.shape[0]
    X = rng.standard_normal((m, n))
    y = rng.integers(0, 4, m).astype(float)
    return X, y, qid


def _chunks(X, y, qid, rows=60):
    return list(io.iter_npy(X, y, qid, chunk_rows=rows))


@pytest.mark.parametrize("kw", GRAPHS, ids=["normalized", "ties", "pairs"])
def test_stream_equals_in_memory(kw):
    X, y, qid = _data()
    chunks = _chunks(X, y, qid)
    assert len(chunks) > 3
    fit = rj.path(rj.scale.stream(chunks, **kw), rj.Primal(), lams=LAMS)
    g = rj.query_graph(qid, y, **kw)
    ref = rj.path(rj.Problem(X, y, g), rj.Primal(), lams=LAMS).value
    np.testing.assert_allclose(fit.value.weights, ref.weights, rtol=1e-10, atol=1e-10)
    assert fit.stats == {"rows": len(y), "queries": len(np.unique(qid)), "chunks": len(chunks)}
    one = rj.fit(rj.scale.stream(chunks, **kw), rj.Primal(), lam=1.0)
    np.testing.assert_allclose(one.value.weights, ref.weights[1], rtol=1e-10, atol=1e-10)


def test_multi_output_and_float32_chunks():
    X, y, qid = _data(1)
    Y = np.stack([y, X[:, 0]], 1)
    fit = rj.path(rj.scale.stream(io.iter_npy(X, Y, qid, chunk_rows=50)), rj.Primal(), lams=LAMS)
    ref = rj.path(rj.Problem(X, Y, rj.query_graph(qid)), rj.Primal(), lams=LAMS).value
    np.testing.assert_allclose(fit.value.weights, ref.weights, rtol=1e-10, atol=1e-10)
    fit32 = rj.path(rj.scale.stream(io.iter_npy(X.astype(np.float32), y, qid, chunk_rows=50)),
                    rj.Primal(), lams=LAMS)
    np.testing.assert_allclose(fit32.value.weights, ref.weights[..., 0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("metric,kw", [(rj.ndcg, dict(k=5)), (rj.pairwise_error, {})])
def test_holdout_by_chunks_equals_the_in_memory_holdout(metric, kw):
    X, y, qid = _data(2)
    chunks = _chunks(X, y, qid)
    got = rj.holdout(rj.scale.stream(chunks), rj.Primal(), lams=LAMS).value
    h = rj.holdout(rj.Problem(X, y, rj.query_graph(qid)), rj.Primal(), lams=LAMS).value
    order = np.concatenate([c[2] for c in chunks])             # chunk order is row order here
    assert np.array_equal(order, qid)
    np.testing.assert_allclose(got.predictions, h.predictions, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose([metric(p, y, qid, **kw) for p in got.predictions],
                               [metric(p, y, qid, **kw) for p in h.predictions], rtol=1e-10)


def test_selection_on_validation_data():
    X, y, qid = _data(3)
    Xv, yv, qv = _data(4, num_queries=8)
    valid = rj.Problem(Xv, yv, qv)
    fit = rj.path(rj.scale.stream(_chunks(X, y, qid), valid=valid), rj.Primal(), lams=LAMS).value
    ref = rj.path(rj.Problem(X, y, qid, valid=valid), rj.Primal(), lams=LAMS).value
    np.testing.assert_allclose(fit.valid_scores, ref.valid_scores, rtol=1e-10, atol=1e-10)


def test_npy_files_memmaps_and_progress(tmp_path, caplog):
    X, y, qid = _data(5)
    for name, a in (("X", X.astype(np.float32)), ("y", y), ("q", qid)):
        np.save(tmp_path / f"{name}.npy", a)
    files = io.iter_npy(tmp_path / "X.npy", tmp_path / "y.npy", tmp_path / "q.npy", chunk_rows=40)
    maps = io.iter_npy(np.load(tmp_path / "X.npy", mmap_mode="r"), y, qid, chunk_rows=40)
    with caplog.at_level(logging.INFO, logger="rankjax"):
        a = rj.path(rj.scale.stream(files, verbose=1), rj.Primal(), lams=LAMS)
    b = rj.path(rj.scale.stream(maps), rj.Primal(), lams=LAMS)
    np.testing.assert_allclose(a.value.weights, b.value.weights, rtol=1e-12, atol=1e-14)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == a.stats["chunks"] and all("rows/s" in t for t in lines)
    for Xc, yc, qc in files:                                      # never cuts a query
        assert Xc.dtype == np.float32 and Xc.shape[0] == yc.shape[0] == qc.shape[0]
    ends = np.cumsum([c[2].shape[0] for c in files])[:-1]
    assert np.all(qid[ends] != qid[ends - 1])


def test_svmlight_chunks_equal_read_svmlight(tmp_path):
    X, y, qid = _data(6)
    X[np.abs(X) < 0.5] = 0
    path = tmp_path / "d.txt"
    io.write_svmlight(path, X, y, qid)
    chunks = io.iter_svmlight(path, num_features=X.shape[1], chunk_rows=37, dtype=np.float64)
    parts = list(chunks)
    assert len(parts) > 3
    np.testing.assert_array_equal(np.concatenate([c[0] for c in parts]), X)
    np.testing.assert_array_equal(np.concatenate([c[2] for c in parts]), qid)
    fit = rj.holdout(rj.scale.stream(chunks), rj.Primal(), lams=LAMS)
    ref = rj.path(rj.Problem(X, y, rj.query_graph(qid)), rj.Primal(), lams=LAMS).value
    np.testing.assert_allclose(fit.value.path.weights, ref.weights, rtol=1e-10, atol=1e-10)


def test_long_query_is_a_chunk_of_its_own():
    qid = np.repeat([1, 2, 3], [3, 50, 2])
    sizes = [c[2].shape[0] for c in io.iter_npy(np.zeros((55, 1)), np.zeros(55), qid,
                                                 chunk_rows=10)]
    assert sizes == [3, 50, 2]


def test_errors(tmp_path):
    X, y, qid = _data(7)
    chunks = _chunks(X, y, qid)
    path = lambda c, lams=LAMS, **kw: rj.path(rj.scale.stream(c, **kw), rj.Primal(), lams=lams)  # noqa
    with pytest.raises(ValueError, match="earlier chunk"):
        path(chunks + chunks[:1])
    gen = (c for c in chunks)
    with pytest.raises(ValueError, match="re-iterable"):
        rj.holdout(rj.scale.stream(gen), rj.Primal(), lams=LAMS)
    with pytest.raises(ValueError, match="columns"):
        path([chunks[0], (chunks[1][0][:, :2],) + chunks[1][1:]])
    with pytest.raises(ValueError, match="empty"):
        path([])
    with pytest.raises(TypeError, match="chunk 0"):
        path([X])
    with pytest.raises(ValueError, match="NaN"):
        path([(np.full((2, 2), np.nan), [1., 0.], [1, 1])])
    with pytest.raises(ValueError, match="query_weights"):
        path(chunks, query_weights=np.ones(3))
    with pytest.raises(ValueError, match="lams"):
        path(chunks, lams=[-1.0])
    with pytest.raises(TypeError, match="leave-query-out"):
        rj.holdout(rj.scale.stream(chunks), rj.Primal(), lams=LAMS, folds=3)
    with pytest.raises(TypeError, match="Dual does not take a streamed problem"):
        rj.path(rj.scale.stream(chunks), rj.Dual(), lams=LAMS)
    with pytest.raises(ValueError, match="qid"):
        io.iter_npy(X, y, qid[:-1])
    with pytest.raises(ValueError, match="chunk_rows"):
        io.iter_npy(X, y, qid, chunk_rows=0)
    bad = tmp_path / "bad.txt"
    bad.write_text("1 qid:1 1:0.5\n2 qid:1 x:1\n")
    with pytest.raises(ValueError, match="line 2"):
        list(io.iter_svmlight(bad, num_features=2))
    noq = tmp_path / "noq.txt"
    noq.write_text("1 1:0.5\n")
    with pytest.raises(ValueError, match="qid"):
        list(io.iter_svmlight(noq, num_features=2))
    with pytest.raises(ValueError, match="num_features"):
        list(io.iter_svmlight(noq, num_features=0))


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["scale.stream"] = [
    (lambda d: rj.scale.stream((d.X, d.y, d.qid)), E(TypeError, "chunks")),
    (lambda d: rj.path(rj.scale.stream([(d.X, d.y, d.qid)]), rj.Primal(), lams=[0.0]), E(ValueError, "lams")),
    (lambda d: rj.path(rj.scale.stream([(d.X, d.nanv, d.qid)]), rj.Primal(), lams=[1.0]), E(ValueError, "y")),
    (
        lambda d: rj.path(rj.scale.stream([(d.X, d.y, d.qid[:-1])]), rj.Primal(), lams=[1.0]),
        E(ValueError, "qid"),
    ),
    (
        lambda d: rj.path(rj.scale.stream([(d.X, d.y, d.qid)] * 2), rj.Primal(), lams=[1.0]),
        E(ValueError, "earlier chunk"),
    ),
    (lambda d: rj.scale.stream([(d.X, d.y, d.qid)], valid=(d.X, d.y)), E(TypeError, "valid")),
    (lambda d: rj.scale.stream([(d.X, d.y, d.qid)], normalized="yes"), E(TypeError, "normalized")),
    (
        lambda d: rj.holdout(rj.scale.stream([(d.X, d.ties, d.qid)]), rj.Primal(), lams=[1.0]).value,
        V(lambda h: np.all(np.asarray(h.predictions) == 0)),
    ),
]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
