"""The trees the benchmarks compare with: LightGBM's and XGBoost's rankers at their defaults
(:func:`trees`) or tuned on the training queries alone (:func:`tuned`: :data:`GRID` by 3-fold
GroupKFold, the search in their fit time)."""
from lib.shared import sizes

__all__ = ["GRID", "trees", "tuned"]

GRID = [dict(leaves=leaves, learning_rate=lr, n_estimators=trees)
        for leaves in (15, 63) for lr in (0.05, 0.1) for trees in (100, 300)]
"""The trees' tuning grid: leaves x learning rate x trees, scored by 3-fold GroupKFold over
the training queries (NDCG@10 of the held-out queries), the best refit on every training row."""


def trees(name, params=None):
    """``fit(X, y, q) -> predict`` of LightGBM's or XGBoost's ranker (``params`` from
    :data:`GRID`, or the library's defaults)."""
    p = params
    if name.startswith("LightGBM"):
        import lightgbm
        kw = {} if p is None else dict(num_leaves=p["leaves"], learning_rate=p["learning_rate"],
                                       n_estimators=p["n_estimators"])
        return lambda X, y, q: lightgbm.LGBMRanker(verbose=-1, **kw).fit(X, y, group=sizes(q)).predict
    import xgboost
    kw = {} if p is None else dict(max_leaves=p["leaves"], grow_policy="lossguide",
                                   learning_rate=p["learning_rate"], n_estimators=p["n_estimators"])
    return lambda X, y, q: xgboost.XGBRanker(**kw).fit(X, y, qid=q).predict


def tuned(name):
    """The trees tuned on the training queries alone: :data:`GRID` by 3-fold GroupKFold."""
    import numpy as np
    import rankjax as rj
    from sklearn.model_selection import GroupKFold

    def fit(X, y, q):
        splits = list(GroupKFold(n_splits=3).split(X, y, groups=q))    # row order kept
        mean = []
        for params in GRID:
            f = trees(name, params)
            mean.append(np.mean([float(rj.ndcg(np.asarray(f(X[a], y[a], q[a])(X[b]), np.float64),
                                               y[b], q[b], k=10)) for a, b in splits]))
        return trees(name, GRID[int(np.argmax(mean))])(X, y, q)
    return fit
