"""The front door: four verbs over a :class:`~rankjax.Problem` and a solver object
(:mod:`rankjax.solvers.classes`), in the style of lineax's ``linear_solve(operator, vector,
solver)``. One dispatch table says which solver serves which verb; an unsupported pair is a
``TypeError`` naming the solvers that do. Every verb returns one :class:`Solution`
(:func:`select` a :class:`~rankjax.Selection`).

=============================  ==========================================================
``fit(problem, solver, lam=)``     one model (Pahikkala et al. 2009, §3.1-3.2, §3.5)
``path(problem, solver, lams=)``   every λ's model from one decomposition (§3.4)
``holdout(problem, solver, lams=, folds=)``  exact hold-out predictions of every λ:
                                   leave-query-out, k-fold, leave-pair-out (§3.3,
                                   Pahikkala et al. 2009 "leave-pair-out"; eq. 33-34)
``select(problem, solvers, lams=)``  the best (solver, λ) by hold-out NDCG and its model
=============================  ==========================================================
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .solvers.cg import rankrls_cg, rankrls_cg_dual
from .solvers.cg_loop import CG, STOP_REASONS
from ._core.checks import check_positive, is_concrete
from .solvers.falkon import rankrls_falkon
from .graphs.folds import Folds
from .graphs.graph import is_graph
from .solvers.holdout import holdout_dual, holdout_nystrom, holdout_primal
from .kernels.kernel import kernel_matrix, linear_kernel
from .solvers.lpo import leave_pair_out_dual, leave_pair_out_primal
from .solvers.path import rankrls_dual_path, rankrls_nystrom_path, rankrls_primal_path
from ._problem import Problem
from .solvers.models import rankrls_dual, rankrls_kernel, rankrls_primal
from .metrics.choice import Selection
from .selection.select import fit_model, select as select_grid
from .solvers.classes import (SOLVERS, Auto, Dual, Falkon, Nystrom, Primal)
from ._core.sparse import as_dense
from ._core.types import saveable

__all__ = ["RESULTS", "Solution", "LeavePairOut", "fit", "path", "holdout", "select",
           "capabilities"]

RESULTS = ("successful", "unresolved_lambda", "max_iterations_reached", "early_stopped",
           "breakdown", "invalid_input")
"""The one result code of every :class:`Solution` (``Solution.result`` indexes it):
``successful``; ``unresolved_lambda`` — the λ is below what the dtype resolves, its lane is
NaN (the precision rule, README "Guarantees"); ``max_iterations_reached`` — CG stopped at
its cap before the tolerance; ``early_stopped`` — CG stopped on the validation criterion
(an answer, by design); ``breakdown`` — CG met a non-positive curvature; ``invalid_input``
— non-finite values reached the solver."""

_CG_RESULT = np.array([RESULTS.index(r) for r in ("successful", "max_iterations_reached",
                                                   "early_stopped", "breakdown",
                                                   "invalid_input")], np.int32)
assert len(_CG_RESULT) == len(STOP_REASONS)


@saveable
class Solution(NamedTuple):
    """What :func:`fit`, :func:`path` and :func:`holdout` return.

    Attributes:
      value: the model (``fit``: ``predict(value, X)``), the path (``path``: every λ's
        model, ``PrimalPath`` / ``DualPath`` / ``NystromPath``) or the hold-out predictions
        (``holdout``: ``HoldOut`` / ``PairHoldOut``).
      result: int32 index into :data:`RESULTS`: a scalar for ``fit``, ``[L]`` per λ for
        ``path`` and ``holdout``.
      stats: a dict of solver statistics (CG: ``iterations``, ``best_iteration``).

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.path(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[0.1, 1.0])
      >>> [rj.RESULTS[int(r)] for r in s.result]
      ['successful', 'successful']
    """

    value: object
    result: jax.Array
    stats: dict

    def message(self) -> str:
        """The results in words (host side)."""
        codes = np.atleast_1d(np.asarray(self.result))
        bad = sorted({RESULTS[int(c)] for c in codes if c not in (0, 3)})
        return "successful" if not bad else ", ".join(bad)


@saveable
@dataclasses.dataclass(frozen=True)
class LeavePairOut:
    """``folds=`` of :func:`holdout` for leave-pair-out: each pair ``(i, j)`` of ``pairs``
    ``[p, 2]`` held out in turn from the global ranking problem (Pahikkala et al. 2009,
    leave-pair-out, cost (21): the problem's queries ``rj.global_graph(m)``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.random.default_rng(0).standard_normal((8, 2)); y = X[:, 0]
      >>> p = rj.Problem(X, y, rj.global_graph(8))
      >>> s = rj.holdout(p, rj.Primal(), lams=[1.0], folds=rj.LeavePairOut([[0, 1]]))
      >>> s.value.predictions.shape
      (1, 1, 2)
    """

    pairs: object


# ---------------------------------------------------------------- one cell per function


def _valid_X(p: Problem):
    return None if p.valid is None else p.valid.X


def _kernel_of(p: Problem, s: Dual):
    """``(K, K_valid)`` of a dual solver on ``p``."""
    if p.precomputed:
        return p.X, _valid_X(p)
    k = linear_kernel() if s.kernel is None else s.kernel
    Xd = as_dense(p.X)
    Kv = None if p.valid is None else kernel_matrix(k, as_dense(p.valid.X), Xd)
    return kernel_matrix(k, Xd), Kv


def _fit_dual(p, s, lam):
    if p.precomputed:
        return rankrls_dual(p.X, p.y, p.graph, lam=lam)
    if s.kernel is None:
        check_positive(lam, scalar=True)
        return fit_model(p, lam, dual=True)
    return rankrls_kernel(as_dense(p.X), p.y, p.graph, lam=lam, kernel=s.kernel)


def _fit_cg(p, s, lam):
    valid = None if p.valid is None else p.valid.validation()
    f = rankrls_cg_dual if p.precomputed else rankrls_cg
    return f(p.X, p.y, p.graph, lam=lam, options=s, valid=valid)


def _fit_falkon(p, s, lam):
    valid = None if p.valid is None else p.valid.validation()
    return rankrls_falkon(as_dense(p.X), p.y, p.graph, lam=lam, kernel=s.kernel,
                          basis=s.basis, options=s.options, valid=valid,
                          precond_rows=s.precond_rows, block_rows=s.block_rows, seed=s.seed)


def _global_pairs(p: Problem, folds: LeavePairOut):
    g = p.graph
    ok = is_graph(g, "QueryGraph") and g.has_root and g.num_queries == 1
    if ok and is_concrete(g.edge_weight):
        ok = float(np.asarray(g.edge_weight)[0]) == 1.0     # a concrete array, also under jit
    if not ok:
        raise ValueError("leave-pair-out solves the global ranking cost (Pahikkala et al. "
                         "2009, eq. 21): build the problem with queries=rj.global_graph(m)")
    return folds.pairs


def _holdout_primal(p, s, lams, folds, seed):
    if isinstance(folds, LeavePairOut):
        return leave_pair_out_primal(p.X, p.y, _global_pairs(p, folds), lams=lams)
    return holdout_primal(p.X, p.y, p.graph, lams=lams, folds=folds, seed=seed)


def _holdout_dual(p, s, lams, folds, seed):
    K, _ = _kernel_of(p, s)
    if isinstance(folds, LeavePairOut):
        return leave_pair_out_dual(K, p.y, _global_pairs(p, folds), lams=lams)
    return holdout_dual(K, p.y, p.graph, lams=lams, folds=folds, seed=seed)


def _holdout_nystrom(p, s, lams, folds, seed):
    if isinstance(folds, LeavePairOut):
        raise TypeError(_unsupported(s, "holdout with LeavePairOut folds",
                                     ("Primal", "Dual")))
    return holdout_nystrom(as_dense(p.X), p.y, p.graph, lams=lams, kernel=s.kernel,
                           basis=s.basis, folds=folds, seed=seed)


def _path_dual(p, s, lams):
    K, Kv = _kernel_of(p, s)
    return rankrls_dual_path(K, p.y, p.graph, lams=lams, K_valid=Kv)


TABLE = {
    "fit": {
        Primal: lambda p, s, lam: rankrls_primal(p.X, p.y, p.graph, lam=lam),
        Dual: _fit_dual,
        Nystrom: lambda p, s, lam: rankrls_nystrom_path(
            as_dense(p.X), p.y, p.graph, lams=[lam], kernel=s.kernel, basis=s.basis,
            X_valid=None if p.valid is None else as_dense(p.valid.X)),
        CG: _fit_cg,
        Falkon: _fit_falkon,
    },
    "path": {
        Primal: lambda p, s, lams: rankrls_primal_path(p.X, p.y, p.graph, lams=lams,
                                                       X_valid=_valid_X(p)),
        Dual: _path_dual,
        Nystrom: lambda p, s, lams: rankrls_nystrom_path(
            as_dense(p.X), p.y, p.graph, lams=lams, kernel=s.kernel, basis=s.basis,
            X_valid=None if p.valid is None else as_dense(p.valid.X)),
    },
    "holdout": {Primal: _holdout_primal, Dual: _holdout_dual, Nystrom: _holdout_nystrom},
}
"""``{verb: {solver class: cell}}``: the one place that says which solver serves which
verb (:func:`capabilities`)."""

FEATURES_ONLY = (Primal, Nystrom, Falkon)
"""Solvers that need feature rows (not a ``precomputed`` kernel matrix)."""


def capabilities(solver) -> frozenset:
    """The verbs ``solver`` (an instance or class) supports.

    Example:
      >>> import rankjax as rj
      >>> sorted(rj.capabilities(rj.CG()))
      ['fit']
    """
    cls = solver if isinstance(solver, type) else type(solver)
    verbs = {v for v, cells in TABLE.items() if cls in cells}
    if cls in (Primal, Dual, Nystrom, Auto):
        verbs.add("select")
    if cls is Auto:
        verbs |= {"fit", "path", "holdout"}
    return frozenset(verbs)


def _unsupported(solver, verb, names) -> str:
    return (f"{type(solver).__name__} does not support {verb}; solvers that do: "
            f"{', '.join(names)}")


def _cell(verb, problem, solver):
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a rankjax.Problem, got {type(problem).__name__}")
    if isinstance(solver, Auto):
        solver = solver.resolve(problem)
    if not isinstance(solver, SOLVERS):
        raise TypeError(f"solver must be one of {', '.join(c.__name__ for c in SOLVERS)}, "
                        f"got {type(solver).__name__}")
    cells = TABLE[verb]
    if type(solver) not in cells:
        raise TypeError(_unsupported(solver, verb, [c.__name__ + "()" for c in cells]))
    if problem.precomputed and isinstance(solver, FEATURES_ONLY + (Dual,)) and not (
            isinstance(solver, Dual) and solver.kernel is None):
        raise TypeError(f"{type(solver).__name__} needs feature rows; a precomputed kernel "
                        "matrix is solved by Dual() (no kernel) or CG()")
    return cells[type(solver)], solver


# ------------------------------------------------------------------------ results


def _lane_result(values, lanes: bool):
    """``unresolved_lambda`` where a lane holds NaN: ``[L]`` per λ, or a scalar."""
    a = jnp.asarray(values)
    bad = jnp.isnan(a).reshape(a.shape[0], -1).any(1) if lanes else jnp.isnan(a).any()
    return jnp.where(bad, RESULTS.index("unresolved_lambda"), 0).astype(jnp.int32)


def _fit_result(value):
    stats = {}
    if hasattr(value, "stop_reason"):                       # CGResult
        return jnp.asarray(_CG_RESULT)[value.stop_reason], _cg_stats(value)
    if hasattr(value, "cg"):                                # FalkonModel
        return jnp.asarray(_CG_RESULT)[value.cg.stop_reason], _cg_stats(value.cg)
    leaf = getattr(value, "weights", None)
    leaf = getattr(value, "coef", None) if leaf is None else leaf
    return _lane_result(leaf, lanes=False), stats


def _cg_stats(r):
    return {"iterations": r.iterations, "best_iteration": r.best_iteration,
            "converged": r.converged}


def _throw(solution: Solution, verb: str, throw: bool) -> Solution:
    if throw and is_concrete(solution.result):
        codes = np.atleast_1d(np.asarray(solution.result))
        if np.any((codes != 0) & (codes != RESULTS.index("early_stopped"))):
            raise RuntimeError(f"{verb} did not succeed: {solution.message()} (throw=False "
                               "returns the Solution with its result codes)")
    return solution


# -------------------------------------------------------------------------- verbs


def fit(problem: Problem, solver=Auto(), *, lam, throw: bool = False) -> Solution:
    """The model of one λ: ``argmin_w (y - Xw)^T L (y - Xw) + λ ||w||^2`` (Pahikkala et al.
    2009, eq. 9; its dual and Nyström forms §3.2, §3.5).

    Args:
      problem: a :class:`Problem`.
      solver: :class:`Primal`, :class:`Dual`, :class:`Nystrom`, :class:`CG`,
        :class:`Falkon` or :class:`Auto` (default).
      lam: λ > 0 (a Python or 0-d value; traced under ``jit``).
      throw: raise ``RuntimeError`` when the result is not ``successful`` (outside ``jit``;
        under ``jit`` read ``Solution.result``).

    Returns:
      :class:`Solution` whose ``value`` is the model (``predict(value, X)``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=1.0)
      >>> rj.RESULTS[int(s.result)], rj.predict(s.value, d.X).shape
      ('successful', (127,))
    """
    cell, solver = _cell("fit", problem, solver)
    value = cell(problem, solver, lam)
    result, stats = _fit_result(value)
    return _throw(Solution(value, result, stats), "fit", throw)


def path(problem: Problem, solver=Auto(), *, lams, throw: bool = False) -> Solution:
    """Every λ's model from one decomposition (Pahikkala et al. 2009, §3.4): ``Primal``
    (one ``eigh`` of ``X^T L X``), ``Dual`` (of ``L K``) or ``Nystrom``. With
    ``problem.valid`` the path also holds every λ's validation scores.

    Args:
      problem: a :class:`Problem`.
      solver: :class:`Primal`, :class:`Dual`, :class:`Nystrom` or :class:`Auto`.
      lams: ``[L]`` λ grid.
      throw: as :func:`fit`.

    Returns:
      :class:`Solution`: ``value`` the path, ``result`` ``[L]``.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.path(rj.Problem(d.X, d.y, d.qid), lams=[0.1, 1.0]).value.weights.shape
      (2, 3)
    """
    cell, solver = _cell("path", problem, solver)
    value = cell(problem, solver, lams)
    lanes = value.weights if hasattr(value, "weights") else value.coef
    return _throw(Solution(value, _lane_result(lanes, True), {}), "path", throw)


def holdout(problem: Problem, solver=Auto(), *, lams, folds=None, seed: int = 0,
            throw: bool = False) -> Solution:
    """Exact hold-out predictions of every λ from one decomposition (Pahikkala et al. 2009,
    §3.3, eq. 33-34): each fold's rows predicted by the model trained without them.

    Args:
      problem: a :class:`Problem`.
      solver: :class:`Primal`, :class:`Dual`, :class:`Nystrom` or :class:`Auto`.
      lams: ``[L]`` λ grid.
      folds: ``None`` (leave-query-out), ``k`` (k-fold over queries, drawn with ``seed``),
        a :class:`Folds`, or :class:`LeavePairOut` (``Primal``/``Dual``).
      seed: the draw of ``k`` folds.
      throw: as :func:`fit`.

    Returns:
      :class:`Solution`: ``value`` a ``HoldOut`` (``PairHoldOut`` for leave-pair-out),
      ``result`` ``[L]``.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.holdout(rj.Problem(d.X, d.y, d.qid), lams=[1.0]).value.predictions.shape
      (1, 127)
    """
    cell, solver = _cell("holdout", problem, solver)
    if not (folds is None or isinstance(folds, (int, np.integer, Folds, LeavePairOut))) \
            or isinstance(folds, bool):
        raise TypeError(f"folds must be None, an int, a rankjax.Folds or a "
                        f"rankjax.LeavePairOut, got {type(folds).__name__}")
    value = cell(problem, solver, lams, folds, seed)
    return _throw(Solution(value, _lane_result(value.predictions, True), {}), "holdout",
                  throw)


def select(problem: Problem, solvers: Sequence = (Auto(),), *, lams, folds=None,
           score_k: int = 10, optimize: bool = False, optimize_steps: int = 20,
           ard: bool = False, seed: int = 0, verbose: int = 0) -> Selection:
    """The best (solver, λ) of a grid by NDCG@``score_k`` of the exact hold-out
    predictions (or of ``problem.valid``), and its model (Pahikkala et al. 2009, §3.3).

    Args:
      problem: a :class:`Problem` with query ids (NDCG averages over them).
      solvers: the solvers to try: :class:`Primal` / :class:`Auto` (the linear model),
        :class:`Dual` with kernels (e.g. a γ grid), or :class:`Nystrom` with kernels on one
        basis.
      lams: ``[L]`` λ grid.
      folds: ``None`` (leave-query-out), ``k`` or a :class:`Folds`.
      score_k, optimize, optimize_steps, ard, seed, verbose: as
        :class:`~rankjax.estimators.RankRLSCV` (``optimize`` refines the best point by
        gradient descent on the exact hold-out loss).

    Returns:
      :class:`Selection`.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=4, seed=0)
      >>> s = rj.select(rj.Problem(d.X, d.y, d.qid),
      ...               [rj.Dual(rj.gaussian_kernel(g)) for g in (0.1, 1.)], lams=[0.1, 1.])
      >>> s.scores.shape
      (4,)
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a rankjax.Problem, got {type(problem).__name__}")
    if isinstance(solvers, SOLVERS):
        solvers = [solvers]
    solvers = list(solvers)
    if not solvers:
        raise ValueError("solvers must name at least one solver")
    for s in solvers:
        if "select" not in capabilities(s):
            raise TypeError(_unsupported(s, "select", ["Primal()", "Dual(kernel)",
                                                       "Nystrom(kernel, basis)", "Auto()"]))
    if problem.precomputed:
        raise TypeError("select needs feature rows (it draws kernels and bases); a "
                        "precomputed kernel matrix is scored by rj.holdout(problem, rj.Dual())")
    if problem.qid is None:
        raise ValueError("select averages NDCG over queries: build the problem with query "
                         "ids, a Segments or a query graph")
    kinds = {type(s) for s in solvers}
    if Nystrom in kinds and len(kinds) > 1:
        raise TypeError("select tries Nystrom solvers on one basis: do not mix them with "
                        "Primal/Dual")
    basis = None
    if Nystrom in kinds:
        bases = {(s.basis.size, s.basis.method, s.basis.seed) if s.basis.rows is None
                 else tuple(np.asarray(s.basis.rows).tolist()) for s in solvers}
        if len(bases) > 1:
            raise ValueError("the Nystrom solvers of one select must share one basis")
        basis = solvers[0].basis
    kernels = [getattr(s, "kernel", None) for s in solvers]
    return select_grid(problem, kernels, lams=lams, basis=basis, folds=folds, score_k=score_k,
                       optimize=optimize, optimize_steps=optimize_steps, ard=ard, seed=seed,
                       verbose=verbose)
