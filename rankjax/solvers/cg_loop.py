r"""Matrix-free conjugate gradient in one ``lax.while_loop`` (docs/math.md; Airola et al. 2010;
Pahikkala et al. 2009 §4.3).

Solves ``(A + λ I) x = b`` for a symmetric PSD operator ``A`` given as a matvec.
Stops on the relative residual :math:`\lVert r \rVert \le tol \lVert b \rVert`, at ``max_iter``, on a
breakdown (:math:`p^T (A + \lambda I) p \le 0` or a non-finite value), or — with a
validation function — after ``patience`` iterations without improvement
(early stopping, "regularization by iteration", λ = 0 allowed; Airola et al. 2010 §3.3).
The best iterate by the validation score is returned in that case. An undefined (NaN)
criterion, e.g. τ_b of the all-tied scores of ``w = 0``, never wins against a defined
one and never stops the loop.

Under ``vmap`` (over λ or right-hand-side columns) every lane stops on its own
(its carry is frozen), but the loop runs until the slowest lane is done.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.checks import as_float_array
from .._core.traced import finite_positive, nan_unless
from .._core.log import loop_step
from .._core.products import mm
from .._solution import RESULTS
from ..metrics.pairs import check_metric_options

__all__ = ["CGResult", "cg_loop", "differentiable_cg", "static_metric", "check_x0"]

_CODE = {k: int(getattr(RESULTS, k)) for k in ("successful", "max_iterations_reached",
                                                "early_stopped", "breakdown", "invalid_input")}


class CGResult(NamedTuple):
    r"""What the loop returns: the solution ``weights`` (the best validation iterate with early
    stopping), ``iterations``, ``converged`` (:math:`\lVert r \rVert \le tol \lVert b \rVert`
    reached), its :class:`~rankjax.RESULTS` code ``result``, ``best_iteration`` (of ``weights``; 0 =
    the start point), ``residual_history [max_iter + 1]`` (:math:`\lVert r_i \rVert / \lVert b
    \rVert`) and ``valid_history [max_iter + 1]`` (the criterion of each iterate); NaN after the
    stop."""

    weights: jax.Array
    iterations: jax.Array
    converged: jax.Array
    result: jax.Array
    best_iteration: jax.Array
    residual_history: jax.Array
    valid_history: jax.Array

    def stats(self) -> dict:
        """The loop's statistics as a :class:`~rankjax.Solution` carries them."""
        return {k: getattr(self, k) for k in ("iterations", "best_iteration", "converged",
                                              "residual_history", "valid_history")}


def cg_loop(matvec, b, options, lam, x0, valid_fn) -> CGResult:
    """Conjugate gradient for ``(A + λ I) x = b`` (``matvec``: ``v -> A v``, ``A`` symmetric
    PSD) as one ``lax.while_loop``, with the loop options of a :class:`~rankjax.CG`
    (``tolerance(dtype)``, ``max_iter``, ``patience``, ``recompute_every``, ``verbose``),
    a warm start ``x0`` (or ``None``) and an early-stopping criterion ``valid_fn`` (``x ->
    value``, lower is better; or ``None``), on checked or traced arguments.

    Example:
      >>> import rankjax as rj
      >>> A = jnp.array([[4., 1.], [1., 3.]])
      >>> r = cg_loop(lambda v: A @ v, jnp.array([1., 2.]), rj.CG(tol=1e-8), 0.0, None, None)
      >>> print(jnp.round(r.weights, 4), int(r.iterations), rj.RESULTS(int(r.result)).name)
      [0.0909 0.6364] 2 successful
    """
    tol = options.tolerance(b.dtype)
    max_iter, patience = options.max_iter, options.patience
    recompute_every, verbose = options.recompute_every, options.verbose
    dtype = b.dtype
    lam = jnp.asarray(lam, dtype)
    op = lambda v: matvec(v) + lam * v  # noqa: E731
    x = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, dtype)
    r = b - op(x) if x0 is not None else b
    bnorm = jnp.linalg.norm(b)
    scale = jnp.where(bnorm > 0, bnorm, 1)
    nan = jnp.full((max_iter + 1,), jnp.nan, dtype)
    score0 = valid_fn(x).astype(dtype) if valid_fn is not None else jnp.asarray(jnp.nan, dtype)
    res0 = jnp.linalg.norm(r) / scale
    # carry: i, x, r, p, rr, best_x, best_score, best_i, since_best, reason, hist_r, hist_v
    # under jit an invalid λ or tol cannot raise: no iteration, NaN weights, "invalid"
    # a non-finite right-hand side (a NaN cotangent in the implicit gradient, too) is NaN,
    # not the best iterate of no progress (zeros); λ is the verbs' to refuse
    ok = finite_positive(tol, allow_zero=True) & jnp.all(jnp.isfinite(b))
    init = (jnp.int32(0), x, r, r, mm(r, r), x, score0, jnp.int32(0), jnp.int32(0),
            jnp.select([~ok, res0 <= tol], [_CODE["invalid_input"], _CODE["successful"]],
                       -1).astype(jnp.int32),
            nan.at[0].set(res0), nan.at[0].set(score0))

    def active(c):
        return c[9] < 0

    def step(c, recompute: bool):
        i, x, r, p, rr, bx, bs, bi, since, reason, hr, hv = c
        Ap = op(p)
        pAp = mm(p, Ap)
        broke = ~(pAp > 0) | ~jnp.isfinite(pAp)
        alpha = rr / jnp.where(broke, 1, pAp)
        x_new = x + alpha * p
        i = i + 1
        r_new = b - op(x_new) if recompute else r - alpha * Ap
        rr_new = mm(r_new, r_new)
        p_new = r_new + (rr_new / jnp.where(rr > 0, rr, 1)) * p
        res = jnp.sqrt(rr_new) / scale
        if valid_fn is not None:
            s = valid_fn(x_new).astype(dtype)
            # an undefined (NaN) criterion never wins against a defined one and never
            # stops the iteration; while no iterate has a defined value, follow plain CG
            better = (s < bs) | jnp.isnan(bs)
            bx = jnp.where(better, x_new, bx)
            bi = jnp.where(better, i, bi)
            since = jnp.where(better, 0, since + 1)
            bs = jnp.where(better, s, bs)
        else:
            s = jnp.asarray(jnp.nan, dtype)
            bx, bi = x_new, i
        new_reason = jnp.select(
            [broke, res <= tol, (since >= patience) if valid_fn is not None else False,
             i >= max_iter], [_CODE["breakdown"], _CODE["successful"], _CODE["early_stopped"],
                              _CODE["max_iterations_reached"]], -1).astype(jnp.int32)
        keep = broke                       # on breakdown keep the previous iterate
        x_out = jnp.where(keep, x, x_new)
        if valid_fn is None:
            bx = jnp.where(keep, x, bx)
            bi = jnp.where(keep, i - 1, bi)
        loop_step(verbose, "CG iteration", None, i, res, s, fmt="relative residual {0:.3e}"
                  + (", validation {1:.6g}" if valid_fn is not None else ""))
        return (i, x_out, r_new, p_new, rr_new, bx, bs, bi, since, new_reason,
                hr.at[i].set(jnp.where(keep, jnp.nan, res)), hv.at[i].set(s))

    if not recompute_every:
        out = lax.while_loop(active, lambda c: step(c, False), init)
    else:
        # every recompute_every-th step takes the true residual b - (A + λ I) x: the plain
        # steps of a stretch in an inner loop, then that step where the lane is still
        # running (a select, not a cond: under vmap a cond on the lanes' own counters
        # would broadcast every operand of the operator, its kernel block, to every lane)
        def stretch(c):
            end = (c[0] // recompute_every + 1) * recompute_every
            c = lax.while_loop(lambda c: active(c) & (c[0] < end - 1),
                               lambda c: step(c, False), c)
            going = active(c)
            return jax.tree.map(lambda new, old: jnp.where(going, new, old), step(c, True), c)
        out = lax.while_loop(active, stretch, init)
    i, x, _, _, _, bx, _, bi, _, reason, hr, hv = out
    return CGResult(nan_unless(ok, bx), i, reason == _CODE["successful"], reason, bi, hr, hv)


def differentiable_cg(matvec, b, options, lam, x0=None, valid_fn=None) -> CGResult:
    r""":func:`cg_loop` whose solution ``x`` can be differentiated in reverse mode
    (w.r.t. λ, ``b`` and whatever ``matvec`` closes over, e.g. ``X`` or ``y``).

    Without early stopping the solve is ``lax.custom_linear_solve`` of the symmetric
    operator ``A + λ I``: the gradient is implicit, :math:`dx = (A + \lambda I)^{-1} (db - dA x)`,
    computed by one more CG run on the cotangent instead of differentiating the
    ``while_loop`` (which JAX cannot reverse). With early stopping (``valid_fn``) the
    iterate is not a solution of a fixed system and the plain loop is returned (no
    reverse-mode gradient)."""
    if valid_fn is not None:
        return cg_loop(matvec, b, options, lam, x0, valid_fn)
    lam = jnp.asarray(lam, b.dtype)
    op = lambda v: matvec(v) + lam * v  # noqa: E731
    ok = finite_positive(options.tolerance(b.dtype), allow_zero=True)   # λ: the verbs

    def solve(mv, rhs):
        r = cg_loop(mv, rhs, options, 0.0, x0, None)
        return r.weights, r

    x, aux = lax.custom_linear_solve(op, b, solve, symmetric=True, has_aux=True)
    return aux._replace(weights=nan_unless(ok, x))



def static_metric(metric, kw, where: str):
    """The metric options as a hashable static tuple, each checked to be an option of
    ``metric`` (:func:`rankjax.metrics.pairs.check_metric_options`)."""
    check_metric_options(metric, kw, where)
    kw = tuple(sorted(kw.items()))
    try:
        hash((metric, kw))
    except TypeError as e:
        raise TypeError("metric and its keyword arguments must be hashable "
                        "(strings, numbers, functions)") from e
    return kw


def check_x0(x0, n):
    if x0 is None:
        return None
    x0 = as_float_array(x0, "x0", finite=True)
    if x0.shape != (n,):
        raise ValueError(f"x0 must have shape [{n}], got {tuple(x0.shape)}")
    return x0
