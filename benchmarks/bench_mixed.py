"""Issue 88's acceptance measured: hold-outs over ``logspace(-4, 3, 15)`` of Primal, Dual
(Gaussian, γ = 1/n and 0.1/n) and Nyström (the same kernels, a basis of 1,000 rows evenly
spaced) on ``lambdarank_sample`` (normalised per query) and MQ2008 S1, leave-query-out, in
float32 (x64 off) against float64. One JSON line per data set and solver: the lanes float64
answers, those float32 answers, the *missed* ones (answered in float64, refused or beyond
1e-2 in float32), the *silent* ones (float32 answered beyond 1e-2: the rule allows none), the
largest answered error on the ordering (:func:`lib.precision.centred`: scores centred within
each query, relative L2) and the warm seconds of each dtype (median of 3 after a first call,
compile included in ``first_s``) with their ratio.

    python benchmarks/bench_mixed.py --save benchmarks/lines/mixed.jsonl        # ~3 min
    python benchmarks/bench_mixed.py --only mq2008 --solvers Dual
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
from lib.blocks import save_lines  # noqa: E402
from lib.precision import centred  # noqa: E402
from lib.shared import SHARED  # noqa: E402
from lib.timing import emit, median_s  # noqa: E402

LAMS = np.logspace(-4, 3, 15)
BOUND = 1e-2


def data(name):
    """``(X, y, qid)`` of a shared set, or None where it is absent."""
    if name == "lambdarank_sample":
        path = SHARED / "lambdarank_sample" / "rank.train"
        if not path.exists():
            return None
        d = rj.io.read_svmlight(path)
        return (np.asarray(rj.io.normalize_per_query(d.X, d.qid)), np.asarray(d.y, float),
                np.asarray(d.qid))
    path = SHARED / "mq2008" / "S1.txt.gz"
    if not path.exists():
        return None
    d = rj.io.read_svmlight(path)
    return np.asarray(d.X, float), np.asarray(d.y, float), np.asarray(d.qid)


def solvers(m, n):
    """``{name: solver}``: Primal, and Dual and Nyström at γ = 1/n and 0.1/n."""
    out = {"Primal": rj.Primal()}
    for g in (1.0, 0.1):
        k = rj.gaussian_kernel(g / n)
        out[f"Dual γ={g:g}/n"] = rj.Dual(k)
        out[f"Nystrom γ={g:g}/n"] = rj.Nystrom(k, np.arange(1000) * (m // 1000))
    return out


def holdout(X, y, qid, solver, dtype):
    """``(predictions [L, m] as float64, first s, warm s)`` of the hold-out in ``dtype``."""
    with jax.enable_x64(dtype == np.float64), warnings.catch_warnings():
        warnings.simplefilter("ignore", rj.UnresolvedLambdaWarning)
        p = rj.Problem(jnp.asarray(X, dtype), jnp.asarray(y, dtype), rj.query_graph(qid))
        lams = jnp.asarray(LAMS, dtype)
        call = lambda: rj.holdout(p, solver, lams=lams).value.predictions   # noqa: E731
        t0 = time.perf_counter()
        out = jax.block_until_ready(call())
        first = time.perf_counter() - t0
        return np.asarray(out, np.float64), first, median_s(call, repeats=3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="lambdarank_sample or mq2008")
    ap.add_argument("--solvers", help="a part of the solvers' names (Primal, Dual, Nystrom)")
    ap.add_argument("--save", help="write the run's JSON lines to this file (atomically)")
    a = ap.parse_args()
    found = []
    for name in ("lambdarank_sample", "mq2008"):
        d = None if a.only not in (None, name) else data(name)
        if d is None:
            continue
        X, y, qid = d
        for sname, solver in solvers(*X.shape).items():
            if a.solvers and a.solvers not in sname:
                continue
            o64, f64, t64 = holdout(X, y, qid, solver, np.float64)
            o32, f32, t32 = holdout(X, y, qid, solver, np.float32)
            c64, c32 = centred(o64, qid), centred(o32, qid)
            ans64 = np.isfinite(o64).all(axis=1)
            ans32 = np.isfinite(o32).all(axis=1)
            with np.errstate(invalid="ignore"):
                err = np.linalg.norm(c32 - c64, axis=1) / np.linalg.norm(c64, axis=1)
            good = ans32 & (err <= BOUND)
            line = dict(name=f"mixed:holdout {sname}", data=name, shape=list(X.shape),
                        dtype="float32 vs float64", lams=len(LAMS),
                        float64_answered=int(ans64.sum()), float32_answered=int(ans32.sum()),
                        missed=int((ans64 & ~good).sum()), silent=int((ans32 & ~good).sum()),
                        refused_lams=[float(f"{v:.3g}") for v in LAMS[ans64 & ~ans32]],
                        max_answered_err=float(err[ans32].max()) if ans32.any() else None,
                        bound=BOUND, float32_first_s=f32, float64_first_s=f64,
                        float32_run_s=t32, float64_run_s=t64, ratio=round(t32 / t64, 3))
            emit(**line)
            found.append(line)
    if a.save:
        save_lines(a.save, found)


if __name__ == "__main__":
    main()
