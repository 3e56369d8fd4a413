"""Queries on the host: LightGBM group files, query ids <-> group sizes, preference
pair files, query-wise min-max normalisation and the BCOO conversion.
"""
from __future__ import annotations

import numpy as np

from .._core.checks import require_concrete, scipy_to_bcoo
from .._core.queries import segment_ids
from .._core.sparse import as_dense, host_sparse
from .._core.atomic import atomic_write
from .files import (as_integers, format_value, text_lines)


def read_groups(path) -> np.ndarray:
    """Reads a LightGBM group file (one positive query size per line).

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.query"
      >>> write_groups(p, [2, 3]); read_groups(p).tolist()
      [2, 3]
    """
    sizes = []
    for lineno, line in text_lines(path):
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
    sizes = group_sizes(sizes)
    with atomic_write(path) as fh:
        fh.writelines(f"{int(s)}\n" for s in sizes)


def group_sizes(sizes, name: str = "sizes") -> np.ndarray:
    sizes = as_integers(sizes, name)
    if sizes.ndim != 1 or np.any(sizes < 1):
        raise ValueError(f"{name} must be a 1-D array of query sizes >= 1")
    return sizes


def groups_to_qid(sizes) -> np.ndarray:
    """Query sizes in row order -> ``[m]`` query ids ``0, 0, ..., 1, ...``.

    Example:
      >>> groups_to_qid([2, 1, 3]).tolist()
      [0, 0, 1, 2, 2, 2]
    """
    return qid_from_sizes(sizes)


def qid_from_sizes(sizes, name: str = "sizes") -> np.ndarray:
    sizes = group_sizes(sizes, name)
    return np.repeat(np.arange(sizes.shape[0]), sizes)


def qid_to_groups(qid) -> np.ndarray:
    """Query ids whose rows are contiguous -> sizes in row order.

    Raises:
      ValueError: a query's rows are not contiguous (sort the rows first).

    Example:
      >>> qid_to_groups([7, 7, 3, 5, 5]).tolist()
      [2, 1, 2]
    """
    q = as_integers(qid, "qid")
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
    for lineno, line in text_lines(path):
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
    head, tail = as_integers(head, "head"), as_integers(tail, "tail")
    mag = np.ones(head.shape[0]) if magnitude is None else np.asarray(magnitude, np.float64)
    if head.ndim != 1 or head.shape != tail.shape or mag.shape != head.shape:
        raise ValueError("head, tail and magnitude must be 1-D of one length")
    if np.any(head < 0) or np.any(tail < 0) or not np.all(np.isfinite(mag)):
        raise ValueError("head/tail must be row indices >= 0 and magnitude finite")
    with atomic_write(path) as fh:
        fh.writelines(f"{int(a)} {int(b)} {format_value(c)}\n" for a, b, c in zip(head, tail, mag))


def normalize_per_query(X, qid) -> np.ndarray:
    """Query-wise min-max normalisation of every feature to [0, 1] (Pahikkala et al. 2007 §3.1).

    A feature constant within a query becomes 0 there. Dense input; returns a
    new float64 array.

    Example:
      >>> normalize_per_query(np.array([[1., 5.], [3., 5.], [7., 0.]]), [0, 0, 1]).tolist()
      [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    """
    require_concrete(X, "X", "normalize_per_query"), require_concrete(qid, "qid", "normalize_per_query")
    X = np.asarray(as_dense(X), np.float64)
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
      >>> import scipy.sparse as sp
      >>> B = to_bcoo(sp.csr_matrix(np.array([[0., 2.], [1., 0.]])))
      >>> B.nse, np.asarray(B.todense()).tolist()
      (2, [[0.0, 2.0], [1.0, 0.0]])
    """
    B = scipy_to_bcoo(host_sparse(X), "X")
    return B if dtype is None else B.astype(dtype)
