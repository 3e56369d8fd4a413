r"""Learning a :class:`~rankjax.FeatureMap` on training rows: the knots and shares of the rank
map, the column weights, the standard deviations, the missing indicators and the categories'
scores. On the CPU the numpy body runs on the data's host view (no program to compile, no
copy); elsewhere the same body runs jitted on the device."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from .._core.checks import as_float_array, check_targets
from .._core.finite import first_nonfinite
from .._core.host import device_array, host_view, is_concrete
from .._core.queries import segment_ids
from .._core.sparse import is_sparse, to_scipy
from .._core.memory import compute_dtype
from .maps import (IMPUTE_SWEEPS, KNOTS, FeatureMap, by_blocks, colsearch, interp, mm, take,
                   with_categories)

__all__ = ["learn_feature_map", "learn_and_map", "weighted_from", "KINDS", "DERIVED"]

DERIVED = "derived rows"
"""The name the library's own derived rows (a map's output) are checked under, once, apart
from the user's ``X`` (``rankjax._core.finite.VALIDATIONS``): the problems built on them
check nothing again."""

KINDS = ("rank", "weighted", "standard")
"""The kinds of :func:`learn_feature_map`."""


def learn_feature_map(X, y=None, qid=None, *, kind: str = "rank", categorical=()) -> FeatureMap:
    r"""The :class:`FeatureMap` of training rows ``X [m, n]`` (dense; NaN and ``±inf``
    allowed).

    ``kind="rank"``: every column through its empirical distribution function on these rows
    (mid-ranks, among 1,024 order statistics on more rows), centred at 1/2: learned without
    the labels. ``kind="weighted"``: the rank map with each column scaled by its
    within-query correlation with the labels ``y`` (and ``qid``),

    .. math::

       s_j \propto \frac{|\sum_i u_{ij} \tilde y_i|}
                        {\sqrt{\sum_i \tilde u_{ij}^2 \sum_i \tilde y_i^2}}, \qquad
       \textstyle\sum_j s_j^2 = n,

    (:math:`\tilde v` centred within each query): the same map, up to the order of a
    column, whatever increasing or decreasing map the column went through. Its weights are
    learned from the labels, so a hold-out on the same rows must learn them without its
    held-out queries (``RankRLSCV`` cross-fits them: docs/math.md, §7). ``kind="standard"``:
    every column divided by its standard deviation (imputed at its mean where not finite).
    A column with NaN on these rows gets an indicator column (``isnan``), mapped the same
    way. ``categorical``: columns whose values are category codes, read as their category's
    score (the mean within-query centred label of its training rows, shrunk by one row
    towards 0; 0 for a category not seen here). O(m n log m) on the host (CPU) or the device.

    Example:
      >>> import numpy as np
      >>> X = np.array([[1., 0.], [2., np.nan], [4., 1.], [8., 1.]])
      >>> fm = learn_feature_map(X, np.array([0., 1., 2., 3.]), np.zeros(4, int), kind="weighted")
      >>> fm(X).shape, fm.missing.tolist()              # an indicator for column 1
      ((4, 3), [1])
      >>> s = learn_feature_map(X, kind="standard")
      >>> np.round(np.asarray(s(X))[:, 0], 3).tolist()
      [0.373, 0.746, 1.492, 2.984]
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if is_sparse(X):
        if kind != "standard" or len(categorical):
            raise ValueError("a sparse X takes kind='standard' (a rank map or categories need "
                             "dense rows)")
        return _sparse_scales(X)
    X = as_float_array(X, "X")
    if X.ndim != 2 or 0 in X.shape:
        raise ValueError(f"X must be a non-empty 2-D array [m, n], got shape {tuple(X.shape)}")
    if not is_concrete(X):
        raise TypeError("learn_feature_map runs on concrete rows (outside jit); apply the "
                        "learned map under jit")
    m, n = X.shape
    cat = _columns(categorical, n)
    if y is not None:
        y = check_targets(y, m)
    if cat.size and y is None:
        raise ValueError("categorical columns are read as their categories' scores: give y")
    if kind == "weighted" and y is None:
        raise ValueError("kind='weighted' scales the columns by their correlation with the "
                         "labels: give y")
    seg = segment_ids(np.zeros(m, np.int32) if qid is None else qid)
    if seg.seg.shape[0] != m:
        raise ValueError(f"qid has {seg.seg.shape[0]} rows but X has {m}")
    return learn_and_map(X, y, seg, kind, cat)[0]


def learn_and_map(X, y, seg, kind, categorical=(), labels=None):
    """``(map, map(X))`` of checked dense rows ``X`` (NaN allowed), labels ``y`` or None and
    :class:`~rankjax.Segments` ``seg``: the map and the training rows it maps, from one pass
    (the estimators' fit). ``labels``: ``[m]`` bool, the rows (whole queries) whose labels
    the map may learn from (the categories' scores, the weights of ``kind="weighted"``);
    None: every row. What it learns from ``X`` alone (ranks, imputation, standard
    deviations) comes from every row."""
    cat = _columns(categorical, X.shape[1])
    if labels is not None:
        labels = np.asarray(labels, bool)
    base = _category_map(X, y, seg, cat, labels)
    return _learn(X, base, y, seg, kind, labels)


def weighted_from(fm, rows, y, seg, labels=None):
    """``(map, rows)`` of ``kind="weighted"`` from the label-free rank map ``fm`` and the
    rows it mapped (:func:`learn_and_map` of ``kind="rank"``, no categorical columns): the
    same ranks, each column scaled by its within-query correlation with ``y`` over the rows
    ``labels`` (whole queries; None: every row). One pass over the rows, no ranks again."""
    views = [host_view(rows), host_view(y)]
    xp = np if all(v is not None for v in views) else jnp
    U, yy = views if xp is np else (rows, jnp.asarray(y))
    lab = None if labels is None else (labels if xp is np else jnp.asarray(labels))
    scale = _weights(xp, U, yy, seg.seg if xp is np else jnp.asarray(seg.seg), seg.num_queries,
                     lab).astype(U.dtype)
    rows = as_float_array(device_array(U * scale), DERIVED, finite=True)
    return fm._replace(scale=device_array(scale)), rows


def _sparse_scales(X):
    """The standard map of a sparse ``X``: its columns divided by their standard deviations
    (the zeros counted; no imputation: ``fill`` None), on the host."""
    A = to_scipy(X)
    if not np.all(np.isfinite(A.data)):
        raise ValueError(f"X contains NaN or inf values{first_nonfinite(A.data)} (a sparse X "
                         "takes none: give dense rows for missing values)")
    mean = np.asarray(A.mean(axis=0)).ravel()
    sq = np.asarray(A.multiply(A).mean(axis=0)).ravel()
    sd = np.sqrt(np.maximum(sq - mean * mean, 0))
    dtype = compute_dtype() if A.dtype.kind != "f" else jax.dtypes.canonicalize_dtype(A.dtype)
    n = A.shape[1]
    z = np.zeros((0,), np.int32)
    return FeatureMap(None, None, None, None, device_array(np.zeros(n), dtype),
                      device_array(np.where(sd > 0, 1 / np.where(sd > 0, sd, 1), 1), dtype), None,
                      device_array(z), device_array(z), device_array(np.zeros((0, 0)), dtype),
                      device_array(np.zeros((0, 0)), dtype))


def _columns(categorical, n):
    cat = np.unique(np.asarray(categorical, dtype=np.int64).reshape(-1))
    if cat.size and (cat.min() < 0 or cat.max() >= n):
        raise ValueError(f"categorical: column indices must lie in [0, {n}), got {cat.tolist()}")
    return cat.astype(np.int32)


def _empty(n, dtype):
    """The map that changes nothing (its categories and missing columns still to learn)."""
    z = np.zeros((0,), np.int32)
    return FeatureMap(None, None, None, np.zeros(n, dtype), np.zeros(n, dtype), np.ones(n, dtype), None,
                      z, z,
                      np.zeros((0, 0), dtype), np.zeros((0, 0), dtype))


def _host(a):
    """Host values of a concrete array (a view on the CPU, one copy elsewhere)."""
    v = host_view(a)
    return np.asarray(jax.device_get(a)) if v is None else v


def _category_map(X, y, seg, cat, labels=None):
    """The identity map with the categorical columns' tables: categories ``[C, c]`` (sorted,
    padded with ``inf``) and their scores (:func:`category_scores`) from the rows
    ``labels`` (None: all)."""
    dtype = np.dtype(X.dtype)
    fm = _empty(X.shape[1], dtype)
    if not cat.size:
        return fm
    yc = _centred_labels(_host(y), seg)
    keep = slice(None) if labels is None else labels
    tables = [category_scores(_host(X[:, int(j)])[keep], yc[keep]) for j in cat]
    C = max(1, max(t[0].size for t in tables))
    values = np.full((C, cat.size), np.inf, dtype)
    scores = np.zeros((C, cat.size), dtype)
    for k, (v, s) in enumerate(tables):
        values[:v.size, k], scores[:v.size, k] = v, s
    return fm._replace(categorical=cat, categories=values, category_scores=scores)


def _centred_labels(y, seg):
    """``y`` centred within each query, ``[m]`` (several outputs: their mean)."""
    y = np.asarray(y, np.float64).reshape(y.shape[0], -1).mean(axis=1)
    counts = np.bincount(seg.seg, minlength=seg.num_queries)
    means = np.bincount(seg.seg, y, minlength=seg.num_queries) / np.maximum(counts, 1)
    return y - means[seg.seg]


def category_scores(values, yc):
    """``(categories [C], scores [C])`` of one column of category codes (NaN: missing):
    the sorted finite codes and the sum of each one's centred labels ``yc`` over its row
    count plus one (a category of one row with label 1 above its query's mean: 0.5).

    Example:
      >>> cats, s = category_scores(np.array([3., 1., 3., np.nan]), np.array([1., -1., 1., 0.]))
      >>> cats.tolist(), s.tolist()
      ([1.0, 3.0], [-0.5, 0.6666666666666666])
    """
    ok = np.isfinite(values)
    cats, inv = np.unique(values[ok], return_inverse=True)
    sums = np.bincount(inv, yc[ok], minlength=cats.size)
    return cats, sums / (np.bincount(inv, minlength=cats.size) + 1.0)


def _learn(X, base, y, seg, kind, labels=None):
    """``(map, map(X))``: the map of ``kind`` on rows ``X`` (the categories of ``base`` read
    first; the weights of ``"weighted"`` from the rows ``labels``); the numpy body on the
    host views of ``X`` and ``y`` where both have one, else the jitted body."""
    base = base._replace(missing=np.flatnonzero(_has_nan(X)).astype(np.int32))
    K = int(min(X.shape[0], KNOTS))
    y = y if kind == "weighted" else None                   # the other kinds never read it
    views = [host_view(X), None if y is None else host_view(y)]
    if views[0] is not None and (y is None or views[1] is not None):
        fm, rows = _learned(np, base, views[0], views[1], seg.seg, seg.num_queries, K, kind,
                            labels)
        return FeatureMap(*[None if a is None else device_array(a) for a in fm]), device_array(rows)
    return _device_learn(base, X, y, device_array(seg.seg), seg.num_queries, K, kind,
                         None if labels is None else device_array(labels))


@partial(jax.jit, static_argnames=("num", "K", "kind"))
def _device_learn(base, X, y, seg, num, K, kind, labels):
    return _learned(jnp, base, X, y, seg, num, K, kind, labels)


def _has_nan(X):
    v = host_view(X)
    if v is not None:
        return np.isnan(v).any(axis=0)
    return np.asarray(jax.device_get(jnp.isnan(X).any(axis=0)))


def _segsum(xp, V, seg, num):
    """``[num, ...]`` per-query sums of the rows of ``V [m, ...]``."""
    if xp is np:
        m = V.shape[0]
        Q = sp.csr_matrix((np.ones(m, V.dtype), (seg, np.arange(m))), shape=(num, m))
        return np.asarray(Q @ V)       # precision: scipy on the host, the data's dtype
    return jax.ops.segment_sum(V, seg, num_segments=num)


def _learned(xp, base, X, y, seg, num, K, kind, labels=None):
    """The learned map (the generic body of :func:`_learn`, ``xp`` numpy or jax.numpy)."""
    dtype = X.dtype
    Z = with_categories(xp, base, X)
    miss = ~xp.isfinite(Z) if kind == "standard" else xp.isnan(Z)
    if base.missing.shape[0]:
        Z = xp.concatenate([Z, xp.isnan(Z[:, base.missing]).astype(dtype)], axis=1)
    width = Z.shape[1]
    if kind == "standard":
        return _standard(xp, base, Z, miss, width, dtype)
    S = xp.sort(Z, axis=0)                                      # NaN last
    c = xp.sum(~xp.isnan(Z), axis=0)
    pos = xp.round(xp.linspace(0.0, 1.0, K)[:, None] * xp.maximum(c - 1, 0)).astype(np.int32)
    knots = take(xp, pos, Z.shape[0])(S)
    count = xp.maximum(c, 1).astype(dtype)                     # the shares: K searches a column
    lower = xp.where(c == 0, 0.5, colsearch(xp, S, knots, "left") / count).astype(dtype)
    upper = xp.where(c == 0, 0.5, colsearch(xp, S, knots, "right") / count).astype(dtype)
    knots = xp.where(c == 0, 0, knots).astype(dtype)
    zero = xp.zeros(width, dtype)                               # the normal score of 1/2
    V = by_blocks(xp, lambda B: interp(xp, knots, lower, upper, B), Z)
    W, V = _regression(xp, V, miss) if base.missing.shape[0] else (None, V)
    scale = (_weights(xp, V, y, seg, num, labels) if kind == "weighted" else
             xp.ones(width, dtype))
    fm = base._replace(knots=knots, lower=lower, upper=upper, fill=zero, center=zero,
                       scale=scale, impute=W)
    return fm, (V * scale).astype(dtype)


def _standard(xp, base, Z, miss, width, dtype):
    """The standard map of ``Z`` and ``Z`` through it (one pass each for the moments and the
    rows when every value is finite, as most data)."""
    if xp is np and not miss.any():
        mean, sd = Z.mean(axis=0, dtype=np.float64), Z.std(axis=0, dtype=np.float64)
        scale = np.where(sd > 0, 1 / np.where(sd > 0, sd, 1), 1).astype(dtype)
        fm = base._replace(fill=mean.astype(dtype), center=np.zeros(width, dtype), scale=scale)
        return fm, (Z * scale).astype(dtype)
    fin = xp.isfinite(Z)
    cnt = xp.maximum(xp.sum(fin, axis=0), 1).astype(dtype)
    mean = (xp.sum(xp.where(fin, Z, 0), axis=0) / cnt).astype(dtype)
    sd = xp.sqrt(xp.sum(xp.where(fin, (Z - mean) ** 2, 0), axis=0) / cnt)
    scale = xp.where(sd > 0, 1 / xp.where(sd > 0, sd, 1), 1).astype(dtype)
    T = xp.where(fin, Z, mean)
    fm = base._replace(fill=mean, center=xp.zeros(width, dtype), scale=scale)
    if not base.missing.shape[0]:
        return fm, (T * scale).astype(dtype)
    W, V = _regression(xp, (T - mean) * scale, miss)
    return fm._replace(impute=W), (V + mean * scale).astype(dtype)


RIDGE = 1e-3
"""The imputation's regressions are ridge regressions, λ = ``RIDGE`` times the mean variance
of the columns (the covariance kept well conditioned in float32)."""


def _regression(xp, V, miss):
    """``(W [n', n], V imputed)``: each of the first ``n`` columns of ``V [m, n']`` (missing
    entries ``miss`` at 0) regressed on all the others (the precision matrix's columns,
    :math:`W_{ij} = -P_{ij} / P_{jj}`, :math:`W_{jj} = 0`), the missing entries imputed and the
    covariance estimated again, :data:`~rankjax.features.maps.IMPUTE_SWEEPS` times."""
    m, width = V.shape
    n = miss.shape[1]
    eye = xp.eye(width, dtype=V.dtype)
    for _ in range(IMPUTE_SWEEPS):
        G = mm(xp, V.T, V) / m
        ridge = RIDGE * xp.trace(G) / width + np.finfo(V.dtype).eps       # all missing: W = 0
        P = xp.linalg.inv(G + ridge * eye)
        W = (-P / xp.diagonal(P)[None, :]) * (1 - eye)
        W = W[:, :n]
        V = xp.concatenate([xp.where(miss, mm(xp, V, W), V[:, :n]), V[:, n:]], axis=1)
    return W.astype(V.dtype), V


def _weights(xp, U, y, seg, num, labels=None):
    """Column weights ``[n]``: each column's within-query correlation with ``y`` over the
    rows ``labels`` (whole queries; None: all), scaled to a root mean square of 1 (all 1
    when no column correlates)."""
    dtype = U.dtype
    y = y.reshape(y.shape[0], -1).astype(dtype)
    r = xp.ones((U.shape[0], 1), dtype) if labels is None else labels.reshape(-1, 1).astype(dtype)
    count = _segsum(xp, r, seg, num)
    yc = (y - (_segsum(xp, y * r, seg, num) / xp.maximum(count, 1))[seg]) * r
    sums = _segsum(xp, U * r, seg, num)
    uu = xp.sum(U * U * r, axis=0) - xp.sum(sums * sums / xp.maximum(count, 1), axis=0)
    yy = xp.sum(yc * yc, axis=0)
    cov = xp.stack([xp.sum(U * yc[:, k:k + 1], axis=0) for k in range(y.shape[1])], axis=1)
    den = xp.sqrt(xp.maximum(uu, 0)[:, None] * yy[None, :])
    corr = xp.mean(xp.where(den > 0, xp.abs(cov) / xp.where(den > 0, den, 1), 0), axis=1)
    rms = xp.sqrt(xp.mean(corr * corr))
    return xp.where(rms > 0, corr / xp.where(rms > 0, rms, 1), 1).astype(dtype)

