"""Kernel functions with blockwise evaluation (docs/math.md).

A :class:`Kernel` is a pytree: ``gamma`` and ``coef0`` are traced (they can be
vmapped over), ``kind`` and ``degree`` are static.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.checks import check_count, check_positive, check_matrix, is_int
from .._core.traced import finite_positive
from .._core.host import reduce_concrete, reduction
from .._core.memory import check_memory, compute_dtype
from .._core.sparse import as_dense, is_scipy_sparse
from .._core.types import saveable

__all__ = ["Kernel", "linear_kernel", "gaussian_kernel", "polynomial_kernel", "kernel_matrix",
           "shifted", "unshifted", "constant_part", "kernel_offset", "ranking_form"]

_HI = lax.Precision.HIGHEST


@saveable
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Kernel:
    r"""A kernel ``k(x, x')``.

    Attributes:
      kind: ``"linear"`` ``<x, x'>``, ``"gaussian"`` :math:`\exp(-\gamma \lVert x - x' \rVert^2)`
        or ``"polynomial"`` :math:`(\gamma \langle x, x' \rangle + coef0)^{degree}` (static).
      gamma: scale (traced).
      coef0: offset of the polynomial kernel (traced).
      degree: degree of the polynomial kernel (static).
      shift: evaluate :math:`k(x, x') - k_0`, ``k0`` the kernel's constant part (1 for the
        Gaussian, ``coef0 ** degree`` for the polynomial, 0 for the linear kernel), without
        forming ``k`` (static; ``rankjax.kernels.kernel.shifted``).
    """

    kind: str = dataclasses.field(metadata=dict(static=True))
    gamma: float = 1.0
    coef0: float = 1.0
    degree: int = dataclasses.field(default=2, metadata=dict(static=True))
    shift: bool = dataclasses.field(default=False, metadata=dict(static=True))

    def with_log_params(self, params) -> "Kernel":
        """This kernel at ``params`` (``log_gamma``, ``log_coef0``, as ``tune`` learns them;
        traced)."""
        new = {k: jnp.exp(params[f"log_{k}"]) for k in ("gamma", "coef0") if f"log_{k}" in params}
        return dataclasses.replace(self, **new)


def linear_kernel() -> Kernel:
    """``k(x, x') = <x, x'>``.

    Example:
      >>> print(kernel_matrix(linear_kernel(), jnp.array([[1., 2.]]), jnp.array([[3., 4.]])))
      [[11.]]
    """
    return Kernel("linear")


def gaussian_kernel(gamma: float) -> Kernel:
    r""":math:`k(x, x') = \exp(-\gamma \lVert x - x' \rVert^2)`, ``gamma > 0``.

    Example:
      >>> K = kernel_matrix(gaussian_kernel(0.5), jnp.array([[0., 0.], [1., 1.]]))
      >>> print(jnp.round(K, 4))
      [[1.     0.3679]
       [0.3679 1.    ]]
    """
    return Kernel("gaussian", gamma=_plain(check_positive(gamma, name="gamma", scalar=True)))


def polynomial_kernel(degree: int, gamma: float = 1.0, coef0: float = 1.0) -> Kernel:
    r""":math:`k(x, x') = (\gamma \langle x, x' \rangle + coef0)^{degree}`.

    Example:
      >>> print(kernel_matrix(polynomial_kernel(2), jnp.array([[1., 2.]]), jnp.array([[3., 4.]])))
      [[144.]]
    """
    degree = check_count(degree, "degree")
    gamma = check_positive(gamma, name="gamma", scalar=True)
    coef0 = check_positive(coef0, name="coef0", scalar=True, allow_zero=True)   # >= 0: PSD kernel
    return Kernel("polynomial", gamma=_plain(gamma), coef0=_plain(coef0), degree=degree)


def shifted(kernel: Kernel) -> Kernel:
    r"""``kernel`` evaluated minus its constant part, :math:`k(x, x') - k_0`: the form the
    ranking solvers fit. A ranking loss's Laplacian annihilates constants (:math:`S 1 = 0`),
    so :math:`S (K - k_0 1 1^T) S = S K S` and the coefficients :math:`a = S (\cdot)` sum to 0:
    the models and their predictions are those of ``kernel`` in exact arithmetic. In floating
    point the entries of a Gaussian of small γ (or a polynomial of small γ) lie near
    :math:`k_0`, and their rounding, :math:`\epsilon k_0` each, is what the within-query
    centring leaves of them; evaluated shifted (``expm1``, a factored difference of powers)
    each entry is rounded relative to its varying part. Not for RLS (``IdentityGraph``: no
    constant is annihilated); a Nyström model evaluates its rows against the basis shifted
    and factors its :math:`K_{RR}` unshifted (:math:`K_{RR} - k_0 1 1^T` is indefinite).

    Example:
      >>> k = shifted(gaussian_kernel(1e-6))              # k - 1 = expm1(-γ d²), about -γ d²
      >>> print(round(float(kernel_matrix(k, jnp.array([[0.], [1.]]))[0, 1]) / 1e-6, 4))
      -1.0
    """
    check_kernel(kernel)
    return dataclasses.replace(kernel, shift=kernel.kind != "linear")


def constant_part(kernel: Kernel):
    """``k0``, what :func:`shifted` subtracts: 1 for the Gaussian, ``coef0 ** degree`` for the
    polynomial, 0 for the linear kernel."""
    if kernel.kind == "gaussian":
        return 1.0
    if kernel.kind == "polynomial":
        return kernel.coef0 ** kernel.degree
    return 0.0


def unshifted(kernel: Kernel) -> Kernel:
    """``kernel`` evaluated whole (:func:`shifted` undone)."""
    return dataclasses.replace(kernel, shift=False) if kernel.shift else kernel


def kernel_offset(kernel: Kernel, coef, axis=0):
    r""":math:`k_0 \sum_i a_i` over ``axis`` of ``coef`` (kept as a unit axis) for a shifted
    ``kernel``, 0 for an unshifted one: what :math:`K'_{xR} a` lacks of :math:`K_{xR} a`."""
    if not kernel.shift:
        return jnp.zeros((), coef.dtype)
    return (constant_part(kernel) * jnp.sum(coef, axis=axis, keepdims=True)).astype(coef.dtype)


def ranking_form(kernel: Kernel, graph) -> Kernel:
    """The kernel a ranking solve on ``graph`` evaluates: :func:`shifted` (minus its constant
    part, the same models, rounded relative to what varies) where the graph's Laplacian
    annihilates constants, ``kernel`` itself for RLS."""
    return shifted(kernel) if graph.annihilates_constants else kernel


def _plain(v):
    """A concrete host scalar as a Python ``float`` (a traced one as it is): the kernel's
    leaves then trace alike whether given as ``0.1``, ``np.float64(0.1)`` or
    ``np.float32(0.1)``, and a second γ reuses the first's compiled programs (a NumPy
    scalar is a strongly typed leaf, a Python float a weakly typed one: each compiled its
    own hold-out; benchmarks/REPORT.md §8)."""
    return float(v) if isinstance(v, (float, int, np.floating, np.integer)) else v


def check_kernel(kernel) -> "Kernel":
    """A TypeError unless ``kernel`` is a rankjax :class:`Kernel`."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a rankjax Kernel, got {type(kernel).__name__}")
    return kernel


def _dense(X):
    return jnp.asarray(as_dense(X))


def kernel_block(kernel: Kernel, A, B, diagonal=None):
    r"""``k(A_i, B_j)`` ``[a, b]``. Gaussian distances are expanded as
    :math:`|a|^2 + |b|^2 - 2 a.b` after both sides are shifted by the mean row of ``B``
    (distances do not change; the expansion no longer cancels features far from 0, which
    lost the small distances of float32 data offset by :math:`10^{3}`). ``diagonal`` (traced int,
    Gaussian only): row ``i`` of ``A`` is row ``diagonal + i`` of ``B``, whose distance is
    then exactly 0 (``k(x, x) = 1``, not ``exp(-γ rounding)``), in the same pass."""
    if kernel.kind == "gaussian":
        c = jnp.mean(B, axis=0)
        A, B = A - c, B - c
    dot = jnp.matmul(A, B.T, precision=_HI)
    if kernel.kind == "linear":
        return dot
    if kernel.kind == "polynomial":
        u = kernel.gamma * dot + kernel.coef0
        if not kernel.shift:
            return u ** kernel.degree
        c = jnp.asarray(kernel.coef0, u.dtype)     # u^d - c^d = (u - c) sum_k u^k c^(d-1-k)
        total = jnp.zeros_like(u)
        for k in reversed(range(kernel.degree)):                # Horner's rule in u
            total = total * u + c ** (kernel.degree - 1 - k)
        return kernel.gamma * dot * total
    if kernel.kind == "gaussian":
        na = jnp.sum(A * A, axis=1)
        nb = jnp.sum(B * B, axis=1)
        d2 = jnp.maximum(na[:, None] + nb[None, :] - 2 * dot, 0)
        if diagonal is not None:
            same = (diagonal + jnp.arange(A.shape[0]))[:, None] == jnp.arange(B.shape[0])[None, :]
            d2 = jnp.where(same, 0, d2)
        return (jnp.expm1 if kernel.shift else jnp.exp)(-kernel.gamma * d2)
    raise ValueError(f"unknown kernel kind {kernel.kind!r}")


def kernel_matrix(kernel: Kernel, X1, X2=None, *, block_size: Optional[int] = None):
    """Kernel matrix ``K[i, j] = k(X1[i], X2[j])``, ``[m1, m2]``.

    Args:
      kernel: a :class:`Kernel`.
      X1: ``[m1, n]`` (dense, or BCOO which is densified).
      X2: ``[m2, n]``; ``X1`` when omitted.
      block_size: evaluate ``block_size`` rows of ``X1`` at a time (``lax.map``),
        bounding the intermediate memory to ``block_size x m2``; all at once
        when ``None``.

    Example:
      >>> X = jnp.array([[1., 0.], [0., 1.], [1., 1.]])
      >>> print(kernel_matrix(linear_kernel(), X, block_size=2))
      [[1. 0. 1.]
       [0. 1. 1.]
       [1. 1. 2.]]
    """
    check_kernel(kernel)
    A = _dense(check_matrix(X1, "X1"))
    B = A if X2 is None else _dense(check_matrix(X2, "X2"))
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"X1 and X2 must be [m, n] with equal n, got {A.shape} and {B.shape}")
    if block_size is not None and (not is_int(block_size) or block_size < 1):
        raise ValueError(f"block_size must be a positive int or None, got {block_size!r}")
    m1, m2 = A.shape[0], B.shape[0]
    work = m1 if block_size is None else min(m1, int(block_size))
    check_memory((m1 + work) * m2 * jnp.dtype(A.dtype).itemsize,
                 f"kernel_matrix of {m1} x {m2} rows",
                 "use rj.Nystrom(kernel, basis) or rj.Falkon(kernel, basis), which hold m x b "
                 "kernel values, not m x m")
    return kernel_core(kernel, A, B, None if block_size is None else int(block_size), X2 is None)


@partial(jax.jit, static_argnums=(3, 4))
def kernel_core(kernel, A, B, block_size=None, same=False):
    """The compiled body of :func:`kernel_matrix` on checked dense ``A [m1, n]``, ``B [m2, n]``
    (``same``: ``B`` is ``A``, a Gaussian diagonal exactly 1); NaN for invalid traced
    parameters: they are made NaN, so that every entry is, without a pass over the matrix
    (a masking pass and the diagonal's scatter would cost more than the kernel itself:
    benchmarks/design_measurements.md §8)."""
    ok = _params_ok(kernel)
    bad = lambda v: jnp.where(ok, v, jnp.nan)                               # noqa: E731
    kernel = dataclasses.replace(kernel, gamma=bad(kernel.gamma), coef0=bad(kernel.coef0))
    return _kernel_blocks(kernel, A, B, block_size, same and kernel.kind == "gaussian")


def _params_ok(kernel):
    """Traced validity of the kernel parameters (positive definite kernels only)."""
    if kernel.kind == "linear":
        return jnp.asarray(True)
    ok = finite_positive(kernel.gamma)
    return ok & finite_positive(kernel.coef0, allow_zero=True) if kernel.kind == "polynomial" else ok


def _kernel_blocks(kernel, A, B, block_size, same=False):
    if block_size is None or block_size >= A.shape[0]:
        return kernel_block(kernel, A, B, 0 if same else None)
    m1 = A.shape[0]
    nb = -(-m1 // block_size)
    Ap = jnp.pad(A, ((0, nb * block_size - m1), (0, 0))).reshape(nb, block_size, -1)
    starts = jnp.arange(nb) * block_size
    K = lax.map(lambda a: kernel_block(kernel, a[0], B, a[1] if same else None), (Ap, starts))
    return K.reshape(nb * block_size, -1)[:m1]


def scale_gamma(X) -> float:
    """scikit-learn's ``gamma="scale"``: ``1 / (n var(X))`` over every entry of ``X [m, n]``
    (dense or scipy.sparse; 1 when ``X`` is constant or its variance is not finite).

    Example:
      >>> scale_gamma(np.array([[0., 2.], [2., 0.]]))
      0.5
    """
    n = X.shape[1]
    if is_scipy_sparse(X):
        mean = X.sum() / (X.shape[0] * n)
        var = float(X.multiply(X).sum() / (X.shape[0] * n) - mean ** 2)
    else:
        var = float(reduce_concrete(_variance, as_dense(X)))
    return 1.0 / (n * var) if var > 0 and np.isfinite(var) else 1.0


def mean_gamma(X) -> float:
    r"""``gamma="mean"``: :math:`1 / E \lVert x - x' \rVert^2 = 1 / (2 \sum_j \operatorname{var}(x_j))`
    over pairs of the rows of ``X [m, n]`` (dense or scipy.sparse): the Gaussian kernel is
    :math:`e^{-1}` at the mean squared distance of two rows (the mean-distance form of the median
    heuristic; scikit-learn's ``"scale"`` puts it at :math:`e^{-2}` on standardised columns). 1 when
    every column is constant.

    Example:
      >>> mean_gamma(np.array([[0., 2.], [2., 0.]]))
      0.25
    """
    if is_scipy_sparse(X):
        m = X.shape[0]
        mean = np.asarray(X.sum(axis=0)).ravel() / m
        total = float(np.sum(np.asarray(X.multiply(X).sum(axis=0)).ravel() / m - mean ** 2))
    else:
        total = float(reduce_concrete(_column_variance, as_dense(X)))
    return 1.0 / (2 * total) if total > 0 and np.isfinite(total) else 1.0


def _column_variance_host(X, block: int = 1 << 15):
    """``sum_j var(x_j)`` in float64, a block of rows at a time (two passes, as
    :func:`_variance_host`)."""
    a = X.reshape(X.shape[0], -1)
    rows = max(1, block // max(1, a.shape[1]))
    blocks = [slice(s, s + rows) for s in range(0, a.shape[0], rows)]
    mean = sum(a[b].sum(axis=0, dtype=np.float64) for b in blocks) / a.shape[0]
    return float(sum(np.square(a[b].astype(np.float64) - mean).sum() for b in blocks) / a.shape[0])


_column_variance = reduction(
    lambda xp, X: xp.sum(xp.var(xp.asarray(X, compute_dtype()), axis=0)), _column_variance_host)


def _variance_host(X, block: int = 1 << 15):
    """``var(X)`` over every entry, in float64, a block of rows at a time (two passes, no
    float64 copy of ``X``; blocks of :math:`2^{15}` entries keep the float64 temporaries in cache and
    in malloc's heap: faster than blocks of :math:`2^{20}` (benchmarks/design_measurements.md §8))."""
    a = X.reshape(X.shape[0], -1)
    rows = max(1, block // max(1, a.shape[1]))
    blocks = [slice(s, s + rows) for s in range(0, a.shape[0], rows)]
    mean = sum(a[b].sum(dtype=np.float64) for b in blocks) / a.size
    return sum(np.square(a[b].astype(np.float64) - mean).sum() for b in blocks) / a.size


_variance = reduction(lambda xp, X: xp.var(xp.asarray(X, compute_dtype())), _variance_host)

