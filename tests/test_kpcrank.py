import numpy as np
import pytest

import rankjax as rj
from rankjax.learners import kpcrank as _kpcrank
import reference as ref
from conftest import random_qids


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def explicit_projection(K, Kt, p):
    """Feature-space recipe of seed 003, by brute force with numpy."""
    m = K.shape[0]
    C = np.eye(m) - np.ones((m, m)) / m
    Kc = C @ K @ C
    vals, vecs = np.linalg.eigh(Kc)
    vals, vecs = vals[::-1][:p], vecs[:, ::-1][:, :p]
    Z = vecs * np.sqrt(vals)
    Kt_c = (Kt - np.ones((Kt.shape[0], m)) @ K / m) @ C
    return Z, Kt_c @ vecs / np.sqrt(vals)


@pytest.mark.parametrize("graph_kind,ridge", [("query", 0.0), ("query", 0.5), ("kpcr", 0.0),
                                              ("edges", 0.0)])
def test_path_over_p_equals_each_p_solved_separately(rng, graph_kind, ridge):
    m, P = 70, 25
    X, Xt = rng.standard_normal((m, 4)), rng.standard_normal((30, 4))
    y = rng.integers(0, 4, m).astype(float)
    qid = random_qids(rng, m)
    kern = rj.gaussian_kernel(0.3)
    K = np.asarray(rj.kernel_matrix(kern, X))
    Kt = np.asarray(rj.kernel_matrix(kern, Xt, X))
    if graph_kind == "edges":
        h, t = np.nonzero((y[:, None] > y[None, :]) & (qid[:, None] == qid[None, :]))
        g, yy = rj.preference_graph(h, t, y[h] - y[t], num_rows=m), None
        L = ref.laplacian_from_edges(m, h, t, np.ones(len(h)))   # eq. 21: w = 1, z = magnitude
        rhs = np.zeros(m)
        np.add.at(rhs, h, y[h] - y[t])
        np.add.at(rhs, t, -(y[h] - y[t]))
    else:
        g = rj.query_graph(qid) if graph_kind == "query" else rj.identity_graph(m)
        yy = y
        L = (ref.laplacian_from_pairs(m, ref.query_pairs(qid)) if graph_kind == "query"
             else np.eye(m))
        rhs = L @ y
    path = _kpcrank.kpcrank_path(K, yy, g, components=P, lam=ridge, K_valid=Kt)
    for p in range(1, P + 1):
        Z, Zt = explicit_projection(K, Kt, p)
        w = np.linalg.solve(Z.T @ L @ Z + ridge * np.eye(p), Z.T @ rhs)
        assert rel(path.weights[p - 1, :p], w) < 1e-8, p
        assert np.all(np.asarray(path.weights[p - 1, p:]) == 0)
        assert rel(path.valid_scores[p - 1], Zt @ w) < 1e-8, p
        assert rel(Kt @ np.asarray(path.coef[p - 1]) - path.offset[p - 1], Zt @ w) < 1e-8


def test_centring_equals_explicit_feature_space_centring(rng):
    X, T = rng.standard_normal((40, 6)) + 3.0, rng.standard_normal((15, 6))
    mu = X.mean(0)
    np.testing.assert_allclose(rj.center_kernel(X @ X.T), (X - mu) @ (X - mu).T, atol=1e-10)
    np.testing.assert_allclose(rj.center_test_kernel(T @ X.T, X @ X.T), (T - mu) @ (X - mu).T,
                               atol=1e-10)


def test_linear_kernel_full_rank_equals_unregularized_primal(rng):
    """With a linear kernel and p = n, KPCRank is unregularized RankRLS on the
    centred features: same test scores (up to a constant per ranking)."""
    X, Xt = rng.standard_normal((80, 5)), rng.standard_normal((20, 5))
    y, qid = rng.standard_normal(80), random_qids(rng, 80)
    g = rj.query_graph(qid)
    model = rj.kpcrank(X @ X.T, y, g, components=5)
    f = Xt @ X.T @ np.asarray(model.coef) - model.offset
    w = rj.fit(rj.Problem(X - X.mean(0), y, g), rj.Primal(), lam=1e-09).value.weights
    f_ref = (Xt - X.mean(0)) @ np.asarray(w)
    assert rel(f - f.mean(), f_ref - f_ref.mean()) < 1e-6


def test_kpcrank_input_errors(rng):
    X = rng.standard_normal((10, 3))
    g = rj.query_graph(np.zeros(10, int))
    with pytest.raises(ValueError, match="components"):
        _kpcrank.kpcrank_path(X @ X.T, np.arange(10.), g, components=11)
    with pytest.raises(ValueError, match="square"):
        _kpcrank.kpcrank_path(X @ X[:5].T, np.arange(10.), g, components=2)
    with pytest.raises(ValueError, match="K_valid"):
        _kpcrank.kpcrank_path(X @ X.T, np.arange(10.), g, components=2, K_valid=X)


def test_kpcrank_beyond_the_kernel_rank_is_finite_and_adds_nothing():
    d = rj.make_ranking_data(4, num_features=3, seed=0)
    X = np.repeat(d.X[:5], 4, axis=0)                  # duplicate rows: kernel rank 3 (centred)
    y, q = np.repeat(d.y[:5], 4), np.repeat([0, 1], 10)
    g = rj.query_graph(q)
    r = _kpcrank.kpcrank_path(X @ X.T, y, g, components=12)
    W = np.asarray(r.weights)
    assert np.all(np.isfinite(W)) and np.all(np.isfinite(np.asarray(r.coef)))
    rank = int(np.sum(np.asarray(r.eigenvalues) > 1e-10 * float(r.eigenvalues[0])))
    assert rank == 3
    for p in range(rank, 12):                           # the same model as p = rank
        np.testing.assert_allclose(W[p], W[rank - 1], atol=1e-12)
    # the first `rank` rows equal ridge-free least squares on the leading components
    Kc = np.asarray(rj.center_kernel(X @ X.T))
    vals, vecs = np.linalg.eigh(Kc)
    Z = vecs[:, ::-1][:, :rank] * np.sqrt(vals[::-1][:rank])
    L = np.asarray(g.as_dense())
    w = np.linalg.solve(Z.T @ L @ Z, Z.T @ L @ y)
    np.testing.assert_allclose(np.abs(W[rank - 1, :rank]), np.abs(w), rtol=1e-8)
    zero = _kpcrank.kpcrank_path(np.zeros((20, 20)), y, g, components=5)
    assert np.all(np.asarray(zero.weights) == 0)
    single = _kpcrank.kpcrank_path(X @ X.T, y, rj.query_graph(np.arange(20)), components=5)
    assert np.all(np.asarray(single.weights) == 0)      # size-1 queries: no pair, no signal


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["center_kernel"] = [
        (lambda d: rj.center_kernel(d.X), E(ValueError, "square")),
        (lambda d: rj.center_kernel(np.full((3, 3), np.nan)), E(ValueError, "NaN")),
    ]
BAD_INPUT["center_test_kernel"] = [
        (lambda d: rj.center_test_kernel(d.K[:2, :-1], d.K), E(ValueError, "K_test")),
    ]
BAD_INPUT["kpcrank"] = [
        (lambda d: rj.kpcrank(d.K, d.y, d.g, components=0), E(ValueError, "components")),
        (lambda d: rj.kpcrank(d.K, d.y, d.g, components=2.0), E(TypeError, "components")),
        (lambda d: rj.kpcrank(d.K, d.y, d.g, components=2, lam=-1.0), E(ValueError, "lam")),
    ]
BAD_INPUT["kpcrank_path"] = [
        (lambda d: _kpcrank.kpcrank_path(d.K, d.y, d.g, components=d.m + 1),
         E(ValueError, "components")),
        (lambda d: _kpcrank.kpcrank_path(np.zeros((d.m, d.m)), d.y, d.g, components=3),
         V(lambda r: np.all(np.asarray(r.weights) == 0))),
    ]

INTERNAL_INPUT = {k: BAD_INPUT.pop(k) for k in ['kpcrank_path']}
"""Cases of internal functions and of the verbs by solver (not public names: the verbs' own
tables are test_solvers.py's)."""

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
test_internal_bad_input = surface_test(INTERNAL_INPUT)


def test_messages_name_the_callers_own_argument():
    from rankjax.estimators import KPCRank
    X = np.random.default_rng(0).standard_normal((6, 3))
    q = [0, 0, 0, 1, 1, 1]
    with pytest.raises(ValueError, match="^components must be >= 1"):
        rj.kpcrank(X @ X.T, np.arange(6.0), rj.query_graph(q), components=0)
    with pytest.raises(ValueError, match="^n_components must be >= 1"):
        KPCRank(0).fit(X, np.arange(6.0), qid=q)
    with pytest.raises(ValueError, match="^n_components must be between 1 and 6"):
        KPCRank(7).fit(X, np.arange(6.0), qid=q)
