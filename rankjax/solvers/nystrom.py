r"""Nyström (basis-vector, subset-of-regressors) RankRLS (Pahikkala et al. 2009, §3.5,
eq. 40-42): ``f(x) = sum_{i in R} a_i k(x, x_i)`` on ``b`` basis rows ``R``, minimising
:math:`(K_R^T a - y)^T L (K_R^T a - y) + \lambda a^T K_{RR} a`, i.e.
:math:`a = (K_R L K_R^T + \lambda K_{RR})^{-1} K_R L y`. Computed as primal RankRLS on the Nyström
features :math:`\Phi = K_{mR} C^{-T}` (:math:`C C^T = K_{RR} + \varepsilon I`, ``ε = b eps32 max diag
K_RR`` in every dtype):
:math:`O(m b^2)` time, ``O(m b)`` memory, any kernel and graph; :math:`a = C^{-T} w`.
"""
from __future__ import annotations

import dataclasses
from functools import partial, singledispatchmethod
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._core import lapack
from .._core.checks import check_count, check_seed
from .._core.host import is_concrete
from .._core.traced import nan_unless
from .._core.log import compiled, level, run
from .._core.memory import compute_dtype
from .._core.resolved import warn_unresolved
from .._solution import Solution, lane_codes
from .._core.segments import padded_size
from ..graphs.folds import make_folds, premerge
from ..kernels.basis import (Basis, BasisRows, as_nystrom, basis_system, coef_from, features,
                             take_basis)
from ..kernels.kernel import Kernel, kernel_block, ranking_form
from .._core.types import saveable
from ..scale.layout import ShardedData, dense_only
from .base import AbstractSolver, check_kernel_arg, dense_rows, solver
from .fold_batches import BATCH_ROWS, batch_folds

from .holdout import (HoldOut, holdout_from_system, two_phase)
from .models import NystromModel, NystromPath, path_scores
from .holdout import factored_holdout
from .primal import UNRESOLVED
from .ridge import decompose_primal, features_floor, primal_system, ridge_solve
from .nystrom_blocked import (UNRESOLVED_WIDE, basis_coef, fit_blocked, holdout_blocked,
                              holdout_sharded, path_blocked)
from .nystrom_plan import (PAD_WORK, Plan, check_nystrom_memory, fold_bound, largest_query,
                           nystrom_plan)

__all__ = ["Nystrom", "nystrom_blocks"]


_ANY_BASIS = Basis(size=1)


@jax.jit
def _nystrom_fit(X, y, graph, basis: BasisRows, lam):
    C = basis.factor()
    G, b = primal_system(features(basis.block(X), C), y, graph, root=True)
    lam = jnp.asarray(lam, G.dtype)
    return nan_unless(lam >= features_floor(G), coef_from(C, ridge_solve(G, b, lam)))


@partial(jax.jit, static_argnames=("block_size",))
def _nystrom_path(X, y, graph, basis: BasisRows, lams, X_valid, block_size=None):
    C = basis.factor()
    G, b = primal_system(features(basis.block(X, block_size), C), y, graph, root=True)
    W = decompose_primal(G, b).coef_path(lams)
    ok = lams >= features_floor(G)
    coef = nan_unless(ok, basis_coef(C, W, 1))                             # [L, b_pad(, k)]
    valid = None if X_valid is None else (path_scores(basis.block(X_valid, block_size), coef)
                                          + basis.offset(coef, 1))
    return coef, valid


@compiled(static_argnames=("route",))
def _nystrom_holdout(X, y, graph, basis: BasisRows, lams, folds, route="both"):
    r"""``(predictions [L, m(, k)], coef [L, b_pad(, k)])``: the hold-out and the full-data
    basis coefficients of every λ from one ``eigh`` of :math:`\Phi^T L \Phi` (``b x b``), with the
    features :math:`\Phi = K_{mR} C^{-T}` formed (:math:`O(m b^2)`) and the system in root form
    :math:`(S \Phi)^T (S \Phi)`: the transformed :math:`C^{-1} (K_{Rm} L K_{mR}) C^{-T}` squares the
    condition of ``C``, which float32 cannot afford at small λ (docs/design.md;
    benchmarks/design_measurements.md §8)."""
    C = basis.factor()
    Phi = features(basis.block(X), C)                              # [m, b]
    G, b = primal_system(Phi, y, graph, root=True)
    out = holdout_from_system(Phi, y, graph, lams, folds, G, b, route=route, weights=True,
                              u=basis.constant_row(C))
    (pred, W), floor = out if route == "shared" else (out, None)    # W [L, r(, k)]
    coef = basis_coef(C, W, 1)
    ok = lams >= features_floor(G)
    if route == "shared":
        return nan_unless(ok, (pred, coef)), floor
    return nan_unless(ok, (pred, coef))


def _why(why: str) -> str:
    """The reason a Nyström lane is NaN: a factor's rounding or the features' floor."""
    return f"{why}, or λ below EIGH_RTOL eps ||Φ^T L Φ|| (the features' floor)"


def _head(a, b, axis=0):
    """The first ``b`` entries of ``a`` along ``axis``: sliced on the host when concrete (a
    new basis size in the bucket compiles no slicing program), traced otherwise."""
    if a.shape[axis] == b:
        return a
    where = (slice(None),) * axis + (slice(0, b),)
    return np.asarray(a)[where] if is_concrete(a) else a[where]


def _index(index):
    return index.astype(np.int32) if isinstance(index, np.ndarray) else index.astype(jnp.int32)


def nystrom_blocks(params, X, basis: BasisRows, kernel: Kernel):
    r"""``(K_mR, K_RR + ε I)`` of the Nyström model at ``params``: the kernel blocks of the
    (ARD-scaled) rows and centres (``params["centres"]`` when learned, else the basis
    rows), padding columns zero and a unit diagonal on padding, ``ε`` the jitter of
    :func:`~rankjax.kernels.basis.basis_cholesky` (the features are :math:`\Phi = K_{mR} C^{-T}`)."""
    kern = kernel.with_log_params(params)
    mf = basis.mask.astype(X.dtype)
    R = params.get("centres", basis.X) * mf[:, None]
    s = params.get("log_scales")
    Xs, Rs = (X, R) if s is None else (X * jnp.exp(s), R * jnp.exp(s))
    return kernel_block(kern, Xs, Rs) * mf, basis_system(kernel_block(kern, Rs, Rs), basis.mask)


@saveable
@solver(leaves=("kernel",))
class Nystrom(AbstractSolver):
    r"""The basis-vector (Nyström) model on ``b`` training rows ``R`` (Pahikkala et al.
    2009, §3.5): primal RankRLS on ``b`` features,

    .. math::

       f(x) = \sum_{i \in R} a_i\, k(x, x_i), \qquad
       (K_{Rm} L K_{mR} + \lambda K_{RR})\, a = K_{Rm} L y .

    Attributes:
      kernel: a :class:`Kernel`.
      basis: an int ``b`` (a uniform draw with ``seed``), ``[b]`` row indices, or a
        :class:`Basis` (e.g. ``Basis(200, method="kmeans++")``, drawn in the kernel's
        feature space).
      seed: the draw of an int ``basis``.
      block_rows: rows of a batch of whole queries (``None``:
        ``BATCH_ROWS``; a batch holds at least one
        fold): the fit, path and hold-out sum :math:`\Phi^T L \Phi` over the batches and form each
        batch's rows again for its folds (``nystrom_plan``): :math:`O(m b^2)` time,
        :math:`O(rows b + b^2)` memory. Folds larger than the basis hold ``K_mR`` whole unless
        ``block_rows`` is given; a preference graph or a graph under a trace always do.

    On a ranking graph the rows against the basis are evaluated minus the kernel's constant
    part and ``K_RR`` whole (``model.kernel.shift``; predictions add ``k0 sum(a)`` back);
    the jitter of ``K_RR`` is ``b eps32 max diag`` in every dtype, and a λ below
    :math:`10^3 \epsilon \lVert \Phi^T L \Phi \rVert_F` is refused (docs/precision.md).

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
    block_rows: Optional[int] = None

    def __post_init__(self):
        check_kernel_arg(self.kernel, allow_none=False)
        check_seed(self.seed)
        if self.block_rows is not None:
            check_count(self.block_rows, "block_rows")
        object.__setattr__(self, "basis", as_nystrom(self.basis, self.seed))

    def take(self, X, pad=True, graph=None):
        r"""``(index [b], BasisRows)`` of this solver's basis among the rows ``X``, its kernel in
        the ``rankjax.kernels.kernel.ranking_form`` of ``graph`` (unshifted without one);
        ``pad=None``: padded to its bucket while :math:`m b^2` is below ``PAD_WORK``."""
        if pad is None:
            pad = X.shape[0] * self.basis.rows_among(X.shape[0]) ** 2 < PAD_WORK
        kernel = self.kernel if graph is None else ranking_form(self.kernel, graph)
        return take_basis(X, self.basis, kernel, pad=pad)

    @singledispatchmethod
    def plan(self, problem, methods, L, folds) -> Optional[Plan]:
        """The route of ``methods`` over ``L`` λ from the shapes alone, its memory checked
        (:class:`~rankjax.MemoryPlanError` when it cannot fit): a hold-out's ``rows`` of a
        batch of whole folds (``None``: ``K_mR`` whole) for ``folds`` (drawn
        :class:`~rankjax.Folds`, or before they are drawn a count ``k`` or ``None`` for
        leave-query-out; ``fold_bound`` of ``nystrom_plan``); a fit's or path's rows of a
        batch of whole queries where the graph splits into them (a concrete query graph),
        else ``K_mR`` whole; ``tune``'s ``m x b`` blocks and its learned model's fit."""
        m, n = problem.rows().shape
        b, dtype = self.basis.rows_among(m), compute_dtype(problem.X)
        if "cv_predictions" in methods:          # the descent's blocks, then its model's fit
            check_nystrom_memory(m, int(padded_size(b)), dtype, 10, "tune with a Nyström basis")
        method = "holdout" if "holdout" in methods else "path" if "path" in methods else "fit"
        if method == "holdout":
            fold_rows = fold_bound(problem.graph, m, folds)
            rows = nystrom_plan(m, n, int(padded_size(b)), dtype, L=L,
                                tail=int(np.prod(problem.y.shape[1:])), fold_rows=fold_rows,
                                block_rows=self.block_rows)
            return Plan(rows, L, fold_rows)
        what, graph = f"the Nyström {method}", problem.graph
        if problem.valid is not None and method == "path":
            check_nystrom_memory(problem.valid.X.shape[0], int(padded_size(b)), dtype, 2,
                                 "the Nyström path's validation scores")
        if graph.splittable and all(is_concrete(a) for a in jax.tree.leaves(graph)):
            return Plan(nystrom_plan(m, n, b, dtype, L=L, fold_rows=largest_query(graph),
                                     block_rows=self.block_rows, what=what, folds=False), L, 0)
        check_nystrom_memory(m, b, dtype, 4, what, "use a smaller basis, or call it outside "
                             "jit with a query graph (row blocks of whole queries)")
        return Plan(None, L, 0)

    @plan.register(ShardedData)
    def _(self, data, methods, L, folds):
        """A sharded hold-out's row blocks on every device (``rows``), planned."""
        rows = self.block_rows or BATCH_ROWS
        m, n = data.source.X.shape
        D, width = data.rows.shape
        nystrom_plan(width, n, int(padded_size(self.basis.rows_among(m))), data.X.dtype,
                     L=L, fold_rows=width, block_rows=rows)
        return Plan(rows, L, width)

    def fit(self, problem, lam, state):
        X, rows = dense_rows(problem), state.plan.rows
        graph = problem.graph
        index, B = self.take(X, pad=None, graph=graph)
        if rows is None:
            coef = _nystrom_fit(X, problem.y, graph, B, lam)
        else:
            coef = fit_blocked(X, problem.y, graph, B, lam,
                                        batch_folds(make_folds(graph), rows, 1, B.X.shape[0]),
                                        rows=rows)
        warn_unresolved(coef, lam, "rj.fit(Nystrom())", _why(UNRESOLVED))
        b = index.shape[0]
        model = NystromModel(_head(coef, b), _head(B.X, b), _index(index), B.kernel)
        return Solution(model, lane_codes(coef, lanes=False), {})

    def path(self, problem, lams, state):
        X, rows = dense_rows(problem), state.plan.rows
        index, B = self.take(X, pad=None, graph=problem.graph)
        Xv = None if problem.valid is None else dense_rows(problem.valid)
        if rows is None:
            coef, valid = _nystrom_path(X, problem.y, problem.graph, B, lams, Xv)
            why = UNRESOLVED
        else:
            folds = batch_folds(make_folds(problem.graph), rows, lams.shape[0], B.X.shape[0])
            coef, valid = path_blocked(X, problem.y, problem.graph, B, lams, folds,
                                                Xv, rows=rows)
            why = UNRESOLVED_WIDE
        warn_unresolved(coef, lams, "rj.path(Nystrom())", _why(why))
        b = index.shape[0]
        path = NystromPath(lams, _head(coef, b, 1), _head(B.X, b), _index(index), B.kernel,
                           None, valid)
        return Solution(path, lane_codes(coef), {})

    @singledispatchmethod
    def holdout(self, problem, lams, folds, state):
        X = dense_rows(problem)
        lams = lams.astype(X.dtype)
        L = lams.shape[0]
        if not state.plan.serves(L, fold_bound(problem.graph, X.shape[0], folds)):
            raise ValueError(f"state was planned for folds of up to {state.plan.fold_rows} "
                             f"rows and {state.plan.L} λ: make it with solver.init(problem, "
                             f"'holdout', L={L}, folds=folds)")
        rows = state.plan.rows
        index, B = self.take(X, pad=True if rows is None else None, graph=problem.graph)
        folds = (premerge(folds, L, B.X.shape[0]) if rows is None
                 else batch_folds(folds, rows, L, B.X.shape[0]))
        if rows is None:
            pred, coef = two_phase(_nystrom_holdout, X, problem.y, problem.graph, B, lams,
                                   folds, lams=lams, verbose=level())
        else:
            pred, coef = run(level(), holdout_blocked, X, problem.y, problem.graph, B,
                             lams, folds, rows=rows)
        warn_unresolved(pred, lams, "rj.holdout(Nystrom())",
                        _why(UNRESOLVED if rows is None else UNRESOLVED_WIDE))
        b = index.shape[0]
        path = NystromPath(lams, _head(coef, b, 1), _head(B.X, b), _index(index), B.kernel)
        return Solution(HoldOut(lams, pred, folds, path), lane_codes(pred), {})

    @holdout.register(ShardedData)
    def _(self, data, lams, folds, state):
        """Leave-query-out of a sharded problem in row blocks on every device, the basis
        chosen among the rows it was built from (``data.source``) and read from ``data.X``
        (a replaced ``X``, scaled under ``vmap``, gives its own basis rows)."""
        dense_only(data, "rj.holdout(scale.shard(...), Nystrom(...))")
        if data.num_queries < 2:               # leaving the one query out trains on nothing
            raise ValueError("the sharded hold-out needs at least 2 queries (leave-query-out)")
        X = dense_rows(data.source)
        lams = lams.astype(data.X.dtype)
        index, B = self.take(X, graph=data.graph)
        B = data.basis_from_layout(index, B)       # the rows of data.X, replaced or not
        rows = state.plan.rows
        pred, coef = holdout_sharded(data.X, data.y, data.graph, B, lams, data.folds,
                                      X.shape[0], (data.mesh, data.axis, rows))
        pred = data.unshard(pred, 1)
        warn_unresolved(pred, lams, "rj.holdout(Nystrom())", _why(UNRESOLVED_WIDE))
        b = index.shape[0]
        path = NystromPath(lams, _head(coef, b, 1), _head(B.X, b), _index(index), B.kernel)
        return Solution(HoldOut(lams, pred, None, path), lane_codes(pred), {})

    def tuned_kernel(self):
        return self.kernel

    def basis_rows(self, m: int) -> int:
        return self.basis.rows_among(m)

    def with_basis_rows(self, m: int, b: int) -> "Nystrom":
        return dataclasses.replace(self, basis=Basis(min(self.basis.rows_among(m), b),
                                                     seed=self.basis.seed))

    def param_keys(self) -> set:
        return super().param_keys() | {"centres"}

    def for_data(self):
        return dataclasses.replace(self, basis=_ANY_BASIS, seed=0)      # the data holds the rows

    def prepare(self, problem, state):
        """``(X, y, graph, BasisRows)``: the basis drawn once (padded to its bucket), its
        ``m x b`` blocks planned by :meth:`plan` (about 10 live in a differentiated step)."""
        X = dense_rows(problem)
        _, B = self.take(X)
        return X, problem.y, problem.graph, B

    def cv_predictions(self, params, data, folds):
        r"""Primal RankRLS on the features :math:`\Phi = K_{mR} C^{-T}` (:math:`C C^T = K_{RR} +
        \varepsilon I`) at ``params`` (``factored_holdout``, the rows' root form): the regularizer
        is ``λ I`` on ``Φ`` as in the grid's hold-out, so the factor of :math:`\Phi^T L \Phi +
        \lambda I` holds wherever the grid's does (a factor of ``K_Rm L K_mR + λ K_RR`` fails in
        float32 along the near-null directions of ``K_RR``)."""
        X, y, graph, basis = data
        KmR, KRR = nystrom_blocks(params, X, basis, self.kernel)
        Phi = features(KmR, lapack.cholesky(KRR))
        return factored_holdout(Phi, y, graph, folds, jnp.exp(params["log_lam"]), root=True)
