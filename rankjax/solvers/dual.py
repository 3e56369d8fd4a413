r"""Dual (kernel) RankRLS: :math:`A = (L K + \lambda I)^{-1} L y`, solved in the symmetric form
:math:`A = S (S K S + \lambda I)^{-1} S^+ L y` with :math:`S = L^{1/2}` (Pahikkala et al. 2007, Thm 1;
2009, eq. 17, §3.2): one λ by a Cholesky factor, a grid by one ``eigh`` of ``S K S``
(on the range of ``S`` for query graphs, :mod:`~rankjax.solvers.reduced`), the exact
hold-outs of every λ (§3.3-3.4, Lemma 2) and the differentiable hold-out of a Gaussian or
degree-2 polynomial kernel. ``S`` is a segment operation for query graphs and the dense
root of ``L`` for tie-excluded and preference graphs. :math:`O(m^3)`.
"""
from __future__ import annotations

from functools import partial, singledispatchmethod
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from .._core import lapack
from .._core.checks import check_symmetric
from .._core.host import is_concrete
from .._core.traced import nan_unless
from .._core.linalg import eigh_psd_checked, spectral_filter
from .._core.log import compiled, level, run
from .._core.memory import check_memory, compute_dtype, kernel_plan
from .._core.products import HI
from .._core.resolved import warn_unresolved
from .._core.segments import block_means
from .._core.sparse import as_dense, is_bcoo
from .._problem import KernelProblem
from .._solution import Solution, lane_codes
from ..graphs.graph import check_problem
from ..graphs.folds import over_folds, premerge
from ..kernels.kernel import Kernel, kernel_core, ranking_form
from .._core.types import saveable
from .base import AbstractSolver, check_kernel_arg, solver, takes
from .holdout import HoldOut, fold_predictions, woodbury_fold
from .lpo import dual_pairs
from .models import DualModel, DualPath, KernelModel, LinearModel, PrimalPath, path_scores
from .primal import linear_cv_predictions
from .reduced import range_rows, reduced_eigh
from .floors import RESOLVE_RTOL, ROUNDING_RTOL, check_spectrum, rounding_signs, spread
from .ridge import decompose_dual, dual_system, ridge_solve_checked

__all__ = ["Dual", "kernel_root_product", "check_kernel_matrix"]


def _kernel(K, kernel):
    """``K`` itself, or the kernel matrix of the rows ``K`` holds (built in the program)."""
    return K if kernel is None else kernel_core(kernel, K, K, None, True)


def rounding_settled(K, dec, coords, A, lams):
    r"""``[L]``: the lanes whose solution a perturbation of ``K`` by its own rounding moves by at
    most :data:`ROUNDING_RTOL` (on the system's norm, the spread of the fitted scores).

    Refinement answers the system as stored; what no algorithm in the dtype removes is the
    rounding of ``K`` itself, :math:`|\delta K_{ij}| \le u |K_{ij}|` (``u = eps / 2``), which
    moves :math:`\beta = (S K S + \lambda I)^{-1} S y` by :math:`-(S K S + \lambda I)^{-1} S\,
    \delta K\, S \beta` to first order: up to :math:`\epsilon \Gamma / \lambda` of it, and far
    more, relative to what varies, for a kernel near its constant given precomputed (whose
    shift the library cannot apply). The probe is that first-order term for one perturbation of
    rounding size, :math:`\delta K = u |K| \circ R` with ``R`` symmetric pseudo-random signs
    (:func:`~rankjax.solvers.floors.rounding_signs`), solved with the decomposition:
    :math:`O(L m^2)`, an a posteriori condition estimate (Higham 2002, ch. 15) in place of an a
    priori floor. ``A [L, m(, k)]``: the coefficients of ``coords`` (:meth:`Decomposition.lift`)."""
    dK = (jnp.finfo(K.dtype).eps / 2) * jnp.abs(K) * rounding_signs(K.shape, K.dtype)
    dG = jnp.moveaxis(dec.root.apply(jnp.moveaxis(path_scores(dK, A), 0, -1)),
                      -1, 0)                                               # [L, m(, k)]
    eig = dec.eig
    D = spectral_filter(eig.values[None, :], lams[:, None])                # [L, r]
    dc = D.reshape(D.shape + (1,) * (coords.ndim - 2)) * jnp.einsum(
        "pr,lp...->lr...", eig.vectors, dG, precision=HI)
    return spread(eig.values, dc) <= ROUNDING_RTOL ** 2 * spread(eig.values, coords)


@jax.jit
def _dual_fit(K, y, graph, lam, kernel=None):
    K = _kernel(K, kernel)
    system = dual_system(K, y, graph)
    lam = jnp.asarray(lam, K.dtype)
    B, psd, low = ridge_solve_checked(system.G, system.rhs, lam, RESOLVE_RTOL["path"])
    return nan_unless(psd, system.root.apply(B)), psd, low


@jax.jit
def _dual_path(K, y, graph, lams, K_valid, rows=None, kernel=None):
    K = _kernel(K, kernel)
    dec = decompose_dual(K, y, graph, "path", eigh_psd_checked if rows is None   # rows: reduced
                         else partial(reduced_eigh, rows=rows, graph=graph),
                         None if rows is None else rows.queries)
    coords, ok = dec.coords(lams)
    _, A = dec.lift(coords)                                 # [L, m(, k)]
    ok = ok & rounding_settled(K, dec, coords, A, lams)
    out = nan_unless(ok, (A, path_scores(K, A), None if K_valid is None else path_scores(K_valid, A)))
    return out, dec.flags(), ok


@compiled()
def _dual_holdout(K, y, graph, lams, folds, kernel=None, rows=None):
    if kernel is not None:        # K holds the rows X: their kernel matrix, in this program
        K = kernel_core(kernel, K, K, None, True)
    grid = None if rows is None else rows.queries
    dec = decompose_dual(K, y, graph, "holdout", eigh_psd_checked if rows is None
                         else partial(reduced_eigh, rows=rows, graph=graph), grid)
    eig = dec.eig
    KSU = kernel_root_product(K, graph, eig, dec.root, rows is not None, grid)  # [m, r]
    # refined [L, r(, k)]; no rounding probe of K: the hold-out's floor, sqrt(eps) Γ, stands far
    # above what the rounding of K moves (the probe refused answered lanes of precomputed K)
    coords, settled = dec.coords(lams)
    D = spectral_filter(eig.values[None, :], lams[:, None])
    beta, A = dec.lift(coords)                                         # [L, m(, k)]
    F = path_scores(K, A)               # K S β: not K S U c, which holds the eigh's residual
    one = partial(woodbury_fold, graph, Pfeat=KSU, D=D, lams=lams, F=F, y=y, K=None,
                  U=eig.vectors, values=eig.values, coef=beta)
    pred = over_folds(folds, lams.shape[0], KSU.shape[1], F.shape, K.dtype, lambda P: one)
    clear = above_cancellation(graph, pred, F, lams, dec.floor) & settled
    return nan_unless(clear, (pred, A)), (dec.flags(), clear)


def above_cancellation(graph, pred, fitted, lams, floor):
    r"""``[L]``: the lanes whose hold-out predictions stand above the rounding of the fold
    formula, :math:`\lambda\, s(pred) \ge floor\, s(fitted)` with ``s`` the spread on the graph
    (:math:`\sqrt{v^T L v}`: within queries). The formula subtracts terms of the in-sample
    scores' size (``fitted [L, m(, k)]``), so its rounding, about 1 % of them at ``floor``
    (:data:`~rankjax.solvers.floors.RESOLVE_RTOL`), is that much larger relative to predictions
    that are smaller than them: a kernel so narrow that ``K`` is nearly the identity fits its
    rows and predicts the held-out ones near 0."""
    def on_graph(V):                     # sqrt(v^T L v) per lane
        q = jnp.sum((V * jax.vmap(graph.mv)(V)).reshape(V.shape[0], -1), axis=1)
        return jnp.sqrt(jnp.abs(q))
    return lams * on_graph(pred) >= floor * on_graph(fitted)


def kernel_root_product(K, graph, eig, root, centred: bool = False, grid=None):
    r"""``K S U`` ``[m, m]``, the rows of ``H`` the dual folds need, for :math:`S K S = U
    \operatorname{diag}(Γ) U^T` (``eig``) and the root ``S`` (``root``), without the :math:`m^3`
    product where ``S`` is a segment root (:meth:`~rankjax.graphs.graph.QueryGraph.segment_root`,
    :math:`S = \sqrt{e_c n_c} (I - 1 1^T / n_c)`): with :math:`Π = S^+ S` (the within-query centring
    on queries of nonzero weight), :math:`K S U = S^+ U Γ + (I - Π) K S U` and ``(I - Π)`` takes
    query means, so the second term is the ``[S, m]`` query-mean rows of ``K`` (``S`` the padded
    query count) times ``S U``: a twelfth of the product's flops at 3,005 rows in 256 padded queries
    (benchmarks/REPORT.md §8); :math:`S^+ v = S v / (e_c n_c)`. ``centred``: the columns of ``U``
    sum to 0 over every query (the range of ``S``, :func:`~rankjax.solvers.reduced.reduced_eigh`),
    so their query means are not formed (2.2 GFlop there). A query of zero weight and several rows
    (``Π = 0`` there, its rows are not means) and the other graphs take the product. ``grid``: the
    queries' rows for :func:`~rankjax._core.segments.row_sums`."""
    U = eig.vectors
    form = graph.segment_root(K.dtype)
    if form is None:
        return jnp.matmul(K, root.apply(U), precision=HI)
    seg, num, en, n = form
    inv = jnp.where(en > 0, 1 / jnp.where(en > 0, en, 1), 0)
    inv_n = 1 / jnp.maximum(n, 1)[:, None]
    if centred:
        Umean = 0
    else:
        onehot = (seg[None, :] == jnp.arange(num)[:, None]).astype(K.dtype)     # [S, m]
        Umean = (jnp.matmul(onehot, U, precision=HI) * inv_n)[seg]               # [m, r]
    s = jnp.sqrt(en)
    # rows of K's query means times S U: Kbar S U, Kbar = the [S, m] query means of K, and
    # Kbar S centres Kbar's columns within each query by the means B of Kbar's query blocks
    # (the sandwich's, :func:`~rankjax._core.segments.block_means`: XLA forms them once)
    Kbar, B = block_means(K, seg, num, n, grid)                                # [S, m], [S, S]
    T = jnp.matmul(s[seg] * (Kbar - B.T[:, seg]), U, precision=HI)             # [S, r]
    fast = lambda: ((s * inv)[seg][:, None] * (U - Umean) * eig.values.astype(K.dtype)  # noqa: E731
                    + T[seg])
    full = lambda: jnp.matmul(root.apply(K).T, U, precision=HI)              # noqa: E731  (S K)^T U
    return lax.cond(jnp.any((en <= 0) & (n >= 2)), full, fast)


def kernel_cv_predictions(params, data, folds, kernel: Kernel):
    r"""The differentiable hold-out of an exact kernel at ``params`` (``log_gamma``,
    ``log_coef0``, ARD ``log_scales``): :math:`S K S + \lambda I = C C^T`, :math:`P = K S C^{-T}`,
    :math:`H = (K - P P^T) / \lambda`, :math:`f = P C^{-1} S y` (a Cholesky factor, smooth in ``params``)."""
    X, y, graph = data[:3]
    lam = jnp.exp(params["log_lam"])
    s = params.get("log_scales")
    Xs = X if s is None else X * jnp.exp(s)
    K = kernel_core(ranking_form(kernel.with_log_params(params), graph), Xs, Xs, None, True)
    system = dual_system(K, y, graph)
    C = lapack.cholesky(system.G + lam * jnp.eye(K.shape[0], dtype=K.dtype))
    tri = lambda B: lapack.solve_triangular(C, B)                            # noqa: E731
    P = tri(system.root.apply(K)).T                                        # K S C^{-T} [m, m]
    F = jnp.matmul(P, tri(system.rhs), precision=HI)
    return fold_predictions(graph, P, F, y, folds, lam, K)


def check_kernel_matrix(K, y, graph, name: str = "K", count: int = 5, what: str = "the dual solve"):
    """``K`` a dense square ``[m, m]`` kernel matrix for the graph's rows; returns ``(K, y)``.
    Refuses up front when ``count`` ``m x m`` matrices (the work's peak) do not fit."""
    if is_bcoo(K):
        raise TypeError(f"{name} must be a dense kernel matrix")
    if getattr(K, "ndim", 0) == 2:
        kernel_plan(K.shape[0], compute_dtype(K), count, what)
    K, y = check_problem(K, y, graph, name)
    return check_symmetric(K, name), y


@saveable
@solver(leaves=("kernel",))
class Dual(AbstractSolver):
    r"""The dual system (``m x m``; Pahikkala et al. 2009, §3.2), solved as
    :math:`a = S (S K S + \lambda I)^{-1} S y` with :math:`S^2 = L` (Pahikkala et al. 2007,
    Thm 1):

    .. math::

       (L K + \lambda I)\, a = L y , \qquad f(x) = \sum_i a_i\, k(x, x_i) .

    Attributes:
      kernel: a :class:`Kernel`; ``None``: the linear kernel :math:`X X^T` of a feature problem
        (its models are linear weights :math:`w = X^T a`), or the matrix itself of a
        ``precomputed`` problem.
      block_size: rows of the ``[m_test, m]`` kernel evaluated at a time when its models
        predict (``None``: all at once).

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Dual(rj.gaussian_kernel(0.5)), lam=1.0)
      >>> s.value.coef.shape
      (127,)
    """

    kernel: Optional[Kernel] = None
    block_size: Optional[int] = None

    def __post_init__(self):
        check_kernel_arg(self.kernel, allow_none=True)
        if self.block_size is not None and not (isinstance(self.block_size, int)
                                                and self.block_size >= 1):
            raise ValueError(f"block_size must be a positive int, got {self.block_size!r}")

    MATRICES = {"fit": 5, "path": 8, "holdout": 8, "leave_pair_out": 6, "cv_predictions": 12}
    """The ``m x m`` matrices each method holds at once (its memory plan; a path and a hold-out
    count the wide copy of ``S K S`` their refinement reads, two, and a path the rounding
    probe's perturbation, one)."""

    def plan(self, problem, methods, L, folds):
        """The most ``MATRICES`` of ``methods``: ``m x m`` matrices from the shapes, refused up
        front (:class:`~rankjax.MemoryPlanError`) before any kernel value; no route."""
        if self.tuned_kernel() is None:                # the linear model's tune: n x n
            methods = [m for m in methods if m != "cv_predictions"] or ["fit"]
        method = max(methods, key=self.MATRICES.__getitem__)
        X = problem.X
        what = {"cv_predictions": "tune with an exact kernel"}.get(
            method, f"the dual {method.replace('_', '-')}")
        kernel_plan(X.shape[0], compute_dtype(X), self.MATRICES[method], what)
        if "path" in methods and problem.valid is not None and not isinstance(problem, KernelProblem):
            Xv = problem.valid.X                      # the validation rows' kernel
            check_memory(2 * Xv.shape[0] * X.shape[0] * compute_dtype(X).itemsize,
                         f"the validation kernel of {Xv.shape[0]} x {X.shape[0]} rows",
                         "use rj.Nystrom(kernel, basis), which holds m x b kernel values")

    @singledispatchmethod
    def _inputs(self, problem, shift: bool = True):
        """``(the dense rows X, kernel built in the program, X)`` (planned by :meth:`plan`);
        the kernel in its ``rankjax.kernels.kernel.ranking_form`` unless ``shift`` is False."""
        X = jnp.asarray(as_dense(problem.rows()))
        if self.kernel is None:
            return X, Kernel("linear"), X
        return X, ranking_form(self.kernel, problem.graph) if shift else self.kernel, X

    @_inputs.register(KernelProblem)
    def _(self, problem, shift: bool = True):
        """``(K checked square and symmetric, None, None)``."""
        K = problem.X
        if is_bcoo(K):
            raise TypeError("K must be a dense kernel matrix")
        if K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be a square [m, m] kernel matrix, got shape {tuple(K.shape)} "
                             "(a rectangular [m_v, m] kernel is the valid problem of one)")
        return check_symmetric(K), None, None

    def _model(self, coef, X, kernel):
        if X is None:
            return DualModel(coef)
        if self.kernel is None:
            return LinearModel(jnp.matmul(X.T, coef, precision=HI))
        return KernelModel(coef, X, kernel)

    def _path(self, lams, coef, train, valid, X, kernel):
        if X is None:
            return DualPath(lams, coef, train, valid)
        if self.kernel is None:                      # linear: every λ's weights X^T a
            W = jnp.einsum("nm,lm...->ln...", X.T, coef, precision=HI)
            return PrimalPath(lams, W, None, valid)
        return DualPath(lams, coef, train, valid, X, kernel)

    @takes(KernelProblem)
    def fit(self, problem, lam, state):
        M, kernel, X = self._inputs(problem)
        A, psd, low = _dual_fit(M, problem.y, problem.graph, lam, kernel)
        if is_concrete(psd) and not bool(psd):     # the failed Cholesky said so: no extra eigh
            raise ValueError(f"K is not positive semidefinite: S K S + λ I has no Cholesky "
                             f"factor and S K S the eigenvalue {float(low):.3g} (beyond "
                             "rounding); a kernel matrix must be PSD: check the kernel and its "
                             "parameters")
        warn_unresolved(A, lam, "rj.fit(Dual())", "S K S + λ I has no Cholesky factor and λ is "
                        f"below {RESOLVE_RTOL['path']:g} eps times its largest eigenvalue")
        return Solution(self._model(A, X, kernel), lane_codes(A, lanes=False), {})

    @takes(KernelProblem)
    def path(self, problem, lams, state):
        M, kernel, X = self._inputs(problem)
        Kv = None
        if problem.valid is not None:
            Xv = problem.valid.X
            Kv = Xv if X is None else kernel_core(kernel, jnp.asarray(as_dense(Xv)), X)
        (A, train, valid), flags, ok = _dual_path(M, problem.y, problem.graph, lams, Kv,
                                                  range_rows(problem.graph, M.dtype), kernel)
        check_spectrum(flags, lams, "rj.path(Dual())", ok=ok)
        return Solution(self._path(lams, A, train, valid, X, kernel), lane_codes(A), {})

    @takes(KernelProblem)
    def holdout(self, problem, lams, folds, state):
        M, kernel, X = self._inputs(problem)
        lams = lams.astype(M.dtype)
        y, graph = problem.y, problem.graph
        rows = range_rows(graph, M.dtype)            # the system on the range of S (reduced)
        width = M.shape[0] if rows is None else rows.keep.shape[0]
        (pred, coef), (flags, clear) = run(level(), _dual_holdout, M, y, graph, lams,
                                           premerge(folds, lams.shape[0], width), kernel, rows)
        check_spectrum(flags, lams, "rj.holdout(Dual())", ok=clear)
        path = self._path(lams, coef, None, None, X, kernel)
        return Solution(HoldOut(lams, pred, folds, path), lane_codes(pred), {})

    @takes(KernelProblem)
    def leave_pair_out(self, problem, lams, pairs, state):
        # its formula decomposes K itself (PSD): not the shifted kernel, which is indefinite
        M, kernel, _ = self._inputs(problem, shift=False)
        lams = lams.astype(M.dtype)
        K = M if kernel is None else kernel_core(kernel, M, M, None, True)
        h = dual_pairs(K, problem.y, pairs, lams, "rj.holdout(Dual(), LeavePairOut)")
        return Solution(h, lane_codes(h.predictions), {})

    def cv_predictions(self, params, data, folds):
        kernel = self.tuned_kernel()
        if kernel is None:
            return linear_cv_predictions(params, data, folds)
        return kernel_cv_predictions(params, data, folds, kernel)


