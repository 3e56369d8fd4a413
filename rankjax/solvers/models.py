"""Closed-form RankRLS: primal (linear), dual (kernel) and RLS; the model types and
the one :func:`predict` (``docs/math.md`` §2).

The objective (Pahikkala et al. 2009, eq. 28; Airola et al. 2010, eq. 6) is
``(f - y)^T L (f - y) + λ ||w||^2`` for scored data, or
``||N - M^T f||^2 + λ ||w||^2`` for explicit preference edges, with ``L`` any
graph of :mod:`rankjax.graphs.graph` (``IdentityGraph`` gives RLS regression).

Every public function checks its inputs on the host and then calls a
module-level ``jax.jit`` core, so a second call with new values of the same
shapes compiles nothing.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from .._core.log import timed
from .._core.checks import (
    check_gram,
    check_positive,
    check_matrix,
    check_symmetric,
    is_concrete,
    lam_ok,
    nan_unless)
from .._core.memory import compute_dtype, kernel_plan
from .._core.resolved import warn_unresolved
from ..graphs.graph import Graph, check_problem
from ..kernels.kernel import Kernel, kernel_matrix
from .ridge import RESOLVE_RTOL, dual_system, primal_system, ridge_solve, ridge_solve_checked
from .._core.sparse import as_dense, is_bcoo, matmul
from .._core.types import saveable

__all__ = ["LinearModel", "DualModel", "KernelModel", "rankrls_primal", "rankrls_dual",
           "rankrls_kernel", "predict", "check_test_matrix", "check_kernel_matrix",
           "linear_scores", "path_scores"]


def check_test_matrix(X, n: int, name: str = "X", what: str = "features"):
    """``X`` a finite ``[m_test, n]`` matrix (dense or BCOO) for a model of ``n`` inputs."""
    X = check_matrix(X, name)
    if X.shape[1] != n:
        raise ValueError(f"{name} has {X.shape[1]} {what} but the model has {n}")
    return X


_matmul = jax.jit(matmul)


def linear_scores(X, W):
    """``X W`` for ``W [n(, k)]`` (jitted; dense or BCOO ``X``)."""
    return _matmul(X, W)


@jax.jit
def path_scores(X, W):
    """``X w(λ)`` for every λ of a path ``W [L, n(, k)]``: ``[L, m(, k)]`` in one product."""
    L = W.shape[0]
    flat = jnp.moveaxis(W, 0, -1).reshape(W.shape[1], -1)            # [n, (k) L]
    out = _matmul(X, flat)
    return jnp.moveaxis(out.reshape((X.shape[0],) + W.shape[2:] + (L,)), -1, 0)


def columns_of(field: str, axis: int) -> property:
    """The ``num_features`` of a model: the size of ``axis`` of its array ``field`` (the
    columns of the rows it scores; the command line reads files with it)."""
    return property(lambda self: int(getattr(self, field).shape[axis]))


@saveable
class LinearModel(NamedTuple):
    """Linear scoring ``f(x) = x^T w``; ``weights`` ``[n]`` or ``[n, k]``."""

    weights: jax.Array

    num_features = columns_of("weights", 0)          # columns of the rows it scores

    def predict(self, X):
        return linear_scores(check_test_matrix(X, self.weights.shape[0]), self.weights)


@saveable
class DualModel(NamedTuple):
    """Dual coefficients ``A`` (``[m]`` or ``[m, k]``): ``f = K_test A``."""

    coef: jax.Array

    def predict(self, K_test):
        K_test = check_test_matrix(K_test, self.coef.shape[0], "K_test", "columns (training rows)")
        return _matmul(K_test, self.coef)


@saveable
class KernelModel(NamedTuple):
    """Kernel scoring ``f(x) = sum_i A_i k(x, x_i)`` with its training rows and kernel."""

    coef: jax.Array
    X_train: jax.Array
    kernel: Kernel

    num_features = columns_of("X_train", 1)          # columns of the rows it scores

    def predict(self, X, block_size: Optional[int] = None):
        X = check_test_matrix(X, self.X_train.shape[1])
        Kt = kernel_matrix(self.kernel, X, self.X_train, block_size=block_size)
        return linear_scores(Kt, self.coef)


@saveable
class ScaledModel(NamedTuple):
    """A model of rows scaled per feature (learned ARD scales, :func:`rankjax.tune`):
    ``predict(X) = model.predict(X * scales)``; ``scales [n]``.

    Example:
      >>> import numpy as np
      >>> m = ScaledModel(np.array([2., 1.]), LinearModel(np.array([1., 1.])))
      >>> print(np.asarray(m.predict(np.array([[1., 1.]]))))
      [3.]
    """

    scales: jax.Array
    model: object

    num_features = columns_of("scales", 0)          # columns of the rows it scores

    def predict(self, X, block_size: Optional[int] = None):
        X = check_test_matrix(X, self.scales.shape[0])
        kw = {} if block_size is None else {"block_size": block_size}
        return predict(self.model, scale_rows(as_dense(X), self.scales), **kw)


@jax.jit
def scale_rows(X, s):
    """``X diag(s)``: rows scaled per feature."""
    return X * s


@jax.jit
def _primal_core(X, y, graph, lam):
    G, b = primal_system(X, y, graph)
    return nan_unless(lam_ok(lam), ridge_solve(G, b, jnp.asarray(lam, G.dtype)))


def rankrls_primal(X, y, graph: Graph, *, lam) -> LinearModel:
    """Primal (linear) RankRLS, one λ (Pahikkala et al. 2009, eq. 28; Airola et al.
    2010, eq. 6).

    ``w = (X^T L X + λ I)^{-1} X^T L y`` — or ``(X^T M M^T X + λ I)^{-1} X^T M N``
    for a :class:`PreferenceGraph` — minimising ``(Xw - y)^T L (Xw - y) + λ ||w||^2``.
    No bias: a constant feature cancels in every pair. Cost O(m n^2 + n^3).

    Args:
      X: ``[m, n]`` dense array or ``jax.experimental.sparse.BCOO``.
      y: ``[m]`` or ``[m, k]`` scores (k outputs learned at once); ``None`` for
        a :class:`PreferenceGraph` (its targets are in the graph).
      graph: a query, preference or identity graph on the ``m`` rows.
      lam: scalar λ > 0 (may be traced; use :func:`rankrls_primal_path` for a grid).

    Returns:
      :class:`LinearModel` with ``weights`` ``[n]`` or ``[n, k]`` in the numpy promotion
      of ``X``'s and ``y``'s dtypes (float32 ``X`` with float64 ``y`` and x64 on: float64;
      cast ``y`` to float32 to compute in float32).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[1., 0.], [0., 1.], [1., 1.], [2., 0.]])
      >>> y, qid = np.array([1., 0., 2., 1.]), np.array([0, 0, 0, 1])
      >>> model = rankrls_primal(X, y, rj.query_graph(qid), lam=0.1)
      >>> print(np.round(np.asarray(model.weights), 4))
      [1.6084 0.6993]
    """
    X, y = check_problem(X, y, graph)
    check_gram(X)
    check_positive(lam, scalar=True)
    return primal_model(X, y, graph, lam)


def primal_model(X, y, graph, lam, where="rankrls_primal") -> LinearModel:
    """:func:`rankrls_primal` on checked inputs."""
    w = _primal_core(X, y, graph, lam)
    warn_unresolved(w, lam, where, "the Cholesky factor of X^T L X + λ I fails")
    return LinearModel(w)


def check_kernel_matrix(K, y, graph, name: str = "K", count: int = 5, what: str = "the dual solve"):
    """``K`` a dense square ``[m, m]`` kernel matrix for the graph's rows; returns ``(K, y)``.
    Refuses up front when ``count`` ``m x m`` matrices (the work's peak) do not fit."""
    if is_bcoo(K):
        raise TypeError(f"{name} must be a dense kernel matrix")
    if getattr(K, "ndim", 0) == 2:
        kernel_plan(K.shape[0], compute_dtype(K), count, what)
    K, y = check_problem(K, y, graph, name)
    return check_symmetric(K, name), y


@jax.jit
def _dual_core(K, y, graph, lam):
    system = dual_system(K, y, graph)
    B, psd, low = ridge_solve_checked(system.G, system.rhs, jnp.asarray(lam, K.dtype),
                                      RESOLVE_RTOL["path"])
    return nan_unless(lam_ok(lam) & psd, system.root.apply(B)), psd, low


def rankrls_dual(K, y, graph: Graph, *, lam) -> DualModel:
    """Dual (kernel) RankRLS on a kernel matrix, one λ (Pahikkala et al. 2007, Thm 1;
    2009, eq. 17).

    ``A = (L K + λ I)^{-1} L y``, solved for every graph in the symmetric form
    ``A = S (S K S + λ I)^{-1} S^+ L y`` (Cholesky), the algorithm of
    :func:`rankrls_dual_path`. ``S`` is a segment operation for query graphs and
    the dense root of ``L`` for tie-excluded and preference graphs. O(m^3).

    Args:
      K: ``[m, m]`` symmetric PSD kernel matrix of the training rows.
      y: ``[m]`` or ``[m, k]``; ``None`` for a :class:`PreferenceGraph`.
      graph: a graph on the ``m`` rows.
      lam: scalar λ > 0.

    Returns:
      :class:`DualModel` with ``coef`` ``A``; ``predict(model, K_test)``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[1., 0.], [0., 1.], [1., 1.], [2., 0.]])
      >>> y, qid = np.array([1., 0., 2., 1.]), np.array([0, 0, 0, 1])
      >>> a = rankrls_dual(X @ X.T, y, rj.query_graph(qid), lam=0.1).coef
      >>> print(np.round(np.asarray(X.T @ a), 4))   # equals the primal weights
      [1.6084 0.6993]
    """
    K, y = check_kernel_matrix(K, y, graph)
    check_positive(lam, scalar=True)
    return dual_model(K, y, graph, lam)


def dual_model(K, y, graph, lam, where="rankrls_dual") -> DualModel:
    """:func:`rankrls_dual` on a checked kernel matrix: a ``ValueError`` when ``K`` was found
    indefinite, NaN and a warning for an unresolved λ."""
    A, psd, low = _dual_core(K, y, graph, lam)
    if is_concrete(psd) and not bool(psd):     # the failed Cholesky said so: no extra eigh
        raise ValueError(f"K is not positive semidefinite: S K S + λ I has no Cholesky factor "
                         f"and S K S the eigenvalue {float(low):.3g} (beyond rounding); a kernel "
                         "matrix must be PSD: check the kernel and its parameters")
    warn_unresolved(A, lam, where, "S K S + λ I has no Cholesky factor and λ is below "
                    "300 eps times its largest eigenvalue")
    return DualModel(A)


@timed
def rankrls_kernel(X, y, graph: Graph, *, lam, kernel: Kernel,
                   block_size: Optional[int] = None) -> KernelModel:
    """Kernel RankRLS from features: evaluates ``K = k(X, X)`` then :func:`rankrls_dual`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[0.], [1.], [2.], [3.]]); y = np.array([0., 1., 2., 3.])
      >>> model = rankrls_kernel(X, y, rj.global_graph(4), lam=0.01,
      ...                           kernel=rj.gaussian_kernel(0.5))
      >>> f = rj.predict(model, np.array([[0.5], [2.5]]))
      >>> bool(f[1] > f[0])
      True
    """
    X = check_matrix(X)
    K = kernel_matrix(kernel, X, block_size=block_size)
    model = rankrls_dual(K, y, graph, lam=lam)
    return KernelModel(model.coef, X, kernel)


def predict(model, X, **kw):
    """Scores of new rows, for every model and path type of the library.

    ``model.predict(X)``: linear models and paths take features ``[m_test, n]``
    (dense or BCOO); :class:`DualModel` / :class:`DualPath` and the CG results of
    the dual take the test kernel ``[m_test, m]``; kernel models evaluate the
    kernel themselves (``block_size=`` bounds its memory). Paths return
    ``[L, m_test(, k)]`` (λ axis first), single models ``[m_test(, k)]``.

    Example:
      >>> import numpy as np
      >>> print(np.asarray(predict(LinearModel(np.array([1., -1.])), np.array([[2., 1.]]))))
      [1.]
    """
    fn = getattr(model, "predict", None)
    if not callable(fn) or isinstance(model, type):
        raise TypeError(f"predict needs a rankjax model or path, got {type(model).__name__}")
    import inspect
    takes = inspect.signature(fn).parameters
    for key in kw:
        if key not in takes:
            raise TypeError(f"predict got an unexpected keyword argument {key!r} "
                            f"({type(model).__name__}.predict takes {', '.join(takes) or 'X only'})")
    return fn(X, **kw)


def is_linear(model) -> bool:
    """Whether ``model`` scores by ``x^T w`` (a :class:`LinearModel`: sparse ``X`` allowed)."""
    return isinstance(model, LinearModel)
