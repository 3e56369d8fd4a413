"""Chunks of whole queries for the streaming solver: ``.npy`` files read at an
offset, and SVMlight files parsed block by block.
"""
from __future__ import annotations

import itertools
import os

import numpy as np
import scipy.sparse as sp

from .._core.checks import check_count, check_flag
from .files import open_binary
from .groups import groups_to_qid, read_groups
from .svmlight import parse_fast, parse_lines


class Chunks:
    """A re-iterable of ``(X, y, qid)`` chunks of whole queries (every ``iter`` reads again)."""

    def __init__(self, read, describe):
        self._read, self._describe = read, describe

    def __iter__(self):
        return self._read()

    def __repr__(self):
        return self._describe


def npy_source(src, name):
    """``(reader(a, b) -> rows a..b, shape)`` for a ``.npy`` path (plain reads at an offset:
    nothing stays mapped) or an array / ``np.memmap`` (sliced)."""
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        with open(path, "rb") as fh:
            try:
                version = np.lib.format.read_magic(fh)
                header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                          else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = header(fh)
            except ValueError as e:
                raise ValueError(f"{name}: {path} is not a .npy file ({e})") from None
            offset = fh.tell()
        if fortran and len(shape) > 1:
            raise ValueError(f"{name}: {path} is in Fortran order; save it C-ordered")
        width = int(np.prod(shape[1:], dtype=np.int64))
        need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        size = os.path.getsize(path)
        if size < need:                          # truncated: say so before any chunk is read
            raise ValueError(f"{name}: {path} is truncated: its header says shape {tuple(shape)} "
                             f"({need:,} bytes) but the file has {size:,} bytes")

        def read(a, b):
            with open(path, "rb") as fh:
                fh.seek(offset + a * width * dtype.itemsize)
                out = np.fromfile(fh, dtype, count=(b - a) * width)
            return out.reshape((b - a,) + tuple(shape[1:]))
        return read, tuple(shape)
    arr = src if hasattr(src, "shape") and hasattr(src, "dtype") else np.asarray(src)
    return (lambda a, b: np.array(arr[a:b])), tuple(arr.shape)


def whole_query_bounds(qid, chunk_rows: int):
    """``[(a, b)]`` row ranges of about ``chunk_rows`` rows that never cut a query (a
    longer query gets a range of its own)."""
    m = qid.shape[0]
    starts = np.concatenate([[0], np.flatnonzero(qid[1:] != qid[:-1]) + 1, [m]])
    bounds, a = [], 0
    while a < m:
        b = starts[np.searchsorted(starts, a + chunk_rows, side="right") - 1]
        if b <= a:
            b = starts[np.searchsorted(starts, a, side="right")]
        bounds.append((int(a), int(b)))
        a = b
    return bounds


def iter_npy(X, y, qid, *, chunk_rows: int = 1 << 18):
    """Chunks of whole queries from ``.npy`` files (or arrays / ``np.memmap``) for
    :func:`rankjax.scale.stream` (a streamed problem of the verbs).

    Files are read at an offset chunk by chunk (nothing stays mapped, so the process
    holds one chunk); ``qid`` is read whole (``m`` integers). Rows of one query must
    be contiguous (a query id that comes back later is an error in the stream).

    Args:
      X: ``[m, n]`` C-ordered ``.npy`` path or array; y: ``[m]`` / ``[m, k]``; qid: ``[m]``.
      chunk_rows: rows per chunk (whole queries: a chunk ends at the last query
        boundary before this; a longer query is a chunk of its own).

    Returns:
      A re-iterable of ``(X, y, qid)`` numpy chunks.

    Example:
      >>> import numpy as np
      >>> chunks = iter_npy(np.zeros((5, 2)), np.zeros(5), [1, 1, 2, 2, 2], chunk_rows=3)
      >>> [c[2].tolist() for c in chunks]
      [[1, 1], [2, 2, 2]]
    """
    chunk_rows = check_count(chunk_rows, "chunk_rows")
    read_x, shape_x = npy_source(X, "X")
    read_y, shape_y = npy_source(y, "y")
    read_q, shape_q = npy_source(qid, "qid")
    if len(shape_x) != 2:
        raise ValueError(f"X must be 2-D [m, n], got shape {shape_x}")
    m = shape_x[0]
    if shape_y[:1] != (m,) or len(shape_y) > 2:
        raise ValueError(f"y must be [{m}] or [{m}, k], got shape {shape_y}")
    if shape_q != (m,):
        raise ValueError(f"qid must be [{m}], got shape {shape_q}")
    q = read_q(0, m)
    bounds = whole_query_bounds(q, chunk_rows)

    def read():
        for a, b in bounds:
            yield read_x(a, b), read_y(a, b), q[a:b]
    return Chunks(read, f"iter_npy({m} rows, {len(bounds)} chunks)")


def iter_svmlight(path, *, num_features: int, chunk_rows: int = 1 << 16,
                  zero_based: bool = False, dtype=np.float32, query_file="auto"):
    """Chunks of whole queries from an SVMlight / LETOR file with ``qid:`` (or a
    LightGBM ``.query`` file of query sizes beside it) for
    :func:`rankjax.scale.stream` (the parser of :func:`read_svmlight`, a block
    of lines at a time; rows of one query must be contiguous).

    Args:
      path: the file.
      num_features: number of columns (every chunk has the same width; an index
        beyond it is an error).
      chunk_rows: lines per block; a block ends at the last query boundary before it.
      zero_based: feature indices start at 0.
      dtype: dtype of the dense ``X`` chunks.
      query_file: group-size file giving the queries of a file without ``qid:``
        (``"auto"``: ``path + ".query"`` when it exists), as :func:`read_svmlight`.

    Returns:
      A re-iterable of ``(X, y, qid)`` numpy chunks.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.txt"
      >>> _ = p.write_text("2 qid:1 1:1\\n1 qid:1 2:1\\n0 qid:2 1:3\\n")
      >>> [c[2].tolist() for c in iter_svmlight(p, num_features=2, chunk_rows=2)]
      [[1, 1], [2]]
    """
    chunk_rows = check_count(chunk_rows, "chunk_rows")
    n = check_count(num_features, "num_features")
    base = 0 if check_flag(zero_based, "zero_based") else 1
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"{path} does not exist")
    gpath = path + ".query" if query_file == "auto" else query_file
    if query_file == "auto" and not os.path.exists(gpath):
        gpath = None
    rows_qid = None if gpath is None else groups_to_qid(read_groups(gpath))

    def parse(lines, row0):
        parsed = parse_fast(b"".join(text for _, text in lines), base)
        if parsed is None:
            parsed = parse_lines(path, base, [(i, t.decode("utf-8", "replace"))
                                               for i, t in lines])
        labels, qids, indptr, cols, vals, _, has_qid = parsed
        if not has_qid and rows_qid is None:
            raise ValueError(f"{path}: line {lines[0][0]}: streaming needs qid: on every line "
                             "or a .query file of query sizes (query_file=)")
        if rows_qid is not None:
            if has_qid:
                raise ValueError(f"{path} has qid: fields and a query file {gpath}: give one")
            if row0 + len(labels) > rows_qid.size:
                raise ValueError(f"{gpath}: the query sizes add up to {rows_qid.size} rows but "
                                 f"{path} has more")
            qids = rows_qid[row0:row0 + len(labels)]
        cols = np.asarray(cols, np.int64)
        if cols.size and cols.max() >= n:
            raise ValueError(f"{path}: feature index {int(cols.max()) + base} exceeds "
                             f"num_features={n}")
        X = sp.csr_matrix((np.asarray(vals, dtype), cols, indptr), shape=(len(labels), n))
        return X.toarray(), np.asarray(labels, np.float64), np.asarray(qids, np.int64)

    def read():
        carry, row0 = [], 0
        with open_binary(path) as fh:
            numbered = ((i, t) for i, t in enumerate(fh, 1)
                        if t.strip() and not t.lstrip().startswith(b"#"))
            while True:
                block = carry + list(itertools.islice(numbered, chunk_rows))
                end = len(block) == len(carry)
                if not block:
                    if rows_qid is not None and row0 != rows_qid.size:
                        raise ValueError(f"{gpath}: the query sizes add up to {rows_qid.size} "
                                         f"rows but {path} has {row0}")
                    return
                X, y, q = parse(block, row0)
                cut = len(q) if end else int(np.flatnonzero(q != q[-1])[-1] + 1) if np.any(
                    q != q[-1]) else 0
                if cut:
                    yield X[:cut], y[:cut], q[:cut]
                row0 += cut
                carry = block[cut:]
                if end:
                    if rows_qid is not None and row0 != rows_qid.size:
                        raise ValueError(f"{gpath}: the query sizes add up to {rows_qid.size} "
                                         f"rows but {path} has {row0}")
                    return
    return Chunks(read, f"iter_svmlight({path!r})")
