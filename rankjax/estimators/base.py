"""The estimators' shared base (:class:`Ranker`): input handling (arrays, sparse,
pandas, query ids or group sizes), evaluation sets, prediction, scoring (NDCG@10),
persistence (one model format, :mod:`~rankjax.estimators.persist`) and the kernel defaults.
"""
from __future__ import annotations

import jax
import numpy as np

from ..metrics import choice as _choice, graded as _metrics_graded
from ..kernels import kernel as _kernels
from .._core import log as _log
from ..solvers import AbstractSolver, predict
from ..solvers.models import feature_importances, feature_weights, on_features
from ..runtime.cache import use_disk_cache
from ..features.learn import learn_and_map, learn_feature_map
from ..features.maps import map_rows
from ..features.spread import warn_wide_spread
from .._core.checks import check_count, check_matrix
from .._core.queries import Segments
from ..graphs.build import query_graph
from .._core.sparse import as_dense, is_sparse, scale_columns, to_scipy
from . import persist
from .compat import NO_QUERIES, BaseEstimator, NotFittedError
from .defaults import gamma_value, make_kernel
from .frames import QUERY_COLUMNS, frame_values, is_frame, take_queries
from .inputs import (as_matrix, check_labels, check_shape, one_eval_set, query_segments,
                     query_weights)

MAPS = ("auto", "rank", "standard", None)
"""The estimators' ``feature_map`` values: ``"auto"`` (the estimator's own choice), a
:func:`~rankjax.learn_feature_map` kind learned without the labels, or None (as given)."""

class Ranker(BaseEstimator):
    """Shared input handling, prediction, scoring and persistence.

    Queries are given as ``qid`` (a query id per row, as XGBoost and SVMlight) or as
    ``group`` (query sizes in row order, as LightGBM), never both."""

    # what an estimator without the parameter means by it (those with it set their own)
    score_k = 10
    kernel = None
    solver = None
    graph = "query"
    normalized = True
    exclude_ties = False
    verbose = 0

    maps_model = True
    """Whether a learned ``feature_map_`` goes into ``model_`` (a model of feature rows)."""

    evals_axis = ("grid point", 0, True)
    """How ``plot.evals_curve`` draws ``evals_result_``: the x label, the first x value and
    whether ``best_iteration_`` is marked (each estimator sets its own)."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        persist.ESTIMATORS[cls.__name__] = cls    # load() finds the class of a file here

    # group sizes and group weights are not per-row: never routed by a meta-estimator
    # (use qid and sample_weight)
    __metadata_request__fit = {"qid": True, "sample_weight": True}
    __metadata_request__score = {"qid": True, "sample_weight": True}

    def _fit_kernel(self, X):
        """The kernel of this fit, with ``gamma`` (``"scale"``, ``"auto"`` or a number)
        resolved on the training rows into ``gamma_``; None for the linear model."""
        if self.kernel in (None, "linear") or isinstance(self.kernel, _kernels.Kernel):
            return make_kernel(self.kernel, None, self.degree, self.coef0)
        kern = make_kernel(self.kernel, gamma_value(self.gamma, X), self.degree, self.coef0)
        self.gamma_ = float(kern.gamma)
        return kern

    feature_map = None
    """``"auto"``: the rows go through a :class:`~rankjax.FeatureMap` learned at fit (an
    estimator with a ``feature_map`` parameter); None: as given."""

    def _map_kind(self):
        """The map this estimator learns: ``"rank"`` (a kernel by name, or
        ``feature_map="rank"``), ``"standard"`` (the linear model, or
        ``feature_map="standard"``) or None (``feature_map=None``, a Kernel or a solver
        object, whose parameters are the user's own, RankBoost)."""
        if self.feature_map not in MAPS:
            raise ValueError(f"feature_map must be one of {MAPS}, got {self.feature_map!r}")
        kernel = self.kernel
        if (self.feature_map is None or isinstance(kernel, _kernels.Kernel)
                or isinstance(self.solver, AbstractSolver)):
            return None
        if self.feature_map != "auto":
            return self.feature_map
        return "standard" if kernel in (None, "linear") else "rank"

    def _mapped(self, X, y, seg):
        """``X`` as the model sees it: through the map learned on these rows
        (``feature_map_``, :meth:`_map_kind`), or as given (``feature_map_`` None)."""
        kind = self._map_kind()
        cat = self._categorical()
        names = list(getattr(self, "feature_names_in_", ()))
        self.feature_map_ = None
        if kind is None:
            if cat:
                raise TypeError(f"X column {names[cat[0]]!r} is categorical: feature_map='auto' "
                                "reads its categories (a kernel or linear model by name)")
            if self.kernel not in (None, "linear") and not is_sparse(X):
                warn_wide_spread(X, stacklevel=4)
            return X
        if is_sparse(X) and kind == "standard":      # scaled, still sparse: the weights' map
            fm = learn_feature_map(X, kind="standard")
            self.feature_map_ = fm
            return scale_columns(X, fm.scale)
        self.feature_map_, rows = learn_and_map(as_dense(X), y, seg, kind, cat)
        return rows

    def _categorical(self):
        """The column indices of the categorical columns (a frame's)."""
        names = list(getattr(self, "feature_names_in_", ()))
        return [names.index(c) for c in self.categories_] if names else []

    def _eval_data(self, eval_set, eval_qid, eval_group):
        """``(X_valid, y_valid, seg_valid)`` of an evaluation set (the training map's)."""
        Xv, yv, segv = self._eval_rows(eval_set, eval_qid, eval_group)
        return through(self.feature_map_, Xv), yv, segv

    def _eval_rows(self, eval_set, eval_qid, eval_group):
        """``(X_valid, y_valid, seg_valid)`` of an evaluation set, its rows as given."""
        (Xv, yv), eval_qid, eval_group = one_eval_set(eval_set, eval_qid, eval_group)
        Xv, yv, segv, _ = self._inputs(Xv, yv, eval_qid, eval_group, ("eval_qid", "eval_group"),
                                       need_queries=True)
        return Xv, yv, segv

    def _eval_sequence(self, scores, yv, segv):
        """Scores ``[T, m_v]`` of the ``T`` successive models (rounds, components, ...) on
        the evaluation set: sets ``evals_result_`` (LightGBM's layout,
        ``{"valid_0": {"ndcg@k": [...]}}``), ``best_iteration_`` (how many steps the kept
        model has) and ``best_score_``, stopping after ``early_stopping_rounds`` steps
        without improvement; logs the scores with ``verbose``. Returns
        ``best_iteration_``."""
        k = self.score_k
        T = scores.shape[0]
        vals = np.asarray(_choice.select_lambda(np.arange(1.0, T + 1), scores, yv, segv,
                                              metric=_metrics_graded.ndcg, k=k).table, dtype=float)
        rounds = self.early_stopping_rounds
        if rounds is not None:
            rounds = check_count(rounds, "early_stopping_rounds")
        key = nan_last(vals)
        best, stop = 0, T
        for t in range(T):
            if key[t] > key[best]:
                best = t
            elif rounds is not None and t - best >= rounds:
                stop = t + 1
                break
        self._report(vals[:stop], first=1)
        self.best_iteration_ = best + 1
        self.best_score_ = float(vals[best])
        return best + 1

    def _report(self, vals, first=0, show=True):
        """``evals_result_`` (LightGBM's layout) of the per-step scores ``vals``, logged with
        ``verbose`` (step numbers from ``first``)."""
        name = f"ndcg@{self.score_k}"
        every = _log.check_verbose(self.verbose) if show else 0
        for t, v in enumerate(vals):
            if every and ((t + first) % every == 0 or t == len(vals) - 1):
                _log.info(every, "[%d]\tvalid_0's %s: %.6g", t + first, name, v)
        self.evals_result_ = {"valid_0": {name: np.asarray(vals, float).tolist()}}

    def _fit_inputs(self, X, y, qid, group):
        """``(X, y, seg)`` of a fit: the rows checked once (a device array passes through),
        the labels and the queries remapped once; records what the rows are (features,
        names, categories, a query column of a frame)."""
        self._one_way(X, qid, group, ("qid", "group"))
        self.qid_column_ = qid if isinstance(qid, str) else None
        X, qid = take_queries(X, qid, True, None)
        if qid is None and group is None and self.graph != "identity":
            self._no_queries(X, ("qid", "group"))
        frame = frame_values(X, None) if is_frame(X) else None
        X = checked_rows(X, frame, missing=self._map_kind() is not None)
        self._record_rows(X.shape[1], frame)
        m = X.shape[0]
        return X, check_labels(y, m), query_segments(qid, group, m)

    def _inputs(self, X, y=None, qid=None, group=None, names=("qid", "group"),
                need_queries=False):
        """``(X, y, seg, given)`` of rows after a fit (prediction, scoring, an evaluation
        set), checked against the fit's; ``given``: whether queries were passed."""
        self._one_way(X, qid, group, names)
        X, qid = take_queries(X, qid, False, self.qid_column_)
        if need_queries and qid is None and group is None and self.graph != "identity":
            self._no_queries(X, names)
        frame = frame_values(X, self.categories_) if is_frame(X) else None
        X = checked_rows(X, frame, missing=self.feature_map_ is not None)
        self._check_rows(X.shape[1], frame, names)
        m = X.shape[0]
        return (X, None if y is None else check_labels(y, m), query_segments(qid, group, m, names),
                qid is not None or group is not None)

    @staticmethod
    def _one_way(X, qid, group, names):
        if group is not None and qid is None and is_frame(X) and "qid" in X.columns:
            raise ValueError(f"pass {names[0]} or {names[1]}, not both (X has a 'qid' column)")

    def _no_queries(self, X, query_args):
        hint = [c for c in getattr(X, "columns", ()) if str(c).lower() in QUERY_COLUMNS]
        raise ValueError(
            f"{type(self).__name__}.fit needs the queries: pass {query_args[0]}= (a query id "
            f"per row) or {query_args[1]}= (query sizes in row order); for one query over "
            "all rows pass qid=np.zeros(len(X))"
            + (f". X has a column {hint[0]!r}: pass {query_args[0]}=X.pop({hint[0]!r})"
               if hint else ""))

    def _record_rows(self, n, frame):
        """A fit's record of its rows, the fitted attributes of an earlier fit cleared."""
        use_disk_cache()                           # once per process (rankjax._core.cache)
        self.__dict__.pop("gamma_", None)          # set again by a kernel fit
        self.feature_map_ = None                   # set again by _mapped
        self.categories_ = {} if frame is None else frame.categories
        self.n_features_in_ = n
        if frame is not None and frame.names is not None:
            self.feature_names_in_ = np.asarray(frame.names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _check_rows(self, n, frame, query_args):
        """Rows after a fit: its number of features and its feature names."""
        names = None if frame is None else frame.names
        if n != self.n_features_in_:
            what = "the eval_set's X" if query_args[0] == "eval_qid" else "X"
            raise ValueError(f"{what} has {n} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input")
        fitted = getattr(self, "feature_names_in_", None)      # absent: fitted without names
        if names is not None and fitted is not None and list(fitted) != names:
            raise ValueError("X has other feature names than those seen in fit")

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit first")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = self._map_kind() is not None
        return tags

    def _graph(self, seg, y, weights=None):
        return query_graph(seg, y, normalized=self.normalized,
                           exclude_ties=self.exclude_ties,
                           query_weights=weights)

    def _weighted(self, X, y, seg, sample_weight, group_weight):
        r"""``(X, y, seg, weights)`` of a fit: ``[Q]`` the query weights (the papers'
        :math:`\omega_c`, Pahikkala et al. 2009 §2.4), in the order of the sorted distinct
        query ids (the order of ``group``), from ``sample_weight`` (per row, constant within
        a query, as LightGBM's ``weight``) or ``group_weight`` (one per query, as XGBoost's
        ranking weights); None when neither is given (every query weighs 1). The rows of a
        query of weight 0 are dropped before anything is learned from them (the feature
        map, γ, folds and the basis): a zero weight is the same as leaving the query out."""
        w = self._query_weights(seg, sample_weight, group_weight)
        if w is None or np.all(w > 0):
            return X, y, seg, w
        keep = w[seg.seg] > 0
        rows = np.flatnonzero(keep)
        X = (to_scipy(X) if is_sparse(X) else X)[rows]          # scipy CSR or dense
        qids = seg.qids[w > 0]
        seg = Segments(np.searchsorted(np.flatnonzero(w > 0), seg.seg[rows]).astype(np.int32),
                       int(qids.size), qids)
        return X, y[rows], seg, w[w > 0]

    def _query_weights(self, seg, sample_weight, group_weight):
        if sample_weight is None and group_weight is None:
            return None
        if sample_weight is not None and group_weight is not None:
            raise ValueError("pass sample_weight (per row) or group_weight (per query), not both")
        if not self.graph != "identity":
            raise ValueError("sample_weight/group_weight weigh queries: graph='identity' (RLS "
                             "regression) has none")
        if group_weight is None:
            w = query_weights(sample_weight, seg)
        else:
            w = np.asarray(group_weight.to_numpy() if hasattr(group_weight, "to_numpy")
                           else group_weight)
            if w.dtype.kind not in "iuf":
                raise TypeError(f"group_weight must hold numbers, got dtype {w.dtype}")
            w = w.astype(np.float64)
            if w.shape != (seg.num_queries,):
                raise ValueError(f"group_weight must have shape [{seg.num_queries}] (one per "
                                 f"query, in the order of group / the sorted qid), got {w.shape}")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError("group_weight must be finite and >= 0")
        if not np.any(w > 0):
            raise ValueError(f"{'sample_weight' if group_weight is None else 'group_weight'}: "
                             "every query weighs 0 (nothing to learn from)")
        return w

    def predict(self, X):
        """Scores ``[m]`` of new rows (higher ranks first)."""
        self._check_fitted()
        X = self._inputs(X)[0]
        return np.asarray(self._scores(X))

    def _scores(self, X):
        return predict(self.model_, X)

    def score(self, X, y, qid=None, *, group=None, sample_weight=None):
        """Mean NDCG@``score_k`` over the queries of ``(X, y, qid)`` (or ``group``
        sizes). ``sample_weight`` (per row, constant within a query) weights the queries.
        A model fitted on several queries refuses rows without their queries (a
        ``ValueError`` naming scikit-learn's metadata routing, which passes ``qid`` here);
        a model of one query (or RLS regression) ranks them as one."""
        self._check_fitted()
        X, y, seg, given = self._inputs(X, y, qid, group)
        if not given and self.num_queries_ > 1:
            raise ValueError(f"{type(self).__name__}.score got no qid: {NO_QUERIES}")
        f = self._scores(X)
        k = self.score_k
        if sample_weight is None:
            return float(_metrics_graded.ndcg(f, y, seg, k=k))
        w = query_weights(sample_weight, seg)
        pq = _metrics_graded.ndcg(f, y, seg, k=k, per_query=True)
        valid = np.asarray(pq.valid) & (w > 0)
        if not valid.any():
            return float("nan")
        return float(np.sum(np.asarray(pq.values)[valid] * w[valid]) / np.sum(w[valid]))

    def _finish_fit(self, seg):
        self.num_queries_ = seg.num_queries
        if self.feature_map_ is not None and self.maps_model:
            self.model_ = on_features(self.feature_map_, self.model_)
        jax.block_until_ready(self.model_)      # fit returns a ready model (async dispatch)
        w = feature_weights(self.model_)
        if w is not None:
            self.coef_ = np.asarray(w)          # linear models: the weights on the user's features
        carried = (self.model_ if self.feature_map_ is None or self.maps_model
                   else on_features(self.feature_map_, self.model_))
        imp = feature_importances(carried)
        if imp is not None:
            self.feature_importances_ = imp
        return self

    def save(self, path, **meta) -> None:
        """Saves the fitted estimator (learner, hyper-parameters, fitted attributes with
        ``cv_results_`` and ``evals_result_``, feature count and names) atomically, in
        the one model format (:data:`rankjax.io.MODEL_VERSION`; the command line
        reads and writes the same files); ``meta``: extra scalar metadata.
        :func:`~rankjax.estimators.load` reads it back."""
        self._check_fitted()
        persist.save(self, path, **meta)


def checked_rows(X, frame, missing: bool):
    """The rows as a matrix (a frame's values), 2-D and non-empty; dense rows checked once
    (NaN allowed where a feature map fills it)."""
    X = as_matrix(X if frame is None else frame.values)
    check_shape(X)
    return X if is_sparse(X) else check_matrix(X, missing=missing)


def through(fm, X):
    """Rows ``X`` through the feature map ``fm`` (None: as given; sparse rows under a
    scaling stay sparse)."""
    if fm is None:
        return X
    if is_sparse(X) and fm.fill is None:
        return scale_columns(X, fm.scale)
    return map_rows(fm, as_dense(X))


def nan_last(v):
    """NaN (undefined metric) ranks below every number."""
    return np.where(np.isnan(v), -np.inf, v)

