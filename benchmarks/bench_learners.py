"""The other learners of the papers (issue: other learners). Prints JSON lines.

noisy   seed 003's noisy-label experiment shape on generated LETOR-like data:
        Gaussian label noise σ = 0.5 and 1.0 on the training labels, 3
        repetitions; disagreement error on clean test labels for KPCRank, KPCR,
        RLS and RankRLS (Gaussian kernel; p or λ chosen on held-out training
        queries by disagreement error);
(The document-ranking table with every learner is bench_paper.py's ``ranking``.)

svm1m   RankSVM on one query of 1,000,000 rows, full training.

    python benchmarks/bench_learners.py [--only noisy,svm1m]
"""
import argparse
import pathlib

import jax
import numpy as np

from lib.timing import emit

jax.config.update("jax_enable_x64", True)
import rankjax as rj  # noqa: E402
from rankjax.learners.kpcrank import kpcrank_path  # noqa: E402

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "lambdarank_sample"
LAMS = np.logspace(-3, 4, 15)


def split_queries(qid, n_valid, seed=0):
    q = np.unique(qid)
    valid_q = np.random.default_rng(seed).choice(q, n_valid, replace=False)
    return np.isin(qid, valid_q)


def pick(values, table, greater):
    table = np.asarray(table, float)
    table = np.where(np.isnan(table), -np.inf if greater else np.inf, table)
    i = int(np.argmax(table) if greater else np.argmin(table))
    return values[i], i


def kernel(gamma):
    return rj.gaussian_kernel(gamma)


def noisy_experiment(reps=3):
    for sigma in (0.5, 1.0):
        errs = {k: [] for k in ("KPCRank", "KPCR", "RLS", "RankRLS")}
        for rep in range(reps):
            tr = rj.make_ranking_data(60, num_features=10, seed=10 * rep)
            te = rj.make_ranking_data(40, num_features=10, seed=10 * rep + 1, first_qid=1000)
            rng = np.random.default_rng(10 * rep + 2)
            y_noisy = tr.y + sigma * rng.standard_normal(len(tr.y))
            v = split_queries(tr.qid, 15, seed=rep)
            kern = kernel(0.05)
            K = np.asarray(rj.kernel_matrix(kern, tr.X[~v]))
            Kv = np.asarray(rj.kernel_matrix(kern, tr.X[v], tr.X[~v]))
            Kall = np.asarray(rj.kernel_matrix(kern, tr.X))
            Kt = np.asarray(rj.kernel_matrix(kern, te.X, tr.X))
            P = 100
            for name, graph_of in (("KPCRank", lambda q: rj.query_graph(q)),
                                   ("KPCR", lambda q: rj.identity_graph(len(q)))):
                path = kpcrank_path(K, y_noisy[~v], graph_of(tr.qid[~v]), components=P,
                                       K_valid=Kv)
                table = [rj.disagreement_error(s, tr.y[v], tr.qid[v]) for s in path.valid_scores]
                p, _ = pick(np.arange(1, P + 1), table, greater=False)
                mdl = rj.kpcrank(Kall, y_noisy, graph_of(tr.qid), components=int(p))
                errs[name].append(float(rj.disagreement_error(Kt @ np.asarray(mdl.coef),
                                                              te.y, te.qid)))
            for name, graph_of in (("RankRLS", lambda q: rj.query_graph(q)),
                                   ("RLS", lambda q: rj.identity_graph(len(q)))):
                path = rj.path(rj.Problem(K, y_noisy[~v], graph_of(tr.qid[~v]), precomputed=True,
                                          valid=rj.Problem(Kv, tr.y[v], tr.qid[v], precomputed=True)),
                               rj.Dual(), lams=LAMS).value
                table = [rj.disagreement_error(s, tr.y[v], tr.qid[v]) for s in path.valid_scores]
                lam, _ = pick(LAMS, table, greater=False)
                mdl = rj.fit(rj.Problem(Kall, y_noisy, graph_of(tr.qid), precomputed=True), rj.Dual(),
                             lam=float(lam)).value
                errs[name].append(float(rj.disagreement_error(Kt @ np.asarray(mdl.coef),
                                                              te.y, te.qid)))
        for name, e in errs.items():
            emit(name=f"noisy labels {name}", sigma=sigma, repetitions=reps,
                 disagreement_error_mean=float(np.mean(e)), disagreement_error_std=float(np.std(e)),
                 per_repetition=[round(x, 4) for x in e])


def ranksvm_one_big_query(l=1_000_000, n=20):
    """One query of 10^6 rows (10^11 preference pairs if enumerated): full TRON."""
    import time
    rng = np.random.default_rng(0)
    X = rng.standard_normal((l, n))
    y = np.digitize(X @ rng.standard_normal(n) + rng.standard_normal(l), [-1, 0, 1, 2])
    t0 = time.perf_counter()
    res = jax.block_until_ready(rj.ranksvm_l2(X, y.astype(float), C=1e-6))
    total = time.perf_counter() - t0
    f = X @ np.asarray(res.weights)
    emit(name="RankSVM one query", shape=f"{l}x{n}, 5 levels", dtype="float64",
         total_with_compile_s=total, newton_iterations=int(res.iterations),
         cg_iterations=int(res.cg_iterations), converged=bool(res.converged),
         pairwise_accuracy=1 - float(rj.pairwise_error(f, y.astype(float))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="noisy,svm1m")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if "noisy" in only:
        noisy_experiment()
    if "svm1m" in only:
        ranksvm_one_big_query()


if __name__ == "__main__":
    main()
