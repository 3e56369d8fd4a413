"""Nyström basis choice and FALKON-preconditioned CG against the closed form (float64)."""
import numpy as np
import pytest
import jax
import jax.numpy as jnp

import rankjax as rj
from conftest import tune_solver
from rankjax.selection.cv import cross_validate
from rankjax.kernels import basis as _nystrom




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
    eps = len(basis) * np.finfo(np.float32).eps * KRR.diagonal().max()   # the model's jitter
    L = np.asarray(rj.laplacian_dense(graph))
    return np.linalg.solve(K.T @ L @ K + lam * (KRR + eps * np.eye(len(basis))), K.T @ L @ y)


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("lam", [1e-4, 1.0])
def test_falkon_equals_the_closed_form(lam, ties):
    d, _ = _data()
    g = rj.query_graph(d.qid, d.y, exclude_ties=ties)
    k = rj.gaussian_kernel(0.3)
    basis = _nystrom.nystrom_basis(d.X, 60, seed=1)
    f = rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon(k, basis, options=rj.CG(tol=1e-12, max_iter=300)), lam=lam)
    a = _closed_form(d.X, d.y, g, basis, lam, k)
    np.testing.assert_allclose(np.asarray(f.value.coef), a, rtol=1e-6, atol=1e-8 * np.abs(a).max())
    # the predictions K a inherit the coefficients' bound through |K|: entrywise at most
    # |K| |δa| with |δa| <= 1e-6 |a| + 1e-8 max|a| (a row's small prediction can be a
    # cancellation of large terms, so a bound relative to the prediction itself is not one)
    K = np.asarray(rj.kernel_matrix(k, d.X, d.X[basis]))
    bound = np.abs(K) @ (1e-6 * np.abs(a) + 1e-8 * np.abs(a).max())
    assert np.all(np.abs(np.asarray(rj.predict(f.value, d.X)) - K @ a) <= bound + 4 * np.finfo(float).eps
                  * (np.abs(K) @ np.abs(a)))
    assert bool(f.stats["converged"])


def test_falkon_equals_the_nystrom_path_and_rls():
    d, g = _data(seed=2)
    k = rj.gaussian_kernel(0.2)
    basis = np.arange(0, d.X.shape[0], 4)
    for graph in (g, rj.identity_graph(d.X.shape[0])):
        f = rj.fit(rj.Problem(d.X, d.y, graph), rj.Falkon(k, basis, options=rj.CG(tol=1e-12)), lam=0.5)
        p = rj.path(rj.Problem(d.X, d.y, graph), rj.Nystrom(k, basis), lams=[0.5]).value
        np.testing.assert_allclose(np.asarray(rj.predict(f.value, d.X)), np.asarray(rj.predict(p, d.X)[0]),
                                   rtol=1e-6, atol=1e-8)


def test_falkon_row_blocks_vmap_and_early_stopping():
    d, g = _data(seed=3)
    v, _ = _data(10, seed=4)
    k = rj.gaussian_kernel(0.3)
    basis = _nystrom.nystrom_basis(d.X, 50, seed=0)
    whole = rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon(k, basis, options=rj.CG(tol=1e-12)), lam=0.1)
    blocks = rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon(k, basis, options=rj.CG(tol=1e-12), block_rows=37),
                    lam=0.1)
    np.testing.assert_allclose(
        np.asarray(blocks.value.coef), np.asarray(whole.value.coef), rtol=1e-8, atol=1e-10
    )
    lams = jnp.asarray([0.01, 0.1, 1.0])
    grid = jax.vmap(
        lambda lam: (
            rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon(k, basis, options=rj.CG(tol=1e-12)), lam=lam).value.coef
        )
    )(lams)
    for i, lam in enumerate(lams):
        np.testing.assert_allclose(np.asarray(grid[i]), _closed_form(d.X, d.y, g, basis, float(lam), k),
                                   rtol=1e-6, atol=1e-8)
    es = rj.fit(rj.Problem(d.X, d.y, g, valid=rj.Problem(*(v.X, v.y, rj.query_graph(v.qid)))),
                rj.Falkon(k, basis, options=rj.CG(max_iter=60, patience=5)), lam=0.0)
    h = np.asarray(es.stats["valid_history"])
    assert h[int(es.stats["best_iteration"])] == np.nanmin(h)
    assert int(es.result) in (rj.RESULTS.early_stopped, rj.RESULTS.successful,
                              rj.RESULTS.max_iterations_reached)


def test_falkon_refuses_bad_input():
    d, g = _data()
    k = rj.gaussian_kernel(0.3)
    with pytest.raises(ValueError, match="lam"):
        rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon(k, 10), lam=0.0)
    with pytest.raises(ValueError, match="basis"):
        rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon(k, np.array([0, d.X.shape[0]])), lam=1.0)
    with pytest.raises(TypeError, match="PreferenceGraph"):
        pg = rj.preference_graph(np.array([0]), np.array([1]), num_rows=d.X.shape[0])
        rj.fit(rj.Problem(d.X, None, pg), rj.Falkon(k, 10), lam=1.0)
    with pytest.raises(TypeError, match="kernel"):
        rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon('gaussian', 10), lam=1.0)


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



def test_kmeanspp_above_its_row_cap_draws_from_a_uniform_sample(monkeypatch):
    """Above max(KMEANS_ROWS * b, KMEANS_POOL) rows the seeding runs on a uniform sample of that many rows
    (its cost stops growing with m): the chosen rows are rows of that sample, distinct,
    in range, and the same for the same seed; the estimators' automatic basis is drawn
    this way."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 3))
    k = rj.gaussian_kernel(0.5)
    seen = []
    core = _nystrom._kmeanspp_core
    monkeypatch.setattr(_nystrom, "_kmeanspp_core", lambda X, *a: seen.append(X.shape) or core(X, *a))
    monkeypatch.setattr(_nystrom, "KMEANS_ROWS", 4)
    monkeypatch.setattr(_nystrom, "KMEANS_POOL", 16)
    b = _nystrom.nystrom_basis(X, 10, kernel=k, method="kmeans++", seed=7)
    pool = np.sort(np.random.default_rng(7).choice(500, 40, replace=False))
    assert seen == [(40, 3)]
    assert np.unique(b).size == 10 and np.all(np.isin(b, pool))
    assert np.array_equal(b, _nystrom.nystrom_basis(X, 10, kernel=k, method="kmeans++", seed=7))
    from rankjax.estimators.defaults import basis_spec, auto_basis_size
    assert basis_spec("auto", "gaussian", 6000) == rj.Basis(auto_basis_size(6000), method="kmeans++")

def test_holdout_nystrom_new_gamma_or_basis_in_bucket_compiles_nothing():
    d, g = _data(30, seed=5)
    folds = rj.make_folds(g)
    kw = dict(lams=[0.1, 1.0], folds=folds)
    rj.holdout(rj.Problem(d.X, d.y, g), rj.Nystrom(rj.gaussian_kernel(0.3), np.arange(45)), **kw)  # bucket 48
    with jax.log_compiles():
        import logging
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("jax").addHandler(handler)
        try:
            rj.holdout(rj.Problem(d.X, d.y, g), rj.Nystrom(rj.gaussian_kernel(0.7), np.arange(3, 45)), **kw)
        finally:
            logging.getLogger("jax").removeHandler(handler)
    assert not [r for r in records if "Compiling" in r.getMessage()], [r.getMessage() for r in records]


def test_rankrlscv_nystrom_equals_the_hold_out_and_retraining():
    from rankjax.estimators import RankRLSCV
    d, g = _data(30, seed=6)
    lams = np.logspace(-2, 1, 4)
    m = RankRLSCV(kernel="gaussian", gammas=[0.1, 0.3], lams=lams, basis=40,
                  feature_map=None).fit(d.X, d.y, qid=d.qid)
    basis = m.basis_
    k = rj.gaussian_kernel(m.gamma_)
    h = rj.holdout(rj.Problem(d.X, d.y, g), rj.Nystrom(k, basis), lams=lams).value
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
    h = rj.holdout(rj.Problem(d.X, Y, g), rj.Nystrom(k, basis), lams=[0.5, 2.0], folds=f).value
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

SOLVER_INPUT = {}   # (the solvers' own BAD_INPUT table is test_solvers.py's)
SOLVER_INPUT["Nystrom"] = [
        (lambda d: _nystrom.nystrom_basis(d.X, 0), E(ValueError, "size")),
        (lambda d: _nystrom.nystrom_basis(d.X, 2, method="kmeans++"), E(TypeError, "kernel")),
        (lambda d: _nystrom.nystrom_basis(d.X, 2, method="grid"), E(ValueError, "method")),
    ]
SOLVER_INPUT["Falkon"] = [
    (
        lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.Falkon(rj.gaussian_kernel(1.0), 3), lam=-1.0),
        E(ValueError, "lam"),
    ),
    (
        lambda d: rj.fit(rj.Problem(d.X, d.y, d.pref), rj.Falkon(rj.gaussian_kernel(1.0), 3), lam=1.0),
        E(ValueError, "y must be None"),
    ),
    (lambda d: rj.Falkon(rj.gaussian_kernel(1.0), 3, options=rj.CG(x0=np.ones(3))), E(ValueError, "x0")),
    (lambda d: rj.Falkon(rj.gaussian_kernel(1.0), 3, block_rows=0), E(ValueError, "block_rows")),
    (
        lambda d: rj.fit(
            rj.Problem(d.X, d.y, d.g), rj.Falkon(rj.gaussian_kernel(1.0), np.array([0, d.m])), lam=1.0
        ),
        E(ValueError, "basis"),
    ),
    (lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.Falkon(None, 3), lam=1.0), E(TypeError, "kernel")),
]
BAD_INPUT = {
    "Basis": [
        (lambda d: rj.Basis(), E(TypeError, "size= or rows=")),
        (lambda d: rj.Basis(0), E(ValueError, "size")),
        (lambda d: rj.Basis(3, method="grid"), E(ValueError, "method")),
        (
            lambda d: (
                rj.path(
                    rj.Problem(d.X, d.y, d.g),
                    rj.Nystrom(rj.gaussian_kernel(1.0), rj.Basis(rows=np.array([0, 0]))),
                    lams=[1.0],
                ).value
            ),
            E(ValueError, "repeated"),
        ),
    ]
}

test_bad_and_degenerate_input = surface_test(SOLVER_INPUT)
test_bad_basis = surface_test(BAD_INPUT)


def test_falkon_iterations_are_bounded_by_its_preconditioner():
    """The preconditioner ``A A^T = G_U + λ I`` from a subsample of whole queries: to 1e-10
    on this problem within 1.5x the iterations seen (30 at λ = 1e-3, 13 at 1; without the
    subsample's Gram, 92 and 22), in whole and in row blocks of 37 rows (several batches
    of whole queries), equal to the closed form."""
    d, g = _data(seed=3)
    k = rj.gaussian_kernel(0.3)
    basis = _nystrom.nystrom_basis(d.X, 50, seed=0)
    p = rj.Problem(d.X, d.y, g)
    for lam, most in ((1e-3, 45), (1.0, 18)):
        want = _closed_form(d.X, d.y, g, basis, lam, k)
        for rows in (None, 37):
            s = rj.fit(p, rj.Falkon(k, basis, options=rj.CG(tol=1e-10), block_rows=rows), lam=lam)
            assert int(s.stats["iterations"]) <= most, (lam, rows, int(s.stats["iterations"]))
            np.testing.assert_allclose(np.asarray(s.value.coef), want, rtol=1e-6,
                                       atol=1e-8 * np.abs(want).max())
