"""The first answer (issue 43): what a user's first ``fit`` in a fresh process costs.

On ``lambdarank_sample`` (3,005 training rows in 201 queries, 300 features normalised
to [0, 1] per query; test 768 rows), float32 (JAX's default), every learner runs in
fresh processes, the same inputs:

* ``first_s``: the first fit of a fresh process with an empty compilation cache,
* ``first_cached_s``: the first fit of another fresh process once that cache is filled
  (the estimators keep their programs in JAX's on-disk cache, ``rankjax._cache``),
* ``warm_s``: the median of 3 more fits of the same shapes in that process,
* ``third_s``: then a fit on the first 2,400 rows (other shapes),

with the number of programs XLA compiled (``compiles_*``: a program read back from the
disk cache is not counted) and test NDCG@10 (rankjax's ``ndcg``), beside LightGBM and
XGBoost at their defaults in the same run (they compile nothing). One JSON line per
learner.

    python benchmarks/bench_first_answer.py            # ~3 min, 2-core CPU
"""
import argparse
import json
import logging
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "lambdarank_sample"
LEARNERS = ("rankjax RankRLSCV(kernel=\"gaussian\")", "rankjax RankRLSCV()",
            "LightGBM LGBMRanker()", "XGBoost XGBRanker()")
THIRD = 2400


class _Count(logging.Handler):
    """Counts the programs XLA compiles (cache hits log another line)."""

    def __init__(self):
        super().__init__()
        self.compiled = 0

    def emit(self, record):
        text = record.getMessage()
        if text.startswith("Finished XLA compilation"):
            self.compiled += 1
        elif text.startswith("Persistent compilation cache hit"):
            self.compiled -= 1          # the line above follows a hit too


def _sizes(qid):
    import numpy as np
    return np.diff(np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True]))


def _learner(name):
    if name.startswith("rankjax"):
        from rankjax.estimators import RankRLSCV
        kernel = "gaussian" if "gaussian" in name else None
        return lambda X, y, q: RankRLSCV(kernel=kernel).fit(X, y, qid=q).predict
    if name.startswith("LightGBM"):
        import lightgbm
        return lambda X, y, q: lightgbm.LGBMRanker(verbose=-1).fit(X, y, group=_sizes(q)).predict
    import xgboost
    return lambda X, y, q: xgboost.XGBRanker().fit(X, y, qid=q).predict


def child(name):
    """One fresh process: first fit, 3 warm fits, the third shape; prints one JSON line."""
    t_start = time.perf_counter()
    import jax
    count = _Count()
    jax.config.update("jax_log_compiles", True)
    log = logging.getLogger("jax")
    log.addHandler(count)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    import numpy as np
    import rankjax as rj
    tr = rj.io.read_svmlight(SHARED / "rank.train")
    te = rj.io.read_svmlight(SHARED / "rank.test", num_features=tr.X.shape[1], drop_extra=True)
    X = np.asarray(rj.io.normalize_per_query(tr.X, tr.qid), np.float32)
    Xt = np.asarray(rj.io.normalize_per_query(te.X, te.qid), np.float32)
    y, q = np.asarray(tr.y, np.float32), tr.qid
    fit = _learner(name)
    import_s = time.perf_counter() - t_start
    before = count.compiled
    t0 = time.perf_counter()
    predict = fit(X, y, q)
    first = time.perf_counter() - t0
    compiles_first = count.compiled - before
    scores = np.asarray(predict(Xt), np.float64)
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        fit(X, y, q)
        warm.append(time.perf_counter() - t0)
    n = int(np.searchsorted(np.cumsum(_sizes(q)), THIRD, side="right"))
    rows = int(np.cumsum(_sizes(q))[n - 1])
    before = count.compiled
    t0 = time.perf_counter()
    fit(X[:rows], y[:rows], q[:rows])
    third = time.perf_counter() - t0
    print("RESULT " + json.dumps(dict(
        first_s=first, warm_s=statistics.median(warm), third_s=third, third_rows=rows,
        compiles_first=compiles_first, compiles_third=count.compiled - before,
        import_and_load_s=import_s,
        ndcg10=float(rj.ndcg(scores, te.y, te.qid, k=10)))), flush=True)


def fresh(name, cache):
    env = dict(os.environ, RANKJAX_DISK_CACHE=cache)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    r = subprocess.run([sys.executable, __file__, "--child", name], env=env,
                       capture_output=True, text=True, timeout=1800)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode or not line:
        raise SystemExit(f"{name}: {r.stderr[-2000:]}")
    return json.loads(line[-1][7:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--only", help="a substring of the learners to run")
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import jax
    from _timing import emit
    for name in LEARNERS:
        if args.only and args.only not in name:
            continue
        try:
            _learner(name)
        except ImportError:
            continue
        with tempfile.TemporaryDirectory(prefix="rankjax-first-") as cache:
            cold = fresh(name, cache)
            filled = fresh(name, cache)
        emit(name="first_answer", learner=name, dtype="float32", shape=[3005, 300],
             jax=jax.__version__, first_s=cold["first_s"], first_cached_s=filled["first_s"],
             warm_s=filled["warm_s"], third_s=filled["third_s"],
             third_rows=filled["third_rows"], compiles_first=cold["compiles_first"],
             compiles_first_cached=filled["compiles_first"],
             compiles_third=cold["compiles_third"], ndcg10=cold["ndcg10"],
             ndcg10_same_both_processes=cold["ndcg10"] == filled["ndcg10"])


if __name__ == "__main__":
    main()
