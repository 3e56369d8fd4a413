"""Issue 91: the survival graph's cost as rows grow (float32, x64 off): the host build (one
sort) and the Laplacian-vector product (two prefix sums) of ``rj.survival_graph`` at 10^4 ..
10^6 censored rows (exponential times, about 40 % censored, ties from rounding), and the
comparable pairs it stands for (never formed); the accuracy check: the product's identity
:math:`\\mathbf{1}^T L v = 0` (a ranking loss is blind to a constant) relative to
:math:`\\lVert L \\rVert_1`-scale; beside it ``rj.harrell_c`` of a risk at the same sizes.

    python benchmarks/bench_survival.py --save benchmarks/lines/survival.jsonl   # ~1 min
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import numpy as np  # noqa: E402

from lib.timing import EMITTED, emit, median_s  # noqa: E402


def data(m, seed=0):
    rng = np.random.default_rng(seed)
    risk = rng.normal(size=m)
    t_event = rng.exponential(np.exp(-risk))
    t_cens = rng.exponential(1.5, m)
    t = np.round(np.minimum(t_event, t_cens), 3)
    return risk.astype(np.float32), t.astype(np.float32), t_event <= t_cens


def run(sizes):
    jax.config.update("jax_enable_x64", False)
    import rankjax as rj
    for m in sizes:
        risk, t, e = data(m)
        t0 = time.perf_counter()
        g = rj.survival_graph(t, e)
        build_s = time.perf_counter() - t0
        v = jax.numpy.asarray(np.random.default_rng(1).normal(size=m).astype(np.float32))
        mv = jax.jit(lambda g, v: g.mv(v))
        t0 = time.perf_counter()
        Lv = jax.block_until_ready(mv(g, v))
        compile_s = time.perf_counter() - t0
        run_s = median_s(lambda: mv(g, v), repeats=3)
        scale = float(np.sum(np.abs(np.asarray(Lv))))
        c = jax.jit(lambda r, t, e: rj.harrell_c(r, t, e))
        t0 = time.perf_counter()
        cv = float(c(risk, t, e))
        c_compile = time.perf_counter() - t0
        c_run = median_s(lambda: c(risk, t, e), repeats=3)
        emit(name="survival_graph", dtype="float32", shape=[m], pairs=g.num_pairs,
             build_s=round(build_s, 4), compile_s=round(compile_s, 4), run_s=round(run_s, 6),
             ns_per_row=round(1e9 * run_s / m, 2),
             constant_blind=abs(float(np.sum(np.asarray(Lv)))) / max(scale, 1e-30),
             harrell_c=cv, harrell_c_compile_s=round(c_compile, 3), harrell_c_run_s=round(c_run, 5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--save")
    a = ap.parse_args()
    run([int(s) for s in a.sizes.split(",")])
    if a.save:
        from lib.blocks import save_lines
        save_lines(a.save, EMITTED)


if __name__ == "__main__":
    main()
