"""Cross-validation scores from hold-out predictions (Pahikkala et al. 2009, §3.3):
the metric per λ with its selection, and permutation tests of a cross-validated
score.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import numpy as np

from .._core.checks import check_count, check_lams, check_seed, host_labels, require_concrete
from .._core.queries import segment_ids
from .._core.host import device_array
from .._problem import Problem
from ..graphs.folds import problem_folds
from ..solvers.auto import Auto
from ..solvers.base import check_call
from ..solvers.holdout import HoldOut
from ..metrics.pairs import check_metric_options, metric_sign
from ..metrics.choice import select_lambda
from .._core.types import saveable


@saveable
class CVResult(NamedTuple):
    """Cross-validation summary.

    Attributes:
      lams: ``[L]``.
      table: ``[L]`` or ``[L, k]`` metric of the pooled hold-out predictions.
      best_index, best_lam: the choice per output.
      predictions: ``[L, m(, k)]`` hold-out predictions.
    """

    lams: jax.Array
    table: jax.Array
    best_index: jax.Array
    best_lam: jax.Array
    predictions: jax.Array


def cross_validate(holdout: HoldOut, y, qid=None, *, metric: Callable,
                   num_queries: Optional[int] = None, higher_is_better: Optional[bool] = None,
                   **metric_kwargs) -> CVResult:
    """Scores hold-out predictions with any rankjax metric (per query, averaged)
    for every λ and output, and picks λ (see :func:`select_lambda`).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=4, seed=0)
      >>> h = rj.holdout(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[0.01, 1., 100.]).value
      >>> cv = cross_validate(h, d.y, d.qid, metric=rj.ndcg, k=10)
      >>> cv.table.shape
      (3,)
    """
    check_metric_options(metric, metric_kwargs, "cross_validate")
    if not isinstance(holdout, HoldOut):
        raise TypeError(f"holdout must be a HoldOut (rj.holdout(...).value), got "
                        f"{type(holdout).__name__}")
    sel = select_lambda(holdout.lams, holdout.predictions, y, qid, metric=metric,
                        num_queries=num_queries, higher_is_better=higher_is_better,
                        **metric_kwargs)
    return CVResult(holdout.lams, sel.table, sel.best_index, sel.best_lam, holdout.predictions)


@saveable
class PermutationResult(NamedTuple):
    """``observed [L]``, ``null [L, p]`` (the CV score of each permutation) and
    ``pvalue [L]`` ``= (1 + #{null at least as good}) / (1 + p)``."""

    observed: jax.Array
    null: jax.Array
    pvalue: jax.Array


def permuted_labels(y, qid=None, *, num_permutations: int, seed: int = 0) -> np.ndarray:
    """``[m, p]`` label vectors shuffled within each query (host side).

    Example:
      >>> permuted_labels([0, 1, 2, 3], [0, 0, 1, 1], num_permutations=2).shape
      (4, 2)
    """
    y = host_labels(y)
    p = check_count(num_permutations, "num_permutations")
    seg = np.zeros(len(y), np.int64) if qid is None else segment_ids(qid).seg
    if seg.shape[0] != y.shape[0]:
        raise ValueError(f"qid has {seg.shape[0]} rows but y has {y.shape[0]}")
    rng = np.random.default_rng(check_seed(seed))
    key = seg[:, None] + rng.random((p, len(y))).T             # order within queries
    order = np.argsort(key, axis=0, kind="stable")
    out = np.empty((len(y), p))
    out[np.argsort(seg, kind="stable")] = y[order]
    return out


def permutation_test(problem, solver=Auto(), *, lams, metric: Callable,
                     num_permutations: int = 99, folds=None, seed: int = 0,
                     higher_is_better: Optional[bool] = None, **metric_kwargs
                     ) -> PermutationResult:
    """Permutation test of a cross-validation score (docs/math.md; Pahikkala et al. 2009 §4.1).

    The ``p`` label vectors shuffled within queries are extra outputs of one hold-out:
    ``solver.holdout`` runs once with ``Y = [y, perm_1 .. perm_p]`` (one decomposition for
    all), and each permutation's cross-validated metric is its null score. The problem's
    graph must not depend on the labels (no tie exclusion).

    Args:
      problem: a :class:`~rankjax.Problem` with one output and query ids.
      solver: a solver that implements ``holdout`` (default :class:`~rankjax.Auto`).
      lams: ``[L]`` λ grid.
      metric: a rankjax metric; ``metric_kwargs`` are passed to it.
      num_permutations: ``p``.
      folds: as :func:`rankjax.holdout`; seed: the permutations and the folds' draw.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(15, num_features=4, seed=0)
      >>> res = rj.permutation_test(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[1.],
      ...                           metric=rj.ndcg, num_permutations=19)
      >>> bool(res.pvalue[0] <= 0.05)
      True
    """
    check_metric_options(metric, metric_kwargs, "permutation_test")
    solver = check_call(problem, solver, "holdout", "permutation_test")
    if problem.y is None or problem.y.ndim != 1:
        raise ValueError("permutation_test shuffles one output: y must be 1-D")
    if problem.qid is None:
        raise ValueError("permutation_test shuffles labels within queries: give query ids")
    num_permutations = check_count(num_permutations, "num_permutations")
    sign = metric_sign(metric, higher_is_better)
    require_concrete(problem.y, "y", "permutation_test")
    qid = problem.qid
    y = np.asarray(problem.y, np.float64)
    perms = permuted_labels(y, qid, num_permutations=num_permutations, seed=seed)
    Y = np.column_stack([y, perms])
    stacked = Problem(problem.X, device_array(Y, problem.X.dtype), problem.graph,
                      precomputed=problem.precomputed)
    folds = problem_folds(stacked, folds, seed, "permutation_test")
    lams = check_lams(lams).astype(problem.X.dtype)
    h = solver.holdout(stacked, lams, folds, solver.init(stacked, "holdout", lams.shape[0],
                                                         folds)).value
    table = select_lambda(h.lams, h.predictions, Y, qid, metric=metric,
                          higher_is_better=sign < 0, **metric_kwargs).table
    obs, null = table[:, 0], table[:, 1:]
    better = sign * null <= sign * obs[:, None]
    return PermutationResult(obs, null, (1 + better.sum(1)) / (1 + num_permutations))
