"""Files on the host: transparent decompression by magic bytes, atomic writes
(a failed write leaves the old file) and integer-valued columns.
"""
from __future__ import annotations

import contextlib
import io
import lzma
import os
import tempfile
import time
import zlib

import numpy as np

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "lzma"))


def open_binary(path):
    """The file, decompressed transparently when it is gzip, bz2 or xz (by its first
    bytes, as scikit-learn's loader does by extension). Reading a damaged or truncated
    archive is a ``ValueError`` naming the file (not the decompressor's ``EOFError`` or
    ``zlib.error``)."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        head = fh.read(6)
    for magic, module in _MAGIC:
        if head.startswith(magic):
            return io.BufferedReader(_Checked(__import__(module).open(path, "rb"), path, module))
    return open(path, "rb")


class _Checked(io.RawIOBase):
    """A decompressing reader whose errors name the file: a ValueError ``PATH: a damaged or
    truncated gzip file (...)``."""

    def __init__(self, fh, path: str, kind: str):
        super().__init__()
        self._fh, self._path, self._kind = fh, path, kind

    def readable(self) -> bool:
        return True

    def readinto(self, b):
        try:
            return self._fh.readinto(b)
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:
            raise ValueError(f"{self._path}: a damaged or truncated {self._kind} file "
                             f"({e})") from None

    def close(self):
        self._fh.close()
        super().close()


def text_lines(path):
    """``(line number, text)`` of each line of the file (decompressed as
    :func:`open_binary`), decoded as UTF-8 line by line: a line that is not is a ValueError
    naming the file, the line and the byte."""
    with open_binary(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            yield lineno, utf8(raw, path, lineno)


def utf8(raw: bytes, path, lineno: int) -> str:
    """``raw`` decoded as UTF-8, or a ValueError naming ``path``, the line and the byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: line {lineno}: not UTF-8 text (byte {raw[e.start]:#04x} at "
                         f"column {e.start + 1})") from None


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


def as_integers(v, name: str) -> np.ndarray:
    """Integer-valued input (ints, or floats without a fractional part) as int64;
    anything else is an error (never truncated)."""
    a = np.asarray(v)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind != "f" or not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
        raise ValueError(f"{name} must hold integers, got values like {a.ravel()[:3].tolist()}")
    if a.size and np.max(np.abs(a)) >= 2.0 ** 63:
        raise ValueError(f"{name} holds values outside the int64 range")
    return a.astype(np.int64)


def format_value(v: float) -> str:
    return repr(float(v)) if v != int(v) else str(int(v))
