r"""Primal (linear) RankRLS: the ``n x n`` system :math:`(X^T L X + \lambda I) w = X^T L y`
(Pahikkala et al. 2009, eq. 28; Airola et al. 2010, eq. 6), or with preference edges :math:`(X^T M
M^T X + \lambda I) w = X^T M N`. One λ by a Cholesky factor, a grid by one ``eigh``
(:math:`w(\lambda) = V \operatorname{diag}(1/(\Lambda +\lambda)) V^T X^T L y`, §3.2), the exact
hold-outs of every λ (§3.3-3.4) and the differentiable hold-out that ``tune`` descends. No bias: a
constant feature cancels in every pair.
"""
from __future__ import annotations

from functools import partial, singledispatchmethod

import jax
import jax.numpy as jnp

from .._core.checks import check_gram
from .._core.host import is_concrete
from .._core.log import compiled, level
from .._core.memory import compute_dtype
from .._core.resolved import warn_unresolved
from .._solution import Solution, lane_codes
from ..graphs.folds import premerge
from .._core.types import saveable
from .base import AbstractSolver, dense_rows, solver
from .holdout import HoldOut, factored_holdout, holdout_from_system, two_phase
from .lpo import primal_pairs
from .models import LinearModel, PrimalPath, path_scores
from .ridge import decompose_primal, primal_system, ridge_solve
from ..scale.layout import ShardedData
from ..scale.stream import StreamedProblem
from . import sharded, streamed

__all__ = ["Primal", "UNRESOLVED"]

UNRESOLVED = "the Cholesky factor of the system + λ I fails (λ below its rounding)"


@jax.jit
def _primal_fit(X, y, graph, lam):
    G, b = primal_system(X, y, graph)
    return ridge_solve(G, b, jnp.asarray(lam, G.dtype))


@jax.jit
def _solve_core(G, b, lam):
    return ridge_solve(G, b, jnp.asarray(lam, G.dtype))


@jax.jit
def _path_from_system(G, b, lams):
    return decompose_primal(G, b).coef_path(lams)


def _in_compute_dtype(*arrays):
    """The streamed normal equations (and λ) in the compute dtype."""
    return [jnp.asarray(a, compute_dtype()) for a in arrays]


@partial(jax.jit, static_argnames=("train", "root"))
def path_core(X, y, graph, lams, X_valid, train=False, root=False):
    r"""``(W [L, n(, k)], train scores or None, valid scores or None)`` of every λ from one
    ``eigh`` of :math:`X^T L X` (the λ below its floor by their own Cholesky factor)."""
    G, b = primal_system(X, y, graph, root)
    W = decompose_primal(G, b).coef_path(lams)
    return (W, path_scores(X, W) if train else None,
            None if X_valid is None else path_scores(X_valid, W))


@compiled(static_argnames=("route",))
def _primal_holdout(X, y, graph, lams, folds, route="both"):
    r"""``(predictions [L, m(, k)], weights [L, n(, k)])``: the hold-out and every λ's
    full-data weights from the same ``eigh`` of :math:`X^T L X` (the lanes below its floor
    from the Cholesky factor their hold-out lane makes, :func:`holdout_from_system`).
    ``(G, b)`` in the root form (``Z = S X``): no branch to the root-free form and its two
    fallback copies (a quarter of the program's generated kernels), for one pass writing
    ``Z`` (measured: benchmarks/REPORT.md §8)."""
    G, b = primal_system(X, y, graph, root=True)
    return holdout_from_system(X, y, graph, lams, folds, G, b, route=route, weights=True)


def _fitted(w, lam):
    """The :class:`Solution` of one λ's weights ``w`` (NaN lanes warned of)."""
    warn_unresolved(w, lam, "rj.fit(Primal())", UNRESOLVED)
    return Solution(LinearModel(w), lane_codes(w, lanes=False), {})


def linear_holdout(X, y, graph, lams, folds, where):
    """``(predictions [L, m(, k)], weights [L, n(, k)])`` of the primal hold-out on checked
    dense rows (the Nyström features too), the λ grid in ``X``'s dtype."""
    pred, W = two_phase(_primal_holdout, X, y, graph, lams,
                        premerge(folds, lams.shape[0], X.shape[1]), lams=lams, verbose=level())
    warn_unresolved(pred, lams, where, UNRESOLVED)
    return pred, W


def _scaled(X, params):
    s = params.get("log_scales")
    return X if s is None else X * jnp.exp(s)


def linear_cv_predictions(params, data, folds):
    """The differentiable hold-out of the linear model (ARD scales ``X diag(exp(s))``):
    :func:`factored_holdout` on the scaled rows."""
    if len(data) > 3:                                   # a sharded problem (Primal.prepare)
        return sharded.primal_cv_predictions(params, data[3])
    X, y, graph = data[:3]
    return factored_holdout(_scaled(X, params), y, graph, folds, jnp.exp(params["log_lam"]))




@saveable
@solver
class Primal(AbstractSolver):
    r"""The primal system (``n x n``; Pahikkala et al. 2009, §3.1, eq. 28)

    .. math::

       (X^T L X + \lambda I)\, w = X^T L y ,

    the cheapest exact solver when there are fewer features than rows. ``fit``: one
    Cholesky factor; ``path``/``holdout``: one ``eigh`` for every λ (a λ below its
    rounding floor by its own factor, NaN and ``unresolved_lambda`` where that fails).

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=1.0).value.weights.shape
      (3,)
    """

    @singledispatchmethod
    def plan(self, problem, methods, L, folds):
        """Feature rows: the ``n x n`` matrices must fit (``check_gram``); no route."""
        X = problem.rows()
        if is_concrete(X):
            check_gram(X)

    @plan.register(ShardedData)
    @plan.register(StreamedProblem)
    def _(self, problem, methods, L, folds):
        """Sharded and streamed problems hold ``n x n`` per device: nothing to plan."""

    @singledispatchmethod
    def prepare(self, problem, state):
        """The data of :meth:`cv_predictions`: ``(X, y, graph)`` dense on one device."""
        return super().prepare(problem, state)

    @prepare.register(ShardedData)
    def _(self, problem, state):
        """A sharded problem's: those of the problem it was built from (the loss and the
        start read them) and the sharded problem itself (the hold-out runs on it)."""
        if problem.source is None:
            raise TypeError("tune on a sharded problem needs the problem it was built from: "
                            "shard it with rj.scale.shard(problem)")
        return super().prepare(problem.source, state) + (problem,)

    def cv_loss(self, params, data, folds):
        """The hold-out loss per row; a sharded problem's in its layout, one ``psum`` (no
        process gathers another's rows)."""
        if len(data) > 3:                               # a sharded problem (prepare)
            return sharded.primal_cv_loss(params, data[3])
        return super().cv_loss(params, data, folds)

    @singledispatchmethod
    def fit(self, problem, lam, state):
        return _fitted(_primal_fit(problem.rows(), problem.y, problem.graph, lam), lam)

    @fit.register(ShardedData)
    def _(self, problem, lam, state):
        return _fitted(sharded.primal_fit(problem, lam), lam)

    @fit.register(StreamedProblem)
    def _(self, problem, lam, state):
        G, b, counts = streamed.normal_equations(problem)
        w = _solve_core(*_in_compute_dtype(G, b), lam)
        return Solution(LinearModel(w), lane_codes(w, lanes=False), counts)

    @singledispatchmethod
    def path(self, problem, lams, state):
        W, _, _ = path_core(problem.rows(), problem.y, problem.graph, lams, None)
        return self._path(problem, lams, W, {})

    @path.register(ShardedData)
    def _(self, problem, lams, state):
        return self._path(problem, lams, sharded.primal_path(problem, lams), {})

    @path.register(StreamedProblem)
    def _(self, problem, lams, state):
        G, b, stats = streamed.normal_equations(problem)
        W = _path_from_system(*_in_compute_dtype(G, b, lams))
        return self._path(problem, lams, W, stats)

    def _path(self, problem, lams, W, stats):
        valid = None if problem.valid is None else path_scores(problem.valid.X, W)
        warn_unresolved(W, lams, "rj.path(Primal())", UNRESOLVED)
        return Solution(PrimalPath(lams, W, None, valid), lane_codes(W), stats)

    @singledispatchmethod
    def holdout(self, problem, lams, folds, state):
        X = dense_rows(problem)
        lams = lams.astype(X.dtype)
        pred, W = linear_holdout(X, problem.y, problem.graph, lams, folds,
                                 "rj.holdout(Primal())")
        return Solution(HoldOut(lams, pred, folds, PrimalPath(lams, W)), lane_codes(pred),
                        {})

    @holdout.register(ShardedData)
    def _(self, problem, lams, folds, state):
        pred, W = sharded.primal_holdout(problem, lams.astype(problem.X.dtype))
        return Solution(HoldOut(lams, pred, None, PrimalPath(lams, W)), lane_codes(pred), {})

    @holdout.register(StreamedProblem)
    def _(self, problem, lams, folds, state):
        G, b, stats = streamed.normal_equations(problem)
        G_, b_, lams = _in_compute_dtype(G, b, lams)
        W = _path_from_system(G_, b_, lams)
        pred = streamed.holdout_predictions(problem, G, b, lams, stats)
        return Solution(HoldOut(lams, pred, None, PrimalPath(lams, W)), lane_codes(pred),
                        stats)

    def leave_pair_out(self, problem, lams, pairs, state):
        X = dense_rows(problem)
        lams = lams.astype(X.dtype)
        h = primal_pairs(X, problem.y, pairs, lams, "rj.holdout(Primal(), LeavePairOut)")
        return Solution(h, lane_codes(h.predictions), {})

    def cv_predictions(self, params, data, folds):
        return linear_cv_predictions(params, data, folds)
