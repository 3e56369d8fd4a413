"""The main job's learners: the README's recommended kernel RankRLS
(``RankRLSCV(kernel="gaussian")``), linear RankRLS or RLS with λ chosen on held-out
queries or by exact k-fold / leave-query-out, RankSVM, RankBoost and early-stopped CG."""
from __future__ import annotations

import time

import numpy as np

from .args import UsageError
from .console import say, warn, warned

__all__ = ["fit_kernel", "fit_main_job", "fit_other"]


def extension(args):
    from ..selection.edges import EXTEND
    return EXTEND if args.extend is None else args.extend


def select_lambda(X, y, qid, args, lams, **kw):
    """λ by NDCG@10 through :class:`rankjax.estimators.RankRLSCV`: on the held-out
    training queries (its ``eval_set``; one decomposition for the whole grid) or, with
    ``--folds``, by its exact k-fold / leave-query-out over all training queries; the
    grid extended past an edge optimum (``--extend``). Returns the fitted RankRLSCV and
    the numbers of scoring and fitting queries."""
    from ..estimators import RankRLSCV

    nq = len(np.unique(qid))
    kw = dict(kw, extend=extension(args))
    if args.folds is not None:
        cv = warned(lambda: RankRLSCV(lams, folds=cv_folds(args, nq), random_state=args.seed,
                                       **kw).fit(X, y, qid=qid))
        return cv, nq, nq
    vmask = held_out(qid, args)
    cv = warned(lambda: RankRLSCV(lams, **kw).fit(
        X[~vmask], y[~vmask], qid=qid[~vmask], eval_set=(X[vmask], y[vmask]),
        eval_qid=qid[vmask]))
    n_valid = len(np.unique(qid[vmask]))
    return cv, n_valid, nq - n_valid


def cv_folds(args, nq):
    if args.folds not in (None, "loo") and args.folds > nq:
        raise UsageError(f"--folds {args.folds} exceeds the {nq} training queries")
    return None if args.folds in (None, "loo") else args.folds


def grid_report(cv, args, what):
    """The grid's lines (every held-out point, the extensions marked) and, for a grid kept
    as given (``--extend 0``), the edge warning."""
    r = cv.cv_results_
    gam, wt = r.get("param_gamma"), r.get("param_kernel_weight")
    many = len(set(zip(r["param_features"], r["param_kernel"]))) > 1
    for j, (lam, sc, ext) in enumerate(zip(r["param_lam"], r["mean_test_score"], r["extended"])):
        g = "" if gam is None or np.isnan(gam[j]) else f" γ={gam[j]:<10.4g}"
        g += "" if wt is None or np.isnan(wt[j]) else f" kernel weight={wt[j]:<6.3g}"
        who = (f"{r['param_features'][j]}, {r['param_kernel'][j]}"
               f"{' (screen)' if r['stage'][j] == 'screen' else ''}: " if many else "")
        chosen = r["rank_test_score"][j] == 1 and lam == cv.lam_
        say(f"    {who}λ={lam:<10.4g}{g} {what} NDCG@10={sc:.4f}"
             f"{'  (past the grid)' if ext else ''}{'  <- chosen' if chosen else ''}")
    lams = np.asarray(r["param_lam"])
    if extension(args) == 0 and np.unique(lams).size > 1 and cv.lam_ in (lams.min(), lams.max()):
        warn(f"the chosen λ={cv.lam_:.4g} is at the "
              f"{'low' if cv.lam_ == lams.min() else 'high'} edge of the grid: widen --lams "
              "or give --extend")


def held_out(qid, args):
    """Row mask of the ``--valid-fraction`` of training queries held out (seeded)."""
    queries = np.unique(qid)
    n_valid = max(1, int(round(args.valid_fraction * len(queries))))
    if n_valid >= len(queries):
        raise UsageError(f"--valid-fraction {args.valid_fraction} leaves no training query")
    return np.isin(qid, np.random.default_rng(args.seed).choice(queries, n_valid, replace=False))


def fit_main_job(args, X, y, qid):
    from .. import estimators
    lams = np.asarray(args.lams if args.lams else 10.0 ** np.arange(-3, 5.5, 0.5))
    rls = args.graph == "rls" or args.learner == "rls"
    kw = dict(graph="identity" if rls else "query", normalized=args.graph == "normalized",
              exclude_ties=bool(args.exclude_ties))
    cv, n_valid, n_fit = select_lambda(X, y, qid, args, lams, **kw)
    lam = float(cv.lam_)
    how = (f"{'leave-query-out' if args.folds == 'loo' else f'{args.folds}-fold'} over "
           f"{n_valid} training queries" if args.folds is not None else
           f"{n_valid} held-out training queries (fit on {n_fit})")
    say(f"  {args.learner}, graph={'rls' if args.learner == 'rls' else args.graph}"
         f"{' (ties excluded)' if args.exclude_ties else ''}; λ chosen on {how} by NDCG@10:")
    grid_report(cv, args, "valid")
    model = estimators.RankRLS(lam=lam, **kw).fit(X, y, qid=qid)
    say(f"  refit on all training queries with λ={lam:.4g}")
    return model, {"lam": lam}


def fit_kernel(args, X, y, qid):
    """The README's recommended learner: ``RankRLSCV(kernel="gaussian")`` (λ, γ by exact
    leave-query-out or ``--folds k``, the grid extended past an edge optimum), with
    ``--basis``, ``--optimize`` and ``--ard`` as the estimator's options."""
    from ..estimators import RankRLSCV
    nq = len(np.unique(qid))
    opts = dict(kernel=args.kernel or "gaussian", folds=cv_folds(args, nq),
                optimize=bool(args.optimize or args.ard), ard=bool(args.ard),
                extend=extension(args), random_state=args.seed,
                graph="query", normalized=args.graph != "unnormalized",
                exclude_ties=bool(args.exclude_ties), verbose=0 if args.quiet else 1)
    if args.lams:
        opts["lams"] = tuple(args.lams)
    if args.gamma is not None:
        opts["gamma"] = args.gamma
    if args.basis is not None:
        opts["basis"] = None if args.basis == "none" else args.basis
    shown = ", ".join(f"{k}={v!r}" for k, v in opts.items()
                      if k in ("kernel", "gamma", "basis", "optimize", "ard", "folds", "lams"))
    say(f"  kernel: RankRLSCV({shown}); λ (and γ) by exact "
         f"{'leave-query-out' if opts['folds'] is None else str(opts['folds']) + '-fold'} "
         f"over {nq} training queries")
    t = time.time()
    cv = warned(lambda: RankRLSCV(**opts).fit(X, y, qid=qid))
    grid_report(cv, args, "hold-out")
    basis = getattr(cv, "basis_", None)
    best = cv.best_params_
    gamma = getattr(cv, "gamma_", None)
    blend = ("" if "kernel_weight" not in best else
             f", kernel weight={best['kernel_weight']:.3g}, linear λ={best['linear_lam']:.4g}")
    say(f"  chosen: {best['kernel']} on {best['features']}, λ={cv.lam_:.4g}"
         f"{'' if gamma is None else f', γ={gamma:.4g}'}{blend}"
         f", hold-out NDCG@10={cv.best_score_:.4f}"
         f"{'' if basis is None else f', {len(basis)} basis rows'}; fitted in "
         f"{time.time() - t:.2f} s")
    result = {"lam": float(cv.lam_), "gamma": None if gamma is None else float(gamma),
              "kernel": best["kernel"], "features": best["features"],
              "cv_ndcg@10": round(float(cv.best_score_), 6),
              "basis": None if basis is None else int(len(basis)),
              "optimize": opts["optimize"], "ard": opts["ard"],
              **{k: float(best[k]) for k in ("kernel_weight", "linear_lam") if k in best}}
    return cv, result


def fit_other(args, X, y, qid):
    from .. import estimators
    t = time.time()
    if args.learner == "ranksvm":
        C = 1.0 if args.C is None else args.C
        model = estimators.RankSVM(C=C).fit(X, y, qid=qid)
        result = {"C": C}
    elif args.learner == "rankboost":
        rounds = 100 if args.rounds is None else args.rounds
        model = estimators.RankBoost(rounds=rounds).fit(X, y, qid=qid)
        result = {"rounds": rounds}
    else:                                              # cg: early stopping on held-out queries
        vmask = held_out(qid, args)
        model = estimators.RankRLS(lam=0.0, solver="cg",
                                   normalized=args.graph != "unnormalized").fit(
            X[~vmask], y[~vmask], qid=qid[~vmask], eval_set=(X[vmask], y[vmask]),
            eval_qid=qid[vmask])
        result = {"best_iteration": model.best_iteration_}
    dt = max(time.time() - t, 1e-9)
    say(f"  {args.learner} fitted in {dt:.2f} s ({X.shape[0] / dt:,.0f} rows/s)")
    return model, result
