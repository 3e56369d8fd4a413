"""Atomic writes: a file is replaced only when everything was written, and no temporary file
outlives its write (the remains of a killed one go with the next write of the same path)."""
from __future__ import annotations

import contextlib
import os
import tempfile
import time

__all__ = ["atomic_write"]


STALE_S = 3600.0
"""A temporary file of :func:`atomic_write` older than this is another write's remains
whatever its process (a folder shared between machines, where the process id says nothing)."""


@contextlib.contextmanager
def atomic_write(path, mode="w"):
    """Writes to a temporary file beside ``path`` (``.NAME.PID.XXXX.tmp``) and renames it
    over ``path`` only when everything was written: a failed write leaves the old file
    intact and no temporary file. The remains of a write that was killed (its process gone,
    or older than :data:`STALE_S`) are removed by the next write of ``path``."""
    path = os.fspath(path)
    folder, name = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    _remove_stale(folder, name)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())     # mkstemp makes 0600: a new file follows the umask
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _remove_stale(folder: str, name: str) -> None:
    """Removes ``folder/.name.PID.XXXX.tmp`` files whose process is gone or that are older
    than :data:`STALE_S` (never another live write's)."""
    prefix = f".{name}."
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for e in entries:
            if not (e.name.startswith(prefix) and e.name.endswith(".tmp")):
                continue
            pid = e.name[len(prefix):].split(".")[0]
            with contextlib.suppress(OSError, ValueError):
                if not _alive(int(pid)) or time.time() - e.stat().st_mtime > STALE_S:
                    os.unlink(e.path)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (ours always does; on Windows, where
    ``os.kill`` would end it, every process counts as running: age decides there)."""
    if pid == os.getpid() or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
