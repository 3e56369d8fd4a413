"""A new solver is one class: ``DenseSolve`` below — the primal system solved by
``jnp.linalg.solve`` on a dense ``X^T L X`` built from the graph's operator — is defined in
this file alone, added to a copy of the registry, and every registry property of every
property file (``registry.PROPERTY_FILES``) runs over it. Nothing under ``rankjax/`` knows it.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from registry import Entry, cases, checks


@jax.jit
def _dense_solve(X, y, graph, lam):
    """``w = (X^T L X + λ I)^{-1} X^T L y``, ``L X`` by the graph's segment sums."""
    lam = jnp.asarray(lam, X.dtype)
    G = jnp.matmul(X.T, graph.mv(X), precision=jax.lax.Precision.HIGHEST)
    b = jnp.matmul(X.T, graph.mv(y), precision=jax.lax.Precision.HIGHEST)
    return jnp.linalg.solve(G + lam * jnp.eye(X.shape[1], dtype=X.dtype), b)


@dataclasses.dataclass(frozen=True)
class DenseSolve(rj.AbstractSolver):
    """The toy: ``fit`` only, feature rows only (the base class's default ``kinds``)."""

    def fit(self, problem, lam, state):
        """An invalid λ is the verbs' to refuse (NaN lanes, ``invalid_input``), not the
        solver's: it codes what it computed."""
        w = _dense_solve(problem.X, problem.y, problem.graph, lam)
        return rj.Solution(rj.LinearModel(w), rj.solvers.lane_codes(w, lanes=False), {})


TOY = Entry("toy", DenseSolve(), "features", "linear", rtol=1e-9)
TOY_CASES, TOY_IDS = cases([TOY])
CHECKS = checks()


def test_the_toy_is_a_solver_of_one_method():
    assert rj.capabilities(TOY.solver) == {"fit"} and TOY.verbs() == ["fit"]
    assert len(CHECKS) >= 8, sorted(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
@pytest.mark.parametrize("entry,verb", TOY_CASES, ids=TOY_IDS)
def test_every_registry_property_holds_for_the_toy(name, entry, verb):
    CHECKS[name](entry, verb)


def test_a_verb_the_toy_does_not_implement_names_those_that_do():
    X = jnp.ones((4, 2))
    p = rj.Problem(X, jnp.arange(4.0), jnp.array([0, 0, 1, 1]))
    with pytest.raises(TypeError, match="DenseSolve does not support path; solvers that do: .*Primal"):
        rj.path(p, TOY.solver, lams=[1.0])
    with pytest.raises(TypeError, match="DenseSolve does not take a precomputed kernel matrix"):
        rj.fit(rj.Problem(jnp.eye(4), jnp.arange(4.0), jnp.array([0, 0, 1, 1]), precomputed=True),
               TOY.solver, lam=1.0)


def test_the_estimator_fits_with_a_solver_object_and_saves_its_model(tmp_path):
    """``RankRLS(solver=<object>)``: the toy's fit behind the estimator equals ``rj.fit``
    with it, and its model (built-in) saves and loads; a string outside the list names the
    object form."""
    from rankjax.estimators import RankRLS
    d = rj.make_ranking_data(8, num_features=3, seed=0)
    est = RankRLS(lam=2.0, solver=TOY.solver).fit(d.X, d.y, qid=d.qid)
    want = rj.predict(rj.fit(rj.Problem(d.X, d.y, d.qid), TOY.solver, lam=2.0).value, d.X)
    np.testing.assert_allclose(est.predict(d.X), want, rtol=1e-9, atol=1e-12)
    rj.io.save_model(tmp_path / "toy.rjm", est.model_)
    back, _ = rj.io.load_model(tmp_path / "toy.rjm")
    np.testing.assert_allclose(rj.predict(back, d.X), want, rtol=1e-12)
    with pytest.raises(ValueError, match="solver object"):
        RankRLS(solver="dense").fit(d.X, d.y, qid=d.qid)
