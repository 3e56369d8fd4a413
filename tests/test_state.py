"""One state per solve (lineax's ``init``): every solver's ``init`` decides once per
(solver, problem) what its verbs read — the solver ``Auto`` chooses, the route and its
memory plan, the compute dtype, what it factors — and the state crosses ``jit``, ``vmap``
and ``grad`` as an argument like the problem does.
"""
import collections
import contextlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax._core import memory
from rankjax.solvers.state import State
from registry import LAMS, REGISTRY, data, inputs, problem


@contextlib.contextmanager
def counted():
    """``(inits, outside)``: ``inits`` counts ``init`` calls per (solver, problem);
    ``outside`` lists the memory plans (``check_memory`` calls, wherever imported) made
    outside an ``init``."""
    inits, outside, depth = collections.Counter(), [], [0]
    real_init, real_check = rj.AbstractSolver.init, memory.check_memory

    def init(self, problem, *a, **k):
        inits[(self, id(problem))] += 1
        depth[0] += 1
        try:
            return real_init(self, problem, *a, **k)
        finally:
            depth[0] -= 1

    def check(need, what, alternatives):
        if depth[0] == 0:
            outside.append(what)
        return real_check(need, what, alternatives)

    patched = [(m, "check_memory") for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("rankjax")
               and getattr(m, "check_memory", None) is real_check]
    rj.AbstractSolver.init = init
    for m, name in patched:
        setattr(m, name, check)
    try:
        yield inits, outside
    finally:
        rj.AbstractSolver.init = real_init
        for m, name in patched:
            setattr(m, name, real_check)


def _once(inits):
    twice = {f"{type(s).__name__}": n for (s, _), n in inits.items() if n != 1}
    assert inits and not twice, twice


def test_every_solver_defines_init_returning_a_state():
    X, y, qid = data()
    for e in REGISTRY:
        p = problem(e, X, y, qid)
        state = e.solver.init(p, e.verbs()[-1] if e.verbs()[-1] != "leave_pair_out"
                              else "holdout", L=3)
        assert isinstance(state, State) and state.L == 3, e.name
        assert type(state.solver) is type(e.solver.resolve(p)), e.name
        assert "init" in dir(type(e.solver)) and callable(type(e.solver).plan), e.name


def test_a_rankrlscv_fit_calls_each_init_once_and_plans_memory_only_there():
    from rankjax.estimators import RankRLSCV
    d = rj.make_ranking_data(24, num_features=4, seed=0)
    for est in (RankRLSCV(kernel="gaussian"), RankRLSCV(kernel="gaussian", gammas=[0.3, 1.0],
                                                         basis=40, feature_map="rank"),
                RankRLSCV()):
        with counted() as (inits, outside):
            est.fit(d.X, d.y, qid=d.qid)
        _once(inits)
        assert outside == [], outside


def test_a_select_over_a_gamma_grid_calls_each_init_once():
    d = rj.make_ranking_data(20, num_features=4, seed=1)
    p = rj.Problem(d.X, d.y, d.qid)
    grids = ([rj.Dual(rj.gaussian_kernel(g)) for g in (0.1, 0.3, 1.0)],
             [rj.Nystrom(rj.gaussian_kernel(g), 30) for g in (0.1, 0.3, 1.0)])
    for solvers in grids:
        with counted() as (inits, outside):
            rj.select(p, solvers, lams=np.logspace(-2, 1, 4), extend=2)
        _once(inits)
        assert len(inits) >= len(solvers) and outside == [], (inits, outside)   # + extensions
    for solvers in grids:            # the gradient (exact kernel) or the γ search (Nyström)
        with counted() as (inits, outside):
            rj.select(p, solvers, lams=np.logspace(-2, 1, 4), optimize=True, optimize_steps=3)
        _once(inits)
        assert outside == [], outside


def test_a_tune_calls_each_init_once():
    d = rj.make_ranking_data(20, num_features=4, seed=2)
    p = rj.Problem(d.X, d.y, d.qid)
    for s in (rj.Dual(rj.gaussian_kernel(0.3)), rj.Nystrom(rj.gaussian_kernel(0.3), 30),
              rj.Primal()):
        with counted() as (inits, outside):
            rj.tune(p, s, lam=1.0, steps=3)
        _once(inits)
        assert outside == [], outside


def test_one_state_serves_a_fit_a_path_and_a_holdout_and_is_checked():
    X, y, qid = data()
    p = rj.Problem(X, y, qid)
    state = rj.Auto().init(p, "holdout", L=3)
    with counted() as (inits, _):
        h = rj.holdout(p, lams=LAMS, state=state)
        w = rj.path(p, lams=LAMS[:2], state=state)
        f = rj.fit(p, lam=1.0, state=state)
    assert not inits                                   # nothing planned again
    np.testing.assert_allclose(h.value.predictions, rj.holdout(p, lams=LAMS).value.predictions)
    np.testing.assert_allclose(w.value.weights, rj.path(p, lams=LAMS[:2]).value.weights)
    np.testing.assert_allclose(f.value.weights, rj.fit(p, lam=1.0).value.weights)
    with pytest.raises(ValueError, match="state was planned for holdout of 3"):
        rj.holdout(p, lams=np.logspace(-2, 2, 5), state=state)
    with pytest.raises(ValueError, match="state was made by Primal"):
        rj.fit(p, rj.Dual(rj.gaussian_kernel(0.3)), lam=1.0, state=state)
    with pytest.raises(ValueError, match="does not cover holdout"):
        rj.holdout(p, lams=LAMS, state=rj.Primal().init(p, "fit"))
    with pytest.raises(TypeError, match="state must be a rankjax State"):
        rj.fit(p, lam=1.0, state={"solver": rj.Primal()})
    other = rj.Problem(X[:30], y[:30], qid[:30])
    with pytest.raises(ValueError, match=r"state was made for a problem of shape \(\d+, 4\)"):
        rj.fit(other, lam=1.0, state=state)


def _fit_entries():
    return [e for e in REGISTRY if "fit" in e.verbs()]


@pytest.mark.parametrize("entry", _fit_entries(), ids=[e.name for e in _fit_entries()])
def test_the_state_crosses_jit_vmap_and_grad(entry):
    """The state as an argument: ``jit`` of ``fit(state)`` equals the eager fit, ``vmap``
    over λ equals a fit per λ, and ``grad`` in λ equals central differences."""
    X, y, qid = data()
    p = problem(entry, X, y, qid)
    A = inputs(entry, X)
    state = entry.solver.init(p, "fit")

    def scores(state, lam):
        return rj.predict(rj.fit(p, lam=lam, state=state).value, A)

    eager = np.asarray(scores(state, 1.0))
    np.testing.assert_allclose(np.asarray(jax.jit(scores)(state, 1.0)), eager, rtol=1e-9,
                               atol=1e-12 * np.abs(eager).max())
    lams = jnp.asarray([0.5, 2.0])
    lanes = np.asarray(jax.jit(jax.vmap(scores, in_axes=(None, 0)))(state, lams))
    for i, lam in enumerate([0.5, 2.0]):
        one = np.asarray(scores(state, lam))
        np.testing.assert_allclose(lanes[i], one, rtol=1e-8, atol=1e-10 * np.abs(one).max())

    def loss(lam):
        f = scores(state, lam)
        return jnp.sum((f - jnp.mean(f)) ** 2)

    g = float(jax.jit(jax.grad(loss))(1.0))
    h = 1e-4
    fd = (float(loss(1.0 + h)) - float(loss(1.0 - h))) / (2 * h)
    assert g == pytest.approx(fd, rel=1e-4, abs=1e-8 * abs(float(loss(1.0)))), entry.name
