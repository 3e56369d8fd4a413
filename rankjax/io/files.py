"""Files on the host: transparent decompression by magic bytes, atomic writes
(a failed write leaves the old file) and integer-valued columns.
"""
from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "lzma"))


def open_binary(path):
    """The file, decompressed transparently when it is gzip, bz2 or xz (by its first
    bytes, as scikit-learn's loader does by extension)."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        head = fh.read(6)
    for magic, module in _MAGIC:
        if head.startswith(magic):
            return __import__(module).open(path, "rb")
    return open(path, "rb")


def open_text(path):
    return __import__("io").TextIOWrapper(open_binary(path), encoding="utf-8")


@contextlib.contextmanager
def atomic_write(path, mode="w"):
    """Writes to a temporary file beside ``path`` and renames it over ``path`` only
    when everything was written: a failed write leaves the old file intact."""
    path = os.fspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                               prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())     # mkstemp makes 0600: a new file follows the umask
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
