"""Preference graphs and their Laplacians as segment operations (SPEC §1).

Three graph types share one interface (``laplacian_mv``, ``laplacian_sqrt_mv``):

* :class:`QueryGraph` — every pair of rows in the same query is an edge
  (seed 001 §2.3, seed 004 §3.1). All pairs of query ``c`` share one edge weight
  ``e_c``: ``e_c = omega_c`` (unnormalized ``D - W``) or ``e_c = omega_c / n_c``
  (normalized ``I - P P^T``), with optional query weights ``omega_c``. The
  Laplacian of query ``c`` is ``e_c (n_c I - 1 1^T)``; excluding ties subtracts
  the same clique over every (query, label) group. Matvecs are segment sums,
  O(m k), never O(m^2).
* :class:`PreferenceGraph` — explicit edges ``(h_t, j_t)`` with width ``w_t``
  (seed 001 §2.4): ``L = M M^T``, ``M^T v = w (v[h] - v[j])``. O(m + l).
* :class:`IdentityGraph` — ``L = I``: pointwise RLS regression (SPEC §2.5).

Graphs are pytrees whose sizes are static, so they can be passed to jitted
functions. They are built on the host by :func:`query_graph`,
:func:`global_graph`, :func:`preference_graph` and :func:`identity_graph`.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import check_targets, is_concrete, segment_ids

__all__ = [
    "QueryGraph", "PreferenceGraph", "IdentityGraph", "Graph",
    "query_graph", "global_graph", "preference_graph", "identity_graph",
    "pairs_from_scores", "laplacian_mv", "laplacian_sqrt_mv", "laplacian_dense",
    "query_pair_counts", "has_sqrt",
]

Array = jax.Array


def _pytree(data, meta):
    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    return wrap


@_pytree(["seg", "edge_weight", "group_seg", "group_query"], ["num_queries", "num_groups"])
class QueryGraph:
    """Query (label-ranking) graph over ``m`` rows.

    Attributes:
      seg: ``[m]`` int32 query segment id of every row, ``0 .. num_queries-1``.
      edge_weight: ``[Q]`` weight ``e_c`` of every pair inside query ``c``.
      group_seg: ``[m]`` int32 (query, label) group of every row, or ``None``
        when ties are kept.
      group_query: ``[G]`` int32 query of every group, or ``None``.
      num_queries: ``Q`` (static).
      num_groups: ``G`` (static; 0 when ties are kept).
    """

    seg: Array
    edge_weight: Array
    group_seg: Optional[Array]
    group_query: Optional[Array]
    num_queries: int
    num_groups: int

    @property
    def num_rows(self) -> int:
        return self.seg.shape[0]


@_pytree(["head", "tail", "weight", "target"], ["num_rows"])
class PreferenceGraph:
    """Explicit preference multigraph: row ``head[t]`` preferred to ``tail[t]``.

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


@_pytree([], ["num_rows"])
class IdentityGraph:
    """``L = I`` over ``num_rows`` rows: RankRLS machinery becomes RLS regression."""

    num_rows: int


Graph = Union[QueryGraph, PreferenceGraph, IdentityGraph]


# ----------------------------------------------------------------------------
# construction (host side)

def query_graph(qid, y=None, *, normalized: bool = True, exclude_ties: bool = False,
                query_weights=None) -> QueryGraph:
    """Builds the query graph of scored data (SPEC §1.1).

    Every pair of rows with the same query id is an edge. The Laplacian block of
    query ``c`` (size ``n_c``) is ``omega_c (n_c I - 1 1^T)`` (unnormalized,
    seeds 000/001) or ``omega_c (I - 1 1^T / n_c)`` (normalized, seed 004
    eq. 3-4, the default). With ``exclude_ties`` the pairs with equal labels are
    dropped (seed 000 §3): ``L = L_query - L_(query, label)``.

    Args:
      qid: ``[m]`` integer query ids (any values, unsorted allowed).
      y: ``[m]`` labels; required when ``exclude_ties``.
      normalized: ``I - P P^T`` per query when True, ``D - W`` when False.
      exclude_ties: drop the pairs whose labels are equal.
      query_weights: ``None``; a ``[Q]`` array of non-negative weights in the
        order of the sorted distinct query ids; or ``"pairs"`` for
        ``omega_c = 1 / #pairs(c)`` (every query equally important, seed 001
        end of §2.4; a query with no pair gets weight 0).

    Returns:
      A :class:`QueryGraph`.

    A query of size 1 (or whose labels are all equal, with ties excluded) has no
    pair and contributes nothing: its rows get ``L v = 0``.

    Example:
      >>> import numpy as np
      >>> g = query_graph(np.array([5, 5, 5, 2]), normalized=False)
      >>> print(np.asarray(laplacian_mv(g, np.array([1., 2., 6., 4.]))))
      [-6. -3.  9.  0.]
    """
    s = segment_ids(qid)
    m = s.seg.shape[0]
    counts = np.bincount(s.seg, minlength=s.num_queries).astype(np.float64)
    group_seg = group_query = None
    num_groups = 0
    pairs = counts * (counts - 1) / 2
    if exclude_ties:
        if y is None:
            raise ValueError("y is required when exclude_ties=True")
        yv = np.asarray(check_targets(y, m, "y"))
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
    return QueryGraph(
        seg=jnp.asarray(s.seg), edge_weight=jnp.asarray(edge_weight),
        group_seg=None if group_seg is None else jnp.asarray(group_seg),
        group_query=None if group_query is None else jnp.asarray(group_query),
        num_queries=s.num_queries, num_groups=num_groups)


def global_graph(num_rows: int, y=None, *, normalized: bool = False,
                 exclude_ties: bool = False) -> QueryGraph:
    """One query holding every row: global (object) ranking, or "all pairs".

    The default is the unnormalized complete graph ``m I - 1 1^T`` (SPEC §1.1),
    the graph of the leave-pair-out formulas. Use it also for the MPRank-style
    "all pairs" experiments of seed 001 §5, ignoring the query ids.

    Example:
      >>> g = global_graph(3)
      >>> print(laplacian_dense(g))
      [[ 2. -1. -1.]
       [-1.  2. -1.]
       [-1. -1.  2.]]
    """
    if not isinstance(num_rows, (int, np.integer)) or num_rows < 1:
        raise ValueError(f"num_rows must be a positive int, got {num_rows!r}")
    return query_graph(np.zeros(int(num_rows), np.int64), y, normalized=normalized,
                       exclude_ties=exclude_ties)


COSTS = {"unit": "(20) z=1, w=1", "magnitude": "(21) z=y, w=1", "inverse": "(22) z=y, w=1/y"}


def preference_graph(head, tail, magnitude=None, *, num_rows: int,
                     cost: str = "magnitude") -> PreferenceGraph:
    """Builds an explicit preference multigraph (SPEC §1.2, seed 001 §2.4).

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
      >>> print(np.asarray(g.target), np.asarray(laplacian_mv(g, np.array([1., 0., 0.]))))
      [2. 1.] [ 1. -1.  0.]
    """
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {sorted(COSTS)}, got {cost!r}")
    if not isinstance(num_rows, (int, np.integer)) or num_rows < 1:
        raise ValueError(f"num_rows must be a positive int, got {num_rows!r}")
    h, j = np.asarray(head), np.asarray(tail)
    for name, v in (("head", h), ("tail", j)):
        if v.dtype.kind not in "iu":
            raise TypeError(f"{name} must be an integer array, got dtype {v.dtype}")
        if v.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {v.shape}")
        if v.size and (v.min() < 0 or v.max() >= num_rows):
            raise ValueError(f"{name} holds row indices outside [0, {num_rows})")
    if h.shape != j.shape:
        raise ValueError(f"head and tail differ in length: {h.shape[0]} vs {j.shape[0]}")
    if h.size == 0:
        raise ValueError("the preference graph has no edges (head is empty)")
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
    return PreferenceGraph(head=jnp.asarray(h, jnp.int32), tail=jnp.asarray(j, jnp.int32),
                           weight=jnp.asarray(w), target=jnp.asarray(w * z),
                           num_rows=int(num_rows))


def identity_graph(num_rows: int) -> IdentityGraph:
    """``L = I``: every learner becomes pointwise RLS regression (SPEC §2.5).

    Example:
      >>> print(np.asarray(laplacian_mv(identity_graph(2), np.array([3., 4.]))))
      [3. 4.]
    """
    if not isinstance(num_rows, (int, np.integer)) or num_rows < 1:
        raise ValueError(f"num_rows must be a positive int, got {num_rows!r}")
    return IdentityGraph(num_rows=int(num_rows))


def pairs_from_scores(y, qid=None, *, include_ties: bool = False):
    """Lists the preference pairs induced by scored data (host side, O(sum n_c^2)).

    For each query and each pair with ``y[h] > y[j]`` emits ``(h, j, y[h] - y[j])``;
    with ``include_ties`` also one edge per tied pair with magnitude 0 (seed 001
    §5). Meant for small data, for building a :func:`preference_graph`, and for
    tests; the learners never need it for scored data.

    Returns:
      ``(head, tail, magnitude)`` numpy arrays.

    Example:
      >>> h, t, d = pairs_from_scores(np.array([0., 2., 1.]), np.array([1, 1, 1]))
      >>> h.tolist(), t.tolist(), d.tolist()
      ([1, 1, 2], [0, 2, 0], [2.0, 1.0, 1.0])
    """
    y = np.asarray(y, dtype=np.float64)
    seg = np.zeros(y.shape[0], np.int64) if qid is None else segment_ids(qid).seg
    if seg.shape[0] != y.shape[0]:
        raise ValueError("y and qid differ in length")
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
# operators (jittable)

def _seg_sum(v, seg, n):
    return jax.ops.segment_sum(v, seg, num_segments=n)


def _clique_parts(v, seg, edge_weight, num):
    """Per-segment counts, sums and broadcast helpers for a weighted clique."""
    ones = jnp.ones(v.shape[:1], v.dtype)
    counts = _seg_sum(ones, seg, num)
    sums = _seg_sum(v, seg, num)
    e = edge_weight.astype(v.dtype)
    return counts, sums, e


def _expand(a, v):
    return a.reshape(a.shape + (1,) * (v.ndim - 1))


def _clique_mv(v, seg, edge_weight, num):
    # (L v)_i = e_c (n_c v_i - sum_{j in c} v_j)
    counts, sums, e = _clique_parts(v, seg, edge_weight, num)
    return _expand(e[seg], v) * (_expand(counts[seg], v) * v - sums[seg])


def _clique_sqrt_mv(v, seg, edge_weight, num):
    # S = sqrt(e_c n_c) (I - 1 1^T / n_c): centre within the segment, then scale.
    counts, sums, e = _clique_parts(v, seg, edge_weight, num)
    mean = sums / _expand(jnp.maximum(counts, 1), sums)
    scale = jnp.sqrt(e * counts)
    return _expand(scale[seg], v) * (v - mean[seg])


def laplacian_mv(graph: Graph, v) -> Array:
    """Laplacian-vector product ``L v`` by segment sums / gathers (SPEC §1).

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
    v = jnp.asarray(v)
    if isinstance(graph, IdentityGraph):
        return v
    if isinstance(graph, PreferenceGraph):
        return _incidence_mv(graph, _incidence_t_mv(graph, v))
    out = _clique_mv(v, graph.seg, graph.edge_weight, graph.num_queries)
    if graph.group_seg is not None:
        ge = graph.edge_weight[graph.group_query]
        out = out - _clique_mv(v, graph.group_seg, ge, graph.num_groups)
    return out


def has_sqrt(graph: Graph) -> bool:
    """True when ``S = L^{1/2}`` is a segment operation (no tie exclusion).

    Example:
      >>> has_sqrt(query_graph(np.array([0, 0]))), has_sqrt(query_graph(
      ...     np.array([0, 0]), np.array([1., 1.]), exclude_ties=True))
      (True, False)
    """
    return isinstance(graph, IdentityGraph) or (
        isinstance(graph, QueryGraph) and graph.group_seg is None)


def laplacian_sqrt_mv(graph: Graph, v) -> Array:
    """Symmetric square-root product ``S v`` with ``S^2 = L`` (SPEC §1.1).

    For a query block ``S = sqrt(e_c n_c) (I - 1 1^T / n_c)``: centre within the
    query, then scale. Defined for query graphs without tie exclusion and the
    identity graph; for a :class:`PreferenceGraph` use :func:`incidence_t_mv`
    (``L = M M^T``) and for tie-excluded graphs :func:`laplacian_dense`.

    Args:
      graph: a graph with ``has_sqrt(graph)``.
      v: ``[m]`` or ``[m, k]``.

    Example:
      >>> g = query_graph(np.array([0, 0, 1]))
      >>> print(np.asarray(laplacian_sqrt_mv(g, np.array([1., 3., 5.]))))
      [-1.  1.  0.]
    """
    v = jnp.asarray(v)
    if isinstance(graph, IdentityGraph):
        return v
    if not has_sqrt(graph):
        raise ValueError("laplacian_sqrt_mv needs a query graph without tie exclusion "
                         "(no closed-form square root otherwise); use laplacian_dense")
    return _clique_sqrt_mv(v, graph.seg, graph.edge_weight, graph.num_queries)


def _incidence_t_mv(graph: PreferenceGraph, v):
    # (M^T v)_t = w_t (v[h_t] - v[j_t])
    w = graph.weight.astype(v.dtype)
    return _expand(w, v) * (v[graph.head] - v[graph.tail])


def _incidence_mv(graph: PreferenceGraph, u):
    # M u = segment_sum(w u, h) - segment_sum(w u, j)
    wu = _expand(graph.weight.astype(u.dtype), u) * u
    return (_seg_sum(wu, graph.head, graph.num_rows) - _seg_sum(wu, graph.tail, graph.num_rows))


def incidence_t_mv(graph: PreferenceGraph, v) -> Array:
    """``M^T v = w ⊙ (v[head] - v[tail])``: ``[m(, k)] -> [l(, k)]`` (gathers only).

    Example:
      >>> g = preference_graph([0, 2], [1, 1], num_rows=3)
      >>> print(np.asarray(incidence_t_mv(g, np.array([5., 1., 3.]))))
      [4. 2.]
    """
    return _incidence_t_mv(graph, jnp.asarray(v))


def incidence_mv(graph: PreferenceGraph, u) -> Array:
    """``M u``: ``[l(, k)] -> [m(, k)]`` by two segment sums (``M = [w_t (e_h - e_j)]``).

    Example:
      >>> g = preference_graph([0, 2], [1, 1], num_rows=3)
      >>> print(np.asarray(incidence_mv(g, np.array([1., 2.]))))
      [ 1. -3.  2.]
    """
    return _incidence_mv(graph, jnp.asarray(u))


def laplacian_dense(graph: Graph, dtype=None) -> Array:
    """The dense ``[m, m]`` Laplacian (O(m^2) memory; for the dual and for tests).

    Built as ``L I`` with :func:`laplacian_mv`, so it is exact for every graph.

    Example:
      >>> print(laplacian_dense(query_graph(np.array([0, 0, 1]))))
      [[ 0.5 -0.5  0. ]
       [-0.5  0.5  0. ]
       [ 0.   0.   0. ]]
    """
    m = graph.num_rows
    dtype = dtype or jnp.result_type(float)
    return laplacian_mv(graph, jnp.eye(m, dtype=dtype))


def query_pair_counts(graph: QueryGraph, dtype=None) -> Array:
    """``[Q]`` number of pairs (edges) inside each query, ties excluded if so built.

    Example:
      >>> g = query_graph(np.array([0, 0, 0, 1]), np.array([1., 1., 2., 0.]), exclude_ties=True)
      >>> print(np.asarray(query_pair_counts(g)))
      [2. 0.]
    """
    dtype = dtype or jnp.result_type(float)
    ones = jnp.ones(graph.seg.shape, dtype)
    n = _seg_sum(ones, graph.seg, graph.num_queries)
    pairs = n * (n - 1) / 2
    if graph.group_seg is not None:
        g = _seg_sum(ones, graph.group_seg, graph.num_groups)
        pairs = pairs - _seg_sum(g * (g - 1) / 2, graph.group_query, graph.num_queries)
    return pairs
