"""``_kernels``: every kernel against its formula written out per pair (float64)."""
import numpy as np
import pytest

import rankjax as rj


@pytest.fixture
def XY():
    rng = np.random.default_rng(1)
    return rng.standard_normal((9, 3)), rng.standard_normal((5, 3))


def brute(f, A, B):
    return np.array([[f(a, b) for b in B] for a in A])


@pytest.mark.parametrize("kernel, f", [
    (rj.linear_kernel(), lambda a, b: a @ b),
    (rj.gaussian_kernel(0.7), lambda a, b: np.exp(-0.7 * np.sum((a - b) ** 2))),
    (rj.polynomial_kernel(3, gamma=0.5, coef0=2.0), lambda a, b: (0.5 * a @ b + 2.0) ** 3),
], ids=["linear", "gaussian", "polynomial"])
def test_kernel_matrix_is_the_pairwise_formula(XY, kernel, f):
    A, B = XY
    np.testing.assert_allclose(rj.kernel_matrix(kernel, A, B), brute(f, A, B), rtol=1e-12, atol=1e-12)
    K = np.asarray(rj.kernel_matrix(kernel, A))
    np.testing.assert_allclose(K, brute(f, A, A), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    # blockwise evaluation gives the same matrix
    np.testing.assert_allclose(rj.kernel_matrix(kernel, A, B, block_size=2), brute(f, A, B),
                               rtol=1e-12, atol=1e-12)


def test_kernel_parameters_are_checked():
    with pytest.raises(ValueError, match="gamma"):
        rj.gaussian_kernel(-1.0)
    with pytest.raises((TypeError, ValueError), match="degree"):
        rj.polynomial_kernel(0)
