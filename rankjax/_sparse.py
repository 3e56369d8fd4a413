"""A sparse matrix for matrix-free solvers: CSR of ``X`` and of ``X^T`` (SPEC §4).

``X @ v`` and ``X.T @ u`` both run the CSR-by-rows kernel of
``jax.experimental.sparse.BCSR`` (which has no transposed product, so the
transpose is stored too: twice the memory of one CSR). Under ``vmap`` the
product is routed to **one** sparse-times-dense-matrix product
(``jax.custom_batching.custom_vmap``): a CG over 8 λ or 8 outputs costs one
CSR pass per iteration, not 8. Measured on the 2-core CPU (100,000 × 50,000,
7.5 M nonzeros, float64, ``benchmarks/bench_cg.py``): one vector 30 ms (BCOO
69 ms, gather + ``segment_sum`` 42 ms), eight vectors at once 15–17 ms.

Products are not differentiable (``custom_vmap`` has no autodiff rule); the
solvers that use them do not need gradients.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from jax import lax
from jax.experimental import sparse

__all__ = ["CSRMatrix", "to_csr"]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class CSRMatrix:
    """``[m, n]`` sparse matrix stored as CSR of ``X`` and CSR of ``X^T``.

    Build with :func:`to_csr`. Supports ``X @ v`` / ``X @ V`` (``[n]`` or
    ``[n, k]``), ``X.T`` (free: swaps the two CSRs), ``.todense()``, ``.shape``,
    ``.dtype``, ``.nse``, ``.astype``. A pytree: pass it to ``jit``-ed functions
    as an argument.

    Attributes:
      data, indices, indptr: CSR of ``X`` (``[nse]``, ``[nse]`` int32, ``[m+1]`` int32).
      t_data, t_indices, t_indptr: CSR of ``X^T``.
      shape: ``(m, n)`` (static).
    """

    data: jax.Array
    indices: jax.Array
    indptr: jax.Array
    t_data: jax.Array
    t_indices: jax.Array
    t_indptr: jax.Array
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
        return CSRMatrix(self.t_data, self.t_indices, self.t_indptr, self.data, self.indices,
                         self.indptr, (self.shape[1], self.shape[0]))

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
        out = _csr_mm(self.data.astype(dtype), self.indices, self.indptr, V.astype(dtype))
        return out[:, 0] if v.ndim == 1 else out


def _plain_mm(data, indices, indptr, V):
    return sparse.BCSR((data, indices, indptr), shape=(indptr.shape[0] - 1, V.shape[0])) @ V


@jax.custom_batching.custom_vmap
def _csr_mm(data, indices, indptr, V):
    return _plain_mm(data, indices, indptr, V)


@_csr_mm.def_vmap
def _csr_mm_vmap(axis_size, in_batched, data, indices, indptr, V):
    if any(in_batched[:3]):         # a batch of matrices: one product per matrix
        args = [a if b else jnp.broadcast_to(a, (axis_size,) + a.shape)
                for a, b in zip((data, indices, indptr, V), in_batched)]
        return lax.map(lambda a: _csr_mm(*a), tuple(args)), True
    if not in_batched[3]:
        return _csr_mm(data, indices, indptr, V), False
    b, n, k = V.shape                # [b, n, k] -> one [n, b k] product
    W = jnp.moveaxis(V, 0, 1).reshape(n, b * k)
    out = _csr_mm(data, indices, indptr, W)
    return jnp.moveaxis(out.reshape(out.shape[0], b, k), 1, 0), True


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
    if isinstance(X, (sparse.BCOO, sparse.BCSR)):
        if isinstance(X.data, jax.core.Tracer):
            raise TypeError("to_csr needs concrete values; call it outside jit")
        if X.n_batch or X.n_dense:
            raise ValueError("to_csr takes an unbatched 2-D sparse matrix")
        d = np.asarray(X.data)
        if isinstance(X, sparse.BCOO):
            i = np.asarray(X.indices)
            X = sp.coo_matrix((d, (i[:, 0], i[:, 1])), shape=X.shape)
        else:
            X = sp.csr_matrix((d, np.asarray(X.indices), np.asarray(X.indptr)), shape=X.shape)
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
    C = sp.csr_matrix(X)
    C.sum_duplicates()
    if dtype is None:
        dtype = C.dtype if np.issubdtype(C.dtype, np.floating) else jnp.result_type(float)
    if not np.issubdtype(np.dtype(dtype), np.floating):
        raise TypeError(f"dtype must be floating, got {dtype}")
    T = C.T.tocsr()
    T.sort_indices()
    arr = lambda a, t: jnp.asarray(np.asarray(a, t))  # noqa: E731
    return CSRMatrix(arr(C.data, dtype), arr(C.indices, np.int32), arr(C.indptr, np.int32),
                     arr(T.data, dtype), arr(T.indices, np.int32), arr(T.indptr, np.int32),
                     tuple(int(s) for s in C.shape))
