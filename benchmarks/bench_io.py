"""SVMlight reading and writing: rankjax.io.read_svmlight / write_svmlight against
scikit-learn's loader and writer on the same LETOR-shaped file (every feature present, as
in MSLR-WEB30K's 136 columns; values of 6 decimals).

    python benchmarks/bench_io.py [--rows 200000] [--features 136] [--repeats 3]

Prints JSON lines: rows, features, file MB, median seconds of each reader (writer), a
check that both read the same matrix, labels and query ids, and that reading back what
write_svmlight wrote gives the matrix bit for bit.
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from lib.timing import emit
from rankjax import io


def write_letor(path, rows, features, seed=0):
    """A LETOR-like file, written in blocks (numpy formatting, no per-token Python)."""
    rng = np.random.default_rng(seed)
    cols = np.arange(1, features + 1)
    with open(path, "w") as fh:
        for start in range(0, rows, 20000):
            k = min(20000, rows - start)
            y = rng.integers(0, 5, k)
            q = (start + np.arange(k)) // 120
            X = np.round(rng.random((k, features)), 6)
            body = np.char.add(np.char.add(cols.astype(str), ":"), X.astype(str))
            lines = [f"{a} qid:{b} " + " ".join(r) for a, b, r in zip(y, q, body)]
            fh.write("\n".join(lines) + "\n")


def median(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=200000)
    p.add_argument("--features", type=int, default=136)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    from sklearn.datasets import load_svmlight_file
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "letor.txt")
        write_letor(path, a.rows, a.features)
        mb = os.path.getsize(path) / 2 ** 20
        ours_s, ours = median(lambda: io.read_svmlight(path, sparse=True), a.repeats)
        sk_s, sk = median(lambda: load_svmlight_file(path, query_id=True, dtype=np.float64),
                          a.repeats)
        same = (abs(ours.X - sk[0]).max() == 0 and np.array_equal(ours.y, sk[1])
                and np.array_equal(ours.qid, sk[2]))
        dense_s, _ = median(lambda: io.read_svmlight(path), a.repeats)
        from sklearn.datasets import dump_svmlight_file
        out = os.path.join(d, "ours.txt")
        w_s, _ = median(lambda: io.write_svmlight(out, ours.X, ours.y, ours.qid), a.repeats)
        skw_s, _ = median(lambda: dump_svmlight_file(ours.X, ours.y, os.path.join(d, "sk.txt"),
                                                     query_id=ours.qid), a.repeats)
        back = io.read_svmlight(out, sparse=True, num_features=a.features)
        exact = (back.X != ours.X).nnz == 0 and np.array_equal(back.y, ours.y) and \
            np.array_equal(back.qid, ours.qid)
    emit(name="read_svmlight", dtype="float64", shape=[a.rows, a.features], file_mb=round(mb, 1),
         compile_s=0.0, run_s=ours_s, dense_run_s=dense_s, sklearn_run_s=sk_s,
         speedup_vs_sklearn=round(sk_s / ours_s, 2), same_as_sklearn=bool(same))
    emit(name="write_svmlight", dtype="float64", shape=[a.rows, a.features], compile_s=0.0,
         run_s=w_s, sklearn_run_s=skw_s, speedup_vs_sklearn=round(skw_s / w_s, 2),
         read_back_exact=bool(exact))


if __name__ == "__main__":
    main()
