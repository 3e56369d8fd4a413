"""Patients by risk: RankRLS on censored survival times (:func:`rankjax.survival_graph`) as a
scikit-learn estimator that a scikit-survival user recognises."""
from __future__ import annotations

import warnings

import numpy as np

from .._problem import Problem
from .._solve import fit as _fit
from ..graphs.survival import MARGINS, survival_graph
from ..metrics.survival import harrell_c
from ..selection.edges import EXTEND, GridEdgeWarning
from .._core.resolved import UnresolvedLambdaWarning
from .base import checked_rows
from .frames import frame_values, is_frame
from .inputs import query_segments
from .rankrls import DEFAULT_LAMS, RankRLS


def survival_targets(y, time, event, m: int):
    """``(time [m], event [m] bool)`` from scikit-survival's structured ``y`` (its first
    field the event indicator, its second the time, as ``sksurv.util.Surv`` builds it) or
    from ``time=`` and ``event=``."""
    if (y is None) == (time is None and event is None):
        raise ValueError("give y (a structured array of (event, time), as scikit-survival's "
                         "Surv.from_arrays) or time= and event=, not both")
    if y is not None:
        names = getattr(getattr(y, "dtype", None), "names", None)
        if not names or len(names) != 2:
            raise TypeError("y must be a structured array of two fields (event, time), as "
                            "sksurv.util.Surv.from_arrays(event, time) builds it; or pass "
                            "time= and event=")
        event, time = y[names[0]], y[names[1]]
    elif time is None or event is None:
        raise ValueError("give both time= and event=")
    t, e = np.asarray(time, np.float64), np.asarray(event)
    if t.shape != (m,) or e.shape != (m,):
        raise ValueError(f"time and event must have one entry per row of X ({m}), got "
                         f"{t.shape} and {e.shape}")
    return t, e


class SurvivalRankRLS(RankRLS):
    r"""RankRLS on censored survival times: the comparable pairs of Harrell's C (patient ``i``'s
    event observed and :math:`t_i < t_j`, or tied with ``j`` censored), each ranked with a unit
    margin (:func:`rankjax.survival_graph`, normalised by the number of pairs) plus a ridge
    penalty; linear by default, ``kernel=`` as :class:`RankRLS`. ``predict`` returns risk
    scores (higher: the event sooner, as scikit-survival's); ``score`` is Harrell's C
    (:func:`rankjax.harrell_c`). The columns go through a label-free map (``feature_map``,
    as :class:`RankRLS`); categorical columns are refused (their map reads label scores).
    ``margin``: ``"unit"`` (default) or ``"log_time"``, the pairs' targets (the difference
    of their log-times; :func:`rankjax.survival_graph`). Choose ``lam`` (and ``margin``) with
    scikit-learn's ``GridSearchCV`` (its folds retrain on each training part's own pairs), or
    use :class:`SurvivalRankRLSCV`.

    Example:
      >>> import numpy as np, rankjax as rj
      >>> from rankjax.estimators import SurvivalRankRLS
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(200, 3))
      >>> t = rng.exponential(np.exp(-X[:, 0]))
      >>> c = rng.exponential(2.0, 200)
      >>> model = SurvivalRankRLS(lam=1.0).fit(X, time=np.minimum(t, c), event=t <= c)
      >>> model.score(X, time=np.minimum(t, c), event=t <= c) > 0.6
      True
    """

    def __init__(self, lam=1.0, *, margin="unit", solver="auto", kernel=None, gamma="mean",
                 degree=2, coef0=1.0, basis="auto", random_state=0, feature_map="auto",
                 verbose=0):
        super().__init__(lam, solver=solver, kernel=kernel, gamma=gamma, degree=degree,
                         coef0=coef0, basis=basis, random_state=random_state,
                         feature_map=feature_map, verbose=verbose)
        self.margin = margin

    def fit(self, X, y=None, *, time=None, event=None, strata=None):
        """Fits the risk model of ``lam`` on ``X`` ``[m, n]`` and the times: ``y`` a
        structured array (event, time) as scikit-survival's, or ``time=``/``event=``;
        ``strata`` ``[m]`` (only patients of one stratum are compared)."""
        X, t, e, seg = self._survival_rows(X, y, time, event)
        graph = survival_graph(t, e, strata, margin=self.margin)
        self.model_ = _fit(Problem(X, None, graph), self._solver(X), lam=self.lam).value
        return self._finish_fit(seg)

    def _survival_rows(self, X, y, time, event):
        """``(rows through the label-free map, time, event, Segments)`` of a fit."""
        frame = frame_values(X, None) if is_frame(X) else None
        X = checked_rows(X, frame, missing=self._map_kind() is not None)
        self._record_rows(X.shape[1], frame)
        self.qid_column_ = None
        m = X.shape[0]
        t, e = survival_targets(y, time, event, m)
        cat = self._categorical()
        if cat:
            raise TypeError(f"X column {self.feature_names_in_[cat[0]]!r} is categorical: the "
                            "estimators read a category as a score learned from the labels, "
                            "which survival times do not give; one-hot encode it "
                            "(pandas.get_dummies, sksurv.preprocessing.OneHotEncoder)")
        seg = query_segments(None, None, m)
        return self._mapped(X, np.zeros(m), seg), t, e, seg

    def score(self, X, y=None, *, time=None, event=None, strata=None):
        """Harrell's C of the predicted risks against ``y`` (or ``time``/``event``)."""
        self._check_fitted()
        f = self.predict(X)
        t, e = survival_targets(y, time, event, f.shape[0])
        return float(harrell_c(f, t, e, strata))


class SurvivalRankRLSCV(SurvivalRankRLS):
    r""":class:`SurvivalRankRLS` with λ and the margin chosen by k-fold cross-validation over
    patients: each fold's models (every λ of ``lams``, one path, for each of ``margins``) are
    trained on the comparable pairs inside the other folds' patients and scored by Harrell's
    C on the pairs inside the fold; the (margin, λ) of the best mean C is refitted on every
    patient. Exactly retraining (each fold's own survival graph), so the scores are honest;
    the closed-form path makes a fold cost one decomposition a margin for the whole grid.
    ``margins`` (default both ``"unit"`` and ``"log_time"``): neither ranks better on every
    data set (``docs/survival.md``), so the data choose; ``"log_time"`` is left out where a
    time is 0.

    The grid is :class:`RankRLSCV`'s: ``lams`` (default ``logspace(-3, 3, 13)``); while the
    best mean C of a margin lies on an edge, above its neighbour's, as many λ again are held
    out past it, spaced as the grid (one more path a fold; ``extend`` times, default 2;
    ``cv_results_["extended"]`` marks them); the chosen optimum still on the edge then is a
    :class:`~rankjax.GridEdgeWarning` (a plateau, where C no longer moves with λ, is not).
    A λ of the default grid that the compute dtype does not resolve in some fold is left
    out (named with ``verbose``); in a grid you give it is a NaN row (and its warning).

    Attributes (after ``fit``): ``lam_``, ``margin_``, ``best_score_`` (the mean C),
    ``best_params_``, ``cv_results_`` (``param_lam``, ``param_margin``, ``mean_test_score``,
    ``std_test_score``, ``split{k}_test_score``, ``rank_test_score``, ``extended``) and the
    refitted model.

    Example:
      >>> import numpy as np
      >>> rng = np.random.default_rng(0)
      >>> X = rng.normal(size=(200, 3))
      >>> t, c = rng.exponential(np.exp(-X[:, 0])), rng.exponential(2.0, 200)
      >>> m = SurvivalRankRLSCV(lams=[0.1, 10.0], folds=3)
      >>> m = m.fit(X, time=np.minimum(t, c), event=t <= c)
      >>> m.lam_ in (0.1, 10.0), 0.5 < m.best_score_ <= 1
      (True, True)
    """

    def __init__(self, lams=DEFAULT_LAMS, *, margins=MARGINS, folds=5, extend=EXTEND,
                 solver="auto", kernel=None, gamma="mean", degree=2, coef0=1.0, basis="auto",
                 random_state=0, feature_map="auto", verbose=0):
        super().__init__(solver=solver, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                         basis=basis, random_state=random_state, feature_map=feature_map,
                         verbose=verbose)
        self.lams, self.margins, self.folds, self.extend = lams, margins, folds, extend

    def fit(self, X, y=None, *, time=None, event=None, strata=None):
        """Chooses λ by k-fold over patients (class docstring), then fits it on every row."""
        lams = np.asarray(self.lams, np.float64)
        if lams.ndim != 1 or lams.size == 0 or not np.all(np.isfinite(lams) & (lams > 0)):
            raise ValueError(f"lams must be a non-empty 1-D grid of finite λ > 0, got "
                             f"{self.lams!r}")
        if isinstance(self.extend, bool) or not isinstance(self.extend, (int, np.integer)) \
                or self.extend < 0:
            raise ValueError(f"extend must be an int >= 0, got {self.extend!r}")
        default = lams.shape == (len(DEFAULT_LAMS),) and np.allclose(lams, DEFAULT_LAMS,
                                                                      rtol=1e-12)
        Z, t, e, seg = self._survival_rows(X, y, time, event)
        Z, m = np.asarray(Z), Z.shape[0]
        if isinstance(self.folds, bool) or not isinstance(self.folds, (int, np.integer)) \
                or not 2 <= self.folds <= m:
            raise ValueError(f"folds must be an int between 2 and the rows ({m}), got "
                             f"{self.folds!r}")
        s = None if strata is None else np.asarray(strata)
        solver = self._solver(Z)
        runs = {mg: self._grid(Z, t, e, s, solver, lams, default, mg)
                for mg in self._chosen_margins(t)}
        best_of = {mg: np.max(np.nan_to_num(_mean(r[1]), nan=-np.inf)) for mg, r in runs.items()}
        if not np.isfinite(max(best_of.values())):
            raise ValueError("no λ of the grid is answered in this dtype (every lane NaN): use "
                             "float64 (jax_enable_x64) or larger lams")
        margin = max(best_of, key=lambda mg: best_of[mg])          # ties: the first given
        lams_m, scores_m, _, at_floor = runs[margin]
        if _past_edge(lams_m, scores_m, 1) is not None:
            best = lams_m[int(np.nanargmax(_mean(scores_m)))]
            why = ("the λ past it are not resolved in this dtype; float64 (jax_enable_x64) "
                   "resolves smaller λ" if at_floor else "give a wider lams")
            warnings.warn(f"the best λ ({best:g}) lies on the edge of the grid "
                          f"[{lams_m.min():g}, {lams_m.max():g}]: Harrell's C may still improve "
                          f"past it; {why}", GridEdgeWarning, stacklevel=2)
        all_lams = np.concatenate([r[0] for r in runs.values()])
        scores = np.concatenate([r[1] for r in runs.values()], axis=1)
        mean = _mean(scores)
        mine = np.concatenate([np.full(r[0].size, mg == margin) for mg, r in runs.items()])
        best = int(np.nanargmax(np.where(mine, mean, -np.inf)))
        self.lam_, self.margin_ = float(all_lams[best]), margin
        self.best_score_ = float(mean[best])
        self.best_params_ = {"lam": self.lam_, "margin": margin}
        self.cv_results_ = {**_cv_results(all_lams, scores, mean),
                            "param_margin": np.concatenate([np.full(r[0].size, mg)
                                                            for mg, r in runs.items()]),
                            "extended": np.concatenate([r[2] for r in runs.values()])}
        self.model_ = _fit(Problem(Z, None, survival_graph(t, e, s, margin=margin)), solver,
                           lam=self.lam_).value
        return self._finish_fit(seg)

    def _chosen_margins(self, t):
        """The margins held out: ``margins`` checked, ``"log_time"`` left out (named with
        ``verbose``) where a time is not > 0 and another margin remains."""
        margins = (self.margins,) if isinstance(self.margins, str) else tuple(self.margins)
        if not margins or any(mg not in MARGINS for mg in margins) \
                or len(set(margins)) != len(margins):
            raise ValueError(f"margins must be distinct margins of {MARGINS}, got "
                             f"{self.margins!r}")
        if "log_time" in margins and np.any(t <= 0):
            if len(margins) == 1:
                raise ValueError("margin 'log_time' needs every time > 0")
            if self.verbose:
                print("SurvivalRankRLSCV: a time is 0: margin 'log_time' left out")
            margins = tuple(mg for mg in margins if mg != "log_time")
        return margins

    def _grid(self, Z, t, e, s, solver, lams, default, margin):
        """``(lams, scores [k, L], extended [L], at_floor)`` of one margin: the grid held out
        on every fold, the refused λ of a default grid left out, extended past an edge."""
        parts = _fold_parts(Z, t, e, s, int(self.folds), self.random_state, solver, lams.size,
                            margin)
        if not any(parts):
            raise ValueError("no fold holds a comparable pair: too few observed events for "
                             f"{self.folds} folds")
        scores = _fold_scores(parts, lams, quiet=default)
        live = np.array([p is not None for p in parts])
        extended, at_floor = np.zeros(lams.size, bool), False
        if default:
            lams, scores, extended = self._resolved(lams, scores, extended, live)
        for _ in range(int(self.extend)):
            more = _past_edge(lams, scores, int(np.asarray(self.lams).size))
            if more is None:
                break
            extra = _fold_scores(parts, more, quiet=True)
            if np.isnan(extra[live]).any(0).all():         # none resolved past the edge
                at_floor = True
                break
            lams, scores, extended = self._resolved(np.r_[lams, more], np.c_[scores, extra],
                                                    np.r_[extended, np.ones(more.size, bool)],
                                                    live)
        return lams, scores, extended, at_floor

    def _resolved(self, lams, scores, extended, live):
        """The grid sorted, without the λ some fold of ``live`` (those holding pairs)
        refused (named with ``verbose``)."""
        order = np.argsort(lams)
        lams, scores, extended = lams[order], scores[:, order], extended[order]
        refused = np.isnan(scores[live]).any(0)
        if refused.all():
            raise ValueError("no λ of the grid is resolved in this dtype: use float64 "
                             "(jax_enable_x64) or give lams")
        if refused.any() and self.verbose:
            print(f"SurvivalRankRLSCV: λ {', '.join(f'{a:g}' for a in lams[refused])} not "
                  "resolved in this dtype: left out of the grid")
        return lams[~refused], scores[:, ~refused], extended[~refused]


def _fold_parts(Z, t, e, s, k, seed, solver, L, margin):
    """Per fold ``(problem, state, test rows)`` (``None`` for a fold whose training patients
    hold no comparable pair): the fold's graph, problem and plan made once, for more λ."""
    fold = np.random.default_rng(seed).permutation(Z.shape[0]) % k
    parts = []
    for j in range(k):
        tr, te = fold != j, fold == j
        try:
            graph = survival_graph(t[tr], e[tr], None if s is None else s[tr], margin=margin)
        except ValueError:                      # no comparable pair among these patients
            parts.append(None)
            continue
        problem = Problem(Z[tr], None, graph)
        parts.append((problem, solver.init(problem, "path", L=L),
                      (Z[te], t[te], e[te], None if s is None else s[te])))
    return parts


def _fold_scores(parts, lams, quiet):
    """``[k, L]`` Harrell's C of every fold's held-out patients at every λ (NaN: a fold with
    no comparable pair, or a λ its solve refused; ``quiet``: that refusal's warning kept
    back, the caller leaves the λ out)."""
    from .._solve import path as _path
    from ..solvers import predict
    out = np.full((len(parts), lams.size), np.nan)
    for j, part in enumerate(parts):
        if part is None:
            continue
        problem, state, (Zte, tte, ete, ste) = part
        with warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore", UnresolvedLambdaWarning)
            models = _path(problem, lams=lams, state=state).value
        F = np.asarray(predict(models, Zte))
        for i in np.flatnonzero(np.all(np.isfinite(F), axis=1)):   # refused lanes: NaN risks
            out[j, i] = float(harrell_c(F[i], tte, ete, ste))
    return out


def _past_edge(lams, scores, count):
    """``count`` more λ past the edge whose mean C is the best and above its neighbour's
    (the grid's spacing; a plateau, where C no longer moves with λ, is no reason to go on),
    or ``None`` when the best is inside (or the grid has no interior: two λ)."""
    mean = _mean(scores)
    if lams.size < 3:
        return None
    best = int(np.nanargmax(mean))
    step = np.exp(np.mean(np.diff(np.log(lams))))
    if best == lams.size - 1 and mean[-1] > mean[-2]:
        return lams[-1] * step ** np.arange(1, count + 1)
    if best == 0 and mean[0] > mean[1]:
        return lams[0] / step ** np.arange(1, count + 1)
    return None


def _mean(scores):
    """``[L]`` the mean over the folds that answered (NaN where none did)."""
    answered = np.isfinite(scores)
    return np.where(answered.any(0), np.nansum(scores, 0) / np.maximum(answered.sum(0), 1),
                    np.nan)


def _cv_results(lams, scores, mean):
    """scikit-learn's ``cv_results_`` of the grid ``lams``."""
    answered = np.isfinite(scores)
    order = np.argsort(-np.nan_to_num(mean, nan=-np.inf), kind="stable")
    rank = np.empty(lams.size, int)
    rank[order] = np.arange(1, lams.size + 1)
    std = np.sqrt(np.where(answered.any(0), np.nansum((scores - mean) ** 2, 0)
                           / np.maximum(answered.sum(0), 1), np.nan))
    return {"param_lam": lams, "params": [{"lam": float(a)} for a in lams],
            "mean_test_score": mean, "std_test_score": std, "rank_test_score": rank,
            **{f"split{k}_test_score": scores[k] for k in range(len(scores))}}
