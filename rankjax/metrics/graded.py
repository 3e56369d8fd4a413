"""Graded relevance measures per query (docs/math.md): NDCG@k, mean average precision
and precision@k, with the ``no_relevant`` convention for queries without a relevant
document. Same conventions as :mod:`rankjax.metrics.pairs` (per-query values averaged over
the valid queries; NaN when none is valid).

Gradients: every measure is piecewise constant in the scores (it depends on their
order), so ``jax.grad`` of it is zero almost everywhere. To learn through a ranking
objective differentiate :func:`rankjax.cv_loss` (the RankRLS loss or its smooth
``loss="pairwise"``) or a smooth surrogate of your own.
"""
from __future__ import annotations

from functools import partial
from typing import Optional
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from .._core.checks import is_int
from .._core.host import is_concrete, reduce_concrete, reduction
from .._core.segments import run_ids
from .pairs import finish_per_query, nan_queries, prepare_scores


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
    r"""NDCG@k per query, averaged (docs/math.md).

    ``DCG@k = sum_{r < k} gain(y_(r)) / log2(r + 2)`` over the rows ranked by
    descending score, divided by the DCG@k of the ideal order. Piecewise constant in the
    scores: ``jax.grad`` of it is zero almost everywhere (differentiate
    :func:`rankjax.cv_loss` or a smooth surrogate).

    Args:
      scores, y, qid, num_queries: as in :func:`pairwise_error`.
      k: cut-off (static int; default 10, as the LETOR tools); ``None`` for the whole list.
      gain: ``"exp2"`` (:math:`2^y - 1`, default) or ``"linear"`` (``y``); labels must
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
    f, y, seg, Q, num = prepare_scores(scores, y, qid, num_queries, per_query)
    if is_concrete(y):
        if bool(reduce_concrete(_any_negative, y)):
            raise ValueError("ndcg needs graded relevance labels y >= 0 (gains 2^y - 1 or y); "
                             "shift or clip the labels, e.g. -1/+1 to 0/1")
    return _ndcg(f, y, seg, (Q, num, per_query, f.shape[0] if k is None else k, gain, ties,
                             no_relevant))


_any_negative = reduction(lambda xp, y: xp.any(y < 0))


@partial(jax.jit, static_argnums=3)
def _ndcg(f, y, seg, opts):
    """``opts = (Q, num, per_query, kk, gain, ties, no_relevant)`` (static)."""
    Q, num, per_query, kk, gain, ties, no_relevant = opts
    values, has_rel = _ndcg_core(f, y, seg, Q, kk, gain, ties)
    values, valid = _apply_no_relevant(values, has_rel, no_relevant)
    return finish_per_query(values, valid & _present(seg, Q), per_query, num, nan_queries(f, y, seg, Q))


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
        rid = run_ids(s_seg, s_negf)
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
    f, y, seg, Q, num = prepare_scores(scores, y, qid, num_queries, per_query)
    return _relevance(f, y, seg, threshold, (Q, num, per_query, no_relevant, k, ties))


@partial(jax.jit, static_argnums=4)
def _relevance(f, y, seg, threshold, opts):
    """MAP (``k is None``) or P@k over rows ranked by descending score; score ties
    averaged over their random orderings (``"average"``) or in input order.
    ``opts = (Q, num, per_query, no_relevant, k, ties)`` (static)."""
    Q, num, per_query, no_relevant, k, ties = opts
    m = f.shape[0]
    s_seg, s_negf, s_idx, rank = _ranked(f, seg, Q)
    rel = (y[s_idx] >= threshold).astype(f.dtype)
    n_rel = jax.ops.segment_sum(rel, s_seg, num_segments=Q)
    has_rel = n_rel > 0
    # relevant rows before each position within its query: global cumsum minus query offset
    before = jnp.cumsum(rel) - rel - (jnp.cumsum(n_rel) - n_rel)[s_seg]
    pos = rank.astype(f.dtype)
    if ties == "average":
        rid = run_ids(s_seg, s_negf)                 # tie groups, in ranked order
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
    return finish_per_query(values, valid & _present(seg, Q), per_query, num, nan_queries(f, y, seg, Q))


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


for _fn in (ndcg, mean_average_precision, precision_at_k):
    _fn.higher_is_better = True
