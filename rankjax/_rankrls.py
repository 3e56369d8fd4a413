"""Closed-form RankRLS: primal (linear), dual (kernel) and RLS (SPEC §2.1, 2.2, 2.5).

The objective (seed 001 eq. 28 / seed 004 eq. 6) is
``(f - y)^T L (f - y) + λ ||w||^2`` for scored data, or
``||N - M^T f||^2 + λ ||w||^2`` for explicit preference edges, with ``L`` any
graph of :mod:`rankjax._graph` (``IdentityGraph`` gives RLS regression).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import sparse

from ._checks import check_lam, check_matrix, check_targets
from ._graph import (Graph, IdentityGraph, PreferenceGraph, QueryGraph, has_sqrt,
                     incidence_mv, laplacian_mv, laplacian_sqrt_mv)
import numpy as np

from ._kernels import Kernel, kernel_matrix
from ._ridge import ridge_solve

__all__ = ["LinearModel", "DualModel", "KernelModel", "rankrls_primal", "rankrls_dual",
           "rankrls_kernel", "predict", "primal_system"]

_HI = lax.Precision.HIGHEST


class LinearModel(NamedTuple):
    """Linear scoring ``f(x) = x^T w``; ``weights`` ``[n]`` or ``[n, k]``."""

    weights: jax.Array


class DualModel(NamedTuple):
    """Dual coefficients ``A`` (``[m]`` or ``[m, k]``): ``f = K_test A``."""

    coef: jax.Array


class KernelModel(NamedTuple):
    """Kernel scoring ``f(x) = sum_i A_i k(x, x_i)`` with its training rows and kernel."""

    coef: jax.Array
    X_train: jax.Array
    kernel: Kernel


def _check_graph(graph, m: int):
    if not isinstance(graph, (QueryGraph, PreferenceGraph, IdentityGraph)):
        raise TypeError(f"graph must be a rankjax graph (query_graph, preference_graph, "
                        f"identity_graph), got {type(graph).__name__}")
    if graph.num_rows != m:
        raise ValueError(f"graph is defined on {graph.num_rows} rows but the data has {m}")


def _check_inputs(X, y, graph, lam, name="X"):
    X = check_matrix(X, name)
    m = X.shape[0]
    _check_graph(graph, m)
    if isinstance(graph, PreferenceGraph):
        if y is not None:
            raise ValueError("y must be None with a PreferenceGraph: the edge targets come "
                             "from the graph's magnitudes (graph.target)")
    else:
        y = check_targets(y, m, "y")
    check_lam(lam)
    return X, y


def _centre_for(graph, X):
    """Subtract a constant that ``L`` annihilates, for float32 accuracy of ``X^T L X``."""
    if isinstance(graph, QueryGraph):
        ones = jnp.ones(X.shape[:1], X.dtype)
        n = jax.ops.segment_sum(ones, graph.seg, num_segments=graph.num_queries)
        mean = jax.ops.segment_sum(X, graph.seg, num_segments=graph.num_queries)
        return X - (mean / jnp.maximum(n, 1)[:, None])[graph.seg]
    if isinstance(graph, PreferenceGraph):
        return X - jnp.mean(X, axis=0)
    return X


def _rhs(graph, y, dtype):
    """``L y`` for scored data, ``M N`` for preference edges (``[m]`` or ``[m, k]``)."""
    if isinstance(graph, PreferenceGraph):
        return incidence_mv(graph, graph.target.astype(dtype))
    return laplacian_mv(graph, y)


def _bcoo_gram(X: sparse.BCOO, graph, block_size: Optional[int]):
    """``X^T L X`` for sparse X without sparse-sparse products: column blocks of X are
    densified one at a time, ``G[:, blk] = X^T (L X[:, blk])``. O(nnz n) work,
    O(m · block) extra memory."""
    m, n = X.shape
    b = block_size or max(1, min(n, (1 << 22) // max(m, 1)))
    nb = -(-n // b)
    rows, cols = X.indices[:, 0], X.indices[:, 1]

    def one(start):
        local = cols - start
        inside = (local >= 0) & (local < b)
        dense = jnp.zeros((m, b), X.dtype).at[rows, jnp.where(inside, local, b)].add(
            jnp.where(inside, X.data, 0), mode="drop")
        return X.T @ laplacian_mv(graph, dense)

    G = lax.map(one, jnp.arange(nb) * b)            # [nb, n, b]
    G = jnp.moveaxis(G, 0, 1).reshape(n, nb * b)[:, :n]
    return (G + G.T) / 2


def _tdot(Z, t):
    """``Z^T t`` as a contraction over rows (``Z.T @ t`` is several times slower on CPU
    when XLA fuses the producer of ``Z`` into a transposed matrix-vector product)."""
    return jnp.einsum("mn,m...->n...", Z, t, precision=_HI)


def primal_system(X, y, graph: Graph, *, block_size: Optional[int] = None):
    """The normal equations of primal RankRLS: ``G = X^T L X``, ``b = X^T L y``.

    For a query graph without tie exclusion (and RLS) the rows are first
    transformed by ``S = L^{1/2}`` (query-wise centring) and ``G = Z^T Z``
    (accurate in float32). Otherwise ``G = X_c^T (L X_c)`` with ``X_c`` centred
    by a constant ``L`` annihilates. Sparse (BCOO) ``X`` goes through dense
    column blocks of ``block_size`` columns. With a :class:`PreferenceGraph`,
    ``b = X^T M N``. Cost O(m n^2) (dense), never O(m^2).

    Returns:
      ``(G [n, n], b [n] or [n, k])``.

    Example:
      >>> import rankjax as rj
      >>> X = np.array([[1., 0.], [0., 1.], [2., 2.]])
      >>> G, b = rj.primal_system(X, np.array([1., 0., 0.]), rj.global_graph(3))
      >>> print(np.round(np.asarray(G), 4)); print(np.round(np.asarray(b), 4))
      [[6. 3.]
       [3. 6.]]
      [ 0. -3.]
    """
    dtype = X.dtype
    if isinstance(X, sparse.BCOO):
        G = _bcoo_gram(X, graph, block_size)
        return G, X.T @ _rhs(graph, y, dtype)
    if has_sqrt(graph):
        Z = laplacian_sqrt_mv(graph, X)
        t = laplacian_sqrt_mv(graph, y)
        return jnp.matmul(Z.T, Z, precision=_HI), _tdot(Z, t)
    Xc = _centre_for(graph, X)
    G = jnp.matmul(Xc.T, laplacian_mv(graph, Xc), precision=_HI)
    b = _tdot(Xc, _rhs(graph, y, dtype))
    return (G + G.T) / 2, b


def rankrls_primal(X, y, graph: Graph, *, lam, block_size: Optional[int] = None) -> LinearModel:
    """Primal (linear) RankRLS, one λ (SPEC §2.1; seed 001 eq. 28, seed 004 eq. 6).

    ``w = (X^T L X + λ I)^{-1} X^T L y`` — or ``(X^T M M^T X + λ I)^{-1} X^T M N``
    for a :class:`PreferenceGraph` — minimising ``(Xw - y)^T L (Xw - y) + λ ||w||^2``.
    No bias: a constant feature cancels in every pair.

    Args:
      X: ``[m, n]`` dense array or ``jax.experimental.sparse.BCOO``.
      y: ``[m]`` or ``[m, k]`` scores (k outputs learned at once); ``None`` for
        a :class:`PreferenceGraph` (its targets are in the graph).
      graph: a query, preference or identity graph on the ``m`` rows.
      lam: λ > 0 (may be traced).
      block_size: columns densified at a time for sparse ``X``.

    Returns:
      :class:`LinearModel` with ``weights`` ``[n]`` or ``[n, k]`` (dtype of X).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[1., 0.], [0., 1.], [1., 1.], [2., 0.]])
      >>> y, qid = np.array([1., 0., 2., 1.]), np.array([0, 0, 0, 1])
      >>> model = rj.rankrls_primal(X, y, rj.query_graph(qid), lam=0.1)
      >>> print(np.round(np.asarray(model.weights), 4))
      [1.6084 0.6993]
    """
    X, y = _check_inputs(X, y, graph, lam)
    G, b = primal_system(X, y, graph, block_size=block_size)
    return LinearModel(ridge_solve(G, b, jnp.asarray(lam, G.dtype)))


def rankrls_dual(K, y, graph: Graph, *, lam) -> DualModel:
    """Dual (kernel) RankRLS on a kernel matrix, one λ (SPEC §2.2; seed 000 Thm 1,
    seed 001 eq. 17).

    ``A = (L K + λ I)^{-1} L y``. For a query graph without tie exclusion it is
    solved in the symmetric form ``A = S (S K S + λ I)^{-1} S y`` (Cholesky);
    otherwise (ties excluded, preference edges with rhs ``M N``) by an LU solve of
    ``L K + λ I``. O(m^3).

    Args:
      K: ``[m, m]`` symmetric PSD kernel matrix of the training rows (a
        precomputed kernel is just this).
      y: ``[m]`` or ``[m, k]``; ``None`` for a :class:`PreferenceGraph`.
      graph: a graph on the ``m`` rows.
      lam: λ > 0.

    Returns:
      :class:`DualModel` with ``coef`` ``A``; predict with ``K_test @ coef``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[1., 0.], [0., 1.], [1., 1.], [2., 0.]])
      >>> y, qid = np.array([1., 0., 2., 1.]), np.array([0, 0, 0, 1])
      >>> a = rj.rankrls_dual(X @ X.T, y, rj.query_graph(qid), lam=0.1).coef
      >>> print(np.round(np.asarray(X.T @ a), 4))   # equals the primal weights
      [1.6084 0.6993]
    """
    K, y = _check_inputs(K, y, graph, lam, "K")
    if isinstance(K, sparse.BCOO):
        raise TypeError("K must be a dense kernel matrix")
    m = K.shape[0]
    if K.shape != (m, m):
        raise ValueError(f"K must be square [m, m], got {K.shape}")
    lam = jnp.asarray(lam, K.dtype)
    if has_sqrt(graph):
        SK = laplacian_sqrt_mv(graph, K)
        SKS = laplacian_sqrt_mv(graph, SK.T)
        B = ridge_solve((SKS + SKS.T) / 2, laplacian_sqrt_mv(graph, y), lam)
        return DualModel(laplacian_sqrt_mv(graph, B))
    LK = laplacian_mv(graph, K)
    return DualModel(jnp.linalg.solve(LK + lam * jnp.eye(m, dtype=K.dtype), _rhs(graph, y, K.dtype)))


def rankrls_kernel(X, y, graph: Graph, *, lam, kernel: Kernel,
                   block_size: Optional[int] = None) -> KernelModel:
    """Kernel RankRLS from features: evaluates ``K = k(X, X)`` then :func:`rankrls_dual`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0., 1., 2., 3.])
      >>> model = rj.rankrls_kernel(X, y, rj.global_graph(4), lam=0.01,
      ...                           kernel=rj.gaussian_kernel(0.5))
      >>> f = rj.predict(model, np.array([[0.5], [2.5]]))
      >>> bool(f[1] > f[0])
      True
    """
    X = check_matrix(X)
    K = kernel_matrix(kernel, X, block_size=block_size)
    model = rankrls_dual(K, y, graph, lam=lam)
    return KernelModel(model.coef, X, kernel)


def predict(model, X, *, block_size: Optional[int] = None):
    """Scores of new rows.

    Args:
      model: :class:`LinearModel` (``X`` is ``[m_test, n]``, dense or BCOO),
        :class:`KernelModel` (``X`` is ``[m_test, n]``; the test kernel is
        evaluated ``block_size`` rows at a time) or :class:`DualModel` (``X`` is
        the test kernel ``[m_test, m]``).

    Returns:
      ``[m_test]`` or ``[m_test, k]`` scores.

    Example:
      >>> print(np.asarray(predict(LinearModel(np.array([1., -1.])), np.array([[2., 1.]]))))
      [1.]
    """
    if isinstance(model, LinearModel):
        X = check_matrix(X)
        if X.shape[1] != model.weights.shape[0]:
            raise ValueError(f"X has {X.shape[1]} features, the model {model.weights.shape[0]}")
        if isinstance(X, sparse.BCOO):
            return X @ model.weights
        return jnp.matmul(X, model.weights, precision=_HI)
    if isinstance(model, KernelModel):
        X = check_matrix(X)
        Kt = kernel_matrix(model.kernel, X, model.X_train, block_size=block_size)
        return jnp.matmul(Kt, model.coef, precision=_HI)
    if isinstance(model, DualModel):
        X = check_matrix(X, "K_test")
        if X.shape[1] != model.coef.shape[0]:
            raise ValueError(f"K_test has {X.shape[1]} columns, the model {model.coef.shape[0]} rows")
        return jnp.matmul(X, model.coef, precision=_HI)
    raise TypeError(f"model must be a LinearModel, KernelModel or DualModel, got {type(model).__name__}")
