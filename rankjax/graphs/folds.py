"""Hold-out folds of whole queries (Pahikkala et al. 2009, §3.3): the :class:`Folds`
value (padded index buckets of equal size, built once on the host) and the driver that
runs a per-fold function over every bucket with ``lax.map`` (no Python loop over folds).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.log import gated_step
from .._core.checks import check_seed, is_int
from .._core.host import device_array, is_concrete
from .._core.queries import segment_ids
from .graph import Graph, check_graph
from .._core.backend import paths
from .._core.segments import padded_size
from .._core.types import saveable

FOLD_BUDGET = 1 << 24          # elements of [L, P, P] work arrays per batch of folds


@saveable
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Folds:
    """Hold-out folds as padded index buckets (built on the host by :func:`make_folds`).

    Attributes:
      index: tuple of ``[F_b, P_b]`` int32 row indices, one array per bucket of
        folds padded to size ``P_b``; ``F_b`` is padded like the sizes (a few sizes per octave) with
        inert (all-masked) folds.
      mask: tuple of ``[F_b, P_b]`` bool, False on padding.
      position: ``[m]`` int32 place of every row in the buckets laid end to end
        (``positions``): the fold results are gathered back to rows by it.
      fold_of_row: ``[m]`` int32 fold id of every row.
      unit_of_row: ``[m]`` int32 query (or row) of every row: the graph the folds
        were built for (checked by the hold-out functions).
      num_rows: ``m`` (static).
      num_folds: number of folds (static).
    """

    index: tuple
    mask: tuple
    position: jax.Array
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
      (3, [(1, 1), (2, 4)])
    """
    check_graph(graph)
    f = build_folds(graph, folds, seed)
    if f.num_folds < 2:               # one fold: every model would be trained on nothing
        raise ValueError("a hold-out needs at least 2 folds, got one (every row in one fold): "
                         "give the query ids (qid) of several queries, or more rows")
    return f


def build_folds(graph, folds, seed):
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
    order = np.lexsort((graph.fold_order(), fold))     # by fold, each query contiguous
    sizes = np.bincount(fold)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    padded = fold_shapes(sizes)
    index, mask = [], []
    for P in np.unique(padded):
        which = np.flatnonzero(padded == P)
        which = np.concatenate([which, np.full(int(padded_size(which.size)) - which.size, -1)])
        pos = np.arange(P)[None, :]
        valid = (pos < sizes[which, None]) & (which[:, None] >= 0)
        rows = order[np.where(valid, starts[which, None] + pos, 0)]
        index.append(np.where(valid, rows, 0).astype(np.int32))
        mask.append(valid)
    return Folds(tuple(map(device_array, index)), tuple(map(device_array, mask)),
                 device_array(positions(index, mask, m)), device_array(fold),
                 device_array(unit, jnp.int32), int(m), int(sizes.shape[0]))


def positions(index, mask, m):
    """``[m]`` int32 (host): where each row's result lies when the buckets ``index [F_b, P_b]``
    (``mask``: False on padding) are flattened and laid end to end; ``sum F_b P_b`` (one past
    the end: a zero) for a row in no fold.

    Example:
      >>> positions([np.array([[2, 0]]), np.array([[1, 3, 0]])],
      ...           [np.array([[True, False]]), np.array([[True, True, False]])], 5).tolist()
      [5, 2, 0, 3, 5]
    """
    out = np.full(m, sum(np.size(i) for i in index), np.int32)
    start = 0
    for i, k in zip(index, mask):
        i, k = np.asarray(i), np.asarray(k)
        out[i[k]] = start + np.flatnonzero(k.ravel())
        start += i.size
    return out


def each_slice(f, *args):
    """``f`` over the leading axis of ``args``, one slice at a time (``lax.map``)."""
    return lax.map(lambda a: f(*a), args)


SHAPE_SLACK = 1.05
"""Fold sizes share a padded shape while the padded work grows by at most this factor.
A larger slack pads small folds into work that costs more than the compilations it saves
(measured: benchmarks/REPORT.md §8).
The folds do not know the fold program's width: :func:`over_folds` merges further at
trace time, where it does (:func:`merge_plan`)."""


SMALL_FOLD = 8
r"""Folds up to this many rows count as this many in :func:`fold_shapes` (their work is the
per-fold overhead, not :math:`P^2`: they share one shape)."""


def _padded_work(P, count):
    return int(padded_size(count)) * max(int(P), SMALL_FOLD) ** 2


def fold_shapes(sizes):
    r"""``[F]`` the padded size of every fold: the sizes bucketed (a few sizes per octave),
    then merged into the fewest shapes whose padded work (:math:`\sum F_b P_b^2`, the fold
    count padded too) stays within :data:`SHAPE_SLACK` of the unmerged buckets'. Every
    shape is a copy of the fold's program (compile times: benchmarks/REPORT.md §8).

    Example:
      >>> fold_shapes(np.array([3, 4, 4, 4, 16, 17, 40])).tolist()
      [4, 4, 4, 4, 16, 20, 40]
    """
    padded = padded_size(sizes)
    shape, count = np.unique(padded, return_counts=True)
    u = shape.size
    cum = np.concatenate([[0], np.cumsum(count)])
    span = lambda i, j: _padded_work(shape[j - 1], cum[j] - cum[i])   # noqa: E731  shapes i..j-1
    # best[k][j]: least work covering shapes 0..j-1 with k merged groups; cut: its last start
    best = np.full((u + 1, u + 1), np.inf)
    cut = np.zeros((u + 1, u + 1), int)
    best[0, 0] = 0
    for k in range(1, u + 1):
        for j in range(1, u + 1):
            for i in range(k - 1, j):
                w = best[k - 1, i] + span(i, j)
                if w < best[k, j]:
                    best[k, j], cut[k, j] = w, i
    limit = SHAPE_SLACK * sum(_padded_work(shape[i], count[i]) for i in range(u))
    k = next(k for k in range(1, u + 1) if best[k, u] <= limit)
    out, j = padded.copy(), u
    for kk in range(k, 0, -1):
        i = cut[kk, j]
        out[(padded >= shape[i]) & (padded <= shape[j - 1])] = shape[j - 1]
        j = i
    return out


def fold_batch(count: int, most: int) -> int:
    """The largest divisor of ``count`` folds that is at most ``most`` (at least 1): a
    ``lax.map`` batch that leaves no remainder, whose ``vmap`` would be a second copy of
    the fold's program (the dual hold-out compiled most buckets twice).

    Example:
      >>> fold_batch(128, 21), fold_batch(40, 7), fold_batch(7, 3)
      (16, 5, 1)
    """
    most = max(1, min(int(count), int(most)))
    return next(d for d in range(most, 0, -1) if count % d == 0)


SHAPE_FLOPS = 2e9
"""What one more fold shape costs, in the fold work it is worth: a shape is one more copy of
the fold's program to compile, worth about as much time as this many floating-point
operations of the batched fold products. :func:`merge_plan` pads the folds of neighbouring
shapes to the larger one while the padded work grows by less than this per shape saved
(measured: benchmarks/REPORT.md §8)."""


def fold_flops(P, count, L, width):
    r"""Floating-point operations of ``count`` folds of ``P`` rows, ``L`` λ and a feature block
    of ``width`` columns: :math:`2 P^2 width` for the fold's rows of ``H`` and :math:`P^3` for its
    system per λ (:func:`~rankjax.solvers.holdout.woodbury_fold`), small folds counted as
    :data:`SMALL_FOLD` rows."""
    P = max(int(P), SMALL_FOLD)
    return float(count) * L * P * P * (2 * width + P)


def merge_plan(shapes, counts, L, width, row_flops=0.0):
    """``[(i, j), ...]``: the runs of neighbouring shapes (``shapes`` ascending, ``counts``
    folds each) that share the largest one's shape, chosen to minimise the fold work (and
    ``row_flops`` for every padded row) plus :data:`SHAPE_FLOPS` per shape (dynamic
    programming over the cut points).

    Example:
      >>> merge_plan([8, 16, 128], [10, 100, 50], L=13, width=300)
      [(0, 2), (2, 3)]
    """
    u = len(shapes)
    cum = np.concatenate([[0], np.cumsum(counts)])
    best, cut = [0.0] + [np.inf] * u, [0] * (u + 1)
    for j in range(1, u + 1):
        for i in range(j):
            w = (best[i] + SHAPE_FLOPS + fold_flops(shapes[j - 1], cum[j] - cum[i], L, width)
                 + row_flops * shapes[j - 1] * (cum[j] - cum[i]))
            if w < best[j]:
                best[j], cut[j] = w, i
    plan, j = [], u
    while j:
        plan.append((cut[j], j))
        j = cut[j]
    return plan[::-1]


def merged_buckets(folds: Folds, L, width, xp=jnp, row_flops=0.0):
    """``([(index [F, P], mask [F, P]), ...], position [m])``: the buckets of ``folds``
    merged by :func:`merge_plan` (a smaller bucket's folds padded with masked rows) and
    every row's place in them (``positions``), with ``xp`` (``numpy`` on the host:
    :func:`premerge`). Unmerged, both are ``folds``' own."""
    shapes, counts = [i.shape[1] for i in folds.index], [i.shape[0] for i in folds.index]
    plan = merge_plan(shapes, counts, L, width, row_flops)
    if all(j == i + 1 for i, j in plan):
        return list(zip(folds.index, folds.mask)), folds.position
    out, start, moved = [], 0, []       # moved: (old start, old P, new start, new P) per bucket
    old = np.concatenate([[0], np.cumsum(np.multiply(shapes, counts))])
    for i, j in plan:
        P = shapes[j - 1]
        pad = lambda a: xp.pad(a, ((0, 0), (0, P - a.shape[1])))     # noqa: E731
        out.append((xp.concatenate([pad(a) for a in folds.index[i:j]]),
                    xp.concatenate([pad(a) for a in folds.mask[i:j]])))
        for b in range(i, j):
            moved.append((old[b], shapes[b], start, P))
            start += counts[b] * P
    moved.append((old[-1], 1, start, 1))              # "in no fold": one past the end
    pos = folds.position
    b = sum((pos >= o).astype(np.int32) for o, *_ in moved[1:])     # each row's old bucket
    o, p, n, q = (xp.asarray(np.array(c, np.int32))[b] for c in zip(*moved))
    return out, n + (pos - o) // p * q + (pos - o) % p


def premerge(folds, L, width):
    """``folds`` with its buckets merged on the host as :func:`over_folds` would merge them
    in the program for ``L`` λ and a feature block of ``width`` columns: the program then
    has no padding step (every step is an XLA:CPU kernel to compile). Folds under a trace
    are returned as they are."""
    if not is_concrete(folds.position):
        return folds
    host = jax.tree.map(np.asarray, folds)
    buckets, pos = merged_buckets(host, L, width, np)
    if pos is host.position:
        return folds
    return dataclasses.replace(folds, index=tuple(device_array(i) for i, _ in buckets),
                               mask=tuple(device_array(k) for _, k in buckets),
                               position=device_array(pos))


def over_folds(folds: Folds, L, width, out_shape, dtype, fold_fn):
    r"""Runs ``fold_fn(P)(idx, mask) -> [L, P(, k)]`` over every padded fold of size
    ``P`` (the buckets merged by :func:`merged_buckets`; ``lax.map`` over batches of about
    :math:`FOLD_{BUDGET} / ((L + width) P^2)` folds, ``vmap`` inside; ``width`` = columns of the
    fold's feature block) and gathers the predictions back to rows, ``[L, m(, k)]``
    (``folds.position``; a gather, where a scatter is a serial loop on the CPU)."""
    buckets, pos = merged_buckets(folds, L, width)
    parts, work = [], float(sum(i.shape[0] * float(i.shape[1]) ** 3 for i, _ in buckets))
    for b, (idx_b, mask_b) in enumerate(buckets, 1):
        Fb, P = idx_b.shape
        batch = fold_batch(Fb, FOLD_BUDGET // max(1, (L + width) * P * P))
        if paths().serial(P, min(width, paths().small_solve)):
            batch = 1                     # LAPACK per fold, one at a time (see _backend)
        one_fold = fold_fn(P)
        res = lax.map(lambda a: one_fold(*a), (idx_b, mask_b), batch_size=batch)  # [F, L, P(, k)]
        res = jnp.moveaxis(res, 1, 0)                                   # [L, F, P(, k)]
        parts.append(res.reshape((res.shape[0], -1) + res.shape[3:]).astype(dtype))
        gated_step("fold bucket", len(buckets), b, P, Fb, parts[-1].ravel()[0].real,
                   float(Fb) * P ** 3, fmt="{1:.0f} folds of up to {0:.0f} rows",
                   weight=3, total_work=work)              # a fold's solve: O(P^3)
    parts.append(jnp.zeros((out_shape[0], 1) + tuple(out_shape[2:]), dtype))   # rows in no fold
    return jnp.take(jnp.concatenate(parts, axis=1), pos, axis=1, mode="clip")


def resolve_folds(graph, folds, seed, m):
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


def problem_folds(problem, folds, seed, where):
    """The :class:`Folds` of ``folds`` (``None``, ``k`` or a ``Folds``) on a problem's
    graph; a clear error where they cannot be drawn (traced queries, edges across folds)."""
    if not (folds is None or isinstance(folds, (int, np.integer, Folds))) or isinstance(folds, bool):
        raise TypeError(f"folds must be None, an int, a rankjax.Folds or a "
                        f"rankjax.LeavePairOut, got {type(folds).__name__}")
    graph = problem.graph
    graph.check_splittable("the hold-out")
    if not (isinstance(folds, Folds) or getattr(graph, "static_folds", False)
            or all(is_concrete(a) for a in jax.tree.leaves(graph))):
        raise TypeError(f"{where} under jit needs folds drawn outside it (the queries are "
                        "traced): folds=rj.make_folds(problem.graph) (or make_folds(graph, k))")
    return resolve_folds(graph, folds, seed, problem.X.shape[0])
