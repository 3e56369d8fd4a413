"""Exact fast cross-validation (SPEC §3; seed 001 §3.3-3.4, Lemma 2).

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
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._checks import check_matrix, is_concrete, segment_ids
from ._graph import Graph, IdentityGraph, QueryGraph, global_graph, has_sqrt
from ._kernels import Kernel
from ._path import _check_lams, _scale, basis_rows, dual_system, nystrom_features, select_lambda
from ._rankrls import _check_inputs, _tdot, primal_system
from ._ridge import eigh_psd

__all__ = ["Folds", "make_folds", "HoldOut", "CVResult", "holdout_primal", "holdout_dual",
           "holdout_sparse", "cross_validate", "PairHoldOut", "leave_pair_out_primal",
           "leave_pair_out_dual", "differing_pairs", "positive_negative_pairs", "lpo_cindex",
           "PermutationResult", "permuted_labels", "permutation_test"]

_HI = lax.Precision.HIGHEST
_BUDGET = 1 << 24          # elements of [L, P, P] work arrays per batch of folds


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Folds:
    """Hold-out folds as padded index buckets (built on the host by :func:`make_folds`).

    Attributes:
      index: tuple of ``[F_b, P_b]`` int32 row indices, one array per bucket of
        folds padded to size ``P_b`` (a power of two).
      mask: tuple of ``[F_b, P_b]`` bool, False on padding.
      fold_of_row: ``[m]`` int32 fold id of every row.
      num_rows: ``m`` (static).
      num_folds: number of folds (static).
    """

    index: tuple
    mask: tuple
    fold_of_row: jax.Array
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
    if isinstance(graph, QueryGraph):
        if not is_concrete(graph.seg):
            raise TypeError("make_folds needs a concrete graph: build the folds outside jit")
        unit = np.asarray(graph.seg)
        n_units = graph.num_queries
    elif isinstance(graph, IdentityGraph):
        unit = np.arange(graph.num_rows)
        n_units = graph.num_rows
    else:
        raise TypeError("hold-out folds need a QueryGraph (folds of whole queries) or an "
                        "IdentityGraph; a PreferenceGraph's edges may cross any split")
    m = unit.shape[0]
    if folds is None:
        fold = unit
    elif isinstance(folds, (int, np.integer)):
        if not 2 <= folds <= n_units:
            raise ValueError(f"folds must be between 2 and {n_units}, got {folds}")
        perm = np.random.default_rng(seed).permutation(n_units)
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
    padded = 1 << np.ceil(np.log2(np.maximum(sizes, 1))).astype(int)
    index, mask = [], []
    for P in np.unique(padded):
        which = np.flatnonzero(padded == P)
        pos = np.arange(P)[None, :]
        valid = pos < sizes[which, None]
        rows = order[np.where(valid, starts[which, None] + pos, 0)]
        index.append(jnp.asarray(np.where(valid, rows, 0), jnp.int32))
        mask.append(jnp.asarray(valid))
    return Folds(tuple(index), tuple(mask), jnp.asarray(fold), int(m), int(sizes.shape[0]))


class HoldOut(NamedTuple):
    """Hold-out predictions: ``predictions [L, m(, k)]`` — row ``i`` predicted by
    the model trained without ``i``'s fold — for the grid ``lams [L]``."""

    lams: jax.Array
    predictions: jax.Array
    folds: Folds


def _row_factor_data(graph, dtype):
    """Per-row data to build each fold's factor ``B`` of ``L_UU``."""
    if isinstance(graph, IdentityGraph):
        return None
    ones = jnp.ones(graph.seg.shape, dtype)
    n = jax.ops.segment_sum(ones, graph.seg, num_segments=graph.num_queries)[graph.seg]
    e = graph.edge_weight.astype(dtype)[graph.seg]
    if graph.group_seg is None:
        return dict(seg=graph.seg, n=n, e=e)
    ng = jax.ops.segment_sum(ones, graph.group_seg, num_segments=graph.num_groups)[graph.group_seg]
    return dict(seg=graph.seg, n=n, e=e, grp=graph.group_seg, ng=ng)


def _fold_factor(rd, idx, mask, dtype):
    """``B`` with ``B B^T = L_UU`` for one padded fold (zero on padding)."""
    P = idx.shape[0]
    mm = (mask[:, None] & mask[None, :]).astype(dtype)
    eye = jnp.eye(P, dtype=dtype)
    if rd is None:
        return eye * mask.astype(dtype)
    seg, n, e = rd["seg"][idx], rd["n"][idx], rd["e"][idx]
    same = (seg[:, None] == seg[None, :]).astype(dtype)
    if "grp" not in rd:                            # S_UU = sqrt(e n) (I - same / n)
        return mm * jnp.sqrt(e * n)[:, None] * (eye - same / n[:, None])
    grp, ng = rd["grp"][idx], rd["ng"][idx]
    sameg = (grp[:, None] == grp[None, :]).astype(dtype)
    L = mm * (e[:, None] * (eye * (n - ng)[:, None] - same + sameg))
    eig = eigh_psd(L)
    return (eig.vectors * jnp.sqrt(eig.values)) @ eig.vectors.T


def _holdout_folds(folds: Folds, graph, Pfeat, d_fn, F, y, K=None, lams=None):
    """Shared LQO core.

    ``Pfeat [m, r]`` and ``d_fn(lam) -> [r]`` define ``H_UU = P_U diag(d) P_U^T``
    (primal) or ``H_UU = (K_UU - P_U diag(d) P_U^T) / λ`` (dual, ``K`` given).
    ``F [L, m(, k)]`` are the full-data fitted values.
    """
    dtype = Pfeat.dtype
    rd = _row_factor_data(graph, dtype)
    D = jax.vmap(d_fn)(lams)                                     # [L, r]
    out = jnp.zeros(F.shape, dtype)

    def one_fold(args):
        idx, mask = args
        mf = mask.astype(dtype)
        Pu = Pfeat[idx] * mf[:, None]
        B = _fold_factor(rd, idx, mask, dtype)
        yu = y[idx] * mf.reshape(mf.shape + (1,) * (y.ndim - 1))
        Ly = B @ _tdot(B, yu)
        Kuu = None if K is None else K[idx[:, None], idx[None, :]] * (mf[:, None] * mf[None, :])
        eye = jnp.eye(idx.shape[0], dtype=dtype)

        def per_lam(d, lam, fu):
            H = jnp.matmul(Pu * d, Pu.T, precision=_HI)
            if Kuu is not None:
                H = (Kuu - H) / lam
            HB = jnp.matmul(H, B, precision=_HI)
            t = fu - jnp.matmul(H, Ly, precision=_HI)
            M = eye - jnp.matmul(B.T, HB, precision=_HI)
            return t + jnp.matmul(HB, jnp.linalg.solve(M, _tdot(B, t)), precision=_HI)

        return jax.vmap(per_lam)(D, lams, F[:, idx])            # [L, P(, k)]

    for idx_b, mask_b in zip(folds.index, folds.mask):
        # chain the buckets: independent loops run concurrently on XLA:CPU's thread pool
        # and were seen to deadlock it (2 cores, JAX 0.10); this orders them
        idx_b, mask_b, out = lax.optimization_barrier((idx_b, mask_b, out))
        Fb, P = idx_b.shape
        batch = max(1, min(Fb, _BUDGET // max(1, lams.shape[0] * P * P)))
        chunks = -(-Fb // batch)
        pad = chunks * batch - Fb                 # inert folds (all masked) fill the last chunk
        idx_b = jnp.pad(idx_b, ((0, pad), (0, 0)))
        mask_b = jnp.pad(mask_b, ((0, pad), (0, 0)))
        res = lax.map(jax.vmap(one_fold), (idx_b.reshape(chunks, batch, P),
                                           mask_b.reshape(chunks, batch, P)))
        res = res.reshape((chunks * batch,) + res.shape[2:])            # [F, L, P(, k)]
        res = jnp.moveaxis(res, 1, 0)                                   # [L, F, P(, k)]
        flat_idx = jnp.where(mask_b, idx_b, F.shape[1]).reshape(-1)
        vals = res.reshape((res.shape[0], -1) + res.shape[3:])
        out = out.at[:, flat_idx].set(vals, mode="drop")
    return out


def _resolve_folds(graph, folds, seed):
    return folds if isinstance(folds, Folds) else make_folds(graph, folds, seed=seed)


def holdout_primal(X, y, graph: Graph, *, lams, folds=None, seed: int = 0) -> HoldOut:
    """Leave-query-out / k-fold hold-out predictions of primal RankRLS (or RLS with an
    identity graph) for a λ grid, from one eigendecomposition of ``X^T L X``
    (SPEC §3.1; seed 001 §3.3, eq. 33).

    ``H = X (X^T L X + λ I)^{-1} X^T = P diag(1/(Λ+λ)) P^T`` with ``P = X V``.

    Args:
      X: ``[m, n]`` (dense).
      y: ``[m]`` or ``[m, k]``.
      graph: :class:`QueryGraph` or :class:`IdentityGraph`.
      lams: ``[L]`` λ grid (traced).
      folds: see :func:`make_folds`, or a prebuilt :class:`Folds` (needed under jit).

    Returns:
      :class:`HoldOut` with ``predictions [L, m(, k)]``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> h = rj.holdout_primal(d.X, d.y, rj.query_graph(d.qid), lams=[0.1, 10.])
      >>> h.predictions.shape == (2, len(d.y))
      True
    """
    X, y = _check_inputs(X, y, graph, 1.0)
    X = X.todense() if hasattr(X, "todense") else X
    lams = _check_lams(lams).astype(X.dtype)
    folds = _resolve_folds(graph, folds, seed)
    G, b = primal_system(X, y, graph)
    eig = eigh_psd(G)
    Pf = jnp.matmul(X, eig.vectors, precision=_HI)                # [m, n]
    c = _tdot(eig.vectors, b)                                      # [n(, k)]
    d_fn = lambda lam: 1 / (eig.values + lam)  # noqa: E731
    F = jax.vmap(lambda lam: jnp.matmul(Pf, _scale(c, eig.values, lam), precision=_HI))(lams)
    return HoldOut(lams, _holdout_folds(folds, graph, Pf, d_fn, F, y, lams=lams), folds)


def holdout_dual(K, y, graph: Graph, *, lams, folds=None, seed: int = 0) -> HoldOut:
    """Leave-query-out / k-fold hold-out predictions of dual (kernel) RankRLS for a λ
    grid, from one eigendecomposition of ``S K S`` (SPEC §3.1; seed 001 eq. 33-34).

    ``H = (L + λ K^{-1})^{-1} = (K - K S U diag(1/(Γ+λ)) U^T S K) / λ``.

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
    K, y = _check_inputs(K, y, graph, 1.0, "K")
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be square [m, m], got {tuple(K.shape)}")
    lams = _check_lams(lams).astype(K.dtype)
    folds = _resolve_folds(graph, folds, seed)
    SKS, rhs, apply_S = dual_system(K, y, graph)
    eig = eigh_psd(SKS)
    KSU = jnp.matmul(K, apply_S(eig.vectors), precision=_HI)      # [m, m]
    c = _tdot(eig.vectors, rhs)
    d_fn = lambda lam: 1 / (eig.values + lam)  # noqa: E731
    F = jax.vmap(lambda lam: jnp.matmul(KSU, _scale(c, eig.values, lam), precision=_HI))(lams)
    return HoldOut(lams, _holdout_folds(folds, graph, KSU, d_fn, F, y, K=K, lams=lams), folds)


def holdout_sparse(X, y, graph: Graph, *, lams, kernel: Kernel, basis, folds=None,
                   seed: int = 0) -> HoldOut:
    """Hold-out predictions of sparse-approximation RankRLS (SPEC §2.4 + §3.1): the
    primal hold-out on the Nyström features of the basis rows (``basis``: indices,
    or an int to draw that many rows with ``seed``). The basis stays fixed across
    folds, as in seed 001 §3.5.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(12, num_features=4, seed=0)
      >>> h = rj.holdout_sparse(d.X, d.y, rj.query_graph(d.qid), lams=[1.],
      ...                       kernel=rj.gaussian_kernel(0.3), basis=20)
      >>> h.predictions.shape == (1, len(d.y))
      True
    """
    from ._kernels import kernel_matrix
    _, XR = basis_rows(check_matrix(X), basis, seed)
    Phi, _ = nystrom_features(kernel_matrix(kernel, XR, X), kernel_matrix(kernel, XR))
    return holdout_primal(Phi, y, graph, lams=lams, folds=folds, seed=seed)


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
                   num_queries: Optional[int] = None, **metric_kwargs) -> CVResult:
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
    sel = select_lambda(holdout.lams, holdout.predictions, y, qid, metric=metric,
                        num_queries=num_queries, **metric_kwargs)
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
    """``[p, 2]`` all pairs ``(i, j)``, ``i < j``, with ``y_i != y_j`` (host side).

    Example:
      >>> differing_pairs([1, 0, 1]).tolist()
      [[0, 1], [1, 2]]
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError("y must be 1-D")
    i, j = np.triu_indices(y.shape[0], 1)
    keep = y[i] != y[j]
    return np.stack([i[keep], j[keep]], 1).astype(np.int32)


def positive_negative_pairs(y) -> np.ndarray:
    """``[p, 2]`` all (positive, negative) pairs for binary labels (AUC), positives
    (label > 0) first in each pair.

    Example:
      >>> positive_negative_pairs([1, 0, 1, 0]).tolist()
      [[0, 1], [0, 3], [2, 1], [2, 3]]
    """
    y = np.asarray(y)
    pos, neg = np.flatnonzero(y > 0), np.flatnonzero(y <= 0)
    a, b = np.meshgrid(pos, neg, indexing="ij")
    return np.stack([a.ravel(), b.ravel()], 1).astype(np.int32)


def _solve3(M, b):
    """Batched 3x3 solve ``M^{-1} b`` by the adjugate (elementwise; far faster than a
    batched LU for millions of tiny systems). ``M [p, 3, 3]``, ``b [p, 3, k]``."""
    a = [[M[:, i, j] for j in range(3)] for i in range(3)]
    cof = [[a[(j + 1) % 3][(i + 1) % 3] * a[(j + 2) % 3][(i + 2) % 3]
            - a[(j + 1) % 3][(i + 2) % 3] * a[(j + 2) % 3][(i + 1) % 3] for j in range(3)]
           for i in range(3)]                      # cof[i][j] = adjugate entry (i, j)
    det = a[0][0] * cof[0][0] + a[0][1] * cof[1][0] + a[0][2] * cof[2][0]
    adj = jnp.stack([jnp.stack(row, -1) for row in cof], -2)
    return jnp.einsum("pab,pbk->pak", adj, b) / det[:, None, None]


def _lpo(Pf, sig, y, pairs, lams):
    """Eq. 38-39 with ``Q = P diag(1/((m-2) σ + λ)) P^T`` (``P P^T = K``)."""
    m = Pf.shape[0]
    dtype = Pf.dtype
    n2 = jnp.asarray(m - 2, dtype)
    s = jnp.sqrt(n2)
    h1, h2 = pairs[:, 0], pairs[:, 1]
    R = jnp.array([[-1.0, 1.0, 0.0], [-1.0, 0.0, 1.0]], dtype) * jnp.array([1.0, s, s], dtype)
    yk = y if y.ndim == 2 else y[:, None]
    ones = jnp.ones((m,), dtype)

    def per_lam(lam):
        Q = jnp.matmul(Pf / (n2 * sig + lam), Pf.T, precision=_HI)   # [m, m]
        q1 = Q @ ones
        c = q1.sum()
        Qy = jnp.matmul(Q, yk, precision=_HI)                        # [m, k]
        sumy, oQy = yk.sum(0), Qy.sum(0)                               # [k]
        Quu = jnp.stack([jnp.stack([Q[h1, h1], Q[h1, h2]], -1),
                         jnp.stack([Q[h2, h1], Q[h2, h2]], -1)], -2)  # [p, 2, 2]
        QC = jnp.zeros((h1.shape[0], 2, 3), dtype).at[:, :, 0].set(jnp.stack([q1[h1], q1[h2]], -1))
        CtQC = jnp.zeros((3, 3), dtype).at[0, 0].set(c)
        RtQC = jnp.einsum("ua,pub->pab", R, QC)
        BtQB = CtQC + RtQC + jnp.swapaxes(RtQC, 1, 2) + jnp.einsum("ua,puv,vb->pab", R, Quu, R)
        yu = jnp.stack([yk[h1], yk[h2]], 1)                            # [p, 2, k]
        QDSu = n2 * jnp.stack([Qy[h1], Qy[h2]], 1)                     # [p, 2, k]
        CtQDS = jnp.zeros((3,) + sumy.shape, dtype).at[0].set(n2 * oQy)
        BtS = jnp.zeros((3,) + sumy.shape, dtype).at[0].set(sumy) + jnp.einsum("ua,puk->pak", R, yu)
        BtQLS = CtQDS + jnp.einsum("ua,puk->pak", R, QDSu) - jnp.einsum("pab,pbk->pak", BtQB, BtS)
        QBu = QC + jnp.einsum("puv,vb->pub", Quu, R)
        QLSu = QDSu - jnp.einsum("pub,pbk->puk", QBu, BtS)
        Mx = BtQB - jnp.eye(3, dtype=dtype)
        return QLSu - jnp.einsum("pub,pbk->puk", QBu, _solve3(Mx, BtQLS))

    out = lax.map(per_lam, lams)                                       # [L, p, 2, k]
    return out if y.ndim == 2 else out[..., 0]


def _check_pairs(pairs, m):
    pairs = jnp.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.shape[0] == 0:
        raise ValueError("pairs must be a non-empty [p, 2] integer array")
    if not jnp.issubdtype(pairs.dtype, jnp.integer):
        raise TypeError("pairs must be an integer array")
    if is_concrete(pairs):
        p = np.asarray(pairs)
        if p.min() < 0 or p.max() >= m or np.any(p[:, 0] == p[:, 1]):
            raise ValueError(f"pairs must hold two different row indices in [0, {m})")
    return pairs.astype(jnp.int32)


def leave_pair_out_dual(K, y, pairs, *, lams) -> PairHoldOut:
    """Exact leave-pair-out predictions of dual RankRLS for global ranking (complete
    unnormalized graph, cost (21); SPEC §3.2, seed 001 §3.4, eq. 35-39).

    One ``eigh`` of ``K``, then O(1) per pair and λ (plus one ``[m, m]`` product per λ).
    Precision: the Woodbury step loses accuracy in float32 when λ is small
    relative to ``(m-2)`` times K's small eigenvalues (predictions off by ~15 % at
    λ = 0.01 for a Gaussian kernel at m = 1,000, 2e-3 at λ = 1, while the
    concordance barely moves); use float64 there.

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
    K, y = _check_inputs(K, y, global_graph(np.shape(K)[0]), 1.0, "K")
    m = K.shape[0]
    if K.shape != (m, m) or m < 3:
        raise ValueError(f"K must be square with at least 3 rows, got {tuple(K.shape)}")
    eig = eigh_psd(K)
    return PairHoldOut(_check_lams(lams), _check_pairs(pairs, m),
                       _lpo(eig.vectors * jnp.sqrt(eig.values), eig.values,
                            y, _check_pairs(pairs, m), _check_lams(lams).astype(K.dtype)))


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
    X, y = _check_inputs(X, y, global_graph(np.shape(X)[0]), 1.0)
    m = X.shape[0]
    if m < 3:
        raise ValueError("leave-pair-out needs at least 3 rows")
    X = X.todense() if hasattr(X, "todense") else X
    eig = eigh_psd(jnp.matmul(X.T, X, precision=_HI))
    Pf = jnp.matmul(X, eig.vectors, precision=_HI)
    lams = _check_lams(lams).astype(X.dtype)
    pairs = _check_pairs(pairs, m)
    # P P^T = X X^T with P = X W; Q = P diag(1/((m-2) σ + λ)) P^T
    return PairHoldOut(lams, pairs, _lpo(Pf, eig.values, y, pairs, lams))


def lpo_cindex(result: PairHoldOut, y):
    """Leave-pair-out concordance: the fraction of pairs with ``y_a != y_b`` whose
    hold-out predictions are ordered like the labels (ties count half); the AUC
    for positive–negative pairs. ``[L]`` or ``[L, k]``.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.random.default_rng(0).standard_normal((8, 2)); y = (X[:, 0] > 0) * 1.
      >>> r = rj.leave_pair_out_dual(X @ X.T, y, rj.positive_negative_pairs(y), lams=[1.])
      >>> print(f"{float(rj.lpo_cindex(r, y)[0]):.2f}")
      1.00
    """
    y = jnp.asarray(y)
    p = result.pairs
    f = result.predictions                                   # [L, p, 2(, k)]
    dy = y[p[:, 0]] - y[p[:, 1]]                              # [p(, k)]
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
    y = np.asarray(y, np.float64)
    seg = np.zeros(len(y), np.int64) if qid is None else segment_ids(qid).seg
    rng = np.random.default_rng(seed)
    out = np.empty((len(y), num_permutations))
    for p in range(num_permutations):
        key = seg + rng.random(len(y))          # random order within each query
        order = np.argsort(key, kind="stable")
        base = np.argsort(seg, kind="stable")
        out[base, p] = y[order]
    return out


def permutation_test(holdout_fn: Callable, y, qid=None, *, metric: Callable,
                     num_permutations: int = 99, seed: int = 0, **metric_kwargs
                     ) -> PermutationResult:
    """Permutation test of a cross-validation score (SPEC §3.3; seed 001 §4.1).

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
    perms = permuted_labels(y, qid, num_permutations=num_permutations, seed=seed)
    Y = np.column_stack([np.asarray(y, np.float64), perms])
    h = holdout_fn(jnp.asarray(Y, jnp.result_type(float)))
    table = select_lambda(h.lams, h.predictions, Y, qid, metric=metric, **metric_kwargs).table
    greater = getattr(metric, "__name__", "") not in ("pairwise_error", "disagreement_error")
    obs, null = table[:, 0], table[:, 1:]
    better = null >= obs[:, None] if greater else null <= obs[:, None]
    return PermutationResult(obs, null, (1 + better.sum(1)) / (1 + num_permutations))
