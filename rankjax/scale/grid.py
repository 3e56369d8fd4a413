"""Sharded evaluation: per-query metrics as sums over devices, and the kernel RankRLS
λ × γ grid with the γ values spread over the devices.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from .._core.log import timed
from .._core.memory import batch_that_fits, compute_dtype
from ..solvers.cg_loop import static_metric
from .._core.checks import (as_float_array, check_positive, check_matrix, nan_unless)
from ..graphs.graph import check_problem
from ..graphs.build import as_validation
from ..kernels.kernel import Kernel, kernel_matrix
from ..metrics.pairs import metric_sign, pairwise_error
from ..metrics.choice import Selection
from ..solvers.path import check_lams
from ..solvers.models import path_scores
from ..solvers.ridge import decompose_dual
from .._core.sparse import as_dense
from .layout import (ShardedData, check_mesh, check_sharded, local_block, put_rows, to_layout)


@partial(jax.jit, static_argnames=("mesh", "axis", "metric", "kw"))
def _metric_core(scores, y, graph, real, mesh, axis, metric, kw):
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
      >>> s = rj.scale.shard_data(d.X, d.y, rj.query_graph(d.qid))
      >>> f = d.X @ np.ones(4)
      >>> bool(np.isclose(rj.scale.sharded_metric(s, f, rj.ndcg, k=5), rj.ndcg(f, d.y, d.qid, k=5)))
      True
    """
    data = check_sharded(data)
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
    f = to_layout(data.rows, np.moveaxis(f.reshape((-1, f.shape[-1])), -1, 0))
    f = np.moveaxis(f, 0, -1).reshape(lead + (-1,))
    f = put_rows(f, data.mesh, P(*([None] * (f.ndim - 1)), data.axis))
    return _metric_core(f, ys, data.graph, data.real, data.mesh, data.axis, metric, kw)


GridSearch = Selection
"""The old name of the result (``rankjax.scale.GridSearch`` is deprecated)."""


@partial(jax.jit, static_argnames="setup")
def _grid_core(problem, gammas, lams, valid, setup):
    """``problem = (X, y, graph)``, ``valid = (Xv, yv, gv)``, ``setup = (mesh, axis, kind,
    metric, kw, sign)`` (static)."""
    mesh, axis, kind, metric, kw, sign, batch = setup

    def per_gamma(gamma, X, y, graph, lams, Xv, yv, gv):
        kernel = Kernel(kind, gamma=gamma)
        dec = decompose_dual(kernel_matrix(kernel, X), y, graph, "path")
        A = dec.coef_path(lams)
        F = nan_unless(dec.ok(lams), path_scores(kernel_matrix(kernel, Xv, X), A))   # [L, m_v]
        seg, num = gv.segments()
        return jax.vmap(lambda f: sign * metric(f, yv, seg, num_queries=num, **dict(kw)))(F)

    def local(gammas, problem, lams, valid):       # `batch` γ at once: what memory holds
        return lax.map(lambda g: per_gamma(g, *problem, lams, *valid), gammas, batch_size=batch)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(axis), P(), P(), P()),
                         out_specs=P(axis))(gammas, problem, lams, valid)


@timed
def sharded_kernel_grid(X, y, graph, *, lams, gammas, valid, metric: Callable = pairwise_error,
                        kernel: str = "gaussian", mesh: Optional[Mesh] = None,
                        higher_is_better=None, **metric_kwargs) -> Selection:
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
      :class:`~rankjax.Selection`: ``scores [G L]`` the validation metric of every (γ, λ),
      γ-major (NaN where undefined), the best ``(gamma, lam)`` by the metric's direction
      (the first in γ-major order on ties); no model is kept.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(8, num_features=3, seed=0)
      >>> v = rj.make_ranking_data(4, num_features=3, seed=1)
      >>> r = rj.scale.sharded_kernel_grid(d.X, d.y, rj.query_graph(d.qid), lams=[0.1, 1.],
      ...                            gammas=[0.1, 1., 10.], valid=(v.X, v.y, v.qid))
      >>> r.scores.shape, r.gammas.shape
      ((6,), (6,))
    """
    mesh, axis = check_mesh(mesh, None)
    if kernel not in ("gaussian", "polynomial"):
        raise ValueError(f"kernel must be 'gaussian' or 'polynomial', got {kernel!r}")
    X, y = check_problem(X, y, graph)
    X = as_dense(X)
    lams = check_lams(lams)
    gammas = as_float_array(gammas, "gammas")
    if gammas.ndim != 1 or gammas.shape[0] == 0:
        raise ValueError(f"gammas must be a non-empty 1-D grid, got shape {tuple(gammas.shape)}")
    check_positive(gammas, name="gammas")
    Xv, yv, gv = as_validation(valid)
    Xv = check_matrix(as_float_array(Xv, "X_valid", finite=True), "X_valid")
    if Xv.shape[1] != X.shape[1]:
        raise ValueError(f"X_valid has {Xv.shape[1]} columns but X has {X.shape[1]}")
    yv = gv.check_labels(yv, "validation y")
    sign = metric_sign(metric, higher_is_better)
    kw = static_metric(metric, metric_kwargs, "sharded_kernel_grid")
    D = mesh.devices.size
    G = gammas.shape[0]
    host = np.asarray(gammas)
    padded = put_rows(np.concatenate([host, np.repeat(host[-1:], -G % D)]), mesh, P(axis))
    m, mv = X.shape[0], Xv.shape[0]
    batch = batch_that_fits(   # per γ: K, S K S, its eigenvectors and workspace, K_valid, scores
        (5 * m * m + (m + lams.shape[0]) * mv) * compute_dtype(X, Xv).itemsize, -(-G // D),
        f"sharded_kernel_grid on {m} rows (one γ holds five {m} x {m} matrices)",
        "use a Nyström basis (RankRLSCV(basis=...), rankrls_nystrom_path) or fewer rows")
    table = _grid_core((X, y, graph), padded, lams, (Xv, yv, gv),
                       (mesh, axis, kernel, metric, kw, float(sign), batch))
    table = np.asarray(table)[:G]
    if np.all(np.isnan(table)):                  # as select_lambda: nothing to choose
        raise ValueError("the validation metric is undefined (NaN) for every (γ, λ): no "
                         "validation query qualifies, or every model gave non-finite scores")
    t = np.where(np.isnan(table), np.inf, table)        # sign applied: lower is better
    best = int(np.argmin(t))
    i, j = np.unravel_index(best, t.shape)
    L = lams.shape[0]
    return Selection(np.tile(np.asarray(lams), G), np.repeat(np.asarray(gammas), L),
                     sign * table.ravel(), best, float(lams[j]), float(gammas[i]),
                     float(sign * table[i, j]))
