import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax.graphs import build as _graph_build
from conftest import random_qids
from reference import laplacian_from_edges, laplacian_from_pairs, query_pairs

VARIANTS = [
    dict(normalized=True), dict(normalized=False),
    dict(normalized=True, exclude_ties=True), dict(normalized=False, exclude_ties=True),
    dict(normalized=False, query_weights="w"), dict(normalized=True, query_weights="pairs"),
    dict(normalized=True, exclude_ties=True, query_weights="pairs"),
]


def make_labels(rng, qid):
    y = rng.integers(0, 3, len(qid)).astype(float)
    q = np.unique(qid)
    y[qid == q[-1]] = 2.0                       # an all-tie query
    return y


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("k", [None, 3])
def test_query_laplacian_matches_dense_pairs(rng, variant, k):
    m = 40
    qid = random_qids(rng, m)
    y = make_labels(rng, qid)
    kw = dict(variant)
    if kw.get("query_weights") == "w":
        kw["query_weights"] = rng.random(len(np.unique(qid))) + 0.1
    g = rj.query_graph(qid, y, **kw)
    L = laplacian_from_pairs(m, query_pairs(qid, y, **kw))
    v = rng.standard_normal((m,) if k is None else (m, k))
    np.testing.assert_allclose(rj.laplacian_mv(g, v), L @ v, rtol=0, atol=1e-12)
    np.testing.assert_allclose(rj.laplacian_dense(g), L, atol=1e-12)
    if g.has_root:
        S = np.asarray(_graph_build.laplacian_sqrt_mv(g, np.eye(m)))
        np.testing.assert_allclose(S, S.T, atol=1e-12)
        np.testing.assert_allclose(S @ S, L, atol=1e-12)
        np.testing.assert_allclose(_graph_build.laplacian_sqrt_mv(g, v), S @ v, atol=1e-12)
    else:
        with pytest.raises(ValueError, match="square root"):
            _graph_build.laplacian_sqrt_mv(g, v)
    pairs = query_pairs(qid, y, **kw)
    counts = np.zeros(g.num_queries)
    for i, _, _ in pairs:
        counts[np.searchsorted(np.unique(qid), qid[i])] += 1
    np.testing.assert_allclose(_graph_build.query_pair_counts(g), counts)


def test_degenerate_queries_give_zero_not_nan(rng):
    qid = np.array([3, 9, 9, 9, 4])
    y = np.array([1.0, 2.0, 2.0, 2.0, 0.0])
    for kw in [dict(), dict(normalized=False), dict(exclude_ties=True),
               dict(exclude_ties=True, query_weights="pairs")]:
        g = rj.query_graph(qid, y, **kw)
        out = np.asarray(rj.laplacian_mv(g, rng.standard_normal(5)))
        assert np.all(np.isfinite(out))
        if kw.get("exclude_ties"):
            np.testing.assert_array_equal(out, 0.0)   # every query is size 1 or all ties
        else:
            assert out[0] == 0 and out[4] == 0


def test_global_and_all_pairs_graph(rng):
    m = 12
    y = rng.integers(0, 3, m).astype(float)
    v = rng.standard_normal((m, 2))
    full = laplacian_from_pairs(m, query_pairs(np.zeros(m, int), y, normalized=False))
    np.testing.assert_allclose(rj.laplacian_mv(rj.global_graph(m), v), full @ v, atol=1e-12)
    noties = laplacian_from_pairs(m, query_pairs(np.zeros(m, int), y, normalized=False,
                                                 exclude_ties=True))
    g = rj.global_graph(m, y, exclude_ties=True)
    np.testing.assert_allclose(rj.laplacian_mv(g, v), noties @ v, atol=1e-12)


@pytest.mark.parametrize("cost", ["unit", "magnitude", "inverse"])
def test_preference_laplacian_matches_dense(rng, cost):
    m, l = 15, 60
    head = rng.integers(0, m, l)
    tail = (head + rng.integers(1, m, l)) % m          # never equal to head
    mag = rng.random(l) + 0.2
    g = rj.preference_graph(head, tail, mag, num_rows=m, cost=cost)
    w = {"unit": np.ones(l), "magnitude": np.ones(l), "inverse": 1 / mag}[cost]
    z = np.ones(l) if cost == "unit" else mag
    L = laplacian_from_edges(m, head, tail, w)
    v = rng.standard_normal((m, 3))
    np.testing.assert_allclose(rj.laplacian_mv(g, v), L @ v, atol=1e-12)
    np.testing.assert_allclose(g.target, w * z)
    # M^T and M are adjoint
    u = rng.standard_normal(l)
    lhs = np.dot(_graph_build.incidence_t_mv(g, v[:, 0]), u)
    np.testing.assert_allclose(lhs, np.dot(v[:, 0], _graph_build.incidence_mv(g, u)), rtol=1e-12)


def test_scored_magnitude_edges_equal_unnormalized_query_graph(rng):
    """SPEC §1.2: scored data + cost (21) + complete query graph == §1.1 unnormalized."""
    m = 20
    qid = random_qids(rng, m, 3, 0)
    y = rng.standard_normal(m)
    h, t, d = rj.pairs_from_scores(y, qid)
    pg = rj.preference_graph(h, t, d, num_rows=m)
    qg = rj.query_graph(qid, normalized=False)
    v = rng.standard_normal(m)
    np.testing.assert_allclose(rj.laplacian_mv(pg, v), rj.laplacian_mv(qg, v), atol=1e-12)
    np.testing.assert_allclose(_graph_build.incidence_mv(pg, pg.target), rj.laplacian_mv(qg, y), atol=1e-12)


def test_graph_operators_jit_vmap_and_float32(rng):
    m = 30
    qid = random_qids(rng, m)
    g = rj.query_graph(qid)
    V = rng.standard_normal((4, m))
    f = jax.jit(rj.laplacian_mv)
    np.testing.assert_allclose(jax.vmap(f, in_axes=(None, 0))(g, V),
                               np.stack([rj.laplacian_mv(g, v) for v in V]), atol=1e-12)
    v32 = jnp.asarray(V[0], jnp.float32)
    for op in (rj.laplacian_mv, _graph_build.laplacian_sqrt_mv):
        out = jax.jit(op)(g, v32)
        assert out.dtype == jnp.float32
        np.testing.assert_allclose(out, op(g, V[0]), rtol=1e-4, atol=1e-5)


def test_unsorted_qids_equal_sorted_permutation(rng):
    m = 25
    qid = random_qids(rng, m)
    v = rng.standard_normal(m)
    perm = np.argsort(qid, kind="stable")
    a = rj.laplacian_mv(rj.query_graph(qid), v)
    b = rj.laplacian_mv(rj.query_graph(qid[perm]), v[perm])
    np.testing.assert_allclose(np.asarray(a)[perm], b, atol=1e-12)


def test_graph_constructor_errors():
    with pytest.raises(TypeError, match="qid"):
        rj.query_graph(np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="qid"):
        rj.query_graph(np.array([], int))
    with pytest.raises(ValueError, match="y is required"):
        rj.query_graph(np.array([0, 0]), exclude_ties=True)
    with pytest.raises(ValueError, match="query_weights"):
        rj.query_graph(np.array([0, 0, 1]), query_weights=np.ones(3))
    with pytest.raises(ValueError, match="query_weights"):
        rj.query_graph(np.array([0, 0, 1]), query_weights=np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="head"):
        rj.preference_graph([0, 5], [1, 2], num_rows=3)
    with pytest.raises(ValueError, match="itself"):
        rj.preference_graph([0, 1], [1, 1], num_rows=3)
    with pytest.raises(ValueError, match="magnitudes > 0"):
        rj.preference_graph([0], [1], [0.0], num_rows=2, cost="inverse")
    with pytest.raises(ValueError, match="cost"):
        rj.preference_graph([0], [1], num_rows=2, cost="hinge")
    with pytest.raises(TypeError, match="head"):
        rj.preference_graph([0.0], [1], num_rows=2)


def test_restrict_is_the_laplacian_block_of_whole_queries():
    qid = np.array([3, 3, 1, 1, 1, 7, 7, 9])
    y = np.array([1., 0, 2, 2, 0, 1, 1, 0])
    rows = np.array([2, 3, 4, 0, 1, 7])
    for kw in (dict(), dict(normalized=False), dict(exclude_ties=True)):
        g = rj.query_graph(qid, y, **kw)
        L = np.asarray(g.as_dense())[np.ix_(rows, rows)]
        sub = g.restrict(rows, size=9)
        Ls = np.asarray(sub.as_dense())
        np.testing.assert_allclose(Ls[:6, :6], L, atol=1e-12)
        assert not np.any(Ls[6:]) and not np.any(Ls[:, 6:])
    with pytest.raises(ValueError, match="whole queries"):
        rj.query_graph(qid).restrict(np.array([0, 2]))
    with pytest.raises(TypeError, match="PreferenceGraph"):
        rj.preference_graph(np.array([0]), np.array([1]), num_rows=3).restrict(np.array([0, 1]))
    assert rj.identity_graph(8).restrict(rows, 9).num_rows == 9


def test_gram_equals_the_plain_product():
    from rankjax._core.linalg import gram
    Z = np.random.default_rng(0).standard_normal((37, 5))
    np.testing.assert_allclose(np.asarray(gram(Z)), Z.T @ Z, rtol=1e-12)


def test_query_pair_counts_has_one_entry_per_query_and_takes_string_ids():
    # three queries are padded to a compile bucket of four segments; the padding is not returned
    g = rj.query_graph(np.array(["a", "b", "a", "c", "a"]))
    np.testing.assert_array_equal(np.asarray(_graph_build.query_pair_counts(g)), [3.0, 0.0, 0.0])


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["query_graph"] = [
        (lambda d: rj.query_graph(d.qid.astype(float)), E(TypeError, "qid must be an integer")),
        (lambda d: rj.query_graph(np.zeros(0, int)), E(ValueError, "qid is empty")),
        (lambda d: rj.query_graph(d.qid, d.y[:-1]), E(ValueError, "y")),
        (lambda d: rj.query_graph(d.qid, query_weights=-np.ones(5)), E(ValueError, "query_weights")),
        (lambda d: rj.query_graph(d.qid, query_weights=np.ones(4)), E(ValueError, "query_weights")),
        (lambda d: rj.query_graph(d.qid, exclude_ties=True), E(ValueError, "y")),
    ]
BAD_INPUT["list_graph"] = [
        (lambda d: rj.list_graph(np.ones((2, 3), int)), E(ValueError, "where must be a")),
        (lambda d: rj.list_graph(np.ones(3, bool)), E(ValueError, r"\[Q, L\] bool")),
        (lambda d: rj.list_graph(np.ones((0, 3), bool)), E(ValueError, "where")),
        (lambda d: rj.list_graph(np.ones((2, 3), bool), normalized=np.ones(2)),
         E((TypeError, ValueError), "normalized")),
        (lambda d: rj.list_graph(np.zeros((2, 3), bool)).mv(np.ones(6)),    # nothing kept
         V(lambda v: np.all(np.asarray(v) == 0))),
    ]
BAD_INPUT["survival_graph"] = [
        (lambda d: rj.survival_graph(d.y, (d.y > 0)[:-1]), E(ValueError, "event must have")),
        (lambda d: rj.survival_graph(d.y[:, None], d.y > 0), E(ValueError, "time must be")),
        (lambda d: rj.survival_graph(d.nanv, d.y > 0), E(ValueError, "time contains NaN")),
        (lambda d: rj.survival_graph(d.y, d.y > 0, d.qid[:-1]), E(ValueError, "strata")),
        (lambda d: rj.survival_graph(d.y, np.zeros(d.m, bool)), E(ValueError, "no comparable")),
        (lambda d: rj.survival_graph(d.y + 1, d.y > 0, normalized=True).num_pairs,
         V(lambda v: v > 0)),
    ]
BAD_INPUT["global_graph"] = [
        (lambda d: rj.global_graph(0), E(ValueError, "num_rows")),
        (lambda d: rj.global_graph(2.5), E((TypeError, ValueError), "num_rows")),
        (lambda d: rj.global_graph(3, y=np.ones(4)), E(ValueError, "y")),
    ]
BAD_INPUT["identity_graph"] = [
        (lambda d: rj.identity_graph(0), E(ValueError, "num_rows")),
        (lambda d: rj.identity_graph(np.ones(2)), E((TypeError, ValueError), "num_rows")),
    ]
BAD_INPUT["preference_graph"] = [
        (lambda d: rj.preference_graph([0, -1], [1, 2], num_rows=d.m), E(ValueError, "head")),
        (lambda d: rj.preference_graph([0, 1], [1, d.m], num_rows=d.m), E(ValueError, "tail")),
        (lambda d: rj.preference_graph([0, 1], [0, 2], num_rows=d.m), E(ValueError, "itself")),
        (lambda d: rj.preference_graph([0], [1], [-1.0], num_rows=d.m), E(ValueError, "magnitude")),
        (lambda d: rj.preference_graph([0], [1], num_rows=d.m, cost="hinge"), E(ValueError, "cost")),
        (lambda d: rj.preference_graph([], [], num_rows=d.m), E(ValueError, "no edges")),
    ]
BAD_INPUT["pairs_from_scores"] = [
        (lambda d: rj.pairs_from_scores(d.nanv, d.qid), E(ValueError, "y")),
        (lambda d: rj.pairs_from_scores(d.y, d.qid[:-1]), E(ValueError, "qid")),
        (lambda d: rj.pairs_from_scores(d.ties, d.qid), V(lambda p: len(p[0]) == 0)),
    ]
BAD_INPUT["laplacian_mv"] = [
        (lambda d: rj.laplacian_mv(d.g, np.ones(d.m + 1)), E(ValueError, "v")),
        (lambda d: rj.laplacian_mv(d.qid, np.ones(d.m)), E(TypeError, "graph")),
    ]
BAD_INPUT["laplacian_sqrt_mv"] = [
        (lambda d: _graph_build.laplacian_sqrt_mv(d.g, np.ones(d.m + 1)), E(ValueError, "v")),
    ]
BAD_INPUT["laplacian_dense"] = [
        (lambda d: rj.laplacian_dense("graph"), E(TypeError, "graph")),
    ]
BAD_INPUT["incidence_mv"] = [
        (lambda d: _graph_build.incidence_mv(d.pref, np.ones(d.m + 1)), E(ValueError, "u")),
        (lambda d: _graph_build.incidence_mv(d.g, np.ones(d.m)), E(TypeError, "PreferenceGraph")),
    ]
BAD_INPUT["incidence_t_mv"] = [
        (lambda d: _graph_build.incidence_t_mv(d.pref, np.ones(4)), E(ValueError, "v")),
        (lambda d: _graph_build.incidence_t_mv(d.g, np.ones(3)), E(TypeError, "PreferenceGraph")),
    ]
BAD_INPUT["query_pair_counts"] = [
        (lambda d: _graph_build.query_pair_counts(d.pref), E(TypeError, "QueryGraph")),
    ]

INTERNAL_INPUT = {
    k: BAD_INPUT.pop(k) for k in ["incidence_mv", "incidence_t_mv", "laplacian_sqrt_mv", "query_pair_counts"]
}
"""Cases of internal functions and of the verbs by solver (not public names: the verbs' own
tables are test_solvers.py's)."""

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
test_internal_bad_input = surface_test(INTERNAL_INPUT)


@pytest.mark.parametrize("kind", ["normalized", "ties_excluded", "pair_weights", "identity"])
@pytest.mark.parametrize("folds", [None, 4])
def test_fold_blocks_equal_the_dense_laplacian(kind, folds):
    """Every fold's ``L_UU v`` (:meth:`block_mv`, by segment sums) equals the dense
    Laplacian's block, and ``B^T V`` (:meth:`root_rows`) its dense root's, on unsorted
    queries of 1 to 8 rows, leave-query-out and 4-fold (several queries a fold)."""
    import jax.numpy as jnp
    rng = np.random.default_rng(0)
    qid = np.repeat(rng.permutation(30), rng.integers(1, 9, 30))
    rng.shuffle(qid)
    m = qid.size
    y = rng.integers(0, 3, m).astype(float)
    V = rng.standard_normal((m, 3))
    g = {"normalized": lambda: rj.query_graph(qid),
         "ties_excluded": lambda: rj.query_graph(qid, y, exclude_ties=True),
         "pair_weights": lambda: rj.query_graph(qid, normalized=False, query_weights="pairs"),
         "identity": lambda: rj.identity_graph(m)}[kind]()
    L = np.asarray(rj.laplacian_dense(g))
    f = rj.make_folds(g, folds if kind != "identity" else 5)
    checked = 0
    for idx, mask in zip(f.index, f.mask):
        for i, k in zip(np.asarray(idx), np.asarray(mask)):
            if not k.any():
                continue
            rows = i[k]
            Vi = np.where(k[:, None], V[i], 0)
            want = np.zeros_like(Vi)
            want[k] = L[np.ix_(rows, rows)] @ V[rows]
            np.testing.assert_allclose(g.block_mv(jnp.asarray(i), jnp.asarray(k), jnp.asarray(Vi)),
                                       want, atol=1e-12)
            B = np.asarray(g.block_root(jnp.asarray(i), jnp.asarray(k), jnp.float64))
            np.testing.assert_allclose(B @ B.T, np.where(k[:, None] & k[None], L[np.ix_(i, i)], 0),
                                       atol=1e-12)
            np.testing.assert_allclose(g.root_rows(jnp.asarray(i), jnp.asarray(k), jnp.asarray(Vi)),
                                       B.T @ Vi, atol=1e-12)
            checked += 1
    assert checked == f.num_folds
