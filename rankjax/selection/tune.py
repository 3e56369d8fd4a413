"""Learned hyper-parameters: exact leave-query-out (or k-fold) criteria as differentiable
functions of log λ and the kernel parameters, and an optax loop (docs/design.md).

The hold-out predictions are eq. 33-34 of Pahikkala et al. (2009) for one λ, written
with a **Cholesky** factor instead of the eigendecomposition the grid functions use:
the gradient of ``eigh`` divides by eigenvalue gaps and is unstable when eigenvalues
repeat (a kernel matrix with duplicate rows, a rank-deficient ``X``), whereas
``G + λ I`` is positive definite and its Cholesky factor has a smooth gradient.

* primal (linear kernel, optional per-feature ARD scales ``s``, ``X -> X diag(s)``):
  ``X^T L X + λ I = C C^T``, ``P = X C^{-T}``, ``H = P P^T``, fitted ``f = P C^{-1} X^T L y``;
* dual (Gaussian ``exp(-γ ||D(x - x')||^2)`` or polynomial ``(γ <Dx, Dx'> + c0)^2``):
  ``S K S + λ I = C C^T``, ``P = K S C^{-T}``, ``H = (K - P P^T) / λ``, ``f = P C^{-1} S y``;

then every fold ``U``: ``t = f_U - H_UU L_UU y_U``, ``f'_U = t + H_UU B (I - B^T H_UU B)^{-1} B^T t``.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .._core.products import HI
from .._core.checks import (
    as_float_array,
    check_count,
    check_flag,
    check_indices,
    check_positive,
    indices_ok,
    is_concrete,
    nan_unless)
from .._core.memory import check_memory, kernel_plan
from ..graphs.folds import Folds, over_folds, resolve_folds
from ..solvers.holdout import woodbury_fold
from ..graphs.graph import check_graph
from ..graphs.build import pairs_from_scores
from ..kernels.kernel import Kernel, kernel_block, kernel_matrix
from .._core.log import Stages, check_verbose
from ..kernels.basis import BasisRows, basis_system, take_basis
from .._problem import Problem
from ..solvers.ridge import dual_system, primal_system
from ..solvers.classes import Dual, Nystrom, Primal
from .._core.sparse import as_dense
from .._core.types import saveable

__all__ = ["TuneResult", "cv_predictions", "cv_loss", "tune", "KERNELS", "LOSSES"]

KERNELS = ("linear", "gaussian", "polynomial")
LOSSES = ("squared", "pairwise")


def _scaled(X, params):
    s = params.get("log_scales")
    return X if s is None else X * jnp.exp(s)


def _kernel(params, kind):
    if kind == "linear":
        return Kernel("linear")
    if kind == "gaussian":
        return Kernel("gaussian", gamma=jnp.exp(params["log_gamma"]))
    return Kernel("polynomial", gamma=jnp.exp(params["log_gamma"]),
                  coef0=jnp.exp(params.get("log_coef0", 0.0)), degree=2)


def _check_problem(problem, solver, what):
    """``(X dense [m, n], y [m], graph, kind, kernel, basis)`` of a :class:`Problem` and a
    solver: ``Primal()`` (the linear model), ``Dual(kernel)`` (an exact Gaussian or
    degree-2 polynomial kernel; ``None`` or a linear kernel: the linear model) or
    ``Nystrom(kernel, basis)``. With an exact kernel, the ``m x m`` matrices of a
    differentiated step must fit (about 12: kernel, system, Cholesky factor, features and
    their cotangents)."""
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a rankjax.Problem, got {type(problem).__name__}: "
                        f"{what.split()[0]}(rj.Problem(X, y, queries), solver, ...) with the solver "
                        "rj.Primal(), rj.Dual(kernel) or rj.Nystrom(kernel, basis)")
    if problem.precomputed:
        raise TypeError(f"{what} learns kernel parameters from feature rows: a precomputed "
                        "kernel matrix has none")
    kind, kernel, basis = _solver_kind(solver, what)
    graph = problem.graph
    check_graph(graph)
    graph.check_splittable(what)
    X, y = problem.X, problem.y
    if y is None or y.ndim != 1:
        raise ValueError(f"y must be [m] (one output), got shape {None if y is None else y.shape}")
    if kind != "linear" and basis is None:
        kernel_plan(X.shape[0], X.dtype, 12, what)
    return as_dense(X), y, graph, kind, kernel, basis


def _solver_kind(solver, what):
    """``(kind, kernel, basis)``: the model :func:`tune` differentiates for ``solver``."""
    if isinstance(solver, Primal):
        return "linear", None, None
    if not isinstance(solver, (Dual, Nystrom)):
        raise TypeError(f"{what} takes the solver rj.Primal(), rj.Dual(kernel) or "
                        f"rj.Nystrom(kernel, basis), got {type(solver).__name__}")
    kernel = solver.kernel
    basis = getattr(solver, "basis", None)
    if kernel is None or kernel.kind == "linear":
        return "linear", kernel, basis
    if kernel.kind == "polynomial" and int(kernel.degree) != 2:
        raise ValueError(f"{what} learns the degree-2 polynomial kernel, got degree "
                         f"{kernel.degree}")
    return kernel.kind, kernel, basis


def tune_basis(X, basis, kernel: Optional[Kernel], what):
    """The padded :class:`BasisRows` of ``basis`` (None: exact), drawn in ``kernel``'s feature
    space, its ``m x b`` blocks planned: about 10 of them live in a differentiated step
    (kernel block, features, their transforms and cotangents)."""
    if basis is None:
        return None
    _, B = take_basis(X, basis, kernel)
    m, b = X.shape[0], B.X.shape[0]
    check_memory(10 * m * b * X.dtype.itemsize, f"{what} with {m} rows and {b} basis rows",
                 "use a smaller basis or fewer rows (a subsample of whole queries)")
    return B


def _check_params(params, kernel, n, basis=None):
    """Keys and shapes of ``params`` (static, so checked under ``jit``/``grad`` too): a
    missing, unknown or unused key is an error rather than a silently ignored value."""
    if not isinstance(params, dict) or "log_lam" not in params:
        raise TypeError("params must be a dict with 'log_lam' (and 'log_gamma' for kernels)")
    allowed = {"linear": {"log_lam", "log_scales"},
               "gaussian": {"log_lam", "log_gamma", "log_scales"},
               "polynomial": {"log_lam", "log_gamma", "log_coef0", "log_scales"}}[kernel]
    if basis is not None:
        allowed = allowed | {"centres"}
        if "centres" in params and np.shape(params["centres"]) != (basis.X.shape[0], n):
            raise ValueError(f"params['centres'] must have shape [{basis.X.shape[0]}, {n}] "
                             f"(the padded basis rows, as tune returns them), got "
                             f"{np.shape(params['centres'])}")
    extra = sorted(set(params) - allowed)
    if extra:
        raise ValueError(f"params has {extra}, not used with kernel={kernel!r} "
                         f"{'and a basis' if basis is not None else '(centres need a basis)'} "
                         f"(it takes {sorted(allowed)})")
    if kernel != "linear" and "log_gamma" not in params:
        raise ValueError(f"params needs 'log_gamma' with kernel={kernel!r}")
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


def _tri_solve(C, B):
    return jax.scipy.linalg.solve_triangular(C, B, lower=True)


def _checked_inputs(params, problem, solver, folds, what):
    """The host checks shared by :func:`cv_predictions` and :func:`cv_loss`: returns the
    model's kind and the checked ``(X, y, graph, folds, basis)``."""
    if not isinstance(folds, Folds):
        raise TypeError(f"folds must be a Folds (rankjax.make_folds), got {type(folds).__name__}")
    X, y, graph, kind, kernel, basis = _check_problem(problem, solver, what)
    B = tune_basis(X, basis, kernel, what)
    _check_params(params, kind, X.shape[1], B)
    return kind, (X, y, graph, resolve_folds(graph, folds, 0, X.shape[0]), B)


def cv_predictions(params, problem: Problem, solver, folds: Folds):
    """Hold-out predictions ``[m]`` (every row predicted by the model trained without its
    fold) as a differentiable function of ``params`` (see :func:`cv_loss`). Pure and
    jittable; ``folds`` from :func:`rankjax.make_folds`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(8, num_features=3, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> f = cv_predictions({"log_lam": np.log(2.0)}, p, rj.Primal(), rj.make_folds(p.graph))
      >>> h = rj.holdout(p, rj.Primal(), lams=[2.0]).value.predictions[0]
      >>> bool(np.allclose(f, h))
      True
    """
    kind, checked = _checked_inputs(params, problem, solver, folds, "cv_predictions")
    return predictions_core(params, checked, kernel=kind)


@partial(jax.jit, static_argnames="kernel")
def predictions_core(params, problem, *, kernel):
    return _predictions(params, problem, kernel)


def nystrom_blocks(params, X, basis: BasisRows, kind):
    """``(K_mR, K_RR + ε I)`` of the Nyström model at ``params``: the kernel blocks of the
    (ARD-scaled) rows and centres (``params["centres"]`` when learned, else the basis
    rows), padding columns zero and a unit diagonal on padding, ``ε`` the jitter of
    :func:`rankjax.kernels.basis.basis_cholesky` (the features are ``Φ = K_mR C^{-T}``)."""
    kern = _kernel(params, kind)
    mf = basis.mask.astype(X.dtype)
    R = params.get("centres", basis.X) * mf[:, None]
    Xs, Rs = _scaled(X, params), _scaled(R, params)
    return kernel_block(kern, Xs, Rs) * mf, basis_system(kernel_block(kern, Rs, Rs), basis.mask)


def _predictions(params, problem, kernel):
    """The body of :func:`cv_predictions` on a checked problem (traced by the cores)."""
    X, y, graph, folds, basis = problem
    lam = jnp.exp(params["log_lam"])
    m = X.shape[0]
    if basis is not None:
        # Nyström: primal RankRLS on Φ = K_mR C^{-T} (C C^T = K_RR + ε I). With
        # C2 C2^T = Φ^T L Φ + λ I, the factor C4 = C C2 is lower triangular and
        # C4 C4^T = K_Rm L K_mR + λ (K_RR + ε I): one Cholesky of b x b, no transform of
        # the system by C, and P = Φ C2^{-T} = K_mR C4^{-T} (Φ never formed)
        KmR, KRR = nystrom_blocks(params, X, basis, kernel)
        G, b = primal_system(KmR, y, graph, root=True)
        C4 = jnp.linalg.cholesky((G + G.T) / 2 + lam * KRR)
        P = _tri_solve(C4, KmR.T).T                                    # K_mR C4^{-T}  [m, b]
        F = jnp.matmul(P, _tri_solve(C4, b), precision=HI)
        K = None
    elif kernel == "linear":
        Xs = _scaled(X, params)
        G, b = primal_system(Xs, y, graph)
        C = jnp.linalg.cholesky(G + lam * jnp.eye(G.shape[0], dtype=G.dtype))
        P = _tri_solve(C, Xs.T).T                                      # X C^{-T}  [m, n]
        F = jnp.matmul(P, _tri_solve(C, b), precision=HI)
        K = None
    else:
        K = kernel_matrix(_kernel(params, kernel), _scaled(X, params))
        system = dual_system(K, y, graph)
        C = jnp.linalg.cholesky(system.G + lam * jnp.eye(m, dtype=K.dtype))
        P = _tri_solve(C, system.root.apply(K)).T                      # K S C^{-T}  [m, m]
        F = jnp.matmul(P, _tri_solve(C, system.rhs), precision=HI)
    D = jnp.ones((1, P.shape[1]), P.dtype)
    one = partial(woodbury_fold, graph, Pfeat=P, D=D, lams=lam[None], F=F[None], y=y, K=K)
    return over_folds(folds, 1, P.shape[1], (1, m), P.dtype, lambda _: one)[0]


def _pairwise(f, head, tail, weight, T):
    """Smooth pairwise error: weighted mean of ``sigmoid((f_tail - f_head) / T)``."""
    return jnp.sum(weight * jax.nn.sigmoid((f[tail] - f[head]) / T)) / jnp.sum(weight)


def cv_loss(params, problem: Problem, solver, folds: Folds, loss="squared", pairs=None,
            temperature: float = 0.1):
    """Differentiable cross-validation criterion of RankRLS (Pahikkala et al. 2009 §3.3):
    the loss of the exact hold-out predictions ``f'`` (eq. 33-34, every row predicted by
    the model trained without its fold) at ``params``.

    Args:
      params: dict of scalars ``log_lam`` and (kernels) ``log_gamma``, optional
        ``log_coef0`` (polynomial) and ``log_scales [n]`` (ARD: features scaled by
        ``exp(log_scales)``); with a Nyström solver also ``centres [b_pad, n]``, the basis
        points as free parameters.
      problem: a :class:`Problem` with one output on a query (or identity) graph.
      solver: the model: :class:`Primal` (linear), :class:`Dual` with a Gaussian or
        degree-2 polynomial kernel (its parameters come from ``params``, not the kernel),
        or :class:`Nystrom` (Pahikkala et al. 2009 §3.5: O(m b^2) per call and its
        gradient, never an ``m x m`` matrix; the basis padded to a size bucket).
      folds: hold-out folds of the problem's graph (:func:`rankjax.make_folds`).
      loss: ``"squared"`` — the RankRLS loss ``(y - f')^T L (y - f')`` per row;
        ``"pairwise"`` — the pairwise error with the step replaced by
        ``sigmoid(./temperature)``, each query weighted equally; or a callable
        ``loss(f', y, seg)`` of the hold-out scores, the labels and the segment ids ``[m]``
        of the queries (``0..Q-1``; a smooth NDCG, a rax loss ...), jittable and
        differentiable, hashable (a module-level function).
      pairs: ``(head, tail, weight)`` for ``"pairwise"`` (from :func:`tune`); indices
        are range-checked, and under the caller's ``jit`` an index outside ``[0, m)``
        makes the loss NaN.

    Host checks, then one module-level jitted core: a second call with new values of
    the same shapes compiles nothing; gradients go through Cholesky factors.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(8, num_features=3, seed=0)
      >>> p = rj.Problem(d.X, d.y, d.qid)
      >>> float(rj.cv_loss({"log_lam": 0.0}, p, rj.Primal(), rj.make_folds(p.graph))) > 0
      True
    """
    check_loss(loss)
    kind, checked = _checked_inputs(params, problem, solver, folds,
                                    "cv_loss (with its gradient)")
    m = checked[0].shape[0]
    if loss == "pairwise":
        if pairs is None or len(pairs) != 3:
            raise ValueError("loss='pairwise' needs pairs=(head, tail, weight)")
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
    return _loss_core(params, checked, (pairs, temperature), kernel=kind, loss=loss)


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


def _loss(params, problem, objective, kernel, loss):
    """The body of :func:`cv_loss` on a checked ``problem = (X, y, graph, folds, basis)``
    and ``objective = (pairs, temperature)``; a traced pair index outside ``[0, m)``
    (unchecked under the caller's ``jit``) makes the loss NaN."""
    X, y, graph = problem[:3]
    pairs, temperature = objective
    f = _predictions(params, problem, kernel)
    if callable(loss):
        return loss(f, y, graph.segments()[0])
    if loss == "squared":
        return graph.loss(f, y) / X.shape[0]
    head, tail, weight = pairs
    ok = indices_ok(head, f.shape[0]) & indices_ok(tail, f.shape[0])
    return nan_unless(ok, _pairwise(f, head, tail, weight, temperature))


_loss_core = jax.jit(_loss, static_argnames=("kernel", "loss"))


@saveable
class TuneResult(NamedTuple):
    """Result of :func:`tune`: the final ``params``, ``lam`` and ``kernel``, the trajectory
    ``loss_history [steps + 1]`` and ``params_history`` (a dict of ``[steps + 1, ...]``),
    and ``decompositions`` (Cholesky factorizations: one per step)."""

    params: dict
    lam: float
    kernel: Optional[Kernel]
    loss_history: np.ndarray
    params_history: dict
    decompositions: int


_ADAM = optax.inject_hyperparams(optax.adam)(learning_rate=0.1)
"""One optimizer object for every call (the learning rate lives in its state), so a
second :func:`tune` with new values compiles nothing."""


@partial(jax.jit, static_argnames=("kernel", "loss"))
def _step(params, state, problem, objective, *, kernel, loss):
    value, grad = jax.value_and_grad(_loss)(params, problem, objective, kernel, loss)
    updates, state = _ADAM.update(grad, state, params)
    return optax.apply_updates(params, updates), state, value


def tune(problem: Problem, solver=Primal(), *, lam: float = 1.0, folds=None, ard: bool = False,
         loss="squared", steps: int = 50, learning_rate: float = 0.1, temperature: float = 0.1,
         seed: int = 0, centres: bool = False, verbose: int = 0) -> TuneResult:
    """Learns λ (and the kernel's γ, a polynomial's c0, ARD scales) by gradient descent
    (Adam, optax) on the exact hold-out criterion :func:`cv_loss`, in log space, from
    ``lam`` and the solver's kernel parameters.

    Each step costs one Cholesky of ``n x n`` (linear), ``m x m`` (an exact kernel) or
    ``b x b`` (Nyström) and its gradient: compare with a grid, which needs one
    decomposition per (γ) point.

    Args:
      problem: a :class:`Problem` with one output on a query (or identity) graph.
      solver: :class:`Primal` (linear), :class:`Dual` with a Gaussian or degree-2
        polynomial kernel (the starting γ, c0), or :class:`Nystrom` (its basis; O(m b^2)
        per step, no ``m x m`` matrix).
      lam: the starting λ.
      folds: ``None`` leave-query-out, an int k (drawn with ``seed``), or :class:`Folds`.
      ard: learn one scale per feature.
      loss: ``"squared"``, ``"pairwise"`` (smooth pairwise error) or a callable
        ``loss(f, y, seg)`` (see :func:`cv_loss`).
      steps, learning_rate: the Adam loop.
      temperature: of the smooth pairwise error.
      centres: with a Nyström solver, also learn the basis points (``params["centres"]``).
      verbose: log the loss every that many steps (0: silent; logger ``"rankjax"``).

    Returns:
      :class:`TuneResult` (the final point; ``loss_history[i]`` is the criterion at
      ``params_history[i]``).

    Example:
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=3, seed=0)
      >>> r = rj.tune(rj.Problem(d.X, d.y, d.qid), rj.Primal(), lam=100.0, steps=20)
      >>> bool(r.loss_history[-1] <= r.loss_history[0])
      True
    """
    check_loss(loss)
    check_verbose(verbose)
    X, y, graph, kind, kernel, basis = _check_problem(problem, solver, "tune")
    if check_flag(centres, "centres") and basis is None:
        raise ValueError("centres=True learns the basis points of a Nyström model: use "
                         "rj.Nystrom(kernel, basis)")
    B = tune_basis(X, basis, kernel, "tune")
    steps = check_count(steps, "steps")
    ard = check_flag(ard, "ard")
    check_positive(lam, scalar=True)
    check_positive(learning_rate, name="learning_rate", scalar=True)
    check_positive(temperature, name="temperature", scalar=True)
    folds = resolve_folds(graph, folds, seed, X.shape[0])
    gamma = coef0 = None
    if kind != "linear":
        gamma = check_positive(kernel.gamma, name="kernel gamma", scalar=True)
    if kind == "polynomial":
        coef0 = check_positive(kernel.coef0, name="kernel coef0", scalar=True)
    params = start_params(kind, X.shape[1], X.dtype, lam, gamma, ard,
                          B.X if centres else None, coef0)
    pairs = None
    if loss == "pairwise":
        seg, _ = graph.segments()
        h, t, _ = pairs_from_scores(np.asarray(y), np.asarray(seg))
        if h.size == 0:
            raise ValueError("loss='pairwise' needs pairs with different labels in a query")
        per_query = np.bincount(np.asarray(seg)[h])
        w = 1.0 / per_query[np.asarray(seg)[h]]
        pairs = (jnp.asarray(h), jnp.asarray(t), jnp.asarray(w, X.dtype))
    return descend(params, (X, y, graph, folds, B), kind, loss=loss, pairs=pairs,
                   temperature=temperature, steps=steps, learning_rate=learning_rate,
                   verbose=verbose)


def start_params(kernel: str, n: int, dtype, lam, gamma=None, ard=False, centres=None,
                 coef0=None) -> dict:
    """The starting point of :func:`tune` in log space (``gamma`` default ``1 / n``,
    ``coef0`` 1)."""
    params = {"log_lam": jnp.asarray(np.log(lam), dtype)}
    if kernel != "linear":
        params["log_gamma"] = jnp.asarray(np.log(1.0 / n if gamma is None else gamma), dtype)
    if kernel == "polynomial":
        params["log_coef0"] = jnp.asarray(np.log(1.0 if coef0 is None else coef0), dtype)
    if ard:
        params["log_scales"] = jnp.zeros(n, dtype)
    if centres is not None:
        params["centres"] = jnp.asarray(centres, dtype)
    return params


def descend(params, problem, kernel: str, *, loss="squared", pairs=None, temperature=0.1,
            steps: int = 20, learning_rate: float = 0.1, verbose: int = 0) -> TuneResult:
    """The Adam loop of :func:`tune` from ``params`` on a checked ``problem = (X, y, graph,
    folds, basis)`` (``basis`` a :class:`BasisRows` or ``None``)."""
    dtype = problem[0].dtype
    state = _ADAM.init(params)
    state.hyperparams["learning_rate"] = jnp.asarray(learning_rate, dtype)
    history, losses = [params], []
    objective = (pairs, jnp.asarray(temperature, dtype))
    stages = Stages(steps, "tune step", verbose)
    for i in stages:
        params, state, value = _step(params, state, problem, objective, kernel=kernel,
                                     loss=loss)
        losses.append(value)
        history.append(params)
        if stages.every and (i + 1) % stages.every == 0:
            stages.note(f"loss {float(value):.6g}, λ {float(np.exp(params['log_lam'])):.4g}")
    losses.append(_loss_core(params, problem, objective, kernel=kernel, loss=loss))
    stacked = {k: np.stack([np.asarray(p[k]) for p in history]) for k in params}
    final = {k: np.asarray(v) for k, v in params.items()}
    kern = None if kernel == "linear" else _kernel(params, kernel)
    return TuneResult(final, float(np.exp(final["log_lam"])), kern,
                      np.asarray([float(v) for v in losses]), stacked, steps + 1)
