"""The main job: ``python -m rankjax`` (console script ``rankjax``).

Trains the README's recommended learner by default, kernel RankRLS with λ chosen by
exact leave-query-out (``RankRLSCV(kernel="gaussian")``: ``--learner kernel``; its
basis, ``--basis``, and learned kernel, ``--optimize`` and ``--ard``), on an SVMlight
train file, reports NDCG@1/5/10, MAP and pairwise accuracy on a test file, and prints
them as one JSON line (``--json FILE`` also writes it). ``--learner`` picks linear
RankRLS or RLS (λ chosen on held-out training queries, one eigendecomposition for the
whole grid; ``--folds k`` / ``loo`` for exact k-fold / leave-query-out), RankSVM,
RankBoost or CG with early stopping instead; ``--learner survival`` ranks patients by risk
from censored times (the file's label the time, negative when censored, as XGBoost's
``survival:cox``; Harrell's C on the test file). A best λ on the grid's edge extends the
grid (``--extend``). ``--load`` + ``--predict`` scores a new file (tab-separated qid,
row, score); ``--load`` + ``--test`` evaluates a saved model on a labelled file;
LightGBM's spelling ``rankjax train ...`` / ``rankjax predict ...`` names the task.
Model files are the estimators' (``rankjax.estimators.load`` reads what ``--save``
writes, and ``--load`` reads any estimator's ``save``). Without data arguments it runs
on built-in LETOR-like data (fixed seed). A file is written only when asked
(``--save``, ``--output``, ``--json``), never over an input or another output. A flag
that does not apply to the chosen learner or mode is an error.

Errors (bad arguments, unreadable or malformed files, unwritable outputs) print one
line ``rankjax: error: ...`` on stderr and exit with status 2; outputs are checked
before any training and written atomically.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .args import UsageError, check_args, parser
from .console import CONSOLE, fmt, print_report, rounded, say
from .files import data, evaluate, use_loaded
from .learn import fit_kernel, fit_main_job, fit_other
from .survival import fit_survival

__all__ = ["main"]


def main(argv=None) -> int:
    """Runs the main job; returns the exit status (2 with a one-line message on stderr
    for any usage or data error)."""
    try:
        return _main(argv)
    except (UsageError, ValueError, TypeError, OSError) as e:
        msg = " ".join(str(e).split()) or type(e).__name__
        sys.stderr.write(f"rankjax: error: {msg}\n")
        return 2


def _main(argv):
    args = parser(__doc__).parse_args(argv)
    CONSOLE.quiet = args.quiet
    check_args(args)
    import jax
    from ..runtime.cache import use_disk_cache
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    use_disk_cache()                     # JAX's on-disk program cache (rankjax.runtime.cache)

    t0 = time.time()
    if args.load:
        return use_loaded(args, t0)
    if args.learner == "survival":
        model, result, metrics = fit_survival(args)
        return _finish(model, result, metrics, args, t0)
    X, y, qid, Xt, yt, qt = data(args)
    if len(np.unique(qid)) < 2:
        raise UsageError("the training data has one query (no qid: fields or .query file?); "
                         "λ is chosen on held-out queries, so at least 2 are needed")
    if args.learner == "kernel":
        model, result = fit_kernel(args, X, y, qid)
    elif args.learner in ("rankrls", "rls"):
        model, result = fit_main_job(args, X, y, qid)
    else:
        model, result = fit_other(args, X, y, qid)
    scores = model.predict(Xt)
    metrics = evaluate(scores, yt, qt)
    say("  test: " + ", ".join(f"{k}={fmt(v)}" for k, v in metrics.items()))
    return _finish(model, result, metrics, args, t0)


def _finish(model, result, metrics, args, t0):
    """Saves the model when asked, prints the summary and the JSON line."""
    import jax
    if args.save:                         # the estimators' model file, for every learner
        model.save(args.save, normalize=bool(args.normalize), cli_learner=args.learner)
        say(f"  model saved to {args.save}")
    else:
        say("  model not saved (use --save PATH)")
    say(f"  {time.time() - t0:.1f} s on {jax.devices()[0].platform}")
    print_report({"learner": args.learner, **result, **{k: rounded(v) for k, v in metrics.items()},
             "seconds": round(time.time() - t0, 3)}, args)
    return 0
