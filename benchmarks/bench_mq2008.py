"""MQ2008 (LETOR 4.0), five folds: every learner of rankjax beside LightGBM and XGBoost.

Each fold trains on three partitions, chooses hyper-parameters on the validation
partition (or, where the line says ``train-only``, by exact leave-query-out on the
training partitions alone) and scores the test partition: NDCG@1, @5, @10 and MAP
(relevant: label >= 1), with queries without a relevant document skipped and counted
as 0 (LETOR's own tool counts them as 0). One JSON line per (fold, learner).

    python benchmarks/bench_mq2008.py [--folds 1,2,3,4,5] [--data ../shared/data/mq2008]
"""
import argparse
import os
import resource
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import rankjax as rj  # noqa: E402
from rankjax import io  # noqa: E402
from rankjax.estimators import RankBoost, RankRLS, RankRLSCV, RankSVM  # noqa: E402

from lib.timing import emit  # noqa: E402
from rankjax.learners.kpcrank import kpcrank_path  # noqa: E402
from rankjax.kernels.basis import nystrom_basis  # noqa: E402
from rankjax.metrics.choice import select_lambda  # noqa: E402

FOLDS = {1: (1, 2, 3, 4, 5), 2: (2, 3, 4, 5, 1), 3: (3, 4, 5, 1, 2), 4: (4, 5, 1, 2, 3),
         5: (5, 1, 2, 3, 4)}
LAMS = np.logspace(-4, 3, 15)


def metrics(f, y, qid):
    out = {}
    for mode in ("skip", "zero"):
        for k in (1, 5, 10):
            out[f"ndcg{k}_{mode}"] = float(rj.ndcg(f, y, qid, k=k, no_relevant=mode))
        out[f"map_{mode}"] = float(rj.mean_average_precision(f, y, qid, no_relevant=mode))
    return out


def concat(parts):
    return (np.concatenate([p.X for p in parts]), np.concatenate([p.y for p in parts]),
            np.concatenate([p.qid for p in parts]))


def best_on_valid(cands, Xv, yv, qv):
    """The candidate (name, score_fn) whose validation NDCG@10 is highest."""
    scored = [(float(rj.ndcg(fn(Xv), yv, qv, k=10)), i) for i, (_, fn) in enumerate(cands)]
    return cands[max(scored)[1]]


def learners(X, y, q, Xv, yv, qv, gamma):
    g = rj.query_graph(q)
    out = {}

    p = rj.path(rj.Problem(X, y, g, valid=rj.Problem(Xv, yv, qv)), rj.Primal(), lams=LAMS).value
    sel = select_lambda(LAMS, p.valid_scores, yv, qv, metric=rj.ndcg, k=10)
    w = np.asarray(p.weights[int(sel.best_index)])
    out["RankRLS linear (λ on valid)"] = lambda Z: Z @ w
    m = RankRLSCV(lams=LAMS).fit(X, y, qid=q)
    out["RankRLSCV linear (LQO, train-only)"] = m.predict
    pi = rj.path(rj.Problem(X, y, rj.identity_graph(len(y)), valid=rj.Problem(Xv, yv, qv)),
                 rj.Primal(), lams=LAMS).value
    si = select_lambda(LAMS, pi.valid_scores, yv, qv, metric=rj.ndcg, k=10)
    wi = np.asarray(pi.weights[int(si.best_index)])
    out["RLS regression (λ on valid)"] = lambda Z: Z @ wi
    gammas = [gamma * s for s in (0.25, 0.5, 1.0, 2.0)]
    for method in ("uniform", "kmeans++"):
        m = RankRLSCV(kernel="gaussian", gammas=gammas, lams=LAMS,
                      basis=rj.Basis(2000, method=method)).fit(X, y, qid=q)
        out[f"Nyström RankRLSCV b=2000 {method} (LQO, train-only)"] = m.predict
    # learned (issue 33): the Nyström grid's best point refined by the gradient of the
    # Nyström model's exact leave-query-out loss, with per-feature scales (train-only)
    ml = RankRLSCV(kernel="gaussian", gammas=gammas, lams=LAMS, basis=rj.Basis(1000, method="kmeans++"),
                   optimize=True, ard=True, optimize_steps=20).fit(X, y, qid=q)
    out["learned (Nyström b=1000 kmeans++, ARD; LQO, train-only)"] = ml.predict
    # FALKON with twice the basis, at the (λ, γ) the Nyström leave-query-out chose
    kk = rj.gaussian_kernel(m.gamma_)
    fk = rj.fit(
        rj.Problem(X, y, g),
        rj.Falkon(
            kk, nystrom_basis(X, 4000, kernel=kk, method="kmeans++"), options=rj.CG(tol=1e-06, max_iter=100)
        ),
        lam=m.lam_,
    )
    out["FALKON b=4000 kmeans++ (λ, γ of the Nyström LQO, train-only)"] = (
        lambda Z: np.asarray(rj.predict(fk.value, Z)))
    K = rj.kernel_matrix(rj.gaussian_kernel(gamma), X)
    Kv = rj.kernel_matrix(rj.gaussian_kernel(gamma), Xv, X)
    dp = rj.path(rj.Problem(K, y, g, precomputed=True,
                            valid=rj.Problem(Kv, yv, qv, precomputed=True)),
                 rj.Dual(), lams=LAMS).value
    sd = select_lambda(LAMS, dp.valid_scores, yv, qv, metric=rj.ndcg, k=10)
    coef = np.asarray(dp.coef[int(sd.best_index)])
    out["exact Gaussian RankRLS γ=1/n (λ on valid)"] = lambda Z: np.asarray(
        rj.kernel_matrix(rj.gaussian_kernel(gamma), Z, X)) @ coef
    kp = kpcrank_path(K, y, g, components=200, K_valid=Kv)
    del K, Kv
    sel = select_lambda(np.arange(1.0, 201.0), kp.valid_scores, yv, qv, metric=rj.ndcg, k=10)
    p_best = int(sel.best_index)
    kcoef, koff = np.asarray(kp.coef[p_best]), float(kp.offset[p_best])
    out[f"KPCRank γ=1/n (components on valid: {p_best + 1})"] = lambda Z: np.asarray(
        rj.kernel_matrix(rj.gaussian_kernel(gamma), Z, X)) @ kcoef - koff
    es = RankRLS(solver="cg", lam=0.0).fit(X, y, qid=q, eval_set=(Xv, yv), eval_qid=qv)
    out["RankRLS CG (early stopping on valid)"] = es.predict
    svms = [(C, RankSVM(C=C).fit(X, y, qid=q)) for C in (0.01, 0.1, 1.0, 10.0)]
    best = best_on_valid([(C, e.predict) for C, e in svms], Xv, yv, qv)
    out[f"RankSVM (C on valid: {best[0]})"] = best[1]
    boosts = [(r, RankBoost(rounds=r).fit(X, y, qid=q)) for r in (50, 200)]
    best = best_on_valid([(r, e.predict) for r, e in boosts], Xv, yv, qv)
    out[f"RankBoost (rounds on valid: {best[0]})"] = best[1]
    try:
        import lightgbm
        sizes = np.diff(np.flatnonzero(np.r_[True, q[1:] != q[:-1], True]))
        vsizes = np.diff(np.flatnonzero(np.r_[True, qv[1:] != qv[:-1], True]))
        lg = lightgbm.LGBMRanker(n_estimators=1000, learning_rate=0.05, verbose=-1)
        lg.fit(X, y, group=sizes, eval_set=[(Xv, yv)], eval_group=[vsizes], eval_at=[10],
               callbacks=[lightgbm.early_stopping(50, verbose=False)])
        out[f"LightGBM {lightgbm.__version__} LGBMRanker (early stopping on valid)"] = lg.predict
    except ImportError:
        pass
    try:
        import xgboost
        xg = xgboost.XGBRanker(n_estimators=1000, learning_rate=0.05, objective="rank:ndcg",
                               eval_metric="ndcg@10", early_stopping_rounds=50)
        xg.fit(X, y, qid=q, eval_set=[(Xv, yv)], eval_qid=[qv], verbose=False)
        out[f"XGBoost {xgboost.__version__} XGBRanker (early stopping on valid)"] = xg.predict
    except ImportError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folds", default="1,2,3,4,5")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared",
                                                   "data", "mq2008"))
    a = ap.parse_args()
    parts = {i: io.read_svmlight(os.path.join(a.data, f"S{i}.txt.gz")) for i in range(1, 6)}
    for fold in [int(x) for x in a.folds.split(",")]:
        tr, va, te = FOLDS[fold][:3], FOLDS[fold][3], FOLDS[fold][4]
        X, y, q = concat([parts[i] for i in tr])
        order = np.argsort(q, kind="stable")            # rows of a query together (LightGBM)
        X, y, q = X[order], y[order], q[order]
        Xv, yv, qv = concat([parts[va]])
        Xt, yt, qt = concat([parts[te]])
        t0 = time.perf_counter()
        fitted = learners(X, y, q, Xv, yv, qv, 1.0 / X.shape[1])
        fit_s = time.perf_counter() - t0
        for name, fn in fitted.items():
            emit(name="mq2008", fold=fold, learner=name, dtype="float64", shape=list(X.shape),
                 **metrics(np.asarray(fn(Xt), np.float64), yt, qt),
                 fold_fit_s=round(fit_s, 1),
                 peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3))
        del fitted
        # every fold compiles hundreds of programs (new shapes) and each keeps its code
        # mapped: without this the fifth fold died in LLVM ("Cannot allocate memory")
        jax.clear_caches()


if __name__ == "__main__":
    main()
