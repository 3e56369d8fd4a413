"""The solvers of the front door: frozen pytree objects passed whole to a verb (as lineax
passes a solver to ``linear_solve``). Each is one way to solve the RankRLS problem
``(X^T L X + λ I) w = X^T L y`` or its dual ``(L K + λ I) a = L y`` (Pahikkala et al. 2009,
§3.1-3.2); what each supports is the dispatch table of :mod:`rankjax._solve`
(:func:`rankjax.capabilities`).

========================  ===========================================================
``Primal()``              the ``n x n`` system: one Cholesky (one λ) or one ``eigh``
                          (a λ grid), Pahikkala et al. 2009 §3.1
``Dual(kernel)``          the ``m x m`` system in a kernel (``None``: the linear
                          kernel, or ``K`` itself for a ``precomputed`` problem), §3.2
``Nystrom(kernel, basis)``  the basis-vector model on ``b`` rows, §3.5
``CG(...)``               conjugate gradients with early stopping, Airola et al. 2010 §3
``Falkon(kernel, basis)``  preconditioned CG on the Nyström model (Rudi et al. 2017)
``Auto()``                ``Primal`` when ``n <= m``, else ``Dual``; ``Dual`` for a
                          ``precomputed`` problem
========================  ===========================================================
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax

from .cg_loop import CG
from .._core.checks import check_seed
from ..kernels.kernel import Kernel
from ..kernels.basis import as_nystrom
from .._core.types import saveable

__all__ = ["Primal", "Dual", "Nystrom", "CG", "Falkon", "Auto", "SOLVERS"]


def _kernel_arg(kernel, allow_none: bool):
    if kernel is None and allow_none:
        return None
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a rankjax.Kernel (e.g. rj.gaussian_kernel(0.5)), got "
                        f"{type(kernel).__name__}")
    return kernel


def _solver(cls):
    """A frozen dataclass whose ``kernel`` is its one pytree leaf (γ may be traced)."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    data = [n for n in names if n == "kernel"]
    return jax.tree_util.register_dataclass(
        cls, data_fields=data, meta_fields=[n for n in names if n not in data])


@saveable
@_solver
class Primal:
    """The primal system ``(X^T L X + λ I) w = X^T L y`` (``n x n``; Pahikkala et al. 2009,
    §3.1): the cheapest exact solver when there are fewer features than rows.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=1.0).value.weights.shape
      (3,)
    """


@saveable
@_solver
class Dual:
    """The dual system ``(L K + λ I) a = L y`` (``m x m``; Pahikkala et al. 2009, §3.2).

    Attributes:
      kernel: a :class:`Kernel`; ``None``: the linear kernel ``X X^T`` of a feature problem,
        or the matrix itself of a ``precomputed`` problem.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Dual(rj.gaussian_kernel(0.5)), lam=1.0)
      >>> s.value.coef.shape
      (127,)
    """

    kernel: Optional[Kernel] = None

    def __post_init__(self):
        _kernel_arg(self.kernel, allow_none=True)


@saveable
@_solver
class Nystrom:
    """The basis-vector (Nyström) model ``f(x) = sum_{i in R} a_i k(x, x_i)`` on ``b``
    training rows ``R`` (Pahikkala et al. 2009, §3.5): primal RankRLS on ``b`` features.

    Attributes:
      kernel: a :class:`Kernel`.
      basis: an int ``b`` (a uniform draw with ``seed``), ``[b]`` row indices, or a
        :class:`Basis` (e.g. ``Basis(200, method="kmeans++")``).
      seed: the draw of an int ``basis``.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.Nystrom(rj.gaussian_kernel(0.5), 10),
      ...            lam=1.0)
      >>> s.value.coef.shape
      (1, 10)
    """

    kernel: Kernel
    basis: object
    seed: int = 0

    def __post_init__(self):
        _kernel_arg(self.kernel, allow_none=False)
        check_seed(self.seed)
        object.__setattr__(self, "basis", as_nystrom(self.basis, self.seed))


@saveable
@_solver
class Falkon:
    """FALKON: conjugate gradients on the Nyström model, preconditioned by a subsample of
    whole queries (Rudi et al. 2017; Pahikkala et al. 2009, §3.5), in ``O(m b)`` memory.

    Attributes:
      kernel, basis, seed: as :class:`Nystrom` (``seed`` also draws the subsample).
      options: the :class:`CG` loop options.
      precond_rows: rows of the preconditioner's subsample (``None``: its default).
      block_rows: rows per kernel block when ``K_mR`` is not kept (``None``: planned).

    Example:
      >>> import rankjax as rj
      >>> rj.Falkon(rj.gaussian_kernel(0.5), 20).options.max_iter
      500
    """

    kernel: Kernel
    basis: object
    options: CG = CG()
    precond_rows: Optional[int] = None
    block_rows: Optional[int] = None
    seed: int = 0

    def __post_init__(self):
        _kernel_arg(self.kernel, allow_none=False)
        check_seed(self.seed)
        if not isinstance(self.options, CG):
            raise TypeError(f"options must be a rankjax.CG, got {type(self.options).__name__}")
        object.__setattr__(self, "basis", as_nystrom(self.basis, self.seed))


@saveable
@_solver
class Auto:
    """:class:`Primal` when ``n <= m``, else :class:`Dual` (the linear kernel); ``Dual``
    for a ``precomputed`` problem — the cheapest exact solver of the shape.

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> rj.Auto().resolve(rj.Problem(d.X, d.y, d.qid))
      Primal()
    """

    def resolve(self, problem):
        """The solver this shape gets."""
        m, n = problem.X.shape
        return Dual() if problem.precomputed or n > m else Primal()


SOLVERS = (Primal, Dual, Nystrom, CG, Falkon, Auto)
"""Every solver class of the front door."""
