"""Nyström RankRLS for large ``m`` by preconditioned conjugate gradient: the FALKON
scheme (Rudi, Carratino & Rosasco 2017, §3) with the query Laplacian (docs/math.md).

With basis rows ``R`` (``b`` of them), ``K_RR + ε I = C C^T`` (Cholesky, ``ε`` a
rounding-level jitter) and the features ``Φ = K_mR C^{-T}``, Nyström RankRLS solves

    ``(Φ^T L Φ + λ I) w = Φ^T L y``,   ``a = C^{-T} w``,   ``f(x) = k(x, X_R) a``,

i.e. ``(K_Rm L K_mR + λ (K_RR + ε I)) a = K_Rm L y`` (Pahikkala et al. 2009, §3.5).
FALKON approximates ``Φ^T L Φ`` from a subsample ``U`` of whole queries,
``A A^T = (m / |U|) Φ_U^T L_UU Φ_U + λ I``, and runs CG on
``A^{-1} (Φ^T L Φ + λ I) A^{-T} β = A^{-1} Φ^T L y`` (``w = A^{-T} β``): the
preconditioned matrix is close to ``I``, so a few tens of iterations reach the
closed-form solution. Each iteration costs two products with ``K_mR`` (``O(m b)``)
and two triangular solves with ``C`` and ``A`` (``O(b^2)``); ``K_mR`` is kept
when it fits in memory, else evaluated in row blocks every iteration (never whole).
The loop is :func:`rankjax.solvers.cg_loop.cg_solve` (one ``lax.while_loop``): early stopping on a
validation set, ``vmap`` over λ (each lane its own preconditioner).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.products import HI
from .cg_loop import (CG, CGResult, cg_loop, check_options, loop_keywords, valid_fn_of, valid_set)
from .._core.checks import (check_seed, check_count, check_positive, lam_ok, nan_unless)
from .._core.host import device_array
from .._core.memory import available_memory, check_memory
from ..graphs.graph import Graph, check_problem
from ..kernels.kernel import (Kernel, check_kernel, kernel_block, kernel_matrix)
from ..kernels.basis import (BasisRows, coef_from, features, take_basis)
from .models import columns_of, check_test_matrix
from .._core.linalg import PSD_RTOL
from .._core.segments import padded_size
from .._core.sparse import as_dense
from .._core.types import saveable

__all__ = ["FalkonModel", "rankrls_falkon"]

@saveable
class FalkonModel(NamedTuple):
    """Nyström RankRLS solved by :func:`rankrls_falkon`.

    Attributes:
      coef: ``[b]`` basis coefficients ``a`` (``f(x) = sum_i a_i k(x, basis_X_i)``).
      basis: ``[b]`` row indices of the basis.
      basis_X: ``[b, n]`` basis rows.
      kernel: the :class:`Kernel`.
      cg: the :class:`CGResult` of the preconditioned system (iterations, stop
        reason, residual and validation histories).
    """

    coef: jax.Array
    basis: jax.Array
    basis_X: jax.Array
    kernel: Kernel
    cg: CGResult

    num_features = columns_of("basis_X", 1)          # columns of the rows it scores

    def predict(self, X, block_size: Optional[int] = None):
        X = check_test_matrix(X, self.basis_X.shape[1])
        return jnp.matmul(kernel_matrix(self.kernel, X, self.basis_X, block_size=block_size),
                          self.coef.T, precision=HI).T


def _query_subsample(graph, m: int, rows: int, seed: int) -> np.ndarray:
    """Rows of whole queries drawn at random until at least ``rows`` rows (host)."""
    unit, n_units = graph.fold_units()
    order = np.random.default_rng(check_seed(seed)).permutation(n_units)
    sizes = np.bincount(unit, minlength=n_units)[order]
    take = order[: int(np.searchsorted(np.cumsum(sizes), rows)) + 1]
    return np.flatnonzero(np.isin(unit, take))


class Subsample(NamedTuple):
    """The preconditioner's rows: ``X [u_pad, n]`` of whole queries (zero rows on
    padding, ``mask`` False), their ``graph`` and ``scale = m / |U|``."""

    X: jax.Array
    mask: jax.Array
    graph: Graph
    scale: float

    def gram(self, basis: BasisRows, C):
        """``(m/|U|) Φ_U^T L_UU Φ_U``."""
        dt = self.X.dtype
        PhiU = features(kernel_block(basis.kernel, self.X, basis.X) * basis.mask.astype(dt)
                        * self.mask.astype(dt)[:, None], C)
        return self.scale * self.graph.normal_equations(PhiU, jnp.zeros(self.X.shape[0], dt),
                                                        root=True)[0]


def _tri(C, B, trans=False):
    return jax.scipy.linalg.solve_triangular(C, B, lower=True, trans=1 if trans else 0)


def block_ops(basis: BasisRows, X, block_rows):
    """``(a -> K_mR a, u -> K_Rm u)``: from a kept ``K_mR``, or evaluated in row blocks."""
    kernel, XR, mf = basis.kernel, basis.X, basis.mask.astype(X.dtype)
    if block_rows is None:
        K = kernel_block(kernel, X, XR) * mf
        return (lambda a: jnp.matmul(K, a, precision=HI)), (lambda u: jnp.matmul(u, K, precision=HI))
    m, n = X.shape
    nb = -(-m // block_rows)
    Xb = jnp.pad(X, ((0, nb * block_rows - m), (0, 0))).reshape(nb, block_rows, n)
    rmask = (jnp.arange(nb * block_rows) < m).reshape(nb, block_rows).astype(X.dtype)

    def blk(i):
        return kernel_block(kernel, Xb[i], XR) * mf * rmask[i][:, None]

    def fwd(a):
        return lax.map(lambda i: jnp.matmul(blk(i), a, precision=HI), jnp.arange(nb)).reshape(-1)[:m]

    def bwd(u):
        ub = jnp.pad(u, (0, nb * block_rows - m)).reshape(nb, block_rows)
        return lax.fori_loop(0, nb, lambda i, acc: acc + jnp.matmul(ub[i], blk(i), precision=HI),
                             jnp.zeros(XR.shape[0], X.dtype))
    return fwd, bwd


def falkon_preconditioner(basis: BasisRows, gram_U, lam):
    """``(C, A)``: ``C C^T = K_RR + ε I`` and ``A A^T = G_U + λ I`` (``G_U`` the scaled
    subsample Gram ``(m/|U|) Φ_U^T L_UU Φ_U``, from ``gram_U(C)``)."""
    bp = basis.X.shape[0]
    dt = basis.X.dtype
    C = basis.factor()
    GU = gram_U(C)
    GU = (GU + GU.T) / 2
    eps = PSD_RTOL * bp * jnp.finfo(dt).eps
    A = jnp.linalg.cholesky(GU + (lam + eps * jnp.maximum(jnp.trace(GU) / bp, 1)) * jnp.eye(bp, dtype=dt))
    return C, A


def falkon_solve(C, A, lam, apply_H, rhs_raw, scores_fn, valid, options: CG):
    """CG on ``A^{-1} (Φ^T L Φ + λ I) A^{-T} β = A^{-1} C^{-1} rhs_raw`` with
    ``apply_H(a) = K_Rm L K_mR a`` (traced); returns ``(a [b_pad], CGResult)``."""
    def coef(beta):                                   # a = C^{-T} A^{-T} β
        return coef_from(C, _tri(A, beta, trans=True))

    def matvec(beta):
        w = _tri(A, beta, trans=True)
        return _tri(A, _tri(C, apply_H(coef_from(C, w))) + lam * w)

    rhs = _tri(A, _tri(C, rhs_raw))
    valid_fn = valid_fn_of(valid, lambda beta: scores_fn(coef(beta)))
    ok = lam_ok(lam, allow_zero=valid is not None)
    tol = jnp.where(ok, options.tolerance(rhs.dtype), jnp.nan)
    r = cg_loop(matvec, rhs, options.with_tol(tol), 0.0, None, valid_fn)
    return nan_unless(ok, coef(r.weights)), r


@partial(jax.jit, static_argnames="block_rows")
def _falkon_core(problem, basis: BasisRows, sub: Subsample, lam, valid, options, block_rows):
    X, y, graph = problem
    dt = X.dtype
    lam = jnp.asarray(lam, dt)
    C, A = falkon_preconditioner(basis, partial(sub.gram, basis), lam)
    fwd, bwd = block_ops(basis, X, block_rows)
    scores_fn = None if valid is None else (
        lambda a: jnp.matmul(basis.block(valid.M), a, precision=HI))
    a, r = falkon_solve(C, A, lam, lambda a: bwd(graph.mv(fwd(a))), bwd(graph.rhs(y, dt)),
                        scores_fn, valid, options)
    return a * basis.mask.astype(dt), r


def kmr_block_rows(m, bp, item, block_rows):
    """The plan of ``K_mR`` (``m x bp``, ``item`` bytes an entry): kept whole (None) when it
    takes at most a quarter of the free memory (:func:`available_memory`: the device's on an
    accelerator), else evaluated every iteration in blocks of about a sixteenth of it; a
    given ``block_rows`` is checked and kept."""
    if block_rows is None and m * bp * item > available_memory() / 4:
        block_rows = max(64, int(available_memory() / 16 / (bp * item)))
    if block_rows is not None:
        block_rows = min(check_count(block_rows, "block_rows"), m)
    return block_rows


def falkon_checks(kernel, lam, valid):
    """The checks every FALKON entry point makes of its parameters: the kernel and λ (0
    allowed with a validation set: early stopping regularises)."""
    check_kernel(kernel)
    check_positive(lam, allow_zero=valid is not None, scalar=True)


@loop_keywords
def rankrls_falkon(X, y, graph: Graph, *, lam, kernel: Kernel, basis,
                   options: Optional[CG] = None, valid=None, metric="pairwise_error",
                   metric_kwargs=None, higher_is_better=None,
                   precond_rows: Optional[int] = None, block_rows: Optional[int] = None,
                   seed: int = 0) -> FalkonModel:
    """Nyström RankRLS by FALKON-preconditioned conjugate gradient (Rudi et al. 2017 with
    the query Laplacian; Pahikkala et al. 2009 §3.5): for ``m`` in the 10⁵-10⁶ range and
    basis sizes up to ~10⁴, in ``O(m b)`` memory and time per iteration.

    Args:
      X: ``[m, n]`` dense training rows.
      y: ``[m]`` labels.
      graph: a :class:`QueryGraph` or :class:`IdentityGraph` on the ``m`` rows.
      lam: λ > 0 (λ >= 0 with ``valid``: early stopping alone); traced (vmap over it).
      kernel: a :class:`Kernel`.
      basis: an int ``b`` (uniform rows, ``seed``), ``[b]`` row indices
        (:func:`nystrom_basis`) or a :class:`Basis`.
      options: a :class:`~rankjax.CG` (:func:`cg_solve`); its ``tol`` is relative to the
        preconditioned right-hand side.
      valid: ``(X_valid, y_valid, graph_valid)`` for early stopping on a criterion
        (as :func:`rankrls_cg`; ``metric``, ``metric_kwargs``, ``higher_is_better``).
      precond_rows: rows of whole queries in the preconditioner's subsample
        (default ``min(m, 3 b)``: on a 12k-row set with b = 2,000 and λ = 1e-6, 2 b rows left the
        50th iterate 5e-6 from the closed form, 3 b rows 3e-9).
      block_rows: evaluate ``K_mR`` in blocks of this many rows every iteration; by
        default it is kept whole when it takes at most a quarter of the free memory.
      seed: the basis draw and the preconditioner's subsample.

    Returns:
      :class:`FalkonModel`; ``predict(model, X)`` costs ``O(b)`` kernel values per row.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(40, num_features=4, seed=0)
      >>> g, k = rj.query_graph(d.qid), rj.gaussian_kernel(0.2)
      >>> f = rankrls_falkon(d.X, d.y, g, lam=1.0, kernel=k, basis=np.arange(0, 800, 8))
      >>> p = rj.solvers.path.rankrls_nystrom_path(d.X, d.y, g, lams=[1.0], kernel=k,
      ...                                      basis=np.arange(0, 800, 8))
      >>> bool(np.allclose(rj.predict(f, d.X), rj.predict(p, d.X)[0], atol=1e-4))
      True
    """
    X, y = check_problem(X, y, graph)
    X = as_dense(X)
    graph.check_splittable("rankrls_falkon (its preconditioner's subsample)")
    if y.ndim != 1:
        raise ValueError("rankrls_falkon solves one output; vmap over the columns of y")
    falkon_checks(kernel, lam, valid)
    options = check_options(options)
    check_seed(seed)
    m, n = X.shape
    index, B = take_basis(X, basis, kernel, seed)
    bp = B.X.shape[0]
    item = X.dtype.itemsize
    u_rows = min(m, 3 * bp) if precond_rows is None else check_count(precond_rows, "precond_rows")
    rows = _query_subsample(graph, m, min(u_rows, m), seed)
    up = int(padded_size(rows.size))
    check_memory((up * bp + 6 * bp * bp + 4 * m) * item,
                 f"rankrls_falkon with {index.size} basis rows and a {rows.size}-row preconditioner",
                 "use a smaller basis or precond_rows")
    block_rows = kmr_block_rows(m, bp, item, block_rows)
    idx = np.zeros(up, np.int64)
    idx[:rows.size] = rows
    sub = Subsample(jnp.asarray(X)[device_array(idx.astype(np.int32))],
                    device_array(np.arange(up) < rows.size), graph.restrict(rows, up),
                    m / rows.size)
    valid = valid_set(valid, "X_valid", metric, higher_is_better, metric_kwargs,
                      "rankrls_falkon", lambda Xv: check_test_matrix(Xv, n, "X_valid"))
    coef, r = _falkon_core((X, y, graph), B, sub, lam, valid, options, block_rows)
    b = index.size
    return FalkonModel(coef[..., :b], device_array(index.astype(np.int32)), B.X[:b], kernel, r)
