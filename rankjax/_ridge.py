"""The shared ridge core: ``(G + λ I) x = b`` for a symmetric PSD ``G`` (SPEC §2).

Primal RankRLS is ridge regression on ``(Z, t) = (S X, S y)`` with
``G = Z^T Z``; dual RankRLS is kernel ridge on ``G = S K S``. One λ is solved
by Cholesky (falling back to an eigendecomposition if the factor breaks down in
low precision); a λ grid shares one ``eigh`` (SPEC §2.3).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["Eigh", "eigh_psd", "eigh_solve", "ridge_solve"]


class Eigh(NamedTuple):
    """``G = vectors diag(values) vectors^T`` with ``values >= 0`` (clipped)."""

    values: jax.Array
    vectors: jax.Array


def eigh_psd(G) -> Eigh:
    """Symmetric eigendecomposition of a PSD matrix, rounding-negative values clipped to 0."""
    G = (G + G.T) / 2
    vals, vecs = jnp.linalg.eigh(G)
    return Eigh(jnp.maximum(vals, 0), vecs)


def eigh_solve(eig: Eigh, b, lam):
    """``(G + λ I)^{-1} b`` from ``G``'s eigendecomposition: ``V diag(1/(Λ+λ)) V^T b``."""
    vecs = eig.vectors
    c = jnp.matmul(vecs.T, b, precision=lax.Precision.HIGHEST)
    scale = 1 / (eig.values + lam)
    c = c * scale.reshape(scale.shape + (1,) * (c.ndim - 1))
    return jnp.matmul(vecs, c, precision=lax.Precision.HIGHEST)


def ridge_solve(G, b, lam):
    """``(G + λ I)^{-1} b`` for symmetric PSD ``G`` ``[p, p]`` and ``b`` ``[p]``/``[p, k]``."""
    p = G.shape[0]
    A = G + lam * jnp.eye(p, dtype=G.dtype)
    fac = jax.scipy.linalg.cho_factor(A, lower=True)
    x = jax.scipy.linalg.cho_solve(fac, b)
    return lax.cond(jnp.all(jnp.isfinite(x)), lambda: x,
                    lambda: eigh_solve(eigh_psd(G), b, lam))
