"""Host-side data loading and saving (docs/math.md): SVMlight/LETOR text, LightGBM
group files, preference-pair files, query-id remapping and query-wise min-max
normalisation. numpy/scipy only, no jit.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import re
import warnings
import tempfile
from typing import NamedTuple, Optional

import numpy as np
import scipy.sparse as sp

from ._checks import (check_count, check_flag, memory_limit, require_concrete, scipy_to_bcoo,
                      segment_ids)
from ._sparse import host_sparse

__all__ = ["Dataset", "read_svmlight", "write_svmlight", "read_groups", "write_groups",
           "groups_to_qid", "qid_to_groups", "read_preferences", "write_preferences",
           "normalize_per_query", "to_bcoo", "segment_ids", "save_model", "load_model",
           "MODEL_FORMAT", "MODEL_VERSION", "iter_npy", "iter_svmlight"]


class Dataset(NamedTuple):
    """Rows of a ranking data set.

    Attributes:
      X: ``[m, n]`` float64 numpy array, or ``scipy.sparse.csr_matrix`` when read
        with ``sparse=True``.
      y: ``[m]`` float64 labels.
      qid: ``[m]`` int64 query ids (as in the file, or from a group file; all 0
        when the file has neither).
      comments: ``[m]`` list of the text after ``#`` on each line ('' if none).
    """

    X: object
    y: np.ndarray
    qid: np.ndarray
    comments: list


_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "lzma"))


def _open_binary(path):
    """The file, decompressed transparently when it is gzip, bz2 or xz (by its first
    bytes, as scikit-learn's loader does by extension)."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        head = fh.read(6)
    for magic, module in _MAGIC:
        if head.startswith(magic):
            return __import__(module).open(path, "rb")
    return open(path, "rb")


def _open(path):
    return __import__("io").TextIOWrapper(_open_binary(path), encoding="utf-8")


@contextlib.contextmanager
def _atomic(path, mode="w"):
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


def _integers(v, name: str) -> np.ndarray:
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


def read_svmlight(path, *, num_features: Optional[int] = None, sparse: bool = False,
                  query_file="auto", zero_based: bool = False, dtype=np.float64,
                  drop_extra: bool = False) -> Dataset:
    """Reads an SVMlight / LETOR file ``<label> [qid:<id>] <index>:<value> ... [# comment]``.

    Feature indices are 1-based (LETOR) unless ``zero_based``. Missing features
    are 0. Blank lines and lines starting with ``#`` are skipped.

    Args:
      path: the file.
      num_features: number of columns; the largest index in the file when None
        (an index beyond a given ``num_features`` is an error).
      sparse: return ``X`` as ``scipy.sparse.csr_matrix`` instead of dense (memory
        O(nnz); a dense ``X`` that would not fit in half the available memory is a
        ``ValueError`` naming its size).
      query_file: group-size file (LightGBM ``*.query``) giving the query of
        each row when the file has no ``qid:``; ``"auto"`` uses ``path + ".query"``
        if it exists; ``None`` never.
      zero_based: indices start at 0.
      drop_extra: with ``num_features``, drop features beyond it (e.g. a test file
        read with the training width) instead of raising.

    Returns:
      :class:`Dataset`.

    Raises:
      ValueError: a malformed line (the message names the file and line
        number), mixed lines with and without ``qid``, or a group file whose
        sizes do not add up to the number of rows.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.txt"
      >>> _ = p.write_text("2 qid:7 1:0.5 3:1 # doc a\\n0 qid:7 2:0.25\\n")
      >>> d = read_svmlight(p)
      >>> d.X.tolist(), d.y.tolist(), d.qid.tolist(), d.comments
      ([[0.5, 0.0, 1.0], [0.0, 0.25, 0.0]], [2.0, 0.0], [7, 7], ['doc a', ''])
    """
    base = 0 if check_flag(zero_based, "zero_based") else 1
    sparse, drop_extra = check_flag(sparse, "sparse"), check_flag(drop_extra, "drop_extra")
    with _open_binary(path) as fh:
        parsed = _parse_fast(fh.read(), base)
    if parsed is None:                  # something is malformed: the line-by-line reader
        parsed = _parse_lines(path, base)   # names the file and line
    labels, qids, indptr, cols, vals, comments, has_qid = parsed
    m = len(labels)
    if m == 0:
        raise ValueError(f"{path}: no data lines")
    n_file = int(np.max(cols)) + 1 if len(cols) else 0
    n = n_file if num_features is None else int(num_features)
    if num_features is not None and (isinstance(num_features, bool) or n < 1):
        raise ValueError(f"num_features must be a positive int, got {num_features!r}")
    if n_file > n and drop_extra:
        keep = np.asarray(cols) < n
        row = np.repeat(np.arange(m), np.diff(indptr))
        cols, vals = np.asarray(cols)[keep], np.asarray(vals)[keep]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row[keep], minlength=m))])
    elif n_file > n:
        raise ValueError(f"{path}: feature index {n_file - 1 + base} exceeds num_features={n} "
                         "(drop_extra=True drops such features)")
    X = sp.csr_matrix((np.asarray(vals, dtype), np.asarray(cols, np.int64), indptr), shape=(m, n))
    if has_qid:
        qid = np.asarray(qids, np.int64)
    else:
        gpath = os.fspath(path) + ".query" if query_file == "auto" else query_file
        if gpath is not None and os.path.exists(gpath):
            qid = groups_to_qid(read_groups(gpath))
            if qid.shape[0] != m:
                raise ValueError(f"{gpath}: group sizes add up to {qid.shape[0]} rows, "
                                 f"{path} has {m}")
        elif query_file not in ("auto", None):
            raise ValueError(f"query_file {gpath} does not exist")
        else:
            qid = np.zeros(m, np.int64)
    if not sparse:
        need = m * n * np.dtype(dtype).itemsize
        if need > memory_limit():
            raise ValueError(f"{path}: a dense X of {m} x {n} needs {need / 2**30:.1f} GiB; "
                             "read it with sparse=True")
        X = X.toarray()
    return Dataset(X, np.asarray(labels, np.float64), qid, comments)


def _parse_fast(data: bytes, base: int):
    """Vectorised parse of a well-formed file: lines of equal length are parsed together
    by numpy's C text reader (no per-token Python); ``None`` when anything is off, so
    that the line reader reports where."""
    import io as _io
    lines = data.split(b"\n")
    comments = None
    if b"#" in data:
        comments = [b""] * len(lines)
        for i, line in enumerate(lines):
            if b"#" in line:
                lines[i], _, comments[i] = line.partition(b"#")
        data = b"\n".join(lines)
    keep = [i for i, line in enumerate(lines) if line.strip()]
    m = len(keep)
    if m == 0 or re.search(rb"\s:|:\s|:$", data, flags=re.M):
        return None                     # "3: 1", "3 :1", "3:": the line reader names the line
    kept = [lines[i] for i in keep]
    nq = data.count(b"qid:")
    if nq not in (0, m):
        return None
    has_qid = int(nq == m)
    if has_qid and not all((line.split(None, 2) + [b""])[1][:4] == b"qid:" for line in kept):
        return None                     # a qid: that is not the second token
    pairs = np.fromiter((line.count(b":") for line in kept), np.int64, m) - has_qid
    if np.any(pairs < 0):
        return None
    clean = data.replace(b"qid:", b"").replace(b":", b" ").split(b"\n")
    clean = [clean[i] for i in keep]
    indptr = np.concatenate([[0], np.cumsum(pairs)])
    labels, qids = np.empty(m), np.empty(m)
    cols, vals = np.empty(indptr[-1]), np.empty(indptr[-1])
    for w in np.unique(pairs):                       # one C parse per line length
        rows = np.flatnonzero(pairs == w)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a = np.loadtxt(_io.BytesIO(b"\n".join([clean[r] for r in rows])), ndmin=2)
        except ValueError:
            return None
        if a.shape != (rows.size, 1 + has_qid + 2 * w):
            return None
        labels[rows] = a[:, 0]
        if has_qid:
            qids[rows] = a[:, 1]
        target = (indptr[rows][:, None] + np.arange(w)).ravel()
        cols[target] = a[:, 1 + has_qid::2].ravel() - base
        vals[target] = a[:, 2 + has_qid::2].ravel()
    row = np.repeat(np.arange(m), pairs)
    ok = (np.all(np.isfinite(labels)) and np.all(np.isfinite(vals)) and np.all(cols >= 0)
          and np.all(cols < 2.0 ** 31) and np.all(cols == np.round(cols))
          and np.all((np.diff(cols) > 0) | (row[1:] != row[:-1])))
    if has_qid:
        ok = ok and np.all(qids == np.round(qids)) and np.all(np.abs(qids) < 2.0 ** 53)
    if not ok:
        return None
    comments = ([""] * m if comments is None else
                [comments[i].decode("utf-8", "replace").strip() for i in keep])
    return (labels, qids.astype(np.int64) if has_qid else None, indptr, cols.astype(np.int64),
            vals, comments, bool(has_qid))


def _parse_lines(path, base: int, lines=None):
    """The line-by-line reader: slow, but names the first malformed line. ``lines``:
    ``(line number, text)`` pairs (default: the whole file)."""
    labels, qids, rows, cols, vals, comments = [], [], [], [], [], []
    has_qid = None
    with contextlib.nullcontext(lines) if lines is not None else _open(path) as fh:
        for lineno, line in (fh if lines is not None else enumerate(fh, 1)):
            body, _, comment = line.partition("#")
            tokens = body.split()
            if not tokens:
                continue

            def bad(msg):
                return ValueError(f"{path}: line {lineno}: {msg}: {line.strip()[:80]!r}")

            try:
                label = float(tokens[0])
            except ValueError:
                raise bad("the label is not a number") from None
            if not np.isfinite(label):
                raise bad("the label is not finite")
            rest = tokens[1:]
            line_has_qid = bool(rest) and rest[0].startswith("qid:")
            if has_qid is None:
                has_qid = line_has_qid
            elif has_qid != line_has_qid:
                raise bad("some lines have qid: and some do not")
            if line_has_qid:
                try:
                    q = int(rest[0][4:])
                except ValueError:
                    raise bad("qid is not an integer") from None
                if not -(1 << 63) <= q < (1 << 63):
                    raise bad("qid is outside the int64 range")
                qids.append(q)
                rest = rest[1:]
            r = len(labels)
            last = -1
            for tok in rest:
                idx, sep, val = tok.partition(":")
                try:
                    j, v = int(idx) - base, float(val)
                except ValueError:
                    raise bad(f"bad feature token {tok!r}") from None
                if not sep:
                    raise bad(f"bad feature token {tok!r}")
                if j < 0:
                    raise bad(f"feature index {idx} is below {base}")
                if j >= 1 << 31:
                    raise bad(f"feature index {idx} is beyond 2^31")
                if not np.isfinite(v):
                    raise bad(f"feature {idx} is not finite")
                if j <= last:
                    raise bad("feature indices must increase along a line")
                last = j
                rows.append(r)
                cols.append(j)
                vals.append(v)
            labels.append(label)
            comments.append(comment.strip())
    indptr = np.concatenate([[0], np.cumsum(np.bincount(np.asarray(rows, np.int64),
                                                        minlength=len(labels)))])
    return labels, qids, indptr, cols, vals, comments, has_qid


class _Chunks:
    """A re-iterable of ``(X, y, qid)`` chunks of whole queries (every ``iter`` reads again)."""

    def __init__(self, read, describe):
        self._read, self._describe = read, describe

    def __iter__(self):
        return self._read()

    def __repr__(self):
        return self._describe


def _npy_source(src, name):
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


def _whole_query_bounds(qid, chunk_rows: int):
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
    :func:`rankjax.rankrls_primal_stream`.

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
    read_x, shape_x = _npy_source(X, "X")
    read_y, shape_y = _npy_source(y, "y")
    read_q, shape_q = _npy_source(qid, "qid")
    if len(shape_x) != 2:
        raise ValueError(f"X must be 2-D [m, n], got shape {shape_x}")
    m = shape_x[0]
    if shape_y[:1] != (m,) or len(shape_y) > 2:
        raise ValueError(f"y must be [{m}] or [{m}, k], got shape {shape_y}")
    if shape_q != (m,):
        raise ValueError(f"qid must be [{m}], got shape {shape_q}")
    q = read_q(0, m)
    bounds = _whole_query_bounds(q, chunk_rows)

    def read():
        for a, b in bounds:
            yield read_x(a, b), read_y(a, b), q[a:b]
    return _Chunks(read, f"iter_npy({m} rows, {len(bounds)} chunks)")


def iter_svmlight(path, *, num_features: int, chunk_rows: int = 1 << 16,
                  zero_based: bool = False, dtype=np.float32, query_file="auto"):
    """Chunks of whole queries from an SVMlight / LETOR file with ``qid:`` (or a
    LightGBM ``.query`` file of query sizes beside it) for
    :func:`rankjax.rankrls_primal_stream` (the parser of :func:`read_svmlight`, a block
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
        parsed = _parse_fast(b"".join(text for _, text in lines), base)
        if parsed is None:
            parsed = _parse_lines(path, base, [(i, t.decode("utf-8", "replace"))
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
        with _open_binary(path) as fh:
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
    return _Chunks(read, f"iter_svmlight({path!r})")


def _fmt(v: float) -> str:
    return repr(float(v)) if v != int(v) else str(int(v))


def write_svmlight(path, X, y, qid=None, comments=None, *, zero_based: bool = False) -> None:
    """Writes ``X, y, qid`` in SVMlight/LETOR format (zeros omitted, 1-based
    indices unless ``zero_based``); values are written with full precision so
    :func:`read_svmlight` returns them exactly.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.txt"
      >>> write_svmlight(p, np.array([[0.5, 0.0]]), [1.0], qid=[3])
      >>> p.read_text()
      '1 qid:3 1:0.5\\n'
    """
    Xc = sp.csr_matrix(X)
    y = np.asarray(y, np.float64)
    m = Xc.shape[0]
    if y.shape != (m,):
        raise ValueError(f"y must have shape [{m}], got {y.shape}")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(Xc.data))):
        raise ValueError("X and y must be finite to be written")
    if qid is not None:
        qid = _integers(qid, "qid")
        if qid.shape != (m,):
            raise ValueError(f"qid must have shape [{m}], got {qid.shape}")
    if comments is not None and len(comments) != m:
        raise ValueError(f"comments must have {m} entries, got {len(comments)}")
    base = 0 if check_flag(zero_based, "zero_based") else 1
    Xc.eliminate_zeros()
    Xc.sort_indices()
    cols = (Xc.indices.astype(np.int64) + base).tolist()
    cells = [f"{j}:{v}" for j, v in zip(cols, _fmt_all(Xc.data))]
    heads = _fmt_all(y)
    if qid is not None:
        heads = [f"{h} qid:{q}" for h, q in zip(heads, qid.tolist())]
    ptr = Xc.indptr.tolist()
    lines = [" ".join([h, *cells[a:b]]) for h, a, b in zip(heads, ptr[:-1], ptr[1:])]
    if comments is not None:
        lines = [ln + " # " + str(c).replace("\n", " ") if c else ln
                 for ln, c in zip(lines, comments)]
    with _atomic(path) as fh:
        fh.write("\n".join(lines) + ("\n" if lines else ""))


def _fmt_all(v) -> list:
    """:func:`_fmt` of every value: whole numbers as integers, others by ``repr`` (the
    shortest string that reads back exactly)."""
    v = np.asarray(v, np.float64)
    whole = (v == np.round(v)) & (np.abs(v) < 2.0 ** 53)
    if not whole.any():
        return list(map(repr, v.tolist()))
    out = np.empty(v.shape, dtype=object)
    out[whole] = list(map(str, v[whole].astype(np.int64).tolist()))
    out[~whole] = list(map(repr, v[~whole].tolist()))
    return out.tolist()


def read_groups(path) -> np.ndarray:
    """Reads a LightGBM group file (one positive query size per line).

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.query"
      >>> write_groups(p, [2, 3]); read_groups(p).tolist()
      [2, 3]
    """
    sizes = []
    with _open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                s = int(line)
            except ValueError:
                raise ValueError(f"{path}: line {lineno}: not an integer: {line.strip()!r}") from None
            if s < 1:
                raise ValueError(f"{path}: line {lineno}: query size must be >= 1, got {s}")
            sizes.append(s)
    return np.asarray(sizes, np.int64)


def write_groups(path, sizes) -> None:
    """Writes query sizes one per line (LightGBM ``*.query``).

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.query"
      >>> write_groups(p, [4, 1]); p.read_text()
      '4\\n1\\n'
    """
    sizes = _group_sizes(sizes)
    with _atomic(path) as fh:
        fh.writelines(f"{int(s)}\n" for s in sizes)


def _group_sizes(sizes, name: str = "sizes") -> np.ndarray:
    sizes = _integers(sizes, name)
    if sizes.ndim != 1 or np.any(sizes < 1):
        raise ValueError(f"{name} must be a 1-D array of query sizes >= 1")
    return sizes


def groups_to_qid(sizes) -> np.ndarray:
    """Query sizes in row order -> ``[m]`` query ids ``0, 0, ..., 1, ...``.

    Example:
      >>> groups_to_qid([2, 1, 3]).tolist()
      [0, 0, 1, 2, 2, 2]
    """
    return _qid_from_sizes(sizes)


def _qid_from_sizes(sizes, name: str = "sizes") -> np.ndarray:
    sizes = _group_sizes(sizes, name)
    return np.repeat(np.arange(sizes.shape[0]), sizes)


def qid_to_groups(qid) -> np.ndarray:
    """Query ids whose rows are contiguous -> sizes in row order.

    Raises:
      ValueError: a query's rows are not contiguous (sort the rows first).

    Example:
      >>> qid_to_groups([7, 7, 3, 5, 5]).tolist()
      [2, 1, 2]
    """
    q = _integers(qid, "qid")
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"qid must be a non-empty 1-D array, got shape {q.shape}")
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    if np.unique(q[starts]).shape[0] != starts.shape[0]:
        raise ValueError("qid: the rows of a query are not contiguous")
    return np.diff(np.r_[starts, q.shape[0]])


def read_preferences(path):
    """Reads a preference file, one edge per line: ``h j [magnitude]`` (0-based rows,
    ``h`` preferred to ``j``; magnitude 1 when omitted).

    Returns:
      ``(head, tail, magnitude)`` numpy arrays, ready for ``preference_graph``.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "prefs.txt"
      >>> _ = p.write_text("0 1 2.5\\n3 2\\n")
      >>> [a.tolist() for a in read_preferences(p)]
      [[0, 3], [1, 2], [2.5, 1.0]]
    """
    h, t, mag = [], [], []
    with _open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            tok = line.split("#")[0].split()
            if not tok:
                continue
            try:
                if len(tok) not in (2, 3):
                    raise ValueError
                a, b = int(tok[0]), int(tok[1])
                c = float(tok[2]) if len(tok) == 3 else 1.0
                if a < 0 or b < 0 or not np.isfinite(c):
                    raise ValueError
            except ValueError:
                raise ValueError(f"{path}: line {lineno}: expected 'h j [magnitude]' with "
                                 f"row indices >= 0, got {line.strip()!r}") from None
            h.append(a)
            t.append(b)
            mag.append(c)
    return np.asarray(h, np.int64), np.asarray(t, np.int64), np.asarray(mag)


def write_preferences(path, head, tail, magnitude=None) -> None:
    """Writes edges as ``h j magnitude`` lines.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "prefs.txt"
      >>> write_preferences(p, [0], [1], [0.5]); p.read_text()
      '0 1 0.5\\n'
    """
    head, tail = _integers(head, "head"), _integers(tail, "tail")
    mag = np.ones(head.shape[0]) if magnitude is None else np.asarray(magnitude, np.float64)
    if head.ndim != 1 or head.shape != tail.shape or mag.shape != head.shape:
        raise ValueError("head, tail and magnitude must be 1-D of one length")
    if np.any(head < 0) or np.any(tail < 0) or not np.all(np.isfinite(mag)):
        raise ValueError("head/tail must be row indices >= 0 and magnitude finite")
    with _atomic(path) as fh:
        fh.writelines(f"{int(a)} {int(b)} {_fmt(c)}\n" for a, b, c in zip(head, tail, mag))


def normalize_per_query(X, qid) -> np.ndarray:
    """Query-wise min-max normalisation of every feature to [0, 1] (Pahikkala et al. 2007 §3.1).

    A feature constant within a query becomes 0 there. Dense input; returns a
    new float64 array.

    Example:
      >>> normalize_per_query(np.array([[1., 5.], [3., 5.], [7., 0.]]), [0, 0, 1]).tolist()
      [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    """
    require_concrete(X, "X", "normalize_per_query"), require_concrete(qid, "qid", "normalize_per_query")
    X = np.asarray(X.toarray() if sp.issparse(X) else X, np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D [m, n], got shape {X.shape} (X.reshape(-1, 1) for one "
                         "feature)")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or inf values")
    s = segment_ids(qid)
    if s.seg.shape[0] != X.shape[0]:
        raise ValueError(f"qid has {s.seg.shape[0]} rows, X has {X.shape[0]}")
    lo = np.full((s.num_queries, X.shape[1]), np.inf)
    hi = np.full((s.num_queries, X.shape[1]), -np.inf)
    np.minimum.at(lo, s.seg, X)
    np.maximum.at(hi, s.seg, X)
    span = (hi - lo)[s.seg]
    return np.where(span > 0, (X - lo[s.seg]) / np.where(span > 0, span, 1), 0.0)


def to_bcoo(X, dtype=None):
    """``scipy.sparse`` matrix (or dense array) -> ``jax.experimental.sparse.BCOO``.

    Example:
      >>> B = to_bcoo(sp.csr_matrix(np.array([[0., 2.], [1., 0.]])))
      >>> B.nse, np.asarray(B.todense()).tolist()
      (2, [[0.0, 2.0], [1.0, 0.0]])
    """
    B = scipy_to_bcoo(host_sparse(X), "X")
    return B if dtype is None else B.astype(dtype)


MODEL_FORMAT = "rankjax-model"
MODEL_VERSION = 3
"""Model files are zip archives: ``header.json`` (UTF-8 JSON: ``format``, ``version``,
``rankjax_version``, ``model`` — the structure with arrays by name —, ``meta``) and one
``.npy`` member per array (``a0.npy``, ...). ``unzip -p model.npz header.json`` shows
the header; ``numpy.load`` reads the arrays. Version 2 files (header as a numpy
string) are still read."""


def _encode(obj, arrays):
    """A model as JSON-able structure; arrays go to ``arrays`` (names ``a0, a1 ..``)."""
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "_fields"):                                  # a rankjax NamedTuple
        return {"type": type(obj).__name__,
                "fields": {f: _encode(getattr(obj, f), arrays) for f in obj._fields}}
    if dataclasses.is_dataclass(obj):                            # Kernel
        return {"type": type(obj).__name__,
                "fields": {f.name: _encode(getattr(obj, f.name), arrays)
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, (list, tuple)):
        return {"list": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("model dictionaries must have string keys")
        return {"dict": {k: _encode(v, arrays) for k, v in obj.items()}}
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        a = np.asarray(obj)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"cannot save an array of dtype {a.dtype}")
        key = f"a{len(arrays)}"
        arrays[key] = a
        return {"array": key}
    raise TypeError(f"cannot save a value of type {type(obj).__name__}")


def _decode(tree, arrays):
    import rankjax
    if not isinstance(tree, dict):
        return tree
    if "array" in tree:
        return arrays[tree["array"]]
    if "list" in tree:
        return tuple(_decode(v, arrays) for v in tree["list"])
    if "dict" in tree:
        return {k: _decode(v, arrays) for k, v in tree["dict"].items()}
    cls = getattr(rankjax, tree["type"], None)
    if not isinstance(cls, type):
        raise ValueError(f"unknown model type {tree['type']!r}")
    return cls(**{k: _decode(v, arrays) for k, v in tree["fields"].items()})


def save_model(path, model, **meta) -> None:
    """Saves a model to ``.npz`` with a format name and version; the file is replaced
    atomically. ``model`` is linear weights ``[n]`` / ``[n, k]`` or any rankjax model
    (``LinearModel``, ``KernelModel``, ``DualModel``, a path, ``KPCModel``,
    ``RankSVMKernelModel``, ``RankBoostModel``, ``PairwiseGP``, ``CGResult`` ...).
    ``meta``: scalar metadata (str, bool, int, float) or lists of them (feature
    names). Read back with :func:`load_model`.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.npz"
      >>> save_model(p, np.array([0.5, -1.0]), lam=10.0)
      >>> w, meta = load_model(p); w.tolist(), meta
      ([0.5, -1.0], {'lam': 10.0})
    """
    import json
    if hasattr(model, "shape") and not hasattr(model, "_fields"):
        w = np.asarray(model)
        if w.dtype.kind != "f" or w.ndim not in (1, 2) or not np.all(np.isfinite(w)):
            raise ValueError(f"weights must be a finite float array [n] or [n, k], got {w.dtype} "
                             f"{w.shape}")
    for k, v in meta.items():
        ok = (isinstance(v, (str, bool, int, float, np.generic)) or
              isinstance(v, (list, tuple)) and all(isinstance(e, (str, int, float)) for e in v))
        if not ok:
            raise TypeError(f"metadata {k!r} must be a str, bool, int, float or a list of them, "
                            f"got {type(v).__name__}")
    arrays = {}
    tree = _encode(model, arrays)
    meta = {k: (v.item() if isinstance(v, np.generic) else list(v) if isinstance(v, tuple) else v)
            for k, v in meta.items()}
    import zipfile
    from . import __version__
    header = json.dumps({"format": MODEL_FORMAT, "version": MODEL_VERSION,
                         "rankjax_version": __version__, "model": tree, "meta": meta},
                        indent=1, ensure_ascii=False)
    with _atomic(path, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", header.encode("utf-8"))
        for key, a in arrays.items():
            with z.open(key + ".npy", "w") as member:
                np.lib.format.write_array(member, np.ascontiguousarray(a), allow_pickle=False)


def load_model(path):
    """Loads what :func:`save_model` wrote: ``(model, meta_dict)`` — the weights array
    for linear weights, else the rankjax model. A file that is not a rankjax model,
    is damaged, or has another format version is a ``ValueError``.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.npz"
      >>> save_model(p, np.ones(2), graph="normalized")
      >>> load_model(p)[1]
      {'graph': 'normalized'}
    """
    import json
    import zipfile
    if not os.path.isfile(os.fspath(path)):
        raise FileNotFoundError(f"{path}: no such file")
    if not zipfile.is_zipfile(os.fspath(path)):
        with open(os.fspath(path), "rb") as fh:
            damaged = fh.read(2) == b"PK"
        raise ValueError(f"{path} is not a {'readable ' if damaged else ''}rankjax model file ("
                         + ("a damaged zip archive)" if damaged else
                            "a model is a zip archive written by save / save_model)"))
    try:
        with zipfile.ZipFile(os.fspath(path)) as z:
            names = set(z.namelist())
            contents = {}
            for name in names:
                if name == "header.json":
                    contents["header"] = z.read(name).decode("utf-8")
                elif name.endswith(".npy"):
                    with z.open(name) as fh:
                        contents[name[:-4]] = np.lib.format.read_array(fh, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not a readable rankjax model file ({e})") from None
    try:
        header = json.loads(str(contents["header"]))
        fmt, version = header["format"], header["version"]
    except (KeyError, ValueError, TypeError):
        if {"format", "version"} <= contents.keys() and str(contents["format"]).startswith("rankjax"):
            raise ValueError(f"{path} is a rankjax model of format version "
                             f"{int(contents['version'])}; this rankjax reads version "
                             f"{MODEL_VERSION}") from None
        raise ValueError(f"{path} is not a rankjax model file") from None
    if fmt != MODEL_FORMAT:
        raise ValueError(f"{path} is not a rankjax model file")
    if version not in (2, MODEL_VERSION):
        raise ValueError(f"{path} is a rankjax model of format version {version}; "
                         f"this rankjax reads version {MODEL_VERSION}")
    try:
        model = _decode(header["model"], contents)
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path} is a damaged rankjax model file ({e})") from None
    return model, header["meta"]
