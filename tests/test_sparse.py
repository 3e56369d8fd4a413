"""``_sparse``: the kinds of X agree with the dense matrix, and CSRMatrix's products with
numpy's (float64)."""
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse

import rankjax as rj
from rankjax._core.sparse import (as_dense, count_nonzero, is_bcoo, is_csr, is_scipy_sparse, is_sparse,
                             matmul, sparse_values)


@pytest.fixture
def D():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((7, 5))
    A[rng.random((7, 5)) < 0.6] = 0.0
    return A


def kinds(D):
    return {"numpy": D, "jax": jnp.asarray(D), "scipy": sp.csr_matrix(D),
            "bcoo": sparse.BCOO.fromdense(jnp.asarray(D)),
            "bcsr": sparse.BCSR.fromdense(jnp.asarray(D)), "csr": rj.to_csr(D)}


def test_every_kind_is_dense_and_multiplies_alike(D):
    V = np.random.default_rng(3).standard_normal((5, 2))
    for name, X in kinds(D).items():
        np.testing.assert_allclose(np.asarray(as_dense(X)), D, err_msg=name)
        if name != "scipy":
            np.testing.assert_allclose(np.asarray(matmul(X, jnp.asarray(V))), D @ V, atol=1e-12,
                                       err_msg=name)
        assert is_sparse(X) == (name in ("scipy", "bcoo", "bcsr", "csr")), name
        assert is_scipy_sparse(X) == (name == "scipy") and is_bcoo(X) == (name == "bcoo")
        assert is_csr(X) == (name == "csr")
        assert count_nonzero(X) == np.count_nonzero(D), name
        assert (sparse_values(X) is X) == (not is_sparse(X))


def test_csr_products_and_transpose(D):
    A = rj.to_csr(D)
    v, u = np.arange(5.0), np.arange(7.0)
    np.testing.assert_allclose(A @ jnp.asarray(v), D @ v, atol=1e-12)
    np.testing.assert_allclose(A.T @ jnp.asarray(u), D.T @ u, atol=1e-12)
    np.testing.assert_allclose(A @ jnp.ones((5, 3)), D @ np.ones((5, 3)), atol=1e-12)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["to_csr"] = [
        (lambda d: rj.to_csr(np.ones((2, 2, 2))), E(ValueError, "2-D")),
        (lambda d: rj.to_csr(d.nanv[:, None]), E(ValueError, "NaN")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
