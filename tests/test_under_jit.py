"""The transforms as a property of every solver (registry, ``tests/registry.py``): a traced λ
in ``fit`` under ``jit``, ``vmap`` and ``grad``; a ``Problem`` crossing ``jit`` as an argument;
``vmap`` over λ at the cost of about a path (never a fallback decomposition per lane); and the
under-jit contract (README, Guarantees): a value that would raise eagerly gives NaN and the
``invalid_input`` code when it is traced.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax.learners.kpcrank import kpcrank_path
from registry import LAMS, REGISTRY, call, cases, data, inputs, problem
from surface import LIST_METRICS, PAIR_METRICS, nan

CASES, IDS = cases()
FITS, FIT_IDS = cases(verbs=("fit",))
INVALID = jnp.array([1.0, -1.0, jnp.nan, -jnp.inf])


def _lanes(entry, verb, p, folds, pairs):
    """``lams -> predictions [L, ...]`` of a verb (``fit`` vmapped over λ)."""
    A = None if verb == "leave_pair_out" else p.X
    if verb == "fit":
        return lambda ls: jax.vmap(lambda lam: rj.predict(rj.fit(p, entry.solver, lam=lam).value,
                                                          A))(ls)
    if verb == "holdout":
        return lambda ls: rj.holdout(p, entry.solver, lams=ls, folds=folds).value.predictions
    if verb == "leave_pair_out":
        return lambda ls: call(verb, p, entry.solver, ls, pairs).value.predictions
    return lambda ls: rj.predict(rj.path(p, entry.solver, lams=ls).value, A)


def check_invalid_lambda_is_a_nan_lane_under_jit(entry, verb):
    """A traced λ that would raise eagerly is a NaN lane (``fit`` vmapped over λ; a path or
    hold-out over its grid), the valid lane untouched."""
    X, y, qid = data()
    pairs = rj.differing_pairs(y)[:15] if verb == "leave_pair_out" else None
    p = problem(entry, X, y, qid, rj.global_graph(X.shape[0]) if pairs is not None else None)
    folds = rj.make_folds(p.graph) if verb == "holdout" else None   # drawn on the host
    run = _lanes(entry, verb, p, folds, pairs)
    out = np.asarray(jax.jit(run)(INVALID))
    assert nan(out[1:]) and not np.any(np.isnan(out[0])), entry.name
    one = np.asarray(run(INVALID[:1]))                   # the valid lane alone
    np.testing.assert_allclose(out[0], one[0], rtol=1e-8, atol=1e-10 * np.max(np.abs(one)))
    codes = np.asarray(jax.jit(_codes(entry, verb, p, folds, pairs))(INVALID))
    assert codes.tolist() == [rj.RESULTS.successful] + [rj.RESULTS.invalid_input] * 3, codes


def _codes(entry, verb, p, folds, pairs):
    """``lams -> result codes [L]`` of a verb (the one λ rule, ``_solution.lams_valid``,
    applied by the verbs whatever the solver)."""
    if verb == "fit":
        return jax.vmap(lambda lam: rj.fit(p, entry.solver, lam=lam).result)
    if verb == "holdout":
        return lambda ls: rj.holdout(p, entry.solver, lams=ls, folds=folds).result
    if verb == "leave_pair_out":
        return lambda ls: call(verb, p, entry.solver, ls, pairs).result
    return lambda ls: rj.path(p, entry.solver, lams=ls).result


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_an_invalid_lambda_is_a_nan_lane_under_jit(entry, verb):
    check_invalid_lambda_is_a_nan_lane_under_jit(entry, verb)


def check_traced_lambda_and_problem_under_jit(entry, verb):
    """``jit`` over λ, and over the problem passed as an argument (queries traced: the hold-out
    takes folds drawn outside), equals the eager call."""
    X, y, qid = data()
    p = problem(entry, X, y, qid)
    A = inputs(entry, X)
    lam = 1.0 if verb == "fit" else LAMS
    if verb == "leave_pair_out":
        return                                    # its problem is the global graph: above
    folds = rj.make_folds(p.graph)

    def run(p, lam):
        if verb == "fit":
            return rj.predict(rj.fit(p, entry.solver, lam=lam).value, A)
        if verb == "holdout":
            return rj.holdout(p, entry.solver, lams=lam, folds=folds).value.predictions
        return rj.predict(rj.path(p, entry.solver, lams=lam).value, A)

    eager = np.asarray(run(p, lam))
    scale = float(np.max(np.abs(eager)))
    np.testing.assert_allclose(jax.jit(lambda lam: run(p, lam))(lam), eager, rtol=1e-9,
                               atol=1e-10 * scale)
    np.testing.assert_allclose(jax.jit(run)(p, lam), eager, rtol=1e-9, atol=1e-10 * scale)


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_a_traced_lambda_and_problem_under_jit(entry, verb):
    check_traced_lambda_and_problem_under_jit(entry, verb)


def _eigh_inputs(jaxpr):
    """The ranks of every ``eigh`` operand in a jaxpr and its sub-jaxprs."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "eigh":
            out.append(eqn.invars[0].aval.ndim)
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (list, tuple)) else [v]):
                sub = getattr(sub, "jaxpr", sub)
                if hasattr(sub, "eqns"):
                    out += _eigh_inputs(sub)
    return out


def check_vmap_over_lambda(entry, verb):
    """``vmap`` over λ of ``fit`` equals each fit, and costs about a path: no decomposition
    runs once per lane (no ``eigh`` of a batch of systems in the vmapped program)."""
    if verb != "fit":
        return
    X, y, qid = data()
    p = problem(entry, X, y, qid)
    A = inputs(entry, X)
    f = lambda lam: rj.predict(rj.fit(p, entry.solver, lam=lam).value, A)    # noqa: E731
    batched = jax.vmap(f)(jnp.asarray(LAMS))
    for i, lam in enumerate(LAMS):
        one = f(float(lam))
        np.testing.assert_allclose(batched[i], one, rtol=1e-8, atol=1e-9 * float(jnp.max(jnp.abs(one))))
    ranks = _eigh_inputs(jax.make_jaxpr(jax.vmap(f))(jnp.asarray(LAMS)).jaxpr)
    assert all(r == 2 for r in ranks), (entry.name, ranks)


@pytest.mark.parametrize("entry,verb", FITS, ids=FIT_IDS)
def test_vmap_over_lambda_equals_each_fit_and_costs_a_path(entry, verb):
    check_vmap_over_lambda(entry, verb)


def check_vmap_over_labels_and_kernel_parameters(entry, verb):
    """``vmap`` of ``fit`` over label vectors, and over γ of a Gaussian kernel, equals each
    fit, with no decomposition per lane (no ``eigh`` of a batch of systems: the fallback's
    ``cond`` is never turned into a select that runs it in every lane)."""
    if verb != "fit":
        return
    X, y, qid = data()
    A = inputs(entry, X)
    rng = np.random.default_rng(1)
    Y = jnp.asarray(np.stack([y, y[::-1].copy(), y + rng.standard_normal(y.shape)]))
    f = lambda yy: rj.predict(rj.fit(problem(entry, X, yy, qid), entry.solver, lam=0.5).value, A)  # noqa: E731
    batched = jax.vmap(f)(Y)
    for i in range(Y.shape[0]):
        one = f(Y[i])
        np.testing.assert_allclose(batched[i], one, rtol=1e-7, atol=1e-8 * float(jnp.max(jnp.abs(one))))
    assert all(r == 2 for r in _eigh_inputs(jax.make_jaxpr(jax.vmap(f))(Y).jaxpr)), entry.name
    kernel = getattr(entry.solver, "kernel", None)
    if not (isinstance(kernel, rj.kernels.Kernel) and kernel.kind == "gaussian"):
        return
    p = problem(entry, X, y, qid)
    g = lambda gamma: rj.predict(rj.fit(p, dataclasses.replace(       # noqa: E731
        entry.solver, kernel=rj.gaussian_kernel(gamma)), lam=0.5).value, A)
    gammas = jnp.asarray([0.1, 0.3, 1.0])
    batched = jax.vmap(g)(gammas)
    for i, gamma in enumerate(gammas):
        one = g(gamma)
        np.testing.assert_allclose(batched[i], one, rtol=1e-7, atol=1e-8 * float(jnp.max(jnp.abs(one))))
    assert all(r == 2 for r in _eigh_inputs(jax.make_jaxpr(jax.vmap(g))(gammas).jaxpr)), entry.name


@pytest.mark.parametrize("entry,verb", FITS, ids=FIT_IDS)
def test_vmap_over_labels_and_gamma_equals_each_fit_without_a_decomposition_per_lane(entry, verb):
    check_vmap_over_labels_and_kernel_parameters(entry, verb)


def check_gradient_in_lambda(entry, verb):
    """``grad`` of a fit's predictions in λ matches central differences."""
    if verb != "fit":
        return
    X, y, qid = data()
    p = problem(entry, X, y, qid)
    A = inputs(entry, X)
    f = lambda lam: jnp.sum(rj.predict(rj.fit(p, entry.solver, lam=lam).value, A) ** 2)  # noqa
    lam, h = 1.0, 1e-5
    fd = (f(lam + h) - f(lam - h)) / (2 * h)
    g = jax.grad(f)(lam)
    # central differences: error O(h^2 f''') plus rounding eps |f| / h (an iterative solver
    # adds its tolerance, relative)
    tol = 1e-6 * abs(float(fd)) + 1e3 * np.finfo(np.float64).eps * abs(float(f(lam))) / h
    assert abs(float(g) - float(fd)) <= tol, (entry.name, float(g), float(fd))


@pytest.mark.parametrize("entry,verb", FITS, ids=FIT_IDS)
def test_gradient_in_lambda_matches_finite_differences(entry, verb):
    check_gradient_in_lambda(entry, verb)


def check_a_refused_lane_never_hides_in_a_gradient(entry, verb):
    """A loss over a grid with a refused lane (λ = -1 under ``jit``) is NaN and so is its
    gradient (in the labels' scale, which every solver's predictions follow), not the
    finite gradient of the other lanes; a loss of the answered lane alone has that lane's
    finite gradient, equal to the grid of that lane alone."""
    X, y, qid = data()
    pairs = rj.differing_pairs(y)[:15] if verb == "leave_pair_out" else None
    queries = rj.global_graph(X.shape[0]) if pairs is not None else None
    folds = rj.make_folds(problem(entry, X, y, qid).graph) if verb == "holdout" else None

    def lanes(s, lams):
        p = problem(entry, X, jnp.asarray(y) * s, qid, queries)
        return _lanes(entry, verb, p, folds, pairs)(lams)

    def both(s, ls):                     # one program: every lane's loss, then lane 0's
        every = jax.value_and_grad(lambda s: jnp.sum(lanes(s, ls) ** 2))(s)
        return every, jax.grad(lambda s: jnp.sum(lanes(s, ls)[0] ** 2))(s)

    run = jax.jit(both)
    (value, grad), first = run(1.0, jnp.asarray([1.0, -1.0]))
    assert np.isnan(float(value)) and np.isnan(float(grad)), (entry.name, float(grad))
    (value, grad), alone = run(1.0, jnp.asarray([1.0, 2.0]))          # no lane refused
    assert np.isfinite(float(grad)) and np.isfinite(float(alone)), entry.name
    np.testing.assert_allclose(float(first), float(alone), rtol=1e-7)


@pytest.mark.parametrize("entry,verb", CASES, ids=IDS)
def test_a_refused_lane_never_hides_in_a_gradient(entry, verb):
    check_a_refused_lane_never_hides_in_a_gradient(entry, verb)


def test_every_registry_solver_fits_under_every_transform():
    assert {e.name for e, _ in FITS} == {e.name for e in REGISTRY}


def test_holdout_under_jit_without_folds_names_them():
    X, y, qid = data()
    with pytest.raises(TypeError, match="folds=rj.make_folds"):
        jax.jit(lambda p: rj.holdout(p, rj.Primal(), lams=LAMS).value.predictions)(
            rj.Problem(X, y, qid))


def test_select_under_vmap_says_it_runs_on_the_host():
    X, y, qid = data()
    p = rj.Problem(X, y, qid)
    with pytest.raises(TypeError, match="outside jit and vmap"):
        jax.vmap(lambda yy: rj.select(rj.Problem(X, yy, qid), [rj.Primal()], lams=LAMS).lam)(
            jnp.stack([p.y, p.y]))
    with pytest.raises(TypeError, match="outside jit and vmap"):
        jax.vmap(lambda ls: rj.select(p, [rj.Primal()], lams=ls).lam)(jnp.stack([LAMS, LAMS]))
    with pytest.raises(TypeError, match="outside jit and vmap"):
        jax.jit(lambda g: rj.select(p, [rj.Dual(rj.gaussian_kernel(g))], lams=LAMS).lam)(0.3)


def test_invalid_kernel_and_kpcrank_parameters_are_nan_under_jit(surface):
    d = surface
    Kg = jax.jit(lambda gm: rj.kernel_matrix(rj.Kernel("gaussian", gamma=gm), d.X))(-1.0)
    assert nan(Kg)
    kp = jax.jit(lambda lam: kpcrank_path(d.K, d.y, d.g, components=3, lam=lam))(-1.0)
    assert nan(kp.weights)


def test_invalid_values_under_jit_for_iterative_solvers(surface):
    d = surface
    r = jax.jit(lambda lam: rj.fit(rj.Problem(d.X, d.y, d.g), rj.CG(), lam=lam))(-1.0)
    assert nan(r.value.weights) and not bool(r.stats["converged"])
    assert int(r.result) == rj.RESULTS.invalid_input and int(r.stats["iterations"]) == 0
    r = jax.jit(lambda lam: rj.fit(rj.Problem(d.K, d.y, d.g, precomputed=True), rj.CG(), lam=lam))(jnp.inf)
    assert nan(r.value.coef) and int(r.result) == rj.RESULTS.invalid_input
    s = jax.jit(lambda C: rj.ranksvm_l2(d.X, d.y, d.qid, C=C, max_iter=5))(-1.0)
    assert nan(s.weights) and not bool(s.converged)
    good = jax.jit(lambda C: rj.ranksvm_l2(d.X, d.y, d.qid, C=C))(1.0)
    assert bool(good.converged) and not np.any(np.isnan(good.weights))


def test_traced_indices_and_segment_ids_out_of_range_give_nan(surface):
    d = surface
    seg = jnp.asarray(np.unique(d.qid, return_inverse=True)[1])
    for name in PAIR_METRICS + LIST_METRICS:
        fn = jax.jit(lambda s, f=getattr(rj, name): f(d.y, d.y, s, num_queries=5))
        assert not np.isnan(float(fn(seg))), name
        assert np.isnan(float(fn(seg.at[0].set(5)))), name
        assert np.isnan(float(fn(seg.at[3].set(-1)))), name
    e = jax.jit(lambda h: rj.edge_disagreement_error(d.y, h, jnp.array([1, 2])))
    assert float(e(jnp.array([0, 3]))) in (0.0, 0.5, 1.0) and np.isnan(float(e(jnp.array([0, d.m]))))
    p = rj.Problem(d.K, d.y, rj.global_graph(d.m), precomputed=True)
    lpo = jax.jit(lambda pr: rj.holdout(p, rj.Dual(), lams=[1.0],
                                        folds=rj.LeavePairOut(pr)).value.predictions)
    assert nan(lpo(jnp.array([[0, d.m + 3]]))) and not np.any(np.isnan(lpo(jnp.array([[0, 3]]))))

