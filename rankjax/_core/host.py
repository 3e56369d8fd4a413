"""Values between the host and the device without a program per shape.

A check of concrete inputs (``max |x|``, NaN lanes, the variance of ``"scale"``) is a
reduction; jitted, it is one small program per input shape, and a fit on a new row count
compiled six of them beside its two real programs. On the CPU the device array already
lives in the host's memory: :func:`host_view` reads it as numpy without a copy and
:func:`reduce_concrete` runs the reduction's numpy body there. Elsewhere the jitted body
runs and only its result leaves the device.
"""
from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .sparse import is_sparse, sparse_values


def device_array(x, dtype=None):
    """Host data to a device array without compiling anything (``jax.device_put``;
    ``jnp.asarray`` of a numpy array compiles a staging program per shape)."""
    if isinstance(x, jax.Array):
        return x if dtype is None else x.astype(dtype)
    a = np.asarray(x)
    dt = jax.dtypes.canonicalize_dtype(a.dtype if dtype is None else dtype)
    return jax.device_put(a.astype(dt, copy=False))


class Reduction(NamedTuple):
    """A check's reduction of concrete arrays, written for both sides (:func:`reduction`):
    ``host`` on numpy arrays, ``device`` a jitted program."""

    host: Callable
    device: Callable


def reduction(body: Callable, host: Optional[Callable] = None) -> Reduction:
    """A :class:`Reduction` from ``body(xp, *arrays)``, one body for numpy and ``jax.numpy``
    (or a ``host`` of its own where numpy's spelling would copy the data)."""
    return Reduction(host or partial(body, np), jax.jit(partial(body, jnp)))


def host_view(x):
    """``x`` as numpy without a copy: itself for numpy, a view of a concrete jax array held
    whole by one CPU device (the host's memory); ``None`` for anything else (an accelerator's
    array would be copied, a tracer has no values)."""
    if isinstance(x, np.ndarray):
        return x
    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer) or not x.is_fully_addressable:
        return None
    devices = x.devices()
    if len(devices) != 1 or next(iter(devices)).platform != "cpu":
        return None
    return np.asarray(x)


def reduce_concrete(fn: Reduction, *args):
    """Host value of ``fn(*args)`` on concrete arrays: on numpy views where every argument
    has one (:func:`host_view`: numpy input, or the CPU, where the data already is in the
    host's memory and a program per shape would cost more to compile than the pass), else
    its jitted program, whose result alone leaves the device (also inside a caller's trace).

    Example:
      >>> any_negative = reduction(lambda xp, y: xp.any(y < 0))
      >>> bool(reduce_concrete(any_negative, jnp.array([1., -2.])))
      True
    """
    views = [host_view(a) for a in args]
    if all(v is not None for v in views):
        return fn.host(*views)
    with jax.ensure_compile_time_eval():
        return jax.device_get(fn.device(*args))


def lane(x, i):
    """``x[i]`` (an index or a slice) of a concrete array; on the CPU taken from its numpy
    view and put back (:func:`device_array`), not by a slicing program for each shape."""
    view = host_view(x)
    return x[i] if view is None or isinstance(x, np.ndarray) else device_array(view[i])


def is_concrete(x) -> bool:
    """True when ``x`` holds values on the host side (not a jax tracer): what a host check
    may read."""
    if is_sparse(x):
        return is_concrete(sparse_values(x))
    return not isinstance(x, jax.core.Tracer)
