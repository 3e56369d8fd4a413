"""pandas DataFrames as the estimators take them: numeric columns as they are, ``category``
and object (text) columns as category codes, the query ids from a named column.

A categorical column becomes numbers the feature map reads as categories
(:func:`rankjax.learn_feature_map`, ``categorical=``): a ``category`` column of numbers keeps its
values (so the same numbers in a file score alike, from the command line or ``jax.export``);
text categories become their position in the list learned at ``fit`` (``categories_``), a
category not in it a code the map has not seen (score 0), a missing value NaN.
"""
from __future__ import annotations

import warnings

import numpy as np

QUERY_COLUMNS = ("qid", "query_id", "queryid", "query", "group", "group_id", "qid_", "query id")
"""Column names that look like query ids (a warning when one is left among the features)."""


def is_frame(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "to_numpy")


class Frame:
    """A DataFrame's features as numbers: ``values [m, n]`` float64, ``names``, and
    ``categories`` (feature name -> the learned text categories, or None for a ``category``
    column of numbers)."""

    def __init__(self, values, names, categories):
        self.values, self.names, self.categories = values, names, categories

    @property
    def categorical(self):
        """The column indices read as categories."""
        return [j for j, c in enumerate(self.names) if c in self.categories]


def take_queries(X, qid, fit: bool, named=None):
    """``(X, qid)``: a string ``qid`` names a column of ``X`` (taken out of the features);
    without ``qid`` a column named ``qid`` (as XGBoost's ranker does) or ``named`` (the
    column the fit took the queries from) is taken; at ``fit`` a query-id-like column left
    among the features gets a warning."""
    if qid is None and named is not None and is_frame(X) and named in X.columns:
        qid = named
    if not is_frame(X):
        if isinstance(qid, str):
            raise ValueError(f"qid={qid!r} names a column: X must then be a pandas DataFrame")
        return X, qid
    if isinstance(qid, str):
        if qid not in X.columns:
            raise ValueError(f"qid={qid!r}: X has no such column (its columns: "
                             f"{', '.join(map(str, X.columns[:8]))}{' ...' if X.shape[1] > 8 else ''})")
        return X.drop(columns=qid), X[qid].to_numpy()
    if qid is None and "qid" in X.columns:
        return X.drop(columns="qid"), X["qid"].to_numpy()
    if fit and qid is not None:
        _warn_query_column(X, qid)
    return X, qid


def _warn_query_column(X, qid):
    q = np.asarray(qid.to_numpy() if hasattr(qid, "to_numpy") else qid)
    for c in X.columns:
        same = (q.shape == (X.shape[0],) and X[c].dtype.kind in "iuf"
                and np.array_equal(X[c].to_numpy(), q))
        if str(c).lower() in QUERY_COLUMNS or same:
            warnings.warn(f"X keeps column {c!r}, which looks like the query ids, among the "
                          f"features: drop it, or pass qid={c!r} to take it out", UserWarning,
                          stacklevel=4)
            return


def frame_values(X, categories=None) -> Frame:
    """The features of DataFrame ``X`` as numbers; ``categories`` the learned text categories
    (at ``predict``) or None (at ``fit``: learned here, sorted)."""
    names = [str(c) for c in X.columns]
    learned = {} if categories is None else dict(categories)
    cols = []
    for name, c in zip(names, X.columns):
        s = X[c]
        kind = _column_kind(s)
        if kind == "number":
            if name in learned and categories is not None and learned[name] is not None:
                raise ValueError(f"X column {name!r} was categorical (text) at fit, got numbers")
            cols.append(s.to_numpy(dtype=np.float64, na_value=np.nan))
            continue
        if kind == "numbered categories":
            learned.setdefault(name, None)
            cols.append(np.asarray(s.astype(object).to_numpy(), dtype=np.float64))
            continue
        labels = learned.get(name) if categories is not None else None
        if labels is None:
            if categories is not None:
                raise ValueError(f"X column {name!r} holds text, but it was not categorical at fit")
            labels = sorted({str(v) for v in s.dropna().tolist()})
            learned[name] = labels
        cols.append(_codes(s, labels))
    values = np.column_stack(cols) if cols else np.zeros((X.shape[0], 0))
    return Frame(values, names, {k: v for k, v in learned.items() if k in names})


def _column_kind(s):
    dtype = s.dtype
    if str(dtype) == "category":
        cats = s.cat.categories
        return "numbered categories" if cats.dtype.kind in "iuf" else "text"
    if dtype.kind in "biuf":
        return "number"
    if dtype.kind in "OSU" or str(dtype) in ("string", "str"):
        return "text"
    try:
        s.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"X column {s.name!r} of dtype {dtype} is neither numeric nor "
                        f"categorical ({e})") from None
    return "number"


def _codes(s, labels):
    """Positions of the values of ``s`` in ``labels`` (``len(labels)``: not among them, NaN:
    missing)."""
    import pandas as pd
    codes = pd.Categorical(s.astype(str), categories=list(labels)).codes.astype(np.float64)
    codes[codes < 0] = len(labels)
    codes[s.isna().to_numpy()] = np.nan
    return codes
