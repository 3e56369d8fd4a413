"""SVMlight / LETOR text: the reader (a vectorised parser with a line-by-line
fallback that names the bad line) and the writer.
"""
from __future__ import annotations

import contextlib
import os
import re
import warnings
from typing import NamedTuple, Optional

import numpy as np
import scipy.sparse as sp

from .._core.checks import check_flag
from .._core.memory import memory_limit
from .cells import format_cells
from .._core.atomic import atomic_write
from .files import (as_integers, open_binary, utf8)
from .groups import groups_to_qid, read_groups


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


def read_svmlight(path, *, num_features: Optional[int] = None, sparse: bool = False,
                  query_file="auto", zero_based: bool = False, dtype=np.float64,
                  drop_extra: bool = False) -> Dataset:
    """Reads an SVMlight / LETOR file: lines of ``<label> [qid:<id>] <index>:<value>``
    cells and an optional ``# comment``.

    Feature indices are 1-based (LETOR) unless ``zero_based``. Missing features
    are 0; a value ``nan`` (or ``inf``) is read as it is, a missing value as LightGBM's and
    XGBoost's text files write it (the estimators' feature maps take it; every other function
    refuses it, naming the row and column). Blank lines and lines starting with ``#`` are
    skipped.

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
    with open_binary(path) as fh:
        parsed = parse_fast(fh.read(), base)
    if parsed is None:                  # something is malformed: the line-by-line reader
        parsed = parse_lines(path, base)   # names the file and line
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
            raise DenseTooLargeError(path, m, n, need)
        X = X.toarray()
    return Dataset(X, np.asarray(labels, np.float64), qid, comments)


class DenseTooLargeError(ValueError):
    """The dense rows of a file would not fit in memory: ``path``, ``shape`` and ``need``
    (bytes) for a caller's own hint (the command line names its ``--sparse``)."""

    def __init__(self, path, m: int, n: int, need: int):
        self.path, self.shape, self.need = path, (m, n), need
        super().__init__(f"{path}: a dense X of {m} x {n} needs {need / 2**30:.1f} GiB; "
                         "read it with sparse=True")


def parse_fast(data: bytes, base: int):
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
    ok = (np.all(np.isfinite(labels)) and not np.any(np.isnan(cols)) and np.all(cols >= 0)
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


def parse_lines(path, base: int, lines=None):
    """The line-by-line reader: slow, but names the first malformed line. ``lines``:
    ``(line number, text)`` pairs (default: the whole file)."""
    labels, qids, rows, cols, vals, comments = [], [], [], [], [], []
    has_qid = None
    with contextlib.nullcontext(lines) if lines is not None else open_binary(path) as fh:
        for lineno, line in (fh if lines is not None else enumerate(fh, 1)):
            line = utf8(line, path, lineno) if isinstance(line, bytes) else line
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
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite to be written")
    if qid is not None:
        qid = as_integers(qid, "qid")
        if qid.shape != (m,):
            raise ValueError(f"qid must have shape [{m}], got {qid.shape}")
    if comments is not None and len(comments) != m:
        raise ValueError(f"comments must have {m} entries, got {len(comments)}")
    base = 0 if check_flag(zero_based, "zero_based") else 1
    Xc.eliminate_zeros()
    Xc.sort_indices()
    cells, lengths = format_cells(Xc.indices.astype(np.int64) + base, Xc.data)
    ends = np.r_[0, np.cumsum(lengths)][Xc.indptr].tolist()      # byte range of each row
    heads = format_values(y)
    if qid is not None:
        heads = [f"{h} qid:{q}" for h, q in zip(heads, qid.tolist())]
    notes = [""] * m if comments is None else [
        " # " + str(c).replace("\n", " ") if c else "" for c in comments]
    body = cells.tobytes()
    out = []
    for h, a, b, c in zip(heads, ends[:-1], ends[1:], notes):
        # a row's cells end with a space: it becomes the newline (or the comment's start)
        out.append(h.encode() + (b" " + body[a:b - 1] if b > a else b"") + c.encode() + b"\n")
    with atomic_write(path, "wb") as fh:
        fh.write(b"".join(out))


def format_values(v) -> list:
    """:func:`format_value` of every value: whole numbers as integers, others by ``repr`` (the
    shortest string that reads back exactly)."""
    v = np.asarray(v, np.float64)
    whole = (v == np.round(v)) & (np.abs(v) < 2.0 ** 53)
    if not whole.any():
        return list(map(repr, v.tolist()))
    out = np.empty(v.shape, dtype=object)
    out[whole] = list(map(str, v[whole].astype(np.int64).tolist()))
    out[~whole] = list(map(repr, v[~whole].tolist()))
    return out.tolist()
