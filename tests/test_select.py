"""``rj.select`` (rankjax/selection/select.py): the (solver, λ) selection behind
``RankRLSCV``, over solver objects, callable without scikit-learn, equal to the estimator
and to retraining per fold."""
import subprocess
import sys

import numpy as np
import pytest

import rankjax as rj
from conftest import tune_solver
from rankjax.selection.cv import cross_validate
from rankjax.solvers.models import ScaledModel
from rankjax.selection.grid import Grid
from rankjax.selection.tune import TuneResult
from rankjax.estimators import RankRLSCV

LAMS = [0.01, 1.0, 100.0]


@pytest.fixture(scope="module")
def data():
    d = rj.make_ranking_data(16, num_features=4, seed=3)
    v = rj.make_ranking_data(6, num_features=4, seed=4)
    return d, v


CONFIGS = {
    "linear": dict(kernel=None),
    "gaussian": dict(kernel="gaussian", gammas=[0.1, 1.0], basis=None),
    "polynomial": dict(kernel="polynomial", gammas=[0.5], basis=None),
    "gaussian-basis": dict(kernel="gaussian", gammas=[0.1, 1.0], basis=40),
    "kmeans-basis": dict(kernel="gaussian", gammas=[0.3], basis=rj.Basis(30, method="kmeans++")),
}


def _library(d, cfg, valid=None, cv=None):
    kind = cfg.get("kernel")
    if kind is None:
        kernels = [None]
    elif kind == "gaussian":
        kernels = [rj.gaussian_kernel(g) for g in cfg["gammas"]]
    else:
        kernels = [rj.polynomial_kernel(2, g, 1.0) for g in cfg["gammas"]]
    return select(d, kernels, basis=cfg.get("basis"), folds=cv, valid=valid,
                  extend=RankRLSCV().extend)                # the estimator's grid extension


def select(d, kernels, basis=None, valid=None, lams=LAMS, **kw):
    """``rj.select`` over the solvers of ``kernels`` (``None``: the linear model; a basis:
    the Nyström solvers of it), as RankRLSCV builds them."""
    if basis is not None:
        solvers = [rj.Nystrom(k, basis) for k in kernels]
    else:
        solvers = [rj.Auto() if k is None else rj.Dual(k) for k in kernels]
    v = None if valid is None else rj.Problem(*valid)
    return rj.select(rj.Problem(d.X, d.y, d.qid, valid=v), solvers, lams=lams, **kw)


@pytest.mark.parametrize("how", ["cv", "kfold", "eval_set"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_estimator_is_the_library_selection(data, name, how):
    """RankRLSCV is rj.select on the rows through the map it learns (rank for a kernel,
    standard for the linear model), the map's own twin in tests/test_feature_maps.py."""
    d, v = data
    cfg = CONFIGS[name]
    cv = 4 if how == "kfold" else None
    kind = "standard" if cfg.get("kernel") is None else "rank"
    est = RankRLSCV(lams=LAMS, folds=cv, feature_map=kind, **cfg)
    fm = rj.learn_feature_map(d.X, d.y, d.qid, kind=kind)
    md, mv = d._replace(X=np.asarray(fm(d.X))), v._replace(X=np.asarray(fm(v.X)))
    if how == "eval_set":
        est.fit(d.X, d.y, d.qid, eval_set=[(v.X, v.y)], eval_qid=[v.qid])
        sel = _library(md, cfg, valid=(mv.X, v.y, v.qid))
    else:
        est.fit(d.X, d.y, d.qid)
        sel = _library(md, cfg, cv=cv)
    np.testing.assert_array_equal(est.cv_results_["mean_test_score"], sel.scores)
    np.testing.assert_array_equal(est.cv_results_["param_lam"], sel.lams)
    assert est.lam_ == sel.lam and est.best_score_ == sel.score
    if sel.gamma is not None:
        assert est.gamma_ == sel.gamma
        np.testing.assert_array_equal(est.cv_results_["param_gamma"], sel.gammas)
    # the map's normal scores by scipy on the host and by jax.scipy jitted: 1e-16 apart,
    # through the model's solve (condition ~1e4 at the smallest λ) 1e-12
    want = np.ravel(rj.predict(sel.model, mv.X))
    np.testing.assert_allclose(est.predict(v.X), want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


@pytest.mark.parametrize("kernel", [None, rj.gaussian_kernel(0.5)])
def test_scores_equal_retraining_without_each_query(data, kernel):
    """The brute-force twin: every grid point's NDCG from models retrained on all queries
    but one, the held-out query scored by its own model; ``predictions`` the chosen λ's
    retrained scores of each query (up to a constant per query, where the query graph
    leaves a kernel model's shift free)."""
    d, _ = data
    sel = select(d, [kernel])
    ref, scores = [], []
    for lam in LAMS:
        f = np.zeros(len(d.y))
        for q in np.unique(d.qid):
            tr, te = d.qid != q, d.qid == q
            g = rj.query_graph(d.qid[tr])
            if kernel is None:
                w = np.linalg.solve(d.X[tr].T @ np.asarray(rj.laplacian_dense(g)) @ d.X[tr]
                                    + lam * np.eye(d.X.shape[1]),
                                    d.X[tr].T @ np.asarray(rj.laplacian_dense(g)) @ d.y[tr])
                f[te] = d.X[te] @ w
            else:
                model = rj.fit(rj.Problem(d.X[tr], d.y[tr], g), rj.Dual(kernel), lam=lam).value
                f[te] = np.asarray(rj.predict(model, d.X[te]))
        ref.append(float(rj.ndcg(f, d.y, d.qid, k=10)))
        scores.append(f)
    np.testing.assert_allclose(sel.scores, ref, rtol=1e-9)
    assert sel.lam == LAMS[int(np.nanargmax(ref))]
    got, want = np.asarray(sel.predictions), scores[int(np.nanargmax(ref))]
    for q in np.unique(d.qid):
        i = d.qid == q
        np.testing.assert_allclose(got[i] - got[i].mean(), want[i] - want[i].mean(),
                                   rtol=1e-8, atol=1e-10 * np.abs(want).max())


def test_the_predictions_of_an_evaluation_set_are_the_chosen_models(data):
    """With ``problem.valid`` the kept predictions are the chosen model's scores of the
    evaluation rows; a point the gradient moved off the grid keeps none."""
    d, v = data
    sel = select(d, [rj.gaussian_kernel(0.5)], valid=(v.X, v.y, v.qid))
    np.testing.assert_allclose(sel.predictions, rj.predict(sel.model, v.X), rtol=1e-9,
                               atol=1e-12)
    moved = select(d, [rj.gaussian_kernel(0.5)], optimize=True, optimize_steps=3, ard=True)
    assert (moved.predictions is None) == bool(moved.trajectory.moved)


def test_nystrom_scores_are_the_nystrom_hold_out(data):
    d, _ = data
    k = rj.gaussian_kernel(0.3)
    sel = select(d, [k], basis=rj.Basis(rows=np.arange(0, 160, 4)))
    h = rj.holdout(rj.Problem(d.X, d.y, rj.query_graph(d.qid)), rj.Nystrom(k, np.arange(0, 160, 4)),
                   lams=LAMS).value
    np.testing.assert_allclose(sel.scores, cross_validate(h, d.y, d.qid, metric=rj.ndcg, k=10).table,
                               rtol=1e-12)
    np.testing.assert_array_equal(sel.basis, np.arange(0, 160, 4))
    i = LAMS.index(sel.lam)
    path = rj.path(rj.Problem(d.X, d.y, rj.query_graph(d.qid)), rj.Nystrom(k, np.arange(0, 160, 4)),
                   lams=LAMS).value
    np.testing.assert_allclose(rj.predict(sel.model, d.X), rj.predict(path, d.X)[i], rtol=1e-8,
                               atol=1e-10)


def test_the_selection_runs_without_scikit_learn():
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "import numpy as np, rankjax as rj\n"
            "d = rj.make_ranking_data(8, num_features=3, seed=0)\n"
            "s = rj.select(rj.Problem(d.X, d.y, d.qid), [rj.Dual(rj.gaussian_kernel(1.))], lams=[0.1, 1.])\n"
            "assert 'sklearn' not in {m.split('.')[0] for m in sys.modules if sys.modules[m]}\n"
            "print(s.lam in (0.1, 1.))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"



@pytest.mark.parametrize("basis", [None, 40])
def test_optimize_with_ard_refines_by_the_gradient_in_the_library(data, basis):
    d, _ = data
    kernels = [rj.gaussian_kernel(0.3)]
    sel = select(d, kernels, basis=basis, optimize=True, ard=True, optimize_steps=4)
    grid = select(d, kernels, basis=basis)
    assert isinstance(sel.trajectory, TuneResult) and sel.trajectory.loss_history.shape == (5,)
    assert sel.score >= grid.score
    np.testing.assert_array_equal(sel.scores, grid.scores)          # the grid is unchanged
    est = RankRLSCV(lams=LAMS, kernel="gaussian", gammas=[0.3], basis=basis, optimize=True,
                    ard=True, optimize_steps=4, feature_map=None).fit(d.X, d.y, d.qid)
    assert (est.lam_, est.gamma_, est.best_score_) == (sel.lam, sel.gamma, sel.score)
    assert est.evals_result_["tune"]["cv_loss"] == sel.trajectory.loss_history.tolist()
    np.testing.assert_allclose(est.predict(d.X), np.ravel(rj.predict(sel.model, d.X)), rtol=1e-12)
    if isinstance(sel.model, ScaledModel):   # the refined point kept: scores equal its hold-out
        s = np.asarray(sel.model.scales)
        params = {"log_lam": np.log(sel.lam), "log_gamma": np.log(sel.gamma),
                  "log_scales": np.log(s)}
        p = rj.Problem(d.X, d.y, d.qid)
        solver = tune_solver("gaussian", None if basis is None else rj.Basis(rows=sel.basis))
        data = solver.prepare(p, solver.init(p, "cv_predictions"))
        f = solver.cv_predictions(params, data, rj.make_folds(p.graph))
        assert float(rj.ndcg(f, d.y, d.qid, k=10)) == pytest.approx(sel.score, rel=1e-9)
    with pytest.raises(ValueError, match="optimize=True"):
        select(d, kernels, ard=True)


@pytest.mark.parametrize("gammas, steps, lams", [((0.1, 1.0), 1, LAMS), ((0.1, 1.0), 20, LAMS),
                                                 ((0.03, 3.0), 2, LAMS), ((0.3,), 3, LAMS),
                                                 ((0.3,), 4, list(np.logspace(-3, 3, 9)))])
def test_optimize_with_a_basis_searches_gamma_and_a_finer_lambda_grid(data, gammas, steps, lams,
                                                                      monkeypatch):
    """Nyström without ard: at most min(steps, 4) points, each scored by the exact hold-out of
    a finer λ grid (L points between two grid steps below and above the best λ; the twin: a
    grid of that one γ and those λ): the best γ first, then golden-section points in γ; the
    kept model equal to the Nyström fit at the chosen point on the same basis."""
    d, _ = data
    kernels = [rj.gaussian_kernel(g) for g in gammas]
    grid = select(d, kernels, basis=40, lams=lams)
    calls, holdout = [], Grid.holdout
    monkeypatch.setattr(Grid, "holdout",
                        lambda self, s, *a: calls.append(float(s.kernel.gamma)) or holdout(self, s, *a))
    sel = select(d, kernels, basis=40, lams=lams, optimize=True, optimize_steps=steps)
    monkeypatch.undo()
    searched = calls[len(gammas):]
    assert calls[:len(gammas)] == list(gammas)                       # the budget holds
    assert len(searched) == min(steps, 4) and searched[0] == grid.gamma
    assert len(set(searched)) == len(searched)                       # no point twice
    assert sel.trajectory is None
    np.testing.assert_array_equal(sel.scores, grid.scores)          # the grid is unchanged
    assert sel.score >= grid.score
    grid_gammas = sorted(gammas)
    j = grid_gammas.index(grid.gamma)
    lo = grid_gammas[j - 1] if j else grid.gamma / 4
    hi = grid_gammas[j + 1] if j + 1 < len(grid_gammas) else grid.gamma * 4
    assert lo < min(searched) and max(searched) < hi                 # within the bracket
    r = lams.index(grid.lam)
    finer = np.geomspace(lams[max(r - 2, 0)], lams[min(r + 2, len(lams) - 1)], len(lams))
    won = sel.score > grid.score
    assert sel.gamma in (searched if won else gammas)
    assert np.any(np.isclose(sel.lam, finer, rtol=1e-12)) if won else sel.lam == grid.lam
    one = select(d, [rj.gaussian_kernel(sel.gamma)], basis=40, lams=list(finer) if won else lams)
    assert np.nanmax(one.scores) == pytest.approx(sel.score, rel=1e-12)
    g = rj.query_graph(d.qid)
    refit = rj.path(rj.Problem(d.X, d.y, g), rj.Nystrom(rj.gaussian_kernel(sel.gamma), sel.basis),
                    lams=[sel.lam]).value
    np.testing.assert_allclose(np.ravel(rj.predict(sel.model, d.X)), np.ravel(rj.predict(refit, d.X)),
                               rtol=1e-9, atol=1e-12)
    if gammas != (0.1, 1.0):                                         # these data: the search wins
        assert won


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

SELECT_INPUT = {}          # the select verb's own table is test_solvers.py's BAD_INPUT
SELECT_INPUT["select"] = [
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[-1.0]), E(ValueError, "lams")),
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid), [rj.Primal()], lams=[1.0], optimize=True,
                             metric=rj.ndcg, ard="yes"), E(TypeError, "ard")),
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid, valid=rj.Problem(d.X, d.y, d.qid)), [rj.Primal()],
                             lams=[1.0], optimize=True), E(ValueError, "optimize")),
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid), [rj.Dual(rj.polynomial_kernel(2))], lams=[1.0],
                             optimize=True), E(ValueError, "optimize")),
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid), [rj.Nystrom(d.kern, d.m + 1)], lams=[1.0]),
         E(ValueError, "basis")),
        (lambda d: rj.select(rj.Problem(d.X, np.c_[d.y, d.y], d.qid), [rj.Primal()], lams=[1.0]),
         E(ValueError, "one output")),
    ]

test_bad_and_degenerate_input = surface_test(SELECT_INPUT)
