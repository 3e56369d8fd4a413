"""Preference graphs and their Laplacians as operators (``docs/math.md`` §1).

Three graph types carry their own operators; every solver uses only these
methods, so no other module switches on the graph type:

* :class:`QueryGraph` — every pair of rows in the same query is an edge
  (Pahikkala et al. 2009, §2.3; Airola et al. 2010, §3.1). All pairs of query
  ``c`` share one edge weight ``e_c``: ``e_c = omega_c`` (unnormalized
  ``D - W``) or ``e_c = omega_c / n_c`` (normalized ``I - P P^T``), with
  optional query weights ``omega_c``. The Laplacian of query ``c`` is
  ``e_c (n_c I - 1 1^T)``; excluding ties subtracts the same clique over every
  (query, label) group. Matvecs are segment sums, O(m k), never O(m^2).
* :class:`PreferenceGraph` — explicit edges ``(h_t, j_t)`` with width ``w_t``
  (Pahikkala et al. 2009, §2.4): ``L = M M^T``, ``M^T v = w (v[h] - v[j])``. O(m + l).
* :class:`IdentityGraph` — ``L = I``: pointwise RLS regression.

The operator methods, shared by all three:

``mv(v)`` (``L v``), ``has_root`` and ``root_mv(v)`` (the segment root ``S``,
``S^2 = L``), ``rhs(y, dtype)`` (``L y``, or ``M N`` for edges),
``normal_equations(X, y)`` (``X^T L X``, ``X^T L y``), ``dual_root(dtype)``
(the root of the symmetric dual system), ``factor()`` (``R R^T = L`` for CG),
``as_dense(dtype)``, ``loss(f, y)``, ``criterion(y, metric)``,
``fold_units()`` and ``block_root(idx, mask, dtype)`` (hold-out folds),
``check_labels(y)``.

Graphs are pytrees. Per-query counts are computed once on the host and
stored; the number of query segments is padded to a power of two
(:func:`rankjax._segments.bucket`), so data with the same number of rows but
another number of queries reuses compiled programs.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import (as_float_array, check_flag, check_indices, check_matrix, check_targets,
                      device_array, host_labels, is_concrete, is_int, require_concrete, segment_ids)
from ._metrics import edge_disagreement_error, metric_sign, pairwise_error
from ._ridge import HI, gram, psd_root, tdot
from ._segments import bucket, expand, seg_sum

__all__ = [
    "QueryGraph", "PreferenceGraph", "IdentityGraph", "Graph", "check_graph", "check_problem",
    "query_graph", "global_graph", "preference_graph", "identity_graph",
    "pairs_from_scores", "laplacian_mv", "laplacian_sqrt_mv", "laplacian_dense",
    "incidence_mv", "incidence_t_mv", "query_pair_counts",
]

Array = jax.Array


def _pytree(data, meta):
    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    return wrap


class _Root:
    """``S`` of the symmetric dual system: ``apply(v) = S v``, ``rhs(y) = S^+ L y``."""

    def __init__(self, apply, rhs):
        self.apply, self.rhs = apply, rhs


def _dense_root(graph, dtype, rhs):
    S, S_pinv = psd_root(graph.as_dense(dtype))
    return _Root(lambda v: jnp.matmul(S, v, precision=HI),
                 lambda y: jnp.matmul(S_pinv, rhs(y), precision=HI))


class _GraphBase:
    """Operator methods common to all graphs (each graph overrides what differs)."""

    takes_labels = True

    def check_labels(self, y, name: str = "y"):
        """``y`` checked against the graph: ``[m]``/``[m, k]`` finite, or ``None`` for edges."""
        return check_targets(y, self.num_rows, name)

    def rhs(self, y, dtype):
        """``L y`` (``[m(, k)]``); ``M N`` for preference edges."""
        return self.mv(y)

    def as_dense(self, dtype=None) -> Array:
        """The dense ``[m, m]`` Laplacian (O(m^2) memory)."""
        return self.mv(jnp.eye(self.num_rows, dtype=dtype or jnp.result_type(float)))

    def centre(self, X):
        """``X`` minus a constant ``L`` annihilates (float32 accuracy of ``X^T L X``)."""
        return X

    def normal_equations(self, X, y):
        """``(X^T L X, X^T L y)``: ``Z^T Z`` with ``Z = S X`` when a segment root exists."""
        if self.has_root:
            Z = self.root_mv(X)
            return gram(Z), tdot(Z, self.root_mv(y))
        Xc = self.centre(X)
        G = jnp.matmul(Xc.T, self.mv(Xc), precision=HI)
        return (G + G.T) / 2, tdot(Xc, self.rhs(y, X.dtype))

    def dual_root(self, dtype):
        """The root ``S`` (``S^2 = L``) of the symmetric dual system and its rhs map."""
        if self.has_root:
            return _Root(self.root_mv, self.root_mv)
        return _dense_root(self, dtype, lambda y: self.rhs(y, dtype))

    def loss(self, f, y):
        """The RankRLS loss ``(y - f)^T L (y - f)``."""
        r = y - f
        return r @ self.mv(r)

    def criterion(self, y, metric="pairwise_error", greater_is_better=None, **kw):
        """``f -> value`` (lower is better) on this graph's rows: ``"pairwise_error"``,
        ``"loss"`` or a metric ``metric(f, y, seg, num_queries=..., **kw)``."""
        if metric == "loss":
            return lambda f: self.loss(f, y)
        if metric == "pairwise_error":
            metric = pairwise_error
        if not callable(metric):
            raise ValueError(f"metric must be 'pairwise_error', 'loss' or a callable, got {metric!r}")
        sign = metric_sign(metric, greater_is_better)
        seg, num = self.segments()
        return lambda f: sign * metric(f, y, seg, num_queries=num, **kw)


@_pytree(["seg", "counts", "edge_weight", "group_seg", "group_query", "group_counts"],
         ["num_segments", "num_group_segments"])
class QueryGraph(_GraphBase):
    """Query (label-ranking) graph over ``m`` rows (build with :func:`query_graph`).

    Attributes:
      seg: ``[m]`` int32 query segment of every row (sorted distinct qids).
      counts: ``[S]`` rows per segment (0 on padding segments).
      edge_weight: ``[S]`` weight ``e_c`` of every pair inside query ``c``.
      group_seg: ``[m]`` int32 (query, label) group of every row, or ``None``
        when ties are kept.
      group_query: ``[G]`` int32 query of every group, or ``None``.
      group_counts: ``[G]`` rows per group, or ``None``.
      num_segments: ``S`` >= the number of queries, a power of two (static).
      num_group_segments: ``G`` (static; 0 when ties are kept).
    """

    seg: Array
    counts: Array
    edge_weight: Array
    group_seg: Optional[Array]
    group_query: Optional[Array]
    group_counts: Optional[Array]
    num_segments: int
    num_group_segments: int

    @property
    def num_rows(self) -> int:
        return self.seg.shape[0]

    @property
    def num_queries(self) -> int:
        """Number of (non-empty) queries (host side)."""
        return int(np.count_nonzero(np.asarray(self.counts)))

    @property
    def has_root(self) -> bool:
        return self.group_seg is None

    def _clique(self, v, seg, counts, e, num):
        # (L v)_i = e_c (n_c v_i - sum_{j in c} v_j)
        sums = seg_sum(v, seg, num)
        return expand(e[seg], v) * (expand(counts[seg], v) * v - sums[seg])

    def mv(self, v):
        dt = v.dtype
        e, n = self.edge_weight.astype(dt), self.counts.astype(dt)
        out = self._clique(v, self.seg, n, e, self.num_segments)
        if self.group_seg is not None:
            out = out - self._clique(v, self.group_seg, self.group_counts.astype(dt),
                                     e[self.group_query], self.num_group_segments)
        return out

    def _query_mean(self, v):
        n = jnp.maximum(self.counts.astype(v.dtype), 1)
        return (seg_sum(v, self.seg, self.num_segments) / expand(n, v))[self.seg]

    def root_mv(self, v):
        # S = sqrt(e_c n_c) (I - 1 1^T / n_c): centre within the query, then scale.
        if not self.has_root:
            raise ValueError("a query graph built with tie exclusion has no segment root S "
                             "(use laplacian_dense, the dual solvers or primal CG)")
        dt = v.dtype
        scale = jnp.sqrt(self.edge_weight.astype(dt) * self.counts.astype(dt))
        return expand(scale[self.seg], v) * (v - self._query_mean(v))

    def centre(self, X):
        return X - self._query_mean(X)

    def factor(self):
        return self.root_mv, self.root_mv, self.root_mv

    def segments(self):
        return self.seg, self.num_segments

    def pair_counts(self, dtype=None):
        dtype = dtype or jnp.result_type(float)
        n = self.counts.astype(dtype)
        pairs = n * (n - 1) / 2
        if self.group_seg is not None:
            g = self.group_counts.astype(dtype)
            pairs = pairs - seg_sum(g * (g - 1) / 2, self.group_query, self.num_segments)
        return pairs

    def fold_units(self):
        if not is_concrete(self.seg):
            raise TypeError("make_folds needs a concrete graph: build the folds outside jit")
        seg = np.asarray(self.seg)
        return seg, int(seg.max()) + 1

    def block_root(self, idx, mask, dtype):
        """``B`` with ``B B^T = L_UU`` for a padded fold ``idx [P]`` of whole queries."""
        P = idx.shape[0]
        mm = (mask[:, None] & mask[None, :]).astype(dtype)
        eye = jnp.eye(P, dtype=dtype)
        seg = self.seg[idx]
        n, e = self.counts.astype(dtype)[seg], self.edge_weight.astype(dtype)[seg]
        same = (seg[:, None] == seg[None, :]).astype(dtype)
        if self.has_root:                              # S_UU = sqrt(e n) (I - same / n)
            return mm * jnp.sqrt(e * n)[:, None] * (eye - same / jnp.maximum(n, 1)[:, None])
        grp = self.group_seg[idx]
        ng = self.group_counts.astype(dtype)[grp]
        sameg = (grp[:, None] == grp[None, :]).astype(dtype)
        return psd_root(mm * (e[:, None] * (eye * (n - ng)[:, None] - same + sameg)))[0]


    def restrict(self, rows, size: Optional[int] = None):
        """The graph of the rows ``rows`` (host ``[r]`` indices of whole queries, in any
        order): ``L_UU`` of those rows with the same edge weights (a preconditioner's
        subsample). With ``size >= r`` the graph has ``size`` rows, the last ``size - r``
        in one padding segment of edge weight 0 (adds nothing), so that subsamples of one
        bucket share compiled programs. A query cut in two is an error."""
        rows = np.asarray(rows)
        size = rows.size if size is None else int(size)
        npad = size - rows.size
        seg = np.asarray(self.seg)[rows]
        uq, new_seg = np.unique(seg, return_inverse=True)
        counts = np.asarray(self.counts)[uq]
        if not np.array_equal(np.bincount(new_seg, minlength=uq.size), counts):
            raise ValueError("rows must hold whole queries of the graph")
        S = bucket(uq.size + 1)
        dtype = self.counts.dtype
        pad_seg = np.full(npad, S - 1, np.int32)
        out = dict(seg=device_array(np.r_[new_seg.astype(np.int32), pad_seg]),
                   counts=device_array(np.r_[counts, np.zeros(S - 1 - uq.size), npad], dtype),
                   edge_weight=device_array(_pad(np.asarray(self.edge_weight)[uq], S), dtype),
                   num_segments=S, group_seg=None, group_query=None, group_counts=None,
                   num_group_segments=0)
        if self.group_seg is not None:
            ug, new_g = np.unique(np.asarray(self.group_seg)[rows], return_inverse=True)
            G = bucket(ug.size + 1)
            gq = np.searchsorted(uq, np.asarray(self.group_query)[ug]).astype(np.int32)
            out.update(group_seg=device_array(np.r_[new_g.astype(np.int32), np.full(npad, G - 1, np.int32)]),
                       group_query=device_array(np.r_[gq, np.full(G - ug.size, S - 1, np.int32)]),
                       group_counts=device_array(np.r_[np.asarray(self.group_counts)[ug],
                                                       np.zeros(G - 1 - ug.size), npad], dtype),
                       num_group_segments=G)
        return QueryGraph(**out)

    def prefix(self, u: int):
        """The graph of the first ``u`` rows (traced; ``u`` static): the principal block
        ``L_UU`` of the Laplacian (PSD; a query cut at ``u`` keeps its edge weights)."""
        return dataclasses.replace(self, seg=self.seg[:u], group_seg=(
            None if self.group_seg is None else self.group_seg[:u]))

    def shard_blocks(self, rows, shard_of_query):
        """Host arrays of the local graphs of shards of whole queries, stacked ``[D, ...]``.

        ``rows [D, P]`` holds each shard's rows (``-1`` padding), ``shard_of_query [Q]``
        the shard of every query (non-decreasing: contiguous runs of queries). Local
        segments are the shard's queries in order, then one padding segment (its
        padding rows, edge weight 0: it adds nothing to any product). Returns
        ``(arrays, sizes, real [D, S])``.
        """
        graph = self
        shard_of_query = np.asarray(shard_of_query)
        valid = np.asarray(rows) >= 0
        rows = np.where(valid, rows, 0)
        seg = np.asarray(graph.seg)
        counts = np.asarray(graph.counts)
        edge = np.asarray(graph.edge_weight)
        D, width = rows.shape
        nq = np.bincount(shard_of_query, minlength=D)
        q0 = np.cumsum(nq) - nq
        npad = width - valid.sum(1)
        S = bucket(int(nq.max()) + 1)
        j = np.arange(S)[None, :]
        real = j < nq[:, None]
        src = np.where(real, q0[:, None] + j, 0)
        out = dict(seg=np.where(valid, seg[rows] - q0[:, None], S - 1).astype(np.int32),
                   counts=np.where(real, counts[src], np.where(j == S - 1, npad[:, None], 0)),
                   edge_weight=np.where(real, edge[src], 0))
        sizes = dict(num_segments=S, num_group_segments=0)
        if graph.group_seg is not None:
            gseg = np.asarray(graph.group_seg)
            gq = np.asarray(graph.group_query)
            gc = np.asarray(graph.group_counts)
            n_groups = int(gseg.max()) + 1
            shard_g = shard_of_query[gq[:n_groups]]
            ng = np.bincount(shard_g, minlength=D)
            g0 = np.cumsum(ng) - ng
            G = bucket(int(ng.max()) + 1)
            jg = np.arange(G)[None, :]
            realg = jg < ng[:, None]
            srcg = np.where(realg, g0[:, None] + jg, 0)
            out.update(group_seg=np.where(valid, gseg[rows] - g0[:, None], G - 1).astype(np.int32),
                       group_query=np.where(realg, gq[srcg] - q0[:, None], S - 1).astype(np.int32),
                       group_counts=np.where(realg, gc[srcg],
                                             np.where(jg == G - 1, npad[:, None], 0)))
            sizes["num_group_segments"] = G
        return out, sizes, real


@_pytree(["head", "tail", "weight", "target"], ["num_rows"])
class PreferenceGraph(_GraphBase):
    """Explicit preference multigraph: row ``head[t]`` preferred to ``tail[t]``
    (build with :func:`preference_graph`).

    Attributes:
      head, tail: ``[l]`` int32 row indices.
      weight: ``[l]`` edge width ``w_t`` (column ``t`` of ``M`` is ``w_t (e_h - e_j)``).
      target: ``[l]`` regression target ``N_t = w_t z_t`` of ``(M^T f)_t``.
      num_rows: ``m`` (static).
    """

    head: Array
    tail: Array
    weight: Array
    target: Array
    num_rows: int

    takes_labels = False
    has_root = False

    def check_labels(self, y, name: str = "y"):
        if y is not None:
            raise ValueError(f"{name} must be None with a PreferenceGraph: the edge targets "
                             "come from the graph's magnitudes (graph.target)")
        return None

    def incidence_t_mv(self, v):
        # (M^T v)_t = w_t (v[h_t] - v[j_t])
        return expand(self.weight.astype(v.dtype), v) * (v[self.head] - v[self.tail])

    def incidence_mv(self, u):
        # M u = segment_sum(w u, h) - segment_sum(w u, j)
        wu = expand(self.weight.astype(u.dtype), u) * u
        return seg_sum(wu, self.head, self.num_rows) - seg_sum(wu, self.tail, self.num_rows)

    def mv(self, v):
        return self.incidence_mv(self.incidence_t_mv(v))

    def rhs(self, y, dtype):
        return self.incidence_mv(self.target.astype(dtype))

    def centre(self, X):
        return X - jnp.mean(X, axis=0)

    def factor(self):
        return self.incidence_mv, self.incidence_t_mv, lambda y: self.target

    def loss(self, f, y=None):
        return jnp.sum(jnp.square(self.incidence_t_mv(f) - self.target.astype(f.dtype)))

    def criterion(self, y, metric="pairwise_error", greater_is_better=None, **kw):
        if metric == "pairwise_error":
            return lambda f: edge_disagreement_error(f, self.head, self.tail)
        if metric == "loss":
            return lambda f: self.loss(f)
        raise ValueError("with preference edges, metric must be 'pairwise_error' or 'loss'")

    def segments(self):
        raise TypeError("a PreferenceGraph has no query segments")

    def restrict(self, rows, size=None):
        raise TypeError("a PreferenceGraph cannot be restricted to a subset of rows: its "
                        "edges may leave any subset (use a QueryGraph or an IdentityGraph)")

    def fold_units(self):
        raise TypeError("hold-out folds need a QueryGraph (folds of whole queries) or an "
                        "IdentityGraph; a PreferenceGraph's edges may cross any split")


@_pytree([], ["num_rows"])
class IdentityGraph(_GraphBase):
    """``L = I`` over ``num_rows`` rows: RankRLS machinery becomes RLS regression."""

    num_rows: int

    has_root = True

    def mv(self, v):
        return v

    root_mv = mv

    def factor(self):
        return self.mv, self.mv, self.mv

    def segments(self):
        return jnp.zeros(self.num_rows, jnp.int32), 1

    def fold_units(self):
        return np.arange(self.num_rows), self.num_rows

    def block_root(self, idx, mask, dtype):
        return jnp.eye(idx.shape[0], dtype=dtype) * mask.astype(dtype)

    def prefix(self, u: int):
        return IdentityGraph(int(u))

    def restrict(self, rows, size=None):
        return IdentityGraph(int(np.asarray(rows).shape[0] if size is None else size))


Graph = Union[QueryGraph, PreferenceGraph, IdentityGraph]


def check_graph(graph, m: Optional[int] = None, name: str = "graph"):
    """Raises unless ``graph`` is a rankjax graph (on ``m`` rows when given)."""
    if not isinstance(graph, (QueryGraph, PreferenceGraph, IdentityGraph)):
        raise TypeError(f"{name} must be a rankjax graph (query_graph, preference_graph, "
                        f"identity_graph), got {type(graph).__name__}")
    if m is not None and graph.num_rows != m:
        raise ValueError(f"{name} is defined on {graph.num_rows} rows but the data has {m}")
    return graph


# ----------------------------------------------------------------------------
# construction (host side)

def query_graph(qid, y=None, *, normalized: bool = True, exclude_ties: bool = False,
                query_weights=None) -> QueryGraph:
    """Builds the query graph of scored data (docs/math.md).

    Every pair of rows with the same query id is an edge. The Laplacian block of
    query ``c`` (size ``n_c``) is ``omega_c (n_c I - 1 1^T)`` (unnormalized,
    seeds 000/001) or ``omega_c (I - 1 1^T / n_c)`` (normalized, Airola et al. 2010
    eq. 3-4, the default). With ``exclude_ties`` the pairs with equal labels are
    dropped (Pahikkala et al. 2007 §3): ``L = L_query - L_(query, label)``.

    Args:
      qid: ``[m]`` query ids (integers, strings or categories; unsorted allowed).
      y: ``[m]`` labels; required when ``exclude_ties``.
      normalized: ``I - P P^T`` per query when True, ``D - W`` when False.
      exclude_ties: drop the pairs whose labels are equal.
      query_weights: ``None``; a ``[Q]`` array of non-negative weights in the
        order of the sorted distinct query ids; or ``"pairs"`` for
        ``omega_c = 1 / #pairs(c)`` (every query equally important, Pahikkala et al. 2009
        end of §2.4; a query with no pair gets weight 0).

    Returns:
      A :class:`QueryGraph`.

    A query of size 1 (or whose labels are all equal, with ties excluded) has no
    pair and contributes nothing: its rows get ``L v = 0``.

    Example:
      >>> import numpy as np
      >>> g = query_graph(np.array([5, 5, 5, 2]), normalized=False)
      >>> print(np.asarray(g.mv(np.array([1., 2., 6., 4.]))))
      [-6. -3.  9.  0.]
    """
    normalized = check_flag(normalized, "normalized")
    exclude_ties = check_flag(exclude_ties, "exclude_ties")
    s = segment_ids(qid)
    m = s.seg.shape[0]
    yv = None if y is None else check_targets(y, m, "y")
    counts = np.bincount(s.seg, minlength=s.num_queries).astype(np.float64)
    group_seg = group_query = None
    num_groups = 0
    pairs = counts * (counts - 1) / 2
    if exclude_ties:
        if y is None:
            raise ValueError("y is required when exclude_ties=True")
        yv = np.asarray(yv)
        if yv.ndim != 1:
            raise ValueError("exclude_ties needs one label vector y of shape [m]")
        _, group_seg = np.unique(np.stack([s.seg.astype(np.float64), yv]), axis=1,
                                 return_inverse=True)
        group_seg = group_seg.reshape(-1).astype(np.int32)
        num_groups = int(group_seg.max()) + 1
        group_query = np.zeros(num_groups, np.int32)
        group_query[group_seg] = s.seg
        gcounts = np.bincount(group_seg, minlength=num_groups).astype(np.float64)
        pairs = pairs - np.bincount(group_query, gcounts * (gcounts - 1) / 2,
                                    minlength=s.num_queries)
    if query_weights is None:
        omega = np.ones(s.num_queries)
    elif isinstance(query_weights, str):
        if query_weights != "pairs":
            raise ValueError(f"query_weights must be None, an array or 'pairs', got {query_weights!r}")
        omega = np.where(pairs > 0, 1.0 / np.maximum(pairs, 1), 0.0)
    else:
        omega = np.asarray(query_weights, dtype=np.float64)
        if omega.shape != (s.num_queries,):
            raise ValueError(f"query_weights must have shape [{s.num_queries}] (one per "
                             f"distinct qid, sorted), got {omega.shape}")
        if not np.all(np.isfinite(omega)) or np.any(omega < 0):
            raise ValueError("query_weights must be finite and >= 0")
    edge_weight = omega / counts if normalized else omega
    dtype = jnp.result_type(float)
    S = bucket(s.num_queries)
    group = {}
    if exclude_ties:
        G = bucket(num_groups)
        group = dict(group_seg=device_array(group_seg),
                     group_query=device_array(_pad(group_query, G)),
                     group_counts=device_array(_pad(gcounts, G), dtype))
    else:
        G = 0
        group = dict(group_seg=None, group_query=None, group_counts=None)
    return QueryGraph(seg=device_array(s.seg), counts=device_array(_pad(counts, S), dtype),
                      edge_weight=device_array(_pad(edge_weight, S), dtype),
                      num_segments=S, num_group_segments=G, **group)


def _pad(a, size):
    return np.concatenate([a, np.zeros(size - a.shape[0], a.dtype)])


def global_graph(num_rows: int, y=None, *, normalized: bool = False,
                 exclude_ties: bool = False) -> QueryGraph:
    """One query holding every row: global (object) ranking, or "all pairs".

    The default is the unnormalized complete graph ``m I - 1 1^T`` (docs/math.md),
    the graph of the leave-pair-out formulas. Use it also for the MPRank-style
    "all pairs" experiments of Pahikkala et al. 2009 §5, ignoring the query ids.

    Example:
      >>> g = global_graph(3)
      >>> print(g.as_dense())
      [[ 2. -1. -1.]
       [-1.  2. -1.]
       [-1. -1.  2.]]
    """
    if not is_int(num_rows) or num_rows < 1:
        raise ValueError(f"num_rows must be a positive int, got {num_rows!r}")
    return query_graph(np.zeros(int(num_rows), np.int64), y, normalized=normalized,
                       exclude_ties=exclude_ties)


COSTS = {"unit": "(20) z=1, w=1", "magnitude": "(21) z=y, w=1", "inverse": "(22) z=y, w=1/y"}


def preference_graph(head, tail, magnitude=None, *, num_rows: int,
                     cost: str = "magnitude") -> PreferenceGraph:
    """Builds an explicit preference multigraph (docs/math.md, Pahikkala et al. 2009 §2.4).

    Edge ``t`` says row ``head[t]`` is preferred to row ``tail[t]`` with
    magnitude ``magnitude[t]`` (1 when omitted). The least-squares cost is
    ``sum_t w_t^2 (z_t - (f_head - f_tail))^2`` with

    * ``cost="unit"`` — eq. (20): ``z = 1, w = 1`` (magnitudes ignored);
    * ``cost="magnitude"`` — eq. (21): ``z = y, w = 1`` (magnitude preserving);
    * ``cost="inverse"`` — eq. (22): ``z = y, w = 1 / y`` (bounds the
      disagreement error; magnitudes must be > 0).

    Repeated edges are allowed (multigraph). Zero magnitudes (tied pairs) are
    allowed for (20) and (21).

    Returns:
      A :class:`PreferenceGraph` with ``target = w z``.

    Example:
      >>> g = preference_graph([0, 1], [1, 2], [2.0, 1.0], num_rows=3)
      >>> print(np.asarray(g.target), np.asarray(g.mv(np.array([1., 0., 0.]))))
      [2. 1.] [ 1. -1.  0.]
    """
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {sorted(COSTS)}, got {cost!r}")
    if not is_int(num_rows) or num_rows < 1:
        raise ValueError(f"num_rows must be a positive int, got {num_rows!r}")
    for a, nm in ((head, "head"), (tail, "tail"), (magnitude, "magnitude")):
        require_concrete(a, nm, "preference_graph")
    if np.size(head) == 0:
        raise ValueError("the preference graph has no edges (head is empty)")
    check_indices(head, "head", num_rows), check_indices(tail, "tail", num_rows)
    h, j = np.asarray(head), np.asarray(tail)
    if h.shape != j.shape:
        raise ValueError(f"head and tail differ in length: {h.shape[0]} vs {j.shape[0]}")
    if np.any(h == j):
        raise ValueError(f"edge {int(np.argmax(h == j))} joins a row to itself (head == tail)")
    if magnitude is None:
        y = np.ones(h.shape[0])
    else:
        y = np.asarray(magnitude, dtype=np.float64)
        if y.shape != h.shape:
            raise ValueError(f"magnitude must have shape {h.shape}, got {y.shape}")
        if not np.all(np.isfinite(y)) or np.any(y < 0):
            raise ValueError("magnitude must be finite and >= 0")
    if cost == "unit":
        w, z = np.ones_like(y), np.ones_like(y)
    elif cost == "magnitude":
        w, z = np.ones_like(y), y
    else:
        if np.any(y <= 0):
            raise ValueError("cost='inverse' (eq. 22) needs magnitudes > 0")
        w, z = 1.0 / y, y
    dtype = jnp.result_type(float)
    return PreferenceGraph(head=device_array(h, jnp.int32), tail=device_array(j, jnp.int32),
                           weight=device_array(w, dtype), target=device_array(w * z, dtype),
                           num_rows=int(num_rows))


def identity_graph(num_rows: int) -> IdentityGraph:
    """``L = I``: every learner becomes pointwise RLS regression (docs/math.md).

    Example:
      >>> print(np.asarray(identity_graph(2).mv(np.array([3., 4.]))))
      [3. 4.]
    """
    if not is_int(num_rows) or num_rows < 1:
        raise ValueError(f"num_rows must be a positive int, got {num_rows!r}")
    return IdentityGraph(num_rows=int(num_rows))


def pairs_from_scores(y, qid=None, *, include_ties: bool = False):
    """Lists the preference pairs induced by scored data (host side, O(sum n_c^2)).

    For each query and each pair with ``y[h] > y[j]`` emits ``(h, j, y[h] - y[j])``;
    with ``include_ties`` also one edge per tied pair with magnitude 0 (Pahikkala et al. 2009
    §5). Meant for small data, for building a :func:`preference_graph`, and for
    tests; the learners never need it for scored data.

    Returns:
      ``(head, tail, magnitude)`` numpy arrays.

    Example:
      >>> h, t, d = pairs_from_scores(np.array([0., 2., 1.]), np.array([1, 1, 1]))
      >>> h.tolist(), t.tolist(), d.tolist()
      ([1, 1, 2], [0, 2, 0], [2.0, 1.0, 1.0])
    """
    include_ties = check_flag(include_ties, "include_ties")
    y = host_labels(y)
    seg = np.zeros(y.shape[0], np.int64) if qid is None else segment_ids(qid).seg
    if seg.shape[0] != y.shape[0]:
        raise ValueError(f"qid has {seg.shape[0]} rows but y has {y.shape[0]}")
    heads, tails = [], []
    order = np.argsort(seg, kind="stable")
    bounds = np.flatnonzero(np.diff(seg[order])) + 1
    for rows in np.split(order, bounds):
        a, b = np.meshgrid(rows, rows, indexing="ij")
        keep = (y[a] > y[b]) | (include_ties & (y[a] == y[b]) & (a < b))
        heads.append(a[keep])
        tails.append(b[keep])
    h, t = np.concatenate(heads), np.concatenate(tails)
    return h, t, y[h] - y[t]


# ----------------------------------------------------------------------------
# functional forms of the operators (jittable)

def laplacian_mv(graph: Graph, v) -> Array:
    """Laplacian-vector product ``L v`` by segment sums / gathers: ``graph.mv(v)``.

    Args:
      graph: a :class:`QueryGraph`, :class:`PreferenceGraph` or :class:`IdentityGraph`.
      v: ``[m]`` or ``[m, k]``.

    Returns:
      ``L v`` with the shape and dtype of ``v``. Cost O(m k) for query graphs,
      O((m + l) k) for preference graphs.

    Example:
      >>> g = query_graph(np.array([0, 0, 1]))   # normalized: centre per query
      >>> print(np.asarray(laplacian_mv(g, np.array([1., 3., 5.]))))
      [-1.  1.  0.]
    """
    v = _rows(graph, v, getattr(graph, "num_rows", None), "v")
    return graph.mv(v)


def _rows(graph, v, rows, name, kind=None):
    """``v [rows(, k)]`` for an operator of ``graph`` (a rankjax graph, of ``kind``)."""
    check_graph(graph)
    if kind is not None and not isinstance(graph, kind):
        raise TypeError(f"graph must be a {kind.__name__}, got {type(graph).__name__}")
    v = as_float_array(v, name, finite=True)     # NaN/inf: an error outside jit
    if v.ndim not in (1, 2) or v.shape[0] != rows:
        raise ValueError(f"{name} must have shape [{rows}] or [{rows}, k], got {tuple(v.shape)}")
    return v


def laplacian_sqrt_mv(graph: Graph, v) -> Array:
    """Symmetric square-root product ``S v`` with ``S^2 = L``: ``graph.root_mv(v)``.

    For a query block ``S = sqrt(e_c n_c) (I - 1 1^T / n_c)``: centre within the
    query, then scale. Defined when ``graph.has_root`` (query graphs without tie
    exclusion, the identity graph).

    Example:
      >>> g = query_graph(np.array([0, 0, 1]))
      >>> print(np.asarray(laplacian_sqrt_mv(g, np.array([1., 3., 5.]))))
      [-1.  1.  0.]
    """
    v = _rows(graph, v, getattr(graph, "num_rows", None), "v")
    if not graph.has_root:
        raise ValueError("laplacian_sqrt_mv needs a graph with a segment square root (a query graph "
                         "without tie exclusion, or the identity graph); use laplacian_dense")
    return graph.root_mv(v)


def incidence_t_mv(graph: PreferenceGraph, v) -> Array:
    """``M^T v = w ⊙ (v[head] - v[tail])``: ``[m(, k)] -> [l(, k)]`` (gathers only).

    Example:
      >>> g = preference_graph([0, 2], [1, 1], num_rows=3)
      >>> print(np.asarray(incidence_t_mv(g, np.array([5., 1., 3.]))))
      [4. 2.]
    """
    v = _rows(graph, v, getattr(graph, "num_rows", None), "v", PreferenceGraph)
    return graph.incidence_t_mv(v)


def incidence_mv(graph: PreferenceGraph, u) -> Array:
    """``M u``: ``[l(, k)] -> [m(, k)]`` by two segment sums (``M = [w_t (e_h - e_j)]``).

    Example:
      >>> g = preference_graph([0, 2], [1, 1], num_rows=3)
      >>> print(np.asarray(incidence_mv(g, np.array([1., 2.]))))
      [ 1. -3.  2.]
    """
    rows = graph.head.shape[0] if isinstance(graph, PreferenceGraph) else None
    u = _rows(graph, u, rows, "u", PreferenceGraph)
    return graph.incidence_mv(u)


def laplacian_dense(graph: Graph, dtype=None) -> Array:
    """The dense ``[m, m]`` Laplacian (O(m^2) memory; for the dual and for tests).

    Example:
      >>> print(laplacian_dense(query_graph(np.array([0, 0, 1]))))
      [[ 0.5 -0.5  0. ]
       [-0.5  0.5  0. ]
       [ 0.   0.   0. ]]
    """
    return check_graph(graph).as_dense(dtype)


def query_pair_counts(graph: QueryGraph, dtype=None) -> Array:
    """``[Q]`` number of pairs (edges) inside each query, ties excluded if so built, in the
    order of the remapped query ids (``graph.num_queries`` entries; the segments that pad
    the count up to a compile bucket are left out).

    Example:
      >>> g = query_graph(np.array([0, 0, 0, 1]), np.array([1., 1., 2., 0.]), exclude_ties=True)
      >>> print(np.asarray(query_pair_counts(g)))
      [2. 0.]
    """
    if not isinstance(graph, QueryGraph):
        raise TypeError(f"graph must be a QueryGraph, got {type(graph).__name__}")
    return graph.pair_counts(dtype)[:graph.num_queries]


def check_problem(X, y, graph, name: str = "X"):
    """Checks a learning problem at the public boundary: ``X`` a finite ``[m, n]``
    matrix (dense or BCOO), ``graph`` a graph on its ``m`` rows, ``y`` as the graph
    wants it (``None`` for preference edges). Returns ``(X, y)`` in one dtype, the
    promotion of theirs (float32 ``X`` with float64 ``y`` computes in float64)."""
    X = check_matrix(X, name)
    check_graph(graph, X.shape[0])
    y = graph.check_labels(y)
    if y is not None and y.dtype != X.dtype:        # one rule: numpy promotion of the inputs
        dtype = jnp.result_type(X.dtype, y.dtype)
        X, y = X.astype(dtype), y.astype(dtype)
    return X, y
