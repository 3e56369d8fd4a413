"""Estimators over the other learners: RankSVM (L2 loss, TRON), KPCRank and RankBoost
(CG RankRLS is ``RankRLS(solver="cg")``).
"""
from __future__ import annotations

import numpy as np

from .._problem import Problem
from ..solvers import LinearModel, is_linear, predict
from ..kernels import kernel as _kernels
from ..learners import kpcrank as _kpcrank, rankboost as _rankboost, ranksvm as _ranksvm
from .._core import log as _log
from ..metrics import ndcg
from .._core.checks import check_count
from .._core.sparse import as_dense
from .compat import check_routing
from .base import Ranker
from .defaults import make_kernel


class RankSVM(Ranker):
    """L2-loss RankSVM (linear by TRON, Lee & Lin 2014; or kernel with ``basis`` rows).
    ``feature_map``: as :class:`RankRLS` (a kernel given by name sees every column by its
    ranks, the linear model standardised columns)."""

    evals_axis = ("Newton iteration", 0, True)

    def __init__(self, C=1.0, *, kernel=None, gamma="mean", degree=2, coef0=1.0, basis=None,
                 tol=1e-3, max_iter=1000, early_stopping_rounds=None, verbose=False, score_k=10,
                 random_state=0, feature_map="auto"):
        self.C, self.kernel, self.gamma, self.degree, self.coef0 = C, kernel, gamma, degree, coef0
        self.feature_map = feature_map
        self.basis, self.tol, self.max_iter = basis, tol, max_iter
        self.early_stopping_rounds, self.verbose = early_stopping_rounds, verbose
        self.score_k, self.random_state = score_k, random_state

    def fit(self, X, y, qid=None, *, group=None, sample_weight=None, group_weight=None,
            eval_set=None, eval_qid=None, eval_group=None):
        """With ``eval_set`` (linear model) every Newton iterate is scored by NDCG@``score_k``
        on it, the best is kept and the loop stops after ``early_stopping_rounds`` steps
        without improvement (``evals_result_``, ``best_iteration_``, ``best_score_``)."""
        X, y, seg = self._fit_inputs(X, y, qid, group)
        X, y, seg, weights = self._weighted(X, y, seg, sample_weight, group_weight)
        check_routing(self, qid, group, seg)
        X = self._mapped(X, y, seg)
        kern = self._fit_kernel(X)
        if eval_set is not None and kern is not None:
            raise ValueError("eval_set (early stopping) is supported by the linear RankSVM; "
                             "choose C on a validation set for the kernel model")
        if kern is None:
            kw = {}
            if eval_set is not None:
                Xv, yv, sv = self._eval_data(eval_set, eval_qid, eval_group)
                rounds = self.early_stopping_rounds
                kw = dict(valid=Problem(Xv, yv, sv), metric=ndcg,
                          metric_kwargs={"k": self.score_k},
                          patience=self.max_iter + 1 if rounds is None else rounds)
            r = _ranksvm.ranksvm_l2(X, y, seg, C=self.C, tol=self.tol, max_iter=self.max_iter,
                                    query_weights=weights,
                                    verbose=_log.check_verbose(self.verbose), **kw)
            self.model_ = LinearModel(r.weights)
            self.coef_ = np.asarray(r.weights)
            self.converged_ = bool(r.converged)
            self.n_iter_ = int(r.iterations)
            if eval_set is not None:           # the loop minimizes: its history is -NDCG
                hist = -np.asarray(r.valid_history, dtype=float)[:self.n_iter_ + 1]
                self._report(hist, show=False)          # the loop logged its progress
                self.best_iteration_ = int(r.best_iteration)
                self.best_score_ = float(hist[self.best_iteration_])
        else:
            self.model_ = _ranksvm.ranksvm_kernel(
                as_dense(X), y, seg, kernel=kern, C=self.C, seed=self.random_state,
                basis=self.basis if self.basis is not None else min(X.shape[0], 1000),
                tol=self.tol, max_iter=self.max_iter, query_weights=weights,
                verbose=_log.check_verbose(self.verbose))
        return self._finish_fit(seg)

    def _scores(self, X):
        lin = is_linear(self.model_)
        return predict(self.model_, X if lin else as_dense(X))


class KPCRank(Ranker):
    """Kernel principal component ranking (Pahikkala et al. 2009, §3.6): RankRLS on
    the leading ``n_components`` kernel principal components. ``feature_map``: as
    :class:`RankRLS` (``feature_map_`` maps the rows of later calls; ``model_`` scores a
    kernel matrix)."""

    evals_axis = ("components", 1, True)
    maps_model = False              # model_ scores a kernel matrix: _scores maps the rows

    def __init__(self, n_components=10, *, lam=0.0, kernel="gaussian", gamma="mean", degree=2,
                 coef0=1.0, normalized=True, early_stopping_rounds=None, verbose=False,
                 score_k=10, feature_map="auto"):
        self.n_components, self.lam, self.kernel = n_components, lam, kernel
        self.feature_map = feature_map
        self.gamma, self.degree, self.coef0 = gamma, degree, coef0
        self.normalized, self.score_k = normalized, score_k
        self.early_stopping_rounds, self.verbose = early_stopping_rounds, verbose

    def _kern(self):
        """The fitted kernel (``gamma_`` resolved at fit)."""
        return (make_kernel(self.kernel, getattr(self, "gamma_", None), self.degree, self.coef0)
                or _kernels.linear_kernel())

    def fit(self, X, y, qid=None, *, group=None, sample_weight=None, group_weight=None,
            eval_set=None, eval_qid=None, eval_group=None):
        """With ``eval_set`` the models of ``1..n_components`` components (one
        decomposition) are scored on it and the best number is kept (``best_iteration_``
        components; ``evals_result_``; ``early_stopping_rounds`` as for boosting)."""
        X, y, seg = self._fit_inputs(X, y, qid, group)
        X, y, seg, weights = self._weighted(X, y, seg, sample_weight, group_weight)
        check_routing(self, qid, group, seg)
        if not 1 <= check_count(self.n_components, "n_components") <= X.shape[0]:
            raise ValueError(f"n_components must be between 1 and {X.shape[0]} (the training "
                             f"rows), got {self.n_components}")
        self.X_train_ = as_dense(self._mapped(X, y, seg))   # mapped rows (kernels of later calls)
        kern = self._fit_kernel(self.X_train_) or _kernels.linear_kernel()
        stages = _log.Stages(2 + (eval_set is not None), "KPCRank stage",
                             _log.check_verbose(self.verbose))
        K = _log.ready(_kernels.kernel_matrix(kern, self.X_train_))
        stages.done(f"kernel matrix {X.shape[0]} x {X.shape[0]}")
        g = self._graph(seg, y, weights)
        if eval_set is None:
            self.model_ = _log.ready(_kpcrank.kpcrank(K, y, g, components=self.n_components,
                                                      lam=self.lam))
            stages.done(f"components ({self.n_components})")
            return self._finish_fit(seg)
        Xv, yv, sv = self._eval_data(eval_set, eval_qid, eval_group)
        Kv = _kernels.kernel_matrix(kern, as_dense(Xv), self.X_train_)
        path = _log.ready(_kpcrank.kpcrank_path(K, y, g, components=self.n_components,
                                                lam=self.lam, K_valid=Kv))
        stages.done(f"components ({self.n_components})")
        p = self._eval_sequence(path.valid_scores, yv, sv)
        stages.done("scored on the evaluation set")
        self.model_ = _kpcrank.KPCModel(path.coef[p - 1], path.offset[p - 1])
        return self._finish_fit(seg)

    def _scores(self, X):
        X = as_dense(X) if self.feature_map_ is None else self.feature_map_(as_dense(X))
        return self.model_.predict(_kernels.kernel_matrix(self._kern(), X, self.X_train_))


class RankBoost(Ranker):
    """RankBoost with threshold weak rankers (Freund et al. 2003)."""

    evals_axis = ("boosting round", 1, True)

    def __init__(self, rounds=100, *, num_thresholds=32, early_stopping_rounds=None,
                 verbose=False, score_k=10):
        self.rounds, self.num_thresholds, self.score_k = rounds, num_thresholds, score_k
        self.early_stopping_rounds, self.verbose = early_stopping_rounds, verbose

    def fit(self, X, y, qid=None, *, group=None, sample_weight=None, group_weight=None,
            eval_set=None, eval_qid=None, eval_group=None):
        """With ``eval_set`` every round's model is scored (NDCG@``score_k``) and the model
        is cut at the best round (``best_iteration_`` rounds), stopping the search after
        ``early_stopping_rounds`` rounds without improvement (``evals_result_``)."""
        X, y, seg = self._fit_inputs(X, y, qid, group)
        X, y, seg, weights = self._weighted(X, y, seg, sample_weight, group_weight)
        check_routing(self, qid, group, seg)
        model = _rankboost.rankboost(as_dense(X), y, seg, rounds=self.rounds, query_weights=weights,
                                     num_thresholds=self.num_thresholds,
                                     verbose=_log.check_verbose(self.verbose))
        if eval_set is not None:
            Xv, yv, sv = self._eval_data(eval_set, eval_qid, eval_group)
            keep = self._eval_sequence(_rankboost.rankboost_predict(model, Xv, staged=True),
                                       yv, sv)
            model = model._replace(feature=model.feature[:keep], threshold=model.threshold[:keep],
                                   alpha=model.alpha[:keep], r=model.r[:keep])
        self.model_ = model
        # the weight of the rounds that split on each feature, normalised to sum to 1
        imp = np.bincount(np.asarray(model.feature), np.abs(np.asarray(model.alpha, np.float64)),
                          minlength=X.shape[1])
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        return self._finish_fit(seg)

    def _scores(self, X):
        return _rankboost.rankboost_predict(self.model_, as_dense(X))
