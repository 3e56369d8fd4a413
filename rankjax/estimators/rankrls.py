"""RankRLS estimators: the closed form (:class:`RankRLS`) and the cross-validated one
(:class:`RankRLSCV`: exact leave-query-out / k-fold over a λ grid and, for kernels,
a γ grid; Pahikkala et al. 2009, §3.2-3.3).
"""
from __future__ import annotations

import warnings

import numpy as np

from .._core import log as _log
from .._core.checks import check_flag
from .._core.resolved import UnresolvedLambdaWarning
from .._core.sparse import as_dense
from .._problem import Problem
from .._solve import fit as _fit, select as _select
from ..selection.candidates import GAMMA_FACTORS, Candidates, choose, final_rows
from ..selection.edges import EXTEND
from ..graphs.build import identity_graph
from ..metrics import ndcg
from ..solvers import CG, AbstractSolver, Auto, Basis, is_linear, predict
from .compat import check_routing
from .base import Ranker, nan_last
from .defaults import basis_spec, gamma_value, make_kernel


class RankRLS(Ranker):
    r"""RankRLS (Pahikkala et al. 2009): linear (primal, or dual when there are more
    features than rows), kernel, or Nyström with ``basis`` rows, in closed form or by
    conjugate gradients; ``graph="query"`` ranks within queries, ``"identity"`` is RLS
    regression. The model minimises the pairwise squared error of every query's pairs
    (the query graph's Laplacian :math:`L`, docs/math.md) plus a ridge penalty:

    .. math::

       f = \operatorname{argmin}_{f \in \mathcal{H}} \; (y - f)^T L \, (y - f)
           + \lambda \lVert f \rVert_{\mathcal{H}}^2 ,

    :math:`\mathcal{H}` the linear functions :math:`x^T w` (``kernel=None``) or the kernel's
    space (spanned by the ``basis`` rows for a Nyström model).

    Args:
      lam: λ > 0 (``solver="cg"`` with an ``eval_set``: λ >= 0, early stopping alone at 0).
      solver: ``"auto"`` (the closed form the data needs: linear, an exact kernel, or a
        Nyström basis above ``AUTO_BASIS_ROWS = 5,000`` rows), ``"primal"``, ``"dual"``,
        ``"nystrom"``, ``"cg"`` (conjugate gradients, linear: large sparse data; Airola et
        al. 2010) or ``"falkon"`` (preconditioned CG on a Nyström basis; Rudi et al. 2017):
        :class:`rankjax.Primal`, ... behind the one :func:`rankjax.fit`; or a solver object
        (``rj.Nystrom(kernel, 500)``, a class of one's own deriving from
        :class:`rankjax.AbstractSolver`), used as given (its kernel and basis: ``kernel`` and
        ``basis`` are not read).
      kernel: ``None``/``"linear"``, ``"gaussian"``, ``"polynomial"`` or a
        :class:`rankjax.Kernel`; degree, coef0 its parameters (gamma below).
      basis: ``"auto"`` (exact kernel up to ``AUTO_BASIS_ROWS = 5,000`` rows, above it a
        Nyström basis of ``AUTO_BASIS_SIZE`` rows, :math:`\sqrt{m}` above :math:`10^{6}` rows,
        never fewer as rows grow: ``auto_basis_size``; drawn by kernel k-means++),
        ``None`` (always exact) or the number of basis rows of the Nyström
        approximation, or a :class:`rankjax.Basis`
        (size or rows, ``method="kmeans++"``, seed).
      max_iter, tol, early_stopping_rounds: the CG loop of ``"cg"`` and ``"falkon"``
        (``tol=None``: the dtype's default; with an ``eval_set`` the iterate of the best
        NDCG@``score_k`` is kept, the loop stopping after ``early_stopping_rounds``
        iterations without improvement: ``evals_result_``, ``best_iteration_``).
      normalized, exclude_ties: query-graph options. score_k: NDCG cut-off of
        ``score``. random_state: seed of the basis rows.
      feature_map: ``"auto"``: the rows go through a :class:`~rankjax.FeatureMap` learned on
        the training rows and kept in ``feature_map_`` and in ``model_`` (a
        :class:`~rankjax.MappedModel`, so ``predict``, save/load, the command line and
        ``jax.export`` apply it): for a kernel given by name every column by its ranks,
        learned without the labels (the same model whatever increasing or decreasing map
        the column was logged through); for the linear model every column divided by its
        standard deviation (``coef_`` reports the weights on the user's columns); NaN
        imputed from the row's other columns with a missing indicator, pandas ``category``
        and text columns read as learned category scores (docs/math.md, §7). ``"rank"``,
        ``"standard"``: that map whatever the model. ``None``: the features as given (NaN
        refused, naming the row and column); a :class:`rankjax.Kernel` or solver object
        always sees them as given.
      gamma: ``"mean"`` (one over the mean squared distance of two training rows as the
        kernel sees them), ``"scale"`` (scikit-learn's), ``"auto"`` (``1 / n``) or a number.
      verbose: log the fit (0: silent; logger ``"rankjax"``).
    """

    def __init__(self, lam=1.0, *, solver="auto", kernel=None, gamma="mean", degree=2,
                 coef0=1.0, basis="auto", max_iter=500, tol=None, early_stopping_rounds=10,
                 graph="query", normalized=True, exclude_ties=False, score_k=10,
                 random_state=0, feature_map="auto", verbose=0):
        self.lam, self.solver, self.kernel, self.gamma = lam, solver, kernel, gamma
        self.feature_map = feature_map
        self.degree, self.coef0, self.basis = degree, coef0, basis
        self.max_iter, self.tol, self.early_stopping_rounds = max_iter, tol, early_stopping_rounds
        self.graph, self.normalized = graph, normalized
        self.exclude_ties, self.score_k, self.random_state = exclude_ties, score_k, random_state
        self.verbose = verbose

    @property
    def evals_axis(self):
        return ("CG iteration", 0, True) if hasattr(self, "n_iter_") else ("grid point", 0, False)

    def _graph(self, seg, y, weights=None):
        if self.graph == "identity":
            return identity_graph(seg.seg.shape[0])
        if self.graph != "query":
            raise ValueError(f"graph must be 'query' or 'identity', got {self.graph!r}")
        return super()._graph(seg, y, weights)

    def fit(self, X, y, qid=None, *, group=None, sample_weight=None, group_weight=None,
            eval_set=None, eval_qid=None, eval_group=None):
        """Fits the model of ``lam`` by :func:`rankjax.fit`; an ``eval_set`` (as LightGBM's
        and XGBoost's, with ``eval_qid``/``eval_group``) is the validation data of early
        stopping for ``solver="cg"``/``"falkon"``."""
        for stale in ("n_iter_", "best_iteration_"):    # an earlier iterative fit's
            self.__dict__.pop(stale, None)
        X, y, seg = self._fit_inputs(X, y, qid, group)
        X, y, seg, weights = self._weighted(X, y, seg, sample_weight, group_weight)
        check_routing(self, qid, group, seg)
        X = self._mapped(X, y, seg)
        solver = self._solver(X)
        valid = None
        if eval_set is not None:
            if not solver.stops_early:
                raise ValueError("eval_set is the early-stopping data of solver='cg' or "
                                 "'falkon'; RankRLSCV chooses λ on it")
            valid = Problem(*self._eval_data(eval_set, eval_qid, eval_group))
        elif solver.stops_early and self.lam == 0:
            raise ValueError("lam=0 is early stopping alone: give an eval_set, or lam > 0")
        problem = Problem(X, y, self._graph(seg, y, weights), valid=valid)
        steps = _log.Stages(1, "RankRLS fit", self.verbose)
        for _ in steps:
            sol = _fit(problem, solver, lam=self.lam)
            self.model_ = _log.ready(sol.value)
            steps.note(f"{X.shape[0]} rows, {type(solver).__name__}")
        if "iterations" in sol.stats:
            self._iterations(sol.stats, valid is not None)
        return self._finish_fit(seg)

    def _iterations(self, stats, valid: bool):
        self.n_iter_ = int(stats["iterations"])
        self.best_iteration_ = int(stats["best_iteration"])
        if valid:           # the loop minimizes: its history is -NDCG
            hist = -np.asarray(stats["valid_history"], dtype=float)[:self.n_iter_ + 1]
            self._report(hist, show=False)          # the loop logged its progress
            self.best_score_ = float(hist[self.best_iteration_])
        if is_linear(self.model_):
            self.coef_ = np.asarray(self.model_.weights)

    def _loop(self):
        rounds = (self.max_iter + 1 if self.early_stopping_rounds is None
                  else self.early_stopping_rounds)
        return CG(tol=self.tol, max_iter=self.max_iter, patience=rounds,
                  verbose=_log.check_verbose(self.verbose), metric=ndcg,
                  metric_kwargs={"k": self.score_k})

    def _solver(self, X):
        """The front door's solver of this fit (``solver``, the kernel and the basis; a
        solver object as given)."""
        if isinstance(self.solver, AbstractSolver):
            return self.solver
        kern = self._fit_kernel(X)
        b = basis_spec(self.basis, self.kernel, X.shape[0], self.random_state,
                       _log.check_verbose(self.verbose))
        return Auto.named(self.solver, kern, b, self._loop(),
                          Basis(min(2000, X.shape[0]), seed=self.random_state))

    def _scores(self, X):
        return predict(self.model_, X if is_linear(self.model_) else as_dense(X))


DEFAULT_LAMS = tuple(np.logspace(-3, 3, 13))
"""``RankRLSCV``'s λ grid when none is given."""


class RankRLSCV(RankRLS):
    r"""RankRLS with λ (and a kernel's ``gamma``) chosen by exact leave-query-out
    (``folds=None``) or k-fold over queries (``folds=k``): one decomposition per kernel for
    the whole λ grid (Pahikkala et al. 2009, §3.3), then a refit on all rows. The point
    chosen maximises the NDCG of the exact hold-out predictions :math:`f'_\lambda` (every
    fold's rows predicted by the model trained without them, eq. 33-34):

    .. math::

       (\lambda^*, \gamma^*) = \operatorname{argmax}_{\lambda, \gamma}
       \operatorname{NDCG@k}(f'_{\lambda, \gamma}, y) .

    **The default chosen by the data.** With a kernel given by name and
    ``feature_map="auto"`` the fit holds out candidates and keeps the best
    (``rankjax.selection.candidates``, docs/math.md §7): the kernel on the columns' ranks
    (learned without the labels) over a small γ grid around ``gamma`` (``gamma`` times
    ``GAMMA_FACTORS``, or ``gammas``), the kernel on the ranks weighted by each column's
    within-query correlation with the labels, and the linear model on the ranks. A map that
    learns from the labels (the weights; categorical columns' scores) is cross-fitted: each
    random half of the queries is held out through the map learned from the other half's
    labels, so no held-out query's labels shaped the features it is scored on. The kernel
    candidates are screened on a subsample of at most ``SCREEN_ROWS`` rows of whole queries
    with a Nyström basis of ``SCREEN_BASIS`` rows; the best is held out on every row on its
    own route (``basis``) and compared there with the linear model and with their blends
    ``w f_kernel + (1 - w) f_linear`` (held out exactly by blending the two candidates'
    held-out predictions; a blend is kept only above both, its model an
    :class:`rankjax.BlendModel`). ``feature_map="rank"``
    (or ``"standard"``, or None) fits the one map as asked over the λ (and γ) grid.

    Attributes (after fit): ``lam_``, ``gamma_`` (a kernel model's), ``best_score_`` (the
    returned point's hold-out NDCG on every training row), ``best_params_`` (``features``:
    ``"ranks"``, ``"weighted ranks"``, ``"standard"`` or ``"as given"``; ``kernel``:
    ``"linear"`` or the kernel's kind, ``"gaussian + linear"`` for a blend; ``lam``,
    ``gamma``; a blend's ``kernel_weight`` and ``linear_lam``) and ``cv_results_`` (a row per
    hold-out point of every candidate: ``params``, ``param_features``, ``param_kernel``,
    ``param_lam``, ``param_gamma`` (NaN for the linear model), ``mean_test_score``,
    ``rank_test_score``, ``stage`` (``"screen"``: the subsample's; ``"final"``: every row's),
    ``extended``; ``param_kernel_weight`` where blends were held out, NaN on the other rows),
    scored by NDCG@``score_k``; the final stage's rows rank first, the
    returned point 1. A screen's rows are honest estimates of their own (smaller) model; the
    chosen kernel's final rows sit above what new queries will score by the choice itself,
    as every selection's best does.

    ``basis`` (``"auto"``, ``None``, an int or a :class:`rankjax.Basis`, as :class:`RankRLS`)
    with a kernel uses the Nyström model: per γ one ``b x b`` decomposition gives the exact
    hold-out of the whole λ grid and every λ's model (no refit); ``rj.Basis(b,
    method="kmeans++")`` chooses the rows by kernel k-means++; ``basis_`` holds the rows.
    An exact kernel fit that cannot fit in memory is refused before any work.

    ``optimize=True`` refines the grid's best point by gradient descent on the exact
    hold-out loss (:func:`rankjax.tune`, ``optimize_steps`` Adam steps in log λ and
    log γ, and per-feature scales with ``ard=True``; linear or Gaussian kernels; with a
    basis and ``ard=True``, the Nyström model's loss at :math:`O(m b^2)` a step) and keeps the
    refined point only when, cross-fitted (the descent on each random half of the queries,
    its point scored on the other half's hold-out), its per-query NDCG gain over the grid's
    point averages more than one standard error: the descent then runs on every query;
    else a warning and ``tune_.moved`` False; ``tune_`` holds the trajectory,
    ``evals_result_["tune"]`` its losses, ``verbose=k`` prints every k-th step.
    With a basis and ``ard=True`` on more rows than a step's plan
    (``tune_rows``: :math:`u b^2 steps \le 10^{11}`), the grid and
    the gradient run on a random subsample of ``u`` rows of whole queries (its λ the grid's
    times ``u / m``: ``cv_results_`` are that subsample's hold-out scores, listed at the λ
    you gave) and the chosen point is then held out on every row: ``lam_`` is on every
    row's scale, ``model_`` that hold-out's model and ``best_score_`` its NDCG on every row.
    With a basis and no ``ard``, a search instead (at most ``min(optimize_steps, 4)``
    points, each the exact hold-out of a finer λ grid around the best λ from one ``b x b``
    decomposition: the best γ, then golden-section points in γ between its grid
    neighbours; kept when its NDCG is higher; no ``tune_``): the gradient's steps cost 5x
    as much there for the same hold-out NDCG.

    A best point on the grid's edge extends the grid (``extend``, default 2 times in each
    of λ and γ): ``L`` more λ past the edge at the grid's spacing from one more hold-out
    (the same compiled program), or one more γ past a γ grid's edge at its outermost
    ratio, while the best stays on the edge; ``cv_results_["extended"]`` marks those
    points, and a best point still on the edge after the last extension warns
    (:class:`~rankjax.GridEdgeWarning`). ``extend=0`` keeps the grid as given.

    In float32 (the default of JAX, and of accelerators) the smallest λ of a kernel's grid
    may lie below what float32 resolves against the kernel's spectrum: those grid points
    score NaN in ``cv_results_`` and are never chosen. A grid you give warns of them
    (:class:`~rankjax.UnresolvedLambdaWarning`); the default grid starts above them instead:
    they are left out of ``cv_results_`` (a line with ``verbose`` names them), so no row of
    a default fit is NaN.
    """

    evals_axis = ("grid point", 0, False)        # one score per (λ, γ): no iterations

    def __init__(self, lams=DEFAULT_LAMS, *, gammas=None, folds=None, kernel=None,
                 gamma="mean", degree=2, coef0=1.0, basis="auto",
                 graph="query", normalized=True,
                 exclude_ties=False, score_k=10, random_state=0, optimize=False,
                 optimize_steps=20, ard=False, extend=EXTEND, feature_map="auto", verbose=0):
        self.optimize, self.optimize_steps, self.ard, self.verbose = optimize, optimize_steps, ard, verbose
        self.extend = extend
        self.feature_map = feature_map
        self.basis = basis
        self.lams, self.gammas, self.folds = lams, gammas, folds
        self.kernel, self.gamma, self.degree, self.coef0 = kernel, gamma, degree, coef0
        self.graph, self.normalized, self.exclude_ties = graph, normalized, exclude_ties
        self.score_k, self.random_state = score_k, random_state

    def fit(self, X, y, qid=None, *, group=None, sample_weight=None, group_weight=None,
            eval_set=None, eval_qid=None, eval_group=None):
        """Chooses (λ, γ) by the exact hold-out over queries, or with ``eval_set`` (as
        LightGBM/XGBoost, with ``eval_qid``/``eval_group``) by NDCG@``score_k`` on that set:
        every λ of the path from one decomposition per γ (``evals_result_`` in grid
        order, as ``cv_results_``). The selection is :func:`rankjax.select`."""
        optimize = check_flag(self.optimize, "optimize")
        X, y, seg = self._fit_inputs(X, y, qid, group)
        X, y, seg, weights = self._weighted(X, y, seg, sample_weight, group_weight)
        check_routing(self, qid, group, seg)
        graph = self._graph(seg, y, weights)
        verbose = _log.check_verbose(self.verbose)
        lams = np.asarray(self.lams, dtype=np.float64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnresolvedLambdaWarning)
            if self.feature_map == "auto" and self._map_kind() == "rank":  # the data chooses
                valid = (None if eval_set is None else
                         self._eval_rows(eval_set, eval_qid, eval_group))
                c = choose(self._candidates(optimize, verbose, X.shape[0]), X, y, seg, graph,
                           valid, lams)
                self.feature_map_ = c.feature_map
                sel, rows, features, kernel = c.selection, c.rows, c.features, c.kernel
                blend = c.blend
            else:
                sel, features = self._one_map(X, y, seg, graph, lams, optimize, verbose,
                                              eval_set, eval_qid, eval_group)
                kernel = "linear" if self.kernel in (None, "linear") else getattr(
                    self.kernel, "kind", self.kernel)
                rows, blend = final_rows(sel, features, kernel), None
        default = lams.shape == (len(DEFAULT_LAMS),) and np.allclose(lams, DEFAULT_LAMS, rtol=1e-12)
        for w in caught:            # the default grid's unresolved λ: a note, not a warning
            if default and issubclass(w.category, UnresolvedLambdaWarning):
                _log.info(verbose, "default grid: %s left out (the grid starts above the λ "
                          "this dtype resolves)", str(w.message).partition(" are ")[0])
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self.selection_ = sel
        self._results(sel, rows, features, kernel, unresolved=not default, blend=blend)
        if eval_set is not None:            # every grid point's score, as cv_results_
            self.evals_result_ = {"valid_0": {f"ndcg@{self.score_k}":
                                              self.cv_results_["mean_test_score"].tolist()}}
        if sel.trajectory is not None:
            self.tune_ = sel.trajectory
            self.evals_result_ = {"tune": {"cv_loss": sel.trajectory.loss_history.tolist()}}
        self.__dict__.pop("basis_", None)
        if sel.basis is not None:
            self.basis_ = sel.basis
        self.model_ = sel.model
        return self._finish_fit(seg)

    def _candidates(self, optimize, verbose, m):
        """The :class:`~rankjax.selection.candidates.Candidates` of this estimator's
        parameters (the kernel by name, its γ ladder, the route of ``basis``)."""
        b = basis_spec(self.basis, self.kernel, m, self.random_state, verbose)

        def ladder(rows):
            g0 = float(gamma_value(self.gamma, rows))
            if self.gammas is not None:
                return [float(gamma_value(g, rows)) for g in self.gammas], g0
            return [g0 * f for f in GAMMA_FACTORS] if isinstance(self.gamma, str) else [g0], g0

        return Candidates(
            kernel=lambda g: make_kernel(self.kernel, g, self.degree, self.coef0),
            ladder=ladder, route=lambda k: Auto.named("auto", k, b), folds=self.folds,
            seed=self.random_state, extend=self.extend, score_k=self.score_k,
            optimize=optimize, optimize_steps=self.optimize_steps, ard=self.ard,
            verbose=verbose, categorical=tuple(self._categorical()),
            identity=self.graph == "identity")

    def _one_map(self, X, y, seg, graph, lams, optimize, verbose, eval_set, eval_qid,
                 eval_group):
        """The selection of a linear model, a :class:`rankjax.Kernel` or the features as
        given (``feature_map=None``): one map (the standard map or none), the λ grid times
        the γ grid. Returns ``(Selection, features name)``."""
        X = self._mapped(X, y, seg)
        b = basis_spec(self.basis, self.kernel, X.shape[0], self.random_state, verbose)
        valid = None if eval_set is None else self._eval_data(eval_set, eval_qid, eval_group)
        kernels = [make_kernel(self.kernel, gamma, self.degree, self.coef0)
                   for gamma in self._gamma_grid(X)]
        solvers = [Auto.named("auto", k, b) for k in kernels]
        problem = Problem(X, y, graph, qid=seg if self.graph == "identity" else None,
                          valid=None if valid is None else Problem(*valid))
        sel = _select(problem, solvers, lams=lams, folds=self.folds, score_k=self.score_k,
                      optimize=optimize, optimize_steps=self.optimize_steps, ard=self.ard,
                      seed=self.random_state, verbose=verbose, extend=self.extend)
        kind = None if self.feature_map_ is None else self._map_kind()
        return sel, {None: "as given", "rank": "ranks", "standard": "standard"}[kind]

    def _gamma_grid(self, X):
        """The γ values of the grid (``"mean"``, ``"scale"``, ``"auto"`` resolved on ``X``); ``[None]``
        for the linear model, where ``gammas`` is an error (it would repeat each score)."""
        if self.kernel in (None, "linear"):
            if self.gammas is not None:
                raise ValueError("gammas is not used by the linear kernel: set kernel= or drop "
                                 "gammas")
            return [None]
        return [gamma_value(v, X) for v in ([self.gamma] if self.gammas is None else self.gammas)]

    def _results(self, sel, rows, features, kernel, unresolved=True, blend=None):
        """``lam_``, ``gamma_`` (a kernel model's), ``best_score_``, ``best_params_`` and
        scikit-learn's ``cv_results_`` (a row per hold-out point of every candidate,
        ``rows``; the final stage's rows ranked first, the chosen point 1). ``unresolved``
        False (the default grid): the points that scored NaN (λ the dtype does not resolve,
        never chosen) are left out. ``blend``: the chosen blend's ``{"kernel_weight",
        "linear_lam"}`` (in ``best_params_``); where blends were held out, ``cv_results_``
        has ``param_kernel_weight`` (NaN on the other rows)."""
        self.lam_, self.best_score_ = sel.lam, sel.score
        self.__dict__.pop("gamma_", None)
        self.best_params_ = {"features": features, "kernel": kernel, "lam": float(sel.lam)}
        if sel.gamma is not None:                # the linear model has no γ
            self.gamma_ = sel.gamma
            self.best_params_["gamma"] = float(sel.gamma)
        self.best_params_.update(blend or {})
        every = lambda f: np.concatenate([f(r) for r in rows])                # noqa: E731
        s = every(lambda r: np.asarray(r.scores, np.float64))
        keep = np.ones(s.shape, bool) if unresolved or np.isnan(s).all() else ~np.isnan(s)
        cat = lambda f: every(f)[keep]                                       # noqa: E731
        lams = cat(lambda r: np.asarray(r.lams, np.float64))
        gammas = cat(lambda r: np.full(r.lams.size, r.gamma, np.float64))
        s = s[keep]
        final = cat(lambda r: np.full(r.lams.size, r.stage == "final"))
        order = np.lexsort((-nan_last(s), ~final))
        rank = np.empty(len(s), int)
        rank[order] = np.arange(1, len(s) + 1)
        feats = cat(lambda r: np.full(r.lams.size, r.features))
        kerns = cat(lambda r: np.full(r.lams.size, r.kernel))
        weights = cat(lambda r: np.full(r.lams.size, np.nan) if r.kernel_weight is None
                      else np.asarray(r.kernel_weight, np.float64))
        linear = cat(lambda r: np.full(r.lams.size, r.linear_lam, np.float64))
        params = [dict({"features": str(f), "kernel": str(k), "lam": float(a)},
                       **({} if np.isnan(g) else {"gamma": float(g)}),
                       **({} if np.isnan(v) else {"kernel_weight": float(v), "linear_lam": float(u)}))
                  for f, k, a, g, v, u in zip(feats, kerns, lams, gammas, weights, linear)]
        self.cv_results_ = {"params": params, "param_features": feats, "param_kernel": kerns,
                            "param_lam": lams, "param_gamma": gammas,
                            "mean_test_score": s, "rank_test_score": rank,
                            "stage": np.where(final, "final", "screen"),
                            "extended": cat(lambda r: np.asarray(r.extended, bool))}
        if not np.all(np.isnan(weights)):
            self.cv_results_["param_kernel_weight"] = weights
