"""The estimators on disk: :meth:`Ranker.save` writes learner, hyper-parameters and
fitted attributes in the one model format (:func:`rankjax.io.save_model`, atomically);
:func:`load` reads them back into the class the file names."""
from __future__ import annotations

import numpy as np

from .. import io
from .._core.types import width_of

__all__ = ["ESTIMATORS", "save", "load"]

ESTIMATORS: dict = {}
"""Estimator classes by name (each :class:`~rankjax.estimators.base.Ranker` subclass enters
as it is defined), for :func:`load`."""


def save(est, path, **meta) -> None:
    """Writes the fitted ``est`` to ``path`` (``meta``: extra scalar metadata)."""
    params = {k: (np.asarray(v) if isinstance(v, (list, tuple)) else v)
              for k, v in est.get_params().items()}
    state = {k: v for k, v in vars(est).items() if k.endswith("_") and k != "feature_names_in_"}
    meta = dict(meta, learner=type(est).__name__, num_features=int(est.n_features_in_))
    if hasattr(est, "feature_names_in_"):
        meta["feature_names"] = [str(c) for c in est.feature_names_in_]
    io.save_model(path, {"params": params, "state": state}, **meta)


def as_lists(v):
    """Tuples of a saved result dictionary back to lists (JSON keeps no difference)."""
    if isinstance(v, dict):
        return {k: as_lists(e) for k, e in v.items()}
    return [as_lists(e) for e in v] if isinstance(v, tuple) else v


def load(path, types=()):
    """Loads an estimator written by ``save``; its class, hyper-parameters, feature
    count and names come from the file (checked as :func:`rankjax.io.load_model` checks
    it; ``types``: classes of one's own it may hold, a solver say, else found only in the
    modules already imported).

    Example:
      >>> import tempfile, pathlib, rankjax as rj
      >>> from rankjax.estimators import RankBoost, load
      >>> d = rj.make_ranking_data(5, num_features=3, seed=0)
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "boost.npz"
      >>> RankBoost(rounds=5).fit(d.X, d.y, qid=d.qid).save(p)
      >>> load(p).rounds
      5
    """
    tree, meta = io.load_model(path, types)
    cls = ESTIMATORS.get(meta.get("learner", ""))
    if not (isinstance(tree, dict) and cls is not None):
        raise ValueError(f"{path} holds no rankjax estimator (use rankjax.io.load_model)")
    n, model = meta.get("num_features"), tree["state"].get("model_")
    if width_of(model) is not None and width_of(model) != n:
        raise ValueError(f"{path}: state.model_: scores rows of {width_of(model)} columns, but "
                         f"the estimator was fitted on {n}")
    params = {k: (tuple(np.asarray(v).tolist()) if isinstance(v, np.ndarray) and v.ndim else v)
              for k, v in tree["params"].items()}
    est = cls(**params)
    for k, v in tree["state"].items():
        setattr(est, k, as_lists(v) if k in ("cv_results_", "evals_result_") else v)
    if "feature_names" in meta:
        est.feature_names_in_ = np.asarray(meta["feature_names"], dtype=object)
    return est
