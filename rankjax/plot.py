"""Plots for the usual questions (matplotlib, the ``plot`` extra): how the validation
score moves along λ and where the choice fell, how CG's validation criterion moves
with the iterations, and how a metric spreads over queries.

Every function draws on ``ax`` (a new figure when ``None``) and returns the axes.

Example:
  >>> import matplotlib; matplotlib.use("Agg")
  >>> import numpy as np, rankjax as rj
  >>> from rankjax import plot
  >>> d = rj.make_ranking_data(15, num_features=4, seed=0)
  >>> sel = rj.select(rj.Problem(d.X, d.y, d.qid), [rj.Primal()], lams=np.logspace(-2, 3, 6))
  >>> ax = plot.lambda_curve(sel)
  >>> ax.get_xscale()
  'log'
"""
from __future__ import annotations

import numpy as np

__all__ = ["lambda_curve", "evals_curve", "cg_curve", "per_query"]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt
        ax = plt.figure(figsize=(5, 3.2)).add_subplot()
    return ax


def lambda_curve(result, ax=None, *, label: str = "validation", metric: str = None,
                 title: str = None):
    """The validation score against λ on a log axis, the chosen λ marked.

    ``result``: a fitted :class:`rankjax.estimators.RankRLSCV` (one curve per γ of its
    grid, NDCG@``score_k``), its ``cv_results_`` dictionary, what :func:`rankjax.select`
    returns (one curve per γ), a :class:`rankjax.Selection` or ``(lams, table, best_index)``. ``metric`` names
    the score on the y axis (estimators name it themselves).

    Example:
      >>> import matplotlib; matplotlib.use("Agg")
      >>> ax = lambda_curve(([0.1, 1.0, 10.0], [0.5, 0.7, 0.6], 1), metric="NDCG@10")
      >>> float(ax.lines[1].get_xdata()[0]), ax.get_ylabel()
      (1.0, 'NDCG@10')
    """
    curves, chosen = _lambda_curves(result)
    if metric is None and hasattr(result, "cv_results_"):
        metric = f"NDCG@{getattr(result, 'score_k', 10)}"
    if title is None:
        how = "evaluation set" if hasattr(result, "evals_result_") else "cross-validation"
        title = (f"{type(result).__name__}: λ by {how}" if hasattr(result, "cv_results_")
                 else "validation score along λ")
    ax = _axes(ax)
    for name, (lams, table) in curves.items():
        ax.plot(lams, table, "o-", label=label if name is None else f"{label}, γ = {name:.3g}")
    ax.axvline(chosen, color="grey", ls="--", lw=1, label=f"chosen λ = {chosen:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel("λ")
    ax.set_ylabel(metric or "validation score")
    ax.set_title(title)
    ax.legend(frameon=False)
    return ax


def _lambda_curves(result):
    """``({γ or None: (lams, table)}, chosen λ)`` of any result ``lambda_curve`` takes."""
    if hasattr(result, "cv_results_"):
        chosen = float(result.lam_)
        result = result.cv_results_
    elif hasattr(result, "scores") and hasattr(result, "gammas"):      # rj.select
        chosen = float(result.lam)
        result = {"param_lam": result.lams, "mean_test_score": result.scores,
                  "param_gamma": result.gammas}
    else:
        chosen = None
    if isinstance(result, dict):
        lams = np.asarray(result["param_lam"], float)
        table = np.asarray(result["mean_test_score"], float)
        gam = result.get("param_gamma")
        blend = result.get("param_kernel_weight")   # a blend's rows: weights, not a λ curve
        if blend is not None:
            keep = np.isnan(np.asarray(blend, float))
            lams, table = lams[keep], table[keep]
            gam = None if gam is None else np.asarray(gam)[keep]
        keys = [None if gam is None or np.isnan(g) else float(g)    # NaN: the linear model
                for g in (np.full(lams.size, np.nan) if gam is None else np.asarray(gam))]
        curves = {}
        for k in sorted(set(keys), key=lambda k: np.inf if k is None else k):   # linear last
            sel = np.flatnonzero([kk == k for kk in keys])
            sel = sel[np.argsort(lams[sel], kind="stable")]      # extensions join in order
            curves[k] = (lams[sel], table[sel])
        if chosen is None:
            chosen = float(lams[int(np.nanargmax(table))])
        return curves, chosen
    if isinstance(result, tuple) and len(result) == 3 and not hasattr(result, "_fields"):
        lams, table, best = result
    else:
        lams, table, best = result.lams, result.table, result.best_index
    lams, table = np.asarray(lams), np.asarray(table)
    return {None: (lams, table)}, float(lams[np.atleast_1d(np.asarray(best))[0]])


def evals_curve(estimator, ax=None, *, title: str = None):
    """An estimator's ``evals_result_`` (the evaluation-set score of every boosting
    round, CG or Newton iteration, or number of components), ``best_iteration_``
    marked: LightGBM's ``plot_metric``.

    Example:
      >>> import matplotlib; matplotlib.use("Agg")
      >>> import rankjax as rj
      >>> from rankjax.estimators import RankBoost
      >>> d = rj.make_ranking_data(10, num_features=4, seed=0)
      >>> m = RankBoost(rounds=8).fit(d.X, d.y, qid=d.qid, eval_set=(d.X, d.y), eval_qid=d.qid)
      >>> evals_curve(m).get_ylabel()
      'ndcg@10'
    """
    if not hasattr(estimator, "evals_result_"):
        raise ValueError(f"{type(estimator).__name__} has no evals_result_: fit it with eval_set=")
    ax = _axes(ax)
    (name, results), = estimator.evals_result_.items()
    xlabel, first, mark_best = getattr(estimator, "evals_axis", ("iteration", 0, True))
    for metric, vals in results.items():
        ax.plot(np.arange(first, first + len(vals)), vals, label=f"{name} {metric}")
    if mark_best and hasattr(estimator, "best_iteration_"):
        ax.axvline(estimator.best_iteration_, color="grey", ls="--", lw=1,
                   label=f"best iteration {estimator.best_iteration_}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric)
    ax.set_title(title or f"{type(estimator).__name__} on the evaluation set")
    ax.legend(frameon=False)
    return ax


def cg_curve(solution, ax=None, *, label: str = "validation", title: str = "CG early stopping"):
    """The validation criterion of a CG (or FALKON) solve (its :class:`~rankjax.Solution`,
    ``rj.fit(problem, rj.CG(), lam=lam)``; lower is better) and the relative residual
    against the iteration, the returned iterate marked.

    Example:
      >>> import matplotlib; matplotlib.use("Agg")
      >>> import numpy as np, rankjax as rj
      >>> d = rj.make_ranking_data(10, num_features=4, seed=0)
      >>> s = rj.fit(rj.Problem(d.X, d.y, d.qid), rj.CG(tol=1e-8), lam=1.0)
      >>> len(cg_curve(s).lines[0].get_xdata()) == s.stats["valid_history"].shape[0]
      True
    """
    stats = getattr(solution, "stats", None)
    if not isinstance(stats, dict) or "valid_history" not in stats:
        raise TypeError(f"cg_curve takes the Solution of a CG or Falkon fit, got "
                        f"{type(solution).__name__}")
    hv, hr = np.asarray(stats["valid_history"]), np.asarray(stats["residual_history"])
    it = np.arange(hv.shape[0])
    ax = _axes(ax)
    ax.plot(it, hv, label=label)
    best = int(stats["best_iteration"])
    ax.axvline(best, color="grey", ls="--", lw=1, label=f"returned iterate {best}")
    ax.set_xlabel("CG iteration")
    ax.set_ylabel("validation criterion")
    twin = ax.twinx()
    twin.semilogy(it, hr, color="tab:orange", alpha=0.6)
    twin.set_ylabel("relative residual", color="tab:orange")
    ax.set_title(title)
    ax.legend(frameon=False)
    return ax


def per_query(values, ax=None, *, label: str = "NDCG@10", bins: int = 20, title: str = None):
    """Histogram of a per-query metric (a :class:`rankjax.PerQuery`, undefined
    queries left out, or an array), its mean marked.

    Example:
      >>> import matplotlib; matplotlib.use("Agg")
      >>> ax = per_query([0.5, 0.75, 1.0], bins=3)
      >>> float(sum(p.get_height() for p in ax.patches))
      3.0
    """
    if hasattr(values, "valid"):
        v = np.asarray(values.values)[np.asarray(values.valid)]
    else:
        v = np.asarray(values)
    ax = _axes(ax)
    ax.hist(v, bins=bins, color="tab:blue", alpha=0.8)
    ax.axvline(v.mean(), color="k", lw=1, label=f"mean {v.mean():.3f} ({v.size} queries)")
    ax.set_xlabel(label)
    ax.set_ylabel("queries")
    ax.set_title(title or f"{label} per query")
    ax.legend(frameon=False)
    return ax
