"""The default chosen by the data against the default before it (issue 86), and on data whose
relevance acts through interactions.

1. ``RankRLSCV(kernel="gaussian")`` at its defaults on the first-screen sets
   (``lambdarank_sample``, MQ2008's five folds, raw and normalised web-search-like data), in
   the working tree ("head") and in the base commit ("base", :data:`BASE`: the default with
   one map whose column weights came from every training label, one γ), each in a fresh
   process (base and head alternating; the program store filled by an earlier run): the
   first fit of the process and the median of 3 warm fits, the test NDCG@10, the chosen
   candidate; beside LightGBM at its defaults. Per set: the paired difference of head and
   base over the test queries (MQ2008: its five test parts pooled) with its standard error,
   and the warm and first fit-time ratios.
2. ``rj.make_interaction_data`` at about 30,000 rows (300 training queries; 100 test
   queries): the default and the learned kernel (``optimize=True, ard=True``) against the
   same with ``feature_map=None``, and LightGBM; the paired difference to ``feature_map=None``
   with its standard error.

Prints one JSON line per fit and per comparison; ``--save`` writes them
(``benchmarks/lines/default.jsonl``).

    python benchmarks/bench_default.py --save benchmarks/lines/default.jsonl     # ~25 min
    python benchmarks/bench_default.py --only interactions --dtype float32
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from lib.blocks import save_lines
from lib.commits import export
from lib.shared import first_screen_sets, sizes
from lib.timing import emit

BASE = "e900611"
"""The commit before the default chose among candidates (its map weighted every column by
its within-query correlation with every training label; one γ)."""

def worker(args):
    """One tree's fits of one set in this process: a JSON line on stdout, the test scores in
    ``--out``."""
    import jax
    jax.config.update("jax_enable_x64", args.dtype == "float64")
    import rankjax as rj
    from rankjax.estimators import RankRLSCV
    data = dict(((n, f), d) for n, f, d in first_screen_sets(
        [args.set_key], [args.fold] if args.fold else (1,)))
    X, y, q, Xt, yt, qt = data[(args.set, args.fold)]
    dt = np.dtype(args.dtype)
    X, Xt = np.asarray(X, dt), np.asarray(Xt, dt)
    times = []
    for _ in range(4):
        t0 = time.perf_counter()
        m = RankRLSCV(kernel="gaussian").fit(X, y, qid=q)
        times.append(time.perf_counter() - t0)
    f = np.asarray(m.predict(Xt), np.float64)
    np.save(args.out, f)
    chosen = (m.best_params_ if hasattr(m, "best_params_") else     # the base: one candidate
              {"features": "weighted ranks", "kernel": "gaussian", "lam": float(m.lam_),
               "gamma": float(m.gamma_)})
    print(json.dumps(dict(first_s=times[0], warm_s=float(np.median(times[1:])),
                          ndcg10=float(rj.ndcg(f, yt, qt, k=10)), chosen=chosen,
                          rankjax=rj.__file__)))


def run_tree(tree, name, fold, key, dtype, tmp):
    """``(line, test scores)`` of one tree's worker process."""
    out = os.path.join(tmp, f"{tree}-{key}-{fold}.npy")
    env = dict(os.environ)
    if tree == "base":
        base = os.path.join(tmp, "base")
        env["PYTHONPATH"] = base if os.path.isdir(base) else export(BASE, base)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--set", name, "--set-key", key,
           "--fold", str(fold), "--dtype", dtype, "--out", out]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__)))
    if proc.returncode:
        raise SystemExit(f"{tree} worker failed on {name} {fold}:\n{proc.stderr[-3000:]}")
    line = json.loads([x for x in proc.stdout.splitlines() if x.startswith("{")][-1])
    return line, np.load(out)


def per_query(f, y, q):
    """``(query ids, NDCG@10)`` of the queries with a relevant document."""
    import rankjax as rj
    pq = rj.ndcg(f, y, q, k=10, per_query=True)
    ok = np.asarray(pq.valid)
    return np.unique(q)[ok], np.asarray(pq.values, np.float64)[ok]


def paired(a, b):
    """``(mean of b - a, its standard error, queries)`` over per-query values."""
    d = b - a
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size)), int(d.size)


def first_screen(dtype, only):
    """Part 1: head against base on every first-screen set, LightGBM beside."""
    import lightgbm
    import rankjax as rj
    keys = {"lambdarank_sample": "lambdarank", "MQ2008": "mq2008", "web, raw": "web",
            "web, normalised": "web"}
    pooled = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, fold, (X, y, q, Xt, yt, qt) in first_screen_sets(only):
            res = {}
            for tree in ("base", "head") if fold % 2 == 0 else ("head", "base"):
                line, f = run_tree(tree, name, fold, keys[name], dtype, tmp)
                res[tree] = (line, f)
                emit(name="default_fit", set=name, fold=fold, tree=tree, dtype=dtype,
                     shape=list(np.shape(X)), first_s=round(line["first_s"], 3),
                     warm_s=round(line["warm_s"], 3), ndcg10=line["ndcg10"],
                     chosen=line["chosen"])
            t0 = time.perf_counter()
            lgb = lightgbm.LGBMRanker(verbose=-1).fit(X, y, group=sizes(q))
            lgb_s = time.perf_counter() - t0
            emit(name="default_fit", set=name, fold=fold, tree="LightGBM defaults", dtype=dtype,
                 shape=list(np.shape(X)), first_s=round(lgb_s, 3), warm_s=round(lgb_s, 3),
                 ndcg10=float(rj.ndcg(lgb.predict(Xt), yt, qt, k=10)))
            p = pooled.setdefault(name, {"base": [], "head": [], "time": []})
            for tree in ("base", "head"):
                p[tree].append(per_query(res[tree][1], yt, qt)[1])
            p["time"].append((res["base"][0], res["head"][0]))
    for name, p in pooled.items():
        d, se, n = paired(np.concatenate(p["base"]), np.concatenate(p["head"]))
        warm = [h["warm_s"] / b["warm_s"] for b, h in p["time"]]
        first = [h["first_s"] / b["first_s"] for b, h in p["time"]]
        emit(name="default_vs_base", set=name, dtype=dtype, folds=len(p["time"]), queries=n,
             ndcg10_base=float(np.mean(np.concatenate(p["base"]))),
             ndcg10_head=float(np.mean(np.concatenate(p["head"]))), diff=d, paired_se=se,
             diff_in_se=round(d / se, 2) if se > 0 else None,
             warm_ratio_max=round(max(warm), 2), first_ratio_max=round(max(first), 2))


def interactions(dtype, queries):
    """Part 2: the default and the learned kernel against ``feature_map=None`` on data whose
    relevance acts through interactions and squares."""
    import jax
    jax.config.update("jax_enable_x64", dtype == "float64")
    import lightgbm
    import rankjax as rj
    from rankjax.estimators import RankRLSCV
    tr = rj.make_interaction_data(queries, seed=1)
    te = rj.make_interaction_data(100, seed=2, first_qid=10**6)
    X, Xt = np.asarray(tr.X, dtype), np.asarray(te.X, dtype)
    models = {"default": {}, "learned": {"optimize": True, "ard": True}}
    vals = {}
    for label, kw in models.items():
        for fm in ("auto", None):
            t0 = time.perf_counter()
            m = RankRLSCV(kernel="gaussian", feature_map=fm, **kw).fit(X, tr.y, qid=tr.qid)
            fit_s = time.perf_counter() - t0
            f = np.asarray(m.predict(Xt), np.float64)
            vals[(label, fm)] = per_query(f, te.y, te.qid)[1]
            emit(name="interactions_fit", learner=label, feature_map=fm, dtype=dtype,
                 shape=list(X.shape), fit_s=round(fit_s, 2), cv_ndcg10=float(m.best_score_),
                 ndcg10=float(np.mean(vals[(label, fm)])),
                 chosen=getattr(m, "best_params_", None))
        d, se, n = paired(vals[(label, None)], vals[(label, "auto")])
        emit(name="interactions_vs_as_given", learner=label, dtype=dtype, queries=n, diff=d,
             paired_se=se, diff_in_se=round(d / se, 2) if se > 0 else None)
    t0 = time.perf_counter()
    lgb = lightgbm.LGBMRanker(verbose=-1).fit(X, tr.y, group=sizes(tr.qid))
    emit(name="interactions_fit", learner="LightGBM defaults", dtype=dtype, shape=list(X.shape),
         fit_s=round(time.perf_counter() - t0, 2),
         ndcg10=float(np.mean(per_query(lgb.predict(Xt), te.y, te.qid)[1])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="lambdarank,mq2008,web,interactions")
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ap.add_argument("--queries", type=int, default=300, help="interaction data: training queries")
    ap.add_argument("--save")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--set", help=argparse.SUPPRESS)
    ap.add_argument("--set-key", help=argparse.SUPPRESS)
    ap.add_argument("--fold", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    start = time.perf_counter()
    only = a.only.split(",")
    sets = [s for s in only if s != "interactions"]
    if sets:
        first_screen(a.dtype, sets)
    if "interactions" in only:
        interactions(a.dtype, a.queries)
    import jax
    emit(name="default_run", machine=platform.machine(), cores=os.cpu_count(), jax=jax.__version__,
         minutes=round((time.perf_counter() - start) / 60, 1))
    if a.save:
        from lib.timing import EMITTED
        save_lines(a.save, EMITTED)


if __name__ == "__main__":
    main()
