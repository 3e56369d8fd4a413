"""What the estimators take of scikit-learn, an optional extra: its base class and
``NotFittedError`` (a stand-in with ``get_params``/``set_params`` without it), and the check
that a model-selection search will score its folds with their queries."""
from __future__ import annotations

import inspect
import sys

__all__ = ["BaseEstimator", "NotFittedError", "NO_QUERIES", "check_routing"]

try:                                            # scikit-learn is an optional extra
    from sklearn.base import BaseEstimator
    from sklearn.exceptions import NotFittedError
except ImportError:                             # pragma: no cover - exercised without sklearn
    class NotFittedError(ValueError, AttributeError):
        pass

    class BaseEstimator:
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


NO_QUERIES = ("a model fitted on several queries ranks rows by query: pass qid= (or group=); "
              "under GridSearchCV, cross_validate or a Pipeline turn on scikit-learn's metadata "
              "routing, sklearn.set_config(enable_metadata_routing=True), which passes qid to "
              "score as to fit (the estimators request it), or give X as a DataFrame with a "
              "'qid' column")


def check_routing(est, qid, group, seg):
    """A fit inside scikit-learn's model selection (``GridSearchCV``,
    ``cross_validate``, ...) whose folds will be scored by the estimator's ``score`` without their
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
        raise ValueError(f"{type(est).__name__}: the folds of this search would be scored "
                         f"without their queries: {NO_QUERIES}")
