"""The machinery around the numerics, apart from them: XLA's flags (set when this folder
is imported, before JAX starts a backend; :mod:`~rankjax.runtime.xla`), JAX's on-disk cache
of compiled programs (:mod:`~rankjax.runtime.cache`) and the store of whole programs that
serves the compiled cores (:mod:`~rankjax.runtime.programs`, its state one object). The
package imports it first; no numerics module imports it (the cores' seat,
:attr:`rankjax._core.cores.Core.server`, is how it reaches them).
"""
from . import xla as xla  # noqa: F401  (first: the flags before any backend)
from . import programs as programs
from .cache import use_disk_cache as use_disk_cache

programs.install()

__all__ = ["use_disk_cache"]
