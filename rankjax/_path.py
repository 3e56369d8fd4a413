"""Regularization paths: one decomposition, every λ of a grid (SPEC §2.3, §2.4;
seed 001 §3.2, §3.5; seed 000 end of §2).

* primal: ``X^T L X = V Λ V^T``, ``c = V^T X^T L Y``, ``w(λ) = V diag(1/(Λ+λ)) c``;
* dual: ``S K S = U Γ U^T``, ``c = U^T S Y``, ``A(λ) = S U diag(1/(Γ+λ)) c``, with
  ``S = L^{1/2}`` a segment operation for query graphs, or ``L``'s dense
  symmetric root for tie-excluded and preference graphs (then the right-hand
  side is ``S^+ M N`` for edges);
* sparse approximation (basis vectors R): ``K_RR = Z Z^T``; the Nyström features
  ``Φ = K_R^T Z^{-T}`` turn it into a primal path, ``A(λ) = Z^{-T} w(λ)``.

The λ grid is a traced array (changing its values does not recompile) and the
λ axis comes first in every result. Multi-output ``Y [m, k]`` shares the
decomposition: the extra cost is O(k) matrix-vector work per λ.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import sparse

from ._checks import as_float_array, check_lam, check_matrix, check_targets
from ._metrics import _greater_is_better
from ._graph import Graph, PreferenceGraph, has_sqrt, laplacian_dense, laplacian_mv, laplacian_sqrt_mv
from ._kernels import Kernel, kernel_matrix
from ._rankrls import _check_inputs, _rhs, _tdot, primal_system
from ._ridge import eigh_psd, eigh_solve

__all__ = ["PrimalPath", "DualPath", "SparsePath", "rankrls_primal_path", "rankrls_dual_path",
           "rankrls_sparse_path", "select_lambda", "Selection", "nystrom_features"]

_HI = lax.Precision.HIGHEST


class PrimalPath(NamedTuple):
    """Primal solutions for a λ grid.

    Attributes:
      lams: ``[L]``.
      weights: ``[L, n]`` or ``[L, n, k]``.
      train_scores: ``[L, m(, k)]`` fitted training scores, or ``None``.
      valid_scores: ``[L, m_valid(, k)]`` scores of ``X_valid``, or ``None``.
    """

    lams: jax.Array
    weights: jax.Array
    train_scores: Optional[jax.Array]
    valid_scores: Optional[jax.Array]


class DualPath(NamedTuple):
    """Dual solutions for a λ grid: ``coef [L, m(, k)]``, training scores
    ``K A [L, m(, k)]``, and ``K_valid A [L, m_valid(, k)]`` or ``None``."""

    lams: jax.Array
    coef: jax.Array
    train_scores: jax.Array
    valid_scores: Optional[jax.Array]


class SparsePath(NamedTuple):
    """Sparse-approximation solutions: ``coef [L, r(, k)]`` over the basis rows
    ``basis [r]`` (``f(x) = sum_i coef_i k(x, X[basis_i])``), training and
    validation scores as in :class:`PrimalPath`."""

    lams: jax.Array
    coef: jax.Array
    basis: jax.Array
    train_scores: Optional[jax.Array]
    valid_scores: Optional[jax.Array]


def _check_lams(lams):
    lams = as_float_array(lams, "lams")
    if lams.ndim != 1 or lams.shape[0] == 0:
        raise ValueError(f"lams must be a non-empty 1-D grid, got shape {tuple(lams.shape)}")
    check_lam(lams, name="lams")
    return lams


def _scale(c, vals, lam):
    d = 1 / (vals + lam)
    return c * d.reshape(d.shape + (1,) * (c.ndim - 1))


def _eigen_path(G, b, lams):
    """``[L, p(, k)]`` solutions of ``(G + λ I) x = b`` for every λ, from one eigh."""
    eig = eigh_psd(G)
    return jax.vmap(lambda lam: eigh_solve(eig, b, lam))(lams.astype(G.dtype))


def _scores(X, W):
    """``X w(λ)`` for every λ: ``[L, m(, k)]`` in one matrix product."""
    if isinstance(X, sparse.BCOO):
        L = W.shape[0]
        flat = jnp.moveaxis(W, 0, -1).reshape(W.shape[1], -1)    # [n, (k) L]
        out = X @ flat
        return jnp.moveaxis(out.reshape((X.shape[0],) + W.shape[2:] + (L,)), -1, 0)
    return jnp.einsum("mn,ln...->lm...", X, W, precision=_HI)


def rankrls_primal_path(X, y, graph: Graph, *, lams, X_valid=None, train_scores: bool = False,
                        block_size: Optional[int] = None) -> PrimalPath:
    """Primal RankRLS for a whole λ grid from one eigendecomposition (SPEC §2.3).

    ``X^T L X = V Λ V^T`` (O(m n^2 + n^3) once), then
    ``w(λ) = V diag(1/(Λ + λ)) V^T X^T L Y`` for every λ (O(n^2 k) each, vmapped).

    Args:
      X: ``[m, n]`` dense or BCOO.
      y: ``[m]`` or ``[m, k]``; ``None`` for a :class:`PreferenceGraph`.
      graph: any rankjax graph on the ``m`` rows.
      lams: ``[L]`` grid of λ > 0 (traced).
      X_valid: optional ``[m_valid, n]`` rows to score for every λ.
      train_scores: also return the training scores ``[L, m(, k)]``.

    Returns:
      :class:`PrimalPath` with the λ axis first.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> path = rj.rankrls_primal_path(d.X, d.y, rj.query_graph(d.qid), lams=[0.1, 10.])
      >>> path.weights.shape
      (2, 5)
    """
    X, y = _check_inputs(X, y, graph, 1.0)
    lams = _check_lams(lams)
    G, b = primal_system(X, y, graph, block_size=block_size)
    W = _eigen_path(G, b, lams)
    return PrimalPath(lams, W, _scores(X, W) if train_scores else None,
                      None if X_valid is None else _scores(check_matrix(X_valid, "X_valid"), W))


def _dense_root(graph: Graph, dtype):
    """``S = L^{1/2}`` dense, and ``S^+``, from ``eigh(L)`` (O(m^3); ties/edges)."""
    L = laplacian_dense(graph, dtype)
    eig = eigh_psd(L)
    tol = eig.values.max() * L.shape[0] * jnp.finfo(dtype).eps
    root = jnp.sqrt(eig.values)
    inv = jnp.where(eig.values > tol, 1 / jnp.where(eig.values > tol, root, 1), 0)
    S = (eig.vectors * root) @ eig.vectors.T
    S_pinv = (eig.vectors * inv) @ eig.vectors.T
    return (S + S.T) / 2, (S_pinv + S_pinv.T) / 2


def dual_system(K, y, graph: Graph):
    """``(S K S, S-rhs, apply_S)`` of the symmetric dual form (SPEC §2.2)."""
    dtype = K.dtype
    if has_sqrt(graph):
        apply_S = lambda v: laplacian_sqrt_mv(graph, v)  # noqa: E731
        SKS = apply_S(apply_S(K).T)
        return (SKS + SKS.T) / 2, apply_S(y), apply_S
    S, S_pinv = _dense_root(graph, dtype)
    apply_S = lambda v: jnp.matmul(S, v, precision=_HI)  # noqa: E731
    SKS = apply_S(apply_S(K).T)
    if isinstance(graph, PreferenceGraph):
        rhs = jnp.matmul(S_pinv, _rhs(graph, None, dtype), precision=_HI)
    else:
        rhs = apply_S(y)
    return (SKS + SKS.T) / 2, rhs, apply_S


def rankrls_dual_path(K, y, graph: Graph, *, lams, K_valid=None) -> DualPath:
    """Dual RankRLS for a whole λ grid from one eigendecomposition (SPEC §2.3).

    ``S K S = U Γ U^T`` (O(m^3) once), ``A(λ) = S U diag(1/(Γ + λ)) U^T S Y``
    (O(m^2 k) per λ). Every graph type: query graphs use the segment-sum root
    ``S``; tie-excluded and preference graphs a dense root from ``eigh(L)``.

    Args:
      K: ``[m, m]`` training kernel matrix.
      y: ``[m]`` or ``[m, k]``; ``None`` for a :class:`PreferenceGraph`.
      lams: ``[L]`` grid of λ > 0 (traced).
      K_valid: optional ``[m_valid, m]`` kernel between validation and training rows.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=3, seed=0)
      >>> K = rj.kernel_matrix(rj.gaussian_kernel(0.5), d.X)
      >>> rj.rankrls_dual_path(K, d.y, rj.query_graph(d.qid), lams=[0.1, 1., 10.]).coef.shape[0]
      3
    """
    K, y = _check_inputs(K, y, graph, 1.0, "K")
    if isinstance(K, sparse.BCOO) or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a dense square kernel matrix, got shape {tuple(K.shape)}")
    lams = _check_lams(lams)
    SKS, rhs, apply_S = dual_system(K, y, graph)
    B = _eigen_path(SKS, rhs, lams)                              # [L, m(, k)]
    A = jax.vmap(apply_S)(B)
    train = jnp.einsum("ij,lj...->li...", K, A, precision=_HI)
    valid = None
    if K_valid is not None:
        K_valid = check_matrix(K_valid, "K_valid")
        if K_valid.shape[1] != K.shape[0]:
            raise ValueError(f"K_valid must have {K.shape[0]} columns, got {K_valid.shape[1]}")
        valid = jnp.einsum("ij,lj...->li...", K_valid, A, precision=_HI)
    return DualPath(lams, A, train, valid)


def nystrom_features(K_R, K_RR):
    """Nyström map of the sparse approximation (SPEC §2.4): ``Φ = K_R^T Z^{-T}`` with
    ``K_RR = Z Z^T`` (``Z = V Λ^{1/2}``, directions with ``Λ ≈ 0`` dropped), and the
    back-map ``T = Z^{-T}`` so that basis coefficients are ``A = T w``.

    Args:
      K_R: ``[r, m]`` kernel between basis and training rows.
      K_RR: ``[r, r]`` kernel among the basis rows.

    Returns:
      ``(Φ [m, r], T [r, r])``.

    Example:
      >>> import numpy as np
      >>> X = np.random.default_rng(0).standard_normal((6, 2))
      >>> Phi, T = nystrom_features(X[:3] @ X.T, X[:3] @ X[:3].T)
      >>> bool(np.allclose(Phi[:3] @ Phi[:3].T, X[:3] @ X[:3].T, atol=1e-5))
      True
    """
    eig = eigh_psd(K_RR)
    tol = eig.values.max() * K_RR.shape[0] * jnp.finfo(K_RR.dtype).eps
    keep = eig.values > tol
    inv_root = jnp.where(keep, 1 / jnp.sqrt(jnp.where(keep, eig.values, 1)), 0)
    T = eig.vectors * inv_root                                   # Z^{-T} = V Λ^{-1/2}
    return jnp.matmul(K_R.T, T, precision=_HI), T


def basis_rows(X, basis, seed: int = 0):
    """``(basis [r] indices, X[basis] [r, n] dense)``; an int ``basis`` draws that many
    distinct rows with ``seed`` (host side)."""
    m = X.shape[0]
    if isinstance(basis, (int, np.integer)):
        if not 1 <= basis <= m:
            raise ValueError(f"basis must be between 1 and {m} rows, got {basis}")
        basis = np.sort(np.random.default_rng(seed).choice(m, int(basis), replace=False))
    basis = jnp.asarray(basis)
    if basis.ndim != 1 or not jnp.issubdtype(basis.dtype, jnp.integer):
        raise TypeError("basis must be an int or a 1-D integer array of row indices")
    return basis, (X.todense() if isinstance(X, sparse.BCOO) else X)[basis]


def rankrls_sparse_path(X, y, graph: Graph, *, lams, kernel: Kernel, basis, X_valid=None,
                        train_scores: bool = False, block_size: Optional[int] = None,
                        seed: int = 0) -> SparsePath:
    """Sparse-approximation (subset of regressors) RankRLS for a λ grid (SPEC §2.4;
    seed 001 §3.5, eq. 40-42).

    ``f(x) = sum_{i in R} a_i k(x, x_i)`` minimising
    ``(K_R^T a - y)^T L (K_R^T a - y) + λ a^T K_RR a``, i.e.
    ``a = (K_R L K_R^T + λ K_RR)^{-1} K_R L y``. Computed as a primal path on the
    Nyström features ``Φ = K_R^T Z^{-T}``: O(m |R|^2) training, any kernel and graph.

    Args:
      X: ``[m, n]`` training rows.
      y: ``[m]`` or ``[m, k]``; ``None`` for a :class:`PreferenceGraph`.
      graph: any rankjax graph on the ``m`` rows.
      lams: ``[L]`` λ grid.
      kernel: a :class:`Kernel`.
      basis: ``[r]`` row indices of the basis vectors, or an int ``r`` to draw
        ``r`` distinct rows at random with ``seed``.
      X_valid: optional rows to score for every λ.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=4, seed=0)
      >>> p = rj.rankrls_sparse_path(d.X, d.y, rj.query_graph(d.qid), lams=[1., 10.],
      ...                            kernel=rj.gaussian_kernel(0.2), basis=50)
      >>> p.coef.shape
      (2, 50)
    """
    X = check_matrix(X)
    basis, XR = basis_rows(X, basis, seed)
    K_R = kernel_matrix(kernel, XR, X, block_size=block_size)
    Phi, T = nystrom_features(K_R, kernel_matrix(kernel, XR))
    path = rankrls_primal_path(Phi, y, graph, lams=lams, train_scores=train_scores)
    coef = jnp.einsum("rq,lq...->lr...", T, path.weights, precision=_HI)
    valid = None
    if X_valid is not None:
        Kv = kernel_matrix(kernel, check_matrix(X_valid, "X_valid"), XR, block_size=block_size)
        valid = jnp.einsum("vr,lr...->lv...", Kv, coef, precision=_HI)
    return SparsePath(path.lams, coef, basis, path.train_scores, valid)


# ----------------------------------------------------------------------------
# selection

class Selection(NamedTuple):
    """Validation table and choice.

    Attributes:
      table: ``[L]`` or ``[L, k]`` metric value of every λ (and output).
      best_index: index of the chosen λ (``[]`` or ``[k]``).
      best_lam: the chosen λ (``[]`` or ``[k]``).
    """

    table: jax.Array
    best_index: jax.Array
    best_lam: jax.Array


def select_lambda(lams, scores, y, qid=None, *, metric: Callable, num_queries: Optional[int] = None,
                  greater_is_better: Optional[bool] = None, **metric_kwargs) -> Selection:
    """Scores every λ (and every output) of a path on validation data with any
    rankjax metric in one vmapped call, and picks the best λ per output.

    Args:
      lams: ``[L]``.
      scores: ``[L, m]`` or ``[L, m, k]`` validation scores (e.g. ``path.valid_scores``).
      y: ``[m]`` or ``[m, k]`` validation labels (one column per output).
      qid: ``[m]`` query ids (``None``: one ranking).
      metric: e.g. ``rankjax.ndcg`` or ``rankjax.pairwise_error``.
      greater_is_better: inferred from the metric's name when ``None`` (errors
        are minimised, everything else maximised).
      **metric_kwargs: passed to the metric (``k=10``, ``threshold=2``, ...).

    Returns:
      :class:`Selection`. Ties go to the first (smallest-index) λ.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=5, seed=0)
      >>> v = rj.make_ranking_data(10, num_features=5, seed=1)
      >>> lams = np.array([0.01, 1., 100.])
      >>> p = rj.rankrls_primal_path(d.X, d.y, rj.query_graph(d.qid), lams=lams, X_valid=v.X)
      >>> sel = rj.select_lambda(lams, p.valid_scores, v.y, v.qid, metric=rj.ndcg, k=10)
      >>> sel.table.shape
      (3,)
    """
    from ._checks import resolve_segments
    lams = as_float_array(lams, "lams")
    scores = as_float_array(scores, "scores")
    if scores.ndim not in (2, 3) or scores.shape[0] != lams.shape[0]:
        raise ValueError(f"scores must be [L, m] or [L, m, k] with L={lams.shape[0]}, "
                         f"got {tuple(scores.shape)}")
    m = scores.shape[1]
    y = check_targets(y, m, "y")
    seg, Q = resolve_segments(qid, num_queries, m)
    if greater_is_better is None:
        greater_is_better = _greater_is_better(metric)

    def one(f, yy):
        return metric(f, yy, seg, num_queries=Q, **metric_kwargs)

    if scores.ndim == 2:
        yy = y if y.ndim == 1 else y[:, 0]
        table = jax.vmap(one, in_axes=(0, None))(scores, yy)
    else:
        Y = y if y.ndim == 2 else jnp.broadcast_to(y[:, None], scores.shape[1:])
        table = jax.vmap(jax.vmap(one, in_axes=(1, 1)), in_axes=(0, None))(scores, Y)
    crit = jnp.where(jnp.isnan(table), -jnp.inf if greater_is_better else jnp.inf, table)
    best = jnp.argmax(crit, axis=0) if greater_is_better else jnp.argmin(crit, axis=0)
    return Selection(table, best, lams[best])
