"""The default solver: the cheapest exact solver of the problem's shape."""
from __future__ import annotations

from functools import singledispatchmethod

from .._core.types import saveable
from .._problem import KernelProblem, Problem
from ..scale.layout import ShardedData
from ..scale.stream import StreamedProblem
from .base import AbstractSolver, solver, takes
from .dual import Dual
from .primal import Primal

__all__ = ["Auto", "NAMES"]

NAMES = ("auto", "primal", "dual", "nystrom", "cg", "falkon")
"""The solvers by name (the estimators' ``solver=`` strings, scikit-learn's style)."""


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

    @singledispatchmethod
    def resolve(self, problem):
        """The solver this problem gets: of feature rows, the smaller system (``Dual`` when
        there are more features than rows, else ``Primal``)."""
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be a rankjax.Problem (or rj.scale.shard / "
                            f"rj.scale.stream of one), got {type(problem).__name__}")
        m, n = problem.X.shape
        return Dual() if n > m else Primal()

    @resolve.register(KernelProblem)
    def _(self, problem):
        return Dual()

    @resolve.register(ShardedData)
    @resolve.register(StreamedProblem)
    def _(self, problem):
        return Primal()

    @staticmethod
    def named(name, kernel=None, basis=None, loop=None, default_basis=None):
        """The solver ``name`` (one of ``NAMES`` of this module) stands for: the one place
        a string becomes a solver. ``kernel`` ``None`` is the linear model; ``basis`` a
        :class:`~rankjax.Basis` or ``None`` (``"nystrom"``/``"falkon"`` then take
        ``default_basis``); ``loop`` the :class:`~rankjax.CG` of ``"cg"`` and FALKON's
        iterations. ``"auto"`` is the closed form the data needs: ``Nystrom`` with a basis,
        ``Dual`` with a kernel, else ``Auto()`` (``Primal`` or the linear ``Dual`` by shape).

        Example:
          >>> import rankjax as rj
          >>> rj.Auto.named("dual", rj.gaussian_kernel(0.5))
          Dual(kernel=Kernel(kind='gaussian', gamma=0.5, coef0=1.0, degree=2, shift=False), block_size=None)
        """
        from ..kernels import linear_kernel
        from .falkon import Falkon
        from .nystrom import Nystrom
        if name not in NAMES:
            raise ValueError(f"solver must be one of {NAMES} or a solver object (a "
                             f"rankjax.AbstractSolver), got {name!r}")
        if name in ("primal", "cg") and kernel is not None:
            raise ValueError(f"solver={name!r} fits the linear model: drop kernel= or use "
                             "solver='dual', 'nystrom' or 'falkon'")
        k = linear_kernel() if kernel is None else kernel
        if name in ("nystrom", "falkon"):
            basis = default_basis if basis is None else basis
        if name == "primal":
            return Primal()
        if name == "dual":
            return Dual(kernel)
        if name == "cg":
            return loop
        if name == "falkon":
            return Falkon(k, basis, options=loop)
        if name == "nystrom" or basis is not None:
            return Nystrom(k, basis)
        return Auto() if kernel is None else Dual(kernel)

    # Every method is the chosen solver's (the state's); each takes every kind its choice
    # does (a sharded or streamed problem: Primal's), so a verb's error names only solvers
    # that serve it.
    @takes(KernelProblem, ShardedData, StreamedProblem)
    def fit(self, problem, lam, state):
        return state.solver.fit(problem, lam, state)

    @takes(KernelProblem, ShardedData, StreamedProblem)
    def path(self, problem, lams, state):
        return state.solver.path(problem, lams, state)

    @takes(KernelProblem, ShardedData, StreamedProblem)
    def holdout(self, problem, lams, folds, state):
        return state.solver.holdout(problem, lams, folds, state)

    @takes(KernelProblem)
    def leave_pair_out(self, problem, lams, pairs, state):
        return state.solver.leave_pair_out(problem, lams, pairs, state)

    @takes(KernelProblem, ShardedData)
    def prepare(self, problem, state):
        return state.solver.prepare(problem, state)

    def cv_predictions(self, params, data, folds):
        m, n = data[0].shape
        return (Dual() if n > m else Primal()).cv_predictions(params, data, folds)
