"""The estimators' host-side input checks, one concern each: the rows (arrays, sparse,
pandas values), the labels, the queries (ids or LightGBM's group sizes), the evaluation
set and the query weights."""
from __future__ import annotations

import jax
import numpy as np
import scipy.sparse as sp

from .._core.checks import check_targets
from .._core.queries import Segments, segment_ids
from .._core.sparse import is_bcoo, is_scipy_sparse
from ..io.groups import qid_from_sizes

__all__ = ["as_matrix", "check_shape", "check_labels", "query_segments", "sizes_to_qid",
           "one_eval_set", "query_weights"]


def as_matrix(X):
    """Dense numpy, or CSR for scipy.sparse / BCOO input (converted once)."""
    if getattr(X, "dtype", None) is not None and np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError("Complex data not supported: X must be real")
    if is_scipy_sparse(X):
        return sp.csr_matrix(X, dtype=np.float64 if X.dtype.kind != "f" else X.dtype)
    if is_bcoo(X):
        return X
    if isinstance(X, jax.Array):
        return X
    X = np.asarray(X)
    if X.dtype == object:
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"X: argument must be a string or a number ({e})") from None
    elif np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError("Complex data not supported: X must be real")
    return X


def sizes_to_qid(qid, group, m: int, names=("qid", "group")):
    """``qid``, or the query ids of LightGBM-style ``group`` sizes (rows in query
    order); giving both is an error, and the sizes must add up to the ``m`` rows."""
    if group is None:
        return qid
    if qid is not None:
        raise ValueError(f"pass {names[0]} or {names[1]}, not both")
    qid = qid_from_sizes(group.to_numpy() if hasattr(group, "to_numpy") else group, names[1])
    if qid.shape[0] != m:
        raise ValueError(f"{names[1]}: the query sizes add up to {qid.shape[0]} rows but X has {m}")
    return qid


def one_eval_set(eval_set, eval_qid, eval_group):
    """``(X, y)``, or XGBoost/LightGBM's list of one such pair with ``eval_qid`` /
    ``eval_group`` as lists of one array."""
    def one(v):
        return v[0] if isinstance(v, (list, tuple)) and len(v) == 1 and np.ndim(v[0]) == 1 else v
    if isinstance(eval_set, list) and len(eval_set) > 1 and all(
            isinstance(e, tuple) and len(e) == 2 for e in eval_set):
        raise ValueError(f"eval_set: early stopping follows one evaluation set, got {len(eval_set)}")
    if isinstance(eval_set, list) and len(eval_set) == 1:
        eval_set, eval_qid, eval_group = eval_set[0], one(eval_qid), one(eval_group)
    if not (isinstance(eval_set, (list, tuple)) and len(eval_set) == 2):
        raise ValueError("eval_set must be one pair (X_valid, y_valid) or a list of one such "
                         f"pair, got {type(eval_set).__name__}"
                         + (f" of {len(eval_set)}" if isinstance(eval_set, (list, tuple)) else ""))
    return eval_set, eval_qid, eval_group


def check_shape(X):
    """``(m, n)`` of 2-D rows with at least one row and one feature."""
    if getattr(X, "ndim", 2) != 2:
        raise ValueError(f"X must be 2-D [m, n], got shape {np.shape(X)}; Reshape your data "
                         "(X.reshape(-1, 1) for one feature, X.reshape(1, -1) for one row)")
    m, n = X.shape
    if m == 0 or n == 0:
        raise ValueError(f"0 {'sample' if m == 0 else 'feature'}(s) (shape={(m, n)}) while a "
                         "minimum of 1 is required.")
    return m, n


def check_labels(y, m: int):
    """``[m]`` float64 relevance labels (numbers, real, one per row), checked once."""
    y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    if np.issubdtype(y.dtype, np.complexfloating):
        raise ValueError("Complex data not supported: y must be real")
    if y.dtype.kind in "USV":                 # numpy would parse "2" silently
        raise TypeError(f"y must hold numbers (relevance labels), got dtype {y.dtype}")
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"y must hold numbers (relevance labels) ({e})") from None
    if y.ndim != 1 or y.shape[0] != m:
        raise ValueError(f"y must have shape [{m}], got {y.shape}")
    return check_targets(y, m)


def query_segments(qid, group, m: int, names=("qid", "group")) -> Segments:
    """The :class:`Segments` of the ``m`` rows from ``qid`` or ``group`` sizes (one query
    when neither is given), remapped once: it passes through every call below."""
    qid = sizes_to_qid(qid, group, m, names)
    seg = (Segments(np.zeros(m, np.int32), 1, np.zeros(1, np.int32)) if qid is None else
           segment_ids(qid.to_numpy() if hasattr(qid, "to_numpy") else qid))
    if seg.seg.shape[0] != m:
        raise ValueError(f"qid has {seg.seg.shape[0]} rows but X has {m}")
    return seg


def query_weights(sample_weight, seg):
    """``[Q]`` weight of every query from per-row weights that are constant within it."""
    w = np.asarray(sample_weight.to_numpy() if hasattr(sample_weight, "to_numpy") else sample_weight)
    seg = seg.seg
    if w.dtype.kind not in "iufb":
        raise TypeError(f"sample_weight must hold numbers, got dtype {w.dtype}")
    w = w.astype(np.float64)
    if w.shape != seg.shape:
        raise ValueError(f"sample_weight must have shape [{seg.shape[0]}], got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and >= 0")
    Q = int(seg.max()) + 1
    qw = np.zeros(Q)
    qw[seg] = w
    if np.any(qw[seg] != w):
        raise ValueError("sample_weight must be constant within each query (it weights queries)")
    return qw
