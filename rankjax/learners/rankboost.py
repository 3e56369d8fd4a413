"""RankBoost with thresholded-feature weak rankers (docs/math.md; Freund, Iyer,
Schapire & Singer 2003; the baseline of Pahikkala et al. 2007).

Crucial pairs are those of one query with ``y_i > y_j``; the initial distribution
is uniform over them. Because every update multiplies ``D(i, j)`` by
``exp(α (h(j) - h(i)))``, the distribution after ``t`` rounds factorises,
``D_t(i, j) ∝ exp(-H(i)) exp(H(j))`` with ``H`` the current combined score (the
idea behind RankBoost.B, generalised to any number of levels), so the potential
``π(x) = Σ_j D(x, j) - Σ_i D(i, x)`` that scores every weak ranker comes from
per-(query, level) sums and a segmented scan over the levels: O(m) per round
after an O(m log m) setup, never the pairs. Weak rankers ``h(x) = [x_f > θ]``
over per-feature quantile thresholds are all scored at once from a histogram of
``π`` (O(m n) per round); the one with the largest ``|r|`` is taken with
``α = ½ ln((1 + r) / (1 - r))`` (Freund et al. §3.2, third method).
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.log import begin, check_verbose, loop_step
from .._core.checks import check_count, check_flag, check_matrix, require_concrete
from .._core.host import device_array, is_concrete
from .._core.memory import compute_dtype
from .ranksvm import rank_levels, row_weights
from .._core.segments import bucket, seg_scan
from .._core.sparse import as_dense
from .._core.types import FieldError, saveable

__all__ = ["RankBoostModel", "rankboost", "rankboost_predict"]


@saveable
class RankBoostModel(NamedTuple):
    """``scores = Σ_t alpha[t] * (X[:, feature[t]] > threshold[t])``; ``r`` is
    each round's weighted ranking correlation of the chosen weak ranker."""

    DIMS = {"feature": ("T",), "threshold": ("T",), "alpha": ("T",), "r": ("T",)}
    FINITE = ("alpha",)

    feature: jax.Array
    threshold: jax.Array
    alpha: jax.Array
    r: jax.Array
    num_features: int = -1          # columns of the training X (-1: not recorded)

    def check_parts(self):
        """Each round's feature is a column of the rows it scores."""
        f = np.asarray(self.feature)
        n = self.num_features if self.num_features >= 0 else None
        if f.size and (f.min() < 0 or (n is not None and f.max() >= n)):
            raise FieldError("feature", f"column indices {f.min()}..{f.max()} outside "
                                        f"0..{'' if n is None else n - 1}")

    def predict(self, X):
        return rankboost_predict(self, X)


def _thresholds(X, num_thresholds):
    """Per-feature candidate thresholds (distinct quantiles, NaN-padded) and the
    bin of every value: ``bin = #{thresholds < x}``, so ``x > θ_b <=> bin > b``."""
    qs = np.linspace(0, 1, num_thresholds + 2)[1:-1]
    n = X.shape[1]
    T = np.full((n, num_thresholds), np.nan)
    bins = np.zeros(X.shape, np.int32)
    for f in range(n):                      # host-side setup, once per feature
        thr = np.unique(np.quantile(X[:, f], qs, method="lower"))
        thr = thr[thr < X[:, f].max()]
        T[f, :len(thr)] = thr
        bins[:, f] = np.searchsorted(thr, X[:, f], side="left")
    return T, bins


def _potential(H, group, group_start, group_query, num_groups, num_queries, weight):
    """``π(x)`` for ``D(i, j) ∝ ω_q exp(H(j) - H(i))`` over the crucial pairs (``weight``
    ``[m]``: every row's query weight ω_q, which the pair's two rows share)."""
    eP, eM = jnp.exp(H), jnp.exp(-H)
    GP = jax.ops.segment_sum(eP, group, num_groups)
    GM = jax.ops.segment_sum(eM, group, num_groups)
    below = seg_scan(GP[:, None], group_start)[:, 0] - GP          # lower levels, same query
    incl = seg_scan(GM[:, None], group_start)[:, 0]
    total = jax.ops.segment_sum(GM, group_query, num_queries)
    above = total[group_query] - incl                                # higher levels
    b, a = below[group], above[group]
    Z = jnp.sum(weight * eM * b)
    return weight * (eM * b - eP * a) / jnp.where(Z > 0, Z, 1)


def rankboost(X, y, qid=None, *, rounds: int = 100, num_thresholds: int = 32,
              query_weights=None, verbose: int = 0) -> RankBoostModel:
    """RankBoost with thresholded-feature weak rankers (Freund et al. 2003).

    Args:
      X: ``[m, n]`` dense features (host side; thresholds are per-feature quantiles).
      y: ``[m]`` labels; pairs inside a query with ``y_i > y_j`` are crucial.
      qid: ``[m]`` query ids (``None``: one ranking).
      rounds: boosting rounds ``T`` (static).
      num_thresholds: candidate thresholds per feature.
      query_weights: ``None`` or ``[Q]`` weights >= 0 (one per query, in the order of the
        sorted distinct ``qid``): the initial distribution over the crucial pairs is
        proportional to their query's weight (uniform over all pairs when ``None``).
      verbose: log every that many rounds while the loop runs (0: silent; logger
        ``"rankjax"``).

    Returns:
      a ``RankBoostModel``; score new rows with :func:`rankboost_predict`.
      Scores are translated per query so ``exp(±H)`` stays in range; use
      float64 for long runs.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(30, num_features=5, seed=0)
      >>> model = rj.rankboost(d.X, d.y, d.qid, rounds=20)
      >>> f = rj.rankboost_predict(model, d.X)
      >>> bool(rj.pairwise_error(f, d.y, d.qid) < 0.3)
      True
    """
    X = np.asarray(check_matrix(require_concrete(X, "X", "rankboost")))
    lv = rank_levels(y, qid)
    if lv.seg.shape[0] != X.shape[0]:
        raise ValueError(f"y has {lv.seg.shape[0]} rows but X has {X.shape[0]}")
    rounds = check_count(rounds, "rounds")
    verbose = check_verbose(verbose)
    if verbose:
        begin()
    num_thresholds = check_count(num_thresholds, "num_thresholds")
    seg, level = np.asarray(lv.seg), np.asarray(lv.level)
    keys = seg.astype(np.int64) * (int(level.max()) + 1) + level
    uniq, group = np.unique(keys, return_inverse=True)
    group_query = (uniq // (int(level.max()) + 1)).astype(np.int32)
    group_start = np.r_[True, group_query[1:] != group_query[:-1]]
    # pad groups and queries to buckets (empty groups start a segment of their own and
    # hold no row), so another number of queries reuses the compiled program
    G, Q = bucket(uniq.size), bucket(int(seg.max()) + 1)
    pad = G - uniq.size
    group_start = np.r_[group_start, np.ones(pad, bool)]
    group_query = np.r_[group_query, np.zeros(pad, np.int32)]
    T, bins = _thresholds(X, num_thresholds)
    dtype = compute_dtype()
    groups = (device_array(group.astype(np.int32)), device_array(group_start),
              device_array(group_query), device_array(seg),
              device_array(row_weights(query_weights, qid, seg.shape[0]), dtype))
    model = _boost(device_array(bins), device_array(T, dtype), groups, (G, Q, rounds, verbose))
    return model._replace(num_features=int(X.shape[1]))


def _boost_impl(bins, T, groups, sizes):
    """``groups = (group, group_start, group_query, seg, weight)`` (traced), ``sizes = (G, Q,
    rounds, verbose)`` (static)."""
    group, group_start, group_query, seg, weight = groups
    G, Q, rounds, verbose = sizes
    m, n = bins.shape
    nb = T.shape[1]
    valid = ~jnp.isnan(T)
    flat = jnp.arange(n)[None, :] * (nb + 1) + bins                  # [m, n] histogram slots

    def round_(H, t):
        Hc = H - (jax.ops.segment_sum(H, seg, Q) / jnp.maximum(
            jax.ops.segment_sum(jnp.ones_like(H), seg, Q), 1))[seg]
        pi = _potential(Hc, group, group_start, group_query, G, Q, weight)
        hist = jax.ops.segment_sum(jnp.broadcast_to(pi[:, None], (m, n)).ravel(), flat.ravel(),
                                   n * (nb + 1)).reshape(n, nb + 1)
        r = jnp.cumsum(hist[:, ::-1], axis=1)[:, ::-1][:, 1:]          # r[f, b] = Σ_{bin > b}
        score = jnp.where(valid, jnp.abs(r), -1.0)
        k = jnp.argmax(score.ravel())
        f, b = k // nb, k % nb
        c = 1 - 4 * jnp.finfo(T.dtype).eps            # a perfect weak ranker: alpha finite
        rk = jnp.clip(r[f, b], -c, c)
        alpha = 0.5 * jnp.log((1 + rk) / (1 - rk))
        H = H + alpha * (bins[:, f] > b)
        loop_step(verbose, "RankBoost round", rounds, t + 1, f, alpha, r[f, b],
                  fmt="feature {0:.0f}, alpha {1:.4g}, r {2:.4g}")
        return H, (f, T[f, b], alpha, r[f, b])

    _, (f, thr, alpha, r) = lax.scan(round_, jnp.zeros(m, T.dtype), jnp.arange(rounds))
    return RankBoostModel(f, thr, alpha, r)


_boost = jax.jit(_boost_impl, static_argnums=3)


def rankboost_predict(model: RankBoostModel, X, *, staged: bool = False):
    """``Σ_t α_t [X[:, f_t] > θ_t]`` for ``X [m, n]``; with ``staged`` the scores after
    every round, ``[T, m]`` (row ``t`` the model of the first ``t + 1`` rounds).

    Example:
      >>> model = RankBoostModel(jnp.array([1]), jnp.array([0.5]), jnp.array([2.0]), jnp.array([0.9]))
      >>> print(rankboost_predict(model, jnp.array([[0., 1.], [0., 0.]])))
      [2. 0.]
    """
    if not isinstance(model, RankBoostModel):
        raise TypeError(f"model must be a RankBoostModel, got {type(model).__name__}")
    X = check_matrix(X)
    X = as_dense(X)
    if isinstance(model.num_features, int) and model.num_features >= 0:
        if X.shape[1] != model.num_features:
            raise ValueError(f"X has {X.shape[1]} features but the model was trained on "
                             f"{model.num_features}")
    used = (int(np.max(np.asarray(model.feature))) + 1 if model.feature.size else 0) if is_concrete(
        model.feature) else 0                   # a traced model (its caller's jit): unchecked
    if X.shape[1] < used:
        raise ValueError(f"X has {X.shape[1]} features but the model uses feature {used - 1}")
    return _boost_scores(model, X, check_flag(staged, "staged"))


@partial(jax.jit, static_argnums=2)
def _boost_scores(model, X, staged):
    steps = model.alpha[:, None] * (X[:, model.feature].T > model.threshold[:, None])   # [T, m]
    return jnp.cumsum(steps, axis=0) if staged else jnp.sum(steps, axis=0)
