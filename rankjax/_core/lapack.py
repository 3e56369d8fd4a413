r"""The LAPACK factorisations of the library (Cholesky, triangular solves, ``eigh``), never
run batched on the CPU.

jaxlib 0.10.0 to 0.11.0 splits a batched LAPACK call (a stack ``[..., n, n]`` of at least
:math:`2 \cdot 10^5` flops) into chunks on XLA:CPU's intra-op thread pool and waits for them
on a thread of that same pool. When as many such calls run at once as the pool has threads
(one a device of a mesh of simulated CPU devices as many as the cores, each running the
same program; or independent calls of one program), every thread waits and none is left
to run a chunk: the program never returns (seen as a hang of ``vmap`` over γ of the sharded
Nyström hold-out on 2 simulated devices of a 2-core machine; a debugger shows both pool
threads in ``ParallelBatchMap`` of ``lapack_dtrsm_ffi``). Later jaxlib sources run the
chunks inline.

So on the CPU paths (:attr:`~rankjax._core.backend.Paths.batch_factorisations` False) a
stack of factorisations, whether a leading dimension of its own or the lanes of a
caller's :func:`jax.vmap` (:func:`jax.custom_batching.custom_vmap`), is one unbatched
LAPACK call a matrix in a loop (``lax.map``), which never schedules on the pool; the
right-hand sides of one triangular factor are its columns, one call. An accelerator runs
the batched calls (cuSOLVER). Derivatives: :func:`cholesky` and :func:`eigh` by JVP rules,
:func:`solve_triangular` as a ``lax.custom_linear_solve`` (its transpose the transposed
solve), so no derivative ever differentiates or transposes the loop itself.

Example:
  >>> import jax.numpy as jnp
  >>> A = jnp.array([[4., 2.], [2., 3.]])
  >>> C = cholesky(A)
  >>> print(jnp.round(solve_triangular(C, jnp.array([2., 1.])), 4))
  [1. 0.]
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

from .backend import paths
from .products import mm

__all__ = ["cholesky", "cho_solve", "solve_triangular", "eigh"]


def _t(M):
    return jnp.swapaxes(M, -1, -2)


def _each_matrix(f, *xs):
    """``f`` of 2-D operands over the leading dimensions of ``xs`` (broadcast), one call a
    matrix (``lax.map``); ``f`` itself where there are none."""
    batch = jnp.broadcast_shapes(*(x.shape[:-2] for x in xs))
    if not batch:
        return f(*xs)
    flat = [jnp.broadcast_to(x, batch + x.shape[-2:]).reshape((-1,) + x.shape[-2:]) for x in xs]
    out = lax.map(lambda a: f(*a), flat)
    return jax.tree.map(lambda o: o.reshape(batch + o.shape[1:]), out)


def _as_columns(f, C, B):
    """``f(C, B)`` of one factor ``C [n, n]`` and right-hand sides ``B [..., n, r]``: the
    stacked right-hand sides its columns, one call."""
    n = B.shape[-2]
    out = f(C, jnp.moveaxis(B, -2, 0).reshape(n, -1))
    return jnp.moveaxis(out.reshape((n,) + B.shape[:-2] + B.shape[-1:]), 0, -2)


def _unbatched(f, solve: bool = False):
    """``f`` of 2-D operands, one matrix at a time over leading dimensions and over the
    lanes of a caller's ``vmap`` (those lanes become a leading dimension); ``solve``: ``f(C,
    B)`` solves with the factor ``C``, whose right-hand sides of one factor are columns."""
    def each(*xs):
        if solve and xs[0].ndim == 2 and xs[1].ndim > 2:
            return _as_columns(f, *xs)
        return _each_matrix(f, *xs)

    g = custom_vmap(each)

    @g.def_vmap
    def _rule(axis_size, in_batched, *xs):
        if not (solve and not in_batched[0]):         # one factor for every lane: columns
            xs = [x if b else jnp.broadcast_to(x, (axis_size,) + x.shape)
                  for x, b in zip(xs, in_batched)]
        out = call(*xs)
        return out, jax.tree.map(lambda _: True, out)

    def call(*xs):
        return g(*_alike(xs))

    return call


def _alike(xs):
    """``xs`` varying over the same mesh axes inside ``shard_map`` (an invariant factor and
    varying right-hand sides): ``custom_vmap`` does not cast them itself."""
    vs = [jax.typeof(x).mat.varying for x in xs]
    union = frozenset().union(*vs)
    return [x if v == union else lax.pcast(x, tuple(sorted(union - v)), to="varying")
            for x, v in zip(xs, vs)]


def _factor(A):
    return lax.linalg.cholesky(A, symmetrize_input=False)


def _eigh2(A):
    return tuple(jnp.linalg.eigh(A, symmetrize_input=False))


def _trsm(lower, trans):
    def solve(C, B):
        batch = jnp.broadcast_shapes(C.shape[:-2], B.shape[:-2])
        return lax.linalg.triangular_solve(jnp.broadcast_to(C, batch + C.shape[-2:]),
                                           jnp.broadcast_to(B, batch + B.shape[-2:]),
                                           left_side=True, lower=lower, transpose_a=trans)
    return solve


_FACTOR = _unbatched(_factor)
_EIGH = _unbatched(_eigh2)
_TRSM = {(lo, tr): _unbatched(_trsm(lo, tr), solve=True) for lo in (True, False) for tr in (True, False)}


def _looped(batched_op, looped_op):
    """The op of this trace's paths: LAPACK batched (an accelerator) or one matrix at a time."""
    return batched_op if paths().batch_factorisations else looped_op


# --------------------------------------------------------------------- triangular solves

def _tri_solve(C, B, lower, trans):
    """:math:`op(C)^{-1} B` for 2-D-core ``B [..., n, r]``, no derivative of its own."""
    return _looped(_trsm(lower, trans), _TRSM[lower, trans])(C, B)


def solve_triangular(C, B, *, lower: bool = True, trans: bool = False):
    r""":math:`X = op(C)^{-1} B` for a triangular ``C [..., n, n]`` (only its ``lower`` or upper
    triangle read; :math:`op(C) = C^T` with ``trans``), ``B [..., n]`` or ``[..., n, r]``.

    Differentiable in ``C`` and ``B`` as :func:`jax.lax.custom_linear_solve` of the
    product by the triangle: :math:`dX = op(C)^{-1}(dB - op(dC) X)`, a transposed solve for
    the cotangent.

    Example:
      >>> import jax.numpy as jnp
      >>> print(solve_triangular(jnp.array([[2., 0.], [1., 1.]]), jnp.array([2., 3.])))
      [1. 2.]
    """
    C, B = jnp.asarray(C), jnp.asarray(B)
    vec = B.ndim == C.ndim - 1
    C, Bm = _alike((C, B[..., None] if vec else B))
    tri = jnp.tril if lower else jnp.triu

    def matvec(x):
        T = tri(C)
        return mm(_t(T) if trans else T, x)

    Cs = lax.stop_gradient(C)
    X = lax.custom_linear_solve(matvec, Bm,
                                lambda _, b: _tri_solve(Cs, b, lower, trans),
                                lambda _, b: _tri_solve(Cs, b, lower, not trans))
    return X[..., 0] if vec else X


# --------------------------------------------------------------------------- Cholesky

@jax.custom_jvp
def _cholesky(A):
    return _looped(_factor, _FACTOR)(A)


@_cholesky.defjvp
def _cholesky_jvp(primals, tangents):
    r""":math:`dL = L \Phi(L^{-1} dA L^{-T})`, :math:`\Phi` the lower triangle with half its
    diagonal (Murray 2016, "Differentiation of the Cholesky decomposition", eq. 9)."""
    (A,), (dA,) = primals, tangents
    L = _cholesky(A)
    S = _t(solve_triangular(L, _t(solve_triangular(L, dA))))          # L^{-1} dA L^{-T}
    n = A.shape[-1]
    phi = jnp.tril(S) * jnp.where(jnp.eye(n, dtype=bool), 0.5, 1.0).astype(S.dtype)
    return L, mm(L, phi)


def cholesky(A, *, symmetrize: bool = True):
    r"""The lower Cholesky factor ``L [..., n, n]`` of symmetric positive definite ``A``,
    :math:`A = L L^T`; NaN where ``A`` is not positive definite in its dtype (as
    :func:`jax.lax.linalg.cholesky`). ``symmetrize``: factor :math:`(A + A^T) / 2` (else the
    lower triangle of ``A`` is read).

    Example:
      >>> import jax.numpy as jnp
      >>> print(cholesky(jnp.array([[4., 2.], [2., 2.]])))
      [[2. 0.]
       [1. 1.]]
    """
    A = jnp.asarray(A)
    return _cholesky((A + _t(A)) / 2 if symmetrize else jnp.tril(A) + _t(jnp.tril(A, -1)))


def cho_solve(L, B):
    r""":math:`A^{-1} B = L^{-T} L^{-1} B` from the lower factor ``L`` of :math:`A = L L^T`
    (``B [..., n]`` or ``[..., n, r]``): two :func:`solve_triangular`.

    Example:
      >>> import jax.numpy as jnp
      >>> print(cho_solve(cholesky(jnp.array([[4., 2.], [2., 2.]])), jnp.array([2., 1.])))
      [0.5 0. ]
    """
    return solve_triangular(L, solve_triangular(L, B), trans=True)


# ------------------------------------------------------------------------------ eigh

@jax.custom_jvp
def _eigh(A):
    return _looped(_eigh2, _EIGH)(A)


@_eigh.defjvp
def _eigh_jvp(primals, tangents):
    r"""The eigenvector derivative :math:`V (F ∘ V^T dA V)`, ``F_ij = 1 / (w_j - w_i)``, with
    ``F_ij = 0`` where two eigenvalues coincide (within ``eps max|w|``): the zero columns
    of a padded basis, the null space of a Laplacian. Every use here is a spectral function
    :math:`V g(w) V^T`, which a rotation inside a repeated eigenvalue's space leaves unchanged,
    so those terms are 0, where the generic rule divides 0 by 0 (NaN)."""
    (A,), (dA,) = primals, tangents
    w, V = _eigh(A)
    VdV = mm(_t(V), mm((dA + _t(dA)) / 2, V))
    gap = w[..., None, :] - w[..., :, None]
    tol = jnp.finfo(w.dtype).eps * jnp.max(jnp.abs(w), axis=-1, keepdims=True)[..., None]
    F = jnp.where(jnp.abs(gap) > tol, 1 / jnp.where(jnp.abs(gap) > tol, gap, 1), 0)
    return (w, V), (jnp.diagonal(VdV, axis1=-2, axis2=-1), mm(V, F * VdV))


def eigh(A):
    r"""``(w [..., n], V [..., n, n])``, :math:`A = V \operatorname{diag}(w) V^T`, ascending
    ``w``, of ``A`` symmetric to rounding (its lower triangle read, column-major: pass
    :math:`A^T` to read the upper one in place). Differentiable where eigenvalues repeat
    (the rule above).

    Example:
      >>> import jax.numpy as jnp
      >>> w, V = eigh(jnp.array([[2., 0.], [0., 1.]]))
      >>> print(w)
      [1. 2.]
    """
    return _eigh(jnp.asarray(A))
