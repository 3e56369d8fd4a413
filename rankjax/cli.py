"""The main job: ``python -m rankjax`` (console script ``rankjax``).

Trains query RankRLS (primal, linear) on an SVMlight train file, picks λ on
held-out training queries by NDCG@10 (one eigendecomposition serves the whole
λ grid), refits on all training queries, reports NDCG@1/5/10, MAP and pairwise
accuracy on a test file and saves the model. ``--load`` + ``--predict`` scores a
new file with a saved model. Without data arguments it runs on built-in
LETOR-like data (fixed seed). A model file is written only with ``--save``.

Errors (bad arguments, unreadable or malformed files, unwritable outputs) print one
line ``rankjax: error: ...`` on stderr and exit with status 2; outputs are checked
before any training and written atomically.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


class UsageError(Exception):
    """A problem with the command line or its files: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):                    # one line, no usage block
        raise UsageError(message)


def _parser():
    p = _Parser(prog="rankjax", description=__doc__.split("\n\n")[0])
    p.add_argument("--train", help="SVMlight/LETOR training file (qid: or a .query file)")
    p.add_argument("--test", help="SVMlight/LETOR test file")
    p.add_argument("--valid-fraction", type=float, default=0.2,
                   help="fraction of training queries held out to choose λ (default 0.2)")
    p.add_argument("--lams", type=float, nargs="+",
                   help="λ grid (default: 10^-3 .. 10^5, 17 values)")
    p.add_argument("--graph", choices=["normalized", "unnormalized", "rls"], default="normalized",
                   help="query Laplacian I - P P^T (default), D - W, or pointwise RLS")
    p.add_argument("--exclude-ties", action="store_true", help="drop tied pairs from the loss")
    p.add_argument("--normalize", action="store_true",
                   help="query-wise min-max normalise the features first")
    p.add_argument("--save", help="where to save the trained model (.npz); nothing is saved without it")
    p.add_argument("--load", help="a saved model; with --predict, only score")
    p.add_argument("--predict", help="file to score with --load")
    p.add_argument("--output", help="where --predict writes one score per line (stdout if unset)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split and built-in data")
    p.add_argument("--float64", action="store_true", help="compute in float64")
    return p


def _say(msg):
    print(msg, flush=True)


def _load(path, args, num_features=None):
    from . import io
    d = io.read_svmlight(path, num_features=num_features)
    X = io.normalize_per_query(d.X, d.qid) if args.normalize else d.X
    return X, d.y, d.qid


def _graph(args, qid, y):
    from . import identity_graph, query_graph
    if args.graph == "rls":
        return identity_graph(len(y))
    return query_graph(qid, y, normalized=args.graph == "normalized",
                       exclude_ties=args.exclude_ties)


def _evaluate(scores, y, qid):
    from . import mean_average_precision, ndcg, pairwise_error
    out = {f"ndcg@{k}": float(ndcg(scores, y, qid, k=k)) for k in (1, 5, 10)}
    out["map"] = float(mean_average_precision(scores, y, qid))
    out["pairwise_accuracy"] = 1 - float(pairwise_error(scores, y, qid))
    return out


def _select_lambda(X, y, qid, args, lams):
    """NDCG@10 on held-out training queries for every λ, from one eigh."""
    from . import ndcg, rankrls_primal_path, select_lambda

    rng = np.random.default_rng(args.seed)
    queries = np.unique(qid)
    n_valid = max(1, int(round(args.valid_fraction * len(queries))))
    if n_valid >= len(queries):
        raise UsageError(f"--valid-fraction {args.valid_fraction} leaves no training query")
    valid_q = rng.choice(queries, n_valid, replace=False)
    vmask = np.isin(qid, valid_q)
    fit = ~vmask
    path = rankrls_primal_path(X[fit], y[fit], _graph(args, qid[fit], y[fit]), lams=lams,
                               X_valid=X[vmask])
    sel = select_lambda(lams, path.valid_scores, y[vmask], qid[vmask], metric=ndcg, k=10)
    return np.asarray(sel.table), int(sel.best_index), n_valid, len(queries) - n_valid


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


def _check_args(args):
    if args.predict or args.output:
        if not args.load:
            raise UsageError("--predict/--output score a file with a saved model: give --load MODEL")
        if not args.predict:
            raise UsageError("--output needs --predict FILE")
    if args.load:
        if not args.predict:
            raise UsageError("--load needs --predict FILE")
        if args.train or args.test or args.save:
            raise UsageError("--load/--predict cannot be combined with --train/--test/--save")
    if bool(args.train) != bool(args.test):
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
    _check_args(args)
    import jax
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from . import LinearModel, predict, rankrls_primal
    from . import io
    from ._synthetic import make_ranking_data

    t0 = time.time()
    if args.load:
        weights, meta = io.load_model(args.load)
        X, y, qid = _load(args.predict, argparse.Namespace(normalize=bool(meta.get("normalize"))),
                          num_features=weights.shape[0])
        scores = np.asarray(predict(LinearModel(jnp.asarray(weights)), X))
        text = "\n".join(f"{s:.8g}" for s in scores) + "\n"
        if args.output:
            with io._atomic(args.output) as fh:
                fh.write(text)
            _say(f"scored {len(scores)} rows of {args.predict} -> {args.output}")
        else:
            sys.stdout.write(text)
        return 0

    if args.train:
        X, y, qid = _load(args.train, args)
        Xt, yt, qt = _load(args.test, args, num_features=X.shape[1])
        source = f"train={args.train} test={args.test}"
    else:
        tr = make_ranking_data(300, seed=args.seed)
        te = make_ranking_data(100, seed=args.seed + 1, first_qid=300)
        X, y, qid, Xt, yt, qt = tr.X, tr.y, tr.qid, te.X, te.y, te.qid
        source = f"built-in LETOR-like data (seed {args.seed})"
    if len(np.unique(qid)) < 2:
        raise UsageError("the training data has one query (no qid: fields or .query file?); "
                         "λ is chosen on held-out queries, so at least 2 are needed")
    _say(f"rankjax: {source}")
    _say(f"  train {X.shape[0]} rows x {X.shape[1]} features, {len(np.unique(qid))} queries; "
         f"test {Xt.shape[0]} rows, {len(np.unique(qt))} queries")
    lams = np.asarray(args.lams if args.lams else 10.0 ** np.arange(-3, 5.5, 0.5))
    per_lam, best, n_valid, n_fit = _select_lambda(X, y, qid, args, lams)
    lam = float(lams[best])
    _say(f"  graph={args.graph}{' (ties excluded)' if args.exclude_ties else ''}; "
         f"λ chosen on {n_valid} held-out training queries (fit on {n_fit}) by NDCG@10:")
    for l_, s in zip(lams, per_lam):
        _say(f"    λ={l_:<10.4g} valid NDCG@10={s:.4f}{'  <- chosen' if l_ == lam else ''}")
    model = rankrls_primal(jnp.asarray(X), jnp.asarray(y), _graph(args, qid, y), lam=lam)
    metrics = _evaluate(np.asarray(predict(model, jnp.asarray(Xt))), yt, qt)
    _say(f"  refit on all training queries with λ={lam:.4g}; test: " +
         ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    if args.save:
        io.save_model(args.save, np.asarray(model.weights), lam=lam, graph=args.graph,
                      exclude_ties=args.exclude_ties, normalize=args.normalize)
        _say(f"  model saved to {args.save}")
    else:
        _say("  model not saved (use --save PATH)")
    _say(f"  {time.time() - t0:.1f} s on {jax.devices()[0].platform}")
    print(json.dumps({"lam": lam, **{k: round(v, 6) for k, v in metrics.items()},
                      "seconds": round(time.time() - t0, 3)}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
