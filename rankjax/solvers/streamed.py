"""The numerics of a streamed problem (:func:`rankjax.scale.stream`): the normal equations
summed over chunks of whole queries (Pahikkala et al. 2009, eq. 28; the chunks' products on
the device in their dtype, the sum on the host in float64) and leave-query-out chunk by
chunk against the global system (eq. 33-34). :class:`~rankjax.Primal`'s methods call these
for ``kind == "stream"``.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.memory import compute_dtype
from .._core.segments import bucket
from ..graphs.folds import positions
from ..scale.stream import passes
from .holdout import holdout_from_system
from .ridge import primal_system

__all__ = ["normal_equations", "holdout_predictions"]


@jax.jit
def _chunk_system(X, y, graph):
    r"""The chunk's :math:`(X^T L X, X^T L y)` and whether ``X`` is finite (checked in the same
    program: no separate host pass over the chunk)."""
    return primal_system(X, y, graph), jnp.all(jnp.isfinite(X))


def normal_equations(problem):
    r"""``(G [n, n], b [n(, k)], counts)``: :math:`X^T L X` and :math:`X^T L y` of every chunk (float64,
    host) and ``{"rows", "queries", "chunks"}`` read, in one pass."""
    G = b = None
    rows = queries = num = 0
    for X, y, s, (Xp, yp, gp) in passes(problem.chunks, problem.verbose, "normal equations",
                                        problem.graph_kw):
        (Gc, bc), finite = _chunk_system(Xp, yp, gp)
        if not finite:
            raise ValueError(f"chunk {num}: X contains NaN or inf")
        Gc, bc = np.asarray(Gc, np.float64), np.asarray(bc, np.float64)
        G, b = (Gc, bc) if G is None else (G + Gc, b + bc)
        rows, queries, num = rows + X.shape[0], queries + s.num_queries, num + 1
    return G, b, {"rows": rows, "queries": queries, "chunks": num}


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


@jax.jit
def _holdout_chunk(problem, lams, folds, system):
    """Hold-out predictions ``[L, P(, k)]`` of a padded chunk ``problem = (X, y, graph)``
    against the global ``system = (G, b)``."""
    X, y, graph = problem
    return holdout_from_system(X, y, graph, lams, folds, *system)


def holdout_predictions(problem, G, b, lams, counts):
    """``[L, rows(, k)]`` leave-query-out predictions of every row in chunk order (host), in
    a second pass over the chunks."""
    if counts["queries"] < 2:          # leaving the one query out trains on nothing
        raise ValueError(f"the hold-out needs at least 2 queries (leave-query-out), the "
                         f"chunks hold {counts['queries']}")
    dtype = compute_dtype()
    Gd, bd = jnp.asarray(G, dtype), jnp.asarray(b, dtype)
    parts, seen = [], 0
    for X, y, s, (Xp, yp, gp) in passes(problem.chunks, problem.verbose, "leave-query-out",
                                        problem.graph_kw, expected=counts["rows"]):
        seg = np.asarray(gp.seg)
        pred = _holdout_chunk((jnp.asarray(Xp, dtype), yp, gp), lams.astype(dtype),
                              _query_folds(seg, s.num_queries + 1, seg.shape[0]), (Gd, bd))
        parts.append(np.asarray(pred)[:, :X.shape[0]])
        seen += X.shape[0]
    if seen != counts["rows"]:
        raise ValueError(f"the second pass over chunks read {seen} rows, the first "
                         f"{counts['rows']}: pass a re-iterable (a list or a rankjax.io "
                         "reader), not a generator")
    return np.concatenate(parts, axis=1)
