"""The precision rule swept (issue 75): float32 (x64 off) against float64 over λ x γ x
per-feature scale spreads on two real data sets, every solver. Per point a solver either
answers within 1e-2 on the ordering (the scores centred within each query, relative L2:
:func:`lib.precision.centred`) or refuses with its code (``unresolved_lambda``, a NaN
lane); an answer outside 1e-2 without its code is a *silent* one, and the rule allows none.

* data: the first 80 queries of ``lambdarank_sample``'s training file and of MQ2008's S1 (the
  next 40 the test rows of fits and paths; hold-outs score their own leave-query-out
  predictions), each column multiplied by ``exp(spread z_j)``, ``z ~ N(0, 1)``: the scale
  distortion of logs, ``spread`` in ``SPREADS``;
* γ: ``GAMMAS`` times ``1 / (n mean var)`` of the scaled columns; λ: ``LAMS``;
* solvers: Primal and Dual (path, hold-out), Nyström with ``BASIS`` rows (path, hold-out),
  Falkon with ``BASIS`` rows and CG (a fit per λ). The linear solvers take no γ: their lines
  cover λ x spread.

    python benchmarks/bench_sweep.py --save benchmarks/lines/sweep.jsonl --readme docs/precision.md  # ~2 min
    python benchmarks/bench_sweep.py --lines benchmarks/lines/sweep.jsonl --readme docs/precision.md

One JSON line per data set, solver and verb: points answered, refused, the largest answered
error, and ``silent`` (answered beyond 1e-2 with ``successful``), which must be 0.
"""
import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import rankjax as rj  # noqa: E402
from lib.blocks import add_arguments, from_lines, in_list_item, rewrite, save_lines  # noqa: E402
from lib.shared import SHARED  # noqa: E402
from lib.timing import emit  # noqa: E402
from lib.precision import centred  # noqa: E402

LAMS = np.logspace(-5, 2, 6)
GAMMAS = np.logspace(-4, 1, 6)
SPREADS = (0.0, 1.5, 3.0)
BASIS = 200
BOUND = 1e-2
QUERIES, TEST_QUERIES = 80, 40


def first_queries(d):
    """``(train, test)`` as ``(X, y, qid)``: the first ``QUERIES`` queries and the next
    ``TEST_QUERIES`` of a read file (rows of a query contiguous)."""
    q = np.asarray(d.qid)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    cut = [starts[QUERIES], starts[QUERIES + TEST_QUERIES]]
    X, y = np.asarray(d.X, np.float64), np.asarray(d.y, np.float64)
    return (X[:cut[0]], y[:cut[0]], q[:cut[0]]), (X[cut[0]:cut[1]], y[cut[0]:cut[1]], q[cut[0]:cut[1]])


def data_sets():
    lr = rj.io.read_svmlight(SHARED / "lambdarank_sample" / "rank.train")
    mq = rj.io.read_svmlight(SHARED / "mq2008" / "S1.txt.gz")
    return {"lambdarank_sample": first_queries(lr), "MQ2008 S1": first_queries(mq)}


def runs(gamma):
    """``{name: (kernel?, call(problem, Xt) -> (codes [L], scores [L, r]), on_test)}``."""
    k = None if gamma is None else rj.gaussian_kernel(gamma)
    lams = LAMS

    def path(solver):
        def call(p, Xt):
            s = rj.path(p, solver, lams=lams)
            return np.asarray(s.result), np.asarray(rj.predict(s.value, Xt))
        return call

    def holdout(solver):
        def call(p, Xt):
            s = rj.holdout(p, solver, lams=lams)
            return np.asarray(s.result), np.asarray(s.value.predictions)
        return call

    def fits(solver):
        def call(p, Xt):
            out = [rj.fit(p, solver, lam=float(lam)) for lam in lams]
            return (np.array([int(s.result) for s in out]),
                    np.stack([np.asarray(rj.predict(s.value, Xt)) for s in out]))
        return call

    if k is None:
        return {"path Primal": (path(rj.Primal()), True), "holdout Primal": (holdout(rj.Primal()), False),
                "fit CG": (fits(rj.CG()), True)}
    return {"path Dual": (path(rj.Dual(k)), True), "holdout Dual": (holdout(rj.Dual(k)), False),
            "path Nystrom": (path(rj.Nystrom(k, BASIS)), True),
            "holdout Nystrom": (holdout(rj.Nystrom(k, BASIS)), False),
            "fit Falkon": (fits(rj.Falkon(k, BASIS)), True)}


def sweep(name, train, test, rng):
    """Per solver: ``[(spread, γ factor, λ, code, error)]``."""
    X, y, q = train
    Xt, _, qt = test
    found = {}
    for spread in SPREADS:
        s = np.exp(spread * rng.standard_normal(X.shape[1]))
        Xs, Xts = X * s, Xt * s
        g0 = 1.0 / (X.shape[1] * max(Xs.var(0).mean(), 1e-300))
        for gf in (None,) + tuple(GAMMAS):
            calls = runs(None if gf is None else gf * g0)
            for what, (call, on_test) in calls.items():
                out = {}
                for dt in (np.float64, np.float32):
                    with jax.enable_x64(dt == np.float64), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        p = rj.Problem(jnp.asarray(Xs, dt), jnp.asarray(y, dt), q)
                        out[dt] = call(p, jnp.asarray(Xts, dt))
                codes, f32 = out[np.float32]
                f64 = out[np.float64][1]
                c32, c64 = centred(f32, qt if on_test else q), centred(f64, qt if on_test else q)
                err = np.linalg.norm(c32 - c64, axis=1) / np.linalg.norm(c64, axis=1)
                for lam, code, e in zip(LAMS, codes, err):
                    found.setdefault(what, []).append((spread, gf, float(lam), int(code), float(e)))
    return found


def table(lines):
    """The README's ``sweep`` block from the lines."""
    rows = ["| data | function | points | answered | refused (their code) | largest answered "
            "error, centred | silent |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for ln in lines:
        err = "–" if ln["max_answered_err"] is None else f"{ln['max_answered_err']:.2g}"
        codes = ", ".join(rj.RESULTS(c).name for c in ln["codes"]) or "–"
        rows.append(f"| {ln['data']} | `{ln['name'].split(':', 1)[1]}` | {ln['points']} | "
                    f"{ln['answered']} | {ln['refused']} ({codes}) | {err} | {ln['silent']} |")
    rows += ["", f"<sub>float32 against float64: λ in `logspace(-5, 2, 6)`, γ in `logspace(-4, 1, 6)` "
             f"over 1/(n mean var), per-feature scale spreads {', '.join(map(str, SPREADS))}; "
             f"first {QUERIES} queries (test rows: the next {TEST_QUERIES}); `silent`: answered "
             "beyond 1e-2 with `successful`; `python benchmarks/bench_sweep.py --lines "
             "benchmarks/lines/sweep.jsonl --readme docs/precision.md`.</sub>"]
    return in_list_item(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="one data set")
    add_arguments(ap, "sweep")
    a = ap.parse_args()
    if from_lines(a, "sweep", table, indent="  "):
        return
    lines = []
    for name, (train, test) in [kv for kv in data_sets().items() if a.only in (None, kv[0])]:
        t0 = time.perf_counter()
        found = sweep(name, train, test, np.random.default_rng(0))
        for what, pts in found.items():
            ok = [p for p in pts if p[3] == int(rj.RESULTS.successful)]
            silent = [p for p in ok if not p[4] <= BOUND]
            refused = [p for p in pts if p[3] != int(rj.RESULTS.successful)]
            line = dict(name=f"sweep:{what}", data=name, dtype="float32 vs float64",
                        shape=list(train[0].shape), points=len(pts), answered=len(ok),
                        refused=len(refused), max_answered_err=max((p[4] for p in ok), default=None),
                        silent=len(silent),
                        silent_points=[[p[0], p[1], round(p[2], 6), round(p[4], 4)] for p in silent],
                        codes=sorted({p[3] for p in refused}), sweep_s=time.perf_counter() - t0)
            emit(**line)
            lines.append(line)
    if a.save:
        save_lines(a.save, lines)
    if a.readme:
        rewrite(a.readme, "sweep", table(lines), indent="  ")


if __name__ == "__main__":
    main()
