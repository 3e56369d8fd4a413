"""Model selection in one call over solver objects: a grid of solvers × λ, each solver's
whole λ grid scored by its exact hold-out (``solver.holdout``: leave-query-out / k-fold,
Pahikkala et al. 2009, §3.3, eq. 33-34) or by its path on ``problem.valid``
(``solver.path``), the best point's model taken from the same decomposition (no refit),
optionally refined by the gradient of the exact hold-out loss (:func:`~rankjax.tune`) or, for
a Nyström grid, a search in γ. :func:`rankjax.select` and
:class:`~rankjax.estimators.RankRLSCV` are this function.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import jax
import numpy as np

from .._core.checks import check_count, check_flag, check_lams, check_seed
from .._core.host import device_array, is_concrete
from .._core.log import Stages, active, check_verbose, info
from .._core.memory import available_memory
from .._core.segments import padded_size
from .._problem import Problem, with_rows
from ..scale.layout import ShardedData
from ..graphs.folds import Folds, make_folds, problem_folds
from ..solvers.falkon import query_subsample
from ..metrics.choice import Selection, select_lambda
from ..metrics.graded import ndcg
from ..metrics.pairs import check_metric_options
from ..solvers.base import AbstractSolver, check_call, dense_rows
from ..solvers.models import ScaledModel, scale_rows
from .edges import Block, extend_grid, gamma_of, locate, same_gamma, with_gamma
from .grid import Grid
from .refine import Point, dense_segments, refine, rows_problem

__all__ = ["select_grid"]


def _as_selection(blocks, factor, best, point, trajectory=None, predictions=None):
    """The :class:`Selection` of the blocks (λ on every row's scale: times ``factor``);
    ``predictions`` the chosen point's held-out ones."""
    lams = np.concatenate([c.lams for c in blocks]) * factor
    gammas = np.concatenate([np.full(c.lams.size, gamma_of(c.solver)) for c in blocks])
    extended = np.concatenate([np.full(c.lams.size, c.extended) for c in blocks])
    return Selection(lams, None if np.all(np.isnan(gammas)) else gammas,
                     np.concatenate([c.scores for c in blocks]), best, point.lam,
                     _chosen_gamma(point.solver), point.score, point.model,
                     _basis(point.model), trajectory, point.solver, extended, predictions)


def _check(problem, solvers, lams, optimize, optimize_steps, ard, metric, score_k, seed):
    """Every option checked before any work: ``(solvers, metric, kw, steps)``."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a rankjax.Problem, got {type(problem).__name__}")
    if not all(is_concrete(v) for v in jax.tree.leaves((problem, lams, solvers))):
        raise TypeError("rj.select runs on the host (it chooses the best point with numpy): "
                        "the problem, lams and the solvers' kernels must be concrete; call it "
                        "outside jit and vmap (under them use rj.holdout, whose predictions a "
                        "metric scores)")
    if problem.y is None or problem.y.ndim != 1:
        raise ValueError("select chooses for one output: y must be 1-D")
    if problem.qid is None:
        raise ValueError("select averages a metric over queries: build the problem with query "
                         "ids, a Segments or a query graph")
    if isinstance(solvers, AbstractSolver):
        solvers = [solvers]
    solvers = list(solvers)
    if not solvers:
        raise ValueError("solvers must name at least one solver")
    method = "path" if problem.valid is not None else "holdout"
    solvers = [check_call(problem, s, method, "select") for s in solvers]
    if metric is None:
        metric, kw = ndcg, {"k": check_count(score_k, "score_k")}
    else:
        kw = {}
    check_metric_options(metric, kw, "select")
    check_seed(seed)
    if check_flag(ard, "ard") and not check_flag(optimize, "optimize"):
        raise ValueError("ard=True learns per-feature scales by the gradient: set optimize=True")
    if not check_flag(optimize, "optimize"):
        return solvers, metric, kw, None
    if problem.valid is not None:
        raise ValueError("optimize=True refines the cross-validation choice; with a "
                         "validation set the grid is scored on that set: drop one")
    kinds = {"linear" if s.tuned_kernel() is None else s.tuned_kernel().kind for s in solvers}
    if not kinds <= {"linear", "gaussian"}:
        raise ValueError(f"optimize=True learns linear and Gaussian kernels, got "
                         f"{sorted(kinds - {'linear', 'gaussian'})}")
    for s in solvers:
        check_call(problem, s, "cv_predictions", "select(optimize=True)")
    return solvers, metric, kw, check_count(optimize_steps, "optimize_steps")


def select_grid(problem, solvers: Sequence, *, lams, folds=None, metric=None, score_k=10,
                optimize=False, optimize_steps=20, ard=False, optimizer=None, seed=0,
                verbose=0, extend=0, scored=None, states=None) -> Selection:
    """The body of :func:`rankjax.select` (its docstring says what each argument does);
    ``scored``: the hold-out scored on these rows alone (a bool row mask of whole queries:
    the queries whose labels the features were not learned from; the estimators' own);
    ``states``: ``{solver: State}`` already made on ``problem`` (the estimators' early
    plan), each solver's ``init`` is not called again."""
    problem, on = _sharded(problem, folds, optimize)
    solvers, metric, kw, steps = _check(problem, solvers, lams, optimize, optimize_steps, ard,
                                        metric, score_k, seed)
    if scored is not None and (steps is not None or problem.valid is not None or on is not None):
        raise ValueError("scored rows are a hold-out's on one device, without optimize")
    if on is not None:
        solvers = [check_call(on, s, "holdout", "select") for s in solvers]
    lams = check_lams(lams)
    extend = check_count(extend, "extend", minimum=0)
    grid = Grid(problem, metric, kw, lams, check_verbose(verbose), solve_on=on, scored=scored)
    grid.states.update(states or {})
    if problem.valid is not None:
        return _on_valid(grid, solvers, extend)
    if problem.X.shape[0] < 2:
        raise ValueError("select cross-validates and needs at least 2 rows in 2 queries, "
                         "got 1 sample (n_samples=1)")
    if on is None:                 # every plan before the folds are drawn (refused up front)
        _plan_first(grid, solvers, folds, steps is not None)
    folds = None if on is not None else problem_folds(problem, folds, seed, "rj.select")
    work, wsolvers, wfolds, factor = _tune_subsample(grid, solvers, folds, steps, ard)
    blocks = _grid_blocks(work, wsolvers, solvers, wfolds, extend)
    best = grid.best(np.concatenate([c.scores for c in blocks]))
    b, i = locate(blocks, best)
    point = Point(b.solver, float(b.lams[i]), float(b.scores[i]), b.path.model(i))
    point, trajectory = _refined(grid, work, blocks, point, (folds, wfolds), steps, ard,
                                 optimizer, seed)
    if work is not grid:
        point = _on_every_row(grid, point, b.full, folds, factor)
    moved = trajectory is not None and trajectory.moved      # a refined point: not held out
    kept = None if moved or point.scales is not None else grid.kept.get((point.solver, point.lam))
    return _as_selection(blocks, factor, best, point, trajectory, kept)


def _grid_blocks(work, wsolvers, solvers, wfolds, extend):
    """Every solver's hold-out over the grid on ``work`` (a :class:`Block` each), extended
    past a best point on the grid's edge ``extend`` times."""
    stages, blocks = Stages(wsolvers, "grid solver", work.verbose), []
    with active(work.verbose):
        for s, full in zip(stages, solvers):
            scores, path = work.holdout(s, wfolds)
            blocks.append(Block(s, full, work.lams, scores, path))
            stages.note(f"{_name(s)}, best {getattr(work.metric, '__name__', 'score')} "
                        f"{np.nanmax(scores) if work.sign < 0 else np.nanmin(scores):.4f}")
        return extend_grid(work, blocks, lambda s, lams: work.holdout(s, wfolds, lams), extend,
                           work.lams)


def _refined(grid, work, blocks, point, folds, steps, ard, optimizer, seed):
    """``(point, TuneResult or None)``: the grid's best ``point`` as it is (no
    ``optimize``: ``steps`` None), or refined by one of three routes: a Nyström grid
    without ``ard`` searches γ (:func:`_search`); an exact kernel beyond
    :func:`exact_tune_rows` descends on a subsample; else the gradient on ``work``
    (:func:`~rankjax.selection.refine.refine`). ``folds``: (every row's, ``work``'s)."""
    every, wfolds = folds
    if steps is None:
        return point, None
    if point.solver.basis_rows(work.problem.X.shape[0]) is not None and not ard:
        return _search(grid, blocks, point, every, steps), None
    if (work is grid and point.solver.tuned_kernel() is not None
            and exact_tune_rows(grid.problem.X.shape[0], steps) is not None):
        return _refine_exact_on_subsample(grid, point, every, steps, ard, optimizer, seed)
    return refine(work, point, wfolds, steps, ard, optimizer, fit=work is grid, seed=seed)


def _sharded(problem, folds, optimize):
    """``(problem, None)``, or for a sharded problem ``(the problem it was built from, the
    sharded one)``: the grid's hold-outs run sharded (leave-query-out), the metric is scored
    on the host from their predictions in the original row order."""
    if not isinstance(problem, ShardedData):
        return problem, None
    if problem.source is None:
        raise TypeError("select on a sharded problem needs the problem it was built from: "
                        "shard it with rj.scale.shard(problem)")
    if folds is not None:
        raise TypeError("the hold-out of a sharded problem is leave-query-out: folds=None")
    if check_flag(optimize, "optimize") or problem.source.valid is not None:
        raise TypeError("select on a sharded problem scores its leave-query-out grid: "
                        "optimize=False and no valid (refine the chosen λ with "
                        "rj.tune(sharded, rj.Primal(), lam=selection.lam))")
    return problem.source, problem


def _plan_first(grid, solvers, folds, optimize):
    """Every solver's state (:meth:`~rankjax.AbstractSolver.init`) from the shapes, before
    the folds are drawn; its hold-outs on this problem read it (one ``init`` a solver). With
    ``optimize`` an exact kernel's state plans the descent on every row too
    (``cv_predictions``), so that it refuses before the grid runs."""
    if folds is not None and not isinstance(folds, Folds) and not (
            isinstance(folds, (int, np.integer)) and not isinstance(folds, bool) and folds >= 1):
        return                                  # problem_folds says what is wrong with them
    for s in solvers:
        exact = s.tuned_kernel() is not None and "centres" not in s.param_keys()
        grid.state(s, folds, ("holdout", "cv_predictions") if optimize and exact else "holdout")





def _name(solver):
    k = solver.tuned_kernel()
    return type(solver).__name__ + ("" if k is None else f" γ {float(k.gamma):.4g}")


def _chosen_gamma(solver):
    k = solver.tuned_kernel()
    return None if k is None else float(k.gamma)


def _basis(model):
    model = getattr(model, "model", model)                # a ScaledModel's own model
    rows = getattr(model, "basis_rows", None)
    return None if rows is None else np.asarray(rows)


def _on_valid(grid, solvers, extend):
    """Every solver's path scored on ``problem.valid``; the best point's model comes with
    its path."""
    p, v = grid.problem, grid.problem.valid
    vseg = dense_segments(v.qid)

    def evaluate(s, lams):
        path = s.path(p, lams, grid.state(s, method="path")).value
        t = select_lambda(lams, path.valid_scores, v.y, vseg, metric=grid.metric,
                          **grid.kw).table
        return np.asarray(t, np.float64), path

    blocks = []
    for s in solvers:
        scores, path = evaluate(s, grid.lams_grid)
        blocks.append(Block(s, s, grid.lams, scores, path))
    blocks = extend_grid(grid, blocks, lambda s, lams: evaluate(s, device_array(lams, p.X.dtype)),
                     extend, grid.lams)
    best = grid.best(np.concatenate([c.scores for c in blocks]))
    b, i = locate(blocks, best)
    return _as_selection(blocks, 1.0, best, Point(b.solver, float(b.lams[i]), float(b.scores[i]),
                                               b.path.model(i)), predictions=b.path.valid_scores[i])


def _search(grid, blocks, point, folds, steps):
    """The refinement of a Nyström grid without ``ard``: at most ``min(steps, 4)`` points, each
    the exact hold-out of ``L`` λ (its models kept): the best γ on a finer λ grid, then a
    golden-section search over log γ between the grid's neighbours of the best γ (``γ / 4``
    and ``4 γ`` at the grid's ends). The searched λ are ``L`` points spaced evenly in log
    between two grid steps below and above the best λ: the same program as the grid's, no
    float32 lane far below the best paying its own factor (benchmarks/REPORT.md §8). The
    grid's point is kept unless a searched point scores better."""
    gamma = gamma_of(point.solver)
    ladder_g = np.unique([gamma_of(c.solver) for c in blocks])
    j = int(np.searchsorted(ladder_g, gamma))
    lo = np.log(ladder_g[j - 1] if j > 0 else gamma / 4)
    hi = np.log(ladder_g[j + 1] if j + 1 < ladder_g.size else gamma * 4)
    ladder = np.unique(np.concatenate([c.lams for c in blocks if same_gamma(gamma_of(c.solver), gamma)]))
    r = int(np.searchsorted(ladder, point.lam))
    lams = np.geomspace(ladder[max(r - 2, 0)], ladder[min(r + 2, ladder.size - 1)], grid.lams.size)
    best, seen = point, {}
    ratio, budget = (np.sqrt(5) - 1) / 2, min(steps, 4)
    stages = Stages(budget, "search", grid.verbose)

    def score_at(lg):
        nonlocal best
        if lg not in seen:
            s = point.solver if lg == np.log(gamma) else with_gamma(point.solver, np.exp(lg))
            scores, path = grid.holdout(s, folds, lams)
            i = grid.best(scores) if np.any(np.isfinite(scores)) else None
            seen[lg] = -grid.sign * np.inf if i is None else float(scores[i])
            stages.done(f"γ {float(np.exp(lg)):.4g}, best {seen[lg]:.4f}")
            if i is not None and not grid.better(best.score, seen[lg]):
                best = Point(s, float(lams[i]), seen[lg], path.model(i))
        return seen[lg]

    score_at(np.log(gamma))                            # the best γ, the finer λ
    a, c = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    while len(seen) < budget:
        fa = score_at(a)
        if len(seen) >= budget:
            break
        if grid.better(fa, score_at(c)):               # the best lies in [lo, c]
            hi, c = c, a
            a = hi - ratio * (hi - lo)
        else:                                          # in [a, hi]
            lo, a = a, c
            c = lo + ratio * (hi - lo)
    return best


TUNE_WORK = 1e11
r"""The rows ``u`` a Nyström ``tune`` step may take: :math:`u b^2 steps \le TUNE_{WORK}` (a step of
the differentiated hold-out costs about 50 :math:`u b^2` flops; at least ``2 b`` rows). A larger
cap took longer and ranked no higher at :math:`10^{6}` rows (benchmarks/design_measurements.md
§8)."""


TUNE_BASIS = 640
r"""The largest basis the gradient learns with on a subsample (:func:`_tune_subsample`): at
most this many of the model's basis rows, so that the subsample keeps :math:`TUNE_{WORK} /
(steps\, b^2)` rows to learn on (:data:`TUNE_WORK`); the model on every row keeps its whole
basis. A larger basis there leaves fewer rows to learn on, and ranked lower at :math:`10^{6}`
rows (``benchmarks/bench_million.py``; benchmarks/design_measurements.md §8)."""


def tune_rows(m: int, b: int, steps: int, dtype) -> Optional[int]:
    """The rows of whole queries the gradient of a Nyström hold-out learns on (:func:`_refine`):
    ``None`` (every row) when ``m`` is within :data:`TUNE_WORK` and the memory plan (about 10
    ``m x b`` blocks live in a step, a quarter of the free memory), else the largest ``u``
    within both."""
    item = np.dtype(dtype).itemsize
    u = min(TUNE_WORK / (max(steps, 1) * b * b), available_memory() / 4 / (10 * b * item))
    return None if m <= u else max(int(u), 2 * b)


EXACT_TUNE_WORK = TUNE_WORK
r"""The rows ``u`` the gradient of an exact kernel's hold-out may take: :math:`u^3 steps \le
EXACT_TUNE_WORK`, the Nyström descent's budget (:data:`TUNE_WORK`, :math:`u b^2 steps`): a step
of either is an ``eigh``-sized system and its derivative over the rows (``u x u`` here, ``b x b``
on ``u x b`` blocks there), so the two learned kernels get the same work, and the route (every
row or a subsample of whole queries) follows the cost :math:`u^3`, not a row count
(``benchmarks/bench_first_screen.py``, the learned rows)."""


def exact_tune_rows(m: int, steps: int) -> Optional[int]:
    """``None`` when an exact kernel's descent on every row is within
    :data:`EXACT_TUNE_WORK`, else the rows of whole queries it learns on."""
    u = (EXACT_TUNE_WORK / max(steps, 1)) ** (1.0 / 3.0)
    return None if m <= u else int(u)


def _subsample_grid(grid, folds, u):
    """``(grid, folds, factor)`` of a random subsample of at least ``u`` rows of whole
    queries: its own folds of the same kind as ``folds``, its λ grid the given one times
    ``u / m`` (the loss sums over rows: λ keeps its weight against it), ``factor = m / u``."""
    p = grid.problem
    m = p.X.shape[0]
    rows = query_subsample(p.graph, m, u, 0)
    q, qid = rows_problem(p, rows)
    factor = m / rows.size
    work = Grid(q, grid.metric, grid.kw, grid.lams / factor, grid.verbose, qid)
    k = folds.num_folds
    qfolds = make_folds(q.graph, None if k == grid.seg.num_queries
                        else min(k, work.seg.num_queries))
    return work, qfolds, factor


def _refine_exact_on_subsample(grid, point, folds, steps, ard, optimizer, seed):
    """The gradient of an exact kernel's hold-out beyond :func:`exact_tune_rows`: the
    descent (with its cross-fitted check) runs on a subsample of whole queries from the
    grid's best point (λ scaled by ``u / m``), the learned kernel is held out on every row
    (:func:`_on_every_row`) and kept only when that exact hold-out scores better than the
    grid's best point there. Returns ``(point, TuneResult)``."""
    m = grid.problem.X.shape[0]
    work, wfolds, factor = _subsample_grid(grid, folds, exact_tune_rows(m, steps))
    info(grid.verbose, "the exact kernel's gradient on a subsample of %d of %d rows (whole "
         "queries; the descent's cost grows as rows cubed), the learned point then held "
         "out on every row", work.problem.X.shape[0], m)
    start = Point(point.solver, point.lam / factor, np.nan, None, point.scales)  # refine scores it
    learned, trajectory = refine(work, start, wfolds, steps, ard, optimizer, fit=False,
                                 seed=seed)
    if not trajectory.moved:
        return point, trajectory
    every = _on_every_row(grid, learned, point.solver, folds, factor)
    if grid.better(every.score, point.score):
        return every, trajectory
    info(grid.verbose, "the learned point on every row (hold-out %.4f) is not above the "
         "grid's best (%.4f): the grid's point is kept", every.score, point.score)
    return point, trajectory._replace(moved=False)


def _tune_subsample(grid, solvers, folds, steps, ard):
    """``(grid, folds, factor)`` the selection works on: the problem itself (factor 1), or,
    for a Nyström grid learned with ``ard`` beyond :func:`tune_rows`, a random subsample of
    ``u`` rows of whole queries (its own folds of the same kind) whose grid is the given
    one times ``u / m`` (the loss sums over rows: λ keeps its weight against it), factor
    ``m / u``, with at most :data:`TUNE_BASIS` basis rows: the grid, its scores
    (``cv_results_``) and the gradient then cost :math:`O(u b^2)` and only the returned point is
    held out on every row with the whole basis (:func:`_on_every_row`). Returns ``(grid,
    solvers, folds, factor)``."""
    p = grid.problem
    m = p.X.shape[0]
    if steps is None or not ard or any(s.basis_rows(m) is None for s in solvers):
        return grid, solvers, folds, 1.0
    b = min(max(s.basis_rows(m) for s in solvers), TUNE_BASIS)
    u = tune_rows(m, int(padded_size(b)), steps, p.X.dtype)
    if u is None:
        return grid, solvers, folds, 1.0
    work, qfolds, factor = _subsample_grid(grid, folds, u)
    info(grid.verbose, "grid and tune on a subsample of %d of %d rows (whole queries) with "
         "%d basis rows, the chosen point then held out on every row",
         work.problem.X.shape[0], m, b)
    # the subsample's own basis rows (given row indices name rows of every row's problem)
    small = [s.with_basis_rows(m, b) for s in solvers]
    return work, small, qfolds, factor


EVERY_ROW_LADDER = 10.0 ** np.arange(-3.0, 0.25, 0.5)
"""The λ the point chosen on a subsample is held out at on every row, times its λ scaled by ``m /
u``: the best λ per row falls as rows grow, so the scaled λ is the ladder's top (measured at
:math:`10^{6}` rows: benchmarks/design_measurements.md §8)."""


EVERY_ROW_RETRIES = 2
"""How many times :func:`_on_every_row` moves its ladder up past an unresolved one (each
time to the next three decades above it)."""


def _on_every_row(grid, point, solver, folds, factor):
    """The point chosen on a subsample (:func:`_tune_subsample`) on every row: ``solver``
    (its whole basis) at the point's kernel and learned scales, held out exactly on the
    whole problem at the λ of :data:`EVERY_ROW_LADDER` times its λ times ``m / u`` (one
    row-block hold-out; where the dtype resolves none of them, the same ladder again from
    one step above its top, :data:`EVERY_ROW_RETRIES` times: the least λ the dtype resolves
    is the nearest to the learned one); the best of them is returned, its model the
    hold-out's full-data model and its score that hold-out's metric (``best_score_``)."""
    p = grid.problem
    at = dataclasses.replace(solver, kernel=point.solver.tuned_kernel())
    scales = point.scales
    rows = p if scales is None else with_rows(p, scale_rows(dense_rows(p), scales))
    ladder = point.lam * factor * EVERY_ROW_LADDER
    state = at.init(rows, "holdout", ladder.size, folds)
    for _ in range(EVERY_ROW_RETRIES + 1):
        lams = device_array(ladder, p.X.dtype)
        h = at.holdout(rows, lams, folds, state).value
        scores = grid.score(h.predictions, lams)
        if np.any(np.isfinite(scores)):
            break
        info(grid.verbose, "every row: no λ of %.3g .. %.3g resolved in %s; the ladder "
             "next above it", ladder[0], ladder[-1], np.dtype(p.X.dtype).name)
        ladder = ladder * (ladder[-1] / ladder[0]) * (ladder[1] / ladder[0])
    i = grid.best(scores)
    info(grid.verbose, "the chosen point on every row: λ %.4g, hold-out %.4f",
         float(lams[i]), float(scores[i]))
    model = h.path.model(i)
    return Point(at, float(lams[i]), float(scores[i]),
                  model if scales is None else ScaledModel(scales, model))
