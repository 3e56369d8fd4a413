"""The main job on censored survival times (``--learner survival``): an SVMlight file whose
label is the patient's time, negative for a censored one (XGBoost's ``survival:cox``
convention: ``-5`` is censored at 5, ``5`` an event at 5), ``qid:`` optional strata;
:class:`rankjax.estimators.SurvivalRankRLSCV` (linear, or ``--kernel``) with λ by k-fold
over patients, Harrell's C on the test file."""
from __future__ import annotations

import time

import numpy as np

from .args import UsageError
from .console import fmt, say, warned
from .files import evaluate_survival, load_file, times

__all__ = ["survival_data", "fit_survival"]


def survival_data(args):
    """``(X, time, event, strata, X_test, time_test, event_test, strata_test)`` of
    ``--train``/``--test``, or of :func:`rankjax.make_survival_data` (built-in)."""
    if args.train:
        say(f"rankjax: survival train={args.train} test={args.test}")
        X, y, s = load_file(args.train, args, flag="--train")
        Xt, yt, st = load_file(args.test, args, num_features=X.shape[1], flag="--test")
        (t, e), (tt, et) = times(y, args.train, "--train"), times(yt, args.test, "--test")
    else:
        from ..io.synthetic import make_survival_data
        say(f"rankjax: built-in censored survival data (seed {args.seed})")
        d, dt = make_survival_data(800, seed=args.seed), make_survival_data(400, seed=args.seed + 1)
        X, t, e, Xt, tt, et = d.X, d.time, d.event, dt.X, dt.time, dt.event
        s = st = np.zeros(X.shape[0], np.int64)
        st = np.zeros(Xt.shape[0], np.int64)
    strata = None if np.unique(s).size == 1 else s
    say(f"  train {X.shape[0]} patients x {X.shape[1]} features, {int(e.sum())} events"
        f"{'' if strata is None else f', {np.unique(s).size} strata'}; test {Xt.shape[0]} "
        f"patients, {int(et.sum())} events")
    return X, t, e, strata, Xt, tt, et, (None if strata is None else st)


def fit_survival(args):
    """``(model, result, metrics)``: :class:`~rankjax.estimators.SurvivalRankRLSCV` with λ by
    ``--folds`` k-fold over patients (default 5), the grid extended past an edge."""
    from ..estimators import SurvivalRankRLSCV
    from .learn import extension
    if args.folds == "loo":
        raise UsageError("--learner survival chooses λ by k-fold over patients: give --folds k")
    X, t, e, s, Xt, tt, et, st = survival_data(args)
    opts = dict(folds=args.folds or 5, extend=extension(args), random_state=args.seed,
                verbose=0 if args.quiet else 1)
    for name in ("kernel", "gamma"):
        if getattr(args, name) is not None:
            opts[name] = getattr(args, name)
    if args.lams:
        opts["lams"] = tuple(args.lams)
    if args.basis is not None:
        opts["basis"] = None if args.basis == "none" else args.basis
    say(f"  survival: SurvivalRankRLSCV({', '.join(f'{k}={v!r}' for k, v in opts.items())}); "
        "λ by Harrell's C over held-out patients")
    t0 = time.time()
    cv = warned(lambda: SurvivalRankRLSCV(**opts).fit(X, time=t, event=e, strata=s))
    r = cv.cv_results_
    for lam, mg, sc, ext in zip(r["param_lam"], r["param_margin"], r["mean_test_score"],
                                r["extended"]):
        say(f"    margin={mg:<9s}λ={lam:<10.4g} held-out C={sc:.4f}"
            f"{'  (past the grid)' if ext else ''}"
            f"{'  <- chosen' if (lam, mg) == (cv.lam_, cv.margin_) else ''}")
    say(f"  chosen: margin={cv.margin_}, λ={cv.lam_:.4g}, held-out C={cv.best_score_:.4f}; "
        f"fitted in {time.time() - t0:.2f} s")
    metrics = evaluate_survival(cv.predict(Xt), tt, et, st)
    say("  test: " + ", ".join(f"{k}={fmt(v)}" for k, v in metrics.items()))
    result = {"lam": float(cv.lam_), "margin": cv.margin_, "kernel": args.kernel or "linear",
              "cv_harrell_c": round(float(cv.best_score_), 6)}
    return cv, result, metrics
