"""Matrix-free conjugate gradient in one ``lax.while_loop`` (SPEC §4; seed 004;
seed 001 §4.3).

Solves ``(A + λ I) x = b`` for a symmetric PSD operator ``A`` given as a matvec.
Stops on the relative residual ``||r|| <= tol ||b||``, at ``maxiter``, on a
breakdown (``p^T (A + λ I) p <= 0`` or a non-finite value), or — with a
validation function — after ``patience`` iterations without improvement
(early stopping, "regularization by iteration", λ = 0 allowed; seed 004 §3.3).
The best iterate by the validation score is returned in that case.

Under ``vmap`` (over λ or right-hand-side columns) every lane stops on its own
(its carry is frozen), but the loop runs until the slowest lane is done.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from ._checks import check_lam, check_matrix, check_targets
from ._graph import Graph, PreferenceGraph, laplacian_mv
from ._rankrls import _check_graph, _rhs

__all__ = ["CGResult", "cg_solve", "rankrls_cg", "STOP_REASONS"]

STOP_REASONS = ("converged", "maxiter", "early_stopping", "breakdown")


class CGResult(NamedTuple):
    """Result of :func:`cg_solve`.

    Attributes:
      x: the solution (the best validation iterate with early stopping).
      iterations: iterations performed.
      converged: ``||r|| <= tol ||b||`` was reached.
      stop_reason: index into :data:`STOP_REASONS`.
      best_iteration: iteration of ``x`` (0 = the start point).
      residual_history: ``[maxiter + 1]`` ``||r_i|| / ||b||`` (NaN after the stop).
      valid_history: ``[maxiter + 1]`` validation score of each iterate (NaN
        after the stop, or everywhere without a validation function).
    """

    x: jax.Array
    iterations: jax.Array
    converged: jax.Array
    stop_reason: jax.Array
    best_iteration: jax.Array
    residual_history: jax.Array
    valid_history: jax.Array


def cg_solve(matvec: Callable, b, *, lam=0.0, x0=None, tol=1e-5, maxiter: int = 500,
             valid_fn: Optional[Callable] = None, patience: int = 10,
             recompute_every: int = 50) -> CGResult:
    """Conjugate gradient for ``(A + λ I) x = b`` as one ``lax.while_loop``.

    Args:
      matvec: ``v -> A v`` for a symmetric PSD ``A`` (shape of ``b``).
      b: right-hand side ``[n]``.
      lam: λ >= 0 (traced; vmap over it).
      x0: warm start (zeros by default).
      tol: relative residual tolerance (traced).
      maxiter: iteration cap (static).
      valid_fn: ``x -> score`` (lower is better) evaluated on every iterate;
        enables early stopping.
      patience: iterations without improvement before stopping (static).
      recompute_every: recompute the residual as ``b - (A + λ I) x`` every that
        many iterations to curb drift (static; 0 = never).

    Returns:
      :class:`CGResult`.

    Example:
      >>> A = jnp.array([[4., 1.], [1., 3.]])
      >>> r = cg_solve(lambda v: A @ v, jnp.array([1., 2.]), tol=1e-8)
      >>> print(jnp.round(r.x, 4), int(r.iterations), STOP_REASONS[int(r.stop_reason)])
      [0.0909 0.6364] 2 converged
    """
    b = jnp.asarray(b)
    dtype = b.dtype
    lam = jnp.asarray(lam, dtype)
    op = lambda v: matvec(v) + lam * v  # noqa: E731
    x = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0, dtype)
    r = b - op(x) if x0 is not None else b
    bnorm = jnp.linalg.norm(b)
    scale = jnp.where(bnorm > 0, bnorm, 1)
    nan = jnp.full((maxiter + 1,), jnp.nan, dtype)
    score0 = valid_fn(x).astype(dtype) if valid_fn is not None else jnp.asarray(jnp.nan, dtype)
    res0 = jnp.linalg.norm(r) / scale
    # carry: i, x, r, p, rr, best_x, best_score, best_i, since_best, reason, hist_r, hist_v
    init = (jnp.int32(0), x, r, r, r @ r, x, score0, jnp.int32(0), jnp.int32(0),
            jnp.where(res0 <= tol, 0, -1).astype(jnp.int32),
            nan.at[0].set(res0), nan.at[0].set(score0))

    def cond(c):
        return c[9] < 0

    def body(c):
        i, x, r, p, rr, bx, bs, bi, since, reason, hr, hv = c
        Ap = op(p)
        pAp = p @ Ap
        broke = ~(pAp > 0) | ~jnp.isfinite(pAp)
        alpha = rr / jnp.where(broke, 1, pAp)
        x_new = x + alpha * p
        i = i + 1
        if recompute_every:
            r_new = lax.cond(i % recompute_every == 0, lambda: b - op(x_new),
                             lambda: r - alpha * Ap)
        else:
            r_new = r - alpha * Ap
        rr_new = r_new @ r_new
        p_new = r_new + (rr_new / jnp.where(rr > 0, rr, 1)) * p
        res = jnp.sqrt(rr_new) / scale
        if valid_fn is not None:
            s = valid_fn(x_new).astype(dtype)
            better = s < bs
            bx = jnp.where(better, x_new, bx)
            bi = jnp.where(better, i, bi)
            since = jnp.where(better, 0, since + 1)
            bs = jnp.where(better, s, bs)
        else:
            s = jnp.asarray(jnp.nan, dtype)
            bx, bi = x_new, i
        new_reason = jnp.select(
            [broke, res <= tol, (since >= patience) if valid_fn is not None else False,
             i >= maxiter], [3, 0, 2, 1], -1).astype(jnp.int32)
        keep = broke                       # on breakdown keep the previous iterate
        x_out = jnp.where(keep, x, x_new)
        if valid_fn is None:
            bx = jnp.where(keep, x, bx)
            bi = jnp.where(keep, i - 1, bi)
        return (i, x_out, r_new, p_new, rr_new, bx, bs, bi, since, new_reason,
                hr.at[i].set(jnp.where(keep, jnp.nan, res)), hv.at[i].set(s))

    out = lax.while_loop(cond, body, init)
    i, x, _, _, _, bx, _, bi, _, reason, hr, hv = out
    return CGResult(bx, i, reason == 0, reason, bi, hr, hv)


def rankrls_cg(X, y, graph: Graph, *, lam=0.0, x0=None, tol=1e-5, maxiter: int = 500,
               valid_fn: Optional[Callable] = None, patience: int = 10,
               recompute_every: int = 50) -> CGResult:
    """Primal RankRLS by matrix-free CG (SPEC §4; seed 004 §3): solves
    ``(X^T L X + λ I) w = X^T L y`` (edges: ``X^T M N``) with
    ``A v = X^T (L (X v))`` — two (sparse) matvecs and O(m) segment work per
    iteration, O(m s + l) for preference edges; never an ``[l, n]`` or ``[m, m]``
    array.

    Args:
      X: ``[m, n]`` dense or BCOO.
      y: ``[m]`` scores; ``None`` for a :class:`PreferenceGraph`.
      graph: any rankjax graph.
      lam: λ >= 0 (0: regularization by iteration with ``valid_fn``).
      valid_fn: ``w -> score`` (lower is better), e.g.
        ``lambda w: pairwise_error(Xv @ w, yv, segv, num_queries=Qv)``.
      Other arguments as in :func:`cg_solve`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
      >>> g = rj.query_graph(d.qid)
      >>> r = rj.rankrls_cg(d.X, d.y, g, lam=1.0, tol=1e-10)
      >>> w = rj.rankrls_primal(d.X, d.y, g, lam=1.0).weights
      >>> bool(np.allclose(r.x, w, rtol=1e-4, atol=1e-5))
      True
    """
    X = check_matrix(X)
    _check_graph(graph, X.shape[0])
    if isinstance(graph, PreferenceGraph):
        if y is not None:
            raise ValueError("y must be None with a PreferenceGraph (targets are in the graph)")
    else:
        y = check_targets(y, X.shape[0], "y")
        if y.ndim != 1:
            raise ValueError("rankrls_cg solves one output; vmap over the columns of y")
    check_lam(lam, allow_zero=True)
    b = X.T @ _rhs(graph, y, X.dtype)
    matvec = lambda v: X.T @ laplacian_mv(graph, X @ v)  # noqa: E731
    return cg_solve(matvec, b, lam=lam, x0=x0, tol=tol, maxiter=maxiter, valid_fn=valid_fn,
                    patience=patience, recompute_every=recompute_every)
