import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax.metrics.choice import select_lambda
from conftest import random_qids
from reference import laplacian_from_edges, laplacian_from_pairs, nystrom_jitter, query_pairs

LAMS = np.array([1e-3, 0.05, 1.0, 30.0, 1e3])


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def graphs(rng, qid, labels, m):
    head = rng.integers(0, m, 3 * m)
    tail = (head + rng.integers(1, m, 3 * m)) % m
    return {
        "normalized": (rj.query_graph(qid), True),
        "unnormalized": (rj.query_graph(qid, normalized=False), True),
        "ties": (rj.query_graph(qid, labels, exclude_ties=True), True),
        "pairs-weighted": (rj.query_graph(qid, labels, query_weights="pairs"), True),
        "global": (rj.global_graph(m), True),
        "rls": (rj.identity_graph(m), True),
        "edges": (rj.preference_graph(head, tail, rng.random(3 * m) + 0.5, num_rows=m), False),
    }


def data(rng, m=40, n=6, k=None):
    qid = random_qids(rng, m)
    X = rng.standard_normal((m, n)) + 1.0
    labels = rng.integers(0, 3, m).astype(float)
    y = labels if k is None else np.column_stack([labels] + [rng.standard_normal(m)
                                                             for _ in range(k - 1)])
    return X, y, labels, qid


@pytest.mark.parametrize("k", [None, 5])
def test_primal_path_equals_single_solves(rng, k):
    X, y, labels, qid = data(rng, k=k)
    Xv = rng.standard_normal((7, X.shape[1]))
    for name, (g, scored) in graphs(rng, qid, labels, len(labels)).items():
        yy = y if scored else None
        if name == "ties" and k is not None:
            continue
        p = rj.path(rj.Problem(X, yy, g, valid=rj.Problem(Xv, np.zeros(7))), rj.Primal(),
                    lams=LAMS).value
        assert p.weights.shape == (len(LAMS), X.shape[1]) + (() if k is None or not scored else (k,))
        for i, lam in enumerate(LAMS):
            w = rj.fit(rj.Problem(X, yy, g), rj.Primal(), lam=lam).value.weights
            assert rel(p.weights[i], w) < 1e-8, (name, lam)
            np.testing.assert_allclose(rj.predict(p, X)[i], X @ np.asarray(w), rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(p.valid_scores[i], Xv @ np.asarray(w), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("k", [None, 5])
def test_dual_path_equals_single_solves(rng, k):
    X, y, labels, qid = data(rng, m=30, k=k)
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.2), X))
    Kv = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.2), X[:4] + 0.1, X))
    for name, (g, scored) in graphs(rng, qid, labels, len(labels)).items():
        if name == "ties" and k is not None:
            continue
        yy = y if scored else None
        p = rj.path(rj.Problem(K, yy, g, valid=rj.Problem(Kv, y[:4], precomputed=True), precomputed=True),
                    rj.Dual(), lams=LAMS).value
        for i, lam in enumerate(LAMS):
            a = np.asarray(rj.fit(rj.Problem(K, yy, g, precomputed=True), rj.Dual(), lam=lam).value.coef)
            # compare fitted scores (A itself is unique only up to null(L K) directions)
            assert rel(p.train_scores[i], K @ a) < 1e-8, (name, lam)
            assert rel(p.valid_scores[i], Kv @ a) < 1e-8, (name, lam)
            assert rel(K @ np.asarray(p.coef[i]), K @ a) < 1e-8


@pytest.mark.parametrize("kernel", [rj.gaussian_kernel(0.3), rj.polynomial_kernel(2, 0.5, 1.0),
                                    rj.linear_kernel()])
@pytest.mark.parametrize("k", [None, 3])
def test_sparse_approximation_equals_brute_force_minimiser(rng, kernel, k):
    """seed 001 eq. 40-41: a = (K_R L K_R^T + λ (K_RR + ε I))^{-1} K_R L y (ε the model's
    jitter), L from enumerated pairs."""
    X, y, labels, qid = data(rng, m=35, n=5 if kernel.kind != "linear" else 12, k=k)
    basis = np.sort(rng.choice(35, 9, replace=False))
    L = laplacian_from_pairs(35, query_pairs(qid, labels, normalized=True))
    K_R = np.asarray(rj.kernel_matrix(kernel, X[basis], X))
    K_RR = np.asarray(rj.kernel_matrix(kernel, X[basis]))
    Xv = rng.standard_normal((6, X.shape[1]))
    p = rj.path(rj.Problem(X, y, qid, valid=rj.Problem(Xv, np.zeros(6))), rj.Nystrom(kernel, basis),
                lams=LAMS).value
    Kv = np.asarray(rj.kernel_matrix(kernel, Xv, X[basis]))
    for i, lam in enumerate(LAMS):
        reg = K_RR + nystrom_jitter(K_RR) * np.eye(len(K_RR))
        a = np.linalg.solve(K_R @ L @ K_R.T + lam * reg, K_R @ L @ y)
        assert rel(p.coef[i], a) < 1e-8, lam
        assert rel(rj.predict(p, X)[i], K_R.T @ a) < 1e-8
        assert rel(p.valid_scores[i], Kv @ a) < 1e-8


def test_sparse_approximation_with_preference_edges(rng):
    m = 30
    X = rng.standard_normal((m, 4))
    head = rng.integers(0, m, 90)
    tail = (head + rng.integers(1, m, 90)) % m
    mag = rng.random(90) + 0.5
    g = rj.preference_graph(head, tail, mag, num_rows=m, cost="inverse")
    kernel = rj.gaussian_kernel(0.4)
    basis = np.arange(0, m, 3)
    p = rj.path(rj.Problem(X, None, g), rj.Nystrom(kernel, basis), lams=LAMS).value
    K_R = np.asarray(rj.kernel_matrix(kernel, X[basis], X))
    K_RR = np.asarray(rj.kernel_matrix(kernel, X[basis]))
    w = 1 / mag
    L = laplacian_from_edges(m, head, tail, w)
    MN = np.zeros(m)
    np.add.at(MN, head, w * w * mag)
    np.add.at(MN, tail, -w * w * mag)
    for i, lam in enumerate(LAMS):
        reg = K_RR + nystrom_jitter(K_RR) * np.eye(len(K_RR))
        a = np.linalg.solve(K_R @ L @ K_R.T + lam * reg, K_R @ MN)
        assert rel(p.coef[i], a) < 1e-8


def test_bcoo_path_equals_dense(rng):
    X, y, labels, qid = data(rng, k=2)
    X[rng.random(X.shape) < 0.5] = 0
    g = rj.query_graph(qid)
    dense = rj.path(rj.Problem(X, y, g), rj.Primal(), lams=LAMS).value
    sp = rj.path(rj.Problem(rj.io.to_bcoo(X), y, g), rj.Primal(), lams=LAMS).value
    assert rel(sp.weights, dense.weights) < 1e-10
    assert rel(rj.predict(sp, X), rj.predict(dense, X)) < 1e-10


def test_lambda_grid_is_traced_no_recompile(rng):
    X, y, labels, qid = data(rng)
    g = rj.query_graph(qid)
    traces = []

    @jax.jit
    def fit(X, y, g, lams):
        traces.append(1)
        return rj.path(rj.Problem(X, y, g), rj.Primal(), lams=lams).value.weights

    a = fit(X, y, g, jnp.asarray(LAMS))
    b = fit(X, y, g, jnp.asarray(LAMS * 3))
    assert len(traces) == 1
    np.testing.assert_allclose(
        b[0], rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=LAMS[0] * 3).value.weights, rtol=1e-8
    )
    assert not np.allclose(a, b)
    K = X @ X.T
    dual = jax.jit(
        lambda K, y, g, lams: rj.path(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=lams).value.coef
    )
    np.testing.assert_allclose(X.T @ np.asarray(dual(K, y, g, jnp.asarray(LAMS)))[2],
                               rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=LAMS[2]).value.weights, rtol=1e-7)


def test_select_lambda_table_and_choice(rng):
    X, y, labels, qid = data(rng, k=3)
    Xv, yv, _, qv = data(np.random.default_rng(5), k=3)
    p = rj.path(rj.Problem(X, y, rj.query_graph(qid), valid=rj.Problem(Xv, yv, qv)),
                rj.Primal(), lams=LAMS).value
    for metric, kw in [(rj.ndcg, dict(k=5)), (rj.pairwise_error, {})]:
        yv = yv - yv.min()                   # graded relevance >= 0 (ndcg requires it)
        sel = select_lambda(LAMS, p.valid_scores, yv, qv, metric=metric, **kw)
        assert sel.table.shape == (len(LAMS), 3)
        for i in range(len(LAMS)):
            for j in range(3):
                np.testing.assert_allclose(sel.table[i, j],
                                           metric(p.valid_scores[i, :, j], yv[:, j], qv, **kw),
                                           rtol=1e-12)
        t = np.asarray(sel.table)
        expect = t.argmin(0) if metric is rj.pairwise_error else t.argmax(0)
        np.testing.assert_array_equal(sel.best_index, expect)
        np.testing.assert_allclose(sel.best_lam, LAMS[expect])


def test_path_float32_keeps_dtype(rng):
    X, y, labels, qid = data(rng)
    p = rj.path(rj.Problem(jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32), rj.query_graph(qid)),
                rj.Primal(), lams=jnp.asarray(LAMS, jnp.float32)).value
    assert p.weights.dtype == jnp.float32
    ref = rj.path(rj.Problem(X, y, rj.query_graph(qid)), rj.Primal(), lams=LAMS).value.weights
    np.testing.assert_allclose(p.weights[1:], ref[1:], rtol=5e-3, atol=1e-4)


def test_path_input_errors(rng):
    X, y, labels, qid = data(rng)
    g = rj.query_graph(qid)
    with pytest.raises(ValueError, match="lams"):
        rj.path(rj.Problem(X, y, g), rj.Primal(), lams=[1.0, 0.0]).value
    with pytest.raises(ValueError, match="lams"):
        rj.path(rj.Problem(X, y, g), rj.Primal(), lams=np.ones((2, 2))).value
    with pytest.raises(ValueError, match="basis"):
        rj.path(rj.Problem(X, y, g), rj.Nystrom(rj.linear_kernel(), 0), lams=LAMS).value
    with pytest.raises(ValueError, match="scores"):
        select_lambda(LAMS, np.zeros((2, 40)), y, qid, metric=rj.ndcg)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

PATH_INPUT = {}      # the path verb's own table is test_solvers.py's BAD_INPUT
PATH_INPUT["path Primal"] = [
    (lambda d: rj.path(rj.Problem(d.X, d.y, d.g), rj.Primal(), lams=[]).value, E(ValueError, "lams")),
    (
        lambda d: rj.path(rj.Problem(d.X, d.y, d.g), rj.Primal(), lams=[1.0, -1.0]).value,
        E(ValueError, "lams"),
    ),
    (
        lambda d: (
            rj.path(
                rj.Problem(d.X, d.y, d.g, valid=rj.Problem(d.X[:, :2], d.y)), rj.Primal(), lams=[1.0]
            ).value
        ),
        E(ValueError, "valid.X must have 4 columns"),
    ),
]
PATH_INPUT["path Dual"] = [
    (
        lambda d: rj.path(rj.Problem(d.K, d.y, d.g, precomputed=True), rj.Dual(), lams=[[1.0]]).value,
        E(ValueError, "lams"),
    ),
    (
        lambda d: rj.Problem(
            d.K, d.y, d.g, precomputed=True, valid=rj.Problem(d.K[:, :3], np.zeros(d.m), precomputed=True)
        ),
        E(ValueError, "valid.X must have"),
    ),
]
PATH_INPUT["path Nystrom"] = [
        (lambda d: rj.path(rj.Problem(d.X, d.y, d.g), rj.Nystrom(d.kern, [0, d.m]), lams=[1.0]).value,
         E(ValueError, "basis")),
        (lambda d: rj.path(rj.Problem(d.X, d.y, d.g), rj.Nystrom(d.kern, [1, 1]), lams=[1.0]).value,
         E(ValueError, "basis")),
        (lambda d: rj.path(rj.Problem(d.X, d.y, d.g), rj.Nystrom(d.kern, 0), lams=[1.0]).value,
         E(ValueError, "basis")),
    ]
PATH_INPUT["select_lambda"] = [
        (lambda d: select_lambda([1.0, 2.0], np.ones((3, d.m)), d.y, d.qid, metric=rj.ndcg),
         E(ValueError, "scores")),
        (lambda d: select_lambda([1.0], np.full((1, d.m), np.nan), d.y, d.qid, metric=rj.ndcg),
         E(ValueError, "every λ")),
        (lambda d: select_lambda([1.0], d.y[None], d.y, d.qid, metric="ndcg"),
         E(TypeError, "metric")),
    ]

test_bad_and_degenerate_input = surface_test(PATH_INPUT)
