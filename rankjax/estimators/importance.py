"""What a fitted estimator learned, measured on rows it did not see: the permutation
importance of its features (Breiman 2001, §10), ranked by queries (``score`` with ``qid``,
never all rows as one query)."""
from __future__ import annotations

import numpy as np

from .._core.checks import check_count, check_seed


def permutation_importance(estimator, X, y, qid=None, *, group=None, n_repeats: int = 3,
                           random_state: int = 0) -> np.ndarray:
    """``[n]`` the mean drop of ``estimator.score`` (NDCG@``score_k`` by queries) when one
    feature's values are shuffled across the rows ``X`` (held-out rows: a validation or test
    set), ``n_repeats`` shuffles each. The estimators' own ``feature_importances_`` (the
    learned weights) need no data; this is the measure for a model without them (a kernel of
    one's own, ``feature_map=None``) and for any model on new rows.

    Example:
      >>> import rankjax as rj
      >>> from rankjax.estimators import RankRLS
      >>> d = rj.make_ranking_data(20, num_features=3, seed=0)
      >>> est = RankRLS().fit(d.X, d.y, qid=d.qid)
      >>> imp = permutation_importance(est, d.X, d.y, d.qid)
      >>> int(imp.argmax())                          # the generator's strongest feature
      0
    """
    n_repeats = check_count(n_repeats, "n_repeats")
    rng = np.random.default_rng(check_seed(random_state))
    values = np.array(X.to_numpy() if hasattr(X, "to_numpy") else X, dtype=np.float64, copy=True)
    if values.ndim != 2:
        raise ValueError(f"X must be 2-D [m, n], got shape {values.shape}")
    base = estimator.score(values, y, qid, group=group)
    out = np.zeros(values.shape[1])
    for j in range(values.shape[1]):
        keep = values[:, j].copy()
        for _ in range(n_repeats):
            values[:, j] = rng.permutation(keep)
            out[j] += base - estimator.score(values, y, qid, group=group)
        values[:, j] = keep
    return out / n_repeats
