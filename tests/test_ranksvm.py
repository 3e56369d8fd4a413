import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize as so

import rankjax as rj
import reference as ref
from rankjax.learners import ranksvm as svm


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def tied_problem(rng, l=40, n=5, levels=4, queries=3):
    """Integer features and weights: exact score ties and margins exactly 0."""
    X = rng.integers(-2, 3, (l, n)).astype(float)
    y = rng.integers(0, levels, l).astype(float)
    qid = rng.integers(0, queries, l)
    qid[:2] = 99                                            # a query of size 2
    w = rng.integers(-1, 2, n).astype(float)
    return X, y, qid, w


_fun, _grad, _hvp = jax.jit(svm._fun), jax.jit(svm._grad), jax.jit(svm._hvp)


@pytest.mark.parametrize("levels", [2, 4, 9])
def test_f_grad_hv_equal_enumerated_pairs(rng, levels):
    hits = 0
    for trial in range(25):
        X, y, qid, w = tied_problem(rng, levels=levels)
        if trial % 5 == 4:
            y = rng.standard_normal(len(y))                  # real labels: up to l levels
            w = w + 0.5 * rng.standard_normal(len(w))
        z = X @ w
        pairs = ref.ranksvm_pairs(y, qid)
        hits += sum(z[i] - z[j] == 1.0 for i, j in pairs)  # margins exactly 0 occur
        v = rng.standard_normal(X.shape[1])
        C = 0.7
        lv = rj.rank_levels(y, qid)
        f, st = _fun(jnp.asarray(w), jnp.asarray(X), lv, C)       # jitted: eager op-by-op
        g = _grad(jnp.asarray(w), jnp.asarray(X), st, C)         # dispatch of the scans is
        hv = _hvp(jnp.asarray(v), jnp.asarray(X), st, C)         # ~10x slower to compile
        f_ref, g_ref, hv_ref = ref.ranksvm_fgh(w, X, y, qid, C, v)
        assert rel(f, f_ref) < 1e-12 and rel(g, g_ref) < 1e-12 and rel(hv, hv_ref) < 1e-12
    assert hits > 0


def test_trained_w_reaches_the_enumerated_optimum(rng):
    X = rng.standard_normal((60, 6))
    y = rng.integers(0, 3, 60).astype(float)
    qid = rng.integers(0, 4, 60)
    C = 0.5
    res = rj.ranksvm_l2(X, y, qid, C=C, tol=1e-9, eps_cg=1e-4)
    assert bool(res.converged) and float(res.grad_norm) < 1e-6
    obj = lambda w: ref.ranksvm_fgh(w, X, y, qid, C, np.zeros(6))[:2]  # noqa: E731
    best = so.minimize(obj, np.zeros(6), jac=True, method="L-BFGS-B",
                       options=dict(ftol=1e-15, gtol=1e-12, maxiter=10_000))
    f_ours = obj(np.asarray(res.weights))[0]
    assert f_ours <= best.fun * (1 + 1e-10)
    assert rel(res.weights, best.x) < 1e-5
    assert abs(float(res.objective) - f_ours) < 1e-10 * f_ours


def test_sparse_equals_dense_and_float32_runs(rng):
    d = rj.make_sparse_ranking_data(500, 200, nnz_per_row=10, num_queries=25, levels=5)
    dense = rj.ranksvm_l2(d.X.toarray().astype(np.float64), d.y, d.qid, C=0.3, tol=1e-8)
    sparse = rj.ranksvm_l2(rj.to_csr(d.X, jnp.float64), d.y, d.qid, C=0.3, tol=1e-8)
    assert rel(sparse.weights, dense.weights) < 1e-8
    f32 = rj.ranksvm_l2(rj.to_csr(d.X, jnp.float32), d.y, d.qid, C=0.3)
    assert f32.weights.dtype == jnp.float32 and bool(f32.converged)


@pytest.mark.slow
def test_one_query_of_a_million_rows_needs_no_pair_memory():
    """p = O(l^2) = 10^11 pairs would need terabytes; XLA's accounting of one
    compiled function evaluation + Hv stays under 1 GB."""
    rng = np.random.default_rng(0)
    l, n = 1_000_000, 8
    X = jnp.asarray(rng.standard_normal((l, n)), jnp.float32)
    y = rng.integers(0, 5, l).astype(np.float32)
    lv = rj.rank_levels(y)
    w = jnp.asarray(rng.standard_normal(n), jnp.float32)

    def step(w, X, lv):
        f, st = svm._fun(w, X, lv, 1.0)
        return f, svm._hvp(w, X, st, 1.0)

    mem = jax.jit(step).lower(w, X, lv).compile().memory_analysis()
    assert mem.temp_size_in_bytes < 1e9
    res = rj.ranksvm_l2(X, y, C=1e-6, max_iter=1)
    assert np.all(np.isfinite(np.asarray(res.weights))) and int(res.iterations) >= 1


def test_kernel_ranksvm_equals_linear_on_the_feature_map(rng):
    X = rng.standard_normal((50, 4))
    y, qid = rng.integers(0, 3, 50).astype(float), rng.integers(0, 3, 50)
    mdl = rj.ranksvm_kernel(X, y, qid, kernel=rj.linear_kernel(), C=0.5, tol=1e-10)
    lin = rj.ranksvm_l2(X, y, qid, C=0.5, tol=1e-10)
    f_k = np.asarray(rj.kernel_matrix(mdl.kernel, X, mdl.basis_X) @ mdl.coef)
    assert rel(f_k, X @ np.asarray(lin.weights)) < 1e-6


def test_ranksvm_input_errors(rng):
    X, y = rng.standard_normal((10, 2)), np.arange(10.)
    with pytest.raises(ValueError, match="C"):
        rj.ranksvm_l2(X, y, C=0.0)
    with pytest.raises(ValueError, match="rows"):
        rj.ranksvm_l2(X, y[:5])
    with pytest.raises(TypeError, match="qid"):
        rj.ranksvm_l2(X, y, np.zeros(10))


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["ranksvm_l2"] = [
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid, C=0.0), E(ValueError, "C")),
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid, C=np.ones(2)), E(TypeError, "C must be a scalar")),
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid[:-1]), E(ValueError, "qid|rows")),
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid, max_iter=0), E(ValueError, "max_iter")),
        (lambda d: rj.ranksvm_l2(d.X, d.ties, d.qid),                    # no pair: w = 0
         V(lambda r: np.all(np.asarray(r.weights) == 0))),
    ]
BAD_INPUT["ranksvm_kernel"] = [
        (lambda d: rj.ranksvm_kernel(d.X, d.y, d.qid, kernel=d.kern, basis=[0, d.m]), E(ValueError, "basis")),
        (lambda d: rj.ranksvm_kernel(d.X, d.y, d.qid, kernel=d.kern, C=-1.0), E(ValueError, "C")),
    ]
BAD_INPUT["rank_levels"] = [
        (lambda d: rj.rank_levels(d.nanv, d.qid), E(ValueError, "y")),
        (lambda d: rj.rank_levels(d.y, d.qid[:-1]), E(ValueError, "qid|rows")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
