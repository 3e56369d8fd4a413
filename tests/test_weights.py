"""Query weights in every estimator's ``fit`` (issue 76): ``sample_weight`` per row
(constant within a query, as LightGBM's ``weight``) or ``group_weight`` per query (as
XGBoost's ranking weights), the papers' query weights :math:`\\omega_c` underneath
(Pahikkala et al. 2009 §2.4). Twins: the weighted closed form built from enumerated
pairs, a leave-query-out hold-out retrained from scratch, and integer weights against
the queries repeated (the learners with no closed form)."""
import numpy as np
import pytest

import rankjax as rj
from rankjax import estimators as est

sklearn = pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(10, num_features=4, docs_per_query=(4, 8), seed=3)
    _, seg = np.unique(d.qid, return_inverse=True)
    qw = np.random.default_rng(0).integers(0, 4, seg.max() + 1).astype(float)
    qw[0] = 2.0                                   # some 0s, some 1s, 2s and 3s
    return d.X, d.y, d.qid, seg, qw


def weighted_laplacian(seg, qw):
    """``L = Σ_c ω_c / n_c Σ_{i<j in c} (e_i - e_j)(e_i - e_j)^T`` by enumerated pairs."""
    m = seg.shape[0]
    L = np.zeros((m, m))
    for c in np.unique(seg):
        rows = np.flatnonzero(seg == c)
        for a in range(rows.size):
            for b in range(a + 1, rows.size):
                e = np.zeros(m)
                e[rows[a]], e[rows[b]] = 1.0, -1.0
                L += qw[c] / rows.size * np.outer(e, e)
    return L


def repeated(X, y, seg, qw):
    """Every query ``c`` written ``qw[c]`` times (integer weights), as new queries."""
    parts = [(X[seg == c], y[seg == c], np.full((seg == c).sum(), 1000 * r + c))
             for c in np.unique(seg) for r in range(int(qw[c]))]
    return tuple(np.concatenate(p) for p in zip(*parts))


def test_rankrls_linear_and_kernel_weights_equal_the_weighted_closed_form(data):
    X, y, qid, seg, qw = data
    L = weighted_laplacian(seg, qw)
    lam = 0.7
    w = np.linalg.solve(X.T @ L @ X + lam * np.eye(X.shape[1]), X.T @ L @ y)
    for kw in (dict(sample_weight=qw[seg]), dict(group_weight=qw)):
        m = est.RankRLS(lam=lam, feature_map=None).fit(X, y, qid=qid, **kw)
        np.testing.assert_allclose(m.coef_, w, rtol=1e-9, atol=1e-12)
    gamma = 0.4
    K = np.exp(-gamma * ((X[:, None] - X[None]) ** 2).sum(-1))
    a = np.linalg.solve(L @ K + lam * np.eye(len(y)), L @ y)
    Xt = X[:7] + 0.1
    Kt = np.exp(-gamma * ((Xt[:, None] - X[None]) ** 2).sum(-1))
    m = est.RankRLS(lam=lam, kernel="gaussian", gamma=gamma, feature_map=None, basis=None).fit(
        X, y, qid=qid, group_weight=qw)
    got, want = m.predict(Xt), Kt @ a
    np.testing.assert_allclose(got - got.mean(), want - want.mean(), rtol=1e-8, atol=1e-10)


def test_rankrlscv_holdout_with_weights_equals_retraining_without_each_query(data):
    """Leave-query-out: query c predicted by the weighted model trained on the others; a
    query of weight 0 is left out (neither trained on nor scored)."""
    X, y, qid, seg, qw = data
    lams = (0.1, 1.0, 10.0)
    cv = est.RankRLSCV(lams=lams, feature_map=None).fit(X, y, qid=qid, sample_weight=qw[seg])
    kept = qw[seg] > 0
    assert not kept.all()
    for j, lam in enumerate(lams):
        f = np.zeros(len(y))
        for c in np.unique(seg[kept]):
            keep = seg != c
            w = qw.copy()
            w[c] = 0.0                        # the others' weights: query c out of the loss
            m = est.RankRLS(lam=lam, feature_map=None).fit(X, y, qid=qid, group_weight=w)
            f[~keep] = m.predict(X[~keep])
        want = float(rj.ndcg(f[kept], y[kept], qid[kept]))
        assert cv.cv_results_["mean_test_score"][j] == pytest.approx(want, abs=1e-10)
    refit = est.RankRLS(lam=cv.lam_, feature_map=None).fit(X, y, qid=qid, sample_weight=qw[seg])
    np.testing.assert_allclose(cv.predict(X), refit.predict(X), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("make", [lambda: est.RankSVM(C=0.5, feature_map=None, tol=1e-8),
                                  lambda: est.RankBoost(rounds=15, num_thresholds=256),
                                  lambda: est.RankRLS(lam=0.5, feature_map=None)],
                         ids=["RankSVM", "RankBoost", "RankRLS"])
def test_integer_weights_equal_the_queries_repeated(data, make):
    """RankBoost's thresholds are the quantiles of the training rows: with every distinct
    value a threshold and no query left out (weight 0), repeating a query changes none."""
    X, y, qid, seg, qw = data
    if isinstance(make(), est.RankBoost):
        qw = np.maximum(qw, 1.0)
    Xr, yr, qr = repeated(X, y, seg, qw)
    want = make().fit(Xr, yr, qid=qr).predict(X)
    for kw in (dict(sample_weight=qw[seg]), dict(group_weight=qw)):
        got = make().fit(X, y, qid=qid, **kw).predict(X)
        np.testing.assert_allclose(got - got.mean(), want - want.mean(), rtol=1e-7, atol=1e-8)
    unweighted = make().fit(X, y, qid=qid).predict(X)     # the weights change the model
    assert not np.allclose(unweighted - unweighted.mean(), want - want.mean(), atol=1e-6)


def test_kpcrank_weights_are_the_weighted_graph(data):
    """The weighted graph of the queries of positive weight (a query of weight 0 is left
    out, its rows in no kernel)."""
    X, y, qid, seg, qw = data
    m = est.KPCRank(n_components=5, gamma=0.4, feature_map=None).fit(X, y, qid=qid, group_weight=qw)
    k = qw[seg] > 0
    K = rj.kernel_matrix(rj.gaussian_kernel(0.4), X[k])
    model = rj.kpcrank(K, y[k], rj.query_graph(qid[k], query_weights=qw[qw > 0]), components=5)
    want = model.predict(rj.kernel_matrix(rj.gaussian_kernel(0.4), X, X[k]))
    np.testing.assert_allclose(m.predict(X), want, rtol=1e-8, atol=1e-10)


def test_weights_are_checked_naming_the_argument(data):
    X, y, qid, seg, qw = data
    m = est.RankRLS()
    for kw, match in ((dict(sample_weight=qw[seg], group_weight=qw), "not both"),
                      (dict(sample_weight=np.arange(len(y), dtype=float)), "constant within"),
                      (dict(sample_weight=qw[seg][:-1]), r"sample_weight must have shape"),
                      (dict(group_weight=qw[:-1]), r"group_weight must have shape \[10\]"),
                      (dict(group_weight=-qw), "group_weight must be finite and >= 0"),
                      (dict(group_weight=qw * np.nan), "group_weight must be finite"),
                      (dict(group_weight=0 * qw), "every query weighs 0")):
        with pytest.raises(ValueError, match=match):
            m.fit(X, y, qid=qid, **kw)
    with pytest.raises(TypeError, match="sample_weight must hold numbers"):
        m.fit(X, y, qid=qid, sample_weight=np.array(["a"] * len(y)))
    with pytest.raises(ValueError, match="graph='identity'"):
        est.RankRLS(graph="identity").fit(X, y, sample_weight=np.ones(len(y)))


def test_grid_search_with_routing_passes_sample_weight_to_fit_and_score(data):
    from sklearn.model_selection import GridSearchCV, GroupKFold
    X, y, qid, seg, qw = data
    sw = qw[seg] + 0.5
    with sklearn.config_context(enable_metadata_routing=True):
        gs = GridSearchCV(est.RankRLS(feature_map=None), {"lam": [0.1, 10.0]},
                          cv=GroupKFold(3)).fit(X, y, groups=qid, qid=qid, sample_weight=sw)
    for j, lam in enumerate((0.1, 10.0)):
        manual = []
        for tr, te in GroupKFold(3).split(X, y, qid):
            m = est.RankRLS(lam=lam, feature_map=None).fit(X[tr], y[tr], qid=qid[tr],
                                                           sample_weight=sw[tr])
            manual.append(m.score(X[te], y[te], qid=qid[te], sample_weight=sw[te]))
        assert gs.cv_results_["mean_test_score"][j] == pytest.approx(np.mean(manual), abs=1e-12)
