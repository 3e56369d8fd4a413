"""The warning a Gaussian kernel on features as given deserves (``feature_map=None``): one
column's spread so far beyond the others' that the kernel's dtype cannot see them."""
from __future__ import annotations

import warnings

import numpy as np

from .._core.host import reduce_concrete, reduction

__all__ = ["warn_wide_spread"]

_spread = reduction(lambda xp, X: xp.std(X, axis=0))


def warn_wide_spread(X, stacklevel: int = 5) -> None:
    """Warns (``RuntimeWarning``) when the widest column's standard deviation on rows ``X`` is
    so far beyond the median column's that a Gaussian kernel in ``X``'s dtype cannot resolve
    the typical column beside it (squared distances keep about ``eps`` of their size: a spread
    ratio above :math:`1 / \\sqrt{eps}`, 2,900 in float32, 6.7e7 in float64).

    Example:
      >>> import warnings, numpy as np
      >>> X = np.c_[np.arange(8.) * 1e5, np.arange(8.) % 3, np.arange(8.) % 2]
      >>> with warnings.catch_warnings(record=True) as w:
      ...     warnings.simplefilter("always")
      ...     warn_wide_spread(X.astype(np.float32))
      >>> "column 0" in str(w[0].message)
      True
    """
    s = np.asarray(reduce_concrete(_spread, X))
    live = s[s > 0]
    if live.size < 2:
        return
    j, ratio = int(np.argmax(s)), float(live.max() / np.median(live))
    if ratio > 1 / np.sqrt(np.finfo(s.dtype).eps):
        warnings.warn(f"column {j}'s spread (standard deviation {s[j]:.3g}) is {ratio:.3g} times "
                      f"the median column's: a Gaussian kernel in {s.dtype} cannot resolve the "
                      "typical column beside it; feature_map='auto' maps every column by its "
                      "ranks", RuntimeWarning, stacklevel=stacklevel)
