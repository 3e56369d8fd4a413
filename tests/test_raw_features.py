"""Raw web-search features (issue 66): the kernel estimators' learned feature map, carried
in the model through predict, save/load and the command line; the generator of such data;
the learned kernel on raw scales learns or says why it cannot."""
import warnings

import numpy as np
import pytest

import rankjax as rj
from rankjax import cli, estimators
from surface import E, V, surface_test
from rankjax.kernels import FeatureMap, learn_feature_map
from rankjax.solvers import MappedModel


@pytest.fixture(scope="module")
def web():
    tr = rj.make_web_data(40, docs_per_query=(15, 30), seed=1)
    te = rj.make_web_data(40, docs_per_query=(15, 30), seed=2, first_qid=10**6)
    return tr, te


def test_the_generator_ships_raw_heavy_tailed_columns(web):
    tr, _ = web
    X = tr.X
    spread = np.abs(X).max(0)
    assert spread.max() > 1e4 and (X == 0).mean() > 0.1            # huge values, many zeros
    assert np.any(np.ptp(X, axis=0) == 0)                          # constant columns
    assert np.all(np.diff(tr.qid) >= 0) and set(np.unique(tr.y)) <= {0, 1, 2, 3, 4}
    again = rj.make_web_data(40, docs_per_query=(15, 30), seed=1)
    np.testing.assert_array_equal(again.X, X)


def test_the_map_logs_exactly_the_heavy_tailed_columns_beyond_one():
    """Log scale on the columns that leave [-1, 1] with |skewness| above 1 or excess
    kurtosis above 3 (scipy's moment formulas): right- and left-skewed counts and
    two-sided heavy tails; the rest unchanged: LETOR's [0, 1] features and light-tailed
    symmetric columns of any range come back bit for bit."""
    from scipy.stats import kurtosis, skew
    rng = np.random.default_rng(0)
    X = np.c_[rng.lognormal(3, 2, 300), rng.random(300), rng.normal(0, 5, 300),
              np.where(rng.random(300) < 0.6, 0, rng.pareto(1.2, 300) * 100),
              rng.random(300) ** 8, np.full(300, 7.0), -rng.lognormal(3, 2, 300),
              rng.standard_t(2, 300) * 1e4, rng.uniform(-1e6, 1e6, 300)]
    s, k = np.nan_to_num(skew(X, axis=0)), np.nan_to_num(kurtosis(X, axis=0))
    want = (np.abs(X).max(0) > 1) & ((np.abs(s) > 1) | (k > 3))
    assert want.tolist() == [True, False, False, True, False, False, True, True, False]
    fm = learn_feature_map(X)
    assert np.asarray(fm.log).tolist() == want.tolist()
    np.testing.assert_allclose(np.asarray(fm(X)), np.where(want, np.sign(X) * np.log1p(np.abs(X)), X),
                               rtol=1e-6)
    inside = rng.random((20, 3)) ** 6                               # skewed, within [0, 1]
    np.testing.assert_array_equal(np.asarray(learn_feature_map(inside)(inside)), inside)


def test_kernel_estimators_fit_and_predict_through_the_map(web, tmp_path):
    """The map is learned on the training rows, kept in ``feature_map_`` and in
    ``model_``; ``predict``, ``rj.predict(model_)``, save/load and the command line all
    score through it, equal to the kernel model fit on the mapped features by hand."""
    tr, te = web
    est = estimators.RankRLSCV(kernel="gaussian", lams=(0.1, 1.0, 10.0)).fit(tr.X, tr.y, qid=tr.qid)
    assert isinstance(est.model_, MappedModel) and isinstance(est.feature_map_, FeatureMap)
    fm = learn_feature_map(tr.X)
    np.testing.assert_array_equal(np.asarray(est.feature_map_.log), np.asarray(fm.log))
    by_hand = estimators.RankRLSCV(kernel="gaussian", lams=(0.1, 1.0, 10.0), feature_map=None).fit(
        np.asarray(fm(tr.X)), tr.y, qid=tr.qid)
    assert by_hand.feature_map_ is None and not isinstance(by_hand.model_, MappedModel)
    assert est.lam_ == by_hand.lam_ and est.gamma_ == pytest.approx(by_hand.gamma_)
    want = by_hand.predict(np.asarray(fm(te.X)))
    tol = dict(rtol=1e-5, atol=1e-6 * np.abs(want).max())
    np.testing.assert_allclose(est.predict(te.X), want, **tol)
    np.testing.assert_allclose(np.asarray(rj.predict(est.model_, te.X)), want, **tol)
    est.save(tmp_path / "m.npz")
    back = estimators.load(tmp_path / "m.npz")
    np.testing.assert_allclose(back.predict(te.X), want, **tol)
    rj.io.write_svmlight(tmp_path / "te.txt", te.X, te.y, te.qid)
    out = tmp_path / "s.txt"
    assert cli.main(["--quiet", "--load", str(tmp_path / "m.npz"), "--predict",
                     str(tmp_path / "te.txt"), "--output", str(out)]) == 0
    np.testing.assert_allclose(np.loadtxt(out)[:, 2], want, rtol=1e-4,
                               atol=1e-5 * np.abs(want).max())


def test_the_map_is_off_for_the_linear_model_a_kernel_object_and_none(web):
    tr, _ = web
    for kw in ({}, {"kernel": rj.gaussian_kernel(1e-6)}, {"kernel": "gaussian", "feature_map": None}):
        est = estimators.RankRLS(**kw).fit(tr.X[:200], tr.y[:200], qid=tr.qid[:200])
        assert est.feature_map_ is None and not isinstance(est.model_, MappedModel), kw
    with pytest.raises(ValueError, match="feature_map"):
        estimators.RankRLS(kernel="gaussian", feature_map="log").fit(tr.X, tr.y, qid=tr.qid)


def test_the_eval_set_is_scored_through_the_training_map(web):
    """RankRLSCV with an eval_set chooses λ on the eval rows mapped by the training map:
    the same choice and scores as the mapped features by hand."""
    tr, te = web
    fm = learn_feature_map(tr.X)
    a = estimators.RankRLSCV(kernel="gaussian", lams=(0.01, 1.0, 100.0)).fit(
        tr.X, tr.y, qid=tr.qid, eval_set=(te.X, te.y), eval_qid=te.qid)
    b = estimators.RankRLSCV(kernel="gaussian", lams=(0.01, 1.0, 100.0), feature_map=None).fit(
        np.asarray(fm(tr.X)), tr.y, qid=tr.qid, eval_set=(np.asarray(fm(te.X)), te.y),
        eval_qid=te.qid)
    np.testing.assert_allclose(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"],
                               rtol=1e-5)


def test_the_default_kernel_ranks_raw_features_above_the_raw_kernel_and_the_linear_model(web):
    """On raw features the default (mapped) kernel model ranks higher on test queries than
    the same model on the features as given and than the linear model."""
    tr, te = web

    def ndcg(est):
        return float(rj.ndcg(est.fit(tr.X, tr.y, qid=tr.qid).predict(te.X), te.y, te.qid, k=10))

    mapped = ndcg(estimators.RankRLSCV(kernel="gaussian"))
    raw = ndcg(estimators.RankRLSCV(kernel="gaussian", feature_map=None))
    linear = ndcg(estimators.RankRLSCV())
    assert mapped > raw + 0.05 and mapped > linear, (mapped, raw, linear)


def test_ard_whose_loss_is_never_finite_warns_with_the_cause_and_keeps_the_grid_point(
        web, monkeypatch):
    """A descent whose hold-out loss is NaN at every step (as on raw scales in float32): a
    warning naming the cause and the remedy and the grid's point kept, never numpy's
    All-NaN error; with the map (the default) the learned kernel learns on raw features."""
    from rankjax.selection import select
    tr, _ = web
    kw = dict(kernel="gaussian", basis=120, optimize=True, optimize_steps=4, ard=True)
    grid = estimators.RankRLSCV(kernel="gaussian", basis=120).fit(tr.X, tr.y, qid=tr.qid)
    real = select.descend
    monkeypatch.setattr(select, "descend", lambda *a, **k: real(*a, **k)._replace(
        loss_history=np.full(5, np.nan)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = estimators.RankRLSCV(**kw).fit(tr.X, tr.y, qid=tr.qid)
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("every gradient step" in m and "feature_map" in m for m in msgs), msgs
    assert est.lam_ == grid.lam_ and est.best_score_ == pytest.approx(grid.best_score_)
    monkeypatch.setattr(select, "descend", real)
    est = estimators.RankRLSCV(**kw).fit(tr.X, tr.y, qid=tr.qid)
    assert np.all(np.isfinite(est.tune_.loss_history)) and isinstance(est.model_, MappedModel)


@pytest.mark.parametrize("make", [
    lambda **k: estimators.RankSVM(kernel="gaussian", basis=60, **k),
    lambda **k: estimators.KPCRank(n_components=8, **k),
    lambda **k: estimators.RankRLS(kernel="gaussian", **k),
], ids=["RankSVM", "KPCRank", "RankRLS"])
def test_every_kernel_estimator_predicts_through_its_training_map(web, make):
    tr, te = web
    X, y, q = tr.X[:300], tr.y[:300], tr.qid[:300]
    fm = learn_feature_map(X)
    assert np.asarray(fm.log).sum() > 10
    est = make().fit(X, y, qid=q)
    by_hand = make(feature_map=None).fit(np.asarray(fm(X)), y, qid=q)
    want = by_hand.predict(np.asarray(fm(te.X)))
    np.testing.assert_allclose(est.predict(te.X), want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    assert np.asarray(est.feature_map_.log).tolist() == np.asarray(fm.log).tolist()


def test_features_in_the_unit_interval_fit_exactly_as_without_the_map():
    """LETOR's normalised features: no column is mapped, ``feature_map_`` is None and the
    model is the one of ``feature_map=None``, bit for bit."""
    d = rj.make_ranking_data(20, num_features=6, seed=0)
    X = (d.X - d.X.min(0)) / np.ptp(d.X, axis=0)
    a = estimators.RankRLSCV(kernel="gaussian", lams=(0.1, 1.0)).fit(X, d.y, qid=d.qid)
    b = estimators.RankRLSCV(kernel="gaussian", lams=(0.1, 1.0), feature_map=None).fit(
        X, d.y, qid=d.qid)
    assert a.feature_map_ is None and type(a.model_) is type(b.model_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_what_a_kernel_cannot_see_is_said_where_the_fit_was_called(web):
    """feature_map=None on heavy-tailed columns beyond [-100, 100]: a warning names the cause
    and the remedy (none on columns already on the log scale); a column whose spread the
    kernel's dtype cannot resolve beside the others (a uniform one, not heavy-tailed, so not
    mapped): a warning after the map too;
    the map's own output on the same raw data and [0, 1] features: no warning. Reported at
    the caller's line."""
    tr, _ = web
    X, y, q = tr.X[:300], tr.y[:300], tr.qid[:300]
    with pytest.warns(RuntimeWarning, match="feature_map='auto'") as rec:
        estimators.RankRLS(kernel="gaussian", feature_map=None).fit(X, y, qid=q)
    assert rec[0].filename == __file__
    with warnings.catch_warnings():                     # already on the log scale: quiet
        warnings.simplefilter("error")
        estimators.RankRLS(kernel="gaussian", feature_map=None).fit(
            np.asarray(learn_feature_map(X)(X)), y, qid=q)
    wide = np.c_[np.random.default_rng(0).uniform(-1e9, 1e9, 300), np.random.default_rng(1).random((300, 4))]
    for make in (estimators.RankRLS, estimators.RankRLSCV):
        with pytest.warns(RuntimeWarning, match="column 0's spread .* StandardScaler") as rec:
            make(kernel="gaussian").fit(wide, y, qid=q)
        assert rec[0].filename == __file__, make
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimators.RankRLS(kernel="gaussian").fit(X, y, qid=q)
        estimators.RankRLS(kernel="gaussian").fit(np.clip(X / 1e3, 0, 1), y, qid=q)
    from rankjax.kernels.feature_map import warn_unresolved
    for dtype, quiet, loud in ((np.float32, 2e3, 4e3), (np.float64, 6e7, 7e7)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warn_unresolved(np.array([quiet, 1.0, 1.0, 0.0], dtype))     # constant columns: ignored
        with pytest.warns(RuntimeWarning, match=f"in {np.dtype(dtype).name}"):
            warn_unresolved(np.array([loud, 1.0, 1.0, 0.0], dtype))


BAD_INPUT = {}
BAD_INPUT["learn_feature_map"] = [
    (lambda d: rj.learn_feature_map(np.where(d.X > 0.5, np.inf, d.X)), E(ValueError, "X")),
    (lambda d: rj.learn_feature_map(d.X[:, 0]), E(ValueError, "2-D")),
    (lambda d: rj.learn_feature_map(np.zeros((0, 3))), E(ValueError, "empty")),
    (lambda d: rj.learn_feature_map(np.full((4, 2), 5.0)),          # constant: not skewed
     V(lambda fm: not np.asarray(fm.log).any())),
]
BAD_INPUT["make_web_data"] = [
    (lambda d: rj.make_web_data(0), E(ValueError, "num_queries")),
    (lambda d: rj.make_web_data(3, docs_per_query=(5, 2)), E(ValueError, "docs_per_query")),
    (lambda d: rj.make_web_data(2, docs_per_query=1, num_features=3),
     V(lambda w: w.X.shape == (2, 3) and np.all(np.isfinite(w.X)))),
]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
