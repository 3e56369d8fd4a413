"""Learned hyper-parameters against a grid on lambdarank_sample (Gaussian-kernel RankRLS,
exact leave-query-out squared RankRLS loss, float64):

    python benchmarks/bench_tune.py [--data ../shared/data/lambdarank_sample]

* grid: 20 γ × 20 λ, one eigendecomposition of the m x m dual system per γ
  (``rj.holdout(p, rj.Dual(kernel))`` gives every λ from it): 20 decompositions;
* learned: rankjax.tune (Adam on log λ, log γ, optionally ARD scales) from λ = 1,
  γ = 1 / n, one Cholesky (and its gradient) per step, at most 19 steps.

Prints JSON lines: the grid's best CV loss, the tuned trajectory's best and the number of
decompositions each used, and the test NDCG@10 of both choices (refit on all training
rows with the chosen hyper-parameters).

* learned Nyström (``--nystrom``): rankjax.tune with ``basis=`` (the Nyström model's exact
  leave-query-out loss, O(m b^2) a step) with ARD, on lambdarank_sample (test NDCG@10 of
  the refit Nyström model on the scaled rows), and the cost of one step (loss, gradient,
  Adam) on a LETOR-shaped synthetic set of 12,272 rows x 50 features for b = 1,000 and
  2,000, with and without ARD, float64 and float32 (warm seconds per step, compile, peak
  RSS; float32's loss against float64's as the accuracy check).
"""
import argparse
import os
import resource
import sys
import time

import numpy as np
import optax

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import rankjax as rj  # noqa: E402
from lib.timing import emit  # noqa: E402
from rankjax.kernels.basis import nystrom_basis  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def load(data):
    tr = rj.io.read_svmlight(os.path.join(data, "rank.train"))
    te = rj.io.read_svmlight(os.path.join(data, "rank.test"), num_features=tr.X.shape[1],
                             drop_extra=True)
    X = rj.io.normalize_per_query(tr.X, tr.qid)
    Xt = rj.io.normalize_per_query(te.X, te.qid)
    return X, tr.y, tr.qid, Xt, te.y, te.qid


def test_metrics(X, y, qid, Xt, yt, qt, lam, gamma, scales=None):
    """Test NDCG@1/5/10, MAP and disagreement error of the model refit on all training
    rows with the chosen hyper-parameters."""
    s = np.ones(X.shape[1]) if scales is None else scales
    k = rj.gaussian_kernel(gamma)
    f = rj.fit(rj.Problem(X * s, y, rj.query_graph(qid)), rj.Dual(k), lam=lam).value.predict(Xt * s)
    return {"test_ndcg1": float(rj.ndcg(f, yt, qt, k=1)),
            "test_ndcg5": float(rj.ndcg(f, yt, qt, k=5)),
            "test_ndcg10": float(rj.ndcg(f, yt, qt, k=10)),
            "test_map": float(rj.mean_average_precision(f, yt, qt)),
            "test_disagreement": float(rj.disagreement_error(f, yt, qt))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data",
                                                  "lambdarank_sample"))
    p.add_argument("--steps", type=int, default=19)
    p.add_argument("--lr", type=float, default=0.3)
    p.add_argument("--ard", action="store_true")
    p.add_argument("--nystrom", action="store_true", help="only the learned Nyström runs")
    p.add_argument("--step-bases", type=int, nargs="+", default=[1000, 2000])
    a = p.parse_args()
    X, y, qid, Xt, yt, qt = load(a.data)
    if a.nystrom:
        return nystrom_runs(a, X, y, qid, Xt, yt, qt)
    g = rj.query_graph(qid)
    folds = rj.make_folds(g)
    n = X.shape[1]
    lams = np.logspace(-4, 2, 20)
    gammas = np.logspace(-3, 0, 20) / n * 10
    t0 = time.perf_counter()
    table = np.empty((20, 20))
    for i, gm in enumerate(gammas):
        K = rj.kernel_matrix(rj.gaussian_kernel(gm), X)
        h = rj.holdout(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=lams, folds=folds).value
        table[i] = [float(g.loss(f, y)) / len(y) for f in np.asarray(h.predictions)]
    grid_s = time.perf_counter() - t0
    i, j = np.unravel_index(np.argmin(table), table.shape)
    emit(name="tune_grid_20x20", dtype="float64", shape=list(X.shape), run_s=grid_s,
         decompositions=20, best_cv_loss=float(table[i, j]), best_lam=float(lams[j]),
         best_gamma=float(gammas[i]), lams=[float(v) for v in lams],
         gammas=[float(v) for v in gammas], cv_loss_table=np.round(table, 7).tolist(),
         **test_metrics(X, y, qid, Xt, yt, qt, lams[j], gammas[i]))
    t0 = time.perf_counter()
    r = rj.tune(rj.Problem(X, y, g), rj.Dual(rj.gaussian_kernel(1.0 / n)), ard=a.ard, lam=1.0,
                folds=folds, steps=a.steps, optimizer=optax.adam(a.lr))
    tune_s = time.perf_counter() - t0
    best = int(np.argmin(r.loss_history))
    first = np.flatnonzero(r.loss_history <= table[i, j])
    lam_t = float(np.exp(r.params_history["log_lam"][best]))
    gam_t = float(np.exp(r.params_history["log_gamma"][best]))
    scales = (np.exp(r.params_history["log_scales"][best]) if a.ard else None)
    emit(name="tune_adam", dtype="float64", shape=list(X.shape), run_s=tune_s, ard=a.ard,
         steps=a.steps, decompositions=best + 1, best_cv_loss=float(r.loss_history[best]),
         reaches_grid_best_at_step=int(first[0]) if first.size else None,
         best_lam=lam_t, best_gamma=gam_t,
         loss_history=[round(float(v), 7) for v in r.loss_history],
         lam_history=np.exp(r.params_history["log_lam"]).tolist(),
         gamma_history=np.exp(r.params_history["log_gamma"]).tolist(),
         **test_metrics(X, y, qid, Xt, yt, qt, lam_t, gam_t, scales))


def nystrom_runs(a, X, y, qid, Xt, yt, qt):
    """The learned Nyström rows: lambdarank_sample (ARD, squared and smooth-NDCG losses),
    then the per-step cost at 12k rows."""
    g = rj.query_graph(qid)
    folds = rj.make_folds(g)
    n = X.shape[1]
    for b, ard, lr in ((2000, False, 0.3), (1000, True, 0.1), (2000, True, 0.1)):
        basis = rj.Basis(b, method="kmeans++")
        t0 = time.perf_counter()
        r = rj.tune(rj.Problem(X, y, g), rj.Nystrom(rj.gaussian_kernel(1.0 / n), basis), ard=ard,
                    lam=1.0, folds=folds, steps=a.steps, optimizer=optax.adam(lr))
        tune_s = time.perf_counter() - t0
        best = int(np.argmin(r.loss_history))
        lam_t = float(np.exp(r.params_history["log_lam"][best]))
        gam_t = float(np.exp(r.params_history["log_gamma"][best]))
        s = np.exp(r.params_history["log_scales"][best]) if ard else np.ones(n)
        idx = nystrom_basis(X, b, kernel=rj.gaussian_kernel(1.0 / n), method="kmeans++")
        model = rj.path(
            rj.Problem(X * s, y, g), rj.Nystrom(rj.gaussian_kernel(gam_t), idx), lams=[lam_t]
        ).value
        f = np.asarray(rj.predict(model, Xt * s))[0]
        emit(name="tune_nystrom", dtype="float64", shape=list(X.shape), basis=b, ard=ard,
             learning_rate=lr, run_s=tune_s, steps=a.steps, best_cv_loss=float(r.loss_history[best]),
             best_lam=lam_t, best_gamma=gam_t,
             scales_min_max=[float(s.min()), float(s.max())],
             loss_history=[round(float(v), 7) for v in r.loss_history],
             test_ndcg10=float(rj.ndcg(f, yt, qt, k=10)),
             peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)
    d = rj.make_ranking_data(650, num_features=50, docs_per_query=(10, 27), seed=0)
    gd = rj.query_graph(d.qid)
    fd = rj.make_folds(gd)
    ref = {}
    for dtype in ("float64", "float32"):
        Xd, yd = d.X.astype(dtype), d.y.astype(dtype)
        for b in a.step_bases:
            for ard in (False, True):
                kw = dict(ard=ard, folds=fd, optimizer=optax.adam(0.1))
                pd, solver = rj.Problem(Xd, yd, gd), rj.Nystrom(rj.gaussian_kernel(1.0 / 50), b)
                t0 = time.perf_counter()
                rj.tune(pd, solver, steps=1, **kw)
                compile_s = time.perf_counter() - t0
                per = []
                for _ in range(3):
                    t1 = time.perf_counter()
                    rj.tune(pd, solver, steps=1, **kw)
                    t2 = time.perf_counter()
                    r = rj.tune(pd, solver, steps=3, **kw)
                    per.append(((time.perf_counter() - t2) - (t2 - t1)) / 2)
                key = (b, ard)
                ref.setdefault(key, r.loss_history)
                emit(name="tune_nystrom_step", dtype=dtype, shape=list(Xd.shape), basis=b, ard=ard,
                     compile_s=compile_s, run_s=float(np.median(per)), runs=per,
                     loss_rel_to_float64=float(np.max(np.abs(r.loss_history - ref[key])
                                                      / np.abs(ref[key]))),
                     peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6)


if __name__ == "__main__":
    main()
