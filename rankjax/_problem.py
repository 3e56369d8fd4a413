r"""The learning problem of the front door (:mod:`rankjax._solve`): rows, labels and their
queries, given once, checked and remapped once; the solver and the verb say what to do
with it (Pahikkala et al. 2009, §2: the query graph's Laplacian ``L`` in
:math:`\min_f (y - f)^T L (y - f) + \lambda \lVert f \rVert^2`).
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._core.checks import as_float_array, check_flag
from ._core.host import is_concrete
from ._core.queries import Segments, segment_ids
from .graphs.graph import check_problem, is_graph
from .graphs.build import query_graph
from .graphs.lists import list_graph
from .metrics.pairs import check_where

__all__ = ["Problem", "KernelProblem"]


class Problem:
    """Rows ``X``, labels ``y`` and their queries: what every verb (:func:`rankjax.fit`,
    :func:`rankjax.path`, :func:`rankjax.holdout`, :func:`rankjax.select`) solves.

    Args:
      X: ``[m, n]`` features (dense, a ``BCOO`` or a scipy sparse matrix), or with
        ``precomputed=True`` an ``[m, m]`` kernel matrix ``K`` (a validation problem's is
        ``[m_v, m]``: kernel values against the training rows).
      y: ``[m]`` labels (``[m, k]`` for ``k`` outputs; ``None`` for a preference graph).
      queries: the query of every row, one of: ``[m]`` query ids (any hashable), a
        :class:`~rankjax.Segments`, a graph (:func:`query_graph` with its options,
        :func:`preference_graph`, :func:`identity_graph` for RLS), or ``None`` (all rows
        one query).
      valid: a :class:`Problem` on other rows (its ``X`` is ``[m_v, m]`` kernel values
        against the training rows when ``precomputed``): the validation data of every
        verb that takes one (path scores, CG/FALKON early stopping, :func:`select`).
      precomputed: ``X`` is a kernel matrix (solve with :class:`Dual` or :class:`CG`).
      qid: with a graph that holds no query ids (RLS's :func:`identity_graph`), the ``[m]``
        query ids the metrics of :func:`rankjax.select` average over.
      where: padded lists (rax's layout): ``X`` ``[Q, L, n]``, ``y`` ``[Q, L]`` and ``where``
        ``[Q, L]`` (bool; ``None``: every entry) the entries that count, with no ``queries``:
        each list is a query (:func:`rankjax.list_graph`), the rows are the ``Q * L`` entries
        list by list (``X.reshape(Q * L, n)``; predictions ``.reshape(-1, Q, L)``), the
        left-out entries add nothing (their values, NaN padding included, are never read)
        and the hold-out's folds are the lists. ``X``, ``y`` and ``where`` may all be traced.

    Attributes:
      X: the checked features, in the problem's dtype.
      y: the checked labels, in the same dtype.
      graph: the training graph.
      qid: ``[m]`` dense query ids (``None`` for a preference graph): what per-query
        metrics average over.
      valid: a :class:`Problem` or ``None``.
      precomputed: bool (static).

    A ``Problem`` is a pytree: it crosses ``jit`` as an argument (construct it outside,
    where the queries are remapped on the host). With ``precomputed=True`` the object is a
    ``KernelProblem`` (of this module): each kind of problem is a type that supplies what
    the solvers read of it (:meth:`rows`), so a solver dispatches on the type, never on a
    flag.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> p.X.shape, p.graph.num_queries
      ((127, 3), 5)
    """

    __slots__ = ("X", "y", "graph", "qid", "valid", "precomputed")

    def __new__(cls, X=None, y=None, queries=None, *, precomputed: bool = False, **kw):
        kernel = cls is Problem and check_flag(precomputed, "precomputed")
        return object.__new__(KernelProblem if kernel else cls)

    def __init__(self, X, y=None, queries=None, *, valid: Optional["Problem"] = None,
                 precomputed: bool = False, qid=None, where=None):
        precomputed = check_flag(precomputed, "precomputed")
        if where is not None or getattr(X, "ndim", None) == 3:
            X, y, queries = _lists(X, y, queries, where, precomputed, qid)
        graph, ids = _as_graph(queries, np.shape(X)[0] if hasattr(X, "shape") else None, y)
        if qid is not None:
            if not is_graph(queries):
                raise TypeError("qid is given with a graph (queries=identity_graph(m), say); "
                                "query ids go in queries")
            ids = np.asarray(segment_ids(qid, "qid").seg)
            if ids.shape[0] != graph.num_rows:
                raise ValueError(f"qid has {ids.shape[0]} rows but the graph {graph.num_rows}")
        qid = ids
        name = "K" if precomputed else "X"
        X, y = check_problem(X, y, graph, name)
        if valid is not None:
            if precomputed and X.shape[0] != X.shape[1]:
                raise ValueError(f"K must be a square [m, m] kernel matrix of the training rows "
                                 f"with precomputed=True, got shape {tuple(X.shape)}")
            if not isinstance(valid, Problem):
                raise TypeError(f"valid must be a rankjax.Problem, got {type(valid).__name__}")
            if valid.precomputed != precomputed:
                raise ValueError("valid must be precomputed exactly when the problem is")
            want = X.shape[0] if precomputed else X.shape[1]
            if valid.X.shape[1] != want:
                raise ValueError(f"valid.X must have {want} columns "
                                 f"({'training rows' if precomputed else 'features'}), got "
                                 f"{valid.X.shape[1]}")
        _set(self, X, y, graph, qid, valid, precomputed)

    @property
    def shape(self):
        """``(m, n)`` of ``X``."""
        return self.X.shape

    kind = "features"
    """The kind's name (``solvers.base.KINDS``): what error messages and the solvers'
    dispatch (``solvers.base.kinds_of``) call problems of this type."""

    def rows(self):
        """``X``: the ``[m, n]`` feature rows the solvers of rows read."""
        return self.X

    def __repr__(self):
        return (f"Problem(X={tuple(self.X.shape)}, queries={type(self.graph).__name__}, "
                f"precomputed={self.precomputed}, valid={self.valid is not None})")


class KernelProblem(Problem):
    """A :class:`Problem` whose ``X`` is a precomputed ``[m, m]`` kernel matrix (built by
    ``Problem(K, y, queries, precomputed=True)``): solved by :class:`~rankjax.Dual` without a
    kernel or :class:`~rankjax.CG`; it has no feature rows."""

    __slots__ = ()
    kind = "kernel"

    def rows(self):
        raise TypeError("this solver needs feature rows; a precomputed kernel matrix is "
                        "solved by rj.Dual() (no kernel) or rj.CG()")


KINDS = ("features", "kernel", "sharded", "stream")
"""The kinds of problem: feature rows, a precomputed kernel matrix, rows sharded over a
device mesh (:func:`rankjax.scale.shard`) and chunks streamed from files
(:func:`rankjax.scale.stream`); each a type whose ``kind`` names it."""


def kind_of(problem) -> str:
    """The kind (``KINDS``) of ``problem``'s type, or a ``TypeError`` when it is no
    rankjax problem: the one place a problem's kind is read."""
    kind = getattr(type(problem), "kind", None)
    if kind not in KINDS or not hasattr(problem, "graph"):
        raise TypeError(f"problem must be a rankjax.Problem (or rj.scale.shard / "
                        f"rj.scale.stream of one), got {type(problem).__name__}")
    return kind


def _set(p, X, y, graph, qid, valid, precomputed):
    for k, v in zip(Problem.__slots__, (X, y, graph, qid, valid, precomputed)):
        object.__setattr__(p, k, v)
    return p


def with_rows(p: Problem, X) -> Problem:
    """``p`` with other rows ``X`` of the same shape and dtype (checked by the caller)."""
    return _set(object.__new__(type(p)), X, p.y, p.graph, p.qid, p.valid, p.precomputed)


def _frozen(self, name, value):
    raise AttributeError(f"Problem is immutable: cannot set {name}")


Problem.__setattr__ = _frozen


def _lists(X, y, queries, where, precomputed, qid):
    """``(X [Q L, n], y [Q L], ListGraph)`` of padded lists: the left-out entries zeroed (a
    kept entry's NaN/inf is an error when concrete)."""
    if precomputed or queries is not None or qid is not None:
        raise ValueError("padded lists (X [Q, L, n] with where) are their own queries: pass "
                         "no queries, qid or precomputed kernel")
    X = as_float_array(X, "X")
    if X.ndim != 3:
        raise ValueError(f"with where, X must be [Q, L, n] padded lists, got shape {X.shape}")
    Q, L, n = X.shape
    keep = check_where(where, (Q, L))
    if y is None:
        raise ValueError("padded lists need labels y [Q, L]")
    y = as_float_array(y, "y")
    if y.shape != (Q, L):
        raise ValueError(f"y must be [Q, L] = {(Q, L)} with padded lists, got {y.shape}")
    for name, a, k in (("X", X, keep[..., None]), ("y", y, keep)):
        if is_concrete(a) and is_concrete(keep) and bool(jnp.any(k & ~jnp.isfinite(a))):
            q, pos = (int(i) for i in np.argwhere(np.asarray(k & ~jnp.isfinite(a)))[0][:2])
            raise ValueError(f"{name} contains NaN or inf values in a kept entry (list {q}, "
                             f"position {pos})")
    X = jnp.where(keep[..., None], X, 0).reshape(Q * L, n)
    y = jnp.where(keep, y, 0).reshape(Q * L)
    return X, y, list_graph(keep, dtype=X.dtype)


def _as_graph(queries, m, y) -> tuple:
    """``(graph, qid)`` from the one ``queries`` argument."""
    if is_graph(queries):
        return queries, getattr(queries, "seg", None)
    if queries is None:
        if m is None:
            raise TypeError("X must be an array with a shape")
        queries = np.zeros(m, np.int32)
    if not isinstance(queries, Segments):
        if isinstance(queries, (int, float, str)):
            raise TypeError(f"queries must be [m] query ids, a Segments or a graph, got "
                            f"{type(queries).__name__}")
        queries = segment_ids(queries, "queries")
    return query_graph(queries), np.asarray(queries.seg)


def _flatten(p):
    return (p.X, p.y, p.graph, p.qid, p.valid), p.precomputed


def _unflatten(precomputed, children) -> Problem:
    return _set(object.__new__(KernelProblem if precomputed else Problem), *children, precomputed)


for _cls in (Problem, KernelProblem):
    jax.tree_util.register_pytree_node(_cls, _flatten, _unflatten)
