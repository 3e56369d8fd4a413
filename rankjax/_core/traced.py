"""Validity inside compiled code, where nothing can raise: traced masks of valid parameters
and row indices, and the under-``jit`` contract that turns the values they refuse into NaN (the host
checks of the same inputs: :mod:`rankjax._core.checks`)."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def indices_ok(v, upper: int):
    """Traced validity of row indices (all in ``[0, upper)``), for :func:`nan_unless`."""
    return jnp.all((v >= 0) & (v < upper))


def finite_positive(value, allow_zero: bool = False):
    """Traced validity of a positive parameter (a tolerance, a kernel's γ, a learner's
    ``C``): finite and ``> 0`` (``>= 0``). A solver's λ has its one rule in
    :func:`rankjax._solution.lams_valid`, applied by the verbs."""
    value = jnp.asarray(value)
    return jnp.isfinite(value) & ((value >= 0) if allow_zero else (value > 0))


def nan_unless(ok, tree):
    """The under-``jit`` contract for values that cannot raise there: every floating
    leaf of ``tree`` is NaN where ``ok`` is False. ``ok`` is ``[]`` or ``[L]`` (the
    λ axis, first in every leaf); integer leaves are left alone."""
    def one(a):
        if not jnp.issubdtype(a.dtype, jnp.inexact):
            return a
        return jnp.where(ok.reshape(ok.shape + (1,) * (a.ndim - ok.ndim)), a, jnp.nan)
    return jax.tree.map(one, tree)
