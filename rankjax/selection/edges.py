"""A grid that does not stop at its edge: while an end of the λ ladder (of the best
point's γ) or of the γ ladder scores at least as well as the best point, the selection
holds out past it (:data:`EXTEND` times a side at most) and warns
(:class:`GridEdgeWarning`) when the optimum still lies on a spent edge.
:func:`~rankjax.selection.select.select_grid` calls :func:`extend_grid` on its blocks.
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from .._core.log import info, user_stacklevel
from .._core.resolved import UnresolvedLambdaWarning
from ..solvers.base import AbstractSolver

__all__ = ["EXTEND", "GridEdgeWarning", "Block", "extend_grid", "gamma_of", "locate", "same_gamma",
           "with_gamma"]


EXTEND = 2
"""How many times :class:`~rankjax.estimators.RankRLSCV` extends its grid past an optimum
on the grid's edge, in each of λ and γ (``extend``; :func:`rankjax.select` takes the
grid as given unless asked). A λ extension holds the best γ out at ``L`` more λ past
the edge, spaced as the grid (the same compiled program); a γ extension (a grid of at
least two γ) the grid's λ at one more γ past the edge, at the grid's outermost ratio.
With the default λ grid (:math:`10^{-3}` to :math:`10^{3}`, 13 points) two λ extensions
reach :math:`10^{-16}` and :math:`10^{16}`; an optimum still on the edge then is
reported by a :class:`GridEdgeWarning`."""


class GridEdgeWarning(UserWarning):
    """The best point of a selection lies on the edge of its grid after every extension
    its bound (``extend``) allows: the metric still rises past it; widen the grid."""


@dataclasses.dataclass
class Block:
    """One hold-out of the selection: ``solver`` (the one held out; ``full`` the one on
    every row when a subsample learns), its ``lams`` ``[L]``, ``scores`` ``[L]`` and
    ``path`` (every λ's model); ``extended``: points past the given grid's edge."""
    solver: AbstractSolver
    full: AbstractSolver
    lams: np.ndarray
    scores: np.ndarray
    path: object
    extended: bool = False


def same_gamma(a, b):
    """Two γ equal (NaN, a linear solver's, equals NaN)."""
    return (np.isnan(a) and np.isnan(b)) or a == b


def locate(blocks, index):
    """``(block, i)`` of the grid point ``index`` of the blocks' concatenated scores."""
    for b in blocks:
        if index < b.lams.size:
            return b, index
        index -= b.lams.size
    raise IndexError(index)


def _ends(values, scores, grid, best):
    """The sides (``-1`` low, ``+1`` high) of the ladder ``values`` (at least two distinct)
    whose end point scores at least as well as ``best``, with each end's value."""
    u = np.unique(values)
    if u.size < 2:
        return []
    def top(v):
        s = scores[(values == v) & np.isfinite(scores)]
        return np.nan if s.size == 0 else (s.max() if grid.sign < 0 else s.min())
    return [(side, v) for side, v in ((-1, u[0]), (1, u[-1])) if grid.better(top(v), best)]


def extend_grid(grid, blocks, evaluate, extend, lams):
    """``blocks`` with hold-outs past the grid's edges (:data:`EXTEND`): while an end of the
    λ ladder (of the best point's γ) or of the γ ladder scores at least as well as the best
    point, ``L`` more λ past that end at the grid's spacing, or the grid's λ at one more γ
    past it at the ladder's outermost ratio, at most ``extend`` times a side (a flat end
    may hide a rise past it). ``evaluate(solver,
    lams)`` is ``(scores [L], path)`` of one hold-out; ``lams`` the given grid. The
    extensions' unresolved float32 lanes are noted (``verbose``), not warned of: they were
    not asked for. Warns :class:`GridEdgeWarning` when the chosen point lies on an end
    whose extensions are spent."""
    L = lams.size
    ratio = (lams.max() / lams.min()) ** (1.0 / (L - 1)) if L > 1 and lams.min() > 0 else None
    done = {}

    def state():
        s = np.concatenate([c.scores for c in blocks])
        b, i = locate(blocks, grid.best(s))
        g = gamma_of(b.solver)
        pool = [c for c in blocks if same_gamma(gamma_of(c.solver), g)]
        ends = [("λ", side, v, b) for side, v in _ends(
            np.concatenate([c.lams for c in pool]), np.concatenate([c.scores for c in pool]),
            grid, b.scores[i])] if ratio is not None else []
        if not np.isnan(g):
            gs = np.concatenate([np.full(c.lams.size, gamma_of(c.solver)) for c in blocks])
            ends += [("γ", side, v, next(c for c in blocks if gamma_of(c.solver) == v))
                     for side, v in _ends(gs, s, grid, b.scores[i])]
        return b, i, ends

    while True:
        b, i, ends = state()
        open_ = [e for e in ends if done.get(e[:2], 0) < extend]
        if not open_:
            break
        what, side, v, src = open_[0]
        done[(what, side)] = done.get((what, side), 0) + 1
        if what == "λ":
            solver, full = src.solver, src.full
            new = np.sort(v * ratio ** (side * np.arange(1.0, L + 1)))
            g = gamma_of(solver)                            # NaN: a linear model, no γ
            past = f"λ {new[0]:.4g} .. {new[-1]:.4g}" + ("" if np.isnan(g) else f" (γ {g:.4g})")
        else:
            u = np.unique([gamma_of(c.solver) for c in blocks])
            g_new = v * (u[-1] / u[-2] if side > 0 else u[1] / u[0]) ** side
            solver, full, new = with_gamma(src.solver, g_new), with_gamma(src.full, g_new), lams
            past = f"γ {g_new:.4g}"
        info(grid.verbose, "the grid's %s %s end scores as well as its best point: held out "
             "at %s", "lower" if side < 0 else "upper", what, past)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnresolvedLambdaWarning)
            scores, path = evaluate(solver, new)
        for w in caught:
            if issubclass(w.category, UnresolvedLambdaWarning):
                info(grid.verbose, "extension: %s", w.message)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        blocks.append(Block(solver, full, np.asarray(new, np.float64), scores, path, True))
    b, i, _ = state()
    g, lam = gamma_of(b.solver), float(b.lams[i])
    pool = [c for c in blocks if same_gamma(gamma_of(c.solver), g)]
    for what, side, v, _ in ends:
        chosen = lam if what == "λ" else g
        at_end = chosen == v and (what == "γ" or np.unique(np.concatenate(
            [c.lams for c in pool])).size > 1)
        if extend > 0 and at_end and done.get((what, side), 0) >= extend:
            warnings.warn(f"the best {what} ({chosen:.4g}) still lies on the "
                          f"{'lower' if side < 0 else 'upper'} edge of the grid after {extend} "
                          f"extension(s) (the bound, extend={extend}): the metric still "
                          f"improves past it; give a wider grid", GridEdgeWarning,
                          stacklevel=user_stacklevel())
    flat = np.concatenate([c.scores for c in pool])
    flat = flat[np.isfinite(flat)]
    if extend > 0 and ratio is not None and flat.size > 1 and flat.min() == flat.max():
        warnings.warn(f"every λ of the grid and its {extend} extension(s) each way scores the "
                      f"same ({flat[0]:.4g}): the grid lies on a plateau of the metric "
                      "(rescale the features or give another grid)", GridEdgeWarning,
                      stacklevel=3)
    return blocks


def gamma_of(solver):
    """The solver's kernel γ (NaN for a linear solver)."""
    k = solver.tuned_kernel()
    return np.nan if k is None else float(k.gamma)


def with_gamma(solver, gamma):
    """``solver`` with its kernel's γ replaced."""
    kernel = solver.tuned_kernel()
    return dataclasses.replace(solver, kernel=dataclasses.replace(kernel, gamma=float(gamma)))
