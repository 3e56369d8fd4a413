"""``RankRLSCV(kernel="gaussian", optimize=True)`` at 12k rows: this tree against a base commit,
in one run on this machine (issue 43: the gradient refinement that replaced the golden-section
search of 35b8738 cost 5x as much there for the same hold-out NDCG).

The data: ``make_ranking_data(650, num_features=50, docs_per_query=(10, 28), seed=5)``
(12,194 rows), features scaled to unit variance, float32 (JAX's default); ``gammas = [0.1,
0.3, 1, 3] / 50``, ``lams = logspace(-3, 3, 13)``, the basis chosen automatically (a
Nyström basis of 2,000 rows above 5,000 rows). Each fit runs in a fresh process (compile
included, as a user's first fit) with this tree's on-disk program cache off
(``RANKJAX_DISK_CACHE=0``: the base has none), base and head alternating over ``--rounds``
rounds (base, head, then head, base). Prints a JSON line per fit (fit seconds, the
hold-out NDCG@10 ``best_score_``, the chosen λ and γ, test NDCG@10 on 200 other queries) and
one summary line: each side's fastest fit, ``ratio`` head / base, and whether the head's
hold-out NDCG is at least the base's.

    python benchmarks/bench_optimize.py                      # the working tree against 35b8738
    python benchmarks/bench_optimize.py --base ee1d52b --rounds 1
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASE = "35b8738"
sys.path.insert(0, HERE)
from lib.commits import export  # noqa: E402


def child():
    import numpy as np
    import rankjax as rj
    from rankjax.estimators import RankRLSCV
    from lib.timing import emit

    def data(queries, seed, first_qid=0):
        d = rj.make_ranking_data(queries, num_features=50, docs_per_query=(10, 28), seed=seed,
                                 first_qid=first_qid)
        return np.asarray(d.X), np.asarray(d.y), np.asarray(d.qid)

    X, y, qid = data(650, 5)
    Xt, yt, qt = data(200, 6, first_qid=100_000)
    mu, sd = X.mean(0), X.std(0)
    X, Xt = (X - mu) / sd, (Xt - mu) / sd
    n = X.shape[1]
    est = RankRLSCV(kernel="gaussian", gammas=list(np.array([0.1, 0.3, 1, 3]) / n),
                    lams=np.logspace(-3, 3, 13), optimize=True)
    t0 = time.perf_counter()
    est.fit(X, y, qid=qid)
    fit_s = time.perf_counter() - t0
    test = float(rj.ndcg(est.predict(Xt), yt, qt, k=10))
    import jax
    emit(name="rankrlscv_optimize", tree=os.environ.get("BENCH_TREE", "head"),
         dtype="float64" if jax.config.jax_enable_x64 else "float32", shape=list(X.shape), fit_s=fit_s,
         holdout_ndcg10=float(est.best_score_), lam=float(est.lam_), gamma=float(est.gamma_),
         test_ndcg10=test)


def fit_in(tree, side):
    env = dict(os.environ, PYTHONPATH=tree, BENCH_TREE=side, RANKJAX_DISK_CACHE="0",
               JAX_ENABLE_X64="0")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env,
                       capture_output=True, text=True, cwd=HERE)
    if p.returncode:
        raise SystemExit(f"bench_optimize: the {side} fit failed:\n{p.stderr[-2000:]}")
    line = next(x for x in p.stdout.splitlines() if x.startswith("{"))
    print(line, flush=True)
    return json.loads(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=BASE, help=f"base commit (default {BASE})")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child()
    with tempfile.TemporaryDirectory(prefix="rankjax-bench-") as tmp:
        trees = {"base": export(a.base, os.path.join(tmp, "base")), "head": ROOT}
        runs = {"base": [], "head": []}
        for r in range(a.rounds):
            for side in (("base", "head") if r % 2 == 0 else ("head", "base")):
                runs[side].append(fit_in(trees[side], side))
    best = {s: min(v, key=lambda x: x["fit_s"]) for s, v in runs.items()}
    print(json.dumps({"name": "rankrlscv_optimize_ab", "base": a.base, "device": best["head"]["device"],
                      "dtype": best["head"]["dtype"], "shape": best["head"]["shape"],
                      "base_fit_s": best["base"]["fit_s"], "head_fit_s": best["head"]["fit_s"],
                      "ratio": round(best["head"]["fit_s"] / best["base"]["fit_s"], 3),
                      "base_holdout_ndcg10": best["base"]["holdout_ndcg10"],
                      "head_holdout_ndcg10": best["head"]["holdout_ndcg10"],
                      "holdout_at_least_base": best["head"]["holdout_ndcg10"]
                      >= best["base"]["holdout_ndcg10"]}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
