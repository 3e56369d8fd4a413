import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

import rankjax as rj
from conftest import random_qids
from reference import feature_map, primal_edges, primal_pairs, query_pairs

QUERY_VARIANTS = [
    dict(normalized=True), dict(normalized=False),
    dict(normalized=True, exclude_ties=True), dict(normalized=False, exclude_ties=True),
    dict(normalized=True, query_weights="pairs"), dict(normalized=False, query_weights="pairs"),
]


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def problem(rng, m=45, n=6, k=None):
    qid = random_qids(rng, m)
    X = rng.standard_normal((m, n)) + 3.0           # offset: centring must not matter
    y = rng.integers(0, 4, m).astype(float)
    if k is not None:
        y = np.stack([y] + [rng.standard_normal(m) for _ in range(k - 1)], axis=1)
    return X, y, qid


@pytest.mark.parametrize("variant", QUERY_VARIANTS)
@pytest.mark.parametrize("k", [None, 3])
def test_primal_and_dual_equal_enumerated_minimiser(rng, variant, k):
    X, y, qid = problem(rng, k=k)
    if variant.get("exclude_ties") and k is not None:
        pytest.skip("tie exclusion is defined by one label vector")
    labels = y if y.ndim == 1 else y[:, 0]
    lam = 0.7
    g = rj.query_graph(qid, labels, **variant)
    w_ref = primal_pairs(X, y, query_pairs(qid, labels, **variant), lam)
    w = rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights
    assert rel(w, w_ref) < 1e-8
    # dual with a linear kernel equals the primal
    A = rj.fit(rj.Problem(X @ X.T, y, g, precomputed=True), rj.Dual(), lam=lam).value.coef
    assert rel(X.T @ np.asarray(A), w_ref) < 1e-8
    # BCOO equals dense
    Xs = sparse.BCOO.fromdense(jnp.asarray(np.where(rng.random(X.shape) < 0.4, 0, X)))
    Xd = np.asarray(Xs.todense())
    w_s = rj.fit(rj.Problem(Xs, y, g), rj.Primal(), lam=lam).value.weights
    assert rel(w_s, primal_pairs(Xd, y, query_pairs(qid, labels, **variant), lam)) < 1e-8


@pytest.mark.parametrize("kernel", [rj.gaussian_kernel(0.3), rj.polynomial_kernel(3, 0.2, 1.0)])
@pytest.mark.parametrize("variant", [dict(), dict(normalized=False, exclude_ties=True)])
def test_kernel_dual_equals_primal_in_feature_map(rng, kernel, variant):
    X, y, qid = problem(rng, m=30, n=4)
    g = rj.query_graph(qid, y, **variant)
    K = np.asarray(rj.kernel_matrix(kernel, X))
    R = feature_map(K)                              # K = R R^T: the primal in kernel space
    lam = 0.5
    w_ref = primal_pairs(R, y, query_pairs(qid, y, **variant), lam)
    model = rj.fit(rj.Problem(X, y, g), rj.Dual(kernel, block_size=7), lam=lam).value
    assert rel(K @ np.asarray(model.coef), R @ w_ref) < 1e-8
    Xt = rng.standard_normal((5, 4))
    Kt = np.asarray(rj.kernel_matrix(kernel, Xt, X))
    a = np.asarray(model.coef)           # the model evaluates k - k0: the same scores, rounded
    np.testing.assert_allclose(rj.predict(model, Xt, block_size=2), Kt @ a, rtol=1e-10,
                               atol=1e-12 * np.abs(Kt).max() * np.abs(a).sum())


@pytest.mark.parametrize("cost", ["unit", "magnitude", "inverse"])
def test_preference_edges_primal_and_dual(rng, cost):
    m, n, l = 25, 5, 80
    X = rng.standard_normal((m, n)) + 2
    head = rng.integers(0, m, l)
    tail = (head + rng.integers(1, m, l)) % m
    mag = rng.random(l) + 0.1
    g = rj.preference_graph(head, tail, mag, num_rows=m, cost=cost)
    w = {"unit": np.ones(l), "magnitude": np.ones(l), "inverse": 1 / mag}[cost]
    z = np.ones(l) if cost == "unit" else mag
    lam = 0.3
    w_ref = primal_edges(X, head, tail, z, w, lam)
    assert rel(rj.fit(rj.Problem(X, None, g), rj.Primal(), lam=lam).value.weights, w_ref) < 1e-8
    A = rj.fit(rj.Problem(X @ X.T, None, g, precomputed=True), rj.Dual(), lam=lam).value.coef
    assert rel(X.T @ np.asarray(A), w_ref) < 1e-8
    Xs = sparse.BCOO.fromdense(jnp.asarray(X))
    assert rel(rj.fit(rj.Problem(Xs, None, g), rj.Primal(), lam=lam).value.weights, w_ref) < 1e-8


def test_rls_is_ridge_regression(rng):
    X, y, _ = problem(rng)
    lam = 1.3
    ref = np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y)
    g = rj.identity_graph(X.shape[0])
    assert rel(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights, ref) < 1e-10
    A = rj.fit(rj.Problem(X @ X.T, y, g, precomputed=True), rj.Dual(), lam=lam).value.coef
    assert rel(X.T @ np.asarray(A), ref) < 1e-8


def test_global_graph_and_invariances(rng):
    X, y, qid = problem(rng)
    lam = 0.2
    g = rj.global_graph(X.shape[0])
    w_ref = primal_pairs(X, y, query_pairs(np.zeros(len(y), int), y, normalized=False), lam)
    assert rel(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights, w_ref) < 1e-8
    # adding a per-query constant to y changes nothing
    gq = rj.query_graph(qid)
    shift = rng.standard_normal(100)[np.searchsorted(np.unique(qid), qid)]
    w1 = rj.fit(rj.Problem(X, y, gq), rj.Primal(), lam=lam).value.weights
    w2 = rj.fit(rj.Problem(X, y + shift, gq), rj.Primal(), lam=lam).value.weights
    np.testing.assert_allclose(w1, w2, rtol=1e-10)
    # permuting rows changes nothing
    p = rng.permutation(len(y))
    w3 = rj.fit(rj.Problem(X[p], y[p], rj.query_graph(qid[p])), rj.Primal(), lam=lam).value.weights
    np.testing.assert_allclose(w1, w3, rtol=1e-10)


def test_jit_vmap_over_lambda_and_float32(rng):
    X, y, qid = problem(rng)
    g = rj.query_graph(qid)
    lams = jnp.array([0.1, 1.0, 10.0])
    fit = jax.jit(lambda X, y, g, lam: rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights)
    W = jax.vmap(fit, in_axes=(None, None, None, 0))(X, y, g, lams)
    for lam, w in zip(lams, W):
        np.testing.assert_allclose(w, rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=float(lam)).value.weights,
                                   rtol=1e-10)
    K = X @ X.T
    dual = jax.jit(
        lambda K, y, g, lam: rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=lam).value.coef
    )
    A = jax.vmap(dual, in_axes=(None, None, None, 0))(K, y, g, lams)
    np.testing.assert_allclose(np.asarray(A) @ X, W, rtol=1e-7, atol=1e-9)
    # float32 in, float32 out
    X32, y32 = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)
    w32 = jax.jit(fit)(X32, y32, g, jnp.float32(1.0))
    assert w32.dtype == jnp.float32
    np.testing.assert_allclose(w32, W[1], rtol=2e-3, atol=1e-4)
    a32 = rj.fit(
        rj.Problem(jnp.asarray(K, jnp.float32), y32, g, precomputed=True), rj.Dual(), lam=1.0
    ).value.coef
    assert a32.dtype == jnp.float32
    s = rj.fit(rj.Problem(rj.io.to_bcoo(X, jnp.float32), y32, g), rj.Primal(), lam=1.0).value.weights
    assert s.dtype == jnp.float32


def test_kernel_matrix_blockwise_equals_direct(rng):
    X1, X2 = rng.standard_normal((11, 3)), rng.standard_normal((4, 3))
    for k in [rj.linear_kernel(), rj.gaussian_kernel(0.7), rj.polynomial_kernel(2, 0.5, 2.0)]:
        direct = rj.kernel_matrix(k, X1, X2)
        np.testing.assert_allclose(rj.kernel_matrix(k, X1, X2, block_size=3), direct, rtol=1e-12)
    d2 = ((X1[:, None] - X2[None]) ** 2).sum(-1)
    np.testing.assert_allclose(rj.kernel_matrix(rj.gaussian_kernel(0.7), X1, X2),
                               np.exp(-0.7 * d2), rtol=1e-10)
    np.testing.assert_allclose(rj.kernel_matrix(rj.polynomial_kernel(2, 0.5, 2.0), X1, X2),
                               (0.5 * X1 @ X2.T + 2) ** 2, rtol=1e-10)


def test_dual_on_an_indefinite_kernel_names_k_and_is_nan_under_jit():
    """The failed Cholesky of S K S + λ I tells an indefinite K (no extra eigh on success);
    a K whose system stays positive definite is solved exactly."""
    import jax
    rng = np.random.default_rng(0)
    A = rng.standard_normal((8, 8))
    K, y = (A + A.T) / 2, rng.standard_normal(8)
    g = rj.query_graph(np.repeat([0, 1], 4))
    with pytest.raises(ValueError, match="K is not positive semidefinite.*eigenvalue"):
        rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=0.01).value
    assert np.all(np.isnan(jax.jit(lambda K: rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(),
                                                    lam=0.01).value.coef)(K)))
    L = np.asarray(rj.laplacian_dense(g))
    np.testing.assert_allclose(rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=100.0).value.coef,
                               np.linalg.solve(L @ K + 100 * np.eye(8), L @ y), rtol=1e-10, atol=1e-12)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["rankrls_primal"] = [
    (lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.Primal(), lam=-1.0).value, E(ValueError, "lam")),
    (
        lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.Primal(), lam=[1.0, 2.0]).value,
        E(TypeError, "lam must be a scalar"),
    ),
    (lambda d: rj.fit(rj.Problem(d.X, d.y[:-1], d.g), rj.Primal(), lam=1.0).value, E(ValueError, "y has")),
    (
        lambda d: rj.fit(rj.Problem(np.c_[d.X[:, :-1], d.nanv], d.y, d.g), rj.Primal(), lam=1.0).value,
        E(ValueError, "X contains NaN"),
    ),
    (lambda d: rj.fit(rj.Problem(d.X, d.y, "q"), rj.Primal(), lam=1.0).value, E(TypeError, "queries")),
    # every query of size 1: no pair, the minimiser of λ||w||^2 alone
    (
        lambda d: rj.fit(rj.Problem(d.X, d.y, rj.query_graph(np.arange(d.m))), rj.Primal(), lam=1.0).value,
        V(lambda r: np.all(np.asarray(r.weights) == 0)),
    ),
]
BAD_INPUT["rankrls_dual"] = [
    (
        lambda d: rj.fit(rj.Problem(d.K, d.y, d.g, precomputed=True), rj.Dual(), lam=0.0).value,
        E(ValueError, "lam"),
    ),
    (
        lambda d: rj.fit(rj.Problem(d.X, d.y, d.g, precomputed=True), rj.Dual(), lam=1.0).value,
        E(ValueError, "K must be a square"),
    ),
    (
        lambda d: (
            rj.fit(
                rj.Problem(d.K + np.triu(np.ones_like(d.K)), d.y, d.g, precomputed=True), rj.Dual(), lam=1.0
            ).value
        ),
        E(ValueError, "K is not symmetric"),
    ),
]
BAD_INPUT["rankrls_kernel"] = [
    (lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.Dual("rbf"), lam=1.0).value, E(TypeError, "kernel")),
    (lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.Dual(d.kern), lam=np.inf).value, E(ValueError, "lam")),
]
BAD_INPUT["predict"] = [
        (lambda d: rj.predict(rj.LinearModel(np.ones(3)), d.X), E(ValueError, "features")),
        (lambda d: rj.predict(object(), d.X), E(TypeError, "model")),
        (lambda d: rj.predict(rj.LinearModel(np.ones(d.n)), np.c_[d.X[:, :-1], d.nanv]),
         E(ValueError, "NaN")),
    ]

INTERNAL_INPUT = {k: BAD_INPUT.pop(k) for k in ['rankrls_dual', 'rankrls_kernel', 'rankrls_primal']}
"""Cases of internal functions and of the verbs by solver (not public names: the verbs' own
tables are test_solvers.py's)."""

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
test_internal_bad_input = surface_test(INTERNAL_INPUT)
