"""Patients by risk: RankRLS on censored survival times (:func:`rankjax.survival_graph`) as a
scikit-learn estimator that a scikit-survival user recognises."""
from __future__ import annotations

import warnings

import numpy as np

from .._problem import Problem
from .._solve import fit as _fit
from ..graphs.survival import survival_graph
from ..metrics.survival import harrell_c
from ..selection.edges import GridEdgeWarning
from .base import checked_rows
from .frames import frame_values, is_frame
from .inputs import query_segments
from .rankrls import RankRLS


def survival_targets(y, time, event, m: int):
    """``(time [m], event [m] bool)`` from scikit-survival's structured ``y`` (its first
    field the event indicator, its second the time, as ``sksurv.util.Surv`` builds it) or
    from ``time=`` and ``event=``."""
    if (y is None) == (time is None and event is None):
        raise ValueError("give y (a structured array of (event, time), as scikit-survival's "
                         "Surv.from_arrays) or time= and event=, not both")
    if y is not None:
        names = getattr(getattr(y, "dtype", None), "names", None)
        if not names or len(names) != 2:
            raise TypeError("y must be a structured array of two fields (event, time), as "
                            "sksurv.util.Surv.from_arrays(event, time) builds it; or pass "
                            "time= and event=")
        event, time = y[names[0]], y[names[1]]
    elif time is None or event is None:
        raise ValueError("give both time= and event=")
    t, e = np.asarray(time, np.float64), np.asarray(event)
    if t.shape != (m,) or e.shape != (m,):
        raise ValueError(f"time and event must have one entry per row of X ({m}), got "
                         f"{t.shape} and {e.shape}")
    return t, e


class SurvivalRankRLS(RankRLS):
    r"""RankRLS on censored survival times: the comparable pairs of Harrell's C (patient ``i``'s
    event observed and :math:`t_i < t_j`, or tied with ``j`` censored), each ranked with a unit
    margin (:func:`rankjax.survival_graph`, normalised by the number of pairs) plus a ridge
    penalty; linear by default, ``kernel=`` as :class:`RankRLS`. ``predict`` returns risk
    scores (higher: the event sooner, as scikit-survival's); ``score`` is Harrell's C
    (:func:`rankjax.harrell_c`). The columns go through a label-free map (``feature_map``,
    as :class:`RankRLS`); categorical columns are refused (their map reads label scores).
    Choose ``lam`` with scikit-learn's ``GridSearchCV`` (its folds retrain on each training
    part's own pairs).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> from rankjax.estimators import SurvivalRankRLS
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(200, 3))
      >>> t = rng.exponential(np.exp(-X[:, 0]))
      >>> c = rng.exponential(2.0, 200)
      >>> model = SurvivalRankRLS(lam=1.0).fit(X, time=np.minimum(t, c), event=t <= c)
      >>> model.score(X, time=np.minimum(t, c), event=t <= c) > 0.6
      True
    """

    def fit(self, X, y=None, *, time=None, event=None, strata=None):
        """Fits the risk model of ``lam`` on ``X`` ``[m, n]`` and the times: ``y`` a
        structured array (event, time) as scikit-survival's, or ``time=``/``event=``;
        ``strata`` ``[m]`` (only patients of one stratum are compared)."""
        X, t, e, seg = self._survival_rows(X, y, time, event)
        graph = survival_graph(t, e, strata)
        self.model_ = _fit(Problem(X, None, graph), self._solver(X), lam=self.lam).value
        return self._finish_fit(seg)

    def _survival_rows(self, X, y, time, event):
        """``(rows through the label-free map, time, event, Segments)`` of a fit."""
        frame = frame_values(X, None) if is_frame(X) else None
        X = checked_rows(X, frame, missing=self._map_kind() is not None)
        self._record_rows(X.shape[1], frame)
        self.qid_column_ = None
        m = X.shape[0]
        t, e = survival_targets(y, time, event, m)
        if self._categorical():
            raise TypeError("categorical columns are read as label scores, which survival "
                            "times do not have: one-hot encode them")
        seg = query_segments(None, None, m)
        return self._mapped(X, np.zeros(m), seg), t, e, seg

    def score(self, X, y=None, *, time=None, event=None, strata=None):
        """Harrell's C of the predicted risks against ``y`` (or ``time``/``event``)."""
        self._check_fitted()
        f = self.predict(X)
        t, e = survival_targets(y, time, event, f.shape[0])
        return float(harrell_c(f, t, e, strata))


class SurvivalRankRLSCV(SurvivalRankRLS):
    r""":class:`SurvivalRankRLS` with λ chosen by k-fold cross-validation over patients:
    each fold's models (every λ of ``lams``, one path) are trained on the comparable pairs
    inside the other folds' patients and scored by Harrell's C on the pairs inside the fold;
    the λ of the best mean C is refitted on every patient. Exactly retraining (each fold's
    own survival graph), so the scores are honest; the closed-form path makes a fold cost one
    decomposition for the whole grid.

    Attributes (after ``fit``): ``lam_``, ``best_score_`` (the mean C), ``best_params_``,
    ``cv_results_`` (``param_lam``, ``mean_test_score``, ``std_test_score``,
    ``split{k}_test_score``, ``rank_test_score``) and the refitted model.

    Example:
      >>> import numpy as np
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(200, 3))
      >>> t, c = rng.exponential(np.exp(-X[:, 0])), rng.exponential(2.0, 200)
      >>> m = SurvivalRankRLSCV(lams=[0.1, 10.0], folds=3)
      >>> m = m.fit(X, time=np.minimum(t, c), event=t <= c)
      >>> m.lam_ in (0.1, 10.0), 0.5 < m.best_score_ <= 1
      (True, True)
    """

    def __init__(self, lams=tuple(np.logspace(-3, 3, 13)), *, folds=5, solver="auto",
                 kernel=None, gamma="mean", degree=2, coef0=1.0, basis="auto", random_state=0,
                 feature_map="auto", verbose=0):
        super().__init__(solver=solver, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                         basis=basis, random_state=random_state, feature_map=feature_map,
                         verbose=verbose)
        self.lams, self.folds = lams, folds

    def fit(self, X, y=None, *, time=None, event=None, strata=None):
        """Chooses λ by k-fold over patients (class docstring), then fits it on every row."""
        from .._solve import path as _path
        from ..solvers import predict
        lams = np.asarray(self.lams, np.float64)
        if lams.ndim != 1 or lams.size == 0 or not np.all(np.isfinite(lams) & (lams > 0)):
            raise ValueError(f"lams must be a non-empty 1-D grid of finite λ > 0, got "
                             f"{self.lams!r}")
        Z, t, e, seg = self._survival_rows(X, y, time, event)
        Z, m = np.asarray(Z), Z.shape[0]
        if isinstance(self.folds, bool) or not isinstance(self.folds, (int, np.integer)) \
                or not 2 <= self.folds <= m:
            raise ValueError(f"folds must be an int between 2 and the rows ({m}), got "
                             f"{self.folds!r}")
        s = None if strata is None else np.asarray(strata)
        solver = self._solver(Z)
        fold = np.random.default_rng(self.random_state).permutation(m) % int(self.folds)
        scores = np.full((int(self.folds), lams.size), np.nan)
        for k in range(int(self.folds)):
            tr, te = fold != k, fold == k
            try:
                graph = survival_graph(t[tr], e[tr], None if s is None else s[tr])
            except ValueError:                  # no comparable pair among these patients
                continue
            models = _path(Problem(Z[tr], None, graph), solver, lams=lams).value
            for i in range(lams.size):
                f = np.asarray(predict(models.model(i), Z[te]))
                scores[k, i] = float(harrell_c(f, t[te], e[te], None if s is None else s[te]))
        answered = np.isfinite(scores)
        mean = np.where(answered.any(0), np.nansum(scores, 0) / np.maximum(answered.sum(0), 1),
                        np.nan)
        if not answered.any():
            raise ValueError("no fold holds a comparable pair: too few observed events for "
                             f"{self.folds} folds")
        best = int(np.nanargmax(mean))
        if lams.size > 2 and lams[best] in (lams.min(), lams.max()):   # two λ: no interior
            warnings.warn(f"the best λ ({lams[best]:g}) lies on the edge of the grid "
                          f"[{lams.min():g}, {lams.max():g}]: Harrell's C may still improve past "
                          "it; give a wider lams", GridEdgeWarning, stacklevel=2)
        self.lam_, self.best_score_ = float(lams[best]), float(mean[best])
        self.best_params_ = {"lam": self.lam_}
        order = np.argsort(-np.nan_to_num(mean, nan=-np.inf), kind="stable")
        rank = np.empty(lams.size, int)
        rank[order] = np.arange(1, lams.size + 1)
        self.cv_results_ = {"param_lam": lams, "params": [{"lam": float(a)} for a in lams],
                            "mean_test_score": mean,
                            "std_test_score": np.sqrt(np.where(answered.any(0), np.nansum(
                                (scores - mean) ** 2, 0) / np.maximum(answered.sum(0), 1), np.nan)),
                            "rank_test_score": rank,
                            **{f"split{k}_test_score": scores[k] for k in range(len(scores))}}
        self.model_ = _fit(Problem(Z, None, survival_graph(t, e, s)), solver, lam=self.lam_).value
        return self._finish_fit(seg)
