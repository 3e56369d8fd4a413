"""Query ids on the host: arbitrary ids remapped to dense segment ids (:func:`segment_ids`,
:class:`Segments`), and the segment ids of the metric-style functions, which may take
segment ids already made, traced (:func:`resolve_segments`)."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .checks import is_int
from .finite import VALIDATIONS, value_range
from .host import device_array, is_concrete
from .segments import bucket
from .types import saveable


@saveable
class Segments(NamedTuple):
    """Query ids remapped to dense segment ids.

    Attributes:
      seg: ``[m]`` int32 segment id of every row, in ``0 .. num_queries - 1``.
      num_queries: number of distinct query ids (a static Python int).
      qids: ``[num_queries]`` the original query id of each segment (sorted).
    """

    seg: np.ndarray
    num_queries: int
    qids: np.ndarray


def segment_ids(qid, name: str = "qid") -> Segments:
    """Remaps arbitrary query ids (unsorted allowed) to segment ids ``0, 1, ..., Q-1``.

    Runs on the host (numpy), outside ``jit``. Segment ``c`` is the ``c``-th
    smallest query id. Integers, strings and other hashable objects (e.g. a pandas
    categorical) are accepted; floats are not (a fractional id is ambiguous).

    Args:
      qid: ``[m]`` query id of every row.

    Returns:
      :class:`~rankjax.Segments` ``(seg, num_queries, qids)``.

    Raises:
      TypeError: ``qid`` holds floats, booleans or other values that are not ids.
      ValueError: ``qid`` is not 1-D or is empty.

    Example:
      >>> s = segment_ids([7, 3, 7, 9])
      >>> s.seg.tolist(), s.num_queries, s.qids.tolist()
      ([1, 0, 1, 2], 3, [3, 7, 9])

    A :class:`~rankjax.Segments` is already remapped and is returned as it is, so a caller that
    remapped once can pass it wherever query ids are taken.
    """
    if isinstance(qid, Segments):
        return qid
    VALIDATIONS[name] += 1
    if not is_concrete(qid):
        raise TypeError(f"{name} must be concrete (remap query ids outside jit)")
    q = np.asarray(qid)
    if q.dtype.kind not in "iuUSO":
        raise TypeError(f"{name} must be an integer (or string / categorical) array, got dtype "
                        f"{q.dtype}; cast it with .astype(int) if its values are whole numbers")
    if q.ndim != 1:
        raise ValueError(f"{name} must be 1-D [m], got shape {q.shape}")
    if q.size == 0:
        raise ValueError(f"{name} is empty")
    if q.dtype.kind == "O" and any(isinstance(v, (float, np.floating)) for v in set(q.tolist())):
        raise TypeError(f"{name} holds floating-point ids; cast them to int or str")
    try:
        qids, seg = np.unique(q, return_inverse=True)
    except TypeError:                           # object ids of mixed, unorderable types
        qids, seg = np.unique(np.array([repr(v) for v in q.tolist()]), return_inverse=True)
    return Segments(seg.astype(np.int32).reshape(-1), int(qids.size), qids)


def resolve_segments(qid, num_queries, m: int, name: str = "qid"):
    """Segment ids for metric-style functions.

    With ``num_queries=None`` the ids are remapped on the host (any integers);
    otherwise ``qid`` must already be segment ids in ``0 .. num_queries - 1``
    (checked when concrete) and may be traced. The returned number of segments
    is padded to a power of two (empty segments are inert), so the compiled
    metric does not depend on the exact number of queries.
    """
    if qid is None:
        # the barrier keeps XLA from constant-folding segment sums over a constant id array
        return jax.lax.optimization_barrier(jnp.zeros((m,), jnp.int32)), 1, 1
    if num_queries is None or isinstance(qid, Segments):
        s = segment_ids(qid, name)
        if s.seg.shape[0] != m:
            raise ValueError(f"{name} has {s.seg.shape[0]} rows but {m} were expected")
        return device_array(s.seg), bucket(s.num_queries), s.num_queries
    if not is_int(num_queries) or num_queries < 1:
        raise TypeError("num_queries must be a positive Python int (static)")
    dtype = qid.dtype if hasattr(qid, "dtype") else np.asarray(qid).dtype
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"{name} must be an integer array, got dtype {dtype}")
    if np.ndim(qid) != 1 or np.shape(qid)[0] != m:
        raise ValueError(f"{name} must have shape [{m}], got {np.shape(qid)}")
    if is_concrete(qid) and np.size(qid):
        lo, hi = value_range(qid)
        if lo < 0 or hi >= num_queries:
            raise ValueError(f"{name} must hold segment ids in [0, {num_queries}) when "
                             "num_queries is given; pass num_queries=None to remap raw ids")
        return device_array(qid, jnp.int32), bucket(num_queries), int(num_queries)
    # traced ids cannot raise: one id outside [0, num_queries) empties every query, so
    # the result is NaN (no valid query) instead of silently dropping rows
    seg = jnp.asarray(qid, jnp.int32)
    seg = jnp.where(jnp.any((seg < 0) | (seg >= num_queries)), bucket(num_queries), seg)
    return seg, bucket(num_queries), int(num_queries)
