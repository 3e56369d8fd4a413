"""Model selection of RankRLS in one call: a λ grid (and a kernel grid) scored by exact
leave-query-out / k-fold hold-out (Pahikkala et al. 2009, §3.3, eq. 33-34) or on a
validation set, one decomposition per kernel for the whole λ grid, optionally refined
by the gradient of the exact hold-out loss (:func:`rankjax.tune`: the exact model, or the
Nyström model of the chosen basis at O(m b^2) a step, with per-feature scales), and the
chosen model. The estimator
:class:`rankjax.estimators.RankRLSCV` and the command line call this; a JAX user can too.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import jax.numpy as jnp
import numpy as np

from .._core.checks import (
    Segments,
    check_count,
    check_flag,
    check_gram,
    check_positive,
    check_seed,
    is_concrete,
    segment_ids)
from .._core.host import lane
from .cv import cross_validate
from ..graphs.folds import resolve_folds
from ..graphs.graph import Graph
from ..graphs.build import query_graph
from ..solvers.holdout import dual_holdout, nystrom_holdout, primal_holdout
from ..kernels.kernel import (Kernel, check_kernel, kernel_core, linear_kernel)
from .._core.log import Stages, active, check_verbose
from .._core.memory import kernel_plan
from ..metrics.graded import ndcg
from ..kernels.basis import Basis, as_nystrom, take_basis
from ..metrics.choice import Selection, select_lambda, selection_ahead
from ..solvers.path import (NystromPath, check_lams, dual_path, is_path, model_at, nystrom_path, primal_path)
from .._problem import Problem, with_rows
from .._core.products import HI
from ..solvers.models import (KernelModel, LinearModel, ScaledModel, dual_model, primal_model, scale_rows)
from .._core.sparse import as_dense
from .tune import (descend, predictions_core, start_params, tune_basis)

__all__ = ["select", "select_rankrls", "rankrls_fit"]

RankRLSSelection = Selection
"""The old name of :class:`Selection` (``rankjax.RankRLSSelection`` is deprecated)."""


def select(problem: Problem, kernels: Sequence[Optional[Kernel]] = (None,), *, lams,
           seg: Optional[Segments] = None, basis=None, folds=None, score_k: int = 10,
           optimize: bool = False, optimize_steps: int = 20, ard: bool = False, seed: int = 0,
           verbose: int = 0) -> Selection:
    """Chooses λ (and the kernel, e.g. its γ) of RankRLS by NDCG@``score_k``: per kernel
    one decomposition gives the exact leave-query-out (``folds=None``) / k-fold (``folds=k``)
    hold-out predictions of the whole λ grid (Pahikkala et al. 2009, §3.3), or with
    ``problem.valid`` the validation scores of every λ's model; then the model of the best
    point. The body of :func:`rankjax.select` and :class:`~rankjax.estimators.RankRLSCV`:
    the problem's rows are checked once (by :class:`Problem`) and every step below calls
    the compiled cells on them.

    Args:
      problem: a :class:`Problem` with one output (its ``valid``, when set, scores the grid).
      kernels: the kernels to try (``None``: the linear model, primal or dual).
      lams: ``[L]`` λ grid.
      seg: the queries NDCG averages over (default the problem's query ids; given for a
        graph without them, e.g. RLS's ``identity_graph``).
      basis: ``None`` (exact) or a Nyström basis for the kernels (an int, row indices or
        a :class:`Basis`; drawn per kernel, e.g. ``kmeans++`` in its feature space).
        With a basis the hold-out also gives every λ's model: no refit.
      folds: ``None`` (leave-query-out), ``k`` (k-fold over queries) or a :class:`Folds`.
      score_k: the NDCG cut-off.
      optimize: refine the best point (hold-out only, linear or Gaussian) by gradient
        descent on the exact hold-out loss (:func:`tune`, ``optimize_steps`` Adam steps in
        log λ, log γ), of the exact model or, with ``ard``, of the Nyström model on the
        chosen basis (O(m b^2) a step). The refined point is kept when its hold-out NDCG
        is not below the grid's best. With a basis and no ``ard``, a search instead: at
        most ``min(optimize_steps, 4)`` points, each the exact hold-out of a finer λ grid
        around the best λ (one ``b x b`` decomposition, every λ, the model kept): the best
        γ, then golden-section points in γ between its grid neighbours; the gradient's 20
        steps cost 5x as much there for the same hold-out NDCG (12,194 rows x 50, b =
        2,000); a point is kept when its NDCG is higher than the grid's best.
      ard: with ``optimize``, also learn one scale per feature (the model is then a
        :class:`ScaledModel`, or scaled weights for the linear model).
      seed: the folds and the basis draw.
      verbose: log each kernel of the grid, each bucket of folds and every that many
        refinement steps (0: silent; logger ``"rankjax"``).

    Returns:
      :class:`~rankjax.Selection`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=4, seed=0)
      >>> s = select(rj.Problem(d.X, d.y, d.qid), [rj.gaussian_kernel(g) for g in (0.1, 1.)],
      ...            lams=[0.1, 1., 10.])
      >>> s.scores.shape, s.lam in (0.1, 1., 10.), s.gamma in (0.1, 1.)
      ((6,), True, True)
    """
    kernels, kind, steps = _check_options(kernels, problem, optimize, optimize_steps, ard,
                                          score_k, seed)
    lams = check_lams(lams)
    verbose = check_verbose(verbose)
    seg = segment_ids(problem.qid, "qid") if seg is None else seg
    linear = all(k is None for k in kernels)
    if basis is not None:
        if any(k is None for k in kernels):
            raise ValueError("basis is used with kernels, not the linear model (None)")
        basis = as_nystrom(basis, seed)
    grid = _Grid(problem, seg, lams, basis, score_k, verbose)
    gammas = None if linear else np.array([np.nan if k is None else float(k.gamma)
                                           for k in kernels for _ in grid.lams])
    if problem.valid is not None:
        if optimize:
            raise ValueError("optimize=True refines the cross-validation choice; with a "
                             "validation set the grid is scored on that set: drop one")
        return grid.on_valid(kernels, gammas)
    m = problem.X.shape[0]
    if m < 2:
        raise ValueError("select cross-validates and needs at least 2 rows in 2 queries, "
                         "got 1 row")
    if basis is None and not linear:                       # before any work
        kernel_plan(m, problem.X.dtype, 7 + (12 if optimize else 0),
                    "RankRLSCV / rj.select with an exact kernel (basis=None)")
    problem.graph.check_splittable("the hold-out")
    folds = resolve_folds(problem.graph, folds, seed, m)
    stages, parts = Stages(kernels, "grid kernel", verbose), []
    with active(verbose):
        for k in stages:
            parts.append(grid.holdout(k, folds))
            stages.note(("linear" if k is None else f"γ {float(k.gamma):.4g}")
                        + f", best NDCG@{score_k} {np.nanmax(parts[-1]):.4f}")
    s = np.concatenate(parts)
    best = _best(s)
    L = grid.lams.size
    lam, kern, score = float(grid.lams[best % L]), kernels[best // L], float(s[best])
    trajectory = scales = None
    index = None if basis is None else grid.coefs[(float(kern.gamma), False)][0]
    grid_point, lane, searched = (lam, kern), best % L, False
    if kind == "gaussian" and basis is not None and not ard:
        lam, kern, score, lane, searched = grid.search(kernels, kern, lane, score, folds, steps)
        grid_point = (lam, kern)
    elif kind is not None:
        lam, kern, score, trajectory, scales = grid.refine(kind, lam, kern, score, folds, steps,
                                                           ard, index)
    if (lam, kern) == grid_point:
        index, model = grid.kept_model(kern, lane, searched)      # kept: no refit
    else:
        model = grid.fit(lam, kern, scales, index)
    return Selection(np.tile(grid.lams, len(kernels)), gammas, s, best, lam,
                     None if kern is None else float(kern.gamma), score, model, index,
                     trajectory)


def _check_options(kernels, problem, optimize, optimize_steps, ard, score_k, seed):
    """``(kernels, the kind tune learns or None, steps)``: every option checked before work."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a rankjax.Problem, got {type(problem).__name__}")
    if problem.y is None or problem.y.ndim != 1:
        raise ValueError("select chooses for one output: y must be 1-D")
    kernels = list(kernels)
    if not kernels:
        raise ValueError("kernels must hold at least one kernel (None for the linear model)")
    for k in kernels:
        if k is not None:
            check_kernel(k)
    optimize = check_flag(optimize, "optimize")
    check_count(score_k, "score_k")
    check_seed(seed)
    if check_flag(ard, "ard") and not optimize:
        raise ValueError("ard=True learns per-feature scales by the gradient: set optimize=True")
    if not optimize:
        return kernels, None, None
    steps = check_count(optimize_steps, "optimize_steps")
    return kernels, (_tune_kind(kernels) if problem.valid is None else None), steps


def select_rankrls(X, y, qid, *, lams, kernels: Sequence[Optional[Kernel]] = (None,),
                   graph: Optional[Graph] = None, basis=None, folds=None, valid=None,
                   score_k: int = 10, optimize: bool = False, optimize_steps: int = 20,
                   ard: bool = False, seed: int = 0, verbose: int = 0) -> Selection:
    """The old spelling of :func:`select` (``rankjax.select_rankrls`` is deprecated):
    ``X``, ``y``, ``qid`` (and ``graph``; ``valid=(X_valid, y_valid, qid_valid)``) as a
    :class:`Problem`."""
    seg = segment_ids(qid, "qid")
    if seg.seg.shape[0] != np.shape(X)[0]:
        raise ValueError(f"qid has {seg.seg.shape[0]} rows but X has {np.shape(X)[0]}")
    if valid is not None:
        if not (isinstance(valid, tuple) and len(valid) == 3):
            raise TypeError("valid must be a tuple (X_valid, y_valid, qid_valid)")
        valid = Problem(*valid)
    problem = Problem(X, y, query_graph(seg) if graph is None else graph, valid=valid)
    return select(problem, kernels, lams=lams, seg=seg, basis=basis, folds=folds,
                  score_k=score_k, optimize=optimize, optimize_steps=optimize_steps, ard=ard,
                  seed=seed, verbose=verbose)


def rankrls_fit(X, y, graph: Graph, *, lam, kernel: Optional[Kernel] = None, basis=None,
                seed: int = 0):
    """The old spelling of ``rj.fit(rj.Problem(X, y, graph), solver, lam=lam)``
    (``rankjax.rankrls_fit`` is deprecated): the RankRLS model of one λ, solved the cheapest
    exact way (:func:`fit_model`)."""
    check_positive(lam, scalar=True)
    if kernel is not None:
        check_kernel(kernel)
    return fit_model(Problem(X, y, graph), lam, kernel,
                     None if basis is None else as_nystrom(basis, seed))


def fit_model(problem: Problem, lam, kernel: Optional[Kernel] = None,
              basis: Optional[Basis] = None, Xd=None, dual: bool = False):
    """The RankRLS model of one λ on a checked problem, the cheapest exact way: primal when
    ``n <= m``, the dual with the linear kernel (``w = X^T A``) when there are more
    features than rows, the kernel model for a :class:`Kernel`, a one-λ Nyström path with
    a ``basis`` (the linear kernel when ``kernel`` is ``None``) — Pahikkala et al. 2009,
    §3.1-3.2, §3.5 (``dual``: the linear dual even when ``n <= m``). ``Xd``: the problem's
    rows densified, when the caller holds them.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=4, seed=0)
      >>> w = fit_model(rj.Problem(d.X, d.y, d.qid), 1.0).weights
      >>> bool(np.allclose(w, rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=1.0).value.weights))
      True
    """
    X, y, g = problem.X, problem.y, problem.graph
    m, n = X.shape
    if basis is None and kernel is None and n <= m and not dual:
        check_gram(X)
        return primal_model(X, y, g, lam)
    Xd = jnp.asarray(as_dense(X)) if Xd is None else Xd
    if basis is not None:
        index, rows = take_basis(Xd, basis, linear_kernel() if kernel is None else kernel,
                                 pad=False)
        return nystrom_path(Xd, y, g, jnp.asarray([lam], Xd.dtype), index, rows)
    kernel_plan(m, Xd.dtype, 5, "the dual solve")
    if kernel is None:                       # more features than rows: w = X^T A
        A = dual_model(jnp.matmul(Xd, Xd.T, precision=HI), y, g, lam).coef
        return LinearModel(jnp.matmul(Xd.T, A, precision=HI))
    return KernelModel(dual_model(kernel_core(kernel, Xd, Xd, None, True), y, g, lam).coef, Xd,
                       kernel)


def _best(s):
    if np.all(np.isnan(s)):
        raise ValueError("NDCG is undefined for every λ (no query has a relevant document)")
    return int(np.nanargmax(s))


def _tune_kind(kernels):
    """The kernel ``tune`` learns (checked before the grid is computed, not after)."""
    kinds = {"linear" if k is None else k.kind for k in kernels}
    if not kinds <= {"linear", "gaussian"}:
        raise ValueError(f"optimize=True learns linear and Gaussian kernels, got "
                         f"{sorted(kinds - {'linear', 'gaussian'})}")
    return kinds.pop() if len(kinds) == 1 else "gaussian"


_ahead: set = set()       # (shape, dtype, k, queries) of the scorings compiled ahead in this process


class _Grid:
    """The grid points of one selection on one checked problem: each kernel's scores, and
    the models its hold-out already holds (every λ's coefficients, ``m`` or ``b`` per λ and
    kernel, kept by γ)."""

    def __init__(self, problem: Problem, seg, lams, basis: Optional[Basis], score_k, verbose):
        self.problem, self.seg, self.basis, self.k = problem, seg, basis, score_k
        self.lams = np.asarray(lams, np.float64)
        self.lams_path = lams                                    # the cells' λ arrays
        self.lams_fold = lams.astype(problem.X.dtype)
        self.verbose = verbose
        self.coefs = {}
        self._dense = None

    def score_ahead(self, lams):
        """Starts compiling :meth:`_ndcg`'s program for ``[L, m(, k)]`` hold-outs
        (:func:`~rankjax.metrics.choice.selection_ahead`), before the hold-out is traced: XLA
        compiles it on another thread meanwhile. Once per shape and process; an error is
        left to the scoring."""
        X, y = self.problem.X, self.problem.y
        shape = (lams.shape[0],) + tuple(np.shape(y))
        key = (shape, str(X.dtype), self.k, self.seg.num_queries)
        if key not in _ahead and is_concrete(X) and is_concrete(y):
            _ahead.add(key)
            try:
                selection_ahead(lams, np.zeros(shape, X.dtype), y, self.seg, metric=ndcg,
                                k=self.k)
            except Exception:     # noqa: BLE001  the scoring itself reports it, after the hold-out
                pass

    @property
    def Xd(self):
        """The problem's rows, densified once (kernels, bases, hold-outs)."""
        if self._dense is None:
            self._dense = jnp.asarray(as_dense(self.problem.X))
        return self._dense

    def _ndcg(self, h):
        return np.asarray(cross_validate(h, self.problem.y, self.seg, metric=ndcg,
                                         k=self.k).table, np.float64)

    def holdout(self, kern, folds, lams=None):
        """NDCG of every λ of one kernel by the exact hold-out (of ``lams [L]``, float64,
        in place of the grid's λ when given: the same shape, the same program; its models
        kept apart from the grid's, :meth:`kept_model` ``searched``)."""
        grid_lams = self.lams if lams is None else lams
        key = (None if kern is None else float(kern.gamma), lams is not None)
        p, v = self.problem, self.verbose
        lams = self.lams_fold if lams is None else grid_lams.astype(p.X.dtype)
        where = "select (hold-out)"
        self.score_ahead(lams)
        if kern is None:
            check_gram(p.X)
            h, W = primal_holdout(self.Xd, p.y, p.graph, lams, folds, v, where)
            self.coefs[key] = (None, None, W, None, grid_lams)
            return self._ndcg(h)
        if self.basis is None:
            h, coef = dual_holdout(self.Xd, p.y, p.graph, lams, folds, v, where, kernel=kern)
            self.coefs[key] = (None, None, coef, kern, grid_lams)
            return self._ndcg(h)
        index, B = take_basis(self.Xd, self.basis, kern)
        h, coef = nystrom_holdout(self.Xd, p.y, p.graph, lams, folds, B, None, v,
                                  "select (Nyström hold-out)")
        b = index.size
        self.coefs[key] = (index, B.X[:b], coef[:, :b], kern, grid_lams)
        return self._ndcg(h)

    def kept_model(self, kern, i, searched=False):
        """``(index, model)``: the model of ``kern`` at the ``i``-th λ that its hold-out kept
        (no refit; of the grid, or of a searched point's λ): the linear or exact kernel
        model (``index`` None) or the Nyström model."""
        index, XR, coef, kern, lams = self.coefs[(None if kern is None else float(kern.gamma),
                                                  searched)]
        if kern is None:
            return None, LinearModel(lane(coef, i))
        if index is None:
            return None, KernelModel(lane(coef, i), self.Xd, kern)
        return index, NystromPath(lams[i:i + 1], lane(coef, slice(i, i + 1)), jnp.asarray(index),
                                  XR, kern, None, None)

    def on_valid(self, kernels, gammas):
        """Every kernel's path scored on the validation set; the chosen λ's model comes
        with its path (an exact kernel is refit)."""
        p, v, lams = self.problem, self.problem.valid, self.lams_path
        if self.basis is None and any(k is not None for k in kernels):
            kernel_plan(p.X.shape[0], p.X.dtype, 4, "select with an exact kernel")
        vseg = segment_ids(v.qid, "valid qid")
        scores, paths = [], []
        for kern in kernels:
            path = self._valid_path(kern, v.X, lams)
            t = select_lambda(lams, path.valid_scores, v.y, vseg, metric=ndcg, k=self.k).table
            scores.append(np.asarray(t, np.float64))
            paths.append(path)
        s = np.concatenate(scores)
        best = _best(s)
        L = self.lams.size
        lam, kern = float(self.lams[best % L]), kernels[best // L]
        model = model_at(paths[best // L], best % L)
        index = None
        if model is None:                       # exact kernel: the chosen λ's model
            model = self.fit(lam, kern, None, None)
        elif is_path(model):                    # Nyström: the basis rows travel with it
            index = np.asarray(model.basis)
        return Selection(np.tile(self.lams, len(kernels)), gammas, s, best, lam,
                         None if kern is None else float(kern.gamma), float(s[best]),
                         model, index, None)

    def _valid_path(self, kern, Xv, lams):
        """One kernel's λ path with its validation scores."""
        p = self.problem
        if kern is None:
            check_gram(p.X)
            return primal_path(p.X, p.y, p.graph, lams, Xv, where="select (validation path)")
        Xvd = jnp.asarray(as_dense(Xv))
        if self.basis is not None:
            index, B = take_basis(self.Xd, self.basis, kern, pad=False)
            return nystrom_path(self.Xd, p.y, p.graph, lams, index, B, Xvd,
                                where="select (validation path)")
        return dual_path(kernel_core(kern, self.Xd, self.Xd, None, True), p.y, p.graph, lams,
                         kernel_core(kern, Xvd, self.Xd), where="select (validation path)")

    def search(self, kernels, kern, lane, score, folds, steps):
        """The refinement of a Nyström grid without ``ard``: at most ``min(steps, 4)``
        points, each the exact hold-out of ``L`` λ (:meth:`holdout`, its models kept): the
        best γ on a finer λ grid, then a golden-section search over log γ between the
        grid's neighbours of the best γ (``γ / 4`` and ``4 γ`` at the grid's ends). The
        searched λ are ``L`` points spaced evenly in log between two grid steps below
        and above the best λ: the same program as the grid's, no float32 lane far below
        the best paying its own factor (2.5 s of a 7.6 s point at 12,194 rows x 2,000 basis
        rows). Returns ``(lam, kernel, score, lane, searched)`` of the best point, the
        grid's own unless a searched point scores higher."""
        grid = np.unique([float(k.gamma) for k in kernels])
        j = int(np.searchsorted(grid, float(kern.gamma)))
        lo = np.log(grid[j - 1] if j > 0 else kern.gamma / 4)
        hi = np.log(grid[j + 1] if j + 1 < grid.size else kern.gamma * 4)
        ladder = np.unique(self.lams)
        r = int(np.searchsorted(ladder, self.lams[lane]))
        lams = np.geomspace(ladder[max(r - 2, 0)], ladder[min(r + 2, ladder.size - 1)], self.lams.size)
        best = (score, float(self.lams[lane]), kern, lane, False)
        ratio, budget = (np.sqrt(5) - 1) / 2, min(steps, 4)
        seen = {}
        stages = Stages(budget, "search", self.verbose)

        def score_at(lg, k=None):
            nonlocal best
            if lg not in seen:
                k = dataclasses.replace(kern, gamma=float(np.exp(lg))) if k is None else k
                s = self.holdout(k, folds, lams)
                i = _best(s) if np.any(np.isfinite(s)) else None
                seen[lg] = -np.inf if i is None else float(s[i])
                stages.done(f"γ {float(k.gamma):.4g}, best NDCG@{self.k} {seen[lg]:.4f}")
                if i is not None and seen[lg] > best[0]:
                    best = (seen[lg], float(lams[i]), k, i, True)
            return seen[lg]

        score_at(np.log(kern.gamma), kern)               # the best γ, the finer λ
        a, c = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        while len(seen) < budget:
            fa = score_at(a)
            if len(seen) >= budget:
                break
            if fa >= score_at(c):            # the best lies in [lo, c]
                hi, c = c, a
                a = hi - ratio * (hi - lo)
            else:                            # in [a, hi]
                lo, a = a, c
                c = lo + ratio * (hi - lo)
        score, lam, kern, lane, searched = best
        return lam, kern, score, lane, searched

    def refine(self, kind, lam, kern, score, folds, steps, ard, index):
        """Gradient descent on the exact hold-out loss from the grid's best point (of the
        Nyström model on the basis ``index`` when given); kept when its hold-out NDCG is
        not below the grid's. Returns ``(lam, kernel, score, TuneResult, scales)``."""
        p, Xd = self.problem, self.Xd
        B = None if index is None else tune_basis(Xd, Basis(rows=index), kern, "tune")
        problem = (Xd, p.y, p.graph, folds, B)
        gamma = None if kern is None else float(kern.gamma)
        r = descend(start_params(kind, Xd.shape[1], Xd.dtype, lam, gamma, ard), problem, kind,
                    steps=steps, learning_rate=0.1, verbose=self.verbose)
        best = int(np.nanargmin(r.loss_history))
        params = {k: jnp.asarray(v[best]) for k, v in r.params_history.items()}
        f = predictions_core(params, problem, kernel=kind)
        new = float(ndcg(f, p.y, self.seg, k=self.k))
        scales = None
        if np.isfinite(new) and new >= score:
            lam, score = float(np.exp(params["log_lam"])), new
            if kern is not None:
                kern = dataclasses.replace(kern, gamma=float(np.exp(params["log_gamma"])))
            if "log_scales" in params:
                scales = jnp.exp(params["log_scales"])
        return lam, kern, score, r, scales

    def fit(self, lam, kern, scales, index):
        """The model at a point (refined or an exact kernel's): on the scaled rows with
        learned scales (the linear weights scaled back, else a :class:`ScaledModel`)."""
        p = self.problem
        basis = None if index is None else Basis(rows=index)
        if scales is None:
            return fit_model(p, lam, kern, basis, self._dense)
        Xs = scale_rows(self.Xd, scales)
        model = fit_model(with_rows(p, Xs), lam, kern, basis, Xs)
        if kern is None and basis is None:
            return LinearModel(scale_rows(model.weights.T, scales).T)
        return ScaledModel(scales, model)
