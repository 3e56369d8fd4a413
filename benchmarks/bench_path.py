"""Regularization-path benchmark (issue: paths). Prints JSON lines.

(a) primal path, 31 λ, on synthetic data shaped like MSLR-WEB30K Fold1
    (2,270,296 rows, 136 features, 18,919 queries, labels 0-4), float32 and
    float64, against 31 separate single-λ fits;
(b) dual Gaussian path, 31 λ, m = 2,000 and 4,000 (CPU) / also 10,000 (GPU);
(c) sparse approximation, m = 100,000, |R| = 1,000.

    python benchmarks/bench_path.py [--only a|b|c] [--scale 0.1]
"""
import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from lib.timing import emit, lambda_lanes, time_jitted

jax.config.update("jax_enable_x64", True)          # float64 available; each case sets its dtype
import rankjax as rj  # noqa: E402

LAMS = np.logspace(-3, 6, 31)


def mslr_like(m, n, Q, seed=0):
    rng = np.random.default_rng(seed)
    qid = np.sort(rng.integers(0, Q, m))
    X = rng.random((m, n), dtype=np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    s = X @ w + rng.standard_normal(m).astype(np.float32)
    y = np.digitize(s, np.quantile(s, [0.5, 0.75, 0.9, 0.97])).astype(np.float32)
    return X, y, qid


def seconds(fn, *args):
    out = jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0, out


def bench_primal(scale):
    m, n, Q = int(2_270_296 * scale), 136, max(1, int(18_919 * scale))
    X32, y32, qid = mslr_like(m, n, Q)
    g = rj.query_graph(qid)
    lams = jnp.asarray(LAMS)
    nv = m // 10
    ref = {}
    for dtype in (jnp.float32, jnp.float64):
        X = jax.device_put(X32.astype(dtype))
        y = jax.device_put(y32.astype(dtype))
        Xv = X[:nv]
        path = lambda X, y, g, lams, Xv: rj.path(rj.Problem(X, y, g, valid=rj.Problem(Xv, y[:Xv.shape[0]])),
                                                 rj.Primal(), lams=lams).value  # noqa
        c, r, out = time_jitted(path, X, y, g, lams.astype(dtype), Xv)
        single = jax.jit(lambda X, y, g, lam: rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights)
        jax.block_until_ready(single(X, y, g, lams[0].astype(dtype)))       # compile
        t0 = time.perf_counter()
        W = [jax.block_until_ready(single(X, y, g, lam.astype(dtype))) for lam in lams]
        t_single = time.perf_counter() - t0
        ref[dtype] = (np.asarray(out.valid_scores, np.float64), np.stack(W).astype(np.float64))
        dev_single = float(np.max(np.abs(np.asarray(out.weights, np.float64) - ref[dtype][1]))
                           / np.max(np.abs(ref[dtype][1])))
        emit(name="primal path (a) MSLR-shaped", dtype=jnp.dtype(dtype).name,
             shape=f"{m}x{n}, {Q} queries, {len(LAMS)} lambdas, valid {nv} rows",
             compile_s=c, run_s=r, single_fits_31_s=t_single, speedup=t_single / r,
             max_rel_dev_path_vs_single=dev_single)
    v32, v64 = ref[jnp.float32][0], ref[jnp.float64][0]
    emit(name="primal path (a) float32 vs float64 validation scores", shape=f"{nv}x{len(LAMS)}",
         max_rel_dev=float(np.max(np.abs(v32 - v64)) / np.max(np.abs(v64))),
         max_rel_dev_per_lambda_median=float(np.median(np.max(np.abs(v32 - v64), axis=1)
                                                        / np.max(np.abs(v64), axis=1))))


def bench_dual(sizes, dtype=jnp.float32):
    for m in sizes:
        rng = np.random.default_rng(1)
        X = jnp.asarray(rng.standard_normal((m, 20)), dtype)
        qid = np.repeat(np.arange(m // 20), 20)
        y = jnp.asarray(rng.integers(0, 5, m), dtype)
        g = rj.query_graph(qid)
        K = jax.jit(lambda X: rj.kernel_matrix(rj.gaussian_kernel(0.05), X))(X)
        lams = jnp.asarray(LAMS, dtype)
        c, r, out = time_jitted(lambda K, y, g, lams: rj.path(rj.Problem(K, y, g, precomputed=True),
                                                              rj.Dual(), lams=lams).value,
                                K, y, g, lams)
        single = jax.jit(lambda K, y, g, lam: rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(),
                                                     lam=lam).value.coef)
        jax.block_until_ready(single(K, y, g, lams[0]))
        t0 = time.perf_counter()
        A = [jax.block_until_ready(single(K, y, g, lam)) for lam in lams]
        t_single = time.perf_counter() - t0
        F = np.stack([np.asarray(K @ a, np.float64) for a in A])
        P = np.asarray(out.train_scores, np.float64)
        ok, lanes = lambda_lanes(P, LAMS)
        dev = float(np.max(np.abs(P[ok] - F[ok])) / np.max(np.abs(F[ok])))
        emit(name="dual gaussian path (b)", dtype=jnp.dtype(dtype).name,
             shape=f"m={m}, {m // 20} queries, {len(LAMS)} lambdas", compile_s=c, run_s=r,
             single_fits_31_s=t_single, speedup=t_single / r, max_rel_dev_path_vs_single=dev,
             **lanes)


def bench_sparse(m=100_000, r_basis=1_000, dtype=jnp.float32):
    rng = np.random.default_rng(2)
    X = jnp.asarray(rng.standard_normal((m, 30)), dtype)
    qid = np.repeat(np.arange(m // 50), 50)
    y = jnp.asarray(rng.integers(0, 5, m), dtype)
    g = rj.query_graph(qid)
    basis = np.sort(rng.choice(m, r_basis, replace=False))     # host indices, checked
    lams = jnp.asarray(LAMS, dtype)
    fn = lambda X, y, g, lams: rj.path(  # noqa: E731
        rj.Problem(X, y, g), rj.Nystrom(rj.gaussian_kernel(0.02), basis), lams=lams).value
    c, r, out = time_jitted(fn, X, y, g, lams)
    emit(name="sparse approximation path (c)", dtype=jnp.dtype(dtype).name,
         shape=f"m={m}, |R|={r_basis}, {len(LAMS)} lambdas", compile_s=c, run_s=r,
         finite=bool(jnp.all(jnp.isfinite(out.coef))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", choices=["a", "b", "c"])
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the MSLR-shaped rows")
    p.add_argument("--dual-sizes", type=int, nargs="+")
    a = p.parse_args()
    gpu = jax.devices()[0].platform == "gpu"
    if a.only in (None, "a"):
        bench_primal(a.scale)
    if a.only in (None, "b"):
        bench_dual(a.dual_sizes or ([2000, 5000, 10000] if gpu else [2000, 4000]))
    if a.only in (None, "c"):
        bench_sparse()


if __name__ == "__main__":
    main()
