"""The main job's command line: the parser, the flags' types and the checks made before
any work (every flag acts or is an error; outputs writable, distinct and not inputs)."""
from __future__ import annotations

import argparse
import os
import re

import numpy as np

__all__ = ["UsageError", "LEARNERS", "parser", "check_args"]


class UsageError(Exception):
    """A problem with the command line or its files: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):                    # one line, no usage block
        raise UsageError(message)


def parser(doc):
    """The argument parser; ``doc`` the main job's docstring (its second paragraph, the
    description)."""
    p = _Parser(prog="rankjax", description=re.sub(r"``([^`]*)``", r"'\1'",
                                                   " ".join(doc.split("\n\n")[1].split())))
    p.add_argument("task", nargs="?", choices=["train", "predict"],
                   help="LightGBM's spelling: 'train' (the default task) or 'predict' "
                        "(with --load and --predict or --test)")
    p.add_argument("--train", help="SVMlight/LETOR training file (qid: or a .query file); "
                                   "--learner survival: the label is the time, negative for a "
                                   "censored one (XGBoost's survival:cox), qid: the strata")
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
    p.add_argument("--gamma", type=gamma_arg,
                   help="kernel: γ, a number or 'mean' (default), 'scale', 'auto'")
    p.add_argument("--basis", type=basis_arg,
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
    p.add_argument("--seed", type=seed_arg, help="seed of the split and built-in data (default 0)")
    p.add_argument("--float64", action="store_true", help="compute in float64")
    p.add_argument("--sparse", action="store_true",
                   help="keep the rows sparse (files whose dense rows do not fit in memory; "
                        "learners rankrls, rls, cg)")
    p.add_argument("--C", type=float, dest="C", help="ranksvm: the loss weight C (default 1)")
    p.add_argument("--rounds", type=int, help="rankboost: boosting rounds (default 100)")
    p.add_argument("--learner", choices=LEARNERS, default="kernel",
                   help="kernel (default, the README's recommended learner: "
                        "RankRLSCV(kernel='gaussian'), λ by exact leave-query-out; --kernel, "
                        "--gamma, --basis, --optimize, --ard), rankrls (linear, λ chosen), rls "
                        "(pointwise RLS, λ chosen), ranksvm (L2 RankSVM, --C), rankboost "
                        "(--rounds), cg (RankRLS by CG, early stopping on the held-out queries), "
                        "survival (patients by risk from censored times: SurvivalRankRLSCV, "
                        "linear or --kernel, λ by k-fold over patients, Harrell's C)")
    p.add_argument("--folds", type=folds_arg,
                   help="choose λ by exact k-fold over the training queries (an int k >= 2) or "
                        "leave-query-out ('loo') instead of one held-out split")
    p.add_argument("--json", help="also write the results as JSON to this file")
    p.add_argument("--quiet", action="store_true", help="print only the final JSON line")
    p.add_argument("--version", action="version", version=f"rankjax {version()}")
    return p


LEARNERS = ("kernel", "rankrls", "rls", "ranksvm", "rankboost", "cg", "survival")
SPARSE_LEARNERS = ("rankrls", "rls", "cg")
"""The learners that train on sparse rows (``--sparse``)."""


def version():
    from .._version import __version__
    return __version__


def seed_arg(text):
    try:
        s = int(text)
    except ValueError:
        s = -1
    if not 0 <= s < 2**31:                    # numpy's and the built-in data's seed range
        raise argparse.ArgumentTypeError(f"must be an int in [0, 2^31), got {text!r}")
    return s


def gamma_arg(text):
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


def basis_arg(text):
    if text in ("auto", "none"):
        return text
    try:
        b = int(text)
    except ValueError:
        b = 0
    if b < 1:
        raise argparse.ArgumentTypeError(f"must be an int >= 1, 'auto' or 'none', got {text!r}")
    return b


def folds_arg(text):
    if text == "loo":
        return "loo"
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an int >= 2 or 'loo', got {text!r}") from None
    if k < 2:
        raise argparse.ArgumentTypeError(f"must be an int >= 2 or 'loo', got {k}")
    return k


def writable(path, flag):
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
    "lams": ("kernel", "rankrls", "rls", "survival"),
    "folds": ("kernel", "rankrls", "rls", "survival"),
    "extend": ("kernel", "rankrls", "rls", "survival"), "graph": ("kernel", "rankrls", "cg"),
    "exclude_ties": ("kernel", "rankrls"), "valid_fraction": ("rankrls", "rls", "cg"),
    "C": ("ranksvm",), "rounds": ("rankboost",), "sparse": SPARSE_LEARNERS,
    **{n: ("kernel",) for n in _KERNEL}, **{n: ("kernel", "survival") for n in _KERNEL[:3]}}


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


def check_args(args):
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
    writable(args.save, "--save")
    writable(args.output, "--output")
    writable(args.json, "--json")
