"""A sparse matrix for matrix-free solvers: CSR of ``X`` and of ``X^T`` (SPEC §4).

``X @ v`` and ``X.T @ u`` are products by rows, so the transpose is stored too
(``BCSR`` has no transposed product): twice the memory of one CSR plus a row id
per nonzero. Kernel choice, measured by ``benchmarks/bench_cg.py`` on the 2-core
CPU (100,000 × 50,000, 7.5 M nonzeros): several columns go to the CSR kernel of
``jax.experimental.sparse.BCSR`` (8 columns: 21–28 ms, against 165–380 ms for
BCOO or gather + ``segment_sum``); a single float32 vector goes to gather +
``segment_sum`` over the sorted row ids (19–32 ms against 120 ms for the BCSR
kernel and 78–95 ms for BCOO); a single float64 vector to BCSR (40 ms against
47–59 ms). On GPU every product uses BCSR. Under ``vmap`` the product is routed
to **one** sparse-times-dense-matrix product
(``jax.custom_batching.custom_vmap``): a CG over 8 λ or 8 outputs costs one
CSR pass per iteration, not 8.

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
      data, indices, indptr, rows: CSR of ``X`` (``[nse]``, ``[nse]`` int32,
        ``[m+1]`` int32) and the row of every nonzero (``[nse]`` int32, sorted).
      t_data, t_indices, t_indptr, t_rows: the same for ``X^T``.
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
        out = _csr_mm(self.data.astype(dtype), self.indices, self.indptr, self.rows,
                      V.astype(dtype))
        return out[:, 0] if v.ndim == 1 else out


def _plain_mm(data, indices, indptr, rows, V):
    m = indptr.shape[0] - 1
    if V.shape[1] == 1 and V.dtype == jnp.float32 and jax.default_backend() == "cpu":
        return jax.ops.segment_sum(data[:, None] * V[indices], rows, m, indices_are_sorted=True)
    return sparse.BCSR((data, indices, indptr), shape=(m, V.shape[0])) @ V


@jax.custom_batching.custom_vmap
def _csr_mm(data, indices, indptr, rows, V):
    return _plain_mm(data, indices, indptr, rows, V)


@_csr_mm.def_vmap
def _csr_mm_vmap(axis_size, in_batched, data, indices, indptr, rows, V):
    if any(in_batched[:4]):         # a batch of matrices: one product per matrix
        args = [a if b else jnp.broadcast_to(a, (axis_size,) + a.shape)
                for a, b in zip((data, indices, indptr, rows, V), in_batched)]
        return lax.map(lambda a: _csr_mm(*a), tuple(args)), True
    if not in_batched[4]:
        return _csr_mm(data, indices, indptr, rows, V), False
    b, n, k = V.shape                # [b, n, k] -> one [n, b k] product
    W = jnp.moveaxis(V, 0, 1).reshape(n, b * k)
    out = _csr_mm(data, indices, indptr, rows, W)
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
    def parts(A):
        rows = np.repeat(np.arange(A.shape[0], dtype=np.int32), np.diff(A.indptr))
        return [jnp.asarray(np.asarray(a, t)) for a, t in
                ((A.data, dtype), (A.indices, np.int32), (A.indptr, np.int32), (rows, np.int32))]

    return CSRMatrix(*parts(C), *parts(T), tuple(int(s) for s in C.shape))
