"""RankRLS estimators: the closed form (:class:`RankRLS`) and the cross-validated one
(:class:`RankRLSCV`: exact leave-query-out / k-fold over a λ grid and, for kernels,
a γ grid; Pahikkala et al. 2009, §3.2-3.3).
"""
from __future__ import annotations

import jax
import numpy as np

from .. import _cv, _folds, _holdout, _kernels, _metrics_graded, _nystrom, _path, _rankrls, _tune
from .._checks import check_count, check_flag
from .._memory import kernel_plan
from .._graph_build import identity_graph
from .._sparse import as_dense
from .base import Ranker, basis_size, gamma_value, make_kernel, nan_last


class RankRLS(Ranker):
    """RankRLS (Pahikkala et al. 2009): linear (primal, or dual when there are more
    features than rows), kernel, or Nyström with ``basis`` rows; ``graph="query"``
    ranks within queries, ``"identity"`` is RLS regression.

    Args:
      lam: λ > 0. kernel: ``None``/``"linear"``, ``"gaussian"``, ``"polynomial"``
        or a :class:`rankjax.Kernel`; gamma, degree, coef0 its parameters.
      basis: ``"auto"`` (exact kernel up to :data:`AUTO_BASIS_ROWS` rows, above it a
        Nyström basis of :data:`AUTO_BASIS_SIZE` rows), ``None`` (always exact) or the
        number of basis rows of the Nyström approximation.
      normalized, exclude_ties: query-graph options. score_k: NDCG cut-off of
        ``score``. random_state: seed of the basis rows.
    """

    def __init__(self, lam=1.0, *, kernel=None, gamma="scale", degree=2, coef0=1.0, basis="auto",
                 graph="query", normalized=True, exclude_ties=False, score_k=10,
                 random_state=0):
        self.lam, self.kernel, self.gamma, self.degree, self.coef0 = lam, kernel, gamma, degree, coef0
        self.basis, self.graph, self.normalized = basis, graph, normalized
        self.exclude_ties, self.score_k, self.random_state = exclude_ties, score_k, random_state

    def _graph(self, seg, y):
        if self.graph == "identity":
            return identity_graph(seg.seg.shape[0])
        if self.graph != "query":
            raise ValueError(f"graph must be 'query' or 'identity', got {self.graph!r}")
        return super()._graph(seg, y)

    def fit(self, X, y, qid=None, *, group=None):
        X, y, seg, _ = self._inputs(X, y, qid, fit=True, group=group, need_queries=True)
        g = self._graph(seg, y)
        self.model_ = _fit_rankrls(X, y, g, self.lam, self._fit_kernel(X),
                                   basis_size(self.basis, self.kernel, X.shape[0]), self.random_state)
        return self._finish_fit(seg)

    def _scores(self, X):
        f = _rankrls.predict(self.model_, X if _rankrls.is_linear(self.model_) else as_dense(X))
        return f[0] if _path.is_path(self.model_) else f


def _fit_rankrls(X, y, g, lam, kern, basis, seed):
    """The model of one λ: primal when ``n <= m``, else the dual with a linear kernel
    (``w = X^T A``); a kernel model; or a one-λ Nyström path."""
    m, n = X.shape
    if basis is not None:
        if kern is None:
            kern = _kernels.linear_kernel()
        return _path.rankrls_nystrom_path(as_dense(X), y, g, lams=[lam], kernel=kern, basis=basis,
                                          seed=seed)
    if kern is not None:
        return _rankrls.rankrls_kernel(as_dense(X), y, g, lam=lam, kernel=kern)
    if n <= m:
        return _rankrls.rankrls_primal(X, y, g, lam=lam)
    Xd = as_dense(X)                         # more features than rows: an m x m system
    A = _rankrls.rankrls_dual(Xd @ Xd.T, y, g, lam=lam).coef
    return _rankrls.LinearModel(Xd.T @ A)


class RankRLSCV(RankRLS):
    """RankRLS with λ (and a kernel's ``gamma``) chosen by exact leave-query-out
    (``cv=None``) or k-fold over queries (``cv=k``): one decomposition per kernel for
    the whole λ grid (Pahikkala et al. 2009, §3.3), then a refit on all rows.

    Attributes (after fit): ``lam_``, ``gamma_``, ``best_score_`` and
    ``cv_results_`` (``params``, ``param_lam``, ``param_gamma``,
    ``mean_test_score``, ``rank_test_score``), scored by NDCG@``score_k``.

    ``basis`` (``"auto"``, ``None`` or an int, as :class:`RankRLS`) with a kernel uses the
    Nyström model: per γ one ``b x b`` decomposition gives the exact hold-out of the
    whole λ grid and every λ's model (no refit); ``basis_method`` ``"uniform"`` or
    ``"kmeans++"`` (:func:`rankjax.nystrom_basis`); ``basis_`` holds the rows. With a
    basis, ``optimize=True`` refines γ by golden-section search on the hold-out NDCG.
    An exact kernel fit that cannot fit in memory is refused before any work.

    ``optimize=True`` refines the grid's best point by gradient descent on the exact
    hold-out loss (:func:`rankjax.tune`, ``optimize_steps`` Adam steps in log λ and
    log γ; linear or Gaussian kernels) and keeps the refined
    point when its hold-out NDCG is not below the grid's; ``tune_`` holds the
    trajectory.
    """

    evals_axis = ("grid point", 0, False)        # one score per (λ, γ): no iterations

    def __init__(self, lams=tuple(np.logspace(-3, 3, 13)), *, gammas=None, cv=None, kernel=None,
                 gamma="scale", degree=2, coef0=1.0, basis="auto", basis_method="uniform",
                 graph="query", normalized=True,
                 exclude_ties=False, score_k=10, random_state=0, optimize=False,
                 optimize_steps=20):
        self.optimize, self.optimize_steps = optimize, optimize_steps
        self.basis, self.basis_method = basis, basis_method
        self.lams, self.gammas, self.cv = lams, gammas, cv
        self.kernel, self.gamma, self.degree, self.coef0 = kernel, gamma, degree, coef0
        self.graph, self.normalized, self.exclude_ties = graph, normalized, exclude_ties
        self.score_k, self.random_state = score_k, random_state

    def fit(self, X, y, qid=None, *, group=None, eval_set=None, eval_qid=None, eval_group=None):
        """Chooses (λ, γ) by the exact hold-out over queries, or with ``eval_set`` (as
        LightGBM/XGBoost, with ``eval_qid``/``eval_group``) by NDCG@``score_k`` on that set:
        every λ of the path from one decomposition per γ (``evals_result_`` in grid
        order, as ``cv_results_``)."""
        optimize = check_flag(self.optimize, "optimize")
        X, y, seg, _ = self._inputs(X, y, qid, fit=True, group=group, need_queries=True)
        b = basis_size(self.basis, self.kernel, X.shape[0])
        if eval_set is not None:
            if optimize:
                raise ValueError("optimize=True refines the cross-validation choice; with "
                                 "eval_set the grid is scored on the evaluation set: drop one")
            return self._fit_on_eval_set(X, y, seg, b, self._eval_data(eval_set, eval_qid,
                                                                        eval_group))
        kind = self._tune_kind() if optimize and b is None else None
        if b is None and self.kernel not in (None, "linear"):     # before any work
            kernel_plan(X.shape[0], np.result_type(float), 7 + (12 if optimize else 0),
                        "RankRLSCV with an exact kernel (basis=None)")
        if X.shape[0] < 2:
            raise ValueError("RankRLSCV cross-validates and needs at least 2 rows in 2 queries, "
                             "got n_samples=1")
        g = self._graph(seg, y)
        folds = _folds.make_folds(g, self.cv, seed=self.random_state)
        lams = np.asarray(self.lams, dtype=np.float64)
        gammas = self._gamma_grid(X)
        rows, scores, self._coefs = [], [], {}
        for gamma in gammas:                          # one decomposition per kernel
            kern = make_kernel(self.kernel, gamma, self.degree, self.coef0)
            if kern is None:
                h = _holdout.holdout_primal(as_dense(X), y, g, lams=lams, folds=folds)
            elif b is not None:
                h = self._nystrom_holdout(X, y, g, folds, lams, kern, b, gamma)
            else:
                h = _holdout.holdout_dual(_kernels.kernel_matrix(kern, as_dense(X)), y, g, lams=lams,
                                     folds=folds)
            table = _cv.cross_validate(h, y, seg, metric=_metrics_graded.ndcg, k=self.score_k).table
            rows += [(float(lam), None if gamma is None else float(gamma)) for lam in lams]
            scores.append(np.asarray(table))
        self._choose(rows, np.concatenate(scores))
        if kind is not None:
            self._refine(X, y, seg, g, folds, kind)
        elif optimize and b is not None:
            self._refine_gamma(X, y, seg, g, folds, lams, b, gammas)
        kern = make_kernel(self.kernel, getattr(self, "gamma_", None), self.degree, self.coef0)
        if b is not None:
            self.model_ = self._nystrom_model(lams, kern)
        else:
            self.model_ = _fit_rankrls(X, y, g, self.lam_, kern, None, self.random_state)
        del self._coefs
        return self._finish_fit(seg)

    def _gamma_grid(self, X):
        """The γ values of the grid (``"scale"``/``"auto"`` resolved on ``X``); ``[None]``
        for the linear model, where ``gammas`` is an error (it would repeat each score)."""
        if self.kernel in (None, "linear"):
            if self.gammas is not None:
                raise ValueError("gammas is not used by the linear kernel: set kernel= or drop "
                                 "gammas")
            return [None]
        return [gamma_value(v, X) for v in ([self.gamma] if self.gammas is None else self.gammas)]

    def _choose(self, rows, s):
        """``lam_``, ``gamma_``, ``best_score_`` and ``cv_results_`` from the scores ``s``
        of the grid points ``rows`` ((λ, γ) pairs)."""
        if np.all(np.isnan(s)):
            raise ValueError("NDCG is undefined for every λ (no query has a relevant document)")
        best = int(np.nanargmax(s))
        self.lam_, gamma = rows[best]
        if gamma is not None:                    # the linear model has no γ
            self.gamma_ = gamma
        self.best_score_ = float(s[best])
        order = np.argsort(-nan_last(s), kind="stable")
        rank = np.empty(len(s), int)
        rank[order] = np.arange(1, len(s) + 1)
        linear = rows[0][1] is None
        self.cv_results_ = {"params": [{"lam": a} if linear else {"lam": a, "gamma": b}
                                       for a, b in rows],
                            "param_lam": np.array([a for a, _ in rows]),
                            "mean_test_score": s, "rank_test_score": rank}
        if not linear:
            self.cv_results_["param_gamma"] = np.array([b for _, b in rows])
        return best

    def _fit_on_eval_set(self, X, y, seg, b, valid):
        """(λ, γ) by NDCG on the evaluation set: the validation scores of every λ's model
        come with the path (one decomposition per γ)."""
        Xv, yv, sv = valid
        g = self._graph(seg, y)
        lams = np.asarray(self.lams, dtype=np.float64)
        gammas = self._gamma_grid(X)
        if b is None and self.kernel not in (None, "linear"):
            kernel_plan(X.shape[0], np.result_type(float), 4, "RankRLSCV with an exact kernel")
        rows, scores, models = [], [], []
        for gamma in gammas:
            kern = make_kernel(self.kernel, gamma, self.degree, self.coef0)
            if kern is None:
                path = _path.rankrls_primal_path(X, y, g, lams=lams, X_valid=Xv)
            elif b is not None:
                Xd = as_dense(X)
                idx = _nystrom.nystrom_basis(Xd, b, kernel=kern, method=self.basis_method,
                                             seed=self.random_state)
                path = _path.rankrls_nystrom_path(Xd, y, g, lams=lams, kernel=kern, basis=idx,
                                                  X_valid=as_dense(Xv))
            else:
                Xd = as_dense(X)
                path = _path.rankrls_dual_path(_kernels.kernel_matrix(kern, Xd), y, g, lams=lams,
                                               K_valid=_kernels.kernel_matrix(kern, as_dense(Xv), Xd))
            table = _path.select_lambda(lams, path.valid_scores, yv, sv, metric=_metrics_graded.ndcg,
                                        k=self.score_k).table
            rows += [(float(lam), None if gamma is None else float(gamma)) for lam in lams]
            scores.append(np.asarray(table, dtype=float))
            models.append(path)
        s = np.concatenate(scores)
        best = self._choose(rows, s)
        self.evals_result_ = {"valid_0": {f"ndcg@{self.score_k}": s.tolist()}}
        path, i = models[best // lams.size], best % lams.size
        chosen = _path.model_at(path, i)
        if chosen is not None:
            self.model_ = chosen
            if _path.is_path(chosen):           # Nyström: the basis rows travel with it
                self.basis_ = np.asarray(chosen.basis)
        else:                                   # exact kernel: the chosen λ's model
            self.model_ = _fit_rankrls(X, y, g, self.lam_, make_kernel(self.kernel, self.gamma_,
                                                                   self.degree, self.coef0),
                                       None, self.random_state)
        return self._finish_fit(seg)

    def _nystrom_holdout(self, X, y, g, folds, lams, kern, b, gamma):
        """The exact hold-out of the Nyström model for the λ grid (one ``eigh`` of
        ``b x b``); the full-data coefficients of every λ are kept (no refit)."""
        Xd = as_dense(X)
        idx = _nystrom.nystrom_basis(Xd, b, kernel=kern, method=self.basis_method,
                                     seed=self.random_state)
        _, XR, mask = _nystrom.padded_basis(Xd, idx)
        pred, coef = _holdout.nystrom_holdout_core(jax.numpy.asarray(Xd), XR, mask, jax.numpy.asarray(
            y, XR.dtype), g, jax.numpy.asarray(lams, XR.dtype), folds, kern, None)
        self._coefs[float(gamma)] = (idx, XR[:b], coef[:, :b])
        return _holdout.HoldOut(lams, pred, folds)

    def _nystrom_model(self, lams, kern):
        idx, XR, coef = self._coefs[float(self.gamma_)]
        i = int(np.argmin(np.abs(np.log(lams) - np.log(self.lam_))))     # λ_ is a grid point
        self.basis_ = np.asarray(idx)
        return _path.NystromPath(np.asarray([self.lam_]), coef[i][None], jax.numpy.asarray(idx), XR,
                                 kern, None, None)

    def _refine_gamma(self, X, y, seg, g, folds, lams, b, gammas, steps=None):
        """``optimize=True`` with a Nyström basis: golden-section search over log γ between
        the grid's neighbours of the best γ, each point scored by the exact hold-out of the
        whole λ grid (one ``b x b`` decomposition; a gradient step through the ``m x b``
        features would cost about three). Keeps a point only when its NDCG is higher."""
        steps = check_count(self.optimize_steps if steps is None else steps, "optimize_steps")
        grid = np.sort(np.asarray(gammas, float))
        j = int(np.searchsorted(grid, self.gamma_))
        lo = np.log(grid[j - 1] if j > 0 else self.gamma_ / 4)
        hi = np.log(grid[j + 1] if j + 1 < grid.size else self.gamma_ * 4)
        ratio = (np.sqrt(5) - 1) / 2
        cache = {}

        def score(lg):
            if lg not in cache:
                gamma = float(np.exp(lg))
                kern = make_kernel(self.kernel, gamma, self.degree, self.coef0)
                h = self._nystrom_holdout(X, y, g, folds, lams, kern, b, gamma)
                t = np.asarray(_cv.cross_validate(h, y, seg, metric=_metrics_graded.ndcg,
                                                  k=self.score_k).table)
                cache[lg] = (np.nanmax(t) if np.any(np.isfinite(t)) else -np.inf,
                             float(lams[int(np.nanargmax(t))]) if np.any(np.isfinite(t)) else None)
            return cache[lg][0]

        a, c = lo + (1 - ratio) * (hi - lo), lo + ratio * (hi - lo)
        for _ in range(max(1, min(steps, 4) - 2)):       # at most 4 decompositions
            if score(a) >= score(c):
                hi, c = c, a
                a = lo + (1 - ratio) * (hi - lo)
            else:
                lo, a = a, c
                c = lo + ratio * (hi - lo)
        best = max(cache, key=lambda k: cache[k][0])
        self.tune_ = {"log_gamma": np.array(list(cache)), "score": np.array([v[0] for v in cache.values()])}
        if cache[best][0] > self.best_score_:
            self.best_score_, self.lam_ = float(cache[best][0]), cache[best][1]
            self.gamma_ = float(np.exp(best))

    def _tune_kind(self):
        """The kernel ``tune`` learns (checked before the grid is computed, not after)."""
        kern = make_kernel(self.kernel, 1.0, self.degree, self.coef0)
        kind = "linear" if kern is None else kern.kind
        if kind not in ("linear", "gaussian"):
            raise ValueError(f"optimize=True learns linear and Gaussian kernels, got {kind!r}")
        check_count(self.optimize_steps, "optimize_steps")
        return kind

    def _refine(self, X, y, seg, g, folds, kind):
        kern = make_kernel(self.kernel, getattr(self, "gamma_", None), self.degree, self.coef0)
        r = _tune.tune(as_dense(X), y, g, kernel=kind, lam=self.lam_,
                       gamma=None if kern is None else float(kern.gamma), folds=folds,
                       steps=self.optimize_steps, learning_rate=0.1)
        self.tune_ = r
        best = int(np.argmin(r.loss_history))
        params = {k: jax.numpy.asarray(v[best]) for k, v in r.params_history.items()}
        f = _tune.cv_predictions(params, as_dense(X), y, g, folds, kind)
        score = float(_metrics_graded.ndcg(f, y, seg, k=self.score_k))
        if np.isfinite(score) and score >= self.best_score_:
            self.lam_, self.best_score_ = float(np.exp(params["log_lam"])), score
            if kern is not None:
                self.gamma_ = float(np.exp(params["log_gamma"]))
