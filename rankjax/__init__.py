"""rankjax: RankRLS and friends as pure, jittable JAX functions.

The front door is a problem, a solver object and four verbs::

    problem = rj.Problem(X, y, qid)                    # queries given once
    sol = rj.fit(problem, rj.Primal(), lam=1.0)        # rj.path / rj.holdout / rj.select
    rj.predict(sol.value, X_test)

Besides the verbs the top level holds the graphs, kernels, metrics, the other learners
(KPCRank, RankSVM, pairwise GP, RankBoost), hyper-parameter learning, synthetic data and the
subpackages :mod:`rankjax.io` (files), :mod:`rankjax.scale` (several devices, streams) and
:mod:`rankjax.estimators` (scikit-learn).
"""
from . import runtime as _runtime  # noqa: F401  (XLA:CPU flags first; the cores served)
from ._core.queries import Segments as Segments, segment_ids as segment_ids
from ._core.memory import MemoryPlanError as MemoryPlanError
from ._core.resolved import UnresolvedLambdaWarning as UnresolvedLambdaWarning
from .selection.edges import GridEdgeWarning as GridEdgeWarning
from ._core.sparse import CSRMatrix as CSRMatrix, to_csr as to_csr
from ._problem import Problem as Problem
from ._solution import RESULTS as RESULTS, Solution as Solution
from ._solve import (capabilities as capabilities, fit as fit, holdout as holdout, path as path,
                     select as select)
from .graphs.build import (global_graph as global_graph, identity_graph as identity_graph,
                           laplacian_dense as laplacian_dense, laplacian_mv as laplacian_mv,
                           pairs_from_scores as pairs_from_scores,
                           preference_graph as preference_graph, query_graph as query_graph)
from .graphs.lists import list_graph as list_graph
from .graphs.survival import survival_graph as survival_graph
from .graphs.folds import Folds as Folds, make_folds as make_folds
from .graphs.graph import (IdentityGraph as IdentityGraph, PreferenceGraph as PreferenceGraph,
                           QueryGraph as QueryGraph)
from .kernels.basis import Basis as Basis
from .features.learn import learn_feature_map as learn_feature_map
from .features.maps import FeatureMap as FeatureMap
from .kernels.kernel import (Kernel as Kernel, gaussian_kernel as gaussian_kernel,
                             kernel_matrix as kernel_matrix, linear_kernel as linear_kernel,
                             polynomial_kernel as polynomial_kernel)
from .learners.gp import (gp_fit as gp_fit, gp_predict as gp_predict,
                          gp_preference_probability as gp_preference_probability)
from .learners.kpcrank import (center_kernel as center_kernel,
                               center_test_kernel as center_test_kernel, kpcrank as kpcrank)
from .learners.rankboost import rankboost as rankboost, rankboost_predict as rankboost_predict
from .learners.ranksvm import (rank_levels as rank_levels, ranksvm_kernel as ranksvm_kernel,
                               ranksvm_l2 as ranksvm_l2)
from .metrics.choice import Selection as Selection
from .metrics.survival import harrell_c as harrell_c, uno_c as uno_c
from .metrics.graded import (mean_average_precision as mean_average_precision, mrr as mrr,
                             ndcg as ndcg, precision_at_k as precision_at_k)
from .metrics.pairs import (Metric as Metric, PerQuery as PerQuery, auc as auc, cindex as cindex,
                            disagreement_error as disagreement_error,
                            edge_disagreement_error as edge_disagreement_error,
                            kendall_tau_b as kendall_tau_b, pairwise_error as pairwise_error)
from .selection.cv import permutation_test as permutation_test
from .selection.tune import cv_loss as cv_loss, tune as tune
from .solvers.auto import Auto as Auto
from .solvers.base import AbstractSolver as AbstractSolver
from .solvers.cg import CG as CG
from .solvers.dual import Dual as Dual
from .solvers.falkon import Falkon as Falkon
from .solvers.lpo import (LeavePairOut as LeavePairOut, differing_pairs as differing_pairs,
                          lpo_cindex as lpo_cindex, positive_negative_pairs as positive_negative_pairs)
from .solvers.models import (DualModel as DualModel, KernelModel as KernelModel,
                             LinearModel as LinearModel, MappedModel as MappedModel,
                             ScaledModel as ScaledModel, BlendModel as BlendModel,
                             NystromModel as NystromModel, predict as predict)
from .solvers.nystrom import Nystrom as Nystrom
from .solvers.primal import Primal as Primal
from .io.synthetic import (RankingData as RankingData, make_ranking_data as make_ranking_data,
                           make_sparse_ranking_data as make_sparse_ranking_data,
                           make_web_data as make_web_data,
                           make_interaction_data as make_interaction_data,
                           SurvivalData as SurvivalData, make_survival_data as make_survival_data,
                           distort_like_logs as distort_like_logs)
from . import io as io
from . import scale as scale
from ._version import __version__ as __version__

__all__ = [
    # the front door: a problem, solvers, four verbs, their result
    "Problem", "AbstractSolver", "Primal", "Dual", "Nystrom", "CG", "Falkon", "Auto", "Basis",
    "fit", "path", "holdout", "select", "capabilities", "Solution", "RESULTS",
    "LeavePairOut", "Folds", "make_folds", "Selection", "UnresolvedLambdaWarning",
    "GridEdgeWarning", "MemoryPlanError",
    "LinearModel", "DualModel", "KernelModel", "NystromModel", "MappedModel", "ScaledModel",
    "BlendModel", "predict",
    # queries and preference graphs
    "Segments", "segment_ids", "QueryGraph", "PreferenceGraph", "IdentityGraph",
    "query_graph", "list_graph", "survival_graph",
    "preference_graph", "global_graph", "identity_graph", "pairs_from_scores",
    "positive_negative_pairs", "differing_pairs", "laplacian_mv", "laplacian_dense",
    # kernels
    "Kernel", "kernel_matrix", "linear_kernel", "gaussian_kernel", "polynomial_kernel",
    "FeatureMap", "learn_feature_map",
    # metrics
    "Metric", "PerQuery", "ndcg", "mean_average_precision", "precision_at_k", "mrr", "cindex", "auc",
    "harrell_c", "uno_c",
    "kendall_tau_b", "pairwise_error", "disagreement_error", "edge_disagreement_error",
    "lpo_cindex", "permutation_test",
    # hyper-parameters by gradient
    "tune", "cv_loss",
    # the other learners of the papers
    "kpcrank", "center_kernel", "center_test_kernel", "ranksvm_l2", "ranksvm_kernel",
    "rank_levels", "gp_fit", "gp_predict", "gp_preference_probability", "rankboost",
    "rankboost_predict",
    # data and subpackages
    "make_ranking_data", "make_sparse_ranking_data", "make_web_data", "make_interaction_data",
    "make_survival_data", "SurvivalData", "distort_like_logs",
    "RankingData", "CSRMatrix", "to_csr",
    "io", "scale",
]
