r"""A graph's blocks of one hold-out fold of whole queries (Pahikkala et al. 2009, §3.3): the
root ``B`` of ``L_UU`` (:math:`B B^T = L_{UU}`), :math:`B^T V` and ``L_UU v`` for a padded fold
``idx [P]`` (``mask`` False on padding), which the hold-outs and the row-block passes apply
to every fold. A query graph with a segment root applies them by segment sums within the
fold, O(P) per column; the dense ``P x P`` root serves the rest.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._core.linalg import psd_root
from .._core.products import HI
from .._core.segments import expand

__all__ = ["FoldBlocks", "QueryFoldBlocks"]


class FoldBlocks:
    """The dense defaults, from ``block_root`` (each graph defines it)."""

    def root_rows(self, idx, mask, V):
        r""":math:`B^T V` (``V [P, ...]``) for a padded fold ``idx [P]`` of whole queries, :math:`B B^T =
        L_{UU}` (``block_root``); padding rows of ``V`` count as zero."""
        B = self.block_root(idx, mask, V.dtype)
        return jnp.einsum("pq,p...->q...", B, V, precision=HI)

    def block_mv(self, idx, mask, v):
        """``L_UU v`` (``v [P, ...]``) for a padded fold of whole queries (zero on padding)."""
        B = self.block_root(idx, mask, v.dtype)
        return jnp.einsum("pq,q...->p...", B, self.root_rows(idx, mask, v), precision=HI)


class QueryFoldBlocks:
    """A :class:`~rankjax.QueryGraph`'s fold blocks (its fields ``seg``, ``counts``,
    ``edge_weight`` and the tie groups)."""

    def fold_order(self):
        """``[m]`` host key that orders the rows within a fold so that every query, and every
        (query, label) group of a tie-excluded graph, is contiguous (the groups are numbered
        in query order): :meth:`_fold_sums` counts segments by their boundaries."""
        return np.asarray(self.seg if self.group_seg is None else self.group_seg)

    def block_root(self, idx, mask, dtype):
        r"""``B`` with :math:`B B^T = L_{UU}` for a padded fold ``idx [P]`` of whole queries."""
        P = idx.shape[0]
        mm = (mask[:, None] & mask[None, :]).astype(dtype)
        eye = jnp.eye(P, dtype=dtype)
        seg = self.seg[idx]
        n, e = self.counts.astype(dtype)[seg], self.edge_weight.astype(dtype)[seg]
        same = (seg[:, None] == seg[None, :]).astype(dtype)
        if self.has_root:                              # S_UU = sqrt(e n) (I - same / n)
            return mm * jnp.sqrt(e * n)[:, None] * (eye - same / jnp.maximum(n, 1)[:, None])
        grp = self.group_seg[idx]
        ng = self.group_counts.astype(dtype)[grp]
        sameg = (grp[:, None] == grp[None, :]).astype(dtype)
        return psd_root(mm * (e[:, None] * (eye * (n - ng)[:, None] - same + sameg)))[0]

    def _fold_sums(self, seg, idx, v):
        """``[P, ...]``: every row's sum of ``v`` over its segment within the fold (whole
        segments: their sum over the fold is their sum). The rows of a segment are
        contiguous in a fold (:meth:`fold_order`), so the fold's own segment ids count the
        boundaries: O(P), no ``P x P`` matrix, no sort."""
        s = seg[idx]
        local = jnp.concatenate([jnp.zeros(1, jnp.int32),
                                 jnp.cumsum((s[1:] != s[:-1]).astype(jnp.int32))])
        return jax.ops.segment_sum(v, local, num_segments=idx.shape[0])[local]

    def root_rows(self, idx, mask, V):
        r""":math:`B^T V` of the fold: with a segment root, :math:`\sqrt{e n} (V - mean)` per query, O(P)
        per column (the dense ``P x P`` root of ``block_root`` otherwise)."""
        if not self.has_root:
            return FoldBlocks.root_rows(self, idx, mask, V)
        dt = V.dtype
        mf = expand(mask.astype(dt), V)
        V = V * mf
        seg = self.seg[idx]
        n = self.counts.astype(dt)[seg]
        scale = jnp.sqrt(self.edge_weight.astype(dt)[seg] * n)
        mean = self._fold_sums(self.seg, idx, V) / expand(jnp.maximum(n, 1), V)
        return expand(scale, V) * (V - mean) * mf

    def block_mv(self, idx, mask, v):
        """``L_UU v`` of the fold from its segment sums, O(P) per column, ties excluded too."""
        dt = v.dtype
        mf = expand(mask.astype(dt), v)
        v = v * mf
        e, n = self.edge_weight.astype(dt), self.counts.astype(dt)
        seg = self.seg[idx]
        out = expand(e[seg] * n[seg], v) * v - expand(e[seg], v) * self._fold_sums(self.seg, idx, v)
        if self.group_seg is not None:
            g = self.group_seg[idx]
            eg = e[self.group_query][g]
            out = out - (expand(eg * self.group_counts.astype(dt)[g], v) * v
                         - expand(eg, v) * self._fold_sums(self.group_seg, idx, v))
        return out * mf
