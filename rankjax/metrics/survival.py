r"""Concordance of risk scores with censored survival times (docs/math.md §6): Harrell's C and
Uno's inverse-probability-of-censoring-weighted C, by sorting (:math:`O(m \log^2 m)` time,
O(m) memory; no pair is enumerated), under ``jit``.

A pair of patients ``(i, j)`` is *comparable* when ``i``'s event is observed and ``i`` left
the study first: :math:`t_i < t_j`, or :math:`t_i = t_j` with ``j`` censored (as
scikit-survival's ``concordance_index_censored`` counts them; two events at one time are not
comparable). It is *concordant* when ``i``, who failed first, has the higher risk; a tie in
risk counts ½:

.. math::

   C = \frac{\sum_{(i, j)} w_i \,[\,r_i > r_j\,] + \tfrac12 w_i \,[\,r_i = r_j\,]}
            {\sum_{(i, j)} w_i}

over the comparable pairs, with :math:`w_i = 1` (Harrell et al. 1982) or
:math:`w_i = \hat G(t_i)^{-2}` and :math:`t_i < \tau` (Uno et al. 2011; :math:`\hat G` the
Kaplan-Meier estimate of the censoring distribution of the training data). With ``strata``
only patients of one stratum are compared (the sums run over every stratum's pairs).
Risk ties are exact equalities (scikit-survival counts risks within 1e-8 as tied).
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.checks import as_float_array
from .._core.host import is_concrete
from .._core.queries import resolve_segments
from .._core.segments import run_ids

__all__ = ["harrell_c", "uno_c", "censoring_km"]


def _survival_inputs(risk, time, event, name="time"):
    r = as_float_array(risk, "risk", finite=True)
    if r.ndim != 1 or r.shape[0] == 0:
        raise ValueError(f"risk must be a non-empty 1-D array [m], got shape {r.shape}")
    t = as_float_array(time, name, finite=True)
    if t.shape != r.shape:
        raise ValueError(f"{name} must have the shape of risk {r.shape}, got {t.shape}")
    e = jnp.asarray(event)
    if e.shape != r.shape:
        raise ValueError(f"event must have the shape of risk {r.shape}, got {e.shape}")
    if e.dtype != jnp.bool_:
        if is_concrete(e) and not bool(jnp.all((e == 0) | (e == 1))):
            raise ValueError("event must be bool (True: the event was observed) or 0/1")
        e = e != 0
    dtype = jnp.result_type(r.dtype, t.dtype)
    return r.astype(dtype), t.astype(dtype), e


def harrell_c(risk, time, event, strata=None, *, num_strata: Optional[int] = None):
    r"""Harrell's concordance index of risk scores with censored times: the share of
    comparable pairs (module docstring) in which the patient who failed first has the
    higher ``risk`` (ties ½); equal to scikit-survival's ``concordance_index_censored(event,
    time, risk)[0]`` (its risk ties aside: exact here, within 1e-8 there).

    Args:
      risk: ``[m]`` predicted risk (higher: the event sooner; a RankRLS model trained on
        survival pairs predicts it).
      time: ``[m]`` the time of the event or of censoring.
      event: ``[m]`` bool (or 0/1), True where the event was observed.
      strata: ``[m]`` stratum ids, or ``None``: only patients of one stratum are compared.
      num_strata: as ``num_queries`` of :func:`rankjax.pairwise_error` (under ``jit``).

    Returns:
      The index, a scalar; NaN when no pair is comparable.

    Example:
      >>> print(f"{float(harrell_c([3., 2., 1., 0.], [1., 2., 3., 4.], [1, 0, 1, 0])):.4f}")
      1.0000
      >>> print(f"{float(harrell_c([0., 2., 1.], [1., 2., 3.], [1, 1, 0])):.4f}")
      0.3333
    """
    r, t, e = _survival_inputs(risk, time, event)
    seg, S, _ = resolve_segments(strata, num_strata, r.shape[0], "strata")
    return _concordance(r, t, e, e.astype(r.dtype), seg)


def uno_c(risk, time, event, train_time, train_event, *, tau: Optional[float] = None):
    r"""Uno's C: Harrell's pairs weighted by :math:`\hat G(t_i)^{-2}`, the inverse squared
    Kaplan-Meier estimate of the censoring distribution of the *training* data
    (``rankjax.metrics.survival.censoring_km``) at the earlier time, over the pairs whose
    earlier time lies before ``tau``; equal to scikit-survival's ``concordance_index_ipcw(train, test, risk,
    tau)[0]``. Unlike Harrell's C its limit does not depend on the censoring.

    Args:
      risk, time, event: ``[m]`` of the patients scored (as :func:`harrell_c`).
      train_time, train_event: ``[m_train]`` of the training data (the censoring estimate).
      tau: only pairs whose earlier time is ``< tau`` (``None``: every pair); where the
        censoring estimate reaches 0 before a test event, the weight is undefined: an error
        eagerly (choose ``tau`` below the last training time), NaN under ``jit``.

    Example:
      >>> tr_t, tr_e = np.array([1., 2., 3., 4., 5.]), np.array([1, 0, 1, 0, 1])
      >>> print(f"{float(uno_c([2., 1., 0.], [1., 2., 3.], [1, 1, 0], tr_t, tr_e)):.4f}")
      1.0000
    """
    r, t, e = _survival_inputs(risk, time, event)
    tt, te = _survival_inputs(jnp.zeros(np.shape(train_time)), train_time, train_event,
                              "train_time")[1:]
    if tau is not None and (np.ndim(tau) != 0 or (is_concrete(tau) and not np.isfinite(tau))):
        raise ValueError(f"tau must be a finite scalar or None, got {tau!r}")
    G = censoring_km(tt, te, t)
    scored = e if tau is None else e & (t < tau)
    beyond = t > jnp.max(tt)                 # past the estimate: defined only where it is 0
    G = jnp.where(beyond, jnp.where(G > 0, jnp.nan, 0), G)
    if is_concrete(G) and bool(jnp.any(scored & ~(G > 0))):
        raise ValueError("the censoring distribution of the training data is 0 or unknown at "
                         "a test event time (at or past the last training time): choose tau "
                         "below the last training time")
    w = jnp.where(scored, 1 / jnp.where(G > 0, G, jnp.nan) ** 2, 0)
    seg = jnp.zeros(r.shape[0], jnp.int32)
    return _concordance(r, t, e, w.astype(r.dtype), seg)


def censoring_km(train_time, train_event, at):
    r""":math:`\hat G(s)` at every ``at`` ``[k]``: the Kaplan-Meier estimate of the probability
    of remaining uncensored past ``s``, from the training data with the roles of event and
    censoring swapped (a patient whose event was observed is censored for this estimate);
    at a time holding both, the events leave first (the patients at risk of censoring at
    ``s`` are those with :math:`t \ge s` less the events at ``s``), as scikit-survival's
    ``CensoringDistributionEstimator``. Right-continuous: :math:`\hat G(s)` includes the
    censorings at ``s``.

    Example:
      >>> print(np.asarray(censoring_km(np.array([1., 2., 2., 3.]), np.array([1, 0, 1, 0]),
      ...                               np.array([0.5, 2., 3.]))).round(4).tolist())
      [1.0, 0.5, 0.0]
    """
    t = jnp.asarray(train_time)
    c = ~jnp.asarray(train_event).astype(bool)
    return _km_at(t, c.astype(t.dtype), jnp.asarray(at, t.dtype))


@jax.jit
def _km_at(t, c, at):
    m = t.shape[0]
    order = jnp.argsort(t)
    ts, cs = t[order], c[order]
    ones = jnp.ones(m, t.dtype)
    rid = run_ids(ts)                                     # runs of equal times, sorted
    cens = jax.ops.segment_sum(cs, rid, num_segments=m)
    size = jax.ops.segment_sum(ones, rid, num_segments=m)
    first = jax.ops.segment_min(jnp.arange(m), rid, num_segments=m)
    at_risk = jnp.where(size > 0, m - first, 0).astype(t.dtype)   # t >= s
    events = size - cens
    factor = jnp.where(at_risk - events > 0, 1 - cens / jnp.maximum(at_risk - events, 1), 1.0)
    factor = jnp.where(size > 0, factor, 1.0)
    surv = jnp.cumprod(factor)                            # after each run of times
    run_time = jax.ops.segment_max(ts, rid, num_segments=m)
    k = jnp.searchsorted(jnp.where(size > 0, run_time, jnp.inf), at, side="right")
    return jnp.where(k > 0, surv[jnp.maximum(k - 1, 0)], 1.0)


@jax.jit
def _concordance(r, t, e, w, seg):
    """C of the module docstring: weights ``w`` ``[m]`` on the earlier (event) patient, 0
    for a censored one; only pairs of one segment."""
    m = r.shape[0]
    cens = (~e).astype(jnp.int32)
    idx = jnp.arange(m, dtype=jnp.int32)
    # dense rank of the risk within its segment: values of two segments never interleave
    s_seg, s_r, s_idx = lax.sort((seg, r, idx), num_keys=2)
    g = jnp.zeros(m, jnp.int32).at[s_idx].set(run_ids(s_seg, s_r))
    # the key order: (segment, time, censored); comparable: same segment, larger key
    _, _, _, seq_g, seq_w, seq_i = lax.sort((seg, t, cens, g, w, idx), num_keys=4)
    concordant = _weighted_inversions(seq_g, seq_w)
    k_seg, k_t, k_c = seg[seq_i], t[seq_i], cens[seq_i]
    key_run = run_ids(k_seg, k_t, k_c)
    seg_run = run_ids(k_seg)
    last_of = lambda run: jax.ops.segment_max(idx, run, num_segments=m)[run]   # noqa: E731
    later = (last_of(seg_run) - last_of(key_run)).astype(w.dtype)   # same segment, larger key
    comparable = jnp.sum(seq_w * later)
    # risk ties: same segment and risk (g), a larger key
    _, _, _, _, tw, ti = lax.sort((g, t, cens, seg, w, idx), num_keys=4)
    tg, tt_, tc = g[ti], t[ti], cens[ti]
    tied = (last_of(run_ids(tg)) - last_of(run_ids(tg, tt_, tc))).astype(w.dtype)
    ties = jnp.sum(tw * tied)
    return jnp.where(comparable > 0, (concordant + ties / 2) / jnp.where(comparable > 0,
                                                                        comparable, 1), jnp.nan)


def _weighted_inversions(vals, w):
    r""":math:`\sum_{a < b,\ v_a > v_b} w_a` over the positions of ``vals`` ``[m]`` (int): a
    bottom-up merge sort, each level one sort of every block and a cumulative sum of the left
    halves' weights (:math:`O(m \log^2 m)`)."""
    m = vals.shape[0]
    P = 1 << max(1, (m - 1).bit_length())
    arr = jnp.concatenate([vals, jnp.full(P - m, jnp.iinfo(jnp.int32).max, jnp.int32)])
    wt = jnp.concatenate([w, jnp.zeros(P - m, w.dtype)])
    out = jnp.zeros((), w.dtype)
    b = 1
    while b < P:
        blocks, wb = arr.reshape(P // (2 * b), 2 * b), wt.reshape(P // (2 * b), 2 * b)
        tag = jnp.broadcast_to((jnp.arange(2 * b) >= b).astype(jnp.int32), blocks.shape)
        v, tg, ww = lax.sort((blocks, tag, wb), dimension=1, num_keys=2)
        left_w = ww * (1 - tg)
        total = jnp.sum(left_w, axis=1, keepdims=True)
        upto = jnp.cumsum(left_w, axis=1)                 # left weight of values <= v
        out = out + jnp.sum(jnp.where(tg == 1, total - upto, 0))
        arr, wt = v.reshape(-1), ww.reshape(-1)
        b *= 2
    return out


harrell_c.higher_is_better = True
uno_c.higher_is_better = True
