"""Writing a solver: linear RankRLS by one eigendecomposition of ``X^T L X`` (Pahikkala et
al. 2009, §3.1, eq. 8), defined here, outside the library, with its public extension API
alone (``rankjax.solvers``: :class:`~rankjax.AbstractSolver`, the ``solver`` decorator,
``lane_codes``, ``HoldOut``, ``PrimalPath``). Its ``factor`` is the state's: ``init`` takes
the one ``eigh`` every verb of that state reads (lineax's ``init``/``compute``). It serves
every verb: ``fit``, ``path``
(every λ from the one decomposition), ``holdout`` (the exact hold-out, by retraining on
each fold's complement: the reference the library's fast hold-outs are checked against),
``select``, ``tune`` (its ``cv_predictions`` is the linear model's), the estimators
(``RankRLS(solver=EigenPrimal())``) and ``save_model``/``load_model`` (its models are
the library's ``LinearModel``).

    python examples/eigen_solver.py
"""
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import rankjax as rj
from rankjax.solvers import AbstractSolver, HoldOut, PrimalPath, lane_codes, solver

HI = jax.lax.Precision.HIGHEST
RTOL = 100.0
"""A λ below ``RTOL eps`` times the largest eigenvalue is not resolved in the dtype:
NaN."""


def _decompose(X, y, graph):
    """``(Λ [n], V [n, n], V^T X^T L y [n, k])`` of ``X^T L X = V Λ V^T`` (``L X`` by the
    graph's segment sums: never ``m x m``)."""
    G = jnp.matmul(X.T, graph.mv(X), precision=HI)
    b = jnp.matmul(X.T, graph.mv(y), precision=HI)
    vals, vecs = jnp.linalg.eigh((G + G.T) / 2)
    return jnp.maximum(vals, 0), vecs, jnp.matmul(vecs.T, b.reshape(b.shape[0], -1), precision=HI)


def _from_factors(factors, lams, tail):
    """``[L, n(, k)]``: ``w(λ) = V (Λ + λ)^{-1} V^T X^T L y`` for every λ of ``lams``; NaN
    below the dtype's floor (an invalid λ is the verbs' to refuse, not the solver's)."""
    vals, vecs, c = factors
    D = 1 / (vals[None, :] + lams[:, None])                                   # [L, n]
    W = jnp.einsum("pq,lqk->lpk", vecs, D[:, :, None] * c[None], precision=HI)
    floor = RTOL * jnp.finfo(vals.dtype).eps * vals[-1]
    W = jnp.where((lams >= floor)[:, None, None], W, jnp.nan)
    return W.reshape((lams.shape[0], vecs.shape[0]) + tail)


def _weights(X, y, graph, lams):
    return _from_factors(_decompose(X, y, graph), lams, y.shape[1:])


_factor = jax.jit(_decompose)
_path = jax.jit(_from_factors, static_argnums=2)


@partial(jax.jit, static_argnums=5)
def _holdout(X, y, graph, lams, fold_of_row, folds):
    """``[L, m(, k)]``: every row predicted by the weights trained without its fold (the
    fold's queries zeroed: ``L`` acts on whole queries, so their rows drop out of the
    system exactly). ``folds`` static: the loop's bounds are known, so it is a ``scan`` that
    reverse-mode differentiates."""
    shape = (1, -1) + (1,) * (y.ndim - 1)

    def one(f, acc):
        held = fold_of_row == f
        keep = jnp.where(held, 0, 1).astype(X.dtype)
        W = _weights(X * keep[:, None], y * keep.reshape(shape[1:]), graph, lams)
        P = jnp.einsum("mn,ln...->lm...", X, W, precision=HI)
        return acc + jnp.where(held.reshape(shape), P, 0)

    zero = jnp.zeros((lams.shape[0],) + y.shape, X.dtype)
    return jax.lax.fori_loop(0, folds, one, zero)


@solver
class EigenPrimal(AbstractSolver):
    """Linear RankRLS by one ``eigh`` of ``X^T L X`` (``n x n``): every λ of a grid from
    it.

    Example:
      >>> d = rj.make_ranking_data(6, num_features=3, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> w = rj.fit(p, EigenPrimal(), lam=1.0).value.weights
      >>> bool(np.allclose(w, rj.fit(p, rj.Primal(), lam=1.0).value.weights, atol=1e-5))
      True

      One ``init`` (one ``eigh``, in ``state.factors``) serves a fit and a path:

      >>> state = EigenPrimal().init(p, "path", L=2)
      >>> rj.path(p, lams=[0.1, 1.0], state=state).value.weights.shape
      (2, 3)
      >>> bool(np.allclose(rj.fit(p, lam=1.0, state=state).value.weights, w))
      True
    """

    def factor(self, problem, plan):
        """The one ``eigh`` every fit and path of this state reads (``state.factors``)."""
        return _factor(problem.X, problem.y, problem.graph)

    def fit(self, problem, lam, state):
        lam = jnp.asarray(lam, problem.X.dtype)
        W = _path(state.factors, lam[None], problem.y.shape[1:])
        return rj.Solution(rj.LinearModel(W[0]), lane_codes(W[0], lanes=False), {})

    def path(self, problem, lams, state):
        lams = lams.astype(problem.X.dtype)
        W = _path(state.factors, lams, problem.y.shape[1:])
        valid = None
        if problem.valid is not None:                    # what select scores on a valid set
            valid = jnp.einsum("mn,ln...->lm...", problem.valid.X, W, precision=HI)
        return rj.Solution(PrimalPath(lams, W, None, valid), lane_codes(W), {})

    def holdout(self, problem, lams, folds, state):
        lams = lams.astype(problem.X.dtype)
        X, y, graph = problem.X, problem.y, problem.graph
        pred = _holdout(X, y, graph, lams, folds.fold_of_row, folds.num_folds)
        path = PrimalPath(lams, _path(state.factors, lams, y.shape[1:]))
        return rj.Solution(HoldOut(lams, pred, folds, path), lane_codes(pred), {})

    def cv_predictions(self, params, data, folds):
        return rj.Primal().cv_predictions(params, data, folds)    # the same linear model


def main():
    from rankjax.estimators import RankRLS
    d = rj.make_ranking_data(30, num_features=5, seed=0)
    p = rj.Problem(d.X, d.y, d.qid)
    lams = np.logspace(-2, 2, 9)
    s = rj.select(p, [EigenPrimal()], lams=lams)
    print(f"select: λ {s.lam:.3g}, leave-query-out NDCG@10 {s.score:.4f}")
    r = rj.tune(p, EigenPrimal(), lam=1.0, steps=20)
    first, last = r.loss_history[0], r.loss_history[-1]
    print(f"tune: λ {r.lam:.3g}, hold-out loss {first:.4f} -> {last:.4f}")
    est = RankRLS(lam=s.lam, solver=EigenPrimal()).fit(d.X, d.y, qid=d.qid)
    score = est.score(d.X, d.y, qid=d.qid)
    print(f"RankRLS(solver=EigenPrimal()): training NDCG@10 {score:.4f}")


if __name__ == "__main__":
    main()
