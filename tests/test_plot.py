"""rankjax.plot draws what it says (matplotlib, Agg backend)."""
import numpy as np
import pytest

import rankjax as rj

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from rankjax import plot  # noqa: E402


def test_plots_show_the_data_and_the_choice():
    d = rj.make_ranking_data(12, num_features=4, seed=0)
    g = rj.query_graph(d.qid)
    lams = np.logspace(-2, 3, 6)
    cv = rj.cross_validate(rj.holdout_primal(d.X, d.y, g, lams=lams), d.y, d.qid, metric=rj.ndcg)
    ax = plot.lambda_curve(cv)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), cv.table)
    assert ax.lines[1].get_xdata()[0] == lams[int(cv.best_index)]
    v = rj.make_ranking_data(5, num_features=4, seed=1)
    r = rj.rankrls_cg(d.X, d.y, g, lam=0.0, valid=(v.X, v.y, rj.query_graph(v.qid)))
    ax = plot.cg_curve(r)
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), np.asarray(r.valid_history))
    pq = rj.ndcg(d.X[:, 0], d.y, d.qid, per_query=True)
    ax = plot.per_query(pq)
    assert sum(p.get_height() for p in ax.patches) == int(np.sum(pq.valid))
