"""The abstract solver (as lineax's ``AbstractLinearSolver``): a frozen pytree object
that owns its numerics. A solver implements the methods it supports; the verbs of the front
door check once, call the method and wrap one :class:`~rankjax.Solution`:

============================================  ==============================================
method                                        returns
============================================  ==============================================
``init(problem, method, L, folds)``            the :class:`State` of one (solver, problem):
                                               what every verb below reads, decided once
``fit(problem, lam, state)``                   :class:`Solution` whose value is a model
``path(problem, lams, state)``                 :class:`Solution` whose value is a λ path
``holdout(problem, lams, folds, state)``       :class:`Solution` whose value is a ``HoldOut``
                                               (:class:`Folds` of whole queries)
``leave_pair_out(problem, lams, pairs,         :class:`Solution` whose value is a ``PairHoldOut``
state)``
                                               (checked ``[p, 2]`` pairs of a global ranking
                                               problem; ``rj.holdout`` with :class:`LeavePairOut`)
``cv_predictions(params, data, folds)``        ``[m]`` hold-out predictions, differentiable in
                                               ``params`` (what ``tune``/``cv_loss`` descend)
============================================  ==============================================

:func:`capabilities` is the set of these a class implements. The kinds of problem a method
takes are its dispatch's registrations (``functools.singledispatchmethod``, or ``takes``
for one body that serves several types; ``cv_predictions``'s are ``prepare``'s): the
default takes feature rows, a registered :class:`~rankjax.KernelProblem` a precomputed
kernel matrix, ``ShardedData`` a sharded problem, ``StreamedProblem`` a streamed one. A new
solver is one class (and one line in the test registry).
"""
from __future__ import annotations

import dataclasses
import inspect
from functools import singledispatchmethod
from typing import ClassVar, List, Tuple

import jax
import numpy as np

from .._core.checks import check_positive
from .._core.memory import compute_dtype
from .._core.sparse import as_dense
from .._problem import KINDS, kind_of
from ..kernels.kernel import Kernel
from .state import State

__all__ = ["AbstractSolver", "METHODS", "KINDS", "capabilities", "solver", "supporting",
           "check_call", "dense_rows", "takes", "kinds_of"]

METHODS = ("fit", "path", "holdout", "leave_pair_out", "cv_predictions")
"""The methods a solver may implement (what :func:`capabilities` reports)."""


KNOWN: List[type] = []
"""Every concrete solver class, in definition order (error messages name them)."""


class AbstractSolver:
    r"""A way to solve RankRLS, :math:`\min_w (y - Xw)^T L (y - Xw) + \lambda \lVert w \rVert^2` or its kernel
    form (Pahikkala et al. 2009, §3), as a frozen pytree object passed whole to a verb.

    Subclasses implement any of :data:`~rankjax.solvers.METHODS` (each dispatching on the
    kinds of problem it takes, ``takes``); everything they compute they own.

    Example:
      >>> import rankjax as rj
      >>> sorted(rj.capabilities(rj.Primal()))
      ['cv_predictions', 'fit', 'holdout', 'leave_pair_out', 'path']
    """

    stops_early: ClassVar[bool] = False
    """True for an iterative solver that stops early on a problem's validation rows (the
    estimators' ``eval_set``)."""

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        KNOWN.append(cls)

    def fit(self, problem, lam, state):
        """The model of one λ (a :class:`~rankjax.Solution`)."""
        raise NotImplementedError

    def path(self, problem, lams, state):
        """Every λ's model of a grid (a :class:`~rankjax.Solution` of a path)."""
        raise NotImplementedError

    def holdout(self, problem, lams, folds, state):
        """Exact hold-out predictions of every λ (a :class:`~rankjax.Solution`)."""
        raise NotImplementedError

    def leave_pair_out(self, problem, lams, pairs, state):
        """Exact leave-pair-out predictions ``[L, p, 2]`` of every λ for checked ``pairs``
        ``[p, 2]`` (a :class:`~rankjax.Solution` of a ``PairHoldOut``)."""
        raise NotImplementedError

    def cv_predictions(self, params, data, folds):
        """``[m]`` hold-out predictions at ``params`` (traced, differentiable)."""
        raise NotImplementedError

    def cv_loss(self, params, data, folds):
        r"""The hold-out RankRLS loss per row, :math:`(y - f')^T L (y - f') / m`, of
        :meth:`cv_predictions` (traced, differentiable; ``m`` the graph's kept rows)."""
        y, graph = data[1:3]
        return graph.loss(self.cv_predictions(params, data, folds), y) / graph.kept_rows()

    def init(self, problem, method="holdout", L: int = 1, folds=None) -> State:
        """The :class:`~rankjax.solvers.state.State` of ``method`` (one of
        :data:`~rankjax.solvers.METHODS`, or a tuple of them: one plan for all) over ``L`` λ
        on ``problem`` (lineax's ``init``): the solver that serves it (:meth:`resolve`), its
        route and memory plan (:meth:`plan`, refused up front with a
        :class:`~rankjax.MemoryPlanError` before any array is built), the compute dtype and
        what the solver factors for every verb (:meth:`factor`), decided once; every verb
        given the state reads them (a hold-out's state serves the path and the fit too:
        ``State.serves``). ``folds``: drawn :class:`~rankjax.Folds`, or before they are
        drawn a count or ``None``.

        Example:
          >>> import rankjax as rj
          >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
          >>> state = rj.Auto().init(rj.Problem(d.X, d.y, d.qid), "fit")
          >>> state.solver, state.methods
          (Primal(), ('fit',))
        """
        solver = self.resolve(problem)
        methods = (method,) if isinstance(method, str) else tuple(method)
        plan = solver.plan(problem, methods, L, folds)
        X = getattr(problem, "X", None)
        return State(solver, solver.factor(problem, plan), plan, methods, int(L),
                     compute_dtype(*[] if X is None else [X]).name,
                     None if X is None else tuple(X.shape))

    def plan(self, problem, methods: tuple, L: int, folds):
        """The route and memory plan of ``methods`` over ``L`` λ on ``problem`` from the
        shapes (a hashable value the methods read from ``state.plan``), raising
        :class:`~rankjax.MemoryPlanError` when it cannot fit; ``None`` (nothing to plan) by
        default. Called by :meth:`init` alone."""
        return None

    def factor(self, problem, plan):
        """What every verb on ``problem`` reuses, factored once by :meth:`init` after
        :meth:`plan` (a pytree of arrays the methods read from ``state.factors``: e.g. one
        ``eigh`` that serves a fit, a path and a hold-out); ``None`` by default."""
        return None

    def allows_zero(self, problem) -> bool:
        """Whether ``fit`` takes λ = 0 on ``problem`` (iterative solvers regularise by
        stopping early)."""
        return False

    def basis_rows(self, m: int):
        """The rows ``b`` of the basis-vector model this solver fits among ``m`` training rows,
        ``None`` when its model has no basis: selection plans subsamples (at most ``b``) and
        searches γ where there is one."""
        return None

    def with_basis_rows(self, m: int, b: int) -> "AbstractSolver":
        """This solver with a basis of at most ``b`` of ``m`` rows (itself without a basis)."""
        return self

    def resolve(self, problem) -> "AbstractSolver":
        """The solver that serves ``problem`` (itself; :class:`~rankjax.Auto` chooses)."""
        return self

    # -- hyper-parameters (the solvers that implement cv_predictions) --------------------

    def tuned_kernel(self):
        """The kernel whose parameters ``tune`` learns (``None``: the linear model)."""
        kernel = getattr(self, "kernel", None)
        return None if kernel is None or kernel.kind == "linear" else kernel

    def param_keys(self) -> set:
        """The keys ``params`` may hold for :meth:`cv_predictions`."""
        kernel = self.tuned_kernel()
        keys = {"log_lam", "log_scales"}
        if kernel is not None:
            keys |= {"log_gamma"} | ({"log_coef0"} if kernel.kind == "polynomial" else set())
        return keys

    def start_params(self, n: int, dtype, lam, ard: bool = False) -> dict:
        """The starting point of ``tune`` in log space: λ, the kernel's parameters and,
        with ``ard``, one scale per feature (1)."""
        import jax.numpy as jnp
        params = {"log_lam": jnp.asarray(np.log(lam), dtype)}
        kernel = self.tuned_kernel()
        if kernel is not None:
            gamma = check_positive(kernel.gamma, name="kernel gamma", scalar=True)
            params["log_gamma"] = jnp.asarray(np.log(gamma), dtype)
            if kernel.kind == "polynomial":
                coef0 = check_positive(kernel.coef0, name="kernel coef0", scalar=True)
                params["log_coef0"] = jnp.asarray(np.log(coef0), dtype)
        if ard:
            params["log_scales"] = jnp.zeros(n, dtype)
        return params

    def at(self, params) -> "AbstractSolver":
        """This solver with the kernel at learned ``params`` (host values)."""
        kernel = self.tuned_kernel()
        if kernel is None:
            return self
        new = {"gamma": float(np.exp(params["log_gamma"]))}
        if "log_coef0" in params:
            new["coef0"] = float(np.exp(params["log_coef0"]))
        return dataclasses.replace(self, kernel=dataclasses.replace(kernel, **new))

    def for_data(self) -> "AbstractSolver":
        """This solver as the programs over its prepared data see it: what that data already
        holds (a basis) left out, so that a new value of it compiles nothing."""
        return self

    def prepare(self, problem, state):
        """The data of :meth:`cv_predictions` (host side): ``(X dense, y, graph)``, on the
        plan of ``state`` (``init(problem, "cv_predictions")``)."""
        return dense_rows(problem), problem.y, problem.graph


def solver(cls=None, *, leaves=("kernel",)):
    """Class decorator: a frozen dataclass registered as a pytree whose ``leaves`` (the
    fields present among them) are traced and every other field static, so a solver
    crosses ``jit`` whole and a new γ compiles nothing."""
    def wrap(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        data = [n for n in names if n in leaves]
        return jax.tree_util.register_dataclass(
            cls, data_fields=data, meta_fields=[n for n in names if n not in data])
    return wrap if cls is None else wrap(cls)


def takes(*types):
    """Decorator: a solver method whose one body serves the problem types ``types``
    besides feature rows (a ``singledispatchmethod`` with each registered): its dispatch is
    the table of the kinds it takes (:func:`kinds_of`)."""
    def wrap(fn):
        method = singledispatchmethod(fn)
        for t in types:
            method.register(t, fn)
        return method
    return wrap


def kinds_of(cls, method: str) -> Tuple[str, ...]:
    """The kinds of problem (``KINDS``) ``cls``'s ``method`` takes, read from its
    dispatch (``prepare``'s for ``cv_predictions``): each registered problem type's
    ``kind``, and feature rows for the default; a plain method takes feature rows alone.

    Example:
      >>> import rankjax as rj
      >>> kinds_of(rj.Primal, "fit"), kinds_of(rj.Dual, "holdout")
      (('features', 'sharded', 'stream'), ('features', 'kernel'))
    """
    attr = inspect.getattr_static(cls, "prepare" if method == "cv_predictions" else method)
    if not isinstance(attr, singledispatchmethod):
        return ("features",)
    names = {getattr(t, "kind", "features") for t in attr.dispatcher.registry}
    return tuple(k for k in KINDS if k in names)


def capabilities(solver) -> frozenset:
    """The methods ``solver`` (an instance or a class) implements, of :data:`~rankjax.solvers.METHODS`.

    Example:
      >>> import rankjax as rj
      >>> sorted(rj.capabilities(rj.CG()))
      ['fit']
    """
    cls = solver if isinstance(solver, type) else type(solver)
    if not (isinstance(cls, type) and issubclass(cls, AbstractSolver)):
        raise TypeError(f"solver must be a rankjax solver (rj.Primal(), rj.Dual(kernel), ...), "
                        f"got {cls.__name__ if isinstance(cls, type) else type(solver).__name__}")
    return frozenset(m for m in METHODS if getattr(cls, m) is not getattr(AbstractSolver, m))


def supporting(method: str, kind: str = "features") -> List[str]:
    """The known solver classes that implement ``method`` for problems of ``kind``."""
    return [c.__name__ for c in KNOWN if method in capabilities(c) and kind in kinds_of(c, method)]


def check_call(problem, solver, method: str, verb: str):
    """The verbs' one check of a (problem, solver) pair: the solver that serves ``problem``
    (:meth:`AbstractSolver.resolve`), or a ``TypeError`` naming the solvers that do."""
    kind = kind_of(problem)
    if not isinstance(solver, AbstractSolver):
        raise TypeError(f"solver must be a rankjax solver (one of "
                        f"{', '.join(c.__name__ for c in KNOWN)}), got {type(solver).__name__}")
    solver = solver.resolve(problem)
    if method not in capabilities(solver):
        raise TypeError(f"{type(solver).__name__} does not support {verb}; solvers that do: "
                        f"{', '.join(supporting(method, kind)) or 'none'}")
    if kind not in kinds_of(type(solver), method):
        what = {"kernel": "a precomputed kernel matrix", "features": "feature rows",
                "sharded": "a sharded problem", "stream": "a streamed problem"}[kind]
        others = ", ".join(supporting(method, kind))
        hint = ("" if others or kind != "sharded" else
                f" ({verb} runs on one device: give it the rj.Problem the sharded one was "
                "built from, its .source)")
        raise TypeError(f"{type(solver).__name__} does not take {what} in {verb}; solvers "
                        f"that do: {others or 'none'}{hint}")
    return solver


def dense_rows(problem):
    """The problem's feature rows as a dense array (:meth:`rankjax.Problem.rows`: a
    ``TypeError`` for a precomputed kernel matrix)."""
    return as_dense(problem.rows())


def check_kernel_arg(kernel, allow_none: bool):
    """``kernel`` a rankjax :class:`Kernel` (or ``None`` where allowed)."""
    if kernel is None and allow_none:
        return None
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a rankjax.Kernel (e.g. rj.gaussian_kernel(0.5)), got "
                        f"{type(kernel).__name__}")
    return kernel
