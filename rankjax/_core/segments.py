"""Segment helpers shared by graphs, metrics, RankSVM and RankBoost.

A *segment* is a query (or a (query, label) group): rows carry an int32
segment id in ``0 .. S-1``. Sizes that vary with the data only through the
number of segments are padded to a *bucket* (the next power of two), so that
a new data set with the same number of rows but another number of queries
reuses the compiled program: padded segments hold no row and are inert.
"""
from __future__ import annotations

import jax
import numpy as np
import jax.numpy as jnp
from jax import lax

__all__ = ["bucket", "seg_sum", "row_sums", "block_means", "sandwich", "run_ids", "count_sum",
           "count_to_float", "seg_scan", "expand"]


def bucket(n: int) -> int:
    """Smallest power of two ``>= n`` (and ``>= 1``): the padded size of ``n`` segments.

    Example:
      >>> [bucket(n) for n in (0, 1, 5, 8, 9)]
      [1, 1, 8, 8, 16]
    """
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def padded_size(n):
    """Fold sizes are padded to 1, 2, 4, 8, 16, then four steps per octave
    (20, 24, 28, 32, 40, ...): at most 25 % padding, few distinct shapes.

    Example:
      >>> padded_size([1, 3, 17, 33, 2000]).tolist()
      [1, 4, 20, 40, 2048]
    """
    n = np.maximum(np.asarray(n), 1)
    p2 = 1 << np.ceil(np.log2(n)).astype(int)
    step = np.maximum(p2 // 8, 1)
    return np.where(p2 <= 16, p2, -(-n // step) * step)


def seg_sum(v, seg, num_segments: int):
    """``out[s] = sum_{i: seg_i = s} v_i`` along axis 0 (``jax.ops.segment_sum``)."""
    return jax.ops.segment_sum(v, seg, num_segments=num_segments)


def row_sums(v, seg, num: int, grid=None, axis: int = 0):
    """Per-segment sums of the rows of ``v [m, ...]`` ``[num, ...]`` (``axis=1``: of the
    columns of ``v [p, m]``, ``[p, num]``); one segment (a global graph) as a tree sum,
    accurate in float32 where a scatter-add accumulates :math:`10^{5}` rows in order; with ``grid``
    (each segment's rows, :func:`grid_sums`) by gathers."""
    if grid is not None:
        return grid_sums(v, grid, axis)
    if axis == 1:
        return row_sums(v.T, seg, num).T
    return jnp.sum(v, axis=0, keepdims=True) if num == 1 else seg_sum(v, seg, num)


def grid_sums(v, grid, axis: int = 0):
    """Per-segment sums along ``axis`` (0 or 1) of ``v`` (``[m, ...]``: ``[num, ...]``;
    ``[p, m]``: ``[p, num]``) from a padded grid ``[num, T]`` of each segment's indices
    (``m`` pads): gathers and one sum that XLA fuses, where a scatter-add is a loop over the
    rows on the CPU (half its time on a kernel matrix's query sums (benchmarks/design_measurements.md §8)).
    ``axis=1`` reads a column-major matrix (a LAPACK result, transposed) in its order.

    Example:
      >>> print(grid_sums(jnp.arange(6.).reshape(3, 2), jnp.array([[0, 2], [1, 3]])))
      [[4. 6.]
       [2. 3.]]
    """
    m = v.shape[axis]
    if axis == 1:
        return jnp.sum(jnp.where(grid < m, v[:, jnp.minimum(grid, m - 1)], 0), axis=2)
    take = v[jnp.minimum(grid, m - 1)]                        # [num, T, ...]
    return jnp.sum(jnp.where(expand(grid < m, take), take, 0), axis=1)


def block_means(K, seg, num: int, n, grid=None):
    """``(M [num, m], B [num, num])``: the segment means of the columns of ``K [m, m]``
    (``n [num]`` the segment sizes) and of ``M``'s rows, by :func:`row_sums`. One spelling
    for :func:`sandwich` and :func:`~rankjax.solvers.holdout.kernel_root_product`, so that XLA
    forms them once in a program that needs both."""
    inv = 1 / jnp.maximum(n, 1)[:, None]
    M = row_sums(K, seg, num, grid) * inv
    return M, row_sums(M.T, seg, num, grid) * inv


def sandwich(K, seg, num: int, en, n, grid=None):
    r"""``S K S`` ``[m, m]`` of a symmetric ``K [m, m]`` for the per-segment root
    :math:`S = \sqrt{e_c n_c} (I - 1 1^T / n_c)` (``en [num]`` = ``e_c n_c``, ``n [num]`` the
    segment sizes), by double centring in one pass over ``K``: with the segment means of
    ``K``'s columns ``M = [num, m]`` and of ``M``'s rows ``B [num, num]``,
    ``(S K S)_ij = s_i s_j (K_ij - M_{c(i) j} - M_{c(j) i} + B_{c(i) c(j)})``. Exactly
    symmetric when ``K`` is. Applying the root twice costs two passes, a transpose of
    ``S K`` and a symmetrising copy (benchmarks/REPORT.md §8).
    ``grid``: the segments' rows for :func:`row_sums`.

    Example:
      >>> seg = jnp.array([0, 0, 1]); n = jnp.array([2., 1.])
      >>> print(sandwich(jnp.eye(3), seg, 2, n, n))
      [[ 1. -1.  0.]
       [-1.  1.  0.]
       [ 0.  0.  0.]]
    """
    M, B = block_means(K, seg, num, n, grid)
    Ms, s = M[seg], jnp.sqrt(en)[seg]
    return s[:, None] * s[None, :] * (K - (Ms + Ms.T) + ((B + B.T) / 2)[seg][:, seg])


def expand(a, v):
    """Reshapes ``a [m]`` to broadcast against ``v [m, ...]``."""
    return a.reshape(a.shape + (1,) * (v.ndim - a.ndim))


def run_ids(*sorted_keys):
    """Run id (0-based) of every position in lexicographically sorted keys."""
    new = jnp.zeros(sorted_keys[0].shape[0] - 1, bool)
    for k in sorted_keys:
        new = new | (k[1:] != k[:-1])
    return jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(new, dtype=jnp.int32)])


_DIGITS = 6                   # base-256 digits of an exact count without x64: < 2^48
MAX_ROWS_X32 = 1 << 23        # digit sums of 255 * m must fit int32


def count_sum(c, seg, num_segments: int, bits: int = 31):
    r"""Exact per-segment sum of non-negative int32 counts :math:`c < 2^{bits}`.

    Pair counts reach m^2/2, beyond float32's 24-bit mantissa and int32. With x64
    the result is int64 ``[S]``; otherwise ``[S, 6]`` int32 base-256 digits
    (normalised: every digit but the last in ``[0, 256)``), exact for up to :math:`2^{23}`
    rows. Either form is closed under ``+``, ``-`` and small integer multiples
    (exact differences of counts, no cancellation); :func:`count_to_float`
    converts at the end.
    """
    if jax.config.jax_enable_x64:
        return seg_sum(c.astype(jnp.int64), seg, num_segments)
    if c.shape[0] > MAX_ROWS_X32:
        raise ValueError(f"exact pair counts over {c.shape[0]} rows need 64-bit integers: "
                         "enable jax_enable_x64 (jax.config.update('jax_enable_x64', True))")
    n = -(-bits // 8)
    digits = [seg_sum((c >> (8 * d)) & 255, seg, num_segments) for d in range(n)]
    zero = jnp.zeros(num_segments, jnp.int32)
    return _carry(digits + [zero] * (_DIGITS - n))


def _carry(digits):
    for d in range(len(digits) - 1):
        carry = digits[d] >> 8                       # floor division: negative digits too
        digits[d] = digits[d] - (carry << 8)
        digits[d + 1] = digits[d + 1] + carry
    return jnp.stack(digits, -1)


def count_to_float(v, dtype):
    """An exact count of :func:`count_sum` (or a small integer combination of some)
    as ``dtype``, rounded once per digit from the top (relative error ~ 6 ulp)."""
    if v.dtype == jnp.int64:
        return v.astype(dtype)
    digits = _carry([v[..., d] for d in range(v.shape[-1])])
    out = digits[..., -1].astype(dtype)
    for d in range(v.shape[-1] - 2, -1, -1):
        out = out * 256 + digits[..., d].astype(dtype)
    return out


def seg_scan(values, start):
    """Inclusive segmented cumulative sum along axis 0; ``start [l]`` marks the
    first position of every segment (``values`` ``[l, ...]``; ``start`` ``[l]`` or
    ``[l, j]`` for ``j`` independent scans of ``values [l, j, ...]``)."""
    def op(x, y):
        fx, vx = x
        fy, vy = y
        return fx | fy, jnp.where(expand(fy, vy), vy, vx + vy)
    return lax.associative_scan(op, (start, values))[1]
