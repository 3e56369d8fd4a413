"""A generator of LETOR-like ranking data (fixed seed) for the main job, examples
and benchmarks."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._core.checks import check_seed
from .._core.types import saveable

__all__ = ["RankingData", "make_ranking_data", "make_sparse_ranking_data", "make_web_data",
           "make_interaction_data", "SurvivalData", "make_survival_data",
           "distort_like_logs", "LOG_KINDS"]


@saveable
class RankingData(NamedTuple):
    """``X [m, n]`` float64 (a ``scipy.sparse`` CSR matrix from
    :func:`make_sparse_ranking_data`), ``y [m]`` graded labels 0..levels-1,
    ``qid [m]`` int64 (rows of a query contiguous), ``w_true [n]`` the latent
    scoring direction."""

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
    rng = np.random.default_rng(check_seed(seed))
    w_rng = np.random.default_rng(12345)        # the latent model is the same for every seed
    w = w_rng.standard_normal(num_features) * (w_rng.random(num_features) < 0.5)
    w[0] = 2.0
    if isinstance(docs_per_query, (int, np.integer)):
        lo = hi = int(docs_per_query)
    else:
        lo, hi = docs_per_query
    if not 1 <= lo <= hi:
        raise ValueError(f"docs_per_query must be an int >= 1 or a range (lo, hi) with "
                         f"1 <= lo <= hi, got {docs_per_query!r}")
    if lo == hi:
        sizes = np.full(num_queries, lo)
    else:
        sizes = rng.integers(lo, hi + 1, num_queries)
    qid = np.repeat(np.arange(first_qid, first_qid + num_queries), sizes)
    m = int(sizes.sum())
    shift = rng.normal(0, 1, (num_queries, num_features))[qid - first_qid]
    X = rng.random((m, num_features)) + 0.3 * shift
    centred = X - shift * 0.3
    score = (centred @ w  # precision: numpy on the host
             + 0.5 * np.sin(3 * centred[:, 0]) + noise * rng.standard_normal(m))
    probs = np.array([0.45, 0.25, 0.15, 0.10, 0.05])[:levels]
    y = _grade(score, qid, probs)
    return RankingData(X, y, qid, w)


def _queries(rng, num_queries, docs_per_query, first_qid):
    """``(sizes [Q], qid [m])`` of ``num_queries`` queries of ``docs_per_query`` rows (an int
    or a range ``(lo, hi)``, each size drawn uniformly), their ids from ``first_qid``."""
    lo, hi = (docs_per_query,) * 2 if isinstance(docs_per_query, (int, np.integer)) \
        else docs_per_query
    if not 1 <= lo <= hi:
        raise ValueError(f"docs_per_query must be an int >= 1 or a range (lo, hi) with "
                         f"1 <= lo <= hi, got {docs_per_query!r}")
    sizes = rng.integers(lo, hi + 1, num_queries)
    return sizes, np.repeat(np.arange(first_qid, first_qid + num_queries), sizes)


def _grade(score, qid, probs):
    """Labels ``0..len(probs)-1`` cut at per-query rank quantiles with shares ``probs``."""
    order = np.lexsort((score, qid))
    q = qid[order]
    start = np.r_[0, np.flatnonzero(q[1:] != q[:-1]) + 1]
    size = np.diff(np.r_[start, len(q)])
    idx = np.repeat(np.arange(len(start)), size)
    frac = (np.arange(len(q)) - start[idx]) / np.maximum(size[idx] - 1, 1)
    cuts = np.cumsum(probs / probs.sum())[:-1]
    y = np.empty(len(q))
    y[order] = np.searchsorted(cuts, frac, side="right")
    return y


def make_sparse_ranking_data(num_rows: int, num_features: int, *, nnz_per_row: int = 75,
                             num_queries: int = 0, levels: int = 2, noise: float = 1.0,
                             zipf: float = 1.0, seed: int = 0, dtype=np.float32) -> RankingData:
    r"""Draws sparse, text-like ranking data (RCV1-style TF-IDF rows of unit norm)
    for the large-scale CG benchmarks and examples (Airola et al. 2010 §4).

    Each row has ``nnz_per_row`` positive entries in columns drawn with Zipf
    frequencies :math:`p_j \propto (j + 1)^{-zipf}` (word-like: a few common, many rare
    features; ``zipf=0`` is uniform; a column drawn twice in a row is redrawn
    uniformly, so rows have ``nnz_per_row`` entries), scaled to unit L2 norm. The latent score is
    ``X w_true + noise * N(0, 1)`` with ``w_true ~ N(0, I)`` (the same for every
    seed; ``X w_true`` has variance about 1); labels are per-query quantile
    grades of it (:func:`make_ranking_data`'s shares; 47 % positive for
    ``levels=2``).

    Args:
      num_rows: ``m``.
      num_features: ``n``.
      nnz_per_row: nonzeros per row (at most ``num_features``).
      num_queries: ``0`` for one global ranking (``qid`` all 0), else that many
        contiguous queries of (almost) equal size.
      levels: number of relevance levels (2: bipartite).
      noise: standard deviation of the latent-score noise.
      zipf: exponent of the column frequencies.
      seed: random seed.
      dtype: dtype of ``X`` (labels are float64).

    Returns:
      :class:`RankingData` with ``X`` a ``scipy.sparse.csr_matrix``.

    Example:
      >>> d = make_sparse_ranking_data(1000, 500, nnz_per_row=10, num_queries=50, levels=3)
      >>> d.X.shape, d.X.nnz, sorted(set(d.y.tolist())), len(set(d.qid.tolist()))
      ((1000, 500), 10000, [0.0, 1.0, 2.0], 50)
    """
    import scipy.sparse as sp
    if nnz_per_row > num_features:
        raise ValueError(f"nnz_per_row={nnz_per_row} exceeds num_features={num_features}")
    if num_rows < 1 or num_features < 1 or nnz_per_row < 1 or levels < 2 or num_queries < 0:
        raise ValueError("num_rows, num_features, nnz_per_row >= 1, levels >= 2 and "
                         "num_queries >= 0 are required")
    rng = np.random.default_rng(check_seed(seed))
    w = np.random.default_rng(12345).standard_normal(num_features)
    cdf = np.cumsum((np.arange(num_features) + 1.0) ** -zipf)
    cols = np.searchsorted(cdf, rng.random((num_rows, nnz_per_row)) * cdf[-1], side="right")
    cols = np.minimum(cols, num_features - 1).astype(np.int32)
    for _ in range(8):                       # redraw repeated columns uniformly
        cols.sort(axis=1)
        dup = np.zeros(cols.shape, bool)
        dup[:, 1:] = cols[:, 1:] == cols[:, :-1]
        if not dup.any():
            break
        cols[dup] = rng.integers(0, num_features, int(dup.sum()))
    vals = rng.exponential(1.0, (num_rows, nnz_per_row))
    vals /= np.sqrt(np.sum(vals * vals, axis=1, keepdims=True))
    X = sp.csr_matrix((vals.ravel().astype(dtype), cols.ravel(),
                       np.arange(0, num_rows * nnz_per_row + 1, nnz_per_row)),
                      shape=(num_rows, num_features))
    X.sum_duplicates()
    score = X @ w.astype(dtype) + noise * rng.standard_normal(num_rows)  # precision: scipy.sparse on the host
    qid = (np.arange(num_rows) * max(num_queries, 1) // num_rows).astype(np.int64)
    probs = np.array([0.53, 0.47]) if levels == 2 else \
        np.array([0.45, 0.25, 0.15, 0.10, 0.05] + [0.05] * max(levels - 5, 0))[:levels]
    return RankingData(X, _grade(score, qid, probs), qid, w)


WEB_KINDS = ("count", "bm25", "length", "tfidf", "ratio", "pagerank", "clicks", "noise")
"""The feature kinds of :func:`make_web_data`, in the order the columns cycle through them."""


def make_web_data(num_queries: int = 300, *, num_features: int = 136,
                  docs_per_query=(20, 80), levels: int = 5, noise: float = 0.7,
                  seed: int = 0, first_qid: int = 0) -> RankingData:
    """Draws web-search-like data with raw features, as search engines log them before any
    normalisation (MSLR-WEB, Yahoo! LTR; Qin & Liu 2013): term counts, BM25 and TF-IDF
    scores, stream lengths, match ratios, PageRank-like and click counts spanning 0 to
    :math:`10^{5}` and more, heavy-tailed, many zeros, a few huge values, constant columns and
    per-query shifts.

    Each document has three latent relevance factors (topicality ``t``, quality ``q``,
    popularity ``p``; standard normal plus a per-query shift); its latent score is
    ``t + 0.6 q + 0.4 tanh(p) + 0.4 t q + noise`` and the labels are per-query quantile
    grades of it (:func:`make_ranking_data`'s shares). Column ``j`` is of kind
    ``WEB_KINDS[j % 8]`` and reads factor ``j // 8 % 3`` through a monotone, noisy,
    heavy-tailed transform (a few columns are pure noise or constant): no column is the
    score, every useful one is skewed.

    Args:
      num_queries, docs_per_query, levels, noise, seed, first_qid: as
        :func:`make_ranking_data`.
      num_features: columns (136 as MSLR-WEB).

    Returns:
      :class:`RankingData` (``X`` float64, ``w_true`` the factor weights ``[1, 0.6, 0.4]``).

    Example:
      >>> d = make_web_data(20, seed=0)
      >>> d.X.shape[1], bool(d.X.max() > 1e4), bool((d.X == 0).mean() > 0.1)
      (136, True, True)
    """
    if num_queries < 1 or num_features < 1 or levels < 2:
        raise ValueError("num_queries, num_features >= 1 and levels >= 2 are required")
    rng = np.random.default_rng(check_seed(seed))
    sizes, qid = _queries(rng, num_queries, docs_per_query, first_qid)
    m, q = int(sizes.sum()), qid - first_qid
    shift = rng.normal(0, 0.7, (num_queries, 3))[q]
    factors = rng.standard_normal((m, 3)) + shift                  # t, q, p
    t, qual, pop = factors.T
    score = t + 0.6 * qual + 0.4 * np.tanh(pop) + 0.4 * t * qual + noise * rng.standard_normal(m)
    query_len = rng.integers(1, 8, num_queries)[q]                 # per-query: terms
    idf = rng.uniform(1.0, 12.0, num_queries)[q]
    doc_len = rng.lognormal(6.0 + 0.3 * qual, 1.0)                 # 50 .. 10^5 words
    X = np.empty((m, num_features))
    for j in range(num_features):
        f = factors[:, j // 8 % 3] + 0.8 * rng.standard_normal(m)
        kind = WEB_KINDS[j % 8]
        if kind == "count":
            col = rng.poisson(np.exp(0.3 + 0.9 * f) * query_len * (doc_len / 500) ** 0.5)
        elif kind == "bm25":
            tf = rng.poisson(np.exp(0.2 + 0.9 * f))
            col = idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * doc_len / 500.0))
        elif kind == "length":
            col = np.round(doc_len * rng.lognormal(0.1 * f, 0.3))
        elif kind == "tfidf":
            col = idf * rng.poisson(np.exp(0.5 + f)) * rng.lognormal(0, 0.5, m)
        elif kind == "ratio":
            col = np.round(query_len / (1 + np.exp(-f)) * np.ones(m)) / query_len
        elif kind == "pagerank":
            col = (rng.pareto(1.2, m) + 1) * np.exp(0.8 * f)
        elif kind == "clicks":
            col = np.where(rng.random(m) < 0.6, 0.0, np.round(rng.lognormal(2 + 1.2 * f, 1.5)))
        else:
            col = rng.lognormal(3.0, 2.0, m) if j % 16 == 7 else np.full(m, float(j))
        X[:, j] = col
    probs = np.array([0.45, 0.25, 0.15, 0.10, 0.05] + [0.05] * max(levels - 5, 0))[:levels]
    return RankingData(X, _grade(score, qid, probs), qid, np.array([1.0, 0.6, 0.4]))


def make_interaction_data(num_queries: int = 300, *, num_features: int = 136,
                          docs_per_query=(50, 150), levels: int = 5, noise: float = 0.5,
                          seed: int = 0, first_qid: int = 0) -> RankingData:
    r"""Draws ranking data whose relevance acts through interactions and symmetric shapes,
    which no column's marginal (within-query) correlation with the labels sees: standard
    normal columns plus a per-query shift, and the latent score

    .. math::

       s = \sum_{k<8} \tanh(2 x_{2k} x_{2k+1}) + \sum_{k<8} \sin(2 x_{16+k})
           + \frac12 \sum_{k<8} (x_{24+k}^2 - 1) + 0.7 \sum_{k<8} x_{32+k}
           + \text{noise} \cdot \sigma_s\, \varepsilon

    (8 interacting pairs, 8 sines, 8 squares and 8 linear columns, each group of about the
    same variance; every other column is noise; :math:`\sigma_s` the signal's standard
    deviation), graded per query into ``levels`` labels (:func:`make_ranking_data`'s
    shares). A kernel on columns weighted by their correlation with the labels scales the 24
    non-linear columns like noise; the columns' own ranks do not.

    Args:
      num_queries, docs_per_query, levels, seed, first_qid: as :func:`make_ranking_data`.
      num_features: columns (at least 40).
      noise: the noise's standard deviation relative to the signal's.

    Returns:
      :class:`RankingData` (``X`` float64, ``w_true`` the groups' coefficients).

    Example:
      >>> d = make_interaction_data(10, seed=0)
      >>> d.X.shape[1], sorted(set(d.y.tolist()))
      (136, [0.0, 1.0, 2.0, 3.0, 4.0])
    """
    if num_queries < 1 or num_features < 40 or levels < 2:
        raise ValueError("num_queries >= 1, num_features >= 40 and levels >= 2 are required")
    rng = np.random.default_rng(check_seed(seed))
    sizes, qid = _queries(rng, num_queries, docs_per_query, first_qid)
    m = int(sizes.sum())
    X = rng.standard_normal((m, num_features)) + rng.normal(0, 0.5, (num_queries, num_features))[
        qid - first_qid]
    x = X - X.mean(axis=0)
    signal = (np.tanh(2 * x[:, 0:16:2] * x[:, 1:16:2]).sum(1) + np.sin(2 * x[:, 16:24]).sum(1)
              + 0.5 * (x[:, 24:32] ** 2 - 1).sum(1) + 0.7 * x[:, 32:40].sum(1))
    score = signal + noise * signal.std() * rng.standard_normal(m)
    probs = np.array([0.45, 0.25, 0.15, 0.10, 0.05] + [0.05] * max(levels - 5, 0))[:levels]
    return RankingData(X, _grade(score, qid, probs), qid, np.array([1.0, 1.0, 0.5, 0.7]))


@saveable
class SurvivalData(NamedTuple):
    """``X [m, n]`` float64, ``time [m]`` the event's or the censoring's time, ``event [m]``
    bool (True: the event was observed), ``risk [m]`` the true log-hazard."""

    X: np.ndarray
    time: np.ndarray
    event: np.ndarray
    risk: np.ndarray


def make_survival_data(num_rows: int = 1000, *, num_features: int = 10, censoring: float = 2.0,
                       seed: int = 0) -> SurvivalData:
    r"""Draws censored survival times whose hazard acts through an interaction and a square:
    standard normal columns, the log-hazard :math:`h = x_0 x_1 + \tfrac12 x_2^2 + \tfrac12 x_3`
    (every other column noise), event times exponential of rate :math:`e^{h}`, censoring
    times exponential of mean ``censoring`` (about a third censored at 2), each patient's
    time the earlier of the two. A linear model sees only :math:`x_3`; a kernel sees all.

    Args:
      num_rows: patients.
      num_features: columns (at least 4).
      censoring: the censoring times' mean (larger: fewer censored).
      seed: the generator's seed.

    Example:
      >>> d = make_survival_data(500, seed=0)
      >>> d.X.shape, bool(0.5 < d.event.mean() < 0.9)
      ((500, 10), True)
    """
    if num_rows < 2 or num_features < 4 or not censoring > 0:
        raise ValueError("num_rows >= 2, num_features >= 4 and censoring > 0 are required")
    rng = np.random.default_rng(check_seed(seed))
    X = rng.standard_normal((num_rows, num_features))
    h = X[:, 0] * X[:, 1] + 0.5 * X[:, 2] ** 2 + 0.5 * X[:, 3]
    t_event, t_cens = rng.exponential(np.exp(-h)), rng.exponential(censoring, num_rows)
    return SurvivalData(X, np.minimum(t_event, t_cens), t_event <= t_cens, h)


LOG_KINDS = ("scale", "exp", "shift", "cap", "count", "cube", "sentinel", "nan")
"""The distortions of :func:`distort_like_logs`, one drawn per column."""


def distort_like_logs(X, *more, seed: int = 0, share: float = 0.1):
    r"""The columns of ``X`` (and of every array in ``more``, with the same map) logged as raw
    engines log them: each column through one random map, increasing or decreasing (a coin),
    of a kind drawn from ``LOG_KINDS`` (``z`` the column standardised on ``X``):

    * ``scale``: :math:`x \cdot 10^{k}`, :math:`k \in [-3, 6]`;
    * ``exp``: :math:`e^{c z}`, :math:`c \in [1, 4]` (heavy tails; at most :math:`e^{80}`);
    * ``shift``: :math:`x \cdot 10^{k} - 10^{s}`, :math:`k \in [0, 3]`, :math:`s \in [3, 5]` (large
      negatives, as log-likelihoods);
    * ``cap``: a count :math:`1 + 65534\, e^{c (z - z_{0.7})}` capped at 65,535, which 30 % of the
      rows of ``X`` reach (a sentinel cap: information lost, as in the logs);
    * ``count``: :math:`\operatorname{round}(10^{k} e^{z})` (counts, ties);
    * ``cube``: :math:`(10^{k} z)^3`;
    * ``sentinel``: the column kept, ``share`` of its values replaced by a missing-value code
      (:math:`-1` or :math:`-10^{4}`);
    * ``nan``: the column kept, ``share`` of its values NaN.

    Boosted trees see the same data after any of the increasing or decreasing maps; a model
    of distances does not (issue 74's battery: ``benchmarks/bench_first_screen.py``).

    Returns:
      ``(X', *more', kinds)``: float64 copies and the kind of every column.

    Example:
      >>> d = make_web_data(5, seed=0)
      >>> A, kinds = distort_like_logs(d.X, seed=1)
      >>> A.shape == d.X.shape, len(kinds), set(kinds) <= set(LOG_KINDS)
      (True, 136, True)
    """
    rng = np.random.default_rng(check_seed(seed))
    if not 0 <= share < 1:
        raise ValueError(f"share must lie in [0, 1), got {share}")
    arrays = [np.array(a, dtype=np.float64, copy=True) for a in (X,) + more]
    if any(a.ndim != 2 or a.shape[1] != arrays[0].shape[1] for a in arrays):
        raise ValueError("X and every array in more must be 2-D with the same columns")
    kinds = []
    for j in range(arrays[0].shape[1]):
        col = arrays[0][:, j]
        mu, sd = float(np.mean(col)), float(np.std(col)) or 1.0
        sign, kind = rng.choice([-1.0, 1.0]), LOG_KINDS[rng.integers(len(LOG_KINDS))]
        f = _log_map(kind, rng, (col - mu) / sd)
        kinds.append(kind)
        for a in arrays:
            v = a[:, j]
            out = sign * f(v, (v - mu) / sd)
            if kind in ("sentinel", "nan"):
                code = np.nan if kind == "nan" else rng.choice([-1.0, -1e4])
                out = np.where(rng.random(v.shape) < share, code, v)
            a[:, j] = out
    return (*arrays, kinds)


def _log_map(kind, rng, z_train):
    """``f(x, z)`` of one kind (its constants drawn here)."""
    if kind == "scale":
        k = rng.uniform(-3, 6)
        return lambda x, z: x * 10.0 ** k
    if kind == "exp":
        c = rng.uniform(1, 4)
        return lambda x, z: np.exp(np.minimum(c * z, 80))        # within float32's range
    if kind == "shift":
        k, s = rng.uniform(0, 3), rng.uniform(3, 5)
        return lambda x, z: x * 10.0 ** k - 10.0 ** s
    if kind == "cap":
        c, q = rng.uniform(1, 3), float(np.quantile(z_train, 0.7))
        return lambda x, z: np.minimum(1 + 65534 * np.exp(np.minimum(c * (z - q), 50)), 65535.0)
    if kind == "count":
        k = rng.uniform(0.5, 2.5)
        return lambda x, z: np.round(np.exp(np.minimum(z, 50)) * 10 ** k)
    if kind == "cube":
        k = rng.uniform(0, 4)
        return lambda x, z: (z * 10 ** k) ** 3
    return lambda x, z: x
