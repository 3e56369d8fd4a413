"""The papers' experiments in shape on available data (issue 14). Prints JSON lines.

ranking  document ranking on ../shared/data/lambdarank_sample (Pahikkala et al. 2009
         §5.3 Table 3, here with NDCG and MAP as well): every learner, LightGBM and
         XGBoost beside when installed. Features normalised to [0, 1] per query (as the
         paper). Each learner's parameter is chosen by NDCG@10 on 40 held-out training
         queries, then refit on all training queries; repeated for 5 held-out draws
         (mean ± std over the draws). Two RankRLS rows choose instead by their own exact
         leave-query-out on the whole training set (deterministic); the learned-γ row
         is bench_tune.py's.
pairs    the irrelevant-pairs and tied-pairs effect (2009 §5.1, Fig. 2 and the Table 3
         "all pairs" rows): the 4-point example of Fig. 2, then linear RankRLS with
         relevant pairs only, with ties, with every pair of the training set, on
         lambdarank_sample and on generated LETOR-like data.
costs    cost functions (20), (21), (22) with relevant or all pairs (2009 §5.2 Table 2):
         RankRLS on explicit preference graphs, RankSVM and RLS beside; disagreement
         error, λ chosen on held-out queries by disagreement error.

    python benchmarks/bench_paper.py [--only ranking,pairs,costs] [--splits 5]
"""
import argparse
import pathlib
import time

import jax
import numpy as np

from lib.timing import emit

jax.config.update("jax_enable_x64", True)
import rankjax as rj  # noqa: E402
from rankjax.learners.kpcrank import kpcrank_path  # noqa: E402

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "lambdarank_sample"
LAMS = np.logspace(-4, 8, 25)


def load_letor(data_dir):
    tr = rj.io.read_svmlight(data_dir / "rank.train")
    te = rj.io.read_svmlight(data_dir / "rank.test", num_features=tr.X.shape[1],
                             drop_extra=True)
    return ((np.asarray(rj.io.normalize_per_query(tr.X, tr.qid)), tr.y, tr.qid),
            (np.asarray(rj.io.normalize_per_query(te.X, te.qid)), te.y, te.qid))


def held_out(qid, n_valid, seed):
    q = np.unique(qid)
    return np.isin(qid, np.random.default_rng(seed).choice(q, n_valid, replace=False))


def best(params, table, greater):
    t = np.where(np.isnan(table), -np.inf if greater else np.inf, np.asarray(table, float))
    return params[int(np.argmax(t) if greater else np.argmin(t))]


def metrics(f, y, qid):
    f = np.asarray(f)
    return {"ndcg1": float(rj.ndcg(f, y, qid, k=1)), "ndcg5": float(rj.ndcg(f, y, qid, k=5)),
            "ndcg10": float(rj.ndcg(f, y, qid, k=10)),
            "map": float(rj.mean_average_precision(f, y, qid)),
            "disagreement": float(rj.disagreement_error(f, y, qid))}


# --- learners: path(X, y, qid, valid) -> (params, [criterion per param]) where valid =
#     (Xv, yv, qv, criterion name); fit(X, y, qid, param, Xt) -> scores of Xt -------------

CRITERIA = {"ndcg10": (lambda f, y, q: rj.ndcg(f, y, q, k=10), True),
            "disagreement": (rj.disagreement_error, False)}


def table(scores, valid):
    _, yv, qv, crit = valid
    return [float(CRITERIA[crit][0](f, yv, qv)) for f in scores]


def gram(gamma, A, B=None):
    return np.asarray(rj.kernel_matrix(rj.gaussian_kernel(gamma), A, B))


def per_gamma(params, gammas, one_path):
    """A path over (γ, parameter): one_path(γ, X, y, qid, Xv) gives the ``[P, m_v]`` scores of
    the validation rows per γ."""
    def path(X, y, qid, valid):
        out = []
        for g in gammas:
            out += list(np.asarray(one_path(g, X, y, qid, valid[0])))
        return params, table(out, valid)
    return path


def rankrls_linear(graph_of):
    def problem(y, qid):          # a preference graph carries its own targets
        g = graph_of(y, qid)
        return (None if isinstance(g, rj.PreferenceGraph) else y), g

    def path(X, y, qid, valid):
        p = rj.path(rj.Problem(X, *problem(y, qid)), rj.Primal(), lams=LAMS).value
        return LAMS, table(np.asarray(rj.predict(p, valid[0])), valid)

    def fit(X, y, qid, lam, Xt):
        return Xt @ np.asarray(rj.fit(rj.Problem(X, *problem(y, qid)), rj.Primal(),
                                      lam=lam).value.weights)
    return path, fit


def rankrls_gaussian(gammas):
    params = [(g, lam) for g in gammas for lam in LAMS]

    path = per_gamma(params, gammas, lambda g, X, y, qid, Xv: rj.predict(
        rj.path(rj.Problem(gram(g, X), y, qid, precomputed=True), rj.Dual(), lams=LAMS).value,
        gram(g, Xv, X)))

    def fit(X, y, qid, param, Xt):
        g, lam = param
        return np.asarray(rj.fit(rj.Problem(X, y, rj.query_graph(qid)), rj.Dual(rj.gaussian_kernel(g)),
                                 lam=lam).value.predict(Xt))
    return path, fit


def nystrom(gammas, basis=500):
    params = [(g, lam) for g in gammas for lam in LAMS]

    path = per_gamma(params, gammas, lambda g, X, y, qid, Xv: rj.predict(
        rj.path(rj.Problem(X, y, qid), rj.Nystrom(rj.gaussian_kernel(g), basis), lams=LAMS).value,
        Xv))

    def fit(X, y, qid, param, Xt):
        g, lam = param
        fit = rj.fit(rj.Problem(X, y, qid), rj.Nystrom(rj.gaussian_kernel(g), basis), lam=lam)
        return np.asarray(rj.predict(fit.value, Xt))
    return path, fit


def kpcrank(gammas, P=300):
    params = [(g, p) for g in gammas for p in range(1, P + 1)]

    path = per_gamma(params, gammas, lambda g, X, y, qid, Xv: kpcrank_path(
        gram(g, X), y, rj.query_graph(qid), components=P, K_valid=gram(g, Xv, X)).valid_scores)

    def fit(X, y, qid, param, Xt):
        g, p = param
        m = rj.kpcrank(gram(g, X), y, rj.query_graph(qid), components=int(p))
        return gram(g, Xt, X) @ np.asarray(m.coef)
    return path, fit


def ranksvm(Cs=np.logspace(-6, 2, 9)):
    def fit(X, y, qid, C, Xt):
        return Xt @ np.asarray(rj.ranksvm_l2(X, y, qid, C=float(C)).weights)

    def path(X, y, qid, valid):
        Xv = valid[0]
        return Cs, table([fit(X, y, qid, C, Xv) for C in Cs], valid)
    return path, fit


def rankboost(rounds=(25, 50, 100, 200, 400)):
    def path(X, y, qid, valid):
        Xv = valid[0]
        m = rj.rankboost(X, y, qid, rounds=rounds[-1])
        first = lambda r: m._replace(feature=m.feature[:r], threshold=m.threshold[:r],  # noqa
                                     alpha=m.alpha[:r], r=m.r[:r])
        return rounds, table([np.asarray(rj.rankboost_predict(first(r), Xv)) for r in rounds],
                             valid)

    def fit(X, y, qid, r, Xt):
        return np.asarray(rj.rankboost_predict(rj.rankboost(X, y, qid, rounds=int(r)), Xt))
    return path, fit


def cg_early_stopping():
    """λ = 0, the iteration count chosen by validation NDCG@10 (Airola et al. 2010 §4)."""
    def path(X, y, qid, valid):     # one run to 100 iterations: the validation curve
        Xv, yv, qv, crit = valid
        kw = {"metric": rj.ndcg, "metric_kwargs": {"k": 10}} if crit == "ndcg10" else {}
        r = rj.fit(rj.Problem(X, y, qid, valid=rj.Problem(Xv, yv, qv)),
                   rj.CG(tol=0.0, max_iter=100, patience=100, **kw), lam=0.0)
        h = np.asarray(r.stats["valid_history"])[1:int(r.stats["iterations"]) + 1]   # lower: better
        return np.arange(1, len(h) + 1), list(-h if crit == "ndcg10" else h)

    def fit(X, y, qid, it, Xt):
        return Xt @ np.asarray(rj.fit(rj.Problem(X, y, rj.query_graph(qid)),
                                      rj.CG(tol=0.0, max_iter=int(it)), lam=0.0).value.weights)
    return path, fit


def boosted(kind, trees=(50, 100, 200, 400)):
    """LightGBM / XGBoost rankers, default settings, number of trees chosen like
    RankBoost's rounds; ``None`` when the package is missing."""
    try:
        if kind == "lightgbm":
            import lightgbm
            make = lambda n: lightgbm.LGBMRanker(n_estimators=n, verbose=-1)  # noqa: E731
            cut = lambda m, X, k: m.predict(X, num_iteration=k)                # noqa: E731
        else:
            import xgboost
            make = lambda n: xgboost.XGBRanker(n_estimators=n)                  # noqa: E731
            cut = lambda m, X, k: m.predict(X, iteration_range=(0, k))         # noqa: E731
    except ImportError:
        return None

    def fit_model(X, y, qid, n):
        return make(n).fit(X, y, group=np.diff(np.flatnonzero(np.r_[True, qid[1:] != qid[:-1],
                                                                      True])))

    def path(X, y, qid, valid):
        Xv = valid[0]
        m = fit_model(X, y, qid, trees[-1])
        return trees, table([cut(m, Xv, k) for k in trees], valid)

    def fit(X, y, qid, n, Xt):
        return fit_model(X, y, qid, int(n)).predict(Xt)
    return path, fit


def learners(n):
    gammas = [1.0 / n, 3.0 / n, 10.0 / n]
    unnorm = lambda y, q: rj.query_graph(q, y, normalized=False, exclude_ties=True)  # noqa
    out = {   # name: (path, fit), the parameter(s) chosen
        "RankRLS linear (relevant pairs)": (rankrls_linear(unnorm), "λ"),
        "RankRLS linear, all pairs": (rankrls_linear(lambda y, q: rj.global_graph(len(y))),
                                      "λ"),
        "RankRLS linear, normalized query graph": (rankrls_linear(
            lambda y, q: rj.query_graph(q)), "λ"),
        "RLS regression": (rankrls_linear(lambda y, q: rj.identity_graph(len(y))), "λ"),
        "RankRLS Gaussian kernel (dual)": (rankrls_gaussian(gammas), "γ, λ"),
        "sparse RankRLS (Nystrom, 500 basis vectors)": (nystrom(gammas), "γ, λ"),
        "KPCRank (Gaussian kernel)": (kpcrank(gammas), "γ, p"),
        "CG early stopping (lambda = 0)": (cg_early_stopping(), "iterations"),
        "RankSVM (linear, L2 loss)": (ranksvm(), "C"),
        "RankBoost": (rankboost(), "rounds"),
        "LightGBM LGBMRanker": (boosted("lightgbm"), "trees"),
        "XGBoost XGBRanker": (boosted("xgboost"), "trees"),
    }
    return {k: v for k, v in out.items() if v[0] is not None}


def show(p):
    return ", ".join(f"{x:.3g}" for x in np.atleast_1d(p))


def version(kind):
    try:
        return __import__(kind).__version__
    except ImportError:
        return None


def document_ranking(data_dir, splits):
    (X, y, qid), (Xt, yt, qt) = load_letor(data_dir)
    for name, ((path, fit), label) in learners(X.shape[1]).items():
        rows, params, fit_s = [], [], []
        for s in range(splits):
            v = held_out(qid, 40, seed=s)
            ps, crit = path(X[~v], y[~v], qid[~v], (X[v], y[v], qid[v], "ndcg10"))
            p = best(ps, crit, greater=True)
            t0 = time.perf_counter()
            rows.append(metrics(fit(X, y, qid, p, Xt), yt, qt))
            fit_s.append(time.perf_counter() - t0)
            params.append(show(p))
        emit(name="ranking", learner=name, selection=f"held-out NDCG@10, {splits} draws",
             dtype="float64", shape=list(X.shape), parameter=label, chosen=params,
             refit_s=float(np.median(fit_s)),
             **{k: float(np.mean([r[k] for r in rows])) for k in rows[0]},
             ndcg10_std=float(np.std([r["ndcg10"] for r in rows])),
             **({"version": version(name.split()[0].lower())}
                if name.split()[0] in ("LightGBM", "XGBoost") else {}))

    # the library's own exact leave-query-out on the whole training set
    g = rj.query_graph(qid)
    h = rj.holdout(rj.Problem(X, y, g), rj.Primal(), lams=LAMS).value
    lam = best(LAMS, [rj.ndcg(f, y, qid, k=10) for f in np.asarray(h.predictions)], True)
    t0 = time.perf_counter()
    f = Xt @ np.asarray(rj.fit(rj.Problem(X, y, g), rj.Primal(), lam=lam).value.weights)
    emit(name="ranking", learner="RankRLS linear, normalized query graph",
         selection="exact leave-query-out NDCG@10", dtype="float64", shape=list(X.shape),
         parameter="λ", chosen=[show(lam)], refit_s=time.perf_counter() - t0, **metrics(f, yt, qt),
         ndcg10_std=0.0)


# --- irrelevant pairs and ties -------------------------------------------------------

def figure2():
    """Pahikkala et al. 2009 Fig. 2: four inputs on a line, two objects. Relevant pairs
    learn the right direction; with the irrelevant pairs the direction flips."""
    X = np.array([[1.0], [2.0], [3.5], [4.5]])
    s = np.array([2.0, 1.0, 4.0, 3.0])
    qid = np.array([0, 0, 1, 1])
    for name, g in (("relevant pairs", rj.query_graph(qid, normalized=False)),
                    ("all pairs", rj.global_graph(4))):
        w = float(np.asarray(rj.fit(rj.Problem(X, s, g), rj.Primal(), lam=1e-06).value.weights)[0])
        emit(name="pairs figure 2", graph=name, weight=w,
             relevant_pairs_correct=int(np.sum(np.sign(np.diff((X[:, 0] * w).reshape(2, 2))) ==
                                               np.sign(np.diff(s.reshape(2, 2))))))


def pair_graphs():
    return {
        "relevant pairs (query graph, ties excluded)":
            lambda y, q: rj.query_graph(q, y, normalized=False, exclude_ties=True),
        "relevant pairs and ties (query graph)":
            lambda y, q: rj.query_graph(q, normalized=False),
        "all pairs, ties excluded (one global ranking)":
            lambda y, q: rj.global_graph(len(y), y, exclude_ties=True),
        "all pairs and ties (one global ranking)": lambda y, q: rj.global_graph(len(y)),
        "RLS regression (no pairs)": lambda y, q: rj.identity_graph(len(y)),
    }


def synthetic():
    tr = rj.make_ranking_data(150, num_features=20, levels=5, seed=3)
    te = rj.make_ranking_data(100, num_features=20, levels=5, seed=4, first_qid=10_000)
    return (tr.X, tr.y, tr.qid), (te.X, te.y, te.qid)


def select_and_test(name, path, fit, train, test, splits, **fields):
    (X, y, qid), (Xt, yt, qt) = train, test
    rows, lams = [], []
    for s in range(splits):
        v = held_out(qid, len(np.unique(qid)) // 5, seed=s)
        ps, crit = path(X[~v], y[~v], qid[~v], (X[v], y[v], qid[v], "disagreement"))
        lam = best(ps, crit, greater=False)
        rows.append(metrics(fit(X, y, qid, lam, Xt), yt, qt))
        lams.append(float(lam))
    emit(name=name, dtype="float64", shape=list(X.shape), chosen=[f"{x:.3g}" for x in lams],
         disagreement=float(np.mean([r["disagreement"] for r in rows])),
         disagreement_std=float(np.std([r["disagreement"] for r in rows])),
         ndcg10=float(np.mean([r["ndcg10"] for r in rows])), **fields)


def pairs_effect(data_dir, splits):
    figure2()
    for data_name, (train, test) in (("lambdarank_sample", load_letor(data_dir)),
                                     ("generated (make_ranking_data, 150 queries)", synthetic())):
        for graph_name, graph_of in pair_graphs().items():
            path, fit = rankrls_linear(graph_of)
            select_and_test("pairs", path, fit, train, test, splits, data=data_name,
                            graph=graph_name)


# --- cost functions (20), (21), (22) ------------------------------------------------

def preference_learner(cost, all_pairs):
    def graph_of(y, qid):
        h, t, mag = rj.pairs_from_scores(y, None if all_pairs else qid)
        return rj.preference_graph(h, t, mag, num_rows=len(y), cost=cost)
    return rankrls_linear(graph_of)


def cost_functions(data_dir, splits):
    for data_name, (train, test) in (("lambdarank_sample", load_letor(data_dir)),
                                     ("generated (make_ranking_data, 150 queries)", synthetic())):
        for eq, cost in (("(20)", "unit"), ("(21)", "magnitude"), ("(22)", "inverse")):
            for all_pairs in (False, True):
                path, fit = preference_learner(cost, all_pairs)
                select_and_test("costs", path, fit, train, test, splits, data=data_name,
                                method=f"RankRLS {eq}" + (" all pairs" if all_pairs else ""),
                                edges=int(len(rj.pairs_from_scores(
                                    train[1], None if all_pairs else train[2])[0])))
        path, fit = ranksvm(np.logspace(-6, 2, 9))
        select_and_test("costs", path, fit, train, test, splits, data=data_name,
                        method="RankSVM (relevant pairs)")
        path, fit = rankrls_linear(lambda y, q: rj.identity_graph(len(y)))
        select_and_test("costs", path, fit, train, test, splits, data=data_name,
                        method="RLS regression")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="ranking,pairs,costs")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--splits", type=int, default=5)
    a = ap.parse_args()
    only, data = set(a.only.split(",")), pathlib.Path(a.data)
    if "pairs" in only:
        pairs_effect(data, a.splits)
    if "costs" in only:
        cost_functions(data, a.splits)
    if "ranking" in only:
        document_ranking(data, a.splits)


if __name__ == "__main__":
    main()
