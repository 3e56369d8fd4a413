r"""Censored survival times as a preference graph that is never enumerated (Raykar et al. 2007;
Pahikkala et al. 2009 §2.4 for the preference costs): patient ``i`` is ranked above ``j`` (a
higher risk) for every *comparable* pair, ``i``'s event observed and :math:`t_i < t_j`, or
:math:`t_i = t_j` with ``j`` censored (the pairs of :func:`rankjax.harrell_c`), within a stratum.

The loss is :math:`\sum_{(i, j)} w\,(f_i - f_j - z_{ij})^2` with a unit margin
:math:`z_{ij} = 1` (the default) or the difference of log-times
:math:`z_{ij} = \log t_j - \log t_i` (``margin="log_time"``): a quadratic form in the
Laplacian :math:`L = w \sum_{(i, j)} (e_i - e_j)(e_i - e_j)^T` with right-hand side
:math:`b = w \sum_{(i, j)} z_{ij} (e_i - e_j)`, both margins' :math:`b` and
:math:`\sum z_{ij}^2` computed once on the host by the same prefix sums. In the order of
(stratum, time, censored) the pairs of a patient are a run of the patients after it (when its
event is observed) and the observed events before it, so

.. math::

   (L v)_k = w\big(\delta_k (A_k v_k - \textstyle\sum_{j \succ k} v_j)
            + B_k v_k - \sum_{i \prec k} \delta_i v_i\big)

with :math:`A_k` the patients after ``k``'s run of equal keys and :math:`B_k` the events before
it: one sort on the host (:math:`O(m \log m)`, once), two prefix sums a product
(:math:`O(m)`), never the :math:`O(m^2)` pairs. ``normalized`` (the default) takes
:math:`w = 1 / \#\text{pairs}`, so one λ grid serves any number of patients.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .._core.checks import as_float_array, check_flag, require_concrete
from .._core.host import device_array
from .._core.memory import compute_dtype
from .._core.products import mm
from .._core.queries import segment_ids
from .._core.segments import expand
from .._core.types import saveable
from .graph import GRAPH_KINDS, GraphBase, graph_pytree

__all__ = ["SurvivalGraph", "survival_graph"]


@graph_pytree(["order", "inverse", "event", "later", "earlier", "run_first", "run_last",
               "seg_first", "seg_last", "weight", "target", "target_sq", "time", "event_rows",
               "strata"],
              ["num_rows"])
@saveable
class SurvivalGraph(GraphBase):
    r"""The comparable pairs of censored survival times (module docstring; build with
    :func:`survival_graph`). Sorted-order fields: ``order`` ``[m]`` the rows by (stratum,
    time, censored), ``inverse`` its inverse, ``event`` ``[m]`` 0/1, ``later``/``earlier``
    ``[m]`` the pair counts :math:`A`, :math:`B`, ``run_first``/``run_last`` the bounds of each
    row's run of equal keys, ``seg_first``/``seg_last`` of its stratum; ``weight`` :math:`w`;
    ``target`` ``[m]`` :math:`\sum_{(i, j)} z_{ij} (e_i - e_j)` in row order and
    ``target_sq`` :math:`\sum z_{ij}^2` (the margins');
    ``time``, ``event_rows``, ``strata`` ``[m]`` in row order (the criterion's). Only the
    number of rows is static: data of the same size compile nothing new."""

    order: jnp.ndarray
    inverse: jnp.ndarray
    event: jnp.ndarray
    later: jnp.ndarray
    earlier: jnp.ndarray
    run_first: jnp.ndarray
    run_last: jnp.ndarray
    seg_first: jnp.ndarray
    seg_last: jnp.ndarray
    weight: jnp.ndarray
    target: jnp.ndarray
    target_sq: jnp.ndarray
    time: jnp.ndarray
    event_rows: jnp.ndarray
    strata: jnp.ndarray
    num_rows: int

    takes_labels = False
    has_root = False
    splittable = False
    unsplittable_hint = ("; to hold out patients, retrain on each fold's own survival_graph "
                         "(rankjax.estimators.SurvivalRankRLSCV does)")

    @property
    def num_pairs(self) -> int:
        """The comparable pairs (a host reduction: outside ``jit``)."""
        return int(np.sum(np.asarray(self.event, np.float64) * np.asarray(self.later, np.float64)))

    def check_labels(self, y, name: str = "y"):
        if y is not None:
            raise ValueError(f"{name} must be None with a survival graph: every comparable "
                             "pair's target is a unit margin (the graph's times and events)")
        return None

    def _sums(self, vs, first, last):
        """``[m, ...]`` the sums of ``vs`` (sorted rows) over ``[first, last)`` per row."""
        z = jnp.concatenate([jnp.zeros((1,) + vs.shape[1:], vs.dtype), jnp.cumsum(vs, axis=0)])
        return z[last] - z[first]

    def mv(self, v):
        dt = v.dtype
        vs = v[self.order]
        d, A, B = (expand(a.astype(dt), vs) for a in (self.event, self.later, self.earlier))
        after = self._sums(vs, self.run_last + 1, self.seg_last + 1)
        before = self._sums(d * vs, self.seg_first, self.run_first)
        out = d * (A * vs - after) + (B * vs - before)
        return self.weight.astype(dt) * out[self.inverse]

    def rhs(self, y, dtype):
        return self.weight.astype(dtype) * self.target.astype(dtype)

    def centre(self, X):
        return X - jnp.mean(X, axis=0)

    def loss(self, f, y=None):
        r""":math:`\sum_{(i, j)} w (f_i - f_j - z_{ij})^2` of scores ``f`` ``[m]``."""
        return (mm(f, self.mv(f)) - 2 * mm(f, self.rhs(None, f.dtype))
                + self.weight.astype(f.dtype) * self.target_sq.astype(f.dtype))

    def criterion(self, y, metric="pairwise_error", higher_is_better=None, **kw):
        from ..metrics.survival import harrell_c
        if metric == "pairwise_error":
            return lambda f: 1 - harrell_c(f, self.time, self.event_rows, self.strata,
                                           num_strata=self.num_rows)
        if metric == "loss":
            return lambda f: self.loss(f)
        raise ValueError("with a survival graph, metric must be 'pairwise_error' (1 - "
                         "Harrell's C) or 'loss'")

    def segments(self):
        raise TypeError("a survival graph has no query segments (its pairs cross the rows)")

    def restrict(self, rows, size=None):
        raise TypeError("a survival graph is not restricted to a subset of rows here: build "
                        "survival_graph of those rows' times and events")

    def fold_units(self):
        self.check_splittable("hold-out folds")


GRAPH_KINDS["SurvivalGraph"] = SurvivalGraph       # a graph like the three of graph.py


MARGINS = ("unit", "log_time")
"""The margins of a comparable pair: 1, or the difference of the two log-times."""


def survival_graph(time, event, strata=None, *, normalized: bool = True,
                   margin: str = "unit") -> SurvivalGraph:
    r"""The graph of the comparable pairs of censored survival times (module docstring):
    a RankRLS model on it predicts a risk (higher: the event sooner), scored by
    :func:`rankjax.harrell_c`.

    Args:
      time: ``[m]`` time of the event or of censoring (concrete: sorted on the host).
      event: ``[m]`` bool (or 0/1), True where the event was observed.
      strata: ``[m]`` stratum ids (only patients of one stratum are compared), or ``None``.
      normalized: weight :math:`1 / \#\text{pairs}` (default) or 1 per pair.
      margin: ``"unit"`` (default) or ``"log_time"`` (:math:`\log t_j - \log t_i`, the
        pair's gap on the log scale; times must be > 0). A tied pair (``j`` censored at
        ``i``'s time) has margin 0 under ``"log_time"``.

    Example:
      >>> import numpy as np
      >>> g = survival_graph(np.array([1., 2., 3.]), np.array([1, 1, 0]), normalized=False)
      >>> g.num_pairs, np.asarray(g.mv(np.array([1., 0., 0.]))).tolist()
      (3, [2.0, -1.0, -1.0])
    """
    normalized = check_flag(normalized, "normalized")
    if margin not in MARGINS:
        raise ValueError(f"margin must be one of {MARGINS}, got {margin!r}")
    require_concrete(time, "time", "survival_graph")
    require_concrete(event, "event", "survival_graph")
    t = np.asarray(as_float_array(time, "time", finite=True), np.float64)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"time must be a non-empty 1-D array [m], got shape {t.shape}")
    e = np.asarray(event)
    if e.shape != t.shape:
        raise ValueError(f"event must have the shape of time {t.shape}, got {e.shape}")
    if e.dtype != np.bool_:
        if not np.all((e == 0) | (e == 1)):
            raise ValueError("event must be bool (True: the event was observed) or 0/1")
        e = e != 0
    m = t.size
    s = np.zeros(m, np.int64) if strata is None else segment_ids(strata, "strata").seg
    if s.shape[0] != m:
        raise ValueError(f"strata has {s.shape[0]} rows but time has {m}")
    cens = (~e).astype(np.int64)
    order = np.lexsort((cens, t, s))
    ss, ts, cs, es = s[order], t[order], cens[order], e[order].astype(np.int64)
    pos = np.arange(m)
    new_key = np.r_[True, (ss[1:] != ss[:-1]) | (ts[1:] != ts[:-1]) | (cs[1:] != cs[:-1])]
    new_seg = np.r_[True, ss[1:] != ss[:-1]]
    run_first = np.maximum.accumulate(np.where(new_key, pos, 0))
    seg_first = np.maximum.accumulate(np.where(new_seg, pos, 0))
    run_last = _last(new_key)
    seg_last = _last(new_seg)
    later = seg_last - run_last
    events_before = np.r_[0, np.cumsum(es)]
    earlier = events_before[run_first] - events_before[seg_first]
    pairs = int(np.sum(es * later))
    if pairs == 0:
        raise ValueError("no comparable pair: every observed event is the last time of its "
                         "stratum (or no event is observed)")
    if margin == "log_time" and np.any(t <= 0):
        raise ValueError("margin='log_time' needs every time > 0")
    a = np.log(ts) if margin == "log_time" else np.zeros(m)     # unit: z = 1 + a_j - a_i, a = 0
    unit = 1.0 if margin == "unit" else 0.0
    sums = lambda v, first, last: np.r_[0, np.cumsum(v)][last] - np.r_[0, np.cumsum(v)][first]  # noqa: E731
    after, after_sq = sums(a, run_last + 1, seg_last + 1), sums(a * a, run_last + 1, seg_last + 1)
    before = sums(es * a, seg_first, run_first)
    # as the upper patient: z = unit + a_j - a_k over the later ones; as the lower: over the
    # earlier events
    up = later * (unit - a) + after
    down = earlier * (unit + a) - before
    target = np.empty(m)
    target[order] = es * up - down
    target_sq = float(np.sum(es * (later * (unit - a) ** 2 + 2 * (unit - a) * after + after_sq)))
    dtype = compute_dtype()
    i32 = lambda a: device_array(a.astype(np.int32))               # noqa: E731
    return SurvivalGraph(
        order=i32(order), inverse=i32(np.argsort(order)), event=device_array(es.astype(dtype)),
        later=device_array(later.astype(dtype)), earlier=device_array(earlier.astype(dtype)),
        run_first=i32(run_first), run_last=i32(run_last), seg_first=i32(seg_first),
        seg_last=i32(seg_last), weight=device_array(np.asarray(1 / pairs if normalized else 1.0,
                                                               dtype)),
        target=device_array(target.astype(dtype)), target_sq=device_array(np.asarray(target_sq,
                                                                                     dtype)),
        time=device_array(t.astype(dtype)), event_rows=device_array(e), strata=i32(s),
        num_rows=m)


def _last(new):
    """``[m]`` each sorted position's last position of its run (``new`` marks run starts)."""
    m = new.size
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:] - 1, m - 1]
    return ends[np.cumsum(new) - 1]
