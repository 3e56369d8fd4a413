"""Learned hyper-parameters: the exact leave-query-out (or k-fold) criterion as a
differentiable function of log λ and the kernel's parameters (each solver's
``cv_predictions``), and an optax loop over it (docs/design.md).

The hold-out predictions are eq. 33-34 of Pahikkala et al. (2009) for one λ, written with a
**Cholesky** factor instead of the eigendecomposition the grid methods use: the gradient of
``eigh`` divides by eigenvalue gaps and is unstable when eigenvalues repeat (a kernel matrix
with duplicate rows, a rank-deficient ``X``), whereas ``G + λ I`` is positive definite and
its Cholesky factor has a smooth gradient.
"""
from __future__ import annotations

import dataclasses

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._core.checks import as_float_array, check_count, check_flag, check_indices, check_positive
from .._core.host import is_concrete
from .._core.traced import indices_ok, nan_unless
from .._core.log import Stages, check_verbose
from .._core.types import saveable
from ..graphs.build import pairs_from_scores
from ..graphs.folds import Folds, resolve_folds
from .._problem import with_rows
from ..solvers.base import check_call, dense_rows
from ..solvers.models import LinearModel, ScaledModel, is_linear, scale_rows
from ..solvers.primal import Primal
from ..solvers.state import state_for
from ..scale.layout import ShardedData

__all__ = ["TuneResult", "cv_loss", "cv_predictions", "tune", "LOSSES", "descend", "checked_data",
           "learned_model", "finite_start"]

LOSSES = ("squared", "pairwise")


def checked_data(problem, solver, what, state=None):
    """``(solver, data, state)``: the solver that learns on ``problem`` (its
    ``cv_predictions``), its prepared data (host side: the dense rows, the labels, the graph
    and, for a Nyström solver, its basis) and its state (``init(problem,
    "cv_predictions")``: it serves the learned model's fit too; ``state``: one already made
    on ``problem`` that serves it, read instead)."""
    solver = check_call(problem, solver, "cv_predictions", what)
    graph = problem.graph
    graph.check_splittable(what)
    y = problem.y
    if y is None or y.ndim != 1:
        raise ValueError(f"y must be [m] (one output), got shape {None if y is None else y.shape}")
    kernel = solver.tuned_kernel()
    if kernel is not None and kernel.kind == "polynomial" and int(kernel.degree) != 2:
        raise ValueError(f"{what} learns the degree-2 polynomial kernel, got degree "
                         f"{kernel.degree}")
    state = state_for(solver, problem, "cv_predictions", state)
    return solver, solver.prepare(problem, state), state


def _traced(solver):
    return solver.for_data()


def _check_params(params, solver, data):
    """Keys and shapes of ``params`` (static, so checked under ``jit``/``grad`` too): a
    missing, unknown or unused key is an error rather than a silently ignored value."""
    if not isinstance(params, dict) or "log_lam" not in params:
        raise TypeError("params must be a dict with 'log_lam' (and 'log_gamma' for kernels)")
    allowed = solver.param_keys()
    n = data[0].shape[1]
    extra = sorted(set(params) - allowed)
    if extra:
        raise ValueError(f"params has {extra}, not used by {type(solver).__name__} with this "
                         f"kernel (it takes {sorted(allowed)})")
    if "log_gamma" in allowed and "log_gamma" not in params:
        raise ValueError(f"params needs 'log_gamma' with the {solver.tuned_kernel().kind} kernel")
    centres = params.get("centres")
    if centres is not None and np.shape(centres) != (data[3].X.shape[0], n):
        raise ValueError(f"params['centres'] must have shape [{data[3].X.shape[0]}, {n}] "
                         f"(the padded basis rows, as tune returns them), got "
                         f"{np.shape(centres)}")
    for key in ("log_lam", "log_gamma", "log_coef0"):
        if key in params and np.shape(params[key]) != ():
            raise TypeError(f"params[{key!r}] must be a scalar, got shape "
                            f"{np.shape(params[key])} (jax.vmap over a grid)")
    for key, value in params.items():           # outside jit/grad: the values too
        if is_concrete(value) and not np.all(np.isfinite(np.asarray(value, dtype=float))):
            raise ValueError(f"params[{key!r}] must be finite, got {value}")
    if "log_scales" in params and np.shape(params["log_scales"]) != (n,):
        raise ValueError(f"params['log_scales'] must have shape [{n}] (one per feature), "
                         f"got {np.shape(params['log_scales'])}")


def _pairwise(f, head, tail, weight, T):
    """Smooth pairwise error: weighted mean of ``sigmoid((f_tail - f_head) / T)``."""
    return jnp.sum(weight * jax.nn.sigmoid((f[tail] - f[head]) / T)) / jnp.sum(weight)


def check_loss(loss):
    """One of :data:`LOSSES` or a hashable callable ``loss(f, y, seg)``."""
    if callable(loss):
        try:
            hash(loss)
        except TypeError:
            raise TypeError("a callable loss must be hashable (a function, not a partial "
                            "of arrays)") from None
        return loss
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES} or a callable (f, y, seg) -> scalar, "
                         f"got {loss!r}")
    return loss


def _loss(params, solver, data, folds, objective, loss):
    """The criterion on checked data (traced by the cores); a traced pair index outside
    ``[0, m)`` (unchecked under the caller's ``jit``) makes it NaN."""
    y, graph = data[1:3]
    pairs, temperature = objective
    if loss == "squared":
        return solver.cv_loss(params, data, folds)
    f = solver.cv_predictions(params, data, folds)
    if callable(loss):
        return loss(f, y, graph.segments()[0])
    head, tail, weight = pairs
    ok = indices_ok(head, f.shape[0]) & indices_ok(tail, f.shape[0])
    return nan_unless(ok, _pairwise(f, head, tail, weight, temperature))


_loss_core = jax.jit(_loss, static_argnames=("loss",))


def cv_loss(params, problem, solver, folds: Folds, loss="squared", pairs=None,
            temperature: float = 0.1):
    r"""Differentiable cross-validation criterion of RankRLS (Pahikkala et al. 2009 §3.3):
    the loss of the exact hold-out predictions ``f'`` (eq. 33-34, every row predicted by
    the model trained without its fold) at ``params``.

    Args:
      params: dict of scalars ``log_lam`` and (kernels) ``log_gamma``, optional
        ``log_coef0`` (polynomial) and ``log_scales [n]`` (ARD: features scaled by
        ``exp(log_scales)``); with a Nyström solver also ``centres [b_pad, n]``, the basis
        points as free parameters.
      problem: a :class:`~rankjax.Problem` with one output on a query (or identity) graph.
      solver: the model, any solver that implements ``cv_predictions``: :class:`~rankjax.Primal`
        (linear), :class:`~rankjax.Dual` with a Gaussian or degree-2 polynomial kernel (its
        parameters come from ``params``, not the kernel) or :class:`~rankjax.Nystrom`
        (Pahikkala et al. 2009 §3.5: :math:`O(m b^2)` per call and its gradient, never ``m x m``).
      folds: hold-out folds of the problem's graph (:func:`rankjax.make_folds`).
      loss: ``"squared"`` — the RankRLS loss :math:`(y - f')^T L (y - f')` per row;
        ``"pairwise"`` — the pairwise error with the step replaced by
        ``sigmoid(./temperature)``, each query weighted equally; or a callable
        ``loss(f', y, seg)`` of the hold-out scores, the labels and the segment ids ``[m]``
        (jittable, differentiable, hashable: a module-level function).
      pairs: ``(head, tail, weight)`` for ``"pairwise"``, built from concrete labels when
        not given (as :func:`tune` builds them); indices are range-checked, and under the
        caller's ``jit`` an index outside ``[0, m)`` makes the loss NaN.

    Host checks, then one module-level jitted core: a second call with new values of the
    same shapes compiles nothing; gradients go through Cholesky factors.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(8, num_features=3, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> float(rj.cv_loss({"log_lam": 0.0}, p, rj.Primal(), rj.make_folds(p.graph))) > 0
      True
    """
    check_loss(loss)
    if not isinstance(folds, Folds):
        raise TypeError(f"folds must be a Folds (rankjax.make_folds), got {type(folds).__name__}")
    solver, data, _ = checked_data(problem, solver, "cv_loss (with its gradient)")
    _check_params(params, solver, data)
    folds = resolve_folds(data[2], folds, 0, data[0].shape[0])
    m = data[0].shape[0]
    if loss == "pairwise":
        if pairs is None and is_concrete(data[1]) and is_concrete(data[0]):
            pairs = loss_pairs(data[1], data[2], data[0].dtype)     # as tune builds them
        if pairs is None or len(pairs) != 3:
            raise ValueError("loss='pairwise' needs pairs=(head, tail, weight): every pair of "
                             "rows of a query with different labels, head the higher, weight "
                             "1 / the query's pair count. Outside jit cv_loss builds them from "
                             "the labels; under jit with traced labels, build them outside it")
        head, tail = (check_indices(v, f"pairs {k}", m)
                      for k, v in zip(("head", "tail"), pairs[:2]))
        weight = as_float_array(pairs[2], "pairs weight", finite=True)
        if is_concrete(weight) and bool(jnp.any(weight < 0)):
            raise ValueError("pairs weight must be >= 0")
        if head.shape != tail.shape or weight.shape != head.shape:
            raise ValueError(f"pairs must be three [p] arrays, got shapes "
                             f"{[np.shape(v) for v in pairs]}")
        pairs = (head, tail, weight)
    check_positive(temperature, name="temperature", scalar=True)
    return _loss_core(params, _traced(solver), data, folds, (pairs, temperature), loss=loss)


def loss_pairs(y, graph, dtype):
    """``(head, tail, weight)`` of ``loss="pairwise"``: every within-query pair of rows with
    different labels (head the higher), each query weighted equally (``1 / its pairs``);
    from concrete labels on the host."""
    seg, _ = graph.segments()
    seg = np.asarray(seg)
    h, t, _ = pairs_from_scores(np.asarray(y), seg)
    if h.size == 0:
        raise ValueError("loss='pairwise' needs pairs with different labels in a query")
    w = 1.0 / np.bincount(seg[h])[seg[h]]
    return jnp.asarray(h), jnp.asarray(t), jnp.asarray(w, dtype)


@saveable
class TuneResult(NamedTuple):
    """Result of :func:`tune`: the final ``params``, ``lam`` and ``kernel`` (``None`` for the
    linear model), the trajectory ``loss_history [steps + 1]`` and ``params_history`` (a
    dict of ``[steps + 1, ...]``), ``decompositions`` (Cholesky factorizations: one per
    step), ``solver``, the solver at the final point (ready for :func:`rankjax.fit` at
    ``lam``), ``scales`` the learned per-feature scales ``[n]`` (``ard=True``; the solver
    then fits the rows ``X * scales``, else None) and ``model``, that fit on every row of
    the problem (a :class:`~rankjax.ScaledModel` of the scaled rows with ``ard``, a linear
    model's weights on the given columns; None when the loss ended NaN). ``moved`` (from
    ``rj.select(..., optimize=True)`` and the estimators): whether the learned point
    replaced the grid's after its cross-fitted check; None from :func:`tune` itself."""

    params: dict
    lam: float
    kernel: object
    loss_history: np.ndarray
    params_history: dict
    decompositions: int
    solver: object = None
    scales: Optional[np.ndarray] = None
    model: object = None
    moved: Optional[bool] = None


def learned_model(problem, solver, lam: float, scales=None, state=None):
    """``solver`` (at its learned point) fit at ``lam`` on every row of ``problem``, the rows
    scaled by ``scales`` ``[n]`` when given: a linear model's weights then carry the scales
    (:class:`~rankjax.LinearModel` on the given columns), any other model is wrapped in a
    :class:`~rankjax.ScaledModel`. ``state``: the descent's on ``problem``, read when
    ``solver`` is still its solver (nothing learned moved it)."""
    if scales is None:
        return solver.fit(problem, lam, state_for(solver, problem, "fit", state)).value
    scaled = (dataclasses.replace(problem, X=scale_rows(problem.X, jnp.asarray(scales)))
              if isinstance(problem, ShardedData) else      # padding rows stay zero
              with_rows(problem, scale_rows(dense_rows(problem), scales)))
    model = solver.fit(scaled, lam, solver.init(scaled, "fit")).value
    return LinearModel(model.weights * scales) if is_linear(model) else ScaledModel(scales, model)


ADAM = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
"""The default optimizer, one object for every call (the learning rate lives in its state),
so a second :func:`tune` with new values compiles nothing."""


@partial(jax.jit, static_argnames=("loss", "optimizer"))
def _step(params, state, solver, data, folds, objective, *, loss, optimizer):
    value_fn = lambda p: _loss(p, solver, data, folds, objective, loss)      # noqa: E731
    value, grad = jax.value_and_grad(value_fn)(params)
    if isinstance(optimizer, optax.GradientTransformationExtraArgs):     # line searches (lbfgs)
        updates, state = optimizer.update(grad, state, params, value=value, grad=grad,
                                          value_fn=value_fn)
    else:
        updates, state = optimizer.update(grad, state, params)
    return optax.apply_updates(params, updates), state, value


def tune(problem, solver=Primal(), *, lam: float = 1.0, folds=None, ard: bool = False,
         loss="squared", steps: int = 50, optimizer=None, temperature: float = 0.1,
         seed: int = 0, centres: bool = False, verbose: int = 0) -> TuneResult:
    """Learns λ (and the kernel's γ, a polynomial's c0, ARD scales) by gradient descent on
    the exact hold-out criterion :func:`cv_loss`, in log space, from ``lam`` and the
    solver's kernel parameters.

    Each step costs one Cholesky of ``n x n`` (linear), ``m x m`` (an exact kernel) or
    ``b x b`` (Nyström) and its gradient: compare with a grid, which needs one
    decomposition per (γ) point.

    Args:
      problem: a :class:`~rankjax.Problem` with one output on a query (or identity) graph.
      solver: any solver that implements ``cv_predictions`` (:func:`~rankjax.capabilities`):
        :class:`~rankjax.Primal`, :class:`~rankjax.Dual` with a Gaussian or degree-2
        polynomial kernel (the starting γ, c0) or :class:`~rankjax.Nystrom` (its basis;
        :math:`O(m b^2)` per step).
      lam: the starting λ.
      folds: ``None`` leave-query-out, an int k (drawn with ``seed``), or :class:`Folds`.
      ard: learn one scale per feature.
      loss: ``"squared"``, ``"pairwise"`` (smooth pairwise error) or a callable
        ``loss(f, y, seg)`` (see :func:`cv_loss`).
      steps: the number of optimizer steps.
      optimizer: an optax ``GradientTransformation`` (default ``ADAM``, Adam at 0.1), or
        a ``GradientTransformationExtraArgs`` such as ``optax.lbfgs()``, which is given the
        step's ``value``, ``grad`` and ``value_fn`` (its line search); the same object again
        reuses the compiled step.
      temperature: of the smooth pairwise error.
      centres: with a Nyström solver, also learn the basis points (``params["centres"]``).
      verbose: log the loss every that many steps (0: silent; logger ``"rankjax"``).

    Returns:
      a ``TuneResult`` (the final point; ``loss_history[i]`` is the criterion at
      ``params_history[i]``).

    Example:
      >>> import numpy as np, optax, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=3, seed=0)
      >>> r = rj.tune(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=100.0, steps=20,
      ...             optimizer=optax.sgd(1.0))
      >>> bool(r.loss_history[-1] <= r.loss_history[0])
      True
    """
    check_loss(loss)
    check_verbose(verbose)
    solver, data, state = checked_data(problem, solver, "tune")
    X, y, graph = data[:3]
    if check_flag(centres, "centres") and "centres" not in solver.param_keys():
        raise ValueError("centres=True learns the basis points of a Nyström model: use "
                         "rj.Nystrom(kernel, basis)")
    steps = check_count(steps, "steps")
    ard = check_flag(ard, "ard")
    check_positive(lam, scalar=True)
    check_positive(temperature, name="temperature", scalar=True)
    if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
        raise TypeError(f"optimizer must be an optax GradientTransformation (optax.adam(0.1)), "
                        f"got {type(optimizer).__name__}")
    if isinstance(problem, ShardedData) and folds is not None:
        raise TypeError("the hold-out of a sharded problem is leave-query-out: folds=None")
    if isinstance(problem, ShardedData) and loss != "squared" and jax.process_count() > 1:
        raise NotImplementedError(f"tune of a sharded problem with several processes "
                                  f"(jax.distributed) learns on loss='squared', got {loss!r}")
    folds = resolve_folds(graph, folds, seed, X.shape[0])
    params = solver.start_params(X.shape[1], X.dtype, lam, ard)
    if centres:
        params["centres"] = jnp.asarray(data[3].X, X.dtype)
    pairs = loss_pairs(y, graph, X.dtype) if loss == "pairwise" else None
    r = descend(params, solver, data, folds, loss=loss, pairs=pairs, temperature=temperature,
                steps=steps, optimizer=optimizer, verbose=verbose)
    if not np.isfinite(r.loss_history[-1]):
        return r
    scales = np.exp(r.params["log_scales"]) if "log_scales" in r.params else None
    return r._replace(scales=scales, model=learned_model(problem, r.solver, r.lam, scales, state))


def descend(params, solver, data, folds, *, loss="squared", pairs=None, temperature=0.1,
            steps: int = 20, optimizer=None, verbose: int = 0) -> TuneResult:
    """The loop of :func:`tune` from ``params`` on checked data (``solver.prepare``) and
    resolved ``folds``."""
    dtype = data[0].dtype
    optimizer = ADAM if optimizer is None else optimizer
    state = optimizer.init(params)
    history, losses = [params], []
    objective = (pairs, jnp.asarray(temperature, dtype))
    stages = Stages(steps, "tune step", verbose)
    traced = _traced(solver)
    for i in stages:
        params, state, value = _step(params, state, traced, data, folds, objective, loss=loss,
                                     optimizer=optimizer)
        losses.append(value)
        history.append(params)
        if stages.every and (i + 1) % stages.every == 0:
            stages.note(f"loss {float(value):.6g}, λ {float(np.exp(params['log_lam'])):.4g}")
    losses.append(_loss_core(params, traced, data, folds, objective, loss=loss))
    stacked = {k: np.stack([np.asarray(p[k]) for p in history]) for k in params}
    final = {k: np.asarray(v) for k, v in params.items()}
    at = solver.at(final)
    return TuneResult(final, float(np.exp(final["log_lam"])), at.tuned_kernel(),
                      np.asarray([float(v) for v in losses]), stacked, steps + 1, at)


START_FACTORS = (1.0, 10.0, 100.0, 1000.0)
"""A descent from a point whose hold-out loss is not finite (λ below what the step's
Cholesky factor resolves in the data's dtype) starts at the first of these multiples of λ
whose loss is finite."""


def finite_start(params, solver, data, folds):
    """``params`` with ``log_lam`` raised by the first of :data:`START_FACTORS` at which the
    squared hold-out loss is finite (``params`` itself when none is)."""
    objective = (None, jnp.asarray(0.1, data[0].dtype))
    for f in START_FACTORS:
        p = dict(params, log_lam=params["log_lam"] + np.log(f))
        if np.isfinite(float(_loss_core(p, _traced(solver), data, folds, objective, loss="squared"))):
            return p
    return params


def cv_predictions_at(params, solver, data, folds):
    """The hold-out predictions ``[m]`` at ``params`` on prepared data (jitted; the scoring of
    a refined point)."""
    return predictions_core(params, _traced(solver), data, folds)


predictions_core = jax.jit(lambda params, solver, data, folds:
                           solver.cv_predictions(params, data, folds))


def cv_predictions(params, problem, solver, folds: Folds):
    """The exact hold-out predictions ``[m]`` at ``params`` (what :func:`cv_loss` scores),
    the inputs checked as :func:`cv_loss` checks them.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(8, num_features=3, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> f = cv_predictions({"log_lam": np.log(2.0)}, p, rj.Primal(), rj.make_folds(p.graph))
      >>> bool(np.allclose(f, rj.holdout(p, rj.Primal(), lams=[2.0]).value.predictions[0]))
      True
    """
    if not isinstance(folds, Folds):
        raise TypeError(f"folds must be a Folds (rankjax.make_folds), got {type(folds).__name__}")
    solver, data, _ = checked_data(problem, solver, "cv_predictions")
    _check_params(params, solver, data)
    return cv_predictions_at(params, solver, data, resolve_folds(data[2], folds, 0, data[0].shape[0]))
