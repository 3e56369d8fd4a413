"""Exact leave-query-out / k-fold hold-out predictions (Pahikkala et al. 2009, §3.3,
eq. 33-34, Lemma 2) for a whole λ grid from one decomposition.

With ``H = (L + λ K^{-1})^{-1}`` (primal: ``H = X (X^T L X + λ I)^{-1} X^T``) and
full-data fitted values ``f``, a fold ``U`` of whole queries (no edge to the rest)
and any factor ``L_UU = B B^T``: ``t = f_U - H_UU L_UU y_U``,
``f'_U = t + H_UU B (I - B^T H_UU B)^{-1} B^T t``. Only ``H_UU`` is needed: O(|U|^2 r)
per fold and λ.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.backend import paths
from .._core.products import mm, mv, tdot
from .._core.checks import (check_gram, is_concrete, lam_ok, nan_unless)
from .._core.resolved import warn_unresolved
from .._core.log import compiled, run
from .._core.memory import check_memory
from ..graphs.folds import (Folds, each_slice, over_folds, premerge, resolve_folds)
from ..graphs.graph import Graph, check_graph, check_problem
from ..kernels.kernel import Kernel, check_kernel, kernel_core
from ..kernels.basis import (BasisRows, coef_from, features, take_basis)
from .path import PRIMAL_UNRESOLVED, check_lams, check_spectrum
from .models import check_kernel_matrix
from .reduced import range_rows, reduced_eigh
from .._core.linalg import eigh_psd, eigh_psd_checked, spectral_filter
from .ridge import HI, by_lane, cholesky_solve, decompose_dual, eigh_floor, primal_system
from .small_solve import symmetric_solve
from .._core.segments import block_means
from .._core.sparse import as_dense
from .._core.types import saveable


@saveable
class HoldOut(NamedTuple):
    """Hold-out predictions: ``predictions [L, m(, k)]`` — row ``i`` predicted by
    the model trained without ``i``'s fold — for the grid ``lams [L]``."""

    lams: jax.Array
    predictions: jax.Array
    folds: Folds


def woodbury_fold(graph, idx, mask, Pfeat, D, lams, F, y, K):
    """Eq. 33-34 for one padded fold: ``H_UU = P_U diag(d) P_U^T`` (primal) or
    ``(K_UU - P_U diag(d) P_U^T) / λ`` (dual), never formed: with ``Q = B^T P_U``
    (``B B^T = L_UU``) the fold system is ``I - B^T H_UU B = I - Q diag(d) Q^T`` (minus
    ``B^T K_UU B`` over λ for the dual) and ``H`` meets a vector only through ``H B z``.
    The prediction without the fold, ``f_U - H L y_U + H B s`` with ``(I - B^T H B) s =
    B^T (f_U - H L y_U)``, is ``f_U + H B z`` with ``z = s - B^T y_U``, and since ``L y_U =
    B B^T y_U``, ``(I - B^T H B) z = B^T (f_U - y_U)``: one product through ``P_U`` per
    λ, where the right-hand side ``H L y`` took two more. O(|U|^2 r + |U|^3) per λ, the
    ``|U|^3`` one batched block inversion (:func:`symmetric_solve`)."""
    dtype = Pfeat.dtype
    mf = mask.astype(dtype)
    Pu = Pfeat[idx] * mf[:, None]                                   # [P, r]
    B = graph.block_root(idx, mask, dtype)
    yu = y[idx] * mf.reshape(mf.shape + (1,) * (y.ndim - 1))
    Q = tdot(B, Pu)                                                 # B^T P_U  [P, r]
    if K is not None:
        Kuu = K[idx[:, None], idx[None, :]] * (mf[:, None] * mf[None, :])
        KB = jnp.matmul(Kuu, B, precision=HI)
        BKB = tdot(B, KB)
    eye = jnp.eye(idx.shape[0], dtype=dtype)
    col = lambda d, v: d.reshape(d.shape + (1,) * (v.ndim - 1)) * v   # noqa: E731

    def system(d, lam, fu):                  # one λ: the fold's system and right-hand side
        BHB = jnp.matmul(Q * d, Q.T, precision=HI)                     # B^T P_U D P_U^T B
        if K is not None:
            BHB = (BKB - BHB) / lam
        return eye - BHB, mv(B.T, fu - yu)

    def predict(d, lam, fu, z):
        HBz = jnp.matmul(Pu, col(d, tdot(Q, z)), precision=HI)         # H B z
        if K is not None:
            HBz = (mv(KB, z) - HBz) / lam
        return fu + HBz

    # every λ's system solved as one batch; large folds on the CPU one λ at a time (LAPACK
    # gets unbatched calls, see _backend; and one λ's [P, r] products in memory at a time)
    serial = paths().serial(idx.shape[0])
    over_lams = each_slice if serial else (lambda f, *a: jax.vmap(f)(*a))          # noqa: E731
    fu = F[:, idx]
    M, r = over_lams(system, D, lams, fu)
    z = each_slice(symmetric_solve, M, r) if serial else symmetric_solve(M, r)
    return over_lams(predict, D, lams, fu, z)                      # [L, P(, k)]


def _refit_fold(graph, idx, mask, X, G, b, y, lams, direct=False):
    """Primal retraining without a large fold in feature space: ``G - X_U^T L_UU X_U``,
    ``b - X_U^T L_UU y_U``, one ``eigh`` of ``n x n`` (or with ``direct`` one Cholesky
    factor per λ, :func:`~rankjax.solvers.ridge.cholesky_solve`); O(|U|^2 n + n^3) per fold."""
    dtype = X.dtype
    mf = mask.astype(dtype)
    B = graph.block_root(idx, mask, dtype)
    Xu = X[idx] * mf[:, None]
    Zu = tdot(B, Xu)
    yu = y[idx] * mf.reshape(mf.shape + (1,) * (y.ndim - 1))
    Gu, bu = G - jnp.matmul(Zu.T, Zu, precision=HI), b - tdot(Zu, tdot(B, yu))
    if direct:
        return jax.vmap(lambda lam: mm(Xu, cholesky_solve(Gu, bu, lam)))(lams)
    eig = eigh_psd(Gu)
    c = tdot(eig.vectors, bu)
    XV = jnp.matmul(Xu, eig.vectors, precision=HI)

    def per_lam(lam):
        d = spectral_filter(eig.values, lam)
        return jnp.matmul(XV, c * d.reshape(d.shape + (1,) * (c.ndim - 1)), precision=HI)

    return jax.vmap(per_lam)(lams)


def _check_holdout(X, y, graph, lams, folds, seed, name="X"):
    check_graph(graph)
    graph.check_splittable("the hold-out")
    X, y = check_problem(X, y, graph, name)
    folds = resolve_folds(graph, folds, seed, X.shape[0])
    return X, y, check_lams(lams).astype(X.dtype), folds


@compiled(static_argnames=("route",))
def _holdout_primal_core(X, y, graph, lams, folds, route="both"):
    """``(predictions [L, m(, k)], weights [L, n(, k)])``: the hold-out and every λ's
    full-data weights from the same ``eigh`` of ``X^T L X`` (the lanes below its floor
    from the Cholesky factor their hold-out lane makes, :func:`holdout_from_system`).
    ``(G, b)`` in the root form (``Z = S X``): no branch to the root-free form and its two
    fallback copies, 22 of the program's 89 generated kernels (compiled in 0.55 s instead
    of 0.79 s at 3,005 x 300 float32), for one pass writing ``Z`` (within noise of the run
    at 227,000 x 136)."""
    G, b = primal_system(X, y, graph, root=True)
    out = holdout_from_system(X, y, graph, lams, folds, G, b, route=route, weights=True)
    if route == "shared":
        return nan_unless(lam_ok(lams), out[0]), out[1]
    return nan_unless(lam_ok(lams), out)


def live_columns(G, X):
    """``[n]`` False for the features constant within every query to rounding: ``G_jj``
    (``= ||S x_j||^2``) at most ``m (4 eps max|x_j|)^2``, what centring leaves of a
    constant. Their weight is exactly 0 for every fold (the column lies in the null space
    of every ``X^T L X``), but a constant ``c`` enters ``H = X (G + λ I)^{-1} X^T`` as
    ``c^2 / λ``, which the fold's root then cancels: float32 lost 3.7e-2 of the hold-out at
    λ = 1e-4 to two constant columns (5 and 8) of a near-collinear problem, 2.8e-4
    without them. Masking them changes nothing in exact arithmetic."""
    eps = jnp.finfo(X.dtype).eps
    return jnp.diagonal(G) > X.shape[0] * (4 * eps * jnp.max(jnp.abs(X), axis=0)) ** 2


def holdout_from_system(X, y, graph, lams, folds, G, b, eig=None, route: str = "both",
                        weights: bool = False):
    """Eq. 33-34 hold-out predictions ``[L, m(, k)]`` of the rows ``X`` (whole queries of
    ``graph``) when the full training system ``(G, b) = (X^T L X, X^T L y)`` may include
    further rows elsewhere (other devices, other chunks): no edge leaves a query, so a
    fold needs only its own rows and the global system.

    The λ at or above :func:`~rankjax.solvers.ridge.eigh_floor` share one ``eigh`` of ``G``
    (``H = P diag(1/(Λ+λ)) P^T``, ``P = X V``); each λ below it is answered from its own
    Cholesky factor ``G + λ I = C C^T`` (``H = P P^T``, ``P = X C^{-T}``: O(m n^2) more
    for that λ), NaN where the factor fails (docs/design.md, the precision rule).

    ``route`` (static): ``"both"`` as above, in one program; ``"shared"`` only the shared
    lanes, returning ``(predictions, floor)``; ``"direct"`` only the lanes below the floor
    (zeros elsewhere). The public functions run ``"shared"`` first and ``"direct"`` only
    when some λ lies below the floor (:func:`two_phase`): the second program compiles in
    8 s at 22,702 x 136 and is never needed in float64 on ordinary data.

    ``weights``: every lane is ``(predictions, w)`` with ``w = (G + λ I)^{-1} b``
    ``[n(, k)]`` from the same decomposition or factor (one Cholesky factor per λ below
    the floor, not two)."""
    n = G.shape[0]
    X = X * live_columns(G, X)
    eig = eigh_psd(G) if eig is None else eig
    Pf = jnp.matmul(X, eig.vectors, precision=HI)                  # [m, n]
    c = tdot(eig.vectors, b)                                       # [n(, k)]
    D = spectral_filter(eig.values[None, :], lams[:, None])        # [L, n]
    Dc = D.reshape(D.shape + (1,) * (c.ndim - 1)) * c[None]
    F = jnp.einsum("mr,lr...->lm...", Pf, Dc, precision=HI)

    def folds_of(Pfeat, D, lams, F, direct):
        def fold_fn(P):
            if P > n:
                return partial(_refit_fold, graph, X=X, G=G, b=b, y=y, lams=lams, direct=direct)
            return partial(woodbury_fold, graph, Pfeat=Pfeat, D=D, lams=lams, F=F, y=y, K=None)
        return over_folds(folds, lams.shape[0], n, F.shape, X.dtype, fold_fn)

    def direct(lam):                                               # one λ, its own factor
        Cl = lax.linalg.cholesky(G + lam * jnp.eye(n, dtype=G.dtype), symmetrize_input=False)
        P = features(X, Cl)                                        # X C^{-T}  [m, n]
        z = lax.linalg.triangular_solve(Cl, b.reshape(n, -1), left_side=True, lower=True)
        pred = folds_of(P, jnp.ones((1, n), G.dtype), lam[None], mv(P, z.reshape(b.shape))[None],
                        True)[0]
        if not weights:
            return pred
        w = lax.linalg.triangular_solve(Cl.T, z, left_side=True, lower=False)
        return pred, w.reshape(b.shape)

    with_w = lambda pred, W: (pred, W) if weights else pred        # noqa: E731
    floor = eigh_floor(eig.values, G.dtype)
    W = jnp.einsum("nr,lr...->ln...", eig.vectors, Dc, precision=HI) if weights else None
    if route == "direct":
        return by_lane(lams, with_w(jnp.zeros(F.shape, F.dtype), W), direct, floor)
    shared = with_w(folds_of(Pf, D, lams, F, False), W)
    if route == "shared":
        return shared, floor
    return by_lane(lams, shared, direct, floor)


def two_phase(core, *args, lams, verbose=0):
    """``core(*args, route=...)`` for concrete float64 inputs: the shared lanes, then, only
    when some λ lies below the ``floor`` the first call returns, the ``"direct"`` program
    for those lanes, merged by lane (every floating leaf, λ axis first). Under a trace, and
    in float32 (where the smallest λ of an ordinary grid lie below the floor, and a second
    program would form the features and the ``eigh`` again: 2.2 of the 5.1 s of the
    direct program at 12,194 rows x 2,000 basis rows): ``"both"``, one program whose
    lanes above the floor skip the factorisation (:func:`~rankjax.solvers.ridge.by_lane`)."""
    if (not all(is_concrete(a) for a in jax.tree.leaves((args, lams)))
            or jnp.asarray(lams).dtype != jnp.float64):
        return run(verbose, core, *args, route="both")
    out, floor = run(verbose, core, *args, route="shared")
    low = np.asarray(lams) < float(floor)
    if not low.any():
        return out
    direct = run(verbose, core, *args, route="direct")
    pick = lambda s, d: jnp.where(low.reshape(low.shape + (1,) * (s.ndim - 1)), d, s)  # noqa: E731
    return jax.tree.map(pick, out, direct)


def holdout_primal(X, y, graph: Graph, *, lams, folds=None, seed: int = 0,
                   verbose: int = 0) -> HoldOut:
    """Leave-query-out / k-fold hold-out predictions of primal RankRLS (or RLS with an
    identity graph) for a λ grid, from one eigendecomposition of ``X^T L X``
    (Pahikkala et al. 2009, §3.3, eq. 33-34).

    Folds smaller than the number of features use eq. 33 with
    ``H = X (X^T L X + λ I)^{-1} X^T = P diag(1/(Λ+λ)) P^T``, ``P = X V``; larger
    folds (k-fold) retrain in feature space, ``eigh(X^T L X - X_U^T L_UU X_U)``.
    Both equal retraining without the fold. Precision: as :func:`rankrls_primal_path`
    (λ below ``1e3 eps max Λ`` from their own Cholesky factor, ``O(m n^2)`` each; NaN and
    an :class:`UnresolvedLambdaWarning` where it fails).

    Args:
      X: ``[m, n]`` (dense).
      y: ``[m]`` or ``[m, k]``.
      graph: :class:`QueryGraph` or :class:`IdentityGraph`.
      lams: ``[L]`` λ grid (traced).
      folds: see :func:`make_folds`, or a prebuilt :class:`Folds` of this graph
        (needed under jit).
      verbose: log each bucket of folds as it finishes (0: silent; logger ``"rankjax"``).

    Returns:
      :class:`HoldOut` with ``predictions [L, m(, k)]``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> h = holdout_primal(d.X, d.y, rj.query_graph(d.qid), lams=[0.1, 10.])
      >>> h.predictions.shape == (2, len(d.y))
      True
    """
    X, y, lams, folds = _check_holdout(X, y, graph, lams, folds, seed)
    check_gram(X)
    return primal_holdout(as_dense(X), y, graph, lams, folds, verbose)[0]


def primal_holdout(X, y, graph, lams, folds: Folds, verbose=0, where="holdout_primal"):
    """:func:`holdout_primal` on checked inputs (dense ``X``, ``lams`` in ``X``'s dtype,
    resolved ``folds`` of ``graph``): ``(HoldOut, weights [L, n(, k)])``, every λ's
    full-data weights beside the hold-out, so that a selection needs no refit."""
    pred, W = two_phase(_holdout_primal_core, X, y, graph, lams,
                        premerge(folds, lams.shape[0], X.shape[1]), lams=lams, verbose=verbose)
    warn_unresolved(pred, lams, where, PRIMAL_UNRESOLVED)
    return HoldOut(lams, pred, folds), W


@compiled()
def _holdout_dual_core(K, y, graph, lams, folds, kernel=None, rows=None):
    if kernel is not None:        # K holds the rows X: their kernel matrix, in this program
        K = kernel_core(kernel, K, K, None, True)
    grid = None if rows is None else rows.queries
    dec = decompose_dual(K, y, graph, "holdout", eigh_psd_checked if rows is None
                         else partial(reduced_eigh, rows=rows, graph=graph), grid)
    eig = dec.eig
    KSU = kernel_root_product(K, graph, eig, dec.root, rows is not None, grid)  # [m, r]
    c = tdot(eig.vectors, dec.rhs)
    D = spectral_filter(eig.values[None, :], lams[:, None])
    Dc = D.reshape(D.shape + (1,) * (c.ndim - 1)) * c[None]
    F = jnp.einsum("mr,lr...->lm...", KSU, Dc, precision=HI)
    one = partial(woodbury_fold, graph, Pfeat=KSU, D=D, lams=lams, F=F, y=y, K=K)
    ok = lam_ok(lams) & dec.ok(lams)
    pred = over_folds(folds, lams.shape[0], KSU.shape[1], F.shape, K.dtype, lambda P: one)
    return nan_unless(ok, (pred, dec.coef_path(lams))), dec.flags()


def kernel_root_product(K, graph, eig, root, centred: bool = False, grid=None):
    """``K S U`` ``[m, m]``, the rows of ``H`` the dual folds need, for ``S K S = U diag(Γ)
    U^T`` (``eig``) and the root ``S`` (``root``), without the ``m^3`` product
    where ``S`` is a segment root (:meth:`~rankjax.graphs.graph.QueryGraph.segment_root`, ``S = sqrt(e_c n_c)
    (I - 1 1^T / n_c)``): with ``Π = S^+ S`` (the within-query centring on queries of nonzero
    weight), ``K S U = S^+ U Γ + (I - Π) K S U`` and ``(I - Π)`` takes query means, so the
    second term is the ``[S, m]`` query-mean rows of ``K`` (``S`` the padded query count)
    times ``S U``: a twelfth of the product's flops at 3,005 rows in 256 padded queries (the
    product took 0.78 s beside a 2.7 s ``eigh``; the float32 leave-query-out on
    ``lambdarank_sample`` 3.50 s -> 2.76 s); ``S^+ v = S v / (e_c n_c)``. ``centred``: the
    columns of ``U`` sum to 0 over every query (the range of ``S``,
    :func:`~rankjax.solvers.reduced.reduced_eigh`), so their query means are not formed (2.2
    GFlop, 0.045 s there). A query of zero weight and several rows (``Π = 0`` there, its
    rows are not means) and the other graphs take the product. ``grid``: the queries' rows
    for :func:`~rankjax._core.segments.row_sums`."""
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


def holdout_dual(K, y, graph: Graph, *, lams, folds=None, seed: int = 0,
                 verbose: int = 0) -> HoldOut:
    """Leave-query-out / k-fold hold-out predictions of dual (kernel) RankRLS for a λ
    grid, from one eigendecomposition of ``S K S`` (Pahikkala et al. 2009, §3.3,
    eq. 33-34, Lemma 2).

    ``H = (L + λ K^{-1})^{-1} = (K - K S U diag(1/(Γ+λ)) U^T S K) / λ``; each fold
    needs only its block ``H_UU``: ``O(|U|^2 m + |U|^3)`` per fold and λ.

    Precision: ``H`` is a cancellation divided by λ. A λ below ``3000 eps max Γ``
    (:data:`~rankjax.solvers.ridge.RESOLVE_RTOL`; ``3.6e-4 max Γ`` in float32) gives a NaN lane
    and an :class:`UnresolvedLambdaWarning`; above it float32 agrees with float64 to ~1 %.

    Args:
      K: ``[m, m]`` kernel matrix.
      y, graph, lams, folds, verbose: as in :func:`holdout_primal`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> K = rj.kernel_matrix(rj.gaussian_kernel(0.3), d.X)
      >>> holdout_dual(K, d.y, rj.query_graph(d.qid), lams=[1.]).predictions.shape[0]
      1
    """
    K, _ = check_kernel_matrix(K, y, graph, count=6, what="holdout_dual")
    K, y, lams, folds = _check_holdout(K, y, graph, lams, folds, seed, "K")
    return dual_holdout(K, y, graph, lams, folds, verbose)[0]


def dual_holdout(K, y, graph, lams, folds: Folds, verbose=0, where="holdout_dual",
                 kernel: Optional[Kernel] = None):
    """:func:`holdout_dual` on a checked kernel matrix, grid and folds: ``(HoldOut, coef
    [L, m(, k)])``, every λ's full-data dual coefficients from the same ``eigh`` (NaN on
    the lanes the hold-out leaves unresolved), so that a selection needs no refit. With a
    ``kernel``, ``K`` is the checked dense rows ``X [m, n]`` and the kernel matrix is built
    inside the same program (one program per row count, not two)."""
    rows = range_rows(graph, K.dtype)            # the system on the range of S (_reduced)
    width = K.shape[0] if rows is None else rows.keep.shape[0]
    (pred, coef), flags = run(verbose, _holdout_dual_core, K, y, graph, lams,
                              premerge(folds, lams.shape[0], width), kernel, rows)
    check_spectrum(flags, lams, where)
    return HoldOut(lams, pred, folds), coef


def holdout_nystrom(X, y, graph: Graph, *, lams, kernel: Kernel, basis, folds=None,
                    seed: int = 0, block_size: Optional[int] = None,
                    verbose: int = 0) -> HoldOut:
    """Hold-out predictions of Nyström (basis-vector) RankRLS (Pahikkala et al. 2009,
    §3.5 with §3.3): the primal hold-out (eq. 33-34) on the Nyström features
    ``Φ = K_mR C^{-T}`` (``C C^T = K_RR + ε I``, ``ε`` a rounding-level jitter, as
    :func:`rankrls_falkon`) of the basis rows (``basis``: an int, row indices or a
    :class:`Basis`; an int draws that many rows uniformly with ``seed``),
    for the whole λ grid from one eigendecomposition of ``Φ^T L Φ`` (``b x b``). The
    basis stays fixed across folds, as in the paper. O(m b^2) time, O(m b) memory.
    ``verbose`` logs each bucket of folds as it finishes (as :func:`holdout_primal`).

    The basis is padded to a size bucket with masked rows and the kernel parameters
    are traced: another γ, or another basis size in the same bucket, compiles nothing.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> h = holdout_nystrom(d.X, d.y, rj.query_graph(d.qid), lams=[1.],
      ...                        kernel=rj.gaussian_kernel(0.3), basis=20)
      >>> h.predictions.shape == (1, len(d.y))
      True
    """
    check_kernel(kernel)
    X, y, lams, folds = _check_holdout(X, y, graph, lams, folds, seed)
    X = as_dense(X)
    _, basis = take_basis(X, basis, kernel, seed)
    return nystrom_holdout(X, y, graph, lams, folds, basis, block_size, verbose)[0]


def nystrom_holdout(X, y, graph, lams, folds: Folds, basis: BasisRows, block_size=None,
                    verbose=0, where="holdout_nystrom"):
    """:func:`holdout_nystrom` on checked inputs and a taken basis: ``(HoldOut, coef
    [L, b_pad(, k)])``, every λ's full-data basis coefficients beside the hold-out."""
    check_nystrom_memory(X.shape[0], basis.X.shape[0], X.dtype)
    pred, coef = two_phase(nystrom_holdout_core, X, y, graph, basis, lams,
                           premerge(folds, lams.shape[0], basis.X.shape[0]), block_size,
                           lams=lams, verbose=verbose)
    warn_unresolved(pred, lams, where, PRIMAL_UNRESOLVED)
    return HoldOut(lams, pred, folds), coef


def check_nystrom_memory(m, b, dtype):
    """Refuses up front a Nyström hold-out whose ``m x b`` blocks do not fit."""
    check_memory(4 * m * b * np.dtype(dtype).itemsize,
                 f"the Nyström hold-out ({m} rows x {b} basis rows)",
                 "use a smaller basis or rankrls_falkon (row blocks)")


@compiled(static_argnames=("block_size", "route"))
def nystrom_holdout_core(X, y, graph, basis: BasisRows, lams, folds, block_size=None, route="both"):
    """``(predictions [L, m(, k)], coef [L, b_pad(, k)])``: the hold-out and the full-data
    basis coefficients of every λ from one ``eigh`` of ``Φ^T L Φ`` (``b x b``), with the
    features ``Φ = K_mR C^{-T}`` formed (``O(m b^2)``) and the system in root form
    ``(S Φ)^T (S Φ)``: the transformed ``C^{-1} (K_Rm L K_mR) C^{-T}`` squares the
    condition of ``C`` (float32: 63x off the float64 hold-out at λ = 1e-4 on
    ``lambdarank_sample``, 6e-3 this way; docs/design.md)."""
    C = basis.factor()
    Phi = features(basis.block(X, block_size), C)                  # [m, b]
    G, b = primal_system(Phi, y, graph, root=True)
    out = holdout_from_system(Phi, y, graph, lams, folds, G, b, route=route, weights=True)
    (pred, W), floor = out if route == "shared" else (out, None)    # W [L, r(, k)]
    coef = jnp.moveaxis(coef_from(C, jnp.moveaxis(W, 1, 0)), 0, 1)
    if route == "shared":
        return nan_unless(lam_ok(lams), (pred, coef)), floor
    return nan_unless(lam_ok(lams), (pred, coef))
