"""Patients by risk: RankRLS on censored survival times (:func:`rankjax.survival_graph`) as a
scikit-learn estimator that a scikit-survival user recognises."""
from __future__ import annotations

import numpy as np

from .._problem import Problem
from .._solve import fit as _fit
from ..graphs.survival import survival_graph
from ..metrics.survival import harrell_c
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
        X = self._mapped(X, np.zeros(m), seg)
        graph = survival_graph(t, e, strata)
        self.model_ = _fit(Problem(X, None, graph), self._solver(X), lam=self.lam).value
        return self._finish_fit(seg)

    def score(self, X, y=None, *, time=None, event=None, strata=None):
        """Harrell's C of the predicted risks against ``y`` (or ``time``/``event``)."""
        self._check_fitted()
        f = self.predict(X)
        t, e = survival_targets(y, time, event, f.shape[0])
        return float(harrell_c(f, t, e, strata))
