r"""Exact leave-pair-out for global ranking (Pahikkala et al. 2009, §3.4, eq. 35-39): complete
unnormalized graph, cost (21). With :math:`Q = V \operatorname{diag}(\Lambda / ((m-2) \Lambda +
\lambda)) V^T` every pair's two hold-out predictions cost O(1) (3x3 algebra), vectorised over all
pairs; and the pair lists it is used with.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core import lapack
from .._core.checks import as_float_array, check_indices, host_labels
from .._core.finite import value_range
from .._core.host import is_concrete, reduce_concrete, reduction
from .._core.traced import indices_ok, nan_unless
from .._core.linalg import eigh_psd, eigh_psd_checked, psd_ok, spectral_filter
from .._core.products import HI, mm
from .._core.resolved import warn_unresolved
from .._core.types import saveable
from ..graphs.graph import is_graph
from .floors import check_spectrum, lam_floor
from .ridge import eigh_floor


@saveable
class PairHoldOut(NamedTuple):
    """Leave-pair-out predictions: ``predictions [L, p, 2(, k)]`` for the pairs
    ``pairs [p, 2]`` — both rows predicted by the model trained without them."""

    LANES = ("predictions",)
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

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
    # rounding of the 3x3 system (its entries are sums of terms this large) amplified by
    # its inverse: the relative error of z to first order
    size = (jnp.abs(c) + 2 * (jnp.abs(qa) + jnp.abs(qb)) + (1 + n2) * (jnp.abs(A) + 2 * jnp.abs(Bq)
                                                                     + jnp.abs(D)) + 1)
    adj = jnp.sqrt(c00 ** 2 + c11 ** 2 + c22 ** 2 + 2 * (c01 ** 2 + c02 ** 2 + c12 ** 2))
    amplified = jnp.max(jnp.finfo(det.dtype).eps * size * adj / jnp.abs(det))
    return (jnp.stack([la - (u0 * z0 + u1 * z1 + u2 * z2), lb - (v0 * z0 + v1 * z1 + v2 * z2)], 1),
            amplified)


PAIR_ERROR = 2e-3
"""A λ lane of leave-pair-out is NaN where the rounding of some pair's 3x3 system, amplified
by its inverse, reaches this relative error (the first-order estimate of ``_lpo_pairs``;
measured within 2.5x of the float32 error against float64 on ``lambdarank_sample``: 0.027
estimated, 0.034 actual at λ = 1e-2; full-rank features 3e-6 and 1e-6)."""


@jax.jit
def _lpo_core(Pf, sig, y, pairs, lams, floor=0.0, X=None):
    r"""Eq. 38-39 with :math:`Q = P \operatorname{diag}(1/((m-2) \sigma + \lambda)) P^T` (:math:`P
    P^T = K`), every λ; NaN lanes for λ below ``floor`` (:func:`lam_floor`) or whose pair systems
    amplify their rounding beyond :data:`PAIR_ERROR`. With the primal rows ``X`` the λ below
    :func:`eigh_floor` take :math:`Q = X ((m-2) X^T X + \lambda I)^{-1} X^T` from their own Cholesky
    factor (the precision rule of the primal systems)."""
    m = Pf.shape[0]
    n2 = jnp.asarray(m - 2, Pf.dtype)
    yk = y if y.ndim == 2 else y[:, None]
    h1, h2 = pairs[:, 0], pairs[:, 1]

    def shared_q(lam):
        return jnp.matmul(Pf * spectral_filter(n2 * sig, lam), Pf.T, precision=HI)

    def direct_q(lam):
        n = X.shape[1]
        C = lapack.cholesky(n2 * mm(X.T, X) + lam * jnp.eye(n, dtype=X.dtype))
        P = lapack.solve_triangular(C, X.T).T                                  # X C^{-T}
        return mm(P, P.T)

    def per_lam(lam):
        if X is None:
            Q = shared_q(lam)                                                    # [m, m]
        else:
            Q = lax.cond(lam >= eigh_floor(n2 * sig, Pf.dtype), shared_q, direct_q, lam)
        q1 = jnp.sum(Q, axis=1)
        Qy = jnp.matmul(Q, yk, precision=HI)
        return _lpo_pairs(Q, q1, jnp.sum(q1), Qy, yk.sum(0), Qy.sum(0), yk, h1, h2, n2)

    out, amplified = lax.map(per_lam, lams)              # [L, p, 2, k], [L]
    ok = (indices_ok(pairs, m) & (lams >= floor)   # traced: NaN lanes
          & (amplified <= PAIR_ERROR))
    out = nan_unless(ok, out)
    return out if y.ndim == 2 else out[..., 0]


def _check_pairs(pairs, m):
    p = check_indices(pairs, "pairs", m, ndim=2)
    if p.shape[1] != 2:
        raise ValueError(f"pairs must be a [p, 2] integer array, got shape {p.shape}")
    if is_concrete(p) and bool(reduce_concrete(_self_pair, p)):
        raise ValueError("pairs must hold two different row indices")
    return p


_self_pair = reduction(lambda xp, p: xp.any(p[:, 0] == p[:, 1]))


_no_differing = reduction(lambda xp, dy: ~xp.all(xp.any(dy != 0, axis=0)))


@saveable
@dataclasses.dataclass(frozen=True)
class LeavePairOut:
    """``folds=`` of :func:`rankjax.holdout` for leave-pair-out: each pair ``(i, j)`` of
    ``pairs`` ``[p, 2]`` held out in turn from the global ranking problem (Pahikkala et al.
    2009, §3.4, cost (21): the problem's queries ``rj.global_graph(m)``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.random.default_rng(0).standard_normal((8, 2)); y = X[:, 0]
      >>> p = rj.Problem(X, y, rj.global_graph(8))
      >>> s = rj.holdout(p, rj.Primal(), lams=[1.0], folds=rj.LeavePairOut([[0, 1]]))
      >>> s.value.predictions.shape
      (1, 1, 2)
    """

    pairs: object

    method: ClassVar[str] = "leave_pair_out"
    """The solver method :func:`rankjax.holdout` calls with these folds."""


def pairs_of(problem, folds: LeavePairOut):
    """The checked ``[p, 2]`` pairs of ``folds`` on a global ranking problem (the complete
    unnormalized graph of :func:`rankjax.global_graph`: the cost (21) the formulas solve)."""
    g = problem.graph
    ok = is_graph(g, "QueryGraph") and g.has_root
    if ok and is_concrete(g.counts):                      # under jit: checked by the caller
        ok = g.num_queries == 1
    if ok and is_concrete(g.edge_weight):
        ok = float(np.asarray(g.edge_weight)[0]) == 1.0     # a concrete array, also under jit
    if not ok:
        raise ValueError("leave-pair-out solves the global ranking cost (Pahikkala et al. "
                         "2009, eq. 21): build the problem with queries=rj.global_graph(m)")
    m = problem.X.shape[0]
    if m < 3:
        raise ValueError(f"leave-pair-out needs at least 3 rows, got {m}")
    return _check_pairs(folds.pairs, m)


@jax.jit
def _lpo_dual_core(K, y, pairs, lams):
    eig, low, high = eigh_psd_checked(K)
    psd = psd_ok(low, high, K.shape[0], K.dtype)
    floor = lam_floor((K.shape[0] - 2) * high, K.dtype, "pairs")
    out = _lpo_core(eig.vectors * jnp.sqrt(eig.values), eig.values, y, pairs, lams, floor)
    return nan_unless(psd, out), (psd, low, high, floor)


def dual_pairs(K, y, pairs, lams, where) -> PairHoldOut:
    """Exact leave-pair-out predictions of dual RankRLS for global ranking (Pahikkala et
    al. 2009, §3.4, eq. 35-39) on a checked kernel matrix: one ``eigh`` of ``K``, then one
    ``[m, m]`` product and O(1) per pair for every λ. Precision: the 3 x 3 system cancels
    ``1 - (m-2) σ / ((m-2) σ + λ)``; a λ below ``200 eps (m-2) max σ``
    (:data:`~rankjax.solvers.floors.RESOLVE_RTOL`) gives a NaN lane and an
    :class:`UnresolvedLambdaWarning`. An indefinite ``K`` is refused (NaN under ``jit``)."""
    pred, flags = _lpo_dual_core(K, y, pairs, lams)
    check_spectrum(flags, lams, where)
    if is_concrete(flags[3]):                     # above the floor: the pair systems' estimate
        above = np.asarray(lams) >= float(flags[3])
        warn_unresolved(pred[above], np.asarray(lams)[above], where,
                        "the pair systems amplify rounding beyond 2e-3")
    return PairHoldOut(lams, pairs, pred)


@jax.jit
def _lpo_primal_core(X, y, pairs, lams):
    eig = eigh_psd(jnp.matmul(X.T, X, precision=HI))
    return _lpo_core(jnp.matmul(X, eig.vectors, precision=HI), eig.values, y, pairs, lams,
                     0.0, X)


def primal_pairs(X, y, pairs, lams, where) -> PairHoldOut:
    r"""Leave-pair-out of linear RankRLS (global ranking, cost (21)), as :func:`dual_pairs`
    with :math:`K = X X^T` but from :math:`eigh(X^T X)`. The λ below ``1e3 eps (m-2) max σ`` are
    solved by their own Cholesky factor; a λ whose factor fails or whose pair systems
    amplify rounding beyond :data:`PAIR_ERROR` gives a NaN lane and an
    :class:`UnresolvedLambdaWarning`."""
    pred = _lpo_primal_core(X, y, pairs, lams)
    warn_unresolved(pred, lams, where, "the pair systems amplify rounding beyond 2e-3, or "
                    "the Cholesky factor fails")
    return PairHoldOut(lams, pairs, pred)


def lpo_cindex(result: PairHoldOut, y):
    """Leave-pair-out concordance: the fraction of pairs with ``y_a != y_b`` whose
    hold-out predictions are ordered like the labels (ties count half); the AUC
    for positive–negative pairs. ``[L]`` or ``[L, k]``. Pairs with equal labels are
    not counted; when none differ the value is undefined (``ValueError``). A λ whose
    predictions are NaN (unresolved in the dtype) scores NaN, never a count of NaN pairs.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.random.default_rng(0).standard_normal((8, 2)); y = (X[:, 0] > 0) * 1.
      >>> p = rj.Problem(X, y, rj.global_graph(8))
      >>> r = rj.holdout(p, rj.Dual(), lams=[1.], folds=rj.LeavePairOut(rj.positive_negative_pairs(y)))
      >>> print(f"{float(rj.lpo_cindex(r.value, y)[0]):.2f}")
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
    good = jnp.where(jnp.isnan(df), jnp.nan, good)           # an unresolved λ's lane: NaN
    counted = (dy != 0).astype(good.dtype)
    return jnp.sum(jnp.where(dy != 0, good, 0.0), axis=1) / jnp.sum(counted, axis=0)
