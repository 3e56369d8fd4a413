"""Files on the host: transparent decompression by magic bytes, text lines decoded with the
file and line named on error, and integer-valued columns (atomic writes:
:mod:`rankjax._core.atomic`).
"""
from __future__ import annotations

import io
import lzma
import os
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
