"""The front door's properties over one registry of solvers (as lineax's ``tests/helpers.py``):
every (solver, verb) the dispatch table serves is checked against the per-cell function it
wraps (float64, 1e-10), under ``jit``, ``vmap`` over λ, ``grad`` where the solver is
differentiable, in float32 against float64 within the precision rule's bound, with bad
input, and for compile-once. Adding a solver to :data:`REGISTRY` is the only step that puts
it under all of them; :func:`test_registry_covers_every_solver` fails when a solver of the
library is missing here.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax import _solve
from rankjax.solvers import classes as _solvers
from rankjax.graphs.build import Validation
from rankjax.solvers.cg import rankrls_cg
from rankjax.selection.select import select_rankrls
from registry import (CASES, GAUSS, IDS, LAMS, REGISTRY, ROWS, call, data, predictions, problem,
                      run_case, value_of)


@pytest.mark.parametrize("name,solver,kind,verb,twin,props", CASES, ids=IDS)
def test_verb_equals_the_function_it_replaces(name, solver, kind, verb, twin, props):
    got, want = run_case(kind, verb, solver, *data(), twin)
    want = np.asarray(want)
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want,
                               atol=1e-10 * scale, rtol=1e-10)


def test_registry_covers_every_solver():
    listed = {type(s) for _, s, *_ in REGISTRY}
    assert listed == set(_solvers.SOLVERS), set(_solvers.SOLVERS) - listed
    served = {(cls, verb) for verb, cells in _solve.TABLE.items() for cls in cells}
    tested = {(type(s), v if v != "leave_pair_out" else "holdout")
              for _, s, _, twins, _ in REGISTRY for v in twins}
    assert served <= tested, served - tested


def test_solvers_are_frozen_pytrees():
    """Passed whole and across ``jit``: a solver flattens and rebuilds to an equal object,
    and cannot be changed after it is built."""
    import dataclasses
    for name, solver, *_ in REGISTRY:
        leaves, tree = jax.tree.flatten(solver)
        assert jax.tree.unflatten(tree, leaves) == solver, name
        field = dataclasses.fields(solver)[0].name if dataclasses.fields(solver) else None
        if field is not None:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(solver, field, None)


def test_capabilities_name_what_the_table_serves():
    for _, solver, _, twins, _ in REGISTRY:
        verbs = {v if v != "leave_pair_out" else "holdout" for v in twins}
        assert verbs <= rj.capabilities(solver)


JIT = [c for c in CASES if c[5]["jit"] and c[3] != "leave_pair_out"]


@pytest.mark.parametrize("name,solver,kind,verb,twin,props", JIT,
                         ids=[f"{c[0]}-{c[3]}" for c in JIT])
def test_verb_under_jit_equals_eager(name, solver, kind, verb, twin, props):
    X, y, qid = data()
    p = problem(kind, X, y, qid)
    lam = 1.0 if verb == "fit" else LAMS
    if verb == "holdout":                    # folds are drawn on the host, outside jit
        folds = rj.make_folds(p.graph)
        run = lambda p, s, lam: value_of(verb, rj.holdout(p, s, lams=lam, folds=folds))  # noqa
    else:
        run = lambda p, s, lam: value_of(verb, call(verb, p, s, lam))  # noqa: E731
    eager = run(p, solver, lam)
    jitted = jax.jit(run)(p, solver, lam)
    scale = float(jnp.max(jnp.abs(eager)))
    np.testing.assert_allclose(jitted, eager, atol=1e-10 * scale, rtol=1e-9)


VMAP = [c for c in CASES if c[5]["vmap"] and c[3] == "fit"]


@pytest.mark.parametrize("name,solver,kind,verb,twin,props", VMAP,
                         ids=[f"{c[0]}-{c[3]}" for c in VMAP])
def test_fit_vmapped_over_lambda_equals_each_fit(name, solver, kind, verb, twin, props):
    X, y, qid = data()
    p = problem(kind, X, y, qid)
    batched = jax.vmap(lambda lam: value_of("fit", rj.fit(p, solver, lam=lam)))(LAMS)
    for i, lam in enumerate(LAMS):
        one = value_of("fit", rj.fit(p, solver, lam=float(lam)))
        scale = float(jnp.max(jnp.abs(one)))
        np.testing.assert_allclose(batched[i], one, atol=1e-9 * scale, rtol=1e-8)


GRAD = [c for c in CASES if c[5]["grad"] and c[3] == "fit"]


@pytest.mark.parametrize("name,solver,kind,verb,twin,props", GRAD,
                         ids=[f"{c[0]}-{c[3]}" for c in GRAD])
def test_fit_gradient_in_lambda_matches_finite_differences(name, solver, kind, verb, twin,
                                                           props):
    X, y, qid = data()
    p = problem(kind, X, y, qid)
    f = lambda lam: jnp.sum(value_of("fit", rj.fit(p, solver, lam=lam)) ** 2)  # noqa: E731
    lam, h = 1.0, 1e-5
    fd = (f(lam + h) - f(lam - h)) / (2 * h)
    g = jax.grad(f)(lam)
    # central differences: error O(h^2 f''') plus rounding eps |f| / h
    tol = 1e-6 * abs(float(fd)) + 1e3 * np.finfo(np.float64).eps * abs(float(f(lam))) / h
    assert abs(float(g) - float(fd)) <= tol, (float(g), float(fd))


@pytest.mark.parametrize("name,solver,kind,verb,twin,props", CASES, ids=IDS)
def test_float32_within_the_precision_bound(name, solver, kind, verb, twin, props):
    """x64 stays on here: float32 inputs compute in float32 (the library follows its
    inputs' dtype); each lane within 1e-2 (relative L2 of its predictions) of float64, or NaN
    and reported unresolved."""
    X, y, qid = data()
    lam = 1.0 if verb == "fit" else LAMS
    pairs = rj.differing_pairs(y)[:15]
    queries = rj.global_graph(X.shape[0]) if verb == "leave_pair_out" else None
    out = {}
    for dt in (np.float64, np.float32):
        p = problem(kind, X.astype(dt), y.astype(dt), qid, queries)
        s = call(verb, p, solver, lam, pairs)
        out[dt] = (np.asarray(predictions(verb, s, p.X), np.float64), np.atleast_1d(s.result))
    (v64, r64), (v32, r32) = out[np.float64], out[np.float32]
    assert np.all(r64 == 0)
    lanes = v64.reshape(len(r32), -1) if verb != "fit" else v64.reshape(1, -1)
    got = v32.reshape(lanes.shape)
    for i in range(lanes.shape[0]):
        if r32[i] == rj.RESULTS.index("unresolved_lambda"):
            assert np.all(np.isnan(got[i]))
            continue
        assert int(r32[i]) in (0, rj.RESULTS.index("early_stopped"),
                               rj.RESULTS.index("max_iterations_reached")), rj.RESULTS[r32[i]]
        err = np.linalg.norm(got[i] - lanes[i]) / np.linalg.norm(lanes[i])
        assert err <= 1e-2, (i, err)


@pytest.mark.parametrize("name,solver,kind,verb,twin,props", CASES, ids=IDS)
def test_bad_input_is_named(name, solver, kind, verb, twin, props):
    X, y, qid = data()
    p = problem(kind, X, y, qid)
    Xn, yn = X.copy(), y.copy()
    Xn[2, 1], yn[3] = np.nan, np.inf
    with pytest.raises(ValueError, match="(X|K) contains NaN"):
        problem(kind, Xn, y, qid)
    with pytest.raises(ValueError, match="y contains"):
        problem(kind, X, yn, qid)
    with pytest.raises(TypeError, match="problem must be a rankjax.Problem"):
        call("fit" if verb == "fit" else "path" if verb == "path" else "holdout",
             (X, y, qid), solver, 1.0 if verb == "fit" else LAMS)
    if verb == "fit":
        with pytest.raises((TypeError, ValueError), match="lam"):
            rj.fit(p, solver, lam=np.array([1.0, 2.0]))
        with pytest.raises(ValueError, match="lam"):
            rj.fit(p, solver, lam=-1.0)
    elif verb == "path":
        with pytest.raises(ValueError, match="lam"):
            rj.path(p, solver, lams=[-1.0, 1.0])
    elif verb == "holdout":
        with pytest.raises(ValueError, match="lam"):
            rj.holdout(p, solver, lams=[-1.0])
        with pytest.raises(TypeError, match="folds"):
            rj.holdout(p, solver, lams=LAMS, folds="loo")


def test_unsupported_verb_names_the_solvers_that_support_it():
    X, y, qid = data()
    p = rj.Problem(X, y, qid)
    with pytest.raises(TypeError, match=r"CG does not support path; solvers that do: Primal"):
        rj.path(p, rj.CG(), lams=LAMS)
    with pytest.raises(TypeError, match="Falkon does not support holdout"):
        rj.holdout(p, rj.Falkon(GAUSS, 10), lams=LAMS)
    with pytest.raises(TypeError, match="needs feature rows"):
        rj.fit(rj.Problem(X @ X.T, y, qid, precomputed=True), rj.Primal(), lam=1.0)
    with pytest.raises(ValueError, match="global_graph"):
        rj.holdout(p, rj.Primal(), lams=LAMS, folds=rj.LeavePairOut([[0, 1]]))
    with pytest.raises(TypeError, match="LeavePairOut"):
        rj.holdout(rj.Problem(X, y, rj.global_graph(X.shape[0])), rj.Nystrom(GAUSS, ROWS),
                   lams=LAMS, folds=rj.LeavePairOut([[0, 1]]))


def test_problem_checks_its_inputs_once():
    X, y, qid = data()
    with pytest.raises(ValueError, match="y has 58 rows but 59"):
        rj.Problem(X, y[:-1], qid)
    with pytest.raises(TypeError, match="queries"):
        rj.Problem(X, y, qid.astype(float))
    with pytest.raises(ValueError, match="square"):
        rj.Problem(X, y, qid, precomputed=True)
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


def test_throw_raises_on_an_unresolved_lambda():
    X, y, qid = data()
    X = np.c_[X, X[:, :1]].astype(np.float32)             # a repeated column: rank-deficient
    p = rj.Problem(X, y.astype(np.float32), qid)
    with pytest.warns(rj.UnresolvedLambdaWarning):
        s = rj.path(p, rj.Dual(), lams=[1e-7, 1.0])
    assert [rj.RESULTS[int(r)] for r in s.result] == ["unresolved_lambda", "successful"]
    with pytest.warns(rj.UnresolvedLambdaWarning), \
            pytest.raises(RuntimeError, match="unresolved_lambda"):
        rj.path(p, rj.Dual(), lams=[1e-7, 1.0], throw=True)


def test_validation_problem_gives_path_scores_and_cg_early_stopping():
    X, y, qid = data()
    Xv, yv, qv = data(seed=1)
    p = rj.Problem(X, y, qid, valid=rj.Problem(Xv, yv, qv))
    s = rj.path(p, rj.Primal(), lams=LAMS)
    np.testing.assert_allclose(s.value.valid_scores, s.value.weights @ Xv.T, rtol=1e-10)
    r = rj.fit(p, rj.CG(max_iter=200), lam=1.0)
    want = rankrls_cg(X, y, rj.query_graph(qid), lam=1.0, options=rj.CG(max_iter=200),
                      valid=Validation(Xv, yv, qv))
    np.testing.assert_allclose(r.value.weights, want.weights, rtol=1e-10)
    assert int(r.stats["iterations"]) == int(want.iterations)


def test_select_equals_select_rankrls():
    X, y, qid = data()
    kernels = [rj.gaussian_kernel(g) for g in (0.1, 1.0)]
    s = rj.select(rj.Problem(X, y, qid), [rj.Dual(k) for k in kernels], lams=LAMS)
    want = select_rankrls(X, y, qid, lams=LAMS, kernels=kernels)
    np.testing.assert_allclose(s.scores, want.scores, rtol=1e-12)
    assert s.lam == want.lam and s.gamma == want.gamma
    s = rj.select(rj.Problem(X, y, qid), [rj.Nystrom(k, ROWS) for k in kernels], lams=LAMS,
                  folds=3)
    want = select_rankrls(X, y, qid, lams=LAMS, kernels=kernels, basis=ROWS, folds=3)
    np.testing.assert_allclose(s.scores, want.scores, rtol=1e-12)


def test_a_second_problem_of_the_same_shape_compiles_nothing():
    from test_core import _compiles
    for name, solver, kind, twins, _ in REGISTRY:
        for verb in twins:
            if verb == "leave_pair_out":
                continue
            lam = 1.0 if verb == "fit" else LAMS
            X, y, qid = data()
            rng = np.random.default_rng(1)
            run = lambda seed: value_of(verb, call(  # noqa: E731  (new values, same shapes)
                verb, problem(kind, X + seed * rng.standard_normal(X.shape), y, qid),
                solver, lam))
            _compiles(lambda: run(0))
            assert _compiles(lambda: run(1)) == 0, (name, verb)


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
    "Auto": [(lambda d: rj.Auto().resolve(d.X), E(AttributeError, "X|precomputed"))],
    "LeavePairOut": [
        (lambda d: rj.holdout(rj.Problem(d.X, d.y, rj.global_graph(d.m)), rj.Primal(),
                              lams=[1.0], folds=rj.LeavePairOut([[0, d.m]])),
         E(ValueError, "pairs")),
    ],
    "fit": [
        (lambda d: rj.fit((d.X, d.y), rj.Primal(), lam=1.0), E(TypeError, "problem")),
        (lambda d: rj.fit(rj.Problem(d.X, d.y, d.qid), "primal", lam=1.0),
         E(TypeError, "solver must be one of")),
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
        (lambda d: rj.select(rj.Problem(d.K, d.y, d.qid, precomputed=True), [rj.Dual()],
                             lams=[1.0]), E(TypeError, "precomputed")),
    ],
    "capabilities": [(lambda d: rj.capabilities(3), V(lambda c: c == frozenset()))],
}

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
