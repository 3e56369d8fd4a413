"""The numerics of a sharded problem (:func:`rankjax.scale.shard`): whole queries on each
device of a 1-D mesh, so every product is a per-device term joined by one ``psum``
(Pahikkala et al. 2009, eq. 28; Airola et al. 2010, §3): the primal normal equations, the
λ path from them and leave-query-out with each device holding out its own queries (eq.
33-34); the ``n x n`` algebra is replicated. :class:`~rankjax.Primal`'s methods call these
for ``kind == "sharded"`` (CG's and FALKON's sharded loops live with them).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core.checks import lam_ok, nan_unless
from .._core.segments import padded_size
from ..graphs.folds import build_folds, positions
from ..graphs.graph import QueryGraph
from ..scale.layout import (agree_across_processes, dense_only, local_block, local_rows,
                            put_rows)
from .holdout import holdout_from_system
from .ridge import decompose_primal, primal_system, ridge_solve

__all__ = ["primal_fit", "primal_path", "primal_holdout", "stacked_folds"]


def _system(X, y, graph, axis):
    G, b = primal_system(X, y, graph)
    return lax.psum(G, axis), lax.psum(b, axis)


@partial(jax.jit, static_argnames=("mesh", "axis", "grid"))
def _sharded_solve(X, y, graph, lam, mesh, axis, grid):
    """The global system by one ``psum``; then one λ by a Cholesky factor or a grid ``[L]``
    by one ``eigh``."""
    def local(X, y, graph, lam):
        G, b = _system(X, y, local_block(graph), axis)
        lam = jnp.asarray(lam, G.dtype)
        w = decompose_primal(G, b).coef_path(lam) if grid else ridge_solve(G, b, lam)
        return nan_unless(lam_ok(lam), w)
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P()),
                         out_specs=P())(X, y, graph, lam)


def primal_fit(data, lam):
    """``w [n(, k)]`` of one λ: the global system by one ``psum``, then one Cholesky."""
    dense_only(data, "rj.fit(scale.shard(...), Primal())")
    return _sharded_solve(data.X, data.y, data.graph, lam, data.mesh, data.axis, False)


def primal_path(data, lams):
    r"""``W [L, n(, k)]`` of every λ from one ``eigh`` of the global :math:`X^T L X`."""
    dense_only(data, "rj.path(scale.shard(...), Primal())")
    return _sharded_solve(data.X, data.y, data.graph, lams, data.mesh, data.axis, True)


class _Buckets(NamedTuple):
    index: tuple
    mask: tuple
    position: jax.Array


def stacked_folds(data):
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
def _sharded_holdout(X, y, graph, lams, folds, mesh, axis):
    def local(X, y, graph, lams, folds):
        g = local_block(graph)
        G, b = _system(X, y, g, axis)
        pred, W = holdout_from_system(X, y, g, lams, local_block(folds), G, b, weights=True)
        return nan_unless(lam_ok(lams), (pred, W))
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P(), spec),
                         out_specs=(P(None, axis), P()))(X, y, graph, lams, folds)


def primal_holdout(data, lams):
    """``(predictions [L, m(, k)] of this process's rows (host, original order), W [L, n(,
    k)])``: leave-query-out, the global system by one ``psum``, each device holding out
    its own queries."""
    dense_only(data, "rj.holdout(scale.shard(...), Primal())")
    queries = int(jnp.sum(data.real))         # one scalar reduction over the devices
    if queries < 2:                           # leaving the one query out trains on nothing
        raise ValueError(f"the sharded hold-out needs at least 2 queries (leave-query-out), "
                         f"the problem holds {queries}")
    pred, W = _sharded_holdout(data.X, data.y, data.graph, lams, stacked_folds(data), data.mesh,
                            data.axis)
    return data.unshard(pred, 1), W


