r"""What the solvers return: one model type per way of scoring a row, the λ paths that hold
every λ's model (``path.model(i)``), and the one :func:`predict` (``docs/math.md`` §2).

============================  ===============================  =====================
model                         scores                           takes
============================  ===============================  =====================
:class:`~rankjax.LinearModel`          :math:`x^T w`                        features ``[m, n]``
:class:`KernelModel`          ``sum_i a_i k(x, x_i)``          features
:class:`NystromModel`         ``sum_{i in R} a_i k(x, x_i)``   features
:class:`DualModel`            ``K_test a``                     a kernel ``[m, m_train]``
:class:`ScaledModel`          a model of ``x * scales``        features
:class:`MappedModel`          a model of ``t(x)`` (a learned   features
                              :class:`FeatureMap`)
:class:`BlendModel`           ``w f_1(x) + (1 - w) f_2(x)``    features
============================  ===============================  =====================

A model of one output predicts ``[m]`` (``[m, k]`` for ``k`` outputs); a path predicts
``[L, m(, k)]``, the λ axis first, from the same input as its models.
"""
from __future__ import annotations

import inspect
from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.checks import as_float_array, check_matrix
from .._core.host import device_array, lane
from .._core.sparse import as_dense, matmul
from .._core.types import FieldError, saveable, width_of
from .._core.products import HI
from ..features.maps import FeatureMap
from ..kernels.kernel import Kernel, check_kernel, kernel_block, kernel_matrix, kernel_offset

__all__ = ["LinearModel", "DualModel", "KernelModel", "NystromModel", "ScaledModel", "MappedModel",
           "BlendModel",
           "PrimalPath", "DualPath", "NystromPath", "predict", "check_test_matrix",
           "linear_scores", "path_scores", "scale_rows", "is_linear", "on_features",
           "feature_weights", "feature_importances"]


def check_test_matrix(X, n: int, name: str = "X", what: str = "features", missing: bool = False):
    """``X`` a finite ``[m_test, n]`` matrix (dense or BCOO) for a model of ``n`` inputs (NaN
    and inf allowed with ``missing``: a feature map takes them)."""
    X = check_matrix(X, name, missing)
    if X.shape[1] != n:
        raise ValueError(f"{name} has {X.shape[1]} {what} but the model has {n}")
    return X


_matmul = jax.jit(matmul)


def linear_scores(X, W):
    """``X W`` for ``W [n(, k)]`` (jitted; dense or BCOO ``X``)."""
    return _matmul(X, W)


@jax.jit
def path_scores(X, W):
    """``X w(λ)`` for every λ of a path ``W [L, n(, k)]``: ``[L, m(, k)]`` in one product."""
    L = W.shape[0]
    flat = jnp.moveaxis(W, 0, -1).reshape(W.shape[1], -1)            # [n, (k) L]
    out = _matmul(X, flat)
    return jnp.moveaxis(out.reshape((X.shape[0],) + W.shape[2:] + (L,)), -1, 0)


def columns_of(field: str, axis: int) -> property:
    """The ``num_features`` of a model: the size of ``axis`` of its array ``field`` (the
    columns of the rows it scores; the command line reads files with it)."""
    return property(lambda self: int(getattr(self, field).shape[axis]))


@jax.jit
def scale_rows(X, s):
    """``X diag(s)``: rows scaled per feature."""
    return X * s


SCORE_BLOCK_BYTES = 1 << 28
"""A kernel model scores at most this many bytes of kernel values at once: more test rows
than fit are scored in row blocks (``[block, b]`` at a time, never ``[m_test, b]`` whole)."""


def _kernel_scores(kernel, X, rows, coef, block_size):
    X = check_test_matrix(X, rows.shape[1])
    m1, m2 = X.shape[0], rows.shape[0]
    item = jnp.dtype(jnp.result_type(X.dtype, rows.dtype)).itemsize
    known = isinstance(m1, int)                 # else a symbolic batch (jax.export): blocks
    if block_size is None and (not known or m1 * m2 * item > SCORE_BLOCK_BYTES):
        block_size = max(1, SCORE_BLOCK_BYTES // (m2 * item))
    if block_size is None or (known and block_size >= m1):
        return linear_scores(kernel_matrix(kernel, X, rows), coef)
    check_kernel(kernel)
    return _scores_in_blocks(kernel, as_dense(X), jnp.asarray(rows), coef, int(block_size))


@partial(jax.jit, static_argnums=4)
def _scores_in_blocks(kernel, X, rows, coef, block):
    """``K(X, rows) coef`` ``[m(, ...)]`` a block of ``block`` rows of ``X`` at a time."""
    m = X.shape[0]
    nb = -(-m // block)
    Xb = jnp.pad(X, ((0, nb * block - m), (0, 0))).reshape(nb, block, -1)
    out = lax.map(lambda a: jnp.matmul(kernel_block(kernel, a, rows), coef, precision=HI), Xb)
    return out.reshape((nb * block,) + out.shape[2:])[:m]


@saveable
class LinearModel(NamedTuple):
    r"""Linear scoring :math:`f(x) = x^T w`; ``weights`` ``[n]`` or ``[n, k]``.

    Example:
      >>> import numpy as np
      >>> print(np.asarray(LinearModel(np.array([1., -1.])).predict(np.array([[2., 1.]]))))
      [1.]
    """

    LANES = ("weights",)
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    DIMS = {"weights": ("n", "k?")}
    FINITE = ("weights",)
    """Its arrays' axes and the fields that hold finite values (a model file is checked
    against them: ``rankjax._core.types.check_saved``)."""

    weights: jax.Array

    num_features = columns_of("weights", 0)          # columns of the rows it scores

    def predict(self, X):
        return linear_scores(check_test_matrix(X, self.weights.shape[0]), self.weights)


@saveable
class DualModel(NamedTuple):
    """Dual coefficients ``a`` (``[m]`` or ``[m, k]``) of a precomputed kernel:
    ``f = K_test a`` for ``K_test [m_test, m]``."""

    LANES = ("coef",)
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    DIMS = {"coef": ("m", "k?")}
    FINITE = ("coef",)

    coef: jax.Array

    def predict(self, K_test):
        K_test = check_test_matrix(K_test, self.coef.shape[0], "K_test", "columns (training rows)")
        return _matmul(K_test, self.coef)


@saveable
class KernelModel(NamedTuple):
    """Kernel scoring ``f(x) = sum_i a_i k(x, x_i)`` with its training rows and kernel;
    ``predict(X, block_size=)`` bounds the memory of the ``[m_test, m]`` kernel block."""

    LANES = ("coef",)
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    DIMS = {"coef": ("m", "k?"), "X_train": ("m", "n")}
    FINITE = ("coef", "X_train")

    coef: jax.Array
    X_train: jax.Array
    kernel: Kernel

    num_features = columns_of("X_train", 1)          # columns of the rows it scores

    def predict(self, X, block_size: Optional[int] = None):
        return _kernel_scores(self.kernel, X, self.X_train, self.coef, block_size)


@saveable
class NystromModel(NamedTuple):
    """The basis-vector model ``f(x) = sum_{i in R} a_i k(x, x_i)`` (Pahikkala et al. 2009,
    §3.5): ``coef [b(, k)]`` over the basis points ``basis [b, n]`` (the training rows
    ``basis_rows [b]``) and the kernel; ``O(b)`` kernel values a predicted row."""

    LANES = ("coef",)
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    DIMS = {"coef": ("b", "k?"), "basis": ("b", "n"), "basis_rows": ("b",)}
    FINITE = ("coef", "basis")

    coef: jax.Array
    basis: jax.Array
    basis_rows: jax.Array
    kernel: Kernel

    num_features = columns_of("basis", 1)            # columns of the rows it scores

    def predict(self, X, block_size: Optional[int] = None):
        # a shifted kernel (fitted on a ranking graph) scores k - k0 and adds k0 sum(a) back
        return (_kernel_scores(self.kernel, X, self.basis, self.coef, block_size)
                + kernel_offset(self.kernel, self.coef, 0))


@saveable
class ScaledModel(NamedTuple):
    """A model of rows scaled per feature (learned ARD scales, :func:`rankjax.tune`):
    ``predict(X) = model.predict(X * scales)``; ``scales [n]``.

    Example:
      >>> import numpy as np
      >>> m = ScaledModel(np.array([2., 1.]), LinearModel(np.array([1., 1.])))
      >>> print(np.asarray(m.predict(np.array([[1., 1.]]))))
      [3.]
    """

    LANES = ("model",)
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    DIMS = {"scales": ("n",)}
    FINITE = ("scales",)

    scales: jax.Array
    model: object

    num_features = columns_of("scales", 0)          # columns of the rows it scores

    def check_parts(self):
        """The model scores the scaled rows: as many columns as there are scales."""
        parts_fit(self.model, self.scales.shape[0], "the scales")

    def predict(self, X, block_size: Optional[int] = None):
        X = check_test_matrix(X, self.scales.shape[0])
        kw = {} if block_size is None else {"block_size": block_size}
        scaled = as_float_array(scale_rows(as_dense(X), self.scales), "scaled rows", finite=True)
        return predict(self.model, scaled, **kw)      # checked once, as scaled rows


@saveable
class MappedModel(NamedTuple):
    """A model of rows mapped per feature by a :class:`~rankjax.FeatureMap`
    learned on the training rows (the estimators' ``feature_map="auto"``):
    ``predict(X) = model.predict(features(X))``; NaN and inf in ``X`` go to the map.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> X = np.array([[1., 0.], [2., np.nan], [4., 1.], [8., 1.]])
      >>> fm = rj.learn_feature_map(X, kind="standard")       # 2 columns and an indicator
      >>> m = MappedModel(fm, LinearModel(np.array([1., 0., 0.])))
      >>> print(np.round(np.asarray(m.predict(np.array([[2., np.nan]]))), 4))
      [0.746]
    """

    LANES = ("model",)
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    features: FeatureMap
    model: object

    @property
    def num_features(self):
        return self.features.num_features

    def check_parts(self):
        """The model scores the mapped rows: as many columns as the map writes."""
        parts_fit(self.model, self.features.center.shape[0], "the feature map's columns")

    def predict(self, X, block_size: Optional[int] = None):
        X = check_test_matrix(X, self.num_features, missing=True)
        kw = {} if block_size is None else {"block_size": block_size}
        return predict(self.model, self.features(as_dense(X)), **kw)


@saveable
class BlendModel(NamedTuple):
    """Two models of the same rows blended: ``predict(X) = weight * first.predict(X) + (1 -
    weight) * second.predict(X)``, ``weight`` a scalar in (0, 1). The kernel estimators'
    default keeps a blend of its kernel and linear candidates where the exact hold-out of the
    blended predictions scores above either alone (``docs/math.md`` §8).

    Example:
      >>> import numpy as np
      >>> m = BlendModel(LinearModel(np.array([1., 0.])), LinearModel(np.array([0., 1.])),
      ...                np.array(0.25))
      >>> print(np.asarray(m.predict(np.array([[4., 8.]]))))
      [7.]
    """

    FINITE = ("weight",)

    first: object
    second: object
    weight: jax.Array

    @property
    def num_features(self):
        return width_of(self.first)

    def check_parts(self):
        """Both models score rows of the same width; the weight is a scalar in (0, 1)."""
        w = np.asarray(self.weight)
        if w.shape != () or not 0 < float(w) < 1:
            raise FieldError("weight", f"a scalar in (0, 1), got {w.tolist()}")
        n = width_of(self.first)
        if n is not None:
            parts_fit(self.second, n, "the first model's rows")

    def predict(self, X, block_size: Optional[int] = None):
        w = self.weight
        return w * _bounded(self.first, X, block_size) + (1 - w) * _bounded(self.second, X,
                                                                               block_size)


def _bounded(model, X, block_size):
    """``model``'s scores of ``X``, ``block_size`` passed where its ``predict`` takes one."""
    takes = block_size is not None and "block_size" in inspect.signature(model.predict).parameters
    return predict(model, X, block_size=block_size) if takes else predict(model, X)


def parts_fit(model, width: int, what: str) -> None:
    """A :class:`~rankjax._core.types.FieldError` naming ``model`` where the columns it
    scores (where it records them) are not ``width``, those of ``what`` feeding it."""
    n = width_of(model)
    if n is not None and n != width:
        raise FieldError("model", f"scores rows of {n} columns, but {what} give {width}")


def on_features(features: FeatureMap, model):
    """The model of the user's rows of ``model`` fitted on rows mapped by ``features``: a
    :class:`MappedModel`, or for the scaling of sparse rows (``fill`` None) under a linear
    model its weights on the user's features (the same scores; sparse rows stay sparse)."""
    if features.fill is None and features.knots is None and isinstance(model, LinearModel):
        w = np.asarray(model.weights)
        return LinearModel(device_array(w * np.asarray(features.scale).reshape((-1,) + (1,) * (w.ndim - 1))))
    return MappedModel(features, model)


def feature_weights(model):
    """``[n(, k)]`` the weights of a linear model on the user's features (a
    :class:`LinearModel`, or one behind a standardising :class:`MappedModel`: its weights on
    the features times their scales), else None."""
    if isinstance(model, LinearModel):
        return model.weights
    if isinstance(model, MappedModel) and isinstance(model.model, LinearModel) \
            and model.features.knots is None and model.features.categorical.shape[0] == 0:
        n, w = model.features.num_features, np.asarray(model.model.weights)
        return w[:n] * np.asarray(model.features.scale)[:n].reshape((-1,) + (1,) * (w.ndim - 1))
    return None


def feature_importances(model):
    """``[n]`` non-negative, summing to 1, or None: how much each of the user's features
    weighs in ``model``. A blend: its parts' shares, by its weight. A linear model: the
    size of its weight on the standardised feature (``|w_j| / scale_j`` behind a standard
    map; ``|w_j|`` on features as given). A kernel
    model behind a rank map: the feature's share of the kernel's squared distance (its map
    weight squared, times its learned ARD scale squared). A missing indicator counts for its
    feature. None for other models."""
    inner = model.model if isinstance(model, MappedModel) else model
    fm = model.features if isinstance(model, MappedModel) else None
    if isinstance(inner, BlendModel):                # the parts' shares, by the weight
        parts = [feature_importances(m if fm is None else MappedModel(fm, m))
                 for m in (inner.first, inner.second)]
        w = float(inner.weight)
        return None if parts[0] is None or parts[1] is None else w * parts[0] + (1 - w) * parts[1]
    if isinstance(inner, LinearModel):
        w = np.abs(np.asarray(inner.weights, np.float64)).reshape(inner.weights.shape[0], -1).sum(1)
        if fm is None:
            return _shares(w, np.zeros(0, np.int32))
        return _shares(w, np.asarray(fm.missing))
    if fm is None or fm.knots is None:
        return None
    share = np.asarray(fm.scale, np.float64) ** 2
    if isinstance(inner, ScaledModel):
        share = share * np.asarray(inner.scales, np.float64) ** 2
    return _shares(share, np.asarray(fm.missing))


def _shares(v, missing):
    """``v [n + k]`` folded onto the ``n`` features (an indicator onto its feature), over its
    sum."""
    n = v.shape[0] - missing.shape[0]
    out = v[:n].copy()
    np.add.at(out, missing, v[n:])
    total = out.sum()
    return out / total if total > 0 else out


@saveable
class PrimalPath(NamedTuple):
    """Linear models of a λ grid: ``weights [L, n(, k)]``, the training scores
    ``[L, m(, k)]`` or ``None`` and the validation scores ``[L, m_valid(, k)]`` or ``None``;
    ``predict(X)`` is ``[L, m_test(, k)]``, ``model(i)`` the :class:`~rankjax.LinearModel` of ``lams[i]``."""

    LANES = ("weights", "train_scores", "valid_scores")
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    lams: jax.Array
    weights: jax.Array
    train_scores: Optional[jax.Array] = None
    valid_scores: Optional[jax.Array] = None

    def predict(self, X):
        return path_scores(check_test_matrix(X, self.weights.shape[1]), self.weights)

    def model(self, i) -> LinearModel:
        return LinearModel(lane(self.weights, i))


@saveable
class DualPath(NamedTuple):
    """Kernel models of a λ grid: ``coef [L, m(, k)]``, the training scores ``K A`` and
    the validation scores (or ``None``); with ``X_train`` and ``kernel`` it scores features
    (its models are :class:`KernelModel`), without them a precomputed ``K_test [m_test, m]``
    (:class:`DualModel`)."""

    LANES = ("coef", "train_scores", "valid_scores")
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    lams: jax.Array
    coef: jax.Array
    train_scores: Optional[jax.Array] = None
    valid_scores: Optional[jax.Array] = None
    X_train: Optional[jax.Array] = None
    kernel: Optional[Kernel] = None

    def predict(self, X, block_size: Optional[int] = None):
        if self.X_train is None:
            K = check_test_matrix(X, self.coef.shape[1], "K_test", "columns (training rows)")
        else:
            X = check_test_matrix(X, self.X_train.shape[1])
            K = kernel_matrix(self.kernel, X, self.X_train, block_size=block_size)
        return path_scores(K, self.coef)

    def model(self, i):
        if self.X_train is None:
            return DualModel(lane(self.coef, i))
        return KernelModel(lane(self.coef, i), self.X_train, self.kernel)


@saveable
class NystromPath(NamedTuple):
    """Nyström models of a λ grid: ``coef [L, b(, k)]`` over the basis points ``basis [b, n]``
    (the training rows ``basis_rows [b]``), training and validation scores as
    :class:`PrimalPath`; ``predict(X [m_test, n])``, ``model(i)`` a :class:`NystromModel`."""

    LANES = ("coef", "train_scores", "valid_scores")
    """The fields holding the λ lanes (``rankjax._solution.nan_lanes``)."""

    lams: jax.Array
    coef: jax.Array
    basis: jax.Array
    basis_rows: jax.Array
    kernel: Kernel
    train_scores: Optional[jax.Array] = None
    valid_scores: Optional[jax.Array] = None

    def predict(self, X, block_size: Optional[int] = None):
        X = check_test_matrix(X, self.basis.shape[1])
        return (path_scores(kernel_matrix(self.kernel, X, self.basis, block_size=block_size),
                            self.coef) + kernel_offset(self.kernel, self.coef, 1))

    def model(self, i) -> NystromModel:
        return NystromModel(lane(self.coef, i), self.basis, self.basis_rows, self.kernel)


def predict(model, X, **kw):
    """Scores of new rows, for every model and path type of the library.

    ``model.predict(X)``: linear, kernel and Nyström models and paths take features
    ``[m_test, n]`` (dense or BCOO); :class:`DualModel` and the paths of a precomputed
    kernel take the test kernel ``[m_test, m]``; kernel models evaluate the kernel
    themselves (``block_size=`` bounds its memory). Paths return ``[L, m_test(, k)]``
    (λ axis first), single models ``[m_test(, k)]``.

    Example:
      >>> import numpy as np
      >>> print(np.asarray(predict(LinearModel(np.array([1., -1.])), np.array([[2., 1.]]))))
      [1.]
    """
    fn = getattr(model, "predict", None)
    if not callable(fn) or isinstance(model, type):
        raise TypeError(f"predict needs a rankjax model or path, got {type(model).__name__}")
    takes = inspect.signature(fn).parameters
    for key in kw:
        if key not in takes:
            raise TypeError(f"predict got an unexpected keyword argument {key!r} "
                            f"({type(model).__name__}.predict takes {', '.join(takes) or 'X only'})")
    return fn(X, **kw)


def is_linear(model) -> bool:
    r"""Whether ``model`` scores by :math:`x^T w` (a :class:`~rankjax.LinearModel`: sparse ``X`` allowed)."""
    return isinstance(model, LinearModel)
