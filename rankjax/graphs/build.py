r"""Graphs built on the host (query ids remapped, per-query counts computed once) and
the public operator functions on them (``docs/math.md`` §1): ``L v``, ``S v``,
:math:`M^T v`, ``M u``, the dense Laplacian and the pair counts.
"""
from __future__ import annotations


import jax.numpy as jnp
import numpy as np

from .._core.checks import (as_float_array, check_flag, check_indices, check_targets, host_labels,
                            is_int, require_concrete)
from .._core.queries import segment_ids
from .._core.host import device_array
from .._core.memory import compute_dtype
from .graph import (Array, Graph, IdentityGraph, PreferenceGraph, QueryGraph, check_graph, pad_to)
from .._core.segments import bucket


def query_graph(qid, y=None, *, normalized: bool = True, exclude_ties: bool = False,
                query_weights=None) -> QueryGraph:
    r"""Builds the query graph of scored data (docs/math.md).

    Every pair of rows with the same query id is an edge. The Laplacian block of query
    :math:`c` (size :math:`n_c`, weight :math:`\omega_c`) is

    .. math::

       L_c = \omega_c (n_c I - \mathbf{1}\mathbf{1}^T) \quad \text{(unnormalized)}

       L_c = \omega_c (I - \mathbf{1}\mathbf{1}^T / n_c) \quad \text{(normalized, the default)}

    (Pahikkala et al. 2007 §2.3; 2009 §2.4; the normalized form Airola et al. 2010 eq.
    3-4). With ``exclude_ties`` the pairs with equal labels are dropped (Pahikkala et al.
    2007 §3): :math:`L = L_{\text{query}} - L_{\text{query, label}}`.

    Args:
      qid: ``[m]`` query ids (integers, strings or categories; unsorted allowed).
      y: ``[m]`` labels; required when ``exclude_ties``.
      normalized: :math:`I - P P^T` per query when True, ``D - W`` when False.
      exclude_ties: drop the pairs whose labels are equal.
      query_weights: ``None``; a ``[Q]`` array of non-negative weights in the
        order of the sorted distinct query ids; or ``"pairs"`` for
        :math:`\omega_c = 1 / \#\text{pairs}(c)` (every query equally important, Pahikkala et al. 2009
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
    dtype = compute_dtype()
    S = bucket(s.num_queries)
    group = {}
    if exclude_ties:
        G = bucket(num_groups)
        group = dict(group_seg=device_array(group_seg),
                     group_query=device_array(pad_to(group_query, G)),
                     group_counts=device_array(pad_to(gcounts, G), dtype))
    else:
        G = 0
        group = dict(group_seg=None, group_query=None, group_counts=None)
    return QueryGraph(seg=device_array(s.seg), counts=device_array(pad_to(counts, S), dtype),
                      edge_weight=device_array(pad_to(edge_weight, S), dtype),
                      num_segments=S, num_group_segments=G, **group)


def global_graph(num_rows: int, y=None, *, normalized: bool = False,
                 exclude_ties: bool = False) -> QueryGraph:
    r"""One query holding every row: global (object) ranking, or "all pairs".

    The default is the unnormalized complete graph :math:`m I - 1 1^T` (docs/math.md),
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
    r"""Builds an explicit preference multigraph (docs/math.md, Pahikkala et al. 2009 §2.4).

    Edge ``t`` says row ``head[t]`` is preferred to row ``tail[t]`` with
    magnitude ``magnitude[t]`` (1 when omitted). The least-squares cost is
    :math:`\sum_t w_t^2 (z_t - (f_{head} - f_{tail}))^2` with

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
    dtype = compute_dtype()
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
    r"""Lists the preference pairs induced by scored data (host side, :math:`O(\sum n_c^2)`).

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
    check_graph(graph, kind=kind)
    v = as_float_array(v, name, finite=True)     # NaN/inf: an error outside jit
    if v.ndim not in (1, 2) or v.shape[0] != rows:
        raise ValueError(f"{name} must have shape [{rows}] or [{rows}, k], got {tuple(v.shape)}")
    return v


def laplacian_sqrt_mv(graph: Graph, v) -> Array:
    r"""Symmetric square-root product ``S v`` with :math:`S^2 = L`: ``graph.root_mv(v)``.

    For a query block :math:`S = \sqrt{e_c n_c} (I - 1 1^T / n_c)`: centre within the
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
    r""":math:`M^T v = w ⊙ (v[head] - v[tail])`: ``[m(, k)] -> [l(, k)]`` (gathers only).

    Example:
      >>> g = preference_graph([0, 2], [1, 1], num_rows=3)
      >>> print(np.asarray(incidence_t_mv(g, np.array([5., 1., 3.]))))
      [4. 2.]
    """
    v = _rows(graph, v, getattr(graph, "num_rows", None), "v", "PreferenceGraph")
    return graph.incidence_t_mv(v)


def incidence_mv(graph: PreferenceGraph, u) -> Array:
    """``M u``: ``[l(, k)] -> [m(, k)]`` by two segment sums (``M = [w_t (e_h - e_j)]``).

    Example:
      >>> g = preference_graph([0, 2], [1, 1], num_rows=3)
      >>> print(np.asarray(incidence_mv(g, np.array([1., 2.]))))
      [ 1. -3.  2.]
    """
    check_graph(graph, kind="PreferenceGraph")
    u = _rows(graph, u, graph.head.shape[0], "u", "PreferenceGraph")
    return graph.incidence_mv(u)


def laplacian_dense(graph: Graph, dtype=None) -> Array:
    """The dense ``[m, m]`` Laplacian (:math:`O(m^2)` memory; for the dual and for tests).

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
    check_graph(graph, kind="QueryGraph")
    return graph.pair_counts(dtype)[:graph.num_queries]
