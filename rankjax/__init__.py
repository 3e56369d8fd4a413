"""rankjax: RankRLS and friends as pure, jittable JAX functions.

The front door is a problem, a solver object and four verbs::

    problem = rj.Problem(X, y, qid)                    # queries given once
    sol = rj.fit(problem, rj.Primal(), lam=1.0)        # rj.path / rj.holdout / rj.select
    rj.predict(sol.value, X_test)

Besides the verbs the top level holds the graphs, kernels, metrics, the other learners
(KPCRank, RankSVM, pairwise GP, RankBoost), hyper-parameter learning, synthetic data and the
subpackages :mod:`rankjax.io` (files), :mod:`rankjax.scale` (several devices, streams) and
:mod:`rankjax.estimators` (scikit-learn). The per-cell functions of earlier releases
(``rankrls_primal``, ``holdout_dual``, ...) left the top level in this release; for one release
they are still reachable here with a ``DeprecationWarning`` that names the replacement
(:data:`_MOVED` below; the CHANGELOG lists them).
"""
import importlib as _importlib
import warnings as _warnings

from . import _xla  # noqa: F401  (XLA:CPU flags, before JAX starts a backend)
from ._checks import Segments as Segments, segment_ids as segment_ids
from ._resolved import UnresolvedLambdaWarning as UnresolvedLambdaWarning
from ._graph import (IdentityGraph as IdentityGraph, PreferenceGraph as PreferenceGraph,
                     QueryGraph as QueryGraph)
from ._graph_build import (global_graph as global_graph, identity_graph as identity_graph,
                           laplacian_dense as laplacian_dense, laplacian_mv as laplacian_mv,
                           pairs_from_scores as pairs_from_scores, preference_graph as preference_graph,
                           query_graph as query_graph)
from ._kernels import (
    Kernel as Kernel, gaussian_kernel as gaussian_kernel, kernel_matrix as kernel_matrix,
    linear_kernel as linear_kernel, polynomial_kernel as polynomial_kernel)
from ._rankrls import (DualModel as DualModel, KernelModel as KernelModel,
                       LinearModel as LinearModel, predict as predict)
from ._choice import Selection as Selection
from ._folds import Folds as Folds, make_folds as make_folds
from ._lpo import (differing_pairs as differing_pairs, lpo_cindex as lpo_cindex,
                   positive_negative_pairs as positive_negative_pairs)
from ._cv import permutation_test as permutation_test
from ._cg_loop import CG as CG
from ._nystrom import Basis as Basis
from ._kpcrank import (center_kernel as center_kernel, center_test_kernel as center_test_kernel,
                       kpcrank as kpcrank)
from ._gp import (gp_fit as gp_fit, gp_predict as gp_predict,
                  gp_preference_probability as gp_preference_probability)
from ._rankboost import rankboost as rankboost, rankboost_predict as rankboost_predict
from ._ranksvm import rank_levels as rank_levels, ranksvm_kernel as ranksvm_kernel, ranksvm_l2 as ranksvm_l2
from ._tune import cv_loss as cv_loss, tune as tune
from . import scale as scale
from ._problem import Problem as Problem
from ._solvers import (Auto as Auto, Dual as Dual, Falkon as Falkon, Nystrom as Nystrom,
                       Primal as Primal)
from ._solve import (RESULTS as RESULTS, LeavePairOut as LeavePairOut, Solution as Solution,
                     capabilities as capabilities, fit as fit, holdout as holdout, path as path,
                     select as select)
from ._sparse import CSRMatrix as CSRMatrix, to_csr as to_csr
from ._metrics import (
    Metric as Metric, PerQuery as PerQuery, auc as auc, cindex as cindex,
    disagreement_error as disagreement_error, edge_disagreement_error as edge_disagreement_error,
    kendall_tau_b as kendall_tau_b, pairwise_error as pairwise_error)
from ._metrics_graded import (
    mean_average_precision as mean_average_precision, ndcg as ndcg, precision_at_k as precision_at_k)
from ._synthetic import (
    RankingData as RankingData, make_ranking_data as make_ranking_data,
    make_sparse_ranking_data as make_sparse_ranking_data)
from . import io as io
from ._version import __version__ as __version__

__all__ = [
    # the front door: a problem, solvers, four verbs, their result
    "Problem", "Primal", "Dual", "Nystrom", "CG", "Falkon", "Auto", "Basis",
    "fit", "path", "holdout", "select", "capabilities", "Solution", "RESULTS",
    "LeavePairOut", "Folds", "make_folds", "Selection", "UnresolvedLambdaWarning",
    "LinearModel", "DualModel", "KernelModel", "predict",
    # queries and preference graphs
    "Segments", "segment_ids", "QueryGraph", "PreferenceGraph", "IdentityGraph",
    "query_graph", "preference_graph", "global_graph", "identity_graph", "pairs_from_scores",
    "positive_negative_pairs", "differing_pairs", "laplacian_mv", "laplacian_dense",
    # kernels
    "Kernel", "kernel_matrix", "linear_kernel", "gaussian_kernel", "polynomial_kernel",
    # metrics
    "Metric", "PerQuery", "ndcg", "mean_average_precision", "precision_at_k", "cindex", "auc",
    "kendall_tau_b", "pairwise_error", "disagreement_error", "edge_disagreement_error",
    "lpo_cindex", "permutation_test",
    # hyper-parameters by gradient
    "tune", "cv_loss",
    # the other learners of the papers
    "kpcrank", "center_kernel", "center_test_kernel", "ranksvm_l2", "ranksvm_kernel",
    "rank_levels", "gp_fit", "gp_predict", "gp_preference_probability", "rankboost",
    "rankboost_predict",
    # data and subpackages
    "make_ranking_data", "make_sparse_ranking_data", "RankingData", "CSRMatrix", "to_csr",
    "io", "scale",
]

_FIT = "rj.fit(rj.Problem(X, y, queries), {}, lam=lam)"
_PATH = "rj.path(rj.Problem(X, y, queries, valid=...), {}, lams=lams)"
_HOLD = "rj.holdout(rj.Problem(X, y, queries), {}, lams=lams, folds=folds)"
_LPO = "rj.holdout(rj.Problem(X, y, rj.global_graph(m)), {}, lams=lams, folds=rj.LeavePairOut(pairs))"
_INTERNAL = "no public replacement: the internal module rankjax.{} keeps it without a promise"

_MOVED = {
    # name: (private module that keeps it, what to use instead)
    "rankrls_primal": ("_rankrls", _FIT.format("rj.Primal()")),
    "rankrls_dual": ("_rankrls", "rj.fit(rj.Problem(K, y, queries, precomputed=True), rj.Dual(), lam=lam)"),
    "rankrls_kernel": ("_rankrls", _FIT.format("rj.Dual(kernel)")),
    "rankrls_cg": ("_cg", _FIT.format("rj.CG(...)")),
    "rankrls_cg_dual": ("_cg", "rj.fit(rj.Problem(K, y, queries, precomputed=True), rj.CG(...), lam=lam)"),
    "rankrls_falkon": ("_falkon", _FIT.format("rj.Falkon(kernel, basis)")),
    "rankrls_fit": ("_select", _FIT.format("solver")),
    "rankrls_primal_path": ("_path", _PATH.format("rj.Primal()")),
    "rankrls_dual_path": ("_path", _PATH.format("rj.Dual(kernel)")),
    "rankrls_nystrom_path": ("_path", _PATH.format("rj.Nystrom(kernel, basis)")),
    "nystrom_features": ("_path", _PATH.format("rj.Nystrom(kernel, basis)")),
    "holdout_primal": ("_holdout", _HOLD.format("rj.Primal()")),
    "holdout_dual": ("_holdout", _HOLD.format("rj.Dual(kernel)")),
    "holdout_nystrom": ("_holdout", _HOLD.format("rj.Nystrom(kernel, basis)")),
    "leave_pair_out_primal": ("_lpo", _LPO.format("rj.Primal()")),
    "leave_pair_out_dual": ("_lpo", _LPO.format("rj.Dual(kernel)")),
    "select_rankrls": ("_select", "rj.select(problem, solvers, lams=lams, folds=folds)"),
    "select_lambda": ("_path", "rj.select(problem, solver, lams=lams) with problem.valid"),
    "cross_validate": ("_cv", "rj.select(problem, solver, lams=lams, folds=folds)"),
    "cv_predictions": ("_tune", "rj.cv_loss (the differentiable hold-out criterion)"),
    "permuted_labels": ("_cv", "rj.permutation_test"),
    "nystrom_basis": ("_nystrom", "rj.Basis(size, method=..., seed=...) given to rj.Nystrom"),
    "BASIS_METHODS": ("_nystrom", "rj.Basis(method=...)"),
    "Validation": ("_graph_build", "rj.Problem(X, y, queries, valid=rj.Problem(Xv, yv, qv))"),
    "kpcrank_path": ("_kpcrank", "rj.kpcrank, one call per number of components"),
    "gp_pairwise_gaussian": ("_gp", "rj.gp_fit(X, head, tail, target, likelihood='gaussian')"),
    "gp_pairwise_probit": ("_gp", "rj.gp_fit(X, head, tail, likelihood='probit')"),
    "STOP_REASONS": ("_cg_loop", "rj.RESULTS (rj.fit(problem, rj.CG(), lam=lam).result)"),
    "CGResult": ("_cg_loop", "rj.Solution (rj.fit(problem, rj.CG(), lam=lam))"),
    "cg_solve": ("_cg_loop", _INTERNAL.format("_cg_loop")),
    "validation_criterion": ("_cg_loop", _INTERNAL.format("_cg_loop")),
    "incidence_mv": ("_graph_build", _INTERNAL.format("_graph_build")),
    "incidence_t_mv": ("_graph_build", _INTERNAL.format("_graph_build")),
    "laplacian_sqrt_mv": ("_graph_build", _INTERNAL.format("_graph_build")),
    "query_pair_counts": ("_graph_build", _INTERNAL.format("_graph_build")),
    # result and model types: what the verbs and learners return (``type(result)``)
    **{name: (module, f"the type of what {verb} returns")
       for name, module, verb in [
           ("ScaledModel", "_rankrls", "rankjax.estimators.RankRLS"),
           ("PrimalPath", "_path", "rj.path(problem, rj.Primal())"),
           ("DualPath", "_path", "rj.path(problem, rj.Dual())"),
           ("NystromPath", "_path", "rj.path(problem, rj.Nystrom())"),
           ("HoldOut", "_holdout", "rj.holdout"),
           ("PairHoldOut", "_lpo", "rj.holdout(..., folds=rj.LeavePairOut(pairs))"),
           ("CVResult", "_cv", "rankjax._cv.cross_validate"),
           ("PermutationResult", "_cv", "rj.permutation_test"),
           ("FalkonModel", "_falkon", "rj.fit(problem, rj.Falkon())"),
           ("KPCModel", "_kpcrank", "rj.kpcrank"),
           ("KPCPath", "_kpcrank", "rankjax._kpcrank.kpcrank_path"),
           ("PairwiseGP", "_gp", "rj.gp_fit"),
           ("RankBoostModel", "_rankboost", "rj.rankboost"),
           ("RankLevels", "_ranksvm", "rj.rank_levels"),
           ("RankSVMKernelModel", "_ranksvm", "rj.ranksvm_kernel"),
           ("RankSVMResult", "_ranksvm", "rj.ranksvm_l2"),
           ("TuneResult", "_tune", "rj.tune")]},
    "RankRLSSelection": ("_select", "rj.Selection (the one selection type)"),
    # several devices and streams: the public subpackage rankjax.scale
    **{name: ("scale", f"rj.scale.{name}")
       for name in ["AXIS", "QueryPartition", "ShardedData", "StreamFit",
                    "partition_queries", "rankrls_primal_stream", "shard_data", "sharded_cg",
                    "sharded_falkon", "sharded_holdout", "sharded_kernel_grid", "sharded_metric",
                    "sharded_normal_equations", "sharded_primal_path"]},
    "GridSearch": ("scale", "rj.Selection (the one selection type)"),
}
"""Names that left the top level: ``{name: (module that keeps it, replacement)}``."""


def __getattr__(name):
    """A name of :data:`_MOVED`, with a ``DeprecationWarning`` naming its replacement."""
    if name not in _MOVED:
        raise AttributeError(f"module 'rankjax' has no attribute {name!r}")
    module, instead = _MOVED[name]
    _warnings.warn(f"rankjax.{name} is no longer a top-level name and this alias will be "
                   f"removed; use {instead}",
                   DeprecationWarning, stacklevel=2)
    return getattr(_importlib.import_module(f"rankjax.{module}"), name)


def _register_model_types():
    """Every public and moved class may be saved with :func:`rankjax.io.save_model`."""
    from ._types import register_model_types
    moved = [getattr(_importlib.import_module(f"rankjax.{m}"), n) for n, (m, _) in _MOVED.items()]
    register_model_types(*[v for v in [globals()[n] for n in __all__] + moved
                           if isinstance(v, type)])


_register_model_types()
