"""The sharded layout (docs/design.md, "Scale-out"): whole queries spread over the
devices of a 1-D mesh, each device's rows padded to one width with a padding segment
of edge weight 0, and the host maps between original rows and device slots.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._core.checks import as_float_array, check_count, require_concrete
from .._core.host import is_concrete
from .._core.queries import segment_ids
from ..graphs.graph import (QueryGraph, check_graph, check_problem, is_graph)
from .._core.sparse import (CSRMatrix, as_dense, host_sparse, is_csr, is_scipy_sparse, is_sparse,
                            to_csr, to_scipy)
from .._core.types import saveable
from .._problem import KernelProblem, Problem
from .._core.memory import compute_dtype
from .folds import stacked_folds
from .hosts import (slots, agree_across_processes, local_device_count, local_rows,
                    one_process, put_rows, to_layout)
from .score import sharded_score

AXIS = "queries"
"""Default mesh axis name of :func:`shard` (``jax.make_mesh((n,), (AXIS,))``)."""


@saveable
class QueryPartition(NamedTuple):
    """Rows of each shard: whole queries, contiguous in sorted-qid order.

    Attributes:
      shard_of_query: ``[Q]`` shard of every query (sorted distinct ids).
      rows: ``[D, P]`` row indices of every shard in their original order,
        ``-1`` on padding; ``P`` is the largest shard rounded up to ``multiple``.
      rows_per_shard: ``[D]``.
    """

    shard_of_query: np.ndarray
    rows: np.ndarray
    rows_per_shard: np.ndarray


def _seg_counts(qid_or_graph):
    if is_graph(qid_or_graph, "QueryGraph"):
        seg = np.asarray(qid_or_graph.seg)
        return seg, int(seg.max()) + 1 if seg.size else 0
    s = segment_ids(qid_or_graph)
    return s.seg, s.num_queries


def partition_queries(qid, num_shards: int, *, multiple: int = 8) -> QueryPartition:
    """Splits queries over ``num_shards`` devices with balanced row counts; a query is
    never split (host side, O(m)).

    Queries keep their sorted-id order and shard ``d`` takes those whose middle row
    falls in ``[d m / D, (d + 1) m / D)``, so every shard holds ``m / D`` rows give
    or take one query. A shard may get no query (more shards than queries).

    Args:
      qid: ``[m]`` query ids, or a :class:`~rankjax.QueryGraph`.
      num_shards: ``D >= 1``.
      multiple: the padded shard size ``P`` is a multiple of this.

    Example:
      >>> p = partition_queries([1, 1, 1, 2, 2, 3, 3, 3, 3], 2, multiple=1)
      >>> p.shard_of_query.tolist(), p.rows.tolist()
      ([0, 0, 1], [[0, 1, 2, 3, 4], [5, 6, 7, 8, -1]])
    """
    D = check_count(num_shards, "num_shards")
    multiple = check_count(multiple, "multiple")
    seg, Q = _seg_counts(qid)
    m = seg.shape[0]
    counts = np.bincount(seg, minlength=Q)
    middle = np.cumsum(counts) - counts / 2
    shard_q = np.minimum(np.floor(D * middle / max(m, 1)).astype(np.int64), D - 1)
    shard_row = shard_q[seg]
    order = np.argsort(shard_row, kind="stable")
    per = np.bincount(shard_row, minlength=D)
    width = max(multiple, -(-int(per.max()) // multiple) * multiple)
    pos = np.arange(m) - np.repeat(np.cumsum(per) - per, per)
    rows = np.full((D, width), -1, np.int64)
    rows[shard_row[order], pos] = order
    return QueryPartition(shard_q, rows, per)


@saveable
@dataclasses.dataclass(frozen=True)
class ShardedData:
    """Training rows laid out by whole queries over a 1-D device mesh (build with
    :func:`shard`).

    A kind of problem (``kind == "sharded"``) that the verbs take with the solvers that
    support it (:func:`rankjax.capabilities`; ``Primal`` fit, path and leave-query-out,
    ``CG``, ``Falkon``, ``Nystrom`` leave-query-out); :meth:`score` is a per-query metric over
    the devices.

    Attributes:
      X: ``[D P, n]`` dense rows, sharded by rows, or a :class:`~rankjax.CSRMatrix`
        whose arrays carry a leading device axis ``[D, ...]`` (sparse ``X``).
      y: ``[D P(, k)]`` labels (0 on padding).
      graph: :class:`~rankjax.QueryGraph` of the local rows, arrays ``[D, ...]``.
      real: ``[D, S]`` True for the local segments that are real queries.
      rows: ``[D_local, P]`` host: this process's original row of every slot
        (``-1`` = padding).
      mesh: the 1-D device mesh.
      axis: the mesh's axis name.
      num_features: ``n``.
      valid: the problem's validation :class:`~rankjax.Problem` (replicated; CG and
        FALKON stop early on it), or ``None``.
      source: the :class:`~rankjax.Problem` it was built from (FALKON draws its basis rows
        there), or ``None``.
      folds: the leave-query-out folds of every device's own queries, stacked by padded
        size (built by :func:`shard`; the hold-outs use them).
      num_queries: the real queries over all devices (static).

    A ``ShardedData`` is a pytree: it crosses ``jit``, ``vmap`` and ``grad`` as an argument,
    its arrays the leaves and the layout (``rows``, ``mesh``, ``axis``, sizes) the static
    part, so no ``jax.set_mesh`` is needed. Under ``jit`` the verbs return predictions in
    the original row order from a gather on the device (one process); :meth:`with_labels`
    swaps in other labels (a ``vmap`` over them, a gradient by them).
    """

    X: object
    y: jax.Array
    graph: QueryGraph
    real: jax.Array
    rows: np.ndarray
    mesh: Mesh
    axis: str
    num_features: int
    valid: object = None
    source: object = None
    folds: object = None
    num_queries: int = 0

    kind = "sharded"
    precomputed = False
    qid = None

    @property
    def num_rows(self) -> int:
        """Rows held by this process."""
        return int(np.count_nonzero(self.rows >= 0))

    @property
    def sparse(self) -> bool:
        return is_csr(self.X)

    def score(self, scores, metric, y=None, **metric_kwargs):
        """A per-query metric of ``scores`` averaged over the valid queries of all devices:
        each device sums its queries' values and counts its valid queries, one ``psum``
        each; equal to ``metric(scores, y, qid)`` on one device.

        Args:
          scores: ``[..., m]`` scores of this process's rows in their original order.
          metric: a rankjax metric (``ndcg``, ``pairwise_error``, ...).
          y: optional ``[m]`` labels of this process's rows (default the problem's).
          **metric_kwargs: passed to the metric (``k=10``, ...).

        Example:
          >>> import numpy as np, rankjax as rj
          >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
          >>> s = rj.scale.shard(rj.Problem(d.X, d.y, d.qid))
          >>> f = d.X @ np.ones(4)
          >>> bool(np.isclose(s.score(f, rj.ndcg, k=5), rj.ndcg(f, d.y, d.qid, k=5)))
          True
        """
        return sharded_score(self, scores, metric, y, metric_kwargs)

    def shard_rows(self, v, name: str = "v"):
        """``[m(, k)]`` host values of this process's rows (original order) in the
        sharded layout ``[D P(, k)]`` (0 on padding)."""
        v = np.asarray(v)
        if v.shape[:1] != (self.num_rows,):
            raise ValueError(f"{name} must have {self.num_rows} rows, got shape {v.shape}")
        return put_rows(to_layout(self.rows, v), self.mesh, P(self.axis))

    def with_labels(self, y):
        """The problem with labels ``y [m(, k)]`` of this process's rows in their original
        order (numpy, or traced under ``jit``/``vmap``/``grad`` with one process: a gather
        on the device), laid out as the problem's."""
        if is_concrete(y):
            y = as_float_array(y, "y", finite=True)
            return dataclasses.replace(self, y=self.shard_rows(np.asarray(y, self.y.dtype), "y"))
        one_process("ShardedData.with_labels of traced labels")
        if y.shape[:1] != (self.num_rows,):
            raise ValueError(f"y must have {self.num_rows} rows, got shape {y.shape}")
        flat = jnp.asarray(self.rows.reshape(-1))
        v = jnp.where((flat >= 0).reshape((-1,) + (1,) * (y.ndim - 1)),
                      jnp.take(y, jnp.maximum(flat, 0), axis=0), 0).astype(self.y.dtype)
        return dataclasses.replace(self, y=jax.lax.with_sharding_constraint(
            v, NamedSharding(self.mesh, P(self.axis))))

    def basis_from_layout(self, index, basis):
        """``basis`` (a ``BasisRows`` of ``b_pad`` rows chosen as ``index [b]``, this
        process's original row numbers, host or traced) with its rows read from the
        layout's ``X``, zero beyond ``b``: a gather on the device, so a replaced ``X`` (scaled
        features under ``vmap``) gives its own basis rows. One process: with several, each
        would gather different rows into a replicated value."""
        if jax.process_count() > 1:
            raise NotImplementedError("a basis of a sharded problem (Nystrom, Falkon) is drawn "
                                      "with one process: with several (jax.distributed), use "
                                      "rj.Primal() or rj.CG()")
        b, size = index.shape[0], basis.X.shape[0]
        pos = jnp.zeros(size, jnp.int32).at[:b].set(jnp.asarray(slots(self.rows))[index])
        return basis._replace(X=jnp.where((jnp.arange(size) < b)[:, None],
                                          jnp.take(self.X, pos, axis=0), 0))

    def unshard(self, v, row_axis: int = -1):
        """Values in the sharded layout (rows along ``row_axis``) back to this
        process's rows in their original order (host; traced values, with one process:
        a gather on the device)."""
        if not is_concrete(v):
            one_process("a sharded verb under jit")
            return jnp.take(v, jnp.asarray(slots(self.rows)), axis=row_axis)
        v_local = local_rows(v, row_axis)
        v_local = np.moveaxis(v_local, row_axis, 0)
        flat = self.rows.reshape(-1)
        out = np.empty((self.num_rows,) + v_local.shape[1:], v_local.dtype)
        out[flat[flat >= 0]] = v_local[flat >= 0]
        return np.moveaxis(out, 0, row_axis)


class _Layout:
    """The host layout ``rows`` in a pytree's static part: hashed and compared by value."""

    __slots__ = ("rows", "_hash")

    def __init__(self, rows):
        self.rows = rows
        self._hash = hash((rows.shape, rows.tobytes()))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return (isinstance(other, _Layout) and self._hash == other._hash
                and np.array_equal(self.rows, other.rows))


_LEAVES = ("X", "y", "graph", "real", "valid", "source", "folds")


def _layout_of(d):
    """``d``'s layout key, hashed once per object (a flatten happens on every jit call)."""
    lay = d.__dict__.get("_layout")
    if lay is None or lay.rows is not d.rows:
        lay = _Layout(d.rows)
        object.__setattr__(d, "_layout", lay)
    return lay


def _flatten_sharded(d):
    return (tuple(getattr(d, k) for k in _LEAVES),
            (_layout_of(d), d.mesh, d.axis, d.num_features, d.num_queries))


def _unflatten_sharded(aux, leaves):
    layout, mesh, axis, n, q = aux
    d = ShardedData(**dict(zip(_LEAVES, leaves)), rows=layout.rows, mesh=mesh, axis=axis,
                    num_features=n, num_queries=q)
    object.__setattr__(d, "_layout", layout)
    return d


jax.tree_util.register_pytree_node(ShardedData, _flatten_sharded, _unflatten_sharded)



def check_mesh(mesh, axis):
    if mesh is None:
        mesh = jax.make_mesh((jax.device_count(),), (AXIS,))
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must be 1-D (one axis of query shards), got axes {mesh.axis_names}")
    if axis is not None and axis != mesh.axis_names[0]:
        raise ValueError(f"axis {axis!r} is not the mesh's axis {mesh.axis_names[0]!r}")
    # the same devices with an automatic axis: every product is a shard_map of its own, and an
    # explicit axis (jax.make_mesh's default) would ask a gradient's transpose for a mesh context
    mesh = Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,))
    return mesh, mesh.axis_names[0]


def _stack_csr(X, part: QueryPartition, dtype, nse):
    """Per-shard CSRMatrix of the shard's rows (padding rows empty), arrays padded to ``nse``."""
    mats = []
    for r in part.rows:
        block = X[np.where(r >= 0, r, 0)].multiply((r >= 0)[:, None]).tocsr()
        mats.append(to_csr(block, dtype))
    nse = max([nse] + [c.nse for c in mats])

    def pad(a, fill):
        a = np.asarray(a)
        return np.concatenate([a, np.full(nse - a.shape[0], fill, a.dtype)])

    fields = {}
    for f in ("data", "indices", "rows", "t_data", "t_indices", "t_rows"):
        fields[f] = np.stack([pad(getattr(c, f), 0) for c in mats])
    for f in ("indptr", "t_indptr"):
        fields[f] = np.stack([np.asarray(getattr(c, f)) for c in mats])
    return fields, nse


def shard_data(X, y, graph: QueryGraph, mesh: Optional[Mesh] = None, *,
               partition: Optional[QueryPartition] = None, multiple: int = 8) -> ShardedData:
    """Lays out training rows by whole queries over the devices of a 1-D mesh.

    With several processes (``jax.distributed.initialize``) every process passes
    its own rows (whole queries, its own ``graph`` built with the same options) and
    they are spread over its own devices of the mesh; sizes are agreed between the
    processes. One process: all rows over all devices.

    Args:
      X: ``[m, n]`` dense (numpy or jax) or ``scipy.sparse`` (for ``CG``).
      y: ``[m]`` or ``[m, k]``.
      graph: :class:`~rankjax.QueryGraph` on the ``m`` rows (any options: normalized,
        tie exclusion, query weights).
      mesh: 1-D :class:`jax.sharding.Mesh`; default all devices on axis :data:`AXIS`.
      partition: a :class:`QueryPartition` over this process's devices
        (default :func:`partition_queries`).
      multiple: rows per device are padded to a multiple of this.

    Returns:
      :class:`ShardedData`.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> s = shard_data(d.X, d.y, rj.query_graph(d.qid))
      >>> s.num_rows == len(d.y), s.num_features
      (True, 4)
    """
    mesh, axis = check_mesh(mesh, None)
    require_concrete(X, "X", "rj.scale.shard"), require_concrete(y, "y", "rj.scale.shard")
    check_graph(graph, kind="QueryGraph", why=" (rj.scale.shard: whole queries are the unit of "
                "sharding)")
    is_sparse = is_scipy_sparse(X)
    if is_sparse:
        Xs = host_sparse(X).tocsr()
        if Xs.shape[0] != graph.num_rows:
            raise ValueError(f"graph is defined on {graph.num_rows} rows but X has {Xs.shape[0]}")
        y = graph.check_labels(y)
    else:
        X, y = check_problem(X, y, graph)
        X = as_dense(X)
    D_local = local_device_count(mesh)
    if partition is None:
        partition = partition_queries(graph, D_local, multiple=multiple)
    elif not isinstance(partition, QueryPartition):
        raise TypeError(f"partition must be a QueryPartition, got {type(partition).__name__}")
    if partition.rows.shape[0] != D_local:
        raise ValueError(f"partition has {partition.rows.shape[0]} shards but this process "
                         f"has {D_local} devices in the mesh")
    flat = np.sort(partition.rows[partition.rows >= 0])
    if not np.array_equal(flat, np.arange(graph.num_rows)):
        raise ValueError("partition must hold every row exactly once")
    arrays, sizes, real = graph.shard_blocks(partition.rows, partition.shard_of_query)
    width, S, G = agree_across_processes(partition.rows.shape[1], sizes["num_segments"],
                         sizes["num_group_segments"])
    if (width, S, G) != (partition.rows.shape[1], sizes["num_segments"],
                         sizes["num_group_segments"]):      # another process needs more room
        rows = np.full((D_local, width), -1, np.int64)
        rows[:, :partition.rows.shape[1]] = partition.rows
        partition = partition._replace(rows=rows)
        arrays, sizes, real = graph.shard_blocks(partition.rows, partition.shard_of_query)
        arrays, real = _grow(arrays, real, sizes, S, G)
        sizes = dict(num_segments=S, num_group_segments=G)
    dtype = compute_dtype() if is_sparse else X.dtype
    spec = P(axis)
    gdev = {k: put_rows(v.astype(np.int32) if k in ("seg", "group_seg", "group_query")
                    else v.astype(dtype), mesh, spec) for k, v in arrays.items()}
    for k in ("group_seg", "group_query", "group_counts"):
        gdev.setdefault(k, None)
    graph_s = QueryGraph(**gdev, **sizes)
    if is_sparse:
        fields, nse = _stack_csr(Xs, partition, dtype, 0)
        nse = agree_across_processes(nse)[0]
        if nse != fields["data"].shape[1]:
            fields, _ = _stack_csr(Xs, partition, dtype, nse)
        X_s = CSRMatrix(**{k: put_rows(v, mesh, spec) for k, v in fields.items()},
                        shape=(width, Xs.shape[1]))
        n = Xs.shape[1]
    else:
        X_s = put_rows(to_layout(partition.rows, np.asarray(X)), mesh, spec)
        n = X.shape[1]
    y_s = put_rows(to_layout(partition.rows, np.asarray(y)), mesh, spec)
    data = ShardedData(X_s, y_s, graph_s, put_rows(real, mesh, spec), partition.rows, mesh,
                       axis, int(n))
    return dataclasses.replace(data, folds=stacked_folds(data),
                               num_queries=int(jnp.sum(data.real)))   # over every process


def _grow(arrays, real, sizes, S, G):
    """Pads the local segment axes to the sizes agreed between processes (the padding
    segment moves to the new last position)."""
    S0, G0 = sizes["num_segments"], sizes["num_group_segments"]
    out = dict(arrays)

    def widen(a, size, old):
        b = np.zeros(a.shape[:1] + (size,), a.dtype)
        b[:, :old - 1] = a[:, :old - 1]
        b[:, size - 1] = a[:, old - 1]
        return b

    out["seg"] = np.where(arrays["seg"] == S0 - 1, S - 1, arrays["seg"]).astype(np.int32)
    out["counts"] = widen(arrays["counts"], S, S0)
    out["edge_weight"] = widen(arrays["edge_weight"], S, S0)
    real = widen(real, S, S0)
    if G0:
        out["group_seg"] = np.where(arrays["group_seg"] == G0 - 1, G - 1,
                                    arrays["group_seg"]).astype(np.int32)
        gq = np.where(arrays["group_query"] == S0 - 1, S - 1, arrays["group_query"])
        out["group_query"] = widen(gq, G, G0).astype(np.int32)
        out["group_query"][:, G0 - 1:G - 1] = S - 1
        out["group_counts"] = widen(arrays["group_counts"], G, G0)
    return out, real


def shard(problem, mesh: Optional[Mesh] = None, *, partition: Optional[QueryPartition] = None,
          multiple: int = 8) -> ShardedData:
    r"""A problem laid out by whole queries over the devices of a 1-D mesh: the same verbs
    solve it (``rj.fit(rj.scale.shard(problem), rj.Primal(), lam=...)``) with the solvers
    that take sharded problems, every product a per-device term joined by one ``psum``
    (no edge leaves a query: :math:`X^T L X = \sum_d X_d^T L_d X_d`, Pahikkala et al. 2009,
    eq. 28; Airola et al. 2010, §3).

    With several processes (``jax.distributed.initialize``) every process shards its own
    problem (whole queries, a graph built with the same options); sizes are agreed between
    the processes. One process: all rows over all devices.

    Args:
      problem: a :class:`~rankjax.Problem` on a query graph (its ``valid`` is kept, replicated).
      mesh: 1-D :class:`jax.sharding.Mesh`; default all devices on axis :data:`AXIS`.
      partition: a :class:`QueryPartition` over this process's devices
        (default :func:`partition_queries`).
      multiple: rows per device are padded to a multiple of this.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> w = rj.fit(rj.scale.shard(p), rj.Primal(), lam=1.0).value.weights
      >>> bool(np.allclose(w, rj.fit(p, rj.Primal(), lam=1.0).value.weights, atol=1e-5))
      True
    """
    if not isinstance(problem, Problem) or isinstance(problem, KernelProblem):
        raise TypeError(f"problem must be a rankjax.Problem of feature rows, got "
                        f"{type(problem).__name__}")
    X = to_scipy(problem.X) if is_sparse(problem.X) else problem.X
    data = shard_data(X, problem.y, problem.graph, mesh, partition=partition, multiple=multiple)
    return dataclasses.replace(data, valid=problem.valid, source=problem)


def check_sharded(data):
    if not isinstance(data, ShardedData):
        raise TypeError(f"data must be a ShardedData (rj.scale.shard), got {type(data).__name__}")
    return data


def dense_only(data, fn):
    if data.sparse:
        raise ValueError(f"{fn} needs dense X (sparse sharded data is solved by rj.CG()); "
                         "shard a dense X")
