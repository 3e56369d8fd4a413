"""The numerics of a sharded problem (:func:`rankjax.scale.shard`): whole queries on each
device of a 1-D mesh, so every product is a per-device term joined by one ``psum``
(Pahikkala et al. 2009, eq. 28; Airola et al. 2010, §3): the primal normal equations, the
λ path from them and leave-query-out with each device holding out its own queries (eq.
33-34); the ``n x n`` algebra is replicated. :class:`~rankjax.Primal`'s methods call these
for ``kind == "sharded"`` (CG's and FALKON's sharded loops live with them).
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from ..scale.hosts import local_block
from ..scale.layout import dense_only
from .holdout import factored_holdout, holdout_from_system
from .ridge import decompose_primal, primal_system, ridge_solve

__all__ = ["primal_fit", "primal_path", "primal_holdout", "primal_cv_predictions", "primal_cv_loss"]


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
        return w
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


@partial(jax.jit, static_argnames=("mesh", "axis"))
def _sharded_holdout(X, y, graph, lams, folds, mesh, axis):
    def local(X, y, graph, lams, folds):
        g = local_block(graph)
        G, b = _system(X, y, g, axis)
        pred, W = holdout_from_system(X, y, g, lams, local_block(folds), G, b, weights=True)
        return pred, W
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, P(), spec),
                         out_specs=(P(None, axis), P()))(X, y, graph, lams, folds)


def primal_holdout(data, lams):
    """``(predictions [L, m(, k)] of this process's rows (host, original order), W [L, n(,
    k)])``: leave-query-out, the global system by one ``psum``, each device holding out
    its own queries."""
    dense_only(data, "rj.holdout(scale.shard(...), Primal())")
    if data.num_queries < 2:                  # leaving the one query out trains on nothing
        raise ValueError(f"the sharded hold-out needs at least 2 queries (leave-query-out), "
                         f"the problem holds {data.num_queries}")
    pred, W = _sharded_holdout(data.X, data.y, data.graph, lams, data.folds, data.mesh,
                               data.axis)
    return data.unshard(pred, 1), W




@partial(jax.jit, static_argnames=("loss",))
def _sharded_cv(data, Z, lam, loss):
    """The factored leave-query-out predictions of ``data`` (its rows ``Z``) in the layout,
    or (``loss``) their RankRLS loss per row, each device's term joined by one ``psum``."""
    axis = data.axis
    def local(Z, y, graph, lam, folds, real):
        g = local_block(graph)
        f = factored_holdout(Z, y, g, local_block(folds), lam,
                             total=lambda a: lax.psum(a, axis))
        if not loss:
            return f
        rows = jnp.sum(jnp.where(real[0], g.counts, 0))    # the padding segment is not real
        return lax.psum(g.loss(f, y), axis) / lax.psum(rows, axis)
    spec = P(axis)
    return jax.shard_map(local, mesh=data.mesh, in_specs=(spec, spec, spec, P(), spec, spec),
                         out_specs=P() if loss else spec)(Z, data.y, data.graph, lam,
                                                          data.folds, data.real)


def _cv(params, data, what, loss):
    dense_only(data, what)
    s = params.get("log_scales")
    Z = data.X if s is None else data.X * jnp.exp(s)
    return _sharded_cv(data, Z, jnp.exp(params["log_lam"]), loss)


def primal_cv_predictions(params, data):
    """``[m]`` the differentiable leave-query-out predictions of this process's rows (original
    order) at ``params`` (``log_lam``, ARD ``log_scales``): the primal factored hold-out with
    the global system by one ``psum``, each device holding out its own queries."""
    return data.unshard(_cv(params, data, "rj.tune(scale.shard(...), Primal())", False), 0)


def primal_cv_loss(params, data):
    r"""The leave-query-out RankRLS loss per row, :math:`(y - f')^T L (y - f') / m`, of a
    sharded problem at ``params``: each device's queries' term in the sharded layout,
    joined by one ``psum`` (so it needs no process to gather another's rows: the loss of
    :func:`rankjax.tune` with several processes)."""
    return _cv(params, data, "rj.tune(scale.shard(...), Primal())", True)
