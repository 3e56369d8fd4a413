"""The input guarantees of the README that hold across modules (issue 11): indices are
range-checked, never clamped; arrays where a scalar is meant are TypeErrors; counts and
kernel parameters are checked; kernel matrices must be symmetric; degenerate criteria
have documented values; one dtype rule. Per-module cases live beside each module's tests
(their ``BAD_INPUT`` tables)."""
import numpy as np
import pytest

import rankjax as rj
from rankjax.solvers.cg import rankrls_cg, rankrls_cg_dual
from rankjax.solvers.cg_loop import STOP_REASONS
from rankjax.learners.gp import gp_pairwise_gaussian
from rankjax.solvers.holdout import holdout_dual
from rankjax.solvers.lpo import leave_pair_out_dual
from rankjax.solvers.path import rankrls_dual_path, rankrls_nystrom_path
from rankjax.metrics.choice import select_lambda
from rankjax.solvers.models import rankrls_dual, rankrls_primal


@pytest.fixture(scope="module")
def prob():
    d = rj.make_ranking_data(6, num_features=5, seed=0)
    return d.X, d.y, d.qid, rj.query_graph(d.qid), d.X @ d.X.T


def test_indices_out_of_range_are_errors_never_clamped(prob):
    X, y, qid, g, K = prob
    m = len(y)
    kern = rj.gaussian_kernel(1.0)
    for bad in ([0, 10**5], [0, -1], [0, m]):
        with pytest.raises(ValueError, match="basis"):
            rankrls_nystrom_path(X, y, g, lams=[1.0], kernel=kern, basis=bad)
    for head, tail, name in (([0, m + 5], [1, 2], "head"), ([0, 1], [-1, 2], "tail")):
        with pytest.raises(ValueError, match=name):
            rj.edge_disagreement_error(np.zeros(m), head, tail)
    with pytest.raises(TypeError, match="head"):
        rj.edge_disagreement_error(np.zeros(m), [0.0, 1.0], [1, 2])
    with pytest.raises(ValueError, match="pairs"):
        leave_pair_out_dual(K, y, [[0, m]], lams=[1.0])
    with pytest.raises(ValueError, match="head"):
        gp_pairwise_gaussian(K, [0, m], [1, 2], [1.0, 1.0], noise_var=1.0)
    model = rj.rankboost(X, y, qid, rounds=3)
    for cols in (3, 7):
        with pytest.raises(ValueError, match="trained on 5"):
            rj.rankboost_predict(model, np.ones((2, cols)))


@pytest.mark.parametrize("call", [
    lambda X, y, g, K: rankrls_primal(X, y, g, lam=[1.0] * 5),
    lambda X, y, g, K: rankrls_dual(K, y, g, lam=np.ones(2)),
    lambda X, y, g, K: rankrls_cg(X, y, g, lam=np.ones(5)),
    lambda X, y, g, K: rankrls_cg_dual(K, y, g, lam=np.ones(2)),
    lambda X, y, g, K: rj.ranksvm_l2(X, y, C=np.ones(2)),
    lambda X, y, g, K: rj.gaussian_kernel(np.ones(2)),
])
def test_arrays_where_a_scalar_is_meant_are_type_errors(prob, call):
    X, y, qid, g, K = prob
    with pytest.raises(TypeError, match="must be a scalar"):
        call(X, y, g, K)


def test_counts_and_kernel_parameters(prob):
    X, y, qid, g, K = prob
    with pytest.raises(TypeError, match="rounds"):
        rj.rankboost(X, y, qid, rounds=2.5)
    with pytest.raises(ValueError, match="rounds"):
        rj.rankboost(X, y, qid, rounds=0)
    with pytest.raises(TypeError, match="max_iter"):
        rj.ranksvm_l2(X, y, qid, max_iter=True)
    with pytest.raises(ValueError, match="gamma"):
        rj.gaussian_kernel(np.float32(-1))
    with pytest.raises(ValueError, match="coef0"):
        rj.polynomial_kernel(2, coef0=-1.0)
    with pytest.raises(TypeError, match="degree"):
        rj.polynomial_kernel(2.5)


def test_asymmetric_kernel_matrices_are_rejected(prob):
    X, y, qid, g, K = prob
    bad = K + np.triu(np.ones_like(K))
    for call in (lambda: rankrls_dual(bad, y, g, lam=1.0),
                 lambda: rankrls_dual_path(bad, y, g, lams=[1.0]),
                 lambda: holdout_dual(bad, y, g, lams=[1.0]),
                 lambda: leave_pair_out_dual(bad, y, [[0, 1]], lams=[1.0]),
                 lambda: rankrls_cg_dual(bad, y, g, lam=1.0)):
        with pytest.raises(ValueError, match="K is not symmetric"):
            call()


def test_degenerate_criteria_have_documented_values(prob):
    X, y, qid, g, K = prob
    m = len(y)
    # a λ whose scores are not finite is NaN in the table and never chosen
    scores = np.stack([np.full(m, np.nan), X @ np.ones(5), X @ -np.ones(5)])
    sel = select_lambda([1.0, 2.0, 3.0], scores, y, qid, metric=rj.pairwise_error)
    assert np.isnan(sel.table[0]) and int(sel.best_index) in (1, 2)
    with pytest.raises(ValueError, match="every λ"):
        select_lambda([1.0], np.full((1, m), np.inf), y, qid, metric=rj.pairwise_error)
    # leave-pair-out concordance: no differing pair -> error; all-tied predictions -> 0.5
    same = np.flatnonzero(y == y[0])[:2]
    r = leave_pair_out_dual(K, y, [same], lams=[1.0])
    with pytest.raises(ValueError, match="no pair has different labels"):
        rj.lpo_cindex(r, y)
    r = leave_pair_out_dual(np.zeros((m, m)), y, rj.differing_pairs(y)[:20], lams=[1.0])
    assert float(rj.lpo_cindex(r, y)[0]) == 0.5


def test_one_dtype_rule(prob):
    import jax.numpy as jnp
    X, y, qid, g, K = prob
    X32 = jnp.asarray(X, jnp.float32)
    assert rankrls_primal(X32, jnp.asarray(y, jnp.float32), g, lam=1.0).weights.dtype == jnp.float32
    assert rankrls_primal(X32, y, g, lam=1.0).weights.dtype == jnp.float64
    assert holdout_dual(np.asarray(K, np.float32), y, g, lams=[1.0]).predictions.dtype == jnp.float64
    assert leave_pair_out_dual(np.asarray(K, np.float32), y, [[0, 1]],
                                  lams=[1.0]).predictions.dtype == jnp.float64
    w16 = rankrls_primal(X.astype(np.float16), y.astype(np.float16), g, lam=1.0).weights
    assert w16.dtype == jnp.float32


def test_cg_early_stopping_with_a_criterion_undefined_at_the_start(prob):
    X, y, qid, g, K = prob
    v = rj.make_ranking_data(3, num_features=5, seed=7)
    valid = (v.X, v.y, rj.query_graph(v.qid))
    # w = 0 ties every score: tau_b is NaN at iteration 0 and must not win
    r = rankrls_cg(X, y, g, lam=0.0, valid=valid, metric=rj.kendall_tau_b, patience=3)
    assert np.isnan(r.valid_history[0])
    assert int(r.best_iteration) > 0 and np.any(np.asarray(r.weights) != 0)
    # the history holds the criterion with lower = better (here -tau_b)
    assert float(r.valid_history[r.best_iteration]) == np.nanmin(np.asarray(r.valid_history))
    # a validation set without any pair: the criterion is NaN throughout; plain CG runs on
    flat = (v.X, np.zeros_like(v.y), rj.query_graph(v.qid))
    r2 = rankrls_cg(X, y, g, lam=1.0, valid=flat, tol=1e-10)
    plain = rankrls_cg(X, y, g, lam=1.0, tol=1e-10)
    assert STOP_REASONS[int(r2.stop_reason)] == "converged"
    np.testing.assert_allclose(r2.weights, plain.weights, rtol=1e-8)
