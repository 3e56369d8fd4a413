import dataclasses
import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import rankjax as rj
from rankjax.solvers.cg_loop import cg_loop
from rankjax.graphs.build import laplacian_sqrt_mv
import reference as ref
from conftest import random_qids


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def problem(rng, m=60, n=8):
    qid = random_qids(rng, m)
    X = rng.standard_normal((m, n))
    y = rng.integers(0, 3, m).astype(float)
    return X, y, qid


def edges(rng, m, l):
    head = rng.integers(0, m, l)
    tail = (head + rng.integers(1, m, l)) % m
    return head, tail


def graphs(rng, qid, y, m, ties=True):
    head, tail = edges(rng, m, 3 * m)
    out = {"normalized": (rj.query_graph(qid), y),
           "unnormalized": (rj.query_graph(qid, normalized=False), y),
           "weighted": (rj.query_graph(qid, query_weights="pairs"), y),
           "global": (rj.global_graph(m), y), "rls": (rj.identity_graph(m), y)}
    for cost in ("magnitude", "unit", "inverse"):
        out["edges-" + cost] = (rj.preference_graph(head, tail, rng.random(3 * m) + .5, num_rows=m,
                                                    cost=cost), None)
    if ties:
        out["ties"] = (rj.query_graph(qid, y, exclude_ties=True), y)
    return out


@pytest.mark.parametrize("fmt", ["dense", "bcoo", "csr"])
def test_primal_cg_equals_closed_form_for_every_operator(rng, fmt):
    X, y, qid = problem(rng)
    Xs = {"dense": X, "bcoo": rj.io.to_bcoo(X), "csr": rj.to_csr(X)}[fmt]
    for name, (g, yy) in graphs(rng, qid, y, len(y)).items():
        r = rj.fit(rj.Problem(Xs, yy, g), rj.CG(tol=1e-10, max_iter=500), lam=0.5)
        assert bool(r.stats["converged"]), name
        assert (
            rel(r.value.weights, rj.fit(rj.Problem(X, yy, g), rj.Primal(), lam=0.5).value.weights) < 1e-6
        ), name


def test_dual_cg_equals_closed_form_for_every_operator(rng):
    X, y, qid = problem(rng, m=50)
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.2), X))
    for name, (g, yy) in graphs(rng, qid, y, len(y), ties=False).items():
        r = rj.fit(rj.Problem(K, yy, g, precomputed=True), rj.CG(tol=1e-11, max_iter=2000), lam=0.3)
        assert bool(r.stats["converged"]), name
        want = rj.fit(rj.Problem(K, yy, g, precomputed=True), rj.Dual(), lam=0.3).value.coef
        assert rel(r.value.coef, want) < 1e-6, name
    # and against L from enumerated pairs: A = (L K + λ I)^{-1} L y
    L = ref.laplacian_from_pairs(len(y), ref.query_pairs(qid))
    A = np.linalg.solve(L @ K + 0.3 * np.eye(len(y)), L @ y)
    assert (
        rel(
            rj.fit(
                rj.Problem(K, y, rj.query_graph(qid), precomputed=True), rj.CG(tol=1e-11), lam=0.3
            ).value.coef,
            A,
        )
        < 1e-6
    )


def test_first_iterates_equal_scipy(rng):
    X, y, qid = problem(rng)
    g = rj.query_graph(qid)
    L = np.asarray(rj.laplacian_dense(g))
    A = X.T @ L @ X + 0.3 * np.eye(X.shape[1])
    b = X.T @ L @ y
    K = X @ X.T + 1.0
    S = np.asarray(laplacian_sqrt_mv(g, np.eye(len(y))))
    Ad, bd = S @ K @ S + 0.3 * np.eye(len(y)), S @ y
    for k in (1, 2, 3):
        expect, _ = spla.cg(A, b, maxiter=k, rtol=1e-300, atol=0)
        r = rj.fit(rj.Problem(X, y, g), rj.CG(tol=0.0, max_iter=k), lam=0.3)
        assert int(r.stats["iterations"]) == k and int(r.result) == rj.RESULTS.max_iterations_reached
        assert rel(r.value.weights, expect) < 1e-10
        expect, _ = spla.cg(Ad, bd, maxiter=k, rtol=1e-300, atol=0)
        assert (
            rel(
                rj.fit(rj.Problem(K, y, g, precomputed=True), rj.CG(tol=0.0, max_iter=k), lam=0.3).value.coef,
                S @ expect,
            )
            < 1e-10
        )


def noisy_problem(rng, m=120, n=30):
    X, _, qid = problem(rng, m=m, n=n)
    w_true = rng.standard_normal(n)
    y = X @ w_true + 3 * rng.standard_normal(m)               # noisy: semi-convergence
    Xv = rng.standard_normal((80, n))
    yv = np.round(Xv @ w_true)
    qv = np.repeat(np.arange(8), 10)
    return X, y, qid, Xv, yv, qv


@pytest.mark.parametrize("lam,metric", [(0.0, "pairwise_error"), (0.0, "loss"),
                                        (1.0, "pairwise_error"), (0.0, "ndcg")])
def test_early_stopping_returns_the_rerun_iterate(rng, lam, metric):
    """Early stopping (λ = 0) and hybrid (λ > 0): the returned w is the rerun with
    best_iteration fixed steps, and its score is the history minimum; the
    history equals the criterion recomputed by brute force on every rerun."""
    X, y, qid, Xv, yv, qv = noisy_problem(rng)
    g, gv = rj.query_graph(qid), rj.query_graph(qv)
    crit = functools.partial(rj.ndcg, k=5, ties="stable") if metric == "ndcg" else metric
    r = rj.fit(rj.Problem(X, y, g, valid=rj.Problem(Xv, yv, gv)),
               rj.CG(tol=1e-12, max_iter=200, metric=crit, patience=5), lam=lam)
    hist = np.asarray(r.stats["valid_history"])
    best, its = int(r.stats["best_iteration"]), int(r.stats["iterations"])
    assert np.nanmin(hist) == hist[best]
    assert int(r.result) == rj.RESULTS.early_stopped and its == best + 5
    assert np.all(np.isnan(hist[its + 1:])) and not np.any(np.isnan(hist[:its + 1]))
    Lv = ref.laplacian_from_pairs(len(yv), ref.query_pairs(qv))
    for k in sorted({0, 1, best, its}):
        w = (
            rj.fit(rj.Problem(X, y, g), rj.CG(tol=0.0, max_iter=max(k, 1)), lam=lam).value.weights
            if k
            else np.zeros(30)
        )
        f = Xv @ np.asarray(w)
        brute = {"pairwise_error": lambda: ref.pairwise_error(f, yv, qv),
                 "loss": lambda: (yv - f) @ Lv @ (yv - f),
                 "ndcg": lambda: -ref.ndcg(f, yv, qv, k=5, ties="stable")}[metric]()
        assert abs(hist[k] - brute) < 1e-9 * max(1, abs(brute)), k
        if k == best:           # the same iterate; a GPU's atomic segment sums may reorder
            np.testing.assert_allclose(r.value.weights, w, rtol=1e-12, atol=1e-12)


def test_early_stopping_dual_and_edges(rng):
    X, y, qid, Xv, yv, qv = noisy_problem(rng)
    K, Kv = X @ X.T, Xv @ X.T
    g, gv = rj.query_graph(qid), rj.query_graph(qv)
    r = rj.fit(rj.Problem(K, y, g, valid=rj.Problem(Kv, yv, gv, precomputed=True), precomputed=True),
               rj.CG(tol=1e-12, patience=4), lam=0.0)
    best = int(r.stats["best_iteration"])
    assert best > 0 and int(r.result) == rj.RESULTS.early_stopped
    rerun = rj.fit(rj.Problem(K, y, g, precomputed=True), rj.CG(tol=0.0, max_iter=best), lam=0.0)
    np.testing.assert_allclose(r.value.coef, rerun.value.coef, rtol=0, atol=0)
    # preference-edge training and validation
    h, t = edges(rng, 120, 400)
    h, t = np.where(y[h] > y[t], h, t), np.where(y[h] > y[t], t, h)
    hv, tv = np.nonzero(yv[:, None] > yv[None, :])
    ge = rj.preference_graph(h, t, y[h] - y[t], num_rows=120)
    gve = rj.preference_graph(hv, tv, num_rows=80)
    r = rj.fit(rj.Problem(X, None, ge, valid=rj.Problem(Xv, None, gve)), rj.CG(tol=1e-12, patience=3),
               lam=0.0)
    f = Xv @ np.asarray(r.value.weights)
    assert abs(float(r.stats["valid_history"][r.stats["best_iteration"]]) - np.mean(f[hv] <= f[tv])) < 1e-12


def test_vmap_over_eight_lambdas_and_over_outputs(rng):
    X, y, qid = problem(rng)
    g = rj.query_graph(qid)
    lams = jnp.asarray(np.logspace(-2, 2, 8))
    for Xs in (X, rj.to_csr(X)):
        f = jax.jit(lambda lam, X: rj.fit(rj.Problem(X, y, g), rj.CG(tol=1e-09, max_iter=300), lam=lam))
        batched = jax.vmap(f, in_axes=(0, None))(lams, Xs)
        for i, lam in enumerate(lams):
            one = f(lam, Xs)
            np.testing.assert_allclose(batched.value.weights[i], one.value.weights, rtol=1e-10, atol=1e-12)
            assert int(batched.stats["iterations"][i]) == int(one.stats["iterations"])
            np.testing.assert_allclose(batched.stats["residual_history"][i], one.stats["residual_history"],
                                       rtol=1e-8, atol=1e-14)
    K = X @ X.T
    fd = jax.vmap(lambda lam: rj.fit(rj.Problem(K, y, g, precomputed=True), rj.CG(tol=1e-09), lam=lam))(lams)
    for i, lam in enumerate(lams):
        np.testing.assert_allclose(fd.value.coef[i], rj.fit(rj.Problem(K, y, g, precomputed=True),
                                                      rj.CG(tol=1e-09), lam=lam).value.coef,
                                   rtol=1e-10, atol=1e-12)
    Y = np.stack([y, -y, y ** 2], 1)
    cols = jax.vmap(
        lambda yy: rj.fit(rj.Problem(rj.to_csr(X), yy, g), rj.CG(tol=1e-10), lam=1.0).value.weights,
        in_axes=1,
        out_axes=1,
    )(Y)
    assert rel(cols, rj.fit(rj.Problem(X, Y, g), rj.Primal(), lam=1.0).value.weights) < 1e-6


def test_preference_edges_never_materialise_large_arrays():
    """m = 100,000 rows, n = 20,000 sparse features, l = 1,000,000 edges: an [l, n]
    array would need 80 GB and an [m, m] one 40 GB in float32 (this machine has
    24 GB). XLA's own accounting of the compiled run: under 100 MB of temporaries."""
    rng = np.random.default_rng(0)
    m, n, l = 100_000, 20_000, 1_000_000
    cols = rng.integers(0, n, (m, 10))                      # 10 nonzeros per row
    X = sp.csr_matrix((rng.random(m * 10, dtype=np.float32), cols.ravel(),
                       np.arange(0, m * 10 + 1, 10)), shape=(m, n))
    head, tail = edges(rng, m, l)
    g = rj.preference_graph(head, tail, num_rows=m)
    C = rj.to_csr(X, jnp.float32)
    run = jax.jit(lambda C, g: rj.fit(rj.Problem(C, None, g), rj.CG(tol=0.001, max_iter=3), lam=1.0))
    mem = run.lower(C, g).compile().memory_analysis()
    assert mem.temp_size_in_bytes + mem.output_size_in_bytes < 100e6
    r = run(C, g)
    assert r.value.weights.dtype == jnp.float32
    assert np.all(np.isfinite(np.asarray(r.value.weights))) and int(r.stats["iterations"]) >= 1


def test_csr_matrix_products_transposes_and_vmap(rng):
    A = sp.random(30, 20, density=0.2, random_state=1, format="coo")
    D = A.toarray()
    for src in (A, A.tocsr(), D, rj.io.to_bcoo(A),
                jax.experimental.sparse.BCSR.fromdense(jnp.asarray(D))):
        C = rj.to_csr(src)
        np.testing.assert_allclose(C.todense(), D, atol=1e-15)
        v, u, V = rng.standard_normal(20), rng.standard_normal(30), rng.standard_normal((20, 3))
        np.testing.assert_allclose(C @ v, D @ v, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(C.T @ u, D.T @ u, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(C @ V, D @ V, rtol=1e-12, atol=1e-14)
    Vb = rng.standard_normal((4, 5, 20))                        # nested vmap
    out = jax.vmap(jax.vmap(lambda v: C @ v))(Vb)
    np.testing.assert_allclose(out, Vb @ D.T, rtol=1e-12, atol=1e-14)
    Cs = jax.tree.map(lambda a: jnp.stack([a, a]), C)           # vmap over matrices
    out = jax.vmap(lambda M, v: M @ v)(Cs, Vb[:2, 0])
    np.testing.assert_allclose(out, Vb[:2, 0] @ D.T, rtol=1e-12, atol=1e-14)
    assert rj.to_csr(A, jnp.float32).dtype == jnp.float32
    with pytest.raises(ValueError, match="multiply"):
        C @ np.ones(3)


def test_cg_input_errors(rng):
    X, y, qid = problem(rng)
    g = rj.query_graph(qid)
    with pytest.raises(ValueError, match="lam"):
        rj.fit(rj.Problem(X, y, g), rj.CG(), lam=-1.0)
    with pytest.raises(ValueError, match="vmap"):
        rj.fit(rj.Problem(X, np.stack([y, y], 1), g), rj.CG(), lam=1.0)
    with pytest.raises(ValueError, match="valid.X must have 8 columns"):
        rj.fit(rj.Problem(X, y, g, valid=rj.Problem(X[:, :3], y, g)), rj.CG(), lam=0.0)
    with pytest.raises(ValueError, match="metric"):
        rj.fit(rj.Problem(X, y, g, valid=rj.Problem(X, y, g)), rj.CG(metric='ndcg'), lam=0.0)
    with pytest.raises(TypeError, match="valid"):
        rj.fit(rj.Problem(X, y, g, valid=(X, y)), rj.CG(), lam=0.0)
    with pytest.raises(ValueError, match="y has 5 rows"):
        rj.fit(rj.Problem(X, y, g, valid=rj.Problem(X, y[:5], g)), rj.CG(), lam=0.0)
    with pytest.raises(ValueError, match="tie exclusion"):
        rj.fit(rj.Problem(X @ X.T, y, rj.query_graph(qid, y, exclude_ties=True), precomputed=True), rj.CG(),
               lam=0.0)
    with pytest.raises(ValueError, match="K must be"):
        rj.fit(rj.Problem(X, y, g, precomputed=True), rj.CG(), lam=0.0)
    with pytest.raises(ValueError, match="NaN"):
        rj.fit(rj.Problem(np.full((60, 60), np.nan), y, g, precomputed=True), rj.CG(), lam=0.0)


def test_the_loop_of_a_zero_right_hand_side_is_zero_at_once():
    r = cg_loop(lambda v: v, jnp.zeros(3), rj.CG(), 0.0, None, None)
    assert np.all(np.asarray(r.weights) == 0) and bool(r.converged) and int(r.iterations) == 0


def test_progress_lines_come_from_the_loop_through_the_logger(caplog):
    d = rj.make_ranking_data(8, num_features=4, seed=0)
    g = rj.query_graph(d.qid)
    with caplog.at_level(logging.INFO, logger="rankjax"):
        quiet = rj.fit(rj.Problem(d.X, d.y, g), rj.CG(tol=1e-10), lam=1.0)
        assert caplog.records == []
        loud = rj.fit(rj.Problem(d.X, d.y, g), dataclasses.replace(rj.CG(tol=1e-10), verbose=2), lam=1.0)
        jax.effects_barrier()
    lines = [r.getMessage() for r in caplog.records]
    n = int(loud.stats["iterations"])
    assert len(lines) == n // 2 and lines[0].startswith("CG iteration 2: relative")
    np.testing.assert_allclose(loud.value.weights, quiet.value.weights, rtol=1e-12, atol=1e-14)


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["CG"] = [
    (lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.CG(), lam=-1.0), E(ValueError, "lam")),
    (lambda d: rj.fit(rj.Problem(d.X, d.y, d.g), rj.CG(x0=np.ones(d.n + 1)), lam=0.0), E(ValueError, "x0")),
    (
        lambda d: rj.fit(
            rj.Problem(d.X, d.y, d.g, valid=rj.Problem(d.X, d.y, d.g)), rj.CG(metric="nope"), lam=1.0
        ),
        E(ValueError, "metric"),
    ),
    (
        lambda d: rj.fit(rj.Problem(d.X, d.y, d.g, valid=rj.Problem(d.X[:, :2], d.y, d.g)), rj.CG(), lam=1.0),
        E(ValueError, "valid.X"),
    ),
    (
        lambda d: rj.fit(rj.Problem(d.K, d.y, d.g, precomputed=True), rj.CG(), lam=np.nan),
        E(ValueError, "lam"),
    ),
    (
        lambda d: rj.fit(rj.Problem(d.K, d.y, d.g, precomputed=True), rj.CG(x0=np.ones(2)), lam=0.0),
        E(ValueError, "x0"),
    ),
    (lambda d: rj.CG(tol=-1.0), E(ValueError, "tol")),
    (lambda d: rj.CG(x0=np.r_[np.nan, 1.0]), E(ValueError, "x0")),
    (lambda d: rj.CG(metric_kwargs=[("k", 3)]), E(TypeError, "metric_kwargs")),
    (lambda d: rj.CG(metric=rj.ndcg, metric_kwargs={"kk": 3}), E(TypeError, "kk")),
]
test_bad_and_degenerate_input = surface_test(BAD_INPUT)
