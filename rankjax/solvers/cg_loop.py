"""Matrix-free conjugate gradient in one ``lax.while_loop`` (docs/math.md; Airola et al. 2010;
Pahikkala et al. 2009 §4.3).

Solves ``(A + λ I) x = b`` for a symmetric PSD operator ``A`` given as a matvec.
Stops on the relative residual ``||r|| <= tol ||b||``, at ``max_iter``, on a
breakdown (``p^T (A + λ I) p <= 0`` or a non-finite value), or — with a
validation function — after ``patience`` iterations without improvement
(early stopping, "regularization by iteration", λ = 0 allowed; Airola et al. 2010 §3.3).
The best iterate by the validation score is returned in that case. An undefined (NaN)
criterion, e.g. τ_b of the all-tied scores of ``w = 0``, never wins against a defined
one and never stops the loop.

Under ``vmap`` (over λ or right-hand-side columns) every lane stops on its own
(its carry is frozen), but the loop runs until the slowest lane is done.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import warnings
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from .._core.products import mm
from .._core.checks import (as_float_array, check_count, check_positive, lam_ok, nan_unless)
from ..graphs.graph import check_graph
from ..graphs.build import as_validation
from .._core.log import (begin, check_verbose, loop_step, user_stacklevel)
from ..metrics.pairs import check_metric_options
from .models import LinearModel
from .._core.types import saveable

STOP_REASONS = ("converged", "max_iter", "early_stopping", "breakdown", "invalid")


@saveable
@dataclasses.dataclass(frozen=True)
class CG:
    """The loop options of every CG solver (:func:`cg_solve`, :func:`rankrls_cg`,
    :func:`rankrls_cg_dual`, :func:`~rankjax.solvers.falkon.rankrls_falkon`,
    :func:`~rankjax.scale.sharded_cg`,
    :func:`~rankjax.scale.sharded_falkon`), checked once when built and passed whole as
    ``options=`` (Airola et al. 2010, §3: CG with early stopping). A pytree: ``tol`` is
    a traced leaf (a new tolerance compiles nothing), the rest is static.

    Attributes:
      tol: relative residual tolerance ``||r|| <= tol ||b||`` (>= 0; 0 runs ``max_iter``);
        ``None`` (default): ``max(1e-8, 100 eps)`` of the compute dtype (1e-8 in float64,
        1.2e-5 in float32, which cannot resolve 1e-8).
      max_iter: iteration cap.
      patience: iterations without a better validation score before stopping.
      recompute_every: the residual is recomputed as ``b - (A + λ I) x`` every that many
        iterations (0 = never).
      verbose: log every that many iterations while the loop runs (0 = off, nothing
        compiled in; logger ``"rankjax"``). The solvers also take ``verbose=`` directly.

    Example:
      >>> import jax.numpy as jnp
      >>> opts = CG(tol=1e-8, max_iter=50)
      >>> r = cg_solve(lambda v: 2 * v, jnp.array([2., 4.]), options=opts)
      >>> print(r.weights, int(r.iterations))
      [1. 2.] 1
    """

    tol: Optional[float] = None
    max_iter: int = 500
    patience: int = 10
    recompute_every: int = 50
    verbose: int = 0

    def __post_init__(self):
        if self.tol is not None:           # 0: run max_iter iterations
            check_positive(self.tol, name="tol", scalar=True, allow_zero=True)
        check_count(self.max_iter, "max_iter"), check_count(self.patience, "patience")
        check_count(self.recompute_every, "recompute_every", minimum=0)
        check_verbose(self.verbose)

    def tolerance(self, dtype):
        """``tol``, or the default of ``dtype`` when ``None``."""
        if self.tol is None:
            return max(1e-8, 100 * float(jnp.finfo(dtype).eps))
        return self.tol

    def with_tol(self, tol):
        """A copy with another (possibly traced) tolerance, unchecked."""
        return _unflatten_cg(_flatten_cg(self)[1], (tol,))


_LOOP = tuple(f.name for f in dataclasses.fields(CG))


def _flatten_cg(c):
    return (c.tol,), (c.max_iter, c.patience, c.recompute_every, c.verbose)


def _unflatten_cg(aux, children):
    obj = object.__new__(CG)
    for k, v in zip(_LOOP, tuple(children) + tuple(aux)):
        object.__setattr__(obj, k, v)
    return obj


jax.tree_util.register_pytree_node(CG, _flatten_cg, _unflatten_cg)


def check_options(options) -> CG:
    """``options`` is ``None`` (the defaults) or a :class:`CG`."""
    if options is None:
        return CG()
    if not isinstance(options, CG):
        raise TypeError(f"options must be a rankjax.CG, got {type(options).__name__}")
    if options.verbose:
        begin()                          # the clock of the loop's lines
    return options


_WARNED: set = set()


def loop_keywords(fn):
    """Forwards the keyword spellings of the loop options (``tol=``, ``max_iter=``, ...)
    of a CG solver to ``options=CG(...)``, with a ``FutureWarning`` the first time per
    solver; both spellings at once are a ``TypeError``. Keywords the solver does not take
    are its metric's options (``k=10``): forwarded to ``metric_kwargs`` the same way."""
    params = inspect.signature(fn).parameters

    @functools.wraps(fn)
    def wrapper(*args, **kw):
        if "verbose" in kw and "verbose" not in params:         # verbose=k: CG(verbose=k)
            kw["options"] = dataclasses.replace(check_options(kw.get("options")),
                                                verbose=check_verbose(kw.pop("verbose")))
        legacy = {k: kw.pop(k) for k in _LOOP if k in kw}
        if "progress" in kw:                                    # the old name of verbose
            legacy["verbose"] = kw.pop("progress")
        extra = ({k: kw.pop(k) for k in list(kw) if k not in params}
                 if "metric_kwargs" in params else {})
        if legacy:
            if kw.get("options") is not None:
                raise TypeError(f"pass the loop options either as options=CG(...) or as "
                                f"keywords, not both (got options and {', '.join(legacy)})")
            _warn_once(fn.__name__, "options=rankjax.CG(" + ", ".join(f"{k}=..." for k in legacy) + ")")
            kw["options"] = CG(**legacy)
        if extra:
            if kw.get("metric_kwargs") is not None:
                raise TypeError(f"{fn.__name__} got unexpected keyword arguments "
                                f"{', '.join(extra)} besides metric_kwargs")
            _warn_once(fn.__name__ + "/metric", f"metric_kwargs={{{', '.join(extra)}: ...}}")
            kw["metric_kwargs"] = extra
        return fn(*args, **kw)
    return wrapper


def _warn_once(key, spelling):
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"{key.split('/')[0]}: these keywords are deprecated; pass {spelling}",
                      FutureWarning, stacklevel=user_stacklevel())


@saveable
class CGResult(NamedTuple):
    """Result of :func:`cg_solve`.

    Attributes:
      weights: the solution (the best validation iterate with early stopping):
        linear weights ``w`` for :func:`rankrls_cg`, dual coefficients ``A`` for
        :func:`rankrls_cg_dual`; ``predict(result, X)`` is ``X @ weights``
        (``X`` the test kernel for the dual).
      iterations: iterations performed.
      converged: ``||r|| <= tol ||b||`` was reached.
      stop_reason: index into :data:`STOP_REASONS`.
      best_iteration: iteration of ``x`` (0 = the start point).
      residual_history: ``[max_iter + 1]`` ``||r_i|| / ||b||`` (NaN after the stop).
      valid_history: ``[max_iter + 1]`` validation score of each iterate (NaN
        after the stop, or everywhere without a validation function).
    """

    weights: jax.Array
    iterations: jax.Array
    converged: jax.Array
    stop_reason: jax.Array
    best_iteration: jax.Array
    residual_history: jax.Array
    valid_history: jax.Array

    def predict(self, X):
        return LinearModel(self.weights).predict(X)


@loop_keywords
def cg_solve(matvec: Callable, b, *, options: Optional[CG] = None, lam=0.0, x0=None,
             valid_fn: Optional[Callable] = None) -> CGResult:
    """Conjugate gradient for ``(A + λ I) x = b`` as one ``lax.while_loop``.

    Args:
      matvec: ``v -> A v`` for a symmetric PSD ``A`` (shape of ``b``).
      b: right-hand side ``[n]``.
      options: a :class:`~rankjax.CG` (tolerance, iteration cap, patience, residual
        recomputation, progress); ``None`` is ``CG()``.
      lam: λ >= 0 (traced; vmap over it).
      x0: warm start (zeros by default).
      valid_fn: ``x -> score`` (lower is better) evaluated on every iterate;
        enables early stopping after ``options.patience`` iterations without improvement.

    Returns:
      :class:`CGResult`.

    Example:
      >>> A = jnp.array([[4., 1.], [1., 3.]])
      >>> r = cg_solve(lambda v: A @ v, jnp.array([1., 2.]), options=CG(tol=1e-8))
      >>> print(jnp.round(r.weights, 4), int(r.iterations), STOP_REASONS[int(r.stop_reason)])
      [0.0909 0.6364] 2 converged
    """
    if not callable(matvec):
        raise TypeError(f"matvec must be a callable v -> A v, got {type(matvec).__name__}")
    b = as_float_array(b, "b", finite=True)
    if b.ndim != 1:
        raise ValueError(f"b must be 1-D [n], got shape {tuple(b.shape)}")
    check_positive(lam, allow_zero=True, scalar=True)
    return cg_loop(matvec, b, check_options(options), lam, check_x0(x0, b.shape[0]), valid_fn)


def cg_loop(matvec, b, options: CG, lam, x0, valid_fn) -> CGResult:
    """The loop of :func:`cg_solve` on checked (or traced) arguments."""
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
    ok = lam_ok(lam, allow_zero=True) & lam_ok(tol, allow_zero=True)
    init = (jnp.int32(0), x, r, r, mm(r, r), x, score0, jnp.int32(0), jnp.int32(0),
            jnp.select([~ok, res0 <= tol], [4, 0], -1).astype(jnp.int32),
            nan.at[0].set(res0), nan.at[0].set(score0))

    def cond(c):
        return c[9] < 0

    def body(c):
        i, x, r, p, rr, bx, bs, bi, since, reason, hr, hv = c
        Ap = op(p)
        pAp = mm(p, Ap)
        broke = ~(pAp > 0) | ~jnp.isfinite(pAp)
        alpha = rr / jnp.where(broke, 1, pAp)
        x_new = x + alpha * p
        i = i + 1
        if recompute_every:
            r_new = lax.cond(i % recompute_every == 0, lambda: b - op(x_new),
                             lambda: r - alpha * Ap)
        else:
            r_new = r - alpha * Ap
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
             i >= max_iter], [3, 0, 2, 1], -1).astype(jnp.int32)
        keep = broke                       # on breakdown keep the previous iterate
        x_out = jnp.where(keep, x, x_new)
        if valid_fn is None:
            bx = jnp.where(keep, x, bx)
            bi = jnp.where(keep, i - 1, bi)
        loop_step(verbose, "CG iteration", None, i, res, s, fmt="relative residual {0:.3e}"
                  + (", validation {1:.6g}" if valid_fn is not None else ""))
        return (i, x_out, r_new, p_new, rr_new, bx, bs, bi, since, new_reason,
                hr.at[i].set(jnp.where(keep, jnp.nan, res)), hv.at[i].set(s))

    out = lax.while_loop(cond, body, init)
    i, x, _, _, _, bx, _, bi, _, reason, hr, hv = out
    return CGResult(nan_unless(ok, bx), i, reason == 0, reason, bi, hr, hv)


def differentiable_cg(matvec, b, options: CG, lam, x0=None, valid_fn=None) -> CGResult:
    """:func:`cg_loop` whose solution ``x`` can be differentiated in reverse mode
    (w.r.t. λ, ``b`` and whatever ``matvec`` closes over, e.g. ``X`` or ``y``).

    Without early stopping the solve is ``lax.custom_linear_solve`` of the symmetric
    operator ``A + λ I``: the gradient is implicit, ``dx = (A + λ I)^{-1} (db - dA x)``,
    computed by one more CG run on the cotangent instead of differentiating the
    ``while_loop`` (which JAX cannot reverse). With early stopping (``valid_fn``) the
    iterate is not a solution of a fixed system and the plain loop is returned (no
    reverse-mode gradient)."""
    if valid_fn is not None:
        return cg_loop(matvec, b, options, lam, x0, valid_fn)
    lam = jnp.asarray(lam, b.dtype)
    op = lambda v: matvec(v) + lam * v  # noqa: E731
    ok = lam_ok(lam, allow_zero=True)
    # an invalid (traced) λ makes the tolerance invalid too: no iteration, "invalid"
    options = options.with_tol(jnp.where(ok, options.tolerance(b.dtype), jnp.nan))

    def solve(mv, rhs):
        r = cg_loop(mv, rhs, options, 0.0, x0, None)
        return r.weights, r

    x, aux = lax.custom_linear_solve(op, b, solve, symmetric=True, has_aux=True)
    return aux._replace(weights=nan_unless(ok, x))


def validation_criterion(valid, metric="pairwise_error", *, higher_is_better=None,
                         **metric_kwargs) -> Callable:
    """Turns validation data into a ``scores -> value`` criterion, lower is better
    (docs/math.md: pairwise ranking error by default, the RankRLS squared loss as an
    option, any rankjax metric pluggable).

    Args:
      valid: ``(y_valid, graph_valid)``: ``[m_v]`` labels (``None`` for a
        :class:`PreferenceGraph`) and a graph on the ``m_v`` validation rows
        (``query_graph(qid_valid)``, ``global_graph(m_v)``, ``identity_graph``
        or ``preference_graph``).
      metric: ``"pairwise_error"`` (default; edge disagreement for preference
        graphs; one global ranking for the identity graph), ``"loss"``
        (``(y - f)^T L (y - f)``, or ``||M^T f - N||^2`` for edges), or a rankjax
        metric ``metric(scores, y, qid, *, num_queries, **metric_kwargs)``;
        metrics where greater is better (NDCG, MAP, ...) are negated.
      higher_is_better: the metric's direction when it carries none
        (see :class:`rankjax.Metric`).
      **metric_kwargs: passed to a callable metric (``k=10``, ...).

    Returns:
      ``f [m_v] -> scalar``, jittable.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> crit = validation_criterion((np.array([2., 1., 0.]), rj.query_graph(np.zeros(3, int))))
      >>> float(crit(np.array([0., 1., 2.])))    # every pair reversed
      1.0
      >>> crit = validation_criterion((np.array([2., 1., 0.]), rj.query_graph(np.zeros(3, int))),
      ...                             rj.ndcg, k=2)
      >>> float(crit(np.array([3., 2., 1.])))    # negated NDCG@2
      -1.0
    """
    if not (isinstance(valid, tuple) and len(valid) == 2):
        raise TypeError("valid must be a tuple (y_valid, graph_valid)")
    y, g = valid
    check_graph(g, name="the validation graph")
    y = g.check_labels(y, "validation y")
    if y is not None and y.ndim != 1:
        raise ValueError("validation y must be 1-D (one output)")
    check_metric_options(metric, metric_kwargs, "validation_criterion")
    return g.criterion(y, metric, higher_is_better, **metric_kwargs)


class ValidSet:
    """Validation data of early stopping as one pytree: the rows ``M`` that score an
    iterate (``X_valid``, ``K_valid`` or a callable ``a -> K_valid a``), the labels and
    the graph are its leaves; the metric, its direction and its options (a sorted tuple)
    are static. :meth:`criterion` turns an iterate-to-scores map into the loop's
    ``x -> value`` (lower is better)."""

    def __init__(self, M, y, graph, metric, higher_is_better, kw):
        self.M, self.y, self.graph = M, y, graph
        self.metric, self.higher_is_better, self.kw = metric, higher_is_better, kw

    @property
    def fn(self):
        """The callable form of ``M`` (``None`` for a matrix)."""
        return self.M if callable(self.M) and not hasattr(self.M, "shape") else None

    def criterion(self, scores_fn):
        crit = self.graph.criterion(self.y, self.metric, self.higher_is_better, **dict(self.kw))
        return lambda x: crit(scores_fn(x))


def _flatten_valid(v):
    fn = v.fn
    return (None if fn else v.M, v.y, v.graph), (fn, v.metric, v.higher_is_better, v.kw)


def _unflatten_valid(aux, children):
    fn, metric, gib, kw = aux
    return ValidSet(fn or children[0], children[1], children[2], metric, gib, kw)


jax.tree_util.register_pytree_node(ValidSet, _flatten_valid, _unflatten_valid)


def valid_set(valid, name, metric, higher_is_better, metric_kwargs, where, convert=None):
    """Host checks of ``valid = (M_valid, y_valid, graph_valid)`` and of the metric's
    options; ``None`` or a :class:`ValidSet` (``M`` passed through ``convert``)."""
    kw = static_metric(metric, dict(metric_kwargs or {}), where)
    if valid is None:
        return None
    Mv, yv, gv = as_validation(valid, name)
    validation_criterion((yv, gv), metric, higher_is_better=higher_is_better, **dict(kw))
    yv = gv.check_labels(yv, "validation y")
    return ValidSet(Mv if convert is None else convert(Mv), yv, gv, metric, higher_is_better, kw)


def valid_fn_of(valid: Optional[ValidSet], scores_fn):
    """The loop's criterion ``x -> value`` of a :class:`ValidSet` (``None``: no early stopping)."""
    return None if valid is None else valid.criterion(scores_fn)


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
