"""The registry of solvers (as lineax's ``tests/helpers.py``): one list of (solver, the
verbs it serves with each verb's brute-force twin, the transforms it supports). Every
property test of the front door (``test_solvers.py``, ``test_under_jit.py``, ...) runs over
:data:`CASES`; adding a solver here is the only step that puts it under all of them.
"""
import numpy as np

import rankjax as rj
from rankjax.solvers.cg import rankrls_cg, rankrls_cg_dual
from rankjax.solvers.falkon import rankrls_falkon
from rankjax.solvers.holdout import holdout_dual, holdout_nystrom, holdout_primal
from rankjax.solvers.lpo import leave_pair_out_dual, leave_pair_out_primal
from rankjax.solvers.path import rankrls_dual_path, rankrls_nystrom_path, rankrls_primal_path
from rankjax.solvers.models import rankrls_dual, rankrls_kernel, rankrls_primal

GAUSS = rj.gaussian_kernel(0.3)
ROWS = np.arange(0, 60, 3)                                      # a fixed basis of 20 rows
LAMS = np.array([0.1, 1.0, 10.0])


def data(seed=0, dtype=np.float64):
    d = rj.make_ranking_data(6, num_features=4, docs_per_query=(8, 12), seed=seed)
    return np.asarray(d.X, dtype), np.asarray(d.y, dtype), np.asarray(d.qid)


# (name, solver, problem kind, {verb: twin(X, y, graph, lam(s)) -> comparable array},
#  {property: bool})
REGISTRY = [
    ("primal", rj.Primal(), "features", {
        "fit": lambda X, y, g, lam: rankrls_primal(X, y, g, lam=lam).weights,
        "path": lambda X, y, g, lams: rankrls_primal_path(X, y, g, lams=lams).weights,
        "holdout": lambda X, y, g, lams: holdout_primal(X, y, g, lams=lams).predictions,
        "leave_pair_out": lambda X, y, pairs, lams: leave_pair_out_primal(
            X, y, pairs, lams=lams).predictions,
    }, {"jit": True, "vmap": True, "grad": True}),
    ("dual_linear", rj.Dual(), "features", {
        "fit": lambda X, y, g, lam: X.T @ rankrls_dual(X @ X.T, y, g, lam=lam).coef,
        "path": lambda X, y, g, lams: rankrls_dual_path(X @ X.T, y, g, lams=lams).coef,
        "holdout": lambda X, y, g, lams: holdout_dual(X @ X.T, y, g, lams=lams).predictions,
        "leave_pair_out": lambda X, y, pairs, lams: leave_pair_out_dual(
            X @ X.T, y, pairs, lams=lams).predictions,
    }, {"jit": True, "vmap": True, "grad": True}),
    ("dual_gaussian", rj.Dual(GAUSS), "features", {
        "fit": lambda X, y, g, lam: rankrls_kernel(X, y, g, lam=lam, kernel=GAUSS).coef,
        "path": lambda X, y, g, lams: rankrls_dual_path(
            rj.kernel_matrix(GAUSS, X), y, g, lams=lams).coef,
        "holdout": lambda X, y, g, lams: holdout_dual(
            rj.kernel_matrix(GAUSS, X), y, g, lams=lams).predictions,
    }, {"jit": True, "vmap": True, "grad": True}),
    ("dual_precomputed", rj.Dual(), "precomputed", {
        "fit": lambda K, y, g, lam: rankrls_dual(K, y, g, lam=lam).coef,
        "path": lambda K, y, g, lams: rankrls_dual_path(K, y, g, lams=lams).coef,
        "holdout": lambda K, y, g, lams: holdout_dual(K, y, g, lams=lams).predictions,
        "leave_pair_out": lambda K, y, pairs, lams: leave_pair_out_dual(
            K, y, pairs, lams=lams).predictions,
    }, {"jit": True, "vmap": True, "grad": True}),
    ("nystrom", rj.Nystrom(GAUSS, ROWS), "features", {
        "fit": lambda X, y, g, lam: rankrls_nystrom_path(
            X, y, g, lams=[lam], kernel=GAUSS, basis=ROWS).coef,
        "path": lambda X, y, g, lams: rankrls_nystrom_path(
            X, y, g, lams=lams, kernel=GAUSS, basis=ROWS).coef,
        "holdout": lambda X, y, g, lams: holdout_nystrom(
            X, y, g, lams=lams, kernel=GAUSS, basis=ROWS).predictions,
    }, {"jit": False, "vmap": False, "grad": False}),
    ("cg", rj.CG(tol=1e-12, max_iter=200), "features", {
        "fit": lambda X, y, g, lam: rankrls_cg(
            X, y, g, lam=lam, options=rj.CG(tol=1e-12, max_iter=200)).weights,
    }, {"jit": True, "vmap": True, "grad": False}),
    ("cg_dual", rj.CG(tol=1e-12, max_iter=200), "precomputed", {
        "fit": lambda K, y, g, lam: rankrls_cg_dual(
            K, y, g, lam=lam, options=rj.CG(tol=1e-12, max_iter=200)).weights,
    }, {"jit": True, "vmap": True, "grad": False}),
    ("falkon", rj.Falkon(GAUSS, ROWS, options=rj.CG(tol=1e-12, max_iter=200)), "features", {
        "fit": lambda X, y, g, lam: rankrls_falkon(
            X, y, g, lam=lam, kernel=GAUSS, basis=ROWS,
            options=rj.CG(tol=1e-12, max_iter=200)).coef,
    }, {"jit": False, "vmap": False, "grad": False}),
    ("auto", rj.Auto(), "features", {
        "fit": lambda X, y, g, lam: rankrls_primal(X, y, g, lam=lam).weights,
        "path": lambda X, y, g, lams: rankrls_primal_path(X, y, g, lams=lams).weights,
        "holdout": lambda X, y, g, lams: holdout_primal(X, y, g, lams=lams).predictions,
    }, {"jit": True, "vmap": True, "grad": True}),
]

CASES = [(name, solver, kind, verb, twin, props)
         for name, solver, kind, twins, props in REGISTRY for verb, twin in twins.items()]
IDS = [f"{c[0]}-{c[3]}" for c in CASES]


def problem(kind, X, y, qid, queries=None):
    queries = qid if queries is None else queries
    if kind == "precomputed":
        return rj.Problem(X @ X.T, y, queries, precomputed=True)
    return rj.Problem(X, y, queries)


def value_of(verb, solution):
    v = solution.value
    if verb in ("holdout", "leave_pair_out"):
        return v.predictions
    return v.weights if hasattr(v, "weights") else v.coef


def predictions(verb, solution, X):
    """What the precision rule bounds: the training rows' predictions of every λ (the
    hold-out predictions of a hold-out)."""
    if verb in ("holdout", "leave_pair_out"):
        return solution.value.predictions
    if getattr(solution.value, "train_scores", None) is not None:     # a dual path
        return solution.value.train_scores
    return rj.predict(solution.value, X)


def call(verb, p, solver, lam_or_lams, pairs=None):
    if verb == "fit":
        return rj.fit(p, solver, lam=lam_or_lams)
    if verb == "leave_pair_out":
        return rj.holdout(p, solver, lams=lam_or_lams, folds=rj.LeavePairOut(pairs))
    return getattr(rj, verb)(p, solver, lams=lam_or_lams)


def run_case(kind, verb, solver, X, y, qid, twin):
    """``(front door's array, twin's array)`` of one case."""
    lam = 1.0 if verb == "fit" else LAMS
    if verb == "leave_pair_out":
        pairs = rj.differing_pairs(y)[:15]
        p = problem(kind, X, y, qid, rj.global_graph(X.shape[0]))
        A = X @ X.T if kind == "precomputed" else X
        return value_of(verb, call(verb, p, solver, lam, pairs)), twin(A, y, pairs, lam)
    p = problem(kind, X, y, qid)
    return value_of(verb, call(verb, p, solver, lam)), twin(p.X, y, p.graph, lam)
