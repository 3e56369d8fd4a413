r"""Preference graphs and their Laplacians as operators (``docs/math.md`` §1).

Three graph types carry their own operators; every solver uses only these
methods, so no other module switches on the graph type:

* :class:`QueryGraph` — every pair of rows in the same query is an edge
  (Pahikkala et al. 2009, §2.3; Airola et al. 2010, §3.1). All pairs of query
  ``c`` share one edge weight ``e_c``: ``e_c = omega_c`` (unnormalized
  ``D - W``) or ``e_c = omega_c / n_c`` (normalized :math:`I - P P^T`), with
  optional query weights ``omega_c``. The Laplacian of query ``c`` is
  :math:`e_c (n_c I - 1 1^T)`; excluding ties subtracts the same clique over every
  (query, label) group. Matvecs are segment sums, O(m k), never :math:`O(m^2)`.
* :class:`PreferenceGraph` — explicit edges ``(h_t, j_t)`` with width ``w_t``
  (Pahikkala et al. 2009, §2.4): :math:`L = M M^T`, :math:`M^T v = w (v[h] - v[j])`. O(m + l).
* :class:`IdentityGraph` — ``L = I``: pointwise RLS regression.

The operator methods, shared by all three:

``mv(v)`` (``L v``), ``has_root`` and ``root_mv(v)`` (the segment root ``S``,
:math:`S^2 = L`), ``rhs(y, dtype)`` (``L y``, or ``M N`` for edges),
``normal_equations(X, y)`` (:math:`X^T L X`, :math:`X^T L y`), ``dual_root(dtype)``
(the root of the symmetric dual system), ``factor()`` (:math:`R R^T = L` for CG),
``as_dense(dtype)``, ``loss(f, y)``, ``criterion(y, metric)``,
``fold_units()`` and ``block_root(idx, mask, dtype)`` (hold-out folds),
``check_labels(y)``.

Graphs are pytrees. Per-query counts are computed once on the host and stored; the number
of query segments is padded to a power of two (:func:`rankjax._core.segments.bucket`), so data
with the same number of rows but another number of queries reuses compiled programs.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from .._core.products import HI, mm, tdot
from .._core.checks import check_matrix, check_targets
from .._core.host import device_array, is_concrete
from .._core.memory import compute_dtype
from ..metrics.pairs import edge_disagreement_error, metric_sign, pairwise_error
from .._core.linalg import gram, psd_root, segment_normal_equations
from .._core.segments import (bucket, expand, row_sums, seg_sum)
from .._core.types import saveable
from .fold_blocks import FoldBlocks, QueryFoldBlocks

Array = jax.Array


def graph_pytree(data, meta):
    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        return jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)
    return wrap


class _Root:
    r"""``S`` of the symmetric dual system: ``apply(v) = S v``, :math:`rhs(y) = S^+ L y`."""

    def __init__(self, apply, rhs):
        self.apply, self.rhs = apply, rhs


def _dense_root(graph, dtype, rhs):
    S, S_pinv = psd_root(graph.as_dense(dtype))
    return _Root(lambda v: jnp.matmul(S, v, precision=HI),
                 lambda y: jnp.matmul(S_pinv, rhs(y), precision=HI))


class GraphBase(FoldBlocks):
    """Operator methods common to all graphs (each graph overrides what differs)."""

    takes_labels = True
    annihilates_constants = True   # L 1 = 0: a ranking loss, blind to a constant score

    def check_labels(self, y, name: str = "y"):
        """``y`` checked against the graph: ``[m]``/``[m, k]`` finite, or ``None`` for edges."""
        return check_targets(y, self.num_rows, name)

    def rhs(self, y, dtype):
        """``L y`` (``[m(, k)]``); ``M N`` for preference edges."""
        return self.mv(y)

    def as_dense(self, dtype=None) -> Array:
        """The dense ``[m, m]`` Laplacian (:math:`O(m^2)` memory)."""
        return self.mv(jnp.eye(self.num_rows, dtype=dtype or compute_dtype()))

    def centre(self, X):
        r"""``X`` minus a constant ``L`` annihilates (float32 accuracy of :math:`X^T L X`)."""
        return X

    def normal_equations(self, X, y, root: bool = False):
        r""":math:`(X^T L X, X^T L y)`: :math:`Z^T Z` with ``Z = S X`` when a segment root exists
        (``root``: always this form, where a graph has a faster one)."""
        if self.has_root:
            Z = self.root_mv(X)
            return gram(Z), tdot(Z, self.root_mv(y))
        Xc = self.centre(X)
        G = jnp.matmul(Xc.T, self.mv(Xc), precision=HI)
        return (G + G.T) / 2, tdot(Xc, self.rhs(y, X.dtype))

    def dual_root(self, dtype):
        r"""The root ``S`` (:math:`S^2 = L`) of the symmetric dual system and its rhs map."""
        if self.has_root:
            return _Root(self.root_mv, self.root_mv)
        return _dense_root(self, dtype, lambda y: self.rhs(y, dtype))

    def segment_root(self, dtype):
        r"""``(seg, num, e n, n)`` of a root :math:`S = \sqrt{e n} (I - 1 1^T / n)` per segment, or
        ``None``."""
        return None

    def kept_rows(self):
        """The rows a per-row loss averages over: every row (a list graph's: its kept ones)."""
        return self.num_rows

    def loss(self, f, y):
        r"""The RankRLS loss :math:`(y - f)^T L (y - f)`."""
        r = y - f
        return mm(r, self.mv(r))

    splittable, unsplittable_hint = True, ""    # rows split into whole queries; else a remedy

    def check_splittable(self, what: str):
        """Raises when the rows cannot be split without cutting edges (hold-out folds, a
        subsample, row blocks): a :class:`PreferenceGraph` or a survival graph."""
        if not self.splittable:
            raise TypeError(f"{what} needs a QueryGraph (whole queries) or an IdentityGraph: "
                            f"the edges of a {type(self).__name__} may cross any split of the "
                            f"rows{self.unsplittable_hint}")

    def criterion(self, y, metric="pairwise_error", higher_is_better=None, **kw):
        """``f -> value`` (lower is better) on this graph's rows: ``"pairwise_error"``,
        ``"loss"`` or a metric ``metric(f, y, seg, num_queries=..., **kw)``."""
        if metric == "loss":
            return lambda f: self.loss(f, y)
        if metric == "pairwise_error":
            metric = pairwise_error
        if not callable(metric):
            raise ValueError(f"metric must be 'pairwise_error', 'loss' or a callable, got {metric!r}")
        sign = metric_sign(metric, higher_is_better)
        seg, num = self.segments()
        return lambda f: sign * metric(f, y, seg, num_queries=num, **kw)


@graph_pytree(["seg", "counts", "edge_weight", "group_seg", "group_query", "group_counts"],
              ["num_segments", "num_group_segments"])
@saveable
class QueryGraph(QueryFoldBlocks, GraphBase):
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
        sums = row_sums(v, seg, num)
        return expand(e[seg], v) * (expand(counts[seg], v) * v - sums[seg])

    def normal_equations(self, X, y, root: bool = False):
        r""":math:`(X^T L X, X^T L y)` from segment sums of ``X`` (no ``S X`` formed) where that
        is accurate, else (or with ``root``) as every graph (``segment_normal_equations``)."""
        if root:
            return GraphBase.normal_equations(self, X, y)
        dt = X.dtype
        e, n = self.edge_weight.astype(dt), self.counts.astype(dt)
        r = (e * n)[self.seg]
        cliques = [(1, self.seg, e, self.num_segments, self.counts)]
        if self.group_seg is not None:
            eg = e[self.group_query]
            r = r - (eg * self.group_counts.astype(dt))[self.group_seg]
            cliques.append((-1, self.group_seg, eg, self.num_group_segments, self.group_counts))
        return segment_normal_equations(X, self.mv(y), r, cliques,
                                        lambda: GraphBase.normal_equations(self, X, y))

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
        return (row_sums(v, self.seg, self.num_segments) / expand(n, v))[self.seg]

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

    def segment_root(self, dtype):
        n = self.counts.astype(dtype)
        return (self.seg, self.num_segments, self.edge_weight.astype(dtype) * n, n) if self.has_root else None

    def factor(self):
        return self.root_mv, self.root_mv, self.root_mv

    def segments(self):
        return self.seg, self.num_segments

    def pair_counts(self, dtype=None):
        dtype = dtype or compute_dtype()
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

    def restrict(self, rows, size: Optional[int] = None):
        """The graph of the rows ``rows`` (host ``[r]`` indices of whole queries, any order):
        ``L_UU`` of those rows with the same edge weights (a preconditioner's subsample). With
        ``size >= r`` it has ``size`` rows, the last ``size - r`` in one padding segment of edge
        weight 0 (adds nothing): subsamples of one bucket share programs. No query is cut."""
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
                   edge_weight=device_array(pad_to(np.asarray(self.edge_weight)[uq], S), dtype),
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


@graph_pytree(["head", "tail", "weight", "target"], ["num_rows"])
@saveable
class PreferenceGraph(GraphBase):
    r"""Explicit preference multigraph: row ``head[t]`` preferred to ``tail[t]``
    (build with :func:`preference_graph`).

    Attributes:
      head: ``[l]`` int32 row index of each edge's preferred end.
      tail: ``[l]`` int32 row index of each edge's other end.
      weight: ``[l]`` edge width ``w_t`` (column ``t`` of ``M`` is ``w_t (e_h - e_j)``).
      target: ``[l]`` regression target ``N_t = w_t z_t`` of :math:`(M^T f)_t`.
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

    def criterion(self, y, metric="pairwise_error", higher_is_better=None, **kw):
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

    splittable = False

    def fold_units(self):
        self.check_splittable("hold-out folds")


@saveable
@graph_pytree([], ["num_rows"])
class IdentityGraph(GraphBase):
    """``L = I`` over ``num_rows`` rows: RankRLS machinery becomes RLS regression."""

    num_rows: int

    has_root = True
    annihilates_constants = False

    def mv(self, v):
        return v

    root_mv = mv

    def factor(self):
        return self.mv, self.mv, self.mv

    def segments(self):
        return jnp.zeros(self.num_rows, jnp.int32), 1

    def fold_units(self):
        return np.arange(self.num_rows), self.num_rows

    def fold_order(self):
        return np.arange(self.num_rows)

    def block_root(self, idx, mask, dtype):
        return jnp.eye(idx.shape[0], dtype=dtype) * mask.astype(dtype)

    def root_rows(self, idx, mask, V):
        return V * expand(mask.astype(V.dtype), V)

    block_mv = root_rows

    def prefix(self, u: int):
        return IdentityGraph(int(u))

    def restrict(self, rows, size=None):
        return IdentityGraph(int(np.asarray(rows).shape[0] if size is None else size))


Graph = Union[QueryGraph, PreferenceGraph, IdentityGraph]


GRAPH_KINDS = {"QueryGraph": QueryGraph, "PreferenceGraph": PreferenceGraph, "IdentityGraph": IdentityGraph}
"""The graph types by name: the one place that tells them apart (solvers call methods)."""


def is_graph(obj, kind: Optional[str] = None) -> bool:
    """Whether ``obj`` is a rankjax graph (of the type named ``kind`` when given)."""
    return isinstance(obj, GRAPH_KINDS[kind] if kind else tuple(GRAPH_KINDS.values()))


def check_graph(graph, m: Optional[int] = None, name: str = "graph", kind: Optional[str] = None,
                why: str = ""):
    """Raises unless ``graph`` is a rankjax graph (on ``m`` rows; of the type ``kind``, ``why``)."""
    if not isinstance(graph, tuple(GRAPH_KINDS.values())):
        raise TypeError(f"{name} must be a rankjax graph (query_graph, preference_graph, "
                        f"identity_graph), got {type(graph).__name__}")
    if kind is not None and not isinstance(graph, GRAPH_KINDS[kind]):
        raise TypeError(f"{name} must be a {kind}{why}, got {type(graph).__name__}")
    if m is not None and graph.num_rows != m:
        raise ValueError(f"{name} is defined on {graph.num_rows} rows but the data has {m}")
    return graph


def pad_to(a, size):
    return np.concatenate([a, np.zeros(size - a.shape[0], a.dtype)])


def check_problem(X, y, graph, name: str = "X"):
    """Checks a learning problem at the public boundary: ``X`` a finite ``[m, n]`` matrix (dense
    or BCOO), ``graph`` a graph on its ``m`` rows, ``y`` as the graph wants it (``None`` for
    preference edges). Returns ``(X, y)`` in the promotion of their dtypes."""
    X = check_matrix(X, name)
    check_graph(graph, X.shape[0])
    y = graph.check_labels(y)
    if y is not None and y.dtype != X.dtype:        # one rule: numpy promotion of the inputs
        dtype = jnp.result_type(X.dtype, y.dtype)
        X, y = X.astype(dtype), y.astype(dtype)
    return X, y
