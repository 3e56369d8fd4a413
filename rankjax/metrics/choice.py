"""Choosing λ from scores: every λ (and output) of a path scored on validation data with
any rankjax metric in one vmapped program, the best kept (:func:`select_lambda`), and the
one result type of every selection over a grid (:class:`Selection`).

Example:
  >>> import numpy as np, rankjax as rj
  >>> c = select_lambda(np.array([0.1, 1.]), np.array([[1., 2., 3.], [3., 2., 1.]]),
  ...                   np.array([0., 1., 2.]), metric=rj.ndcg)
  >>> float(c.best_lam)
  0.1
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._core.cores import core
from .._core.checks import as_float_array, check_targets
from .._core.host import is_concrete, reduce_concrete, reduction
from .._core.queries import resolve_segments
from .pairs import check_metric_options, metric_sign
from .._core.types import saveable

__all__ = ["LambdaChoice", "Selection", "as_selection", "select_lambda"]


@saveable
class LambdaChoice(NamedTuple):
    """Validation table and choice of :func:`select_lambda` (internal; users get a
    :class:`Selection`).

    Attributes:
      table: ``[L]`` or ``[L, k]`` metric value of every λ (and output).
      best_index: index of the chosen λ (``[]`` or ``[k]``).
      best_lam: the chosen λ (``[]`` or ``[k]``).
    """

    table: jax.Array
    best_index: jax.Array
    best_lam: jax.Array


@saveable
class Selection(NamedTuple):
    """The one result of every selection over a grid of (λ, γ) points: :func:`rankjax.select`,
    :class:`rankjax.estimators.RankRLSCV` (``selection_``) and the stream's validation choice.

    Attributes:
      lams: ``[P]`` λ of every grid point (kernel-major: every λ of the first γ, ...).
      gammas: ``[P]`` γ of every grid point, or ``None`` for the linear model.
      scores: ``[P]`` (or ``[P, k]`` for ``k`` outputs) the metric's value at every grid
        point (NDCG@``score_k`` for ``select``; NaN where undefined).
      best_index: the chosen grid point (``[k]`` for ``k`` outputs; before any refinement).
      lam, gamma: the chosen λ and γ (refined when ``optimize``; ``gamma`` ``None`` for
        the linear model).
      score: the chosen point's score.
      model: its model (``predict(model, X)``), or ``None`` where none is kept.
      basis: ``[b]`` the basis rows of a Nyström model, else ``None``.
      trajectory: the gradient refinement's ``TuneResult`` (see :func:`rankjax.tune`), else ``None``.
      solver: the chosen solver, at the refined point (its kernel's γ) when refined.
      extended: ``[P]`` bool, the points held out past the given grid's edge (``extend``),
        or ``None``.
      predictions: ``[m]`` the chosen point's held-out predictions of the rows it was scored
        on (each training row predicted by the model of the folds without it; with
        ``problem.valid`` the evaluation rows' scores): the out-of-fold predictions a
        stacked model learns from; ``None`` where a gradient refinement moved the point
        off the grid (not held out there).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=4, seed=0)
      >>> s = rj.select(rj.Problem(d.X, d.y, d.qid), [rj.Primal()], lams=[0.1, 10.])
      >>> s.scores.shape, s.lam in (0.1, 10.)
      ((2,), True)
    """

    lams: np.ndarray
    gammas: Optional[np.ndarray]
    scores: np.ndarray
    best_index: object
    lam: object
    gamma: Optional[float]
    score: object
    model: object = None
    basis: Optional[np.ndarray] = None
    trajectory: object = None
    solver: object = None
    extended: Optional[np.ndarray] = None
    predictions: object = None


def as_selection(lams, choice: LambdaChoice) -> Selection:
    """The :class:`Selection` of a one-γ λ path's :class:`LambdaChoice`."""
    table = np.asarray(choice.table)
    best = np.asarray(choice.best_index)
    score = np.take_along_axis(table, best.reshape(1, -1), 0)[0] if table.ndim == 2 else table[best]
    return Selection(np.asarray(lams), None, table, best, np.asarray(choice.best_lam), None, score)


def select_lambda(lams, scores, y, qid=None, *, metric: Callable, num_queries: Optional[int] = None,
                  higher_is_better: Optional[bool] = None, **metric_kwargs) -> LambdaChoice:
    """Scores every λ (and every output) of a path on validation data with any
    rankjax metric in one vmapped call, and picks the best λ per output.

    Args:
      lams: ``[L]``.
      scores: ``[L, m]`` or ``[L, m, k]`` validation scores (e.g. ``path.valid_scores``).
      y: ``[m]`` or ``[m, k]`` validation labels (one column per output).
      qid: ``[m]`` query ids (``None``: one ranking).
      metric: e.g. ``rankjax.ndcg`` or ``rankjax.pairwise_error``.
      higher_is_better: the direction; when ``None`` the metric's own
        ``higher_is_better`` (every rankjax metric and :class:`Metric` has one;
        a bare ``lambda`` without it is an error).
      **metric_kwargs: passed to the metric (``k=10``, ``threshold=2``, ...).

    Returns:
      :class:`LambdaChoice`. Ties go to the first (smallest-index) λ; a λ whose scores
      hold NaN/inf, or whose metric is undefined (no valid query), scores NaN in the
      table and is never chosen; when every λ is NaN, ``ValueError`` (outside jit).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=5, seed=0)
      >>> v = rj.make_ranking_data(10, num_features=5, seed=1)
      >>> lams = np.array([0.01, 1., 100.])
      >>> p = rj.Problem(d.X, d.y, d.qid, valid=rj.Problem(v.X, v.y, v.qid))
      >>> path = rj.path(p, rj.Primal(), lams=lams).value
      >>> sel = select_lambda(lams, path.valid_scores, v.y, v.qid, metric=rj.ndcg, k=10)
      >>> sel.table.shape
      (3,)
    """
    call, args = _selection_call(lams, scores, y, qid, metric, num_queries, higher_is_better,
                                 metric_kwargs)
    sel = call(*args)
    if is_concrete(sel.table):
        if bool(reduce_concrete(_all_nan_column, sel.table)):
            raise ValueError("the metric is undefined (NaN) for every λ: the scores are not finite "
                             "or no query has a pair / relevant document to score")
    return sel


def selection_ahead(lams, scores, y, qid=None, *, metric: Callable, **metric_kwargs) -> None:
    """Starts compiling :func:`select_lambda`'s program for scores of this shape and dtype
    (``scores`` may be zeros; :meth:`rankjax._core.cores.Core.ahead`)."""
    call, args = _selection_call(lams, scores, y, qid, metric, None, None, metric_kwargs)
    if call is _selection_jit:
        call.ahead(*args)


def _selection_call(lams, scores, y, qid, metric, num_queries, higher_is_better, metric_kwargs):
    """``(program, arguments)`` of :func:`select_lambda` on checked inputs (the jitted
    program unless the metric or its options cannot be hashed)."""
    check_metric_options(metric, metric_kwargs, "select_lambda")
    lams = as_float_array(lams, "lams", finite=True)
    scores = as_float_array(scores, "scores")
    if scores.ndim not in (2, 3) or scores.shape[0] != lams.shape[0]:
        raise ValueError(f"scores must be [L, m] or [L, m, k] with L={lams.shape[0]}, "
                         f"got {tuple(scores.shape)}")
    m = scores.shape[1]
    y = check_targets(y, m, "y")
    seg, Q, _ = resolve_segments(qid, num_queries, m)
    sign = metric_sign(metric, higher_is_better)
    kw = tuple(sorted(metric_kwargs.items()))
    args = (lams, scores, y, seg, metric, Q, kw, sign)
    try:
        hash(kw)
        hash(metric)
    except TypeError:
        return _selection, args
    return _selection_jit, args


_all_nan_column = reduction(lambda xp, t: xp.any(xp.all(xp.isnan(t), axis=0)))


def _selection(lams, scores, y, seg, metric, Q, kw, sign):
    def one(f, yy):
        # scores with NaN/inf (a diverged λ) score NaN and are never selected
        value = metric(f, yy, seg, num_queries=Q, **dict(kw))
        return jnp.where(jnp.all(jnp.isfinite(f)), value, jnp.nan)

    if scores.ndim == 2:
        yy = y if y.ndim == 1 else y[:, 0]
        table = jax.vmap(one, in_axes=(0, None))(scores, yy)
    else:
        Y = y if y.ndim == 2 else jnp.broadcast_to(y[:, None], scores.shape[1:])
        table = jax.vmap(jax.vmap(one, in_axes=(1, 1)), in_axes=(0, None))(scores, Y)
    best = jnp.argmin(jnp.where(jnp.isnan(table), jnp.inf, sign * table), axis=0)
    return LambdaChoice(table, best, lams[best])


_selection_jit = core(_selection, static_argnums=(4, 5, 6, 7))
