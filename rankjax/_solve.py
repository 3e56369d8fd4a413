"""The front door's verbs over a :class:`~rankjax.Problem` and a solver object, in the style
of lineax's ``linear_solve(operator, vector, solver)``: each verb checks its arguments once,
calls the solver's own method (:mod:`rankjax.solvers`) and returns one
:class:`~rankjax.Solution` (:func:`select` a :class:`~rankjax.Selection`). A solver that
does not implement a verb is a ``TypeError`` naming those that do.

=============================================  ================================================
``fit(problem, solver, lam=)``                 one model (Pahikkala et al. 2009, §3.1-3.2, §3.5)
``path(problem, solver, lams=)``               every λ's model from one decomposition (§3.2)
``holdout(problem, solver, lams=, folds=)``    exact hold-out predictions of every λ:
                                               leave-query-out, k-fold, leave-pair-out
                                               (§3.3-3.4, eq. 33-39)
``select(problem, solvers, lams=)``            the best (solver, λ) of a grid, and its model
=============================================  ================================================
"""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp

from ._core.checks import check_flag, check_lams, check_positive
from ._core.host import is_concrete
from ._core.log import stage
from ._problem import Problem, kind_of
from ._solution import RESULTS, Solution, solvable, throw_if, with_lams
from .graphs.folds import problem_folds
from .metrics.choice import Selection
from .selection.select import select_grid
from .solvers.auto import Auto
from .solvers.base import capabilities, check_call
from .solvers.lpo import pairs_of
from .solvers.state import State
from .scale.layout import ShardedData
from .scale.stream import StreamedProblem

__all__ = ["fit", "path", "holdout", "select", "capabilities"]


def fit(problem, solver=None, *, lam, state=None, verbose: int = 0,
        throw: bool = False) -> Solution:
    r"""The model of one λ (Pahikkala et al. 2009, eq. 9; its dual and Nyström forms §3.2,
    §3.5):

    .. math::

       w = \operatorname{argmin}_w \; (y - Xw)^T L \, (y - Xw) + \lambda \lVert w \rVert^2 .

    Args:
      problem: a :class:`~rankjax.Problem` (or a sharded one, :func:`rankjax.scale.shard`).
      solver: :class:`~rankjax.Primal`, :class:`~rankjax.Dual`, :class:`~rankjax.Nystrom`,
        :class:`~rankjax.CG`, :class:`~rankjax.Falkon` or :class:`~rankjax.Auto` (default).
      state: a :class:`~rankjax.solvers.State` of ``solver.init(problem, ...)`` (lineax's
        ``init``): nothing it decided (the solver ``Auto`` chose, the memory plan) is decided
        again; one state serves several verbs (``State.serves``); ``None``: made here.
      lam: λ > 0, a Python or 0-d value (traced under ``jit``, and ``vmap`` over it costs
        about a :func:`path`); ``CG``, and ``Falkon`` with validation data, take λ = 0.
      verbose: a line when the fit starts and one when it is done (0: silent; logger
        ``"rankjax"``; CG's iterations are its ``verbose`` option).
      throw: raise ``RuntimeError`` when the result is not an answer (outside ``jit``;
        under ``jit`` read ``Solution.result``, :class:`~rankjax.RESULTS`).

    Returns:
      :class:`~rankjax.Solution` whose ``value`` is the model: ``rj.predict(value, X)`` is
      ``[m]`` (``[m, k]`` for ``k`` outputs).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=1.0)
      >>> rj.RESULTS(int(s.result)).name, rj.predict(s.value, d.X).shape
      ('successful', (127,))
    """
    state = solve_state(problem, solver, state, "fit", "fit", 1)
    solver = state.solver
    zero = solver.allows_zero(problem)
    check_positive(lam, allow_zero=zero, scalar=True)
    throw = check_flag(throw, "throw")
    solution = stage(verbose, f"fit {type(solver).__name__}",
                     lambda: solver.fit(problem, solvable(lam, zero), state))
    return throw_if(honest(problem, with_lams(solution, lam, zero)), "fit", throw)


def path(problem, solver=None, *, lams, state=None, verbose: int = 0,
         throw: bool = False) -> Solution:
    r"""Every λ's model from one decomposition (Pahikkala et al. 2009, §3.2): ``Primal``
    (one ``eigh`` of :math:`X^T L X`), ``Dual`` (of :math:`S K S`) or ``Nystrom``; with
    :math:`G = V \Lambda V^T`,

    .. math::

       w(\lambda) = V (\Lambda + \lambda I)^{-1} V^T b \quad \text{for every } \lambda .

    With ``problem.valid`` the path also holds every λ's validation scores.

    Args:
      problem: a :class:`~rankjax.Problem`.
      solver: :class:`~rankjax.Primal`, :class:`~rankjax.Dual`, :class:`~rankjax.Nystrom`
        or :class:`~rankjax.Auto`.
      lams: ``[L]`` λ grid (traced).
      state: as :func:`fit`.
      verbose, throw: as :func:`fit`.

    Returns:
      :class:`~rankjax.Solution`: ``value`` the path (``value.model(i)`` the model of
      ``lams[i]``, ``rj.predict(value, X)`` ``[L, m]``), ``result`` ``[L]``.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.path(rj.Problem(d.X, d.y, d.qid), lams=[0.1, 1.0]).value.weights.shape
      (2, 3)
    """
    lams, throw = check_lams(lams), check_flag(throw, "throw")
    state = solve_state(problem, solver, state, "path", "path", lams.shape[0])
    solver = state.solver
    solution = stage(verbose, f"path {type(solver).__name__}",
                     lambda: solver.path(problem, solvable(lams), state))
    return throw_if(honest(problem, with_lams(solution, lams)), "path", throw)


def holdout(problem, solver=None, *, lams, folds=None, state=None, seed: int = 0,
            verbose: int = 0, throw: bool = False) -> Solution:
    r"""Exact hold-out predictions of every λ from one decomposition (Pahikkala et al. 2009,
    §3.3-3.4, eq. 33-39): each fold's rows predicted by the model trained without them. For
    a fold :math:`U` of whole queries, with :math:`H = (L + \lambda K^{-1})^{-1}`, the
    full-data fit :math:`f` and :math:`B B^T = L_{UU}`,

    .. math::

       f'_U = t + H_{UU} B (I - B^T H_{UU} B)^{-1} B^T t, \qquad
       t = f_U - H_{UU} L_{UU} y_U .

    Args:
      problem: a :class:`~rankjax.Problem`.
      solver: :class:`~rankjax.Primal`, :class:`~rankjax.Dual`, :class:`~rankjax.Nystrom`
        or :class:`~rankjax.Auto`.
      lams: ``[L]`` λ grid.
      folds: ``None`` (leave-query-out), ``k`` (k-fold over queries, drawn with ``seed``),
        a :class:`~rankjax.Folds` (under ``jit``: built outside it by
        :func:`~rankjax.make_folds`), or :class:`~rankjax.LeavePairOut` (``Primal``/``Dual``
        on a global ranking problem).
      state: as :func:`fit`.
      seed: the draw of ``k`` folds.
      verbose: a line when it starts, one per bucket of folds as it finishes and one when it
        is done (0: silent; logger ``"rankjax"``).
      throw: as :func:`fit`.

    Returns:
      :class:`~rankjax.Solution`: ``value`` a ``HoldOut`` (``predictions [L, m(, k)]``,
      ``path`` every λ's full-data model) or a ``PairHoldOut``; ``result`` ``[L]``.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.holdout(rj.Problem(d.X, d.y, d.qid), lams=[1.0]).value.predictions.shape
      (1, 127)
    """
    method = getattr(folds, "method", "holdout")        # LeavePairOut: leave_pair_out
    verb = "holdout" if method == "holdout" else "holdout with LeavePairOut folds"
    check_call(problem, Auto() if solver is None else solver, method, verb)
    lams = check_lams(lams)
    if method == "leave_pair_out":
        folds = pairs_of(problem, folds)
    elif isinstance(problem, (ShardedData, StreamedProblem)):
        if folds is not None:
            raise TypeError(f"the hold-out of a {kind_of(problem)} problem is leave-query-out: "
                            "folds=None")
    else:
        folds = problem_folds(problem, folds, seed, "rj.holdout")
    throw = check_flag(throw, "throw")
    state = solve_state(problem, solver, state, method, verb, lams.shape[0], folds)
    solver = state.solver
    solution = stage(verbose, f"holdout {type(solver).__name__}",
                     lambda: getattr(solver, method)(problem, solvable(lams), folds, state))
    return throw_if(honest(problem, with_lams(solution, lams)), "holdout", throw)


def solve_state(problem, solver, state, method: str, verb: str, L: int, folds=None) -> State:
    """The verbs' one check of (problem, solver, state): ``state`` when given (made by
    the same kind of solver, for a verb it covers: ``State.check``), else the
    :meth:`~rankjax.AbstractSolver.init` of the solver that serves ``problem`` (``solver``
    ``None``: ``Auto()``, or the state's own)."""
    if state is None:
        return check_call(problem, Auto() if solver is None else solver, method, verb).init(
            problem, method, L, folds)
    if not isinstance(state, State):
        raise TypeError(f"state must be a rankjax State (solver.init(problem, ...)), got "
                        f"{type(state).__name__}")
    served = check_call(problem, state.solver if solver is None else solver, method, verb)
    return state.check(served, method, L, verb, getattr(getattr(problem, "X", None), "shape", None))


def honest(problem, solution: Solution) -> Solution:
    """``solution``, with the code ``invalid_input`` and a NaN value (every floating leaf)
    where ``problem``'s rows or labels (or its validation problem's) hold a non-finite value
    under ``jit``, whatever the solver did with them: outside ``jit`` the problem's checks
    raise on them, under ``jit`` they cannot, and a solver may absorb a bad row into a finite
    model (a Nyström feature map) or stop at zeros (CG). One pass over the inputs, traced
    inputs only."""
    arrays = []
    while isinstance(problem, Problem):              # sharded and streamed problems: their own
        arrays += [a for a in jax.tree.leaves((problem.X, problem.y))
                   if jnp.issubdtype(jnp.result_type(a), jnp.inexact)]
        problem = problem.valid
    if not arrays or all(is_concrete(a) for a in arrays):
        return solution
    ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in arrays]))
    nan = lambda v: (jnp.where(ok, v, jnp.nan)                            # noqa: E731
                     if jnp.issubdtype(jnp.result_type(v), jnp.inexact) else v)
    return Solution(jax.tree.map(nan, solution.value),
                    jnp.where(ok, solution.result, int(RESULTS.invalid_input)).astype(jnp.int32),
                    solution.stats)


def select(problem, solvers: Sequence = (Auto(),), *, lams, folds=None, metric=None,
           score_k: int = 10, optimize: bool = False, optimize_steps: int = 20,
           ard: bool = False, optimizer=None, seed: int = 0, verbose: int = 0,
           extend: int = 0) -> Selection:
    """The best (solver, λ) of a grid of solvers × λ by a metric of the exact hold-out
    predictions (or of ``problem.valid``), and its model — no refit: every λ's model comes
    from the same decomposition (Pahikkala et al. 2009, §3.3). Runs on the host (it chooses
    with numpy): call it outside ``jit`` and ``vmap``.

    Args:
      problem: a :class:`~rankjax.Problem` with query ids (the metric averages over them).
      solvers: the solvers to try, e.g. ``[rj.Dual(rj.gaussian_kernel(g)) for g in gammas]``
        or ``[rj.Nystrom(k, 2000) for k in kernels]``; any solver that implements
        ``holdout`` (``path`` with ``problem.valid``).
      lams: ``[L]`` λ grid.
      folds: ``None`` (leave-query-out), ``k`` or a :class:`~rankjax.Folds`.
      metric: a rankjax metric ``metric(scores, y, qid, *, num_queries)`` with its direction
        (``higher_is_better``); default NDCG@``score_k``.
      score_k: the NDCG cut-off of the default metric.
      optimize: refine the best point by gradient descent on the exact hold-out loss
        (:func:`~rankjax.tune`, ``optimize_steps`` steps of ``optimizer``, default Adam at
        0.1); a Nyström grid without ``ard`` instead searches γ (golden section) and a finer λ.
      ard: with ``optimize``, also learn one scale per feature.
      optimizer: an optax ``GradientTransformation`` for ``optimize``.
      seed: the folds' draw; verbose: log each solver of the grid (0: silent).
      extend: how many times to extend the grid past a best point on its edge, in each of
        λ and γ (0: the grid as given; :class:`~rankjax.estimators.RankRLSCV` extends up to
        ``EXTEND`` = 2 times); each extension is one hold-out of
        ``L`` λ; still on the edge after the last, a :class:`~rankjax.GridEdgeWarning`.

    Returns:
      :class:`~rankjax.Selection`.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=4, seed=0)
      >>> s = rj.select(rj.Problem(d.X, d.y, d.qid),
      ...               [rj.Dual(rj.gaussian_kernel(g)) for g in (0.1, 1.)], lams=[0.1, 1.])
      >>> s.scores.shape
      (4,)
    """
    return select_grid(problem, solvers, lams=lams, folds=folds, metric=metric, score_k=score_k,
                       optimize=optimize, optimize_steps=optimize_steps, ard=ard,
                       optimizer=optimizer, seed=seed, verbose=verbose, extend=extend)
