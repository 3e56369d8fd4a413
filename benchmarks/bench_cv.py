"""Cross-validation benchmark (issue: exact fast CV). Prints JSON lines.

  LQO dual Gaussian, m = 3,000 in 150 queries, 20 λ;
  LPO dual Gaussian, m = 1,000, all differing-label pairs (~400,000), 20 λ;
  LPO dual Gaussian, m = 2,000 (~2 million pairs), 20 λ;
  LQO primal on MSLR-shaped data (2,270,296 x 136, 18,919 queries), 20 λ.

    python benchmarks/bench_cv.py [--only lqo|lpo|lpo2k|mslr] [--float64] [--scale 0.1]
"""
import argparse

import jax
import jax.numpy as jnp
import numpy as np

from lib.timing import emit, lambda_lanes, time_jitted

LAMS = np.logspace(-2, 3, 20)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", choices=["lqo", "lpo", "lpo2k", "mslr"])
    p.add_argument("--float64", action="store_true")
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the MSLR-shaped rows")
    a = p.parse_args()
    if a.float64:
        jax.config.update("jax_enable_x64", True)
    import rankjax as rj
    dt = jnp.float64 if a.float64 else jnp.float32
    name = jnp.dtype(dt).name
    rng = np.random.default_rng(0)
    lams = jnp.asarray(LAMS, dt)

    if a.only in (None, "lqo"):
        m = 3000
        X = jnp.asarray(rng.standard_normal((m, 20)), dt)
        qid = np.repeat(np.arange(150), 20)
        y = jnp.asarray(rng.integers(0, 5, m), dt)
        g = rj.query_graph(qid)
        folds = rj.make_folds(g)
        K = jax.jit(lambda X: rj.kernel_matrix(rj.gaussian_kernel(0.05), X))(X)
        c, r, _ = time_jitted(lambda K, y, g, f, l: rj.holdout(rj.Problem(K, y, g, precomputed=True),
                                                               rj.Dual(), lams=l, folds=f).value
                              .predictions, K, y, g, folds, lams)
        emit(name="LQO dual gaussian", dtype=name, shape=f"m={m}, 150 queries, {len(LAMS)} lambdas",
             compile_s=c, run_s=r)

    for key, m in (("lpo", 1000), ("lpo2k", 2000)):
        if a.only not in (None, key):
            continue
        X = jnp.asarray(rng.standard_normal((m, 20)), dt)
        y = rng.integers(0, 5, m)
        pairs = jnp.asarray(rj.differing_pairs(y))
        K = jax.jit(lambda X: rj.kernel_matrix(rj.gaussian_kernel(0.05), X))(X)
        yj = jnp.asarray(y, dt)
        c, r, out = time_jitted(
            lambda K, y, p, l: (
                rj.holdout(
                    rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True),
                    rj.Dual(),
                    lams=l,
                    folds=rj.LeavePairOut(p),
                ).value.predictions
            ),
            K,
            yj,
            pairs,
            lams,
        )
        ok, lanes = lambda_lanes(out, LAMS)
        emit(name="LPO dual gaussian", dtype=name,
             shape=f"m={m}, {pairs.shape[0]} pairs, {len(LAMS)} lambdas", compile_s=c, run_s=r,
             finite=bool(np.all(np.isfinite(np.asarray(out)[ok]))), **lanes)

    if a.only in (None, "mslr"):
        m, n, Q = int(2_270_296 * a.scale), 136, max(2, int(18_919 * a.scale))
        qid = np.sort(rng.integers(0, Q, m))
        X = jnp.asarray(rng.random((m, n), dtype=np.float32), dt)
        y = jnp.asarray(rng.integers(0, 5, m), dt)
        g = rj.query_graph(qid)
        folds = rj.make_folds(g)
        c, r, out = time_jitted(lambda X, y, g, f, l: rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=l,
                                                                 folds=f).value
                                .predictions, X, y, g, folds, lams)
        emit(name="LQO primal MSLR-shaped", dtype=name,
             shape=f"{m}x{n}, {g.num_queries} queries, {len(LAMS)} lambdas", compile_s=c, run_s=r,
             finite=bool(jnp.all(jnp.isfinite(out))))


if __name__ == "__main__":
    main()
