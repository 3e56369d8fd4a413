r"""The dual system of a query graph on the range of its root (Pahikkala et al. 2009, §3.2:
one eigendecomposition of ``S K S`` answers every λ).

``S`` (:math:`S = \sqrt{e n} (I - 1 1^T / n)` on each query of ``n`` rows and edge weight ``e``)
annihilates the constant vector of every query of positive weight and every row of a query
of weight 0, so ``S K S`` is singular there, and the dual formulas never see those
directions: ``S u = 0`` makes their columns of ``K S U``, :math:`U^T S y` and the coefficients
zero. A Householder reflection per query, :math:`H_q = I - 2 w w^T / (w^T w)` with
:math:`w = 1 / \sqrt{n} + e_r` (``r`` the query's first row; the sign that avoids cancellation,
:math:`w^T w = 2 + 2 / \sqrt{n}`), maps its constant vector onto ``-e_r``; on the ``k = m - q``
rows left (``q`` null directions) ``H S K S H`` is an orthogonally similar ``k x k``
system, and its ``eigh`` costs :math:`(k / m)^3` of the full one (measured: benchmarks/REPORT.md §8).

Since ``S K S 1_q = 0``, :math:`w_q^T G = G[r_q]`, so with :math:`\alpha = 1 / (\sqrt{n} + 1)` (at most
0.41: no entry is amplified) the reduced system is
``M[a, b] = G[a, b] - α_a G[r_a, b] - α_b G[a, r_b] + α_a α_b G[r_a, r_b]``
(gathers of ``G``, no product) and an eigenvector ``v`` of ``M`` lifts to
``u = x - α w_i s_q`` (``x``: ``v`` on the kept rows, zero elsewhere; ``s_q`` the sum
of ``v`` over query ``q``'s kept rows): ``U`` is ``[m, k]``, orthonormal columns. The
sums ``s_q`` read LAPACK's column-major eigenvectors in place, by gathers over a padded
grid of each query's rows (:data:`GRID_SLOTS`), where a segment sum (a loop over the rows
in XLA:CPU) needed a row-major copy first (benchmarks/design_measurements.md §8). (With
:math:`w = 1 / \sqrt{n} - e_r` the coefficients grow for two-row queries, and float32 loses
more of the hold-out at the smallest λ: benchmarks/design_measurements.md §8.)

Example:
  >>> import numpy as np, rankjax as rj
  >>> g = rj.query_graph(np.array([0, 0, 0, 1, 1, 2]))
  >>> range_rows(g, np.float32).keep.tolist()        # the first row of each query goes
  [1, 2, 4]
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .._core.host import device_array, is_concrete
from ..graphs.graph import is_graph
from .._core.linalg import Eigh, raw_eigh
from .._core.segments import row_sums


class RangeRows(NamedTuple):
    r"""The reduction of a query graph's dual system (built on the host, :func:`range_rows`):
    ``keep [k]`` the rows kept, ``first [k]`` the first row of each one's query, ``alpha [k]``
    :math:`1 / (\sqrt{n} + 1)`, ``place [m]`` each row's index in ``keep`` (``k`` for a row not
    kept), ``reflect [m]`` ``α w`` (the reflector's entry times ``α``; 0 on rows of a
    query of weight 0 or of one row), ``seg [k]`` the kept rows' queries and ``members
    [S, T]`` each query's kept rows (indices into ``keep``, ``k`` pads) and ``queries``
    each query's rows (``m`` pads; :func:`~rankjax._core.segments.grid_sums`), each ``None``
    where its grid would hold more than :data:`GRID_SLOTS` slots per row."""

    keep: jax.Array
    first: jax.Array
    alpha: jax.Array
    place: jax.Array
    reflect: jax.Array
    seg: jax.Array
    members: Optional[jax.Array] = None
    queries: Optional[jax.Array] = None


GRID_SLOTS = 3
"""The query sums of the reduction (the lift's sums of the eigenvectors' kept rows, the
double centring's and ``K S U``'s of ``K``) are gathers over a padded ``[S, T]`` grid of
each query's rows (:func:`~rankjax._core.segments.grid_sums`) where that grid has at most this
many slots per row, else segment sums (XLA:CPU: a loop over the rows, which for the
column-major eigenvectors needs a row-major copy first)."""


def range_rows(graph, dtype) -> Optional[RangeRows]:
    """Host: the :class:`RangeRows` of ``graph``, or ``None`` where it has no segment root
    (preference graphs, tie exclusion, the identity), is traced, or no row is left."""
    if not (is_graph(graph, "QueryGraph") and graph.has_root) or not all(
            is_concrete(a) for a in (graph.seg, graph.counts, graph.edge_weight)):
        return None
    seg, num = np.asarray(graph.seg), graph.num_segments          # host numpy: no program
    n = np.asarray(graph.counts, np.float64)
    en = np.asarray(graph.edge_weight, np.float64) * n
    m = seg.shape[0]
    rows = np.arange(m)
    head = np.full(num, m)
    u, at = np.unique(seg, return_index=True)
    head[u] = at
    first = head[seg]
    nq = n[seg]
    live = (en[seg] > 0) & (nq >= 2)
    keep = np.flatnonzero(live & (rows != first))
    if keep.size == 0:
        return None
    root_n = np.sqrt(np.where(live, nq, 1))
    alpha = np.where(live, 1 / (root_n + 1), 0)
    w = np.where(live, 1 / root_n + (rows == first), 0)
    place = np.full(m, keep.size, np.int32)
    place[keep] = np.arange(keep.size)
    kseg = seg[keep]
    return RangeRows(device_array(keep, jnp.int32), device_array(first[keep], jnp.int32),
                     device_array(alpha[keep], dtype), device_array(place),
                     device_array(alpha * w, dtype), device_array(kseg, jnp.int32),
                     _grid(kseg, num), _grid(seg, num))


def _grid(seg, num):
    """``[num, T]`` the rows of each segment of ``seg [n]`` (host numpy), padded with ``n``
    to the longest, or ``None`` where that is more than :data:`GRID_SLOTS` slots per row."""
    sizes = np.bincount(seg, minlength=num)
    if num * sizes.max() > GRID_SLOTS * seg.size:
        return None
    order = np.argsort(seg, kind="stable")
    slot = np.arange(seg.size) - np.r_[0, np.cumsum(sizes)][seg[order]]
    grid = np.full((num, sizes.max()), seg.size, np.int32)
    grid[seg[order], slot] = order
    return device_array(grid)


def reduced_system(G, rows: RangeRows):
    """``M [k, k]``, ``H S K S H`` on the kept rows, from gathers of ``G = S K S`` (module
    docstring)."""
    a = rows.alpha
    A = G[rows.keep] - a[:, None] * G[rows.first]                     # [k, m]
    return A[:, rows.keep] - A[:, rows.first] * a[None, :]             # [k, k]


def reduced_eigh(G, rows: RangeRows, graph):
    """``(Eigh, smallest, largest)`` of ``G = S K S`` ``[m, m]`` on the range of ``S``:
    ``values [k]`` (clipped at 0), ``vectors [m, k]`` (module docstring); the raw extreme
    eigenvalues as :func:`~rankjax._core.linalg.eigh_psd_checked` gives them."""
    vals, V = raw_eigh(reduced_system(G, rows))
    k = V.shape[0]
    x = jnp.where((rows.place < k)[:, None], V[jnp.minimum(rows.place, k - 1)], 0)
    # [S, k]; by the grid, LAPACK's column-major V is read in its order, no row loop
    s = row_sums(V.T, rows.seg, graph.num_segments, rows.members, axis=1).T
    U = x - rows.reflect[:, None] * s[graph.seg]
    return Eigh(jnp.maximum(vals, 0), U), vals[0], jnp.max(jnp.abs(vals))
