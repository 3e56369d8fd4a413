"""Nyström basis choice and FALKON-preconditioned CG against the closed form (float64)."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import rankjax as rj
from conftest import tune_solver
from rankjax.solvers.cg_loop import STOP_REASONS
from rankjax.selection.cv import cross_validate
from rankjax.solvers import falkon as _falkon
from rankjax.solvers.holdout import holdout_nystrom
from rankjax.kernels import basis as _nystrom
from rankjax.solvers.path import rankrls_nystrom_path




def _data(q=40, seed=0):
    d = rj.make_ranking_data(q, num_features=5, docs_per_query=(5, 15), seed=seed)
    return d, rj.query_graph(d.qid)


def _closed_form(X, y, graph, basis, lam, kernel, centres=None):
    """Brute force: the a-space system (K_Rm L K_mR + λ (K_RR + ε I)) a = K_Rm L y,
    dense Laplacian, solved directly (ε the jitter of rankrls_falkon); ``centres`` the
    basis rows when they are not rows of ``X``."""
    X = np.asarray(X)
    XR = X[basis] if centres is None else centres
    K = np.asarray(rj.kernel_matrix(kernel, X, XR))
    KRR = np.asarray(rj.kernel_matrix(kernel, XR))
    eps = 1.0 * len(basis) * np.finfo(float).eps * KRR.diagonal().max()
    L = np.asarray(rj.laplacian_dense(graph))
    return np.linalg.solve(K.T @ L @ K + lam * (KRR + eps * np.eye(len(basis))), K.T @ L @ y)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("lam", [1e-4, 1.0])
def test_falkon_equals_the_closed_form(lam, ties):
    d, _ = _data()
    g = rj.query_graph(d.qid, d.y, exclude_ties=ties)
    k = rj.gaussian_kernel(0.3)
    basis = _nystrom.nystrom_basis(d.X, 60, seed=1)
    f = _falkon.rankrls_falkon(d.X, d.y, g, lam=lam, kernel=k, basis=basis, tol=1e-12, max_iter=300)
    a = _closed_form(d.X, d.y, g, basis, lam, k)
    np.testing.assert_allclose(np.asarray(f.coef), a, rtol=1e-6, atol=1e-8 * np.abs(a).max())
    # the predictions K a inherit the coefficients' bound through |K|: entrywise at most
    # |K| |δa| with |δa| <= 1e-6 |a| + 1e-8 max|a| (a row's small prediction can be a
    # cancellation of large terms, so a bound relative to the prediction itself is not one)
    K = np.asarray(rj.kernel_matrix(k, d.X, d.X[basis]))
    bound = np.abs(K) @ (1e-6 * np.abs(a) + 1e-8 * np.abs(a).max())
    assert np.all(np.abs(np.asarray(rj.predict(f, d.X)) - K @ a) <= bound + 4 * np.finfo(float).eps
                  * (np.abs(K) @ np.abs(a)))
    assert bool(f.cg.converged)


def test_falkon_equals_the_nystrom_path_and_rls():
    d, g = _data(seed=2)
    k = rj.gaussian_kernel(0.2)
    basis = np.arange(0, d.X.shape[0], 4)
    for graph in (g, rj.identity_graph(d.X.shape[0])):
        f = _falkon.rankrls_falkon(d.X, d.y, graph, lam=0.5, kernel=k, basis=basis, tol=1e-12)
        p = rankrls_nystrom_path(d.X, d.y, graph, lams=[0.5], kernel=k, basis=basis)
        np.testing.assert_allclose(np.asarray(rj.predict(f, d.X)), np.asarray(rj.predict(p, d.X)[0]),
                                   rtol=1e-6, atol=1e-8)


def test_falkon_row_blocks_vmap_and_early_stopping():
    d, g = _data(seed=3)
    v, _ = _data(10, seed=4)
    k = rj.gaussian_kernel(0.3)
    basis = _nystrom.nystrom_basis(d.X, 50, seed=0)
    whole = _falkon.rankrls_falkon(d.X, d.y, g, lam=0.1, kernel=k, basis=basis, tol=1e-12)
    blocks = _falkon.rankrls_falkon(d.X, d.y, g, lam=0.1, kernel=k, basis=basis, tol=1e-12, block_rows=37)
    np.testing.assert_allclose(np.asarray(blocks.coef), np.asarray(whole.coef), rtol=1e-8, atol=1e-10)
    lams = jnp.asarray([0.01, 0.1, 1.0])
    grid = jax.vmap(lambda lam: _falkon.rankrls_falkon(d.X, d.y, g, lam=lam, kernel=k, basis=basis,
                                                  tol=1e-12).coef)(lams)
    for i, lam in enumerate(lams):
        np.testing.assert_allclose(np.asarray(grid[i]), _closed_form(d.X, d.y, g, basis, float(lam), k),
                                   rtol=1e-6, atol=1e-8)
    es = _falkon.rankrls_falkon(d.X, d.y, g, lam=0.0, kernel=k, basis=basis, max_iter=60, patience=5,
                           valid=(v.X, v.y, rj.query_graph(v.qid)))
    h = np.asarray(es.cg.valid_history)
    assert h[int(es.cg.best_iteration)] == np.nanmin(h)
    assert STOP_REASONS[int(es.cg.stop_reason)] in ("early_stopping", "converged", "max_iter")


def test_falkon_refuses_bad_input():
    d, g = _data()
    k = rj.gaussian_kernel(0.3)
    with pytest.raises(ValueError, match="lam"):
        _falkon.rankrls_falkon(d.X, d.y, g, lam=0.0, kernel=k, basis=10)
    with pytest.raises(ValueError, match="basis"):
        _falkon.rankrls_falkon(d.X, d.y, g, lam=1.0, kernel=k, basis=np.array([0, d.X.shape[0]]))
    with pytest.raises(TypeError, match="PreferenceGraph"):
        pg = rj.preference_graph(np.array([0]), np.array([1]), num_rows=d.X.shape[0])
        _falkon.rankrls_falkon(d.X, None, pg, lam=1.0, kernel=k, basis=10)
    with pytest.raises(TypeError, match="kernel"):
        _falkon.rankrls_falkon(d.X, d.y, g, lam=1.0, kernel="gaussian", basis=10)


def test_kmeanspp_basis_is_distinct_and_covers_the_data():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 0.01, (200, 2)), rng.normal(8, 0.01, (3, 2))]
    k = rj.gaussian_kernel(1.0)
    b = _nystrom.nystrom_basis(X, 4, kernel=k, method="kmeans++", seed=0)
    assert np.unique(b).size == 4 and np.any(b >= 200)
    dup = np.ones((10, 3))                                  # all rows equal: still distinct rows
    assert np.unique(_nystrom.nystrom_basis(dup, 5, kernel=k, method="kmeans++")).size == 5
    assert np.array_equal(_nystrom.nystrom_basis(X, 5, seed=3), _nystrom.nystrom_basis(X, 5, seed=3))
    with pytest.raises(ValueError, match="method"):
        _nystrom.nystrom_basis(X, 4, method="random")
    with pytest.raises(TypeError, match="kernel"):
        _nystrom.nystrom_basis(X, 4, method="kmeans++")


def test_holdout_nystrom_new_gamma_or_basis_in_bucket_compiles_nothing():
    d, g = _data(30, seed=5)
    folds = rj.make_folds(g)
    kw = dict(lams=[0.1, 1.0], folds=folds)
    holdout_nystrom(d.X, d.y, g, kernel=rj.gaussian_kernel(0.3), basis=np.arange(45), **kw)  # bucket 48
    with jax.log_compiles():
        import logging
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("jax").addHandler(handler)
        try:
            holdout_nystrom(d.X, d.y, g, kernel=rj.gaussian_kernel(0.7), basis=np.arange(3, 45), **kw)
        finally:
            logging.getLogger("jax").removeHandler(handler)
    assert not [r for r in records if "Compiling" in r.getMessage()], [r.getMessage() for r in records]


def test_rankrlscv_nystrom_equals_the_hold_out_and_retraining():
    from rankjax.estimators import RankRLSCV
    d, g = _data(30, seed=6)
    lams = np.logspace(-2, 1, 4)
    m = RankRLSCV(kernel="gaussian", gammas=[0.1, 0.3], lams=lams, basis=40).fit(d.X, d.y, qid=d.qid)
    basis = m.basis_
    k = rj.gaussian_kernel(m.gamma_)
    h = holdout_nystrom(d.X, d.y, g, lams=lams, kernel=k, basis=basis)
    table = np.asarray(cross_validate(h, d.y, d.qid, metric=rj.ndcg, k=10).table)
    assert np.isclose(m.best_score_, np.nanmax(table))
    # the kept model equals retraining on all rows (dense closed form of the same system)
    a = _closed_form(d.X, d.y, g, basis, m.lam_, k)
    np.testing.assert_allclose(m.predict(d.X), np.asarray(rj.kernel_matrix(k, d.X, d.X[basis])) @ a,
                               rtol=1e-6, atol=1e-8)
    # hold-out predictions equal retraining without each query (brute force, 3 queries)
    for q in np.unique(d.qid[basis])[:3]:                   # queries holding basis rows
        out = d.qid == q
        keep = np.flatnonzero(~out)
        gk = rj.query_graph(d.qid[keep])                    # the basis stays fixed
        ak = _closed_form(d.X[keep], d.y[keep], gk, basis, float(lams[0]), k, centres=d.X[basis])
        f = np.asarray(rj.kernel_matrix(k, d.X[out], d.X[basis])) @ ak
        np.testing.assert_allclose(np.asarray(h.predictions[0])[out], f, rtol=1e-6, atol=1e-8)


def test_exact_kernel_fit_too_large_for_memory_is_refused_at_once():
    import time
    from rankjax.estimators import RankRLSCV
    X = np.zeros((300_000, 2))
    X[:, 0] = np.arange(300_000) % 7
    y = (np.arange(300_000) % 3).astype(float)
    qid = np.arange(300_000) // 10
    t = time.perf_counter()
    with pytest.raises(MemoryError, match=r"GiB.*(Nyström|basis)"):
        RankRLSCV(kernel="gaussian", basis=None).fit(X, y, qid=qid)
    with pytest.raises(MemoryError, match="GiB"):
        rj.kernel_matrix(rj.gaussian_kernel(1.0), X)
    with pytest.raises(MemoryError, match="GiB"):
        rj.tune(rj.Problem(X, y, rj.query_graph(qid)), tune_solver("gaussian", gamma=1 / np.shape(X)[1]),
                steps=1)
    assert time.perf_counter() - t < 5


def test_holdout_nystrom_k_fold_and_multi_output_equal_retraining():
    d, g = _data(12, seed=7)
    k = rj.gaussian_kernel(0.3)
    basis = np.arange(0, d.X.shape[0], 9)                  # folds larger than the basis: refit path
    f = rj.make_folds(g, 2, seed=0)
    Y = np.c_[d.y, d.y ** 2]
    h = holdout_nystrom(d.X, Y, g, lams=[0.5, 2.0], kernel=k, basis=basis, folds=f)
    fold = np.asarray(f.fold_of_row)
    for u in (0, 1):
        keep = fold != u
        gk = rj.query_graph(d.qid[keep])
        for j in range(2):
            for i, lam in enumerate((0.5, 2.0)):
                a = _closed_form(d.X[keep], Y[keep, j], gk, basis, lam, k, centres=d.X[basis])
                pred = np.asarray(rj.kernel_matrix(k, d.X[~keep], d.X[basis])) @ a
                np.testing.assert_allclose(np.asarray(h.predictions)[i, ~keep, j], pred,
                                           rtol=1e-6, atol=1e-9)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["nystrom_basis"] = [
        (lambda d: _nystrom.nystrom_basis(d.X, 0), E(ValueError, "size")),
        (lambda d: _nystrom.nystrom_basis(d.X, 2, method="kmeans++"), E(TypeError, "kernel")),
        (lambda d: _nystrom.nystrom_basis(d.X, 2, method="grid"), E(ValueError, "method")),
    ]
BAD_INPUT["rankrls_falkon"] = [
        (lambda d: _falkon.rankrls_falkon(d.X, d.y, d.g, lam=-1.0, kernel=rj.gaussian_kernel(1.0), basis=3),
         E(ValueError, "lam")),
        (lambda d: _falkon.rankrls_falkon(d.X, d.y, d.pref, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                     basis=3), E(ValueError, "y must be None")),
        (lambda d: _falkon.rankrls_falkon(d.X, d.y, d.g, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                     basis=np.array([0, d.m])), E(ValueError, "basis")),
        (lambda d: _falkon.rankrls_falkon(d.X, d.y, d.g, lam=1.0, kernel=None, basis=3),
         E(TypeError, "kernel")),
    ]
BAD_INPUT["Basis"] = [
        (lambda d: rj.Basis(), E(TypeError, "size= or rows=")),
        (lambda d: rj.Basis(0), E(ValueError, "size")),
        (lambda d: rj.Basis(3, method="grid"), E(ValueError, "method")),
        (lambda d: rankrls_nystrom_path(d.X, d.y, d.g, lams=[1.0], kernel=rj.gaussian_kernel(1.0),
                                           basis=rj.Basis(rows=np.array([0, 0]))),
         E(ValueError, "repeated")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
