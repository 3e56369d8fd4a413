"""scikit-learn style estimators: thin classes over the public functions.

``fit(X, y, qid=None)``, ``predict(X)``, ``score(X, y, qid=None)`` (NDCG@10),
``get_params`` / ``set_params``, ``save(path)`` / :func:`load`. scikit-learn is
optional: with it installed the classes are ``BaseEstimator`` subclasses (clone,
``GridSearchCV``, pipelines, metadata routing of ``qid``); without it they keep
the same methods.

Inputs: dense numpy/JAX arrays, ``scipy.sparse`` matrices, BCOO, pandas
DataFrames (feature names are kept; a column named ``qid`` is taken as the
query ids when ``qid`` is not given, as XGBoost's ranker does). Query ids may be
integers, strings or categories. ``fit`` needs the queries, as LightGBM's and
XGBoost's rankers: ``qid`` (an id per row) or ``group`` (query sizes in row order);
for one query over all rows pass ``qid=np.zeros(len(X))``. (RLS regression,
``RankRLS(graph="identity")``, needs none.)

Kernel estimators default to ``gamma="scale"``: ``1 / (n_features * X.var())`` of the
training rows, as scikit-learn's SVC (``"auto"``: ``1 / n_features``); the value used
is ``gamma_`` after ``fit``.

Under ``GridSearchCV`` ``qid`` reaches ``fit`` as a fit parameter and reaches
``score`` only with metadata routing on
(``sklearn.set_config(enable_metadata_routing=True)``; the estimators request
``qid`` by default) or as a DataFrame column; otherwise ``score`` warns that it
ranks all rows as one query.

Example:
  >>> import numpy as np, rankjax as rj
  >>> from rankjax.estimators import RankRLS
  >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
  >>> model = RankRLS(lam=1.0).fit(d.X, d.y, qid=d.qid)
  >>> model.predict(d.X[:3]).shape, round(model.score(d.X, d.y, qid=d.qid), 2) > 0.5
  ((3,), True)
"""
from __future__ import annotations

import inspect
import sys
import warnings

import jax
import numpy as np
import scipy.sparse as sp

from . import _cg, _cv, _kernels, _kpcrank, _metrics, _nystrom, _path, _rankboost, _rankrls, _ranksvm, _tune
from ._checks import check_count, check_flag, is_int, kernel_plan, segment_ids
from ._graph import identity_graph, query_graph
from . import io

__all__ = ["RankRLS", "RankRLSCV", "CGRankRLS", "RankSVM", "KPCRank", "RankBoost", "load"]

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


# ----------------------------------------------------------------------------
# inputs

def _is_frame(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "to_numpy")


def _split_frame(X, qid):
    """A DataFrame's ``qid`` column (when ``qid`` is not given) and its feature names."""
    if not _is_frame(X):
        return X, qid, None
    if qid is None and "qid" in X.columns:
        qid, X = X["qid"].to_numpy(), X.drop(columns="qid")
    names = [str(c) for c in X.columns]
    try:
        values = X.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"X: every DataFrame column must be numeric ({e})") from None
    return values, qid, names


def _matrix(X):
    """Dense numpy, or CSR for scipy.sparse / BCOO input (converted once)."""
    if getattr(X, "dtype", None) is not None and np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError("Complex data not supported: X must be real")
    if sp.issparse(X):
        return sp.csr_matrix(X, dtype=np.float64 if X.dtype.kind != "f" else X.dtype)
    if hasattr(X, "todense") and hasattr(X, "indices"):          # BCOO
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


def _dense(X):
    if sp.issparse(X):
        return X.toarray()
    return X.todense() if hasattr(X, "todense") else X


GAMMAS = ("scale", "auto")
"""The data-scaled values of a kernel estimator's ``gamma``."""


def _gamma_value(gamma, X):
    """``gamma`` as a number: ``"scale"`` is ``1 / (n * var(X))`` over every entry of the
    training rows (1 when X is constant), ``"auto"`` is ``1 / n``."""
    if not isinstance(gamma, str):
        return gamma
    if gamma not in GAMMAS:
        raise ValueError(f"gamma must be a positive number, 'scale' or 'auto', got {gamma!r}")
    n = X.shape[1]
    if gamma == "auto":
        return 1.0 / n
    if sp.issparse(X):
        mean = X.sum() / (X.shape[0] * n)
        var = X.multiply(X).sum() / (X.shape[0] * n) - mean ** 2
    else:
        var = float(jax.numpy.var(jax.numpy.asarray(_dense(X), dtype=float)))
    return 1.0 / (n * var) if var > 0 and np.isfinite(var) else 1.0


def _kernel(kind, gamma, degree, coef0):
    if kind is None or kind == "linear":
        return None
    if isinstance(kind, _kernels.Kernel):
        return kind
    if kind == "gaussian" or kind == "rbf":
        return _kernels.gaussian_kernel(gamma)
    if kind == "polynomial" or kind == "poly":
        return _kernels.polynomial_kernel(degree, gamma, coef0)
    raise ValueError(f"kernel must be None, 'linear', 'gaussian', 'polynomial' or a Kernel, "
                     f"got {kind!r}")


AUTO_BASIS_ROWS = 5000
"""Above this many training rows a kernel estimator with ``basis="auto"`` switches from
the exact kernel (``m x m`` matrices, O(m^3)) to a Nyström basis of
:data:`AUTO_BASIS_SIZE` rows (O(m b^2) time, O(m b) memory)."""
AUTO_BASIS_SIZE = 2000


def _basis_size(basis, kernel, m: int):
    """The Nyström basis size an estimator uses, or None for the exact kernel / linear."""
    if kernel is None or kernel == "linear":
        if basis not in (None, "auto"):
            raise ValueError("basis is used with a kernel (kernel='gaussian', ...), not the linear model")
        return None
    if basis == "auto":
        return min(AUTO_BASIS_SIZE, m) if m > AUTO_BASIS_ROWS else None
    if basis is None:
        return None
    if not is_int(basis) or basis < 1:
        raise ValueError(f"basis must be 'auto', None or a positive int, got {basis!r}")
    return min(int(basis), m)


def _sizes_to_qid(qid, group, m: int, names=("qid", "group")):
    """``qid``, or the query ids of LightGBM-style ``group`` sizes (rows in query
    order); giving both is an error, and the sizes must add up to the ``m`` rows."""
    if group is None:
        return qid
    if qid is not None:
        raise ValueError(f"pass {names[0]} or {names[1]}, not both")
    qid = io._qid_from_sizes(group.to_numpy() if hasattr(group, "to_numpy") else group, names[1])
    if qid.shape[0] != m:
        raise ValueError(f"{names[1]}: the query sizes add up to {qid.shape[0]} rows but X has {m}")
    return qid


def _one_eval_set(eval_set, eval_qid, eval_group):
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


_QUERY_COLUMNS = ("query_id", "queryid", "query", "group", "group_id", "qid_", "query id")


class _Ranker(_Base):
    """Shared input handling, prediction, scoring and persistence.

    Queries are given as ``qid`` (a query id per row, as XGBoost and SVMlight) or as
    ``group`` (query sizes in row order, as LightGBM), never both."""

    __metadata_request__fit = {"qid": True}       # group sizes are not per-row: never
    __metadata_request__score = {"qid": True,     # routed by a meta-estimator (use qid)
                                 "sample_weight": True}

    def _fit_kernel(self, X):
        """The kernel of this fit, with ``gamma`` (``"scale"``, ``"auto"`` or a number)
        resolved on the training rows into ``gamma_``; None for the linear model."""
        if self.kernel in (None, "linear") or isinstance(self.kernel, _kernels.Kernel):
            return _kernel(self.kernel, None, self.degree, self.coef0)
        kern = _kernel(self.kernel, _gamma_value(self.gamma, X), self.degree, self.coef0)
        self.gamma_ = float(kern.gamma)
        return kern

    def _eval_data(self, eval_set, eval_qid, eval_group):
        """``(X_valid, y_valid, seg_valid)`` of a LightGBM/XGBoost-style evaluation set."""
        (Xv, yv), eval_qid, eval_group = _one_eval_set(eval_set, eval_qid, eval_group)
        return self._inputs(Xv, yv, eval_qid, fit=False, need_model=False, group=eval_group,
                            query_args=("eval_qid", "eval_group"), need_queries=True)[:3]

    def _eval_sequence(self, scores, yv, segv):
        """Scores ``[T, m_v]`` of the ``T`` successive models (rounds, components, ...) on
        the evaluation set: sets ``evals_result_`` (LightGBM's layout,
        ``{"valid_0": {"ndcg@k": [...]}}``), ``best_iteration_`` (how many steps the kept
        model has) and ``best_score_``, stopping after ``early_stopping_rounds`` steps
        without improvement; prints the scores on stderr with ``verbose``. Returns
        ``best_iteration_``."""
        k = getattr(self, "score_k", 10)
        T = scores.shape[0]
        vals = np.asarray(_path.select_lambda(np.arange(1.0, T + 1), scores, yv, segv,
                                              metric=_metrics.ndcg, k=k).table, dtype=float)
        rounds = self.early_stopping_rounds
        if rounds is not None:
            rounds = check_count(rounds, "early_stopping_rounds")
        key = _nan_last(vals)
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
        """``evals_result_`` (LightGBM's layout) of the per-step scores ``vals``, printed on
        stderr with ``verbose`` (step numbers from ``first``)."""
        name = f"ndcg@{getattr(self, 'score_k', 10)}"
        every = _verbose_every(getattr(self, "verbose", False)) if show else 0
        for t, v in enumerate(vals):
            if every and ((t + first) % every == 0 or t == len(vals) - 1):
                print(f"[{t + first}]\tvalid_0's {name}: {v:.6g}", file=sys.stderr)
        self.evals_result_ = {"valid_0": {name: np.asarray(vals, float).tolist()}}

    def _needs_queries(self):
        return getattr(self, "graph", "query") != "identity"

    def _inputs(self, X, y, qid, fit: bool, need_model: bool = True, group=None,
                query_args=("qid", "group"), need_queries: bool = False):
        if group is not None and qid is None and _is_frame(X) and "qid" in X.columns:
            raise ValueError(f"pass {query_args[0]} or {query_args[1]}, not both (X has a 'qid' "
                             "column)")
        if need_queries and qid is None and group is None and self._needs_queries() and not (
                _is_frame(X) and "qid" in X.columns):
            hint = [c for c in getattr(X, "columns", ()) if str(c).lower() in _QUERY_COLUMNS]
            raise ValueError(
                f"{type(self).__name__}.fit needs the queries: pass {query_args[0]}= (a query id "
                f"per row) or {query_args[1]}= (query sizes in row order); for one query over "
                "all rows pass qid=np.zeros(len(X))"
                + (f". X has a column {hint[0]!r}: pass {query_args[0]}=X.pop({hint[0]!r})"
                   if hint else ""))
        X, qid, names = _split_frame(X, qid)
        X = _matrix(X)
        if getattr(X, "ndim", 2) != 2:
            raise ValueError(f"X must be 2-D [m, n], got shape {np.shape(X)}; Reshape your data "
                             "(X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one row)")
        m, n = X.shape
        if m == 0 or n == 0:
            raise ValueError(f"0 {'sample' if m == 0 else 'feature'}(s) (shape={(m, n)}) while a "
                             "minimum of 1 is required.")
        if fit:
            self.__dict__.pop("gamma_", None)          # set again by a kernel fit
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
        qid = _sizes_to_qid(qid, group, m, query_args)
        seg = np.zeros(m, np.int32) if qid is None else segment_ids(
            qid.to_numpy() if hasattr(qid, "to_numpy") else qid).seg
        if seg.shape[0] != m:
            raise ValueError(f"qid has {seg.shape[0]} rows but X has {m}")
        return X, y, seg, qid is not None

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise _NotFitted(f"this {type(self).__name__} is not fitted yet: call fit first")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _graph(self, seg, y):
        return query_graph(seg, y, normalized=getattr(self, "normalized", True),
                           exclude_ties=getattr(self, "exclude_ties", False))

    def predict(self, X):
        """Scores ``[m]`` of new rows (higher ranks first)."""
        X, _, _, _ = self._inputs(X, None, None, fit=False)
        return np.asarray(self._scores(X))

    def _scores(self, X):
        return _rankrls.predict(self.model_, X)

    def score(self, X, y, qid=None, *, group=None, sample_weight=None):
        """Mean NDCG@``score_k`` over the queries of ``(X, y, qid)`` (or ``group``
        sizes; neither: one query, with a warning when the model was fitted on several).
        ``sample_weight`` (per row, constant within a query) weights the queries."""
        X, y, seg, given = self._inputs(X, y, qid, fit=False, group=group)
        if not given and getattr(self, "num_queries_", 1) > 1:
            warnings.warn(f"{type(self).__name__}.score got no qid: all rows are ranked as one "
                          "query; pass qid (with scikit-learn: enable metadata routing)",
                          UserWarning, stacklevel=2)
        f = self._scores(X)
        k = getattr(self, "score_k", 10)
        if sample_weight is None:
            return float(_metrics.ndcg(f, y, seg, k=k))
        w = _query_weights(sample_weight, seg)
        pq = _metrics.ndcg(f, y, seg, k=k, per_query=True)
        valid = np.asarray(pq.valid) & (w > 0)
        if not valid.any():
            return float("nan")
        return float(np.sum(np.asarray(pq.values)[valid] * w[valid]) / np.sum(w[valid]))

    def _finish_fit(self, seg):
        self.num_queries_ = int(seg.max()) + 1
        jax.block_until_ready(self.model_)      # fit returns a ready model (async dispatch)
        if isinstance(self.model_, _rankrls.LinearModel):
            self.coef_ = np.asarray(self.model_.weights)          # linear models: the weights
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


def _nan_last(v):
    """NaN (undefined metric) ranks below every number."""
    return np.where(np.isnan(v), -np.inf, v)


def _verbose_every(verbose):
    """``verbose``: False/0 (silent), True (every step) or an int n (every n-th step)."""
    if isinstance(verbose, (bool, np.bool_)):
        return int(bool(verbose))
    if not is_int(verbose) or verbose < 0:
        raise ValueError(f"verbose must be a bool or an int >= 0, got {verbose!r}")
    return int(verbose)


def _query_weights(sample_weight, seg):
    """``[Q]`` weight of every query from per-row weights that are constant within it."""
    w = np.asarray(sample_weight.to_numpy() if hasattr(sample_weight, "to_numpy") else sample_weight,
                   dtype=np.float64)
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


def _lists(v):
    """Tuples of a saved result dictionary back to lists (JSON keeps no difference)."""
    if isinstance(v, dict):
        return {k: _lists(e) for k, e in v.items()}
    return [_lists(e) for e in v] if isinstance(v, tuple) else v


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
    cls = globals().get(meta.get("learner", ""))
    if not (isinstance(tree, dict) and isinstance(cls, type) and issubclass(cls, _Ranker)):
        raise ValueError(f"{path} holds no rankjax estimator (use rankjax.io.load_model)")
    params = {k: (tuple(np.asarray(v).tolist()) if isinstance(v, np.ndarray) and v.ndim else v)
              for k, v in tree["params"].items()}
    est = cls(**params)
    for k, v in tree["state"].items():
        setattr(est, k, _lists(v) if k in ("cv_results_", "evals_result_") else v)
    if "feature_names" in meta:
        est.feature_names_in_ = np.asarray(meta["feature_names"], dtype=object)
    return est


# ----------------------------------------------------------------------------
# learners

class RankRLS(_Ranker):
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
            return identity_graph(seg.shape[0])
        if self.graph != "query":
            raise ValueError(f"graph must be 'query' or 'identity', got {self.graph!r}")
        return super()._graph(seg, y)

    def fit(self, X, y, qid=None, *, group=None):
        X, y, seg, _ = self._inputs(X, y, qid, fit=True, group=group, need_queries=True)
        g = self._graph(seg, y)
        self.model_ = _fit_rankrls(X, y, g, self.lam, self._fit_kernel(X),
                                   _basis_size(self.basis, self.kernel, X.shape[0]), self.random_state)
        return self._finish_fit(seg)

    def _scores(self, X):
        f = _rankrls.predict(self.model_, X if isinstance(self.model_, _rankrls.LinearModel)
                             else _dense(X))
        return f[0] if isinstance(self.model_, _path.NystromPath) else f


def _fit_rankrls(X, y, g, lam, kern, basis, seed):
    """The model of one λ: primal when ``n <= m``, else the dual with a linear kernel
    (``w = X^T A``); a kernel model; or a one-λ Nyström path."""
    m, n = X.shape
    if basis is not None:
        if kern is None:
            kern = _kernels.linear_kernel()
        return _path.rankrls_nystrom_path(_dense(X), y, g, lams=[lam], kernel=kern, basis=basis,
                                          seed=seed)
    if kern is not None:
        return _rankrls.rankrls_kernel(_dense(X), y, g, lam=lam, kernel=kern)
    if n <= m:
        return _rankrls.rankrls_primal(X, y, g, lam=lam)
    Xd = _dense(X)                         # more features than rows: an m x m system
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
        b = _basis_size(self.basis, self.kernel, X.shape[0])
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
        folds = _cv.make_folds(g, self.cv, seed=self.random_state)
        lams = np.asarray(self.lams, dtype=np.float64)
        gammas = self._gamma_grid(X)
        rows, scores, self._coefs = [], [], {}
        for gamma in gammas:                          # one decomposition per kernel
            kern = _kernel(self.kernel, gamma, self.degree, self.coef0)
            if kern is None:
                h = _cv.holdout_primal(_dense(X), y, g, lams=lams, folds=folds)
            elif b is not None:
                h = self._nystrom_holdout(X, y, g, folds, lams, kern, b, gamma)
            else:
                h = _cv.holdout_dual(_kernels.kernel_matrix(kern, _dense(X)), y, g, lams=lams,
                                     folds=folds)
            table = _cv.cross_validate(h, y, seg, metric=_metrics.ndcg, k=self.score_k).table
            rows += [(float(lam), None if gamma is None else float(gamma)) for lam in lams]
            scores.append(np.asarray(table))
        self._choose(rows, np.concatenate(scores))
        if kind is not None:
            self._refine(X, y, seg, g, folds, kind)
        elif optimize and b is not None:
            self._refine_gamma(X, y, seg, g, folds, lams, b, gammas)
        kern = _kernel(self.kernel, getattr(self, "gamma_", None), self.degree, self.coef0)
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
        return [_gamma_value(v, X) for v in ([self.gamma] if self.gammas is None else self.gammas)]

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
        order = np.argsort(-_nan_last(s), kind="stable")
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
            kern = _kernel(self.kernel, gamma, self.degree, self.coef0)
            if kern is None:
                path = _path.rankrls_primal_path(X, y, g, lams=lams, X_valid=Xv)
            elif b is not None:
                Xd = _dense(X)
                idx = _nystrom.nystrom_basis(Xd, b, kernel=kern, method=self.basis_method,
                                             seed=self.random_state)
                path = _path.rankrls_nystrom_path(Xd, y, g, lams=lams, kernel=kern, basis=idx,
                                                  X_valid=_dense(Xv))
            else:
                Xd = _dense(X)
                path = _path.rankrls_dual_path(_kernels.kernel_matrix(kern, Xd), y, g, lams=lams,
                                               K_valid=_kernels.kernel_matrix(kern, _dense(Xv), Xd))
            table = _path.select_lambda(lams, path.valid_scores, yv, sv, metric=_metrics.ndcg,
                                        k=self.score_k).table
            rows += [(float(lam), None if gamma is None else float(gamma)) for lam in lams]
            scores.append(np.asarray(table, dtype=float))
            models.append(path)
        s = np.concatenate(scores)
        best = self._choose(rows, s)
        self.evals_result_ = {"valid_0": {f"ndcg@{self.score_k}": s.tolist()}}
        path, i = models[best // lams.size], best % lams.size
        if isinstance(path, _path.PrimalPath):
            self.model_ = _rankrls.LinearModel(path.weights[i])
        elif isinstance(path, _path.NystromPath):
            self.basis_ = np.asarray(path.basis)
            self.model_ = path._replace(lams=path.lams[i:i + 1], coef=path.coef[i:i + 1],
                                        train_scores=None, valid_scores=None)
        else:                                   # exact kernel: the chosen λ's model
            self.model_ = _fit_rankrls(X, y, g, self.lam_, _kernel(self.kernel, self.gamma_,
                                                                   self.degree, self.coef0),
                                       None, self.random_state)
        return self._finish_fit(seg)

    def _nystrom_holdout(self, X, y, g, folds, lams, kern, b, gamma):
        """The exact hold-out of the Nyström model for the λ grid (one ``eigh`` of
        ``b x b``); the full-data coefficients of every λ are kept (no refit)."""
        Xd = _dense(X)
        idx = _nystrom.nystrom_basis(Xd, b, kernel=kern, method=self.basis_method,
                                     seed=self.random_state)
        _, XR, mask = _nystrom.padded_basis(Xd, idx)
        pred, coef = _cv.nystrom_holdout_core(jax.numpy.asarray(Xd), XR, mask, jax.numpy.asarray(
            y, XR.dtype), g, jax.numpy.asarray(lams, XR.dtype), folds, kern, None)
        self._coefs[float(gamma)] = (idx, XR[:b], coef[:, :b])
        return _cv.HoldOut(lams, pred, folds)

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
                kern = _kernel(self.kernel, gamma, self.degree, self.coef0)
                h = self._nystrom_holdout(X, y, g, folds, lams, kern, b, gamma)
                t = np.asarray(_cv.cross_validate(h, y, seg, metric=_metrics.ndcg,
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
        kern = _kernel(self.kernel, 1.0, self.degree, self.coef0)
        kind = "linear" if kern is None else kern.kind
        if kind not in ("linear", "gaussian"):
            raise ValueError(f"optimize=True learns linear and Gaussian kernels, got {kind!r}")
        check_count(self.optimize_steps, "optimize_steps")
        return kind

    def _refine(self, X, y, seg, g, folds, kind):
        kern = _kernel(self.kernel, getattr(self, "gamma_", None), self.degree, self.coef0)
        r = _tune.tune(_dense(X), y, g, kernel=kind, lam=self.lam_,
                       gamma=None if kern is None else float(kern.gamma), folds=folds,
                       steps=self.optimize_steps, learning_rate=0.1)
        self.tune_ = r
        best = int(np.argmin(r.loss_history))
        params = {k: jax.numpy.asarray(v[best]) for k, v in r.params_history.items()}
        f = _tune.cv_predictions(params, _dense(X), y, g, folds, kind)
        score = float(_metrics.ndcg(f, y, seg, k=self.score_k))
        if np.isfinite(score) and score >= self.best_score_:
            self.lam_, self.best_score_ = float(np.exp(params["log_lam"])), score
            if kern is not None:
                self.gamma_ = float(np.exp(params["log_gamma"]))


class CGRankRLS(_Ranker):
    """Primal RankRLS by conjugate gradient for large sparse data, with early stopping
    on an evaluation set (Airola et al. 2010): ``fit(X, y, qid, eval_set=(Xv, yv),
    eval_qid=qv)`` (or ``group=``/``eval_group=`` sizes, and XGBoost/LightGBM's
    ``eval_set=[(Xv, yv)]`` with ``eval_qid=[qv]``). ``lam=0`` with an evaluation set is early stopping
    alone. With an evaluation set the iterate of the best NDCG@``score_k`` is kept and
    the loop stops after ``early_stopping_rounds`` iterations without improvement
    (``evals_result_``, ``best_iteration_``, ``best_score_``); ``verbose`` prints the
    progress on stderr. ``coef_`` holds the weights."""

    def __init__(self, lam=1.0, *, max_iter=500, tol=1e-5, early_stopping_rounds=10,
                 verbose=False, normalized=True, score_k=10):
        self.lam, self.max_iter, self.tol = lam, max_iter, tol
        self.early_stopping_rounds, self.verbose = early_stopping_rounds, verbose
        self.normalized, self.score_k = normalized, score_k

    def fit(self, X, y, qid=None, eval_set=None, eval_qid=None, *, group=None,
            eval_group=None):
        X, y, seg, _ = self._inputs(X, y, qid, fit=True, group=group, need_queries=True)
        every = _verbose_every(self.verbose)
        rounds = self.max_iter + 1 if self.early_stopping_rounds is None else self.early_stopping_rounds
        valid = None
        if eval_set is not None:
            Xv, yv, sv = self._eval_data(eval_set, eval_qid, eval_group)
            valid = (Xv, yv, query_graph(sv))
        if valid is None and self.lam == 0:
            raise ValueError("lam=0 needs an eval_set (early stopping) or use lam > 0")
        self.model_ = _cg.rankrls_cg(X, y, self._graph(seg, y), lam=self.lam, valid=valid,
                                     metric=_metrics.ndcg, k=self.score_k, tol=self.tol,
                                     max_iter=self.max_iter, patience=rounds, progress=every)
        self.n_iter_ = int(self.model_.iterations)
        self.best_iteration_ = int(self.model_.best_iteration)
        if valid is not None:
            # the loop minimizes: its history is -NDCG
            hist = -np.asarray(self.model_.valid_history, dtype=float)[:self.n_iter_ + 1]
            self._report(hist, show=False)          # the loop printed its progress
            self.best_score_ = float(hist[self.best_iteration_])
        self.coef_ = np.asarray(self.model_.weights)
        return self._finish_fit(seg)

    def _scores(self, X):
        return _rankrls.predict(_rankrls.LinearModel(self.model_.weights), X)


class RankSVM(_Ranker):
    """L2-loss RankSVM (linear by TRON, Lee & Lin 2014; or kernel with ``basis`` rows)."""

    def __init__(self, C=1.0, *, kernel=None, gamma="scale", degree=2, coef0=1.0, basis=None,
                 tol=1e-3, max_iter=1000, early_stopping_rounds=None, verbose=False, score_k=10,
                 random_state=0):
        self.C, self.kernel, self.gamma, self.degree, self.coef0 = C, kernel, gamma, degree, coef0
        self.basis, self.tol, self.max_iter = basis, tol, max_iter
        self.early_stopping_rounds, self.verbose = early_stopping_rounds, verbose
        self.score_k, self.random_state = score_k, random_state

    def fit(self, X, y, qid=None, *, group=None, eval_set=None, eval_qid=None, eval_group=None):
        """With ``eval_set`` (linear model) every Newton iterate is scored by NDCG@``score_k``
        on it, the best is kept and the loop stops after ``early_stopping_rounds`` steps
        without improvement (``evals_result_``, ``best_iteration_``, ``best_score_``)."""
        X, y, seg, _ = self._inputs(X, y, qid, fit=True, group=group, need_queries=True)
        kern = self._fit_kernel(X)
        if eval_set is not None and kern is not None:
            raise ValueError("eval_set (early stopping) is supported by the linear RankSVM; "
                             "choose C on a validation set for the kernel model")
        if kern is None:
            kw = {}
            if eval_set is not None:
                Xv, yv, sv = self._eval_data(eval_set, eval_qid, eval_group)
                rounds = self.early_stopping_rounds
                kw = dict(valid=(Xv, yv, query_graph(sv)), metric=_metrics.ndcg,
                          metric_kwargs={"k": self.score_k},
                          patience=self.max_iter + 1 if rounds is None else rounds)
            r = _ranksvm.ranksvm_l2(X, y, seg, C=self.C, tol=self.tol, max_iter=self.max_iter, **kw)
            self.model_ = _rankrls.LinearModel(r.weights)
            self.coef_ = np.asarray(r.weights)
            self.converged_ = bool(r.converged)
            self.n_iter_ = int(r.iterations)
            if eval_set is not None:           # the loop minimizes: its history is -NDCG
                hist = -np.asarray(r.valid_history, dtype=float)[:self.n_iter_ + 1]
                self._report(hist)
                self.best_iteration_ = int(r.best_iteration)
                self.best_score_ = float(hist[self.best_iteration_])
        else:
            self.model_ = _ranksvm.ranksvm_kernel(
                _dense(X), y, seg, kernel=kern, C=self.C, seed=self.random_state,
                basis=self.basis if self.basis is not None else min(X.shape[0], 1000),
                tol=self.tol, max_iter=self.max_iter)
        return self._finish_fit(seg)

    def _scores(self, X):
        lin = isinstance(self.model_, _rankrls.LinearModel)
        return _rankrls.predict(self.model_, X if lin else _dense(X))


class KPCRank(_Ranker):
    """Kernel principal component ranking (Pahikkala et al. 2009, §3.6): RankRLS on
    the leading ``n_components`` kernel principal components."""

    def __init__(self, n_components=10, *, lam=0.0, kernel="gaussian", gamma="scale", degree=2,
                 coef0=1.0, normalized=True, early_stopping_rounds=None, verbose=False,
                 score_k=10):
        self.n_components, self.lam, self.kernel = n_components, lam, kernel
        self.gamma, self.degree, self.coef0 = gamma, degree, coef0
        self.normalized, self.score_k = normalized, score_k
        self.early_stopping_rounds, self.verbose = early_stopping_rounds, verbose

    def _kern(self):
        """The fitted kernel (``gamma_`` resolved at fit)."""
        return (_kernel(self.kernel, getattr(self, "gamma_", None), self.degree, self.coef0)
                or _kernels.linear_kernel())

    def fit(self, X, y, qid=None, *, group=None, eval_set=None, eval_qid=None, eval_group=None):
        """With ``eval_set`` the models of ``1..n_components`` components (one
        decomposition) are scored on it and the best number is kept (``best_iteration_``
        components; ``evals_result_``; ``early_stopping_rounds`` as for boosting)."""
        X, y, seg, _ = self._inputs(X, y, qid, fit=True, group=group, need_queries=True)
        self.X_train_ = np.asarray(_dense(X), dtype=np.float64)
        kern = self._fit_kernel(self.X_train_) or _kernels.linear_kernel()
        K = _kernels.kernel_matrix(kern, self.X_train_)
        g = self._graph(seg, y)
        if eval_set is None:
            self.model_ = _kpcrank.kpcrank(K, y, g, components=self.n_components, lam=self.lam)
            return self._finish_fit(seg)
        Xv, yv, sv = self._eval_data(eval_set, eval_qid, eval_group)
        Kv = _kernels.kernel_matrix(kern, np.asarray(_dense(Xv), np.float64), self.X_train_)
        path = _kpcrank.kpcrank_path(K, y, g, max_components=self.n_components, lam=self.lam,
                                     K_valid=Kv)
        p = self._eval_sequence(path.valid_scores, yv, sv)
        self.model_ = _kpcrank.KPCModel(path.coef[p - 1], path.offset[p - 1])
        return self._finish_fit(seg)

    def _scores(self, X):
        Kt = _kernels.kernel_matrix(self._kern(), _dense(X), self.X_train_)
        return Kt @ self.model_.coef - self.model_.offset


class RankBoost(_Ranker):
    """RankBoost with threshold weak rankers (Freund et al. 2003)."""

    def __init__(self, rounds=100, *, num_thresholds=32, early_stopping_rounds=None,
                 verbose=False, score_k=10):
        self.rounds, self.num_thresholds, self.score_k = rounds, num_thresholds, score_k
        self.early_stopping_rounds, self.verbose = early_stopping_rounds, verbose

    def fit(self, X, y, qid=None, *, group=None, eval_set=None, eval_qid=None, eval_group=None):
        """With ``eval_set`` every round's model is scored (NDCG@``score_k``) and the model
        is cut at the best round (``best_iteration_`` rounds), stopping the search after
        ``early_stopping_rounds`` rounds without improvement (``evals_result_``)."""
        X, y, seg, _ = self._inputs(X, y, qid, fit=True, group=group, need_queries=True)
        model = _rankboost.rankboost(_dense(X), y, seg, rounds=self.rounds,
                                     num_thresholds=self.num_thresholds)
        if eval_set is not None:
            Xv, yv, sv = self._eval_data(eval_set, eval_qid, eval_group)
            Xv = jax.numpy.asarray(_dense(Xv), model.threshold.dtype)
            steps = model.alpha[:, None] * (Xv[:, model.feature].T > model.threshold[:, None])
            keep = self._eval_sequence(jax.numpy.cumsum(steps, axis=0), yv, sv)
            model = model._replace(feature=model.feature[:keep], threshold=model.threshold[:keep],
                                   alpha=model.alpha[:keep], r=model.r[:keep])
        self.model_ = model
        # the weight of the rounds that split on each feature, normalised to sum to 1
        imp = np.bincount(np.asarray(model.feature), np.abs(np.asarray(model.alpha, np.float64)),
                          minlength=X.shape[1])
        self.feature_importances_ = imp / imp.sum() if imp.sum() > 0 else imp
        return self._finish_fit(seg)

    def _scores(self, X):
        return _rankboost.rankboost_predict(self.model_, _dense(X))

