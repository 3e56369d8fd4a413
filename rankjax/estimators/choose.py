r"""The default chosen by the data: what :class:`~rankjax.estimators.RankRLSCV` with a kernel
given by name and ``feature_map="auto"`` fits, chosen by exact hold-outs in which no held-out
query's labels shaped the features it is scored on.

The candidates (``cv_results_`` holds a row per candidate, γ and λ; ``best_params_`` the
chosen one):

* ``"ranks"``: the kernel on the rank map learned without the labels
  (:func:`~rankjax.learn_feature_map`, ``kind="rank"``) at a small γ grid around ``gamma``
  (:data:`GAMMA_FACTORS`, extended past an edge optimum);
* ``"weighted ranks"``: the kernel on the rank map with each column scaled by its
  within-query correlation with the labels (``kind="weighted"``), at the best γ factor of
  the ranks;
* the linear model on the ranks (``"ranks"``, kernel ``"linear"``).

Every candidate sees the columns through their ranks, so the choice, like each model, is the
same whatever increasing or decreasing map a column was logged through.

A map that learns from the labels (the weighted ranks; any map of categorical columns, whose
categories are read as label scores) is *cross-fitted*: the training queries are split at
random into two halves, and each half's hold-out predictions come from the map learned on
the other half's labels, so that no held-out query's labels shaped the features it is
scored on (with an ``eval_set`` the choice is scored on rows no map saw: no split).

The kernel candidates are *screened* on a random subsample of :data:`SCREEN_ROWS` rows of
whole queries by the exact hold-out of a Nyström model on one shared uniform basis of
:data:`SCREEN_BASIS` rows (a fraction of the model's own cost). The best is then held out
on every row: a label-free map by its own route's exact hold-out over the λ grid (the
exact kernel or the Nyström basis of ``basis``, extended past an edge optimum), whose model
is kept; a label-derived map by the cross-fitted hold-out of a Nyström model on a uniform
basis of :data:`CROSSFIT_BASIS` rows (two of them: one per half's map), after which the map
learned from every label is fitted on its own route at the chosen λ. The linear model's
exact hold-out is held beside it (cross-fitted too when its map learns from labels), and the
higher of the two is kept.

``optimize=True`` starts from label-free columns only (the weighted ranks are not offered:
with ``ard=True`` the gradient's per-feature scales do their work).
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Optional

import jax.numpy as jnp
import numpy as np

from .._core.log import info
from .._core.sparse import as_dense
from .._problem import Problem
from .._solve import fit as _fit, holdout as _holdout, path as _path
from ..features.learn import learn_and_map, weighted_from
from ..graphs.folds import make_folds
from ..kernels.basis import Basis
from ..metrics.choice import Selection
from ..metrics.graded import ndcg
from ..selection.refine import dense_segments
from ..selection.select import _Grid, select_grid
from ..solvers import Auto, Dual, Nystrom
from .base import through
from .defaults import basis_spec, gamma_value, make_kernel

__all__ = ["GAMMA_FACTORS", "SCREEN_BASIS", "SCREEN_ROWS", "CROSSFIT_BASIS", "Choice", "choose"]


GAMMA_FACTORS = (1 / 9, 1 / 3, 1.0)
"""The γ grid of the ranks candidate: ``gamma`` (``"mean"``: one over the mean squared
distance of two training rows) times these factors, extended past an edge optimum at the
same ratio (``extend`` times a side)."""


SCREEN_BASIS = 256
"""The rows of the one shared uniform Nyström basis every kernel candidate is screened with
(the exact kernel on at most this many rows)."""


SCREEN_ROWS = 2000
"""The rows (whole queries, drawn at random) the screen holds out: every row up to this
many."""


CROSSFIT_BASIS = 512
"""The rows of the uniform Nyström basis of a label-derived map's cross-fitted hold-out on
every row (two hold-outs, one per half's map; the exact kernel on at most this many rows)."""


@dataclasses.dataclass
class Rows:
    """The ``cv_results_`` rows of one hold-out: a candidate (``features``, ``kernel``,
    ``gamma`` NaN for the linear model) at ``lams``, its ``scores``, the points past the given
    grid (``extended``) and the ``stage`` (``"screen"``: the subsample's; ``"final"``: every
    row's)."""
    features: str
    kernel: str
    gamma: float
    lams: np.ndarray
    scores: np.ndarray
    extended: np.ndarray
    stage: str = "screen"


@dataclasses.dataclass
class Features:
    """A candidate's features: ``name``, the map ``kind``, ``full`` ``(map, rows)`` learned
    from every label it reads, and for a map that learns from labels (without an
    ``eval_set``) the two halves' ``(map, rows)`` (``halves[h]`` from half ``h``'s labels)."""
    name: str
    kind: str
    full: Optional[tuple] = None
    halves: Optional[tuple] = None


@dataclasses.dataclass
class Choice:
    """What :func:`choose` returns: the final :class:`~rankjax.Selection`, the chosen
    candidate's feature map, its name and kernel (``"linear"`` or the kernel's), and every
    hold-out's ``cv_results_`` rows."""
    selection: object
    feature_map: object
    features: str
    kernel: str
    rows: list


class _Setting:
    """One fit's data and choices: the rows, labels, queries, graph, folds, λ grid, the
    evaluation set, the halves of the queries and the screen's subsample."""

    def __init__(self, est, X, y, seg, graph, valid, lams, verbose, categorical):
        self.est, self.X, self.y, self.seg, self.graph = est, X, y, seg, graph
        self.valid, self.lams, self.verbose, self.cat = valid, lams, verbose, categorical
        self.m = X.shape[0]
        self.folds = None if valid is not None else make_folds(graph, est.folds,
                                                               seed=est.random_state)
        rng = np.random.default_rng(est.random_state)
        Q = seg.num_queries
        self.first = (None if valid is not None or Q < 2 else
                      np.isin(seg.seg, rng.permutation(Q)[:Q // 2]))   # rows of half 0
        self.sub = _subsample(seg, SCREEN_ROWS, rng)
        self.sub_seg = dense_segments(np.unique(seg.seg[self.sub], return_inverse=True)[1])
        self.sub_graph = graph if self.sub.size == self.m else graph.restrict(self.sub)
        folds = est.folds if est.folds is None else min(int(est.folds), self.sub_seg.num_queries)
        self.sub_folds = None if valid is not None else make_folds(
            self.sub_graph, folds, seed=est.random_state)
        self.screen_rows = _uniform(rng, self.sub.size, SCREEN_BASIS)
        self.crossfit_rows = _uniform(rng, self.m, CROSSFIT_BASIS)
        info(verbose, "screen: %d of %d rows (whole queries), %s", self.sub.size, self.m,
             "the exact kernel" if self.screen_rows is None else
             f"a uniform Nyström basis of {SCREEN_BASIS} rows")

    def problem(self, rows, fm, sub=False):
        """The problem of a candidate's rows (every row, or the screen's subsample) with
        its evaluation rows through its map."""
        valid = None
        if self.valid is not None:
            Xv, yv, sv = self.valid
            valid = Problem(through(fm, Xv), yv, sv)
        identity = self.est.graph == "identity"
        if not sub:
            return Problem(rows, self.y, self.graph, qid=self.seg if identity else None,
                           valid=valid)
        idx = jnp.asarray(self.sub)
        return Problem(jnp.take(jnp.asarray(rows), idx, axis=0), jnp.asarray(self.y)[idx],
                       self.sub_graph, qid=self.sub_seg if identity else None, valid=valid)

    def features(self, name, kind):
        """The :class:`Features` of ``kind`` (``"rank"`` or ``"weighted"``):
        its halves' maps where it learns from labels, else every label's."""
        if kind == "rank" and not len(self.cat):
            return Features(name, kind, full=self.ranks())
        if self.label_derived(kind) and self.first is not None:
            return Features(name, kind, halves=(self._learn(kind, self.first),
                                                self._learn(kind, ~self.first)))
        return Features(name, kind, full=self._learn(kind, None))

    def label_derived(self, kind) -> bool:
        """Whether the map of ``kind`` learns from labels (that a hold-out must not see)."""
        return self.valid is None and (kind == "weighted" or len(self.cat) > 0)

    def _learn(self, kind, labels):
        if kind == "weighted" and not len(self.cat):   # the ranks once, weighted each time
            return weighted_from(*self.ranks(), self.y, self.seg, labels)
        return learn_and_map(as_dense(self.X), self.y, self.seg, kind, self.cat, labels)

    @functools.cache
    def ranks(self):
        """``(map, rows)`` of the label-free rank map (no categorical columns)."""
        return learn_and_map(as_dense(self.X), self.y, self.seg, "rank")

    def grid(self, problem):
        return _Grid(problem, ndcg, {"k": self.est.score_k}, self.lams, self.verbose)

    def kernel(self, g):
        return make_kernel(self.est.kernel, g, self.est.degree, self.est.coef0)

    def screen(self, feats, g):
        """``[L]`` NDCG of the kernel of ``g`` on the candidate's features, held out on the
        screen's subsample with its model (or its path scored on the evaluation set)."""
        k = self.kernel(g)
        solver = Dual(k) if self.screen_rows is None else Nystrom(k, Basis(rows=self.screen_rows))
        return self.held_out(feats, solver, sub=True)

    def held_out(self, feats, solver, sub=False):
        """``[L]`` NDCG of ``solver``'s hold-out on the candidate's features (every row or
        the subsample; each half's queries predicted through the other half's map where the
        map learns from labels), or of its path on the evaluation set."""
        folds = self.sub_folds if sub else self.folds
        if feats.halves is None:
            p = self.problem(feats.full[1], feats.full[0], sub)
            if self.valid is not None:
                pred = _path(p, solver, lams=self.lams).value.valid_scores
                return self.grid(p.valid).score(pred, self.lams)
            pred = _holdout(p, solver, lams=self.lams, folds=folds).value.predictions
            return self.grid(p).score(pred, self.lams)
        first = self.first[self.sub] if sub else self.first
        pred = None
        for h, (fm, rows) in enumerate(feats.halves):       # half h's map scores the other
            p = self.problem(rows, fm, sub)
            P = np.asarray(_holdout(p, solver, lams=self.lams, folds=folds).value.predictions)
            pred = P if pred is None else np.where((first if h else ~first)[None, :], P, pred)
        return self.grid(p).score(pred, self.lams)

    def final(self, feats, solver, optimize):
        """The candidate held out on every row: a :class:`~rankjax.Selection`. A label-free
        map: ``solver``'s exact hold-out over the λ grid (``select``, its model kept). A
        label-derived one: the cross-fitted hold-out of the Nyström model of
        :data:`CROSSFIT_BASIS` uniform rows (Primal for the linear model) chooses λ, then
        the map of every label is fitted with ``solver`` there."""
        est = self.est
        if feats.halves is None:
            fm, rows = feats.full
            return select_grid(self.problem(rows, fm), [solver], lams=self.lams,
                               folds=self.folds, score_k=est.score_k, optimize=optimize,
                               optimize_steps=est.optimize_steps, ard=est.ard,
                               seed=est.random_state, verbose=self.verbose, extend=est.extend)
        if optimize:
            warnings.warn("optimize=True refines a label-free candidate; the chosen map learns "
                          "from the labels (categorical columns), so its cross-fitted grid "
                          "point is kept as it is", UserWarning, stacklevel=6)
        k = solver.tuned_kernel()
        if k is None:
            cf = Auto()
        elif self.crossfit_rows is None:
            cf = Dual(k)
        else:
            cf = Nystrom(k, Basis(rows=self.crossfit_rows))
        scores = self.held_out(feats, cf)
        i = _argbest(scores)
        fm, rows = self._learn(feats.kind, None)
        feats.full = (fm, rows)
        model = _fit(self.problem(rows, fm), solver, lam=float(self.lams[i])).value
        info(self.verbose, "%s: cross-fitted hold-out NDCG %.4f at λ %.4g, the map of every "
             "label fitted there", feats.name, scores[i], self.lams[i])
        n = self.lams.size
        return Selection(self.lams, None if k is None else np.full(n, float(k.gamma)), scores,
                         i, float(self.lams[i]), None if k is None else float(k.gamma),
                         float(scores[i]), model, _basis_rows(model), None, solver,
                         np.zeros(n, bool))


def _basis_rows(model):
    rows = getattr(model, "basis_rows", None)
    return None if rows is None else np.asarray(rows)


def _uniform(rng, m, b):
    """``[b]`` sorted uniform row indices of ``m`` rows, or None (the exact kernel) when
    ``m <= b``."""
    return None if m <= b else np.sort(rng.choice(m, b, replace=False))


def _subsample(seg, rows, rng):
    """``[u]`` sorted row indices of whole queries drawn at random until at least ``rows``
    rows (every row when there are at most ``rows``)."""
    m = seg.seg.shape[0]
    if m <= rows:
        return np.arange(m)
    order = rng.permutation(seg.num_queries)
    sizes = np.bincount(seg.seg, minlength=seg.num_queries)[order]
    take = order[:int(np.searchsorted(np.cumsum(sizes), rows)) + 1]
    return np.flatnonzero(np.isin(seg.seg, take))


def _argbest(scores) -> int:
    """The index of the best finite score."""
    if np.all(np.isnan(scores)):
        raise ValueError("the metric is undefined for every λ (no query has a relevant "
                         "document / a pair to score)")
    return int(np.nanargmax(scores))


def _best(scores) -> float:
    s = np.asarray(scores, np.float64)
    return -np.inf if np.all(np.isnan(s)) else float(np.nanmax(s))


def _gamma_ladder(est, rows):
    """``(γ values, the reference γ)``: ``gammas`` as given, or ``gamma`` times
    :data:`GAMMA_FACTORS` (a number: itself alone)."""
    g0 = float(gamma_value(est.gamma, rows))
    if est.gammas is not None:
        return [float(gamma_value(g, rows)) for g in est.gammas], g0
    return ([g0 * f for f in GAMMA_FACTORS] if isinstance(est.gamma, str) else [g0]), g0


def _screen_ranks(s, feats):
    """The ranks candidate's screen over the γ ladder, extended past an edge optimum at the
    ladder's outermost ratio (``extend`` times a side): ``(rows, best γ, reference γ)``."""
    gammas, g0 = _gamma_ladder(s.est, (feats.full or feats.halves[0])[1])
    out = {g: s.screen(feats, g) for g in gammas}
    extended, done = set(), {-1: 0, 1: 0}
    while len(out) >= 2:
        ladder = sorted(out)
        best = max(ladder, key=lambda g: _best(out[g]))
        side = -1 if best == ladder[0] else 1 if best == ladder[-1] else 0
        if side == 0 or done[side] >= s.est.extend:
            break
        done[side] += 1
        g = best * (ladder[-1] / ladder[-2] if side > 0 else ladder[0] / ladder[1])
        info(s.verbose, "screen: the best γ %.4g is on the grid's edge: γ %.4g", best, g)
        out[g] = s.screen(feats, g)
        extended.add(g)
    rows = [Rows(feats.name, s.est.kernel, g, s.lams, out[g], np.full(s.lams.size, g in extended))
            for g in sorted(out)]
    return rows, max(sorted(out), key=lambda g: _best(out[g])), g0


def choose(est, X, y, seg, graph, valid, lams, optimize, verbose, categorical) -> Choice:
    """The candidates of the module's docstring: the kernel candidates screened, the best
    held out on every row and compared there with the linear model: a :class:`Choice`.
    ``valid``: ``(X, y, Segments)`` of an evaluation set (rows as given) or None."""
    s = _Setting(est, X, y, seg, graph, valid, lams, verbose, categorical)
    ranks = s.features("ranks", "rank")
    rows, g_best, g0 = _screen_ranks(s, ranks)
    kernels = {ranks.name: (ranks, g_best, _best(next(r.scores for r in rows
                                                      if r.gamma == g_best)))}
    if not optimize and (s.first is not None or valid is not None):
        weighted = s.features("weighted ranks", "weighted")
        g = g_best * gamma_value(est.gamma, (weighted.full or weighted.halves[0])[1]) / g0
        scores = s.screen(weighted, g)
        rows.append(Rows(weighted.name, est.kernel, g, lams, scores, np.zeros(lams.size, bool)))
        kernels[weighted.name] = (weighted, g, _best(scores))
    for name, (_, g, score) in kernels.items():
        info(verbose, "screen: %s γ %.4g, best hold-out NDCG %.4f", name, g, score)
    feats, g, _ = kernels[max(kernels, key=lambda k: kernels[k][2])]
    b = basis_spec(est.basis, est.kernel, s.m, est.random_state, verbose)
    kernel_sel = s.final(feats, Auto.named("auto", s.kernel(g), b), optimize)
    linear_sel = s.final(ranks, Auto(), optimize)
    info(verbose, "%s γ %.4g: hold-out NDCG %.4f; the linear model on the ranks: %.4f",
         feats.name, g, kernel_sel.score, linear_sel.score)
    rows += [_final_rows(kernel_sel, feats.name, est.kernel),
             _final_rows(linear_sel, ranks.name, "linear")]
    if _best(linear_sel.score) > _best(kernel_sel.score):
        return Choice(linear_sel, ranks.full[0], ranks.name, "linear", rows)
    return Choice(kernel_sel, feats.full[0], feats.name, est.kernel, rows)


def _final_rows(sel, features, kernel):
    """The ``cv_results_`` rows of a final :class:`~rankjax.Selection` (one γ)."""
    return Rows(features, kernel, np.nan if sel.gammas is None else float(sel.gammas[0]),
                np.asarray(sel.lams), np.asarray(sel.scores),
                np.zeros(len(sel.lams), bool) if sel.extended is None else
                np.asarray(sel.extended, bool), "final")
