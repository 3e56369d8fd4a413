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

from . import _tune
from ._products import HI
from ._checks import check_count, check_flag, check_seed, segment_ids
from ._resolved import warn_unresolved
from ._cv import cross_validate
from ._folds import make_folds
from ._graph import Graph, check_problem
from ._graph_build import query_graph
from ._holdout import (HoldOut, check_nystrom_memory, holdout_dual, holdout_primal, nystrom_holdout_core,
                       two_phase)
from ._kernels import Kernel, check_kernel, kernel_matrix, linear_kernel
from ._log import Stages, active, check_verbose
from ._memory import compute_dtype, kernel_plan
from ._metrics_graded import ndcg
from ._nystrom import Basis, as_nystrom, take_basis
from ._path import (PRIMAL_UNRESOLVED, NystromPath, Selection, check_lams, is_path, model_at,
                    rankrls_dual_path, rankrls_nystrom_path,
                    rankrls_primal_path, select_lambda)
from ._rankrls import LinearModel, ScaledModel, rankrls_dual, rankrls_kernel, rankrls_primal, scale_rows
from ._sparse import as_dense

__all__ = ["select_rankrls", "rankrls_fit"]

RankRLSSelection = Selection
"""The old name of :class:`Selection` (``rankjax.RankRLSSelection`` is deprecated)."""


def rankrls_fit(X, y, graph: Graph, *, lam, kernel: Optional[Kernel] = None, basis=None,
                seed: int = 0):
    """The RankRLS model of one λ, solved the cheapest exact way: primal when ``n <= m``,
    the dual with the linear kernel (``w = X^T A``) when there are more features than
    rows, the kernel model for a :class:`Kernel`, a one-λ Nyström path with ``basis``
    (an int, row indices or a :class:`Basis`; the linear kernel when ``kernel`` is
    ``None``) — Pahikkala et al. 2009, §3.1-3.2, §3.5.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=4, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> w = rankrls_fit(d.X, d.y, g, lam=1.0).weights
      >>> bool(np.allclose(w, rj._rankrls.rankrls_primal(d.X, d.y, g, lam=1.0).weights))
      True
    """
    m, n = X.shape
    if basis is not None:
        return rankrls_nystrom_path(as_dense(X), y, graph, lams=[lam],
                                    kernel=linear_kernel() if kernel is None else kernel,
                                    basis=basis, seed=seed)
    if kernel is not None:
        return rankrls_kernel(as_dense(X), y, graph, lam=lam, kernel=kernel)
    if n <= m:
        return rankrls_primal(X, y, graph, lam=lam)
    return linear_dual_fit(X, y, graph, lam)


def linear_dual_fit(X, y, graph: Graph, lam) -> LinearModel:
    """The linear model by its ``m x m`` dual system (more features than rows):
    ``w = X^T a`` with ``(L X X^T + λ I) a = L y`` (Pahikkala et al. 2009, §3.2)."""
    Xd = jnp.asarray(as_dense(X))
    A = rankrls_dual(jnp.matmul(Xd, Xd.T, precision=HI), y, graph, lam=lam).coef
    return LinearModel(jnp.matmul(Xd.T, A, precision=HI))


def select_rankrls(X, y, qid, *, lams, kernels: Sequence[Optional[Kernel]] = (None,),
                   graph: Optional[Graph] = None, basis=None, folds=None, valid=None,
                   score_k: int = 10, optimize: bool = False, optimize_steps: int = 20,
                   ard: bool = False, seed: int = 0, verbose: int = 0) -> Selection:
    """Chooses λ (and the kernel, e.g. its γ) of RankRLS by NDCG@``score_k``: per kernel
    one decomposition gives the exact leave-query-out (``folds=None``) / k-fold (``folds=k``)
    hold-out predictions of the whole λ grid (Pahikkala et al. 2009, §3.3), or with
    ``valid`` the validation scores of every λ's model; then the model of the best point.

    Args:
      X: ``[m, n]`` training rows (dense or sparse for the linear model).
      y: ``[m]`` labels.
      qid: ``[m]`` query ids (or :class:`Segments`): the queries NDCG is averaged over.
      lams: ``[L]`` λ grid.
      kernels: the kernels to try (``None``: the linear model, primal or dual).
      graph: the training graph (default ``query_graph(qid)``; ``identity_graph(m)`` for RLS).
      basis: ``None`` (exact) or a Nyström basis for the kernels (an int, row indices or
        a :class:`Basis`; drawn per kernel, e.g. ``kmeans++`` in its feature space).
        With a basis the hold-out also gives every λ's model: no refit.
      folds: ``None`` (leave-query-out), ``k`` (k-fold over queries) or a :class:`Folds`.
      valid: ``(X_valid, y_valid, qid_valid)``: score on this set instead of hold-out.
      score_k: the NDCG cut-off.
      optimize: refine the best point (hold-out only, linear or Gaussian) by gradient
        descent on the exact hold-out loss (:func:`tune`, ``optimize_steps`` Adam steps in
        log λ, log γ), of the exact model or, with a basis, of the Nyström model on the
        chosen basis (O(m b^2) a step). The refined point is kept when its hold-out NDCG
        is not below the grid's best.
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
      >>> s = select_rankrls(d.X, d.y, d.qid, lams=[0.1, 1., 10.],
      ...                       kernels=[rj.gaussian_kernel(g) for g in (0.1, 1.)])
      >>> s.scores.shape, s.lam in (0.1, 1., 10.), s.gamma in (0.1, 1.)
      ((6,), True, True)
    """
    seg = segment_ids(qid, "qid")
    if seg.seg.shape[0] != X.shape[0]:
        raise ValueError(f"qid has {seg.seg.shape[0]} rows but X has {X.shape[0]}")
    graph = query_graph(seg) if graph is None else graph
    X, y = check_problem(X, y, graph)
    if y.ndim != 1:
        raise ValueError("select_rankrls chooses for one output: y must be 1-D")
    kernels = list(kernels)
    if not kernels:
        raise ValueError("kernels must hold at least one kernel (None for the linear model)")
    for k in kernels:
        if k is not None:
            check_kernel(k)
    optimize = check_flag(optimize, "optimize")
    score_k = check_count(score_k, "score_k")
    check_seed(seed)
    ard = check_flag(ard, "ard")
    verbose = check_verbose(verbose)
    if ard and not optimize:
        raise ValueError("ard=True learns per-feature scales by the gradient: set optimize=True")
    if optimize:                                    # options first, then the grid
        steps = check_count(optimize_steps, "optimize_steps")
        if valid is None:
            _tune_kind(kernels)
    lams = np.asarray(check_lams(lams), np.float64)
    linear = all(k is None for k in kernels)
    if basis is not None:
        if any(k is None for k in kernels):
            raise ValueError("basis is used with kernels, not the linear model (None)")
        basis = as_nystrom(basis, seed)
    gammas = None if linear else np.array([np.nan if k is None else float(k.gamma)
                                           for k in kernels for _ in lams])
    points = _Points(X, y, seg, graph, lams, basis, score_k)
    if valid is not None:
        if optimize:
            raise ValueError("optimize=True refines the cross-validation choice; with a "
                             "validation set the grid is scored on that set: drop one")
        return points.on_valid(kernels, valid, gammas)
    if X.shape[0] < 2:
        raise ValueError("select_rankrls cross-validates and needs at least 2 rows in 2 "
                         "queries, got 1 row")
    kind = _tune_kind(kernels) if optimize else None
    if basis is None and not linear:                       # before any work
        kernel_plan(X.shape[0], compute_dtype(X), 7 + (12 if optimize else 0),
                    "RankRLSCV / select_rankrls with an exact kernel (basis=None)")
    folds = make_folds(graph, folds, seed=seed)
    grid, parts = Stages(kernels, "grid kernel", verbose), []
    with active(verbose):
        for k in grid:
            parts.append(points.holdout(k, folds))
            grid.note(("linear" if k is None else f"γ {float(k.gamma):.4g}")
                      + f", best NDCG@{score_k} {np.nanmax(parts[-1]):.4f}")
    s = np.concatenate(parts)
    best = _best(s)
    lam, kern, score = float(lams[best % lams.size]), kernels[best // lams.size], float(s[best])
    trajectory = scales = None
    index = None if basis is None else points.coefs[float(kern.gamma)][0]
    grid_point = (lam, kern)
    if kind is not None:
        lam, kern, score, trajectory, scales = points.refine(kind, lam, kern, score, folds, steps,
                                                             ard, index, verbose)
    if basis is not None and (lam, kern) == grid_point:
        index, model = points.nystrom_model(kern, lam)            # kept: no refit
    else:
        model = points.refit(lam, kern, scales, index)
    return Selection(np.tile(lams, len(kernels)), gammas, s, best, lam,
                            None if kern is None else float(kern.gamma), score, model, index,
                            trajectory)


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


class _Points:
    """The grid points of one selection: each kernel's scores, and the Nyström models
    its hold-out already holds (``b x b`` per kernel, kept by γ)."""

    def __init__(self, X, y, seg, graph, lams, basis: Optional[Basis], score_k):
        self.X, self.y, self.seg, self.graph = X, y, seg, graph
        self.lams, self.basis, self.k = lams, basis, score_k
        self.coefs = {}

    def _ndcg(self, h):
        return np.asarray(cross_validate(h, self.y, self.seg, metric=ndcg, k=self.k).table,
                          np.float64)

    def holdout(self, kern, folds):
        """NDCG of every λ of one kernel by the exact hold-out."""
        X, y, g, lams = self.X, self.y, self.graph, self.lams
        if kern is None:
            return self._ndcg(holdout_primal(as_dense(X), y, g, lams=lams, folds=folds))
        if self.basis is None:
            return self._ndcg(holdout_dual(kernel_matrix(kern, as_dense(X)), y, g, lams=lams,
                                           folds=folds))
        Xd = jnp.asarray(as_dense(X))
        index, B = take_basis(Xd, self.basis, kern)
        check_nystrom_memory(Xd.shape[0], B.X.shape[0], Xd.dtype)
        lams_d = jnp.asarray(lams, Xd.dtype)                               # the programs
        pred, coef = two_phase(nystrom_holdout_core, Xd, jnp.asarray(y, Xd.dtype), g, B,   # of
                               lams_d, folds, None, lams=lams_d)                # holdout_nystrom
        warn_unresolved(pred, lams, "select_rankrls (Nyström hold-out)", PRIMAL_UNRESOLVED)
        b = index.size
        self.coefs[float(kern.gamma)] = (index, B.X[:b], coef[:, :b], kern)
        return self._ndcg(HoldOut(lams, pred, folds))

    def nystrom_model(self, kern, lam):
        """The kept Nyström model of ``kern`` at the grid's ``lam`` (no refit)."""
        index, XR, coef, kern = self.coefs[float(kern.gamma)]
        i = int(np.argmin(np.abs(np.log(self.lams) - np.log(lam))))     # λ is a grid point
        return index, NystromPath(np.asarray([lam]), coef[i][None], jnp.asarray(index), XR, kern,
                                  None, None)

    def on_valid(self, kernels, valid, gammas):
        """Every kernel's path scored on the validation set; the chosen λ's model comes
        with its path (an exact kernel is refit)."""
        if not (isinstance(valid, tuple) and len(valid) == 3):
            raise TypeError("valid must be a tuple (X_valid, y_valid, qid_valid)")
        Xv, yv, qv = valid
        X, y, g, lams = self.X, self.y, self.graph, self.lams
        if self.basis is None and any(k is not None for k in kernels):
            kernel_plan(X.shape[0], compute_dtype(X), 4, "select_rankrls with an exact kernel")
        scores, paths = [], []
        for kern in kernels:
            if kern is None:
                path = rankrls_primal_path(X, y, g, lams=lams, X_valid=Xv)
            elif self.basis is not None:
                path = rankrls_nystrom_path(as_dense(X), y, g, lams=lams, kernel=kern,
                                            basis=self.basis, X_valid=as_dense(Xv))
            else:
                Xd = as_dense(X)
                path = rankrls_dual_path(kernel_matrix(kern, Xd), y, g, lams=lams,
                                         K_valid=kernel_matrix(kern, as_dense(Xv), Xd))
            t = select_lambda(lams, path.valid_scores, yv, qv, metric=ndcg, k=self.k).table
            scores.append(np.asarray(t, np.float64))
            paths.append(path)
        s = np.concatenate(scores)
        best = _best(s)
        lam, kern = float(lams[best % lams.size]), kernels[best // lams.size]
        model = model_at(paths[best // lams.size], best % lams.size)
        index = None
        if model is None:                       # exact kernel: the chosen λ's model
            model = rankrls_fit(X, y, g, lam=lam, kernel=kern)
        elif is_path(model):                    # Nyström: the basis rows travel with it
            index = np.asarray(model.basis)
        return Selection(np.tile(lams, len(kernels)), gammas, s, best, lam,
                                None if kern is None else float(kern.gamma), float(s[best]),
                                model, index, None)

    def refine(self, kind, lam, kern, score, folds, steps, ard, index, verbose):
        """Gradient descent on the exact hold-out loss from the grid's best point (of the
        Nyström model on the basis ``index`` when given); kept when its hold-out NDCG is
        not below the grid's. Returns ``(lam, kernel, score, TuneResult, scales)``."""
        Xd = as_dense(self.X)
        basis = None if index is None else Basis(rows=index)
        r = _tune.tune(Xd, self.y, self.graph, kernel=kind, lam=lam,
                       gamma=None if kern is None else float(kern.gamma), folds=folds,
                       steps=steps, learning_rate=0.1, ard=ard, basis=basis, verbose=verbose)
        best = int(np.nanargmin(r.loss_history))
        params = {k: jnp.asarray(v[best]) for k, v in r.params_history.items()}
        f = _tune.cv_predictions(params, Xd, self.y, self.graph, folds, kind, basis=basis)
        new = float(ndcg(f, self.y, self.seg, k=self.k))
        scales = None
        if np.isfinite(new) and new >= score:
            lam, score = float(np.exp(params["log_lam"])), new
            if kern is not None:
                kern = dataclasses.replace(kern, gamma=float(np.exp(params["log_gamma"])))
            if "log_scales" in params:
                scales = jnp.exp(params["log_scales"])
        return lam, kern, score, r, scales

    def refit(self, lam, kern, scales, index):
        """The model at a refined point: on the scaled rows with learned scales (the
        linear weights scaled back, else a :class:`ScaledModel`)."""
        X = self.X if scales is None else scale_rows(as_dense(self.X), scales)
        basis = None if index is None else Basis(rows=index)
        model = rankrls_fit(X, self.y, self.graph, lam=lam, kernel=kern, basis=basis)
        if scales is None:
            return model
        if kern is None and basis is None:
            return LinearModel(scale_rows(model.weights.T, scales).T)
        return ScaledModel(scales, model)
