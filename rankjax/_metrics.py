"""Ranking measures per query over segment ids (docs/math.md).

Every measure is computed per query and averaged over the queries where it is
defined ("valid": at least one pair with different labels for the pairwise
measures; at least one relevant document for NDCG/MAP/P@k unless
``no_relevant`` says otherwise). When no query is valid the average is
undefined and NaN is returned; ``per_query=True`` returns the per-query values
and the validity mask instead.

Pair counts are obtained by sorting, O(m log^2 m) time and O(m) memory —
never by enumerating pairs, so a global ranking of 10^6 rows is fine.

Query ids: with ``num_queries=None`` any integer ids are remapped on the host;
under ``jit`` pass segment ids ``0 .. Q-1`` and ``num_queries=Q`` (static).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._checks import (as_float_array, check_flag, check_indices, indices_ok, is_concrete, is_int, nan_unless,
                      reduce_concrete, resolve_segments)
from ._segments import count_sum as _count_sum, count_to_float as _to_float, run_ids as _run_ids

__all__ = ["Metric", "metric_sign", "PerQuery", "pairwise_error", "cindex", "auc", "disagreement_error",
           "kendall_tau_b", "ndcg", "mean_average_precision", "precision_at_k",
           "edge_disagreement_error"]


class PerQuery(NamedTuple):
    """Per-query values ``[Q]`` and the mask ``[Q]`` of queries where they are defined."""

    values: jax.Array
    valid: jax.Array


def _prep(scores, y, qid, num_queries, per_query=False):
    check_flag(per_query, "per_query")
    f = as_float_array(scores, "scores", finite=True)
    if f.ndim != 1:
        raise ValueError(f"scores must be 1-D [m] (vmap over outputs), got shape {f.shape}")
    if f.shape[0] == 0:
        raise ValueError("scores is empty")
    y = as_float_array(y, "y", finite=True)
    if y.shape != f.shape:
        raise ValueError(f"y must have the shape of scores {f.shape}, got {y.shape}")
    seg, Q, num = resolve_segments(qid, num_queries, f.shape[0])
    dtype = jnp.result_type(f.dtype, y.dtype)
    # the real number of queries only matters (and is only a static argument) per query
    return f.astype(dtype), y.astype(dtype), seg, Q, num if per_query else 0


def _finish(values, valid, per_query, num, nan_queries=None):
    """Mean over the valid queries, or the per-query values of the ``num`` real queries
    (the segments beyond ``num`` are padding). A query with a NaN/inf score or label
    (``nan_queries``, possible only under ``jit``, where values cannot be checked) is
    NaN, and so is the mean: never a plausible number."""
    if nan_queries is not None:
        values = jnp.where(nan_queries, jnp.nan, values)
        valid = valid | nan_queries
    if per_query:
        return PerQuery(values[:num], valid[:num])
    w = valid.astype(values.dtype)
    return jnp.sum(jnp.where(valid, values, 0)) / jnp.sum(w)


def _nan_queries(f, y, seg, Q):
    """``[Q]`` True for the queries holding a non-finite score or label."""
    bad = ~(jnp.isfinite(f) & jnp.isfinite(y))
    return jax.ops.segment_max(bad.astype(jnp.int32), seg, num_segments=Q) > 0


def _tied_pairs(seg, Q, *keys):
    """``[Q]`` exact count (see :func:`count_sum`) of the pairs inside each query that
    are equal on all ``keys`` (all pairs when there is no key): every row counts
    the rows before it in its run of equal keys."""
    m = seg.shape[0]
    ops = lax.sort((seg, *keys), num_keys=1 + len(keys))
    rid = _run_ids(*ops)
    idx = jnp.arange(m, dtype=jnp.int32)
    first = jax.ops.segment_min(idx, rid, num_segments=m)
    return _count_sum(idx - first[rid], ops[0], Q, bits=max(1, (m - 1).bit_length()))


def _strict_discordant(f, y, seg, Q):
    """``[Q]``: pairs (j, k) in one query with ``y_j < y_k`` and ``f_j > f_k``.

    Rows sorted by (query, y, f) leave no strict f-inversion inside a label tie,
    so the strict inversions of f in that order are exactly the discordant
    pairs. ``f`` is replaced by its dense rank in (query, f) order, which keeps
    queries apart, and inversions are counted by a bottom-up merge sort: at each
    level every element of a right half counts the elements of its left sibling
    that are strictly larger (one sort + cumsum per level, log2 m levels).
    """
    m = seg.shape[0]
    idx = jnp.arange(m, dtype=jnp.int32)
    s_seg, s_f, s_idx = lax.sort((seg, f, idx), num_keys=2)
    g_sorted = _run_ids(s_seg, s_f)
    g = jnp.zeros(m, jnp.int32).at[s_idx].set(g_sorted)
    seg_of_g = jnp.zeros(m + 1, jnp.int32).at[g_sorted].set(s_seg).at[m].set(Q)
    seq = lax.sort((seg, y, f, g), num_keys=3)[3]
    P = 1 << max(1, (m - 1).bit_length())
    arr = jnp.concatenate([seq, jnp.full(P - m, m, jnp.int32)])
    out = 0
    b, level = 1, 0
    while b < P:
        blocks = arr.reshape(P // (2 * b), 2 * b)
        is_right = (jnp.arange(2 * b) >= b).astype(jnp.int32)
        tag = jnp.broadcast_to(is_right, blocks.shape)
        vals, tags = lax.sort((blocks, tag), dimension=1, num_keys=2)
        left_le = jnp.cumsum(1 - tags, axis=1)          # left elements <= value so far
        greater = jnp.where(tags == 1, b - left_le, 0)  # left elements > a right value
        out = out + _count_sum(greater.reshape(-1), seg_of_g[vals.reshape(-1)], Q + 1,
                               bits=level + 1)
        arr = vals.reshape(-1)
        b, level = 2 * b, level + 1
    return out[:Q]


class _PairStats(NamedTuple):
    """Exact counts per query (:func:`count_sum` form): differences never cancel."""

    n_pairs: jax.Array      # pairs with different labels
    discordant: jax.Array   # y_j < y_k and f_j > f_k
    score_ties: jax.Array   # f_j == f_k with different labels
    all_pairs: jax.Array    # n (n - 1) / 2
    all_score_ties: jax.Array


@partial(jax.jit, static_argnums=3)   # compiled once per shape; inlined under user jit/vmap
def _pair_stats(f, y, seg, Q):
    all_pairs = _tied_pairs(seg, Q)
    f_ties = _tied_pairs(seg, Q, f)
    return _PairStats(all_pairs - _tied_pairs(seg, Q, y), _strict_discordant(f, y, seg, Q),
                      f_ties - _tied_pairs(seg, Q, y, f), all_pairs, f_ties)


def _safe_div(a, b):
    return jnp.where(b > 0, a / jnp.where(b > 0, b, 1), 0)


def pairwise_error(scores, y, qid=None, *, num_queries: Optional[int] = None,
                   per_query: bool = False):
    """Pairwise ranking error (Airola et al. 2010 eq. 1), averaged over queries with pairs.

    ``1/|Q| sum_Q 1/N_Q sum_{y_j < y_k} H(f_j - f_k)`` with ``H(0) = 1/2``: the
    fraction of differently-labelled pairs ordered wrongly, score ties counting
    half. Computed by sorting; a query whose labels are all equal (or of size 1)
    has no pair and is left out of the average.

    Args:
      scores: ``[m]`` predicted scores.
      y: ``[m]`` labels.
      qid: ``[m]`` query ids; ``None`` for one global ranking.
      num_queries: see the module docstring.
      per_query: return :class:`PerQuery` instead of the mean.

    Example:
      >>> import numpy as np
      >>> f, y = np.array([0.1, 0.4, 0.4, 0.9]), np.array([0, 1, 0, 1])
      >>> print(f"{float(pairwise_error(f, y)):.4f}")
      0.1250
    """
    return _pair_metric(*_prep(scores, y, qid, num_queries, per_query), per_query, "pairwise")


def cindex(scores, y, qid=None, *, num_queries: Optional[int] = None, per_query: bool = False):
    """Concordance index ``1 - pairwise_error`` (ties count half); AUC for two labels.

    Example:
      >>> print(f"{float(cindex([0.1, 0.4, 0.4, 0.9], [0, 1, 0, 1])):.4f}")
      0.8750
    """
    return _pair_metric(*_prep(scores, y, qid, num_queries, per_query), per_query, "cindex")


_not_binary = jax.jit(lambda y: jnp.any((y != 0) & (y != 1)))


def auc(scores, y, qid=None, *, num_queries: Optional[int] = None, per_query: bool = False):
    """Area under the ROC curve for binary labels (1 positive, 0 negative):
    the :func:`cindex` of the scores, ties counting half. Per query when ``qid``
    is given (queries with only one class are left out).

    Example:
      >>> print(f"{float(auc([0.2, 0.8, 0.5], [0, 1, 0])):.2f}")
      1.00
    """
    if is_concrete(y) and np.size(y) and bool(reduce_concrete(_not_binary, as_float_array(y, "y"))):
        raise ValueError("auc needs binary labels 0/1 in y (graded labels: use cindex)")
    out = cindex(scores, y, qid, num_queries=num_queries, per_query=per_query)
    if is_concrete(y):
        return out
    ok = ~_not_binary(jnp.asarray(y))           # traced labels: non-binary gives NaN
    if per_query:
        return out._replace(values=jnp.where(ok, out.values, jnp.nan))
    return jnp.where(ok, out, jnp.nan)


def disagreement_error(scores, y, qid=None, *, num_queries: Optional[int] = None,
                       per_query: bool = False):
    """Disagreement error (Pahikkala et al. 2009 eq. 1): like :func:`pairwise_error` but with the
    ``sign(0) = -1`` convention, i.e. a score tie counts as a full error.

    Example:
      >>> print(f"{float(disagreement_error([0.1, 0.4, 0.4, 0.9], [0, 1, 0, 1])):.4f}")
      0.2500
    """
    return _pair_metric(*_prep(scores, y, qid, num_queries, per_query), per_query, "disagreement")


def kendall_tau_b(scores, y, qid=None, *, num_queries: Optional[int] = None,
                  per_query: bool = False):
    """Kendall's τ_b between scores and labels per query (Pahikkala et al. 2007 §3.2).

    ``(C - D) / sqrt((n0 - n1)(n0 - n2))`` with ``n1``, ``n2`` the pairs tied in
    ``y`` and in the scores. Queries where either factor is 0 (all labels or all
    scores tied) are left out.

    Example:
      >>> print(f"{float(kendall_tau_b([1., 2., 3.], [1, 3, 2])):.4f}")
      0.3333
    """
    return _pair_metric(*_prep(scores, y, qid, num_queries, per_query), per_query, "tau_b")


@partial(jax.jit, static_argnums=(3, 4, 5, 6))
def _pair_metric(f, y, seg, Q, num, per_query, kind):
    st = _pair_stats(f, y, seg, Q)
    n_pairs = _to_float(st.n_pairs, f.dtype)
    if kind == "tau_b":
        concordant_minus_discordant = _to_float(st.n_pairs - 2 * st.discordant - st.score_ties,
                                                f.dtype)
        denom = n_pairs * _to_float(st.all_pairs - st.all_score_ties, f.dtype)
        valid = denom > 0
        tau = concordant_minus_discordant / jnp.sqrt(jnp.where(valid, denom, 1))
        return _finish(jnp.where(valid, tau, 0), valid, per_query, num, _nan_queries(f, y, seg, Q))
    if kind == "disagreement":
        err = _safe_div(_to_float(st.discordant + st.score_ties, f.dtype), n_pairs)
    else:                                   # ties count half
        err = _safe_div(_to_float(2 * st.discordant + st.score_ties, f.dtype), 2 * n_pairs)
    return _finish(1 - err if kind == "cindex" else err, n_pairs > 0, per_query, num,
                   _nan_queries(f, y, seg, Q))


# ----------------------------------------------------------------------------
# list measures

_NO_RELEVANT = ("skip", "one", "zero")


def _ranked(f, seg, Q):
    """Rows in (query, descending score, input order); rank within query, run ids."""
    m = f.shape[0]
    idx = jnp.arange(m, dtype=jnp.int32)
    s_seg, s_negf, s_idx = lax.sort((seg, -f, idx), num_keys=3)
    counts = jax.ops.segment_sum(jnp.ones(m, jnp.int32), seg, num_segments=Q)
    start = jnp.cumsum(counts) - counts
    rank = jnp.arange(m, dtype=jnp.int32) - start[s_seg]
    return s_seg, s_negf, s_idx, rank


def _check_k(k):
    if k is not None and (not is_int(k) or k < 1):
        raise ValueError(f"k must be a positive int or None, got {k!r}")


def _apply_no_relevant(values, has_rel, no_relevant):
    if no_relevant == "skip":
        return values, has_rel
    fill = 1.0 if no_relevant == "one" else 0.0
    return jnp.where(has_rel, values, fill), jnp.ones_like(has_rel)


def _present(seg, Q):
    return jax.ops.segment_sum(jnp.ones(seg.shape, jnp.int32), seg, num_segments=Q) > 0


def ndcg(scores, y, qid=None, *, num_queries: Optional[int] = None, k: Optional[int] = 10,
         gain: str = "exp2", ties: str = "average", no_relevant: str = "skip",
         per_query: bool = False):
    """NDCG@k per query, averaged (docs/math.md).

    ``DCG@k = sum_{r < k} gain(y_(r)) / log2(r + 2)`` over the rows ranked by
    descending score, divided by the DCG@k of the ideal order.

    Args:
      scores, y, qid, num_queries: as in :func:`pairwise_error`.
      k: cut-off (static int; default 10, as the LETOR tools); ``None`` for the whole list.
      gain: ``"exp2"`` (``2^y - 1``, default) or ``"linear"`` (``y``); labels must
        be ``>= 0`` (``ValueError`` otherwise).
      ties: ``"average"`` (default): rows with equal scores share the mean gain
        of their group, i.e. the expected DCG over random tie-breaking;
        ``"stable"``: ties keep the input order.
      no_relevant: a query whose ideal DCG is 0 (no relevant document) is
        ``"skip"``-ped (default, as the LETOR tools), or counts as ``"one"`` or
        ``"zero"``.
      per_query: return :class:`PerQuery`.

    Example:
      >>> print(f"{float(ndcg([3., 2., 1.], [0, 1, 2], k=None, gain='linear')):.4f}")
      0.6199
    """
    _check_k(k)
    if gain not in ("exp2", "linear"):
        raise ValueError(f"gain must be 'exp2' or 'linear', got {gain!r}")
    _check_ties(ties)
    if no_relevant not in _NO_RELEVANT:
        raise ValueError(f"no_relevant must be one of {_NO_RELEVANT}, got {no_relevant!r}")
    f, y, seg, Q, num = _prep(scores, y, qid, num_queries, per_query)
    if is_concrete(y):
        if bool(reduce_concrete(_any_negative, y)):
            raise ValueError("ndcg needs graded relevance labels y >= 0 (gains 2^y - 1 or y); "
                             "shift or clip the labels, e.g. -1/+1 to 0/1")
    return _ndcg(f, y, seg, Q, num, per_query, f.shape[0] if k is None else k, gain, ties,
                 no_relevant)


_any_negative = jax.jit(lambda y: jnp.any(y < 0))


@partial(jax.jit, static_argnums=tuple(range(3, 10)))
def _ndcg(f, y, seg, Q, num, per_query, kk, gain, ties, no_relevant):
    values, has_rel = _ndcg_core(f, y, seg, Q, kk, gain, ties)
    values, valid = _apply_no_relevant(values, has_rel, no_relevant)
    return _finish(values, valid & _present(seg, Q), per_query, num, _nan_queries(f, y, seg, Q))


def _ndcg_core(f, y, seg, Q, kk, gain, ties):
    """Per-query NDCG@kk values and the has-a-relevant-document mask."""
    m = f.shape[0]
    if gain == "exp2":
        # 2^y - 1 scaled by 2^-max_q(y) in each query (the ratio DCG/IDCG is unchanged):
        # no overflow for large labels, e.g. y > 127 in float32
        top = jax.ops.segment_max(y, seg, num_segments=Q)[seg]
        g = jnp.exp2(y - top) - jnp.exp2(-top)
    else:
        g = y

    def discount(rank):
        return jnp.where(rank < kk, 1 / jnp.log2(rank.astype(f.dtype) + 2), 0)

    s_seg, s_negf, s_idx, rank = _ranked(f, seg, Q)
    gs = g[s_idx]
    if ties == "average":
        rid = _run_ids(s_seg, s_negf)
        size = jax.ops.segment_sum(jnp.ones(m, f.dtype), rid, num_segments=m)
        gs = (jax.ops.segment_sum(gs, rid, num_segments=m) / jnp.maximum(size, 1))[rid]
    dcg = jax.ops.segment_sum(gs * discount(rank), s_seg, num_segments=Q)
    i_seg, i_neg_g = lax.sort((seg, -g), num_keys=2)
    counts = jax.ops.segment_sum(jnp.ones(m, jnp.int32), seg, num_segments=Q)
    irank = jnp.arange(m, dtype=jnp.int32) - (jnp.cumsum(counts) - counts)[i_seg]
    idcg = jax.ops.segment_sum(-i_neg_g * discount(irank), i_seg, num_segments=Q)
    has_rel = idcg > 0
    return jnp.where(has_rel, dcg / jnp.where(has_rel, idcg, 1), 0), has_rel


def _check_ties(ties):
    if ties not in ("average", "stable"):
        raise ValueError(f"ties must be 'average' or 'stable', got {ties!r}")


def _relevance_metric(scores, y, qid, num_queries, threshold, no_relevant, per_query, k, ties):
    _check_ties(ties)
    if no_relevant not in _NO_RELEVANT:
        raise ValueError(f"no_relevant must be one of {_NO_RELEVANT}, got {no_relevant!r}")
    if not np.isscalar(threshold) and np.ndim(threshold) != 0:
        raise TypeError(f"threshold must be a scalar, got shape {np.shape(threshold)}")
    if is_concrete(threshold) and not np.isfinite(float(threshold)):
        raise ValueError(f"threshold must be finite, got {threshold}")
    f, y, seg, Q, num = _prep(scores, y, qid, num_queries, per_query)
    return _relevance(f, y, seg, threshold, Q, num, per_query, no_relevant, k, ties)


@partial(jax.jit, static_argnums=tuple(range(4, 10)))
def _relevance(f, y, seg, threshold, Q, num, per_query, no_relevant, k, ties):
    """MAP (``k is None``) or P@k over rows ranked by descending score; score ties
    averaged over their random orderings (``"average"``) or in input order."""
    m = f.shape[0]
    s_seg, s_negf, s_idx, rank = _ranked(f, seg, Q)
    rel = (y[s_idx] >= threshold).astype(f.dtype)
    n_rel = jax.ops.segment_sum(rel, s_seg, num_segments=Q)
    has_rel = n_rel > 0
    # relevant rows before each position within its query: global cumsum minus query offset
    before = jnp.cumsum(rel) - rel - (jnp.cumsum(n_rel) - n_rel)[s_seg]
    pos = rank.astype(f.dtype)
    if ties == "average":
        rid = _run_ids(s_seg, s_negf)                 # tie groups, in ranked order
        n_g = jax.ops.segment_sum(jnp.ones(m, f.dtype), rid, num_segments=m)[rid]
        r_g = jax.ops.segment_sum(rel, rid, num_segments=m)[rid]
        r_before = jax.ops.segment_min(before, rid, num_segments=m)[rid]
        j = pos - jax.ops.segment_min(pos, rid, num_segments=m)[rid]
        p_rel = r_g / n_g
        # E[#relevant in the top pos+1 | this position relevant] (McSherry & Najork 2008)
        hits = r_before + 1 + j * (r_g - 1) / jnp.maximum(n_g - 1, 1)
    else:
        p_rel, hits = rel, before + 1
    if k is None:
        ap = jax.ops.segment_sum(p_rel * hits / (pos + 1), s_seg, num_segments=Q)
        values = jnp.where(has_rel, ap / jnp.where(has_rel, n_rel, 1), 0)
    else:
        values = jax.ops.segment_sum(p_rel * (rank < k), s_seg, num_segments=Q) / k
    values, valid = _apply_no_relevant(values, has_rel, no_relevant)
    return _finish(values, valid & _present(seg, Q), per_query, num, _nan_queries(f, y, seg, Q))


def mean_average_precision(scores, y, qid=None, *, num_queries: Optional[int] = None,
                           threshold: float = 1.0, ties: str = "average", no_relevant: str = "skip",
                           per_query: bool = False):
    """Mean average precision; a row is relevant when ``y >= threshold``
    (OHSUMED: ``threshold=2``, Pahikkala et al. 2007 §3.1). Score ties: ``"average"``
    (default) gives the expected AP over random orderings of the tied rows (McSherry &
    Najork 2008), so the input order never matters; ``"stable"`` keeps the input order.

    ``AP = 1/R sum_{relevant r} (#relevant in top r+1) / (r + 1)``; queries with no
    relevant row are handled by ``no_relevant`` (see :func:`ndcg`).

    Example:
      >>> print(f"{float(mean_average_precision([3., 2., 1.], [0, 1, 1])):.4f}")
      0.5833
    """
    return _relevance_metric(scores, y, qid, num_queries, threshold, no_relevant, per_query, None,
                             ties)


def precision_at_k(scores, y, qid=None, *, num_queries: Optional[int] = None, k: int = 10,
                   threshold: float = 1.0, ties: str = "average", no_relevant: str = "skip",
                   per_query: bool = False):
    """P@k: relevant rows (``y >= threshold``) among the top ``k``, divided by ``k``
    (also for queries shorter than ``k``, as the LETOR evaluation tool). Score ties:
    ``"average"`` (default, the expectation over random orderings of tied rows) or
    ``"stable"`` (input order).

    Example:
      >>> print(f"{float(precision_at_k([3., 2., 1.], [0, 1, 1], k=2)):.4f}")
      0.5000
    """
    _check_k(k)
    if k is None:
        raise ValueError("k must be a positive int")
    return _relevance_metric(scores, y, qid, num_queries, threshold, no_relevant, per_query, k, ties)


class Metric:
    """A metric with an explicit direction, for the selectors (``select_lambda``,
    ``cross_validate``, ``permutation_test``, the CG validation criterion).

    Every rankjax metric function carries ``higher_is_better``; wrap your own
    function (or a ``lambda`` around a rankjax metric) in ``Metric`` to give it one.

    Args:
      fn: ``fn(scores, y, qid, *, num_queries, **kw) -> value``.
      higher_is_better: the direction (required).

    Example:
      >>> m = Metric(lambda f, y, q=None, **kw: pairwise_error(f, y, q, **kw), higher_is_better=False)
      >>> print(f"{float(m([0.1, 0.4, 0.4, 0.9], [0, 1, 0, 1])):.4f}", m.higher_is_better)
      0.1250 False
    """

    def __init__(self, fn, *, higher_is_better: bool):
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self.fn, self.higher_is_better = fn, check_flag(higher_is_better, "higher_is_better")
        self.__name__ = getattr(fn, "__name__", "metric")

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return f"Metric({self.__name__}, higher_is_better={self.higher_is_better})"


_DATA_PARAMS = ("scores", "y", "qid", "num_queries", "per_query")


def check_metric_options(metric, options: dict, where: str) -> None:
    """Every keyword in ``options`` must be an option of ``metric`` (a keyword parameter
    of the function, or of ``Metric.fn``): ``TypeError`` naming the unknown keyword and
    the function it was given to otherwise, so a misspelt solver option (``maxiter``)
    never passes silently as a metric option. A metric taking ``**kwargs`` accepts any.

    Example:
      >>> check_metric_options(ndcg, {"k": 5}, "select_lambda")
      >>> check_metric_options(pairwise_error, {"maxiter": 0}, "rankrls_cg")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      TypeError: rankrls_cg got an unexpected keyword argument 'maxiter' (the metric ...)
    """
    if not options:
        return
    if isinstance(metric, str):
        fn = {"pairwise_error": pairwise_error}.get(metric)
        if fn is None:                           # "loss" and other named criteria: no options
            raise TypeError(f"{where} got an unexpected keyword argument {next(iter(options))!r} "
                            f"(the criterion {metric!r} takes none)")
    else:
        fn = getattr(metric, "fn", metric)
    import inspect
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return                                    # a builtin: cannot tell
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    allowed = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
               and p.name not in _DATA_PARAMS]
    for key in options:
        if key not in allowed:
            name = getattr(fn, "__name__", "the metric")
            takes = ", ".join(allowed) if allowed else "none"
            raise TypeError(f"{where} got an unexpected keyword argument {key!r} "
                            f"(the metric {name} takes {takes})")


def metric_sign(metric, greater_is_better: Optional[bool] = None) -> float:
    """``+1`` when lower values of ``metric`` are better, ``-1`` when higher are.

    The direction is ``greater_is_better`` when given, else the metric's
    ``higher_is_better`` attribute (``functools.partial`` is unwrapped). A
    callable without one (a ``lambda``, your own function) is an error rather
    than a guess.

    Example:
      >>> metric_sign(ndcg), metric_sign(pairwise_error), metric_sign(lambda *a: 0, True)
      (-1.0, 1.0, -1.0)
    """
    if not callable(metric):
        raise TypeError(f"metric must be a callable (e.g. rankjax.ndcg), got {metric!r}")
    if greater_is_better is None:
        inner = metric
        while isinstance(inner, partial):
            inner = inner.func
        greater_is_better = getattr(inner, "higher_is_better", None)
        if greater_is_better is None:
            raise ValueError(f"the direction of metric {getattr(inner, '__name__', inner)!r} "
                             "is unknown: pass greater_is_better=True/False or wrap it in "
                             "rankjax.Metric(fn, higher_is_better=...)")
    return -1.0 if greater_is_better else 1.0


def edge_disagreement_error(scores, head, tail):
    """Disagreement error over explicit preference edges (Pahikkala et al. 2009 eq. 1):
    the fraction of edges ``(h, j)`` with ``f_h <= f_j`` (``sign(0) = -1``).

    Example:
      >>> print(f"{float(edge_disagreement_error([1., 2., 2.], [1, 0, 2], [0, 2, 1])):.4f}")
      0.6667
    """
    f = as_float_array(scores, "scores", finite=True)
    if f.ndim != 1:
        raise ValueError(f"scores must be 1-D [m], got shape {f.shape}")
    h, t = check_indices(head, "head", f.shape[0]), check_indices(tail, "tail", f.shape[0])
    if h.shape != t.shape:
        raise ValueError(f"head and tail differ in length: {h.shape[0]} vs {t.shape[0]}")
    # traced indices cannot raise: one outside [0, m) makes the value NaN, never a clamped one
    return nan_unless(indices_ok(h, f.shape[0]) & indices_ok(t, f.shape[0]),
                      jnp.mean((f[h] <= f[t]).astype(f.dtype)))


for _fn, _hib in ((pairwise_error, False), (cindex, True), (auc, True), (disagreement_error, False),
                  (kendall_tau_b, True), (ndcg, True), (mean_average_precision, True),
                  (precision_at_k, True), (edge_disagreement_error, False)):
    _fn.higher_is_better = _hib
