"""The other learners of the papers (issue: other learners). Prints JSON lines.

noisy   seed 003's noisy-label experiment shape on generated LETOR-like data:
        Gaussian label noise σ = 0.5 and 1.0 on the training labels, 3
        repetitions; disagreement error on clean test labels for KPCRank, KPCR,
        RLS and RankRLS (Gaussian kernel; p or λ chosen on held-out training
        queries by disagreement error);
letor   ../shared/data/lambdarank_sample: test NDCG@1/5/10, MAP and pairwise
        accuracy for RankRLS, RLS, RankSVM, KPCRank and RankBoost, each with its
        parameter (λ / C / p / rounds) chosen on 40 held-out training queries by
        NDCG@10, then refit on all training queries.

svm1m   RankSVM on one query of 1,000,000 rows, full training.

    python benchmarks/bench_learners.py [--only noisy,letor,svm1m] [--data DIR]
"""
import argparse
import pathlib

import jax
import numpy as np

from _timing import emit

jax.config.update("jax_enable_x64", True)
import rankjax as rj  # noqa: E402

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
                path = rj.kpcrank_path(K, y_noisy[~v], graph_of(tr.qid[~v]), max_components=P,
                                       K_valid=Kv)
                table = [rj.disagreement_error(s, tr.y[v], tr.qid[v]) for s in path.valid_scores]
                p, _ = pick(np.arange(1, P + 1), table, greater=False)
                mdl = rj.kpcrank(Kall, y_noisy, graph_of(tr.qid), components=int(p))
                errs[name].append(float(rj.disagreement_error(Kt @ np.asarray(mdl.coef),
                                                              te.y, te.qid)))
            for name, graph_of in (("RankRLS", lambda q: rj.query_graph(q)),
                                   ("RLS", lambda q: rj.identity_graph(len(q)))):
                path = rj.rankrls_dual_path(K, y_noisy[~v], graph_of(tr.qid[~v]), lams=LAMS,
                                            K_valid=Kv)
                table = [rj.disagreement_error(s, tr.y[v], tr.qid[v]) for s in path.valid_scores]
                lam, _ = pick(LAMS, table, greater=False)
                mdl = rj.rankrls_dual(Kall, y_noisy, graph_of(tr.qid), lam=float(lam))
                errs[name].append(float(rj.disagreement_error(Kt @ np.asarray(mdl.coef),
                                                              te.y, te.qid)))
        for name, e in errs.items():
            emit(name=f"noisy labels {name}", sigma=sigma, repetitions=reps,
                 disagreement_error_mean=float(np.mean(e)), disagreement_error_std=float(np.std(e)),
                 per_repetition=[round(x, 4) for x in e])


def evaluate(name, param, f, y, qid):
    emit(name=f"lambdarank_sample {name}", chosen=param,
         ndcg1=float(rj.ndcg(f, y, qid, k=1)), ndcg5=float(rj.ndcg(f, y, qid, k=5)),
         ndcg10=float(rj.ndcg(f, y, qid, k=10)), map=float(rj.mean_average_precision(f, y, qid)),
         pairwise_accuracy=1 - float(rj.pairwise_error(f, y, qid)))


def letor(data_dir):
    tr = rj.io.read_svmlight(data_dir / "rank.train")
    te = rj.io.read_svmlight(data_dir / "rank.test", num_features=tr.X.shape[1])
    X, y, qid = tr.X, tr.y, tr.qid
    v = split_queries(qid, 40)
    nd = lambda f: rj.ndcg(f, y[v], qid[v], k=10)  # noqa: E731

    for name, graph_of in (("RankRLS", lambda q, yy: rj.query_graph(q)),
                           ("RLS", lambda q, yy: rj.identity_graph(len(q)))):
        path = rj.rankrls_primal_path(X[~v], y[~v], graph_of(qid[~v], y[~v]), lams=LAMS,
                                      X_valid=X[v])
        lam, _ = pick(LAMS, [nd(s) for s in path.valid_scores], greater=True)
        w = rj.rankrls_primal(X, y, graph_of(qid, y), lam=float(lam)).weights
        evaluate(name, f"lambda={lam:.4g}", te.X @ np.asarray(w), te.y, te.qid)

    Cs = np.logspace(-7, 1, 9)
    table = [nd(X[v] @ np.asarray(rj.ranksvm_l2(X[~v], y[~v], qid[~v], C=c).weights)) for c in Cs]
    C, _ = pick(Cs, table, greater=True)
    w = rj.ranksvm_l2(X, y, qid, C=float(C)).weights
    evaluate("RankSVM (L2 loss)", f"C={C:.4g}", te.X @ np.asarray(w), te.y, te.qid)

    Xs = X / np.maximum(X.std(0), 1e-12)
    kern = kernel(1.0 / X.shape[1])
    scale = lambda A: A / np.maximum(X.std(0), 1e-12)  # noqa: E731
    K = np.asarray(rj.kernel_matrix(kern, Xs[~v]))
    Kv = np.asarray(rj.kernel_matrix(kern, Xs[v], Xs[~v]))
    P = 300
    path = rj.kpcrank_path(K, y[~v], rj.query_graph(qid[~v]), max_components=P, K_valid=Kv)
    p, _ = pick(np.arange(1, P + 1), [nd(s) for s in path.valid_scores], greater=True)
    Kall = np.asarray(rj.kernel_matrix(kern, Xs))
    mdl = rj.kpcrank(Kall, y, rj.query_graph(qid), components=int(p))
    Kt = np.asarray(rj.kernel_matrix(kern, scale(te.X), Xs))
    evaluate("KPCRank (Gaussian kernel)", f"p={int(p)}", Kt @ np.asarray(mdl.coef), te.y, te.qid)

    rounds = np.array([25, 50, 100, 200, 400])
    boost = rj.rankboost(X[~v], y[~v], qid[~v], rounds=int(rounds[-1]))
    table = [nd(rj.rankboost_predict(rj.RankBoostModel(*(a[:r] for a in boost)), X[v]))
             for r in rounds]
    R, _ = pick(rounds, table, greater=True)
    boost = rj.rankboost(X, y, qid, rounds=int(R))
    evaluate("RankBoost", f"rounds={int(R)}", rj.rankboost_predict(boost, te.X), te.y, te.qid)


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
    ap.add_argument("--only", default="noisy,letor,svm1m")
    ap.add_argument("--data", default=str(DATA))
    args = ap.parse_args()
    only = set(args.only.split(","))
    if "noisy" in only:
        noisy_experiment()
    if "letor" in only:
        letor(pathlib.Path(args.data))
    if "svm1m" in only:
        ranksvm_one_big_query()


if __name__ == "__main__":
    main()
