r"""Exact leave-query-out / k-fold hold-out predictions (Pahikkala et al. 2009, §3.3,
eq. 33-34, Lemma 2) for a whole λ grid from one decomposition.

With :math:`H = (L + \lambda K^{-1})^{-1}` (primal: :math:`H = X (X^T L X + \lambda I)^{-1} X^T`) and
full-data fitted values ``f``, a fold ``U`` of whole queries (no edge to the rest)
and any factor :math:`L_{UU} = B B^T`: ``t = f_U - H_UU L_UU y_U``,
:math:`f'_U = t + H_{UU} B (I - B^T H_{UU} B)^{-1} B^T t`. Only ``H_UU`` is needed: :math:`O(|U|^2 r)`
per fold and λ.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._core import lapack
from .._core.host import is_concrete
from .._core.log import run
from .._core.products import HI, mm, mv, tdot
from .._core.linalg import eigh_psd, spectral_filter
from .._core.types import saveable
from ..graphs.folds import Folds, over_folds
from ..kernels.basis import features
from .ridge import by_lane, cholesky_solve, eigh_floor, primal_system
from .small_solve import symmetric_solve

__all__ = ["HoldOut", "woodbury_fold", "woodbury_rows", "fold_constant", "live_columns",
           "holdout_from_system", "two_phase", "fold_predictions"]


@saveable
class HoldOut(NamedTuple):
    """Hold-out predictions: ``predictions [L, m(, k)]`` — row ``i`` predicted by the model
    trained without ``i``'s fold — for the grid ``lams [L]`` and its ``folds``; ``path``
    holds every λ's model trained on all rows, from the same decomposition (a selection
    needs no refit), or ``None``."""

    LANES = ("predictions", "path")
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    lams: jax.Array
    predictions: jax.Array
    folds: Folds
    path: Optional[object] = None


def woodbury_fold(graph, idx, mask, Pfeat, D, lams, F, y, K, shift=None, U=None, values=None,
                  coef=None):
    r"""Eq. 33-34 for one padded fold: :math:`H_{UU} = P_U \operatorname{diag}(d) P_U^T` (primal) or
    :math:`(K_{UU} - P_U \operatorname{diag}(d) P_U^T) / \lambda` (dual), never formed: with
    :math:`Q = B^T P_U` (:math:`B B^T = L_{UU}`) the fold system is :math:`I - B^T H_{UU} B = I - Q
    \operatorname{diag}(d) Q^T` (minus :math:`B^T K_{UU} B` over λ for the dual) and ``H`` meets a
    vector only through ``H B z``. The prediction without the fold, ``f_U - H L y_U + H B s`` with
    :math:`(I - B^T H B) s = B^T (f_U - H L y_U)`, is ``f_U + H B z`` with :math:`z = s - B^T y_U`,
    and since :math:`L y_U = B B^T y_U`, :math:`(I - B^T H B) z = B^T (f_U - y_U)`: one product
    through ``P_U`` per λ, where the right-hand side ``H L y`` took two more. :math:`O(|U|^2 r +
    |U|^3)` per λ, the :math:`|U|^3` one batched block inversion (:func:`symmetric_solve`).
    ``shift``, ``U`` and ``values``: see :func:`woodbury_rows`; ``coef [L, m(, k)]`` the dual's
    :math:`\beta = (S K S + \lambda I)^{-1} S y` (its fold rows give ``Bu``)."""
    mf = mask.astype(Pfeat.dtype)
    Kuu = None if K is None else K[idx[:, None], idx[None, :]] * (mf[:, None] * mf[None, :])
    return woodbury_rows(graph, idx, mask, Pfeat[idx], F[:, idx], D, lams, y, Kuu, shift=shift,
                         Uu=None if U is None else U[idx], values=values,
                         Bu=None if coef is None else coef[:, idx])


def woodbury_rows(graph, idx, mask, Pu, fu, D, lams, y, Kuu=None, by_segments=False,
                  small_solve=None, shift=None, Uu=None, values=None, Bu=None):
    r""":func:`woodbury_fold` from the fold's rows: ``Pu [P, r]`` its rows of the factor,
    ``fu [L, P(, k)]`` its full-data fitted values, ``Kuu`` its kernel block (dual) or
    ``None`` (primal, Nyström). ``by_segments``: :math:`B^T V` by the graph's segment sums
    (O(P) a column, the row-block hold-out's batches of large folds) instead of the dense
    ``P x P`` root (which compiles faster: the first fit of small folds; benchmarks/REPORT.md §8).
    ``small_solve``: the largest fold system inverted by block products (default the
    backend's, :func:`~rankjax.solvers.small_solve.symmetric_solve`). ``shift``: ``(u [r],
    u·Dc [L(, k)])`` when the rows ``Pu`` lack one row ``u`` that every row of the predictions
    holds (a Nyström map of a shifted kernel, :func:`fold_constant`): the fold's predictions
    then get :math:`u^T w_{-U}` back, :math:`w_{-U} = Dc + Dz` in these coordinates (``B^T``
    annihilates a constant row, so the fold system is that of the whole rows).

    ``Uu [P, r]`` and ``values [r]`` (the dual of an eigendecomposition :math:`S K S = U
    \operatorname{diag}(Γ) U^T`, ``Pu`` the fold's rows of ``K S U``): the fold formula without
    the cancellation of ``Kuu``'s. With ``B`` the fold's block of the symmetric root ``S`` (every
    graph's ``block_root``), :math:`B^T H_{UU} B = [S K S (S K S + \lambda I)^{-1}]_{UU} = U_U
    \operatorname{diag}(Γ / (Γ + \lambda)) U_U^T` and :math:`H B = [K S (S K S + \lambda
    I)^{-1}]_{:, U} = P \operatorname{diag}(d) U_U^T`: the primal form with ``Q = U_U``, no
    difference of terms the size of the in-sample scores divided by λ. Its rounding is that of
    the decomposition (an exact hold-out of ``S K S`` perturbed by the ``eigh``'s backward
    error), where the ``Kuu`` form's grew as :math:`\epsilon (Γ / \lambda)^2`. ``Bu [L, P(, k)]``:
    the fold's rows of :math:`\beta = (S K S + \lambda I)^{-1} S y`, whose right-hand side
    :math:`B^T (f_U - y_U) = [S K S \beta - S y]_U = -\lambda \beta_U` is then formed without
    the difference of ``f`` and ``y`` (which rounds to :math:`\epsilon \Gamma / \lambda` of it
    once β is stored in the dtype, however well it was refined)."""
    dtype = Pu.dtype
    mf = mask.astype(dtype)
    Pu = Pu * mf[:, None]                                           # [P, r]
    yu = y[idx] * mf.reshape(mf.shape + (1,) * (y.ndim - 1))
    if by_segments and Kuu is None:
        root = lambda V: graph.root_rows(idx, mask, V)             # noqa: E731
    else:
        B = graph.block_root(idx, mask, dtype)
        root = lambda V: jnp.einsum("pq,p...->q...", B, V, precision=HI)   # noqa: E731
    if Uu is None:
        Q = root(Pu)                                                # B^T P_U  [P, r]
        BHB = _fold_systems(Q, D)
    else:                                                           # the dual, U_U  [P, r]
        Q = Uu * mf[:, None]
        BHB = _fold_systems(Q, D * values[None, :])
    lam = lams.reshape((-1, 1, 1))
    if Kuu is not None:
        KB = jnp.matmul(Kuu, B, precision=HI)
        BHB = (tdot(B, KB)[None] - BHB) / lam
    M = jnp.eye(idx.shape[0], dtype=dtype) - BHB                   # [L, P, P]
    if Bu is None:
        rhs = jnp.moveaxis(root(jnp.moveaxis(fu - yu[None], 0, 1)), 1, 0)
    else:
        rhs = -lams.reshape((-1,) + (1,) * (Bu.ndim - 1)) * Bu * mf.reshape(
            (1, -1) + (1,) * (Bu.ndim - 2))
    z = symmetric_solve(M, rhs, small_solve)
    # H B z: one product through P_U per λ
    Dz = D.reshape(D.shape + (1,) * (z.ndim - 2)) * jnp.einsum("pr,lp...->lr...", Q, z,
                                                                precision=HI)
    HBz = jnp.einsum("pr,lr...->lp...", Pu, Dz, precision=HI)
    if Kuu is not None:
        HBz = (jnp.einsum("pq,lq...->lp...", KB, z, precision=HI) - HBz) / lam.reshape(
            (-1,) + (1,) * (z.ndim - 1))
    if shift is not None:
        u, uDc = shift
        const = uDc + jnp.einsum("r,lr...->l...", u, Dz, precision=HI)        # [L(, k)]
        return fu + HBz + const[:, None] * mf.reshape((1, -1) + (1,) * (z.ndim - 2))
    return fu + HBz                                                 # [L, P(, k)]


def fold_constant(u, vectors, Dc):
    """``(u', u'·Dc)`` of :func:`woodbury_rows`'s ``shift``: the constant row ``u`` ``[n]`` in
    the coordinates ``vectors [n, r]`` and its product with every λ's ``Dc [L, r(, k)]``."""
    uv = jnp.matmul(u, vectors, precision=HI)
    return uv, jnp.einsum("r,lr...->l...", uv, Dc, precision=HI)


def _fold_systems(Q, D):
    r"""``[L, P, P]`` every λ's :math:`Q \operatorname{diag}(d_\lambda) Q^T` (``Q [P, r]``, ``D [L,
    r]``) from two products ``[P, r] x [r, L h]`` and ``[P - h, r] x [r, L (P - h)]`` (``h = P /
    2``): the lower block triangle, 3/4 of the products of the whole, the upper block its transpose
    (benchmarks/design_measurements.md §8)."""
    P = Q.shape[0]
    h = P // 2
    sys = lambda A, B: jnp.einsum("pr,lqr->lpq", A, B[None] * D[:, None, :], precision=HI)  # noqa: E731
    if h < 8:
        return sys(Q, Q)
    A, C = sys(Q, Q[:h]), sys(Q[h:], Q[h:])                          # [L, P, h], [L, P-h, P-h]
    top = jnp.concatenate([A[:, :h], jnp.swapaxes(A[:, h:], 1, 2)], 2)
    return jnp.concatenate([top, jnp.concatenate([A[:, h:], C], 2)], 1)


def _refit_fold(graph, idx, mask, X, G, b, y, lams, direct=False, u=None):
    r"""Primal retraining without a large fold in feature space: :math:`G - X_U^T L_{UU} X_U`,
    :math:`b - X_U^T L_{UU} y_U`, one ``eigh`` of ``n x n`` (or with ``direct`` one Cholesky
    factor per λ, :func:`~rankjax.solvers.ridge.cholesky_solve`); :math:`O(|U|^2 n + n^3)` per fold.
    ``u [n]``: a row every prediction holds beyond ``X`` (:func:`woodbury_rows`'s ``shift``)."""
    dtype = X.dtype
    mf = mask.astype(dtype)
    Xu = X[idx] * mf[:, None]
    B = graph.block_root(idx, mask, dtype)
    Zu = tdot(B, Xu)
    yu = y[idx] * mf.reshape(mf.shape + (1,) * (y.ndim - 1))
    Gu, bu = G - jnp.matmul(Zu.T, Zu, precision=HI), b - tdot(Zu, tdot(B, yu))
    def scores(w):                 # X_U w, and u^T w on every row (added: not rounded with X_U)
        out = mm(Xu, w)
        if u is None:
            return out
        return out + jnp.einsum("n,n...->...", u, w, precision=HI)[None] * mf.reshape(
            (-1,) + (1,) * (w.ndim - 1))

    if direct:
        return jax.vmap(lambda lam: scores(cholesky_solve(Gu, bu, lam)))(lams)
    eig = eigh_psd(Gu)
    c = tdot(eig.vectors, bu)

    def per_lam(lam):
        d = spectral_filter(eig.values, lam)
        return scores(jnp.matmul(eig.vectors, c * d.reshape(d.shape + (1,) * (c.ndim - 1)),
                                 precision=HI))

    return jax.vmap(per_lam)(lams)


def live_columns(G, X):
    r"""``[n]`` False for the features constant within every query to rounding: ``G_jj``
    (:math:`= \lVert S x_j \rVert^2`) at most :math:`m (4 eps max|x_j|)^2`, what centring leaves of a
    constant. Their weight is exactly 0 for every fold (the column lies in the null space
    of every :math:`X^T L X`), but a constant ``c`` enters :math:`H = X (G + \lambda I)^{-1} X^T` as
    :math:`c^2 / \lambda`, which the fold's root then cancels: float32 lost 3.7e-2 of the hold-out at
    λ = 1e-4 to two constant columns (5 and 8) of a near-collinear problem, 2.8e-4
    without them. Masking them changes nothing in exact arithmetic."""
    eps = jnp.finfo(X.dtype).eps
    return jnp.diagonal(G) > X.shape[0] * (4 * eps * jnp.max(jnp.abs(X), axis=0)) ** 2


def holdout_from_system(X, y, graph, lams, folds, G, b, eig=None, route: str = "both",
                        weights: bool = False, u=None):
    r"""Eq. 33-34 hold-out predictions ``[L, m(, k)]`` of the rows ``X`` (whole queries of
    ``graph``) when the full training system :math:`(G, b) = (X^T L X, X^T L y)` may include
    further rows elsewhere (other devices, other chunks): no edge leaves a query, so a
    fold needs only its own rows and the global system.

    The λ at or above :func:`~rankjax.solvers.ridge.eigh_floor` share one ``eigh`` of ``G``
    (:math:`H = P \operatorname{diag}(1/(\Lambda +\lambda)) P^T`, ``P = X V``); each λ below it is
    answered from its own Cholesky factor :math:`G + \lambda I = C C^T` (:math:`H = P P^T`, :math:`P
    = X C^{-T}`: :math:`O(m n^2)` more for that λ), NaN where the factor fails (docs/design.md, the
    precision rule).

    ``route`` (static): ``"both"`` as above, in one program; ``"shared"`` only the shared
    lanes, returning ``(predictions, floor)``; ``"direct"`` only the lanes below the floor
    (zeros elsewhere). The public functions run ``"shared"`` first and ``"direct"`` only
    when some λ lies below the floor (:func:`two_phase`): the second program's compilation
    (benchmarks/REPORT.md §8) is never needed in float64 on ordinary data.

    ``weights``: every lane is ``(predictions, w)`` with :math:`w = (G + \lambda I)^{-1} b`
    ``[n(, k)]`` from the same decomposition or factor (one Cholesky factor per λ below
    the floor, not two).

    ``u [n]``: a row every predicted row holds beyond ``X`` whose columns ``L`` annihilates
    (the Nyström features of a shifted kernel lack :math:`k_0 1^T C^{-T}`): the predictions are
    those of ``X + 1 u^T``, the system that of ``X``."""
    n = G.shape[0]
    live = live_columns(G, X)
    X = X * live
    u = None if u is None else u * live
    eig = eigh_psd(G) if eig is None else eig
    Pf = jnp.matmul(X, eig.vectors, precision=HI)                  # [m, n]
    c = tdot(eig.vectors, b)                                       # [n(, k)]
    D = spectral_filter(eig.values[None, :], lams[:, None])        # [L, n]
    Dc = D.reshape(D.shape + (1,) * (c.ndim - 1)) * c[None]
    F = jnp.einsum("mr,lr...->lm...", Pf, Dc, precision=HI)

    def folds_of(Pfeat, D, lams, F, direct, shift):
        def fold_fn(P):
            if P > n:
                return partial(_refit_fold, graph, X=X, G=G, b=b, y=y, lams=lams, direct=direct,
                               u=u)
            return partial(woodbury_fold, graph, Pfeat=Pfeat, D=D, lams=lams, F=F, y=y, K=None,
                           shift=shift)
        return over_folds(folds, lams.shape[0], n, F.shape, X.dtype, fold_fn)

    def direct(lam):                                               # one λ, its own factor
        Cl = lapack.cholesky(G + lam * jnp.eye(n, dtype=G.dtype), symmetrize=False)
        P = features(X, Cl)                                        # X C^{-T}  [m, n]
        z = lapack.solve_triangular(Cl, b.reshape(n, -1))
        zb = z.reshape(b.shape)
        shift = None
        if u is not None:                                          # u in P's coordinates
            ul = lapack.solve_triangular(Cl, u)
            shift = (ul, jnp.einsum("r,r...->...", ul, zb, precision=HI)[None])
        pred = folds_of(P, jnp.ones((1, n), G.dtype), lam[None], mv(P, zb)[None], True,
                        shift)[0]
        if not weights:
            return pred
        w = lapack.solve_triangular(Cl, z, trans=True)
        return pred, w.reshape(b.shape)

    with_w = lambda pred, W: (pred, W) if weights else pred        # noqa: E731
    floor = eigh_floor(eig.values, G.dtype)
    W = jnp.einsum("nr,lr...->ln...", eig.vectors, Dc, precision=HI) if weights else None
    if route == "direct":
        return by_lane(lams, with_w(jnp.zeros(F.shape, F.dtype), W), direct, floor)
    shared = with_w(folds_of(Pf, D, lams, F, False,
                             None if u is None else fold_constant(u, eig.vectors, Dc)), W)
    if route == "shared":
        return shared, floor
    return by_lane(lams, shared, direct, floor)


def two_phase(core, *args, lams, verbose=0, **static):
    """``core(*args, route=...)`` for concrete float64 inputs: the shared lanes, then, only when
    some λ lies below the ``floor`` the first call returns, the ``"direct"`` program for those
    lanes, merged by lane (every floating leaf, λ axis first). Under a trace, and in float32 (where
    the smallest λ of an ordinary grid lie below the floor, and a second program would form the
    features and the ``eigh`` again, most of its time; benchmarks/REPORT.md §8): ``"both"``, one
    program whose lanes above the floor skip the factorisation
    (:func:`~rankjax.solvers.ridge.by_lane`). ``static``: further static arguments of ``core``."""
    if (not all(is_concrete(a) for a in jax.tree.leaves((args, lams)))
            or jnp.asarray(lams).dtype != jnp.float64):
        return run(verbose, core, *args, route="both", **static)
    out, floor = run(verbose, core, *args, route="shared", **static)
    low = np.asarray(lams) < float(floor)
    if not low.any():
        return out
    direct = run(verbose, core, *args, route="direct", **static)
    pick = lambda s, d: jnp.where(low.reshape(low.shape + (1,) * (s.ndim - 1)), d, s)  # noqa: E731
    return jax.tree.map(pick, out, direct)




def fold_predictions(graph, P, F, y, folds: Folds, lam, K=None):
    r"""``[m]`` hold-out predictions of one λ from a factored form (the differentiable
    hold-out of ``tune``): :math:`H = P P^T` (primal, Nyström) or :math:`(K - P P^T) / \lambda` (a kernel)
    and the full-data fitted values ``F [m]`` (eq. 33-34 by :func:`woodbury_fold`)."""
    m = P.shape[0]
    D = jnp.ones((1, P.shape[1]), P.dtype)
    one = partial(woodbury_fold, graph, Pfeat=P, D=D, lams=lam[None], F=F[None], y=y, K=K)
    return over_folds(folds, 1, P.shape[1], (1, m), P.dtype, lambda _: one)[0]


def factored_holdout(Z, y, graph, folds, lam, root: bool = False, total=None):
    r"""``[m]`` hold-out predictions of primal RankRLS on the rows ``Z [m, p]`` at one λ, by a
    Cholesky factor (its gradient is smooth where ``eigh``'s divides by eigenvalue gaps): :math:`Z^T
    L Z + \lambda ' I = C C^T`, :math:`P = Z C^{-T}`, :math:`H = P P^T`, :math:`f = P C^{-1} Z^T L
    y`. :math:`\lambda ' = \lambda + eps \operatorname{tr}(Z^T L Z)`: :math:`Z^T L Z` formed in the
    rows' dtype is positive semi-definite only to its rounding, so a λ below that would fail the
    factor (NaN); in float64 the shift is below the rounding of any result. ``total``: the
    sum of a device's system over the devices (``lax.psum`` in a sharded hold-out), else
    none (the rows are every row)."""
    G, b = primal_system(Z, y, graph, root)
    if total is not None:
        G, b = total(G), total(b)
    G = (G + G.T) / 2
    lam = lam + jnp.finfo(G.dtype).eps * jnp.trace(G)
    C = lapack.cholesky(G + lam * jnp.eye(G.shape[0], dtype=G.dtype))
    P = lapack.solve_triangular(C, Z.T).T                                      # Z C^{-T} [m, p]
    F = jnp.matmul(P, lapack.solve_triangular(C, b), precision=HI)
    return fold_predictions(graph, P, F, y, folds, lam)
