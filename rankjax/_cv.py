"""Exact fast cross-validation (docs/math.md; Pahikkala et al. 2009 §3.3-3.4, Lemma 2).

Hold-out predictions equal retraining without the held-out rows, for a whole λ
grid and every output, from one decomposition.

* **Leave-query-out / k-fold over queries** (eq. 33-34). With
  ``H = (L + λ K^{-1})^{-1}`` (primal: ``H = X (X^T L X + λ I)^{-1} X^T``) and
  full-data fitted values ``f``, a fold ``U`` of whole queries (no edge to the
  rest) and any factor ``L_UU = B B^T``:
  ``t = f_U - H_UU L_UU y_U``, ``f'_U = t + H_UU B (I - B^T H_UU B)^{-1} B^T t``.
  Only ``H_UU`` is needed: O(|U|^2 r) per fold and λ. Folds are grouped in
  buckets of equal padded size (powers of two) and each bucket is one
  ``lax.map`` over batches of folds — no Python loop over folds.
* **Leave-pair-out** for global ranking (eq. 35-39): complete unnormalized graph,
  cost (21). With ``Q = V diag(Λ / ((m-2) Λ + λ)) V^T`` every pair's two hold-out
  predictions cost O(1) (3x3 algebra), vectorised over all pairs.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._checks import (as_float_array, check_count, check_gram, check_indices, check_matrix, check_memory,
                      check_seed, check_symmetric, device_array, host_labels, indices_ok, is_concrete,
                      is_int, kernel_plan, lam_ok, nan_unless, reduce_concrete, segment_ids, value_range)
from ._graph import Graph, check_graph, check_problem, global_graph
from ._kernels import Kernel
from ._metrics import check_metric_options, metric_sign
from ._nystrom import cholesky_features, padded_basis
from ._path import check_lams, check_spectrum, select_lambda
from ._rankrls import check_kernel_matrix
from ._segments import padded_size
from ._ridge import (HI, dual_system, eigh_path, eigh_psd, primal_system,
                     SMALL_SOLVE, eigh_psd_checked, lam_floor, psd_ok, spectral_filter, symmetric_solve,
                     tdot)


__all__ = ["Folds", "make_folds", "HoldOut", "CVResult", "holdout_primal", "holdout_dual",
           "holdout_nystrom", "cross_validate", "PairHoldOut", "leave_pair_out_primal",
           "leave_pair_out_dual", "differing_pairs", "positive_negative_pairs", "lpo_cindex",
           "PermutationResult", "permuted_labels", "permutation_test"]

_BUDGET = 1 << 24          # elements of [L, P, P] work arrays per batch of folds


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Folds:
    """Hold-out folds as padded index buckets (built on the host by :func:`make_folds`).

    Attributes:
      index: tuple of ``[F_b, P_b]`` int32 row indices, one array per bucket of
        folds padded to size ``P_b``; ``F_b`` is padded like the sizes (:func:`padded_size`) with
        inert (all-masked) folds.
      mask: tuple of ``[F_b, P_b]`` bool, False on padding.
      fold_of_row: ``[m]`` int32 fold id of every row.
      unit_of_row: ``[m]`` int32 query (or row) of every row: the graph the folds
        were built for (checked by the hold-out functions).
      num_rows: ``m`` (static).
      num_folds: number of folds (static).
    """

    index: tuple
    mask: tuple
    fold_of_row: jax.Array
    unit_of_row: jax.Array
    num_rows: int = dataclasses.field(metadata=dict(static=True))
    num_folds: int = dataclasses.field(metadata=dict(static=True))


def make_folds(graph: Graph, folds=None, *, seed: int = 0) -> Folds:
    """Builds the folds of a hold-out computation (host side).

    Args:
      graph: a :class:`QueryGraph` (folds are unions of whole queries) or an
        :class:`IdentityGraph` (RLS; any rows).
      folds: ``None`` — leave-query-out (leave-one-out for an identity graph);
        an int ``k`` — k-fold over queries (rows for an identity graph), queries
        shuffled with ``seed``; or an ``[m]`` integer array of fold ids per row
        (every query must lie in one fold).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> f = rj.make_folds(rj.query_graph(np.array([4, 4, 9, 7, 7, 7])))
      >>> f.num_folds, [i.shape for i in f.index]
      (3, [(1, 1), (1, 2), (1, 4)])
    """
    check_graph(graph)
    f = _build_folds(graph, folds, seed)
    if f.num_folds < 2:               # one fold: every model would be trained on nothing
        raise ValueError("a hold-out needs at least 2 folds, got one (every row in one fold): "
                         "give the query ids (qid) of several queries, or more rows")
    return f


def _build_folds(graph, folds, seed):
    """:func:`make_folds` without the two-fold check (a device's local graph may hold one
    query)."""
    unit, n_units = graph.fold_units()
    m = unit.shape[0]
    if folds is None:
        fold = unit
    elif is_int(folds):
        if not 2 <= folds <= n_units:
            raise ValueError(f"folds must be between 2 and {n_units}, got {folds}")
        perm = np.random.default_rng(check_seed(seed)).permutation(n_units)
        unit_fold = np.empty(n_units, np.int64)
        unit_fold[perm] = np.arange(n_units) % folds
        fold = unit_fold[unit]
    else:
        f = np.asarray(folds)
        if f.dtype.kind not in "iu" or f.shape != (m,):
            raise ValueError(f"folds must be None, an int or an [{m}] integer array")
        first = np.full(n_units, -1, np.int64)
        first[unit[::-1]] = f[::-1]
        if np.any(first[unit] != f):
            raise ValueError("folds must keep every query in one fold")
        fold = f
    fold = segment_ids(fold, "folds").seg
    order = np.argsort(fold, kind="stable")
    sizes = np.bincount(fold)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    padded = padded_size(sizes)
    index, mask = [], []
    for P in np.unique(padded):
        which = np.flatnonzero(padded == P)
        which = np.concatenate([which, np.full(int(padded_size(which.size)) - which.size, -1)])
        pos = np.arange(P)[None, :]
        valid = (pos < sizes[which, None]) & (which[:, None] >= 0)
        rows = order[np.where(valid, starts[which, None] + pos, 0)]
        index.append(device_array(np.where(valid, rows, 0), jnp.int32))
        mask.append(device_array(valid))
    return Folds(tuple(index), tuple(mask), device_array(fold), device_array(unit, jnp.int32),
                 int(m), int(sizes.shape[0]))


class HoldOut(NamedTuple):
    """Hold-out predictions: ``predictions [L, m(, k)]`` — row ``i`` predicted by
    the model trained without ``i``'s fold — for the grid ``lams [L]``."""

    lams: jax.Array
    predictions: jax.Array
    folds: Folds


def _woodbury_fold(graph, idx, mask, Pfeat, D, lams, F, y, K):
    """Eq. 33-34 for one padded fold: ``H_UU = P_U diag(d) P_U^T`` (primal) or
    ``(K_UU - P_U diag(d) P_U^T) / λ`` (dual); O(|U|^2 r + |U|^3) per λ."""
    dtype = Pfeat.dtype
    mf = mask.astype(dtype)
    Pu = Pfeat[idx] * mf[:, None]
    B = graph.block_root(idx, mask, dtype)
    yu = y[idx] * mf.reshape(mf.shape + (1,) * (y.ndim - 1))
    Ly = B @ tdot(B, yu)
    Kuu = None if K is None else K[idx[:, None], idx[None, :]] * (mf[:, None] * mf[None, :])
    eye = jnp.eye(idx.shape[0], dtype=dtype)

    # every λ's H_UU from one product with the shared D (one GEMM across vmapped folds):
    # H_l[p, q] = sum_r (P_pr P_qr) d_lr
    Hs = jnp.einsum("pr,lr,qr->lpq", Pu, D, Pu, precision=HI)

    def per_lam(H, lam, fu):
        if Kuu is not None:
            H = (Kuu - H) / lam
        HB = jnp.matmul(H, B, precision=HI)
        t = fu - jnp.matmul(H, Ly, precision=HI)
        M = eye - jnp.matmul(B.T, HB, precision=HI)
        return t + jnp.matmul(HB, symmetric_solve(M, tdot(B, t)), precision=HI)

    # large folds: one λ at a time, so LAPACK gets unbatched calls (see symmetric_solve)
    over_lams = jax.vmap(per_lam) if idx.shape[0] <= SMALL_SOLVE else partial(_each, per_lam)
    return over_lams(Hs, lams, F[:, idx])                      # [L, P(, k)]


def _each(f, *args):
    """``f`` over the leading axis of ``args``, one slice at a time (``lax.map``)."""
    return lax.map(lambda a: f(*a), args)


def _refit_fold(graph, idx, mask, X, G, b, y, lams):
    """Primal retraining without a large fold in feature space: ``G - X_U^T L_UU X_U``,
    ``b - X_U^T L_UU y_U``, one ``eigh`` of ``n x n``; O(|U|^2 n + n^3) per fold."""
    dtype = X.dtype
    mf = mask.astype(dtype)
    B = graph.block_root(idx, mask, dtype)
    Xu = X[idx] * mf[:, None]
    Zu = tdot(B, Xu)
    yu = y[idx] * mf.reshape(mf.shape + (1,) * (y.ndim - 1))
    eig = eigh_psd(G - jnp.matmul(Zu.T, Zu, precision=HI))
    c = tdot(eig.vectors, b - tdot(Zu, tdot(B, yu)))
    XV = jnp.matmul(Xu, eig.vectors, precision=HI)

    def per_lam(lam):
        d = spectral_filter(eig.values, lam)
        return jnp.matmul(XV, c * d.reshape(d.shape + (1,) * (c.ndim - 1)), precision=HI)

    return jax.vmap(per_lam)(lams)


def _over_folds(folds: Folds, m, L, width, out_shape, dtype, fold_fn):
    """Runs ``fold_fn(P)(idx, mask) -> [L, P(, k)]`` over every padded fold of size
    ``P`` (``lax.map`` over batches of about ``_BUDGET / ((L + width) P^2)`` folds,
    ``vmap`` inside; ``width`` = columns of the fold's feature block) and scatters
    the predictions to ``[L, m(, k)]``."""
    out = jnp.zeros(out_shape, dtype)
    for idx_b, mask_b in zip(folds.index, folds.mask):
        Fb, P = idx_b.shape
        batch = max(1, min(Fb, _BUDGET // max(1, (L + width) * P * P)))
        if P > min(width, SMALL_SOLVE):   # LAPACK per fold: unbatched (see symmetric_solve)
            batch = 1
        one_fold = fold_fn(P)
        res = lax.map(lambda a: one_fold(*a), (idx_b, mask_b), batch_size=batch)  # [F, L, P(, k)]
        res = jnp.moveaxis(res, 1, 0)                                   # [L, F, P(, k)]
        flat_idx = jnp.where(mask_b, idx_b, m).reshape(-1)
        vals = res.reshape((res.shape[0], -1) + res.shape[3:])
        out = out.at[:, flat_idx].set(vals, mode="drop")
    return out


def _resolve_folds(graph, folds, seed, m):
    if not isinstance(folds, Folds):
        return make_folds(graph, folds, seed=seed)
    if folds.num_rows != m:
        raise ValueError(f"folds were built for {folds.num_rows} rows but the data has {m}")
    if not is_concrete(folds.unit_of_row):
        return folds
    try:
        unit, _ = graph.fold_units()
    except TypeError:                 # a traced graph (under the caller's jit): not checkable
        return folds
    if not np.array_equal(np.asarray(folds.unit_of_row), unit):
        raise ValueError("folds were built for another graph (its queries differ): "
                         "build them with make_folds(graph)")
    return folds


def _check_holdout(X, y, graph, lams, folds, seed, name="X"):
    check_graph(graph)
    if not graph.takes_labels:
        graph.fold_units()            # raises: preference edges may cross any split
    X, y = check_problem(X, y, graph, name)
    folds = _resolve_folds(graph, folds, seed, X.shape[0])
    return X, y, check_lams(lams).astype(X.dtype), folds


@jax.jit
def _holdout_primal_core(X, y, graph, lams, folds):
    G, b = primal_system(X, y, graph)
    return nan_unless(lam_ok(lams), holdout_from_system(X, y, graph, lams, folds, G, b))


def holdout_from_system(X, y, graph, lams, folds, G, b, right=None, eig=None):
    # ``right``: None, a matrix ``[n, r]``, or ``("chol", C)`` for ``C^{-T}`` (lower ``C``)
    """Eq. 33-34 hold-out predictions ``[L, m(, k)]`` of the rows ``X`` (whole queries of
    ``graph``) when the full training system ``(G, b) = (X^T L X, X^T L y)`` may include
    further rows elsewhere (other devices, other chunks): no edge leaves a query, so a
    fold needs only its own rows and the global system. With ``right [n, r]`` the
    features are ``X right`` (never formed whole: ``X (right V)``; Nyström)."""
    m = X.shape[0]
    n = G.shape[0]
    eig = eigh_psd(G) if eig is None else eig
    chol = isinstance(right, tuple)
    if right is None:
        V = eig.vectors
    elif chol:
        V = jax.scipy.linalg.solve_triangular(right[1], eig.vectors, lower=True, trans=1)
    else:
        V = jnp.matmul(right, eig.vectors, precision=HI)
    Pf = jnp.matmul(X, V, precision=HI)                            # [m, n]
    c = tdot(eig.vectors, b)                                       # [n(, k)]
    D = spectral_filter(eig.values[None, :], lams[:, None])        # [L, n]
    F = jnp.einsum("mr,lr...->lm...", Pf, D.reshape(D.shape + (1,) * (c.ndim - 1)) * c[None],
                   precision=HI)

    def fold_fn(P):
        if P > n:
            feats = (X if right is None else
                     jax.scipy.linalg.solve_triangular(right[1], X.T, lower=True).T if chol else
                     jnp.matmul(X, right, precision=HI))
            return partial(_refit_fold, graph, X=feats, G=G, b=b, y=y, lams=lams)
        return partial(_woodbury_fold, graph, Pfeat=Pf, D=D, lams=lams, F=F, y=y, K=None)

    return _over_folds(folds, m, lams.shape[0], n, F.shape, X.dtype, fold_fn)


def holdout_primal(X, y, graph: Graph, *, lams, folds=None, seed: int = 0) -> HoldOut:
    """Leave-query-out / k-fold hold-out predictions of primal RankRLS (or RLS with an
    identity graph) for a λ grid, from one eigendecomposition of ``X^T L X``
    (Pahikkala et al. 2009, §3.3, eq. 33-34).

    Folds smaller than the number of features use eq. 33 with
    ``H = X (X^T L X + λ I)^{-1} X^T = P diag(1/(Λ+λ)) P^T``, ``P = X V``; larger
    folds (k-fold) retrain in feature space, ``eigh(X^T L X - X_U^T L_UU X_U)``.
    Both equal retraining without the fold.

    Args:
      X: ``[m, n]`` (dense).
      y: ``[m]`` or ``[m, k]``.
      graph: :class:`QueryGraph` or :class:`IdentityGraph`.
      lams: ``[L]`` λ grid (traced).
      folds: see :func:`make_folds`, or a prebuilt :class:`Folds` of this graph
        (needed under jit).

    Returns:
      :class:`HoldOut` with ``predictions [L, m(, k)]``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> h = rj.holdout_primal(d.X, d.y, rj.query_graph(d.qid), lams=[0.1, 10.])
      >>> h.predictions.shape == (2, len(d.y))
      True
    """
    X, y, lams, folds = _check_holdout(X, y, graph, lams, folds, seed)
    check_gram(X)
    X = X.todense() if hasattr(X, "todense") else X
    return HoldOut(lams, _holdout_primal_core(X, y, graph, lams, folds), folds)


@jax.jit
def _holdout_dual_core(K, y, graph, lams, folds):
    system = dual_system(K, y, graph)
    eig, low, high = eigh_psd_checked(system.G)
    psd = psd_ok(low, high, K.shape[0], K.dtype)
    floor = lam_floor(high, K.dtype, "holdout")
    KSU = jnp.matmul(K, system.root.apply(eig.vectors), precision=HI)    # [m, m]
    c = tdot(eig.vectors, system.rhs)
    D = spectral_filter(eig.values[None, :], lams[:, None])
    F = jnp.einsum("mr,lr...->lm...", KSU, D.reshape(D.shape + (1,) * (c.ndim - 1)) * c[None],
                   precision=HI)
    one = partial(_woodbury_fold, graph, Pfeat=KSU, D=D, lams=lams, F=F, y=y, K=K)
    m = K.shape[0]
    ok = lam_ok(lams) & psd & (lams >= floor)
    return (nan_unless(ok, _over_folds(folds, m, lams.shape[0], m, F.shape, K.dtype, lambda P: one)),
            (psd, low, high, floor))


def holdout_dual(K, y, graph: Graph, *, lams, folds=None, seed: int = 0) -> HoldOut:
    """Leave-query-out / k-fold hold-out predictions of dual (kernel) RankRLS for a λ
    grid, from one eigendecomposition of ``S K S`` (Pahikkala et al. 2009, §3.3,
    eq. 33-34, Lemma 2).

    ``H = (L + λ K^{-1})^{-1} = (K - K S U diag(1/(Γ+λ)) U^T S K) / λ``; each fold
    needs only its block ``H_UU``: O(|U|^2 m + |U|^3) per fold and λ.

    Precision: ``H`` is a cancellation divided by λ. A λ below ``3000 eps max Γ``
    (:data:`~rankjax._ridge.RESOLVE_RTOL`; ``3.6e-4 max Γ`` in float32) gives a NaN lane
    and an :class:`UnresolvedLambdaWarning`; above it float32 agrees with float64 to ~1 %.

    Args:
      K: ``[m, m]`` kernel matrix.
      y, graph, lams, folds: as in :func:`holdout_primal`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> K = rj.kernel_matrix(rj.gaussian_kernel(0.3), d.X)
      >>> rj.holdout_dual(K, d.y, rj.query_graph(d.qid), lams=[1.]).predictions.shape[0]
      1
    """
    K, _ = check_kernel_matrix(K, y, graph, count=6, what="holdout_dual")
    K, y, lams, folds = _check_holdout(K, y, graph, lams, folds, seed, "K")
    pred, flags = _holdout_dual_core(K, y, graph, lams, folds)
    check_spectrum(flags, lams, "holdout_dual")
    return HoldOut(lams, pred, folds)


def holdout_nystrom(X, y, graph: Graph, *, lams, kernel: Kernel, basis, folds=None,
                    seed: int = 0, block_size: Optional[int] = None) -> HoldOut:
    """Hold-out predictions of Nyström (basis-vector) RankRLS (Pahikkala et al. 2009,
    §3.5 with §3.3): the primal hold-out (eq. 33-34) on the Nyström features
    ``Φ = K_mR C^{-T}`` (``C C^T = K_RR + ε I``, ``ε`` a rounding-level jitter, as
    :func:`rankrls_falkon`) of the basis rows (``basis``: indices, e.g. from
    :func:`nystrom_basis`, or an int to draw that many rows uniformly with ``seed``),
    for the whole λ grid from one eigendecomposition of ``Φ^T L Φ`` (``b x b``). The
    basis stays fixed across folds, as in the paper. O(m b^2) time, O(m b) memory.

    The basis is padded to a size bucket with masked rows and the kernel parameters
    are traced: another γ, or another basis size in the same bucket, compiles nothing.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> h = rj.holdout_nystrom(d.X, d.y, rj.query_graph(d.qid), lams=[1.],
      ...                        kernel=rj.gaussian_kernel(0.3), basis=20)
      >>> h.predictions.shape == (1, len(d.y))
      True
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a rankjax Kernel, got {type(kernel).__name__}")
    X, y, lams, folds = _check_holdout(check_matrix(X), y, graph, lams, folds, seed)
    X = X.todense() if hasattr(X, "todense") else X
    _, XR, rmask = padded_basis(X, basis, seed)
    check_memory(4 * X.shape[0] * XR.shape[0] * X.dtype.itemsize,
                 f"the Nyström hold-out ({X.shape[0]} rows x {XR.shape[0]} basis rows)",
                 "use a smaller basis or rankrls_falkon (row blocks)")
    return HoldOut(lams, nystrom_holdout_core(X, XR, rmask, y, graph, lams, folds, kernel,
                                              block_size)[0], folds)


@partial(jax.jit, static_argnames="block_size")
def nystrom_holdout_core(X, XR, rmask, y, graph, lams, folds, kernel, block_size):
    """``(predictions [L, m(, k)], coef [L, b_pad(, k)])``: the hold-out and the full-data
    basis coefficients of every λ from one ``eigh`` of ``Φ^T L Φ`` (``b x b``), with
    ``Φ = K_mR C^{-T}`` never formed (``G = C^{-1} (K_Rm L K_mR) C^{-T}``)."""
    KRt, C = cholesky_features(X, XR, rmask, kernel, block_size)
    GK, bK = primal_system(KRt, y, graph)
    tri = partial(jax.scipy.linalg.solve_triangular, C, lower=True)
    G = tri(tri(GK).T)                                      # C^{-1} GK C^{-T}
    b = tri(bK)
    eig = eigh_psd((G + G.T) / 2)
    W = eigh_path(eig, b, lams)                             # [L, r(, k)]
    Wr = jnp.moveaxis(W, 1, 0)                              # [r, L(, k)]
    coef = jnp.moveaxis(tri(Wr.reshape(Wr.shape[0], -1), trans=1).reshape(Wr.shape), 0, 1)
    pred = holdout_from_system(KRt, y, graph, lams, folds, G, b, right=("chol", C), eig=eig)
    return nan_unless(lam_ok(lams), (pred, coef))


class CVResult(NamedTuple):
    """Cross-validation summary.

    Attributes:
      lams: ``[L]``.
      table: ``[L]`` or ``[L, k]`` metric of the pooled hold-out predictions.
      best_index, best_lam: the choice per output.
      predictions: ``[L, m(, k)]`` hold-out predictions.
    """

    lams: jax.Array
    table: jax.Array
    best_index: jax.Array
    best_lam: jax.Array
    predictions: jax.Array


def cross_validate(holdout: HoldOut, y, qid=None, *, metric: Callable,
                   num_queries: Optional[int] = None, greater_is_better: Optional[bool] = None,
                   **metric_kwargs) -> CVResult:
    """Scores hold-out predictions with any rankjax metric (per query, averaged)
    for every λ and output, and picks λ (see :func:`select_lambda`).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=4, seed=0)
      >>> h = rj.holdout_primal(d.X, d.y, rj.query_graph(d.qid), lams=[0.01, 1., 100.])
      >>> cv = rj.cross_validate(h, d.y, d.qid, metric=rj.ndcg, k=10)
      >>> cv.table.shape
      (3,)
    """
    check_metric_options(metric, metric_kwargs, "cross_validate")
    if not isinstance(holdout, HoldOut):
        raise TypeError(f"holdout must be a HoldOut (from holdout_primal / holdout_dual / "
                        f"holdout_nystrom), got {type(holdout).__name__}")
    sel = select_lambda(holdout.lams, holdout.predictions, y, qid, metric=metric,
                        num_queries=num_queries, greater_is_better=greater_is_better,
                        **metric_kwargs)
    return CVResult(holdout.lams, sel.table, sel.best_index, sel.best_lam, holdout.predictions)


# ----------------------------------------------------------------------------
# leave-pair-out

class PairHoldOut(NamedTuple):
    """Leave-pair-out predictions: ``predictions [L, p, 2(, k)]`` for the pairs
    ``pairs [p, 2]`` — both rows predicted by the model trained without them."""

    lams: jax.Array
    pairs: jax.Array
    predictions: jax.Array


def differing_pairs(y) -> np.ndarray:
    """``[p, 2]`` all pairs ``(i, j)``, ``i < j``, with ``y_i != y_j``, in lexicographic
    order (host side; memory O(m + p), time O(m × distinct labels + p log p)).

    Example:
      >>> differing_pairs([1, 0, 1]).tolist()
      [[0, 1], [1, 2]]
    """
    y = host_labels(y)
    m = y.shape[0]
    labels, group = np.unique(y, return_inverse=True)
    if labels.size == m:                          # all labels differ: every pair
        return np.stack(np.triu_indices(m, 1), 1).astype(np.int32)
    rows, cols = [], []
    everyone = np.arange(m)
    for g in range(labels.size):                  # O(m) per label + the output: memory O(m + p)
        members = np.flatnonzero(group == g)
        others = everyone[group != g]             # sorted
        start = np.searchsorted(others, members)  # partners of i: others[start_i:] (all > i)
        counts = others.size - start
        total = int(counts.sum())
        first = np.repeat(np.cumsum(counts) - counts - start, counts)
        rows.append(np.repeat(members, counts))
        cols.append(others[np.arange(total) - first])
    i, j = np.concatenate(rows), np.concatenate(cols)
    order = np.lexsort((j, i))
    return np.stack([i[order], j[order]], 1).astype(np.int32)


def positive_negative_pairs(y) -> np.ndarray:
    """``[p, 2]`` all (positive, negative) pairs for binary labels (AUC), positives
    (label > 0) first in each pair.

    Example:
      >>> positive_negative_pairs([1, 0, 1, 0]).tolist()
      [[0, 1], [0, 3], [2, 1], [2, 3]]
    """
    y = host_labels(y)
    vals = np.unique(y)
    if not (np.all(np.isin(vals, [0, 1])) or np.all(np.isin(vals, [-1, 1]))):
        raise ValueError(f"y must be binary (0/1 or -1/+1), got values {vals[:5].tolist()}; "
                         "use differing_pairs for graded labels")
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y <= 0)
    a, b = np.meshgrid(pos, neg, indexing="ij")
    return np.stack([a.ravel(), b.ravel()], 1).astype(np.int32)


def _lpo_pairs(Q, q1, c, Qy, sumy, oQy, y, h1, h2, n2):
    """Eq. 38-39 for every pair at once, written out elementwise (a 3x3 system per
    pair solved by its adjugate), so XLA fuses it into one pass over the pairs.
    ``y``, ``Qy`` are ``[m, k]``; returns ``[p, 2, k]``."""
    s = jnp.sqrt(n2)
    A, Bq, D = Q[h1, h1][:, None], Q[h1, h2][:, None], Q[h2, h2][:, None]
    qa, qb = q1[h1][:, None], q1[h2][:, None]
    ya, yb = y[h1], y[h2]
    da, db = n2 * Qy[h1], n2 * Qy[h2]                        # Q D S y at the pair
    # B^T Q B (symmetric 3x3) and Q B restricted to the pair (2x3)
    m00 = c - 2 * (qa + qb) + A + 2 * Bq + D
    m01, m02 = s * (qa - A - Bq), s * (qb - Bq - D)
    m11, m12, m22 = s * s * A, s * s * Bq, s * s * D
    u0, u1, u2 = qa - A - Bq, s * A, s * Bq                   # row h1 of Q B
    v0, v1, v2 = qb - Bq - D, s * Bq, s * D                   # row h2 of Q B
    b0, b1, b2 = sumy - ya - yb, s * ya, s * yb               # B^T y
    r0 = n2 * oQy - (da + db) - (m00 * b0 + m01 * b1 + m02 * b2)
    r1 = s * da - (m01 * b0 + m11 * b1 + m12 * b2)
    r2 = s * db - (m02 * b0 + m12 * b1 + m22 * b2)
    la = da - (u0 * b0 + u1 * b1 + u2 * b2)
    lb = db - (v0 * b0 + v1 * b1 + v2 * b2)
    a00, a11, a22 = m00 - 1, m11 - 1, m22 - 1                 # B^T Q B - I
    c00, c01, c02 = a11 * a22 - m12 * m12, m02 * m12 - m01 * a22, m01 * m12 - m02 * a11
    c11, c12, c22 = a00 * a22 - m02 * m02, m01 * m02 - a00 * m12, a00 * a11 - m01 * m01
    det = a00 * c00 + m01 * c01 + m02 * c02
    z0 = (c00 * r0 + c01 * r1 + c02 * r2) / det
    z1 = (c01 * r0 + c11 * r1 + c12 * r2) / det
    z2 = (c02 * r0 + c12 * r1 + c22 * r2) / det
    return jnp.stack([la - (u0 * z0 + u1 * z1 + u2 * z2), lb - (v0 * z0 + v1 * z1 + v2 * z2)], 1)


@jax.jit
def _lpo_core(Pf, sig, y, pairs, lams, floor=0.0):
    """Eq. 38-39 with ``Q = P diag(1/((m-2) σ + λ)) P^T`` (``P P^T = K``), every λ;
    NaN lanes for λ below ``floor`` (:func:`lam_floor`)."""
    m = Pf.shape[0]
    n2 = jnp.asarray(m - 2, Pf.dtype)
    yk = y if y.ndim == 2 else y[:, None]
    h1, h2 = pairs[:, 0], pairs[:, 1]

    def per_lam(lam):
        Q = jnp.matmul(Pf * spectral_filter(n2 * sig, lam), Pf.T, precision=HI)   # [m, m]
        q1 = jnp.sum(Q, axis=1)
        Qy = jnp.matmul(Q, yk, precision=HI)
        return _lpo_pairs(Q, q1, jnp.sum(q1), Qy, yk.sum(0), Qy.sum(0), yk, h1, h2, n2)

    ok = lam_ok(lams) & indices_ok(pairs, m) & (lams >= floor)   # traced: NaN lanes
    out = nan_unless(ok, lax.map(per_lam, lams))        # [L, p, 2, k]
    return out if y.ndim == 2 else out[..., 0]


def _check_pairs(pairs, m):
    p = check_indices(pairs, "pairs", m, ndim=2)
    if p.shape[1] != 2:
        raise ValueError(f"pairs must be a [p, 2] integer array, got shape {p.shape}")
    if is_concrete(p) and bool(reduce_concrete(_self_pair, p)):
        raise ValueError("pairs must hold two different row indices")
    return p


_self_pair = jax.jit(lambda p: jnp.any(p[:, 0] == p[:, 1]))
_no_differing = jax.jit(lambda dy: ~jnp.all(jnp.any(dy != 0, axis=0)))


def _check_lpo(M, y, pairs, lams, name):
    M, y = check_problem(M, y, global_graph(np.shape(M)[0]), name)
    if M.shape[0] < 3:
        raise ValueError(f"leave-pair-out needs at least 3 rows, got {M.shape[0]}")
    return M, y, _check_pairs(pairs, M.shape[0]), check_lams(lams).astype(M.dtype)


@jax.jit
def _lpo_dual_core(K, y, pairs, lams):
    eig, low, high = eigh_psd_checked(K)
    psd = psd_ok(low, high, K.shape[0], K.dtype)
    floor = lam_floor((K.shape[0] - 2) * high, K.dtype, "pairs")
    out = _lpo_core(eig.vectors * jnp.sqrt(eig.values), eig.values, y, pairs, lams, floor)
    return nan_unless(psd, out), (psd, low, high, floor)


def leave_pair_out_dual(K, y, pairs, *, lams) -> PairHoldOut:
    """Exact leave-pair-out predictions of dual RankRLS for global ranking (complete
    unnormalized graph, cost (21); Pahikkala et al. 2009, §3.4, eq. 35-39).

    One ``eigh`` of ``K``, then one ``[m, m]`` product and O(1) per pair for every λ.
    Precision: the 3 x 3 system cancels ``1 - (m-2) σ / ((m-2) σ + λ)``; a λ below
    ``200 eps (m-2) max σ`` (:data:`~rankjax._ridge.RESOLVE_RTOL`; about 0.02 (m-2) max σ
    in float32) gives a NaN lane and an
    :class:`UnresolvedLambdaWarning`; above it float32 agrees with float64 to ~1 %.
    An indefinite ``K`` is refused (NaN under ``jit``).

    Args:
      K: ``[m, m]`` kernel matrix (m >= 3).
      y: ``[m]`` or ``[m, k]`` scores.
      pairs: ``[p, 2]`` row pairs, e.g. :func:`differing_pairs`.
      lams: ``[L]`` λ grid.

    Returns:
      :class:`PairHoldOut` with ``predictions [L, p, 2(, k)]``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.random.default_rng(0).standard_normal((8, 2)); y = X[:, 0]
      >>> r = rj.leave_pair_out_dual(X @ X.T, y, rj.differing_pairs(y), lams=[1.])
      >>> print(f"{float(rj.lpo_cindex(r, y)[0]):.2f}")
      1.00
    """
    kernel_plan(np.shape(K)[0], getattr(K, "dtype", np.float32), 5, "leave_pair_out_dual")
    K, y, pairs, lams = _check_lpo(K, y, pairs, lams, "K")
    check_symmetric(K)
    pred, flags = _lpo_dual_core(K, y, pairs, lams)
    check_spectrum(flags, lams, "leave_pair_out_dual")
    return PairHoldOut(lams, pairs, pred)


@jax.jit
def _lpo_primal_core(X, y, pairs, lams):
    eig = eigh_psd(jnp.matmul(X.T, X, precision=HI))
    return _lpo_core(jnp.matmul(X, eig.vectors, precision=HI), eig.values, y, pairs, lams)


def leave_pair_out_primal(X, y, pairs, *, lams) -> PairHoldOut:
    """Leave-pair-out for linear RankRLS (global ranking, cost (21)); as
    :func:`leave_pair_out_dual` with ``K = X X^T`` but from ``eigh(X^T X)``
    (``Q = X W diag(1/((m-2) σ + λ)) W^T X^T``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.random.default_rng(0).standard_normal((8, 2)); y = X[:, 0]
      >>> rj.leave_pair_out_primal(X, y, [[0, 1], [2, 3]], lams=[1., 2.]).predictions.shape
      (2, 2, 2)
    """
    X, y, pairs, lams = _check_lpo(X, y, pairs, lams, "X")
    check_gram(X)
    X = X.todense() if hasattr(X, "todense") else X
    return PairHoldOut(lams, pairs, _lpo_primal_core(X, y, pairs, lams))


def lpo_cindex(result: PairHoldOut, y):
    """Leave-pair-out concordance: the fraction of pairs with ``y_a != y_b`` whose
    hold-out predictions are ordered like the labels (ties count half); the AUC
    for positive–negative pairs. ``[L]`` or ``[L, k]``. Pairs with equal labels are
    not counted; when none differ the value is undefined (``ValueError``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.random.default_rng(0).standard_normal((8, 2)); y = (X[:, 0] > 0) * 1.
      >>> r = rj.leave_pair_out_dual(X @ X.T, y, rj.positive_negative_pairs(y), lams=[1.])
      >>> print(f"{float(rj.lpo_cindex(r, y)[0]):.2f}")
      1.00
    """
    y = as_float_array(y, "y", finite=True)
    p = result.pairs
    if y.ndim not in (1, 2):
        raise ValueError(f"y must be [m] or [m, k], got shape {y.shape}")
    if is_concrete(p) and value_range(p)[1] >= y.shape[0]:
        raise ValueError(f"y has {y.shape[0]} rows but the pairs index row {value_range(p)[1]}")
    f = result.predictions                                   # [L, p, 2(, k)]
    dy = y[p[:, 0]] - y[p[:, 1]]                              # [p(, k)]
    if is_concrete(dy) and bool(reduce_concrete(_no_differing, dy)):
        raise ValueError("no pair has different labels in y: the leave-pair-out concordance "
                         "is undefined")
    df = f[:, :, 0] - f[:, :, 1]
    good = jnp.where(jnp.sign(df) == jnp.sign(dy), 1.0, jnp.where(df == 0, 0.5, 0.0))
    counted = (dy != 0).astype(good.dtype)
    return jnp.sum(good * counted, axis=1) / jnp.sum(counted, axis=0)


# ----------------------------------------------------------------------------
# permutation tests

class PermutationResult(NamedTuple):
    """``observed [L]``, ``null [L, p]`` (the CV score of each permutation) and
    ``pvalue [L]`` ``= (1 + #{null at least as good}) / (1 + p)``."""

    observed: jax.Array
    null: jax.Array
    pvalue: jax.Array


def permuted_labels(y, qid=None, *, num_permutations: int, seed: int = 0) -> np.ndarray:
    """``[m, p]`` label vectors shuffled within each query (host side).

    Example:
      >>> permuted_labels([0, 1, 2, 3], [0, 0, 1, 1], num_permutations=2).shape
      (4, 2)
    """
    y = host_labels(y)
    p = check_count(num_permutations, "num_permutations")
    seg = np.zeros(len(y), np.int64) if qid is None else segment_ids(qid).seg
    if seg.shape[0] != y.shape[0]:
        raise ValueError(f"qid has {seg.shape[0]} rows but y has {y.shape[0]}")
    rng = np.random.default_rng(check_seed(seed))
    key = seg[:, None] + rng.random((p, len(y))).T             # order within queries
    order = np.argsort(key, axis=0, kind="stable")
    out = np.empty((len(y), p))
    out[np.argsort(seg, kind="stable")] = y[order]
    return out


def permutation_test(holdout_fn: Callable, y, qid=None, *, metric: Callable,
                     num_permutations: int = 99, seed: int = 0,
                     greater_is_better: Optional[bool] = None, **metric_kwargs
                     ) -> PermutationResult:
    """Permutation test of a cross-validation score (docs/math.md; Pahikkala et al. 2009 §4.1).

    The ``p`` shuffled label vectors are extra outputs: ``holdout_fn(Y)`` is called
    once with ``Y = [y, perm_1 .. perm_p]`` (one decomposition for all). The graph
    inside ``holdout_fn`` should not depend on the labels (no tie exclusion).

    Args:
      holdout_fn: ``Y [m, 1 + p] -> HoldOut``, e.g.
        ``lambda Y: holdout_primal(X, Y, graph, lams=lams)``.
      y, qid: labels and query ids (labels are shuffled within queries).
      metric: a rankjax metric; ``metric_kwargs`` are passed to it.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(15, num_features=4, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> res = rj.permutation_test(lambda Y: rj.holdout_primal(d.X, Y, g, lams=[1.]),
      ...                           d.y, d.qid, metric=rj.ndcg, num_permutations=19)
      >>> bool(res.pvalue[0] <= 0.05)
      True
    """
    check_metric_options(metric, metric_kwargs, "permutation_test")
    if not callable(holdout_fn):
        raise TypeError("holdout_fn must be a callable Y -> HoldOut, e.g. "
                        "lambda Y: holdout_primal(X, Y, graph, lams=lams)")
    num_permutations = check_count(num_permutations, "num_permutations")
    sign = metric_sign(metric, greater_is_better)
    perms = permuted_labels(y, qid, num_permutations=num_permutations, seed=seed)
    Y = np.column_stack([np.asarray(y, np.float64), perms])
    h = holdout_fn(device_array(Y, jnp.result_type(float)))
    table = select_lambda(h.lams, h.predictions, Y, qid, metric=metric,
                          greater_is_better=sign < 0, **metric_kwargs).table
    obs, null = table[:, 0], table[:, 1:]
    better = sign * null <= sign * obs[:, None]
    return PermutationResult(obs, null, (1 + better.sum(1)) / (1 + num_permutations))
