r"""Work over row blocks that never cut a query: batches of whole hold-out folds (or whole
queries), for the computations whose ``m x b`` blocks must not be held at once (the
Nyström hold-out and fit, FALKON's products at :math:`10^{6}` rows; Pahikkala et al. 2009, §3.3 and
§3.5).

A batch is ``bs`` folds of one padded size ``P`` (the buckets of a :class:`Folds`, merged as
:func:`~rankjax.graphs.folds.over_folds` merges them), so ``bs P`` rows, about ``rows`` of
them. Whatever a batch forms of its rows (``K(X_U, X_R)``, the Nyström features ``Φ_U``) is
one product of ``bs P`` rows; the graph acts on each fold alone through its root ``B``
(:math:`B B^T = L_{UU}`), exact because no edge leaves a fold. Two drivers:

* :func:`fold_scan`: an accumulator over every batch (:math:`\Phi^T L \Phi`, ``K_Rm L K_mR a``);
* :func:`fold_map`: a per-fold result ``[L, P(, k)]`` of every batch, gathered back to the
  rows ``[L, m(, k)]`` (the hold-out predictions).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.host import device_array, is_concrete
from .._core.log import gated_step
from ..graphs.folds import Folds, fold_batch, merge_plan, merged_buckets, positions

__all__ = ["BATCH_ROWS", "ROW_STEP", "batch_folds", "fold_scan", "fold_map", "batch_rows",
           "batch_mv"]

BATCH_ROWS = 4096
"""Rows of a batch of folds by default: a product of 4,096 rows by a basis of 1,024-2,048
columns runs at the CPU's GEMM rate (160 GFLOP/s float32 on 2 cores; its triangular solve
75), where one fold of 128 rows alone ran its triangular solve at 15."""


ROW_FLOPS = 5.0
r"""What a padded row of a batch costs, in :math:`width^2` flops (its features :math:`K_{UR} C^{-T}`,
its share of the Gram and of :math:`K_{UR} C^{-T} V`): the shapes of :func:`batch_folds` and of
the batches are merged against it."""

ROW_STEP = 8
"""Fold sizes of the row-block passes are padded to a multiple of this many rows (then
merged where a shape saves less than it costs, :func:`batch_folds`)."""


def batch_folds(folds: Folds, rows: int, L: int, width: int) -> Folds:
    r"""``folds`` laid out again on the host for the row-block passes, where every padded row
    costs the features of the row (about :math:`5 width^2` flops: ``K_UR``, :math:`C^{-T}`, the
    Gram, :math:`K_{UR} C^{-T} V`) besides its fold's system: the sizes padded to a multiple of
    :data:`ROW_STEP` rows (not to :func:`~rankjax._core.segments.padded_size`'s buckets of
    up to 25 %), neighbouring shapes merged while that is cheaper than one more shape
    (:func:`~rankjax.graphs.folds.merge_plan` with the row cost), and each shape's count
    padded only to equal batches of at most ``rows // P`` folds. At 50,000 rows in
    queries of 50-150 rows: 50,400 padded rows against 60,928. Folds under a trace are
    returned as they are."""
    if not is_concrete(folds.position):
        return folds
    host = jax.tree.map(np.asarray, folds)
    each = [i[k] for I, K in zip(host.index, host.mask) for i, k in zip(I, K) if k.any()]
    size = np.array([r.size for r in each])
    P = -(-size // ROW_STEP) * ROW_STEP
    shapes, counts = np.unique(P, return_counts=True)
    index, mask = [], []
    for i, j in merge_plan(shapes.tolist(), counts.tolist(), L, width, ROW_FLOPS * width * width):
        Pb = int(shapes[j - 1])
        chosen = [r for r, p in zip(each, P) if shapes[i] <= p <= Pb]
        nb = -(-len(chosen) // max(1, rows // Pb))             # batches of equal size
        F = -(-len(chosen) // nb) * nb
        I, K = np.zeros((F, Pb), np.int32), np.zeros((F, Pb), bool)
        for f, r in enumerate(chosen):
            I[f, :r.size], K[f, :r.size] = r, True
        index.append(I)
        mask.append(K)
    return dataclasses.replace(folds, index=tuple(map(device_array, index)),
                               mask=tuple(map(device_array, mask)),
                               position=device_array(positions(index, mask, folds.num_rows)))


def _batches(idx, mask, rows):
    F, P = idx.shape
    bs = fold_batch(F, max(1, rows // P))
    return idx.reshape(F // bs, bs, P), mask.reshape(F // bs, bs, P)


def _batch_plan(folds, rows, L, width):
    """``([(I [nb, bs, P], M [nb, bs, P]), ...], position [m], total batches)``."""
    buckets, pos = merged_buckets(folds, L, width, row_flops=ROW_FLOPS * width * width)
    parts = [_batches(i, k, rows) for i, k in buckets]
    return parts, pos, sum(i.shape[0] for i, _ in parts)


def fold_scan(folds: Folds, rows: int, update, init, L: int, width: int,
              what: str = "row block"):
    """``update(acc, idx [bs, P], mask [bs, P]) -> acc`` over every batch of about ``rows``
    rows of whole folds (``lax.fori_loop`` per bucket), from ``init``. ``L`` and ``width``
    merge the buckets as the hold-out that follows merges them. With ``verbose`` a line per
    batch (every ``verbose``-th), ``what`` naming the pass."""
    parts, _, total = _batch_plan(folds, rows, L, width)
    work = float(sum(I.size for I, _ in parts))
    acc, done = init, 0
    for I, M in parts:
        def body(i, a, I=I, M=M, done=done):
            a = update(a, I[i], M[i])
            gated_step(what, total, done + i + 1, I.shape[1] * I.shape[2],
                       jax.tree.leaves(a)[0].ravel()[0].real, fmt="{0:.0f} rows",
                       weight=0, total_work=work)
            return a
        acc = lax.fori_loop(0, I.shape[0], body, acc)
        done += I.shape[0]
    return acc


def fold_map(folds: Folds, rows: int, fn, L: int, width: int, tail: tuple, dtype,
             what: str = "row block"):
    """``fn(idx [bs, P], mask [bs, P]) -> [L, bs, P, *tail]`` over every batch of about
    ``rows`` rows of whole folds (``lax.map``), gathered back to rows: ``[L, m, *tail]``
    (rows in no fold 0); with ``verbose`` a line per batch, as :func:`fold_scan`."""
    parts, pos, total = _batch_plan(folds, rows, L, width)
    work = float(sum(I.size for I, _ in parts))
    out, done = [], 0
    for I, M in parts:
        def one(a, done=done):
            i, idx, mask = a
            r = fn(idx, mask)
            gated_step(what, total, done + i + 1, idx.size, r.ravel()[0].real,
                       fmt="{0:.0f} rows", weight=0, total_work=work)
            return r
        res = lax.map(one, (jnp.arange(I.shape[0]), I, M))       # [nb, L, bs, P, *tail]
        res = jnp.moveaxis(res, 1, 0).astype(dtype)
        out.append(res.reshape((L, -1) + tuple(tail)))
        done += I.shape[0]
    out.append(jnp.zeros((L, 1) + tuple(tail), dtype))
    return jnp.take(jnp.concatenate(out, axis=1), pos, axis=1, mode="clip")


def batch_rows(graph, idx, mask, V):
    r"""``[bs, P, ...]``: :math:`B_f^T V_f` for every fold ``f`` of a batch (:math:`B_f B_f^T =
    L_{UU}`; :meth:`~rankjax.QueryGraph.root_rows`: O(P) per column with a segment root)."""
    return jax.vmap(graph.root_rows)(idx, mask, V)


def batch_mv(graph, idx, mask, v):
    """``[bs, P, ...]``: ``L_UU v_f`` for every fold of a batch (:meth:`block_mv`)."""
    return jax.vmap(graph.block_mv)(idx, mask, v)
