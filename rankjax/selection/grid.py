"""One selection's grid (:class:`Grid`): the problem, the metric and its options, the λ
grid, the rows it scores, and every solver's state on the problem it solves on — each
solver's exact hold-out over the grid scored by the metric (Pahikkala et al. 2009, §3.3).
:func:`~rankjax.selection.select.select_grid` composes its hold-outs.
"""
from __future__ import annotations

import numpy as np

from .._core.host import device_array, lane
from ..metrics.choice import select_lambda, selection_ahead
from ..metrics.pairs import metric_sign
from .refine import dense_segments

__all__ = ["Grid", "UNDEFINED"]


UNDEFINED = ("the hold-out score is undefined (NaN) at every λ: either the scored labels (y, or "
             "an evaluation set's) have no query the metric scores (NDCG: a document labelled "
             "above 0; pairwise: two different labels), or every λ of the grid was refused as "
             "unresolved in this dtype (the warnings say which; give larger lams, or compute in "
             "float64)")
"""The error of a selection with no finite score."""


class Grid:
    """One selection's settings: the problem, the metric and its options, the λ grid, and
    the rows it scores (``scored``: a bool row mask of whole queries; None: every row)."""

    def __init__(self, problem, metric, kw, lams, verbose, qid=None, solve_on=None,
                 scored=None):
        self.problem, self.metric, self.kw, self.verbose = problem, metric, kw, verbose
        self.solve_on = problem if solve_on is None else solve_on      # a sharded problem
        self.lams = np.asarray(lams, np.float64)
        self.lams_grid = lams
        self.seg = dense_segments(problem.qid if qid is None else qid)
        self.sign = metric_sign(metric, None)
        self.states = {}               # solver -> its State on solve_on (init once)
        self.kept = {}                 # (solver, λ) -> [m] the best lane's held-out predictions
        self.rows = None if scored is None else np.flatnonzero(np.asarray(scored, bool))
        self.scored_y, self.scored_seg = (problem.y, self.seg) if self.rows is None else (
            np.asarray(problem.y)[self.rows],
            dense_segments(np.unique(self.seg.seg[self.rows], return_inverse=True)[1]))

    def score(self, predictions, lams):
        """``[L]`` the metric of every λ's scores on the scored rows (NaN where undefined:
        every lane of one solver may be, e.g. a kernel whose λ float32 does not resolve; the
        grid's best says when no point is defined), float64."""
        if self.rows is not None:
            predictions = np.asarray(predictions)[:, self.rows]
        try:
            t = select_lambda(lams, predictions, self.scored_y, self.scored_seg,
                              metric=self.metric, **self.kw).table
        except ValueError as e:
            if "for every λ" not in str(e):
                raise
            return np.full(np.shape(lams)[0], np.nan)
        return np.asarray(t, np.float64)

    def best(self, s):
        """The index of the best finite score (the metric's direction)."""
        if np.all(np.isnan(s)):
            raise ValueError(UNDEFINED)
        return int(np.nanargmin(self.sign * s))

    def better(self, a, b) -> bool:
        """Whether score ``a`` is at least as good as ``b``."""
        return bool(np.isfinite(a) and self.sign * a <= self.sign * b)

    def ahead(self, lams):
        """Starts compiling the scoring program for ``[L, m]`` hold-outs on another thread
        (:func:`~rankjax.metrics.choice.selection_ahead`) while the hold-out traces; once
        per shape and process, an error is left to the scoring itself."""
        X, y = self.problem.X, self.scored_y
        shape = (lams.shape[0],) + tuple(np.shape(y))
        key = (shape, str(X.dtype), self.metric, tuple(sorted(self.kw.items())),
               self.scored_seg.num_queries)
        if key not in _ahead:
            _ahead.add(key)
            try:
                selection_ahead(lams, np.zeros(shape, X.dtype), y, self.scored_seg,
                                metric=self.metric, **self.kw)
            except Exception:     # noqa: BLE001  the scoring itself reports it, after the hold-out
                pass

    def state(self, solver, folds=None, method="holdout"):
        """The :class:`~rankjax.solvers.state.State` of ``solver`` on the problem this grid
        solves on: its ``init`` once (``folds`` drawn, or before they are drawn a count or
        ``None``; ``method`` one or a tuple: an exact kernel's grid that the gradient refines
        plans the descent too), every later hold-out of the grid's size reading it."""
        if solver not in self.states:
            self.states[solver] = solver.init(self.solve_on, method, self.lams.size, folds)
        return self.states[solver]

    def holdout(self, solver, folds, lams=None):
        """``(scores [L], path)`` of one solver's exact hold-out over ``lams`` (the grid's
        by default; the same program for a searched grid of the same size); the best lane's
        predictions are kept (``kept``, by solver and λ)."""
        host = self.lams if lams is None else np.asarray(lams, np.float64)
        lams = device_array(host, self.problem.X.dtype)
        self.ahead(lams)
        h = solver.holdout(self.solve_on, lams, folds, self.state(solver, folds)).value
        scores = self.score(h.predictions, lams)
        if np.any(np.isfinite(scores)):
            i = self.best(scores)
            self.kept[(solver, float(host[i]))] = lane(h.predictions, i)
        return scores, h.path


_ahead: set = set()       # the scorings compiled ahead in this process
