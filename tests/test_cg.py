import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import rankjax as rj
from conftest import random_qids


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def problem(rng, m=60, n=8):
    qid = random_qids(rng, m)
    X = rng.standard_normal((m, n))
    y = rng.integers(0, 3, m).astype(float)
    return X, y, qid


def graphs(rng, qid, y, m):
    head = rng.integers(0, m, 3 * m)
    tail = (head + rng.integers(1, m, 3 * m)) % m
    return {"normalized": (rj.query_graph(qid), y), "unnormalized": (rj.query_graph(qid, normalized=False), y),
            "ties": (rj.query_graph(qid, y, exclude_ties=True), y), "global": (rj.global_graph(m), y),
            "rls": (rj.identity_graph(m), y),
            "edges": (rj.preference_graph(head, tail, rng.random(3 * m) + .5, num_rows=m), None)}


@pytest.mark.parametrize("sparse_x", [False, True])
def test_cg_equals_closed_form_for_every_operator(rng, sparse_x):
    X, y, qid = problem(rng)
    Xs = rj.io.to_bcoo(X) if sparse_x else X
    for name, (g, yy) in graphs(rng, qid, y, len(y)).items():
        r = rj.rankrls_cg(Xs, yy, g, lam=0.5, tol=1e-10, maxiter=500)
        assert bool(r.converged), name
        assert rel(r.x, rj.rankrls_primal(X, yy, g, lam=0.5).weights) < 1e-6, name


def test_first_iterates_equal_scipy(rng):
    X, y, qid = problem(rng)
    g = rj.query_graph(qid)
    L = np.asarray(rj.laplacian_dense(g))
    A = X.T @ L @ X + 0.3 * np.eye(X.shape[1])
    b = X.T @ L @ y
    for k in (1, 2, 3):
        ref, _ = spla.cg(A, b, maxiter=k, rtol=1e-300, atol=0)
        r = rj.rankrls_cg(X, y, g, lam=0.3, tol=0.0, maxiter=k)
        assert int(r.iterations) == k and rj.STOP_REASONS[int(r.stop_reason)] == "maxiter"
        assert rel(r.x, ref) < 1e-10


def test_early_stopping_returns_the_rerun_iterate(rng):
    X, y, qid = problem(rng, m=120, n=30)
    w_true = rng.standard_normal(30)
    y = X @ w_true + 3 * rng.standard_normal(120)               # noisy: semi-convergence
    Xv = rng.standard_normal((80, 30))
    yv = Xv @ w_true
    qv = np.repeat(np.arange(8), 10)
    g = rj.query_graph(qid)
    valid = lambda w: rj.pairwise_error(Xv @ w, yv, qv, num_queries=8)  # noqa: E731
    r = rj.rankrls_cg(X, y, g, lam=0.0, tol=1e-12, maxiter=200, valid_fn=valid, patience=5)
    hist = np.asarray(r.valid_history)
    best = int(r.best_iteration)
    assert np.nanmin(hist) == hist[best]
    rerun = rj.rankrls_cg(X, y, g, lam=0.0, tol=0.0, maxiter=best) if best > 0 else None
    if rerun is not None:
        np.testing.assert_array_equal(r.x, rerun.x)
    if rj.STOP_REASONS[int(r.stop_reason)] == "early_stopping":
        assert int(r.iterations) == best + 5


def test_vmap_over_eight_lambdas(rng):
    X, y, qid = problem(rng)
    g = rj.query_graph(qid)
    lams = jnp.asarray(np.logspace(-2, 2, 8))
    f = jax.jit(lambda lam: rj.rankrls_cg(X, y, g, lam=lam, tol=1e-9, maxiter=300))
    batched = jax.vmap(f)(lams)
    for i, lam in enumerate(lams):
        one = f(lam)
        np.testing.assert_allclose(batched.x[i], one.x, rtol=1e-10, atol=1e-12)
        assert int(batched.iterations[i]) == int(one.iterations)


def test_preference_edges_never_materialise_large_arrays():
    """m = 100,000 rows, n = 20,000 sparse features, l = 1,000,000 edges: an [l, n]
    array would need 160 GB and an [m, m] one 80 GB; the run needs megabytes."""
    rng = np.random.default_rng(0)
    m, n, l = 100_000, 20_000, 1_000_000
    cols = rng.integers(0, n, (m, 10))                      # 10 nonzeros per row
    X = sp.csr_matrix((rng.random(m * 10, dtype=np.float32), cols.ravel(),
                       np.arange(0, m * 10 + 1, 10)), shape=(m, n))
    head = rng.integers(0, m, l)
    tail = (head + rng.integers(1, m, l)) % m
    g = rj.preference_graph(head, tail, num_rows=m)
    r = rj.rankrls_cg(rj.io.to_bcoo(X, jnp.float32), None, g, lam=1.0, tol=1e-3, maxiter=3)
    assert np.all(np.isfinite(np.asarray(r.x))) and int(r.iterations) >= 1


def test_cg_input_errors(rng):
    X, y, qid = problem(rng)
    with pytest.raises(ValueError, match="lam"):
        rj.rankrls_cg(X, y, rj.query_graph(qid), lam=-1.0)
    with pytest.raises(ValueError, match="vmap"):
        rj.rankrls_cg(X, np.stack([y, y], 1), rj.query_graph(qid), lam=1.0)
