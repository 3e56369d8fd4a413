"""Ranking measures per query over segment ids (docs/math.md).

Every measure is computed per query and averaged over the queries where it is
defined ("valid": at least one pair with different labels for the pairwise
measures; at least one relevant document for NDCG/MAP/P@k unless
``no_relevant`` says otherwise). When no query is valid the average is
undefined and NaN is returned; ``per_query=True`` returns the per-query values
and the validity mask instead.

Pair counts are obtained by sorting, :math:`O(m log^2 m)` time and O(m) memory —
never by enumerating pairs, so a global ranking of :math:`10^{6}` rows is fine.

Gradients: every measure is piecewise constant in the scores (it depends on their
order), so ``jax.grad`` of it is zero almost everywhere. To learn through a ranking
objective differentiate :func:`rankjax.cv_loss` (the RankRLS loss or its smooth
``loss="pairwise"``) or a smooth surrogate of your own.

Query ids: with ``num_queries=None`` any integer ids are remapped on the host;
under ``jit`` pass segment ids ``0 .. Q-1`` and ``num_queries=Q`` (static).

Lists (rax's, TF-Ranking's and allRank's layout): ``scores`` and ``y`` ``[Q, L]`` with
``qid=None``, each row a query, and ``where`` ``[Q, L]`` (bool) the entries that count; the
segments come from the static shape, so every input may be traced under ``jit``/``vmap``.
A list with no entry counts as no query (left out of the mean, as rax does). ``where`` also
works on rows with ``qid``. rax's conventions are ``ties="stable", no_relevant="zero"``
(and ``denominator="retrieved"`` for precision); docs/from_rax.md compares them.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from .._core.checks import as_float_array, check_flag, check_indices
from .._core.host import is_concrete, reduce_concrete, reduction
from .._core.queries import resolve_segments
from .._core.traced import indices_ok, nan_unless
from .._core.segments import bucket, count_sum, count_to_float, run_ids
from .._core.types import saveable


@saveable
class PerQuery(NamedTuple):
    """Per-query values ``[Q]`` and the mask ``[Q]`` of queries where they are defined."""

    values: jax.Array
    valid: jax.Array


def prepare_scores(scores, y, qid, num_queries, per_query=False, where=None):
    """``(f [m], y [m], seg [m], S, num)`` of a metric's inputs: rows with query ids
    (``scores`` ``[m]``), or lists (``scores`` ``[Q, L]``, rax's layout: list ``q`` is query
    ``q``, its static shape the segments). ``where`` (bool, the shape of ``scores``) leaves
    out the entries it marks False: they join a segment of their own (``num``, past the real
    queries) that :func:`finish_per_query` drops, so under ``jit`` nothing is sliced and
    their values (padding, NaN) are never read. ``S`` the padded segment count; ``num`` the
    real queries (0 where only the mean is asked for and nothing is left out: no static
    argument per query count)."""
    check_flag(per_query, "per_query")
    f = as_float_array(scores, "scores")                  # converted once; checked below
    lists = f.ndim == 2 and qid is None and num_queries is None
    if f.ndim != 1 and not lists:
        raise ValueError(f"scores must be 1-D [m] with qid, or [Q, L] lists (rax's layout, "
                         f"qid=None), got shape {f.shape}")
    if f.size == 0:
        raise ValueError("scores is empty")
    if where is None:
        if is_concrete(f) and bool(reduce_concrete(_all_nan, f)):
            raise ValueError("scores are NaN in every row: a lane a solver refused (a λ below "
                             "what the dtype resolves, named in its UnresolvedLambdaWarning); "
                             "score the answered lanes only, e.g. those where "
                             "jnp.isfinite(pred).all(axis=1)")
        f = as_float_array(f, "scores", finite=True)
    y = as_float_array(y, "y", finite=where is None)
    if y.shape != f.shape:
        raise ValueError(f"y must have the shape of scores {f.shape}, got {y.shape}")
    dtype = jnp.result_type(f.dtype, y.dtype)
    f, y = f.astype(dtype), y.astype(dtype)
    if where is None and not lists:
        seg, Q, num = resolve_segments(qid, num_queries, f.shape[0])
        # the real number of queries only matters (and is only a static argument) per query
        return f, y, seg, Q, num if per_query else 0
    keep = check_where(where, f.shape)
    if is_concrete(f) and is_concrete(y) and is_concrete(keep):
        for name, a in (("scores", f), ("y", y)):
            if bool(reduce_concrete(_nonfinite_kept, a, keep)):
                raise ValueError(f"{name} contains NaN or inf values where `where` is True "
                                 f"{_first_kept_nonfinite(a, keep)}")
    if lists:
        Q = f.shape[0]
        seg = jnp.broadcast_to(jnp.arange(Q, dtype=jnp.int32)[:, None], f.shape)
        num = Q
    else:
        seg, _, num = resolve_segments(qid, num_queries, f.shape[0])
    seg = jnp.where(keep, seg, num).reshape(-1)
    f, y = (jnp.where(keep, a, 0).reshape(-1) for a in (f, y))
    return f, y, seg, bucket(num + 1), num


_all_nan = reduction(lambda xp, a: xp.all(xp.isnan(a)))
_nonfinite_kept = reduction(lambda xp, a, keep: xp.any(keep & ~xp.isfinite(a)))


def _first_kept_nonfinite(a, keep) -> str:
    """``(list q, position l: nan)`` or ``(row i: nan)``: the first non-finite kept entry,
    for the error message (on the failing path only)."""
    v, k = np.asarray(jax.device_get(a)), np.asarray(jax.device_get(keep))
    at = tuple(int(i) for i in np.argwhere(k & ~np.isfinite(v))[0])
    place = f"list {at[0]}, position {at[1]}" if v.ndim == 2 else f"row {at[0]}"
    return f"({place}: {v[at]})"


def check_where(where, shape):
    """``where`` as a bool array of ``shape`` (all True for ``None``); traced masks pass."""
    if where is None:
        return jnp.ones(shape, bool)
    dtype = where.dtype if hasattr(where, "dtype") else np.asarray(where).dtype
    if dtype != np.bool_:
        raise TypeError(f"where must be a bool array (True: the entry counts), got dtype {dtype}")
    if np.shape(where) != tuple(shape):
        raise ValueError(f"where must have the shape of scores {tuple(shape)}, got {np.shape(where)}")
    return jnp.asarray(where)


def finish_per_query(values, valid, per_query, num, nan_queries=None):
    """Mean over the valid queries, or the per-query values of the ``num`` real queries
    (the segments from ``num`` on are padding, or the entries ``where`` leaves out; ``num``
    0: no real count is known, every segment past the data is empty). A query with a NaN/inf
    score or label (``nan_queries``, possible only under ``jit``, where values cannot be
    checked) is NaN, and so is the mean: never a plausible number."""
    if nan_queries is not None:
        values = jnp.where(nan_queries, jnp.nan, values)
        valid = valid | nan_queries
    if num:
        values, valid = values[:num], valid[:num]
    if per_query:
        return PerQuery(values, valid)
    w = valid.astype(values.dtype)
    return jnp.sum(jnp.where(valid, values, 0)) / jnp.sum(w)


def nan_queries(f, y, seg, Q):
    """``[Q]`` True for the queries holding a non-finite score or label."""
    bad = ~(jnp.isfinite(f) & jnp.isfinite(y))
    return jax.ops.segment_max(bad.astype(jnp.int32), seg, num_segments=Q) > 0


def _tied_pairs(seg, Q, *keys):
    """``[Q]`` exact count (see :func:`count_sum`) of the pairs inside each query that
    are equal on all ``keys`` (all pairs when there is no key): every row counts
    the rows before it in its run of equal keys."""
    m = seg.shape[0]
    ops = lax.sort((seg, *keys), num_keys=1 + len(keys))
    rid = run_ids(*ops)
    idx = jnp.arange(m, dtype=jnp.int32)
    first = jax.ops.segment_min(idx, rid, num_segments=m)
    return count_sum(idx - first[rid], ops[0], Q, bits=max(1, (m - 1).bit_length()))


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
    g_sorted = run_ids(s_seg, s_f)
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
        out = out + count_sum(greater.reshape(-1), seg_of_g[vals.reshape(-1)], Q + 1,
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


def safe_div(a, b):
    return jnp.where(b > 0, a / jnp.where(b > 0, b, 1), 0)


def pairwise_error(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
                   per_query: bool = False):
    """Pairwise ranking error (Airola et al. 2010 eq. 1), averaged over queries with pairs.

    ``1/|Q| sum_Q 1/N_Q sum_{y_j < y_k} H(f_j - f_k)`` with ``H(0) = 1/2``: the
    fraction of differently-labelled pairs ordered wrongly, score ties counting
    half. Computed by sorting; a query whose labels are all equal (or of size 1)
    has no pair and is left out of the average. Piecewise constant in the scores:
    ``jax.grad`` of it is zero almost everywhere (module docstring).

    Args:
      scores: ``[m]`` predicted scores, or ``[Q, L]`` lists (rax's layout).
      y: labels, the shape of ``scores``.
      qid: ``[m]`` query ids; ``None`` for one global ranking.
      num_queries: see the module docstring.
      where: ``None`` or a bool array of the shape of ``scores``: the entries marked False
        are left out (padding; their values are never read). With ``scores`` ``[Q, L]``
        (rax's list layout: ``qid=None``, each row a query) ``where`` is rax's mask.
      per_query: return :class:`PerQuery` instead of the mean.

    Example:
      >>> import numpy as np
      >>> f, y = np.array([0.1, 0.4, 0.4, 0.9]), np.array([0, 1, 0, 1])
      >>> print(f"{float(pairwise_error(f, y)):.4f}")
      0.1250
    """
    return _pair_metric(*prepare_scores(scores, y, qid, num_queries, per_query, where), per_query, "pairwise")


def cindex(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
           per_query: bool = False):
    """Concordance index ``1 - pairwise_error`` (ties count half); AUC for two labels.

    Example:
      >>> print(f"{float(cindex([0.1, 0.4, 0.4, 0.9], [0, 1, 0, 1])):.4f}")
      0.8750
    """
    return _pair_metric(*prepare_scores(scores, y, qid, num_queries, per_query, where), per_query, "cindex")


_not_binary = reduction(lambda xp, y: xp.any((y != 0) & (y != 1)))


def auc(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
        per_query: bool = False):
    """Area under the ROC curve for binary labels (1 positive, 0 negative):
    the :func:`cindex` of the scores, ties counting half. Per query when ``qid``
    is given (queries with only one class are left out).

    Example:
      >>> print(f"{float(auc([0.2, 0.8, 0.5], [0, 1, 0])):.2f}")
      1.00
    """
    f, y, seg, Q, num = prepare_scores(scores, y, qid, num_queries, per_query, where)
    if is_concrete(y) and bool(reduce_concrete(_not_binary, y)):
        raise ValueError("auc needs binary labels 0/1 in y (graded labels: use cindex)")
    out = _pair_metric(f, y, seg, Q, num, per_query, "cindex")
    if is_concrete(y):
        return out
    ok = ~_not_binary.device(y)                 # traced labels: non-binary gives NaN
    if per_query:
        return out._replace(values=jnp.where(ok, out.values, jnp.nan))
    return jnp.where(ok, out, jnp.nan)


def disagreement_error(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
                       per_query: bool = False):
    """Disagreement error (Pahikkala et al. 2009 eq. 1): like :func:`pairwise_error` but with the
    ``sign(0) = -1`` convention, i.e. a score tie counts as a full error.

    Example:
      >>> print(f"{float(disagreement_error([0.1, 0.4, 0.4, 0.9], [0, 1, 0, 1])):.4f}")
      0.2500
    """
    return _pair_metric(*prepare_scores(scores, y, qid, num_queries, per_query, where), per_query,
                        "disagreement")


def kendall_tau_b(scores, y, qid=None, *, num_queries: Optional[int] = None, where=None,
                  per_query: bool = False):
    r"""Kendall's τ_b between scores and labels per query (Pahikkala et al. 2007 §3.2).

    :math:`(C - D) / \sqrt{(n0 - n1)(n0 - n2)}` with ``n1``, ``n2`` the pairs tied in
    ``y`` and in the scores. Queries where either factor is 0 (all labels or all
    scores tied) are left out.

    Example:
      >>> print(f"{float(kendall_tau_b([1., 2., 3.], [1, 3, 2])):.4f}")
      0.3333
    """
    return _pair_metric(*prepare_scores(scores, y, qid, num_queries, per_query, where), per_query, "tau_b")


@partial(jax.jit, static_argnums=(3, 4, 5, 6))
def _pair_metric(f, y, seg, Q, num, per_query, kind):
    st = _pair_stats(f, y, seg, Q)
    n_pairs = count_to_float(st.n_pairs, f.dtype)
    if kind == "tau_b":
        concordant_minus_discordant = count_to_float(st.n_pairs - 2 * st.discordant - st.score_ties,
                                                f.dtype)
        denom = n_pairs * count_to_float(st.all_pairs - st.all_score_ties, f.dtype)
        valid = denom > 0
        tau = concordant_minus_discordant / jnp.sqrt(jnp.where(valid, denom, 1))
        return finish_per_query(jnp.where(valid, tau, 0), valid, per_query, num, nan_queries(f, y, seg, Q))
    if kind == "disagreement":
        err = safe_div(count_to_float(st.discordant + st.score_ties, f.dtype), n_pairs)
    else:                                   # ties count half
        err = safe_div(count_to_float(2 * st.discordant + st.score_ties, f.dtype), 2 * n_pairs)
    return finish_per_query(1 - err if kind == "cindex" else err, n_pairs > 0, per_query, num,
                   nan_queries(f, y, seg, Q))


@saveable
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
      >>> at_k = Metric(lambda f, y, q=None, *, num_queries=None, k=10: 0.0, higher_is_better=True)
      >>> check_metric_options(at_k, {"k": 5}, "select_lambda")
      >>> check_metric_options(pairwise_error, {"maxiter": 0}, "CG")  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      TypeError: CG got an unexpected keyword argument 'maxiter' (the metric ...)
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


def metric_sign(metric, higher_is_better: Optional[bool] = None) -> float:
    """``+1`` when lower values of ``metric`` are better, ``-1`` when higher are.

    The direction is ``higher_is_better`` when given, else the metric's
    ``higher_is_better`` attribute (``functools.partial`` is unwrapped). A
    callable without one (a ``lambda``, your own function) is an error rather
    than a guess.

    Example:
      >>> metric_sign(cindex), metric_sign(pairwise_error), metric_sign(lambda *a: 0, True)
      (-1.0, 1.0, -1.0)
    """
    if not callable(metric):
        raise TypeError(f"metric must be a callable (e.g. rankjax.ndcg), got {metric!r}")
    if higher_is_better is None:
        inner = metric
        while isinstance(inner, partial):
            inner = inner.func
        higher_is_better = getattr(inner, "higher_is_better", None)
        if higher_is_better is None:
            raise ValueError(f"the direction of metric {getattr(inner, '__name__', inner)!r} "
                             "is unknown: pass higher_is_better=True/False or wrap it in "
                             "rankjax.Metric(fn, higher_is_better=...)")
    return -1.0 if higher_is_better else 1.0


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
                  (kendall_tau_b, True), (edge_disagreement_error, False)):
    _fn.higher_is_better = _hib
