"""A solve's state (lineax's ``init``/``compute``): what :meth:`AbstractSolver.init` decides
once for a (solver, problem) pair — the solver that serves the problem (``Auto``'s choice),
the route and its checked memory plan, the compute dtype, and whatever the solver factors
once for every verb — and every verb then reads instead of deciding again. A pytree: the
solver and the factors are its data (a kernel's γ traced), the rest static, so a state
crosses ``jit``, ``vmap`` and ``grad`` as an argument like the problem.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax

__all__ = ["State", "COVERS", "state_for"]

COVERS = {"holdout": ("holdout", "path", "fit"), "path": ("path", "fit"), "fit": ("fit",),
          "leave_pair_out": ("leave_pair_out",), "cv_predictions": ("cv_predictions", "fit")}
"""The verbs a state planned for one method serves: a hold-out's plan holds every λ's
full-data model (its path) and so a path's and a fit's; a path's holds a fit's; ``tune``'s
(``cv_predictions``) the learned model's fit."""


@dataclasses.dataclass(frozen=True)
class State:
    """What :meth:`~rankjax.AbstractSolver.init` decided for one (solver, problem) pair.

    Attributes:
      solver: the solver that serves the problem (``Auto`` resolved; its kernel traced).
      factors: what the solver factored once for every verb to reuse (a pytree of arrays,
        traced; :meth:`~rankjax.AbstractSolver.factor`), ``None`` where it keeps none.
      plan: the solver's route and memory plan (static; ``None`` where it has none).
      methods: the methods it was planned for (``COVERS`` says which verbs each
        serves).
      L: the λ it was planned for (at most: a path or fit of fewer λ is served too).
      dtype: the compute dtype's name.
      shape: the shape of the problem's ``X`` it was made from (``None``: a streamed
        problem). A state belongs to that problem: a verb refuses it on another shape, and
        on another problem of the same shape its plan and factors would be the first one's.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> state = rj.Auto().init(p, "holdout", L=2)
      >>> state.solver, state.serves("path", 2)
      (Primal(), True)
      >>> rj.path(p, lams=[0.1, 1.0], state=state).value.weights.shape
      (2, 3)
    """

    solver: object
    factors: Optional[object] = None
    plan: Optional[object] = None
    methods: tuple = ("holdout",)
    L: int = 1
    dtype: str = "float32"
    shape: Optional[tuple] = None

    def serves(self, method: str, L: int) -> bool:
        """Whether this state covers ``method`` over ``L`` λ."""
        return (any(method in COVERS.get(m, ()) for m in self.methods)
                and (L <= self.L or method == "fit"))

    def check(self, solver, method: str, L: int, verb: str, shape=None) -> "State":
        """This state, or a ``ValueError`` naming ``state`` when it was made for another
        solver, verb, a smaller grid or a problem of another ``shape`` (``solver`` the
        resolved solver of the call, or ``None`` when the call names none)."""
        if shape is not None and self.shape is not None and tuple(shape) != self.shape:
            raise ValueError(f"state was made for a problem of shape {self.shape}, not "
                             f"{tuple(shape)}: make it with solver.init(problem, ...) on "
                             "the problem it solves")
        if solver is not None and type(solver) is not type(self.solver):
            raise ValueError(f"state was made by {type(self.solver).__name__}.init, not by "
                             f"{type(solver).__name__}: pass the state of the solver "
                             f"{verb} uses (or leave solver out)")
        if not self.serves(method, L):
            raise ValueError(f"state was planned for {' and '.join(self.methods)} of {self.L} λ and does "
                             f"not cover {verb} of {L} λ: make it with "
                             f"solver.init(problem, {method!r}, L={L})")
        return self


def state_for(solver, problem, method: str, state=None, L: int = 1, folds=None) -> State:
    """``state`` when it is ``solver``'s and serves ``method`` over ``L`` λ (made on
    ``problem`` by the caller), else ``solver.init(problem, method, L, folds)``: the one
    way a caller holding a state it may reuse gets the one it needs."""
    if state is not None and state.solver == solver and state.serves(method, L):
        return state
    return solver.init(problem, method, L, folds)


jax.tree_util.register_dataclass(State, data_fields=["solver", "factors"],
                                  meta_fields=["plan", "methods", "L", "dtype", "shape"])
