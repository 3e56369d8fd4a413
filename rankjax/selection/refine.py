"""The learned point of :func:`rankjax.select` (``optimize=True``): the gradient descent on
the exact hold-out loss from the grid's best point, kept only after a cross-fitted check on
queries the descent did not learn on; and the pieces of a selection it shares with
:mod:`rankjax.selection.select` (a point, the problem of some queries' rows, dense query
segments)."""
from __future__ import annotations

import dataclasses
import warnings

import jax.numpy as jnp
import numpy as np

from .._core.checks import check_seed
from .._core.queries import Segments
from .._core.host import device_array
from .._problem import Problem
from ..graphs.folds import make_folds
from ..solvers.base import AbstractSolver, dense_rows
from .tune import checked_data, cv_predictions_at, descend, finite_start, learned_model

__all__ = ["Point", "dense_segments", "rows_problem", "refine", "MOVE_SE"]


def dense_segments(qid) -> Segments:
    """The segments (``rankjax._core.queries.Segments``) of a problem's dense query ids
    ``0..Q-1`` (checked when the problem was built: not again)."""
    q = np.asarray(qid).astype(np.int32)
    num = int(q.max()) + 1 if q.size else 0
    return Segments(q, num, np.arange(num))


@dataclasses.dataclass
class Point:
    solver: AbstractSolver
    lam: float
    score: float
    model: object               # None: a learned point whose model is fitted on every row
    scales: object = None       # the learned feature scales (``ard``), or None


def rows_problem(p, rows):
    """The problem of the rows ``rows`` (host, whole queries) of ``p``: its rows, labels,
    graph (:meth:`~rankjax.QueryGraph.restrict`) and dense query ids."""
    X = dense_rows(p)
    qid = np.unique(np.asarray(p.qid)[rows], return_inverse=True)[1]
    idx = device_array(rows.astype(np.int32))
    return Problem(jnp.asarray(X)[idx], jnp.asarray(p.y)[idx], qid=None,
                   queries=p.graph.restrict(rows)), qid


MOVE_SE = 1.0
"""The learned point replaces the grid's only when its cross-fitted per-query gain in the
hold-out metric (:func:`refine`) averages more than this many standard errors: the
one-standard-error rule of model selection (Hastie, Tibshirani & Friedman 2009, §7.10),
which keeps the simpler model unless the evidence for the other stands out of its noise."""


def _halves(p, seed):
    """``[(rows, other), (rows, other)]``: the rows of each half of the queries of ``p``
    (whole queries in a random split, host) with the dense ids of the other half's queries."""
    seg = dense_segments(p.qid)
    order = np.random.default_rng(check_seed(seed)).permutation(seg.num_queries)
    cut = max(1, seg.num_queries // 2)
    return [(np.flatnonzero(np.isin(seg.seg, mine)), np.sort(theirs))
            for mine, theirs in ((order[:cut], order[cut:]), (order[cut:], order[:cut]))]


def _gain(grid, new, old, queries):
    """The per-query gain (float64, in the metric's direction) of the predictions ``new``
    over ``old`` on the dense query ids ``queries`` where both are defined; ``None`` for a
    metric without per-query values."""
    try:
        a, b = (grid.metric(f, grid.problem.y, grid.seg, per_query=True, **grid.kw)
                for f in (new, old))
    except TypeError:
        return None
    ok = np.zeros(grid.seg.num_queries, bool)
    ok[queries] = True
    ok &= np.asarray(a.valid) & np.asarray(b.valid)
    return -grid.sign * (np.asarray(a.values, np.float64)[ok] - np.asarray(b.values, np.float64)[ok])


def _descent(grid, point, rows, folds, steps, ard, optimizer):
    """Gradient descent on the exact hold-out loss from the grid's point over the queries of
    ``rows`` (all of them: ``None``), on their own folds with λ scaled by the rows' share (the
    loss sums over rows). Returns ``(TuneResult on every row's λ scale, the lowest-loss
    parameters or None when no step lowered the loss, whether every loss was non-finite)``."""
    p = grid.problem
    if rows is None:
        sub, sfolds, factor, basis = p, folds, 1.0, point.solver
    else:
        sub, _ = rows_problem(p, rows)
        k, nq = folds.num_folds, int(np.unique(np.asarray(p.qid)[rows]).size)
        sfolds = make_folds(sub.graph, None if k == grid.seg.num_queries else min(k, nq))
        factor = p.X.shape[0] / rows.size
        basis = point.solver.with_basis_rows(p.X.shape[0], rows.size)
    solver, data, _ = checked_data(sub, basis, "select(optimize=True)")
    at_grid = solver.start_params(data[0].shape[1], data[0].dtype, point.lam, ard)
    shift = np.log(factor)                                 # λ back on every row's scale
    start = finite_start(dict(at_grid, log_lam=at_grid["log_lam"] - shift), solver, data, sfolds)
    r = descend(start, solver, data, sfolds, steps=steps, optimizer=optimizer,
                verbose=grid.verbose)
    r = r._replace(lam=r.lam * factor, params=dict(r.params, log_lam=r.params["log_lam"] + shift),
                   params_history=dict(r.params_history,
                                       log_lam=np.asarray(r.params_history["log_lam"]) + shift))
    losses = np.asarray(r.loss_history, dtype=float)
    if not np.any(np.isfinite(losses)):
        return r, None, True
    i = int(np.nanargmin(np.where(np.isfinite(losses), losses, np.nan)))
    return r, (None if i == 0 else
               {key: jnp.asarray(v[i]) for key, v in r.params_history.items()}), False


def refine(grid, point, folds, steps, ard, optimizer, fit=True, seed=0):
    """Gradient descent on the exact hold-out loss from the grid's best point (the solver's
    ``cv_predictions``: exact, or the Nyström model on its basis), checked by cross-fitting:
    the descent runs on each random half of the queries and its point is scored on the other
    half, whose hold-out predictions it never saw (a descent that fits a scale per feature to
    the queries it is scored on gains there by chance alone). The per-query gains of the two
    halves over the grid's point, one for every query, decide: when they average more than
    :data:`MOVE_SE` standard errors the descent runs on every query and its point is kept,
    else a warning and ``moved`` False. ``fit=False`` (a subsample, ``select._on_every_row``
    fits every row next): the refined point without a model. Returns ``(point,
    TuneResult)``. A ``point.score`` of NaN is scored here, from the start's hold-out."""
    p = grid.problem
    solver, data, state = checked_data(p, point.solver, "select(optimize=True)",
                                       grid.states.get(point.solver))
    X = data[0]
    at_grid = solver.start_params(X.shape[1], X.dtype, point.lam, ard)
    old = cv_predictions_at(at_grid, solver, data, folds)
    if np.isnan(point.score):                  # a start not yet scored on these rows
        point = dataclasses.replace(point, score=float(grid.metric(old, p.y, grid.seg,
                                                                   **grid.kw)))
    gains, first, why = [], None, None
    for rows, other in _halves(p, seed):
        r, params, diverged = _descent(grid, point, rows, folds, steps, ard, optimizer)
        first = r if first is None else first
        if diverged:
            warnings.warn(
                "optimize=True: the hold-out loss was NaN or infinite at every gradient step "
                "(the descent diverged, typically on features of very different scales), so "
                "the grid's best point is kept; give the features comparable scales "
                "(RankRLSCV's default feature_map='auto' maps every column by its ranks) or "
                "fewer optimize_steps", RuntimeWarning, stacklevel=2)
            return point, first._replace(moved=False)
        if params is None:
            gains.append(np.zeros(other.size))             # the grid's point: no gain
            continue
        g = _gain(grid, cv_predictions_at(params, solver, data, folds), old, other)
        if g is None:
            gains = None
            break
        gains.append(g)
    if gains is not None:
        d = np.concatenate(gains)
        mean = float(d.mean()) if d.size else 0.0
        se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else np.inf
        if not (mean > 0 and mean > MOVE_SE * se):
            why = (f"cross-fitted on two halves of the queries (each half's learned point "
                   f"scored on the other's), the per-query gain over the grid's point on "
                   f"{d.size} queries ({mean:.4f} ± {se:.4f}) is not {MOVE_SE:g} standard "
                   "error above none")
    if why is None:                                        # the descent on every query
        r, params, _ = _descent(grid, point, None, folds, steps, ard, optimizer)
        f = None if params is None else cv_predictions_at(params, solver, data, folds)
        new = np.nan if f is None else float(grid.metric(f, p.y, grid.seg, **grid.kw))
        if params is None:
            why = "no gradient step on every query lowered the hold-out loss"
        elif gains is None and not (np.isfinite(new) and grid.better(new, point.score)):
            why = (f"the learned point's hold-out score ({new:.4f}) is not above the grid's "
                   f"best ({point.score:.4f})")                # no per-query values to cross-fit
    if why is not None:
        warnings.warn(f"optimize=True did not move: {why}, so the grid's point is kept "
                      "(tune_.moved is False)", RuntimeWarning, stacklevel=2)
        return point, (first if gains is not None else r)._replace(moved=False)
    r = r._replace(moved=True)
    host = {key: np.asarray(v) for key, v in params.items()}
    at, lam = solver.at(host), float(np.exp(host["log_lam"]))
    scales = jnp.exp(jnp.asarray(host["log_scales"], X.dtype)) if "log_scales" in host else None
    return Point(at, lam, new, learned_model(p, at, lam, scales, state) if fit else None, scales), r
