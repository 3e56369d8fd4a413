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
from jax.scipy.special import gammaln
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


def ndcg(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
         k: Optional[int] = 10, gain: str = "exp2", ties: str = "average",
         no_relevant: str = "skip", per_query: bool = False):
    r"""NDCG@k per query, averaged (docs/math.md).

    ``DCG@k = sum_{r < k} gain(y_(r)) / log2(r + 2)`` over the rows ranked by
    descending score, divided by the DCG@k of the ideal order. Piecewise constant in the
    scores: ``jax.grad`` of it is zero almost everywhere (differentiate
    :func:`rankjax.cv_loss` or a smooth surrogate).

    Args:
      scores, y, qid, num_queries, where: as in :func:`pairwise_error` (``[m]`` rows with
        query ids, or ``[Q, L]`` lists with a ``where`` mask as rax's).
      k: cut-off (static int; default 10, as the LETOR tools; rax's ``topn``); ``None`` for
        the whole list.
      gain: ``"exp2"`` (:math:`2^y - 1`, default) or ``"linear"`` (``y``); labels must
        be ``>= 0`` (``ValueError`` otherwise).
      ties: ``"average"`` (default): rows with equal scores share the mean gain
        of their group, i.e. the expected DCG over random tie-breaking;
        ``"stable"``: ties keep the input order.
      no_relevant: a query whose ideal DCG is 0 (no relevant document) is
        ``"skip"``-ped (default, as the LETOR tools), or counts as ``"one"`` or
        ``"zero"`` (rax's convention; with ``ties="stable"`` this equals
        ``rax.ndcg_metric``).
      per_query: return :class:`PerQuery`.

    Example:
      >>> print(f"{float(ndcg([3., 2., 1.], [0, 1, 2], k=None, gain='linear')):.4f}")
      0.6199
      >>> s, y = jnp.array([[3., 2., 1.], [1., 2., 0.]]), jnp.array([[0., 1., 2.], [1., 0., -1.]])
      >>> print(f"{float(ndcg(s, y, where=y >= 0, ties='stable', no_relevant='zero')):.4f}")
      0.6089
    """
    _check_k(k)
    if gain not in ("exp2", "linear"):
        raise ValueError(f"gain must be 'exp2' or 'linear', got {gain!r}")
    _check_ties(ties)
    if no_relevant not in _NO_RELEVANT:
        raise ValueError(f"no_relevant must be one of {_NO_RELEVANT}, got {no_relevant!r}")
    f, y, seg, Q, num = prepare_scores(scores, y, qid, num_queries, per_query, where)
    if is_concrete(y):                          # the entries `where` leaves out read as 0
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
    return finish_per_query(values, valid & _present(seg, Q), per_query, num,
                            nan_queries(f, y, seg, Q))


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


_DENOMINATORS = ("k", "retrieved")


def _relevance_metric(scores, y, qid, num_queries, where, threshold, no_relevant, per_query, k,
                      ties, measure):
    _check_ties(ties)
    if no_relevant not in _NO_RELEVANT:
        raise ValueError(f"no_relevant must be one of {_NO_RELEVANT}, got {no_relevant!r}")
    if not np.isscalar(threshold) and np.ndim(threshold) != 0:
        raise TypeError(f"threshold must be a scalar, got shape {np.shape(threshold)}")
    if is_concrete(threshold) and not np.isfinite(float(threshold)):
        raise ValueError(f"threshold must be finite, got {threshold}")
    f, y, seg, Q, num = prepare_scores(scores, y, qid, num_queries, per_query, where)
    return _relevance(f, y, seg, threshold, (Q, num, per_query, no_relevant, k, ties, measure))


@partial(jax.jit, static_argnums=4)
def _relevance(f, y, seg, threshold, opts):
    """MAP (``measure="ap"``), P@k (``"k"`` or ``"retrieved"``: its denominator) or the
    reciprocal rank (``"rr"``, at most ``k``) over rows ranked by descending score; score ties
    averaged over their random orderings (``"average"``) or in input order.
    ``opts = (Q, num, per_query, no_relevant, k, ties, measure)`` (static)."""
    Q, num, per_query, no_relevant, k, ties, measure = opts
    m = f.shape[0]
    s_seg, s_negf, s_idx, rank = _ranked(f, seg, Q)
    rel = (y[s_idx] >= threshold).astype(f.dtype)
    n_rel = jax.ops.segment_sum(rel, s_seg, num_segments=Q)
    has_rel = n_rel > 0
    # relevant rows before each position within its query: global cumsum minus query offset
    before = jnp.cumsum(rel) - rel - (jnp.cumsum(n_rel) - n_rel)[s_seg]
    pos = rank.astype(f.dtype)
    cut = jnp.ones(m, bool) if k is None else rank < k
    if ties == "average":
        rid = run_ids(s_seg, s_negf)                 # tie groups, in ranked order
        n_g = jax.ops.segment_sum(jnp.ones(m, f.dtype), rid, num_segments=m)[rid]
        r_g = jax.ops.segment_sum(rel, rid, num_segments=m)[rid]
        r_before = jax.ops.segment_min(before, rid, num_segments=m)[rid]
        j = pos - jax.ops.segment_min(pos, rid, num_segments=m)[rid]
        p_rel = r_g / n_g
        # E[#relevant in the top pos+1 | this position relevant] (McSherry & Najork 2008)
        hits = r_before + 1 + j * (r_g - 1) / jnp.maximum(n_g - 1, 1)
        # P(the group's first relevant row sits at offset j) = C(n-1-j, r-1) / C(n, r)
        first = _first_at(n_g, r_g, j) * (r_before == 0)
    else:
        p_rel, hits, first = rel, before + 1, rel * (before == 0)
    if measure == "ap":
        ap = jax.ops.segment_sum(p_rel * hits / (pos + 1), s_seg, num_segments=Q)
        values = jnp.where(has_rel, ap / jnp.where(has_rel, n_rel, 1), 0)
    elif measure == "rr":
        values = jax.ops.segment_sum(first * cut / (pos + 1), s_seg, num_segments=Q)
    else:
        hit = jax.ops.segment_sum(p_rel * cut, s_seg, num_segments=Q)
        if measure == "k":
            values = hit / k
        else:                                   # rax: of the rows retrieved, min(k, list)
            size = jax.ops.segment_sum(jnp.ones(m, f.dtype), s_seg, num_segments=Q)
            values = hit / jnp.maximum(jnp.minimum(size, k), 1)
    values, valid = _apply_no_relevant(values, has_rel, no_relevant)
    return finish_per_query(values, valid & _present(seg, Q), per_query, num,
                            nan_queries(f, y, seg, Q))


def _first_at(n, r, j):
    """``C(n-1-j, r-1) / C(n, r)``: the chance that the first of ``r`` relevant rows among
    ``n`` tied ones, in a random order, sits at offset ``j`` (0 past ``n - r`` and for
    ``r = 0``)."""
    ok = (r > 0) & (j <= n - r)
    a, b = jnp.where(ok, n - 1 - j, 1), jnp.where(ok, r - 1, 0)
    log_c = (gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)
             - gammaln(n + 1) + gammaln(r + 1) + gammaln(n - r + 1))
    return jnp.where(ok, jnp.exp(log_c), 0)


def mean_average_precision(scores, y, qid=None, *, num_queries: Optional[int] = None,
                           where=None, threshold: float = 1.0, ties: str = "average",
                           no_relevant: str = "skip",
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
    return _relevance_metric(scores, y, qid, num_queries, where, threshold, no_relevant,
                             per_query, None, ties, "ap")


def precision_at_k(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
                   k: int = 10, denominator: str = "k", threshold: float = 1.0,
                   ties: str = "average", no_relevant: str = "skip",
                   per_query: bool = False):
    """P@k: relevant rows (``y >= threshold``) among the top ``k``, divided by ``k``
    (``denominator="k"``, default: also for queries shorter than ``k``, as the LETOR
    evaluation tool) or by the rows retrieved, ``min(k, the query's rows)``
    (``"retrieved"``: rax's ``precision_metric``). Score ties:
    ``"average"`` (default, the expectation over random orderings of tied rows) or
    ``"stable"`` (input order).

    Example:
      >>> print(f"{float(precision_at_k([3., 2., 1.], [0, 1, 1], k=2)):.4f}")
      0.5000
    """
    _check_k(k)
    if k is None:
        raise ValueError("k must be a positive int")
    if denominator not in _DENOMINATORS:
        raise ValueError(f"denominator must be one of {_DENOMINATORS}, got {denominator!r}")
    return _relevance_metric(scores, y, qid, num_queries, where, threshold, no_relevant,
                             per_query, k, ties, denominator)


def mrr(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
        k: Optional[int] = None, threshold: float = 1.0, ties: str = "average",
        no_relevant: str = "skip", per_query: bool = False):
    """Mean reciprocal rank: ``1 / (r + 1)`` for the first relevant row (``y >= threshold``,
    as rax's ``labels >= 1``) at 0-based rank ``r``, 0 when it lies at or past the cut-off
    ``k`` (``None``: the whole list; rax's ``topn``). Score ties: ``"average"`` (default:
    the expectation over random orderings of the tied rows, exact) or ``"stable"`` (input
    order, as rax). Queries with no relevant row: ``no_relevant`` (see :func:`ndcg`; rax
    counts them as ``"zero"``).

    Example:
      >>> print(f"{float(mrr([3., 2., 1.], [0, 1, 1])):.4f}")
      0.5000
      >>> print(f"{float(mrr([1., 1., 0.], [0, 1, 0])):.4f}")        # a tie: 1/2 (1 + 1/2)
      0.7500
    """
    _check_k(k)
    return _relevance_metric(scores, y, qid, num_queries, where, threshold, no_relevant,
                             per_query, k, ties, "rr")


for _fn in (ndcg, mean_average_precision, precision_at_k, mrr):
    _fn.higher_is_better = True
