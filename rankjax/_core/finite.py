"""Finiteness of concrete arrays at the public boundary, counted and remembered.

``max |x|`` by one device reduction (host passes for numpy input, no copy), the arrays this
process already found finite (JAX arrays are immutable: not checked twice), the first
non-finite entry for an error message, and float64 host values the compute dtype cannot hold.
"""
from __future__ import annotations

import collections
import weakref

import jax
import numpy as np

from .host import is_concrete, reduce_concrete, reduction
from .sparse import is_scipy_sparse, is_sparse, sparse_values


def max_abs_host(a):
    return np.maximum(-float(a.min()), float(a.max()))      # floats: no unsigned wrap-around


_max_abs = reduction(lambda xp, x: xp.max(xp.abs(x)), max_abs_host)


_min_max = reduction(lambda xp, x: (xp.min(x), xp.max(x)))


def max_abs(x) -> float:
    """``max |x|`` of a concrete array (NaN when it holds a NaN, 0 when empty): one device
    reduction for a jax array (remembered for an array checked finite here, which is
    immutable), two host passes for numpy input (no temporary copy)."""
    x = sparse_values(x)
    entry = _FINITE.get(id(x))
    if entry is not None and entry[0]() is x:
        return entry[1]
    if getattr(x, "size", 1) == 0:
        return 0.0
    return float(reduce_concrete(_max_abs, x if isinstance(x, jax.Array) else np.asarray(x)))


def all_finite(x) -> bool:
    """True when every value is finite: numpy input is checked on the host, a jax
    array by one device reduction (no copy of the data to the host)."""
    return bool(np.isfinite(max_abs(x)))


def value_range(x):
    """``(min, max)`` of a non-empty concrete array (:func:`reduce_concrete`)."""
    lo, hi = reduce_concrete(_min_max, x if isinstance(x, jax.Array) else np.asarray(x))
    return lo.item(), hi.item()


VALIDATIONS = collections.Counter()
"""How many host validations ran, by argument name: a finiteness check of an array (one
device reduction or host pass) and a remap of query ids each count one. An array this
library produced and already checked is not checked again (:func:`known_finite`), and a
:class:`Segments` is not remapped again; ``tests/test_validation_count.py`` holds the
estimators to one validation per input."""


_FINITE = {}         # id -> (weakref, max |x|) of a jax array (immutable) checked finite


def known_finite(x) -> bool:
    """Whether ``x`` is a concrete JAX array (or BCOO) this process already found finite:
    JAX arrays are immutable, so the check need not run again."""
    entry = _FINITE.get(id(x))
    return entry is not None and entry[0]() is x


def mark_finite(x, top: float) -> None:
    """Remembers ``x`` (its values: ``max |x| = top``) as checked finite."""
    if (isinstance(x, jax.Array) or is_sparse(x)) and is_concrete(x) and not is_scipy_sparse(x):
        for a in {id(v): v for v in (sparse_values(x), x)}.values():
            _FINITE[id(a)] = (weakref.ref(a, lambda _, key=id(a): _FINITE.pop(key, None)), top)


def finite_top(x, name: str):
    """Refuses NaN/inf in a concrete ``x`` (counted in :data:`VALIDATIONS`); returns
    ``max |x|`` (``None`` when traced)."""
    if not is_concrete(x):
        return None
    VALIDATIONS[name] += 1
    top = max_abs(x)
    if not np.isfinite(top):
        raise ValueError(f"{name} contains NaN or inf values{first_nonfinite(x)}")
    fits_compute_dtype(x, name)
    return top


def first_nonfinite(x) -> str:
    """`` (row i, column j: nan)``: the first NaN or inf of a concrete ``x``, for an error
    message (a pass over the data on the failing path only)."""
    v = np.asarray(jax.device_get(sparse_values(x)))
    bad = np.argwhere(~np.isfinite(v))
    at = tuple(int(i) for i in bad[0]) if bad.size else ()
    where = f"row {at[0]}, column {at[1]}" if v.ndim == 2 and sparse_values(x) is x else f"entry {at}"
    return f" ({where}: {v[at]})" if at else ""


X64_HINT = "jax.config.update('jax_enable_x64', True)"


def fits_compute_dtype(x, name: str) -> None:
    """Host floats are cast to the compute dtype (float32 unless x64 is on): finite
    float64 values beyond float32's range would become inf there, so they are refused
    here, before the cast, with the figure."""
    data = sparse_values(x)
    if isinstance(data, jax.Array) or not is_concrete(data):
        return                                   # already in its compute dtype
    a = np.asarray(data)
    if a.dtype.kind != "f" or a.size == 0:
        return
    target = jax.dtypes.canonicalize_dtype(a.dtype)
    if np.finfo(target).max >= np.finfo(a.dtype).max:
        return
    finite = np.abs(a[np.isfinite(a)])                  # NaN and inf: a feature map's
    top = float(finite.max(initial=0.0))
    if top > float(np.finfo(target).max):
        raise ValueError(f"{name} has values up to {top:.3g}, beyond the range of the {target} "
                         f"compute dtype (max {np.finfo(target).max:.3g}): they would become inf; "
                         f"rescale {name}, or compute in float64 ({X64_HINT})")
