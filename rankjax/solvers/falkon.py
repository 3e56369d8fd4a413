r"""Nyström RankRLS for large ``m`` by preconditioned conjugate gradient: the FALKON
scheme (Rudi, Carratino & Rosasco 2017, §3) with the query Laplacian (docs/math.md).

With basis rows ``R`` (``b`` of them), :math:`K_{RR} + \varepsilon I = C C^T` (Cholesky,
``ε = b eps32 max diag K_RR``, the one jitter of every dtype) and the features
:math:`\Phi = K_{mR} C^{-T}`, Nyström RankRLS solves

    :math:`(\Phi^T L \Phi + \lambda I) w = \Phi^T L y`,   :math:`a = C^{-T} w`,   ``f(x) = k(x, X_R) a``,

i.e. ``(K_Rm L K_mR + λ (K_RR + ε I)) a = K_Rm L y`` (Pahikkala et al. 2009, §3.5).
FALKON approximates :math:`\Phi^T L \Phi` from a subsample ``U`` of whole queries,
:math:`A A^T = (m / |U|) \Phi_U^T L_{UU} \Phi_U + \lambda I`, and runs CG on
:math:`A^{-1} (\Phi^T L \Phi + \lambda I) A^{-T} \beta = A^{-1} \Phi^T L y` (:math:`w = A^{-T} \beta`): the
preconditioned matrix is close to ``I``, so a few tens of iterations reach the
closed-form solution. Each iteration costs two products with ``K_mR`` (``O(m b)``)
and two triangular solves with ``C`` and ``A`` (:math:`O(b^2)`); ``K_mR`` is kept
when it fits in memory, else evaluated in row blocks every iteration (never whole).
The loop is :func:`~rankjax.solvers.cg_loop.cg_loop` (one ``lax.while_loop``): early stopping
on a validation set, ``vmap`` over λ (each lane its own preconditioner).
"""
from __future__ import annotations

from functools import partial, singledispatchmethod
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core import lapack
from .._core.checks import check_count, check_seed
from .._core.host import device_array, is_concrete
from .._core.traced import finite_positive, nan_unless
from .._core.linalg import PSD_RTOL
from .._core.memory import available_memory, check_memory, compute_dtype
from .._core.products import HI, mm, tdot
from .._core.segments import padded_size
from .._core.resolved import warn_unresolved
from .._solution import RESULTS, Solution
from ..graphs.folds import make_folds
from ..graphs.graph import Graph
from ..kernels.basis import BasisRows, as_nystrom, coef_from, features, take_basis
from ..kernels.kernel import Kernel, kernel_block, ranking_form
from .._core.types import saveable
from .base import AbstractSolver, check_kernel_arg, dense_rows, solver
from .cg import CG, criterion
from .cg_loop import differentiable_cg
from .ridge import features_floor
from .fold_batches import batch_mv, fold_scan
from .nystrom_plan import largest_query
from .models import NystromModel
from ..scale.hosts import local_block
from ..scale.layout import ShardedData, dense_only
from jax.sharding import PartitionSpec as P

__all__ = ["Falkon", "Subsample", "query_subsample", "block_ops", "falkon_preconditioner", "falkon_solve",
           "kmr_block_rows"]


def query_subsample(graph, m: int, rows: int, seed: int) -> np.ndarray:
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
        r""":math:`(m/|U|) \Phi_U^T L_{UU} \Phi_U` (``L_UU`` a principal block of ``L``: PSD)."""
        dt = self.X.dtype
        PhiU = features(kernel_block(basis.kernel, self.X, basis.X) * basis.mask.astype(dt)
                        * self.mask.astype(dt)[:, None], C)
        return self.scale * jnp.matmul(PhiU.T, self.graph.mv(PhiU), precision=HI)


def _tri(C, B, trans=False):
    return lapack.solve_triangular(C, B, trans=trans)


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


def fold_ops(basis: BasisRows, X, graph, folds, rows):
    """``(a -> K_Rm L K_mR a, v -> K_Rm v)`` over batches of about ``rows`` rows of whole
    queries (:func:`~rankjax.solvers.fold_batches.fold_scan`): each batch's kernel block is
    evaluated once per product (``L`` acts on each query alone through its root), where
    :func:`block_ops` evaluates ``K_mR`` twice, forward and back."""
    dt, bp = X.dtype, basis.X.shape[0]

    def block(idx, mask):
        return basis.block(X[idx.reshape(-1)]) * mask.reshape(-1, 1).astype(dt)

    def apply_H(a):
        def update(acc, idx, mask):
            K = block(idx, mask)
            v = jnp.matmul(K, a, precision=HI).reshape(idx.shape)
            return acc + tdot(K, batch_mv(graph, idx, mask, v).reshape(-1))
        return fold_scan(folds, rows, update, jnp.zeros(bp, dt), 1, bp)

    def back(v):
        def update(acc, idx, mask):
            return acc + tdot(block(idx, mask), (v[idx] * mask.astype(dt)).reshape(-1))
        return fold_scan(folds, rows, update, jnp.zeros(bp, dt), 1, bp)
    return apply_H, back


@partial(jax.jit, static_argnames="rows")
def _falkon_folds(problem, basis: BasisRows, sub: Subsample, lam, valid, options, folds, rows):
    X, y, graph = problem
    dt = X.dtype
    lam = jnp.asarray(lam, dt)
    C, A, floor = falkon_preconditioner(basis, partial(sub.gram, basis), lam)
    apply_H, back = fold_ops(basis, X, graph, folds, rows)
    scores_fn = None if valid is None else (
        lambda a: jnp.matmul(basis.block(valid[0]), a, precision=HI) + basis.offset(a))
    a, r = falkon_solve(C, A, lam, apply_H, back(graph.rhs(y, dt)), scores_fn, valid, options,
                        floor)
    return a * basis.mask.astype(dt), r


FLOOR = "λ below EIGH_RTOL eps ||G_U|| (the features' floor, from the preconditioner's subsample)"


def falkon_preconditioner(basis: BasisRows, gram_U, lam):
    r"""``(C, A, floor)``: :math:`C C^T = K_{RR} + \varepsilon I`, :math:`A A^T = G_U + \lambda I`
    (``G_U`` the scaled subsample Gram :math:`(m/|U|) \Phi_U^T L_{UU} \Phi_U`, from ``gram_U(C)``)
    and the features' λ floor estimated from ``G_U``
    (:func:`~rankjax.solvers.ridge.features_floor`)."""
    bp = basis.X.shape[0]
    dt = basis.X.dtype
    C = basis.factor()
    GU = gram_U(C)
    GU = (GU + GU.T) / 2
    eps = PSD_RTOL * bp * jnp.finfo(dt).eps
    A = lapack.cholesky(GU + (lam + eps * jnp.maximum(jnp.trace(GU) / bp, 1)) * jnp.eye(bp, dtype=dt))
    return C, A, features_floor(GU)


def falkon_solve(C, A, lam, apply_H, rhs_raw, scores_fn, valid, options: CG, floor=0.0):
    r"""CG on :math:`A^{-1} (\Phi^T L \Phi + \lambda I) A^{-T} \beta = A^{-1} C^{-1} rhs_{raw}` with
    ``apply_H(a) = K_Rm L K_mR a`` (traced), early stopping on ``scores_fn(a)`` of the
    validation data ``valid`` (or ``None``); returns ``(a [b_pad], CGResult)``. Without early
    stopping a λ below ``floor`` is refused (``unresolved_lambda``, NaN)."""
    def coef(beta):                                   # a = C^{-T} A^{-T} β
        return coef_from(C, _tri(A, beta, trans=True))

    def matvec(beta):
        w = _tri(A, beta, trans=True)
        return _tri(A, _tri(C, apply_H(coef_from(C, w))) + lam * w)

    rhs = _tri(A, _tri(C, rhs_raw))
    valid_fn = criterion(options, valid, lambda beta: scores_fn(coef(beta)))
    ok = finite_positive(options.tolerance(rhs.dtype), allow_zero=True)   # λ: the verbs'
    # early stopping regularises below the features' floor; without it λ must clear the floor
    resolved = True if valid is not None else lam >= floor
    tol = jnp.where(ok & resolved, options.tolerance(rhs.dtype), jnp.nan)
    # without early stopping the solve is differentiable (implicitly, in λ and the data)
    r = differentiable_cg(matvec, rhs, options.with_tol(tol), 0.0, None, valid_fn)
    code = jnp.where(ok & ~jnp.asarray(resolved), int(RESULTS.unresolved_lambda), r.result)
    return nan_unless(ok & resolved, coef(r.weights)), r._replace(result=code)


@partial(jax.jit, static_argnames="block_rows")
def _falkon_core(problem, basis: BasisRows, sub: Subsample, lam, valid, options, block_rows):
    X, y, graph = problem
    dt = X.dtype
    lam = jnp.asarray(lam, dt)
    C, A, floor = falkon_preconditioner(basis, partial(sub.gram, basis), lam)
    fwd, bwd = block_ops(basis, X, block_rows)
    scores_fn = None if valid is None else (
        lambda a: jnp.matmul(basis.block(valid[0]), a, precision=HI) + basis.offset(a))
    a, r = falkon_solve(C, A, lam, lambda a: bwd(graph.mv(fwd(a))), bwd(graph.rhs(y, dt)),
                        scores_fn, valid, options, floor)
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


@saveable
@solver(leaves=("kernel",))
class Falkon(AbstractSolver):
    r"""FALKON: conjugate gradients on the Nyström model, preconditioned by a subsample
    ``U`` of whole queries (Rudi et al. 2017, §3, with the query Laplacian; Pahikkala et al.
    2009, §3.5), in :math:`O(m b)` memory and time per iteration (:math:`m` in the
    :math:`10^5`–:math:`10^6` range, basis sizes up to :math:`\sim 10^4`):

    .. math::

       A^{-1} (\Phi^T L \Phi + \lambda I) A^{-T} \beta = A^{-1} \Phi^T L y,
       \qquad \Phi = K_{mR} C^{-T},

       A A^T = \tfrac{m}{|U|} \Phi_U^T L_{UU} \Phi_U + \lambda I .

    The fit is :class:`Nystrom`'s model of the same basis (a
    :class:`~rankjax.NystromModel`), its CG statistics in ``Solution.stats``.

    Attributes:
      kernel: as :class:`Nystrom`.
      basis: as :class:`Nystrom`.
      seed: as :class:`Nystrom` (it also draws the subsample).
      options: a :class:`CG`: the loop's options (its ``tol`` is relative to the
        preconditioned right-hand side), and its early-stopping metric on ``problem.valid``.
      precond_rows: rows of whole queries in the preconditioner's subsample (default
        ``min(m, 3 b)``: on a 12k-row set with b = 2,000 and λ = 1e-6, 2 b rows left the 50th
        iterate 5e-6 from the closed form, 3 b rows 3e-9). Under the caller's ``jit`` (the
        queries traced) the subsample is the first rows, a principal block of ``L``.
      block_rows: rows per kernel block when ``K_mR`` is not kept (``None``: kept whole when
        it takes at most a quarter of the free memory, else planned): batches of whole
        queries (each block's kernel values used once an iteration, ``L`` applied per
        query), or, when a query has more rows than a block, blocks of rows with ``L``
        applied to all rows at once (O(m), the kernel values formed twice an iteration).
        A given value is used as given.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(40, num_features=4, seed=0)
      >>> p, k = rj.Problem(d.X, d.y, d.qid), rj.gaussian_kernel(0.2)
      >>> rows = np.arange(0, 800, 8)
      >>> f = rj.fit(p, rj.Falkon(k, rows), lam=1.0).value
      >>> g = rj.fit(p, rj.Nystrom(k, rows), lam=1.0).value
      >>> bool(np.allclose(rj.predict(f, d.X), rj.predict(g, d.X), atol=1e-4))
      True
    """

    kernel: Kernel
    basis: object
    options: CG = CG()
    precond_rows: Optional[int] = None
    block_rows: Optional[int] = None
    seed: int = 0

    def __post_init__(self):
        check_kernel_arg(self.kernel, allow_none=False)
        check_seed(self.seed)
        if not isinstance(self.options, CG):
            raise TypeError(f"options must be a rankjax.CG, got {type(self.options).__name__}")
        if self.options.x0 is not None:
            raise ValueError("Falkon takes no x0 (its iterate lives in the preconditioned space)")
        for name in ("precond_rows", "block_rows"):
            if getattr(self, name) is not None:
                check_count(getattr(self, name), name)
        object.__setattr__(self, "basis", as_nystrom(self.basis, self.seed))

    def allows_zero(self, problem) -> bool:
        return problem.valid is not None           # early stopping regularises

    stops_early = True

    def _precond_rows(self, m: int, bp: int) -> int:
        """``u``: the preconditioner's rows (``3 b`` by default, at most ``m``)."""
        return min(m, 3 * bp if self.precond_rows is None else self.precond_rows)

    @singledispatchmethod
    def plan(self, problem, methods, L, folds):
        """The basis blocks and the preconditioner's from the shapes: :math:`u b + 6 b^2 + 4 m`
        values, ``u`` the subsample's rows (whole queries: at most one query more, padded
        to its bucket), refused up front (:class:`~rankjax.MemoryPlanError`); no route."""
        m = problem.rows().shape[0]
        b = self.basis.rows_among(m)
        bp = int(padded_size(b))
        u = self._precond_rows(m, bp)
        up = int(padded_size(min(m, u + largest_query(problem.graph) - 1)))
        check_memory((up * bp + 6 * bp * bp + 4 * m) * compute_dtype(problem.X).itemsize,
                     f"Falkon with {b} basis rows and a {u}-row preconditioner",
                     "use a smaller basis or precond_rows")

    @plan.register(ShardedData)
    def _(self, data, methods, L, folds):
        """A sharded problem holds each device's blocks: nothing to plan here."""

    @singledispatchmethod
    def fit(self, problem, lam, state):
        X = dense_rows(problem)
        y, graph = problem.y, problem.graph
        graph.check_splittable("Falkon (its preconditioner's subsample)")
        if y.ndim != 1:
            raise ValueError("Falkon solves one output: fit one column of y at a time (or vmap)")
        m = X.shape[0]
        index, B = take_basis(X, self.basis, ranking_form(self.kernel, graph))
        bp, item = B.X.shape[0], X.dtype.itemsize
        sub = _subsample(X, graph, self._precond_rows(m, bp), self.seed)
        block_rows = kmr_block_rows(m, bp, item, self.block_rows)
        valid = None if problem.valid is None else (
            dense_rows(problem.valid), problem.valid.y, problem.valid.graph)
        options = self.options
        if (block_rows is not None and largest_query(graph) <= block_rows
                and all(is_concrete(a) for a in jax.tree.leaves(graph))):    # whole queries
            coef, r = _falkon_folds((X, y, graph), B, sub, lam, valid, options,
                                    make_folds(graph), rows=block_rows)
        else:
            coef, r = _falkon_core((X, y, graph), B, sub, lam, valid, options, block_rows)
        b = index.shape[0]
        warn_unresolved(coef[:b], lam, "rj.fit(Falkon())", FLOOR)
        model = NystromModel(coef[:b], B.X[:b], jnp.asarray(index, jnp.int32), B.kernel)
        return Solution(model, r.result, r.stats())

    @fit.register(ShardedData)
    def _(self, data, lam, state):
        """FALKON on a sharded problem: the basis chosen among the rows it was built from
        (``data.source``) and read from ``data.X``, each device's ``K_mR`` block, one ``psum``
        per product."""
        if data.y.ndim != 1:
            raise ValueError("Falkon solves one output: fit one column of y at a time (or vmap)")
        X = dense_rows(data.source)
        index, B = take_basis(X, self.basis, ranking_form(self.kernel, data.graph))
        B = data.basis_from_layout(index, B)       # the rows of data.X, replaced or not
        bp = B.X.shape[0]
        u = 3 * bp if self.precond_rows is None else self.precond_rows
        block_rows = kmr_block_rows(data.rows.shape[1], bp, X.dtype.itemsize, self.block_rows)
        valid = None if data.valid is None else (
            dense_rows(data.valid), data.valid.y, data.valid.graph)
        options = self.options.replace_verbose(0)                 # one line per device
        coef, r = sharded_fit(data, B, lam, valid, options, u, block_rows)
        b = index.shape[0]
        warn_unresolved(coef[:b], lam, "rj.fit(Falkon())", FLOOR)
        model = NystromModel(coef[:b], B.X[:b], index.astype(np.int32) if isinstance(index, np.ndarray)
                             else index.astype(jnp.int32), B.kernel)
        return Solution(model, r.result, r.stats())


def _subsample(X, graph, u, seed) -> Subsample:
    """The preconditioner's rows: whole queries drawn at random (host) until ``u`` rows, or
    under a trace the first ``u`` rows (a principal block of ``L``)."""
    m = X.shape[0]
    if not all(is_concrete(a) for a in jax.tree.leaves(graph)):
        return Subsample(X[:u], jnp.ones(u, bool), graph.prefix(u), m / u)
    rows = query_subsample(graph, m, u, seed)
    up = int(padded_size(rows.size))
    idx = np.zeros(up, np.int64)
    idx[:rows.size] = rows
    return Subsample(jnp.asarray(X)[device_array(idx.astype(np.int32))],
                     device_array(np.arange(up) < rows.size), graph.restrict(rows, up),
                     m / rows.size)


@partial(jax.jit, static_argnames="layout")
def _falkon_sharded(problem, basis: BasisRows, lam, valid, options, scale, layout):
    mesh, axis, u, block_rows = layout

    def local(problem, basis, lam, valid, options, scale):
        X, y, graph = problem
        g = local_block(graph)
        dt = X.dtype
        mf = basis.mask.astype(dt)

        def gram_U(C):          # each device's first u rows: a principal block of L (PSD)
            PhiU = features(kernel_block(basis.kernel, X[:u], basis.X) * mf, C)
            return scale * lax.psum(mm(PhiU.T, g.prefix(u).mv(PhiU)), axis)

        C, A, floor = falkon_preconditioner(basis, gram_U, lam)
        fwd, local_bwd = block_ops(basis, X, block_rows)         # padding rows: L kills them
        bwd = lambda v: lax.psum(local_bwd(v), axis)  # noqa: E731
        scores_fn = None if valid is None else (
            lambda a: mm(basis.block(valid[0]), a) + basis.offset(a))
        return falkon_solve(C, A, lam, lambda a: bwd(g.mv(fwd(a))), bwd(g.rhs(y, dt)), scores_fn,
                            valid, options, floor)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(axis),) + (P(),) * 5,
                         out_specs=P(), check_vma=False)(problem, basis, lam, valid, options,
                                                         scale)


def sharded_fit(data, basis: BasisRows, lam, valid, options, precond_rows, block_rows):
    """``(coef [b_pad], CGResult)`` of FALKON on sharded rows: each device keeps its rows'
    ``K_mR`` block, the CG matvec is a per-device product plus one ``psum`` of a ``[b]``
    vector; the preconditioner's subsample is the first ``precond_rows / D`` rows of every
    device (a principal block of ``L``: PSD)."""
    dense_only(data, "rj.fit(scale.shard(...), Falkon(...))")
    D, width = data.rows.shape
    u = int(min(width, -(-precond_rows // D)))
    real = int(np.minimum(u, (data.rows >= 0).sum(1)).sum())
    scale = data.num_rows / max(real, 1)
    return _falkon_sharded((data.X, data.y, data.graph), basis, lam, valid, options, scale,
                        (data.mesh, data.axis, u, block_rows))
