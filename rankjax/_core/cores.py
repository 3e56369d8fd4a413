"""Compiled cores: ``jax.jit`` of a numerics function, with one seat for the runtime.

A solver's or a metric's core is declared here (:func:`core`), as a plain ``jax.jit``; the
runtime (:mod:`rankjax.runtime`, imported with the package, never by the numerics) takes the
seat, :attr:`Core.server`, and serves every call outside a trace: XLA:CPU options that
compile faster, the store of whole programs on disk, a compilation started ahead on
another thread. With the seat empty a core is ``jax.jit`` and nothing more.

Example:
  >>> import jax.numpy as jnp
  >>> double = core(lambda x: 2 * x)
  >>> print(double(jnp.arange(3.)))
  [0. 2. 4.]
"""
from __future__ import annotations

import functools
from typing import ClassVar

import jax

__all__ = ["Core", "core"]


class Core:
    """A jitted function (every attribute of the ``jax.jit`` object is forwarded) whose
    calls the runtime may serve."""

    server: ClassVar = None
    """What serves the calls: an object with ``call(core, args, kwargs)`` and
    ``ahead(core, args, kwargs)`` (:mod:`rankjax.runtime.programs`), or ``None``."""

    def __init__(self, fn, static_argnames=(), static_argnums=()):
        self.static_argnames, self.static_argnums = tuple(static_argnames), tuple(static_argnums)
        self.jitted = jax.jit(fn, static_argnames=static_argnames, static_argnums=static_argnums)
        functools.update_wrapper(self, fn)

    def __getattr__(self, name):
        return getattr(self.jitted, name)

    def __call__(self, *args, **kwargs):
        server = Core.server
        if server is None:
            return self.jitted(*args, **kwargs)
        return server.call(self, args, kwargs)

    def ahead(self, *args, **kwargs) -> None:
        """Lets the runtime compile this call on another thread while the caller goes on
        (nothing runs; the next call waits for it); a no-op without a runtime."""
        server = Core.server
        if server is not None:
            server.ahead(self, args, kwargs)


def core(fn=None, *, static_argnames=(), static_argnums=()):
    """A :class:`Core` of ``fn``; usable as ``@core`` or ``@core(static_argnames=...)``."""
    if fn is None:
        return lambda f: Core(f, static_argnames, static_argnums)
    return Core(fn, static_argnames, static_argnums)
