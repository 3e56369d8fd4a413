"""Sharded primal RankRLS: the normal equations ``X^T L X = sum_d X_d^T L_d X_d`` joined
by one ``psum`` (Pahikkala et al. 2009, eq. 28), the λ path from them, and
leave-query-out with each device holding out its own queries (eq. 33-34).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core.checks import check_flag, lam_ok, nan_unless
from ..graphs.folds import build_folds, positions
from ..graphs.graph import QueryGraph
from ..solvers.holdout import HoldOut, holdout_from_system
from ..solvers.path import PrimalPath, check_lams
from ..solvers.models import path_scores
from ..solvers.ridge import decompose_primal, primal_system
from .._core.segments import padded_size
from .layout import (
    ShardedData,
    agree_across_processes,
    check_sharded,
    dense_only,
    local_block,
    local_rows,
    put_rows)


def _system(X, y, graph, axis):
    G, b = primal_system(X, y, graph)
    return lax.psum(G, axis), lax.psum(b, axis)


@partial(jax.jit, static_argnames=("mesh", "axis"))
def _system_core(X, y, graph, mesh, axis):
    spec = P(axis)
    return jax.shard_map(lambda X, y, g: _system(X, y, local_block(g), axis), mesh=mesh,
                         in_specs=(spec, spec, spec), out_specs=P())(X, y, graph)


def sharded_normal_equations(data: ShardedData):
    """``(X^T L X [n, n], X^T L y [n(, k)])`` of all processes' rows: per-device
    ``X_d^T L_d X_d`` (Pahikkala et al. 2009 eq. 28) joined by one ``psum``; replicated.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=3, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> G, b = rj.scale.sharded_normal_equations(rj.scale.shard_data(d.X, d.y, g))
      >>> bool(np.allclose(G, d.X.T @ rj.laplacian_dense(g) @ d.X, atol=1e-4))
      True
    """
    data = check_sharded(data)
    dense_only(data, "sharded_normal_equations")
    return _system_core(data.X, data.y, data.graph, data.mesh, data.axis)


@partial(jax.jit, static_argnames=("mesh", "axis", "train"))
def _path_core(X, y, graph, lams, mesh, axis, train):
    def local(X, y, graph, lams):
        G, b = _system(X, y, local_block(graph), axis)
        W = decompose_primal(G, b).coef_path(lams)
        W = nan_unless(lam_ok(lams), W)
        return W, (path_scores(X, W) if train else None)
    spec = P(axis)
    out_rows = P(None, axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P()),
                         out_specs=(P(), out_rows if train else None))(X, y, graph, lams)


def sharded_primal_path(data: ShardedData, *, lams, train_scores: bool = False) -> PrimalPath:
    """:func:`~rankjax.solvers.path.rankrls_primal_path` on sharded data: each device forms
    ``X_d^T L_d X_d`` and ``X_d^T L_d y_d`` of its own queries, one ``psum`` joins them,
    and the ``n x n`` eigendecomposition and λ grid run on every device.

    Args:
      data: :class:`ShardedData` (dense ``X``).
      lams: ``[L]`` grid of λ > 0.
      train_scores: also return the training scores ``[L, m(, k)]`` of this
        process's rows (host, original order).

    Returns:
      :class:`~rankjax.solvers.path.PrimalPath` (weights ``[L, n(, k)]`` replicated).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> p = rj.scale.sharded_primal_path(rj.scale.shard_data(d.X, d.y, g), lams=[1.0])
      >>> q = rj.solvers.path.rankrls_primal_path(d.X, d.y, g, lams=[1.0])
      >>> bool(np.allclose(p.weights, q.weights, atol=1e-5))
      True
    """
    data = check_sharded(data)
    dense_only(data, "sharded_primal_path")
    lams = check_lams(lams)
    W, train = _path_core(data.X, data.y, data.graph, lams, data.mesh, data.axis,
                          check_flag(train_scores, "train_scores"))
    return PrimalPath(lams, W, None if train is None else data.unshard(train, 1), None)


class _Buckets(NamedTuple):
    index: tuple
    mask: tuple
    position: jax.Array


def _stacked_folds(data):
    """Leave-query-out folds of every device's local graph, stacked ``[D, F_b, P_b]`` per
    padded fold size (sizes agreed between processes)."""
    width = data.rows.shape[1]
    seg_local = local_rows(data.graph.seg, 0).reshape(-1, width)
    sizes = sorted(set(int(s) for s in padded_size(np.arange(1, width + 1))))
    per_dev = []
    for seg in seg_local:
        f = build_folds(_host_graph(seg, data.graph.num_segments), None, 0)
        per_dev.append({int(i.shape[1]): (np.asarray(i), np.asarray(k))
                        for i, k in zip(f.index, f.mask)})
    counts = [max([d[s][0].shape[0] if s in d else 0 for d in per_dev]) for s in sizes]
    counts = agree_across_processes(*counts)
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
        index.append(I)
        mask.append(M)
    pos = np.stack([positions([i[d] for i in index], [k[d] for k in mask], width)
                    for d in range(len(per_dev))])
    put = lambda a: put_rows(a, data.mesh, P(data.axis))     # noqa: E731
    return _Buckets(tuple(map(put, index)), tuple(map(put, mask)), put(pos))


def _host_graph(seg, S):
    """A stand-in query graph on host segment ids (only its units are used by build_folds)."""
    return QueryGraph(seg=seg, counts=None, edge_weight=None, group_seg=None, group_query=None,
                      group_counts=None, num_segments=S, num_group_segments=0)


@partial(jax.jit, static_argnames=("mesh", "axis"))
def _holdout_core(X, y, graph, lams, folds, mesh, axis):
    def local(X, y, graph, lams, folds):
        g = local_block(graph)
        G, b = _system(X, y, g, axis)
        pred = holdout_from_system(X, y, g, lams, local_block(folds), G, b)
        return nan_unless(lam_ok(lams), pred)
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P(), spec),
                         out_specs=P(None, axis))(X, y, graph, lams, folds)


def sharded_holdout(data: ShardedData, *, lams) -> HoldOut:
    """Leave-query-out predictions (:func:`~rankjax.solvers.holdout.holdout_primal`, Pahikkala et al.
    2009 eq. 33-34) on sharded data: the global system by one ``psum``, then every
    device holds out its own queries.

    Args:
      data: :class:`ShardedData` (dense ``X``).
      lams: ``[L]`` λ grid.

    Returns:
      :class:`~rankjax.solvers.holdout.HoldOut` with ``predictions [L, m(, k)]`` of this process's
      rows (host, original order) and ``folds=None``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> h = rj.scale.sharded_holdout(rj.scale.shard_data(d.X, d.y, g), lams=[1.0])
      >>> bool(np.allclose(h.predictions, rj.solvers.holdout.holdout_primal(
      ...     d.X, d.y, g, lams=[1.0]).predictions,
      ...                  atol=1e-4))
      True
    """
    data = check_sharded(data)
    dense_only(data, "sharded_holdout")
    queries = int(jnp.sum(data.real))         # one scalar reduction over the devices
    if queries < 2:                           # leaving the one query out trains on nothing
        raise ValueError(f"sharded_holdout needs at least 2 queries (leave-query-out), "
                         f"the data holds {queries}")
    lams = check_lams(lams).astype(data.X.dtype)
    pred = _holdout_core(data.X, data.y, data.graph, lams, _stacked_folds(data),
                         data.mesh, data.axis)
    return HoldOut(lams, data.unshard(pred, 1), None)
