"""Grids that do not stop at their edge (issue 76): ``RankRLSCV`` extends λ (and γ) past
a best point on the grid's edge, at most ``EXTEND`` times a side, and warns
(:class:`rankjax.GridEdgeWarning`) when the bound is reached. Twin: a grid wide enough
to hold the optimum, scored by the same exact hold-out (no extension)."""
import warnings

import jax
import numpy as np
import pytest

import rankjax as rj
from rankjax.estimators import RankRLSCV
from rankjax.selection.edges import EXTEND

WIDE = np.logspace(-24, 24, 97)             # the default grid's spacing, 48 decades


@pytest.fixture(scope="module")
def data():
    return rj.make_ranking_data(40, num_features=10, seed=0)


def fit(X, d, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = RankRLSCV(feature_map=None, **kw).fit(X, d.y, qid=d.qid)
    return m, [w for w in caught if issubclass(w.category, rj.GridEdgeWarning)]


@pytest.mark.parametrize("scale", [1e-4, 1e4, 1e-8])
def test_an_optimum_past_either_edge_of_the_default_grid_is_found(data, scale):
    """Scaling the features by ``s`` moves the best λ by ``s^2``: below the default grid
    (``1e-4``, ``1e-8``: two extensions) and above it (``1e4``, past a flat stretch)."""
    with jax.enable_x64(True):
        X = data.X * scale
        ref, _ = fit(X, data, lams=WIDE, extend=0)
        m, edge = fit(X, data)
    assert not (1e-3 <= ref.lam_ <= 1e3)                    # the optimum lies off the grid
    assert m.best_score_ == pytest.approx(ref.best_score_, abs=1e-12)
    assert m.lam_ == pytest.approx(ref.lam_, rel=1e-9)
    assert not edge
    r = m.cv_results_
    assert r["extended"].any() and not r["extended"][:13].any()
    assert r["param_lam"][:13] == pytest.approx(np.logspace(-3, 3, 13))
    assert len(r["params"]) == len(r["mean_test_score"]) == r["extended"].size
    lams = np.asarray(r["param_lam"])
    assert lams.min() < m.lam_ < lams.max()                 # interior of what was held out


def test_the_bound_reached_warns_and_a_flat_grid_warns(data):
    with jax.enable_x64(True):
        m, edge = fit(data.X * 1e-9, data)                  # the optimum near 3e-17
        assert m.lam_ == pytest.approx(np.min(m.cv_results_["param_lam"]))
        assert len(edge) == 1 and "bound, extend=2" in str(edge[0].message)
        assert m.cv_results_["extended"].sum() == 13 * EXTEND
        _, flat = fit(data.X * 1e9, data)                   # flat over all 45 decades held out
        assert len(flat) == 1 and "plateau" in str(flat[0].message)


def test_extend_zero_keeps_the_grid_and_an_interior_optimum_adds_nothing(data):
    with jax.enable_x64(True):
        m, edge = fit(data.X * 1e4, data, extend=0)
        assert m.cv_results_["param_lam"] == pytest.approx(np.logspace(-3, 3, 13))
        assert not edge and not m.cv_results_["extended"].any()
        inner, _ = fit(data.X, data)                        # best λ inside the grid
        assert not inner.cv_results_["extended"].any()
        s = rj.select(rj.Problem(data.X * 1e4, data.y, data.qid), [rj.Primal()],
                      lams=[0.1, 1.0])
        assert s.scores.shape == (2,)                       # rj.select: the grid as given


def test_gamma_extends_past_a_gamma_grid_edge_and_eval_set_extends_too(data):
    """A γ grid above the best γ: the grid extends γ downwards; every point held out past
    the edge scores as a grid of that point alone (no extension) does."""
    with jax.enable_x64(True):
        X = data.X / np.std(data.X)
        kw = dict(kernel="gaussian", lams=[1e-2, 1e-1, 1.0])
        m, _ = fit(X, data, gammas=[10.0, 100.0], **kw)
        r = m.cv_results_
        g, lam = np.asarray(r["param_gamma"]), np.asarray(r["param_lam"])
        assert m.gamma_ < 10.0 and r["extended"][g < 10.0].all()
        for a in np.unique(g[r["extended"]]):
            at = r["extended"] & (g == a)
            alone, _ = fit(X, data, kernel="gaussian", lams=list(lam[at]), gammas=[a], extend=0)
            assert r["mean_test_score"][at] == pytest.approx(
                alone.cv_results_["mean_test_score"], abs=1e-12, nan_ok=True)
        tr, va = data.qid < np.median(data.qid), data.qid >= np.median(data.qid)
        v = RankRLSCV(feature_map=None).fit(
            data.X[tr] * 1e4, data.y[tr], qid=data.qid[tr],
            eval_set=[(data.X[va] * 1e4, data.y[va])], eval_qid=[data.qid[va]])
        assert v.cv_results_["extended"].any() and v.lam_ > 1e3
