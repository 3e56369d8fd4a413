"""JAX's on-disk cache of compiled programs, on by default for the estimators and the
command line.

A fresh process compiles every program of a fit again (the kernel ``RankRLSCV`` on
3,005 rows: most of its first fit); with the cache a later process reads them from disk.
The first ``fit`` of an estimator and :func:`rankjax.cli.main` call :func:`use_disk_cache`:

* a cache the user configured (``jax_compilation_cache_dir``, e.g. through the
  ``JAX_COMPILATION_CACHE_DIR`` variable) is left alone, settings and all;
* ``RANKJAX_DISK_CACHE=0`` (or ``off``, ``false``, ``no``) leaves the cache off;
  ``RANKJAX_DISK_CACHE=/some/folder`` uses that folder;
* otherwise the folder is ``rankjax/jax-programs`` in the user's cache folder
  (``$XDG_CACHE_HOME`` or ``~/.cache``; ``~/Library/Caches`` on macOS;
  ``%LOCALAPPDATA%`` on Windows), and programs that took at least
  :data:`MIN_COMPILE_S` to compile are kept.

While it is on, the hold-outs and the selection are also kept whole in the folder (compiled
executables on the CPU, exports elsewhere; :mod:`rankjax.runtime.programs`): a later process does
not trace them.

The library's functions (``rj.fit``, ``rj.holdout``, ...) change no global setting: a JAX
user turns the cache on as JAX documents, or calls :func:`use_disk_cache`.

Example:
  >>> cache_folder().parts[-2:]
  ('rankjax', 'jax-programs')
"""
from __future__ import annotations

import os
import pathlib
import sys
from typing import Optional

import jax

ENV = "RANKJAX_DISK_CACHE"
OFF = ("0", "off", "false", "no")
MIN_COMPILE_S = 0.1
"""Programs that compile faster than this are not written (reading one costs about as much)."""

_done: list = []


def cache_folder() -> pathlib.Path:
    """The default folder: ``rankjax/jax-programs`` in the platform's user cache folder."""
    if sys.platform == "darwin":
        base = pathlib.Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = pathlib.Path(os.environ.get("LOCALAPPDATA", pathlib.Path.home() / "AppData" / "Local"))
    else:
        base = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
    return base / "rankjax" / "jax-programs"


def use_disk_cache() -> Optional[str]:
    """Turns JAX's persistent compilation cache on (see the module docstring) once per
    process; returns the folder in use, or ``None`` when it stays off. A folder that cannot
    be created leaves the cache off (a read-only home is not an error)."""
    configured = jax.config.jax_compilation_cache_dir
    if configured:
        return configured
    if _done:
        return None
    _done.append(True)
    setting = os.environ.get(ENV, "").strip()
    if setting.lower() in OFF:
        return None
    folder = pathlib.Path(setting) if setting and setting.lower() not in ("1", "on", "true", "yes") \
        else cache_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    from jax.experimental.compilation_cache import compilation_cache
    from .programs import turn_on
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    compilation_cache.reset_cache()     # a program compiled before this call checked it off
    turn_on(folder)                     # and the traced programs themselves (rankjax.runtime.programs)
    return str(folder)
