"""rankjax: RankRLS and friends as pure, jittable JAX functions.

One flat public namespace; host-side data loading lives in :mod:`rankjax.io`.
"""
from . import _xla  # noqa: F401  (XLA:CPU flags, before JAX starts a backend)
from ._checks import Segments as Segments, segment_ids as segment_ids
from ._resolved import UnresolvedLambdaWarning as UnresolvedLambdaWarning
from ._graph import (IdentityGraph as IdentityGraph, PreferenceGraph as PreferenceGraph,
                     QueryGraph as QueryGraph)
from ._graph_build import (global_graph as global_graph, identity_graph as identity_graph,
                           incidence_mv as incidence_mv, incidence_t_mv as incidence_t_mv,
                           laplacian_dense as laplacian_dense, laplacian_mv as laplacian_mv,
                           laplacian_sqrt_mv as laplacian_sqrt_mv,
                           pairs_from_scores as pairs_from_scores, preference_graph as preference_graph,
                           query_graph as query_graph, query_pair_counts as query_pair_counts,
                           Validation as Validation)
from ._kernels import (
    Kernel as Kernel, gaussian_kernel as gaussian_kernel, kernel_matrix as kernel_matrix,
    linear_kernel as linear_kernel, polynomial_kernel as polynomial_kernel)
from ._rankrls import (
    DualModel as DualModel, KernelModel as KernelModel, LinearModel as LinearModel,
    ScaledModel as ScaledModel,
    predict as predict, rankrls_dual as rankrls_dual,
    rankrls_kernel as rankrls_kernel, rankrls_primal as rankrls_primal)
from ._path import (
    DualPath as DualPath, NystromPath as NystromPath, PrimalPath as PrimalPath,
    Selection as Selection,
    nystrom_features as nystrom_features,
    rankrls_dual_path as rankrls_dual_path, rankrls_nystrom_path as rankrls_nystrom_path,
    rankrls_primal_path as rankrls_primal_path, select_lambda as select_lambda)
from ._folds import Folds as Folds, make_folds as make_folds
from ._holdout import (
    HoldOut as HoldOut, holdout_dual as holdout_dual, holdout_nystrom as holdout_nystrom,
    holdout_primal as holdout_primal)
from ._lpo import (
    PairHoldOut as PairHoldOut, differing_pairs as differing_pairs,
    leave_pair_out_dual as leave_pair_out_dual, leave_pair_out_primal as leave_pair_out_primal,
    lpo_cindex as lpo_cindex, positive_negative_pairs as positive_negative_pairs)
from ._cv import (
    CVResult as CVResult, PermutationResult as PermutationResult,
    cross_validate as cross_validate, permutation_test as permutation_test,
    permuted_labels as permuted_labels)
from ._cg import rankrls_cg as rankrls_cg, rankrls_cg_dual as rankrls_cg_dual
from ._cg_loop import (STOP_REASONS as STOP_REASONS, CG as CG, CGResult as CGResult,
                       cg_solve as cg_solve, validation_criterion as validation_criterion)
from ._nystrom import BASIS_METHODS as BASIS_METHODS, Basis as Basis, nystrom_basis as nystrom_basis
from ._falkon import FalkonModel as FalkonModel, rankrls_falkon as rankrls_falkon
from ._kpcrank import (
    KPCModel as KPCModel, KPCPath as KPCPath, center_kernel as center_kernel,
    center_test_kernel as center_test_kernel, kpcrank as kpcrank, kpcrank_path as kpcrank_path)
from ._gp import (
    PairwiseGP as PairwiseGP, gp_fit as gp_fit, gp_pairwise_gaussian as gp_pairwise_gaussian,
    gp_pairwise_probit as gp_pairwise_probit, gp_predict as gp_predict,
    gp_preference_probability as gp_preference_probability)
from ._rankboost import (
    RankBoostModel as RankBoostModel, rankboost as rankboost,
    rankboost_predict as rankboost_predict)
from ._ranksvm import (
    RankLevels as RankLevels, RankSVMKernelModel as RankSVMKernelModel,
    RankSVMResult as RankSVMResult, rank_levels as rank_levels, ranksvm_kernel as ranksvm_kernel,
    ranksvm_l2 as ranksvm_l2)
from ._tune import (
    TuneResult as TuneResult, cv_loss as cv_loss, cv_predictions as cv_predictions, tune as tune)
from ._select import (
    RankRLSSelection as RankRLSSelection, rankrls_fit as rankrls_fit,
    select_rankrls as select_rankrls)
from .scale import (
    AXIS as AXIS, GridSearch as GridSearch, QueryPartition as QueryPartition,
    ShardedData as ShardedData, StreamFit as StreamFit, partition_queries as partition_queries,
    rankrls_primal_stream as rankrls_primal_stream, shard_data as shard_data,
    sharded_cg as sharded_cg, sharded_falkon as sharded_falkon, sharded_holdout as sharded_holdout,
    sharded_kernel_grid as sharded_kernel_grid, sharded_metric as sharded_metric,
    sharded_normal_equations as sharded_normal_equations,
    sharded_primal_path as sharded_primal_path)
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
from ._types import register_model_types as _register

_register(*[v for k, v in list(globals().items()) if isinstance(v, type) and not k.startswith("_")])

__all__ = [k for k in dir() if not k.startswith("_")]
