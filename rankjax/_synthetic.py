"""A generator of LETOR-like ranking data (fixed seed) for the main job, examples
and benchmarks."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["RankingData", "make_ranking_data"]


class RankingData(NamedTuple):
    """``X [m, n]`` float64, ``y [m]`` graded labels 0..levels-1, ``qid [m]`` int64
    (rows of a query contiguous), ``w_true [n]`` the latent scoring direction."""

    X: np.ndarray
    y: np.ndarray
    qid: np.ndarray
    w_true: np.ndarray


def make_ranking_data(num_queries: int = 300, *, num_features: int = 46,
                      docs_per_query=(10, 40), levels: int = 5, noise: float = 0.5,
                      seed: int = 0, first_qid: int = 0) -> RankingData:
    """Draws LETOR-like data: per-query feature shifts, a sparse latent linear
    score with a mild non-linearity, and graded labels cut from per-query
    quantiles (about 45 % label 0, then 25, 15, 10, 5 %).

    Args:
      num_queries: number of queries.
      num_features: features per row.
      docs_per_query: ``(lo, hi)`` inclusive range of query sizes, or an int.
      levels: number of relevance levels.
      noise: standard deviation of the latent-score noise.
      seed: random seed (the same seed gives the same data).
      first_qid: id of the first query (to draw disjoint train/test sets).

    Example:
      >>> d = make_ranking_data(5, num_features=3, docs_per_query=4, seed=1)
      >>> d.X.shape, d.y.shape, sorted(set(d.qid.tolist()))
      ((20, 3), (20,), [0, 1, 2, 3, 4])
    """
    if num_queries < 1 or num_features < 1 or levels < 2:
        raise ValueError("num_queries, num_features >= 1 and levels >= 2 are required")
    rng = np.random.default_rng(seed)
    w_rng = np.random.default_rng(12345)        # the latent model is the same for every seed
    w = w_rng.standard_normal(num_features) * (w_rng.random(num_features) < 0.5)
    w[0] = 2.0
    if isinstance(docs_per_query, (int, np.integer)):
        sizes = np.full(num_queries, int(docs_per_query))
    else:
        lo, hi = docs_per_query
        sizes = rng.integers(lo, hi + 1, num_queries)
    qid = np.repeat(np.arange(first_qid, first_qid + num_queries), sizes)
    m = int(sizes.sum())
    shift = rng.normal(0, 1, (num_queries, num_features))[qid - first_qid]
    X = rng.random((m, num_features)) + 0.3 * shift
    centred = X - shift * 0.3
    score = centred @ w + 0.5 * np.sin(3 * centred[:, 0]) + noise * rng.standard_normal(m)
    probs = np.array([0.45, 0.25, 0.15, 0.10, 0.05])[:levels]
    cuts = np.cumsum(probs / probs.sum())[:-1]
    y = np.zeros(m)
    for q in range(num_queries):
        rows = np.flatnonzero(qid == q + first_qid)
        ranks = np.argsort(np.argsort(score[rows])) / max(len(rows) - 1, 1)
        y[rows] = np.searchsorted(cuts, ranks, side="right")
    return RankingData(X, y, qid, w)
