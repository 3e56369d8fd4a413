"""``_ridge``: the shared ridge core against numpy's dense solves (float64)."""
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax._core.linalg import eigh_psd, psd_root
from rankjax.solvers.floors import HOLDOUT_SQRT_EPS, RESOLVE_RTOL, lam_floor
from rankjax.solvers.ridge import dual_system, eigh_path, primal_system, ridge_solve
from rankjax.solvers.small_solve import symmetric_solve


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
    for dtype in (np.float32, np.float64):
        eps = np.finfo(dtype).eps
        for kind, tol in RESOLVE_RTOL.items():
            if kind == "path" and dtype == np.float32:      # float32 refines its path
                tol = RESOLVE_RTOL["refined"]
            assert float(lam_floor(2.0, dtype, kind)) == pytest.approx(tol * eps * 2.0)
        assert float(lam_floor(2.0, dtype, "holdout")) == pytest.approx(
            HOLDOUT_SQRT_EPS * np.sqrt(eps) * 2.0)


@pytest.mark.parametrize("grid", [True, False])
@pytest.mark.parametrize("normalized", [True, False])
def test_reduced_dual_system_is_s_k_s_on_the_range_of_s(rng, normalized, grid, monkeypatch):
    """The ``k x k`` system of :mod:`rankjax.solvers.reduced` (one reflection per query) lifted back:
    orthonormal ``[m, k]`` vectors that rebuild ``S K S`` exactly, the nonzero spectrum of the
    full ``eigh``, and ``k = m - q``: one null direction per query of positive weight and
    several rows, every row of a one-row query or of a query of weight 0 (unsorted ids)."""
    from rankjax.solvers.reduced import range_rows, reduced_eigh
    qid = np.array([3, 3, 0, 7, 3, 0, 0, 5, 5, 5, 5, 1, 7, 2, 2, 2])      # 0: weight 0
    w = np.array([0.0, 1.0, 2.0, 1.0, 0.5, 3.0])                       # by sorted id
    g = rj.query_graph(qid, normalized=normalized, query_weights=w)
    X = rng.standard_normal((qid.size, 3))
    K = rj.kernel_matrix(rj.gaussian_kernel(0.4), jnp.asarray(X))
    G = np.asarray(dual_system(K, jnp.asarray(rng.standard_normal(qid.size)), g).G)
    from rankjax.solvers import reduced as _reduced
    monkeypatch.setattr(_reduced, "GRID_SLOTS", 3 if grid else 0)     # the lift's two sums
    rows = range_rows(g, K.dtype)
    assert (rows.members is not None) == grid
    # 16 rows; null: query 0 (weight 0, 3 rows), query 1 (one row), one each of 2, 3, 5, 7
    assert rows.keep.shape[0] == 16 - 3 - 1 - 4
    eig, low, high = reduced_eigh(jnp.asarray(G), rows, g)
    U, vals = np.asarray(eig.vectors), np.asarray(eig.values)
    tol = 50 * np.finfo(float).eps * np.abs(G).max()
    assert np.abs(U.T @ U - np.eye(U.shape[1])).max() < 1e-12
    assert np.abs(U @ np.diag(vals) @ U.T - G).max() < tol
    full = np.linalg.eigvalsh(G)
    assert np.allclose(np.sort(vals), np.sort(full)[-vals.size:], atol=tol)
    assert np.abs(np.sort(full)[:-vals.size]).max() < tol               # what was left out is 0
    assert float(low) == pytest.approx(np.sort(full)[-vals.size], abs=tol)


def _by_lane_case(g, lams, batched_rule):
    """A λ grid whose lanes below ``floor`` take their own factor: ``by_lane`` (its batching
    rule and tangent) or the plain ``cond`` loop it replaces."""
    import jax
    from jax import lax
    from rankjax.solvers.ridge import by_lane, cholesky_solve
    A = jnp.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 3.0]]) * g
    b = jnp.array([1.0, 2.0, -1.0]) * (1 + g)
    shared = jax.vmap(lambda lam: 2 * cholesky_solve(A, b, lam) + 1)(lams)  # marks shared lanes
    direct = lambda lam: (cholesky_solve(A, b, lam), jnp.arange(3, dtype=jnp.int32))  # noqa: E731
    both = (shared, jnp.zeros((lams.shape[0], 3), jnp.int32))
    floor = 0.5 * g
    if batched_rule:
        return by_lane(lams, both, direct, floor)[0]
    return lax.map(lambda a: lax.cond(a[0] >= floor, lambda: a[1], lambda: direct(a[0])),
                   (lams, both))[0]


def test_by_lane_under_vmap_jit_and_grad_equals_the_plain_loop():
    """The batching rule (a λ factored only when some problem of the batch needs it) and the
    tangent (a select of every lane's factor) give the plain ``cond`` loop's values and
    derivatives, to rounding, over γ, over λ grids, nested, and under ``grad`` of ``vmap``."""
    import jax
    with jax.enable_x64(True):
        lams = jnp.array([0.1, 1.0, 10.0])
        gs = jnp.array([0.01, 1.0, 30.0])        # below every floor, some, none
        f = lambda g, ls, r: _by_lane_case(g, ls, r)                           # noqa: E731
        s = lambda g, r: f(g, lams, r).sum()                                   # noqa: E731
        cases = [lambda r: f(1.0, lams, r),
                 lambda r: jax.vmap(f, (0, None, None))(gs, lams, r),
                 lambda r: jax.jit(jax.vmap(f, (0, None, None)), static_argnums=2)(gs, lams, r),
                 lambda r: jax.vmap(f, (None, 0, None))(1.0, jnp.stack([lams, lams / 100]), r),
                 lambda r: jax.vmap(jax.vmap(f, (0, None, None)), (0, None, None))(
                     jnp.stack([gs, 2 * gs]), lams, r),
                 lambda r: jax.grad(s)(1.0, r),
                 lambda r: jax.vmap(jax.grad(s), (0, None))(gs, r),
                 lambda r: jax.grad(lambda g: jax.vmap(f, (0, None, None))(g, lams, r).sum())(gs),
                 lambda r: jax.jacfwd(s)(1.0, r)]
        for case in cases:
            fast, plain = case(True), case(False)
            np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-12)
        mixed = jax.vmap(f, (0, None, None))(gs, lams, True)
        assert np.any(mixed[0] != mixed[2])      # lanes of both kinds were taken
