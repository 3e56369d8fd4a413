"""Options travel with the solver objects (issue 59): each is checked when the object is
built and changes what it should — CG's warm start ``x0`` and early-stopping ``metric``,
FALKON's preconditioner and row blocks, ``Dual``'s ``block_size``; ``tune`` takes an optax
optimizer and ``select`` a metric. A registry property: a solver rebuilt from its fields is
equal to it and solves the same problem alike.
"""
import dataclasses

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import rankjax as rj
from registry import GAUSS, REGISTRY, ROWS, cases, data, inputs, problem
from rankjax.solvers.cg_loop import cg_loop

CASES, IDS = cases(verbs=("fit",))


def check_rebuilt_solver_solves_alike(entry, verb):
    if verb != "fit":
        return
    s = entry.solver
    fields = (
        {f.name: getattr(s, f.name) for f in dataclasses.fields(s)} if dataclasses.is_dataclass(s) else {}
    )
    again = dataclasses.replace(s, **fields) if fields else type(s)()
    assert again == s and hash(again) == hash(s), entry.name
    X, y, qid = data()
    p = problem(entry, X, y, qid)
    a = rj.predict(rj.fit(p, s, lam=1.0).value, inputs(entry, X))
    b = rj.predict(rj.fit(p, again, lam=1.0).value, inputs(entry, X))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_a_rebuilt_solver_solves_alike(entry, verb):
    check_rebuilt_solver_solves_alike(entry, verb)


@pytest.fixture(scope="module")
def prob():
    X, y, qid = data()
    Xv, yv, qv = data(seed=1)
    return X, y, qid, rj.Problem(Xv, yv, qv)


def test_cg_warm_start_x0():
    d = rj.make_ranking_data(20, num_features=30, seed=3)
    p = rj.Problem(d.X, d.y, d.qid)
    w = np.asarray(rj.fit(p, rj.Primal(), lam=1.0).value.weights)
    cold = rj.fit(p, rj.CG(tol=1e-10), lam=1.0)
    warm = rj.fit(p, rj.CG(tol=1e-10, x0=w), lam=1.0)
    assert int(warm.stats["iterations"]) <= 1 < int(cold.stats["iterations"])
    np.testing.assert_allclose(warm.value.weights, w, rtol=1e-8)
    near = rj.fit(p, rj.CG(tol=1e-10, x0=w * 1.01), lam=1.0)
    assert int(near.stats["iterations"]) < int(cold.stats["iterations"])
    with pytest.raises(ValueError, match=r"x0 must have shape \[30\]"):
        rj.fit(p, rj.CG(x0=np.ones(5)), lam=1.0)


def test_cg_early_stopping_metric_is_the_solvers(prob):
    X, y, qid, valid = prob
    p = rj.Problem(X, y, qid, valid=valid)
    s = rj.fit(p, rj.CG(metric=rj.ndcg, metric_kwargs={"k": 3}, patience=4, max_iter=40), lam=0.0)
    hist = np.asarray(s.stats["valid_history"])
    best = int(s.stats["best_iteration"])
    # the loop minimises: its history is -NDCG@3 of the iterates on the validation rows
    again = rj.fit(rj.Problem(X, y, qid), rj.CG(tol=0.0, max_iter=max(best, 1)), lam=0.0)
    f = rj.predict(again.value, valid.X) if best else np.zeros(valid.X.shape[0])
    assert abs(hist[best] + float(rj.ndcg(f, valid.y, valid.qid, k=3))) < 1e-10
    loss = rj.fit(p, rj.CG(metric="loss", patience=4, max_iter=40), lam=0.0)
    assert not np.allclose(np.asarray(loss.stats["valid_history"])[:3], hist[:3])


def test_falkon_options_reach_its_loop(prob):
    X, y, qid, valid = prob
    p = rj.Problem(X, y, qid)
    loop = rj.CG(tol=1e-12, max_iter=300)
    whole = rj.fit(p, rj.Falkon(GAUSS, ROWS, options=loop), lam=0.5)
    blocks = rj.fit(p, rj.Falkon(GAUSS, ROWS, options=loop, block_rows=7, precond_rows=30), lam=0.5)
    np.testing.assert_allclose(blocks.value.coef, whole.value.coef, rtol=1e-8, atol=1e-10)
    capped = rj.fit(p, rj.Falkon(GAUSS, ROWS, options=rj.CG(tol=0.0, max_iter=2)), lam=0.5)
    assert int(capped.stats["iterations"]) == 2
    assert int(capped.result) == rj.RESULTS.max_iterations_reached


def test_dual_block_size_bounds_the_prediction_kernel(prob):
    X, y, qid, valid = prob
    p = rj.Problem(X, y, qid)
    a = rj.fit(p, rj.Dual(GAUSS), lam=1.0).value
    b = rj.fit(p, rj.Dual(GAUSS, block_size=7), lam=1.0).value
    np.testing.assert_allclose(rj.predict(a, valid.X, block_size=7), rj.predict(b, valid.X),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="block_size"):
        rj.Dual(GAUSS, block_size=0)


def test_tune_takes_an_optax_optimizer(prob):
    X, y, qid, _ = prob
    p = rj.Problem(X, y, qid)
    adam = rj.tune(p, rj.Primal(), lam=100.0, steps=8)
    sgd = rj.tune(p, rj.Primal(), lam=100.0, steps=8, optimizer=optax.sgd(1e-3))
    assert sgd.loss_history[-1] < sgd.loss_history[0]
    assert not np.allclose(adam.params_history["log_lam"], sgd.params_history["log_lam"])
    with pytest.raises(TypeError, match="optax"):
        rj.tune(p, rj.Primal(), steps=2, optimizer="adam")


def test_select_takes_a_metric(prob):
    X, y, qid, _ = prob
    p = rj.Problem(X, y, qid)
    lams = np.logspace(-2, 3, 6)
    s = rj.select(p, [rj.Primal()], lams=lams, metric=rj.pairwise_error)
    h = rj.holdout(p, rj.Primal(), lams=lams).value
    errs = [float(rj.pairwise_error(f, y, qid)) for f in h.predictions]
    assert s.lam == lams[int(np.argmin(errs))]                         # lower is better
    np.testing.assert_allclose(s.scores, errs, rtol=1e-10)
    s10 = rj.select(p, [rj.Primal()], lams=lams)                      # NDCG@10 by default
    np.testing.assert_allclose(s10.scores, [float(rj.ndcg(f, y, qid, k=10)) for f in h.predictions],
                               rtol=1e-10)


def test_options_are_checked_once_when_built():
    with pytest.raises(TypeError, match="max_iter"):
        rj.CG(max_iter=0.5)
    with pytest.raises(ValueError, match="tol"):
        rj.CG(tol=-1.0)
    with pytest.raises(TypeError, match="options"):
        rj.Falkon(GAUSS, 10, options={"tol": 0.001})
    with pytest.raises(ValueError, match="x0"):
        rj.Falkon(GAUSS, 10, options=rj.CG(x0=np.ones(3)))
    A = jnp.array([[4.0, 1.0], [1.0, 3.0]])
    r = cg_loop(lambda v_: jnp.matmul(A, v_), jnp.array([1.0, 2.0]), rj.CG(tol=1e-10), 0.0, None,
                None)
    np.testing.assert_allclose(r.weights, np.linalg.solve(A, [1.0, 2.0]), rtol=1e-8)


def test_every_registry_solver_has_an_entry():
    assert {type(e.solver) for e in REGISTRY} >= {rj.Primal, rj.Dual, rj.Nystrom, rj.CG, rj.Falkon,
                                                  rj.Auto}
