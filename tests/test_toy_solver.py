"""A new solver is one class: ``DenseSolve`` below — the primal system solved by
``jnp.linalg.solve`` on a dense ``X^T L X`` built from the graph's operator — is defined in
this file alone, added to a copy of the registry, and every registry property of every
property file (``registry.PROPERTY_FILES``) runs over it. Nothing under ``rankjax/`` knows it.
"""
import dataclasses

import jax
import jax.numpy as jnp
import pytest

import rankjax as rj
from registry import Entry, cases, checks


@jax.jit
def _dense_solve(X, y, graph, lam):
    """``w = (X^T L X + λ I)^{-1} X^T L y``, ``L X`` by the graph's segment sums."""
    lam = jnp.asarray(lam, X.dtype)
    G = jnp.matmul(X.T, graph.mv(X), precision=jax.lax.Precision.HIGHEST)
    b = jnp.matmul(X.T, graph.mv(y), precision=jax.lax.Precision.HIGHEST)
    w = jnp.linalg.solve(G + lam * jnp.eye(X.shape[1], dtype=X.dtype), b)
    ok = jnp.isfinite(lam) & (lam > 0)
    return jnp.where(ok, w, jnp.nan), ok


@dataclasses.dataclass(frozen=True)
class DenseSolve(rj.AbstractSolver):
    """The toy: ``fit`` only, feature rows only (the base class's default ``kinds``)."""

    def fit(self, problem, lam):
        w, ok = _dense_solve(problem.X, problem.y, problem.graph, lam)
        code = jnp.where(ok, jnp.where(jnp.all(jnp.isfinite(w)), rj.RESULTS.successful,
                                       rj.RESULTS.unresolved_lambda), rj.RESULTS.invalid_input)
        return rj.Solution(rj.LinearModel(w), code.astype(jnp.int32), {})


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
