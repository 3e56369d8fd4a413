"""Core operations at scale: query-Laplacian matvec, the primal normal equations and
sorting-based metrics. Prints JSON lines (see benchmarks/lib/timing.py).

    python benchmarks/bench_core.py [--rows 2270296] [--float64]
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np

from lib.timing import emit, time_jitted
from rankjax.solvers.ridge import primal_system


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=2_270_296)
    p.add_argument("--features", type=int, default=136)
    p.add_argument("--queries", type=int, default=18_919)
    p.add_argument("--float64", action="store_true")
    a = p.parse_args()
    if a.float64:
        jax.config.update("jax_enable_x64", True)
    import rankjax as rj
    dtype = jnp.float64 if a.float64 else jnp.float32
    rng = np.random.default_rng(0)
    m, n, Q = a.rows, a.features, a.queries
    qid = np.sort(rng.integers(0, Q, m))
    X = jax.device_put(rng.random((m, n), dtype=np.float32).astype(dtype))
    y = jax.device_put(rng.integers(0, 5, m).astype(dtype))
    g = rj.query_graph(qid)
    shape = f"{m}x{n}, {g.num_queries} queries"

    c, r, _ = time_jitted(rj.laplacian_mv, g, X)
    emit(name="laplacian_mv [m, n]", dtype=str(np.dtype(dtype)), shape=shape, compile_s=c, run_s=r)
    c, r, (G, b) = time_jitted(lambda X, y, g: primal_system(X, y, g), X, y, g)
    Xs = np.asarray(X[:200_000], np.float64); qs = qid[:200_000]
    means = np.zeros((Q, n)); np.add.at(means, qs, Xs)
    cnt = np.bincount(qs, minlength=Q)[:, None]
    Z = Xs - (means / np.maximum(cnt, 1))[qs]          # normalized graph: S = I - 1 1^T / n_c
    G_ref = Z.T @ Z
    Gs, _ = jax.jit(lambda X, y, g: primal_system(X, y, g))(X[:200_000], y[:200_000],
                                                              rj.query_graph(qs))
    dev = float(np.max(np.abs(np.asarray(Gs, np.float64) - G_ref)) / np.max(np.abs(G_ref)))
    emit(name="primal_system X^T L X", dtype=str(np.dtype(dtype)), shape=shape, compile_s=c,
         run_s=r, max_rel_dev_vs_float64_numpy_on_200k_rows=dev)

    f = X[:, 0] + 0.1 * X[:, 1]
    seg = jnp.asarray(g.seg)
    c, r, val = time_jitted(lambda f, y, s: rj.ndcg(f, y, s, num_queries=g.num_queries, k=10),
                            f, y, seg)
    emit(name="ndcg@10 per query", dtype=str(np.dtype(dtype)), shape=shape, compile_s=c, run_s=r,
         value=float(val))
    c, r, val = time_jitted(lambda f, y, s: rj.pairwise_error(f, y, s, num_queries=g.num_queries),
                            f, y, seg)
    emit(name="pairwise_error per query", dtype=str(np.dtype(dtype)), shape=shape, compile_s=c,
         run_s=r, value=float(val))
    mg = 1_000_000
    yb = (y[:mg] > 2).astype(dtype)
    c, r, val = time_jitted(lambda f, y: rj.pairwise_error(f, y), f[:mg], yb)
    emit(name="pairwise_error global (one query)", dtype=str(np.dtype(dtype)), shape=f"{mg}",
         compile_s=c, run_s=r, value=float(val))


if __name__ == "__main__":
    main()
