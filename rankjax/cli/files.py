"""The main job's files: reading SVMlight/LETOR data, the test metrics, scoring with a
saved model (``--load`` with ``--predict`` or ``--test``)."""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from .._core.sparse import count_nonzero
from .._core.types import width_of
from .._core.atomic import atomic_write
from ..io.models import is_weights
from .args import SPARSE_LEARNERS, UsageError
from .console import CONSOLE, fmt, print_report, rounded, say

__all__ = ["load_file", "evaluate", "evaluate_survival", "times", "data", "use_loaded"]


def load_file(path, args, num_features=None, flag="--train"):
    """``(X, y, qid)`` of an SVMlight/LETOR file (``--sparse``: rows kept sparse), the labels
    of a training or test file checked to be relevance grades (integers >= 0; survival
    times with ``--learner survival``, read by :func:`rankjax.cli.survival.times`)."""
    from .. import io
    from ..io.svmlight import DenseTooLargeError
    t0 = time.time()
    try:
        d = io.read_svmlight(path, num_features=num_features,
                             sparse=bool(getattr(args, "sparse", False)))
    except DenseTooLargeError as e:
        raise UsageError(f"{flag} {path}: dense rows of {e.shape[0]} x {e.shape[1]} need "
                         f"{e.need / 2**30:.1f} GiB; keep them sparse with --sparse (learners "
                         f"{', '.join(SPARSE_LEARNERS)})") from None
    if flag != "--predict" and getattr(args, "learner", None) != "survival":
        grades(d.y, path, flag)
    nonzero = count_nonzero(d.X)
    if d.X.shape[0] and nonzero == 0:
        raise UsageError(f"{flag} {path}: no row has a nonzero feature (not an SVMlight/LETOR "
                         "file? a .query file goes beside its data file)")
    dt = max(time.time() - t0, 1e-9)
    say(f"  read {path}: {d.X.shape[0]} rows in {dt:.2f} s ({d.X.shape[0] / dt:,.0f} rows/s)")
    X = io.normalize_per_query(d.X, d.qid) if args.normalize else d.X
    return X, d.y, d.qid


def grades(y, path, flag) -> None:
    """Labels are relevance grades, integers >= 0 (as LETOR's 0-4 and the NDCG the job
    reports need): a UsageError naming the file and the first row that is not."""
    bad = np.flatnonzero((y < 0) | (y != np.round(y)))
    if bad.size:
        hint = ("; survival times (negative: censored) are read by --learner survival"
                if np.any(y < 0) else "")
        raise UsageError(f"{flag} {path}: labels must be relevance grades (integers >= 0), "
                         f"data row {bad[0] + 1} has {y[bad[0]]:g}{hint}")


def evaluate(scores, y, qid):
    """The test metrics of ``scores`` [m] (floats) or of a multi-output model's
    ``[m, k]`` (one list of k values per metric, output by output)."""
    from ..metrics.pairs import pairwise_error
    from ..metrics.graded import mean_average_precision, ndcg
    scores = np.asarray(scores)
    if scores.ndim == 2:
        cols = [evaluate(scores[:, j], y, qid) for j in range(scores.shape[1])]
        return {k: [c[k] for c in cols] for k in cols[0]}
    out = {f"ndcg@{k}": float(ndcg(scores, y, qid, k=k)) for k in (1, 5, 10)}
    out["map"] = float(mean_average_precision(scores, y, qid))
    out["pairwise_accuracy"] = 1 - float(pairwise_error(scores, y, qid))
    return out


def times(y, path, flag):
    """``(time, event)`` of a survival file's labels (negative: censored at ``|y|``)."""
    y = np.asarray(y, np.float64)
    if np.any(np.signbit(y) & (y == 0)):
        raise UsageError(f"{flag} {path}: a label of -0 is neither an event nor a censored "
                         "time > 0")
    if not np.any(y >= 0):
        raise UsageError(f"{flag} {path}: every label is negative (censored): no event observed")
    return np.abs(y), y >= 0


def evaluate_survival(scores, t, e, strata):
    """Harrell's C of the risk ``scores`` (strata as given)."""
    from ..metrics.survival import harrell_c
    return {"harrell_c": float(harrell_c(np.asarray(scores), t, e, strata))}


def predict_linear(weights, X):
    import jax.numpy as jnp
    from ..solvers.models import LinearModel, predict
    return predict(LinearModel(jnp.asarray(weights)), jnp.asarray(X))


def data(args):
    from ..io.synthetic import make_ranking_data
    if args.train:
        say(f"rankjax: train={args.train} test={args.test}")
        X, y, qid = load_file(args.train, args)
        Xt, yt, qt = load_file(args.test, args, num_features=X.shape[1], flag="--test")
    else:
        say(f"rankjax: built-in LETOR-like data (seed {args.seed})")
        tr = make_ranking_data(300, seed=args.seed)
        te = make_ranking_data(100, seed=args.seed + 1, first_qid=300)
        X, y, qid, Xt, yt, qt = tr.X, tr.y, tr.qid, te.X, te.y, te.qid
    say(f"  train {X.shape[0]} rows x {X.shape[1]} features, {len(np.unique(qid))} queries; "
         f"test {Xt.shape[0]} rows, {len(np.unique(qt))} queries")
    return X, y, qid, Xt, yt, qt


def use_loaded(args, t0):
    """``--load`` with ``--predict`` (scores with qid and row columns) or ``--test``
    (evaluation on a labelled file)."""
    from .. import estimators, io
    model, meta = io.load_model(args.load)
    if isinstance(model, dict) and meta.get("learner") in estimators.__all__:
        est = estimators.load(args.load)
        n, score = est.n_features_in_, est.predict
    elif is_weights(model):                # weights saved by an older command line
        n = model.shape[0]
        score = lambda X: np.asarray(predict_linear(model, X))  # noqa: E731
    elif hasattr(model, "num_features"):      # a library model saved by io.save_model
        from ..solvers.models import predict
        n = width_of(model)                     # None: not recorded, the file decides
        score = lambda X: np.asarray(predict(model, X))  # noqa: E731
    else:
        raise UsageError(f"--load {args.load} holds a {type(model).__name__}, not a model that "
                         "scores feature rows (a LinearModel, KernelModel, ScaledModel, "
                         "FalkonModel, RankSVMKernelModel or RankBoostModel, or an estimator)")
    path = args.test or args.predict
    if args.predict and not args.output:
        CONSOLE.quiet = True                    # stdout carries the scores
    survival = meta.get("cli_learner") == "survival" or meta.get("learner", "").startswith(
        "Survival")
    X, y, qid = load_file(path, argparse.Namespace(normalize=bool(meta.get("normalize")),
                                                sparse=args.sparse,
                                                learner="survival" if survival else None),
                      num_features=n, flag="--test" if args.test else "--predict")
    scores = score(X)
    if args.test:
        if survival:
            t, e = times(y, path, "--test")
            metrics = evaluate_survival(scores, t, e, None if np.unique(qid).size == 1 else qid)
        else:
            metrics = evaluate(scores, y, qid)
        say(f"  {args.load} on {path}: " + ", ".join(f"{k}={fmt(v)}" for k, v in metrics.items()))
        print_report({**{k: rounded(v) for k, v in metrics.items()},
                 "seconds": round(time.time() - t0, 3)}, args)
        return 0
    cols = np.asarray(scores).reshape(len(qid), -1)          # a multi-output model: k columns
    text = "".join(f"{q}\t{i}\t" + "\t".join(f"{v:.8g}" for v in row) + "\n"
                   for i, (q, row) in enumerate(zip(qid, cols)))
    if args.output:
        with atomic_write(args.output) as fh:
            fh.write(text)
        say(f"scored {len(scores)} rows of {args.predict} -> {args.output} (qid, row, score)")
    else:
        sys.stdout.write(text)
    if args.json:                            # the summary; stdout keeps only the scores
        with atomic_write(args.json) as fh:
            fh.write(json.dumps({"rows": int(len(scores)), "queries": int(len(np.unique(qid))),
                                 "predict": args.predict, "output": args.output or "stdout",
                                 "seconds": round(time.time() - t0, 3)}) + "\n")
    return 0
