r"""Small symmetric systems: the hold-outs' fold systems :math:`I - B^T H_{UU} B` (a few to a few
hundred rows, every fold and λ at once).

On the CPU a batched LAPACK call waits on the intra-op pool that XLA:CPU runs independent
calls on (:mod:`~rankjax._core.backend`), so the smallest systems are block inversions by
batched products in plain XLA operations and the others one unbatched LAPACK factor each.

Example:
  >>> import jax.numpy as jnp
  >>> print(jnp.round(symmetric_solve(jnp.array([[2., 1.], [1., 3.]]), jnp.array([3., 4.])), 4))
  [1. 1.]
"""
from __future__ import annotations

from functools import partial

import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core import lapack
from .._core.backend import paths
from .._core.products import HI

__all__ = ["SWEEP_BASE", "spd_inverse", "symmetric_solve"]


SWEEP_BASE = 32
"""Blocks up to this size are inverted by the sweep operator in :func:`spd_inverse`."""


def _sweep_inverse(M):
    r""":math:`M^{-1}` of a small symmetric matrix with nonzero leading minors (no pivoting)
    ``[..., p, p]``: Gauss-Jordan sweeps of every pivot, ``p`` steps of plain XLA
    operations on the whole batch."""
    p = M.shape[-1]

    def step(k, A):
        piv = A[..., k, k]
        row = A[..., k, :] / piv[..., None]
        col = A[..., :, k]
        on = jnp.arange(p) == k                 # masks, not scatters: one fused kernel
        A = jnp.where(on[:, None], row[..., None, :], A - col[..., :, None] * row[..., None, :])
        A = jnp.where(on[None, :], -(col / piv[..., None])[..., :, None], A)
        return jnp.where(on[:, None] & on[None, :], (1 / piv)[..., None, None], A)

    return lax.fori_loop(0, p, step, M)


def spd_inverse(M):
    r""":math:`M^{-1}` of a batch of small symmetric matrices ``[..., p, p]`` (positive definite,
    or at least nonzero leading minors) in plain XLA operations: block inversion by the
    Schur complement :math:`S = C - B^T A^{-1} B` down to :data:`SWEEP_BASE`, so nearly all the
    work is batched matrix products (p^3 multiply-adds) and only ``p`` short sequential
    steps remain, each on a ``SWEEP_BASE``-wide block.

    Example:
      >>> print(jnp.round(spd_inverse(jnp.array([[2., 1.], [1., 1.]])), 4))
      [[ 1. -1.]
       [-1.  2.]]
    """
    p = M.shape[-1]
    if p <= SWEEP_BASE:
        return _sweep_inverse(M)
    h = p // 2
    t = lambda a: jnp.swapaxes(a, -1, -2)                              # noqa: E731
    A, B, C = M[..., :h, :h], M[..., :h, h:], M[..., h:, h:]
    Ai = spd_inverse(A)
    AiB = jnp.matmul(Ai, B, precision=HI)
    S = C - jnp.matmul(t(B), AiB, precision=HI)
    Si = spd_inverse((S + t(S)) / 2)
    X12 = -jnp.matmul(AiB, Si, precision=HI)
    X11 = Ai - jnp.matmul(X12, t(AiB), precision=HI)
    return jnp.concatenate([jnp.concatenate([X11, X12], -1),
                            jnp.concatenate([t(X12), Si], -1)], -2)


def _cholesky_solve_each(M, r):
    r""":math:`M^{-1} r` for SPD ``M [..., P, P]``, one LAPACK Cholesky factor and two triangular
    solves per system, the systems one at a time (:mod:`~rankjax._core.lapack`: unbatched
    LAPACK calls, which never wait on XLA:CPU's intra-op pool); NaN where a factor fails
    (``M`` not positive definite in its dtype)."""
    tail = r.shape[M.ndim - 1:]
    rs = r.reshape(r.shape[:M.ndim - 1] + (int(np.prod(tail, dtype=int)),))
    return lapack.cho_solve(lapack.cholesky(M, symmetrize=False), rs).reshape(r.shape)


def symmetric_solve(M, r, small: int | None = None):
    r""":math:`M^{-1} r` for small symmetric positive definite ``M`` ``[..., P, P]`` (``r``
    ``[..., P]`` or ``[..., P, k]``), e.g. the fold systems :math:`I - B^T H_{UU} B` of the
    hold-outs, every λ at once (a batch traces the solve once, not once per ``vmap``
    level).

    On the CPU, up to ``small`` rows (default ``paths().small_solve``) it is :func:`spd_inverse` in plain XLA
    operations, batched; larger systems get one LAPACK Cholesky factor each, one system at
    a time (:mod:`~rankjax._core.backend`: XLA:CPU runs independent LAPACK calls
    concurrently on its intra-op pool and jaxlib's batched kernels then wait on that same
    pool, which deadlocks a 2-thread CPU; above ``small`` a factor is faster than the block
    inversion (benchmarks/design_measurements.md §8)). An accelerator solves every size batched.
    Differentiated implicitly (``lax.custom_linear_solve``), as ``jnp.linalg.solve``.

    Example:
      >>> M = jnp.array([[2., 1.], [1., 3.]])
      >>> print(jnp.round(symmetric_solve(M, jnp.array([3., 4.])), 4))
      [1. 1.]
    """
    M, r = jnp.asarray(M), jnp.asarray(r)
    vec = r.ndim == M.ndim - 1
    # vectors: products and row sums (fused, as mv); blocks of k columns: matrix products
    apply = ((lambda A, x: jnp.sum(A * x[..., None, :], axis=-1)) if vec      # noqa: E731
             else partial(jnp.matmul, precision=HI))
    if M.shape[-1] > (paths().small_solve if small is None else small):
        if paths().batch_factorisations:
            return jnp.linalg.solve(M, r[..., None])[..., 0] if vec else jnp.linalg.solve(M, r)
        Ms = lax.stop_gradient(M)
        return lax.custom_linear_solve(lambda x: apply(M, x), r,
                                       lambda _, b: _cholesky_solve_each(Ms, b), symmetric=True)
    Mi = spd_inverse(lax.stop_gradient(M))
    return lax.custom_linear_solve(lambda x: apply(M, x), r, lambda _, b: apply(Mi, b),
                                   symmetric=True)
