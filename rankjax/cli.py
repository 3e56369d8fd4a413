"""The main job: ``python -m rankjax`` (console script ``rankjax``).

Trains the README's recommended learner by default, kernel RankRLS with λ chosen by
exact leave-query-out (``RankRLSCV(kernel="gaussian")``: ``--learner kernel``; its
basis, ``--basis``, and learned kernel, ``--optimize`` and ``--ard``), on an SVMlight
train file, reports NDCG@1/5/10, MAP and pairwise accuracy on a test file, and prints
them as one JSON line (``--json FILE`` also writes it). ``--learner`` picks linear
RankRLS or RLS (λ chosen on held-out training queries, one eigendecomposition for the
whole grid; ``--folds k`` / ``loo`` for exact k-fold / leave-query-out), RankSVM,
RankBoost or CG with early stopping instead. A best λ on the grid's edge extends the
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

import argparse
import json
import os
import re
import sys
import time

import numpy as np

from ._core.sparse import count_nonzero
from .io.files import atomic_write
from .io.models import is_weights


class UsageError(Exception):
    """A problem with the command line or its files: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):                    # one line, no usage block
        raise UsageError(message)


def _parser():
    p = _Parser(prog="rankjax", description=re.sub(r"``([^`]*)``", r"'\1'",
                                                   " ".join(__doc__.split("\n\n")[1].split())))
    p.add_argument("task", nargs="?", choices=["train", "predict"],
                   help="LightGBM's spelling: 'train' (the default task) or 'predict' "
                        "(with --load and --predict or --test)")
    p.add_argument("--train", help="SVMlight/LETOR training file (qid: or a .query file)")
    p.add_argument("--test", help="SVMlight/LETOR test file")
    p.add_argument("--valid-fraction", type=float,
                   help="fraction of training queries held out to choose λ (rankrls, rls) or to "
                        "stop early (cg) (default 0.2)")
    p.add_argument("--lams", type=float, nargs="+",
                   help="λ grid (default: kernel 10^-3 .. 10^3, 13 values; rankrls, rls "
                        "10^-3 .. 10^5, 17 values)")
    p.add_argument("--extend", type=int,
                   help="kernel, rankrls, rls: how many times the grid extends past a best "
                        "λ (or γ) on its edge, each side (default 2; 0: the grid as given)")
    p.add_argument("--kernel", choices=["gaussian", "polynomial"],
                   help="kernel: the kernel (default gaussian)")
    p.add_argument("--gamma", type=_gamma,
                   help="kernel: γ, a number or 'mean' (default), 'scale', 'auto'")
    p.add_argument("--basis", type=_basis,
                   help="kernel: Nyström basis rows, an int, 'auto' (default: a basis past a "
                        "few thousand rows) or 'none' (the exact kernel)")
    p.add_argument("--optimize", action="store_true",
                   help="kernel: learn λ and γ by the gradient of the exact hold-out loss")
    p.add_argument("--ard", action="store_true",
                   help="kernel: also learn one scale per feature (implies --optimize)")
    p.add_argument("--graph", choices=["normalized", "unnormalized", "rls"],
                   help="rankrls/cg: query Laplacian I - P P^T (default), D - W, or pointwise RLS")
    p.add_argument("--exclude-ties", action="store_true", help="drop tied pairs from the loss")
    p.add_argument("--normalize", action="store_true",
                   help="query-wise min-max normalise the features first")
    p.add_argument("--save", help="where to save the trained model (.npz); nothing is saved without it")
    p.add_argument("--load", help="a saved model; with --predict, only score")
    p.add_argument("--predict", help="file to score with --load")
    p.add_argument("--output", help="where --predict writes its scores, one row per line as "
                                    "tab-separated 'qid row score' (stdout if unset)")
    p.add_argument("--seed", type=_seed, help="seed of the split and built-in data (default 0)")
    p.add_argument("--float64", action="store_true", help="compute in float64")
    p.add_argument("--C", type=float, dest="C", help="ranksvm: the loss weight C (default 1)")
    p.add_argument("--rounds", type=int, help="rankboost: boosting rounds (default 100)")
    p.add_argument("--learner", choices=LEARNERS, default="kernel",
                   help="kernel (default, the README's recommended learner: "
                        "RankRLSCV(kernel='gaussian'), λ by exact leave-query-out; --kernel, "
                        "--gamma, --basis, --optimize, --ard), rankrls (linear, λ chosen), rls "
                        "(pointwise RLS, λ chosen), ranksvm (L2 RankSVM, --C), rankboost "
                        "(--rounds), cg (RankRLS by CG, early stopping on the held-out queries)")
    p.add_argument("--folds", type=_folds,
                   help="choose λ by exact k-fold over the training queries (an int k >= 2) or "
                        "leave-query-out ('loo') instead of one held-out split")
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--quiet", action="store_true", help="print only the final JSON line")
    p.add_argument("--version", action="version", version=f"rankjax {_version()}")
    return p


LEARNERS = ("kernel", "rankrls", "rls", "ranksvm", "rankboost", "cg")


def _version():
    from ._version import __version__
    return __version__


def _seed(text):
    try:
        s = int(text)
    except ValueError:
        s = -1
    if not 0 <= s < 2**31:                    # numpy's and the built-in data's seed range
        raise argparse.ArgumentTypeError(f"must be an int in [0, 2^31), got {text!r}")
    return s


def _gamma(text):
    if text in ("mean", "scale", "auto"):
        return text
    try:
        g = float(text)
    except ValueError:
        g = -1.0
    if not (np.isfinite(g) and g > 0):
        raise argparse.ArgumentTypeError(f"must be a number > 0 or 'mean', 'scale', 'auto', "
                                         f"got {text!r}")
    return g


def _basis(text):
    if text in ("auto", "none"):
        return text
    try:
        b = int(text)
    except ValueError:
        b = 0
    if b < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, 'auto' or 'none', got {text!r}")
    return b


def _folds(text):
    if text == "loo":
        return "loo"
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an int >= 2 or 'loo', got {text!r}") from None
    if k < 2:
        raise argparse.ArgumentTypeError(f"must be an int >= 2 or 'loo', got {k}")
    return k


_QUIET = [False]


def _say(msg):
    if not _QUIET[0]:
        print(msg, flush=True)


def _load(path, args, num_features=None, flag="--train"):
    from . import io
    t0 = time.time()
    d = io.read_svmlight(path, num_features=num_features)
    nonzero = count_nonzero(d.X)
    if d.X.shape[0] and nonzero == 0:
        raise UsageError(f"{flag} {path}: no row has a nonzero feature (not an SVMlight/LETOR "
                         "file? a .query file goes beside its data file)")
    dt = max(time.time() - t0, 1e-9)
    _say(f"  read {path}: {d.X.shape[0]} rows in {dt:.2f} s ({d.X.shape[0] / dt:,.0f} rows/s)")
    X = io.normalize_per_query(d.X, d.qid) if args.normalize else d.X
    return X, d.y, d.qid


def _evaluate(scores, y, qid):
    """The test metrics of ``scores`` [m] (floats) or of a multi-output model's
    ``[m, k]`` (one list of k values per metric, output by output)."""
    from .metrics.pairs import pairwise_error
    from .metrics.graded import mean_average_precision, ndcg
    scores = np.asarray(scores)
    if scores.ndim == 2:
        cols = [_evaluate(scores[:, j], y, qid) for j in range(scores.shape[1])]
        return {k: [c[k] for c in cols] for k in cols[0]}
    out = {f"ndcg@{k}": float(ndcg(scores, y, qid, k=k)) for k in (1, 5, 10)}
    out["map"] = float(mean_average_precision(scores, y, qid))
    out["pairwise_accuracy"] = 1 - float(pairwise_error(scores, y, qid))
    return out


def _fmt(v):
    """A metric for the console: ``0.1234`` or, for a multi-output model, ``[0.1234, ...]``."""
    return "[" + ", ".join(f"{x:.4f}" for x in v) + "]" if isinstance(v, list) else f"{v:.4f}"


def _rounded(v):
    return [round(x, 6) for x in v] if isinstance(v, list) else round(v, 6)


def _feature_columns(model):
    """The feature count of a saved library model that scores feature rows (its
    ``num_features``; 0: not recorded, the file decides), or None for a model that does
    not (a dual model, a path: those score a kernel matrix or a whole λ grid)."""
    n = getattr(model, "num_features", None)
    return None if n is None else max(int(n), 0)


def _warned(call):
    """``call()`` with every warning it raises printed as one ``rankjax: warning:`` line."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    for w in caught:
        if issubclass(w.category, UserWarning):
            _warn(" ".join(str(w.message).split()))
    return out


def _extend(args):
    from .selection.select import EXTEND
    return EXTEND if args.extend is None else args.extend


def _select_lambda(X, y, qid, args, lams, **kw):
    """λ by NDCG@10 through :class:`rankjax.estimators.RankRLSCV`: on the held-out
    training queries (its ``eval_set``; one decomposition for the whole grid) or, with
    ``--folds``, by its exact k-fold / leave-query-out over all training queries; the
    grid extended past an edge optimum (``--extend``). Returns the fitted RankRLSCV and
    the numbers of scoring and fitting queries."""
    from .estimators import RankRLSCV

    nq = len(np.unique(qid))
    kw = dict(kw, extend=_extend(args))
    if args.folds is not None:
        cv = _warned(lambda: RankRLSCV(lams, folds=_cv_folds(args, nq), random_state=args.seed,
                                       **kw).fit(X, y, qid=qid))
        return cv, nq, nq
    vmask = _held_out(qid, args)
    cv = _warned(lambda: RankRLSCV(lams, **kw).fit(
        X[~vmask], y[~vmask], qid=qid[~vmask], eval_set=(X[vmask], y[vmask]),
        eval_qid=qid[vmask]))
    n_valid = len(np.unique(qid[vmask]))
    return cv, n_valid, nq - n_valid


def _cv_folds(args, nq):
    if args.folds not in (None, "loo") and args.folds > nq:
        raise UsageError(f"--folds {args.folds} exceeds the {nq} training queries")
    return None if args.folds in (None, "loo") else args.folds


def _grid_report(cv, args, what):
    """The grid's lines (every held-out point, the extensions marked) and, for a grid kept
    as given (``--extend 0``), the edge warning."""
    r = cv.cv_results_
    gam = r.get("param_gamma")
    for j, (lam, sc, ext) in enumerate(zip(r["param_lam"], r["mean_test_score"], r["extended"])):
        g = "" if gam is None else f" γ={gam[j]:<10.4g}"
        chosen = r["rank_test_score"][j] == 1 and lam == cv.lam_
        _say(f"    λ={lam:<10.4g}{g} {what} NDCG@10={sc:.4f}"
             f"{'  (past the grid)' if ext else ''}{'  <- chosen' if chosen else ''}")
    lams = np.asarray(r["param_lam"])
    if _extend(args) == 0 and np.unique(lams).size > 1 and cv.lam_ in (lams.min(), lams.max()):
        _warn(f"the chosen λ={cv.lam_:.4g} is at the "
              f"{'low' if cv.lam_ == lams.min() else 'high'} edge of the grid: widen --lams "
              "or give --extend")


def _held_out(qid, args):
    """Row mask of the ``--valid-fraction`` of training queries held out (seeded)."""
    queries = np.unique(qid)
    n_valid = max(1, int(round(args.valid_fraction * len(queries))))
    if n_valid >= len(queries):
        raise UsageError(f"--valid-fraction {args.valid_fraction} leaves no training query")
    return np.isin(qid, np.random.default_rng(args.seed).choice(queries, n_valid, replace=False))


def _writable(path, flag):
    """Checks, before any work, that ``path`` can be written (not a directory, its
    folder exists and is writable)."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path} is not writable")


_KERNEL = ("kernel", "gamma", "basis", "optimize", "ard")
_APPLIES = {                                   # training flags and the learners they act on
    "lams": ("kernel", "rankrls", "rls"), "folds": ("kernel", "rankrls", "rls"),
    "extend": ("kernel", "rankrls", "rls"), "graph": ("kernel", "rankrls", "cg"),
    "exclude_ties": ("kernel", "rankrls"), "valid_fraction": ("rankrls", "rls", "cg"),
    "C": ("ranksvm",), "rounds": ("rankboost",), **{n: ("kernel",) for n in _KERNEL}}


def _given(args, name):
    v = getattr(args, name)
    return v is not None and v is not False


def _check_flags(args):
    """Every flag acts or is an error: training flags with --load, or with a learner
    they do not apply to."""
    flag = lambda n: "--" + n.replace("_", "-")  # noqa: E731
    if args.load:
        for n in ("lams", "folds", "extend", "graph", "exclude_ties", "valid_fraction", "C",
                  "rounds", *_KERNEL, "normalize", "seed", "save"):
            if _given(args, n):
                raise UsageError(f"{flag(n)} is a training option; --load uses the saved model"
                                 + (" (and its --normalize)" if n == "normalize" else ""))
        if args.learner != "kernel":
            raise UsageError("--learner is a training option; --load uses the saved model")
        return
    for n, learners in _APPLIES.items():
        if _given(args, n) and args.learner not in learners:
            raise UsageError(f"{flag(n)} does not apply to --learner {args.learner} "
                             f"(it is used by {', '.join(learners)})")
    if args.learner == "rls" and args.graph not in (None, "rls"):
        raise UsageError("--learner rls is pointwise RLS: --graph does not apply")
    if args.C is not None and not (np.isfinite(args.C) and args.C > 0):
        raise UsageError(f"--C must be finite and > 0, got {args.C}")
    if args.rounds is not None and args.rounds < 1:
        raise UsageError(f"--rounds must be >= 1, got {args.rounds}")
    if args.extend is not None and args.extend < 0:
        raise UsageError(f"--extend must be >= 0, got {args.extend}")


def _distinct_paths(args):
    """Two outputs never share a path, and no output overwrites an input."""
    real = lambda p: os.path.realpath(p)  # noqa: E731
    outs = [(f, getattr(args, f[2:])) for f in ("--save", "--output", "--json")]
    ins = [(f, getattr(args, f[2:])) for f in ("--train", "--test", "--load", "--predict")]
    outs, ins = [(f, p) for f, p in outs if p], [(f, p) for f, p in ins if p]
    for i, (f, p) in enumerate(outs):
        for g, q in outs[i + 1:] + ins:
            if real(p) == real(q):
                raise UsageError(f"{f} and {g} name the same file {p}: an output may not "
                                 "overwrite another output or an input")


def _check_args(args):
    _check_flags(args)
    if args.valid_fraction is None:
        args.valid_fraction = 0.2
    if args.seed is None:
        args.seed = 0
    if args.graph is None:
        args.graph = "normalized"
    _distinct_paths(args)
    if args.task == "predict" and not args.load:
        raise UsageError("predict scores a file with a saved model: give --load MODEL and "
                         "--predict FILE (or --test FILE)")
    if args.task == "train" and args.load:
        raise UsageError("train fits a model: --load belongs to 'rankjax predict'")
    if args.predict or args.output:
        if not args.load:
            raise UsageError("--predict/--output score a file with a saved model: give --load MODEL")
        if not args.predict:
            raise UsageError("--output needs --predict FILE")
    if args.load:
        if not (args.predict or args.test):
            raise UsageError("--load needs --predict FILE (scores) or --test FILE (evaluation)")
        if args.train or args.save:
            raise UsageError("--load cannot be combined with --train/--save")
        if args.predict and args.test:
            raise UsageError("--load takes one of --predict and --test")
    if bool(args.train) != bool(args.test) and not args.load:
        raise UsageError("give both --train and --test, or neither for the built-in data")
    if not 0 < args.valid_fraction < 1:
        raise UsageError(f"--valid-fraction must be in (0, 1), got {args.valid_fraction}")
    if args.lams is not None and not all(np.isfinite(l_) and l_ > 0 for l_ in args.lams):
        raise UsageError("--lams must all be finite and > 0")
    for path, flag in ((args.train, "--train"), (args.test, "--test"), (args.load, "--load"),
                       (args.predict, "--predict")):
        if path is not None and not os.path.isfile(path):
            raise UsageError(f"{flag} {path}: no such file")
    _writable(args.save, "--save")
    _writable(args.output, "--output")
    _writable(args.json, "--json")



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
    args = _parser().parse_args(argv)
    _QUIET[0] = args.quiet
    _check_args(args)
    import jax
    from ._core.cache import use_disk_cache
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    use_disk_cache()                     # JAX's on-disk program cache (rankjax._core.cache)

    t0 = time.time()
    if args.load:
        return _use_loaded(args, t0)
    X, y, qid, Xt, yt, qt = _data(args)
    if len(np.unique(qid)) < 2:
        raise UsageError("the training data has one query (no qid: fields or .query file?); "
                         "λ is chosen on held-out queries, so at least 2 are needed")
    if args.learner == "kernel":
        model, result = _fit_kernel(args, X, y, qid)
    elif args.learner in ("rankrls", "rls"):
        model, result = _fit_main_job(args, X, y, qid)
    else:
        model, result = _fit_other(args, X, y, qid)
    scores = model.predict(Xt)
    metrics = _evaluate(scores, yt, qt)
    _say("  test: " + ", ".join(f"{k}={_fmt(v)}" for k, v in metrics.items()))
    if args.save:                         # the estimators' model file, for every learner
        model.save(args.save, normalize=bool(args.normalize), cli_learner=args.learner)
        _say(f"  model saved to {args.save}")
    else:
        _say("  model not saved (use --save PATH)")
    _say(f"  {time.time() - t0:.1f} s on {jax.devices()[0].platform}")
    _print_report({"learner": args.learner, **result, **{k: _rounded(v) for k, v in metrics.items()},
             "seconds": round(time.time() - t0, 3)}, args)
    return 0


def _print_report(out, args):
    line = json.dumps(out)
    print(line, flush=True)
    if args.json:
        with atomic_write(args.json) as fh:
            fh.write(line + "\n")


def _warn(msg):
    sys.stderr.write(f"rankjax: warning: {msg}\n")


def _predict_linear(weights, X):
    import jax.numpy as jnp
    from .solvers.models import LinearModel, predict
    return predict(LinearModel(jnp.asarray(weights)), jnp.asarray(X))


def _data(args):
    from .io.synthetic import make_ranking_data
    if args.train:
        _say(f"rankjax: train={args.train} test={args.test}")
        X, y, qid = _load(args.train, args)
        Xt, yt, qt = _load(args.test, args, num_features=X.shape[1], flag="--test")
    else:
        _say(f"rankjax: built-in LETOR-like data (seed {args.seed})")
        tr = make_ranking_data(300, seed=args.seed)
        te = make_ranking_data(100, seed=args.seed + 1, first_qid=300)
        X, y, qid, Xt, yt, qt = tr.X, tr.y, tr.qid, te.X, te.y, te.qid
    _say(f"  train {X.shape[0]} rows x {X.shape[1]} features, {len(np.unique(qid))} queries; "
         f"test {Xt.shape[0]} rows, {len(np.unique(qt))} queries")
    return X, y, qid, Xt, yt, qt


def _fit_main_job(args, X, y, qid):
    from . import estimators
    lams = np.asarray(args.lams if args.lams else 10.0 ** np.arange(-3, 5.5, 0.5))
    rls = args.graph == "rls" or args.learner == "rls"
    kw = dict(graph="identity" if rls else "query", normalized=args.graph == "normalized",
              exclude_ties=bool(args.exclude_ties))
    cv, n_valid, n_fit = _select_lambda(X, y, qid, args, lams, **kw)
    lam = float(cv.lam_)
    how = (f"{'leave-query-out' if args.folds == 'loo' else f'{args.folds}-fold'} over "
           f"{n_valid} training queries" if args.folds is not None else
           f"{n_valid} held-out training queries (fit on {n_fit})")
    _say(f"  {args.learner}, graph={'rls' if args.learner == 'rls' else args.graph}"
         f"{' (ties excluded)' if args.exclude_ties else ''}; λ chosen on {how} by NDCG@10:")
    _grid_report(cv, args, "valid")
    model = estimators.RankRLS(lam=lam, **kw).fit(X, y, qid=qid)
    _say(f"  refit on all training queries with λ={lam:.4g}")
    return model, {"lam": lam}


def _fit_kernel(args, X, y, qid):
    """The README's recommended learner: ``RankRLSCV(kernel="gaussian")`` (λ, γ by exact
    leave-query-out or ``--folds k``, the grid extended past an edge optimum), with
    ``--basis``, ``--optimize`` and ``--ard`` as the estimator's options."""
    from .estimators import RankRLSCV
    nq = len(np.unique(qid))
    opts = dict(kernel=args.kernel or "gaussian", folds=_cv_folds(args, nq),
                optimize=bool(args.optimize or args.ard), ard=bool(args.ard),
                extend=_extend(args), random_state=args.seed,
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
    _say(f"  kernel: RankRLSCV({shown}); λ (and γ) by exact "
         f"{'leave-query-out' if opts['folds'] is None else str(opts['folds']) + '-fold'} "
         f"over {nq} training queries")
    t = time.time()
    cv = _warned(lambda: RankRLSCV(**opts).fit(X, y, qid=qid))
    _grid_report(cv, args, "hold-out")
    basis = getattr(cv, "basis_", None)
    _say(f"  chosen λ={cv.lam_:.4g}, γ={cv.gamma_:.4g}, hold-out NDCG@10={cv.best_score_:.4f}"
         f"{'' if basis is None else f', {len(basis)} basis rows'}; fitted in "
         f"{time.time() - t:.2f} s")
    result = {"lam": float(cv.lam_), "gamma": float(cv.gamma_),
              "cv_ndcg@10": round(float(cv.best_score_), 6),
              "basis": None if basis is None else int(len(basis)),
              "optimize": opts["optimize"], "ard": opts["ard"]}
    return cv, result


def _fit_other(args, X, y, qid):
    from . import estimators
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
        vmask = _held_out(qid, args)
        model = estimators.RankRLS(lam=0.0, solver="cg",
                                   normalized=args.graph != "unnormalized").fit(
            X[~vmask], y[~vmask], qid=qid[~vmask], eval_set=(X[vmask], y[vmask]),
            eval_qid=qid[vmask])
        result = {"best_iteration": model.best_iteration_}
    dt = max(time.time() - t, 1e-9)
    _say(f"  {args.learner} fitted in {dt:.2f} s ({X.shape[0] / dt:,.0f} rows/s)")
    return model, result


def _use_loaded(args, t0):
    """``--load`` with ``--predict`` (scores with qid and row columns) or ``--test``
    (evaluation on a labelled file)."""
    from . import io, estimators
    model, meta = io.load_model(args.load)
    if isinstance(model, dict) and meta.get("learner") in estimators.__all__:
        est = estimators.load(args.load)
        n, score = est.n_features_in_, est.predict
    elif is_weights(model):                # weights saved by an older command line
        n = model.shape[0]
        score = lambda X: np.asarray(_predict_linear(model, X))  # noqa: E731
    elif _feature_columns(model) is not None:      # a library model saved by io.save_model
        from .solvers.models import predict
        n = _feature_columns(model) or None
        score = lambda X: np.asarray(predict(model, X))  # noqa: E731
    else:
        raise UsageError(f"--load {args.load} holds a {type(model).__name__}, not a model that "
                         "scores feature rows (a LinearModel, KernelModel, ScaledModel, "
                         "FalkonModel, RankSVMKernelModel or RankBoostModel, or an estimator)")
    path = args.test or args.predict
    if args.predict and not args.output:
        _QUIET[0] = True                    # stdout carries the scores
    X, y, qid = _load(path, argparse.Namespace(normalize=bool(meta.get("normalize"))),
                      num_features=n, flag="--test" if args.test else "--predict")
    scores = score(X)
    if args.test:
        metrics = _evaluate(scores, y, qid)
        _say(f"  {args.load} on {path}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in metrics.items()))
        _print_report({**{k: _rounded(v) for k, v in metrics.items()},
                 "seconds": round(time.time() - t0, 3)}, args)
        return 0
    cols = np.asarray(scores).reshape(len(qid), -1)          # a multi-output model: k columns
    text = "".join(f"{q}\t{i}\t" + "\t".join(f"{v:.8g}" for v in row) + "\n"
                   for i, (q, row) in enumerate(zip(qid, cols)))
    if args.output:
        with atomic_write(args.output) as fh:
            fh.write(text)
        _say(f"scored {len(scores)} rows of {args.predict} -> {args.output} (qid, row, score)")
    else:
        sys.stdout.write(text)
    if args.json:                            # the summary; stdout keeps only the scores
        with atomic_write(args.json) as fh:
            fh.write(json.dumps({"rows": int(len(scores)), "queries": int(len(np.unique(qid))),
                                 "predict": args.predict, "output": args.output or "stdout",
                                 "seconds": round(time.time() - t0, 3)}) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
