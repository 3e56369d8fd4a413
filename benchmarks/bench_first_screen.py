"""The README's first table: what to pick, on the shared real sets (issue 34).

Test NDCG@10 and fit time of the kernel ``RankRLSCV`` with its defaults, the learned
kernel model (``optimize=True``: the grid's best point refined by the gradient of the
exact leave-query-out loss), linear ``RankRLSCV``, and LightGBM / XGBoost at their
defaults, on

* ``lambdarank_sample`` (3,005 training rows in 201 queries, 300 features normalised to
  [0, 1] per query as in the report; test 768 rows), and
* MQ2008 (LETOR 4.0), its five folds: training on the three training parts, every
  choice made on them alone (leave-query-out); test on the test part; the mean over
  the folds (the report's protocol; the validation part is not used), and
* raw web-search-like features (``rj.make_web_data``: counts, BM25, lengths, clicks,
  PageRank as engines log them; 250 training queries, about 12,700 rows, and 250 test
  queries), as given ("web, raw") and normalised to [0, 1] per query ("web,
  normalised"); there also XGBoost tuned on the training queries (the first-answer
  benchmark's grid by 3-fold GroupKFold, in the fit's time; LightGBM tuned so on every
  set: the time the learned kernel is held to), and the kernel
  model on the features as given (``feature_map=None``) and after each transform of
  issue 66's table by hand (standardised, quantile-normal, ``sign(x) log(1 + |x|)``).

Prints one JSON line per (set, fold, learner) and one of the run (machine, minutes);
``--save`` writes them (committed: ``benchmarks/lines/first_screen.jsonl``) and ``--readme``
rewrites the table between the ``first-screen`` markers of that file from them, or from
saved lines alone (``--lines``), byte for byte the same on any machine.

    python benchmarks/bench_first_screen.py --save benchmarks/lines/first_screen.jsonl  # ~20 min
    python benchmarks/bench_first_screen.py --lines benchmarks/lines/first_screen.jsonl \
        --readme docs/which_solver.md
"""
import argparse
import os
import platform
import time

import jax
import numpy as np

from lib.blocks import (add_arguments, add_learner_arguments, from_lines, kept, learners_note,
                        named, rewrite, save_lines)
from lib.shared import first_screen_sets, sizes
from lib.timing import emit

jax.config.update("jax_enable_x64", True)
import rankjax as rj  # noqa: E402
from rankjax.estimators import RankRLSCV  # noqa: E402

LINES = []                                  # this run's lines, for the table
ARGS = None                                 # the run's arguments (``--learners``)


def learners():
    """name -> fit(X, y, qid) returning a scoring function. The learned model is the
    defaults plus ``optimize=True``, as a user adds it: the same map, γ and route (exact
    or Nyström, ``basis="auto"``), the grid's point refined by the gradient and kept when
    its cross-fitted check passes (else the defaults' model, said)."""
    learned = dict(optimize=True)
    out = {
        "rankjax RankRLSCV(kernel=\"gaussian\"), defaults":
            lambda X, y, q: RankRLSCV(kernel="gaussian").fit(X, y, qid=q).predict,
        "rankjax RankRLSCV(kernel=\"gaussian\", optimize=True), learned":
            lambda X, y, q: RankRLSCV(kernel="gaussian", **learned).fit(X, y, qid=q).predict,
        "rankjax RankRLSCV(), linear":
            lambda X, y, q: RankRLSCV().fit(X, y, qid=q).predict,
    }
    try:
        import lightgbm
        out[f"LightGBM {lightgbm.__version__} LGBMRanker, defaults"] = (
            lambda X, y, q: lightgbm.LGBMRanker(verbose=-1).fit(X, y, group=sizes(q)).predict)
    except ImportError:
        pass
    try:
        import xgboost
        out[f"XGBoost {xgboost.__version__} XGBRanker, defaults"] = (
            lambda X, y, q: xgboost.XGBRanker().fit(X, y, qid=q).predict)
    except ImportError:
        pass
    try:
        __import__("lightgbm")
        from lib.trees import tuned
        out["LightGBM tuned"] = tuned("LightGBM")   # every set: the learned rows' time bar
    except ImportError:
        pass
    return out


def web_learners():
    """The raw-data extras: the trees tuned, the kernel model without its feature map, and
    without it after each transform of issue 66's table by hand (learned on the training
    rows): ``(x - mean) / std``, a quantile-normal map, ``sign(x) log(1 + |x|)``."""
    from lib.trees import tuned
    from sklearn.preprocessing import QuantileTransformer, StandardScaler

    def by_hand(make):
        def fit(X, y, q):
            t = make().fit(X)
            f = RankRLSCV(kernel="gaussian", feature_map=None).fit(t.transform(X), y, qid=q).predict
            return lambda T: f(t.transform(T))
        return fit

    class SignLog:
        def fit(self, X):
            return self

        def transform(self, A):
            return np.sign(A) * np.log1p(np.abs(A))

    plain = "rankjax RankRLSCV(kernel=\"gaussian\", feature_map=None)"
    out = {
        f"{plain}, the features as given":
            lambda X, y, q: RankRLSCV(kernel="gaussian", feature_map=None).fit(X, y, qid=q).predict,
        f"{plain} on (x - mean) / std": by_hand(StandardScaler),
        f"{plain} on a quantile-normal map": by_hand(
            lambda: QuantileTransformer(output_distribution="normal", random_state=0)),
        f"{plain} on sign(x) log(1 + |x|)": by_hand(SignLog),
    }
    try:
        __import__("xgboost")
        out["XGBoost tuned"] = tuned("XGBoost")           # fit(X, y, q) -> predict
    except ImportError:
        pass
    return out


def run(name, fold, X, y, q, Xt, yt, qt, extra=None):
    for learner, fit in {**learners(), **(extra or {})}.items():
        if not named(ARGS, learner):
            continue
        t0 = time.perf_counter()
        score = fit(X, y, q)
        fit_s = time.perf_counter() - t0
        f = np.asarray(score(Xt), np.float64)
        line = dict(name="first_screen", set=name, fold=fold, learner=learner, dtype="float64",
                    shape=list(X.shape), fit_s=round(fit_s, 2),
                    ndcg10=float(rj.ndcg(f, yt, qt, k=10)))
        LINES.append(line)
        emit(**line)


SETS = ("lambdarank_sample", "MQ2008", "web, raw", "web, normalised")


def table(lines):
    """The README table (markdown) of this run's JSON lines."""
    by = {}
    for r in lines:
        by.setdefault(r["learner"], {}).setdefault(r["set"], []).append(r)
    rows = ["| model | lambdarank_sample NDCG@10 | fit s | MQ2008 NDCG@10 (5 folds) | fit s | "
            "web, raw NDCG@10 | fit s | web, normalised NDCG@10 | fit s |",
            "| --- |" + " --- |" * 8]
    for learner, sets in by.items():
        cells = []
        for s in SETS:
            rs = sets.get(s, [])
            cells += ([f"{np.mean([r['ndcg10'] for r in rs]):.4f}",
                       f"{np.mean([r['fit_s'] for r in rs]):.1f}"] if rs else ["–", "–"])
        rows.append(f"| {learner.replace('|', chr(92) + '|')} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def body(lines):
    """The README block: the table and the run's line (machine, minutes)."""
    run = next((r for r in lines if r["name"] == "first_screen_run"), {})
    machine = (f"{run.get('machine', '?')}, {run.get('cores', '?')} CPU cores, jax "
               f"{run.get('jax', '?')}, float64; `python benchmarks/bench_first_screen.py --save "
               f"benchmarks/lines/first_screen.jsonl --readme "
               f"docs/which_solver.md`, {run.get('minutes', '?')} min{learners_note(run)}")
    return f"{table([r for r in lines if 'learner' in r])}\n\n<sub>{machine}.</sub>"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="lambdarank,mq2008,web")
    ap.add_argument("--folds", default="1,2,3,4,5")
    add_arguments(ap, "first-screen")
    add_learner_arguments(ap)
    a = ap.parse_args()
    if from_lines(a, "first-screen", body):
        return
    global ARGS
    ARGS = a
    parts = [p for p in a.learners.split(",") if p]
    start = time.perf_counter()
    for name, fold, data in first_screen_sets(a.only.split(","),
                                              [int(f) for f in a.folds.split(",")]):
        run(name, fold, *data, extra=web_learners() if name.startswith("web") else None)
    done = dict(name="first_screen_run", machine=platform.machine(), cores=os.cpu_count(),
                jax=jax.__version__, minutes=round((time.perf_counter() - start) / 60),
                **({"learners": parts} if parts else {}))
    emit(**done)
    order = [*learners(), *web_learners()]
    lines = sorted(kept(a) + LINES, key=lambda r: (SETS.index(r["set"]), r["fold"],
                                                   order.index(r["learner"])
                                                   if r["learner"] in order else len(order)))
    if a.save:
        save_lines(a.save, lines + [done])
    if a.readme:
        rewrite(a.readme, "first-screen", body(lines + [done]))


if __name__ == "__main__":
    main()
