"""The one result code of the precision rule (docs/design.md): a λ the compute dtype does
not resolve gives a NaN lane, and outside ``jit`` an :class:`UnresolvedLambdaWarning`
naming it."""
from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np

from .host import host_view, is_concrete, reduce_concrete, reduction
from .log import user_stacklevel

__all__ = ["UnresolvedLambdaWarning", "warn_unresolved"]


class UnresolvedLambdaWarning(UserWarning):
    """Some λ of a grid lie below what the compute dtype resolves (their lanes are NaN)."""


_nan_lanes = reduction(lambda xp, x: xp.all(xp.isnan(x).reshape(x.shape[0], -1), axis=1))


def warn_unresolved(values, lams, where: str, why: str):
    """Outside jit: an :class:`UnresolvedLambdaWarning` naming the λ whose lane of
    ``values`` (``[L, ...]``, λ axis first; or one λ and a lane-free result) is NaN, the
    one result code of the precision rule (docs/design.md); one reduction (:func:`reduce_concrete`)."""
    if not is_concrete(values) or not is_concrete(lams):
        return
    lams = np.atleast_1d(np.asarray(lams))
    view = host_view(values)                  # the CPU: numpy, no program per shape
    values = jnp.asarray(values) if view is None else view
    lanes = values[None] if lams.shape[0] == 1 and (values.ndim == 0 or values.shape[0] != 1) else values
    bad = lams[np.asarray(reduce_concrete(_nan_lanes, lanes))]
    if bad.size:
        shown = ", ".join(f"{v:.3g}" for v in bad)
        warnings.warn(f"{where}: lams {shown} are not resolved in {values.dtype}: {why}; their "
                      "results are NaN. Use float64 (jax_enable_x64) or larger λ",
                      UnresolvedLambdaWarning, stacklevel=user_stacklevel())
