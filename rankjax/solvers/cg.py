r"""RankRLS by conjugate gradient (Airola et al. 2010, §3; Pahikkala et al. 2009, §4.3): the
primal system :math:`(X^T L X + \lambda I) w = X^T L y` with two (sparse) matvecs and O(m) segment
work per iteration, or for a precomputed kernel the dual :math:`(R^T K R + \lambda I) B = R^T y`,
``A = R B`` (:math:`R R^T = L`: ``S`` for query graphs, the incidence ``M`` for preference
edges, ``I`` for RLS), on the one loop of :mod:`~rankjax.solvers.cg_loop`. The three methods
of Airola et al. 2010, Table 1: Tikhonov (λ > 0, no validation data), early stopping (λ = 0
with ``problem.valid``) and hybrid (both).
"""
from __future__ import annotations

import dataclasses
from functools import partial, singledispatchmethod
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core.checks import (as_float_array, check_count, check_matrix, check_positive,
                            check_symmetric)
from .._core.host import is_concrete
from .._core.log import begin, check_verbose
from .._core.memory import compute_dtype
from .._core.products import HI, mm
from .._core.sparse import is_bcoo, is_csr, is_scipy_sparse, to_csr
from .._core.types import saveable
from .._problem import KernelProblem
from .._solution import Solution
from .base import AbstractSolver, takes
from .cg_loop import differentiable_cg, static_metric
from ..scale.hosts import local_block
from ..scale.layout import ShardedData
from .models import DualModel, LinearModel

__all__ = ["CG", "as_operator", "criterion"]


@saveable
@dataclasses.dataclass(frozen=True, eq=False)
class CG(AbstractSolver):
    r"""Conjugate gradients with early stopping (Airola et al. 2010, §3), matrix-free on

    .. math::

       (X^T L X + \lambda I)\, w = X^T L y \quad (\lambda \ge 0) ,

    the solver of large sparse problems (a :class:`~rankjax.CSRMatrix` or scipy sparse ``X``),
    and the loop options of :class:`~rankjax.Falkon`. A pytree: ``tol`` and ``x0`` are
    traced leaves (a new tolerance or warm start compiles nothing), the rest is static.

    Attributes:
      tol: relative residual tolerance :math:`\lVert r \rVert \le tol \lVert b \rVert` (>= 0; 0 runs
      ``max_iter``);
        ``None`` (default): ``max(1e-8, 100 eps)`` of the compute dtype (1e-8 in float64,
        1.2e-5 in float32, which cannot resolve 1e-8).
      max_iter: iteration cap.
      patience: iterations without a better validation score before early stopping.
      recompute_every: the residual is recomputed as ``b - (A + λ I) x`` every that many
        iterations (0 = never).
      verbose: log every that many iterations while the loop runs (0 = off, nothing
        compiled in; logger ``"rankjax"``).
      x0: a warm start (``[n]`` weights; ``[m]`` root-space coefficients of a precomputed
        kernel, ``[l]`` for preference edges), or ``None`` (zeros).
      metric: the early-stopping criterion on ``problem.valid``: ``"pairwise_error"``
        (default; edge disagreement for preference graphs), ``"loss"`` (the RankRLS loss of
        the validation rows) or a rankjax metric (``rj.ndcg``, ...; those where higher is
        better are negated).
      metric_kwargs: a dict of the metric's options (``{"k": 10}``).
      higher_is_better: the metric's direction when it carries none.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> v = rj.make_ranking_data(10, num_features=5, seed=1)
      >>> p = rj.Problem(d.X, d.y, d.qid, valid=rj.Problem(v.X, v.y, v.qid))
      >>> s = rj.fit(p, rj.CG(metric=rj.ndcg, metric_kwargs={"k": 5}), lam=0.0)
      >>> rj.predict(s.value, v.X).shape, int(s.stats["best_iteration"]) >= 1
      ((256,), True)
    """

    tol: Optional[float] = None
    max_iter: int = 500
    patience: int = 10
    recompute_every: int = 50
    verbose: int = 0
    x0: Optional[object] = None
    metric: object = "pairwise_error"
    metric_kwargs: object = ()
    higher_is_better: Optional[bool] = None

    stops_early = True

    def __post_init__(self):
        if self.tol is not None:           # 0: run max_iter iterations
            check_positive(self.tol, name="tol", scalar=True, allow_zero=True)
        check_count(self.max_iter, "max_iter"), check_count(self.patience, "patience")
        check_count(self.recompute_every, "recompute_every", minimum=0)
        check_verbose(self.verbose)
        if self.x0 is not None:
            x0 = as_float_array(self.x0, "x0", finite=True)
            if x0.ndim != 1:
                raise ValueError(f"x0 must be 1-D, got shape {tuple(x0.shape)}")
            object.__setattr__(self, "x0", x0)
        kw = self.metric_kwargs
        if isinstance(kw, dict):
            kw = tuple(sorted(kw.items()))
        elif not isinstance(kw, tuple):
            raise TypeError(f"metric_kwargs must be a dict, got {type(kw).__name__}")
        object.__setattr__(self, "metric_kwargs", static_metric(self.metric, dict(kw), "CG"))

    def _key(self):
        return (self.tol, self.max_iter, self.patience, self.recompute_every, self.verbose,
                id(self.x0) if self.x0 is not None else None, self.metric, self.metric_kwargs,
                self.higher_is_better)

    def __eq__(self, other):
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def tolerance(self, dtype):
        """``tol``, or the default of ``dtype`` when ``None``."""
        if self.tol is None:
            return max(1e-8, 100 * float(jnp.finfo(dtype).eps))
        return self.tol

    def with_tol(self, tol):
        """A copy with another (possibly traced) tolerance, unchecked."""
        leaves, aux = _flatten_cg(self)
        return _unflatten_cg(aux, (tol, leaves[1]))

    def replace_verbose(self, verbose):
        """A copy with another ``verbose`` (a sharded loop logs nothing: one line per device)."""
        leaves, aux = _flatten_cg(self)
        return _unflatten_cg((aux[0], aux[1], aux[2], verbose) + aux[4:], leaves)

    def allows_zero(self, problem) -> bool:
        return True                        # regularisation by iteration (Airola et al. 2010)

    @takes(KernelProblem, ShardedData)
    def fit(self, problem, lam, state):
        if self.verbose:
            begin()                        # the clock of the loop's lines
        if problem.y is not None and problem.y.ndim != 1:
            raise ValueError("CG solves one output: fit one column of y at a time (or vmap)")
        valid = None if problem.valid is None else (
            as_operator(problem.valid.X, "valid.X"), problem.valid.y, problem.valid.graph)
        return self._fit(problem, lam, valid)

    @singledispatchmethod
    def _fit(self, problem, lam, valid):
        """The primal loop on feature rows (dense, BCOO, CSR)."""
        X = as_operator(problem.X, "X")
        _check_x0(self.x0, X.shape[1])
        r = _cg_primal(X, problem.y, problem.graph, lam, valid, self)
        return Solution(LinearModel(r.weights), r.result, r.stats())

    @_fit.register(KernelProblem)
    def _(self, problem, lam, valid):
        """The dual loop on a precomputed kernel matrix."""
        y, graph = problem.y, problem.graph
        K = check_matrix(problem.X, "K")
        if K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be a square [m, m] kernel matrix, got shape "
                             f"{tuple(K.shape)}")
        check_symmetric(K)
        _check_x0(self.x0, jax.eval_shape(lambda: graph.factor()[2](y)).shape[0])
        r = _cg_dual(K, y, graph, lam, valid, self)
        return Solution(DualModel(r.weights), r.result, r.stats())

    @_fit.register(ShardedData)
    def _(self, problem, lam, valid):
        """The primal loop with every device's rows, one ``psum`` a product."""
        _check_x0(self.x0, problem.num_features)
        if valid is not None and valid[0].shape[1] != problem.num_features:
            raise ValueError(f"valid.X has {valid[0].shape[1]} columns but X has "
                             f"{problem.num_features}")
        r = sharded_fit(problem, lam, self.replace_verbose(0), valid)
        return Solution(LinearModel(r.weights), r.result, r.stats())


def _flatten_cg(c):
    return (c.tol, c.x0), (c.max_iter, c.patience, c.recompute_every, c.verbose, c.metric,
                           c.metric_kwargs, c.higher_is_better)


_FIELDS = ("max_iter", "patience", "recompute_every", "verbose", "metric", "metric_kwargs",
           "higher_is_better")


def _unflatten_cg(aux, children):
    obj = object.__new__(CG)
    for k, v in zip(("tol", "x0") + _FIELDS, tuple(children) + tuple(aux)):
        object.__setattr__(obj, k, v)
    return obj


jax.tree_util.register_pytree_node(CG, _flatten_cg, _unflatten_cg)


def _check_x0(x0, n):
    if x0 is not None and is_concrete(x0) and x0.shape != (n,):
        raise ValueError(f"x0 must have shape [{n}], got {tuple(x0.shape)}")


def as_operator(X, name):
    """Dense, BCOO (converted to :class:`CSRMatrix` when concrete), scipy.sparse
    (converted to CSR directly) or CSRMatrix."""
    if is_scipy_sparse(X):
        X = to_csr(X)
    X = check_matrix(X, name)
    if is_bcoo(X) and is_concrete(X):
        X = to_csr(X)
    return X


def criterion(options, valid, scores_fn):
    """The loop's early-stopping criterion ``x -> value`` (lower is better) of the
    validation data ``valid = (rows, y, graph)`` and the metric of ``options`` (a
    :class:`CG`), or ``None`` without validation data."""
    if valid is None:
        return None
    _, yv, gv = valid
    crit = gv.criterion(yv, options.metric, options.higher_is_better, **dict(options.metric_kwargs))
    return lambda x: crit(scores_fn(x))


@jax.jit
def _cg_primal(X, y, graph, lam, valid, options):
    b = mm(X.T, graph.rhs(y, X.dtype))
    valid_fn = criterion(options, valid, lambda w: mm(valid[0], w))
    return differentiable_cg(lambda v: mm(X.T, graph.mv(mm(X, v))), b, options, lam,
                             options.x0, valid_fn)


@jax.jit
def _cg_dual(K, y, graph, lam, valid, options):
    R, Rt, rhs = graph.factor()
    valid_fn = criterion(options, valid,
                         lambda B: jnp.matmul(valid[0], R(B), precision=HI))
    b = rhs(y)
    dtype = b.dtype if jnp.issubdtype(b.dtype, jnp.floating) else compute_dtype()
    res = differentiable_cg(lambda v: Rt(jnp.matmul(K, R(v), precision=HI)), b.astype(dtype),
                            options, lam, options.x0, valid_fn)
    return res._replace(weights=R(res.weights))


@partial(jax.jit, static_argnames=("mesh", "axis"))
def _cg_sharded(problem, lam, valid, options, mesh, axis):
    def local(problem, lam, valid, options):
        X, y, graph = problem
        g = local_block(graph)
        if is_csr(X):                                  # a CSRMatrix: its device block
            X = local_block(X)
        b = lax.psum(mm(X.T, g.rhs(y, X.dtype)), axis)
        valid_fn = criterion(options, valid, lambda w: mm(valid[0], w))
        return differentiable_cg(lambda v: lax.psum(mm(X.T, g.mv(mm(X, v))), axis), b, options,
                                 lam, options.x0, valid_fn)
    return jax.shard_map(local, mesh=mesh, in_specs=(P(axis), P(), P(), P()),
                         out_specs=P(), check_vma=False)(problem, lam, valid, options)


def sharded_fit(data, lam, options, valid):
    r"""CG's :class:`~rankjax.solvers.cg_loop.CGResult`: the matvec :math:`X^T L X v` a
    per-device product over its own queries plus one ``psum`` of an ``[n]`` vector per
    iteration (dense or sparse ``X``); the loop state is replicated."""
    return _cg_sharded((data.X, data.y, data.graph), lam, valid, options, data.mesh, data.axis)
