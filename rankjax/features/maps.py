r"""Per-column feature maps learned on the training rows and carried in the model
(:class:`FeatureMap`): what the estimators' ``feature_map="auto"`` puts between the user's
columns and the model.

Two kinds, one type:

* **rank** (kernel models): each column through its training rows' empirical distribution
  function (mid-ranks, :math:`u = (\#\{x_i < x\} + \#\{x_i \le x\}) / 2m`, counted among
  :data:`KNOTS` order statistics when there are more rows) and the standard normal quantile,
  :math:`z = \Phi^{-1}(u)` (normal scores, van der Waerden 1952: the columns of a Gaussian
  copula), learned without the labels (``kind="weighted"`` scales each column by its
  within-query correlation with them, a map a hold-out must cross-fit). The rank of a value
  does not change under an increasing map of its column and only turns round
  (:math:`u \to 1 - u`, :math:`z \to -z`, the same distances) under a decreasing one, so the
  kernel sees the same rows whatever units, logarithms, exponentials, offsets or powers the
  engine logged the column in: the invariance the boosted trees have by construction
  (Friedman 2001). A value past the training range scores as the training extreme.
* **standard** (linear models): each column divided by its standard deviation on the
  training rows (glmnet's standardisation; no centring, which a ranking model cannot see),
  so that one λ grid serves columns in any units and float32 resolves the system.

Both take missing values as a LightGBM user has them: a missing entry is imputed from the
row's other columns (ridge regressions learned on the training rows' covariance, the
conditional mean of a Gaussian with it; the median rank or the training mean when the
training rows had no missing value) and, for a column that had NaN in training, an indicator
column is added. ``±inf`` score as a rank column's extremes; a standardised column treats
non-finite values as missing. Categorical columns (pandas ``category`` or text columns,
``rankjax.estimators.frames``) are read as their categories' learned scores (the mean
within-query centred label of a category's training rows) before the map.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtri

from .._core.host import device_array, host_view
from .._core.types import FieldError, saveable

__all__ = ["FeatureMap", "KNOTS", "apply_map", "map_rows"]


KNOTS = 1024
"""The training values a rank map keeps per column (order statistics at evenly spaced
ranks, the smallest and the largest among them): every training value when there are at
most this many, else a value between two knots gets the mean of their shares (a rank off by
at most 1/2048)."""


@saveable
class FeatureMap(NamedTuple):
    r"""A per-column map of rows ``[m, n] -> [m, n + k]`` learned on training rows
    (:func:`~rankjax.learn_feature_map`): ``(T(z) - center) * scale`` where ``z`` is the
    row with its categorical columns read as their categories' scores and ``k`` missing
    indicators appended (``isnan`` of the columns ``missing``), and ``T`` the rank map
    (``knots``, ``lower``, ``upper`` ``[K, n + k]``: the normal score of the mid-rank among
    the knots) or, without knots, the value itself; a missing entry (NaN; not finite for the
    standard map) starts at ``fill`` ``[n + k]`` (0, the median's normal score, or the
    training mean) and, with ``impute`` ``[n + k, n]``, is
    replaced by its regression on the row's other columns (``impute``). ``fill`` None: the
    map of sparse rows, a scaling alone.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[1., 50.], [2., 10.], [3., 40.], [4., 20.]])
      >>> fm = rj.learn_feature_map(X, kind="rank")
      >>> np.round(np.asarray(fm(X)), 4).tolist()        # normal scores of mid-ranks 1/8 .. 7/8
      [[-1.1503, 1.1503], [-0.3186, -1.1503], [0.3186, 0.3186], [1.1503, -0.3186]]
      >>> Y = -np.exp(X) * 1e6                       # the columns logged otherwise
      >>> np.array_equal(np.abs(rj.learn_feature_map(Y, kind="rank")(Y)), np.abs(fm(X)))
      True
    """

    DIMS = {"knots": ("K", "c"), "lower": ("K", "c"), "upper": ("K", "c"), "fill": ("c",),
            "center": ("c",), "scale": ("c",), "impute": ("c", "n"), "missing": ("k",)}
    FINITE = ("fill", "center", "scale", "impute")
    """Its arrays' axes and the fields that hold finite values (a model file is checked
    against them: ``rankjax._core.types.check_saved``)."""

    knots: Optional[jax.Array]
    lower: Optional[jax.Array]
    upper: Optional[jax.Array]
    fill: Optional[jax.Array]
    center: jax.Array
    scale: jax.Array
    impute: Optional[jax.Array]
    missing: jax.Array
    categorical: jax.Array
    categories: jax.Array
    category_scores: jax.Array

    @property
    def num_features(self) -> int:
        """Columns of the rows it maps (the user's features)."""
        return int(self.center.shape[0] - self.missing.shape[0])

    def check_parts(self):
        """The missing indicators name columns of the rows it maps."""
        n = self.num_features
        if n < 0 or np.any((np.asarray(self.missing) < 0) | (np.asarray(self.missing) >= n)):
            raise FieldError("missing", f"indicator columns outside the {n} mapped columns")

    @property
    def kind(self) -> str:
        """``"rank"`` (a rank map, its columns weighted or not) or ``"standard"``."""
        return "standard" if self.knots is None else "rank"

    def __call__(self, X):
        return apply_map(self, X)


def colsearch(xp, S, V, side: str):
    """``searchsorted`` column by column: ``S [K, n]`` sorted along axis 0 (NaN last),
    ``V [m, n]`` -> ``[m, n]`` indices."""
    if xp is np:
        return np.stack([np.searchsorted(S[:, j], V[:, j], side=side) for j in range(S.shape[1])],
                        axis=1).reshape(V.shape)
    return jax.vmap(lambda s, v: jnp.searchsorted(s, v, side=side), in_axes=(1, 1),
                    out_axes=1)(S, V)


def interp(xp, knots, lower, upper, Z):
    r"""The normal scores of ``Z [m, n]`` among the training values the knots ``[K, n]``
    stand for (``lower``/``upper``: the share of training values below / at most each
    knot): :math:`\Phi^{-1}` of the mid-rank (:func:`_ranks`), the mid-rank clipped to those
    of the smallest and the largest training value (a value past them scores as they do);
    0 at NaN. Only the order of ``z`` among the knots counts: the same scores after any
    increasing map of the column."""
    if xp is np:                 # column by column (each column's search a contiguous copy)
        kt, lt, ut = (np.ascontiguousarray(a.T) for a in (knots, lower, upper))
        out = np.empty(Z.shape, Z.dtype)
        for j in range(Z.shape[1]):
            out[:, j] = _scores(np, kt[j], lt[j], ut[j], np.ascontiguousarray(Z[:, j]))
        return out
    return jax.vmap(partial(_scores, jnp), in_axes=1, out_axes=1)(knots, lower, upper, Z
                                                                  ).astype(Z.dtype)


def _scores(xp, k, lower, upper, z):
    """:func:`interp` of one column: the normal scores of ``z [m]`` among the knots
    ``k [K]``."""
    u = xp.clip(_ranks(xp, k, lower, upper, z), upper[0] / 2, (1 + lower[-1]) / 2)
    return (ndtri if xp is np else jax.scipy.special.ndtri)(u)


def _ranks(xp, k, lower, upper, z):
    """The mid-rank of ``z [m]`` among the knots ``k [K]``: at a knot its mid-rank (the mean
    of its two shares); between two knots the mean of the share at most the one below (its
    ``upper``) and the share below the one above (its ``lower``), which bracket the share
    below ``z`` (equal when every training value is a knot: the empirical distribution
    function); 0 below every knot, 1 above; 1/2 at NaN."""
    K = k.shape[0]
    i = xp.searchsorted(k, z, side="left")
    ii = xp.minimum(i, K - 1)
    low = lower[ii]
    at = (i < K) & (k[ii] == z)                                    # z is a knot: its own shares
    below = xp.where(at, low, xp.where(i > 0, upper[xp.maximum(i - 1, 0)], 0))
    above = xp.where(at, upper[ii], xp.where(i < K, low, 1))
    return xp.where(xp.isnan(z), 0.5, (below + above) / 2)


def take(xp, I, K):
    """The gather of rows ``I [m, n]`` (clipped to ``[0, K)``) of each column of ``[K, n]``
    arrays: ``take_along_axis`` on axis 0 (numpy: by flat indices computed once, several
    times faster than its fancy indexing)."""
    I = xp.minimum(I, K - 1)
    if xp is np:
        flat = I.astype(np.int32) * np.int32(I.shape[1]) + np.arange(I.shape[1], dtype=np.int32)
        return lambda A: A.ravel()[flat]
    return lambda A: jnp.take_along_axis(A, I, 0)


def with_categories(xp, fm, X):
    """``X`` with its categorical columns read as their categories' scores (0 for a
    category not seen in training, NaN for a missing one)."""
    if fm.categorical.shape[0] == 0:
        return X
    cols = X[:, fm.categorical]
    C = fm.categories.shape[0]
    i = xp.minimum(colsearch(xp, fm.categories, cols, "left"), C - 1)
    at = take(xp, i, C)
    seen = at(fm.categories) == cols
    codes = xp.where(seen, at(fm.category_scores),
                     xp.where(xp.isnan(cols), xp.nan, 0)).astype(X.dtype)
    if xp is np:
        X = X.copy()
        X[:, fm.categorical] = codes
        return X
    return X.at[:, fm.categorical].set(codes)


IMPUTE_SWEEPS = 3
"""Sweeps of the imputation of missing entries from the others (:func:`impute`)."""


def mm(xp, a, b):
    """``a @ b`` at full precision in either library."""
    if xp is np:
        return a @ b            # precision: numpy on the host, the data's dtype
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def impute(xp, V, miss, W):
    """``V [m, n']`` with its entries ``miss [m, n]`` (of the first ``n`` columns, at 0 on
    entry) replaced by their regression on the row's other columns, ``V W`` (``W [n', n]``:
    column ``j`` the ridge regression of column ``j`` on the others), :data:`IMPUTE_SWEEPS`
    times: the conditional mean of a Gaussian with the training rows' covariance."""
    n = miss.shape[1]
    for _ in range(IMPUTE_SWEEPS):
        V = xp.concatenate([xp.where(miss, mm(xp, V, W), V[:, :n]), V[:, n:]], axis=1)
    return V


def _mapped(xp, fm, X):
    Z = with_categories(xp, fm, X)
    miss = xp.isnan(Z) if fm.knots is not None else ~xp.isfinite(Z)
    if fm.missing.shape[0]:
        Z = xp.concatenate([Z, xp.isnan(Z[:, fm.missing]).astype(Z.dtype)], axis=1)
    if fm.knots is None:
        T = Z if fm.fill is None else xp.where(xp.isfinite(Z), Z, fm.fill)
    else:
        T = interp(xp, fm.knots, fm.lower, fm.upper, Z)
    if fm.fill is None or fm.impute is None:    # a scaling (nothing to impute from others)
        return ((T - fm.center) * fm.scale).astype(X.dtype)
    rank = fm.knots is not None                 # imputed on ranks, or on standardised values
    V = T - fm.fill if rank else (T - fm.fill) * fm.scale        # missing entries at 0
    if fm.impute is not None:
        V = impute(xp, V, miss, fm.impute)
    return ((V * fm.scale if rank else V) + (fm.fill - fm.center) * fm.scale).astype(X.dtype)


def _cast(fm, dtype):
    """The map's floating leaves in ``dtype`` (the rows' compute dtype)."""
    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating)
                        else a, fm)


@jax.jit
def _apply(fm, X):
    return _mapped(jnp, _cast(fm, X.dtype), X)


def apply_map(fm: FeatureMap, X):
    """``fm(X)`` for dense rows ``X [m, n]`` (jitted; traceable: ``jit``, ``vmap``,
    ``jax.export``)."""
    X = jnp.asarray(X)
    if X.ndim != 2 or X.shape[1] != fm.num_features:
        raise ValueError(f"X must have shape [m, {fm.num_features}] (the columns the map was "
                         f"learned on), got {tuple(X.shape)}")
    return _apply(fm, X)


def map_rows(fm: FeatureMap, X):
    """``fm(X)`` of concrete dense rows, compiling nothing on the CPU (the numpy body on the
    host views of the rows and the map, :func:`~rankjax._core.host.host_view`); the jitted
    map elsewhere. Returns a device array in ``X``'s dtype."""
    Xv = host_view(X)
    views = [None if a is None else host_view(a) for a in fm]
    if Xv is None or any(v is None for v, a in zip(views, fm) if a is not None):
        return apply_map(fm, X)
    fm = FeatureMap(*[None if v is None else
                      v.astype(Xv.dtype) if v.dtype.kind == "f" else v for v in views])
    return device_array(by_blocks(np, lambda B: _mapped(np, fm, B), Xv))


BLOCK_ROWS = 1 << 15
"""Rows the host maps at a time: the searches' and gathers' index arrays of a block stay a
few MB however many rows there are."""


def by_blocks(xp, fn, Z):
    """``fn`` of the rows of ``Z`` a block of :data:`BLOCK_ROWS` at a time (numpy; jax.numpy
    whole), concatenated."""
    if xp is not np or Z.shape[0] <= BLOCK_ROWS:
        return fn(Z)
    return np.concatenate([fn(Z[a:a + BLOCK_ROWS]) for a in range(0, Z.shape[0], BLOCK_ROWS)])
