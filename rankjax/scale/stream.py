r"""Streamed problems: chunks of whole queries read one after the other (out of core;
docs/design.md, "Scale-out"). No edge of a query graph leaves its query, so :math:`X^T L X =
\sum_c X_c^T L_c X_c` and :math:`X^T L y = \sum_c X_c^T L_c y_c` over chunks ``c`` (Pahikkala et
al. 2009, eq. 28): memory is one chunk plus ``n x n``, the number of rows bounded by the disk.
:func:`stream` describes such a problem; the verbs solve it with ``Primal`` (fit, path and
leave-query-out, each a pass or two over the chunks).
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Iterable

import jax
import numpy as np

from .._core.checks import check_flag, check_targets
from .._core.queries import segment_ids
from .._core.log import check_verbose, info
from .._core.segments import bucket
from .._core.sparse import as_dense
from ..graphs.build import query_graph
from .._problem import KernelProblem, Problem

__all__ = ["StreamedProblem", "stream", "passes"]


@dataclasses.dataclass(frozen=True)
class StreamedProblem:
    """Chunks of whole queries as a problem (``kind == "stream"``; build with
    :func:`stream`): ``chunks`` (a re-iterable of ``(X, y, qid)``), the query graph's
    options ``graph_kw``, the in-memory validation :class:`~rankjax.Problem` ``valid`` (or
    ``None``) and ``verbose`` (log rows/s every that many chunks)."""

    chunks: object
    graph_kw: dict
    valid: object = None
    verbose: int = 0

    kind = "stream"
    graph = None
    precomputed = False
    qid = None
    y = None


def stream(chunks, *, normalized: bool = True, exclude_ties: bool = False, query_weights=None,
           valid=None, verbose: int = 0) -> StreamedProblem:
    r"""Primal RankRLS data read chunk by chunk: ``rj.path(rj.scale.stream(chunks), rj.Primal(),
    lams=lams)`` accumulates :math:`X^T L X` and :math:`X^T L y` in one pass (:math:`O(\text{rows}
    \cdot n^2)` work, the chunks' products on the device, their sum on the host in float64), then
    every λ from one ``eigh``; ``rj.holdout`` makes a second pass for exact leave-query-out (eq.
    33-34), a query's prediction needing only its own rows and the global system.

    Args:
      chunks: a re-iterable of ``(X [r, n], y [r(, k)], qid [r])`` chunks of whole queries
        (a query id in two chunks is an error): :func:`rankjax.io.iter_npy`,
        :func:`rankjax.io.iter_svmlight`, a list (a generator serves one pass: ``fit`` and
        ``path``). Chunks are padded to a power of two of rows: equal sizes compile once.
      normalized, exclude_ties: as :func:`~rankjax.query_graph`.
      query_weights: ``None`` or ``"pairs"`` (per-query arrays need every query at once).
      valid: an in-memory :class:`~rankjax.Problem` of validation rows (the path's
        ``valid_scores``).
      verbose: log the rows read and rows/s after every that many chunks (0: silent).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=5, seed=0)
      >>> cut = np.flatnonzero(np.diff(d.qid))[14] + 1          # two chunks of whole queries
      >>> chunks = [(d.X[:cut], d.y[:cut], d.qid[:cut]), (d.X[cut:], d.y[cut:], d.qid[cut:])]
      >>> s = rj.path(rj.scale.stream(chunks), rj.Primal(), lams=[1.0])
      >>> w = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=1.0).value.weights
      >>> bool(np.allclose(s.value.weights[0], w, atol=1e-6)), s.stats["chunks"]
      (True, 2)
    """
    for flag, name in ((normalized, "normalized"), (exclude_ties, "exclude_ties")):
        check_flag(flag, name)
    if not (query_weights is None or (isinstance(query_weights, str) and query_weights == "pairs")):
        raise ValueError("query_weights must be None or 'pairs' for streamed data "
                         f"(per-query arrays need every query at once), got {query_weights!r}")
    if not isinstance(chunks, Iterable) or isinstance(chunks, (tuple, np.ndarray)):
        raise TypeError("chunks must be an iterable of (X, y, qid) tuples (a list, a reader "
                        "such as rankjax.io.iter_npy, or a generator)")
    if valid is not None and (not isinstance(valid, Problem) or isinstance(valid, KernelProblem)):
        raise TypeError(f"valid must be a rankjax.Problem of feature rows, got "
                        f"{type(valid).__name__}")
    graph_kw = dict(normalized=normalized, exclude_ties=exclude_ties, query_weights=query_weights)
    return StreamedProblem(chunks, graph_kw, valid, check_verbose(verbose))


def _chunk(item, n, k, index):
    r"""One chunk ``(X, y, qid)`` checked; rows padded to a power of two with zero rows in
    one extra query (zero rows add nothing to :math:`X^T L X` or :math:`X^T L y`)."""
    if not (isinstance(item, tuple) and len(item) == 3):
        raise TypeError(f"chunk {index} must be a tuple (X, y, qid), got {type(item).__name__}")
    X, y, qid = item
    X = np.asarray(as_dense(X))
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"chunk {index}: X must be a non-empty 2-D [rows, n], got shape {X.shape}")
    if X.dtype.kind not in "fiu":                # as rj.Problem: no bool, text or complex
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


def passes(chunks, progress, label, graph_kw, expected=None):
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
