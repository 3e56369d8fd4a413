"""The estimators' shared base (:class:`Ranker`): input handling (arrays, sparse,
pandas, query ids or group sizes), evaluation sets, prediction, scoring (NDCG@10),
persistence (one model format, :func:`load`) and the kernel defaults.
"""
from __future__ import annotations

import inspect
import sys

import jax
import numpy as np
import scipy.sparse as sp

from ..metrics import choice as _choice, graded as _metrics_graded
from ..kernels import kernel as _kernels
from .._core import log as _log
from ..solvers import AbstractSolver, predict
from ..solvers.models import feature_importances, feature_weights, on_features
from .. import io
from .._core.cache import use_disk_cache
from ..features.learn import learn_and_map, learn_feature_map
from ..features.maps import map_rows
from ..features.spread import warn_unresolved
from .._core.checks import (Segments, check_count, check_matrix, check_targets, segment_ids)
from ..graphs.build import query_graph
from .._core.sparse import as_dense, is_bcoo, is_scipy_sparse, is_sparse, scale_columns
from .defaults import gamma_value, make_kernel
from .frames import QUERY_COLUMNS, frame_values, is_frame, take_queries
from ..io.groups import qid_from_sizes

try:                                            # scikit-learn is an optional extra
    from sklearn.base import BaseEstimator as _Base
    from sklearn.exceptions import NotFittedError as _NotFitted
except ImportError:                             # pragma: no cover - exercised without sklearn
    class _NotFitted(ValueError, AttributeError):
        pass

    class _Base:
        @classmethod
        def _get_param_names(cls):
            sig = inspect.signature(cls.__init__)
            return sorted(p for p in sig.parameters if p != "self")

        def get_params(self, deep=True):
            return {k: getattr(self, k) for k in self._get_param_names()}

        def set_params(self, **params):
            for k, v in params.items():
                if k not in self._get_param_names():
                    raise ValueError(f"invalid parameter {k!r} for {type(self).__name__}")
                setattr(self, k, v)
            return self

        def __repr__(self):
            args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
            return f"{type(self).__name__}({args})"


def as_matrix(X):
    """Dense numpy, or CSR for scipy.sparse / BCOO input (converted once)."""
    if getattr(X, "dtype", None) is not None and np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError("Complex data not supported: X must be real")
    if is_scipy_sparse(X):
        return sp.csr_matrix(X, dtype=np.float64 if X.dtype.kind != "f" else X.dtype)
    if is_bcoo(X):
        return X
    if isinstance(X, jax.Array):
        return X
    X = np.asarray(X)
    if X.dtype == object:
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"X: argument must be a string or a number ({e})") from None
    elif np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError("Complex data not supported: X must be real")
    return X


def sizes_to_qid(qid, group, m: int, names=("qid", "group")):
    """``qid``, or the query ids of LightGBM-style ``group`` sizes (rows in query
    order); giving both is an error, and the sizes must add up to the ``m`` rows."""
    if group is None:
        return qid
    if qid is not None:
        raise ValueError(f"pass {names[0]} or {names[1]}, not both")
    qid = qid_from_sizes(group.to_numpy() if hasattr(group, "to_numpy") else group, names[1])
    if qid.shape[0] != m:
        raise ValueError(f"{names[1]}: the query sizes add up to {qid.shape[0]} rows but X has {m}")
    return qid


def one_eval_set(eval_set, eval_qid, eval_group):
    """``(X, y)``, or XGBoost/LightGBM's list of one such pair with ``eval_qid`` /
    ``eval_group`` as lists of one array."""
    def one(v):
        return v[0] if isinstance(v, (list, tuple)) and len(v) == 1 and np.ndim(v[0]) == 1 else v
    if isinstance(eval_set, list) and len(eval_set) > 1 and all(
            isinstance(e, tuple) and len(e) == 2 for e in eval_set):
        raise ValueError(f"eval_set: early stopping follows one evaluation set, got {len(eval_set)}")
    if isinstance(eval_set, list) and len(eval_set) == 1:
        eval_set, eval_qid, eval_group = eval_set[0], one(eval_qid), one(eval_group)
    if not (isinstance(eval_set, (list, tuple)) and len(eval_set) == 2):
        raise ValueError("eval_set must be one pair (X_valid, y_valid) or a list of one such "
                         f"pair, got {type(eval_set).__name__}"
                         + (f" of {len(eval_set)}" if isinstance(eval_set, (list, tuple)) else ""))
    return eval_set, eval_qid, eval_group


ESTIMATORS: dict = {}
"""Estimator classes by name (filled as they are defined), for :func:`load`."""


class Ranker(_Base):
    """Shared input handling, prediction, scoring and persistence.

    Queries are given as ``qid`` (a query id per row, as XGBoost and SVMlight) or as
    ``group`` (query sizes in row order, as LightGBM), never both."""

    maps_model = True
    """Whether a learned ``feature_map_`` goes into ``model_`` (a model of feature rows)."""

    evals_axis = ("grid point", 0, True)
    """How ``plot.evals_curve`` draws ``evals_result_``: the x label, the first x value and
    whether ``best_iteration_`` is marked (each estimator sets its own)."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        ESTIMATORS[cls.__name__] = cls            # load() finds the class of a file here

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
        """The map this estimator learns: ``"rank"`` (a kernel by name), ``"standard"`` (the
        linear model) or None (``feature_map=None``, a Kernel or a solver object, whose
        parameters are the user's own, RankBoost)."""
        if self.feature_map not in ("auto", None):
            raise ValueError(f"feature_map must be 'auto' or None, got {self.feature_map!r}")
        kernel = getattr(self, "kernel", None)
        if (self.feature_map is None or isinstance(kernel, _kernels.Kernel)
                or isinstance(getattr(self, "solver", None), AbstractSolver)):
            return None
        return "standard" if kernel in (None, "linear") else "rank"

    def _mapped(self, X, y, seg):
        """``X`` as the model sees it: through the map learned on these rows
        (``feature_map_``, :meth:`_map_kind`), or as given (``feature_map_`` None)."""
        kind = self._map_kind()
        names = list(getattr(self, "feature_names_in_", ()))
        cat = [names.index(c) for c in self.categories_] if names else []
        self.feature_map_ = None
        if kind is None:
            if cat:
                raise TypeError(f"X column {names[cat[0]]!r} is categorical: feature_map='auto' "
                                "reads its categories (a kernel or linear model by name)")
            if getattr(self, "kernel", None) not in (None, "linear") and not is_sparse(X):
                warn_unresolved(X, stacklevel=4)
            return X
        if is_sparse(X) and kind == "standard":      # scaled, still sparse: the weights' map
            fm = learn_feature_map(X, kind="standard")
            self.feature_map_ = fm
            return scale_columns(X, fm.scale)
        self.feature_map_, rows = learn_and_map(as_dense(X), y, seg, kind, cat)
        return rows

    def _eval_data(self, eval_set, eval_qid, eval_group):
        """``(X_valid, y_valid, seg_valid)`` of an evaluation set (the training map's)."""
        (Xv, yv), eval_qid, eval_group = one_eval_set(eval_set, eval_qid, eval_group)
        Xv, yv, segv = self._inputs(Xv, yv, eval_qid, fit=False, need_model=False,
                                    group=eval_group, query_args=("eval_qid", "eval_group"),
                                    need_queries=True)[:3]
        fmap = self.feature_map_
        if fmap is not None and is_sparse(Xv) and fmap.fill is None:
            return scale_columns(Xv, fmap.scale), yv, segv
        return Xv if fmap is None else map_rows(fmap, as_dense(Xv)), yv, segv

    def _eval_sequence(self, scores, yv, segv):
        """Scores ``[T, m_v]`` of the ``T`` successive models (rounds, components, ...) on
        the evaluation set: sets ``evals_result_`` (LightGBM's layout,
        ``{"valid_0": {"ndcg@k": [...]}}``), ``best_iteration_`` (how many steps the kept
        model has) and ``best_score_``, stopping after ``early_stopping_rounds`` steps
        without improvement; logs the scores with ``verbose``. Returns
        ``best_iteration_``."""
        k = getattr(self, "score_k", 10)
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
        name = f"ndcg@{getattr(self, 'score_k', 10)}"
        every = _log.check_verbose(getattr(self, "verbose", False)) if show else 0
        for t, v in enumerate(vals):
            if every and ((t + first) % every == 0 or t == len(vals) - 1):
                _log.info(every, "[%d]\tvalid_0's %s: %.6g", t + first, name, v)
        self.evals_result_ = {"valid_0": {name: np.asarray(vals, float).tolist()}}

    def _needs_queries(self):
        return getattr(self, "graph", "query") != "identity"

    def _inputs(self, X, y, qid, fit: bool, need_model: bool = True, group=None,
                query_args=("qid", "group"), need_queries: bool = False):
        if group is not None and qid is None and is_frame(X) and "qid" in X.columns:
            raise ValueError(f"pass {query_args[0]} or {query_args[1]}, not both (X has a 'qid' "
                             "column)")
        if fit:
            self.qid_column_ = qid if isinstance(qid, str) else None
        X, qid = take_queries(X, qid, fit, None if fit else self.__dict__.get("qid_column_"))
        if need_queries and qid is None and group is None and self._needs_queries():
            hint = [c for c in getattr(X, "columns", ()) if str(c).lower() in QUERY_COLUMNS]
            raise ValueError(
                f"{type(self).__name__}.fit needs the queries: pass {query_args[0]}= (a query id "
                f"per row) or {query_args[1]}= (query sizes in row order); for one query over "
                "all rows pass qid=np.zeros(len(X))"
                + (f". X has a column {hint[0]!r}: pass {query_args[0]}=X.pop({hint[0]!r})"
                   if hint else ""))
        frame = (frame_values(X, None if fit else getattr(self, "categories_", {}))
                 if is_frame(X) else None)
        names = None if frame is None else frame.names
        X = as_matrix(X if frame is None else frame.values)
        if getattr(X, "ndim", 2) != 2:
            raise ValueError(f"X must be 2-D [m, n], got shape {np.shape(X)}; Reshape your data "
                             "(X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one row)")
        m, n = X.shape
        if m == 0 or n == 0:
            raise ValueError(f"0 {'sample' if m == 0 else 'feature'}(s) (shape={(m, n)}) while a "
                             "minimum of 1 is required.")
        if not is_sparse(X):                 # checked once: the device array passes through
            X = check_matrix(X, missing=(self._map_kind() if fit else
                                          self.__dict__.get("feature_map_")) is not None)
        if fit:
            use_disk_cache()                           # once per process (rankjax._core.cache)
            self.__dict__.pop("gamma_", None)          # set again by a kernel fit
            self.feature_map_ = None                   # set again by _mapped
            self.categories_ = {} if frame is None else frame.categories
            self.n_features_in_ = n
            if names is not None:
                self.feature_names_in_ = np.asarray(names, dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            if need_model:
                self._check_fitted()
            if n != self.n_features_in_:
                what = "the eval_set's X" if query_args[0] == "eval_qid" else "X"
                raise ValueError(f"{what} has {n} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input")
            fitted = getattr(self, "feature_names_in_", None)
            if names is not None and fitted is not None and list(fitted) != names:
                raise ValueError("X has other feature names than those seen in fit")
        if y is not None:
            y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
            if np.issubdtype(y.dtype, np.complexfloating):
                raise ValueError("Complex data not supported: y must be real")
            if y.dtype.kind in "USV":                 # numpy would parse "2" silently
                raise TypeError(f"y must hold numbers (relevance labels), got dtype {y.dtype}")
            try:
                y = y.astype(np.float64)
            except (TypeError, ValueError) as e:
                raise TypeError(f"y must hold numbers (relevance labels) ({e})") from None
            if y.ndim != 1 or y.shape[0] != m:
                raise ValueError(f"y must have shape [{m}], got {y.shape}")
            y = check_targets(y, m)          # checked once: the device array passes through
        qid = sizes_to_qid(qid, group, m, query_args)
        # the queries are remapped once, here: a Segments passes through every call below
        seg = (Segments(np.zeros(m, np.int32), 1, np.zeros(1, np.int32)) if qid is None else
               segment_ids(qid.to_numpy() if hasattr(qid, "to_numpy") else qid))
        if seg.seg.shape[0] != m:
            raise ValueError(f"qid has {seg.seg.shape[0]} rows but X has {m}")
        return X, y, seg, qid is not None

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise _NotFitted(f"this {type(self).__name__} is not fitted yet: call fit first")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = self.feature_map == "auto" and self._map_kind() is not None
        return tags

    def _graph(self, seg, y, weights=None):
        return query_graph(seg, y, normalized=getattr(self, "normalized", True),
                           exclude_ties=getattr(self, "exclude_ties", False),
                           query_weights=weights)

    def _weights(self, seg, sample_weight, group_weight):
        r"""``[Q]`` the query weights of a fit (the papers' :math:`\omega_c`, Pahikkala et
        al. 2009 §2.4), in the order of the sorted distinct query ids (the order of
        ``group``): from ``sample_weight`` (per row, constant within a query, as LightGBM's
        ``weight``) or ``group_weight`` (one per query, as XGBoost's ranking weights);
        None when neither is given (every query weighs 1)."""
        if sample_weight is None and group_weight is None:
            return None
        if sample_weight is not None and group_weight is not None:
            raise ValueError("pass sample_weight (per row) or group_weight (per query), not both")
        if not self._needs_queries():
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
        X, _, _, _ = self._inputs(X, None, None, fit=False)
        return np.asarray(self._scores(X))

    def _scores(self, X):
        return predict(self.model_, X)

    def score(self, X, y, qid=None, *, group=None, sample_weight=None):
        """Mean NDCG@``score_k`` over the queries of ``(X, y, qid)`` (or ``group``
        sizes). ``sample_weight`` (per row, constant within a query) weights the queries.
        A model fitted on several queries refuses rows without their queries (a
        ``ValueError`` naming scikit-learn's metadata routing, which passes ``qid`` here);
        a model of one query (or RLS regression) ranks them as one."""
        X, y, seg, given = self._inputs(X, y, qid, fit=False, group=group)
        if not given and getattr(self, "num_queries_", 1) > 1:
            raise ValueError(f"{type(self).__name__}.score got no qid: {NO_QUERIES}")
        f = self._scores(X)
        k = getattr(self, "score_k", 10)
        if sample_weight is None:
            return float(_metrics_graded.ndcg(f, y, seg, k=k))
        w = query_weights(sample_weight, seg)
        pq = _metrics_graded.ndcg(f, y, seg, k=k, per_query=True)
        valid = np.asarray(pq.valid) & (w > 0)
        if not valid.any():
            return float("nan")
        return float(np.sum(np.asarray(pq.values)[valid] * w[valid]) / np.sum(w[valid]))

    def _check_routing(self, qid, group, seg):
        """A fit inside scikit-learn's model selection (``GridSearchCV``,
        ``cross_validate``, ...) whose folds will be scored by :meth:`score` without their
        queries (metadata routing off: ``qid`` reaches ``fit`` only) is refused here, so
        the search stops with the remedy instead of scoring NaN (or one query) and
        choosing by that. Queries from a DataFrame column reach ``score`` and pass."""
        if seg.num_queries < 2 or (qid is None and group is None) or isinstance(qid, str):
            return
        frame = sys._getframe(1)
        while frame is not None and not (
                frame.f_code.co_name == "_fit_and_score"
                and frame.f_globals.get("__name__", "").startswith("sklearn.model_selection")):
            frame = frame.f_back
        if frame is None:
            return
        score_params = frame.f_locals.get("score_params") or {}
        scorer = frame.f_locals.get("scorer")
        scorers = getattr(scorer, "_scorers", {"score": scorer})
        from sklearn.metrics._scorer import _PassthroughScorer    # scores by self.score
        passthrough = any(isinstance(s, _PassthroughScorer) for s in scorers.values())
        if passthrough and "qid" not in score_params:
            raise ValueError(f"{type(self).__name__}: the folds of this search would be scored "
                             f"without their queries: {NO_QUERIES}")

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

    # persistence -------------------------------------------------------------
    def save(self, path, **meta) -> None:
        """Saves the fitted estimator (learner, hyper-parameters, fitted attributes with
        ``cv_results_`` and ``evals_result_``, feature count and names) atomically, in
        the one model format (:data:`rankjax.io.MODEL_VERSION`; the command line
        reads and writes the same files); ``meta``: extra scalar metadata.
        :func:`load` reads it back."""
        self._check_fitted()
        params = {k: (np.asarray(v) if isinstance(v, (list, tuple)) else v)
                  for k, v in self.get_params().items()}
        state = {k: v for k, v in vars(self).items() if k.endswith("_") and k != "feature_names_in_"}
        meta = dict(meta, learner=type(self).__name__, num_features=int(self.n_features_in_))
        if hasattr(self, "feature_names_in_"):
            meta["feature_names"] = [str(c) for c in self.feature_names_in_]
        io.save_model(path, {"params": params, "state": state}, **meta)


NO_QUERIES = ("a model fitted on several queries ranks rows by query: pass qid= (or group=); "
              "under GridSearchCV, cross_validate or a Pipeline turn on scikit-learn's metadata "
              "routing, sklearn.set_config(enable_metadata_routing=True), which passes qid to "
              "score as to fit (the estimators request it), or give X as a DataFrame with a "
              "'qid' column")


def nan_last(v):
    """NaN (undefined metric) ranks below every number."""
    return np.where(np.isnan(v), -np.inf, v)


def query_weights(sample_weight, seg):
    """``[Q]`` weight of every query from per-row weights that are constant within it."""
    w = np.asarray(sample_weight.to_numpy() if hasattr(sample_weight, "to_numpy") else sample_weight)
    seg = seg.seg
    if w.dtype.kind not in "iufb":
        raise TypeError(f"sample_weight must hold numbers, got dtype {w.dtype}")
    w = w.astype(np.float64)
    if w.shape != seg.shape:
        raise ValueError(f"sample_weight must have shape [{seg.shape[0]}], got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and >= 0")
    Q = int(seg.max()) + 1
    qw = np.zeros(Q)
    qw[seg] = w
    if np.any(qw[seg] != w):
        raise ValueError("sample_weight must be constant within each query (it weights queries)")
    return qw


def as_lists(v):
    """Tuples of a saved result dictionary back to lists (JSON keeps no difference)."""
    if isinstance(v, dict):
        return {k: as_lists(e) for k, e in v.items()}
    return [as_lists(e) for e in v] if isinstance(v, tuple) else v


def load(path):
    """Loads an estimator written by ``save``; its class, hyper-parameters, feature
    count and names come from the file.

    Example:
      >>> import tempfile, pathlib, rankjax as rj
      >>> from rankjax.estimators import RankBoost, load
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "boost.npz"
      >>> RankBoost(rounds=5).fit(d.X, d.y, qid=d.qid).save(p)
      >>> load(p).rounds
      5
    """
    tree, meta = io.load_model(path)
    cls = ESTIMATORS.get(meta.get("learner", ""))
    if not (isinstance(tree, dict) and cls is not None):
        raise ValueError(f"{path} holds no rankjax estimator (use rankjax.io.load_model)")
    params = {k: (tuple(np.asarray(v).tolist()) if isinstance(v, np.ndarray) and v.ndim else v)
              for k, v in tree["params"].items()}
    est = cls(**params)
    for k, v in tree["state"].items():
        setattr(est, k, as_lists(v) if k in ("cv_results_", "evals_result_") else v)
    if "feature_names" in meta:
        est.feature_names_in_ = np.asarray(meta["feature_names"], dtype=object)
    return est
