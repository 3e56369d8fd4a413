"""Out-of-core primal RankRLS: the normal equations accumulated over chunks of whole
queries (docs/design.md, "Scale-out").

No edge of a query graph leaves its query, so ``X^T L X = sum_c X_c^T L_c X_c`` and
``X^T L y = sum_c X_c^T L_c y_c`` over chunks ``c`` of whole queries (Pahikkala et al.
2009 eq. 28). Memory is one chunk plus ``n x n``; the number of rows is bounded by
the disk. The per-chunk products run on the device in the data's dtype and are summed
on the host in float64; the λ path is the usual one from ``eigh(X^T L X)``. A second
pass gives exact leave-query-out (eq. 33-34) chunk by chunk: a query's hold-out
prediction needs only its own rows and the global system.
"""
from __future__ import annotations

import queue
import threading
import time
from functools import partial
from typing import Callable, Iterable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import (as_float_array, check_flag, check_targets, segment_ids)
from ..graphs.folds import positions
from ..graphs.build import as_validation, query_graph
from ..solvers.holdout import holdout_from_system
from .._core.log import check_verbose, info
from ..metrics.pairs import check_metric_options, metric_sign, pairwise_error
from ..metrics.choice import Selection, as_selection, select_lambda
from ..solvers.path import PrimalPath, check_lams
from ..solvers.models import path_scores
from ..solvers.ridge import decompose_primal, primal_system
from .._core.segments import bucket
from .._core.sparse import as_dense
from .._core.types import saveable

__all__ = ["StreamFit", "rankrls_primal_stream"]


@saveable
class StreamFit(NamedTuple):
    """Result of :func:`rankrls_primal_stream`.

    Attributes:
      path: :class:`~rankjax.solvers.path.PrimalPath` (``weights [L, n(, k)]``; validation scores
        when ``valid`` was given).
      gram: ``[n, n]`` ``X^T L X`` (float64, host).
      rhs: ``[n(, k)]`` ``X^T L y`` (float64, host).
      num_rows, num_queries, num_chunks: what was read.
      holdout: ``[L]`` leave-query-out value of ``holdout_metric`` (mean over the valid
        queries, the metric's own direction), or ``None``.
      selection: :class:`~rankjax.Selection` on ``valid``, or ``None``.
    """

    path: PrimalPath
    gram: np.ndarray
    rhs: np.ndarray
    num_rows: int
    num_queries: int
    num_chunks: int
    holdout: Optional[jax.Array]
    selection: Optional[Selection]


@jax.jit
def _chunk_system(X, y, graph):
    """The chunk's ``(X^T L X, X^T L y)`` and whether ``X`` is finite (checked in the same
    program: no separate host pass over the chunk)."""
    return primal_system(X, y, graph), jnp.all(jnp.isfinite(X))


@jax.jit
def _path(G, b, lams):
    return decompose_primal(G, b).coef_path(lams)


def _chunk(item, n, k, index):
    """One chunk ``(X, y, qid)`` checked; rows padded to a power of two with zero rows in
    one extra query (zero rows add nothing to ``X^T L X`` or ``X^T L y``)."""
    if not (isinstance(item, tuple) and len(item) == 3):
        raise TypeError(f"chunk {index} must be a tuple (X, y, qid), got {type(item).__name__}")
    X, y, qid = item
    X = np.asarray(as_dense(X))
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"chunk {index}: X must be a non-empty 2-D [rows, n], got shape {X.shape}")
    if X.dtype.kind not in "fiu":                # as rankrls_primal: no bool, text or complex
        raise TypeError(f"chunk {index}: X must be a real numeric array, got dtype {X.dtype}")
    # NaN/inf: checked by the chunk's own program (_chunk_system), not by a host pass
    if n is not None and X.shape[1] != n:
        raise ValueError(f"chunk {index}: X has {X.shape[1]} columns, the first chunk {n}")
    y = np.asarray(check_targets(y, X.shape[0], f"chunk {index}: y"))
    if k is not None and y.shape[1:] != k:
        raise ValueError(f"chunk {index}: y has shape {y.shape}, the first chunk had outputs {k}")
    s = segment_ids(qid, f"chunk {index}: qid")
    if s.seg.shape[0] != X.shape[0]:
        raise ValueError(f"chunk {index}: qid has {s.seg.shape[0]} rows, X has {X.shape[0]}")
    return X, y, s


def _padded(X, y, seg, num_queries, **graph_kw):
    m = X.shape[0]
    P = bucket(m)
    dtype = jax.dtypes.canonicalize_dtype(X.dtype if X.dtype.kind == "f" else float)
    Xp = np.zeros((P, X.shape[1]), dtype)
    Xp[:m] = X
    yp = np.zeros((P,) + y.shape[1:], y.dtype)
    yp[:m] = y
    qp = np.concatenate([seg, np.full(P - m, num_queries, seg.dtype)])
    labels = yp if yp.ndim == 1 else None
    return Xp, yp, query_graph(qp, labels, **graph_kw)


def _prefetch(iterable, depth: int = 1):
    """Reads the next chunk in a background thread while the device works on this one."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def put(item):
        while not stop.is_set():            # give up when the consumer has gone
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def work():
        try:
            for item in iterable:
                if not put(item):
                    return
            put(done)
        except BaseException as e:          # handed to the consumer
            put(e)

    threading.Thread(target=work, daemon=True).start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def _passes(chunks, progress, label, graph_kw, expected=None):
    """Yields ``(X, y, segments, padded problem)`` per chunk; checks that no query id
    repeats across chunks and reports rows/s."""
    if not isinstance(chunks, Iterable) or isinstance(chunks, (tuple, np.ndarray)):
        raise TypeError("chunks must be an iterable of (X, y, qid) tuples (a list, a reader "
                        "such as rankjax.io.iter_npy, or a generator)")
    seen: set = set()
    n = k = None
    rows = 0
    start = time.perf_counter()
    for i, item in enumerate(_prefetch(chunks)):
        X, y, s = _chunk(item, n, k, i)
        n, k = X.shape[1], y.shape[1:]
        ids = np.asarray(s.qids).tolist()
        again = seen.intersection(ids)
        if again:
            raise ValueError(f"chunk {i}: query {min(again)!r} also appears in an earlier "
                             "chunk (chunks must hold whole queries)")
        seen.update(ids)
        rows += X.shape[0]
        yield X, y, s, _padded(X, y, s.seg, s.num_queries, **graph_kw)
        if progress and (i + 1) % progress == 0:
            dt = time.perf_counter() - start
            info(progress, "stream (%s): chunk %d, %s rows, %s rows/s (%.1f s)", label, i + 1,
                 f"{rows:,}", f"{rows / max(dt, 1e-9):,.0f}", dt)
    if n is None and expected:
        raise ValueError(f"the second pass over chunks read nothing, the first {expected} rows: "
                         "pass a re-iterable (a list or a rankjax.io reader), not a generator")
    if n is None:
        raise ValueError("chunks is empty (no chunk was read)")


def rankrls_primal_stream(chunks, *, lams, normalized: bool = True, exclude_ties: bool = False,
                          query_weights=None, valid=None, holdout_metric: Optional[Callable] = None,
                          verbose: int = 0, **metric_kwargs) -> StreamFit:
    """Primal RankRLS on data read chunk by chunk (out of core).

    One pass accumulates ``X^T L X`` and ``X^T L y`` over chunks of whole queries
    (O(rows n^2) work, memory one chunk plus ``n x n``), then every λ of ``lams`` comes
    from one ``eigh``. With ``holdout_metric`` a second pass over ``chunks`` gives
    exact leave-query-out predictions (Pahikkala et al. 2009 eq. 33-34) chunk by chunk
    and their metric per λ.

    Args:
      chunks: iterable of ``(X [r, n], y [r(, k)], qid [r])`` chunks of whole queries
        (a query id in two chunks is an error); e.g. :func:`rankjax.io.iter_npy`,
        :func:`rankjax.io.iter_svmlight`, a list, or a generator (one pass only: no
        ``holdout_metric``). Chunks are padded to a power of two of rows, so equal
        chunk sizes compile once.
      lams: ``[L]`` λ grid.
      normalized, exclude_ties: as in :func:`~rankjax.query_graph`.
      query_weights: ``None`` or ``"pairs"`` (per-query weights arrays need all queries).
      valid: ``(X_valid, y_valid, qid_valid)`` in memory: scores and a λ selection with
        ``holdout_metric`` (default :func:`~rankjax.pairwise_error`).
      holdout_metric: a rankjax metric for the leave-query-out pass (``y`` 1-D).
      verbose: log the rows read and rows/s after every that many chunks (0: silent;
        logger ``"rankjax"``).
      **metric_kwargs: passed to the metric (``k=10``, ...).

    Returns:
      :class:`StreamFit`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=5, seed=0)
      >>> cut = np.flatnonzero(np.diff(d.qid))[14] + 1          # two chunks of whole queries
      >>> chunks = [(d.X[:cut], d.y[:cut], d.qid[:cut]), (d.X[cut:], d.y[cut:], d.qid[cut:])]
      >>> fit = rj.scale.rankrls_primal_stream(chunks, lams=[1.0])
      >>> w = rj.solvers.models.rankrls_primal(d.X, d.y, rj.query_graph(d.qid), lam=1.0).weights
      >>> bool(np.allclose(fit.path.weights[0], w, atol=1e-6)), fit.num_chunks
      (True, 2)
    """
    check_metric_options(holdout_metric or pairwise_error, metric_kwargs, "rankrls_primal_stream")
    lams = check_lams(lams)
    for flag, name in ((normalized, "normalized"), (exclude_ties, "exclude_ties")):
        check_flag(flag, name)
    progress = check_verbose(verbose)
    if not (query_weights is None or (isinstance(query_weights, str) and query_weights == "pairs")):
        raise ValueError("query_weights must be None or 'pairs' for streamed data "
                         f"(per-query arrays need every query at once), got {query_weights!r}")
    metric = holdout_metric
    if metric is not None:
        if not callable(metric) or not hasattr(metric, "higher_is_better"):
            raise TypeError(f"holdout_metric must be a rankjax metric, got {metric!r}")
        metric_sign(metric)
    graph_kw = dict(normalized=normalized, exclude_ties=exclude_ties, query_weights=query_weights)
    G = b = None
    rows = queries = num = 0
    for X, y, s, (Xp, yp, gp) in _passes(chunks, progress, "normal equations", graph_kw):
        (Gc, bc), finite = _chunk_system(Xp, yp, gp)
        if not finite:
            raise ValueError(f"chunk {num}: X contains NaN or inf")
        Gc, bc = np.asarray(Gc, np.float64), np.asarray(bc, np.float64)
        G, b = (Gc, bc) if G is None else (G + Gc, b + bc)
        rows, queries, num = rows + X.shape[0], queries + s.num_queries, num + 1
    dtype = jnp.result_type(float)
    W = _path(jnp.asarray(G, dtype), jnp.asarray(b, dtype), lams.astype(dtype))
    holdout = None
    if metric is not None:
        if queries < 2:                 # leaving the one query out trains on nothing
            raise ValueError(f"holdout_metric needs at least 2 queries (leave-query-out), the "
                             f"chunks hold {queries}")
        holdout = _holdout_pass(chunks, G, b, lams, metric, metric_kwargs, rows, graph_kw,
                                progress)
    valid_scores = selection = None
    if valid is not None:
        Xv, yv, gv = as_validation(valid)
        Xv = as_float_array(Xv, "X_valid", finite=True)
        if Xv.ndim != 2 or Xv.shape[1] != G.shape[0]:
            raise ValueError(f"X_valid must be [m_valid, {G.shape[0]}], got shape {Xv.shape}")
        valid_scores = path_scores(Xv, W)
        seg, num = gv.segments()
        selection = as_selection(lams, select_lambda(lams, valid_scores, yv, seg, num_queries=num,
                                                     metric=metric or pairwise_error, **metric_kwargs))
    return StreamFit(PrimalPath(lams, W, None, valid_scores), G, b, rows, queries, num,
                     holdout, selection)


class _Folds(NamedTuple):
    index: tuple
    mask: tuple
    position: jax.Array


def _query_folds(seg, num_queries, rows):
    """Leave-query-out folds of a padded chunk as one bucket ``[F, S]`` (``F`` queries and
    ``S`` rows per query padded to powers of two), so that chunks of similar shape share
    one compiled program."""
    sizes = np.bincount(seg, minlength=num_queries)
    F, S = bucket(num_queries), bucket(int(sizes.max()))
    order = np.argsort(seg, kind="stable")
    pos = np.arange(seg.shape[0]) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    index = np.zeros((F, S), np.int32)
    mask = np.zeros((F, S), bool)
    index[seg[order], pos] = order
    mask[seg[order], pos] = True
    return _Folds((jax.device_put(index),), (jax.device_put(mask),),
                  jax.device_put(positions([index], [mask], seg.shape[0])))


@partial(jax.jit, static_argnames="crit")
def _holdout_chunk(problem, lams, folds, system, num_queries, crit):
    """Hold-out predictions of a padded chunk ``problem = (X, y, graph)`` against the
    global ``system = (G, b)`` and the per-λ sum and count of the metric ``crit =
    (metric, kw)`` over its real queries (``< num_queries``, traced)."""
    X, y, graph = problem
    metric, kw = crit
    pred = holdout_from_system(X, y, graph, lams, folds, *system)
    seg, S = graph.segments()

    def one(f):
        pq = metric(f, y, seg, num_queries=S, per_query=True, **dict(kw))
        ok = pq.valid & (jnp.arange(S) < num_queries)
        return jnp.sum(jnp.where(ok, pq.values, 0)), jnp.sum(ok)
    return jax.vmap(one)(pred)


def _holdout_pass(chunks, G, b, lams, metric, kw, rows, graph_kw, progress):
    dtype = jnp.result_type(float)
    Gd, bd = jnp.asarray(G, dtype), jnp.asarray(b, dtype)
    total = count = 0
    seen = 0
    kw = tuple(sorted(kw.items()))
    for X, y, s, (Xp, yp, gp) in _passes(chunks, progress, "leave-query-out", graph_kw,
                                         expected=rows):
        if y.ndim != 1:
            raise ValueError("holdout_metric needs one output (y of shape [rows])")
        seg = np.asarray(gp.seg)
        t, c = _holdout_chunk((jnp.asarray(Xp, dtype), yp, gp), lams.astype(dtype),
                              _query_folds(seg, s.num_queries + 1, seg.shape[0]), (Gd, bd),
                              s.num_queries, (metric, kw))
        total, count = total + t, count + c
        seen += X.shape[0]
    if seen != rows:
        raise ValueError(f"the second pass over chunks read {seen} rows, the first {rows}: "
                         "pass a re-iterable (a list or a rankjax.io reader), not a generator")
    return total / count
