"""Plots for the usual questions (matplotlib, the ``plot`` extra): how the validation
score moves along λ and where the choice fell, how CG's validation criterion moves
with the iterations, and how a metric spreads over queries.

Every function draws on ``ax`` (a new figure when ``None``) and returns the axes.

Example:
  >>> import matplotlib; matplotlib.use("Agg")
  >>> import numpy as np, rankjax as rj
  >>> from rankjax import plot
  >>> d = rj.make_ranking_data(15, num_features=4, seed=0)
  >>> h = rj.holdout_primal(d.X, d.y, rj.query_graph(d.qid), lams=np.logspace(-2, 3, 6))
  >>> ax = plot.lambda_curve(rj.cross_validate(h, d.y, d.qid, metric=rj.ndcg))
  >>> ax.get_xscale()
  'log'
"""
from __future__ import annotations

import numpy as np

__all__ = ["lambda_curve", "cg_curve", "per_query"]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt
        ax = plt.figure(figsize=(5, 3.2)).add_subplot()
    return ax


def lambda_curve(result, ax=None, *, label: str = "validation"):
    """The validation table of a :class:`rankjax.CVResult` or
    :class:`rankjax.Selection` (``lams`` given by the result, or
    ``(lams, table, best_index)``) against λ on a log axis, the chosen λ marked.

    Example:
      >>> import matplotlib; matplotlib.use("Agg")
      >>> ax = lambda_curve(([0.1, 1.0, 10.0], [0.5, 0.7, 0.6], 1))
      >>> float(ax.lines[1].get_xdata()[0])
      1.0
    """
    if isinstance(result, tuple) and len(result) == 3 and not hasattr(result, "_fields"):
        lams, table, best = result
    else:
        lams, table, best = result.lams, result.table, result.best_index
    lams, table = np.asarray(lams), np.asarray(table)
    ax = _axes(ax)
    ax.plot(lams, table, "o-", label=label)
    b = np.atleast_1d(np.asarray(best))[0]
    ax.axvline(lams[b], color="grey", ls="--", lw=1, label=f"chosen λ = {lams[b]:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel("λ")
    ax.set_ylabel("validation score")
    ax.legend(frameon=False)
    return ax


def cg_curve(result, ax=None, *, label: str = "validation"):
    """A :class:`rankjax.CGResult`'s validation criterion (lower is better) and
    relative residual against the iteration, the returned iterate marked.

    Example:
      >>> import matplotlib; matplotlib.use("Agg")
      >>> import numpy as np, rankjax as rj
      >>> r = rj.cg_solve(lambda v: 2 * v, np.ones(3), tol=1e-8)
      >>> len(cg_curve(r).lines[0].get_xdata()) == r.valid_history.shape[0]
      True
    """
    hv, hr = np.asarray(result.valid_history), np.asarray(result.residual_history)
    it = np.arange(hv.shape[0])
    ax = _axes(ax)
    ax.plot(it, hv, label=label)
    ax.axvline(int(result.best_iteration), color="grey", ls="--", lw=1,
               label=f"returned iterate {int(result.best_iteration)}")
    ax.set_xlabel("CG iteration")
    ax.set_ylabel("validation criterion")
    twin = ax.twinx()
    twin.semilogy(it, hr, color="tab:orange", alpha=0.6)
    twin.set_ylabel("relative residual", color="tab:orange")
    ax.legend(frameon=False)
    return ax


def per_query(values, ax=None, *, label: str = "NDCG@10", bins: int = 20):
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
    ax.legend(frameon=False)
    return ax
