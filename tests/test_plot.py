"""rankjax.plot draws what it says (matplotlib, Agg backend)."""
import numpy as np
import pytest

import rankjax as rj
from rankjax.selection.cv import cross_validate

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from rankjax import plot  # noqa: E402


def test_plots_show_the_data_and_the_choice():
    d = rj.make_ranking_data(12, num_features=4, seed=0)
    g = rj.query_graph(d.qid)
    lams = np.logspace(-2, 3, 6)
    cv = cross_validate(
        rj.holdout(rj.Problem(d.X, d.y, g), rj.Primal(), lams=lams).value, d.y, d.qid, metric=rj.ndcg
    )
    ax = plot.lambda_curve(cv)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), cv.table)
    assert ax.lines[1].get_xdata()[0] == lams[int(cv.best_index)]
    v = rj.make_ranking_data(5, num_features=4, seed=1)
    r = rj.fit(rj.Problem(d.X, d.y, g, valid=rj.Problem(*(v.X, v.y, rj.query_graph(v.qid)))), rj.CG(),
               lam=0.0)
    ax = plot.cg_curve(r)
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), np.asarray(r.stats["valid_history"]))
    pq = rj.ndcg(d.X[:, 0], d.y, d.qid, per_query=True)
    ax = plot.per_query(pq)
    assert sum(p.get_height() for p in ax.patches) == int(np.sum(pq.valid))


def test_plots_take_fitted_estimators_and_cv_results():
    from rankjax.estimators import RankBoost, RankRLSCV
    d = rj.make_ranking_data(12, num_features=4, seed=0)
    m = RankRLSCV(kernel="gaussian", gammas=[0.1, 1.0], lams=(0.1, 1.0, 10.0), folds=3).fit(
        d.X, d.y, qid=d.qid)
    ax = plot.lambda_curve(m)
    gammas = np.unique(m.cv_results_["param_gamma"])     # the grid's and its extensions
    assert len(ax.lines) == gammas.size + 1 and ax.get_ylabel() == "NDCG@10" and ax.get_title()
    assert ax.lines[-1].get_xdata()[0] == m.lam_
    curve = np.isnan(m.cv_results_["param_kernel_weight"])  # the blends' rows: no λ curve
    assert not curve.all()
    for i, g in enumerate(gammas):
        pg = m.cv_results_["param_gamma"]              # NaN: the linear model's rows
        sel = np.flatnonzero((np.isnan(pg) if np.isnan(g) else pg == g) & curve)
        sel = sel[np.argsort(m.cv_results_["param_lam"][sel])]
        np.testing.assert_allclose(ax.lines[i].get_xdata(), m.cv_results_["param_lam"][sel])
        np.testing.assert_allclose(ax.lines[i].get_ydata(), m.cv_results_["mean_test_score"][sel])
    ax = plot.lambda_curve(m.cv_results_, metric="NDCG@10")
    assert ax.get_ylabel() == "NDCG@10" and len(ax.lines) == gammas.size + 1
    lin = RankRLSCV(lams=(0.1, 1.0, 10.0), folds=3).fit(d.X, d.y, qid=d.qid)
    assert len(plot.lambda_curve(lin).lines) == 2
    b = RankBoost(rounds=6).fit(d.X, d.y, qid=d.qid, eval_set=(d.X, d.y), eval_qid=d.qid)
    ax = plot.evals_curve(b)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), b.evals_result_["valid_0"]["ndcg@10"])
    assert ax.get_xlabel() == "boosting round" and ax.get_title()
    with pytest.raises(ValueError, match="eval_set"):
        plot.evals_curve(RankBoost(rounds=3).fit(d.X, d.y, qid=d.qid))
