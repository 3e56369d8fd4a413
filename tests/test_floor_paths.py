"""The fast forms of issue 31 against brute force: the Gram chosen by shape, the root-free
query-graph normal equations (and their fallback when features are far from 0), the
batched block inversion of the fold systems, the Cholesky solve, the OpenBLAS setting and
the speed guard's comparison."""
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax.graphs.graph import GraphBase
from rankjax._core.linalg import WIDE_GRAM, gram
from rankjax.solvers.ridge import primal_system, ridge_solve
from rankjax.solvers.small_solve import spd_inverse, symmetric_solve

from reference import query_pairs, laplacian_from_pairs


@pytest.mark.parametrize("n", [7, WIDE_GRAM + 3])
def test_gram_of_tall_and_wide_blocks_is_zt_z(n):
    Z = np.random.default_rng(n).standard_normal((40 if n < WIDE_GRAM else 30, n))
    np.testing.assert_allclose(jax.jit(gram)(jnp.asarray(Z)), Z.T @ Z, rtol=1e-12, atol=1e-10)


def _brute(X, y, qid, **kw):
    L = laplacian_from_pairs(len(y), query_pairs(qid, y, **kw))
    return X.T @ L @ X, X.T @ L @ y


@pytest.mark.parametrize("kw", [dict(), dict(normalized=False), dict(exclude_ties=True),
                                dict(query_weights="pairs")], ids=str)
def test_query_normal_equations_equal_the_pair_laplacian(kw):
    d = rj.make_ranking_data(9, num_features=5, seed=2)
    X, y, qid = np.asarray(d.X, np.float64), np.asarray(d.y, np.float64), np.asarray(d.qid)
    g = rj.query_graph(qid, y if kw.get("exclude_ties") else None, **kw)
    G, b = jax.jit(primal_system)(jnp.asarray(X), jnp.asarray(y), g)
    G_ref, b_ref = _brute(X, y, qid, **kw)
    np.testing.assert_allclose(G, G_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(b, b_ref, rtol=1e-10, atol=1e-10)


def test_global_graph_and_multi_output_normal_equations():
    rng = np.random.default_rng(3)
    X, Y = rng.random((50, 4)), rng.standard_normal((50, 2))
    g = rj.global_graph(50)
    G, B = primal_system(jnp.asarray(X), jnp.asarray(Y), g)
    L = 50 * np.eye(50) - np.ones((50, 50))
    np.testing.assert_allclose(G, X.T @ L @ X, rtol=1e-10)
    np.testing.assert_allclose(B, X.T @ L @ Y, rtol=1e-10, atol=1e-10)


def test_root_form_is_kept_where_the_subtraction_would_cancel():
    """Features far from 0 within their queries: the root-free form would lose most of
    float32's mantissa; the result stays as accurate as the root form."""
    jax.config.update("jax_enable_x64", False)
    try:
        rng = np.random.default_rng(4)
        m, n = 4000, 6
        qid = np.repeat(np.arange(40), 100)
        X = (rng.standard_normal((m, n)) + 1e4).astype(np.float32)
        y = rng.standard_normal(m).astype(np.float32)
        g = rj.query_graph(qid)
        G, b = jax.jit(lambda X, y, g: g.normal_equations(X, y))(jnp.asarray(X), jnp.asarray(y), g)
        G_root, _ = jax.jit(lambda X, y, g: GraphBase.normal_equations(g, X, y))(
            jnp.asarray(X), jnp.asarray(y), g)
        Xd = X.astype(np.float64)
        Z = Xd - np.repeat(Xd.reshape(40, 100, n).mean(1), 100, axis=0)
        ref = Z.T @ Z
        err = np.linalg.norm(np.asarray(G, np.float64) - ref) / np.linalg.norm(ref)
        err_root = np.linalg.norm(np.asarray(G_root, np.float64) - ref) / np.linalg.norm(ref)
        assert err <= 2 * err_root + 1e-6, (err, err_root)
        assert err < 1e-4
    finally:
        jax.config.update("jax_enable_x64", True)


def test_root_free_form_is_accurate_in_float32_on_letor_like_features():
    jax.config.update("jax_enable_x64", False)
    try:
        rng = np.random.default_rng(5)
        m, n = 20_000, 8
        qid = np.sort(rng.integers(0, 200, m))
        X = rng.random((m, n), dtype=np.float32)
        y = (X @ rng.standard_normal(n).astype(np.float32)
             + rng.standard_normal(m).astype(np.float32))
        for g, q in ((rj.query_graph(qid), qid), (rj.global_graph(m), np.zeros(m, int))):
            w = np.asarray(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=1.0).value.weights, np.float64)
            Xd, yd = X.astype(np.float64), y.astype(np.float64)
            _, inv, cnt = np.unique(q, return_inverse=True, return_counts=True)
            mean = lambda v: (np.bincount(inv, v) / cnt)[inv]     # noqa: E731
            Z = Xd - np.stack([mean(Xd[:, j]) for j in range(n)], 1)
            s = 1.0 if q is qid else float(m)                      # global: unnormalized
            w_ref = np.linalg.solve(s * Z.T @ Z + np.eye(n), s * Z.T @ (yd - mean(yd)))
            assert np.linalg.norm(w - w_ref) / np.linalg.norm(w_ref) < 1e-4
    finally:
        jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("p", [1, 2, 15, 16, 17, 40, 100])
def test_spd_inverse_of_a_batch_equals_numpy(p):
    rng = np.random.default_rng(p)
    A = rng.standard_normal((3, p, p))
    M = A @ np.swapaxes(A, 1, 2) + 0.1 * np.eye(p)
    np.testing.assert_allclose(spd_inverse(jnp.asarray(M)), np.linalg.inv(M), rtol=1e-8, atol=1e-8)


def test_symmetric_solve_matrix_rhs_and_gradient():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((20, 20))
    M, R = A @ A.T + np.eye(20), rng.standard_normal((20, 3))
    np.testing.assert_allclose(symmetric_solve(jnp.asarray(M), jnp.asarray(R)),
                               np.linalg.solve(M, R), rtol=1e-10)
    f = lambda M: jnp.sum(symmetric_solve(M, jnp.asarray(R[:, 0])))                 # noqa: E731
    h = 1e-6
    E = np.zeros((20, 20))
    E[2, 5] = E[5, 2] = h
    fd = (f(jnp.asarray(M + E)) - f(jnp.asarray(M - E))) / (2 * h)
    g = jax.grad(f)(jnp.asarray(M))
    np.testing.assert_allclose(g[2, 5] + g[5, 2], fd, rtol=1e-6)


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("k", [None, 3])
def test_symmetric_solve_of_a_batch_equals_numpy_and_its_gradient(big, k):
    """``M [L, P, P]`` with vectors ``[L, P]`` or blocks ``[L, P, k]`` (every λ's fold system
    at once), by the block inversion, and by the accelerator's batched factorisation
    (``big``: values only, jitted; eager batched LAPACK gradients can deadlock a 2-thread
    CPU, docs/design.md); the block inversion's gradient by finite differences."""
    from rankjax._core.backend import forced_paths
    rng = np.random.default_rng(7)
    A = rng.standard_normal((5, 12, 12))
    M = A @ np.swapaxes(A, 1, 2) + np.eye(12)
    R = rng.standard_normal((5, 12) + (() if k is None else (k,)))
    want = np.stack([np.linalg.solve(M[i], R[i]) for i in range(5)])
    if big:
        with forced_paths("accelerator"):
            got = jax.jit(symmetric_solve)(jnp.asarray(M), jnp.asarray(R))
        np.testing.assert_allclose(got, want, rtol=1e-9)
        return
    np.testing.assert_allclose(symmetric_solve(jnp.asarray(M), jnp.asarray(R)), want, rtol=1e-9)
    f = lambda M: jnp.sum(symmetric_solve(M, jnp.asarray(R)) ** 2)                 # noqa: E731
    E = np.zeros_like(M)
    E[3, 2, 5] = E[3, 5, 2] = 1e-6
    fd = (f(jnp.asarray(M + E)) - f(jnp.asarray(M - E))) / 2e-6
    g = jax.grad(f)(jnp.asarray(M))
    np.testing.assert_allclose(g[3, 2, 5] + g[3, 5, 2], fd, rtol=1e-5)


@pytest.mark.parametrize("shape", [(6,), (6, 2)])
def test_ridge_solve_vector_and_matrix_rhs(shape):
    rng = np.random.default_rng(7)
    Z = rng.standard_normal((10, 6))
    b = rng.standard_normal(shape)
    x = ridge_solve(jnp.asarray(Z.T @ Z), jnp.asarray(b), 0.5)
    assert x.shape == shape
    np.testing.assert_allclose(x, np.linalg.solve(Z.T @ Z + 0.5 * np.eye(6), b), rtol=1e-10)


def test_openblas_threads_sleep_soon_unless_the_caller_chose():
    from rankjax.runtime.xla import _configure
    env = {}
    _configure(env)
    assert env["OPENBLAS_THREAD_TIMEOUT"] == "20"
    mine = {"OPENBLAS_THREAD_TIMEOUT": "28"}
    _configure(mine)
    assert mine["OPENBLAS_THREAD_TIMEOUT"] == "28"


def test_overflow_check_uses_the_remembered_maximum():
    jax.config.update("jax_enable_x64", False)
    try:
        X = jnp.full((10, 2), 3e18, jnp.float32)
        with pytest.raises(ValueError, match="overflow"):
            rj.fit(
                rj.Problem(X, np.arange(10.0), rj.query_graph(np.zeros(10, int))), rj.Primal(), lam=1.0
            ).value
    finally:
        jax.config.update("jax_enable_x64", True)


def test_guard_fails_naming_the_slowed_path():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
    guard = pytest.importorskip("guard")
    best = {"base": {"primal/float64/10x2/query": 1.5, "ndcg/float32/10": 2.0},
            "head": {"primal/float64/10x2/query": 2.0, "ndcg/float32/10": 2.5, "new/float32/1": 1.0}}
    failures, lines = guard.compare(best, 1.3)
    assert failures == ["primal/float64/10x2/query"]          # 1.33x; ndcg 1.25x passes
    assert any("not on the base" in ln for ln in lines)


def test_guard_base_is_a_commit_of_this_history():
    """The guard compares trees measured in one run, never stored figures of some machine:
    its base is a commit that a fresh clone has."""
    import subprocess
    root = pathlib.Path(__file__).resolve().parents[1]
    sha = (root / "benchmarks" / "guard_base").read_text().strip()
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{sha}^{{commit}}"], check=True)
    assert not (root / "benchmarks" / "baseline.json").exists()


def test_unsigned_features_are_not_taken_for_overflowing_ones():
    jax.config.update("jax_enable_x64", False)
    try:
        X = np.array([[5, 7], [9, 6], [8, 8], [6, 9]], np.uint64)
        w = rj.fit(
            rj.Problem(X, np.arange(4.0), rj.query_graph(np.zeros(4, int))), rj.Primal(), lam=1.0
        ).value.weights
        Xd = X.astype(np.float64) - X.mean(0)
        np.testing.assert_allclose(w, np.linalg.solve(Xd.T @ Xd + np.eye(2), Xd.T @ (np.arange(4) - 1.5)),
                                   rtol=1e-5)
    finally:
        jax.config.update("jax_enable_x64", True)
