"""Leave-query-out folds of a sharded problem: every device's own queries, stacked by padded
fold size (Pahikkala et al. 2009, §3.3, eq. 33-34; no fold leaves its device)."""
from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

from .._core.segments import padded_size
from ..graphs.folds import build_folds, positions
from ..graphs.graph import QueryGraph
from .hosts import agree_across_processes, local_rows, put_rows


class _Buckets(NamedTuple):
    index: tuple
    mask: tuple
    position: jax.Array


def stacked_folds(data):
    """Leave-query-out folds of every device's local graph, stacked ``[D, F_b, P_b]`` per
    padded fold size (sizes agreed between processes)."""
    width = data.rows.shape[1]
    seg_local = local_rows(data.graph.seg, 0).reshape(-1, width)
    sizes = sorted(set(int(s) for s in padded_size(np.arange(1, width + 1))))
    per_dev = []
    for seg in seg_local:
        f = build_folds(_host_graph(seg, data.graph.num_segments), None, 0)
        per_dev.append({int(i.shape[1]): (np.asarray(i), np.asarray(k))
                        for i, k in zip(f.index, f.mask)})
    counts = [max([d[s][0].shape[0] if s in d else 0 for d in per_dev]) for s in sizes]
    counts = agree_across_processes(*counts)
    index, mask = [], []
    for s, F in zip(sizes, counts):
        if F == 0:
            continue
        I = np.zeros((len(per_dev), F, s), np.int32)
        M = np.zeros((len(per_dev), F, s), bool)
        for d, dev in enumerate(per_dev):
            if s in dev:
                i, k = dev[s]
                I[d, :i.shape[0]], M[d, :i.shape[0]] = i, k
        index.append(I)
        mask.append(M)
    pos = np.stack([positions([i[d] for i in index], [k[d] for k in mask], width)
                    for d in range(len(per_dev))])
    put = lambda a: put_rows(a, data.mesh, P(data.axis))     # noqa: E731
    return _Buckets(tuple(map(put, index)), tuple(map(put, mask)), put(pos))


def _host_graph(seg, S):
    """A stand-in query graph on host segment ids (only its units are used by build_folds)."""
    return QueryGraph(seg=seg, counts=None, edge_weight=None, group_seg=None, group_query=None,
                      group_counts=None, num_segments=S, num_group_segments=0)

