"""``_ridge``: the shared ridge core against numpy's dense solves (float64)."""
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax._ridge import (RESOLVE_RTOL, dual_system, eigh_path, eigh_psd, lam_floor,
                            primal_system, psd_root, ridge_solve, symmetric_solve)


@pytest.fixture
def prob():
    d = rj.make_ranking_data(6, num_features=4, seed=4)
    X, y, qid = np.asarray(d.X, np.float64), np.asarray(d.y, np.float64), np.asarray(d.qid)
    return X, y, rj.query_graph(qid)


def test_primal_system_is_xt_l_x(prob):
    X, y, g = prob
    L = np.asarray(rj.laplacian_dense(g))
    G, b = primal_system(jnp.asarray(X), jnp.asarray(y), g)
    np.testing.assert_allclose(G, X.T @ L @ X, atol=1e-10)
    np.testing.assert_allclose(b, X.T @ L @ y, atol=1e-10)


def test_dual_system_is_s_k_s_with_s_squared_l(prob):
    X, y, g = prob
    K = X @ X.T
    L = np.asarray(rj.laplacian_dense(g))
    sys = dual_system(jnp.asarray(K), jnp.asarray(y), g)
    S = np.asarray(sys.root.apply(jnp.eye(K.shape[0])))
    np.testing.assert_allclose(S @ S, L, atol=1e-10)
    np.testing.assert_allclose(sys.G, S @ K @ S, atol=1e-10)


def test_solves_and_paths_agree_with_numpy():
    rng = np.random.default_rng(5)
    Z = rng.standard_normal((12, 6))
    G, b = Z.T @ Z, rng.standard_normal(6)
    lams = np.array([1e-3, 0.1, 10.0])
    want = np.stack([np.linalg.solve(G + l * np.eye(6), b) for l in lams])
    np.testing.assert_allclose(eigh_path(eigh_psd(jnp.asarray(G)), jnp.asarray(b), jnp.asarray(lams)),
                               want, rtol=1e-8)
    np.testing.assert_allclose(ridge_solve(jnp.asarray(G), jnp.asarray(b), 0.1), want[1], rtol=1e-8)


def test_symmetric_solve_and_psd_root():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((9, 9))
    M = A + A.T + 20 * np.eye(9)                 # symmetric, nonsingular
    r = rng.standard_normal((9, 2))
    np.testing.assert_allclose(symmetric_solve(jnp.asarray(M), jnp.asarray(r)),
                               np.linalg.solve(M, r), rtol=1e-9)
    P = A[:, :5] @ A[:, :5].T                    # PSD of rank 5
    R, Rp = (np.asarray(a) for a in psd_root(jnp.asarray(P)))
    np.testing.assert_allclose(R @ R, P, atol=1e-8)
    np.testing.assert_allclose(R, R.T, atol=1e-12)
    np.testing.assert_allclose(Rp, np.linalg.pinv(R, rcond=1e-10), atol=1e-6)


def test_lam_floor_is_the_documented_formula():
    for kind, tol in RESOLVE_RTOL.items():
        assert float(lam_floor(2.0, np.float32, kind)) == pytest.approx(
            tol * np.finfo(np.float32).eps * 2.0)
