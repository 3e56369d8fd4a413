"""scikit-learn estimators: GridSearchCV with GroupKFold, exact CV against refitting,
every input type, persistence of every estimator (issue 12)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import rankjax as rj
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
    lambda: est.RankRLSCV(lams=(0.1, 1.0, 10.0), cv=3),
    lambda: est.CGRankRLS(lam=1.0, tol=1e-10),
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
    # without routing qid still reaches fit; score says it ranks one query
    with pytest.warns(UserWarning, match="no qid"):
        GridSearchCV(est.RankRLS(), grid, cv=GroupKFold(3)).fit(X, y, groups=qid, qid=qid)


@pytest.mark.parametrize("cv", [None, 4])
def test_rankrls_cv_equals_refitting_per_fold(data, cv):
    X, y, qid = data
    lams = (0.01, 0.3, 10.0)
    model = est.RankRLSCV(lams=lams, cv=cv).fit(X, y, qid=qid)
    folds = rj.make_folds(rj.query_graph(qid), cv)
    fold_of = np.asarray(folds.fold_of_row)
    table = []
    for lam in lams:
        pred = np.empty(len(y))
        for f in np.unique(fold_of):
            tr, te = fold_of != f, fold_of == f
            w = rj.rankrls_primal(X[tr], y[tr], rj.query_graph(qid[tr]), lam=lam).weights
            pred[te] = X[te] @ np.asarray(w)
        table.append(float(rj.ndcg(pred, y, qid)))
    np.testing.assert_allclose(model.cv_results_["mean_test_score"], table, rtol=1e-10)
    assert model.lam_ == lams[int(np.argmax(table))]
    ref = rj.rankrls_primal(X, y, rj.query_graph(qid), lam=model.lam_).weights
    np.testing.assert_allclose(model.predict(X), X @ np.asarray(ref), rtol=1e-10)


def test_kernel_grid_one_decomposition_per_gamma(data):
    X, y, qid = data
    m = est.RankRLSCV(lams=(0.1, 1.0), gammas=(0.1, 1.0), kernel="gaussian").fit(X, y, qid=qid)
    assert len(m.cv_results_["params"]) == 4 and m.gamma_ in (0.1, 1.0)
    K = rj.kernel_matrix(rj.gaussian_kernel(0.1), X)
    h = rj.holdout_dual(K, y, rj.query_graph(qid), lams=[0.1, 1.0])
    np.testing.assert_allclose(m.cv_results_["mean_test_score"][:2],
                               rj.cross_validate(h, y, qid, metric=rj.ndcg).table, rtol=1e-12)


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
    w = rj.rankrls_primal(X, y, rj.query_graph(qid), lam=0.5).weights
    m = est.RankRLS(lam=0.5).fit(X, y, qid=qid)
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
        est.CGRankRLS(lam=0.0).fit(X, y, qid=qid)
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
    ref = est.CGRankRLS(lam=0.0, patience=3).fit(X[tr], y[tr], qid=qid[tr],
                                                eval_set=(X[va], y[va]), eval_qid=qid[va])
    for kw in (dict(eval_set=[(X[va], y[va])], eval_qid=[qid[va]]),
               dict(eval_set=[(X[va], y[va])], eval_group=[sizes[8:]]),
               dict(eval_set=(X[va], y[va]), eval_group=sizes[8:])):
        m = est.CGRankRLS(lam=0.0, patience=3).fit(X[tr], y[tr], group=sizes[:8], **kw)
        assert m.best_iteration_ == ref.best_iteration_
        np.testing.assert_allclose(m.predict(X), ref.predict(X), rtol=1e-12, atol=1e-14)
    for bad, match in ((dict(qid=qid, group=sizes), "qid or group, not both"),
                       (dict(group=sizes[:-1]), "add up to"),
                       (dict(group=np.r_[sizes, 0]), "sizes >= 1"),
                       (dict(group=sizes + 0.5), "group must hold integers")):
        with pytest.raises(ValueError, match=match):
            est.RankRLS().fit(X, y, **bad)
    with pytest.raises(ValueError, match="eval_group: the query sizes add up"):
        est.CGRankRLS().fit(X, y, qid=qid, eval_set=(X, y), eval_group=sizes[1:])
    with pytest.raises(ValueError, match="one evaluation set, got 2"):
        est.CGRankRLS().fit(X, y, qid=qid, eval_set=[(X, y), (X, y)], eval_qid=[qid, qid])
    pd = pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="not both"):
        est.RankRLS().fit(pd.DataFrame(X).assign(qid=qid), y, group=sizes)


def test_functions_take_scipy_sparse_and_refuse_a_gram_that_cannot_fit(data):
    X, y, qid = data
    g = rj.query_graph(qid)
    S = sp.csr_matrix(X)
    w = np.asarray(rj.rankrls_primal(X, y, g, lam=1.0).weights)
    for w2 in (rj.rankrls_primal(S, y, g, lam=1.0).weights,
               rj.rankrls_primal_path(S, y, g, lams=[1.0]).weights[0],
               rj.rankrls_cg(S, y, g, lam=1.0, tol=1e-12).weights):
        np.testing.assert_allclose(w2, w, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rj.predict(rj.LinearModel(w), S), X @ w, rtol=1e-12)
    np.testing.assert_allclose(rj.ranksvm_l2(S, y, qid).weights, rj.ranksvm_l2(X, y, qid).weights,
                               rtol=1e-9, atol=1e-12)
    wide = sp.random(20, 10**6, density=1e-6, format="csr", random_state=0)
    with pytest.raises(ValueError, match="rankrls_dual"):
        rj.rankrls_primal(wide, np.arange(20.0), rj.query_graph(np.zeros(20, int)), lam=1.0)


@pytest.mark.parametrize("make", [lambda: est.RankRLS(), lambda: est.RankBoost(rounds=5)])
def test_scikit_learn_check_estimator(make):
    from sklearn.utils.estimator_checks import check_estimator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(make(), on_fail=None)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert not failed, failed
