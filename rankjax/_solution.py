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
from ._core.traced import lam_ok
from ._core.types import saveable

__all__ = ["RESULTS", "Solution", "lane_codes", "throw_if"]

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


def lane_codes(values, lams, lanes: bool = True, allow_zero: bool = False):
    """Traced result codes of a closed form: ``invalid_input`` where λ is invalid,
    ``unresolved_lambda`` where the lane of ``values`` (λ axis first when ``lanes``) holds
    NaN, else ``successful``; ``[L]`` (or a scalar)."""
    if is_concrete(values) and is_concrete(lams):        # on the host: no program per shape
        bad = np.asarray(reduce_concrete(_any_nan_lane if lanes else _any_nan, values))
        lam = np.asarray(lams)
        ok = np.isfinite(lam) & ((lam >= 0) if allow_zero else (lam > 0))
        code = np.where(ok, np.where(bad, RESULTS.unresolved_lambda, RESULTS.successful),
                        RESULTS.invalid_input)
        return device_array(code.astype(np.int32))
    a = jnp.asarray(values)
    bad = jnp.isnan(a).reshape(a.shape[0], -1).any(1) if lanes else jnp.isnan(a).any()
    code = jnp.where(bad, int(RESULTS.unresolved_lambda), int(RESULTS.successful))
    code = jnp.where(lam_ok(lams, allow_zero), code, int(RESULTS.invalid_input))
    return code.astype(jnp.int32)


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
