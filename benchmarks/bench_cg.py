"""Conjugate-gradient benchmark (issue: large-scale CG). Prints JSON lines.

matvec  the sparse products behind CG on (a)'s matrix: scipy CSR, rankjax
        CSRMatrix (BCSR kernel), BCOO, gather + segment_sum; 1 and 8 vectors;
(a)     100,000 x 50,000 sparse, 75 nonzeros per row, 5,000 queries, graded
        labels, normalized query graph: a numpy/scipy CG and rankjax's CG run
        the same fixed number of iterations in this process; per-iteration time
        for 1 λ and per λ with 8 λ vmapped, and their ratios to scipy;
(b)     RCV1-CCAT-shaped bipartite global ranking, 781,265 x 47,152, 75
        nonzeros per row: early stopping (λ = 0) on an 8,149-row validation set,
        pairwise error; total time including compilation (use --rows on a CPU);
(c)     1,000,000 sampled positive-negative preference pairs of (b)'s rows,
        early stopping on the same validation set.

tikhonov  (b)'s data, Tikhonov over 8 λ (one vmapped run to tol 1e-5) for
        comparison with early stopping (seed 004 Table 1).

    python benchmarks/bench_cg.py [--only matvec,a,b,tikhonov] [--rows 781265] [--dtype float32]

(b) and (c) run together.
"""
import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from lib.timing import emit, median_s, time_jitted

jax.config.update("jax_enable_x64", True)
import rankjax as rj  # noqa: E402
from jax.experimental import sparse as jsparse  # noqa: E402




def data_a(dtype):
    d = rj.make_sparse_ranking_data(100_000, 50_000, nnz_per_row=75, num_queries=5_000, levels=5,
                                    dtype=dtype)
    return d.X, d.y.astype(dtype), d.qid


def bench_matvec(dtype):
    X, _, _ = data_a(dtype)
    m, n = X.shape
    rng = np.random.default_rng(0)
    v, V = rng.standard_normal(n).astype(dtype), rng.standard_normal((n, 8)).astype(dtype)
    u, U = rng.standard_normal(m).astype(dtype), rng.standard_normal((m, 8)).astype(dtype)
    XT = X.T.tocsr()
    shape = f"{m}x{n}, nnz={X.nnz}"
    for k, (a, b) in ((1, (v, u)), (8, (V, U))):
        emit(name="matvec scipy CSR", dtype=dtype, shape=shape, vectors=k,
             Xv_ms=1e3 * median_s(lambda: X @ a), XTu_ms=1e3 * median_s(lambda: XT @ b))
    C = rj.to_csr(X)
    B = rj.io.to_bcoo(X, dtype)
    R, RT = (jsparse.BCSR.from_scipy_sparse(A) for A in (X, XT))
    rows = jnp.asarray(np.repeat(np.arange(m), np.diff(X.indptr)).astype(np.int32))
    cols, data = jnp.asarray(X.indices), jnp.asarray(X.data)

    def seg(u, ids_in, ids_out, size):
        gathered = u[ids_in] * (data if u.ndim == 1 else data[:, None])
        return jax.ops.segment_sum(gathered, ids_out, size, indices_are_sorted=ids_out is rows)

    mv = jax.jit(lambda M, a: M @ a)
    rmv = jax.jit(lambda M, a: M.T @ a)
    smv = jax.jit(lambda a: seg(a, cols, rows, m))
    srmv = jax.jit(lambda b: seg(b, rows, cols, n))
    for k, (a, b) in ((1, (v, u)), (8, (V, U))):
        a, b = jnp.asarray(a), jnp.asarray(b)
        emit(name="matvec rankjax CSRMatrix", dtype=dtype, shape=shape, vectors=k,
             Xv_ms=1e3 * median_s(lambda: mv(C, a)), XTu_ms=1e3 * median_s(lambda: rmv(C, b)))
        emit(name="matvec BCSR kernel (of X and of X^T)", dtype=dtype, shape=shape, vectors=k,
             Xv_ms=1e3 * median_s(lambda: mv(R, a)), XTu_ms=1e3 * median_s(lambda: mv(RT, b)))
        emit(name="matvec BCOO", dtype=dtype, shape=shape, vectors=k,
             Xv_ms=1e3 * median_s(lambda: mv(B, a)), XTu_ms=1e3 * median_s(lambda: rmv(B, b)))
        emit(name="matvec gather+segment_sum (one COO)", dtype=dtype, shape=shape, vectors=k,
             Xv_ms=1e3 * median_s(lambda: smv(a)), XTu_ms=1e3 * median_s(lambda: srmv(b)))
        if k == 8:                              # vmap over 8 vectors: one product
            vb, ub = jnp.asarray(V.T), jnp.asarray(U.T)
            vmv = jax.jit(jax.vmap(lambda M, x: M @ x, in_axes=(None, 0)))
            vrmv = jax.jit(jax.vmap(lambda M, x: M.T @ x, in_axes=(None, 0)))
            emit(name="matvec CSRMatrix under vmap (custom_vmap)", dtype=dtype, shape=shape,
                 vectors=8, Xv_ms=1e3 * median_s(lambda: vmv(C, vb)),
                 XTu_ms=1e3 * median_s(lambda: vrmv(C, ub)))


def numpy_cg(X, XT, seg, counts, b, lam, iters):
    """The same CG as rankjax's (x0 = 0, no recomputation inside ``iters`` < 50)
    with scipy CSR products and numpy segment means (normalized query graph)."""
    def op(v):
        u = X @ v
        u = u - (np.bincount(seg, u, len(counts)) / counts)[seg]
        return XT @ u + lam * v
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rr = r @ r
    for _ in range(iters):
        Ap = op(p)
        alpha = rr / (p @ Ap)
        x += alpha * p
        r -= alpha * Ap
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


def bench_a(dtype, iters=40):
    X, y, qid = data_a(dtype)
    m, n = X.shape
    g = rj.query_graph(qid)
    seg = np.asarray(g.seg)
    counts = np.bincount(seg).astype(dtype)
    XT = X.T.tocsr()
    u = y - (np.bincount(seg, y) / counts)[seg]
    b = (XT @ u).astype(dtype)
    lams = np.logspace(-2, 1, 8).astype(dtype)
    t0 = time.perf_counter()
    numpy_cg(X, XT, seg, counts, b, lams[0], iters)
    scipy_s = time.perf_counter() - t0
    shape = f"{m}x{n}, nnz={X.nnz}, {g.num_queries} queries"
    emit(name="CG (a) numpy/scipy", dtype=dtype, shape=shape, lambdas=1, iterations=iters,
         run_s=scipy_s, per_iteration_ms=1e3 * scipy_s / iters)
    C = rj.to_csr(X)
    yj = jnp.asarray(y)
    solve = lambda C, y, g, lam: (
        rj.fit(rj.Problem(C, y, g), rj.CG(tol=0.0, max_iter=iters, recompute_every=0), lam=lam).value.weights
    )
    c1, r1, x1 = time_jitted(solve, C, yj, g, jnp.asarray(lams[0]))
    # the same iterates (rounding differences grow with the iterations on this
    # ill-conditioned system, as CG loses orthogonality; compare after 5)
    x5 = numpy_cg(X, XT, seg, counts, b, lams[0], 5)
    j5 = rj.fit(
        rj.Problem(C, yj, g), rj.CG(tol=0.0, max_iter=5, recompute_every=0), lam=lams[0]
    ).value.weights
    emit(name="CG (a) rankjax", dtype=dtype, shape=shape, lambdas=1, iterations=iters,
         compile_s=c1, run_s=r1, per_iteration_ms=1e3 * r1 / iters,
         ratio_to_scipy=r1 / scipy_s,
         max_rel_dev_vs_numpy_5_iterations=float(np.max(np.abs(np.asarray(j5) - x5)) /
                                                 np.max(np.abs(x5))))
    batched = lambda C, y, g, lams: jax.vmap(lambda l: solve(C, y, g, l))(lams)  # noqa
    c8, r8, _ = time_jitted(batched, C, yj, g, jnp.asarray(lams))
    emit(name="CG (a) rankjax, 8 lambdas vmapped", dtype=dtype, shape=shape, lambdas=8,
         iterations=iters, compile_s=c8, run_s=r8, per_iteration_ms=1e3 * r8 / iters,
         per_iteration_per_lambda_ms=1e3 * r8 / iters / 8,
         per_lambda_ratio_to_scipy=r8 / 8 / scipy_s)


def data_b(rows, dtype):
    train = rj.make_sparse_ranking_data(rows, 47_152, nnz_per_row=75, seed=0, dtype=dtype)
    valid = rj.make_sparse_ranking_data(8_149, 47_152, nnz_per_row=75, seed=1, dtype=dtype)
    return train, valid


def early_stopping(name, C, y, g, Cv, yv, gv, shape, dtype, **extra):
    def train(C, y, g, Cv, yv, gv):
        return rj.fit(rj.Problem(C, y, g, valid=rj.Problem(*(Cv, yv, gv))),
                      rj.CG(tol=1e-05, max_iter=500, patience=10), lam=0.0)
    c, r, out = time_jitted(train, C, y, g, Cv, yv, gv)
    st = out.stats
    best, iters = int(st["best_iteration"]), int(st["iterations"])
    emit(name=name, dtype=dtype, shape=shape, compile_s=c, run_s=r, total_with_compile_s=c + r,
         iterations=iters, best_iteration=best, result=rj.RESULTS(int(out.result)).name,
         per_iteration_ms=1e3 * r / max(iters, 1),
         valid_pairwise_error_best=float(st["valid_history"][best]),
         valid_pairwise_error_at_0=float(st["valid_history"][0]),
         valid_history=np.round(np.asarray(st["valid_history"])[:iters + 1], 6).tolist(), **extra)
    return out


def tikhonov_grid(C, y, g, Cv, yv, gv, shape, dtype, lams=np.logspace(0, 7, 8)):
    """Seed 004 Table 1's alternative: Tikhonov for a λ grid (8 λ in one vmapped
    run, each to tol 1e-5), then selection on the validation set. The validation
    error of every iterate is recorded (patience off: each λ runs to convergence),
    so the line also carries the error-against-iterations curve of every λ."""
    def grid(C, y, g, Cv, yv, gv, lams):
        return jax.vmap(lambda lam: rj.fit(rj.Problem(C, y, g, valid=rj.Problem(*(Cv, yv, gv))),
                                           rj.CG(tol=1e-05, max_iter=500, patience=501), lam=lam))(lams)
    c, r, out = time_jitted(grid, C, y, g, Cv, yv, gv, jnp.asarray(lams, dtype), repeats=1)
    its = [int(i) for i in out.stats["iterations"]]
    hist = np.asarray(out.stats["valid_history"])
    errs = [float(h[i]) for h, i in zip(hist, its)]          # the converged (Tikhonov) iterate
    emit(name="CG (b) Tikhonov grid, 8 lambdas vmapped", dtype=dtype, shape=shape,
         compile_s=c, run_s=r, iterations=its, lambdas=[float(x) for x in lams],
         valid_pairwise_error=errs, best_lambda=float(lams[int(np.argmin(errs))]),
         valid_pairwise_error_best=min(errs),
         valid_histories=[np.round(h[:i + 1], 6).tolist() for h, i in zip(hist, its)])


def bench_b(rows, dtype, pairs=1_000_000, tikhonov=False):
    train, valid = data_b(rows, dtype)
    C, Cv = rj.to_csr(train.X), rj.to_csr(valid.X)
    y, yv = jnp.asarray(train.y, dtype), jnp.asarray(valid.y, dtype)
    g, gv = rj.global_graph(rows), rj.global_graph(valid.X.shape[0])
    shape = f"{rows}x{train.X.shape[1]}, nnz={train.X.nnz}, valid {valid.X.shape[0]} rows"
    early_stopping("CG (b) RCV1-shaped bipartite, early stopping", C, y, g, Cv, yv, gv, shape,
                   dtype)
    if tikhonov:
        tikhonov_grid(C, y, g, Cv, yv, gv, shape, dtype)
    rng = np.random.default_rng(2)
    pos, neg = np.flatnonzero(train.y > 0), np.flatnonzero(train.y == 0)
    ge = rj.preference_graph(rng.choice(pos, pairs), rng.choice(neg, pairs), num_rows=rows)
    early_stopping("CG (c) 1M sampled preference pairs, early stopping", C, None, ge, Cv, yv,
                   gv, shape + f", {pairs} pairs", dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="matvec,a,b,tikhonov")
    ap.add_argument("--rows", type=int, default=None,
                    help="rows of (b)/(c); default 781265 on GPU, 200000 on CPU")
    ap.add_argument("--dtype", default=None, help="float32/float64; default: both for a, "
                                                   "float32 for b/c")
    args = ap.parse_args()
    only = set(args.only.split(","))
    gpu = jax.devices()[0].platform != "cpu"
    dtypes = [args.dtype] if args.dtype else ["float64", "float32"]
    if "matvec" in only:
        for dt in dtypes:
            bench_matvec(dt)
    if "a" in only:
        for dt in dtypes:
            bench_a(dt)
    if only & {"b", "c", "tikhonov"}:
        rows = args.rows or (781_265 if gpu else 200_000)
        bench_b(rows, args.dtype or "float32", tikhonov="tikhonov" in only)


if __name__ == "__main__":
    main()
