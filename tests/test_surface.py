"""Every public name of ``rankjax`` and ``rankjax.io`` driven through bad and degenerate
input (issue 11): each case asserts a ``ValueError``/``TypeError`` whose message names
the argument, or the documented value. ``test_every_public_name_is_covered`` fails
when a new public name has no case here.

Cases are ``(call, expected)``: ``call(d)`` gets the small problem ``d`` below;
``expected`` is ``E(ExceptionType, "regex")`` or ``V(predicate)`` on the result.
"""
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax import io


class E(SimpleNamespace):
    def __init__(self, exc, match):
        super().__init__(exc=exc, match=match)


class V(SimpleNamespace):
    def __init__(self, check):
        super().__init__(check=check)


def nan(x):
    return bool(np.all(np.isnan(np.asarray(x))))


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    data = rj.make_ranking_data(5, num_features=4, docs_per_query=(4, 7), seed=0)
    X, y, qid = data.X, data.y, data.qid
    m, n = X.shape
    g = rj.query_graph(qid)
    K = X @ X.T
    pref = rj.preference_graph([0, 1, 2], [1, 2, 3], num_rows=m)
    tmp = tmp_path_factory.mktemp("surface")
    bad_file = tmp / "bad.txt"
    bad_file.write_text("1 qid:1 1:0.5\n2 qid:1 x:1\n")
    good_file = tmp / "good.txt"
    good_file.write_text("1 qid:1 1:0.5 2:1\n2 qid:1 1:1\n")
    keep = tmp / "keep.txt"
    keep.write_text("old contents\n")
    model_file = tmp / "model.npz"
    io.save_model(model_file, np.ones(n))
    foreign = tmp / "foreign.npz"
    np.savez(foreign, w=np.ones(3))
    lpo = rj.leave_pair_out_dual(K, y, rj.differing_pairs(y)[:5], lams=[1.0])
    gp = rj.gp_pairwise_gaussian(K, [0, 1], [1, 2], [1.0, 1.0], noise_var=1.0)
    holdout = rj.holdout_primal(X, y, g, lams=[1.0, 10.0])
    return SimpleNamespace(X=X, y=y, qid=qid, m=m, n=n, g=g, K=K, pref=pref, tmp=tmp,
                           sharded=rj.shard_data(X, y, g),
                           bad_file=bad_file, good_file=good_file, keep=keep,
                           model_file=model_file, foreign=foreign,
                           lpo=lpo, gp=gp, holdout=holdout, folds=rj.make_folds(g),
                           ties=np.zeros(m), nanv=np.r_[np.nan, np.zeros(m - 1)],
                           kern=rj.gaussian_kernel(0.5))


def _metric_cases(fn, **kw):
    """The shared table of a per-query metric."""
    return [
        (lambda d: fn(d.nanv, d.y, d.qid, **kw), E(ValueError, "scores contains NaN")),
        (lambda d: fn(d.y, d.y[:-1], d.qid, **kw), E(ValueError, "y must have the shape")),
        (lambda d: fn(d.y, d.y, d.qid[:-1], **kw), E(ValueError, "qid")),
        (lambda d: fn(d.y, d.y, d.qid.astype(float), **kw), E(TypeError, "qid must be an integer")),
        (lambda d: fn(d.y, d.y, d.qid, num_queries=2.5, **kw), E(TypeError, "num_queries")),
        (lambda d: fn(d.y, d.y, d.qid + 100, num_queries=5, **kw), E(ValueError, "segment ids")),
        (lambda d: fn(np.zeros(0), np.zeros(0), **kw), E(ValueError, "scores is empty")),
        (lambda d: fn(d.y[:, None], d.y[:, None], **kw), E(ValueError, "scores must be 1-D")),
        # degenerate: size-1 queries and all-tied labels have no pair / no relevant document
        (lambda d: fn(d.y, np.zeros(d.m), d.qid, **kw), V(nan)),
        (lambda d: fn(d.y, d.y, np.arange(d.m), **kw),
         V(lambda v: nan(v) or 0 <= float(v) <= 1)),
        (lambda d: fn(d.y, d.y, d.qid, per_query=True, **kw),
         V(lambda r: r.values.shape == (5,) and r.valid.dtype == bool)),
    ]


PAIR_METRICS = ("pairwise_error", "cindex", "disagreement_error", "kendall_tau_b")
LIST_METRICS = ("ndcg", "mean_average_precision", "precision_at_k")

CASES = {name: _metric_cases(getattr(rj, name)) for name in PAIR_METRICS + LIST_METRICS}
CASES["auc"] = [
    (lambda d: rj.auc(d.y, d.y, d.qid), E(ValueError, "y")),            # graded labels
    (lambda d: rj.auc(d.nanv, (d.y > 1) * 1.0, d.qid), E(ValueError, "scores contains NaN")),
    (lambda d: rj.auc(d.y, np.ones(d.m)), V(nan)),                       # no negative
    (lambda d: rj.auc(np.zeros(4), np.array([0., 1, 0, 1])), V(lambda v: float(v) == 0.5)),
]
CASES["ndcg"] += [
    (lambda d: rj.ndcg(d.y, d.y - 5, d.qid), E(ValueError, "y >= 0")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, k=0), E(ValueError, "k")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, gain="cubic"), E(ValueError, "gain")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, ties="random"), E(ValueError, "ties")),
    (lambda d: rj.ndcg(d.y, d.y, d.qid, no_relevant="never"), E(ValueError, "no_relevant")),
    (lambda d: rj.ndcg(d.y, np.zeros(d.m), d.qid, no_relevant="zero"), V(lambda v: float(v) == 0)),
]
CASES["precision_at_k"] += [
    (lambda d: rj.precision_at_k(d.y, d.y, d.qid, k=2.5), E((TypeError, ValueError), "k must be")),
    (lambda d: rj.precision_at_k(d.y, d.y, d.qid, threshold=np.nan), E(ValueError, "threshold")),
]
CASES["mean_average_precision"] += [
    (lambda d: rj.mean_average_precision(d.ties, (d.y > 1) * 1.0, d.qid, ties="stable"),
     V(lambda v: 0 < float(v) <= 1)),
]

CASES.update({
    "edge_disagreement_error": [
        (lambda d: rj.edge_disagreement_error(d.y, [0, d.m], [1, 2]), E(ValueError, "head")),
        (lambda d: rj.edge_disagreement_error(d.y, [0, 1], [1, 2, 3]), E(ValueError, "differ in length")),
        (lambda d: rj.edge_disagreement_error(d.nanv, [0], [1]), E(ValueError, "scores contains NaN")),
    ],
    # --- graphs --------------------------------------------------------------------------
    "query_graph": [
        (lambda d: rj.query_graph(d.qid.astype(float)), E(TypeError, "qid must be an integer")),
        (lambda d: rj.query_graph(np.zeros(0, int)), E(ValueError, "qid is empty")),
        (lambda d: rj.query_graph(d.qid, d.y[:-1]), E(ValueError, "y")),
        (lambda d: rj.query_graph(d.qid, query_weights=-np.ones(5)), E(ValueError, "query_weights")),
        (lambda d: rj.query_graph(d.qid, query_weights=np.ones(4)), E(ValueError, "query_weights")),
        (lambda d: rj.query_graph(d.qid, exclude_ties=True), E(ValueError, "y")),
    ],
    "global_graph": [
        (lambda d: rj.global_graph(0), E(ValueError, "num_rows")),
        (lambda d: rj.global_graph(2.5), E((TypeError, ValueError), "num_rows")),
        (lambda d: rj.global_graph(3, y=np.ones(4)), E(ValueError, "y")),
    ],
    "identity_graph": [
        (lambda d: rj.identity_graph(0), E(ValueError, "num_rows")),
        (lambda d: rj.identity_graph(np.ones(2)), E((TypeError, ValueError), "num_rows")),
    ],
    "preference_graph": [
        (lambda d: rj.preference_graph([0, -1], [1, 2], num_rows=d.m), E(ValueError, "head")),
        (lambda d: rj.preference_graph([0, 1], [1, d.m], num_rows=d.m), E(ValueError, "tail")),
        (lambda d: rj.preference_graph([0, 1], [0, 2], num_rows=d.m), E(ValueError, "itself")),
        (lambda d: rj.preference_graph([0], [1], [-1.0], num_rows=d.m), E(ValueError, "magnitude")),
        (lambda d: rj.preference_graph([0], [1], num_rows=d.m, cost="hinge"), E(ValueError, "cost")),
        (lambda d: rj.preference_graph([], [], num_rows=d.m), E(ValueError, "no edges")),
    ],
    "pairs_from_scores": [
        (lambda d: rj.pairs_from_scores(d.nanv, d.qid), E(ValueError, "y")),
        (lambda d: rj.pairs_from_scores(d.y, d.qid[:-1]), E(ValueError, "qid")),
        (lambda d: rj.pairs_from_scores(d.ties, d.qid), V(lambda p: len(p[0]) == 0)),
    ],
    "laplacian_mv": [
        (lambda d: rj.laplacian_mv(d.g, np.ones(d.m + 1)), E(ValueError, "v")),
        (lambda d: rj.laplacian_mv(d.qid, np.ones(d.m)), E(TypeError, "graph")),
    ],
    "laplacian_sqrt_mv": [
        (lambda d: rj.laplacian_sqrt_mv(d.g, np.ones(d.m + 1)), E(ValueError, "v")),
    ],
    "laplacian_dense": [
        (lambda d: rj.laplacian_dense("graph"), E(TypeError, "graph")),
    ],
    "incidence_mv": [
        (lambda d: rj.incidence_mv(d.pref, np.ones(d.m + 1)), E(ValueError, "u")),
        (lambda d: rj.incidence_mv(d.g, np.ones(d.m)), E(TypeError, "PreferenceGraph")),
    ],
    "incidence_t_mv": [
        (lambda d: rj.incidence_t_mv(d.pref, np.ones(4)), E(ValueError, "v")),
        (lambda d: rj.incidence_t_mv(d.g, np.ones(3)), E(TypeError, "PreferenceGraph")),
    ],
    "query_pair_counts": [
        (lambda d: rj.query_pair_counts(d.pref), E(TypeError, "QueryGraph")),
    ],
    "segment_ids": [
        (lambda d: rj.segment_ids(d.qid.astype(float)), E(TypeError, "qid must be an integer")),
        (lambda d: rj.segment_ids(d.qid[:, None]), E(ValueError, "1-D")),
    ],
    # --- kernels -------------------------------------------------------------------------
    "gaussian_kernel": [
        (lambda d: rj.gaussian_kernel(-1.0), E(ValueError, "gamma")),
        (lambda d: rj.gaussian_kernel(np.ones(2)), E(TypeError, "gamma must be a scalar")),
    ],
    "polynomial_kernel": [
        (lambda d: rj.polynomial_kernel(0), E(ValueError, "degree")),
        (lambda d: rj.polynomial_kernel(2, coef0=np.nan), E(ValueError, "coef0")),
    ],
    "linear_kernel": [
        (lambda d: rj.kernel_matrix(rj.linear_kernel(), d.X, d.X[:, :2]), E(ValueError, "equal n")),
    ],
    "kernel_matrix": [
        (lambda d: rj.kernel_matrix("rbf", d.X), E(TypeError, "kernel")),
        (lambda d: rj.kernel_matrix(d.kern, d.X, block_size=0), E(ValueError, "block_size")),
        (lambda d: rj.kernel_matrix(d.kern, np.where(d.X > 0, np.nan, d.X)), E(ValueError, "NaN")),
    ],
    "center_kernel": [
        (lambda d: rj.center_kernel(d.X), E(ValueError, "square")),
        (lambda d: rj.center_kernel(np.full((3, 3), np.nan)), E(ValueError, "NaN")),
    ],
    "center_test_kernel": [
        (lambda d: rj.center_test_kernel(d.K[:2, :-1], d.K), E(ValueError, "K_test")),
    ],
    "nystrom_basis": [
        (lambda d: rj.nystrom_basis(d.X, 0), E(ValueError, "size")),
        (lambda d: rj.nystrom_basis(d.X, 2, method="kmeans++"), E(TypeError, "kernel")),
        (lambda d: rj.nystrom_basis(d.X, 2, method="grid"), E(ValueError, "method")),
    ],
    "rankrls_falkon": [
        (lambda d: rj.rankrls_falkon(d.X, d.y, d.g, lam=-1.0, kernel=rj.gaussian_kernel(1.0), basis=3),
         E(ValueError, "lam")),
        (lambda d: rj.rankrls_falkon(d.X, d.y, d.pref, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                     basis=3), E(ValueError, "y must be None")),
        (lambda d: rj.rankrls_falkon(d.X, d.y, d.g, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                     basis=np.array([0, d.m])), E(ValueError, "basis")),
        (lambda d: rj.rankrls_falkon(d.X, d.y, d.g, lam=1.0, kernel=None, basis=3), E(TypeError, "kernel")),
    ],
    "sharded_falkon": [
        (lambda d: rj.sharded_falkon(d.sharded, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                     basis_X=d.X[:, :-1]), E(ValueError, "basis_X")),
        (lambda d: rj.sharded_falkon(d.sharded, lam=0.0, kernel=rj.gaussian_kernel(1.0),
                                     basis_X=d.X[:3]), E(ValueError, "lam")),
    ],
    "Nystrom": [
        (lambda d: rj.Nystrom(), E(TypeError, "size= or rows=")),
        (lambda d: rj.Nystrom(0), E(ValueError, "size")),
        (lambda d: rj.Nystrom(3, method="grid"), E(ValueError, "method")),
        (lambda d: rj.rankrls_nystrom_path(d.X, d.y, d.g, lams=[1.0], kernel=rj.gaussian_kernel(1.0),
                                           basis=rj.Nystrom(rows=np.array([0, 0]))),
         E(ValueError, "repeated")),
    ],
    "select_rankrls": [
        (lambda d: rj.select_rankrls(d.X, d.y, d.qid, lams=[-1.0]), E(ValueError, "lams")),
        (lambda d: rj.select_rankrls(d.X, d.y, d.qid, lams=[1.0], kernels=[]), E(ValueError, "kernels")),
        (lambda d: rj.select_rankrls(d.X, d.y, d.qid, lams=[1.0], basis=3), E(ValueError, "basis")),
        (lambda d: rj.select_rankrls(d.X, d.y, d.qid, lams=[1.0], optimize=True,
                                     valid=(d.X, d.y, d.qid)), E(ValueError, "optimize")),
        (lambda d: rj.select_rankrls(d.X, d.y, d.qid, lams=[1.0], optimize=True,
                                     kernels=[rj.polynomial_kernel(2)]), E(ValueError, "optimize")),
    ],
    "rankrls_fit": [
        (lambda d: rj.rankrls_fit(d.X, d.y, d.g, lam=-1.0), E(ValueError, "lam")),
        (lambda d: rj.rankrls_fit(d.X, d.y, d.g, lam=1.0, kernel=rj.gaussian_kernel(1.0),
                                  basis=d.m + 1), E(ValueError, "basis")),
    ],
    "nystrom_features": [
        (lambda d: rj.nystrom_features(d.K[:3], d.K[:2, :2]), E(ValueError, "K_RR")),
    ],
    # --- solvers -------------------------------------------------------------------------
    "rankrls_primal": [
        (lambda d: rj.rankrls_primal(d.X, d.y, d.g, lam=-1.0), E(ValueError, "lam")),
        (lambda d: rj.rankrls_primal(d.X, d.y, d.g, lam=[1.0, 2.0]), E(TypeError, "lam must be a scalar")),
        (lambda d: rj.rankrls_primal(d.X, d.y[:-1], d.g, lam=1.0), E(ValueError, "y has")),
        (lambda d: rj.rankrls_primal(np.c_[d.X[:, :-1], d.nanv], d.y, d.g, lam=1.0),
         E(ValueError, "X contains NaN")),
        (lambda d: rj.rankrls_primal(d.X, d.y, d.qid, lam=1.0), E(TypeError, "graph")),
        # every query of size 1: no pair, the minimiser of λ||w||^2 alone
        (lambda d: rj.rankrls_primal(d.X, d.y, rj.query_graph(np.arange(d.m)), lam=1.0),
         V(lambda r: np.all(np.asarray(r.weights) == 0))),
    ],
    "rankrls_dual": [
        (lambda d: rj.rankrls_dual(d.K, d.y, d.g, lam=0.0), E(ValueError, "lam")),
        (lambda d: rj.rankrls_dual(d.X, d.y, d.g, lam=1.0), E(ValueError, "K must be square")),
        (lambda d: rj.rankrls_dual(d.K + np.triu(np.ones_like(d.K)), d.y, d.g, lam=1.0),
         E(ValueError, "K is not symmetric")),
    ],
    "rankrls_kernel": [
        (lambda d: rj.rankrls_kernel(d.X, d.y, d.g, lam=1.0, kernel="rbf"), E(TypeError, "kernel")),
        (lambda d: rj.rankrls_kernel(d.X, d.y, d.g, lam=np.inf, kernel=d.kern), E(ValueError, "lam")),
    ],
    "rankrls_primal_path": [
        (lambda d: rj.rankrls_primal_path(d.X, d.y, d.g, lams=[]), E(ValueError, "lams")),
        (lambda d: rj.rankrls_primal_path(d.X, d.y, d.g, lams=[1.0, -1.0]), E(ValueError, "lams")),
        (lambda d: rj.rankrls_primal_path(d.X, d.y, d.g, lams=[1.0], X_valid=d.X[:, :2]),
         E(ValueError, "X_valid")),
    ],
    "rankrls_dual_path": [
        (lambda d: rj.rankrls_dual_path(d.K, d.y, d.g, lams=[[1.0]]), E(ValueError, "lams")),
        (lambda d: rj.rankrls_dual_path(d.K, d.y, d.g, lams=[1.0], K_valid=d.K[:, :3]),
         E(ValueError, "K_valid")),
    ],
    "rankrls_nystrom_path": [
        (lambda d: rj.rankrls_nystrom_path(d.X, d.y, d.g, lams=[1.0], kernel=d.kern, basis=[0, d.m]),
         E(ValueError, "basis")),
        (lambda d: rj.rankrls_nystrom_path(d.X, d.y, d.g, lams=[1.0], kernel=d.kern, basis=[1, 1]),
         E(ValueError, "basis")),
        (lambda d: rj.rankrls_nystrom_path(d.X, d.y, d.g, lams=[1.0], kernel=d.kern, basis=0),
         E(ValueError, "basis")),
    ],
    "rankrls_cg": [
        (lambda d: rj.rankrls_cg(d.X, d.y, d.g, lam=-1.0), E(ValueError, "lam")),
        (lambda d: rj.rankrls_cg(d.X, d.y, d.g, x0=np.ones(d.n + 1)), E(ValueError, "x0")),
        (lambda d: rj.rankrls_cg(d.X, d.y, d.g, lam=1.0, metric="nope", valid=(d.X, d.y, d.g)),
         E(ValueError, "metric")),
        (lambda d: rj.rankrls_cg(d.X, d.y, d.g, lam=1.0, valid=(d.X[:, :2], d.y, d.g)),
         E(ValueError, "X_valid")),
    ],
    "rankrls_cg_dual": [
        (lambda d: rj.rankrls_cg_dual(d.K, d.y, d.g, lam=np.nan), E(ValueError, "lam")),
        (lambda d: rj.rankrls_cg_dual(d.K, d.y, d.g, x0=np.ones(2)), E(ValueError, "x0")),
    ],
    "cg_solve": [
        (lambda d: rj.cg_solve(d.K, np.ones(d.m)), E(TypeError, "matvec")),
        (lambda d: rj.cg_solve(lambda v: v, np.ones(3), lam=-1.0), E(ValueError, "lam")),
        (lambda d: rj.cg_solve(lambda v: v, np.ones(3), tol=-1.0), E(ValueError, "tol")),
        (lambda d: rj.cg_solve(lambda v: v, np.r_[np.nan, 1, 1]), E(ValueError, "b")),
        (lambda d: rj.cg_solve(lambda v: v, np.ones(3), x0=np.ones(2)), E(ValueError, "x0")),
        (lambda d: rj.cg_solve(lambda v: v, np.zeros(3)),
         V(lambda r: np.all(np.asarray(r.weights) == 0) and bool(r.converged))),
    ],
    "validation_criterion": [
        (lambda d: rj.validation_criterion((d.y, d.g), "nope"), E(ValueError, "metric")),
        (lambda d: rj.validation_criterion((d.y[:-1], d.g)), E(ValueError, "y")),
        (lambda d: rj.validation_criterion(d.y), E(TypeError, "valid")),
    ],
    "select_lambda": [
        (lambda d: rj.select_lambda([1.0, 2.0], np.ones((3, d.m)), d.y, d.qid, metric=rj.ndcg),
         E(ValueError, "scores")),
        (lambda d: rj.select_lambda([1.0], np.full((1, d.m), np.nan), d.y, d.qid, metric=rj.ndcg),
         E(ValueError, "every λ")),
        (lambda d: rj.select_lambda([1.0], d.y[None], d.y, d.qid, metric="ndcg"),
         E(TypeError, "metric")),
    ],
    "kpcrank": [
        (lambda d: rj.kpcrank(d.K, d.y, d.g, components=0), E(ValueError, "components")),
        (lambda d: rj.kpcrank(d.K, d.y, d.g, components=2.0), E(TypeError, "components")),
        (lambda d: rj.kpcrank(d.K, d.y, d.g, components=2, lam=-1.0), E(ValueError, "lam")),
    ],
    "kpcrank_path": [
        (lambda d: rj.kpcrank_path(d.K, d.y, d.g, max_components=d.m + 1), E(ValueError, "max_components")),
        (lambda d: rj.kpcrank_path(np.zeros((d.m, d.m)), d.y, d.g, max_components=3),
         V(lambda r: np.all(np.asarray(r.weights) == 0))),
    ],
    "ranksvm_l2": [
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid, C=0.0), E(ValueError, "C")),
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid, C=np.ones(2)), E(TypeError, "C must be a scalar")),
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid[:-1]), E(ValueError, "qid|rows")),
        (lambda d: rj.ranksvm_l2(d.X, d.y, d.qid, max_iter=0), E(ValueError, "max_iter")),
        (lambda d: rj.ranksvm_l2(d.X, d.ties, d.qid),                    # no pair: w = 0
         V(lambda r: np.all(np.asarray(r.weights) == 0))),
    ],
    "ranksvm_kernel": [
        (lambda d: rj.ranksvm_kernel(d.X, d.y, d.qid, kernel=d.kern, basis=[0, d.m]), E(ValueError, "basis")),
        (lambda d: rj.ranksvm_kernel(d.X, d.y, d.qid, kernel=d.kern, C=-1.0), E(ValueError, "C")),
    ],
    "rank_levels": [
        (lambda d: rj.rank_levels(d.nanv, d.qid), E(ValueError, "y")),
        (lambda d: rj.rank_levels(d.y, d.qid[:-1]), E(ValueError, "qid|rows")),
    ],
    "rankboost": [
        (lambda d: rj.rankboost(d.X, d.y, d.qid, rounds=2.5), E(TypeError, "rounds")),
        (lambda d: rj.rankboost(d.X, d.y, d.qid, num_thresholds=0), E(ValueError, "num_thresholds")),
        (lambda d: rj.rankboost(np.c_[d.X[:, :-1], d.nanv], d.y, d.qid), E(ValueError, "X")),
    ],
    "rankboost_predict": [
        (lambda d: rj.rankboost_predict(rj.rankboost(d.X, d.y, d.qid, rounds=2), d.X[:, :2]),
         E(ValueError, "trained on")),
        (lambda d: rj.rankboost_predict(d.X, d.X), E(TypeError, "model")),
    ],
    "predict": [
        (lambda d: rj.predict(rj.LinearModel(np.ones(3)), d.X), E(ValueError, "features")),
        (lambda d: rj.predict(object(), d.X), E(TypeError, "model")),
        (lambda d: rj.predict(rj.LinearModel(np.ones(d.n)), np.c_[d.X[:, :-1], d.nanv]),
         E(ValueError, "NaN")),
    ],
    # --- hold-out and tests --------------------------------------------------------------
    "make_folds": [
        (lambda d: rj.make_folds(d.g, 1), E(ValueError, "folds")),
        (lambda d: rj.make_folds(d.g, 6), E(ValueError, "folds")),
        (lambda d: rj.make_folds(d.g, np.zeros(d.m - 1, int)), E(ValueError, "folds")),
        (lambda d: rj.make_folds(d.pref), E(TypeError, "PreferenceGraph")),
    ],
    "holdout_primal": [
        (lambda d: rj.holdout_primal(d.X, d.y, d.g, lams=[1.0],
                                     folds=rj.make_folds(rj.query_graph(d.qid // 2))),
         E(ValueError, "another graph")),
        (lambda d: rj.holdout_primal(d.X, d.y, d.g, lams=[-1.0]), E(ValueError, "lams")),
        (lambda d: rj.holdout_primal(d.X, d.y, d.pref, lams=[1.0]), E(TypeError, "PreferenceGraph")),
    ],
    "holdout_dual": [
        (lambda d: rj.holdout_dual(d.K, d.y[:-1], d.g, lams=[1.0]), E(ValueError, "y")),
        (lambda d: rj.holdout_dual(d.K, d.y, d.g, lams=[1.0], folds="loo"),
         E((TypeError, ValueError), "folds")),
    ],
    "holdout_nystrom": [
        (lambda d: rj.holdout_nystrom(d.X, d.y, d.g, lams=[1.0], kernel=d.kern, basis=[-1, 0]),
         E(ValueError, "basis")),
    ],
    "cross_validate": [
        (lambda d: rj.cross_validate(d.y, d.y, d.qid, metric=rj.ndcg), E(TypeError, "holdout")),
        (lambda d: rj.cross_validate(d.holdout, d.y[:-1], d.qid, metric=rj.ndcg), E(ValueError, "y|scores")),
    ],
    "leave_pair_out_dual": [
        (lambda d: rj.leave_pair_out_dual(d.K, d.y, [[0, 0]], lams=[1.0]), E(ValueError, "pairs")),
        (lambda d: rj.leave_pair_out_dual(d.K, d.y, [[0, 1, 2]], lams=[1.0]), E(ValueError, "pairs")),
        (lambda d: rj.leave_pair_out_dual(d.K[:2, :2], d.y[:2], [[0, 1]], lams=[1.0]),
         E(ValueError, "3 rows")),
    ],
    "leave_pair_out_primal": [
        (lambda d: rj.leave_pair_out_primal(d.X, d.y, [[0, d.m]], lams=[1.0]), E(ValueError, "pairs")),
        (lambda d: rj.leave_pair_out_primal(d.X, d.y, [[0.0, 1.0]], lams=[1.0]), E(TypeError, "pairs")),
    ],
    "lpo_cindex": [
        (lambda d: rj.lpo_cindex(d.lpo, d.y[:3]), E(ValueError, "pairs index row")),
        (lambda d: rj.lpo_cindex(d.lpo, d.ties), E(ValueError, "no pair")),
    ],
    "differing_pairs": [
        (lambda d: rj.differing_pairs(d.nanv), E(ValueError, "y")),
        (lambda d: rj.differing_pairs(d.ties), V(lambda p: p.shape == (0, 2))),
    ],
    "positive_negative_pairs": [
        (lambda d: rj.positive_negative_pairs(d.y), E(ValueError, "y")),     # graded, not 0/1
        (lambda d: rj.positive_negative_pairs(np.ones(4)), V(lambda p: p.shape == (0, 2))),
    ],
    "permuted_labels": [
        (lambda d: rj.permuted_labels(d.y, d.qid, num_permutations=0), E(ValueError, "num_permutations")),
        (lambda d: rj.permuted_labels(d.y, d.qid[:-1], num_permutations=2), E(ValueError, "qid")),
    ],
    "permutation_test": [
        (lambda d: rj.permutation_test(lambda y: d.holdout, d.y, d.qid, metric=rj.ndcg,
                                       num_permutations=0), E(ValueError, "num_permutations")),
        (lambda d: rj.permutation_test(d.holdout, d.y, d.qid, metric=rj.ndcg), E(TypeError, "holdout_fn")),
    ],
    # --- pairwise GP ---------------------------------------------------------------------
    "gp_pairwise_gaussian": [
        (lambda d: rj.gp_pairwise_gaussian(d.K, [0], [1], [1.0], noise_var=0.0), E(ValueError, "noise_var")),
        (lambda d: rj.gp_pairwise_gaussian(d.K, [0, 1], [1, 2], [1.0], noise_var=1.0),
         E(ValueError, "diffs")),
    ],
    "gp_pairwise_probit": [
        (lambda d: rj.gp_pairwise_probit(d.K, [0], [d.m]), E(ValueError, "tail")),
        (lambda d: rj.gp_pairwise_probit(d.K, [0], [1], [0.5]), E(ValueError, "direction")),
    ],
    "gp_fit": [
        (lambda d: rj.gp_fit(d.X, [0], [1], likelihood="logit"), E(ValueError, "likelihood")),
        (lambda d: rj.gp_fit(d.X, [0], [1], steps=0), E(ValueError, "steps")),
    ],
    "gp_predict": [
        (lambda d: rj.gp_predict(d.gp, d.K[:2, :1], np.ones(2)), E(ValueError, "K_test")),
        (lambda d: rj.gp_predict(d.gp, d.K[:2], np.ones(3)), E(ValueError, "k_test_diag")),
    ],
    "gp_preference_probability": [
        (lambda d: rj.gp_preference_probability(d.gp, d.K[:2], d.K[:3], np.ones(2), np.ones(3),
                                                np.ones(2)), E(ValueError, "K_b|shape")),
    ],
    # --- data ----------------------------------------------------------------------------
    "make_ranking_data": [
        (lambda d: rj.make_ranking_data(0), E(ValueError, "num_queries")),
        (lambda d: rj.make_ranking_data(3, levels=1), E(ValueError, "levels")),
        (lambda d: rj.make_ranking_data(3, docs_per_query=(5, 2)), E(ValueError, "docs_per_query")),
    ],
    "make_sparse_ranking_data": [
        (lambda d: rj.make_sparse_ranking_data(0, 100), E(ValueError, "num_rows")),
        (lambda d: rj.make_sparse_ranking_data(10, 5, nnz_per_row=6), E(ValueError, "nnz_per_row")),
    ],
    "to_csr": [
        (lambda d: rj.to_csr(np.ones((2, 2, 2))), E(ValueError, "2-D")),
        (lambda d: rj.to_csr(d.nanv[:, None]), E(ValueError, "NaN")),
    ],
    # --- rankjax.io ----------------------------------------------------------------------
    "io.read_svmlight": [
        (lambda d: io.read_svmlight(d.bad_file), E(ValueError, "line 2")),
        (lambda d: io.read_svmlight(d.tmp / "missing.txt"), E(FileNotFoundError, "missing")),
        (lambda d: io.read_svmlight(d.good_file, num_features=0), E(ValueError, "num_features")),
        (lambda d: io.read_svmlight(d.good_file, num_features=1), E(ValueError, "num_features|feature 2")),
    ],
    "io.write_svmlight": [
        (lambda d: io.write_svmlight(d.keep, d.nanv[:, None], d.y), E(ValueError, "X")),
        (lambda d: io.write_svmlight(d.keep, d.X, d.y, d.qid + 0.5), E((TypeError, ValueError), "qid")),
        (lambda d: io.write_svmlight(d.keep, d.X, d.y[:-1]), E(ValueError, "y")),
    ],
    "io.read_groups": [
        (lambda d: io.read_groups(d.bad_file), E(ValueError, "line")),
    ],
    "io.write_groups": [
        (lambda d: io.write_groups(d.keep, [2.5, 3]), E((TypeError, ValueError), "sizes must hold integers")),
        (lambda d: io.write_groups(d.keep, [2, 0]), E(ValueError, "sizes")),
    ],
    "io.groups_to_qid": [
        (lambda d: io.groups_to_qid([2, -1]), E(ValueError, "sizes")),
        (lambda d: io.groups_to_qid([2.0, 1.5]), E((TypeError, ValueError), "sizes must hold integers")),
    ],
    "io.qid_to_groups": [
        (lambda d: io.qid_to_groups(np.array([0, 1, 0])), E(ValueError, "contiguous|sorted")),
        (lambda d: io.qid_to_groups(np.array([0.5, 1.0])), E((TypeError, ValueError), "qid")),
    ],
    "io.read_preferences": [
        (lambda d: io.read_preferences(d.bad_file), E(ValueError, "line")),
    ],
    "io.write_preferences": [
        (lambda d: io.write_preferences(d.keep, [0.5], [1]), E((TypeError, ValueError), "head")),
        (lambda d: io.write_preferences(d.keep, [0, 1], [1]), E(ValueError, "length")),
    ],
    "io.normalize_per_query": [
        (lambda d: io.normalize_per_query(d.nanv[:, None], d.qid), E(ValueError, "X")),
        (lambda d: io.normalize_per_query(d.X, d.qid[:-1]), E(ValueError, "qid")),
        (lambda d: io.normalize_per_query(np.ones((3, 1)), np.zeros(3, int)),   # constant: 0
         V(lambda Z: np.all(Z == 0))),
    ],
    "io.to_bcoo": [
        (lambda d: io.to_bcoo(np.ones((2, 2, 2))), E(ValueError, "2-D")),
    ],
    "io.segment_ids": [
        (lambda d: io.segment_ids(np.array([1.5, "a"], dtype=object)), E(TypeError, "qid")),
        (lambda d: io.segment_ids(np.array(["b", "a", "b"])),
         V(lambda s: s.seg.tolist() == [1, 0, 1] and s.num_queries == 2)),
    ],
    "io.save_model": [
        (lambda d: io.save_model(d.keep, np.ones(3), note=None), E(TypeError, "note")),
        (lambda d: io.save_model(d.keep, np.r_[np.nan, 1.0]), E(ValueError, "weights")),
    ],
    "io.load_model": [
        (lambda d: io.load_model(d.foreign), E(ValueError, "model file")),
        (lambda d: io.load_model(d.bad_file), E(ValueError, "model file")),
    ],
})

# scikit-learn style estimators (rankjax.estimators)
from rankjax import estimators as est  # noqa: E402

CASES.update({
    f"estimators.{name}": [
        (lambda d, c=name: getattr(est, c)().predict(d.X), E(ValueError, "not fitted")),
        (lambda d, c=name: getattr(est, c)().fit(d.X, d.y[:-1], qid=d.qid), E(ValueError, "y")),
        (lambda d, c=name: getattr(est, c)().fit(d.X, d.y, qid=d.qid.astype(float)),
         E(TypeError, "qid")),
        (lambda d, c=name: getattr(est, c)().fit(np.c_[d.X[:, :-1], d.nanv], d.y, qid=d.qid),
         E(ValueError, "NaN")),
    ] for name in ("RankRLS", "RankRLSCV", "RankSVM", "KPCRank", "RankBoost")})
CASES["estimators.CGRankRLS"] = [
    (lambda d: est.CGRankRLS(lam=0.0).fit(d.X, d.y, qid=d.qid), E(ValueError, "eval_set")),
    (lambda d: est.CGRankRLS(lam=-1.0).fit(d.X, d.y, qid=d.qid), E(ValueError, "lam")),
]
CASES["estimators.load"] = [
    (lambda d: est.load(d.model_file), E(ValueError, "no rankjax estimator")),
]

# sharding by whole queries (the 8-device equalities are in test_distributed.py)
CASES.update({
    "partition_queries": [
        (lambda d: rj.partition_queries(d.qid, 0), E(ValueError, "num_shards")),
        (lambda d: rj.partition_queries(d.qid, 2.5), E(TypeError, "num_shards")),
        (lambda d: rj.partition_queries(d.qid, 2, multiple=0), E(ValueError, "multiple")),
        (lambda d: rj.partition_queries(d.qid.astype(float), 2), E(TypeError, "qid")),
        (lambda d: rj.partition_queries(d.qid, 50), V(lambda p: p.rows.shape[0] == 50)),
    ],
    "shard_data": [
        (lambda d: rj.shard_data(d.X, d.y, d.pref), E(TypeError, "QueryGraph")),
        (lambda d: rj.shard_data(d.X[:-1], d.y[:-1], d.g), E(ValueError, "rows")),
        (lambda d: rj.shard_data(d.X, d.nanv, d.g), E(ValueError, "y")),
        (lambda d: rj.shard_data(d.X, d.y, d.g, mesh="cpu"), E(TypeError, "mesh")),
        (lambda d: rj.shard_data(d.X, d.y, d.g, partition=(1, 2)), E(TypeError, "partition")),
        (lambda d: rj.shard_data(d.X, d.y, d.g, partition=rj.partition_queries(d.qid, 3)),
         E(ValueError, "partition")),
    ],
    "sharded_primal_path": [
        (lambda d: rj.sharded_primal_path((d.X, d.y), lams=[1.0]), E(TypeError, "data")),
        (lambda d: rj.sharded_primal_path(d.sharded, lams=[0.0]), E(ValueError, "lams")),
        (lambda d: rj.sharded_primal_path(d.sharded, lams=[[1.0]]), E(ValueError, "lams")),
    ],
    "sharded_normal_equations": [
        (lambda d: rj.sharded_normal_equations(d.X), E(TypeError, "data")),
        (lambda d: rj.sharded_normal_equations(rj.shard_data(__import__("scipy.sparse").sparse
                                                             .csr_matrix(d.X), d.y, d.g)),
         E(ValueError, "dense")),
    ],
    "sharded_holdout": [
        (lambda d: rj.sharded_holdout(d.sharded, lams=[np.nan]), E(ValueError, "lams")),
        (lambda d: rj.sharded_holdout(None, lams=[1.0]), E(TypeError, "data")),
    ],
    "sharded_cg": [
        (lambda d: rj.sharded_cg(d.sharded, lam=-1.0), E(ValueError, "lam")),
        (lambda d: rj.sharded_cg(d.sharded, lam=[1.0, 2.0]), E(TypeError, "lam")),
        (lambda d: rj.sharded_cg(d.sharded, max_iter=0), E(ValueError, "max_iter")),
        (lambda d: rj.sharded_cg(d.sharded, x0=np.ones(d.n + 1)), E(ValueError, "x0")),
        (lambda d: rj.sharded_cg(d.sharded, valid=(d.X[:, :2], d.y, d.g)), E(ValueError, "X_valid")),
    ],
    "sharded_metric": [
        (lambda d: rj.sharded_metric(d.sharded, d.y[:-1]), E(ValueError, "scores")),
        (lambda d: rj.sharded_metric(d.sharded, d.nanv), E(ValueError, "scores")),
        (lambda d: rj.sharded_metric(d.sharded, d.y, "ndcg"), E(TypeError, "metric")),
        (lambda d: rj.sharded_metric(d.sharded, d.y, rj.ndcg, y=d.nanv), E(ValueError, "y")),
        (lambda d: rj.sharded_metric(d.sharded, d.X[:, 0], rj.pairwise_error, y=d.ties),
         V(nan)),
    ],
    "sharded_kernel_grid": [
        (lambda d: rj.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[-1.0],
                                          valid=(d.X, d.y, d.qid)), E(ValueError, "gammas")),
        (lambda d: rj.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[1.0],
                                          valid=(d.X, d.y)), E(TypeError, "valid")),
        (lambda d: rj.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[1.0],
                                          valid=(d.X[:, :2], d.y, d.qid)), E(ValueError, "X_valid")),
        (lambda d: rj.sharded_kernel_grid(d.X, d.y, d.g, lams=[1.0], gammas=[1.0], kernel="rbf",
                                          valid=(d.X, d.y, d.qid)), E(ValueError, "kernel")),
    ],
})

# out of core
CASES.update({
    "rankrls_primal_stream": [
        (lambda d: rj.rankrls_primal_stream((d.X, d.y, d.qid), lams=[1.0]), E(TypeError, "chunks")),
        (lambda d: rj.rankrls_primal_stream([(d.X, d.y, d.qid)], lams=[0.0]), E(ValueError, "lams")),
        (lambda d: rj.rankrls_primal_stream([(d.X, d.nanv, d.qid)], lams=[1.0]), E(ValueError, "y")),
        (lambda d: rj.rankrls_primal_stream([(d.X, d.y, d.qid[:-1])], lams=[1.0]),
         E(ValueError, "qid")),
        (lambda d: rj.rankrls_primal_stream([(d.X, d.y, d.qid)] * 2, lams=[1.0]),
         E(ValueError, "earlier chunk")),
        (lambda d: rj.rankrls_primal_stream([(d.X, d.y, d.qid)], lams=[1.0], valid=(d.X, d.y)),
         E(TypeError, "valid")),
        (lambda d: rj.rankrls_primal_stream([(d.X, d.ties, d.qid)], lams=[1.0],
                                            holdout_metric=rj.pairwise_error),
         V(lambda r: nan(r.holdout))),
    ],
    "io.iter_npy": [
        (lambda d: io.iter_npy(d.X[:, 0], d.y, d.qid), E(ValueError, "X")),
        (lambda d: io.iter_npy(d.X, d.y[:-1], d.qid), E(ValueError, "y")),
        (lambda d: io.iter_npy(d.X, d.y, d.qid, chunk_rows=1.5), E(TypeError, "chunk_rows")),
        (lambda d: io.iter_npy(d.bad_file, d.y, d.qid), E(ValueError, "npy")),
    ],
    "io.iter_svmlight": [
        (lambda d: list(io.iter_svmlight(d.bad_file, num_features=2)), E(ValueError, "line 2")),
        (lambda d: io.iter_svmlight(d.tmp / "missing.txt", num_features=2),
         E(ValueError, "exist")),
        (lambda d: list(io.iter_svmlight(d.good_file, num_features=1)),
         E(ValueError, "num_features")),
    ],
})

# learned hyper-parameters
CASES.update({
    "cv_loss": [
        (lambda d: rj.cv_loss({"log_lam": 0.0}, d.X, d.y, d.g, d.folds, loss="ndcg"),
         E(ValueError, "loss")),
        (lambda d: rj.cv_loss({"log_lam": 0.0}, d.X, d.y, d.g, d.folds, loss="pairwise"),
         E(ValueError, "pairs")),
        (lambda d: rj.cv_loss({"lam": 1.0}, d.X, d.y, d.g, d.folds), E(TypeError, "params")),
        (lambda d: rj.cv_loss({"log_lam": 0.0}, d.X, d.ties, d.g, d.folds), V(lambda v: v == 0)),
    ],
    "cv_predictions": [
        (lambda d: rj.cv_predictions({"log_lam": 0.0}, d.X, d.y, d.g, None), E(TypeError, "folds")),
        (lambda d: rj.cv_predictions({"log_lam": 0.0}, d.X, d.y, d.g, d.folds, "rbf"),
         E(ValueError, "kernel")),
    ],
    "tune": [
        (lambda d: rj.tune(d.X, d.y, d.g, kernel="rbf"), E(ValueError, "kernel")),
        (lambda d: rj.tune(d.X, d.y, d.g, steps=0), E(ValueError, "steps")),
        (lambda d: rj.tune(d.X, d.y, d.g, lam=[1.0, 2.0]), E(TypeError, "lam")),
        (lambda d: rj.tune(d.X, d.nanv, d.g), E(ValueError, "y")),
        (lambda d: rj.tune(d.X, d.y, d.g, learning_rate=0.0), E(ValueError, "learning_rate")),
        (lambda d: rj.tune(d.X, d.ties, d.g, loss="pairwise"), E(ValueError, "pairs")),
    ],
})

# result, model and configuration types: constructed by the functions above
TYPES = {"CGResult", "RankRLSSelection",
         "CSRMatrix", "CVResult", "DualModel", "DualPath", "Folds", "GridSearch",
         "HoldOut", "IdentityGraph", "KPCModel", "KPCPath", "Kernel", "KernelModel", "LinearModel",
         "Metric", "NystromPath", "PairHoldOut", "PairwiseGP", "PerQuery", "PermutationResult",
         "PreferenceGraph", "PrimalPath", "QueryGraph", "QueryPartition", "RankBoostModel",
         "RankLevels", "RankSVMKernelModel", "RankSVMResult", "RankingData", "Segments",
         "Selection", "StreamFit", "TuneResult", "ShardedData", "FalkonModel", "io.Dataset",
         "UnresolvedLambdaWarning", "Validation", "CG"}
CONSTANTS = {"AXIS", "BASIS_METHODS", "STOP_REASONS", "io", "scale", "io.MODEL_FORMAT",
             "io.MODEL_VERSION"}   # data, no input


def public_names():
    return ({n for n in rj.__all__} | {f"io.{n}" for n in io.__all__}
            | {f"estimators.{n}" for n in est.__all__})


def test_every_public_name_is_covered():
    missing = public_names() - set(CASES) - TYPES - CONSTANTS
    assert not missing, f"public names without a bad-input case in {__file__}: {sorted(missing)}"
    stale = (set(CASES) | TYPES | CONSTANTS) - public_names()
    assert not stale, f"cases for names that are not public: {sorted(stale)}"
    for name in TYPES:
        obj = getattr(io, name[3:]) if name.startswith("io.") else getattr(rj, name)
        assert isinstance(obj, type), name


@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(CASES) for i in range(len(CASES[n]))])
def test_bad_and_degenerate_input(d, name, i):
    call, expected = CASES[name][i]
    if isinstance(expected, E):
        with pytest.raises(expected.exc, match=expected.match):
            call(d)
    else:
        assert expected.check(call(d)), f"{name} case {i}: not the documented value"


def test_io_failed_writes_leave_the_old_file(d):
    for call, _ in CASES["io.write_svmlight"] + CASES["io.write_groups"] + CASES["io.save_model"]:
        with pytest.raises((ValueError, TypeError)):
            call(d)
        assert d.keep.read_text() == "old contents\n"


# ---------------------------------------------------------------------------------------
# the under-jit contract (README, Guarantees): a value that would raise eagerly gives NaN

def test_invalid_lambda_lanes_are_nan_under_vmap(d):
    lams = jnp.array([1.0, -1.0, jnp.nan, 0.0])
    ok = np.array([True, False, False, False])
    W = jax.vmap(lambda lam: rj.rankrls_primal(d.X, d.y, d.g, lam=lam).weights)(lams)
    np.testing.assert_allclose(W[0], rj.rankrls_primal(d.X, d.y, d.g, lam=1.0).weights, rtol=1e-12)
    assert nan(W[~ok])
    A = jax.vmap(lambda lam: rj.rankrls_dual(d.K, d.y, d.g, lam=lam).coef)(lams)
    assert nan(A[~ok]) and not np.any(np.isnan(A[0]))
    for fn in (lambda ls: rj.rankrls_primal_path(d.X, d.y, d.g, lams=ls, train_scores=True),
               lambda ls: rj.rankrls_dual_path(d.K, d.y, d.g, lams=ls),
               lambda ls: rj.rankrls_nystrom_path(d.X, d.y, d.g, lams=ls, kernel=d.kern,
                                                  basis=np.arange(6)),
               lambda ls: rj.holdout_primal(d.X, d.y, d.g, lams=ls, folds=d.folds).predictions,
               lambda ls: rj.holdout_dual(d.K, d.y, d.g, lams=ls, folds=d.folds).predictions,
               lambda ls: rj.leave_pair_out_dual(d.K, d.y, d.lpo.pairs, lams=ls).predictions):
        out = jax.jit(fn)(lams)
        for leaf in jax.tree.leaves(out):
            if leaf.ndim > 1 and leaf.shape[0] == 4:           # results, not the grid itself
                assert nan(leaf[1:]) and not np.any(np.isnan(leaf[0]))
    # a kernel parameter traced out of range: the whole kernel matrix is NaN
    Kg = jax.jit(lambda gm: rj.kernel_matrix(rj.Kernel("gaussian", gamma=gm), d.X))(-1.0)
    assert nan(Kg)
    kp = jax.jit(lambda lam: rj.kpcrank_path(d.K, d.y, d.g, max_components=3, lam=lam))(-1.0)
    assert nan(kp.weights)


def test_invalid_values_under_jit_for_iterative_solvers(d):
    r = jax.jit(lambda lam: rj.rankrls_cg(d.X, d.y, d.g, lam=lam))(-1.0)
    assert nan(r.weights) and not bool(r.converged)
    assert rj.STOP_REASONS[int(r.stop_reason)] == "invalid" and int(r.iterations) == 0
    r = jax.jit(lambda lam: rj.rankrls_cg_dual(d.K, d.y, d.g, lam=lam))(jnp.inf)
    assert nan(r.weights) and rj.STOP_REASONS[int(r.stop_reason)] == "invalid"
    s = jax.jit(lambda C: rj.ranksvm_l2(d.X, d.y, d.qid, C=C, max_iter=5))(-1.0)
    assert nan(s.weights) and not bool(s.converged)
    good = jax.jit(lambda C: rj.ranksvm_l2(d.X, d.y, d.qid, C=C))(1.0)
    assert bool(good.converged) and not np.any(np.isnan(good.weights))


def test_traced_indices_and_segment_ids_out_of_range_give_nan(d):
    seg = jnp.asarray(np.unique(d.qid, return_inverse=True)[1])
    for name in PAIR_METRICS + LIST_METRICS:
        fn = jax.jit(lambda s, f=getattr(rj, name): f(d.y, d.y, s, num_queries=5))
        assert not np.isnan(float(fn(seg))), name
        assert np.isnan(float(fn(seg.at[0].set(5)))), name
        assert np.isnan(float(fn(seg.at[3].set(-1)))), name
    e = jax.jit(lambda h: rj.edge_disagreement_error(d.y, h, jnp.array([1, 2])))
    assert float(e(jnp.array([0, 3]))) in (0.0, 0.5, 1.0) and np.isnan(float(e(jnp.array([0, d.m]))))
    lpo = jax.jit(lambda p: rj.leave_pair_out_dual(d.K, d.y, p, lams=[1.0]).predictions)
    assert nan(lpo(jnp.array([[0, d.m + 3]]))) and not np.any(np.isnan(lpo(jnp.array([[0, 3]]))))
