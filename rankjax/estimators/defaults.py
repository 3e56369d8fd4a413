"""The kernel estimators' defaults: ``gamma`` resolved on the training rows as the kernel sees
them, the kernel by name, and the Nyström basis of ``basis="auto"``."""
from __future__ import annotations

import numpy as np

from .._core import log as _log
from .._core.checks import is_int
from ..kernels import kernel as _kernels
from ..kernels.basis import Basis


GAMMAS = ("mean", "scale", "auto")
"""The data-scaled values of a kernel estimator's ``gamma``."""


def gamma_value(gamma, X):
    """``gamma`` as a number, on the rows the kernel sees (after the feature map):
    ``"mean"`` is one over the mean squared distance of two training rows
    (:func:`~rankjax.kernels.kernel.mean_gamma`), ``"scale"`` scikit-learn's ``1 / (n *
    var(X))`` over every entry, ``"auto"`` ``1 / n``."""
    if not isinstance(gamma, str):
        return gamma
    if gamma not in GAMMAS:
        raise ValueError(f"gamma must be a positive number, 'mean', 'scale' or 'auto', got {gamma!r}")
    n = X.shape[1]
    if gamma == "auto":
        return 1.0 / n
    return _kernels.mean_gamma(X) if gamma == "mean" else _kernels.scale_gamma(X)


def make_kernel(kind, gamma, degree, coef0):
    if kind is None or kind == "linear":
        return None
    if isinstance(kind, _kernels.Kernel):
        return kind
    if kind == "gaussian" or kind == "rbf":
        return _kernels.gaussian_kernel(gamma)
    if kind == "polynomial" or kind == "poly":
        return _kernels.polynomial_kernel(degree, gamma, coef0)
    raise ValueError(f"kernel must be None, 'linear', 'gaussian', 'polynomial' or a Kernel, "
                     f"got {kind!r}")


AUTO_BASIS_ROWS = 5000
"""Above this many training rows a kernel estimator with ``basis="auto"`` switches from
the exact kernel (``m x m`` matrices, :math:`O(m^3)`) to a Nyström basis of
:data:`AUTO_BASIS_SIZE` rows (:math:`O(m b^2)` time, O(m b) memory)."""


AUTO_BASIS_SIZE = 1000
"""The least basis of ``basis="auto"`` (above :data:`AUTO_BASIS_ROWS` rows)."""


def auto_basis_size(m: int) -> int:
    r"""The basis rows of ``basis="auto"`` on ``m`` training rows (above
    :data:`AUTO_BASIS_ROWS`, drawn by kernel k-means++ seeding): :math:`\min(m, \max(AUTO_{BASIS}_{SIZE},
    \sqrt{m}))`, never fewer as ``m`` grows (the basis a given accuracy needs grows with the data, about as
    :math:`\sqrt{m}`: Rudi, Camoriano and Rosasco 2015), and small enough that a 4 γ x 13 λ
    ``RankRLSCV`` at :math:`10^{6}` rows stays within the time ``benchmarks/bench_million.py``
    reports. A smaller basis is the user's choice (``basis=``).

    Example:
      >>> auto_basis_size(20_000), auto_basis_size(1_000_000), auto_basis_size(4_000_000)
      (1000, 1000, 2000)
    """
    return int(min(m, max(AUTO_BASIS_SIZE, np.sqrt(max(m, 0)))))


def basis_spec(basis, kernel, m: int, seed: int = 0, verbose: int = 0):
    """The Nyström basis an estimator uses (a :class:`rankjax.Basis`), or None for the
    exact kernel / linear model. ``basis``: ``"auto"``, ``None``, an int (uniform rows,
    ``seed``) or a :class:`rankjax.Basis` (its own size or rows, method and seed). With
    ``verbose``, a line says which and why."""
    out = _basis_spec(basis, kernel, m, seed)
    if out is not None and basis == "auto":
        _log.info(verbose, "basis: %d of %d rows (basis='auto': more than %d rows, "
                  "max(%d, sqrt(m)) rows, kmeans++)", out.size, m, AUTO_BASIS_ROWS, AUTO_BASIS_SIZE)
    elif out is None and basis == "auto" and kernel not in (None, "linear"):
        _log.info(verbose, "exact kernel (basis='auto': %d rows, at most %d)", m,
                  AUTO_BASIS_ROWS)
    return out


def _basis_spec(basis, kernel, m, seed):
    if kernel is None or kernel == "linear":
        if basis not in (None, "auto"):
            raise ValueError("basis is used with a kernel (kernel='gaussian', ...), not the linear model")
        return None
    if isinstance(basis, Basis):
        return basis
    if basis == "auto":
        return Basis(auto_basis_size(m), method="kmeans++", seed=seed) if m > AUTO_BASIS_ROWS else None
    if basis is None:
        return None
    if not is_int(basis) or basis < 1:
        raise ValueError(f"basis must be 'auto', None, a positive int or a rankjax.Basis, got {basis!r}")
    return Basis(min(int(basis), m), seed=seed)
