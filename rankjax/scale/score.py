"""Per-query metrics of a sharded problem (:meth:`ShardedData.score`): each device sums its
queries' values and counts its valid queries, one ``psum`` each."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core.checks import as_float_array
from ..metrics.pairs import check_metric_options, metric_sign
from .hosts import local_block, put_rows, to_layout


@partial(jax.jit, static_argnames=("mesh", "axis", "metric", "kw"))
def _score_core(scores, y, graph, real, mesh, axis, metric, kw):
    def local(f, y, graph, real):
        g, real = local_block(graph), real[0]

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


def sharded_score(data, scores, metric, y, metric_kwargs):
    """The body of :meth:`ShardedData.score`."""
    if not callable(metric) or not hasattr(metric, "higher_is_better"):
        raise TypeError(f"metric must be a rankjax metric, got {metric!r}")
    metric_sign(metric)
    check_metric_options(metric, metric_kwargs, "ShardedData.score")
    kw = tuple(sorted(metric_kwargs.items()))
    if y is None:
        if data.y.ndim != 1:
            raise ValueError("the problem has several outputs: pass y (one column)")
        ys = data.y
    else:
        ys = data.shard_rows(as_float_array(y, "y", finite=True), "y")
    f = np.asarray(as_float_array(scores, "scores", finite=True))
    if f.ndim < 1 or f.shape[-1] != data.num_rows:
        raise ValueError(f"scores must be [..., {data.num_rows}] (this process's rows), "
                         f"got shape {f.shape}")
    lead = f.shape[:-1]
    f = to_layout(data.rows, np.moveaxis(f.reshape((-1, f.shape[-1])), -1, 0))
    f = np.moveaxis(f, 0, -1).reshape(lead + (-1,))
    f = put_rows(f, data.mesh, P(*([None] * (f.ndim - 1)), data.axis))
    return _score_core(f, ys, data.graph, data.real, data.mesh, data.axis, metric, kw)

