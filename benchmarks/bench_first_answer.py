"""The first answer (issue 43): what a user's first ``fit`` in a fresh process costs.

On ``lambdarank_sample`` (3,005 training rows in 201 queries, 300 features normalised
to [0, 1] per query; test 768 rows), float32 (JAX's default), every learner runs in
fresh processes, the same inputs:

* ``first_s``: the first fit of a fresh process with an empty compilation cache,
* ``first_cached_s``: the first fit of another fresh process once that cache is filled
  (the estimators keep their programs in JAX's on-disk cache, ``rankjax.runtime.cache``),
* ``warm_s``: the median of 3 more fits of the same shapes in that process,
* ``third_s``: then a fit on the first 2,400 rows (other shapes),

with the number of programs XLA compiled (``compiles_*``: a program read back from the
disk cache is not counted), the peak resident memory of its processes (``peak_rss_mb``)
and test NDCG@10 (rankjax's ``ndcg``), beside LightGBM and
XGBoost in the same run (they compile nothing), at their defaults and tuned on the training
queries alone (:data:`lib.trees.GRID` by 3-fold GroupKFold; the search is in their fit time; one
process, one warm fit). One JSON line per learner, and one for the warm kernel fit's floor
(LAPACK's ``eigh`` of the dual system the fit decomposes at its γ, :func:`floor`, in a
process of its own; and the kernel fit and that ``eigh`` alternated in the kernel's
second process, :func:`paired`, the ratio without the drift between processes).
``--save`` writes the lines (committed: ``benchmarks/lines/first_answer.jsonl``) and ``--readme``
rewrites the README's first table (between the ``first-answer`` markers) from this run's
lines, or from saved lines alone (``--lines``), byte for byte on any machine.

    python benchmarks/bench_first_answer.py --save benchmarks/lines/first_answer.jsonl  # ~10 min
    python benchmarks/bench_first_answer.py --lines benchmarks/lines/first_answer.jsonl \
        --readme docs/which_solver.md
"""
import argparse
import json
import logging
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from lib.shared import SHARED, sizes
from lib.trees import GRID, trees, tuned

SAMPLE = SHARED / "lambdarank_sample"
LEARNERS = ("rankjax RankRLSCV(kernel=\"gaussian\")", "rankjax RankRLSCV()",
            "LightGBM LGBMRanker()", "XGBoost XGBRanker()",
            "LightGBM LGBMRanker(), tuned", "XGBoost XGBRanker(), tuned")
THIRD = 2400


class _Count(logging.Handler):
    """Counts the programs XLA compiles (cache hits log another line)."""

    def __init__(self):
        super().__init__()
        self.compiled = 0

    def emit(self, record):
        text = record.getMessage()
        if text.startswith("Finished XLA compilation"):
            self.compiled += 1
        elif text.startswith("Persistent compilation cache hit"):
            self.compiled -= 1          # the line above follows a hit too


def _learner(name):
    if name.startswith("rankjax"):
        from rankjax.estimators import RankRLSCV
        kernel = "gaussian" if "gaussian" in name else None
        return lambda X, y, q: RankRLSCV(kernel=kernel).fit(X, y, qid=q).predict
    if name.endswith("tuned"):
        import sklearn  # noqa: F401          (GroupKFold: the [bench] extra)
        return tuned(name)
    return trees(name)


def _train():
    """``(svmlight data, X [3005, 300] float32 normalised to [0, 1] per query)``."""
    import numpy as np
    import rankjax as rj
    tr = rj.io.read_svmlight(SAMPLE / "rank.train")
    return tr, np.asarray(rj.io.normalize_per_query(tr.X, tr.qid), np.float32)


def child(name):
    """One fresh process: first fit, 3 warm fits, the third shape; prints one JSON line.
    ``BENCH_NO_STORE=1``: JAX's disk cache alone, rankjax's store of whole programs off."""
    t_start = time.perf_counter()
    import jax
    if os.environ.get("BENCH_NO_STORE") == "1":
        import rankjax.runtime.programs as programs
        programs.turn_on = lambda folder: None
    count = _Count()
    jax.config.update("jax_log_compiles", True)
    log = logging.getLogger("jax")
    log.addHandler(count)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    import numpy as np
    import rankjax as rj
    tr, X = _train()
    te = rj.io.read_svmlight(SAMPLE / "rank.test", num_features=tr.X.shape[1], drop_extra=True)
    Xt = np.asarray(rj.io.normalize_per_query(te.X, te.qid), np.float32)
    y, q = np.asarray(tr.y, np.float32), tr.qid
    fit = _learner(name)
    import_s = time.perf_counter() - t_start
    before = count.compiled
    t0 = time.perf_counter()
    predict = fit(X, y, q)
    first = time.perf_counter() - t0
    compiles_first = count.compiled - before
    scores = np.asarray(predict(Xt), np.float64)
    warm = []
    for _ in range(1 if name.endswith("tuned") else 3):
        t0 = time.perf_counter()
        fit(X, y, q)
        warm.append(time.perf_counter() - t0)
    peak = _peak_mb()                                     # before the floor's arrays
    pair = paired(lambda: fit(X, y, q)) if "gaussian" in name else (None, None)
    n = int(np.searchsorted(np.cumsum(sizes(q)), THIRD, side="right"))
    rows = int(np.cumsum(sizes(q))[n - 1])
    before = count.compiled
    t0 = time.perf_counter()
    fit(X[:rows], y[:rows], q[:rows])
    third = time.perf_counter() - t0
    print("RESULT " + json.dumps(dict(
        first_s=first, warm_s=statistics.median(warm), third_s=third, third_rows=rows,
        compiles_first=compiles_first, compiles_third=count.compiled - before,
        import_and_load_s=import_s, peak_rss_mb=peak, paired_warm_s=pair[0],
        paired_floor_s=pair[1],
        ndcg10=float(rj.ndcg(scores, te.y, te.qid, k=10)))), flush=True)


def _peak_mb():
    """This process's peak resident memory (MB; Linux reports KB, macOS bytes)."""
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2 ** 20 if sys.platform == "darwin" else 2 ** 10), 1)


def fresh(name, cache, store=True):
    env = dict(os.environ, RANKJAX_DISK_CACHE=cache, BENCH_NO_STORE="0" if store else "1")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    r = subprocess.run([sys.executable, __file__, "--child", name], env=env,
                       capture_output=True, text=True, timeout=1800)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode or not line:
        raise SystemExit(f"{name}: {r.stderr[-2000:]}")
    return json.loads(line[-1][7:])


def _floor_calls():
    """``(eigh of the reduced system, eigh of the full S K S, their sizes, the reduced
    system's tridiagonal reduction)``: warm-up done (:func:`floor`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import rankjax as rj
    from rankjax.solvers.reduced import range_rows, reduced_system
    from rankjax.solvers.ridge import dual_system
    from rankjax.estimators.defaults import gamma_value
    tr, Xn = _train()
    X = jnp.asarray(Xn)
    g = rj.query_graph(tr.qid)
    K = rj.kernel_matrix(rj.gaussian_kernel(gamma_value("scale", Xn)), X)
    G = jax.jit(lambda K: dual_system(K, jnp.asarray(tr.y, K.dtype), g).G)(K)
    M = reduced_system(G, range_rows(g, G.dtype))              # the reduced system, as the fit forms it
    eigh = jax.jit(lambda G: jnp.linalg.eigh(G, symmetrize_input=False))
    reduced, full = (lambda: jax.block_until_ready(eigh(M))), (lambda: jax.block_until_ready(eigh(G)))
    reduced(), full()
    return reduced, full, int(M.shape[0]), int(G.shape[0]), _tridiagonal(np.asarray(M))


def _tridiagonal(M):
    """``() -> None``: LAPACK's ``sytrd`` of ``M`` (scipy's LAPACK, the one jaxlib's ``eigh``
    calls): the Householder reduction to tridiagonal form that begins ``syevd``, half of its
    flops matrix-vector products over the trailing matrix, bound by memory bandwidth."""
    import numpy as np
    import scipy.linalg
    sytrd, = scipy.linalg.get_lapack_funcs(("sytrd",), (M,))
    return lambda: sytrd(np.array(M, order="F"), lower=1)


def floor():
    """The warm kernel fit's floor: LAPACK's ``eigh`` of the dual system the fit decomposes,
    ``S K S`` on the range of ``S`` (``2,804 x 2,804``: one row less per query,
    :mod:`rankjax.solvers.reduced`; float32, the Gaussian kernel at the estimator's γ, ``"scale"``;
    one triangle read, no symmetrising copy), alternated 5 times with the first of its
    steps, the reduction to tridiagonal form (``tridiagonal_s``, :func:`_tridiagonal`; the
    rest of ``syevd``, the tridiagonal divide and conquer and the back-transformation, is
    level-3 products), medians; and the median of 3 of the full ``3,005 x 3,005``
    ``S K S`` (``eigh_full_s``)."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from lib.timing import median_s
    reduced, full, rows, full_rows, tridiagonal = _floor_calls()
    eigh_s, tridiagonal_s = alternated((reduced, tridiagonal), repeats=5)
    print("RESULT " + json.dumps(dict(eigh_s=eigh_s, rows=rows,
                                      eigh_full_s=median_s(full, repeats=3),
                                      full_rows=full_rows, tridiagonal_s=tridiagonal_s)), flush=True)


def alternated(calls, repeats=3):
    """Medians of each of ``calls`` run in turn ``repeats`` times (after one warm-up each):
    a shared machine's drift enters every one alike."""
    for f in calls:
        f()
    runs = [[] for _ in calls]
    for _ in range(repeats):
        for f, out in zip(calls, runs):
            t0 = time.perf_counter()
            f()
            out.append(time.perf_counter() - t0)
    return [statistics.median(r) for r in runs]


def paired(fit, repeats=3):
    """``(warm fit s, floor s)``: medians of the kernel fit and its floor's ``eigh``
    alternated in one process, so that a shared machine's drift between processes does not
    enter their ratio."""
    return tuple(alternated((fit, _floor_calls()[0]), repeats))


def table(lines, fl):
    """The README's first table from this run's lines."""
    f = lambda v: "—" if v is None else f"{v:.2f}"                          # noqa: E731
    out = ["| learner | first fit, empty cache (s) | first fit, cache filled (s) | warm fit (s) "
           f"| fit on {lines[0]['third_rows']:,} rows (s) | programs compiled (first / other rows) "
           "| test NDCG@10 |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in lines:
        compiled = (f"{r['compiles_first']} / {r['compiles_third']}" if r["learner"].startswith("rankjax")
                    else "—")
        out.append(f"| {r['learner']} | {f(r['first_s'])} | {f(r['first_cached_s'])} | {f(r['warm_s'])} "
                   f"| {f(r['third_s'])} | {compiled} | {r['ndcg10']:.4f} |")
    return "\n".join(out) + (
        f"\n\n<sub>lambdarank_sample: 3,005 training rows in 201 queries, 300 features normalised "
        f"to [0, 1] per query (`rj.io.normalize_per_query`, the same float32 inputs for every "
        f"learner); test 768 rows, NDCG@10 by `rj.ndcg`. Each learner in fresh processes: the "
        f"first fit with an empty program cache, then a new process with the cache filled, "
        f"its warm fit (median of 3; 1 for the tuned trees), then {lines[0]['third_rows']:,} rows. "
        f"Tuned: {len(GRID)} points (leaves 15/63, learning rate 0.05/0.1, 100/300 trees) by "
        f"3-fold GroupKFold over the training queries, the best refit, all in the fit's time. "
        f"The warm kernel fit's floor, LAPACK's `eigh` of the {fl['rows']:,} x {fl['rows']:,} "
        f"dual system it decomposes (`S K S` on the range of `S`): {fl['eigh_s']:.2f} s "
        f"({fl['tridiagonal_s']:.2f} s of it its memory-bound reduction to tridiagonal form, "
        f"`sytrd`; the warm "
        f"fit {kernel_warm(lines) / fl['eigh_s']:.2f}x; of the full {fl['full_rows']:,} x "
        f"{fl['full_rows']:,} `S K S`: {fl['eigh_full_s']:.2f} s, "
        f"{kernel_warm(lines) / fl['eigh_full_s']:.2f}x){_paired_text(lines)}. "
        f"{fl.get('machine', '?')}, {fl.get('cores', '?')} CPU cores, "
        f"jax {lines[0]['jax']}, float32; `python benchmarks/bench_first_answer.py --save "
        f"benchmarks/lines/first_answer.jsonl --readme "
        f"docs/which_solver.md`.</sub>")


def saved_table(found):
    """:func:`table` of saved lines: the learners' lines and the floor's."""
    fl = next(r for r in found if r["name"] == "first_answer_floor")["floor"]
    return table([r for r in found if r["name"] == "first_answer"], fl)


def paired_ratio(lines):
    """The warm kernel fit over its floor alternated in one process (:func:`paired`), or None."""
    r = next((r for r in lines if "gaussian" in r["learner"]), None)
    return None if r is None or r["paired_floor_s"] is None else r["paired_warm_s"] / r["paired_floor_s"]


def kernel_warm(lines):
    """The warm kernel fit of this run's lines (NaN without one)."""
    return next((r["warm_s"] for r in lines if "gaussian" in r["learner"]), float("nan"))


def _paired_text(lines):
    r = next((r for r in lines if "gaussian" in r["learner"]), None)
    if r is None or r["paired_floor_s"] is None:
        return ""
    return (f"; the two alternated in one process, 3 times each: {r['paired_warm_s']:.2f} s "
            f"against {r['paired_floor_s']:.2f} s, {paired_ratio(lines):.2f}x")


def store_ab(rounds=3):
    """Whether the store of whole programs (:mod:`rankjax.runtime.programs`) pays on a first
    fit today: for each rankjax learner, a cache filled with the store on and one with it
    off (JAX's disk cache alone), then ``rounds`` fresh processes of each, alternating; one
    JSON line each (medians; ``store_speedup`` > 1: the store pays)."""
    from lib.timing import emit
    for name in LEARNERS[:2]:
        with tempfile.TemporaryDirectory() as on, tempfile.TemporaryDirectory() as off:
            fresh(name, on, True), fresh(name, off, False)
            runs = {True: [], False: []}
            for _ in range(rounds):
                for store, cache in ((True, on), (False, off)):
                    runs[store].append(fresh(name, cache, store)["first_s"])
        with_s, without_s = statistics.median(runs[True]), statistics.median(runs[False])
        emit(name="first_answer_store", learner=name, dtype="float32", shape=[3005, 300],
             first_cached_store_s=with_s, first_cached_jax_cache_only_s=without_s,
             store_speedup=without_s / with_s, rounds=rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child")
    ap.add_argument("--store", action="store_true",
                    help="only the A/B of the program store on a first fit (store_ab)")
    ap.add_argument("--only", help="a substring of the learners to run")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from lib.blocks import add_arguments, from_lines, rewrite, save_lines
    add_arguments(ap, "first-answer")
    args = ap.parse_args()
    if from_lines(args, "first-answer", saved_table):
        return
    if args.child == "floor":
        return floor()
    if args.child:
        return child(args.child)
    if args.store:
        return store_ab()
    if (args.readme or args.save) and args.only:
        ap.error("--readme and --save write every learner's row: drop --only")
    import jax
    from lib.timing import emit
    lines = []
    for name in LEARNERS:
        if args.only and args.only not in name:
            continue
        try:
            _learner(name)
        except ImportError:
            continue
        with tempfile.TemporaryDirectory(prefix="rankjax-first-") as cache:
            cold = fresh(name, cache)
            tuned = name.endswith("tuned")      # no program cache: one process (minutes)
            filled = cold if tuned else fresh(name, cache)
        line = dict(name="first_answer", learner=name, dtype="float32", shape=[3005, 300],
                    jax=jax.__version__, first_s=cold["first_s"],
                    first_cached_s=None if tuned else filled["first_s"],
                    warm_s=filled["warm_s"], third_s=filled["third_s"],
                    third_rows=filled["third_rows"], compiles_first=cold["compiles_first"],
                    compiles_first_cached=filled["compiles_first"],
                    compiles_third=cold["compiles_third"], ndcg10=cold["ndcg10"],
                    ndcg10_same_both_processes=cold["ndcg10"] == filled["ndcg10"],
                    peak_rss_mb=max(cold["peak_rss_mb"], filled["peak_rss_mb"]),
                    paired_warm_s=filled["paired_warm_s"], paired_floor_s=filled["paired_floor_s"])
        emit(**line)
        lines.append(line)
    fl = dict(fresh("floor", "0"), machine=platform.machine(), cores=os.cpu_count())
    has_kernel = any("gaussian" in r["learner"] for r in lines)
    emit(name="first_answer_floor", what="LAPACK eigh of S K S on the range of S (the warm kernel "
         "fit's floor)", dtype="float32", shape=[fl["rows"], fl["rows"]], run_s=fl["eigh_s"],
         full_shape=[fl["full_rows"]] * 2, full_run_s=fl["eigh_full_s"],
         tridiagonal_s=fl["tridiagonal_s"], tridiagonal_share=fl["tridiagonal_s"] / fl["eigh_s"],
         kernel_warm_over_floor=kernel_warm(lines) / fl["eigh_s"] if has_kernel else None,
         kernel_warm_over_full=kernel_warm(lines) / fl["eigh_full_s"] if has_kernel else None,
         kernel_warm_over_floor_paired=paired_ratio(lines))
    if args.save:
        save_lines(args.save, lines + [dict(name="first_answer_floor", floor=fl)])
    if args.readme:
        rewrite(args.readme, "first-answer", table(lines, fl))


if __name__ == "__main__":
    main()
