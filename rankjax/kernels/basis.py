r"""Nyström basis vectors: how they are chosen and how their features are formed
(Pahikkala et al. 2009, §3.5; docs/math.md).

The basis-vector (subset-of-regressors) model ``f(x) = sum_{i in R} a_i k(x, x_i)`` is
primal RankRLS on the features :math:`\Phi = K_R^T Z^{-T}` with :math:`K_{RR} = Z Z^T`. Its quality
depends on how well the ``b`` basis rows cover the data in the kernel's feature space:

* ``"uniform"`` — ``b`` distinct rows drawn uniformly (the papers' choice);
* ``"kmeans++"`` — kernel k-means++ seeding (Arthur & Vassilvitskii 2007, in the
  kernel's feature space): each next row is drawn with probability proportional to
  its squared feature-space distance ``k(x,x) + k(c,c) - 2 k(x,c)`` to the nearest
  row chosen so far, so the basis spreads over the data instead of piling up where the
  rows are dense. O(m n b) work in one ``lax.fori_loop``, on at most
  ``max(KMEANS_ROWS b, KMEANS_POOL)`` rows: above that, on a uniform sample of them (the seeding
  covers the sample's regions, and its cost, :math:`O(KMEANS_{ROWS} n b^2)`, stops growing with
  ``m``).

Basis sizes are padded to a few buckets (:func:`rankjax._core.segments.padded_size`, at most
25 % padding) with masked rows whose features are exactly zero, so a new basis size in
the same bucket, or a new kernel parameter (traced), reuses the compiled programs.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core import lapack
from .._core.backend import wide_dtype
from .._core.log import timed
from .._core.checks import check_seed, check_matrix, is_int
from .._core.host import device_array, is_concrete
from .kernel import Kernel, constant_part, kernel_block, kernel_core, kernel_offset, unshifted
from .._core.linalg import PSD_RTOL
from .._core.segments import padded_size
from .._core.sparse import as_dense
from .._core.types import saveable

__all__ = ["BASIS_METHODS", "KMEANS_ROWS", "KMEANS_POOL", "Basis", "nystrom_basis"]

BASIS_METHODS = ("uniform", "kmeans++")

KMEANS_ROWS = 16
"""``"kmeans++"`` draws a basis of ``b`` rows from at most ``max(KMEANS_ROWS * b,``
:data:`KMEANS_POOL` ``)`` rows (a uniform sample above that)."""

KMEANS_POOL = 16_000
"""Up to this many rows ``"kmeans++"`` seeds on every row whatever ``b``."""


@timed
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
      >>> b = nystrom_basis(X, 3, kernel=rj.gaussian_kernel(1.0), method="kmeans++")
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
    pool = np.arange(m)
    if m > max(KMEANS_ROWS * size, KMEANS_POOL):
        pool = np.sort(np.random.default_rng(check_seed(seed)).choice(
            m, max(KMEANS_ROWS * int(size), KMEANS_POOL), replace=False))
        X = X[pool]
    Xd = jnp.asarray(as_dense(X))
    idx = _kmeanspp_core(Xd, kernel, jax.random.PRNGKey(int(seed) % (1 << 31)), int(size))
    if not is_concrete(idx):                  # drawn from traced rows: the indices stay traced
        return jnp.sort(jnp.asarray(pool)[idx])
    return np.sort(pool[np.asarray(idx)].astype(np.int64))


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


@saveable
@dataclasses.dataclass(frozen=True, eq=False)
class Basis:
    """A Nyström basis, described once and passed whole as ``basis=`` to the solvers that
    take one (:class:`~rankjax.Nystrom`, :class:`~rankjax.Falkon`; Pahikkala et al. 2009,
    §3.5). A plain int ``b`` is ``Basis(size=b)``, an index array ``Basis(rows=...)``; two
    bases of the same description are equal (and hash alike).

    Attributes:
      size: the number of basis rows ``b`` to choose (exclusive with ``rows``).
      rows: ``[b]`` row indices of the training rows (any choice of the user's).
      method: ``"uniform"`` or ``"kmeans++"`` (in the kernel's feature space), for ``size``.
      seed: the draw.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=3, seed=0)
      >>> s = rj.Nystrom(rj.gaussian_kernel(0.5), rj.Basis(20, method="kmeans++"))
      >>> rj.fit(rj.Problem(d.X, d.y, d.qid), s, lam=1.0).value.coef.shape
      (20,)
    """

    size: Optional[int] = None
    rows: Optional[np.ndarray] = None
    method: str = "uniform"
    seed: int = 0

    def __post_init__(self):
        if (self.size is None) == (self.rows is None):
            raise TypeError("Basis takes either size= or rows=")
        if self.size is not None and (not is_int(self.size) or self.size < 1):
            raise ValueError(f"size must be a positive int, got {self.size!r}")
        if self.method not in BASIS_METHODS:
            raise ValueError(f"method must be one of {BASIS_METHODS}, got {self.method!r}")
        check_seed(self.seed)

    def rows_among(self, m: int) -> int:
        """The number of basis rows ``b`` among ``m`` training rows (before they are drawn).

        Example:
          >>> Basis(1000).rows_among(300), Basis(rows=np.arange(5)).rows_among(300)
          (300, 5)
        """
        return min(int(self.size), m) if self.rows is None else int(np.size(self.rows))

    def _key(self):
        rows = None if self.rows is None else tuple(np.asarray(self.rows).ravel().tolist())
        return (self.size, rows, self.method, self.seed)

    def __eq__(self, other):
        return isinstance(other, Basis) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


def as_nystrom(basis, seed: int = 0) -> Basis:
    """``basis`` as a :class:`Basis`: an int is a uniform draw of that many rows with
    ``seed``, an index array the rows themselves."""
    if isinstance(basis, Basis):
        return basis
    if isinstance(basis, (bool, np.bool_)) or basis is None:
        raise TypeError("basis must be an int, a 1-D integer array of row indices or a "
                        "rankjax.Basis")
    if is_int(basis):
        if basis < 1:
            raise ValueError(f"basis size must be at least 1 row, got {basis}")
        return Basis(size=int(basis), seed=seed)
    if isinstance(basis, jax.Array) and not is_concrete(basis):
        raise TypeError("basis must be concrete row indices (not traced)")
    return Basis(rows=np.asarray(basis))


class BasisRows(NamedTuple):
    """A chosen basis as one pytree for the compiled cores: the rows ``X [b_pad, n]``
    padded to a size bucket (:func:`padded_size`, zero rows), ``mask [b_pad]`` (False on
    padding) and the :class:`Kernel`, shifted on a ranking graph
    (``rankjax.kernels.kernel.ranking_form``: the rows against the basis minus the
    kernel's constant part, which the graph's Laplacian annihilates). The methods are the one
    Nyström feature map: a Cholesky factor of the unshifted ``K_RR`` with a jitter
    (:func:`jitter`; docs/design.md says why not ``eigh``)."""

    X: jax.Array
    mask: jax.Array
    kernel: Kernel

    def block(self, A, block_size=None):
        """``K(A, X_R) [p, b_pad]`` (zero columns on padding)."""
        return (kernel_core(self.kernel, A, self.X, block_size)
                * self.mask.astype(A.dtype)[None, :])

    def factor(self):
        r"""Lower ``C``, :math:`C C^T = K_{RR} + \varepsilon I` (:func:`basis_cholesky`), ``K_RR``
        of the kernel unshifted (PSD)."""
        return basis_cholesky(kernel_block(unshifted(self.kernel), self.X, self.X), self.mask)

    def offset(self, coef, axis=0):
        r"""What the shifted block leaves out of :math:`K_{xR} a`: :math:`k_0 \sum_i a_i`
        (summed over the basis ``axis``, kept as a unit axis that broadcasts over the rows; 0
        unshifted), the same for every row."""
        return kernel_offset(self.kernel, coef, axis)

    def constant_row(self, C):
        r"""``[b_pad]`` or ``None``: the row :math:`k_0 1^T C^{-T}` that every row of the
        unshifted features :math:`K_{xR} C^{-T}` holds beyond the shifted ones (``None``
        unshifted; zero on padding)."""
        if not self.kernel.shift:
            return None
        ones = constant_part(self.kernel) * self.mask.astype(C.dtype)
        return lapack.solve_triangular(C, ones)


def take_basis(X, basis, kernel: Optional[Kernel] = None, seed: int = 0, pad: bool = True):
    """The one basis check: ``(index [b] host int64, BasisRows)`` for ``basis`` (an int, row
    indices or a :class:`Basis`) of the training rows ``X``, indices range-checked on
    the host, rows gathered into a bucket of :func:`padded_size` rows (one compiled
    program per bucket, whatever ``b``), or exactly ``b`` rows without ``pad`` (the
    one-shot path: a power-of-two bucket made its root-form system 45 % slower at
    100,000 x 1,024 than at 1,000 columns, docs/design.md)."""
    spec = as_nystrom(basis, seed)
    m = X.shape[0]
    if spec.rows is None:
        if spec.size > m:
            raise ValueError(f"basis must be between 1 and {m} rows, got {spec.size}")
        b = nystrom_basis(X, spec.size, kernel=kernel, method=spec.method, seed=spec.seed)
    else:
        b = np.asarray(spec.rows)
        if b.ndim != 1 or b.dtype.kind not in "iu" or b.size == 0:
            raise TypeError("basis must be an int or a non-empty 1-D integer array of row "
                            "indices")
        if b.min() < 0 or b.max() >= m:
            raise ValueError(f"basis holds row indices outside [0, {m}): min {b.min()}, "
                             f"max {b.max()}")
        if np.unique(b).size != b.size:
            raise ValueError("basis holds repeated row indices")
    bp = int(padded_size(b.size)) if pad else b.size          # the solvers plan their blocks
    mask = device_array(np.arange(bp) < b.size)
    if not is_concrete(b):                    # kmeans++ of traced rows (under the caller's jit)
        idx = jnp.zeros(bp, jnp.int32).at[:b.size].set(b.astype(jnp.int32))
        return b.astype(jnp.int32), BasisRows(_take(as_dense(X), idx, mask), mask, kernel)
    b = b.astype(np.int64)
    idx = np.zeros(bp, np.int32)
    idx[:b.size] = b
    return b, BasisRows(_take(as_dense(X), device_array(idx), mask), mask, kernel)


def basis_of_rows(XR, kernel: Kernel) -> BasisRows:
    """A :class:`BasisRows` of given rows ``XR [b, n]`` (not indices), padded to its bucket."""
    b = XR.shape[0]
    bp = int(padded_size(b))
    return BasisRows(jnp.pad(XR, ((0, bp - b), (0, 0))), jnp.arange(bp) < b, kernel)


@jax.jit
def _take(X, idx, mask):
    return jnp.where(mask[:, None], jnp.asarray(X)[idx], 0)


def basis_system(KRR, mask):
    """``K_RR + ε I`` for a padded basis (padding rows get a unit diagonal), ``ε`` the
    :func:`jitter`."""
    dt = KRR.dtype
    mf = mask.astype(dt)
    bp = KRR.shape[0]
    K = KRR * (mf[:, None] * mf[None, :]) + jnp.diag(1 - mf)
    return K + jitter(K, mask) * jnp.eye(bp, dtype=dt)


def jitter(K, mask):
    r"""``ε = b eps32 max diag(K_RR)``, ``b`` the basis rows (not the padding), in every dtype:
    the model's regulariser is :math:`\lambda a^T (K_{RR} + \varepsilon I) a`, one model
    whatever the dtype computes it in (a float64 jitter at float64's rounding would keep the
    directions of ``K_RR`` below float32's, which float32 cannot, and the two dtypes would
    fit different models)."""
    return (PSD_RTOL * jnp.sum(mask).astype(K.dtype) * float(np.finfo(np.float32).eps)
            * jnp.max(jnp.diag(K)))


def basis_cholesky(KRR, mask):
    r"""Lower ``C`` with :math:`C C^T = K_{RR} + \varepsilon I` (:func:`basis_system`): the factor of the
    one Nyström feature map :math:`\Phi = K_{mR} C^{-T}`."""
    return lapack.cholesky(basis_system(KRR, mask))


def features(K_R, C):
    r""":math:`\Phi = K_R C^{-T}` for ``K_R [p, b]`` (rows against the basis) and the factor ``C``."""
    return lapack.solve_triangular(C, K_R.T).T


def coef_from(C, W):
    r"""BasisRows coefficients :math:`a = C^{-T} w` of feature-space weights ``W [b, ...]`` (basis
    axis first, any trailing axes)."""
    out = lapack.solve_triangular(C, W.reshape(W.shape[0], -1), trans=True)
    return out.reshape(W.shape)


def wide_coef(C, W):
    r""":func:`coef_from` computed in :func:`~rankjax._core.backend.wide_dtype` (float64 even
    with x64 off) and returned in ``W``'s dtype: :math:`C^{-T} W` without the float32
    triangular solve's ``eps κ(C)`` (the basis factor ``C`` is as ill-conditioned as
    ``K_RR``, whose jitter is at float32's rounding)."""
    wide = wide_dtype()
    with jax.enable_x64(wide == jnp.float64):
        return coef_from(C.astype(wide), W.astype(wide)).astype(W.dtype)


def explicit_features(K_R, K_RR):
    r"""``(Φ [m, r], T [r, r])`` from ``K_R [r, m]`` and ``K_RR [r, r]`` given as matrices:
    :math:`\Phi = K_R^T C^{-T}` and the back-map :math:`T = C^{-T}` (basis coefficients ``A = T w``)."""
    C = basis_cholesky(K_RR, jnp.ones(K_RR.shape[0], bool))
    return features(K_R.T, C), coef_from(C, jnp.eye(C.shape[0], dtype=C.dtype))

