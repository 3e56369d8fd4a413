"""Nyström (basis-vector, subset-of-regressors) RankRLS (Pahikkala et al. 2009, §3.5,
eq. 40-42): ``f(x) = sum_{i in R} a_i k(x, x_i)`` on ``b`` basis rows ``R``, minimising
``(K_R^T a - y)^T L (K_R^T a - y) + λ a^T K_RR a``, i.e.
``a = (K_R L K_R^T + λ K_RR)^{-1} K_R L y``. Computed as primal RankRLS on the Nyström
features ``Φ = K_mR C^{-T}`` (``C C^T = K_RR + ε I``, ``ε`` a rounding-level jitter):
``O(m b^2)`` time, ``O(m b)`` memory, any kernel and graph; ``a = C^{-T} w``.
"""
from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import check_seed, is_concrete, lam_ok, nan_unless
from .._core.log import compiled, level
from .._core.memory import check_memory
from .._core.products import HI
from .._core.resolved import warn_unresolved
from .._solution import Solution, lane_codes
from ..graphs.folds import premerge
from ..kernels.basis import (Basis, BasisRows, as_nystrom, basis_system, coef_from, features,
                             take_basis)
from ..kernels.kernel import Kernel, kernel_block
from .._core.types import saveable
from .base import AbstractSolver, check_kernel_arg, dense_rows, solver
from .holdout import HoldOut, fold_predictions, holdout_from_system, two_phase
from .lpo import LeavePairOut
from .models import NystromModel, NystromPath, path_scores
from .primal import UNRESOLVED, path_core
from .ridge import primal_system, ridge_solve

__all__ = ["Nystrom", "nystrom_blocks", "check_nystrom_memory"]


_ANY_BASIS = Basis(size=1)


def _basis_coef(C, W, axis):
    """Basis coefficients ``a = C^{-T} w`` of weights whose basis axis is ``axis``."""
    return jnp.moveaxis(coef_from(C, jnp.moveaxis(W, axis, 0)), 0, axis)


@jax.jit
def _nystrom_fit(X, y, graph, basis: BasisRows, lam):
    C = basis.factor()
    G, b = primal_system(features(basis.block(X), C), y, graph, root=True)
    lam = jnp.asarray(lam, G.dtype)
    return nan_unless(lam_ok(lam), coef_from(C, ridge_solve(G, b, lam)))


@partial(jax.jit, static_argnames=("block_size",))
def _nystrom_path(X, y, graph, basis: BasisRows, lams, X_valid, block_size=None):
    C = basis.factor()
    W, _, _ = path_core(features(basis.block(X, block_size), C), y, graph, lams, None,
                        False, True)
    coef = _basis_coef(C, W, 1)                                             # [L, b_pad(, k)]
    valid = None if X_valid is None else path_scores(basis.block(X_valid, block_size), coef)
    return coef, valid


@compiled(static_argnames=("route",))
def _nystrom_holdout(X, y, graph, basis: BasisRows, lams, folds, route="both"):
    """``(predictions [L, m(, k)], coef [L, b_pad(, k)])``: the hold-out and the full-data
    basis coefficients of every λ from one ``eigh`` of ``Φ^T L Φ`` (``b x b``), with the
    features ``Φ = K_mR C^{-T}`` formed (``O(m b^2)``) and the system in root form
    ``(S Φ)^T (S Φ)``: the transformed ``C^{-1} (K_Rm L K_mR) C^{-T}`` squares the
    condition of ``C`` (float32: 63x off the float64 hold-out at λ = 1e-4 on
    ``lambdarank_sample``, 6e-3 this way; docs/design.md)."""
    C = basis.factor()
    Phi = features(basis.block(X), C)                              # [m, b]
    G, b = primal_system(Phi, y, graph, root=True)
    out = holdout_from_system(Phi, y, graph, lams, folds, G, b, route=route, weights=True)
    (pred, W), floor = out if route == "shared" else (out, None)    # W [L, r(, k)]
    coef = _basis_coef(C, W, 1)
    if route == "shared":
        return nan_unless(lam_ok(lams), (pred, coef)), floor
    return nan_unless(lam_ok(lams), (pred, coef))


def _head(a, b, axis=0):
    """The first ``b`` entries of ``a`` along ``axis``: sliced on the host when concrete (a
    new basis size in the bucket compiles no slicing program), traced otherwise."""
    where = (slice(None),) * axis + (slice(0, b),)
    return np.asarray(a)[where] if is_concrete(a) else a[where]


def _index(index):
    return index.astype(np.int32) if isinstance(index, np.ndarray) else index.astype(jnp.int32)


def check_nystrom_memory(m, b, dtype, count=4, what="the Nyström hold-out"):
    """Refuses up front a Nyström computation whose ``count`` ``m x b`` blocks do not fit."""
    check_memory(count * m * b * np.dtype(dtype).itemsize,
                 f"{what} ({m} rows x {b} basis rows)",
                 "use a smaller basis, or rj.Falkon(kernel, basis) (row blocks)")


def nystrom_blocks(params, X, basis: BasisRows, kernel: Kernel):
    """``(K_mR, K_RR + ε I)`` of the Nyström model at ``params``: the kernel blocks of the
    (ARD-scaled) rows and centres (``params["centres"]`` when learned, else the basis
    rows), padding columns zero and a unit diagonal on padding, ``ε`` the jitter of
    :func:`~rankjax.kernels.basis.basis_cholesky` (the features are ``Φ = K_mR C^{-T}``)."""
    kern = kernel.with_log_params(params)
    mf = basis.mask.astype(X.dtype)
    R = params.get("centres", basis.X) * mf[:, None]
    s = params.get("log_scales")
    Xs, Rs = (X, R) if s is None else (X * jnp.exp(s), R * jnp.exp(s))
    return kernel_block(kern, Xs, Rs) * mf, basis_system(kernel_block(kern, Rs, Rs), basis.mask)


@saveable
@solver(leaves=("kernel",))
class Nystrom(AbstractSolver):
    """The basis-vector (Nyström) model ``f(x) = sum_{i in R} a_i k(x, x_i)`` on ``b``
    training rows ``R`` (Pahikkala et al. 2009, §3.5): primal RankRLS on ``b`` features.

    Attributes:
      kernel: a :class:`Kernel`.
      basis: an int ``b`` (a uniform draw with ``seed``), ``[b]`` row indices, or a
        :class:`Basis` (e.g. ``Basis(200, method="kmeans++")``, drawn in the kernel's
        feature space).
      seed: the draw of an int ``basis``.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Nystrom(rj.gaussian_kernel(0.5), 10),
      ...            lam=1.0)
      >>> s.value.coef.shape, rj.predict(s.value, d.X).shape
      ((10,), (127,))
    """

    kernel: Kernel
    basis: object
    seed: int = 0

    def __post_init__(self):
        check_kernel_arg(self.kernel, allow_none=False)
        check_seed(self.seed)
        object.__setattr__(self, "basis", as_nystrom(self.basis, self.seed))

    def take(self, X, pad=True):
        """``(index [b], BasisRows)`` of this solver's basis among the rows ``X``."""
        return take_basis(X, self.basis, self.kernel, pad=pad)

    def fit(self, problem, lam):
        X = dense_rows(problem)
        index, B = self.take(X, pad=False)
        coef = _nystrom_fit(X, problem.y, problem.graph, B, lam)
        warn_unresolved(coef, lam, "rj.fit(Nystrom())", UNRESOLVED)
        b = index.shape[0]
        model = NystromModel(coef, _head(B.X, b), _index(index), self.kernel)
        return Solution(model, lane_codes(coef, lam, lanes=False), {})

    def path(self, problem, lams):
        X = dense_rows(problem)
        index, B = self.take(X, pad=False)
        Xv = None if problem.valid is None else dense_rows(problem.valid)
        coef, valid = _nystrom_path(X, problem.y, problem.graph, B, lams, Xv)
        warn_unresolved(coef, lams, "rj.path(Nystrom())", UNRESOLVED)
        b = index.shape[0]
        path = NystromPath(lams, _head(coef, b, 1), _head(B.X, b), _index(index), self.kernel,
                           None, valid)
        return Solution(path, lane_codes(coef, lams), {})

    def holdout(self, problem, lams, folds):
        if isinstance(folds, LeavePairOut):
            raise TypeError("Nystrom does not support holdout with LeavePairOut folds; "
                            "solvers that do: Primal, Dual")
        X = dense_rows(problem)
        lams = lams.astype(X.dtype)
        index, B = self.take(X)
        check_nystrom_memory(X.shape[0], B.X.shape[0], X.dtype)
        pred, coef = two_phase(_nystrom_holdout, X, problem.y, problem.graph, B, lams,
                               premerge(folds, lams.shape[0], B.X.shape[0]), lams=lams,
                               verbose=level())
        warn_unresolved(pred, lams, "rj.holdout(Nystrom())", UNRESOLVED)
        b = index.shape[0]
        path = NystromPath(lams, _head(coef, b, 1), _head(B.X, b), _index(index), self.kernel)
        return Solution(HoldOut(lams, pred, folds, path), lane_codes(pred, lams), {})

    def tuned_kernel(self):
        return self.kernel

    def param_keys(self) -> set:
        return super().param_keys() | {"centres"}

    def for_data(self):
        return dataclasses.replace(self, basis=_ANY_BASIS, seed=0)      # the data holds the rows

    def prepare(self, problem):
        """``(X, y, graph, BasisRows)``: the basis drawn once (padded to its bucket), its
        ``m x b`` blocks planned: about 10 live in a differentiated step."""
        X = dense_rows(problem)
        _, B = self.take(X)
        check_nystrom_memory(X.shape[0], B.X.shape[0], X.dtype, 10, "tune with a Nyström basis")
        return X, problem.y, problem.graph, B

    def cv_predictions(self, params, data, folds):
        """Primal RankRLS on ``Φ = K_mR C^{-T}`` (``C C^T = K_RR + ε I``) at ``params``.
        With ``C2 C2^T = Φ^T L Φ + λ I`` the factor ``C4 = C C2`` is lower triangular and
        ``C4 C4^T = K_Rm L K_mR + λ (K_RR + ε I)``: one Cholesky of ``b x b``, no transform
        of the system by ``C``, and ``P = Φ C2^{-T} = K_mR C4^{-T}`` (``Φ`` never formed)."""
        X, y, graph, basis = data
        lam = jnp.exp(params["log_lam"])
        KmR, KRR = nystrom_blocks(params, X, basis, self.kernel)
        G, b = primal_system(KmR, y, graph, root=True)
        C4 = jnp.linalg.cholesky((G + G.T) / 2 + lam * KRR)
        tri = lambda B: jax.scipy.linalg.solve_triangular(C4, B, lower=True)    # noqa: E731
        P = tri(KmR.T).T                                                   # K_mR C4^{-T} [m, b]
        F = jnp.matmul(P, tri(b), precision=HI)
        return fold_predictions(graph, P, F, y, folds, lam)
