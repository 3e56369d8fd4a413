"""What every verb returns: one :class:`Solution` (the value, a result code per λ, the
solver's statistics) and the one vocabulary of result codes, :class:`RESULTS` (as lineax's
``RESULTS``: the same failure has the same code whatever the solver).
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._core.host import device_array, is_concrete, reduce_concrete, reduction
from ._core.traced import nan_unless
from ._core.types import saveable

__all__ = ["RESULTS", "Solution", "lams_valid", "lane_codes", "solvable", "with_lams", "throw_if"]

_MESSAGES = {
    "successful": "the solver answered",
    "unresolved_lambda": "λ lies below what the dtype resolves for this solver (its lane is "
                         "NaN; the precision rule): use float64 (jax_enable_x64) or a larger λ",
    "max_iterations_reached": "CG stopped at max_iter before reaching its tolerance",
    "early_stopped": "CG stopped on its validation criterion (the best iterate is returned: "
                     "an answer, by design)",
    "breakdown": "CG met a non-positive curvature p^T (A + λ I) p <= 0",
    "invalid_input": "an invalid λ (not finite, or not > 0) or non-finite values reached the "
                     "solver under jit, where they cannot raise",
}


class RESULTS(enum.IntEnum):
    """The result code of every :class:`Solution` (``Solution.result``: int32, a scalar for
    ``fit``, ``[L]`` for ``path`` and ``holdout``). An ``IntEnum``: codes compare with the
    arrays (``s.result == rj.RESULTS.successful``) and ``RESULTS(code).message`` says what
    it means.

    Example:
      >>> import rankjax as rj
      >>> int(rj.RESULTS.successful), rj.RESULTS(1).name
      (0, 'unresolved_lambda')
    """

    successful = 0
    unresolved_lambda = 1
    max_iterations_reached = 2
    early_stopped = 3
    breakdown = 4
    invalid_input = 5

    @property
    def message(self) -> str:
        """The code in words."""
        return _MESSAGES[self.name]


ANSWERS = (RESULTS.successful, RESULTS.early_stopped)
"""The codes whose value is an answer (``throw=True`` raises on every other)."""


@saveable
class Solution(NamedTuple):
    """What :func:`~rankjax.fit`, :func:`~rankjax.path` and :func:`~rankjax.holdout` return.

    Attributes:
      value: the model (``fit``: ``rj.predict(value, X)`` is ``[m]``), the path (``path``:
        every λ's model, ``value.model(i)``) or the hold-out predictions (``holdout``:
        ``value.predictions [L, m]``, and ``value.path`` the full-data models).
      result: int32 :class:`RESULTS` codes: a scalar for ``fit``, ``[L]`` per λ otherwise.
      stats: a dict of solver statistics (CG and FALKON: ``iterations``,
        ``best_iteration``, ``converged``, ``residual_history``, ``valid_history``).

    Example:
      >>> import rankjax as rj
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> s = rj.path(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lams=[0.1, 1.0])
      >>> [rj.RESULTS(int(r)).name for r in s.result]
      ['successful', 'successful']
    """

    value: object
    result: jax.Array
    stats: dict

    def message(self) -> str:
        """The results in words (host side)."""
        codes = np.atleast_1d(np.asarray(self.result))
        bad = sorted({RESULTS(int(c)).name for c in codes if int(c) not in ANSWERS})
        return "successful" if not bad else ", ".join(bad)


def lams_valid(lams, allow_zero: bool = False):
    """The one rule of λ validity, for every solver and verb: finite and ``> 0`` (``>= 0``
    where the solver regularises otherwise, ``allow_zero``); ``[]`` or ``[L]`` booleans,
    numpy on the host (no program), traced under ``jit``. The verbs apply it once to what
    a solver computed (``with_lams``); the host check :func:`~rankjax._core.checks.check_lams`
    raises on the same values eagerly."""
    xp = np if is_concrete(lams) else jnp
    lam = xp.asarray(lams)
    return xp.isfinite(lam) & ((lam >= 0) if allow_zero else (lam > 0))


def nan_lanes(value, ok, lams=None):
    """``value`` (a model, path, hold-out or array tree) with NaN in every lane where ``ok``
    (``[]`` or ``[L]``) is False: the fields a value type names in ``LANES`` (those holding
    the λ axis first; a model's coefficients, not its training rows), every floating leaf
    of any other tree; its ``lams`` field (and its parts') ``lams`` when given."""
    fields = getattr(type(value), "LANES", None)
    if fields is None:
        return nan_unless(ok, value)
    new = {f: nan_lanes(getattr(value, f), ok, lams) for f in fields
           if getattr(value, f) is not None}
    if lams is not None and "lams" in value._fields:
        new["lams"] = jnp.asarray(lams, jnp.result_type(value.lams))
    return value._replace(**new)


def solvable(lams, allow_zero: bool = False):
    """The λ a solver computes with: ``lams`` itself where :func:`lams_valid`, 1 in an
    invalid lane (traced only: outside ``jit`` the verbs refuse such λ), so that no solver
    ever works on an invalid λ and a loss that leaves the lane out has a finite derivative
    (``with_lams`` then refuses the lane)."""
    ok = lams_valid(lams, allow_zero)
    if isinstance(ok, (np.ndarray, np.bool_)) and np.all(ok):
        return lams
    lams = jnp.asarray(lams)
    return jnp.where(ok, lams, jnp.ones_like(lams))


def with_lams(solution: Solution, lams, allow_zero: bool = False) -> Solution:
    """What the verbs apply to every solver's :class:`Solution` (the one place the λ rule,
    :func:`lams_valid`, meets the result): the lanes of an invalid λ NaN with the code
    ``invalid_input``, the value's ``lams`` the given ones and, for one λ, the statistics
    empty (floats NaN, counts 0, flags False: no solve ran for it). Outside ``jit`` the
    verbs' checks have refused such λ already, and the solution passes untouched."""
    ok = lams_valid(lams, allow_zero)
    if isinstance(ok, (np.ndarray, np.bool_)) and np.all(ok):
        return solution
    ok = jnp.asarray(ok)
    result = jnp.where(ok, solution.result, int(RESULTS.invalid_input)).astype(jnp.int32)
    stats = solution.stats
    if ok.ndim == 0:
        stats = jax.tree.map(lambda v: jnp.where(ok, v, _no_solve(jnp.result_type(v))), stats)
    return Solution(nan_lanes(solution.value, ok, lams), result, stats)


def _no_solve(dtype):
    """A statistic of no solve: NaN, 0 or False by its dtype."""
    if jnp.issubdtype(dtype, jnp.inexact):
        return jnp.nan
    return False if dtype == jnp.bool_ else 0


def lane_codes(values, lanes: bool = True):
    """Result codes of a closed form: ``unresolved_lambda`` where the lane of ``values``
    (λ axis first when ``lanes``) holds NaN, else ``successful``; ``[L]`` (or a scalar).
    An invalid λ is the verb's to code (``with_lams``)."""
    if is_concrete(values):                              # on the host: no program per shape
        bad = np.asarray(reduce_concrete(_any_nan_lane if lanes else _any_nan, values))
        code = np.where(bad, RESULTS.unresolved_lambda, RESULTS.successful)
        return device_array(code.astype(np.int32))
    a = jnp.asarray(values)
    bad = jnp.isnan(a).reshape(a.shape[0], -1).any(1) if lanes else jnp.isnan(a).any()
    return jnp.where(bad, int(RESULTS.unresolved_lambda), int(RESULTS.successful)).astype(jnp.int32)


_any_nan_lane = reduction(lambda xp, a: xp.isnan(a).reshape(a.shape[0], -1).any(1))
_any_nan = reduction(lambda xp, a: xp.isnan(a).any())


def throw_if(solution: Solution, verb: str, throw: bool) -> Solution:
    """``solution``, or a ``RuntimeError`` when ``throw`` and a code is not an answer
    (outside ``jit``; under ``jit`` the codes are read from the solution)."""
    if throw and is_concrete(solution.result):
        codes = np.atleast_1d(np.asarray(solution.result))
        if any(int(c) not in ANSWERS for c in codes):
            raise RuntimeError(f"{verb} did not succeed: {solution.message()} (throw=False "
                               "returns the Solution with its result codes)")
    return solution
