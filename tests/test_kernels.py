"""``_kernels``: every kernel against its formula written out per pair (float64)."""
import jax
import jax.numpy as jnp
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


def test_gaussian_kernel_in_float32_keeps_small_distances_far_from_zero():
    """Features offset by 10^3: the expanded distance |a|^2 + |b|^2 - 2 a.b cancelled in
    float32; shifted by the mean row it keeps them, and k(x, x) is exactly 1."""
    import jax
    jax.config.update("jax_enable_x64", False)
    try:
        rng = np.random.default_rng(0)
        X = (1000 + 0.01 * rng.standard_normal((50, 4))).astype(np.float32)
        K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(100.0), X))
        Xd = X.astype(np.float64)
        ref = np.exp(-100.0 * ((Xd[:, None, :] - Xd[None, :, :]) ** 2).sum(-1))
        assert np.abs(K - ref).max() < 1e-4
        assert np.all(np.diag(K) == 1)
        Kb = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(100.0), X, block_size=16))
        assert np.all(np.diag(Kb) == 1) and np.abs(Kb - ref).max() < 1e-4
    finally:
        jax.config.update("jax_enable_x64", True)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["gaussian_kernel"] = [
        (lambda d: rj.gaussian_kernel(-1.0), E(ValueError, "gamma")),
        (lambda d: rj.gaussian_kernel(np.ones(2)), E(TypeError, "gamma must be a scalar")),
    ]
BAD_INPUT["polynomial_kernel"] = [
        (lambda d: rj.polynomial_kernel(0), E(ValueError, "degree")),
        (lambda d: rj.polynomial_kernel(2, coef0=np.nan), E(ValueError, "coef0")),
    ]
BAD_INPUT["linear_kernel"] = [
        (lambda d: rj.kernel_matrix(rj.linear_kernel(), d.X, d.X[:, :2]), E(ValueError, "equal n")),
    ]
BAD_INPUT["kernel_matrix"] = [
        (lambda d: rj.kernel_matrix("rbf", d.X), E(TypeError, "kernel")),
        (lambda d: rj.kernel_matrix(d.kern, d.X, block_size=0), E(ValueError, "block_size")),
        (lambda d: rj.kernel_matrix(d.kern, np.where(d.X > 0, np.nan, d.X)), E(ValueError, "NaN")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)


def test_a_concrete_gamma_of_any_scalar_type_shares_one_program():
    """γ given as a Python float, a NumPy float64 or float32 scalar is the same weakly
    typed leaf: a second γ reuses the first's compiled program (a NumPy scalar compiled
    its own copy of every hold-out)."""
    f = jax.jit(lambda k, X: rj.kernel_matrix(k, X))
    X = jnp.ones((3, 2))
    for g in (0.5, np.float64(0.25), np.float32(2.0), 3):
        k = rj.gaussian_kernel(g)
        assert type(k.gamma) is float and k.gamma == float(g)
        f(k, X)
    p = rj.polynomial_kernel(2, np.float64(0.5), np.float32(1.0))
    assert type(p.gamma) is float and type(p.coef0) is float
    assert f._cache_size() == 1
    traced = jax.jit(lambda g: rj.gaussian_kernel(g).gamma)(0.5)        # a traced γ stays traced
    assert float(traced) == 0.5
