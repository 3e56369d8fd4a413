"""Validity inside compiled code, where nothing can raise: traced masks of valid λ and row
indices, and the under-``jit`` contract that turns the values they refuse into NaN (the host
checks of the same inputs: :mod:`rankjax._core.checks`)."""
from __future__ import annotations

import jax
import jax.numpy as jnp


def indices_ok(v, upper: int):
    """Traced validity of row indices (all in ``[0, upper)``), for :func:`nan_unless`."""
    return jnp.all((v >= 0) & (v < upper))


def lam_ok(lam, allow_zero: bool = False):
    """Traced validity of λ (or a grid ``[L]``): finite and ``> 0`` (``>= 0``)."""
    lam = jnp.asarray(lam)
    return jnp.isfinite(lam) & ((lam >= 0) if allow_zero else (lam > 0))


def nan_unless(ok, tree):
    """The under-``jit`` contract for values that cannot raise there: every floating
    leaf of ``tree`` is NaN where ``ok`` is False. ``ok`` is ``[]`` or ``[L]`` (the
    λ axis, first in every leaf); integer leaves are left alone."""
    def one(a):
        if not jnp.issubdtype(a.dtype, jnp.inexact):
            return a
        return jnp.where(ok.reshape(ok.shape + (1,) * (a.ndim - ok.ndim)), a, jnp.nan)
    return jax.tree.map(one, tree)
