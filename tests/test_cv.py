"""Every hold-out prediction equals retraining without the held-out rows (float64)."""
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from rankjax.selection import cv as _cv
from rankjax.metrics.choice import select_lambda
from conftest import LAMBDARANK, random_qids

LAMS = np.array([0.01, 0.5, 20.0])
GRAPHS = [dict(), dict(normalized=False), dict(exclude_ties=True),
          dict(normalized=False, exclude_ties=True), dict(query_weights="pairs")]


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


def data(rng, m=40, n=5, k=None):
    qid = random_qids(rng, m, num_queries=7, singletons=1)
    X = rng.standard_normal((m, n)) + 0.5
    labels = rng.integers(0, 3, m).astype(float)
    y = labels if k is None else np.column_stack([labels] + [rng.standard_normal(m)
                                                             for _ in range(k - 1)])
    return X, y, labels, qid


def retrain_folds(fold_of_row, fit_predict):
    out = {}
    for f in np.unique(fold_of_row):
        test = fold_of_row == f
        out[f] = (test, fit_predict(~test, test))
    return out


@pytest.mark.parametrize("gkw", GRAPHS)
@pytest.mark.parametrize("folds", [None, 3])
@pytest.mark.parametrize("k", [None, 3])
def test_primal_holdout_equals_retraining(rng, gkw, folds, k):
    X, y, labels, qid = data(rng, k=k)
    if gkw.get("exclude_ties") and k is not None:
        pytest.skip("ties are defined by one label vector")
    g = rj.query_graph(qid, labels, **gkw)
    h = rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS, folds=folds).value
    fold = np.asarray(h.folds.fold_of_row)
    for i, lam in enumerate(LAMS):
        def fit_predict(train, test):
            gt = rj.query_graph(qid[train], labels[train], **gkw)
            w = rj.fit(rj.Problem(X[train], y[train], gt), rj.Primal(), lam=lam).value.weights
            return X[test] @ np.asarray(w)
        for f, (test, pred) in retrain_folds(fold, fit_predict).items():
            assert rel(h.predictions[i][test], pred) < 1e-8, (gkw, folds, lam, f)


ZERO_WEIGHT = dict(query_weights="zero")
"""Query weights 1, 0, 2, 1, 0.5, ... by sorted qid (the second query, of several rows, has
zero weight: the dual hold-out's ``K S U`` takes the full product there)."""


def graph_of(qid, labels, gkw, all_qid):
    """The query graph of rows ``qid`` (a subset of ``all_qid``'s rows) for ``gkw``."""
    if gkw.get("query_weights") != "zero":
        return rj.query_graph(qid, labels, **gkw)
    w = {q: [1.0, 0.0, 2.0, 1.0, 0.5][i % 5] for i, q in enumerate(np.unique(all_qid))}
    return rj.query_graph(qid, labels, query_weights=np.array([w[q] for q in np.unique(qid)]))


@pytest.mark.parametrize("gkw", GRAPHS + [ZERO_WEIGHT])
@pytest.mark.parametrize("k", [None, 2])
@pytest.mark.parametrize("folds", [None, 4])
def test_dual_holdout_equals_retraining(rng, gkw, k, folds):
    X, y, labels, qid = data(rng, m=30, k=k)
    if gkw.get("exclude_ties") and k is not None:
        pytest.skip("ties are defined by one label vector")
    kern = rj.gaussian_kernel(0.3)
    K = np.asarray(rj.kernel_matrix(kern, X))
    h = rj.holdout(rj.Problem(K, y, graph_of(qid, labels, gkw, qid), precomputed=True), rj.Dual(),
                   lams=LAMS, folds=folds).value
    fold = np.asarray(h.folds.fold_of_row)
    for i, lam in enumerate(LAMS):
        def fit_predict(train, test):
            gt = graph_of(qid[train], labels[train], gkw, qid)
            a = rj.fit(rj.Problem(K[np.ix_(train, train)], y[train], gt, precomputed=True), rj.Dual(),
                       lam=lam).value.coef
            return K[np.ix_(test, train)] @ np.asarray(a)
        for f, (test, pred) in retrain_folds(fold, fit_predict).items():
            assert rel(h.predictions[i][test], pred) < 1e-8, (gkw, lam, f)


@pytest.mark.parametrize("where", ["eager", "jit"])
@pytest.mark.parametrize("shape_flops", [0.0, np.inf])
@pytest.mark.parametrize("side", ["primal", "dual"])
def test_fold_buckets_merged_or_not_equal_retraining(rng, monkeypatch, shape_flops, side, where):
    """Queries of 1 to 21 rows (five padded shapes): each fold its own shape
    (``SHAPE_FLOPS`` 0) or all padded to the largest (infinite), both equal retraining;
    merged on the host before the program (eager, :func:`~rankjax.graphs.folds.premerge`) or
    inside it (folds traced under the caller's ``jit``: rows gathered back by relaid
    positions)."""
    from rankjax.graphs import folds as _folds
    sizes = [1, 2, 3, 5, 6, 9, 12, 17, 21]
    qid = np.repeat(np.arange(len(sizes)), sizes)
    m = qid.size
    X = rng.standard_normal((m, 4)) + 0.5
    y = rng.integers(0, 3, m).astype(float)
    monkeypatch.setattr(_folds, "SHAPE_FLOPS", shape_flops)
    jax.clear_caches()                  # a program traced under another plan would be reused
    f = rj.make_folds(rj.query_graph(qid))
    assert len(f.index) >= 4
    width = 4 if side == "primal" else m
    plan = _folds.merge_plan([i.shape[1] for i in f.index], [i.shape[0] for i in f.index],
                             len(LAMS), width)
    assert (len(plan) == 1) == bool(np.isinf(shape_flops))
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.3), X))
    g = rj.query_graph(qid)
    call = (
        (lambda f: rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS, folds=f).value)
        if side == "primal"
        else (
            lambda f: rj.holdout(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=LAMS, folds=f).value
        )
    )
    if where == "eager":
        assert len(_folds.premerge(f, len(LAMS), width).index) == len(plan)
        h = call(f)
    else:
        h = jax.jit(call)(f)
    jax.clear_caches()
    for i, lam in enumerate(LAMS):
        def fit_predict(train, test):
            gt = rj.query_graph(qid[train])
            if side == "primal":
                return X[test] @ np.asarray(
                    rj.fit(rj.Problem(X[train], y[train], gt), rj.Primal(), lam=lam).value.weights
                )
            a = rj.fit(rj.Problem(K[np.ix_(train, train)], y[train], gt, precomputed=True), rj.Dual(),
                       lam=lam).value.coef
            return K[np.ix_(test, train)] @ np.asarray(a)
        for q, (test, pred) in retrain_folds(np.asarray(f.fold_of_row), fit_predict).items():
            assert rel(h.predictions[i][test], pred) < 1e-8, (side, lam, q)


@pytest.mark.parametrize("folds", [None, 5])
def test_dual_rls_holdout_equals_retraining(rng, folds):
    """RLS on the identity graph (``K S U`` by the product): retraining agrees."""
    X, y, _, _ = data(rng, m=25)
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.3), X))
    h = rj.holdout(rj.Problem(K, y, rj.identity_graph(25), precomputed=True), rj.Dual(), lams=LAMS,
                   folds=folds).value
    fold = np.asarray(h.folds.fold_of_row)
    for i, lam in enumerate(LAMS):
        for f in np.unique(fold):
            test = fold == f
            a = np.linalg.solve(K[np.ix_(~test, ~test)] + lam * np.eye((~test).sum()), y[~test])
            assert rel(h.predictions[i][test], K[np.ix_(test, ~test)] @ a) < 1e-8, (lam, f)


def test_rls_leave_one_out_and_kfold_over_rows(rng):
    X, y, _, _ = data(rng, m=25)
    g = rj.identity_graph(25)
    for folds in (None, 5):
        h = rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS, folds=folds).value
        fold = np.asarray(h.folds.fold_of_row)
        for i, lam in enumerate(LAMS):
            for f in np.unique(fold):
                tr, te = fold != f, fold == f
                w = np.linalg.solve(X[tr].T @ X[tr] + lam * np.eye(X.shape[1]), X[tr].T @ y[tr])
                assert rel(h.predictions[i][te], X[te] @ w) < 1e-8


def test_sparse_holdout_equals_retraining(rng):
    X, y, labels, qid = data(rng, m=36, k=2)
    kern = rj.gaussian_kernel(0.25)
    basis = np.arange(0, 36, 4)
    h = rj.holdout(rj.Problem(X, y, rj.query_graph(qid)), rj.Nystrom(kern, basis), lams=LAMS).value
    KB = np.asarray(rj.kernel_matrix(kern, X[basis], X))
    KBB = np.asarray(rj.kernel_matrix(kern, X[basis]))
    fold = np.asarray(h.folds.fold_of_row)
    from reference import fit_nystrom, laplacian_from_pairs, query_pairs
    for i, lam in enumerate(LAMS):
        for f in np.unique(fold):
            tr, te = fold != f, fold == f
            L = laplacian_from_pairs(tr.sum(), query_pairs(qid[tr], labels[tr]))
            a = fit_nystrom(KB[:, tr], KBB, y[tr], L, lam)
            assert rel(h.predictions[i][te], KB[:, te].T @ a) < 1e-8


@pytest.mark.parametrize("k", [None, 3])
def test_leave_pair_out_equals_retraining(rng, k):
    m = 16
    X = rng.standard_normal((m, 3))
    y = X[:, 0] + 0.3 * rng.standard_normal(m)
    if k is not None:
        y = np.column_stack([y] + [rng.standard_normal(m) for _ in range(k - 1)])
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.5), X))
    pairs = rj.differing_pairs(np.arange(m))[::17]          # 8 pairs, spread over the rows
    dual = rj.holdout(rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True), rj.Dual(),
                      lams=LAMS, folds=rj.LeavePairOut(pairs)).value
    primal = rj.holdout(rj.Problem(X, y, rj.global_graph(np.shape(X)[0])), rj.Primal(), lams=LAMS,
                        folds=rj.LeavePairOut(pairs)).value
    for i, lam in enumerate(LAMS):
        for p, (a, b) in enumerate(np.asarray(pairs)):
            tr = np.ones(m, bool); tr[[a, b]] = False
            g = rj.global_graph(m - 2)
            A = rj.fit(
                rj.Problem(K[np.ix_(tr, tr)], y[tr], g, precomputed=True), rj.Dual(), lam=lam
            ).value.coef
            expect = K[np.ix_([a, b], tr)] @ np.asarray(A)
            assert rel(dual.predictions[i, p], expect) < 1e-8
            w = rj.fit(rj.Problem(X[tr], y[tr], g), rj.Primal(), lam=lam).value.weights
            assert rel(primal.predictions[i, p], X[[a, b]] @ np.asarray(w)) < 1e-8


def test_lpo_cindex_and_pair_helpers(rng):
    y = np.array([1, 0, 0, 1, 0])
    assert rj.positive_negative_pairs(y).shape == (6, 2)
    assert rj.differing_pairs(np.array([2, 1, 1, 0])).shape == (5, 2)
    X = rng.standard_normal((5, 2))
    r = rj.holdout(
        rj.Problem(X @ X.T, y.astype(float), rj.global_graph(np.shape(X @ X.T)[0]), precomputed=True),
        rj.Dual(),
        lams=LAMS,
        folds=rj.LeavePairOut(rj.positive_negative_pairs(y)),
    ).value
    f = np.asarray(r.predictions)
    expect = np.mean((f[:, :, 0] > f[:, :, 1]) + 0.5 * (f[:, :, 0] == f[:, :, 1]), axis=1)
    np.testing.assert_allclose(rj.lpo_cindex(r, y.astype(float)), expect)
    # an unresolved λ (NaN predictions, as the precision rule returns them) scores NaN,
    # not 0: NaN compares unequal to everything
    unresolved = r._replace(predictions=r.predictions.at[1].set(jnp.nan))
    got = np.asarray(rj.lpo_cindex(unresolved, y.astype(float)))
    assert np.isnan(got[1]) and np.allclose(np.delete(got, 1), np.delete(expect, 1))


def test_cv_under_jit_with_traced_lambdas(rng):
    X, y, labels, qid = data(rng)
    g = rj.query_graph(qid)
    folds = rj.make_folds(g, 4)
    traces = []

    @jax.jit
    def run(X, y, g, folds, lams):
        traces.append(1)
        return rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=lams, folds=folds).value.predictions

    a = run(X, y, g, folds, jnp.asarray(LAMS))
    b = run(X, y, g, folds, jnp.asarray(LAMS * 2))
    assert len(traces) == 1
    np.testing.assert_allclose(
        a, rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS, folds=folds).value.predictions, rtol=1e-10
    )
    np.testing.assert_allclose(b[0], rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS[:1] * 2,
                                                folds=folds).value.predictions[0], rtol=1e-10)
    K = X @ X.T
    pairs = rj.differing_pairs(labels)
    lpo = jax.jit(
        lambda K, y, p, lams: (
            rj.holdout(
                rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True),
                rj.Dual(),
                lams=lams,
                folds=rj.LeavePairOut(p),
            ).value.predictions
        )
    )
    np.testing.assert_allclose(
        lpo(K, labels, pairs, jnp.asarray(LAMS)),
        rj.holdout(
            rj.Problem(K, labels, rj.global_graph(np.shape(K)[0]), precomputed=True),
            rj.Dual(),
            lams=LAMS,
            folds=rj.LeavePairOut(pairs),
        ).value.predictions,
        rtol=1e-9,
    )


def test_cross_validate_and_permutation_test(rng):
    X, y, labels, qid = data(rng, m=60)
    g = rj.query_graph(qid)
    h = rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS).value
    cv = _cv.cross_validate(h, y, qid, metric=rj.pairwise_error)
    for i in range(len(LAMS)):
        np.testing.assert_allclose(cv.table[i], rj.pairwise_error(h.predictions[i], y, qid))
    assert int(cv.best_index) == int(np.argmin(np.asarray(cv.table)))
    # labels unrelated to X: the permutation p-value is not small; related: it is
    res = rj.permutation_test(rj.Problem(X, y, g), rj.Primal(), lams=LAMS[1:2],
                              metric=rj.pairwise_error, num_permutations=19)
    assert res.null.shape == (1, 19) and np.all(np.asarray(res.pvalue) > 0.05)
    y2 = X @ np.array([2.0, -1.0, 0.5, 0.0, 1.0])
    res2 = rj.permutation_test(rj.Problem(X, y2, g), rj.Primal(), lams=LAMS[1:2],
                               metric=rj.pairwise_error, num_permutations=19)
    np.testing.assert_allclose(res2.pvalue, 0.05)
    # the null scores are the CV scores of the shuffled labels, recomputed one by one
    perms = _cv.permuted_labels(y2, qid, num_permutations=19)
    one = rj.holdout(rj.Problem(X, perms[:, 3], g), rj.Primal(), lams=LAMS[1:2]).value.predictions[0]
    np.testing.assert_allclose(res2.null[0, 3], rj.pairwise_error(one, perms[:, 3], qid))


def test_cv_errors(rng):
    X, y, labels, qid = data(rng)
    with pytest.raises(TypeError, match="PreferenceGraph"):
        rj.holdout(
            rj.Problem(X, None, rj.preference_graph([0], [1], num_rows=40)), rj.Primal(), lams=LAMS
        ).value
    with pytest.raises(ValueError, match="one fold"):
        rj.make_folds(rj.query_graph(qid), np.arange(40) % 2)
    with pytest.raises(ValueError, match="folds"):
        rj.make_folds(rj.query_graph(qid), 1)
    with pytest.raises(ValueError, match="pairs"):
        rj.holdout(rj.Problem(X @ X.T, y, rj.global_graph(np.shape(X @ X.T)[0]), precomputed=True),
                   rj.Dual(), lams=LAMS, folds=rj.LeavePairOut([[0, 0]])).value


def test_a_single_fold_is_an_error(rng):
    """Leaving out the only query (or putting every row in one fold) would train on
    nothing and give a plausible-looking criterion: every hold-out entry refuses it."""
    X, y, labels, qid = data(rng)
    one = np.zeros(40, int)
    calls = [lambda: rj.make_folds(rj.query_graph(one)),
             lambda: rj.make_folds(rj.query_graph(qid), np.zeros(40, int)),
             lambda: rj.make_folds(rj.identity_graph(1)),
             lambda: rj.holdout(rj.Problem(X, y, rj.query_graph(one)), rj.Primal(), lams=LAMS).value,
             lambda: rj.holdout(rj.Problem(X @ X.T, y, rj.query_graph(one), precomputed=True), rj.Dual(),
                                lams=LAMS).value,
             lambda: rj.tune(rj.Problem(X, y, rj.query_graph(one)), tune_solver(), steps=1),
             lambda: rj.holdout(rj.scale.shard(rj.Problem(X, y, one)), rj.Primal(), lams=LAMS)]
    for call in calls:
        with pytest.raises(ValueError, match="at least 2 folds|at least 2 queries"):
            call()
    with pytest.raises(ValueError, match="at least 2 queries"):
        rj.holdout(rj.scale.stream(rj.io.iter_npy(X, y, one, chunk_rows=16)), rj.Primal(), lams=LAMS)
    if importlib.util.find_spec("sklearn"):
        from rankjax.estimators import RankRLSCV
        with pytest.raises(ValueError, match="qid"):
            RankRLSCV().fit(X, labels)                  # no qid: one query
    assert rj.make_folds(rj.query_graph(qid)).num_folds == np.unique(qid).size


@pytest.mark.skipif(not (LAMBDARANK / "rank.train").exists(), reason="shared data absent")
def test_lambdarank_lqo_choice_is_near_the_best_in_hindsight():
    tr = rj.io.read_svmlight(LAMBDARANK / "rank.train")
    te = rj.io.read_svmlight(LAMBDARANK / "rank.test", num_features=tr.X.shape[1])
    lams = 10.0 ** np.arange(-2, 4.01, 0.5)
    g = rj.query_graph(tr.qid)
    h = rj.holdout(rj.Problem(tr.X, tr.y, g), rj.Primal(), lams=lams).value
    W = rj.path(rj.Problem(tr.X, tr.y, g, valid=rj.Problem(te.X, te.y, te.qid)), rj.Primal(),
                lams=lams).value
    test = np.asarray(select_lambda(lams, W.valid_scores, te.y, te.qid, metric=rj.ndcg,
                                       k=10).table)
    best = test.max()
    # the criterion is the LQO pairwise error (the quantity RankRLS minimises, seed 001's
    # selection measure); LQO NDCG@10 is flat and noisy on 201 queries and is only reported
    by_err = _cv.cross_validate(h, tr.y, tr.qid, metric=rj.pairwise_error)
    by_ndcg = _cv.cross_validate(h, tr.y, tr.qid, metric=rj.ndcg, k=10)
    chosen = test[int(by_err.best_index)]
    print(f"LQO pairwise error chooses lambda={float(by_err.best_lam):g}: test NDCG@10={chosen:.4f}; "
          f"LQO NDCG@10 chooses lambda={float(by_ndcg.best_lam):g}: "
          f"{test[int(by_ndcg.best_index)]:.4f}; best in hindsight lambda="
          f"{lams[test.argmax()]:g}: {best:.4f}")
    assert best - chosen <= 0.01


def test_differing_pairs_is_linear_in_memory():
    import tracemalloc
    rng = np.random.default_rng(0)
    for y in (rng.integers(0, 3, 40), rng.normal(size=25), np.r_[1, np.zeros(30)], np.zeros(4)):
        i, j = np.triu_indices(len(y), 1)
        keep = y[i] != y[j]
        np.testing.assert_array_equal(rj.differing_pairs(y), np.stack([i[keep], j[keep]], 1))
    y = np.r_[1.0, np.zeros(30000)]
    tracemalloc.start()
    out = rj.differing_pairs(y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert out.shape == (30000, 2) and peak < 50e6          # quadratic would be ~7 GB


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["make_folds"] = [
        (lambda d: rj.make_folds(d.g, 1), E(ValueError, "folds")),
        (lambda d: rj.make_folds(d.g, 6), E(ValueError, "folds")),
        (lambda d: rj.make_folds(d.g, np.zeros(d.m - 1, int)), E(ValueError, "folds")),
        (lambda d: rj.make_folds(d.pref), E(TypeError, "PreferenceGraph")),
    ]
BAD_INPUT["holdout_primal"] = [
    (
        lambda d: (
            rj.holdout(
                rj.Problem(d.X, d.y, d.g),
                rj.Primal(),
                lams=[1.0],
                folds=rj.make_folds(rj.query_graph(d.qid // 2)),
            ).value
        ),
        E(ValueError, "another graph"),
    ),
    (lambda d: rj.holdout(rj.Problem(d.X, d.y, d.g), rj.Primal(), lams=[-1.0]).value, E(ValueError, "lams")),
    (
        lambda d: rj.holdout(rj.Problem(d.X, None, d.pref), rj.Primal(), lams=[1.0]).value,
        E(TypeError, "PreferenceGraph"),
    ),
]
BAD_INPUT["holdout_dual"] = [
    (
        lambda d: rj.holdout(rj.Problem(d.K, d.y[:-1], d.g, precomputed=True), rj.Dual(), lams=[1.0]).value,
        E(ValueError, "y"),
    ),
    (
        lambda d: (
            rj.holdout(rj.Problem(d.K, d.y, d.g, precomputed=True), rj.Dual(), lams=[1.0], folds="loo").value
        ),
        E((TypeError, ValueError), "folds"),
    ),
]
BAD_INPUT["holdout_nystrom"] = [
        (lambda d: rj.holdout(rj.Problem(d.X, d.y, d.g), rj.Nystrom(d.kern, [-1, 0]), lams=[1.0]).value,
         E(ValueError, "basis")),
    ]
BAD_INPUT["cross_validate"] = [
        (lambda d: _cv.cross_validate(d.y, d.y, d.qid, metric=rj.ndcg), E(TypeError, "holdout")),
        (lambda d: _cv.cross_validate(d.holdout, d.y[:-1], d.qid, metric=rj.ndcg), E(ValueError,
                                                                                     "y|scores")),
    ]
BAD_INPUT["leave_pair_out_dual"] = [
    (
        lambda d: (
            rj.holdout(
                rj.Problem(d.K, d.y, rj.global_graph(np.shape(d.K)[0]), precomputed=True),
                rj.Dual(),
                lams=[1.0],
                folds=rj.LeavePairOut([[0, 0]]),
            ).value
        ),
        E(ValueError, "pairs"),
    ),
    (
        lambda d: (
            rj.holdout(
                rj.Problem(d.K, d.y, rj.global_graph(np.shape(d.K)[0]), precomputed=True),
                rj.Dual(),
                lams=[1.0],
                folds=rj.LeavePairOut([[0, 1, 2]]),
            ).value
        ),
        E(ValueError, "pairs"),
    ),
    (
        lambda d: (
            rj.holdout(
                rj.Problem(d.K[:2, :2], d.y[:2], rj.global_graph(np.shape(d.K[:2, :2])[0]), precomputed=True),
                rj.Dual(),
                lams=[1.0],
                folds=rj.LeavePairOut([[0, 1]]),
            ).value
        ),
        E(ValueError, "3 rows"),
    ),
]
BAD_INPUT["leave_pair_out_primal"] = [
        (lambda d: rj.holdout(rj.Problem(d.X, d.y, rj.global_graph(np.shape(d.X)[0])), rj.Primal(),
                              lams=[1.0], folds=rj.LeavePairOut([[0, d.m]])).value, E(ValueError, "pairs")),
        (lambda d: rj.holdout(rj.Problem(d.X, d.y, rj.global_graph(np.shape(d.X)[0])), rj.Primal(),
                              lams=[1.0], folds=rj.LeavePairOut([[0.0, 1.0]])).value, E(TypeError, "pairs")),
    ]
BAD_INPUT["lpo_cindex"] = [
        (lambda d: rj.lpo_cindex(d.lpo, d.y[:3]), E(ValueError, "pairs index row")),
        (lambda d: rj.lpo_cindex(d.lpo, d.ties), E(ValueError, "no pair")),
    ]
BAD_INPUT["differing_pairs"] = [
        (lambda d: rj.differing_pairs(d.nanv), E(ValueError, "y")),
        (lambda d: rj.differing_pairs(d.ties), V(lambda p: p.shape == (0, 2))),
    ]
BAD_INPUT["positive_negative_pairs"] = [
        (lambda d: rj.positive_negative_pairs(d.y), E(ValueError, "y")),     # graded, not 0/1
        (lambda d: rj.positive_negative_pairs(np.ones(4)), V(lambda p: p.shape == (0, 2))),
    ]
BAD_INPUT["permuted_labels"] = [
        (lambda d: _cv.permuted_labels(d.y, d.qid, num_permutations=0), E(ValueError, "num_permutations")),
        (lambda d: _cv.permuted_labels(d.y, d.qid[:-1], num_permutations=2), E(ValueError, "qid")),
    ]
BAD_INPUT["permutation_test"] = [
    (
        lambda d: rj.permutation_test(
            rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[1.0], metric=rj.ndcg, num_permutations=0
        ),
        E(ValueError, "num_permutations"),
    ),
    (
        lambda d: rj.permutation_test(rj.Problem(d.X, d.y, d.qid), rj.CG(), lams=[1.0], metric=rj.ndcg),
        E(TypeError, "CG does not support permutation_test"),
    ),
    (
        lambda d: rj.permutation_test(rj.Problem(d.X, np.c_[d.y, d.y], d.qid), lams=[1.0], metric=rj.ndcg),
        E(ValueError, "one output"),
    ),
]

INTERNAL_INPUT = {
    k: BAD_INPUT.pop(k)
    for k in [
        "cross_validate",
        "holdout_dual",
        "holdout_nystrom",
        "holdout_primal",
        "leave_pair_out_dual",
        "leave_pair_out_primal",
        "permuted_labels",
    ]
}
"""Cases of internal functions and of the verbs by solver (not public names: the verbs' own
tables are test_solvers.py's)."""

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
test_internal_bad_input = surface_test(INTERNAL_INPUT)


def test_large_folds_one_lambda_at_a_time_equal_retraining(rng):
    """Folds above ``paths().small_solve`` rows (2 folds of about 300 rows): on the CPU their
    systems are solved one λ at a time by LAPACK (the serial path); dual hold-out against
    retraining without the fold."""
    qid = np.repeat(np.arange(60), 10)
    X = rng.standard_normal((qid.size, 4))
    y = rng.integers(0, 3, qid.size).astype(float)
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.3), X))
    g = rj.query_graph(qid)
    h = rj.holdout(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=LAMS, folds=2, seed=1).value
    assert max(i.shape[1] for i in h.folds.index) > 256
    for i, lam in enumerate(LAMS):
        def fit_predict(train, test):
            a = rj.fit(
                rj.Problem(K[np.ix_(train, train)], y[train], rj.query_graph(qid[train]), precomputed=True),
                rj.Dual(),
                lam=lam,
            ).value.coef
            return K[np.ix_(test, train)] @ np.asarray(a)
        for f, (test, pred) in retrain_folds(np.asarray(h.folds.fold_of_row), fit_predict).items():
            assert rel(h.predictions[i][test], pred) < 1e-8, (lam, f)
