r"""The kinds of ``X`` and a sparse matrix for matrix-free solvers (docs/design.md).

**Kinds of X.** Data reach the library as dense numpy/JAX arrays, ``scipy.sparse``
matrices, ``jax.experimental.sparse`` BCOO/BCSR or :class:`CSRMatrix`. This module is
the one place that tells them apart: :func:`as_dense`, :func:`matmul`,
:func:`is_sparse`, :func:`is_scipy_sparse`, :func:`is_bcoo`, :func:`is_csr`,
:func:`sparse_values` and :func:`count_nonzero` dispatch on the kind
(``functools.singledispatch``: a new kind registers its own handlers); every other
module calls them instead of testing types or attributes.

**CSRMatrix**: CSR of ``X`` and of :math:`X^T`.

``X @ v`` and ``X.T @ u`` are products by rows, so the transpose is stored too
(``BCSR`` has no transposed product): twice the memory of one CSR plus a row id
per nonzero. Kernel choice, measured by ``benchmarks/bench_cg.py`` on the 2-core
CPU (100,000 × 50,000, 7.5 M nonzeros; ``X v`` / :math:`X^T u` in ms):

=====================  ===========  ===========  ===========  ===========
kernel                 f64, 1 col   f32, 1 col   f64, 8 cols  f32, 8 cols
=====================  ===========  ===========  ===========  ===========
scipy CSR (reference)  9.6 / 9.5    7.6 / 7.8    27 / 33      25 / 27
BCSR kernel            30 / 30      64 / 70      15 / 18      13 / 15
BCOO                   68 / 56      59 / 49      223 / 180    120 / 109
gather + segment_sum   41 / 31      24 / 10      163 / 151    97 / 84
**CSRMatrix**          30 / 30      11 / 10      14 / 15      14 / 15
=====================  ===========  ===========  ===========  ===========

So several columns go to the BCSR kernel and, on CPU, one vector to gather +
``segment_sum`` read along the *other* orientation (``X v`` gathers ``v`` by
the sorted rows of :math:`X^T` and scatter-adds into the ``m`` outputs, which was
2–6× faster than the BCSR kernel in float32 and equal in float64). On GPU every
product uses BCSR (cuSPARSE); not yet measured here. Under ``vmap`` the product
is routed to **one** sparse-times-dense-matrix product
(``jax.custom_batching.custom_vmap``): a CG over 8 λ or 8 outputs costs one CSR
pass per iteration, not 8.

Products are not differentiable (``custom_vmap`` has no autodiff rule); the
solvers that use them do not need gradients.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax import lax
from jax.experimental import sparse
from .memory import compute_dtype
from .backend import paths
from .types import saveable

__all__ = ["CSRMatrix", "to_csr"]


@saveable
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class CSRMatrix:
    r"""``[m, n]`` sparse matrix stored as CSR of ``X`` and CSR of :math:`X^T`.

    Build with :func:`to_csr`. Supports ``X @ v`` / ``X @ V`` (``[n]`` or
    ``[n, k]``), ``X.T`` (free: swaps the two CSRs), ``.todense()``, ``.shape``,
    ``.dtype``, ``.nse``, ``.astype``. A pytree: pass it to ``jit``-ed functions
    as an argument.

    Attributes:
      data: ``[nse]`` the nonzero values of ``X``, row by row (CSR).
      indices: ``[nse]`` int32 column of every nonzero.
      indptr: ``[m+1]`` int32 start of every row in ``data``.
      rows: ``[nse]`` int32 row of every nonzero (sorted).
      t_data: ``data`` of the transpose (CSR of the transpose, likewise ``t_indices``,
        ``t_indptr``, ``t_rows``).
      t_indices: see ``t_data``.
      t_indptr: see ``t_data``.
      t_rows: see ``t_data``.
      shape: ``(m, n)`` (static).
    """

    data: jax.Array
    indices: jax.Array
    indptr: jax.Array
    rows: jax.Array
    t_data: jax.Array
    t_indices: jax.Array
    t_indptr: jax.Array
    t_rows: jax.Array
    shape: tuple = dataclasses.field(metadata=dict(static=True))

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nse(self) -> int:
        return self.data.shape[0]

    @property
    def T(self) -> "CSRMatrix":
        return CSRMatrix(self.t_data, self.t_indices, self.t_indptr, self.t_rows, self.data,
                         self.indices, self.indptr, self.rows, (self.shape[1], self.shape[0]))

    def astype(self, dtype) -> "CSRMatrix":
        return dataclasses.replace(self, data=self.data.astype(dtype),
                                   t_data=self.t_data.astype(dtype))

    def todense(self) -> jax.Array:
        return sparse.BCSR((self.data, self.indices, self.indptr), shape=self.shape).todense()

    def __matmul__(self, v):
        v = jnp.asarray(v)
        if v.ndim not in (1, 2) or v.shape[0] != self.shape[1]:
            raise ValueError(f"cannot multiply a {self.shape} CSRMatrix by shape {v.shape}")
        dtype = jnp.result_type(self.data.dtype, v.dtype)
        V = v[:, None] if v.ndim == 1 else v
        out = _csr_mm(self.astype(dtype), V.astype(dtype))
        return out[:, 0] if v.ndim == 1 else out


def _plain_mm(A: CSRMatrix, V):
    if V.shape[1] == 1 and paths().csr_vector_gather:
        # one vector: read X^T by its rows (v gathered in order), scatter-add into m outputs
        return jax.ops.segment_sum(A.t_data[:, None] * V[A.t_rows], A.t_indices, A.shape[0])
    return sparse.BCSR((A.data, A.indices, A.indptr), shape=A.shape) @ V  # precision: a sparse operand


@jax.custom_batching.custom_vmap
def _csr_mm(A: CSRMatrix, V):
    return _plain_mm(A, V)


@_csr_mm.def_vmap
def _csr_mm_vmap(axis_size, in_batched, A, V):
    a_batched, v_batched = in_batched
    if any(jax.tree.leaves(a_batched)):          # a batch of matrices: one product each
        bcast = lambda x, b: x if b else jnp.broadcast_to(x, (axis_size,) + x.shape)  # noqa
        A = jax.tree.map(bcast, A, a_batched)
        V = bcast(V, v_batched)
        return lax.map(lambda a: _csr_mm(*a), (A, V)), True
    if not v_batched:
        return _csr_mm(A, V), False
    b, n, k = V.shape                # [b, n, k] -> one [n, b k] product
    W = jnp.moveaxis(V, 0, 1).reshape(n, b * k)
    out = _csr_mm(A, W)
    return jnp.moveaxis(out.reshape(out.shape[0], b, k), 1, 0), True


def host_sparse(X):
    """``X`` (dense or scipy.sparse, on the host) as a scipy sparse matrix: 2-D and finite."""
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D [m, n], got shape {X.shape}")
        X = sp.coo_matrix(X)
    if X.dtype.kind in "fc" and not np.all(np.isfinite(X.data)):
        raise ValueError("X contains NaN or inf")
    return X


def to_scipy(X):
    """A sparse ``X`` (scipy, BCOO, BCSR or :class:`CSRMatrix`) as a scipy CSR matrix (host)."""
    if sp.issparse(X):
        return X.tocsr()
    C = X if is_csr(X) else to_csr(X)
    return sp.csr_matrix((np.asarray(C.data), np.asarray(C.indices), np.asarray(C.indptr)),
                         shape=C.shape)


def to_csr(X, dtype=None) -> CSRMatrix:
    """``scipy.sparse`` matrix, BCOO, BCSR or dense array -> :class:`CSRMatrix`
    (host side; duplicates summed, explicit zeros kept).

    Args:
      X: ``[m, n]`` matrix with concrete values.
      dtype: data dtype (default: that of ``X``; integers become the default float).

    Example:
      >>> import numpy as np
      >>> A = to_csr(np.array([[0., 2.], [1., 0.], [3., 4.]]))
      >>> print(np.asarray(A @ np.array([1., 1.])), np.asarray(A.T @ np.array([1., 1., 1.])))
      [2. 1. 7.] [4. 6.]
    """
    if isinstance(X, CSRMatrix):
        return X if dtype is None else X.astype(dtype)
    if isinstance(X, jax.core.Tracer) or isinstance(getattr(X, "data", None), jax.core.Tracer):
        raise TypeError("to_csr: X must be concrete: it runs on the host, outside jit/vmap; "
                        "call it before the jitted function and pass its result in")
    if isinstance(X, (sparse.BCOO, sparse.BCSR)):
        if X.n_batch or X.n_dense:
            raise ValueError("to_csr takes an unbatched 2-D sparse matrix")
        d = np.asarray(X.data)
        if isinstance(X, sparse.BCOO):
            i = np.asarray(X.indices)
            X = sp.coo_matrix((d, (i[:, 0], i[:, 1])), shape=X.shape)
        else:
            X = sp.csr_matrix((d, np.asarray(X.indices), np.asarray(X.indptr)), shape=X.shape)
    C = sp.csr_matrix(host_sparse(X))
    C.sum_duplicates()
    if dtype is None:
        dtype = C.dtype if np.issubdtype(C.dtype, np.floating) else compute_dtype()
    if not np.issubdtype(np.dtype(dtype), np.floating):
        raise TypeError(f"dtype must be floating, got {dtype}")
    T = C.T.tocsr()
    T.sort_indices()
    def parts(A):
        rows = np.repeat(np.arange(A.shape[0], dtype=np.int32), np.diff(A.indptr))
        return [jnp.asarray(np.asarray(a, t)) for a, t in
                ((A.data, dtype), (A.indices, np.int32), (A.indptr, np.int32), (rows, np.int32))]

    return CSRMatrix(*parts(C), *parts(T), tuple(int(s) for s in C.shape))


# ----------------------------------------------------------------------------
# the kinds of X

_JAX_SPARSE = (sparse.BCOO, sparse.BCSR, CSRMatrix)


def is_scipy_sparse(X) -> bool:
    """A ``scipy.sparse`` matrix or array (host side)."""
    return sp.issparse(X)


def is_bcoo(X) -> bool:
    """A ``jax.experimental.sparse.BCOO``."""
    return isinstance(X, sparse.BCOO)


def is_csr(X) -> bool:
    """A :class:`CSRMatrix`."""
    return isinstance(X, CSRMatrix)


def is_sparse(X) -> bool:
    """Any sparse kind: scipy, BCOO, BCSR or :class:`CSRMatrix`."""
    return isinstance(X, _JAX_SPARSE) or sp.issparse(X)


def sparse_values(X):
    """The stored values of a sparse ``X`` (``.data``), or ``X`` itself when dense."""
    return X.data if is_sparse(X) else X


def count_nonzero(X) -> int:
    """Stored nonzeros of a sparse ``X``; nonzero entries of a dense one (host)."""
    if sp.issparse(X):
        return int(X.nnz)
    if isinstance(X, _JAX_SPARSE):
        return int(np.count_nonzero(np.asarray(X.data)))
    return int(np.count_nonzero(np.asarray(X)))


@functools.singledispatch
def as_dense(X):
    """``X`` as a dense array: numpy/JAX arrays (and tracers) unchanged, JAX sparse kinds by
    ``todense()``, scipy ones by ``toarray()``."""
    return X


@as_dense.register(sparse.BCOO)
@as_dense.register(sparse.BCSR)
@as_dense.register(CSRMatrix)
def _(X):
    return X.todense()


@as_dense.register(sp.spmatrix)
def _(X):
    return X.toarray()


if hasattr(sp, "sparray"):                        # scipy >= 1.8 sparse arrays
    as_dense.register(sp.sparray)(lambda X: X.toarray())


@functools.singledispatch
def matmul(X, W):
    """``X W`` for a dense ``X`` at full precision (``Precision.HIGHEST``)."""
    return jnp.matmul(X, W, precision=lax.Precision.HIGHEST)


@matmul.register(sparse.BCOO)
@matmul.register(sparse.BCSR)
@matmul.register(CSRMatrix)
def _(X, W):
    return X @ W  # precision: a sparse operand


def scale_columns(X, s):
    """``X diag(s)`` of any kind of ``X`` (scipy and JAX sparse kinds stay sparse)."""
    if sp.issparse(X):
        return sp.csr_matrix(X.multiply(np.asarray(s)[None, :]))
    if isinstance(X, CSRMatrix):
        return to_csr(to_scipy(X).multiply(np.asarray(s)[None, :]), X.data.dtype)
    if isinstance(X, sparse.BCSR):
        X = X.to_bcoo()
    return X * jnp.asarray(s, X.dtype)
