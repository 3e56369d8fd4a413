"""Sharding by whole queries equals the single-device results (float64).

The device tests need 8 devices; XLA's CPU device count is fixed when JAX starts, so
``test_on_eight_simulated_devices`` re-runs this module in a subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (where they run, not skip).
"""
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest
import scipy.sparse as sp

import rankjax as rj
from rankjax.solvers.cg import rankrls_cg
from rankjax.solvers.path import rankrls_primal_path

EIGHT = len(jax.devices("cpu")) >= 8       # simulated CPU devices, on any machine
needs8 = pytest.mark.skipif(not EIGHT, reason="runs in the 8-device subprocess")
ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_on_eight_simulated_devices():
    if EIGHT:
        pytest.skip("already on 8 devices")
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")               # pinned: a GPU machine has other devices
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          "-o", "addopts=", str(pathlib.Path(__file__)), "-k",
                          "not eight_simulated and not two_process"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" not in out.stdout, out.stdout[-2000:]


def _data(seed=0, num_queries=25, n=6, max_size=30):
    """Unequal queries (1 to max_size rows), unsorted non-contiguous ids, graded labels."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_size, num_queries)
    qid = np.repeat(rng.permutation(1000)[:num_queries] * 3, sizes)
    rng.shuffle(qid)
    m = qid.shape[0]
    return rng.standard_normal((m, n)), rng.integers(0, 4, m).astype(float), qid


GRAPHS = {"normalized": {}, "ties_excluded": dict(exclude_ties=True),
          "unnormalized_pair_weights": dict(normalized=False, query_weights="pairs")}
LAMS = np.array([1e-3, 0.3, 10.0, 1e3])


# ----------------------------------------------------------------------------
# partition (host only: runs everywhere)

@pytest.mark.parametrize("D", [1, 3, 8, 40])
def test_partition_keeps_queries_whole_and_balances_rows(D):
    _, _, qid = _data(1)
    p = rj.scale.partition_queries(qid, D)
    rows = p.rows[p.rows >= 0]
    assert np.array_equal(np.sort(rows), np.arange(qid.shape[0]))      # every row once
    shard_of_row = np.repeat(np.arange(D), (p.rows >= 0).sum(1))
    by_query = {}
    for r, s in zip(p.rows[p.rows >= 0], shard_of_row):
        by_query.setdefault(qid[r], set()).add(s)
    assert all(len(s) == 1 for s in by_query.values())                 # never split
    assert np.array_equal(p.rows_per_shard, (p.rows >= 0).sum(1))
    biggest = np.bincount(np.unique(qid, return_inverse=True)[1]).max()
    assert p.rows_per_shard.max() - qid.shape[0] / D <= biggest
    assert p.rows.shape[1] % 8 == 0
    for row in p.rows:                                                  # original order
        kept = row[row >= 0]
        assert np.all(np.diff(kept) > 0)


def test_partition_errors():
    with pytest.raises(ValueError, match="num_shards"):
        rj.scale.partition_queries([1, 2], 0)
    with pytest.raises(TypeError, match="qid"):
        rj.scale.partition_queries([1.5, 2.0], 2)


def test_shard_data_errors():
    X, y, qid = _data()
    with pytest.raises(TypeError, match="QueryGraph"):
        rj.scale.shard_data(X, y, rj.identity_graph(len(y)))
    with pytest.raises(ValueError, match="rows"):
        rj.scale.shard_data(X[:-1], y[:-1], rj.query_graph(qid))
    with pytest.raises(TypeError, match="mesh"):
        rj.scale.shard_data(X, y, rj.query_graph(qid), mesh="all")
    with pytest.raises(TypeError, match="data"):
        rj.scale.sharded_primal_path((X, y), lams=[1.0])
    with pytest.raises(ValueError, match="lams"):
        rj.scale.sharded_primal_path(rj.scale.shard_data(X, y, rj.query_graph(qid)), lams=[-1.0])
    s = rj.scale.shard_data(X, y, rj.query_graph(qid))
    with pytest.raises(ValueError, match="scores"):
        rj.scale.sharded_metric(s, np.zeros(3), rj.ndcg)
    with pytest.raises(ValueError, match="scores"):
        rj.scale.sharded_metric(s, np.full(len(y), np.nan), rj.ndcg)
    with pytest.raises(ValueError, match="partition"):
        rj.scale.shard_data(X, y, rj.query_graph(qid),
                      partition=rj.scale.partition_queries(qid, jax.device_count() + 1))


# ----------------------------------------------------------------------------
# 8 devices

@needs8
def test_layout_has_unequal_devices():
    X, y, qid = _data()
    s = rj.scale.shard_data(X, y, rj.query_graph(qid))
    per = (s.rows >= 0).sum(1)
    assert s.rows.shape[0] == 8 and per.min() < per.max() < s.rows.shape[1]
    assert np.array_equal(s.unshard(s.shard_rows(y)), y)


@needs8
@pytest.mark.parametrize("kind", GRAPHS)
def test_sharded_path_and_holdout_equal_single_device(kind):
    X, y, qid = _data()
    g = rj.query_graph(qid, y, **GRAPHS[kind])
    s = rj.scale.shard_data(X, y, g)
    p = rj.scale.sharded_primal_path(s, lams=LAMS, train_scores=True)
    q = rankrls_primal_path(X, y, g, lams=LAMS, train_scores=True)
    np.testing.assert_allclose(p.weights, q.weights, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(p.train_scores, q.train_scores, rtol=1e-10, atol=1e-10)
    G, b = rj.scale.sharded_normal_equations(s)
    L = rj.laplacian_dense(g)
    np.testing.assert_allclose(G, X.T @ L @ X, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(b, X.T @ L @ y, rtol=1e-10, atol=1e-10)
    if kind == "unnormalized_pair_weights":
        return                       # same fold code as "normalized" (only edge weights differ)
    h = rj.scale.sharded_holdout(s, lams=LAMS)
    h0 = rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS).value
    np.testing.assert_allclose(h.predictions, h0.predictions, rtol=1e-8, atol=1e-8)


@needs8
def test_holdout_equals_retraining_without_each_query():
    X, y, qid = _data(2, num_queries=9, max_size=9)
    g = rj.query_graph(qid)
    h = rj.scale.sharded_holdout(rj.scale.shard_data(X, y, g), lams=[0.5])
    for q in np.unique(qid):
        out = qid == q
        w = rj.fit(rj.Problem(X[~out], y[~out], rj.query_graph(qid[~out])), rj.Primal(), lam=0.5).value.weights
        np.testing.assert_allclose(h.predictions[0, out], X[out] @ w, rtol=1e-8, atol=1e-8)


@needs8
def test_more_devices_than_queries_and_multi_output():
    X, y, qid = _data(3, num_queries=5)
    Y = np.stack([y, X[:, 0] + y], 1)
    g = rj.query_graph(qid)
    s = rj.scale.shard_data(X, Y, g)
    assert np.sum(s.rows.max(1) < 0) >= 3                      # devices with no row at all
    p = rj.scale.sharded_primal_path(s, lams=LAMS, train_scores=True)
    q = rankrls_primal_path(X, Y, g, lams=LAMS, train_scores=True)
    np.testing.assert_allclose(p.weights, q.weights, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(p.train_scores, q.train_scores, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(rj.scale.sharded_holdout(s, lams=LAMS).predictions,
                               rj.holdout(rj.Problem(X, Y, g), rj.Primal(), lams=LAMS).value.predictions,
                               rtol=1e-8, atol=1e-8)


@needs8
@pytest.mark.parametrize("kind", list(GRAPHS))
def test_sharded_falkon_equals_the_closed_form(kind):
    X, y, qid = _data(6)
    g = rj.query_graph(qid, y, **GRAPHS[kind])
    k = rj.gaussian_kernel(0.3)
    basis = np.arange(0, X.shape[0], 5)
    coef, r = rj.scale.sharded_falkon(rj.scale.shard_data(X, y, g), lam=0.3, kernel=k, basis=X[basis],
                                tol=1e-13, max_iter=300)
    f = rj.fit(rj.Problem(X, y, g), rj.Falkon(k, basis, options=rj.CG(tol=1e-13, max_iter=300)), lam=0.3)
    np.testing.assert_allclose(coef, f.coef, rtol=1e-6, atol=1e-8 * np.abs(np.asarray(f.coef)).max())
    blocked, _ = rj.scale.sharded_falkon(rj.scale.shard_data(X, y, g), lam=0.3, kernel=k, basis=X[basis],
                                   tol=1e-13, max_iter=300, block_rows=7)   # K_mR never kept
    np.testing.assert_allclose(blocked, coef, rtol=1e-9, atol=1e-10 * np.abs(np.asarray(coef)).max())
    # brute force: (K_Rm L K_mR + λ (K_RR + ε I)) a = K_Rm L y with the dense Laplacian
    K = np.asarray(rj.kernel_matrix(k, X, X[basis]))
    KRR = K[basis]
    eps = len(basis) * np.finfo(float).eps * KRR.diagonal().max()
    L = np.asarray(rj.laplacian_dense(g))
    a = np.linalg.solve(K.T @ L @ K + 0.3 * (KRR + eps * np.eye(len(basis))), K.T @ L @ y)
    np.testing.assert_allclose(coef, a, rtol=1e-6, atol=1e-8 * np.abs(a).max())


@needs8
@pytest.mark.parametrize("kind,sparse", [(k, False) for k in GRAPHS] + [("ties_excluded", True)])
def test_sharded_cg_equals_single_device(kind, sparse):
    X, y, qid = _data(4)
    if sparse:
        X = sp.csr_matrix(X * (np.random.default_rng(0).random(X.shape) < 0.4))
    g = rj.query_graph(qid, y, **GRAPHS[kind])
    s = rj.scale.shard_data(X, y, g)
    assert s.sparse == sparse
    r = rj.scale.sharded_cg(s, lam=0.7, tol=1e-13, max_iter=100)
    r0 = rj.fit(rj.Problem(X, y, g), rj.CG(tol=1e-13, max_iter=100), lam=0.7)
    np.testing.assert_allclose(r.weights, r0.weights, rtol=1e-10, atol=1e-10)
    w = rj.fit(rj.Problem(X.toarray() if sparse else X, y, g), rj.Primal(), lam=0.7).value.weights
    np.testing.assert_allclose(r.weights, w, rtol=1e-8, atol=1e-8)
    v = _data(5, num_queries=6)
    valid = (v[0], v[1], rj.query_graph(v[2]))
    r = rj.scale.sharded_cg(s, lam=0.0, valid=valid, metric=rj.ndcg, k=5, max_iter=30)
    r0 = rankrls_cg(X, y, g, lam=0.0, valid=valid, metric=rj.ndcg, k=5, max_iter=30)
    assert int(r.best_iteration) == int(r0.best_iteration)
    np.testing.assert_allclose(r.valid_history, r0.valid_history, rtol=1e-8, atol=1e-10)


@needs8
@pytest.mark.parametrize("metric,kw", [(rj.ndcg, dict(k=5)), (rj.pairwise_error, {}),
                                       (rj.mean_average_precision, dict(threshold=2))])
def test_sharded_metric_equals_single_device(metric, kw):
    X, y, qid = _data(6)
    s = rj.scale.shard_data(X, y, rj.query_graph(qid))
    F = X[:, :3].T                                              # three score vectors
    got = rj.scale.sharded_metric(s, F, metric, **kw)
    want = [metric(f, y, qid, **kw) for f in F]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    y2 = (y > 1).astype(float)
    np.testing.assert_allclose(rj.scale.sharded_metric(s, F[0], metric, y=y2, **kw),
                               metric(F[0], y2, qid, **kw), rtol=1e-12)


@needs8
def test_metric_with_no_valid_query_is_nan():
    X, y, qid = _data(7)
    s = rj.scale.shard_data(X, np.zeros_like(y), rj.query_graph(qid))
    assert np.isnan(rj.scale.sharded_metric(s, X[:, 0], rj.pairwise_error))


@needs8
@pytest.mark.parametrize("kernel", ["gaussian", "polynomial"])
def test_sharded_kernel_grid_equals_a_loop(kernel):
    X, y, qid = _data(8, num_queries=10, max_size=10)
    Xv, yv, qv = _data(9, num_queries=5, max_size=10)
    g = rj.query_graph(qid)
    lams, gammas = np.array([0.01, 1.0, 100.0]), np.array([0.01, 0.03, 0.1, 0.3, 1.0])
    r = rj.scale.sharded_kernel_grid(X, y, g, lams=lams, gammas=gammas, valid=(Xv, yv, qv),
                               metric=rj.ndcg, kernel=kernel, k=5)
    want = np.empty((5, 3))
    for i, gm in enumerate(gammas):
        k = rj.gaussian_kernel(gm) if kernel == "gaussian" else rj.polynomial_kernel(2, gm)
        path = rj.path(rj.Problem(rj.kernel_matrix(k, X), y, g, valid=rj.Problem(rj.kernel_matrix(k, Xv, X), np.zeros(np.shape(rj.kernel_matrix(k, Xv, X))[0]), precomputed=True), precomputed=True),
                       rj.Dual(), lams=lams).value
        want[i] = [-rj.ndcg(f, yv, qv, k=5) for f in path.valid_scores]
    np.testing.assert_allclose(r.scores, -want.ravel(), rtol=1e-8, atol=1e-10)   # γ-major
    np.testing.assert_array_equal(r.gammas, np.repeat(gammas, 3))
    np.testing.assert_array_equal(r.lams, np.tile(lams, 5))
    i, j = np.unravel_index(np.argmin(want), want.shape)
    assert (r.gamma, r.lam, r.best_index) == (gammas[i], lams[j], i * 3 + j)


@needs8
def test_second_call_compiles_nothing():
    from test_core import _compiles
    X, y, qid = _data(10)
    rng = np.random.default_rng(1)
    s = rj.scale.shard_data(X, y, rj.query_graph(qid))
    s2 = rj.scale.shard_data(rng.standard_normal(X.shape), rng.permutation(y), rj.query_graph(qid))
    calls = [lambda d: rj.scale.sharded_primal_path(d, lams=LAMS, train_scores=True),
             lambda d: rj.scale.sharded_holdout(d, lams=LAMS),
             lambda d: rj.scale.sharded_cg(d, lam=1.0),
             lambda d: rj.scale.sharded_metric(d, X[:, 0], rj.ndcg)]
    for call in calls:
        _compiles(lambda: call(s))
        assert _compiles(lambda: call(s2)) == 0


# ----------------------------------------------------------------------------
# two processes (jax.distributed over loopback, CPU)

@pytest.mark.slow
def test_two_process_example_matches_single_process(tmp_path):
    if EIGHT:
        pytest.skip("runs in the main test process")
    out = tmp_path / "two.npz"
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "multihost.py"), "--launch", "2",
                          "--queries", "30", "--out", str(out)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    got = np.load(out)
    assert (int(got["processes"]), int(got["devices"])) == (2, 4)
    d = rj.make_ranking_data(30, num_features=20, seed=0)       # the example's data
    g = rj.query_graph(d.qid)
    lams = np.logspace(-2, 3, 6)
    path = rj.path(rj.Problem(d.X, d.y, g), rj.Primal(), lams=lams).value
    np.testing.assert_allclose(got["weights"], path.weights, rtol=1e-10, atol=1e-10)
    h = rj.holdout(rj.Problem(d.X, d.y, g), rj.Primal(), lams=lams).value
    np.testing.assert_allclose(got["holdout_ndcg"],
                               [rj.ndcg(p, d.y, d.qid, k=10) for p in h.predictions], rtol=1e-10)
    np.testing.assert_allclose(got["cg_weights"],
                               rj.fit(rj.Problem(d.X, d.y, g), rj.CG(tol=1e-12), lam=1.0).weights,
                               rtol=1e-8, atol=1e-10)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, nan, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["scale.sharded_falkon"] = [
        (lambda d: rj.scale.sharded_falkon(d.sharded, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                     basis=d.X[:, :-1]), E(ValueError, "basis")),
        (lambda d: rj.scale.sharded_falkon(d.sharded, lam=0.0, kernel=rj.gaussian_kernel(1.0),
                                     basis=d.X[:3]), E(ValueError, "lam")),
        (lambda d: rj.scale.sharded_falkon(d.sharded, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                     basis=d.X[:3], block_rows=0), E(ValueError, "block_rows")),
    ]
BAD_INPUT["scale.partition_queries"] = [
        (lambda d: rj.scale.partition_queries(d.qid, 0), E(ValueError, "num_shards")),
        (lambda d: rj.scale.partition_queries(d.qid, 2.5), E(TypeError, "num_shards")),
        (lambda d: rj.scale.partition_queries(d.qid, 2, multiple=0), E(ValueError, "multiple")),
        (lambda d: rj.scale.partition_queries(d.qid.astype(float), 2), E(TypeError, "qid")),
        (lambda d: rj.scale.partition_queries(d.qid, 50), V(lambda p: p.rows.shape[0] == 50)),
    ]
BAD_INPUT["scale.shard_data"] = [
        (lambda d: rj.scale.shard_data(d.X, d.y, d.pref), E(TypeError, "QueryGraph")),
        (lambda d: rj.scale.shard_data(d.X[:-1], d.y[:-1], d.g), E(ValueError, "rows")),
        (lambda d: rj.scale.shard_data(d.X, d.nanv, d.g), E(ValueError, "y")),
        (lambda d: rj.scale.shard_data(d.X, d.y, d.g, mesh="cpu"), E(TypeError, "mesh")),
        (lambda d: rj.scale.shard_data(d.X, d.y, d.g, partition=(1, 2)), E(TypeError, "partition")),
        (lambda d: rj.scale.shard_data(d.X, d.y, d.g, partition=rj.scale.partition_queries(d.qid, 3)),
         E(ValueError, "partition")),
    ]
BAD_INPUT["scale.sharded_primal_path"] = [
        (lambda d: rj.scale.sharded_primal_path((d.X, d.y), lams=[1.0]), E(TypeError, "data")),
        (lambda d: rj.scale.sharded_primal_path(d.sharded, lams=[0.0]), E(ValueError, "lams")),
        (lambda d: rj.scale.sharded_primal_path(d.sharded, lams=[[1.0]]), E(ValueError, "lams")),
    ]
BAD_INPUT["scale.sharded_normal_equations"] = [
        (lambda d: rj.scale.sharded_normal_equations(d.X), E(TypeError, "data")),
        (lambda d: rj.scale.sharded_normal_equations(rj.scale.shard_data(__import__("scipy.sparse").sparse
                                                             .csr_matrix(d.X), d.y, d.g)),
         E(ValueError, "dense")),
    ]
BAD_INPUT["scale.sharded_holdout"] = [
        (lambda d: rj.scale.sharded_holdout(d.sharded, lams=[np.nan]), E(ValueError, "lams")),
        (lambda d: rj.scale.sharded_holdout(None, lams=[1.0]), E(TypeError, "data")),
    ]
BAD_INPUT["scale.sharded_cg"] = [
        (lambda d: rj.scale.sharded_cg(d.sharded, lam=-1.0), E(ValueError, "lam")),
        (lambda d: rj.scale.sharded_cg(d.sharded, lam=[1.0, 2.0]), E(TypeError, "lam")),
        (lambda d: rj.scale.sharded_cg(d.sharded, max_iter=0), E(ValueError, "max_iter")),
        (lambda d: rj.scale.sharded_cg(d.sharded, x0=np.ones(d.n + 1)), E(ValueError, "x0")),
        (lambda d: rj.scale.sharded_cg(d.sharded, valid=(d.X[:, :2], d.y, d.g)), E(ValueError, "X_valid")),
    ]
BAD_INPUT["scale.sharded_metric"] = [
        (lambda d: rj.scale.sharded_metric(d.sharded, d.y[:-1]), E(ValueError, "scores")),
        (lambda d: rj.scale.sharded_metric(d.sharded, d.nanv), E(ValueError, "scores")),
        (lambda d: rj.scale.sharded_metric(d.sharded, d.y, "ndcg"), E(TypeError, "metric")),
        (lambda d: rj.scale.sharded_metric(d.sharded, d.y, rj.ndcg, y=d.nanv), E(ValueError, "y")),
        (lambda d: rj.scale.sharded_metric(d.sharded, d.X[:, 0], rj.pairwise_error, y=d.ties),
         V(nan)),
    ]
BAD_INPUT["scale.sharded_kernel_grid"] = [
        (lambda d: rj.scale.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[-1.0],
                                          valid=(d.X, d.y, d.qid)), E(ValueError, "gammas")),
        (lambda d: rj.scale.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[1.0],
                                          valid=(d.X, d.y)), E(TypeError, "valid")),
        (lambda d: rj.scale.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[1.0],
                                          valid=(d.X[:, :2], d.y, d.qid)), E(ValueError, "X_valid")),
        (lambda d: rj.scale.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[1.0], kernel="rbf",
                                          valid=(d.X, d.y, d.qid)), E(ValueError, "kernel")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
