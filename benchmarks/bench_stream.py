"""Out-of-core primal RankRLS: streams a generated LETOR-like data set from .npy files
through ``rj.path(rj.scale.stream(chunks), rj.Primal())`` (normal equations by chunks of
whole queries, then a λ path) and prints JSON lines with rows/s and the peak resident memory.

    python benchmarks/bench_stream.py --dir /tmp/stream --rows 20000000   # ~11 GB on disk

The data are generated once into --dir (kept; --clean removes them afterwards):
X [rows, 136] float32 standard normal, y = X w* + per-query offset + noise, queries of
20-200 contiguous rows. Accuracy: the relative residual of the normal equations
(float64), the cosine between the learnt and the true weights, and on the first
--check-rows rows the stream against the in-memory path (max |w - w_mem|). The
alternative in the same run: numpy's X^T L X on the same chunks (float32 BLAS),
timed on the first --numpy-rows rows.
"""
import argparse
import json
import multiprocessing
import os
import resource
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402

import rankjax as rj
from rankjax.solvers.streamed import normal_equations  # noqa: E402
from lib.timing import emit  # noqa: E402


def _write_npy(path, shape, dtype, blocks):
    """Writes a C-ordered .npy from an iterator of row blocks (no memory map)."""
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_2_0(
            fh, dict(descr=np.lib.format.dtype_to_descr(np.dtype(dtype)), fortran_order=False,
                     shape=shape))
        for b in blocks:
            np.ascontiguousarray(b, dtype).tofile(fh)


def generate(d, rows, n, seed=0, block=1 << 20):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(20, 201, rows // 20 + 1)
    qid = np.repeat(np.arange(sizes.size, dtype=np.int32), sizes)[:rows]
    w = rng.standard_normal(n).astype(np.float32)
    offset = rng.standard_normal(sizes.size).astype(np.float32) * 3
    np.save(os.path.join(d, "qid.npy"), qid)
    np.save(os.path.join(d, "w_true.npy"), w)
    ys = []

    def xblocks():
        for a in range(0, rows, block):
            r = min(block, rows - a)
            x = rng.standard_normal((r, n), dtype=np.float32)
            ys.append(x @ w + offset[qid[a:a + r]] + rng.standard_normal(r, dtype=np.float32))
            yield x
    _write_npy(os.path.join(d, "X.npy"), (rows, n), np.float32, xblocks())
    np.save(os.path.join(d, "y.npy"), np.concatenate(ys))


def numpy_normal_equations(chunks):
    """The same X^T L X (normalized query graph) with numpy on the host: centre every
    query, scale by sqrt(e_c n_c) = 1, Z^T Z (float32 BLAS)."""
    G = 0.0
    rows = 0
    for X, y, q in chunks:
        _, inv, cnt = np.unique(q, return_inverse=True, return_counts=True)
        means = np.zeros((cnt.size, X.shape[1]), np.float32)
        np.add.at(means, inv, X)
        Z = X - means[inv] / cnt[inv, None]
        G = G + (Z.T @ Z).astype(np.float64)
        rows += X.shape[0]
    return G, rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", default="/tmp/rankjax_stream")
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--features", type=int, default=136)
    p.add_argument("--chunk-rows", type=int, default=1 << 18)
    p.add_argument("--check-rows", type=int, default=200_000)
    p.add_argument("--numpy-rows", type=int, default=2_000_000)
    p.add_argument("--clean", action="store_true")
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    files = [os.path.join(a.dir, f) for f in ("X.npy", "y.npy", "qid.npy")]
    shape_ok = (os.path.exists(files[0]) and
                np.load(files[0], mmap_mode="r").shape == (a.rows, a.features))
    if not shape_ok:              # in a child process: its memory is not this one's peak
        t0 = time.perf_counter()
        ctx = multiprocessing.get_context("spawn")
        child = ctx.Process(target=generate, args=(a.dir, a.rows, a.features))
        child.start()
        child.join()
        if child.exitcode:
            sys.exit("generating the data failed")
        emit(name="stream_generate", rows=a.rows, n=a.features, run_s=time.perf_counter() - t0,
             gigabytes=os.path.getsize(files[0]) / 1e9)
    lams = np.logspace(-2, 4, 13)
    chunks = rj.io.iter_npy(*files, chunk_rows=a.chunk_rows)

    # compile once on the first chunk's shape (a stream of two chunks), then the full stream
    first = next(iter(chunks))
    t0 = time.perf_counter()
    rj.path(rj.scale.stream([first]), rj.Primal(), lams=lams)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit = rj.path(rj.scale.stream(chunks), rj.Primal(), lams=lams)
    jax.block_until_ready(fit.value.weights)
    run_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20    # KiB -> GiB
    num_rows, num_chunks = int(fit.stats["rows"]), int(fit.stats["chunks"])

    w_true = np.load(os.path.join(a.dir, "w_true.npy")).astype(np.float64)
    W = np.asarray(fit.value.weights, np.float64)
    gram, rhs, _ = normal_equations(rj.scale.stream(chunks))     # a second pass, float64
    resid = max(np.linalg.norm((gram + lam * np.eye(W.shape[1])) @ w - rhs)
                / np.linalg.norm(rhs) for lam, w in zip(lams, W))
    cos = float(W[0] @ w_true / np.linalg.norm(W[0]) / np.linalg.norm(w_true))

    # in-memory check on the first rows (whole queries)
    q = np.load(files[2])
    cut = int(np.searchsorted(q, q[min(a.check_rows, q.size - 1)]))
    X0 = np.load(files[0], mmap_mode="r")[:cut].astype(np.float32)
    y0 = np.load(files[1])[:cut]
    small = rj.path(rj.scale.stream(rj.io.iter_npy(X0, y0, q[:cut], chunk_rows=a.chunk_rows // 4)),
                    rj.Primal(), lams=lams)
    mem = rj.path(rj.Problem(X0, y0, rj.query_graph(q[:cut])), rj.Primal(), lams=lams).value
    diff = float(np.max(np.abs(np.asarray(small.value.weights) - np.asarray(mem.weights))))
    scale = float(np.max(np.abs(np.asarray(mem.weights))))
    emit(name="stream_primal_path", dtype="float32", shape=[num_rows, W.shape[1]],
         chunks=num_chunks, chunk_rows=a.chunk_rows, lams=len(lams),
         gigabytes=os.path.getsize(files[0]) / 1e9, compile_s=compile_s, run_s=run_s,
         rows_per_s=num_rows / run_s, peak_rss_gib=round(peak, 3),
         normal_eq_rel_residual=float(resid), cos_true_weights=cos,
         check_rows=cut, check_max_abs_diff_vs_in_memory=diff, check_weight_scale=scale,
         note="run_s is one pass (read + device Gram + host float64 sum + path), median not "
              "taken: a second pass reads the whole file again")

    nrows = int(np.searchsorted(q, q[min(a.numpy_rows, q.size - 1)]))
    sub = rj.io.iter_npy(np.load(files[0], mmap_mode="r")[:nrows], np.load(files[1])[:nrows],
                         q[:nrows], chunk_rows=a.chunk_rows)
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        numpy_normal_equations(sub)
        runs.append(time.perf_counter() - t0)
    runs_rj = []
    for _ in range(3):
        t0 = time.perf_counter()
        jax.block_until_ready(rj.path(rj.scale.stream(sub), rj.Primal(), lams=lams).value.weights)
        runs_rj.append(time.perf_counter() - t0)
    emit(name="stream_normal_equations_numpy_vs_rankjax", dtype="float32", shape=[nrows, a.features],
         numpy_run_s=float(np.median(runs)), rankjax_run_s=float(np.median(runs_rj)),
         numpy_rows_per_s=nrows / float(np.median(runs)),
         rankjax_rows_per_s=nrows / float(np.median(runs_rj)))
    if a.clean:
        shutil.rmtree(a.dir)
    print(json.dumps({"done": True}), file=sys.stderr)


if __name__ == "__main__":
    main()
