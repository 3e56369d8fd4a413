r"""Kernel principal component ranking (KPCRank) and regression (KPCR) (docs/math.md;
Tsivtsivadze et al. §3–4).

Centre the training kernel ``K̂ = C K C`` (:math:`C = I - 1 1^T / m`), keep the top
``p`` eigenpairs :math:`K̂ = V \Lambda V^T` and fit *unregularized* (optionally ridge)
RankRLS on the projections :math:`Z = V_p \Lambda_p^{1/2}`: :math:`w_p = (Z^T L Z)^{-1} Z^T L y`.
KPCR is the same with ``L = I`` (``identity_graph``). Test rows are projected
with the centred test kernel :math:`K̂_t = (K_t - 1 1^T K / m) C` as
:math:`Z_t = K̂_t V_p \Lambda_p^{-1/2}`.

The whole path over ``p = 1..P`` comes from one Cholesky factor :math:`M = R R^T` of
the ``P × P`` matrix :math:`M = Z^T L Z`: the leading ``p × p`` block of ``R`` is the
factor of the leading block of ``M``, so :math:`R_p^T w_p = (R^{-1} b)_{1..p}`, one
triangular solve per ``p``, :math:`O(P^3)` in all.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from .._core import lapack
from .._core.log import timed
from .._core.products import HI, mm
from .._core.checks import check_count, check_positive, check_matrix
from .._core.traced import finite_positive, nan_unless
from ..graphs.graph import Graph
from ..solvers.dual import check_kernel_matrix
from ..solvers.models import check_test_matrix, linear_scores, path_scores
from .._core.types import saveable

__all__ = ["KPCPath", "KPCModel", "center_kernel", "center_test_kernel", "kpcrank_path",
           "kpcrank"]


@saveable
class KPCPath(NamedTuple):
    """Result of :func:`kpcrank_path`.

    Attributes:
      components: ``[P]`` the numbers of components ``1..P``.
      weights: ``[P, P]``; row ``p - 1`` holds ``w_p`` zero-padded (weights on
        the projections ``Z``).
      coef: ``[P, m]``; row ``p - 1`` holds the kernel coefficients ``a_p`` with
        ``scores = K_t @ a_p - offset_p`` for an *uncentred* test kernel ``K_t``.
      offset: ``[P]``.
      eigenvalues: ``[P]`` the kept eigenvalues of ``K̂`` (descending).
      valid_scores: ``[P, m_v]`` scores of ``K_valid`` rows, or ``None``.
    """

    components: jax.Array
    weights: jax.Array
    coef: jax.Array
    offset: jax.Array
    eigenvalues: jax.Array
    valid_scores: Optional[jax.Array]

    def predict(self, K_test):
        """``[P, m_t]`` scores of every number of components (uncentred ``K_test``)."""
        K_test = check_test_matrix(K_test, self.coef.shape[1], "K_test", "columns (training rows)")
        return path_scores(K_test, self.coef) - self.offset[:, None]


@saveable
class KPCModel(NamedTuple):
    """KPCRank model: ``scores = K_t @ coef - offset`` (``K_t`` the uncentred
    ``[m_t, m]`` kernel between test and training rows)."""

    DIMS = {"coef": ("m", "k?")}
    FINITE = ("coef", "offset")

    coef: jax.Array
    offset: jax.Array

    def predict(self, K_test):
        K_test = check_test_matrix(K_test, self.coef.shape[0], "K_test", "columns (training rows)")
        return linear_scores(K_test, self.coef) - self.offset


def center_kernel(K):
    r"""``K̂ = C K C`` with :math:`C = I - 1 1^T / m`: the kernel of the mean-centred
    feature vectors (Tsivtsivadze et al. eq. 3).

    Example:
      >>> X = jnp.array([[1., 0.], [0., 2.], [2., 1.]])
      >>> Xc = X - X.mean(0)
      >>> bool(jnp.allclose(center_kernel(X @ X.T), Xc @ Xc.T))
      True
    """
    K = _square(K, "K")
    rm = K.mean(axis=0, keepdims=True)
    return K - rm - K.mean(axis=1, keepdims=True) + rm.mean()


def _square(K, name):
    K = check_matrix(K, name)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be square [m, m], got shape {tuple(K.shape)}")
    return K


def center_test_kernel(K_test, K):
    r""":math:`K̂_t = (K_t - 1 1^T K / m) C`: test rows centred with the *training*
    mean in feature space.

    Example:
      >>> X, T = jnp.array([[1., 0.], [0., 2.], [2., 1.]]), jnp.array([[1., 1.]])
      >>> mu = X.mean(0)
      >>> bool(jnp.allclose(center_test_kernel(T @ X.T, X @ X.T), (T - mu) @ (X - mu).T))
      True
    """
    K = _square(K, "K")
    K_test = check_matrix(K_test, "K_test")
    if K_test.shape[1] != K.shape[0]:
        raise ValueError(f"K_test must have {K.shape[0]} columns (one per training row), "
                         f"got shape {tuple(K_test.shape)}")
    A = K_test - K.mean(axis=0, keepdims=True)
    return A - A.mean(axis=1, keepdims=True)


def _kpc_basis(K, P: int):
    """Top ``P`` eigenpairs of ``K̂`` (descending) with eigenvalues clipped at a
    relative 1e-12 (rank-deficient kernels give zero columns, not NaN)."""
    Kc = center_kernel(K)
    vals, vecs = lapack.eigh((Kc + Kc.T) / 2)
    vals, vecs = vals[::-1][:P], vecs[:, ::-1][:, :P]
    floor = jnp.finfo(vals.dtype).eps * 10 * jnp.maximum(vals[0], 0) * K.shape[0]
    keep = vals > floor
    sq = jnp.where(keep, jnp.sqrt(jnp.where(keep, vals, 1)), 0)
    inv = jnp.where(keep, 1 / jnp.where(keep, sq, 1), 0)
    return vals, vecs * sq, vecs * inv, keep    # Z, the test projection V Λ^{-1/2}, kept


@timed
def kpcrank_path(K, y, graph: Graph, *, components: int, lam=0.0,
                 K_valid=None) -> KPCPath:
    r"""KPCRank / KPCR for every number of components ``p = 1..components``
    from one eigendecomposition and one Cholesky factor (docs/math.md).

    Args:
      K: ``[m, m]`` training kernel (uncentred; centring is done here).
      y: ``[m]``; ``None`` for a :class:`PreferenceGraph`.
      graph: query graph (KPCRank), ``identity_graph`` (KPCR) or preference edges.
      components: ``P`` (static), at most ``m``.
      lam: optional ridge ``λ >= 0`` added to :math:`Z^T L Z` (0 = the seed's
        unregularized fit; components beyond the rank of ``L Z`` need ρ > 0).
      K_valid: ``[m_v, m]`` uncentred validation kernel, for selecting ``p``
        (e.g. with :func:`select_lambda` over ``components``).

    Returns:
      :class:`KPCPath`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=5, seed=0)
      >>> K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.1), d.X))
      >>> path = kpcrank_path(K, d.y, rj.query_graph(d.qid), components=20, K_valid=K)
      >>> path.weights.shape, path.valid_scores.shape
      ((20, 20), (20, 210))
    """
    K, y = check_kernel_matrix(K, y, graph)
    if y is not None and y.ndim != 1:
        raise ValueError(f"KPCRank fits one output: y must be [m], got shape {tuple(y.shape)} "
                         "(call it per column)")
    m = K.shape[0]
    P = check_count(components, "components")
    if P > m:
        raise ValueError(f"components must be between 1 and {m}, got {P}")
    check_positive(lam, allow_zero=True, scalar=True)
    if K_valid is not None:
        K_valid = check_test_matrix(K_valid, m, "K_valid", "columns (training rows)")
    return _kpc_core(K, y, graph, lam, K_valid, P)


@partial(jax.jit, static_argnums=5)
def _kpc_core(K, y, graph, lam, K_valid, P):
    vals, Z, proj, keep = _kpc_basis(K, P)
    eye = jnp.eye(P, dtype=K.dtype)
    M = jnp.matmul(Z.T, graph.mv(Z), precision=HI) + lam * eye
    b = jnp.matmul(Z.T, graph.rhs(y, K.dtype), precision=HI)
    # components beyond the kernel's rank (zero columns of Z) get weight 0, not NaN
    both = keep[:, None] & keep[None, :]
    M = jnp.where(both, M, eye)
    b = jnp.where(keep.reshape(keep.shape + (1,) * (b.ndim - 1)), b, 0)
    W = _nested_cholesky_path(M, b)
    A = mm(W, proj.T)                               # [P, m] coefficients on centred kernels
    A = A - A.mean(axis=1, keepdims=True)        # C a: scores = K_t (C a) - k̄ . (C a)
    offset = mm(A, K.mean(axis=0))
    valid = None if K_valid is None else (mm(K_valid, A.T) - offset).T
    return nan_unless(finite_positive(lam, allow_zero=True),
                      KPCPath(jnp.arange(1, P + 1), W, A, offset, vals, valid))


def _nested_cholesky_path(M, b):
    r""":math:`W[p-1, :p] = M[:p, :p]^{-1} b[:p]` for every ``p`` from one Cholesky."""
    P = M.shape[0]
    # directions that the graph does not see (L Z e = 0, e.g. size-1 queries with λ = 0)
    # have a zero pivot: a rounding-level ridge keeps the factor finite and their weight 0
    M = (M + M.T) / 2
    jitter = P * jnp.finfo(M.dtype).eps * jnp.max(jnp.abs(jnp.diag(M)))
    R = lapack.cholesky(M + jitter * jnp.eye(P, dtype=M.dtype))
    ok = jnp.diag(R) ** 2 > 4 * jitter
    R = jnp.where(ok[:, None] | ok[None, :], R, jnp.eye(P, dtype=R.dtype))
    t = lapack.solve_triangular(R, b)
    t = jnp.where(ok.reshape(ok.shape + (1,) * (t.ndim - 1)), t, 0)
    idx = jnp.arange(P)

    def one(p):
        mask = idx < p
        Rp = jnp.where(mask[:, None] & mask[None, :], R, jnp.eye(P, dtype=R.dtype))
        return lapack.solve_triangular(Rp, jnp.where(mask, t, 0), trans=True)

    return jax.vmap(one)(idx + 1)


def kpcrank(K, y, graph: Graph, *, components: int, lam=0.0) -> KPCModel:
    """KPCRank (query graph) / KPCR (``identity_graph``) with a fixed number of
    components (Tsivtsivadze et al. §3).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=5, seed=0)
      >>> K = d.X @ d.X.T
      >>> model = kpcrank(K, d.y, rj.query_graph(d.qid), components=5)
      >>> scores = K @ model.coef - model.offset
      >>> bool(rj.pairwise_error(scores, d.y, d.qid) < 0.3)
      True
    """
    path = kpcrank_path(K, y, graph, components=components, lam=lam)
    return KPCModel(path.coef[-1], path.offset[-1])
