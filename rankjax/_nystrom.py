"""Nyström basis vectors: how they are chosen and how their features are formed
(Pahikkala et al. 2009, §3.5; docs/math.md).

The basis-vector (subset-of-regressors) model ``f(x) = sum_{i in R} a_i k(x, x_i)`` is
primal RankRLS on the features ``Φ = K_R^T Z^{-T}`` with ``K_RR = Z Z^T``. Its quality
depends on how well the ``b`` basis rows cover the data in the kernel's feature space:

* ``"uniform"`` — ``b`` distinct rows drawn uniformly (the papers' choice);
* ``"kmeans++"`` — kernel k-means++ seeding (Arthur & Vassilvitskii 2007, in the
  kernel's feature space): each next row is drawn with probability proportional to
  its squared feature-space distance ``k(x,x) + k(c,c) - 2 k(x,c)`` to the nearest
  row chosen so far, so the basis spreads over the data instead of piling up where the
  rows are dense. O(m n b) work in one ``lax.fori_loop``.

Basis sizes are padded to a few buckets (:func:`rankjax._segments.padded_size`, at most
25 % padding) with masked rows whose features are exactly zero, so a new basis size in
the same bucket, or a new kernel parameter (traced), reuses the compiled programs.
"""
from __future__ import annotations

from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._checks import check_seed, check_matrix, device_array, is_concrete, is_int
from ._kernels import Kernel, kernel_block, kernel_matrix
from ._ridge import PSD_RTOL
from ._segments import padded_size
from ._sparse import as_dense

__all__ = ["BASIS_METHODS", "nystrom_basis"]

BASIS_METHODS = ("uniform", "kmeans++")


def nystrom_basis(X, size: int, *, kernel: Optional[Kernel] = None, method: str = "uniform",
                  seed: int = 0) -> np.ndarray:
    """Chooses ``size`` distinct basis rows of ``X`` for the Nyström approximation.

    Args:
      X: ``[m, n]`` training rows.
      size: number of basis rows ``b`` (``1 <= b <= m``).
      kernel: the :class:`Kernel` whose feature space ``"kmeans++"`` measures
        distances in (not used by ``"uniform"``).
      method: ``"uniform"`` or ``"kmeans++"`` (see the module docstring).
      seed: random seed.

    Returns:
      ``[b]`` sorted row indices (host int64), to pass as ``basis=``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.r_[np.zeros((50, 2)), np.ones((2, 2)) * 5]   # 50 rows in one spot, 2 far away
      >>> b = rj.nystrom_basis(X, 3, kernel=rj.gaussian_kernel(1.0), method="kmeans++")
      >>> bool(np.any(b >= 50))                              # the far rows are covered
      True
    """
    X = check_matrix(X)
    m = X.shape[0]
    if not is_int(size) or not 1 <= size <= m:
        raise ValueError(f"size must be an int between 1 and {m} (rows of X), got {size!r}")
    if method not in BASIS_METHODS:
        raise ValueError(f"method must be one of {BASIS_METHODS}, got {method!r}")
    if method == "uniform":
        return np.sort(np.random.default_rng(check_seed(seed)).choice(m, int(size), replace=False))
    if not isinstance(kernel, Kernel):
        raise TypeError(f"method='kmeans++' needs kernel=, a rankjax Kernel; got {kernel!r}")
    Xd = jnp.asarray(as_dense(X))
    idx = _kmeanspp_core(Xd, kernel, jax.random.PRNGKey(int(seed) % (1 << 31)), int(size))
    return np.sort(np.asarray(idx).astype(np.int64))


@partial(jax.jit, static_argnames="size")
def _kmeanspp_core(X, kernel, key, size):
    m = X.shape[0]
    diag = jax.vmap(lambda x: kernel_block(kernel, x[None], x[None])[0, 0])(X)

    def dist(j):
        return jnp.maximum(diag + diag[j] - 2 * kernel_block(kernel, X, X[j][None])[:, 0], 0)

    key, k0 = jax.random.split(key)
    first = jax.random.randint(k0, (), 0, m)
    chosen = jnp.zeros(m, bool).at[first].set(True)
    d2 = jnp.where(chosen, 0, dist(first))

    def body(i, c):
        idx, d2, chosen, key = c
        key, k = jax.random.split(key)
        pos = (d2 > 0) & ~chosen
        # D^2 sampling; when every remaining row sits on a chosen one (duplicates),
        # uniform over the rows not chosen yet
        logits = jnp.where(jnp.any(pos), jnp.where(pos, jnp.log(jnp.where(pos, d2, 1)), -jnp.inf),
                           jnp.where(chosen, -jnp.inf, 0.0))
        j = jax.random.categorical(k, logits)
        chosen = chosen.at[j].set(True)
        d2 = jnp.where(chosen, 0, jnp.minimum(d2, dist(j)))
        return idx.at[i].set(j.astype(jnp.int32)), d2, chosen, key

    idx = jnp.zeros(size, jnp.int32).at[0].set(first.astype(jnp.int32))
    return lax.fori_loop(1, size, body, (idx, d2, chosen, key))[0]


def padded_basis(X, basis, seed: int = 0):
    """``(basis [b] host indices, XR [b_pad, n], mask [b_pad])``: the basis rows of ``X``
    (``basis`` an int drawn uniformly with ``seed``, or host row indices, range-checked on
    the host) gathered into a bucket of :func:`padded_size` rows, zero rows on padding
    (mask False). One compiled gather per bucket, whatever ``b``."""
    m = X.shape[0]
    if isinstance(basis, (bool, np.bool_)):
        raise TypeError("basis must be an int or a 1-D integer array of row indices")
    if is_int(basis):
        if not 1 <= basis <= m:
            raise ValueError(f"basis must be between 1 and {m} rows, got {basis}")
        basis = nystrom_basis(X, int(basis), seed=seed)
    if isinstance(basis, jax.Array) and not is_concrete(basis):
        raise TypeError("basis must be concrete row indices (not traced)")
    b = np.asarray(basis)
    if b.ndim != 1 or b.dtype.kind not in "iu" or b.size == 0:
        raise TypeError("basis must be an int or a non-empty 1-D integer array of row indices")
    if b.min() < 0 or b.max() >= m:
        raise ValueError(f"basis holds row indices outside [0, {m})")
    if np.unique(b).size != b.size:
        raise ValueError("basis holds repeated row indices")
    bp = int(padded_size(b.size))
    idx = np.zeros(bp, np.int32)
    idx[:b.size] = b
    mask = np.arange(bp) < b.size
    Xd = as_dense(X)
    return b, _take(Xd, device_array(idx), device_array(mask)), device_array(mask)


@jax.jit
def _take(X, idx, mask):
    return jnp.where(mask[:, None], jnp.asarray(X)[idx], 0)


def basis_cholesky(KRR, mask):
    """Lower ``C`` with ``C C^T = K_RR + ε I`` for a padded basis (padding rows get a unit
    diagonal), ``ε = b eps max diag(K_RR)`` a rounding-level jitter: the factor of the
    basis system shared by the Nyström hold-out and :func:`rankjax.rankrls_falkon`."""
    dt = KRR.dtype
    mf = mask.astype(dt)
    bp = KRR.shape[0]
    K = KRR * (mf[:, None] * mf[None, :]) + jnp.diag(1 - mf)
    eps = PSD_RTOL * bp * jnp.finfo(dt).eps * jnp.max(jnp.diag(K))
    return jnp.linalg.cholesky(K + eps * jnp.eye(bp, dtype=dt))


def cholesky_features(X, XR, mask, kernel, block_size=None):
    """``(K_mR [m, b_pad], C [b_pad, b_pad])``: the Nyström features are
    ``Φ = K_mR C^{-T}`` with :func:`basis_cholesky` (padding columns are zero)."""
    K_Rt = kernel_matrix(kernel, X, XR, block_size=block_size) * mask.astype(X.dtype)[None, :]
    return K_Rt, basis_cholesky(kernel_block(kernel, XR, XR), mask)
