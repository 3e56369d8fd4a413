"""Sharding by whole queries over a device mesh (docs/design.md, "Scale-out").

No edge of a query graph leaves its query, so with every query on one device
the Laplacian is block diagonal over devices and every product splits into
per-device terms joined by one ``psum``:

* ``X^T L X = sum_d X_d^T L_d X_d`` and ``X^T L y = sum_d X_d^T L_d y_d``
  (primal Gram, right-hand side, λ path; Pahikkala et al. 2009 eq. 28);
* the CG matvec ``X^T L X v = sum_d X_d^T L_d (X_d v)`` (Airola et al. 2010 §3);
* leave-query-out (Pahikkala et al. 2009 eq. 33-34): a fold needs only its own
  rows and the global ``(X^T L X, X^T L y)``, so each device holds out its own
  queries;
* per-query metrics: sums of per-query values and of the valid-query count.

The layout (:class:`ShardedData`): device ``d`` holds ``P`` rows (its queries,
then zero padding rows in one padding segment of edge weight 0, which adds
nothing to any sum) and a local :class:`~rankjax.QueryGraph` whose arrays are
stacked along a leading device axis. Everything runs in ``jax.shard_map`` over a
1-D :class:`jax.sharding.Mesh`; the same code serves several processes
(``jax.distributed``), each holding its own queries on its own devices.

The ``sharded_*`` functions are host boundaries (they place data on the mesh and
map rows back); call them outside ``jit``. Their cores are module-level jitted
``shard_map`` programs: new values of the same layout compile nothing.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ._cg import CGResult, check_loop, check_x0, criterion_args, make_valid_fn, static_metric, cg_solve
from ._checks import (as_float_array, check_count, check_flag, check_lam, check_matrix, lam_ok,
                      nan_unless, require_concrete, segment_ids)
from ._cv import HoldOut, _build_folds, holdout_from_system
from ._segments import padded_size
from ._graph import QueryGraph, check_graph, check_problem, query_graph
from ._falkon import STATIC as FALKON_STATIC, falkon_preconditioner, falkon_solve
from ._kernels import Kernel, kernel_block, kernel_matrix
from ._metrics import metric_sign, pairwise_error
from ._path import PrimalPath, check_lams
from ._rankrls import path_scores
from ._ridge import dual_system, eigh_path, eigh_psd, lam_floor, primal_system
from ._sparse import CSRMatrix, host_sparse, to_csr

__all__ = ["QueryPartition", "partition_queries", "ShardedData", "shard_data",
           "sharded_normal_equations", "sharded_primal_path", "sharded_holdout", "sharded_cg",
           "sharded_falkon",
           "sharded_metric",
           "GridSearch", "sharded_kernel_grid", "AXIS"]

AXIS = "queries"
"""Default mesh axis name of :func:`shard_data` (``jax.make_mesh((n,), (AXIS,))``)."""


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
    if hasattr(qid_or_graph, "shard_blocks"):                     # a QueryGraph
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


@dataclasses.dataclass(frozen=True)
class ShardedData:
    """Training rows laid out by whole queries over a 1-D device mesh (build with
    :func:`shard_data`).

    Attributes:
      X: ``[D P, n]`` dense rows, sharded by rows, or a :class:`~rankjax.CSRMatrix`
        whose arrays carry a leading device axis ``[D, ...]`` (sparse ``X``).
      y: ``[D P(, k)]`` labels (0 on padding).
      graph: :class:`~rankjax.QueryGraph` of the local rows, arrays ``[D, ...]``.
      real: ``[D, S]`` True for the local segments that are real queries.
      rows: ``[D_local, P]`` host: this process's original row of every slot
        (``-1`` = padding).
      mesh, axis: the mesh and its axis name.
      num_features: ``n``.
    """

    X: object
    y: jax.Array
    graph: QueryGraph
    real: jax.Array
    rows: np.ndarray
    mesh: Mesh
    axis: str
    num_features: int

    @property
    def num_rows(self) -> int:
        """Rows held by this process."""
        return int(np.count_nonzero(self.rows >= 0))

    @property
    def sparse(self) -> bool:
        return isinstance(self.X, CSRMatrix)

    def shard_rows(self, v, name: str = "v"):
        """``[m(, k)]`` host values of this process's rows (original order) in the
        sharded layout ``[D P(, k)]`` (0 on padding)."""
        v = np.asarray(v)
        if v.shape[:1] != (self.num_rows,):
            raise ValueError(f"{name} must have {self.num_rows} rows, got shape {v.shape}")
        return _put(_layout(self.rows, v), self.mesh, P(self.axis))

    def unshard(self, v, row_axis: int = -1) -> np.ndarray:
        """Values in the sharded layout (rows along ``row_axis``) back to this
        process's rows in their original order (host)."""
        v_local = _local_rows(v, row_axis)
        v_local = np.moveaxis(v_local, row_axis, 0)
        flat = self.rows.reshape(-1)
        out = np.empty((self.num_rows,) + v_local.shape[1:], v_local.dtype)
        out[flat[flat >= 0]] = v_local[flat >= 0]
        return np.moveaxis(out, 0, row_axis)


def _layout(rows, v):
    """``[m, ...]`` host rows -> ``[D_local P, ...]`` host layout of ``rows [D_local, P]``
    (0 on padding)."""
    flat = rows.reshape(-1)
    out = np.zeros((flat.size,) + v.shape[1:], v.dtype)
    out[flat >= 0] = v[flat[flat >= 0]]
    return out


def _local_rows(v, row_axis):
    """This process's part of a row-sharded array, its shards in mesh order."""
    if not isinstance(v, jax.Array) or v.is_fully_addressable:
        return np.asarray(v)
    ax = row_axis % v.ndim
    shards = sorted(v.addressable_shards, key=lambda s: s.index[ax].start or 0)
    seen, parts = set(), []
    for s in shards:
        key = s.index[ax].start
        if key not in seen:
            seen.add(key)
            parts.append(np.asarray(s.data))
    return np.concatenate(parts, axis=ax)


def _put(local, mesh, spec):
    """Host block of this process -> global array (one process: a plain device_put)."""
    sharding = NamedSharding(mesh, spec)
    if jax.process_count() == 1:
        return jax.device_put(local, sharding)
    ax = list(spec).index(mesh.axis_names[0])                 # the sharded (row) axis
    shape = list(local.shape)
    shape[ax] = shape[ax] * mesh.devices.size // _local_count(mesh)
    return jax.make_array_from_process_local_data(sharding, local, tuple(shape))


def _local_count(mesh):
    return sum(d.process_index == jax.process_index() for d in mesh.devices.flat)


def _agree(*sizes):
    """Maximum of host integers over all processes."""
    a = np.asarray(sizes, np.int64)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        a = np.asarray(multihost_utils.process_allgather(a)).reshape(-1, a.size).max(0)
    return [int(s) for s in a]


def _check_mesh(mesh, axis):
    if mesh is None:
        mesh = jax.make_mesh((jax.device_count(),), (AXIS,))
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must be 1-D (one axis of query shards), got axes {mesh.axis_names}")
    if axis is not None and axis != mesh.axis_names[0]:
        raise ValueError(f"axis {axis!r} is not the mesh's axis {mesh.axis_names[0]!r}")
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
      X: ``[m, n]`` dense (numpy or jax) or ``scipy.sparse`` (for :func:`sharded_cg`).
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
      >>> s = rj.shard_data(d.X, d.y, rj.query_graph(d.qid))
      >>> s.num_rows == len(d.y), s.num_features
      (True, 4)
    """
    mesh, axis = _check_mesh(mesh, None)
    require_concrete(X, "X", "shard_data"), require_concrete(y, "y", "shard_data")
    check_graph(graph)
    if not hasattr(graph, "shard_blocks"):
        raise TypeError("shard_data needs a QueryGraph: whole queries are the unit of "
                        f"sharding, got {type(graph).__name__}")
    is_sparse = sp.issparse(X)
    if is_sparse:
        Xs = host_sparse(X).tocsr()
        if Xs.shape[0] != graph.num_rows:
            raise ValueError(f"graph is defined on {graph.num_rows} rows but X has {Xs.shape[0]}")
        y = graph.check_labels(y)
    else:
        X, y = check_problem(X, y, graph)
        if hasattr(X, "todense"):
            X = X.todense()
    D_local = _local_count(mesh)
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
    width, S, G = _agree(partition.rows.shape[1], sizes["num_segments"],
                         sizes["num_group_segments"])
    if (width, S, G) != (partition.rows.shape[1], sizes["num_segments"],
                         sizes["num_group_segments"]):      # another process needs more room
        rows = np.full((D_local, width), -1, np.int64)
        rows[:, :partition.rows.shape[1]] = partition.rows
        partition = partition._replace(rows=rows)
        arrays, sizes, real = graph.shard_blocks(partition.rows, partition.shard_of_query)
        arrays, real = _grow(arrays, real, sizes, S, G)
        sizes = dict(num_segments=S, num_group_segments=G)
    dtype = jnp.result_type(float) if is_sparse else X.dtype
    spec = P(axis)
    gdev = {k: _put(v.astype(np.int32) if k in ("seg", "group_seg", "group_query")
                    else v.astype(dtype), mesh, spec) for k, v in arrays.items()}
    for k in ("group_seg", "group_query", "group_counts"):
        gdev.setdefault(k, None)
    graph_s = QueryGraph(**gdev, **sizes)
    if is_sparse:
        fields, nse = _stack_csr(Xs, partition, dtype, 0)
        nse = _agree(nse)[0]
        if nse != fields["data"].shape[1]:
            fields, _ = _stack_csr(Xs, partition, dtype, nse)
        X_s = CSRMatrix(**{k: _put(v, mesh, spec) for k, v in fields.items()},
                        shape=(width, Xs.shape[1]))
        n = Xs.shape[1]
    else:
        X_s = _put(_layout(partition.rows, np.asarray(X)), mesh, spec)
        n = X.shape[1]
    y_s = _put(_layout(partition.rows, np.asarray(y)), mesh, spec)
    return ShardedData(X_s, y_s, graph_s, _put(real, mesh, spec),
                       partition.rows, mesh, axis, int(n))


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


def _check_sharded(data):
    if not isinstance(data, ShardedData):
        raise TypeError(f"data must be a ShardedData (shard_data), got {type(data).__name__}")
    return data


def _local(tree):
    """The device's own block of arrays stacked along a leading device axis."""
    return jax.tree.map(lambda a: a[0], tree)


def _smap(fn, data, in_specs, out_specs):
    return jax.shard_map(fn, mesh=data.mesh, in_specs=in_specs, out_specs=out_specs)


# ----------------------------------------------------------------------------
# primal path and hold-out

def _system(X, y, graph, axis):
    G, b = primal_system(X, y, graph)
    return lax.psum(G, axis), lax.psum(b, axis)


@partial(jax.jit, static_argnames=("mesh", "axis"))
def _system_core(X, y, graph, mesh, axis):
    spec = P(axis)
    return jax.shard_map(lambda X, y, g: _system(X, y, _local(g), axis), mesh=mesh,
                         in_specs=(spec, spec, spec), out_specs=P())(X, y, graph)


def sharded_normal_equations(data: ShardedData):
    """``(X^T L X [n, n], X^T L y [n(, k)])`` of all processes' rows: per-device
    ``X_d^T L_d X_d`` (Pahikkala et al. 2009 eq. 28) joined by one ``psum``; replicated.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=3, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> G, b = rj.sharded_normal_equations(rj.shard_data(d.X, d.y, g))
      >>> bool(np.allclose(G, d.X.T @ rj.laplacian_dense(g) @ d.X, atol=1e-4))
      True
    """
    data = _check_sharded(data)
    _dense_only(data, "sharded_normal_equations")
    return _system_core(data.X, data.y, data.graph, data.mesh, data.axis)


@partial(jax.jit, static_argnames=("mesh", "axis", "train"))
def _path_core(X, y, graph, lams, mesh, axis, train):
    def local(X, y, graph, lams):
        G, b = _system(X, y, _local(graph), axis)
        W = eigh_path(eigh_psd(G), b, lams.astype(G.dtype))
        W = nan_unless(lam_ok(lams), W)
        return W, (path_scores(X, W) if train else None)
    spec = P(axis)
    out_rows = P(None, axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P()),
                         out_specs=(P(), out_rows if train else None))(X, y, graph, lams)


def _dense_only(data, fn):
    if data.sparse:
        raise ValueError(f"{fn} needs dense X (sparse sharded data serves sharded_cg); "
                         "shard a dense X")


def sharded_primal_path(data: ShardedData, *, lams, train_scores: bool = False) -> PrimalPath:
    """:func:`~rankjax.rankrls_primal_path` on sharded data: each device forms
    ``X_d^T L_d X_d`` and ``X_d^T L_d y_d`` of its own queries, one ``psum`` joins them,
    and the ``n x n`` eigendecomposition and λ grid run on every device.

    Args:
      data: :class:`ShardedData` (dense ``X``).
      lams: ``[L]`` grid of λ > 0.
      train_scores: also return the training scores ``[L, m(, k)]`` of this
        process's rows (host, original order).

    Returns:
      :class:`~rankjax.PrimalPath` (weights ``[L, n(, k)]`` replicated).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> p = rj.sharded_primal_path(rj.shard_data(d.X, d.y, g), lams=[1.0])
      >>> q = rj.rankrls_primal_path(d.X, d.y, g, lams=[1.0])
      >>> bool(np.allclose(p.weights, q.weights, atol=1e-5))
      True
    """
    data = _check_sharded(data)
    _dense_only(data, "sharded_primal_path")
    lams = check_lams(lams)
    W, train = _path_core(data.X, data.y, data.graph, lams, data.mesh, data.axis,
                          check_flag(train_scores, "train_scores"))
    return PrimalPath(lams, W, None if train is None else data.unshard(train, 1), None)


class _Buckets(NamedTuple):
    index: tuple
    mask: tuple


def _stacked_folds(data):
    """Leave-query-out folds of every device's local graph, stacked ``[D, F_b, P_b]`` per
    padded fold size (sizes agreed between processes)."""
    width = data.rows.shape[1]
    seg_local = _local_rows(data.graph.seg, 0).reshape(-1, width)
    sizes = sorted(set(int(s) for s in padded_size(np.arange(1, width + 1))))
    per_dev = []
    for seg in seg_local:
        f = _build_folds(_host_graph(seg, data.graph.num_segments), None, 0)
        per_dev.append({int(i.shape[1]): (np.asarray(i), np.asarray(k))
                        for i, k in zip(f.index, f.mask)})
    counts = [max([d[s][0].shape[0] if s in d else 0 for d in per_dev]) for s in sizes]
    counts = _agree(*counts)
    index, mask = [], []
    for s, F in zip(sizes, counts):
        if F == 0:
            continue
        I = np.zeros((len(per_dev), F, s), np.int32)
        M = np.zeros((len(per_dev), F, s), bool)
        for d, dev in enumerate(per_dev):
            if s in dev:
                i, k = dev[s]
                I[d, :i.shape[0]], M[d, :i.shape[0]] = i, k
        index.append(_put(I, data.mesh, P(data.axis)))
        mask.append(_put(M, data.mesh, P(data.axis)))
    return _Buckets(tuple(index), tuple(mask))


def _host_graph(seg, S):
    """A stand-in query graph on host segment ids (only its units are used by _build_folds)."""
    return QueryGraph(seg=seg, counts=None, edge_weight=None, group_seg=None, group_query=None,
                      group_counts=None, num_segments=S, num_group_segments=0)


@partial(jax.jit, static_argnames=("mesh", "axis"))
def _holdout_core(X, y, graph, lams, folds, mesh, axis):
    def local(X, y, graph, lams, folds):
        g = _local(graph)
        G, b = _system(X, y, g, axis)
        pred = holdout_from_system(X, y, g, lams, _local(folds), G, b)
        return nan_unless(lam_ok(lams), pred)
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P(), spec),
                         out_specs=P(None, axis))(X, y, graph, lams, folds)


def sharded_holdout(data: ShardedData, *, lams) -> HoldOut:
    """Leave-query-out predictions (:func:`~rankjax.holdout_primal`, Pahikkala et al.
    2009 eq. 33-34) on sharded data: the global system by one ``psum``, then every
    device holds out its own queries.

    Args:
      data: :class:`ShardedData` (dense ``X``).
      lams: ``[L]`` λ grid.

    Returns:
      :class:`~rankjax.HoldOut` with ``predictions [L, m(, k)]`` of this process's
      rows (host, original order) and ``folds=None``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> h = rj.sharded_holdout(rj.shard_data(d.X, d.y, g), lams=[1.0])
      >>> bool(np.allclose(h.predictions, rj.holdout_primal(d.X, d.y, g, lams=[1.0]).predictions,
      ...                  atol=1e-4))
      True
    """
    data = _check_sharded(data)
    _dense_only(data, "sharded_holdout")
    queries = int(jnp.sum(data.real))         # one scalar reduction over the devices
    if queries < 2:                           # leaving the one query out trains on nothing
        raise ValueError(f"sharded_holdout needs at least 2 queries (leave-query-out), "
                         f"the data holds {queries}")
    lams = check_lams(lams).astype(data.X.dtype)
    pred = _holdout_core(data.X, data.y, data.graph, lams, _stacked_folds(data),
                         data.mesh, data.axis)
    return HoldOut(lams, data.unshard(pred, 1), None)


# ----------------------------------------------------------------------------
# conjugate gradient

_STATIC = ("mesh", "axis", "metric", "greater_is_better", "kw", "max_iter", "patience",
           "recompute_every")


@partial(jax.jit, static_argnames=_STATIC)
def _cg_core(X, y, graph, lam, Xv, vdata, x0, tol, *, mesh, axis, metric, greater_is_better,
             kw, max_iter, patience, recompute_every):
    def local(X, y, graph, lam, Xv, vdata, x0, tol):
        g = _local(graph)
        if isinstance(X, CSRMatrix):
            X = _local(X)
        b = lax.psum(X.T @ g.rhs(y, X.dtype), axis)
        valid_fn = make_valid_fn(lambda w: Xv @ w, vdata, metric, greater_is_better, kw)
        return cg_solve(lambda v: lax.psum(X.T @ g.mv(X @ v), axis), b, lam=lam, x0=x0,
                        tol=tol, max_iter=max_iter, valid_fn=valid_fn, patience=patience,
                        recompute_every=recompute_every)
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh,
                         in_specs=(spec, spec, spec, P(), P(), P(), P(), P()),
                         out_specs=P(), check_vma=False)(X, y, graph, lam, Xv, vdata, x0, tol)


def sharded_cg(data: ShardedData, *, lam=0.0, valid=None, metric="pairwise_error", x0=None,
               tol=1e-5, max_iter: int = 500, patience: int = 10, recompute_every: int = 50,
               greater_is_better=None, **metric_kwargs) -> CGResult:
    """:func:`~rankjax.rankrls_cg` on sharded data (dense or sparse ``X``): the matvec
    ``X^T L X v`` is a per-device product over its own queries plus one ``psum`` of an
    ``[n]`` vector per iteration; the loop state is replicated.

    Args:
      data: :class:`ShardedData` with one output.
      valid: ``(X_valid, y_valid, graph_valid)`` for early stopping (replicated).
      Other arguments as in :func:`~rankjax.rankrls_cg`.

    Returns:
      :class:`~rankjax.CGResult`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> r = rj.sharded_cg(rj.shard_data(d.X, d.y, g), lam=1.0, tol=1e-10)
      >>> bool(np.allclose(r.weights, rj.rankrls_primal(d.X, d.y, g, lam=1.0).weights, atol=1e-4))
      True
    """
    data = _check_sharded(data)
    if data.y.ndim != 1:
        raise ValueError("sharded_cg solves one output; shard one column of y")
    check_lam(lam, allow_zero=True, scalar=True)
    check_loop(tol, max_iter, patience, recompute_every)
    kw = static_metric(metric, metric_kwargs, "sharded_cg")
    n = data.num_features
    Xv, vdata = criterion_args(valid, n, "X_valid", metric, greater_is_better, kw)
    if Xv is not None:
        Xv = check_matrix(as_float_array(Xv, "X_valid", finite=True), "X_valid")
        if Xv.shape[1] != n:
            raise ValueError(f"X_valid has {Xv.shape[1]} columns but X has {n}")
    return _cg_core(data.X, data.y, data.graph, lam, Xv, vdata, check_x0(x0, n), tol,
                    mesh=data.mesh, axis=data.axis, metric=metric,
                    greater_is_better=greater_is_better, kw=kw, max_iter=max_iter,
                    patience=patience, recompute_every=recompute_every)


@partial(jax.jit, static_argnames=("mesh", "axis", "u") + FALKON_STATIC)
def _falkon_core(X, y, graph, XR, rmask, scale, lam, Xv, vdata, tol, kernel, *, mesh, axis, u,
                 metric, greater_is_better, kw, max_iter, patience, recompute_every, progress):
    def local(X, y, graph, XR, rmask, scale, lam, Xv, vdata, tol):
        g = _local(graph)
        dt = X.dtype
        mf = rmask.astype(dt)

        def gram_U(C):          # each device's first u rows: a principal block of L (PSD)
            PhiU = jax.scipy.linalg.solve_triangular(
                C, (kernel_block(kernel, X[:u], XR) * mf).T, lower=True).T
            return scale * lax.psum(PhiU.T @ g.prefix(u).mv(PhiU), axis)

        C, A = falkon_preconditioner(kernel, XR, rmask, gram_U, lam)
        K = kernel_block(kernel, X, XR) * mf              # padding rows: L kills them
        bwd = lambda v: lax.psum(v @ K, axis)  # noqa: E731
        scores_fn = None if Xv is None else (
            lambda a: (kernel_block(kernel, Xv, XR) * mf) @ a)
        return falkon_solve(C, A, lam, lambda a: bwd(g.mv(K @ a)), bwd(g.rhs(y, dt)), scores_fn,
                            Xv is not None, vdata, tol, metric=metric,
                            greater_is_better=greater_is_better, kw=kw, max_iter=max_iter,
                            patience=patience, recompute_every=recompute_every, progress=progress)
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec) + (P(),) * 7,
                         out_specs=P(), check_vma=False)(X, y, graph, XR, rmask, scale, lam, Xv,
                                                         vdata, tol)


def sharded_falkon(data: ShardedData, *, lam, kernel: Kernel, basis_X, valid=None,
                   metric="pairwise_error", metric_kwargs=None, greater_is_better=None, tol=1e-8,
                   max_iter: int = 100, patience: int = 10, recompute_every: int = 50,
                   precond_rows: Optional[int] = None, progress: int = 0):
    """:func:`~rankjax.rankrls_falkon` on sharded data (dense ``X``): each device keeps its
    rows' ``K_mR`` block, and the CG matvec is a per-device product over its own queries
    plus one ``psum`` of a ``[b]`` vector; the preconditioner's subsample is the first
    ``precond_rows / D`` rows of every device (a principal block of ``L``: PSD).

    Args:
      data: :class:`ShardedData` with one output.
      basis_X: ``[b, n]`` basis rows (e.g. ``X[rj.nystrom_basis(X, b)]``).
      Other arguments as in :func:`~rankjax.rankrls_falkon`.

    Returns:
      ``(coef [b], CGResult)``; scores are ``kernel_matrix(kernel, X, basis_X) @ coef``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=4, seed=0)
      >>> g, k = rj.query_graph(d.qid), rj.gaussian_kernel(0.2)
      >>> coef, r = rj.sharded_falkon(rj.shard_data(d.X, d.y, g), lam=1.0, kernel=k,
      ...                             basis_X=d.X[:60], tol=1e-12)
      >>> f = rj.rankrls_falkon(d.X, d.y, g, lam=1.0, kernel=k, basis=np.arange(60), tol=1e-12)
      >>> bool(np.allclose(coef, f.coef, atol=1e-6))
      True
    """
    data = _check_sharded(data)
    if data.sparse or data.y.ndim != 1:
        raise ValueError("sharded_falkon takes dense X and one output")
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a rankjax Kernel, got {type(kernel).__name__}")
    check_lam(lam, allow_zero=valid is not None, scalar=True)
    check_loop(tol, max_iter, patience, recompute_every)
    kw = static_metric(metric, dict(metric_kwargs or {}), "sharded_falkon")
    n = data.num_features
    XR = check_matrix(as_float_array(basis_X, "basis_X", finite=True), "basis_X")
    if XR.shape[1] != n:
        raise ValueError(f"basis_X has {XR.shape[1]} columns but X has {n}")
    b = XR.shape[0]
    XR, rmask = _pad_basis(XR)
    D, width = data.rows.shape
    want = 3 * XR.shape[0] if precond_rows is None else check_count(precond_rows, "precond_rows")
    u = int(min(width, -(-want // D)))
    real = int(np.minimum(u, (data.rows >= 0).sum(1)).sum())
    scale = data.num_rows / max(real, 1)
    Xv, vdata = criterion_args(valid, n, "X_valid", metric, greater_is_better, kw)
    if Xv is not None:
        Xv = check_matrix(as_float_array(Xv, "X_valid", finite=True), "X_valid")
    coef, r = _falkon_core(data.X, data.y, data.graph, XR, rmask, scale, lam, Xv, vdata, tol, kernel,
                           mesh=data.mesh, axis=data.axis, u=u, metric=metric,
                           greater_is_better=greater_is_better, kw=kw, max_iter=max_iter,
                           patience=patience, recompute_every=recompute_every,
                           progress=check_count(progress, "progress", minimum=0))
    return coef[:b], r


def _pad_basis(XR):
    b = XR.shape[0]
    bp = int(padded_size(b))
    return jnp.pad(XR, ((0, bp - b), (0, 0))), jnp.arange(bp) < b


# ----------------------------------------------------------------------------
# metrics

@partial(jax.jit, static_argnames=("mesh", "axis", "metric", "kw"))
def _metric_core(scores, y, graph, real, mesh, axis, metric, kw):
    def local(f, y, graph, real):
        g, real = _local(graph), real[0]

        def one(f):
            pq = metric(f, y, g.seg, num_queries=g.num_segments, per_query=True, **dict(kw))
            ok = pq.valid & real
            return (lax.psum(jnp.sum(jnp.where(ok, pq.values, 0)), axis),
                    lax.psum(jnp.sum(ok), axis))
        total, count = jax.vmap(one)(f.reshape(-1, f.shape[-1]))
        return (total / count).reshape(f.shape[:-1])
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(*([None] * (scores.ndim - 1)), axis),
                                                     spec, spec, spec),
                         out_specs=P())(scores, y, graph, real)


def sharded_metric(data: ShardedData, scores, metric: Callable = pairwise_error,
                   y=None, **metric_kwargs):
    """A per-query metric averaged over the valid queries of all devices: each device
    sums its queries' values and counts its valid queries, one ``psum`` each.

    Args:
      data: :class:`ShardedData` (its labels are used unless ``y`` is given).
      scores: ``[..., m]`` scores of this process's rows in their original order.
      metric: a rankjax metric (``ndcg``, ``pairwise_error``, ...).
      y: optional ``[m]`` labels of this process's rows (original order).
      **metric_kwargs: passed to the metric (``k=10``, ...).

    Returns:
      ``[...]`` mean over the valid queries (NaN when none is valid), equal to
      ``metric(scores, y, qid)`` on one device.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> s = rj.shard_data(d.X, d.y, rj.query_graph(d.qid))
      >>> f = d.X @ np.ones(4)
      >>> bool(np.isclose(rj.sharded_metric(s, f, rj.ndcg, k=5), rj.ndcg(f, d.y, d.qid, k=5)))
      True
    """
    data = _check_sharded(data)
    if not callable(metric) or not hasattr(metric, "higher_is_better"):
        raise TypeError(f"metric must be a rankjax metric, got {metric!r}")
    metric_sign(metric)
    kw = static_metric(metric, metric_kwargs, "sharded_metric")
    if y is None:
        if data.y.ndim != 1:
            raise ValueError("data has several outputs: pass y (one column)")
        ys = data.y
    else:
        ys = data.shard_rows(as_float_array(y, "y", finite=True), "y")
    f = np.asarray(as_float_array(scores, "scores", finite=True))
    if f.ndim < 1 or f.shape[-1] != data.num_rows:
        raise ValueError(f"scores must be [..., {data.num_rows}] (this process's rows), "
                         f"got shape {f.shape}")
    lead = f.shape[:-1]
    f = _layout(data.rows, np.moveaxis(f.reshape((-1, f.shape[-1])), -1, 0))
    f = np.moveaxis(f, 0, -1).reshape(lead + (-1,))
    f = _put(f, data.mesh, P(*([None] * (f.ndim - 1)), data.axis))
    return _metric_core(f, ys, data.graph, data.real, data.mesh, data.axis, metric, kw)


# ----------------------------------------------------------------------------
# hyper-parameter grids over devices

class GridSearch(NamedTuple):
    """Validation table of a λ × γ grid: ``table [G, L]`` (host; lower is better, the
    metric's sign applied; NaN where undefined), the grid, and the best ``(gamma, lam)``
    (first in row-major order on ties)."""

    gammas: jax.Array
    lams: jax.Array
    table: jax.Array
    best_gamma: float
    best_lam: float


@partial(jax.jit, static_argnames=("mesh", "axis", "kind", "metric", "kw", "sign"))
def _grid_core(X, y, graph, gammas, lams, Xv, yv, gv, mesh, axis, kind, metric, kw, sign):
    def per_gamma(gamma):
        kernel = Kernel(kind, gamma=gamma)
        system = dual_system(kernel_matrix(kernel, X), y, graph)
        eig = eigh_psd(system.G)
        B = eigh_path(eig, system.rhs, lams.astype(X.dtype))
        A = jnp.moveaxis(system.root.apply(jnp.moveaxis(B, 0, -1)), -1, 0)
        floor = lam_floor(jnp.max(eig.values), X.dtype, "path")   # NaN lanes below it
        F = nan_unless(lams >= floor, path_scores(kernel_matrix(kernel, Xv, X), A))  # [L, m_v]
        seg, num = gv.segments()
        return jax.vmap(lambda f: sign * metric(f, yv, seg, num_queries=num, **dict(kw)))(F)

    def local(gammas, X, y, graph, lams, Xv, yv, gv):
        return jax.vmap(per_gamma)(gammas)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(axis),) + (P(),) * 7,
                         out_specs=P(axis))(gammas, X, y, graph, lams, Xv, yv, gv)


def sharded_kernel_grid(X, y, graph, *, lams, gammas, valid, metric: Callable = pairwise_error,
                        kernel: str = "gaussian", mesh: Optional[Mesh] = None,
                        greater_is_better=None, **metric_kwargs) -> GridSearch:
    """Kernel RankRLS over a λ × γ grid with the γ values spread over the devices
    (``vmap`` over each device's γ values inside ``shard_map``; the data is
    replicated). Per γ: the dual system ``S K S`` once, every λ from its
    eigendecomposition (Pahikkala et al. 2009 §3.2), then the validation metric.

    Args:
      X: ``[m, n]`` training rows; y: ``[m]``; graph: a graph on them.
      lams: ``[L]`` λ > 0; gammas: ``[G]`` kernel γ > 0.
      valid: ``(X_valid, y_valid, qid_valid)``.
      metric: a rankjax metric; greater-is-better metrics are negated in the table.
      kernel: ``"gaussian"`` or ``"polynomial"`` (degree 2, coef0 1) in γ.
      mesh: 1-D mesh (default all devices).

    Returns:
      :class:`GridSearch`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(8, num_features=3, seed=0)
      >>> v = rj.make_ranking_data(4, num_features=3, seed=1)
      >>> r = rj.sharded_kernel_grid(d.X, d.y, rj.query_graph(d.qid), lams=[0.1, 1.],
      ...                            gammas=[0.1, 1., 10.], valid=(v.X, v.y, v.qid))
      >>> r.table.shape
      (3, 2)
    """
    mesh, axis = _check_mesh(mesh, None)
    if kernel not in ("gaussian", "polynomial"):
        raise ValueError(f"kernel must be 'gaussian' or 'polynomial', got {kernel!r}")
    X, y = check_problem(X, y, graph)
    X = X.todense() if hasattr(X, "todense") else X
    lams = check_lams(lams)
    gammas = as_float_array(gammas, "gammas")
    if gammas.ndim != 1 or gammas.shape[0] == 0:
        raise ValueError(f"gammas must be a non-empty 1-D grid, got shape {tuple(gammas.shape)}")
    check_lam(gammas, name="gammas")
    if not (isinstance(valid, tuple) and len(valid) == 3):
        raise TypeError("valid must be a tuple (X_valid, y_valid, qid_valid)")
    Xv, yv, qv = valid
    Xv = check_matrix(as_float_array(Xv, "X_valid", finite=True), "X_valid")
    if Xv.shape[1] != X.shape[1]:
        raise ValueError(f"X_valid has {Xv.shape[1]} columns but X has {X.shape[1]}")
    gv = query_graph(qv if qv is not None else np.zeros(Xv.shape[0], int))
    yv = gv.check_labels(yv, "validation y")
    sign = metric_sign(metric, greater_is_better)
    kw = static_metric(metric, metric_kwargs, "sharded_kernel_grid")
    D = mesh.devices.size
    G = gammas.shape[0]
    host = np.asarray(gammas)
    padded = _put(np.concatenate([host, np.repeat(host[-1:], -G % D)]), mesh, P(axis))
    table = _grid_core(X, y, graph, padded, lams, Xv, yv, gv, mesh, axis, kernel, metric, kw,
                       float(sign))
    table = np.asarray(table)[:G]
    if np.all(np.isnan(table)):                  # as select_lambda: nothing to choose
        raise ValueError("the validation metric is undefined (NaN) for every (γ, λ): no "
                         "validation query qualifies, or every model gave non-finite scores")
    t = np.where(np.isnan(table), np.inf, table)
    i, j = np.unravel_index(int(np.argmin(t)), t.shape)
    return GridSearch(gammas, lams, table, float(gammas[i]), float(lams[j]))
