"""Regularization paths: one decomposition, every λ of a grid (docs/math.md, §2.4;
Pahikkala et al. 2009 §3.2, §3.5; Pahikkala et al. 2007 end of §2).

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

from functools import partial
from typing import NamedTuple, Optional

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from .._core.log import timed, user_stacklevel
from .._core.checks import (
    as_float_array,
    check_flag,
    check_gram,
    check_positive,
    check_matrix,
    is_concrete,
    lam_ok,
    nan_unless)
from .._core.resolved import UnresolvedLambdaWarning, warn_unresolved
from ..graphs.graph import Graph, check_problem
from ..kernels.kernel import Kernel, kernel_matrix
from .models import (LinearModel, check_kernel_matrix, check_test_matrix, path_scores)
from ..kernels.basis import (BasisRows, coef_from, explicit_features, features, take_basis)
from .reduced import range_rows, reduced_eigh
from .._core.linalg import eigh_psd_checked
from .ridge import decompose_primal, decompose_dual, primal_system
from .._core.sparse import as_dense
from .._core.types import saveable

__all__ = ["PrimalPath", "DualPath", "NystromPath", "rankrls_primal_path", "rankrls_dual_path",
           "rankrls_nystrom_path", "nystrom_features",
           "check_lams"]


@saveable
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

    def predict(self, X):
        return path_scores(check_test_matrix(X, self.weights.shape[1]), self.weights)


@saveable
class DualPath(NamedTuple):
    """Dual solutions for a λ grid: ``coef [L, m(, k)]``, training scores
    ``K A [L, m(, k)]``, and ``K_valid A [L, m_valid(, k)]`` or ``None``;
    ``predict(K_test [m_test, m])``."""

    lams: jax.Array
    coef: jax.Array
    train_scores: jax.Array
    valid_scores: Optional[jax.Array]

    def predict(self, K_test):
        K_test = check_test_matrix(K_test, self.coef.shape[1], "K_test", "columns (training rows)")
        return path_scores(K_test, self.coef)


@saveable
class NystromPath(NamedTuple):
    """Nyström (basis-vector) solutions: ``coef [L, r(, k)]`` over the basis rows
    ``basis [r]`` (``f(x) = sum_i coef_i k(x, basis_X_i)``), training and
    validation scores as in :class:`PrimalPath`; ``predict(X [m_test, n])``."""

    lams: jax.Array
    coef: jax.Array
    basis: jax.Array
    basis_X: jax.Array
    kernel: Kernel
    train_scores: Optional[jax.Array]
    valid_scores: Optional[jax.Array]

    def predict(self, X, block_size: Optional[int] = None):
        X = check_test_matrix(X, self.basis_X.shape[1])
        return path_scores(kernel_matrix(self.kernel, X, self.basis_X, block_size=block_size),
                           self.coef)


def check_lams(lams):
    """A non-empty 1-D grid of finite λ > 0."""
    if not isinstance(lams, jax.Array) and np.asarray(lams).dtype.kind in "fiu":
        check_positive(np.asarray(lams, dtype=float), name="lams")
    lams = as_float_array(lams, "lams")           # (checked before the cast, and after)
    if lams.ndim != 1 or lams.shape[0] == 0:
        raise ValueError(f"lams must be a non-empty 1-D grid, got shape {tuple(lams.shape)}")
    check_positive(lams, name="lams")
    return lams


def _valid_matrix(X_valid, n, name="X_valid"):
    return None if X_valid is None else check_test_matrix(X_valid, n, name)


PRIMAL_UNRESOLVED = "the Cholesky factor of the system + λ I fails (λ below its rounding)"


@partial(jax.jit, static_argnames=("train", "root"))
def _primal_path_core(X, y, graph, lams, X_valid, train, root=False):
    G, b = primal_system(X, y, graph, root)
    W = decompose_primal(G, b).coef_path(lams)
    return nan_unless(lam_ok(lams), (W, path_scores(X, W) if train else None,
                                     None if X_valid is None else path_scores(X_valid, W)))


def rankrls_primal_path(X, y, graph: Graph, *, lams, X_valid=None,
                        train_scores: bool = False) -> PrimalPath:
    """Primal RankRLS for a whole λ grid from one eigendecomposition (docs/math.md).

    ``X^T L X = V Λ V^T`` (O(m n^2 + n^3) once), then
    ``w(λ) = V diag(1/(Λ + λ)) V^T X^T L Y`` for every λ (O(n^2 k) each, vmapped).

    Precision: a λ below ``1e3 eps max Λ - min Λ`` (:func:`~rankjax.solvers.ridge.eigh_floor`,
    where the shared ``eigh`` would be ``eps max Λ / (min Λ + λ)`` off) is solved by its own Cholesky factor
    (``n^3 / 3``); a λ whose factor fails in the dtype gives a NaN lane and an
    :class:`UnresolvedLambdaWarning` (docs/design.md, the precision rule).

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
      >>> path = rankrls_primal_path(d.X, d.y, rj.query_graph(d.qid), lams=[0.1, 10.])
      >>> path.weights.shape
      (2, 5)
    """
    X, y = check_problem(X, y, graph)
    check_gram(X)
    return primal_path(X, y, graph, check_lams(lams), _valid_matrix(X_valid, X.shape[1]),
                       check_flag(train_scores, "train_scores"))


def primal_path(X, y, graph, lams, X_valid=None, train=False,
                where="rankrls_primal_path") -> PrimalPath:
    """:func:`rankrls_primal_path` on checked inputs (``X`` of :func:`check_problem`,
    ``lams`` of :func:`check_lams`): the compiled path and its unresolved-λ warning."""
    W, tr, valid = _primal_path_core(X, y, graph, lams, X_valid, train)
    warn_unresolved(W, lams, where, PRIMAL_UNRESOLVED)
    return PrimalPath(lams, W, tr, valid)


@jax.jit
def _dual_path_core(K, y, graph, lams, K_valid, rows=None):
    dec = decompose_dual(K, y, graph, "path", eigh_psd_checked if rows is None   # rows: _reduced
                         else partial(reduced_eigh, rows=rows, graph=graph),
                         None if rows is None else rows.queries)
    A = dec.coef_path(lams)                                 # [L, m(, k)]
    out = nan_unless(lam_ok(lams) & dec.ok(lams),
                     (A, path_scores(K, A), None if K_valid is None else path_scores(K_valid, A)))
    return out, dec.flags()


def check_spectrum(flags, lams, where, name="K"):
    """Outside jit: a ValueError when the kernel matrix was found indefinite, and an
    :class:`UnresolvedLambdaWarning` naming the λ below the dtype's floor (NaN lanes,
    :data:`rankjax.solvers.ridge.RESOLVE_RTOL`)."""
    psd, low, high, floor = flags
    if not is_concrete(psd):
        return
    if not bool(psd):
        raise ValueError(f"{name} is not positive semidefinite: its system has the eigenvalue "
                         f"{float(low):.3g} against a largest {float(high):.3g} (beyond "
                         "rounding); a kernel matrix must be PSD: check the kernel and its "
                         "parameters")
    lams = np.asarray(lams)
    low_lams = lams[lams < float(floor)]
    if low_lams.size:
        shown = ", ".join(f"{v:.3g}" for v in low_lams)
        warnings.warn(
            f"{where}: lams {shown} are below {float(floor):.3g}, the smallest λ that "
            f"{lams.dtype} resolves against the largest eigenvalue {float(high):.3g} of the "
            "system; their results are NaN. Use float64 (jax_enable_x64) or larger λ",
            UnresolvedLambdaWarning, stacklevel=user_stacklevel())


@timed
def rankrls_dual_path(K, y, graph: Graph, *, lams, K_valid=None) -> DualPath:
    """Dual RankRLS for a whole λ grid from one eigendecomposition (docs/math.md).

    ``S K S = U Γ U^T`` (O(m^3) once), ``A(λ) = S U diag(1/(Γ + λ)) U^T S Y``
    (O(m^2 k) per λ). Every graph type: query graphs use the segment-sum root
    ``S``; tie-excluded and preference graphs a dense root from ``eigh(L)``.

    Precision: a λ below ``300 eps max Γ`` (:data:`~rankjax.solvers.ridge.RESOLVE_RTOL`;
    ``3.6e-5 max Γ`` in float32) gives a NaN lane and an :class:`UnresolvedLambdaWarning`;
    above it float32 agrees with float64 to ~1 %. An indefinite ``K`` is refused.

    Args:
      K: ``[m, m]`` training kernel matrix.
      y: ``[m]`` or ``[m, k]``; ``None`` for a :class:`PreferenceGraph`.
      lams: ``[L]`` grid of λ > 0 (traced).
      K_valid: optional ``[m_valid, m]`` kernel between validation and training rows.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=3, seed=0)
      >>> K = rj.kernel_matrix(rj.gaussian_kernel(0.5), d.X)
      >>> rankrls_dual_path(K, d.y, rj.query_graph(d.qid), lams=[0.1, 1., 10.]).coef.shape[0]
      3
    """
    K, y = check_kernel_matrix(K, y, graph)
    return dual_path(K, y, graph, check_lams(lams),
                     _valid_matrix(K_valid, K.shape[0], "K_valid"))


def dual_path(K, y, graph, lams, K_valid=None, where="rankrls_dual_path") -> DualPath:
    """:func:`rankrls_dual_path` on a checked kernel matrix and grid."""
    (A, train, valid), flags = _dual_path_core(K, y, graph, lams, K_valid, range_rows(graph, K.dtype))
    check_spectrum(flags, lams, where)
    return DualPath(lams, A, train, valid)


def nystrom_features(K_R, K_RR):
    """Nyström map of the basis-vector approximation (Pahikkala et al. 2009, §3.5):
    ``Φ = K_R^T C^{-T}`` with ``K_RR + ε I = C C^T`` (Cholesky, ``ε`` a rounding-level
    jitter: the one feature map of every Nyström path, docs/design.md), and the back-map
    ``T = C^{-T}`` so that basis coefficients are ``A = T w``.

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
    K_R, K_RR = check_matrix(K_R, "K_R"), check_matrix(K_RR, "K_RR")
    if K_RR.shape != (K_R.shape[0],) * 2:
        raise ValueError(f"K_RR must be [{K_R.shape[0]}, {K_R.shape[0]}], got {tuple(K_RR.shape)}")
    return _nystrom_jit(K_R, K_RR)


_nystrom_jit = jax.jit(explicit_features)


@partial(jax.jit, static_argnames=("train", "block_size"))
def _nystrom_path_core(X, y, graph, basis: BasisRows, lams, X_valid, train, block_size):
    C = basis.factor()
    W, tr, _ = _primal_path_core(features(basis.block(X, block_size), C), y, graph, lams, None,
                                 train, True)
    coef = jnp.moveaxis(coef_from(C, jnp.moveaxis(W, 1, 0)), 0, 1)     # [L, b_pad(, k)]
    valid = None
    if X_valid is not None:
        valid = path_scores(basis.block(X_valid, block_size), coef)
    return coef, tr, valid


@timed
def rankrls_nystrom_path(X, y, graph: Graph, *, lams, kernel: Kernel, basis, X_valid=None,
                         train_scores: bool = False, block_size: Optional[int] = None,
                         seed: int = 0) -> NystromPath:
    """Nyström (basis-vector, subset-of-regressors) RankRLS for a λ grid
    (Pahikkala et al. 2009, §3.5, eq. 40-42).

    ``f(x) = sum_{i in R} a_i k(x, x_i)`` minimising
    ``(K_R^T a - y)^T L (K_R^T a - y) + λ a^T K_RR a``, i.e.
    ``a = (K_R L K_R^T + λ K_RR)^{-1} K_R L y``. Computed as a primal path on the
    Nyström features ``Φ = K_R^T C^{-T}`` (:func:`nystrom_features`): ``O(m |R|^2)``
    training, any kernel and graph.

    Args:
      X: ``[m, n]`` training rows.
      y: ``[m]`` or ``[m, k]``; ``None`` for a :class:`PreferenceGraph`.
      graph: any rankjax graph on the ``m`` rows.
      lams: ``[L]`` λ grid.
      kernel: a :class:`Kernel`.
      basis: ``[r]`` row indices of the basis vectors, an int ``r`` to draw
        ``r`` distinct rows at random with ``seed``, or a :class:`Basis`.
      X_valid: optional rows to score for every λ.

    Returns:
      :class:`NystromPath` (scores new rows itself: ``predict(path, X)``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=4, seed=0)
      >>> p = rankrls_nystrom_path(d.X, d.y, rj.query_graph(d.qid), lams=[1., 10.],
      ...                             kernel=rj.gaussian_kernel(0.2), basis=50)
      >>> p.coef.shape, rj.predict(p, d.X[:3]).shape
      ((2, 50), (2, 3))
    """
    X, y = check_problem(X, y, graph)
    lams = check_lams(lams)
    Xd = as_dense(X)
    index, basis = take_basis(Xd, basis, kernel, seed, pad=False)
    X_valid = _valid_matrix(X_valid, X.shape[1])
    return nystrom_path(Xd, y, graph, lams, index, basis,
                        None if X_valid is None else as_dense(X_valid),
                        check_flag(train_scores, "train_scores"), block_size)


def nystrom_path(X, y, graph, lams, index, basis: BasisRows, X_valid=None, train=False,
                 block_size=None, where="rankrls_nystrom_path") -> NystromPath:
    """:func:`rankrls_nystrom_path` on checked dense rows and a taken basis (``index [b]``,
    its :class:`BasisRows`)."""
    r = index.size
    coef, tr, valid = _nystrom_path_core(X, y, graph, basis, lams, X_valid, train, block_size)
    warn_unresolved(coef, lams, where, PRIMAL_UNRESOLVED)
    return NystromPath(lams, coef[:, :r], jnp.asarray(index.astype(np.int32)), basis.X[:r],
                       basis.kernel, tr, valid)


def is_path(model) -> bool:
    """Whether ``model`` is a λ path (its scores carry a leading λ axis)."""
    return isinstance(model, (PrimalPath, DualPath, NystromPath))


def model_at(path, i: int):
    """The model of the ``i``-th λ of a path: a :class:`LinearModel` of a primal path, a
    one-λ :class:`NystromPath` of a Nyström path, ``None`` for a dual path (its model needs
    the training rows: refit)."""
    if isinstance(path, PrimalPath):
        return LinearModel(path.weights[i])
    if isinstance(path, NystromPath):
        return path._replace(lams=path.lams[i:i + 1], coef=path.coef[i:i + 1],
                             train_scores=None, valid_scores=None)
    return None
