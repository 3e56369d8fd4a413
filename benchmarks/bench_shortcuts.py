"""The shortcut targets of issue 10, timed through the public (eager) functions.

* leave-pair-out, m = 1,000, every pair with different labels, 1 and 20 λ;
* 5-fold hold-out over queries against leave-query-out on the same data, 20 λ;
* the 31-λ dual Gaussian path at m = 2,000;
* leave-query-out dual Gaussian, m = 3,000, 150 queries, 20 λ (kernel matrix included).

Each line: compile s (first call minus a warm call), run s (median of 3 warm calls
with ``block_until_ready``) and an accuracy check against a direct computation.
Run: ``python benchmarks/bench_shortcuts.py`` (float64).
"""
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import rankjax as rj  # noqa: E402
from lib.timing import emit  # noqa: E402


def timed(fn, repeats=3):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        runs.append(time.perf_counter() - t0)
    run = statistics.median(runs)
    return max(first - run, 0.0), run, out


def lpo():
    rng = np.random.default_rng(0)
    m = 1000
    X = rng.standard_normal((m, 20))
    y = np.round(X[:, 0] + rng.standard_normal(m) * 2)
    pairs = rj.differing_pairs(y)
    K = np.asarray(rj.kernel_matrix(rj.gaussian_kernel(0.02), X))
    for L in (1, 20):
        lams = np.logspace(-2, 2, L)
        c, r, out = timed(
            lambda: (
                rj.holdout(
                    rj.Problem(K, y, rj.global_graph(np.shape(K)[0]), precomputed=True),
                    rj.Dual(),
                    lams=lams,
                    folds=rj.LeavePairOut(pairs),
                ).value
            )
        )
        # check: retrain without the first pair
        a, b = pairs[0]
        keep = np.setdiff1d(np.arange(m), [a, b])
        A = rj.fit(
            rj.Problem(
                K[np.ix_(keep, keep)], y[keep], rj.global_graph(m - 2, normalized=False), precomputed=True
            ),
            rj.Dual(),
            lam=float(lams[0]),
        ).value.coef
        direct = K[[a, b]][:, keep] @ np.asarray(A)
        err = float(np.max(np.abs(np.asarray(out.predictions[0, 0]) - direct)))
        emit(name=f"leave_pair_out_dual {L} lambda", dtype="float64", shape=[m, int(len(pairs))],
             compile_s=c, run_s=r, max_abs_err_vs_retrain=err, target_s=0.5 if L == 1 else 2.0)


def kfold_vs_lqo():
    d = rj.make_ranking_data(150, num_features=46, seed=0)
    g = rj.query_graph(d.qid)
    lams = np.logspace(-3, 4, 20)
    res = {}
    for name, folds in (("leave-query-out", None), ("5-fold", 5)):
        c, r, h = timed(
            lambda: rj.holdout(rj.Problem(d.X, d.y, g), rj.Primal(), lams=lams, folds=folds).value
        )
        res[name] = (c, r, h)
    h = res["5-fold"][2]
    fold = np.asarray(h.folds.fold_of_row)
    train = fold != 0
    w = rj.fit(rj.Problem(d.X[train], d.y[train], rj.query_graph(d.qid[train])), rj.Primal(),
               lam=float(lams[3])).value.weights
    err = float(np.max(np.abs(np.asarray(h.predictions[3])[~train] - d.X[~train] @ np.asarray(w))))
    for name, (c, r, _) in res.items():
        emit(name=f"holdout_primal {name} 20 lambda", dtype="float64", shape=list(d.X.shape),
             compile_s=c, run_s=r, max_abs_err_vs_retrain=err if name == "5-fold" else None)


def dual_path():
    rng = np.random.default_rng(1)
    m = 2000
    X = rng.standard_normal((m, 10))
    y = X[:, 0] + rng.standard_normal(m)
    qid = np.repeat(np.arange(100), 20)
    g = rj.query_graph(qid)
    lams = np.logspace(-3, 3, 31)
    K = rj.kernel_matrix(rj.gaussian_kernel(0.1), X)
    c, r, p = timed(lambda: rj.path(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lams=lams).value)
    A = rj.fit(rj.Problem(K, y, g, precomputed=True), rj.Dual(), lam=float(lams[10])).value.coef
    err = float(np.max(np.abs(np.asarray(p.coef[10]) - np.asarray(A))) / np.max(np.abs(A)))
    emit(name="rankrls_dual_path gaussian 31 lambda", dtype="float64", shape=[m, m], compile_s=c,
         run_s=r, rel_err_vs_single_solve=err, target_s=1.5)


def lqo_dual():
    rng = np.random.default_rng(2)
    m, Q = 3000, 150
    X = rng.standard_normal((m, 10))
    y = X[:, 0] + rng.standard_normal(m)
    qid = np.repeat(np.arange(Q), m // Q)
    g = rj.query_graph(qid)
    lams = np.logspace(-3, 3, 20)
    kern = rj.gaussian_kernel(0.1)

    def run():
        return rj.holdout(rj.Problem(rj.kernel_matrix(kern, X), y, g, precomputed=True), rj.Dual(),
                          lams=lams).value

    c, r, h = timed(run)
    keep = qid != 0
    A = rj.fit(
        rj.Problem(X[keep], y[keep], rj.query_graph(qid[keep])), rj.Dual(kern), lam=float(lams[5])
    ).value
    err = float(np.max(np.abs(np.asarray(h.predictions[5])[~keep]
                              - np.asarray(rj.predict(A, X[~keep])))))
    emit(name="holdout_dual leave-query-out gaussian 20 lambda (kernel included)",
         dtype="float64", shape=[m, Q], compile_s=c, run_s=r, max_abs_err_vs_retrain=err,
         target_s=5.0)


if __name__ == "__main__":
    lpo()
    kfold_vs_lqo()
    dual_path()
    lqo_dual()
