"""The default solver: the cheapest exact solver of the problem's shape."""
from __future__ import annotations

from .._core.types import saveable
from .base import AbstractSolver, solver
from .dual import Dual
from .primal import Primal

__all__ = ["Auto"]


@saveable
@solver
class Auto(AbstractSolver):
    """:class:`Primal` when ``n <= m`` (an ``n x n`` system), else :class:`Dual` with the
    linear kernel (``m x m``; its model is the same linear weights); ``Dual`` for a
    precomputed kernel matrix, ``Primal`` for a sharded or streamed problem. Every method
    is the chosen solver's.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.Auto().resolve(rj.Problem(d.X, d.y, d.qid))
      Primal()
    """

    kinds = {m: ("features", "kernel") + tuple(k for k in ("sharded", "stream")
                                                if k in Primal.kinds_of(m))
             for m in ("fit", "path", "holdout", "cv_predictions", "leave_pair_out")}
    """Every kind the chosen solver takes for that method (a sharded or streamed problem:
    ``Primal``'s), so that a verb's error names only solvers that serve it."""

    def resolve(self, problem):
        """The solver this problem gets."""
        if problem.kind == "kernel":
            return Dual()
        if problem.kind in ("sharded", "stream"):
            return Primal()
        m, n = problem.X.shape
        return Dual() if n > m else Primal()

    def fit(self, problem, lam):
        return self.resolve(problem).fit(problem, lam)

    def path(self, problem, lams):
        return self.resolve(problem).path(problem, lams)

    def holdout(self, problem, lams, folds):
        return self.resolve(problem).holdout(problem, lams, folds)

    def leave_pair_out(self, problem, lams, pairs):
        return self.resolve(problem).leave_pair_out(problem, lams, pairs)

    def cv_predictions(self, params, data, folds):
        m, n = data[0].shape
        return (Dual() if n > m else Primal()).cv_predictions(params, data, folds)
