"""scikit-learn style estimators: thin classes over the public functions.

``fit(X, y, qid=None)``, ``predict(X)``, ``score(X, y, qid=None)`` (NDCG@10),
``get_params`` / ``set_params``, ``save(path)`` / :func:`load`. scikit-learn is
optional: with it installed the classes are ``BaseEstimator`` subclasses (clone,
``GridSearchCV``, pipelines, metadata routing of ``qid``); without it they keep
the same methods.

Inputs: dense numpy/JAX arrays, ``scipy.sparse`` matrices, BCOO, pandas
DataFrames (feature names are kept; a column named ``qid`` is taken as the
query ids when ``qid`` is not given, as XGBoost's ranker does). Query ids may be
integers, strings or categories. ``fit`` needs the queries, as LightGBM's and
XGBoost's rankers: ``qid`` (an id per row) or ``group`` (query sizes in row order);
for one query over all rows pass ``qid=np.zeros(len(X))``. (RLS regression,
``RankRLS(graph="identity")``, needs none.)

Every estimator but RankBoost learns a feature map on its training rows
(``feature_map="auto"``, docs/math.md §7): a kernel sees each column by its ranks (learned
without the labels), the linear model standardised columns; NaN, infinities and pandas
categories are taken. ``RankRLSCV`` with a kernel by name lets the data choose among
candidates (the ranks over a small γ grid, the ranks weighted by their correlation with
the labels, cross-fitted, and the linear model on the ranks) by exact hold-outs no label
of which shaped the features they score (``best_params_``, ``cv_results_``). Kernel
estimators default to ``gamma="mean"``: one over the mean squared distance of two training
rows as the kernel sees them (``"scale"``: scikit-learn's SVC, ``"auto"``: ``1 /
n_features``); the value used is ``gamma_`` after ``fit``.
``feature_importances_`` says what each feature weighs in the model;
:func:`permutation_importance` measures it on held-out rows.

Under ``GridSearchCV`` ``qid`` reaches ``fit`` as a fit parameter and reaches
``score`` only with metadata routing on
(``sklearn.set_config(enable_metadata_routing=True)``; the estimators request
``qid`` by default) or as a DataFrame column; otherwise a model fitted on several
queries refuses to score (a ``ValueError`` naming the remedy) rather than rank all rows
as one query, and a ``GridSearchCV`` or ``cross_validate`` that would score that way
stops at its first ``fit``.

Query weights: ``sample_weight`` per row (LightGBM's spelling, constant within a query)
or ``group_weight`` per query (XGBoost's, in query order) in every ``fit``; a query of
weight 2 counts as the query twice (the papers' query weights, docs/math.md).

Example:
  >>> import numpy as np, rankjax as rj
  >>> from rankjax.estimators import RankRLS
  >>> d = rj.make_ranking_data(20, num_features=5, seed=0)
  >>> model = RankRLS(lam=1.0).fit(d.X, d.y, qid=d.qid)
  >>> model.predict(d.X[:3]).shape, round(model.score(d.X, d.y, qid=d.qid), 2) > 0.5
  ((3,), True)
"""
from .persist import ESTIMATORS as ESTIMATORS
from .persist import load as load
from .importance import permutation_importance as permutation_importance
from .iterative import KPCRank as KPCRank
from .iterative import RankBoost as RankBoost
from .iterative import RankSVM as RankSVM
from .rankrls import RankRLS as RankRLS
from .rankrls import RankRLSCV as RankRLSCV
from .survival import SurvivalRankRLS as SurvivalRankRLS, SurvivalRankRLSCV as SurvivalRankRLSCV

__all__ = ["RankRLS", "RankRLSCV", "SurvivalRankRLS", "SurvivalRankRLSCV", "RankSVM", "KPCRank",
           "RankBoost", "load",
           "permutation_importance"]
