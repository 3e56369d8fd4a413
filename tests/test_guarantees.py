"""The input guarantees of the README that hold across modules (issue 11): indices are
range-checked, never clamped; arrays where a scalar is meant are TypeErrors; counts and
kernel parameters are checked; kernel matrices must be symmetric; degenerate criteria
have documented values; one dtype rule. Per-module cases live beside each module's tests
(their ``BAD_INPUT`` tables)."""
import numpy as np
import pytest

import rankjax as rj
from rankjax.learners.gp import gp_pairwise_gaussian
from rankjax.metrics.choice import select_lambda


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
            rj.path(rj.Problem(X, y, g), rj.Nystrom(kern, bad), lams=[1.0]).value
    for head, tail, name in (([0, m + 5], [1, 2], "head"), ([0, 1], [-1, 2], "tail")):
        with pytest.raises(ValueError, match=name):
            rj.edge_disagreement_error(np.zeros(m), head, tail)
    with pytest.raises(TypeError, match="head"):
        rj.edge_disagreement_error(np.zeros(m), [0.0, 1.0], [1, 2])
    with pytest.raises(ValueError, match="pairs"):
        rj.holdout(rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True), rj.Dual(),
                   lams=[1.0], folds=rj.LeavePairOut([[0, m]])).value
    with pytest.raises(ValueError, match="head"):
        gp_pairwise_gaussian(K, [0, m], [1, 2], [1.0, 1.0], noise_var=1.0)
    model = rj.rankboost(X, y, qid, rounds=3)
    for cols in (3, 7):
        with pytest.raises(ValueError, match="trained on 5"):
            rj.rankboost_predict(model, np.ones((2, cols)))


@pytest.mark.parametrize("call", [
    lambda X, y, g, K: rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=[1.0] * 5).value,
    lambda X, y, g, K: rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=np.ones(2)).value,
    lambda X, y, g, K: rj.fit(rj.Problem(X, y, g), rj.CG(), lam=np.ones(5)),
    lambda X, y, g, K: rj.fit(rj.Problem(K, y, g, precomputed=True), rj.CG(), lam=np.ones(2)),
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
    for call in (lambda: rj.fit(rj.Problem(bad, y, g, precomputed=True), rj.Dual(), lam=1.0).value,
                 lambda: rj.path(rj.Problem(bad, y, g, precomputed=True), rj.Dual(), lams=[1.0]).value,
                 lambda: rj.holdout(rj.Problem(bad, y, g, precomputed=True), rj.Dual(), lams=[1.0]).value,
                 lambda: rj.holdout(rj.Problem(bad, y, rj.global_graph(np.shape(bad)[0]), precomputed=True),
                                    rj.Dual(), lams=[1.0], folds=rj.LeavePairOut([[0, 1]])).value,
                 lambda: rj.fit(rj.Problem(bad, y, g, precomputed=True), rj.CG(), lam=1.0)):
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
    r = rj.holdout(rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True), rj.Dual(),
                   lams=[1.0], folds=rj.LeavePairOut([same])).value
    with pytest.raises(ValueError, match="no pair has different labels"):
        rj.lpo_cindex(r, y)
    r = rj.holdout(
        rj.Problem(np.zeros((m, m)), y, rj.global_graph(np.shape(np.zeros((m, m)))[0]), precomputed=True),
        rj.Dual(),
        lams=[1.0],
        folds=rj.LeavePairOut(rj.differing_pairs(y)[:20]),
    ).value
    assert float(rj.lpo_cindex(r, y)[0]) == 0.5


def test_one_dtype_rule(prob):
    import jax.numpy as jnp
    X, y, qid, g, K = prob
    X32 = jnp.asarray(X, jnp.float32)
    assert (
        rj.fit(rj.Problem(X32, jnp.asarray(y, jnp.float32), g), rj.Primal(), lam=1.0).value.weights.dtype
        == jnp.float32
    )
    assert rj.fit(rj.Problem(X32, y, g), rj.Primal(), lam=1.0).value.weights.dtype == jnp.float64
    assert (
        rj.holdout(
            rj.Problem(np.asarray(K, np.float32), y, g, precomputed=True), rj.Dual(), lams=[1.0]
        ).value.predictions.dtype
        == jnp.float64
    )
    assert (
        rj.holdout(
            rj.Problem(
                np.asarray(K, np.float32),
                y,
                rj.global_graph(np.shape(np.asarray(K, np.float32))[0]),
                precomputed=True,
            ),
            rj.Dual(),
            lams=[1.0],
            folds=rj.LeavePairOut([[0, 1]]),
        ).value.predictions.dtype
        == jnp.float64
    )
    w16 = rj.fit(
        rj.Problem(X.astype(np.float16), y.astype(np.float16), g), rj.Primal(), lam=1.0
    ).value.weights
    assert w16.dtype == jnp.float32


def test_cg_early_stopping_with_a_criterion_undefined_at_the_start(prob):
    X, y, qid, g, K = prob
    v = rj.make_ranking_data(3, num_features=5, seed=7)
    valid = (v.X, v.y, rj.query_graph(v.qid))
    # w = 0 ties every score: tau_b is NaN at iteration 0 and must not win
    r = rj.fit(rj.Problem(X, y, g, valid=rj.Problem(*valid)), rj.CG(metric=rj.kendall_tau_b, patience=3),
               lam=0.0)
    assert np.isnan(r.stats["valid_history"][0])
    assert int(r.stats["best_iteration"]) > 0 and np.any(np.asarray(r.value.weights) != 0)
    # the history holds the criterion with lower = better (here -tau_b)
    assert float(r.stats["valid_history"][int(r.stats["best_iteration"])]) == np.nanmin(
        np.asarray(r.stats["valid_history"])
    )
    # a validation set without any pair: the criterion is NaN throughout; plain CG runs on
    flat = (v.X, np.zeros_like(v.y), rj.query_graph(v.qid))
    r2 = rj.fit(rj.Problem(X, y, g, valid=rj.Problem(*flat)), rj.CG(tol=1e-10), lam=1.0)
    plain = rj.fit(rj.Problem(X, y, g), rj.CG(tol=1e-10), lam=1.0)
    assert int(r2.result) == rj.RESULTS.successful
    np.testing.assert_allclose(r2.value.weights, plain.value.weights, rtol=1e-8)
