"""The learned exact kernel's route by cost (issue 76): beyond
:func:`~rankjax.selection.select.exact_tune_rows` (the descent's ``u^3 steps`` work) the
gradient runs on a subsample of whole queries from the grid's best point on every row, the
learned kernel is held out on every row and kept only when that exact hold-out beats the
grid's best there; within it, the descent runs on every row."""
import numpy as np
import pytest

import rankjax as rj
from rankjax.estimators import RankRLSCV
from rankjax.selection import refine as refine_mod
from rankjax.selection import select as select_mod

LAMS = (0.01, 0.1, 1.0, 10.0)


@pytest.fixture(scope="module")
def data():
    return rj.make_ranking_data(12, num_features=3, docs_per_query=(4, 10), seed=3)


def _fit(data, monkeypatch, accept):
    seen = []
    real = refine_mod._halves
    monkeypatch.setattr(refine_mod, "_halves", lambda p, seed: seen.append(p.X.shape[0])
                        or real(p, seed))                       # the rows learned on
    if accept:
        monkeypatch.setattr(refine_mod, "_gain",
                            lambda grid, new, old, queries: np.ones(len(queries)))
    est = RankRLSCV(lams=LAMS, kernel="gaussian", gammas=[0.3], basis=None, optimize=True,
                    optimize_steps=2, extend=0, feature_map=None).fit(data.X, data.y,
                                                                      qid=data.qid)
    return est, seen


def test_within_the_budget_the_descent_runs_on_every_row(data, monkeypatch):
    assert select_mod.exact_tune_rows(data.X.shape[0], 2) is None
    _, seen = _fit(data, monkeypatch, accept=False)
    assert seen and seen[0] == data.X.shape[0]


@pytest.mark.parametrize("accept", [True, False])
def test_beyond_it_a_subsample_learns_and_every_row_decides(data, monkeypatch, accept):
    m = data.X.shape[0]
    monkeypatch.setattr(select_mod, "EXACT_TUNE_WORK", 2 * (m // 2) ** 3)
    grid_best = RankRLSCV(lams=LAMS, kernel="gaussian", gammas=[0.3], basis=None, extend=0,
                          feature_map=None).fit(data.X, data.y, qid=data.qid).best_score_
    est, seen = _fit(data, monkeypatch, accept)
    assert seen and seen[0] < m                                  # learned on a subsample
    assert est.best_score_ >= grid_best                          # never below the grid's
    # the returned point's score is the exact hold-out of every row at its kernel and λ
    p = rj.Problem(data.X, data.y, data.qid)
    h = rj.holdout(p, rj.Dual(rj.gaussian_kernel(est.gamma_)), lams=[est.lam_]).value
    assert est.best_score_ == pytest.approx(float(rj.ndcg(h.predictions[0], data.y, data.qid,
                                                          k=10)), rel=1e-9)
    refit = rj.fit(p, rj.Dual(rj.gaussian_kernel(est.gamma_)), lam=est.lam_).value
    np.testing.assert_allclose(est.predict(data.X), rj.predict(refit, data.X), rtol=1e-8,
                               atol=1e-10)
    if not accept:
        assert est.tune_.moved is False and est.best_score_ == grid_best
