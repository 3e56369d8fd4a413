"""Sharded iterative solvers: CG on ``X^T L X + λ I`` with the matvec split over the
devices (Airola et al. 2010, §3), and FALKON (Nyström RankRLS) with the kernel
blocks of each device's rows.
"""
from __future__ import annotations

from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from .._cg_loop import (CG, CGResult, cg_solve, check_x0, loop_options, criterion_args, make_valid_fn,
                        static_metric)
from .._checks import as_float_array, check_count, check_positive, check_matrix
from .._falkon import STATIC as FALKON_STATIC, falkon_options
from .._falkon import falkon_preconditioner, falkon_solve
from .._kernels import Kernel, kernel_block
from .._segments import padded_size
from .._sparse import is_csr
from .layout import ShardedData, check_sharded, local_block

CG_STATIC = ("mesh", "axis", "metric", "greater_is_better", "kw", "max_iter", "patience",
           "recompute_every")


@partial(jax.jit, static_argnames=CG_STATIC)
def _sharded_cg_core(X, y, graph, lam, Xv, vdata, x0, tol, *, mesh, axis, metric, greater_is_better,
             kw, max_iter, patience, recompute_every):
    def local(X, y, graph, lam, Xv, vdata, x0, tol):
        g = local_block(graph)
        if is_csr(X):
            X = local_block(X)
        b = lax.psum(X.T @ g.rhs(y, X.dtype), axis)
        valid_fn = make_valid_fn(lambda w: Xv @ w, vdata, metric, greater_is_better, kw)
        return cg_solve(lambda v: lax.psum(X.T @ g.mv(X @ v), axis), b, lam=lam, x0=x0,
                        tol=tol, max_iter=max_iter, valid_fn=valid_fn, patience=patience,
                        recompute_every=recompute_every)
    spec = P(axis)
    return jax.shard_map(local, mesh=mesh,
                         in_specs=(spec, spec, spec, P(), P(), P(), P(), P()),
                         out_specs=P(), check_vma=False)(X, y, graph, lam, Xv, vdata, x0, tol)


def sharded_cg(data: ShardedData, *, options: Optional[CG] = None,
               lam=0.0, valid=None, metric="pairwise_error", x0=None,
               tol=1e-5, max_iter: int = 500, patience: int = 10, recompute_every: int = 50,
               greater_is_better=None, **metric_kwargs) -> CGResult:
    """:func:`~rankjax.rankrls_cg` on sharded data (dense or sparse ``X``): the matvec
    ``X^T L X v`` is a per-device product over its own queries plus one ``psum`` of an
    ``[n]`` vector per iteration; the loop state is replicated.

    Args:
      options: a :class:`~rankjax.CG` holding the loop options (``tol``, ``max_iter``,
        ``patience``, ``recompute_every``, ``progress``) instead of those keywords.
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
    data = check_sharded(data)
    if data.y.ndim != 1:
        raise ValueError("sharded_cg solves one output; shard one column of y")
    check_positive(lam, allow_zero=True, scalar=True)
    tol, max_iter, patience, recompute_every, _ = loop_options(      # progress: not printed
        options, sharded_cg, tol, max_iter, patience, recompute_every, 0)
    kw = static_metric(metric, metric_kwargs, "sharded_cg")
    n = data.num_features
    Xv, vdata = criterion_args(valid, n, "X_valid", metric, greater_is_better, kw)
    if Xv is not None:
        Xv = check_matrix(as_float_array(Xv, "X_valid", finite=True), "X_valid")
        if Xv.shape[1] != n:
            raise ValueError(f"X_valid has {Xv.shape[1]} columns but X has {n}")
    return _sharded_cg_core(data.X, data.y, data.graph, lam, Xv, vdata, check_x0(x0, n), tol,
                    mesh=data.mesh, axis=data.axis, metric=metric,
                    greater_is_better=greater_is_better, kw=kw, max_iter=max_iter,
                    patience=patience, recompute_every=recompute_every)


@partial(jax.jit, static_argnames=("mesh", "axis", "u") + FALKON_STATIC)
def _sharded_falkon_core(X, y, graph, XR, rmask, scale, lam, Xv, vdata, tol, kernel, *, mesh, axis, u,
                 metric, greater_is_better, kw, max_iter, patience, recompute_every, progress):
    def local(X, y, graph, XR, rmask, scale, lam, Xv, vdata, tol):
        g = local_block(graph)
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


def sharded_falkon(data: ShardedData, *, options: Optional[CG] = None,
                   lam, kernel: Kernel, basis_X, valid=None,
                   metric="pairwise_error", metric_kwargs=None, greater_is_better=None, tol=1e-8,
                   max_iter: int = 100, patience: int = 10, recompute_every: int = 50,
                   precond_rows: Optional[int] = None, progress: int = 0):
    """:func:`~rankjax.rankrls_falkon` on sharded data (dense ``X``): each device keeps its
    rows' ``K_mR`` block, and the CG matvec is a per-device product over its own queries
    plus one ``psum`` of a ``[b]`` vector; the preconditioner's subsample is the first
    ``precond_rows / D`` rows of every device (a principal block of ``L``: PSD).

    Args:
      options: a :class:`~rankjax.CG` holding the loop options (``tol``, ``max_iter``,
        ``patience``, ``recompute_every``, ``progress``) instead of those keywords.
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
    data = check_sharded(data)
    if data.sparse or data.y.ndim != 1:
        raise ValueError("sharded_falkon takes dense X and one output")
    (tol, max_iter, patience, recompute_every, progress), kw = falkon_options(
        sharded_falkon, kernel, lam, valid, options, (tol, max_iter, patience, recompute_every,
                                                      progress), metric, metric_kwargs)
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
    coef, r = _sharded_falkon_core(data.X, data.y, data.graph, XR, rmask, scale, lam, Xv, vdata, tol, kernel,
                           mesh=data.mesh, axis=data.axis, u=u, metric=metric,
                           greater_is_better=greater_is_better, kw=kw, max_iter=max_iter,
                           patience=patience, recompute_every=recompute_every,
                           progress=progress)
    return coef[:b], r


def _pad_basis(XR):
    b = XR.shape[0]
    bp = int(padded_size(b))
    return jnp.pad(XR, ((0, bp - b), (0, 0))), jnp.arange(bp) < b
