"""The program store's files (:mod:`rankjax.runtime.programs`): one per kept program, named by
its key, holding ``(key, contents, skeleton)``. A cache, never trusted: a file that is not a
regular file, is torn, foreign or another key's is ignored (the program is compiled again and
the file replaced), and reading one runs no code (:class:`_Unpickler`)."""
from __future__ import annotations

import os
import pickle
import shutil
import stat

from .._core.atomic import atomic_write

__all__ = ["read_entry", "write_entry"]


class _Unpickler(pickle.Unpickler):
    """Reads a kept program's file: only classes of jax, jaxlib and rankjax (a pytree's
    structure, the output's skeleton, an export's types) and JAX's pytree registries, never
    a function or another module's object: a file put in the folder runs no code."""

    def find_class(self, module, name):
        if module.split(".")[0] in ("jax", "jaxlib", "rankjax"):
            obj = super().find_class(module, name)
            if isinstance(obj, type) or (module == "jax._src.tree_util"
                                         and name.endswith("_registry")):
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not read from a program file")


def read_entry(path, key):
    """``(contents, skeleton)`` of ``key``'s file, or ``None`` where it is absent, not a
    regular file (a folder, a FIFO: never opened), torn, foreign or another key's (a file
    copied or swapped): then the program is compiled again and the file replaced."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            got, contents, skeleton = _Unpickler(fh).load()
    except Exception:             # noqa: BLE001  a torn or foreign file: compile again
        return None
    return (contents, skeleton) if got == key else None


def write_entry(path, key, contents, skeleton) -> None:
    """Atomically (:func:`~rankjax._core.atomic.atomic_write`: a temporary file renamed, never
    left behind), over whatever stands at ``path`` (a folder is removed first); a folder
    that cannot be written is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        with atomic_write(path, "wb") as fh:
            pickle.dump((key, contents, skeleton), fh)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass
