"""Kernel RankRLS at scale: exact kernel vs Nyström (closed form, exact hold-out) vs
FALKON-preconditioned CG, with peak resident memory in every line.

Rows (JSON lines, benchmarks/lib/timing.py):
* ``nystrom_holdout``: leave-query-out of the Nyström model, 13 λ, one γ (warm median);
* ``rankrlscv_nystrom``: ``RankRLSCV(kernel="gaussian", gammas=4, lams=13, basis=b)`` fit
  (first call, compile included) and its test NDCG@10; with ``--optimize`` also
  ``optimize=True``;
* ``falkon``: iterations and time to the closed-form solution (relative difference) at
  several λ, and a large run (``--large-rows`` x 136, b = ``--large-basis``);
* ``basis_method``: uniform vs kernel k-means++ basis, test NDCG@10;
* ``exact_refusal``: the seconds an exact-kernel fit on too many rows takes to refuse.

    python benchmarks/bench_kernel_scale.py                   # the 12k x 50 set, 10^5 FALKON
    python benchmarks/bench_kernel_scale.py --large-rows 1000000   # on an accelerator
    python benchmarks/bench_kernel_scale.py --only large --large-rows 1000000 --dtype float32
"""
import argparse
import resource
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import rankjax as rj  # noqa: E402
from rankjax.estimators import RankRLSCV  # noqa: E402

from lib.timing import emit, median_s  # noqa: E402
from rankjax.kernels.basis import nystrom_basis  # noqa: E402


def peak_rss_gb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)


def letor_like(queries, features, seed, first_qid=0):
    return rj.make_ranking_data(queries, num_features=features, docs_per_query=(10, 27), seed=seed,
                                first_qid=first_qid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=650)
    ap.add_argument("--basis", type=int, default=2000)
    ap.add_argument("--large-rows", type=int, default=100_000)
    ap.add_argument("--large-basis", type=int, default=4000)
    ap.add_argument("--optimize", action="store_true")
    ap.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ",".join(PARTS))
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"],
                    help="of the large FALKON run")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    if parts - set(PARTS):
        ap.error(f"--only takes {','.join(PARTS)}")
    if parts != {"large"}:
        small(args, parts)
    if "large" in parts:
        large(args)


PARTS = ("refusal", "holdout", "cv", "basis", "falkon", "large")


def small(args, parts):
    d = letor_like(args.queries, 50, 0)
    t = letor_like(200, 50, 1, first_qid=100_000)
    g = rj.query_graph(d.qid)
    shape = list(d.X.shape)
    lams = np.logspace(-4, 2, 13)
    gammas = [0.005, 0.01, 0.02, 0.04]
    folds = rj.make_folds(g)
    k = rj.gaussian_kernel(0.01)
    basis = nystrom_basis(d.X, args.basis, seed=0)

    if "refusal" in parts:
        t0 = time.perf_counter()
        try:
            RankRLSCV(kernel="gaussian", basis=None).fit(
                np.zeros((300_000, 2)), np.arange(300_000) % 3.0, qid=np.arange(300_000) // 10)
        except MemoryError as e:
            emit(name="exact_refusal", dtype="float64", shape=[300_000, 2],
                 refuse_s=time.perf_counter() - t0, message=str(e)[:160], peak_rss_gb=peak_rss_gb())

    if "holdout" in parts:
        t0 = time.perf_counter()
        h = rj.holdout(rj.Problem(d.X, d.y, g), rj.Nystrom(k, basis), lams=lams, folds=folds).value
        jax.block_until_ready(h.predictions)
        first = time.perf_counter() - t0
        run = median_s(lambda: rj.holdout(rj.Problem(d.X, d.y, g),
                                          rj.Nystrom(rj.gaussian_kernel(0.02), basis[:-30]), lams=lams,
                                          folds=folds).value.predictions, repeats=3)
        emit(name="nystrom_holdout", dtype="float64", shape=shape, basis=args.basis, lams=len(lams),
             first_call_s=first, run_s=run, peak_rss_gb=peak_rss_gb(),
             note="warm runs use another gamma and basis size of the same bucket")

    for opt in ([False, True] if args.optimize else [False]) if "cv" in parts else []:
        t0 = time.perf_counter()
        m = RankRLSCV(kernel="gaussian", gammas=gammas, lams=lams, basis=args.basis,
                      optimize=opt).fit(d.X, d.y, qid=d.qid)
        emit(name="rankrlscv_nystrom", dtype="float64", shape=shape, basis=args.basis, optimize=opt,
             gammas=len(gammas), lams=len(lams), fit_s=time.perf_counter() - t0,
             lam=m.lam_, gamma=m.gamma_, cv_ndcg10=m.best_score_,
             test_ndcg10=m.score(t.X, t.y, qid=t.qid), peak_rss_gb=peak_rss_gb())

    for method in ("uniform", "kmeans++") if "basis" in parts else ():
        for b in (500, 1000, 2000):
            idx = nystrom_basis(d.X, b, kernel=k, method=method, seed=0)
            p = rj.path(rj.Problem(d.X, d.y, g), rj.Nystrom(k, idx), lams=[1.0]).value
            emit(name="basis_method", dtype="float64", shape=shape, method=method, basis=b,
                 test_ndcg10=float(rj.ndcg(rj.predict(p, t.X)[0], t.y, t.qid, k=10)),
                 peak_rss_gb=peak_rss_gb())

    for lam in (1e-6, 1e-3, 1.0) if "falkon" in parts else ():
        p = rj.path(rj.Problem(d.X, d.y, g), rj.Nystrom(k, basis), lams=[lam]).value
        f0 = np.asarray(rj.predict(p, d.X)[0])
        for it in (20, 30, 50):
            t0 = time.perf_counter()
            f = rj.fit(rj.Problem(d.X, d.y, g), rj.Falkon(k, basis, options=rj.CG(tol=0.0, max_iter=it)),
                       lam=lam)
            jax.block_until_ready(f.value.coef)
            dt = time.perf_counter() - t0
            rel = float(np.linalg.norm(np.asarray(rj.predict(f.value, d.X)) - f0) / np.linalg.norm(f0))
            emit(name="falkon", dtype="float64", shape=shape, basis=args.basis, lam=lam, iterations=it,
                 run_s=dt, rel_to_closed_form=rel, peak_rss_gb=peak_rss_gb())


def large(args):
    """FALKON on ``--large-rows`` x 136 (the accelerator line: 10^6 rows)."""
    big = letor_like(args.large_rows // 18 + 1, 136, 2)
    gb = rj.query_graph(big.qid)
    X = np.asarray(big.X, args.dtype)
    t0 = time.perf_counter()
    f = rj.fit(
        rj.Problem(X, big.y, gb),
        rj.Falkon(rj.gaussian_kernel(1.0 / 136), args.large_basis, options=rj.CG(tol=1e-06, max_iter=50)),
        lam=1.0,
    )
    jax.block_until_ready(f.value.coef)
    dt = time.perf_counter() - t0
    emit(name="falkon_large", dtype=args.dtype, shape=list(X.shape), basis=args.large_basis, lam=1.0,
         run_s=dt, iterations=int(f.stats["iterations"]), result=rj.RESULTS(int(f.result)).name,
         final_residual=float(np.asarray(f.stats["residual_history"])[int(f.stats["iterations"])]),
         peak_rss_gb=peak_rss_gb(), note="compile included (one call)")


if __name__ == "__main__":
    main()
