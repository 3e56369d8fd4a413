"""The distortion battery (issue 74): every learner of the first screen on the shared real sets
and on raw web-search-like data, as given and with each column logged as raw engines log it
(``rj.distort_like_logs``: one random increasing or decreasing map per column, of the kinds
x 10^k, exp, a shift to large negatives, a 65,535 cap on 30 % of the rows, counts, cubes,
missing values coded as a sentinel or NaN), seeds 1..5, float32 (x64 off, as a new user).

* ``lambdarank_sample`` as its files have it (300 features in [0, 1], 3,005 training rows);
* MQ2008, the five folds (training on the three training parts, testing on the test part);
* ``rj.make_web_data`` (250 training queries, about 12,700 rows; 250 test queries).

Test NDCG@10 by ``rj.ndcg``; one JSON line per (set, fold, seed, learner), ``seed`` 0 for the
features as given. ``--save`` writes them (committed: ``benchmarks/lines/battery.jsonl``) and
``--readme`` rewrites the ``battery`` block of the README from them (``--lines``: from saved
lines alone).

    python benchmarks/bench_battery.py --save benchmarks/lines/battery.jsonl \
        --readme docs/which_solver.md  # ~50 min
    python benchmarks/bench_battery.py --lines benchmarks/lines/battery.jsonl --readme docs/which_solver.md
"""
import argparse
import os
import platform
import time
import warnings

import jax
import numpy as np

from lib.blocks import (add_arguments, add_learner_arguments, from_lines, kept, learners_note,
                        named, rewrite, save_lines)
from lib.shared import SHARED, mq2008_folds, sizes
from lib.timing import emit

jax.config.update("jax_enable_x64", False)          # JAX's default, as a new user
import rankjax as rj  # noqa: E402
from rankjax.estimators import RankRLSCV  # noqa: E402

SEEDS = (1, 2, 3, 4, 5)
LEARNED_SEEDS = (1, 2)
"""The learned kernel (20 gradient steps twice for its cross-fitted check, about 2 minutes a
fit on MQ2008 on 2 cores) runs on these distorted seeds and the features as given, on
MQ2008 in the folds of ``--learned-folds`` (1); every other learner on all of
:data:`SEEDS` and every fold."""
LEARNED = "rankjax RankRLSCV(kernel=\"gaussian\", optimize=True, ard=True), learned"
LINES = []


def learners():
    """name -> fit(X, y, qid) returning ``(predict, note)``; the learned kernel with
    per-feature scales on the defaults' route (exact up to 5,000 rows, a Nyström basis above),
    its note whether it moved from the grid's point and said so when it did not."""

    def ours(**kw):
        def fit(X, y, q):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                est = RankRLSCV(**kw).fit(X, y, qid=q)
            moved = getattr(getattr(est, "tune_", None), "moved", None)
            said = any("did not move" in str(w.message) for w in caught)
            return est.predict, {"moved": moved, "said_not_moved": said} if kw.get("optimize") else {}
        return fit

    out = {"rankjax RankRLSCV(kernel=\"gaussian\"), defaults": ours(kernel="gaussian"),
           LEARNED: ours(kernel="gaussian", optimize=True, ard=True),
           "rankjax RankRLSCV(), linear": ours()}
    try:
        import lightgbm
        out[f"LightGBM {lightgbm.__version__} LGBMRanker, defaults"] = lambda X, y, q: (
            lightgbm.LGBMRanker(verbose=-1).fit(X, y, group=sizes(q)).predict, {})
    except ImportError:
        pass
    try:
        import xgboost
        out[f"XGBoost {xgboost.__version__} XGBRanker, defaults"] = lambda X, y, q: (
            xgboost.XGBRanker().fit(X, y, qid=q).predict, {})
    except ImportError:
        pass
    return out


ARGS = None
"""The run's arguments (``--learners``: the learners this run fits)."""


def run(name, fold, X, y, q, Xt, yt, qt, learned=True):
    for seed in (0,) + SEEDS:
        A, B = (X, Xt) if seed == 0 else rj.distort_like_logs(X, Xt, seed=seed)[:2]
        jax.clear_caches()        # every seed has shapes of its own: drop the last seed's code
        for learner, fit in learners().items():
            if not named(ARGS, learner):
                continue
            if learner == LEARNED and not (learned and seed in (0,) + LEARNED_SEEDS):
                continue
            t0 = time.perf_counter()
            try:
                score, note = fit(A, y, q)
                fit_s = time.perf_counter() - t0
                ndcg = float(rj.ndcg(np.asarray(score(B), np.float64), yt, qt, k=10))
            except Exception as e:                    # noqa: BLE001  a learner that fails: said
                fit_s, ndcg, note = time.perf_counter() - t0, None, {"error": str(e)[:200]}
            line = dict(name="battery", set=name, fold=fold, seed=seed, learner=learner,
                        dtype="float32", shape=list(X.shape), fit_s=round(fit_s, 2),
                        ndcg10=ndcg, **note)
            LINES.append(line)
            emit(**line)


def lambdarank():
    d = SHARED / "lambdarank_sample"
    tr = rj.io.read_svmlight(d / "rank.train")
    te = rj.io.read_svmlight(d / "rank.test", num_features=tr.X.shape[1], drop_extra=True)
    run("lambdarank_sample", 0, tr.X, tr.y, tr.qid, te.X, te.y, te.qid)


def mq2008(folds, learned_folds):
    for fold, data in mq2008_folds(folds):
        run("MQ2008", fold, *data, learned=fold in learned_folds)


def web():
    tr = rj.make_web_data(250, seed=1)
    te = rj.make_web_data(250, seed=2, first_qid=10**6)
    run("web, raw", 0, tr.X, tr.y, tr.qid, te.X, te.y, te.qid)


SETS = ("lambdarank_sample", "MQ2008", "web, raw")


def table(lines):
    """Rows: learners; per set the test NDCG@10 as given, the mean over the distorted seeds
    (MQ2008: over folds and seeds, the folds the learner ran) and the worst seed's."""
    by = {}
    for r in lines:
        by.setdefault(r["learner"], {}).setdefault(r["set"], []).append(r)
    head = "| model | " + " | ".join(f"{s} as given | distorted, mean | worst" for s in SETS) + " |"
    rows = [head, "| --- |" + " --- |" * (3 * len(SETS))]
    for learner, sets in by.items():
        cells = []
        for s in SETS:
            rs = sets.get(s, [])
            clean = [r["ndcg10"] for r in rs if r["seed"] == 0]
            dist = [r["ndcg10"] for r in rs if r["seed"] != 0]
            if not rs:
                cells += ["–"] * 3
                continue
            per_seed = [np.mean([r["ndcg10"] for r in rs if r["seed"] == k]) for k in SEEDS
                        if any(r["seed"] == k for r in rs)]
            fails = sum(v is None for v in dist)
            cells += [f"{np.mean(clean):.4f}" if None not in clean else "fails",
                      (f"{np.mean([v for v in dist if v is not None]):.4f}" if fails < len(dist)
                       else "fails") + (f" ({fails} failed)" if fails else ""),
                      f"{min(per_seed):.4f}" if not fails else "–"]
        rows.append(f"| {learner} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def body(lines):
    run = next((r for r in lines if r["name"] == "battery_run"), {})
    machine = (f"{run.get('machine', '?')}, {run.get('cores', '?')} CPU cores, jax "
               f"{run.get('jax', '?')}, float32; seeds {SEEDS[0]}-{SEEDS[-1]}; `python "
               "benchmarks/bench_battery.py --save benchmarks/lines/battery.jsonl --readme "
               "docs/which_solver.md`, "
               f"{run.get('minutes', '?')} min")
    machine += learners_note(run)
    folds = sorted({r["fold"] for r in lines if r.get("learner") == LEARNED
                    and r["set"] == "MQ2008"})
    return (f"{table([r for r in lines if 'learner' in r])}\n\n<sub>{machine}; the learned "
            f"kernel on seeds {', '.join(map(str, LEARNED_SEEDS))} only, on MQ2008 in fold"
            f"{'s' * (len(folds) > 1)} {', '.join(map(str, folds))}.</sub>")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="lambdarank,mq2008,web")
    ap.add_argument("--folds", default="1,2,3,4,5")
    ap.add_argument("--learned-folds", default="1")
    add_learner_arguments(ap)
    add_arguments(ap, "battery")
    a = ap.parse_args()
    if from_lines(a, "battery", body):
        return
    global ARGS
    ARGS = a
    parts = [p for p in a.learners.split(",") if p]
    start = time.perf_counter()
    if "lambdarank" in a.only:
        lambdarank()
    if "mq2008" in a.only:
        mq2008([int(f) for f in a.folds.split(",")], [int(f) for f in a.learned_folds.split(",")])
    if "web" in a.only:
        web()
    run = dict(name="battery_run", machine=platform.machine(), cores=os.cpu_count(),
               jax=jax.__version__, minutes=round((time.perf_counter() - start) / 60),
               **({"learners": parts} if parts else {}))
    emit(**run)
    lines = kept(a) + LINES
    lines.sort(key=lambda r: list(learners()).index(r["learner"]) if r["learner"] in learners()
               else len(learners()))
    if a.save:
        save_lines(a.save, lines + [run])
    if a.readme:
        rewrite(a.readme, "battery", body(lines + [run]))


if __name__ == "__main__":
    main()
