"""scikit-learn estimators: GridSearchCV with GroupKFold, exact CV against refitting,
every input type, persistence of every estimator (issue 12)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import rankjax as rj
from rankjax.selection.cv import cross_validate
from rankjax import estimators as est

sklearn = pytest.importorskip("sklearn")
from sklearn.model_selection import GridSearchCV, GroupKFold  # noqa: E402


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(12, num_features=5, docs_per_query=(5, 9), seed=0)
    return d.X, d.y, d.qid


LEARNERS = [
    lambda: est.RankRLS(lam=1.0),
    lambda: est.RankRLS(lam=1.0, kernel="gaussian", gamma=0.3),
    lambda: est.RankRLS(lam=1.0, kernel="gaussian", gamma=0.3, basis=20),
    lambda: est.RankRLS(lam=1.0, graph="identity"),
    lambda: est.RankRLSCV(lams=(0.1, 1.0, 10.0), folds=3),
    lambda: est.RankRLS(solver='cg', lam=1.0, tol=1e-10),
    lambda: est.RankSVM(C=0.5),
    lambda: est.RankSVM(C=0.5, kernel="gaussian", gamma=0.3, basis=20),
    lambda: est.KPCRank(n_components=4, gamma=0.3),
    lambda: est.RankBoost(rounds=5),
]


def test_grid_search_with_group_k_fold(data):
    X, y, qid = data
    grid = {"lam": [0.01, 1.0, 100.0]}
    with sklearn.config_context(enable_metadata_routing=True):
        gs = GridSearchCV(est.RankRLS(), grid, cv=GroupKFold(5)).fit(X, y, groups=qid, qid=qid)
    assert gs.best_params_["lam"] in grid["lam"] and np.all(np.isfinite(gs.cv_results_["mean_test_score"]))
    # the fold scores are NDCG@10 over the held-out queries
    split = list(GroupKFold(5).split(X, y, qid))[0]
    tr, te = split
    m = est.RankRLS(lam=gs.best_params_["lam"]).fit(X[tr], y[tr], qid=qid[tr])
    assert gs.cv_results_["split0_test_score"][gs.best_index_] == pytest.approx(
        float(rj.ndcg(m.predict(X[te]), y[te], qid[te])), abs=1e-12)
    # without routing qid reaches fit but not score: the search stops with the remedy
    with pytest.raises(ValueError, match="enable_metadata_routing"):
        GridSearchCV(est.RankRLS(), grid, cv=GroupKFold(3)).fit(X, y, groups=qid, qid=qid)


def test_without_routing_scikit_learn_stops_with_the_remedy_or_ranks_by_queries(data):
    """Without metadata routing ``qid`` reaches ``fit`` but not ``score``: every route that
    would score a fold as one query stops naming the remedy; a DataFrame's ``qid`` column
    reaches both and ranks by queries."""
    from sklearn.model_selection import cross_val_score, cross_validate
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    X, y, qid = data
    m = est.RankRLS().fit(X, y, qid=qid)
    runs = [lambda: m.score(X, y),
            lambda: cross_validate(est.RankRLS(), X, y, groups=qid, cv=GroupKFold(3),
                                   params={"qid": qid}),
            lambda: cross_val_score(est.RankSVM(), X, y, groups=qid, cv=GroupKFold(3),
                                    params={"qid": qid}, error_score="raise"),
            lambda: GridSearchCV(make_pipeline(StandardScaler(), est.RankRLSCV()),
                                 {"rankrlscv__lams": [(0.1, 1.0)]}, cv=GroupKFold(3)).fit(
                                     X, y, groups=qid, rankrlscv__qid=qid),
            lambda: make_pipeline(StandardScaler(), est.RankRLS()).fit(
                X, y, rankrls__qid=qid).score(X, y)]
    for run in runs:
        with pytest.raises(ValueError, match="enable_metadata_routing"):
            run()
    assert est.RankRLS().fit(X, y, qid=np.zeros(len(y), int)).score(X, y) > 0   # one query: fine
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X).assign(qid=qid)
    gs = GridSearchCV(est.RankRLS(), {"lam": [0.1, 10.0]}, cv=GroupKFold(3)).fit(frame, y, groups=qid)
    manual = [est.RankRLS(lam=0.1).fit(X[tr], y[tr], qid=qid[tr]).score(X[te], y[te], qid=qid[te])
              for tr, te in GroupKFold(3).split(X, y, qid)]
    assert gs.cv_results_["mean_test_score"][0] == pytest.approx(np.mean(manual), abs=1e-12)


@pytest.mark.parametrize("cv", [None, 4])
def test_rankrls_cv_equals_refitting_per_fold(data, cv):
    X, y, qid = data
    lams = (0.01, 0.3, 10.0)
    model = est.RankRLSCV(lams=lams, folds=cv, feature_map=None).fit(X, y, qid=qid)
    folds = rj.make_folds(rj.query_graph(qid), cv)
    fold_of = np.asarray(folds.fold_of_row)
    table = []
    for lam in model.cv_results_["param_lam"]:     # the grid and its extensions past an edge
        pred = np.empty(len(y))
        for f in np.unique(fold_of):
            tr, te = fold_of != f, fold_of == f
            w = rj.fit(rj.Problem(X[tr], y[tr], rj.query_graph(qid[tr])), rj.Primal(), lam=lam).value.weights
            pred[te] = X[te] @ np.asarray(w)
        table.append(float(rj.ndcg(pred, y, qid)))
    np.testing.assert_allclose(model.cv_results_["mean_test_score"], table, rtol=1e-10)
    assert model.lam_ == model.cv_results_["param_lam"][int(np.argmax(table))]
    ref = rj.fit(rj.Problem(X, y, rj.query_graph(qid)), rj.Primal(), lam=model.lam_).value.weights
    np.testing.assert_allclose(model.predict(X), X @ np.asarray(ref), rtol=1e-10)


def test_kernel_grid_one_decomposition_per_gamma(data):
    X, y, qid = data
    m = est.RankRLSCV(lams=(0.1, 1.0), gammas=(0.1, 1.0), kernel="gaussian",
                      feature_map=None, extend=0).fit(X, y, qid=qid)
    assert len(m.cv_results_["params"]) == 4 and m.gamma_ in (0.1, 1.0)
    K = rj.kernel_matrix(rj.gaussian_kernel(0.1), X)
    h = rj.holdout(rj.Problem(K, y, rj.query_graph(qid), precomputed=True), rj.Dual(), lams=[0.1, 1.0]).value
    np.testing.assert_allclose(m.cv_results_["mean_test_score"][:2],
                               cross_validate(h, y, qid, metric=rj.ndcg).table, rtol=1e-12)


@pytest.mark.parametrize("make", LEARNERS)
def test_every_input_type_gives_the_same_model(data, make):
    pd = pytest.importorskip("pandas")
    X, y, qid = data
    base = make().fit(X, y, qid=qid).predict(X)
    names = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    strq = np.array([f"q{v:03d}" for v in qid])
    for Xin, q in ((sp.csr_matrix(X), qid), (frame, strq), (frame.assign(qid=qid), None),
                   (X, pd.Categorical(strq))):
        m = make().fit(Xin, y, qid=q)
        Xp = Xin.drop(columns="qid") if hasattr(Xin, "columns") and "qid" in Xin else Xin
        np.testing.assert_allclose(m.predict(Xp), base, rtol=1e-8, atol=1e-10)
    sizes = rj.io.qid_to_groups(qid)                  # LightGBM's group= (query sizes)
    m = make().fit(frame, y, group=pd.Series(sizes))
    np.testing.assert_allclose(m.predict(frame), base, rtol=1e-8, atol=1e-10)
    assert m.score(X, y, group=sizes) == m.score(X, y, qid=qid)
    m = make().fit(frame, y, qid=qid)
    assert list(m.feature_names_in_) == names
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:, :3])
    with pytest.raises(ValueError, match="feature names"):
        m.predict(frame.rename(columns={"f0": "g0"}))


@pytest.mark.parametrize("make", LEARNERS)
def test_every_estimator_round_trips(tmp_path, data, make):
    pd = pytest.importorskip("pandas")
    X, y, qid = data
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(X.shape[1])])
    m = make().fit(frame, y, qid=qid)
    m.save(tmp_path / "m.npz")
    back = est.load(tmp_path / "m.npz")
    assert type(back) is type(m) and back.get_params().keys() == m.get_params().keys()
    for k, v in m.get_params().items():
        np.testing.assert_equal(back.get_params()[k], v)
    assert list(back.feature_names_in_) == list(frame.columns) and back.n_features_in_ == 5
    np.testing.assert_array_equal(back.predict(frame), m.predict(frame))
    with pytest.raises(ValueError, match="features"):
        back.predict(X[:, :4])


def test_wide_data_solves_the_dual_and_equals_the_primal():
    rng = np.random.default_rng(0)
    X, y, qid = rng.normal(size=(12, 40)), rng.normal(size=12), np.repeat([0, 1, 2], 4)
    w = rj.fit(rj.Problem(X, y, rj.query_graph(qid)), rj.Primal(), lam=0.5).value.weights
    m = est.RankRLS(lam=0.5, feature_map=None).fit(X, y, qid=qid)
    np.testing.assert_allclose(m.model_.weights, w, rtol=1e-9, atol=1e-12)


def test_estimator_errors(data):
    X, y, qid = data
    with pytest.raises(ValueError, match="not fitted"):
        est.RankRLS().predict(X)
    with pytest.raises(ValueError, match="lam"):
        est.RankRLS(lam=-1.0).fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="kernel"):
        est.RankRLS(kernel="rbff").fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="qid has"):
        est.RankRLS().fit(X, y, qid=qid[:-1])
    with pytest.raises(TypeError, match="y must hold numbers"):     # not parsed silently
        est.RankRLS().fit(X, y.astype(str), qid=qid)
    with pytest.raises(ValueError, match="eval_set"):
        est.RankRLS(solver='cg', lam=0.0).fit(X, y, qid=qid)
    with pytest.raises(ValueError, match="no rankjax estimator"):
        import tempfile
        import pathlib
        p = pathlib.Path(tempfile.mkdtemp()) / "w.npz"
        rj.io.save_model(p, np.ones(3))
        est.load(p)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.RankRLS().fit(X, y, qid=qid).score(X, y, qid=qid)        # no warning with qid


def test_group_sizes_and_eval_set_forms(data):
    """``group=`` sizes are the queries of ``qid``; giving both, sizes that do not add
    up to the rows, or non-integer sizes are errors; XGBoost/LightGBM's list of one
    evaluation set is the pair itself, and several sets are refused."""
    X, y, qid = data
    sizes = rj.io.qid_to_groups(qid)
    assert sizes.shape[0] == 12 and sizes.sum() == X.shape[0]
    cut = int(sizes[:8].sum())                          # 8 queries to fit, 4 to early-stop on
    tr, va = slice(0, cut), slice(cut, None)
    ref = est.RankRLS(solver='cg', lam=0.0, early_stopping_rounds=3).fit(X[tr], y[tr], qid=qid[tr],
                                                eval_set=(X[va], y[va]), eval_qid=qid[va])
    for kw in (dict(eval_set=[(X[va], y[va])], eval_qid=[qid[va]]),
               dict(eval_set=[(X[va], y[va])], eval_group=[sizes[8:]]),
               dict(eval_set=(X[va], y[va]), eval_group=sizes[8:])):
        m = est.RankRLS(solver="cg", lam=0.0, early_stopping_rounds=3).fit(
            X[tr], y[tr], group=sizes[:8], **kw
        )
        assert m.best_iteration_ == ref.best_iteration_
        np.testing.assert_allclose(m.predict(X), ref.predict(X), rtol=1e-12, atol=1e-14)
    for bad, match in ((dict(qid=qid, group=sizes), "qid or group, not both"),
                       (dict(group=sizes[:-1]), "add up to"),
                       (dict(group=np.r_[sizes, 0]), "sizes >= 1"),
                       (dict(group=sizes + 0.5), "group must hold integers")):
        with pytest.raises(ValueError, match=match):
            est.RankRLS().fit(X, y, **bad)
    with pytest.raises(ValueError, match="eval_group: the query sizes add up"):
        est.RankRLS(solver='cg').fit(X, y, qid=qid, eval_set=(X, y), eval_group=sizes[1:])
    with pytest.raises(ValueError, match="one evaluation set, got 2"):
        est.RankRLS(solver='cg').fit(X, y, qid=qid, eval_set=[(X, y), (X, y)], eval_qid=[qid, qid])
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="not both"):
        est.RankRLS().fit(pd.DataFrame(X).assign(qid=qid), y, group=sizes)


def test_functions_take_scipy_sparse_and_refuse_a_gram_that_cannot_fit(data):
    X, y, qid = data
    g = rj.query_graph(qid)
    S = sp.csr_matrix(X)
    w = np.asarray(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=1.0).value.weights)
    for w2 in (rj.fit(rj.Problem(S, y, g), rj.Primal(), lam=1.0).value.weights,
               rj.path(rj.Problem(S, y, g), rj.Primal(), lams=[1.0]).value.weights[0],
               rj.fit(rj.Problem(S, y, g), rj.CG(tol=1e-12), lam=1.0).value.weights):
        np.testing.assert_allclose(w2, w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rj.predict(rj.LinearModel(w), S), X @ w, rtol=1e-12)
    np.testing.assert_allclose(rj.ranksvm_l2(S, y, qid).weights, rj.ranksvm_l2(X, y, qid).weights,
                               rtol=1e-9, atol=1e-12)
    wide = sp.random(20, 10**6, density=1e-6, format="csr", random_state=0)
    with pytest.raises(ValueError, match=r"rj\.Dual\(\)"):
        rj.fit(
            rj.Problem(wide, np.arange(20.0), rj.query_graph(np.zeros(20, int))), rj.Primal(), lam=1.0
        ).value


class _TwoQueries:
    """scikit-learn's checks call ``fit(X, y)`` and ``score(X, y)``; a ranker needs the
    queries: rows are split into two queries (first and second half), as a user passes
    them to both; every hyper-parameter keeps its default."""

    @staticmethod
    def _halves(X):
        m = X.shape[0] if hasattr(X, "shape") else len(X)
        return (np.arange(m) >= m // 2).astype(int)

    def fit(self, X, y, qid=None, **kw):
        if qid is None and kw.get("group") is None:
            qid = self._halves(X)
        return super().fit(X, y, qid=qid, **kw)

    def score(self, X, y, qid=None, **kw):
        if qid is None and kw.get("group") is None:
            qid = self._halves(X)
        return super().score(X, y, qid=qid, **kw)


ESTIMATORS = ["RankRLS", "RankRLSCV", "RankSVM", "KPCRank", "RankBoost"]
for _name in ESTIMATORS:          # module-level classes: the pickling checks find them
    globals()["Checked" + _name] = type("Checked" + _name, (_TwoQueries, getattr(est, _name)),
                                        {"__module__": __name__})


@pytest.mark.parametrize("name", ESTIMATORS)
def test_scikit_learn_check_estimator_with_defaults(name):
    from sklearn.utils.estimator_checks import check_estimator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(globals()["Checked" + name](), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert len(results) > 30 and not failed, failed


@pytest.mark.parametrize("name", ESTIMATORS)
def test_fit_without_queries_is_an_error_naming_qid_and_group(data, name):
    X, y, qid = data
    with pytest.raises(ValueError, match=r"qid=.*group="):
        getattr(est, name)().fit(X, y)
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(query_id=qid)
    with pytest.raises(ValueError, match=r"X.pop\('query_id'\)"):
        getattr(est, name)().fit(frame, y)
    # RLS regression (identity graph) needs no queries
    est.RankRLS(graph="identity").fit(X, y)


def test_pipeline_grid_search_with_routing_equals_manual_refits(data):
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    X, y, qid = data
    grid = {"r__lams": [(0.01, 0.1), (1.0, 10.0)]}
    pipe = Pipeline([("s", StandardScaler()), ("r", est.RankRLSCV(folds=3))])
    with sklearn.config_context(enable_metadata_routing=True):
        gs = GridSearchCV(pipe, grid, cv=GroupKFold(5)).fit(X, y, groups=qid, qid=qid)
        assert np.isfinite(gs.score(X, y, qid=qid))
    scores = gs.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    for j, lams in enumerate(grid["r__lams"]):
        manual = []
        for tr, te in GroupKFold(5).split(X, y, qid):
            sc = StandardScaler().fit(X[tr])
            m = est.RankRLSCV(lams=lams, folds=3).fit(sc.transform(X[tr]), y[tr], qid=qid[tr])
            manual.append(float(rj.ndcg(m.predict(sc.transform(X[te])), y[te], qid[te])))
        assert scores[j] == pytest.approx(np.mean(manual), abs=1e-12)


def test_score_sample_weight_weights_queries(data):
    X, y, qid = data
    m = est.RankRLS().fit(X, y, qid=qid)
    pq = rj.ndcg(m.predict(X), y, qid, per_query=True)
    _, seg = np.unique(qid, return_inverse=True)
    qw = np.arange(1.0, seg.max() + 2)
    ok = np.asarray(pq.valid)
    want = np.sum(np.asarray(pq.values)[ok] * qw[ok]) / np.sum(qw[ok])
    assert m.score(X, y, qid=qid, sample_weight=qw[seg]) == pytest.approx(want, abs=1e-12)
    assert m.score(X, y, qid=qid, sample_weight=np.ones(len(y))) == pytest.approx(m.score(X, y, qid=qid))
    with pytest.raises(ValueError, match="constant within each query"):
        m.score(X, y, qid=qid, sample_weight=np.arange(len(y), dtype=float))


def test_gamma_mean_and_scale_are_data_scaled(data):
    """``gamma="mean"`` (the default) is one over the mean squared distance of two training
    rows as the kernel sees them (after the map); ``"scale"`` scikit-learn's; ``"auto"``
    ``1 / n``."""
    X, y, qid = data
    for make in (lambda **k: est.RankRLS(kernel="gaussian", **k),
                 lambda **k: est.KPCRank(n_components=3, **k),
                 lambda **k: est.RankSVM(kernel="gaussian", basis=10, **k)):
        m = make().fit(X * 10, y, qid=qid)
        Z = np.asarray(m.feature_map_(X * 10))
        assert m.gamma_ == pytest.approx(1 / (2 * np.sum(np.var(Z, axis=0))))
        m = make(gamma="scale", feature_map=None).fit(X * 10, y, qid=qid)
        assert m.gamma_ == pytest.approx(1 / (X.shape[1] * np.var(X * 10)))
    m = est.RankRLS(kernel="gaussian", gamma="auto").fit(X, y, qid=qid)
    assert m.gamma_ == pytest.approx(1 / X.shape[1])
    with pytest.raises(ValueError, match="gamma"):
        est.RankRLS(kernel="gaussian", gamma="bogus").fit(X, y, qid=qid)
    cv = est.RankRLSCV(kernel="gaussian", lams=(1.0,), folds=3, feature_map=None).fit(X, y, qid=qid)
    D = X[:, None, :] - X[None, :, :]
    assert cv.gamma_ == pytest.approx(1 / np.mean(np.sum(D * D, axis=2)))


@pytest.mark.parametrize("make", LEARNERS)
def test_fit_returns_a_ready_model(data, make):
    """``fit`` blocks until the model is computed (JAX dispatches asynchronously): every
    array of ``model_`` is ready when ``fit`` returns, so ``predict`` pays no fit work."""
    import jax
    X, y, qid = data
    m = make().fit(X, y, qid=qid)
    leaves = [v for v in jax.tree_util.tree_leaves(m.model_) if isinstance(v, jax.Array)]
    assert leaves and all(v.is_ready() for v in leaves)


@pytest.fixture(scope="module")
def split():
    d = rj.make_ranking_data(30, num_features=6, seed=3)
    v = rj.make_ranking_data(12, num_features=6, seed=4, first_qid=500)
    return d, v


def _check_evals(m, v, caplog, printed=True):
    hist = m.evals_result_["valid_0"]["ndcg@10"]
    assert len(hist) >= m.best_iteration_ and np.all(np.isfinite(hist))
    assert m.best_score_ == pytest.approx(max(hist), abs=1e-12)
    # the kept model is the one scored best on the evaluation set
    assert m.score(v.X, v.y, qid=v.qid) == pytest.approx(m.best_score_, abs=1e-5)
    err = caplog.text                            # the lines of the "rankjax" logger
    assert ("valid_0's ndcg@10" in err or "CG iteration" in err) == printed, err


@pytest.mark.parametrize("rounds", [3, None])
def test_rankboost_eval_set_keeps_the_best_round_equal_to_refitting(split, caplog, rounds):
    d, v = split
    m = est.RankBoost(rounds=40, early_stopping_rounds=rounds, verbose=True).fit(
        d.X, d.y, qid=d.qid, eval_set=[(v.X, v.y)], eval_qid=[v.qid])
    _check_evals(m, v, caplog)
    hist = m.evals_result_["valid_0"]["ndcg@10"]
    if rounds is None:
        assert len(hist) == 40
    else:                                  # stopped `rounds` rounds after the best one
        assert len(hist) == 40 or len(hist) == m.best_iteration_ + rounds
    ref = est.RankBoost(rounds=m.best_iteration_).fit(d.X, d.y, qid=d.qid)
    np.testing.assert_allclose(m.predict(v.X), ref.predict(v.X), rtol=1e-6)


def test_kpcrank_eval_set_chooses_the_number_of_components(split, caplog):
    d, v = split
    m = est.KPCRank(n_components=25, gamma=0.1, verbose=5).fit(
        d.X, d.y, qid=d.qid, eval_set=(v.X, v.y), eval_qid=v.qid)
    _check_evals(m, v, caplog)
    assert len(m.evals_result_["valid_0"]["ndcg@10"]) == 25
    ref = est.KPCRank(n_components=m.best_iteration_, gamma=0.1).fit(d.X, d.y, qid=d.qid)
    np.testing.assert_allclose(m.predict(v.X), ref.predict(v.X), rtol=1e-5, atol=1e-6)


def test_ranksvm_eval_set_keeps_the_best_newton_iterate(split, caplog):
    d, v = split
    m = est.RankSVM(C=10.0, early_stopping_rounds=2, verbose=True, feature_map=None).fit(
        d.X, d.y, qid=d.qid, eval_set=[(v.X, v.y)], eval_qid=[v.qid])
    _check_evals(m, v, caplog)
    ref = rj.ranksvm_l2(d.X, d.y, d.qid, C=10.0, max_iter=max(m.best_iteration_, 1))
    if m.best_iteration_ > 0:
        np.testing.assert_allclose(m.coef_, ref.weights, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="linear RankSVM"):
        est.RankSVM(kernel="gaussian").fit(d.X, d.y, qid=d.qid, eval_set=(v.X, v.y), eval_qid=v.qid)


def test_cg_eval_set_history_is_ndcg(split, caplog):
    d, v = split
    m = est.RankRLS(solver='cg', lam=0.0, early_stopping_rounds=4, verbose=1).fit(
        d.X, d.y, qid=d.qid, eval_set=[(v.X, v.y)], eval_qid=[v.qid])
    _check_evals(m, v, caplog)
    assert m.evals_result_["valid_0"]["ndcg@10"][m.best_iteration_] == pytest.approx(m.best_score_)
    np.testing.assert_allclose(m.predict(v.X), v.X @ m.coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"kernel": "gaussian", "gammas": [0.05, 0.3], "feature_map": "rank"},
                                {"kernel": "gaussian", "gamma": 0.1, "basis": 60, "feature_map": "rank"}])
def test_rankrlscv_eval_set_equals_scoring_every_refit(split, kw):
    d, v = split
    lams = (0.01, 1.0, 100.0)
    m = est.RankRLSCV(lams=lams, **kw).fit(d.X, d.y, qid=d.qid, eval_set=(v.X, v.y), eval_qid=v.qid)
    hist = m.evals_result_["valid_0"]["ndcg@10"]
    np.testing.assert_allclose(hist, m.cv_results_["mean_test_score"])
    manual = []
    for p in m.cv_results_["params"]:
        one = {k: val for k, val in kw.items() if k != "gammas"}
        if "gammas" in kw:
            one["gamma"] = p["gamma"]
        r = est.RankRLS(lam=p["lam"], **one).fit(d.X, d.y, qid=d.qid)
        manual.append(r.score(v.X, v.y, qid=v.qid))
    np.testing.assert_allclose(hist, manual, atol=2e-5)
    assert m.score(v.X, v.y, qid=v.qid) == pytest.approx(m.best_score_, abs=2e-5)
    with pytest.raises(ValueError, match="optimize"):
        est.RankRLSCV(optimize=True).fit(d.X, d.y, qid=d.qid, eval_set=(v.X, v.y), eval_qid=v.qid)


def test_coef_and_feature_importances(data):
    X, y, qid = data
    for make in (lambda: est.RankRLS(), lambda: est.RankRLSCV(lams=(0.1, 1.0), folds=3),
                 lambda: est.RankSVM(), lambda: est.RankRLS(solver='cg')):
        m = make().fit(X, y, qid=qid)
        np.testing.assert_allclose(X @ m.coef_, m.predict(X), rtol=1e-5, atol=1e-6)
    b = est.RankBoost(rounds=15).fit(X, y, qid=qid)
    imp = b.feature_importances_
    assert imp.shape == (X.shape[1],) and imp.sum() == pytest.approx(1.0) and np.all(imp >= 0)
    used = np.unique(np.asarray(b.model_.feature))
    assert set(np.flatnonzero(imp > 0)) == set(used.tolist())


def test_saved_estimators_keep_cv_results_and_evals(data, tmp_path):
    X, y, qid = data
    m = est.RankRLSCV(kernel="gaussian", gammas=[0.1, 0.3], lams=(0.1, 1.0), folds=3).fit(X, y, qid=qid)
    m.save(tmp_path / "cv.npz")
    back = est.load(tmp_path / "cv.npz")
    assert back.cv_results_["params"] == m.cv_results_["params"]
    for k in ("mean_test_score", "param_features", "param_kernel", "stage", "rank_test_score"):
        np.testing.assert_array_equal(back.cv_results_[k], m.cv_results_[k])
    assert back.best_params_ == m.best_params_ and back.lam_ == m.lam_
    assert getattr(back, "gamma_", None) == getattr(m, "gamma_", None)
    np.testing.assert_allclose(back.predict(X), m.predict(X), rtol=1e-6)
    b = est.RankBoost(rounds=5).fit(X, y, qid=qid, eval_set=(X, y), eval_qid=qid)
    b.save(tmp_path / "b.npz")
    assert est.load(tmp_path / "b.npz").evals_result_ == b.evals_result_


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT.update({
    f"estimators.{name}": [
        (lambda d, c=name: getattr(est, c)().predict(d.X), E(ValueError, "not fitted")),
        (lambda d, c=name: getattr(est, c)().fit(d.X, d.y[:-1], qid=d.qid), E(ValueError, "y")),
        (lambda d, c=name: getattr(est, c)().fit(d.X, d.y, qid=d.qid.astype(float)),
         E(TypeError, "qid")),
    ] for name in ("RankRLS", "RankRLSCV", "RankSVM", "KPCRank", "RankBoost")})
for name in ("RankRLS", "RankRLSCV", "RankSVM", "KPCRank"):      # the feature map takes NaN
    BAD_INPUT[f"estimators.{name}"] += [
        (lambda d, c=name: getattr(est, c)().fit(np.c_[d.X[:, :-1], d.nanv], d.y, qid=d.qid).predict(
            np.c_[d.X[:, :-1], d.nanv]), V(lambda f: np.all(np.isfinite(f)))),
        (lambda d, c=name: getattr(est, c)(feature_map=None).fit(np.c_[d.X[:, :-1], d.nanv], d.y,
                                                                 qid=d.qid), E(ValueError, "NaN")),
    ]
BAD_INPUT["estimators.RankBoost"].append(
    (lambda d: est.RankBoost().fit(np.c_[d.X[:, :-1], d.nanv], d.y, qid=d.qid), E(ValueError, "NaN")))
BAD_INPUT["estimators.RankRLS"] += [
    (lambda d: est.RankRLS(solver='cg', lam=0.0).fit(d.X, d.y, qid=d.qid), E(ValueError, "eval_set")),
    (lambda d: est.RankRLS(solver='cg', lam=-1.0).fit(d.X, d.y, qid=d.qid), E(ValueError, "lam")),
    (lambda d: est.RankRLS(solver='qr').fit(d.X, d.y, qid=d.qid), E(ValueError, "solver must be one of")),
    (lambda d: est.RankRLS(solver='primal', kernel="gaussian").fit(d.X, d.y, qid=d.qid),
     E(ValueError, "linear model")),
    (lambda d: est.RankRLS().fit(d.X, d.y, qid=d.qid, eval_set=(d.X, d.y), eval_qid=d.qid),
     E(ValueError, "eval_set")),
]
BAD_INPUT["estimators.load"] = [
    (lambda d: est.load(d.model_file), E(ValueError, "no rankjax estimator")),
]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)


def test_gammas_with_the_linear_kernel_are_refused():
    """The README's guarantee: an option that does not apply is refused, never ignored."""
    d = rj.make_ranking_data(4, num_features=3, seed=0)
    with pytest.raises(ValueError, match="gammas is not used by the linear kernel"):
        est.RankRLSCV(gammas=[0.1, 1.0]).fit(d.X, d.y, qid=d.qid)
