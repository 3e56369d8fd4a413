"""Dense linear algebra shared by the graphs and the solvers: the Gram product, the PSD
eigendecomposition and square root with their one rounding tolerance, and the normal
equations of a segment Laplacian (Pahikkala et al. 2009, §3.1).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from . import lapack
from .backend import paths
from .products import HI, tdot

__all__ = ["Eigh", "PSD_RTOL", "INDEFINITE_RTOL", "WIDE_GRAM", "gram", "gram_blocks", "raw_eigh", "eigh_psd",
           "eigh_psd_checked", "psd_ok", "psd_mask", "psd_root", "spectral_filter",
           "segment_normal_equations"]


PSD_RTOL = 1.0
"""Eigenvalues ``<= PSD_RTOL * size * eps * max(eigenvalue)`` of a PSD matrix are
treated as exact zeros (rounding noise) by :func:`psd_root`."""


class Eigh(NamedTuple):
    r""":math:`G = vectors \operatorname{diag}(values) vectors^T` with ``values >= 0`` (clipped)."""

    values: jax.Array
    vectors: jax.Array


WIDE_GRAM = 512
"""Columns from which :func:`gram` transposes first on CPU (the transpose is a full pass over
a tall ``Z``, worth it only for wide ones; measured: benchmarks/REPORT.md §8)."""


def gram(Z):
    r""":math:`Z^T Z` (``[n, n]``), the product chosen by shape and backend.

    A tall ``Z`` (fewer than :data:`WIDE_GRAM` columns), and every ``Z`` off the CPU, is
    contracted over its rows in place (``dot_general``, no copy). A wide ``Z`` on the CPU is
    transposed first behind an optimisation barrier: XLA:CPU then runs a plain row-major
    product, faster than contracting the rows of a fused ``Z`` (benchmarks/design_measurements.md §8).

    Example:
      >>> print(gram(jnp.array([[1., 2.], [3., 4.]])))
      [[10. 14.]
       [14. 20.]]
    """
    if Z.shape[1] >= WIDE_GRAM and paths().transpose_wide_gram:
        Zt = lax.optimization_barrier(Z.T)
        return jnp.matmul(Zt, Z, precision=HI)
    return lax.dot_general(Z, Z, (((0,), (0,)), ((), ())), precision=HI)


def gram_blocks(Z, parts: int = 4):
    r""":math:`Z^T Z` (``[n, n]``) from the products of its lower block triangle (``parts`` column
    blocks of ``Z``: 10 of 16 blocks for 4), each block column :math:`Z_{j:}^T Z_j` one product,
    the upper triangle its transpose: fewer flops than the whole product and faster on
    the CPU (benchmarks/design_measurements.md §8). Columns not divisible by ``parts``: one product.

    Example:
      >>> Z = jnp.arange(12.).reshape(3, 4)
      >>> bool(jnp.allclose(gram_blocks(Z, 2), Z.T @ Z))
      True
    """
    n = Z.shape[1]
    if n % parts:
        return tdot(Z, Z)
    q = n // parts
    cols = [tdot(Z[:, j * q:], Z[:, j * q:(j + 1) * q]) for j in range(parts)]   # [n - jq, q]
    rows = [[cols[j][(i - j) * q:(i - j + 1) * q] if i >= j else cols[i][(j - i) * q:(j - i + 1) * q].T
             for j in range(parts)] for i in range(parts)]
    return jnp.block(rows)


def raw_eigh(G):
    r"""``eigh`` of ``G`` symmetric to rounding, one triangle of :math:`G^T` read (column-major
    LAPACK reads it in place): no symmetrising copy (benchmarks/design_measurements.md §8).
    Differentiable where eigenvalues repeat; one unbatched LAPACK call a matrix on the CPU
    (:func:`~rankjax._core.lapack.eigh`)."""
    return lapack.eigh(jnp.swapaxes(G, -1, -2))


def eigh_psd(G) -> Eigh:
    """Symmetric eigendecomposition of a PSD ``G`` (:func:`raw_eigh`), negatives clipped to 0."""
    vals, vecs = raw_eigh(G)
    return Eigh(jnp.maximum(vals, 0), vecs)


INDEFINITE_RTOL = 10.0
"""A symmetric matrix whose smallest eigenvalue is below ``-INDEFINITE_RTOL * size * eps *
max|eigenvalue|`` (``eps`` at least float32's) is indefinite, not rounding noise: the dual
paths and hold-outs refuse such a kernel matrix (NaN under jit)."""


def eigh_psd_checked(G):
    """``(Eigh, smallest, largest)``: :func:`eigh_psd` and the raw extreme eigenvalues, to
    tell an indefinite matrix from rounding (:data:`INDEFINITE_RTOL`)."""
    vals, vecs = raw_eigh(G)
    return Eigh(jnp.maximum(vals, 0), vecs), vals[0], jnp.max(jnp.abs(vals))


def psd_ok(smallest, largest, size, dtype):
    """Traced: the smallest eigenvalue is within rounding of PSD (float32 rounding at
    least: kernel matrices are often formed in float32 even when solved in float64)."""
    eps = max(float(jnp.finfo(dtype).eps), float(jnp.finfo(jnp.float32).eps))
    return smallest >= -INDEFINITE_RTOL * size * eps * largest


def psd_mask(eig: Eigh):
    """``[p]`` True for the eigenvalues above the rounding level (:data:`PSD_RTOL`)."""
    p = eig.values.shape[0]
    tol = PSD_RTOL * p * jnp.finfo(eig.values.dtype).eps * jnp.max(eig.values)
    return eig.values > tol


def psd_root(M):
    r""":math:`(S, S^+)`: the symmetric square root of a PSD ``M`` and its pseudo-inverse.

    Example:
      >>> S, Sp = psd_root(jnp.array([[2., -2.], [-2., 2.]]))
      >>> print(jnp.round(S, 4)); print(jnp.round(Sp @ S, 4))
      [[ 1. -1.]
       [-1.  1.]]
      [[ 0.5 -0.5]
       [-0.5  0.5]]
    """
    eig = eigh_psd(M)
    keep = psd_mask(eig)
    root = jnp.where(keep, jnp.sqrt(eig.values), 0)
    inv = jnp.where(keep, 1 / jnp.where(keep, root, 1), 0)
    V = eig.vectors
    S = jnp.matmul(V * root, V.T, precision=HI)
    Sp = jnp.matmul(V * inv, V.T, precision=HI)
    return (S + S.T) / 2, (Sp + Sp.T) / 2


def spectral_filter(values, lam):
    """``1 / (Λ + λ)``: the ridge filter of the eigenvalues ``Λ`` (``[p]``)."""
    return 1 / (values + lam)


def segment_normal_equations(X, Ly, weight, cliques, fallback):
    r""":math:`(X^T L X, X^T L y)` of a segment Laplacian without forming ``S X``.

    :math:`L = \operatorname{diag}(r) - \sum_k sign_k P_k \operatorname{diag}(e_k) P_k^T` (``P_k``
    the ``[m, S_k]`` indicator of segmentation ``k``; a query graph is one clique term, tie
    exclusion a second with sign -1), so :math:`X^T L X = X^T \operatorname{diag}(r) X - \sum_k
    sign_k C_k^T \operatorname{diag}(e_k) C_k` with the segment sums :math:`C_k = P_k^T X`: one
    product of ``X`` itself and one pass of segment sums, where ``Z = S X`` costs a full write of
    ``Z`` first; :math:`X^T L y = X^T (L y)` (Pahikkala et al. 2009, §3.1: the query Laplacian as a
    diagonal minus a per-query rank-one term).

    Taken when ``r`` is uniform to rounding on the nonzero rows of ``X`` (the normalized
    query graph, the global graph; zero padding rows of chunks and shards may differ)
    and the subtraction keeps its accuracy: :math:`\lVert r X^T X \rVert_F \le T \lVert G \rVert_F`, every
    column's :math:`r x_j^T x_j \le T \max(G_{jj}, \max G / T)` and no segment longer than :math:`T^2`
    rows (its sum accumulates in order; one segment is a tree sum) with
    :math:`T = \epsilon^{-1/4}` (54 in float32, 8,192 in float64: at most about a quarter of the
    mantissa lost to features far from 0 within their queries); otherwise ``fallback()``
    (the root product :math:`Z^T Z`).
    Decided traced: under ``vmap`` both branches run.

    Args:
      X: ``[m, n]``; Ly: ``[m]`` or ``[m, k]`` ``L y``; weight: ``[m]`` ``r``.
      cliques: ``(sign, seg [m], e [S], S, counts [S])`` terms (``S`` static).
      fallback: ``() -> (G, b)``.
    """
    eps = jnp.finfo(X.dtype).eps
    T = eps ** -0.25
    r0 = jnp.max(weight)
    off = jnp.abs(weight - r0) > 8 * eps * r0          # rows of another weight: padding?

    def fast():
        G0 = r0 * gram(X)
        G, longest = G0, 0
        for sign, seg, e, num, counts in cliques:
            C = (jnp.sum(X, axis=0, keepdims=True) if num == 1    # a tree sum: accurate
                 else jax.ops.segment_sum(X, seg, num_segments=num))
            G = G - jnp.matmul((C * (sign * e)[:, None]).T, C, precision=HI)
            longest = jnp.maximum(longest, 0 if num == 1 else jnp.max(counts))
        G = (G + G.T) / 2
        d0, d = jnp.diagonal(G0), jnp.diagonal(G)
        ok = ((jnp.linalg.norm(G0) <= T * jnp.linalg.norm(G))
              & jnp.all(d0 <= T * jnp.maximum(d, jnp.max(d) / T)) & (longest <= T * T)
              & jnp.all(jnp.isfinite(G)))
        return lax.cond(ok, lambda: (G, tdot(X, Ly)), fallback)

    # rows of another weight are fine when they are zero rows (the padding of chunks, shards)
    uniform = lax.cond(jnp.any(off), lambda: jnp.all(jnp.where(off[:, None], X == 0, True)),
                       lambda: ~jnp.any(off))      # True, varying as the rows do (shard_map)
    return lax.cond(uniform, fast, fallback)
