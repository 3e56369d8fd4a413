r"""The one precision rule of the library's products.

Every matrix product in :mod:`rankjax` states its precision: ``HIGHEST`` (:data:`HI`),
through :func:`mm` or an explicit ``precision=`` argument. On an H100 a float32 product at
default precision runs in TF32 (10 mantissa bits, about 1e-3 relative error) and on a TPU
in bfloat16 passes: CG and TRON would stall above their tolerance, and the cancellations
of the hold-outs and the GP posterior (:math:`K_d - V^T V`) would lose every digit. On the CPU
``HIGHEST`` costs nothing. ``tests/test_structure.py`` fails on a bare ``@``, ``dot``,
``matmul``, ``einsum`` or ``dot_general`` anywhere in the package, except on lines marked
``# precision: <reason>`` (a product whose accuracy does not matter, or a sparse one).

Example:
  >>> import numpy as np
  >>> print(mm(np.array([[1., 2.]]), np.array([3., 4.])))
  [11.]
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

HI = lax.Precision.HIGHEST


def mm(a, b):
    """``a @ b`` at ``HIGHEST`` precision for dense arrays; a sparse operand (BCOO,
    :class:`~rankjax.CSRMatrix`) keeps its own product (exact per entry)."""
    if _is_array(a) and _is_array(b):
        return jnp.matmul(a, b, precision=HI)
    return a @ b                                       # precision: a sparse operand


def _is_array(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray))


def tdot(Z, t):
    r""":math:`Z^T t` as a contraction over rows (faster than ``Z.T @ t`` on CPU when XLA
    fuses the producer of ``Z`` into a transposed matrix-vector product)."""
    return jnp.einsum("mn,m...->n...", Z, t, precision=HI)


def mv(A, v):
    """``A @ v``; for a vector ``v`` as a product and a row sum, which XLA:CPU fuses with
    its producers: its matrix-vector ``dot`` is a kernel of its own to generate (16 of
    the 97 in the linear hold-out's program, 38 % of its code before these sums)."""
    if v.ndim == 1 and A.ndim == 2:
        return jnp.sum(A * v, axis=1)
    return jnp.matmul(A, v, precision=HI)
