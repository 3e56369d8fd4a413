"""Validity inside compiled code, where nothing can raise: traced masks of valid parameters
and row indices, and the under-``jit`` contract that turns the values they refuse into NaN (the host
checks of the same inputs: :mod:`rankjax._core.checks`)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


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
    λ axis, first in every leaf); integer leaves are left alone.

    A NaN never hides in a derivative (:func:`refused`): a loss that uses a refused lane
    has NaN derivatives (not the finite derivative of the other lanes that a ``where``
    would give), a loss that leaves it out (a zero cotangent there) has its own.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> ok = jnp.array([True, False])
      >>> f = lambda x: jnp.sum(nan_unless(ok, x * jnp.ones(2)))
      >>> bool(jnp.isnan(jax.grad(f)(1.0)))
      True
      >>> bool(jax.grad(lambda x: nan_unless(ok, x * jnp.ones(2))[0])(1.0) == 1.0)
      True
    """
    ok = jnp.asarray(ok)

    def one(a):
        if not jnp.issubdtype(a.dtype, jnp.inexact):
            return a
        return refused(ok.reshape(ok.shape + (1,) * (a.ndim - ok.ndim)), a)
    return jax.tree.map(one, tree)


def refused(ok, a):
    r"""``a`` with NaN where ``ok`` (broadcast) is False, as a linear map of ``a`` whose
    transpose is NaN exactly where a nonzero cotangent meets a refused entry (IEEE's
    :math:`0 \cdot \text{NaN}` would make every cotangent there NaN, the ``where`` of
    :func:`jax.numpy.where` makes none): ``lax.custom_linear_solve`` with the identity as
    its operator carries the two maps (forward mode: NaN tangents in refused entries)."""
    def mask(_, v):
        return jnp.where(ok, v, v * jnp.nan)

    def mask_transpose(_, ct):
        return jnp.where(ok, ct, jnp.where(ct == 0, jnp.zeros_like(ct), jnp.nan))

    return lax.custom_linear_solve(lambda v: v, a, mask, mask_transpose)
