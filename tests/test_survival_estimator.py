"""SurvivalRankRLS as a scikit-survival user calls it: a structured y or time=/event=, risk
scores, Harrell's C as its score, GridSearchCV, a Pipeline, save/load; equal to the library's
fit on the survival graph (its twin)."""
import warnings

import numpy as np
import pytest

import rankjax as rj
from rankjax.estimators import SurvivalRankRLS


def patients(seed=0, m=150):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 4))
    t_event = rng.exponential(np.exp(-(X[:, 0] - 0.5 * X[:, 1])))
    t_cens = rng.exponential(2.0, m)
    t, e = np.round(np.minimum(t_event, t_cens), 2), t_event <= t_cens
    y = np.empty(m, dtype=[("event", bool), ("time", float)])
    y["event"], y["time"] = e, t
    return X, y, t, e


def test_structured_y_equals_time_and_event_and_the_library_fit():
    X, y, t, e = patients()
    a = SurvivalRankRLS(lam=0.5).fit(X, y)
    b = SurvivalRankRLS(lam=0.5).fit(X, time=t, event=e)
    np.testing.assert_allclose(a.predict(X), b.predict(X), atol=1e-12)
    Z = np.asarray(a.feature_map_(X))                  # the linear default's standard map
    model = rj.fit(rj.Problem(Z, None, rj.survival_graph(t, e)), rj.Primal(), lam=0.5).value
    np.testing.assert_allclose(a.predict(X), rj.predict(model, Z), atol=1e-8)
    assert a.score(X, y) == pytest.approx(float(rj.harrell_c(a.predict(X), t, e)))
    assert a.score(X, y) > 0.65
    k = SurvivalRankRLS(lam=0.5, kernel="gaussian").fit(X, y)
    assert k.score(X, y) > 0.65


def test_grid_search_pipeline_and_save_load(tmp_path):
    pytest.importorskip("sklearn")
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    X, y, t, e = patients(1)
    gs = GridSearchCV(SurvivalRankRLS(), {"lam": [0.01, 1.0, 100.0]}, cv=KFold(3)).fit(X, y)
    assert gs.best_params_["lam"] in (0.01, 1.0, 100.0) and 0.5 < gs.best_score_ <= 1
    pipe = make_pipeline(StandardScaler(), SurvivalRankRLS(lam=1.0)).fit(X, y)
    assert pipe.score(X, y) == pytest.approx(SurvivalRankRLS(lam=1.0).fit(X, y).score(X, y),
                                             abs=1e-6)
    m = SurvivalRankRLS(lam=1.0).fit(X, y)
    m.save(tmp_path / "s.npz")
    again = rj.estimators.load(tmp_path / "s.npz")
    np.testing.assert_allclose(again.predict(X), m.predict(X), atol=0)


def test_bad_survival_targets_are_refused():
    X, y, t, e = patients(2, m=40)
    with pytest.raises(ValueError, match="not both"):
        SurvivalRankRLS().fit(X, y, time=t, event=e)
    with pytest.raises(ValueError, match="not both"):
        SurvivalRankRLS().fit(X)
    with pytest.raises(TypeError, match="structured array of two fields"):
        SurvivalRankRLS().fit(X, t)
    with pytest.raises(ValueError, match="one entry per row"):
        SurvivalRankRLS().fit(X, time=t[:-1], event=e[:-1])
    with pytest.raises(ValueError, match="give both"):
        SurvivalRankRLS().fit(X, time=t)


def test_cv_scores_equal_each_fold_retrained_by_hand_and_the_best_is_refitted():
    from rankjax.estimators import SurvivalRankRLSCV
    X, y, t, e = patients(4, m=120)
    lams = [0.01, 1.0, 100.0]
    cv = SurvivalRankRLSCV(lams, margins="unit", folds=3, random_state=5, extend=0).fit(X, y)
    fold = np.random.default_rng(5).permutation(X.shape[0]) % 3
    for k in range(3):
        tr, te = fold != k, fold == k
        for i, lam in enumerate(lams):
            by_hand = SurvivalRankRLS(lam=lam).fit(X[tr], y[tr])
            # the map is learned on every patient (label-free) in the CV estimator: compare on
            # that map's rows, through the library's fit on the fold's own graph
            Z = np.asarray(cv.feature_map_(X))
            model = rj.fit(rj.Problem(Z[tr], None, rj.survival_graph(t[tr], e[tr])), rj.Primal(),
                           lam=lam).value
            want = float(rj.harrell_c(rj.predict(model, Z[te]), t[te], e[te]))
            assert cv.cv_results_[f"split{k}_test_score"][i] == pytest.approx(want, abs=1e-12)
            assert by_hand.score(X[te], y[te]) == pytest.approx(want, abs=0.05)   # its own map
    mean = np.mean([cv.cv_results_[f"split{k}_test_score"] for k in range(3)], axis=0)
    np.testing.assert_allclose(cv.cv_results_["mean_test_score"], mean, atol=1e-12)
    assert cv.lam_ == lams[int(np.argmax(mean))] and cv.best_score_ == pytest.approx(mean.max())
    again = SurvivalRankRLS(lam=cv.lam_).fit(X, y)
    np.testing.assert_allclose(cv.predict(X), again.predict(X), atol=1e-9)
    k = SurvivalRankRLSCV(lams, margins="unit", folds=3, kernel="gaussian", extend=0).fit(
        X, time=t, event=e)
    assert k.lam_ in lams and 0.5 < k.best_score_ <= 1


def test_a_best_lambda_on_the_grids_edge_warns():
    from rankjax.estimators import SurvivalRankRLSCV
    X, y, t, e = patients(6, m=120)
    with pytest.warns(rj.GridEdgeWarning, match="edge of the grid"):
        SurvivalRankRLSCV([1e-2, 1e-1, 1.0], margins="unit", folds=3, extend=0).fit(X, y)  # rises
    with warnings.catch_warnings():
        warnings.simplefilter("error", rj.GridEdgeWarning)          # a plateau on the edge:
        SurvivalRankRLSCV([1e5, 1e6, 1e7], margins="unit", folds=3).fit(X, y)   # λ tie: no warning


def test_the_grid_grows_past_the_edge_that_holds_the_best():
    """While the best mean C lies on an edge the grid grows by as many λ again at its spacing
    (``extend`` times, marked ``extended``); the grown points score as the same grid given
    outright with ``extend=0`` (each fold's kept decomposition answers them)."""
    from rankjax.estimators import SurvivalRankRLSCV
    X, y, t, e = patients(4, m=120)
    base = np.array([1e-2, 10 ** -1.5, 1e-1])      # C still rises at 0.1 on these patients
    grown = SurvivalRankRLSCV(base, margins="unit", folds=3).fit(X, y)
    got, ext = grown.cv_results_["param_lam"], grown.cv_results_["extended"]
    assert got.size in (6, 9) and np.allclose(got[:3], base, rtol=1e-12), got
    np.testing.assert_array_equal(ext, np.arange(got.size) >= 3)
    np.testing.assert_allclose(np.diff(np.log10(got)), 0.5, rtol=1e-9)   # the grid's spacing
    given = SurvivalRankRLSCV(margins="unit", lams=got, folds=3, extend=0).fit(X, y)
    for key in ("mean_test_score", "split0_test_score", "rank_test_score"):
        np.testing.assert_allclose(grown.cv_results_[key], given.cv_results_[key], atol=1e-12)
    assert grown.lam_ == given.lam_ > base[-1]
    with pytest.warns(rj.GridEdgeWarning):
        kept = SurvivalRankRLSCV(base, margins="unit", folds=3, extend=0).fit(X, y)
    np.testing.assert_allclose(kept.cv_results_["param_lam"], base)
    inside = SurvivalRankRLSCV(margins="unit", folds=3).fit(X, y)     # the best inside: as it is
    np.testing.assert_allclose(inside.cv_results_["param_lam"], np.logspace(-3, 3, 13))


def test_an_optimum_at_the_dtypes_floor_is_left_out_of_the_grid_and_warns(monkeypatch):
    """The default grid leaves out the λ some fold refuses; when the best lies on the edge and
    nothing past it is resolved, the warning says it is the dtype's floor (a stand-in floor:
    every λ below 0.5 refused as a float32 solve would; these patients' C peaks at 1)."""
    from rankjax.estimators import SurvivalRankRLSCV, survival
    X, y, t, e = patients(4, m=120)
    scores = survival._fold_scores

    def floored(parts, lams, quiet):
        out = scores(parts, lams, quiet)
        out[:, lams < 0.5] = np.nan
        return out
    monkeypatch.setattr(survival, "_fold_scores", floored)
    with pytest.warns(rj.GridEdgeWarning, match="not resolved in this dtype"):
        m = SurvivalRankRLSCV(margins="unit", folds=3).fit(X, y)
    grid = np.logspace(-3, 3, 13)
    np.testing.assert_allclose(m.cv_results_["param_lam"], grid[grid >= 0.5])
    assert m.lam_ == 1.0 and not np.isnan(m.cv_results_["mean_test_score"]).any()


def test_the_margin_is_chosen_by_the_same_folds():
    """margins=('unit', 'log_time'): each margin's rows equal the CV of that margin alone
    (the same folds), the (margin, λ) of the best mean C is chosen and refitted; a time of 0
    leaves 'log_time' out; the single estimator takes margin= (the graph's own twin)."""
    from rankjax.estimators import SurvivalRankRLSCV
    X, y, t, e = patients(4, m=120)
    t = y["time"] = t + 0.005                                   # every time > 0
    both = SurvivalRankRLSCV(folds=3).fit(X, y)
    r = both.cv_results_
    for margin in ("unit", "log_time"):
        alone = SurvivalRankRLSCV(margins=margin, folds=3).fit(X, y).cv_results_
        rows = r["param_margin"] == margin
        np.testing.assert_allclose(r["param_lam"][rows], alone["param_lam"])
        np.testing.assert_allclose(r["mean_test_score"][rows], alone["mean_test_score"], atol=1e-12)
    unit, log = (r["mean_test_score"][r["param_margin"] == mg] for mg in ("unit", "log_time"))
    assert not np.allclose(unit, log)                  # the folds' graphs take the margin
    best = int(np.argmax(r["mean_test_score"]))
    assert (both.margin_, both.lam_) == (r["param_margin"][best], r["param_lam"][best])
    assert both.best_params_ == {"lam": both.lam_, "margin": both.margin_}
    assert r["rank_test_score"][best] == 1
    refit = SurvivalRankRLS(both.lam_, margin=both.margin_).fit(X, y)
    np.testing.assert_allclose(both.predict(X), refit.predict(X), atol=1e-9)
    g = rj.survival_graph(t, e, margin="log_time")
    model = rj.fit(rj.Problem(np.asarray(refit.feature_map_(X)), None, g), rj.Primal(), lam=0.3)
    np.testing.assert_allclose(SurvivalRankRLS(0.3, margin="log_time").fit(X, y).predict(X),
                               rj.predict(model.value, np.asarray(refit.feature_map_(X))),
                               atol=1e-9)
    t0 = np.where(np.arange(t.size) == 0, 0.0, t)
    zero = SurvivalRankRLSCV(folds=3).fit(X, time=t0, event=e)
    assert set(zero.cv_results_["param_margin"]) == {"unit"}
    with pytest.raises(ValueError, match="margins must be"):
        SurvivalRankRLSCV(margins=("unit", "unit")).fit(X, y)
    with pytest.raises(ValueError, match="needs every time > 0"):
        SurvivalRankRLSCV(margins="log_time").fit(X, time=t0, event=e)


def test_frames_with_missing_values_fit_and_a_category_is_refused_by_name():
    pd = pytest.importorskip("pandas")
    d = rj.make_survival_data(150, num_features=5, seed=2)
    X = d.X.copy()
    X[::7, 2] = np.nan
    df = pd.DataFrame(X, columns=[f"c{j}" for j in range(5)])
    m = SurvivalRankRLS(lam=1.0).fit(df, time=d.time, event=d.event)
    assert list(m.feature_names_in_) == list(df.columns)
    assert np.all(np.isfinite(m.predict(df))) and 0.5 < m.score(df, time=d.time, event=d.event)
    df["arm"] = pd.Categorical(np.arange(150) % 3)
    with pytest.raises(TypeError, match="column 'arm' is categorical.*one-hot"):
        SurvivalRankRLS().fit(df, time=d.time, event=d.event)


def test_the_survival_page_runs():
    """docs/survival.md's Python blocks, as a scikit-survival user runs them."""
    pytest.importorskip("sksurv")
    from conftest import run_page
    namespace = run_page("survival.md")
    assert 0.6 < namespace["model"].score(namespace["X_test"], namespace["y_test"]) <= 1
    assert namespace["scores"].shape == (7, 2000) and np.all(np.asarray(namespace["c"]) > 0.55)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {"estimators.SurvivalRankRLS": [
    (lambda d: SurvivalRankRLS().fit(d.X, time=d.y), E(ValueError, "give both")),
    (lambda d: SurvivalRankRLS().fit(d.X, d.y), E(TypeError, "structured array")),
    (lambda d: SurvivalRankRLS().fit(d.X, time=d.y, event=np.zeros(d.m, bool)),
     E(ValueError, "no comparable pair")),
    (lambda d: SurvivalRankRLS(lam=-1.0).fit(d.X, time=d.y + 1, event=d.y > 0),
     E(ValueError, "lam")),
    (lambda d: SurvivalRankRLS(margin="hinge").fit(d.X, time=d.y + 1, event=d.y > 0),
     E(ValueError, "margin must be one of")),
    (lambda d: SurvivalRankRLS().fit(d.X, time=d.y + 1, event=d.y > 0).score(
        d.X, time=d.y + 1, event=d.y > 0), V(lambda v: 0 <= v <= 1)),
]}
BAD_INPUT["estimators.SurvivalRankRLSCV"] = [
    (lambda d: rj.estimators.SurvivalRankRLSCV(folds=1).fit(d.X, time=d.y + 1, event=d.y > 0),
     E(ValueError, "folds must be")),
    (lambda d: rj.estimators.SurvivalRankRLSCV(lams=[-1.0]).fit(d.X, time=d.y + 1, event=d.y > 0),
     E(ValueError, "lams must be")),
    (lambda d: rj.estimators.SurvivalRankRLSCV(lams=[1.0, 10.0], folds=2).fit(
        d.X, time=d.y + 1, event=d.y > 0).lam_, V(lambda v: v in (1.0, 10.0))),
    (lambda d: rj.estimators.SurvivalRankRLSCV(extend=-1).fit(d.X, time=d.y + 1, event=d.y > 0),
     E(ValueError, "extend must be")),
    (lambda d: rj.estimators.SurvivalRankRLSCV(margins=("unit", "hinge")).fit(
        d.X, time=d.y + 1, event=d.y > 0), E(ValueError, "margins must be")),
]
BAD_INPUT["make_survival_data"] = [
    (lambda d: rj.make_survival_data(1), E(ValueError, "num_rows")),
    (lambda d: rj.make_survival_data(10, num_features=3), E(ValueError, "num_features")),
    (lambda d: rj.make_survival_data(10, censoring=0.0), E(ValueError, "censoring")),
    (lambda d: rj.make_survival_data(10, seed=-1), E(ValueError, "non-negative")),
    (lambda d: rj.make_survival_data(10).event.dtype, V(lambda v: v == np.dtype(bool))),
]
test_bad_and_degenerate_input = surface_test(BAD_INPUT)
