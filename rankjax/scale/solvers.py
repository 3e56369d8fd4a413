"""Sharded iterative solvers: CG on ``X^T L X + λ I`` with the matvec split over the
devices (Airola et al. 2010, §3), and FALKON (Nyström RankRLS) with the kernel
blocks of each device's rows.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Optional

import jax
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core.products import mm
from ..solvers.cg_loop import (
    CG,
    CGResult,
    cg_loop,
    check_options,
    check_x0,
    loop_keywords,
    valid_fn_of,
    valid_set)
from .._core.checks import (as_float_array, check_count, check_positive, check_matrix)
from ..solvers.falkon import (block_ops, falkon_checks, falkon_preconditioner, falkon_solve, kmr_block_rows)
from ..kernels.kernel import Kernel, kernel_block
from ..kernels.basis import BasisRows, basis_of_rows, features
from .._core.sparse import is_csr
from .layout import ShardedData, check_sharded, local_block

@partial(jax.jit, static_argnames=("mesh", "axis"))
def _sharded_cg_core(problem, lam, valid, x0, options, mesh, axis):
    def local(problem, lam, valid, x0, options):
        X, y, graph = problem
        g = local_block(graph)
        if is_csr(X):
            X = local_block(X)
        b = lax.psum(mm(X.T, g.rhs(y, X.dtype)), axis)
        valid_fn = valid_fn_of(valid, lambda w: mm(valid.M, w))
        return cg_loop(lambda v: lax.psum(mm(X.T, g.mv(mm(X, v))), axis), b, options, lam, x0,
                       valid_fn)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(axis), P(), P(), P(), P()),
                         out_specs=P(), check_vma=False)(problem, lam, valid, x0, options)


@loop_keywords
def sharded_cg(data: ShardedData, *, lam=0.0, options: Optional[CG] = None, valid=None,
               metric="pairwise_error", metric_kwargs=None, higher_is_better=None,
               x0=None) -> CGResult:
    """:func:`~rankjax.solvers.cg.rankrls_cg` on sharded data (dense or sparse ``X``): the matvec
    ``X^T L X v`` is a per-device product over its own queries plus one ``psum`` of an
    ``[n]`` vector per iteration; the loop state is replicated.

    Args:
      data: :class:`ShardedData` with one output.
      options: a :class:`~rankjax.CG` (its ``verbose`` is not printed here).
      valid: ``(X_valid, y_valid, graph_valid)`` for early stopping (replicated).
      lam, metric, metric_kwargs, higher_is_better, x0: as in :func:`~rankjax.solvers.cg.rankrls_cg`.

    Returns:
      :class:`~rankjax.solvers.cg_loop.CGResult`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> r = rj.scale.sharded_cg(rj.scale.shard_data(d.X, d.y, g), lam=1.0, options=rj.CG(tol=1e-10))
      >>> bool(np.allclose(r.weights, rj.solvers.models.rankrls_primal(
      ...     d.X, d.y, g, lam=1.0).weights, atol=1e-4))
      True
    """
    data = check_sharded(data)
    if data.y.ndim != 1:
        raise ValueError("sharded_cg solves one output; shard one column of y")
    check_positive(lam, allow_zero=True, scalar=True)
    options = check_options(options)
    options = dataclasses.replace(options, verbose=0)           # one line per device
    n = data.num_features
    valid = valid_set(valid, "X_valid", metric, higher_is_better, metric_kwargs, "sharded_cg",
                      partial(_valid_rows, n=n))
    return _sharded_cg_core((data.X, data.y, data.graph), lam, valid, check_x0(x0, n), options,
                            data.mesh, data.axis)


def _valid_rows(Xv, n):
    Xv = check_matrix(as_float_array(Xv, "X_valid", finite=True), "X_valid")
    if Xv.shape[1] != n:
        raise ValueError(f"X_valid has {Xv.shape[1]} columns but X has {n}")
    return Xv


@partial(jax.jit, static_argnames="layout")
def _sharded_falkon_core(problem, basis: BasisRows, lam, valid, options, scale, layout):
    mesh, axis, u, block_rows = layout

    def local(problem, basis, lam, valid, options, scale):
        X, y, graph = problem
        g = local_block(graph)
        dt = X.dtype
        mf = basis.mask.astype(dt)

        def gram_U(C):          # each device's first u rows: a principal block of L (PSD)
            PhiU = features(kernel_block(basis.kernel, X[:u], basis.X) * mf, C)
            return scale * lax.psum(mm(PhiU.T, g.prefix(u).mv(PhiU)), axis)

        C, A = falkon_preconditioner(basis, gram_U, lam)
        fwd, local_bwd = block_ops(basis, X, block_rows)         # padding rows: L kills them
        bwd = lambda v: lax.psum(local_bwd(v), axis)  # noqa: E731
        scores_fn = None if valid is None else (lambda a: mm(basis.block(valid.M), a))
        return falkon_solve(C, A, lam, lambda a: bwd(g.mv(fwd(a))), bwd(g.rhs(y, dt)), scores_fn,
                            valid, options)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(axis),) + (P(),) * 5,
                         out_specs=P(), check_vma=False)(problem, basis, lam, valid, options,
                                                         scale)


@loop_keywords
def sharded_falkon(data: ShardedData, *, lam, kernel: Kernel, basis,
                   options: Optional[CG] = None, valid=None, metric="pairwise_error",
                   metric_kwargs=None, higher_is_better=None,
                   precond_rows: Optional[int] = None, block_rows: Optional[int] = None):
    """:func:`~rankjax.solvers.falkon.rankrls_falkon` on sharded data (dense ``X``): each device keeps its
    rows' ``K_mR`` block, and the CG matvec is a per-device product over its own queries
    plus one ``psum`` of a ``[b]`` vector; the preconditioner's subsample is the first
    ``precond_rows / D`` rows of every device (a principal block of ``L``: PSD).

    Args:
      data: :class:`ShardedData` with one output.
      basis: ``[b, n]`` the basis points themselves (e.g. rows of ``X`` chosen on the host:
        the rows are spread over the devices, so indices into them are not taken).
      precond_rows: rows of the preconditioner's subsample (as in
        :func:`~rankjax.solvers.falkon.rankrls_falkon`, as are ``lam``, ``kernel``, ``options``, ``valid``
        and the metric's arguments).
      block_rows: evaluate each device's ``K_mR`` block in blocks of this many rows every
        iteration; by default the block is kept when it takes at most a quarter of the free
        (device) memory, else blocked automatically (as :func:`~rankjax.solvers.falkon.rankrls_falkon`).

    Returns:
      ``(coef [b], CGResult)``; scores are ``kernel_matrix(kernel, X, basis) @ coef``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=4, seed=0)
      >>> g, k = rj.query_graph(d.qid), rj.gaussian_kernel(0.2)
      >>> coef, r = rj.scale.sharded_falkon(rj.scale.shard_data(d.X, d.y, g), lam=1.0, kernel=k,
      ...                             basis=d.X[:60], options=rj.CG(tol=1e-12))
      >>> f = rj.solvers.falkon.rankrls_falkon(d.X, d.y, g, lam=1.0, kernel=k, basis=np.arange(60),
      ...                       options=rj.CG(tol=1e-12))
      >>> bool(np.allclose(coef, f.coef, atol=1e-6))
      True
    """
    data = check_sharded(data)
    if data.sparse or data.y.ndim != 1:
        raise ValueError("sharded_falkon takes dense X and one output")
    falkon_checks(kernel, lam, valid)
    options = dataclasses.replace(check_options(options), verbose=0)   # one line per device
    n = data.num_features
    if np.ndim(basis) != 2:
        raise TypeError("basis must be the [b, n] basis points (rows of X chosen on the host); "
                        f"got {type(basis).__name__} of {np.ndim(basis)} dimensions")
    XR = check_matrix(as_float_array(basis, "basis", finite=True), "basis")
    if XR.shape[1] != n:
        raise ValueError(f"basis has {XR.shape[1]} columns but X has {n}")
    b = XR.shape[0]
    basis = basis_of_rows(XR, kernel)
    D, width = data.rows.shape
    want = 3 * basis.X.shape[0] if precond_rows is None else check_count(precond_rows,
                                                                          "precond_rows")
    u = int(min(width, -(-want // D)))
    real = int(np.minimum(u, (data.rows >= 0).sum(1)).sum())
    scale = data.num_rows / max(real, 1)
    valid = valid_set(valid, "X_valid", metric, higher_is_better, metric_kwargs,
                      "sharded_falkon",
                      lambda Xv: check_matrix(as_float_array(Xv, "X_valid", finite=True),
                                              "X_valid"))
    block_rows = kmr_block_rows(width, basis.X.shape[0], data.X.dtype.itemsize, block_rows)
    coef, r = _sharded_falkon_core((data.X, data.y, data.graph), basis, lam, valid, options,
                                   scale, (data.mesh, data.axis, u, block_rows))
    return coef[:b], r
