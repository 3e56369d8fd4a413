"""RankRLS by conjugate gradient (Airola et al. 2010, §3): the primal system
``(X^T L X + λ I) w = X^T L y`` with two sparse matvecs per iteration, and the dual
``(R^T K R + λ I) B = R^T y`` (``R R^T = L``), on the loop of :mod:`rankjax.solvers.cg_loop`.
"""
from __future__ import annotations

from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp

from .._core.products import HI, mm
from .cg_loop import (
    CG,
    CGResult,
    check_options,
    check_x0,
    differentiable_cg,
    loop_keywords,
    valid_fn_of,
    valid_set)
from .._core.checks import (check_positive, check_matrix, check_symmetric, is_concrete)
from ..graphs.graph import Graph, check_graph
from .._core.sparse import is_bcoo, is_scipy_sparse, to_csr


def _check_y(y, graph, fn):
    y = graph.check_labels(y)
    if y is not None and y.ndim != 1:
        raise ValueError(f"{fn} solves one output; vmap over the columns of y")
    return y


def as_operator(X, name):
    """Dense, BCOO (converted to :class:`CSRMatrix` when concrete), scipy.sparse
    (converted to CSR directly) or CSRMatrix."""
    if is_scipy_sparse(X):
        X = to_csr(X)
    X = check_matrix(X, name)
    if is_bcoo(X) and is_concrete(X):
        X = to_csr(X)
    return X


@jax.jit
def _cg_primal_core(X, y, graph, lam, valid, x0, options):
    b = mm(X.T, graph.rhs(y, X.dtype))
    valid_fn = valid_fn_of(valid, lambda w: mm(valid.M, w))
    return differentiable_cg(lambda v: mm(X.T, graph.mv(mm(X, v))), b, options, lam, x0, valid_fn)


@loop_keywords
def rankrls_cg(X, y, graph: Graph, *, lam=0.0, options: Optional[CG] = None, valid=None,
               metric="pairwise_error", metric_kwargs=None, higher_is_better=None,
               x0=None) -> CGResult:
    """Primal RankRLS by matrix-free CG (docs/math.md; Airola et al. 2010 §3): solves
    ``(X^T L X + λ I) w = X^T L y`` (edges: ``X^T M N``) with
    ``A v = X^T (L (X v))`` — two sparse matvecs and O(m) segment work per
    iteration, O(m s + l) for preference edges; never an ``[l, n]`` or
    ``[m, m]`` array. The three methods of Airola et al. 2010 Table 1: Tikhonov
    (``lam > 0``, no ``valid``), early stopping (``lam = 0`` with ``valid``) and
    hybrid (both).

    Sparse ``X``: pass a :class:`CSRMatrix` (:func:`to_csr`, built once); a
    concrete BCOO is converted on every call. Under ``vmap`` over λ or over the
    columns of ``y`` the products become one CSR matrix product per iteration.

    Args:
      X: ``[m, n]`` dense, :class:`CSRMatrix` or BCOO.
      y: ``[m]`` scores; ``None`` for a :class:`PreferenceGraph`. (For several
        outputs vmap over the columns.)
      graph: any rankjax graph on the ``m`` rows.
      lam: λ >= 0 (traced; vmap over it).
      valid: ``(X_valid, y_valid, graph_valid)`` to evaluate a criterion on
        ``X_valid @ w`` after every iteration and stop early (see
        :func:`validation_criterion`); ``None``: no early stopping.
      options: a :class:`~rankjax.CG` (tolerance, iteration cap, patience, ...).
      metric: the validation criterion (default pairwise error); ``metric_kwargs`` a
        dict of its options (``{"k": 10}``); ``higher_is_better`` its direction.
      x0: warm start.

    Returns:
      :class:`CGResult` with ``x`` = ``w [n]``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> v = rj.make_ranking_data(10, num_features=5, seed=1)
      >>> g = rj.query_graph(d.qid)
      >>> r = rankrls_cg(d.X, d.y, g, lam=1.0, options=rj.CG(tol=1e-10))
      >>> w = rj.solvers.models.rankrls_primal(d.X, d.y, g, lam=1.0).weights
      >>> bool(np.allclose(r.weights, w, rtol=1e-4, atol=1e-5))
      True
      >>> r = rankrls_cg(d.X, d.y, g, lam=0.0, valid=(v.X, v.y, rj.query_graph(v.qid)))
      >>> bool(r.valid_history[r.best_iteration] == np.nanmin(r.valid_history))
      True
    """
    X = as_operator(X, "X")
    check_graph(graph, X.shape[0])
    y = _check_y(y, graph, "rankrls_cg")
    check_positive(lam, allow_zero=True, scalar=True)
    n = X.shape[1]
    valid = valid_set(valid, "X_valid", metric, higher_is_better, metric_kwargs, "rankrls_cg",
                      partial(validation_rows, n=n))
    return _cg_primal_core(X, y, graph, lam, valid, check_x0(x0, n), check_options(options))


def validation_rows(Xv, n):
    """``X_valid`` as an operator (:func:`as_operator`) with the ``n`` columns of ``X``."""
    Xv = as_operator(Xv, "X_valid")
    if Xv.shape[1] != n:
        raise ValueError(f"X_valid has {Xv.shape[1]} columns but X has {n}")
    return Xv


def _kernel_operator(K, m, name):
    """``(K, None)`` for a kernel matrix ``[*, m]``, ``(None, fn)`` for a matvec callable."""
    if callable(K) and not hasattr(K, "shape"):
        return None, K
    K = check_matrix(K, name)
    if K.shape[1] != m:
        raise ValueError(f"{name} must be [*, {m}] or a callable, got shape {tuple(K.shape)}")
    return K, None


@partial(jax.jit, static_argnames="kfn")
def _cg_dual_core(K, y, graph, lam, valid, x0, options, kfn):
    R, Rt, rhs = graph.factor()
    kmv = kfn or (lambda a: jnp.matmul(K, a, precision=HI))
    kvmv = None if valid is None else (valid.fn or (lambda a: jnp.matmul(valid.M, a, precision=HI)))
    valid_fn = valid_fn_of(valid, lambda B: kvmv(R(B)))
    b = rhs(y)
    dtype = b.dtype if jnp.issubdtype(b.dtype, jnp.floating) else jnp.result_type(float)
    res = differentiable_cg(lambda v: Rt(kmv(R(v))), b.astype(dtype), options, lam, x0, valid_fn)
    return res._replace(weights=R(res.weights))


@loop_keywords
def rankrls_cg_dual(K, y, graph: Graph, *, lam=0.0, options: Optional[CG] = None, valid=None,
                    metric="pairwise_error", metric_kwargs=None, higher_is_better=None,
                    x0=None) -> CGResult:
    """Dual (kernel) RankRLS by CG on the symmetric system (docs/math.md):
    ``(R^T K R + λ I) B = R^T y`` and ``A = R B``, with ``R R^T = L`` — ``R = S``
    (``L^{1/2}``, a segment operation) for query graphs, ``R = M`` (the incidence
    matrix, ``B`` lives on the ``l`` edges and the rhs is ``N``) for preference
    edges, ``R = I`` for RLS. ``A`` equals :func:`rankrls_dual`'s
    ``(L K + λ I)^{-1} L y``. One kernel matvec and O(m + l) work per iteration.

    Args:
      K: ``[m, m]`` kernel matrix, or a callable ``a [m] -> K a`` for matrix-free
        kernels (it must accept vmapped inputs when you vmap).
      y: ``[m]``; ``None`` for a :class:`PreferenceGraph`.
      graph: a query graph without tie exclusion, a preference graph or the
        identity graph.
      lam: λ >= 0.
      valid: ``(K_valid, y_valid, graph_valid)``, ``K_valid`` ``[m_v, m]`` or a
        callable ``a -> K_valid a``; see :func:`validation_criterion`.
      x0: warm start for ``B`` (root space: ``[m]``, or ``[l]`` for edges).
      options, metric, metric_kwargs, higher_is_better: as in :func:`rankrls_cg`.

    Returns:
      :class:`CGResult` with ``x`` = the dual coefficients ``A [m]``
      (predict with ``K_test @ A``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=5, seed=0)
      >>> K = d.X @ d.X.T
      >>> g = rj.query_graph(d.qid)
      >>> r = rankrls_cg_dual(K, d.y, g, lam=1.0, options=rj.CG(tol=1e-12))
      >>> bool(np.allclose(r.weights, rj.solvers.models.rankrls_dual(K, d.y, g, lam=1.0).coef, atol=1e-8))
      True
    """
    check_graph(graph)
    m = graph.num_rows
    K, kfn = _kernel_operator(K, m, "K")
    if isinstance(K, jax.Array):
        check_symmetric(K)
    y = _check_y(y, graph, "rankrls_cg_dual")
    check_positive(lam, allow_zero=True, scalar=True)

    def kernel_rows(Kv):
        Kv, fn = _kernel_operator(Kv, m, "K_valid")
        return fn or Kv
    valid = valid_set(valid, "K_valid", metric, higher_is_better, metric_kwargs,
                      "rankrls_cg_dual", kernel_rows)
    return _cg_dual_core(K, y, graph, lam, valid, check_x0(x0, m), check_options(options), kfn)
