r"""Padded lists (rax's, TF-Ranking's and allRank's layout) as a query graph: ``Q`` lists of
``L`` entries, a ``where`` mask ``[Q, L]`` marking the entries that count (it may be traced),
each list one query of :func:`~rankjax.query_graph`'s Laplacian on its kept entries; the folds
of a hold-out are the lists, from the static shape.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import check_flag
from .._core.memory import compute_dtype
from .._core.segments import bucket
from .._core.types import saveable
from .graph import QueryGraph, graph_pytree

__all__ = ["ListGraph", "list_graph"]


@graph_pytree(["seg", "counts", "edge_weight", "group_seg", "group_query", "group_counts"],
              ["num_segments", "num_group_segments", "lists"])
@saveable
class ListGraph(QueryGraph):
    """The query graph of padded lists (rax's layout, :class:`~rankjax.Problem` with
    ``X [Q, L, n]`` and ``where``; build with :func:`list_graph`): the rows are the ``Q * L``
    entries list by list; list ``q``'s kept entries form segment ``2 q`` and its left-out ones
    segment ``2 q + 1``, of edge weight 0 (they add nothing to any product). The segments
    follow the mask, which may be traced; the folds follow the lists (``lists = (Q, L)``,
    static), so a hold-out's folds never depend on the mask."""

    lists: tuple = (0, 0)
    static_folds = True
    """The folds come from the static shape: drawn under ``jit`` with a traced mask too."""

    def fold_units(self):
        Q, L = self.lists
        return np.repeat(np.arange(Q), L), Q

    def fold_order(self):
        return np.arange(self.lists[0] * self.lists[1])

    def _fold_sums(self, seg, idx, v):
        """``[P, ...]`` every row's sum of ``v`` over its segment within the fold, whatever the
        rows' order (the mask, and so the segments, may be traced): the fold's segment ids
        sorted, numbered by their boundaries, O(P log P)."""
        s = seg[idx]
        order = jnp.argsort(s, stable=True)
        ss = s[order]
        local_sorted = jnp.concatenate([jnp.zeros(1, jnp.int32),
                                        jnp.cumsum((ss[1:] != ss[:-1]).astype(jnp.int32))])
        local = jnp.zeros_like(local_sorted).at[order].set(local_sorted)
        return jax.ops.segment_sum(v, local, num_segments=idx.shape[0])[local]

    @property
    def num_queries(self) -> int:
        """The lists (a list whose entries are all left out still counts: the shape says)."""
        return self.lists[0]

    def kept_rows(self):
        return jnp.sum(self.counts[0:2 * self.lists[0]:2])

    def restrict(self, rows, size=None):
        raise TypeError("a graph of padded lists is not subsampled: flatten the kept entries "
                        "to rows with query ids (docs/from_rax.md)")

    def shard_blocks(self, rows, shard_of_query):
        raise TypeError("padded lists are not sharded: flatten the kept entries to rows with "
                        "query ids and shard those (docs/from_rax.md)")


def list_graph(where, *, normalized: bool = True, dtype=None) -> ListGraph:
    r"""The query graph of ``Q`` padded lists of ``L`` entries (rax's layout): ``where``
    ``[Q, L]`` (bool, may be traced) marks the entries that count; list ``q``'s kept entries
    are one query (:func:`query_graph`'s Laplacian block, normalized by default, on the
    ``n_q`` kept entries), the rest add nothing. The rows are the entries list by list
    (``X.reshape(Q * L, n)``); the hold-out folds are the lists (static).

    Example:
      >>> import numpy as np
      >>> g = list_graph(np.array([[True, True, False], [True, True, True]]), normalized=False)
      >>> print(np.asarray(g.mv(np.array([1., 2., 9., 0., 1., 5.]))))
      [-1.  1.  0. -6. -3.  9.]
    """
    normalized = check_flag(normalized, "normalized")
    keep = jnp.asarray(where)
    if keep.dtype != jnp.bool_ or keep.ndim != 2 or 0 in keep.shape:
        raise ValueError(f"where must be a [Q, L] bool array (True: the entry counts), got "
                         f"{keep.dtype} of shape {keep.shape}")
    Q, L = keep.shape
    dtype = dtype or compute_dtype()
    S = bucket(2 * Q)
    seg = (2 * jnp.arange(Q, dtype=jnp.int32)[:, None] + (~keep).astype(jnp.int32)).reshape(-1)
    kept = jnp.sum(keep, axis=1).astype(dtype)
    counts = jnp.zeros(S, dtype).at[0:2 * Q:2].set(kept).at[1:2 * Q:2].set(L - kept)
    weight = jnp.where(kept > 0, 1 / jnp.maximum(kept, 1), 0) if normalized else jnp.ones(Q, dtype)
    edge_weight = jnp.zeros(S, dtype).at[0:2 * Q:2].set(weight.astype(dtype))
    return ListGraph(seg=seg, counts=counts, edge_weight=edge_weight, group_seg=None,
                     group_query=None, group_counts=None, num_segments=S, num_group_segments=0,
                     lists=(int(Q), int(L)))
