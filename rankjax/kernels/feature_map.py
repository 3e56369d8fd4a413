"""A per-feature map learned on training rows, so that one kernel width serves raw features:
the heavy-tailed columns that leave ``[-1, 1]`` (counts, TF-IDF scores, lengths, clicks,
PageRank) on the scale ``sign(x) log(1 + |x|)``, the rest as they are.

A Gaussian kernel with one ``γ`` measures distances over all columns at once: on raw
web-search features the widest, heaviest-tailed columns (a click count of :math:`10^{5}`) decide
every distance and the rest are noise to it. Boosted trees do not care (they split on
order); a kernel needs the columns on comparable scales. The map is learned on the
training rows only and carried in the model (:class:`~rankjax.solvers.models.MappedModel`),
so ``predict``, save and load and the command line apply the same map to new rows.

Chosen by test NDCG@10 of ``RankRLSCV(kernel="gaussian")`` (:func:`rankjax.make_web_data`,
5,052 training rows, float32): the features as given 0.5638, standardized 0.6854, a
quantile map to normal 0.8327, ``sign(x) log(1 + |x|)`` on every column 0.8377, on the
columns beyond ``[-1, 1]`` 0.8433, on those of them with skewness above 1 0.8463 (LightGBM
at its defaults 0.8376, the linear model 0.7748); a log scale in units of each column's
median with every column standardized 0.7694. Heavy tails on either side count (a
negated count, a difference of counts: ``|skewness| > 1`` or excess kurtosis above 3,
which on these sets picks the same columns). The moments keep light-tailed symmetric
columns as they are: on :func:`rankjax.make_ranking_data` (features about ``[-1.5, 2.5]``,
not skewed) the log scale on every column beyond ``[-1, 1]`` fell from 0.9214 to 0.9000;
this map leaves them, and LETOR's normalised features in ``[0, 1]``, exactly as they are.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import check_matrix
from .._core.sparse import as_dense
from .._core.types import saveable

__all__ = ["FeatureMap", "learn_feature_map", "learn_and_map", "log_scale", "column_stats",
           "warn_unresolved", "warn_unmapped", "RAW_MAX"]


SKEW = 1.0
"""A column beyond ``[-1, 1]`` goes on the log scale when the size of its skewness on the
training rows is above this (a Poisson count of mean 2: 0.7; a log-normal of σ = 1: 6.2;
a uniform or normal column: 0), either sign: a negated count is as heavy-tailed."""

KURTOSIS = 3.0
"""... or when its excess kurtosis is above this (tails heavier than Laplace's, 3: two-sided
heavy tails such as a difference of counts, whose skewness is about 0; a normal column 0,
a uniform -1.2)."""


def log_scale(X):
    """``sign(X) log(1 + |X|)`` elementwise."""
    return jnp.sign(X) * jnp.log1p(jnp.abs(X))


@saveable
class FeatureMap(NamedTuple):
    """``t(X)[:, j] = sign(x) log(1 + |x|)`` on the columns with ``log[j]`` (those whose
    training values leave ``[-1, 1]``, heavy-tailed), ``x`` elsewhere; ``log`` ``[n]`` bool.

    Example:
      >>> import numpy as np
      >>> fm = FeatureMap(np.array([True, False]))
      >>> np.round(np.asarray(fm(np.array([[1000., 5.], [-10., 0.5]]))), 3).tolist()
      [[6.909, 5.0], [-2.398, 0.5]]
    """

    log: jax.Array

    def __call__(self, X):
        return _apply(self.log, jnp.asarray(X))


@jax.jit
def _apply(log, X):
    return jnp.where(log, log_scale(X), X)


def _moments(X):
    """Per-column skewness and excess kurtosis of ``X [m, n]`` (0 and -3 on constant
    columns), numpy's moment formulas."""
    c = X - jnp.mean(X, axis=0)
    sd = jnp.sqrt(jnp.mean(c * c, axis=0))
    z = c / jnp.where(sd > 0, sd, 1)
    z2 = z * z
    return jnp.mean(z2 * z, axis=0), jnp.mean(z2 * z2, axis=0) - 3


def learn_feature_map(X) -> FeatureMap:
    """The :class:`FeatureMap` of the training rows ``X [m, n]`` (finite; dense or BCOO): the
    columns whose values leave ``[-1, 1]`` and are heavy-tailed (``|skewness| >`` ``SKEW = 1``
    or excess kurtosis ``>`` ``KURTOSIS = 3``); O(m n) on the device.

    Example:
      >>> import numpy as np
      >>> X = np.array([[2., 0.1, 2.], [0., 0.3, 1.], [0., 0.2, 3.], [0., 0.1, 2.]])
      >>> np.asarray(learn_feature_map(X).log).tolist()
      [True, False, False]
    """
    return _learn(as_dense(check_matrix(X)))


def _columns(X):
    skew, kurt = _moments(X)
    return FeatureMap((jnp.max(jnp.abs(X), axis=0) > 1) & ((jnp.abs(skew) > SKEW) | (kurt > KURTOSIS)))


_learn = jax.jit(_columns)


@jax.jit
def learn_and_map(X):
    """``(map, map(X), spreads)`` of checked dense rows ``X``: one program (the estimators'
    fit); ``spreads`` ``[n]`` the mapped columns' standard deviations."""
    fm = _columns(X)
    mapped = _apply(fm.log, X)
    return fm, mapped, jnp.std(mapped, axis=0)


column_stats = jax.jit(lambda X: (jnp.std(X, axis=0), jnp.max(jnp.abs(X), axis=0)))
"""``([n], [n])`` the columns' standard deviations and largest magnitudes of dense rows
``X [m, n]``."""

RAW_MAX = 100.0
"""``feature_map=None`` warns of the heavy-tailed columns whose largest magnitude exceeds
this (where the log scale changes the geometry: 100 becomes 4.6; a column already on it
stays below)."""


def warn_unresolved(spread, unmapped=None, largest=None, stacklevel: int = 5) -> None:
    """Warns (``RuntimeWarning``) where a Gaussian kernel cannot see the columns: when the
    widest column's spread is so far beyond the median column's that the kernel in the
    dtype of ``spread`` cannot resolve the typical column beside it (squared distances
    keep about ``eps`` of their size, so a column whose variance is below ``eps`` times
    the widest's adds nothing: float32 a spread ratio above 2,900, float64 6.7e7); and,
    for the features as given (``feature_map=None``: ``unmapped`` the ``[n]`` columns the
    map would put on the log scale, ``largest`` their largest magnitudes), when
    heavy-tailed columns reach beyond :data:`RAW_MAX`, whose few largest values then
    decide every distance (the kernel nearly 0 or 1).

    Example:
      >>> import warnings, numpy as np
      >>> with warnings.catch_warnings(record=True) as w:
      ...     warnings.simplefilter("always")
      ...     warn_unresolved(np.array([1e5, 1.0, 2.0], np.float32))
      >>> "column 0" in str(w[0].message)
      True
    """
    s = np.asarray(spread)
    if unmapped is not None:
        cols = np.flatnonzero(np.asarray(unmapped) & (np.asarray(largest) > RAW_MAX))
        if cols.size:
            _raw_warning(stacklevel, f"feature_map=None on {cols.size} heavy-tailed columns beyond "
                         f"[-{RAW_MAX:g}, {RAW_MAX:g}] (column {cols[0]} first): their few "
                         "largest values decide every distance of a Gaussian kernel (its "
                         "values nearly 0 or 1); feature_map='auto' puts them on the scale "
                         "sign(x) log(1 + |x|)")
    live = s[s > 0]
    if live.size < 2:
        return
    j, ratio = int(np.argmax(s)), float(live.max() / np.median(live))
    if ratio > 1 / np.sqrt(np.finfo(s.dtype).eps):
        _raw_warning(stacklevel, f"column {j}'s spread (standard deviation {s[j]:.3g}) is {ratio:.3g} times "
                     f"the median column's: a Gaussian kernel in {s.dtype} cannot resolve the "
                     "typical column beside it; scale the columns (e.g. sklearn's StandardScaler "
                     "in a Pipeline)")


def warn_unmapped(X) -> None:
    """:func:`warn_unresolved` of dense rows ``X`` taken as they are (``feature_map=None``)."""
    spread, largest = column_stats(X)
    warn_unresolved(spread, learn_feature_map(X).log, largest, stacklevel=6)


def _raw_warning(stacklevel, message):
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
