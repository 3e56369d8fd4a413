"""The front door's solvers against dense numpy references (lineax's ``tests/helpers.py``
pattern): every (solver, verb) of the registry (``tests/registry.py``; the verbs are the
methods its class implements) predicts what the reference's closed form predicts — the fit,
every λ of a path, the hold-out by retraining without each query, leave-pair-out by
retraining without each pair — in float64, to a tolerance of the entry's. Also: what the
solvers are (frozen pytrees, their capabilities), what every fit's model predicts (``[m]``),
and the errors of a verb a solver does not serve.
"""
import dataclasses

import jax
import numpy as np
import pytest

import rankjax as rj
from registry import GAUSS, LAMS, REGISTRY, ROWS, cases, data, inputs, problem, run

CASES, IDS = cases()

PAIRS_RTOL = 1e-8
"""Leave-pair-out's reference retrains on the nonsymmetric ``L K + λ I`` of every pair: its
own rounding, amplified by that system's condition, reaches ~1e-10 on the Gaussian kernel."""


def check_equals_its_reference(entry, verb):
    got, want = run(entry, verb, *data())
    rtol = max(entry.rtol, PAIRS_RTOL if verb == "leave_pair_out" else 0)
    err = np.max(np.abs(got.reshape(want.shape) - want)) / np.max(np.abs(want))
    assert err <= rtol, (entry.name, verb, err)


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_verb_equals_its_numpy_reference(entry, verb):
    check_equals_its_reference(entry, verb)


def check_fit_predicts_one_score_per_row(entry, verb):
    if verb != "fit":
        return
    X, y, qid = data()
    A = inputs(entry, X)
    s = rj.fit(problem(entry, X, y, qid), entry.solver, lam=1.0)
    assert rj.predict(s.value, A).shape == (X.shape[0],), entry.name
    assert int(s.result) == rj.RESULTS.successful, rj.RESULTS(int(s.result)).message
    if "path" in rj.capabilities(entry.solver):      # the path's models take the same input
        path = rj.path(problem(entry, X, y, qid), entry.solver, lams=LAMS).value
        assert rj.predict(path, A).shape == (LAMS.size, X.shape[0])
        np.testing.assert_allclose(rj.predict(path.model(1), A), rj.predict(s.value, A),
                                   rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("entry", REGISTRY, ids=[e.name for e in REGISTRY])
def test_every_fit_predicts_one_score_per_row(entry):
    check_fit_predicts_one_score_per_row(entry, "fit")


def test_every_solver_class_is_in_the_registry():
    listed = {type(e.solver) for e in REGISTRY}
    public = {getattr(rj, n) for n in rj.__all__
              if isinstance(getattr(rj, n), type) and issubclass(getattr(rj, n), rj.AbstractSolver)
              and getattr(rj, n) is not rj.AbstractSolver}
    assert public <= listed, public - listed


def test_capabilities_are_the_methods_a_class_implements():
    base = rj.AbstractSolver
    for e in REGISTRY:
        cls = type(e.solver)
        implemented = {m for m in ("fit", "path", "holdout", "leave_pair_out", "cv_predictions")
                       if getattr(cls, m) is not getattr(base, m)}
        assert rj.capabilities(e.solver) == implemented == rj.capabilities(cls), e.name
    assert rj.capabilities(rj.CG()) == {"fit"}
    assert rj.capabilities(rj.Falkon(GAUSS, 10)) == {"fit"}


def test_solvers_are_frozen_hashable_pytrees():
    """Passed whole, across ``jit`` as an argument or a static argument: a solver flattens
    and rebuilds to an equal object, hashes, and cannot be changed after it is built."""
    for e in REGISTRY:
        s = e.solver
        leaves, tree = jax.tree.flatten(s)
        assert jax.tree.unflatten(tree, leaves) == s, e.name
        hash(s)
        fields = dataclasses.fields(s)
        if fields:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(s, fields[0].name, None)
    assert rj.Nystrom(GAUSS, 20) == rj.Nystrom(GAUSS, 20)       # a basis by its description
    assert hash(rj.Nystrom(GAUSS, ROWS)) == hash(rj.Nystrom(GAUSS, ROWS.copy()))


def test_a_verb_a_solver_does_not_serve_names_those_that_do():
    X, y, qid = data()
    p = rj.Problem(X, y, qid)
    with pytest.raises(TypeError, match=r"CG does not support path; solvers that do: .*Primal"):
        rj.path(p, rj.CG(), lams=LAMS)
    with pytest.raises(TypeError, match="Falkon does not support holdout"):
        rj.holdout(p, rj.Falkon(GAUSS, 10), lams=LAMS)
    with pytest.raises(TypeError, match="Primal does not take a precomputed kernel matrix"):
        rj.fit(rj.Problem(X @ X.T, y, qid, precomputed=True), rj.Primal(), lam=1.0)
    with pytest.raises(ValueError, match="global_graph"):
        rj.holdout(p, rj.Primal(), lams=LAMS, folds=rj.LeavePairOut([[0, 1]]))
    with pytest.raises(TypeError, match="LeavePairOut"):
        rj.holdout(rj.Problem(X, y, rj.global_graph(X.shape[0])), rj.Nystrom(GAUSS, ROWS),
                   lams=LAMS, folds=rj.LeavePairOut([[0, 1]]))
    with pytest.raises(TypeError, match="Nystrom does not take a sharded problem"):
        rj.fit(rj.scale.shard(p), rj.Nystrom(GAUSS, ROWS), lam=1.0)
    with pytest.raises(TypeError, match=r"Nystrom does not take a sharded problem in tune; "
                       r"solvers that do: Primal"):
        rj.tune(rj.scale.shard(p), rj.Nystrom(GAUSS, ROWS), lam=1.0, steps=2)


def test_problem_checks_its_inputs_once():
    X, y, qid = data()
    with pytest.raises(ValueError, match="y has 58 rows but 59"):
        rj.Problem(X, y[:-1], qid)
    with pytest.raises(TypeError, match="queries"):
        rj.Problem(X, y, qid.astype(float))
    with pytest.raises(ValueError, match="square"):
        rj.Problem(X, y, qid, precomputed=True, valid=rj.Problem(X, y, qid, precomputed=True))
    with pytest.raises(TypeError, match="valid must be a rankjax.Problem"):
        rj.Problem(X, y, qid, valid=(X, y, qid))
    with pytest.raises(ValueError, match="valid.X must have 4 columns"):
        rj.Problem(X, y, qid, valid=rj.Problem(X[:, :3], y, qid))
    with pytest.raises(AttributeError, match="immutable"):
        rj.Problem(X, y, qid).X = X
    with pytest.raises(TypeError, match="kernel must be a rankjax.Kernel"):
        rj.Dual("gaussian")
    with pytest.raises(TypeError, match="basis"):
        rj.Nystrom(GAUSS, None)


def test_a_precomputed_problem_takes_a_rectangular_validation_kernel():
    """``Problem(K_v [m_v, m], ..., precomputed=True)`` is the validation data of a kernel
    problem, as the ``Problem`` docstring says: the dual path scores it, dual CG stops on it."""
    X, y, qid = data()
    Xv, yv, qv = data(seed=1)
    K, Kv = X @ X.T, Xv @ X.T                                        # [m_v, m]
    p = rj.Problem(K, y, qid, precomputed=True, valid=rj.Problem(Kv, yv, qv, precomputed=True))
    path = rj.path(p, rj.Dual(), lams=LAMS).value
    np.testing.assert_allclose(path.valid_scores, path.predict(Kv), rtol=1e-10)
    s = rj.fit(p, rj.CG(max_iter=50, metric=rj.ndcg), lam=0.0)
    assert int(s.stats["best_iteration"]) >= 1
    with pytest.raises(ValueError, match="square"):
        rj.fit(rj.Problem(Kv[:-5], yv[:-5], qv[:-5], precomputed=True), rj.Dual(), lam=1.0)


def test_throw_raises_on_an_unresolved_lambda():
    X, y, qid = data()
    X = np.c_[X, X[:, :1]].astype(np.float32)             # a repeated column: rank-deficient
    p = rj.Problem(X, y.astype(np.float32), qid)
    with pytest.warns(rj.UnresolvedLambdaWarning):
        s = rj.path(p, rj.Dual(), lams=[1e-7, 1.0])
    assert [rj.RESULTS(int(r)).name for r in s.result] == ["unresolved_lambda", "successful"]
    with pytest.warns(rj.UnresolvedLambdaWarning), \
            pytest.raises(RuntimeError, match="unresolved_lambda"):
        rj.path(p, rj.Dual(), lams=[1e-7, 1.0], throw=True)


def test_results_are_one_enumeration_with_a_message_per_code():
    assert rj.RESULTS.successful == 0 and rj.RESULTS(1) is rj.RESULTS.unresolved_lambda
    for code in rj.RESULTS:
        assert isinstance(code.message, str) and len(code.message) > 10, code
    X, y, qid = data()
    p = rj.Problem(X, y, qid)
    # an invalid λ under jit is one code whatever the solver
    for e in REGISTRY:
        if e.kind != "features":
            continue
        code = jax.jit(lambda lam: rj.fit(p, e.solver, lam=lam).result)(-1.0)
        assert int(code) == rj.RESULTS.invalid_input, e.name


def test_validation_problem_gives_path_scores_and_cg_early_stopping():
    X, y, qid = data()
    Xv, yv, qv = data(seed=1)
    p = rj.Problem(X, y, qid, valid=rj.Problem(Xv, yv, qv))
    s = rj.path(p, rj.Primal(), lams=LAMS)
    np.testing.assert_allclose(s.value.valid_scores, s.value.weights @ Xv.T, rtol=1e-10)
    r = rj.fit(p, rj.CG(max_iter=200), lam=0.0)
    hist = np.asarray(r.stats["valid_history"])
    assert int(r.stats["best_iteration"]) == int(np.nanargmin(hist))


from surface import E, V, surface_test  # noqa: E402

BAD_INPUT = {
    "Problem": [
        (lambda d: rj.Problem(d.X, d.y[:-1], d.qid), E(ValueError, "y has")),
        (lambda d: rj.Problem(d.X, d.y, d.qid[:-1]), E(ValueError, "qid|queries|rows")),
        (lambda d: rj.Problem(d.X, d.y, 3), E(TypeError, "queries")),
        (lambda d: rj.Problem(d.X, d.y, d.qid, precomputed="yes"), E(TypeError, "precomputed")),
        (lambda d: rj.Problem(d.nanv[:, None] * d.X, d.y, d.qid), E(ValueError, "NaN|finite")),
    ],
    "Primal": [(lambda d: rj.Primal(1), E(TypeError, "argument"))],
    "Dual": [(lambda d: rj.Dual("gaussian"), E(TypeError, "kernel must be a rankjax.Kernel"))],
    "Nystrom": [
        (lambda d: rj.Nystrom(d.kern, None), E(TypeError, "basis")),
        (lambda d: rj.Nystrom(d.kern, 0), E(ValueError, "size")),
        (lambda d: rj.Nystrom("gaussian", 3), E(TypeError, "kernel")),
        (lambda d: rj.Nystrom(d.kern, 3, seed=1.5), E(TypeError, "seed")),
    ],
    "Falkon": [
        (lambda d: rj.Falkon(d.kern, 3, options=10), E(TypeError, "options")),
        (lambda d: rj.Falkon(None, 3), E(TypeError, "kernel")),
    ],
    "Auto": [(lambda d: rj.Auto().resolve(d.X), E(TypeError, "problem must be a rankjax.Problem"))],
    "LeavePairOut": [
        (lambda d: rj.holdout(rj.Problem(d.X, d.y, rj.global_graph(d.m)), rj.Primal(),
                              lams=[1.0], folds=rj.LeavePairOut([[0, d.m]])),
         E(ValueError, "pairs")),
    ],
    "fit": [
        (lambda d: rj.fit((d.X, d.y), rj.Primal(), lam=1.0), E(TypeError, "problem")),
        (lambda d: rj.fit(rj.Problem(d.X, d.y, d.qid), "primal", lam=1.0),
         E(TypeError, "solver must be a rankjax solver")),
        (lambda d: rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=[1.0, 2.0]),
         E((TypeError, ValueError), "lam")),
        (lambda d: rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=float("nan")),
         E(ValueError, "lam")),
        # degenerate: all labels tied in every query: the zero model
        (lambda d: rj.fit(rj.Problem(d.X, d.ties, d.qid), rj.Primal(), lam=1.0).value.weights,
         V(lambda w: bool(np.all(np.asarray(w) == 0)))),
    ],
    "path": [
        (lambda d: rj.path(rj.Problem(d.X, d.y, d.qid), rj.CG(), lams=[1.0]),
         E(TypeError, "CG does not support path")),
        (lambda d: rj.path(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[]),
         E(ValueError, "lams")),
    ],
    "holdout": [
        (lambda d: rj.holdout(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[1.0],
                              folds=1.5), E(TypeError, "folds")),
        (lambda d: rj.holdout(rj.Problem(d.X, d.y, d.qid), rj.Falkon(d.kern, 3), lams=[1.0]),
         E(TypeError, "Falkon does not support holdout")),
    ],
    "select": [
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid), [], lams=[1.0]),
         E(ValueError, "at least one")),
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid), [rj.CG()], lams=[1.0]),
         E(TypeError, "CG does not support select")),
        (lambda d: rj.select(rj.Problem(d.X, d.y, d.qid), [rj.Primal()], lams=[1.0],
                             metric=rj.ndcg, score_k=0), V(lambda s: s.lam == 1.0)),
    ],
    "capabilities": [(lambda d: rj.capabilities(3), E(TypeError, "rankjax solver"))],
    "AbstractSolver": [(lambda d: rj.fit(rj.Problem(d.X, d.y, d.qid), rj.AbstractSolver(), lam=1.0),
                        E(TypeError, "AbstractSolver does not support fit"))],
}

test_bad_and_degenerate_input = surface_test(BAD_INPUT)


def test_auto_chooses_the_form_by_shape():
    """The README's ``Auto()``: the primal form when there are fewer features than rows, the
    dual form (an ``m x m`` system) when features outnumber rows; both answer the same model."""
    X, y, qid = data()
    wide = np.hstack([X, np.random.default_rng(0).standard_normal((X.shape[0], 2 * X.shape[0]))])
    assert type(rj.Auto().resolve(rj.Problem(X, y, qid))) is rj.Primal
    assert type(rj.Auto().resolve(rj.Problem(wide, y, qid))) is rj.Dual
    w = rj.fit(rj.Problem(wide, y, qid), rj.Primal(), lam=1.0).value
    a = rj.fit(rj.Problem(wide, y, qid), rj.Auto(), lam=1.0).value
    np.testing.assert_allclose(rj.predict(a, wide), rj.predict(w, wide), rtol=1e-8, atol=1e-10)
