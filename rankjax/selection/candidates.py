r"""The default chosen by the data (:class:`~rankjax.estimators.RankRLSCV` with a kernel given
by name and ``feature_map="auto"``): candidates judged by exact hold-outs in which no
held-out query's labels shaped the features it is scored on.

The candidates (a :class:`Rows` block each in ``cv_results_``):

* ``"ranks"``: the kernel on the rank map learned without the labels
  (:func:`~rankjax.learn_feature_map`, ``kind="rank"``) over a small γ ladder
  (:data:`GAMMA_FACTORS` times the reference γ);
* ``"weighted ranks"``: the kernel on the rank map with each column scaled by its
  within-query correlation with the labels (``kind="weighted"``), at the ranks' best γ
  factor;
* the linear model on the ranks.

Every candidate sees the columns through their ranks, so the choice, like each model, is the
same whatever increasing or decreasing map a column was logged through.

A map that learns from the labels (the weighted ranks; any map of categorical columns, whose
categories are read as label scores) is *cross-fitted*: the training queries are split at
random into :data:`CROSSFIT_PARTS` parts, and each part's hold-out predictions come from the
map learned on the other parts' labels (Chernozhukov et al. 2018, §3), so no held-out
query's labels shaped the features it is scored on. With an evaluation set the choice is
scored on rows no map saw: no split.

The kernel candidates are *screened* on a random subsample of :data:`SCREEN_ROWS` rows of
whole queries by the exact hold-out of a Nyström model on one shared uniform basis of
:data:`SCREEN_BASIS` rows. The best is then held out on every row: a label-free map by its
own route's exact hold-out over the λ grid (``select_grid``; its model kept); a
label-derived map by the cross-fitted hold-out of a Nyström model on a uniform basis of
:data:`CROSSFIT_BASIS` rows (one hold-out per part's map), after which the map learned from
every label is fitted on its own route at the chosen λ. The linear model on the ranks is held
out beside it, and the higher of the two final hold-outs is kept. ``optimize=True`` starts
from label-free columns only (the weighted ranks are not offered: with ``ard=True`` the
gradient's per-feature scales do their work).
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Callable, Optional

import jax.numpy as jnp
import numpy as np

from .._core.checks import as_float_array
from .._core.host import device_array, host_view, lane
from .._core.log import info
from .._core.sparse import as_dense
from .._problem import Problem
from ..features.learn import DERIVED, learn_and_map, weighted_from
from ..features.maps import map_rows
from ..graphs.folds import make_folds
from ..kernels.basis import Basis
from ..metrics.choice import Selection
from ..metrics.graded import ndcg
from ..solvers import Auto, Dual, Nystrom
from ..solvers.base import check_call
from ..solvers.models import BlendModel, ScaledModel
from .refine import dense_segments
from .grid import UNDEFINED, Grid
from .select import select_grid

__all__ = ["GAMMA_FACTORS", "SCREEN_BASIS", "SCREEN_ROWS", "CROSSFIT_BASIS", "CROSSFIT_PARTS",
           "Candidates", "Choice", "Rows", "choose", "crossfit_holdout"]


GAMMA_FACTORS = (1 / 3, 1.0, 3.0)
"""The γ ladder of the ranks candidate: the reference γ (``gamma="mean"``: one over the mean
squared distance of two training rows) times these factors. The screen does not extend it:
its small basis and subsample favour smooth kernels (small γ) more than the model on every
row does, and past the ladder's low end its scores are flat within their noise
(benchmarks/design_measurements.md §8)."""


SCREEN_BASIS = 256
"""The rows of the one shared uniform Nyström basis every kernel candidate is screened with
(the exact kernel on at most this many rows)."""


SCREEN_ROWS = 2000
"""The rows (whole queries, drawn at random) the screen holds out: every row up to this
many."""


CROSSFIT_BASIS = 512
"""The rows of the uniform Nyström basis of a label-derived map's cross-fitted hold-out on
every row (one hold-out per part's map; the exact kernel on at most this many rows)."""


CROSSFIT_PARTS = 2
"""The parts of the queries a label-derived map is cross-fitted over: each part's hold-out
predictions come from the map of the other parts' labels (one hold-out on every row per
part). Four parts (maps of 3/4 of the labels) chose λ closer to the map of every label's
but cost 2.4x the fit time of the default before the candidates
(benchmarks/design_measurements.md §8)."""


@dataclasses.dataclass(frozen=True)
class Candidates:
    """How the candidates are built and judged: ``kernel(γ)`` the kernel of a γ;
    ``ladder(rows)`` ``(γ values, reference γ)`` of a map's rows; ``route(kernel)`` the
    solver of the final model (the exact kernel or a Nyström basis); ``folds`` (``None``:
    leave-query-out, or ``k``), ``seed``, ``extend``, ``score_k``, the refinement's
    ``optimize``/``optimize_steps``/``ard``, ``verbose``; ``categorical`` column indices;
    ``identity``: the graph is RLS's (queries only score)."""
    kernel: Callable
    ladder: Callable
    route: Callable
    folds: Optional[int] = None
    seed: int = 0
    extend: int = 2
    score_k: int = 10
    optimize: bool = False
    optimize_steps: int = 20
    ard: bool = False
    verbose: int = 0
    categorical: tuple = ()
    identity: bool = False


@dataclasses.dataclass
class Rows:
    """The ``cv_results_`` rows of one hold-out: a candidate (``features``, ``kernel``,
    ``gamma`` NaN for the linear model) at ``lams``, its ``scores``, the points past the given
    grid (``extended``) and the ``stage`` (``"screen"``: the subsample's; ``"final"``: every
    row's); a blend's rows: the kernel candidate's share ``kernel_weight`` ``[L]`` of each
    prediction and the linear candidate's λ ``linear_lam`` (``lams``: the kernel's)."""
    features: str
    kernel: str
    gamma: float
    lams: np.ndarray
    scores: np.ndarray
    extended: np.ndarray
    stage: str = "screen"
    kernel_weight: Optional[np.ndarray] = None
    linear_lam: float = np.nan


@dataclasses.dataclass
class Features:
    """A candidate's features: ``name``, the map ``kind``, ``full`` ``(map, rows)`` learned
    from every label it reads, and for a map that learns from labels (without an evaluation
    set) the parts' ``(map, rows)`` (``parts[k]`` from the labels of every part but ``k``)."""
    name: str
    kind: str
    full: Optional[tuple] = None
    parts: Optional[tuple] = None

    def one(self):
        """``(map, rows)`` of one of its maps (every label's, or the first part's): what
        the shapes and the reference γ are read from."""
        return self.full or self.parts[0]


@dataclasses.dataclass
class Choice:
    """What :func:`choose` returns: the final :class:`~rankjax.Selection`, the chosen
    candidate's feature map, its name and kernel (``"linear"`` or the kernel's kind), every
    hold-out's :class:`Rows`, and for a blend ``{"kernel_weight", "linear_lam"}``."""
    selection: object
    feature_map: object
    features: str
    kernel: str
    rows: list
    blend: Optional[dict] = None


class _Fit:
    """One fit's data: the rows, labels, queries, graph, folds, λ grid, the evaluation set,
    the cross-fitting's part of each row and the screen's subsample."""

    def __init__(self, c: Candidates, X, y, seg, graph, valid, lams):
        self.c, self.X, self.y, self.seg, self.graph, self.valid = c, X, y, seg, graph, valid
        self.lams = np.asarray(lams, np.float64)
        self.m = X.shape[0]
        self.folds = None if valid is not None else make_folds(graph, c.folds, seed=c.seed)
        rng = np.random.default_rng(c.seed)
        Q = seg.num_queries
        self.part = None if valid is not None or Q < 2 else query_parts(seg, CROSSFIT_PARTS, rng)
        self.sub = whole_queries(seg, SCREEN_ROWS, rng)
        self.sub_seg = dense_segments(np.unique(seg.seg[self.sub], return_inverse=True)[1])
        self.sub_graph = graph if self.sub.size == self.m else graph.restrict(self.sub)
        folds = c.folds if c.folds is None else min(int(c.folds), self.sub_seg.num_queries)
        self.sub_folds = None if valid is not None else make_folds(self.sub_graph, folds,
                                                                   seed=c.seed)
        self.screen_rows = uniform_rows(rng, self.sub.size, SCREEN_BASIS)
        self.crossfit_rows = uniform_rows(rng, self.m, CROSSFIT_BASIS)
        info(c.verbose, "screen: %d of %d rows (whole queries), %s", self.sub.size, self.m,
             "the exact kernel" if self.screen_rows is None else
             f"a uniform Nyström basis of {SCREEN_BASIS} rows")

    def problem(self, rows, fm, sub=False):
        """The problem of a candidate's rows (every row, or the screen's subsample) with
        the evaluation rows through its map."""
        valid = None
        if self.valid is not None:
            Xv, yv, sv = self.valid
            valid = Problem(map_rows(fm, as_dense(Xv)), yv, sv)
        if not sub or self.sub.size == self.m:
            return Problem(rows, self.y, self.graph, valid=valid,
                           qid=self.seg if self.c.identity else None)
        return Problem(take_rows(rows, self.sub), take_rows(self.y, self.sub), self.sub_graph,
                       qid=self.sub_seg if self.c.identity else None, valid=valid)

    def features(self, name, kind):
        """The :class:`Features` of ``kind`` (``"rank"`` or ``"weighted"``): its parts'
        maps where it learns from labels, else every label's."""
        if self.label_derived(kind) and self.part is not None:
            return Features(name, kind, parts=tuple(self.learn(kind, self.part != k)
                                                    for k in range(self.part.max() + 1)))
        return Features(name, kind, full=self.learn(kind, None))

    def label_derived(self, kind) -> bool:
        """Whether the map of ``kind`` learns from labels that a hold-out must not see."""
        return self.valid is None and (kind == "weighted" or len(self.c.categorical) > 0)

    def learn(self, kind, labels):
        """``(map, rows)`` of ``kind`` learned from the labels of the rows ``labels``."""
        if not len(self.c.categorical):
            if kind == "rank":
                return self.ranks()
            return weighted_from(*self.ranks(), self.y, self.seg, labels)
        fm, rows = learn_and_map(as_dense(self.X), self.y, self.seg, kind, self.c.categorical,
                                 labels)
        return fm, as_float_array(rows, DERIVED, finite=True)

    @functools.cache
    def ranks(self):
        """``(map, rows)`` of the label-free rank map (no categorical columns): once."""
        return learn_and_map(as_dense(self.X), self.y, self.seg, "rank")

    def grid(self, problem):
        return Grid(problem, ndcg, {"k": self.c.score_k}, self.lams, self.c.verbose)

    def screen(self, feats, g):
        """``[L]`` NDCG of the kernel of ``g`` on the candidate's features, held out on the
        screen's subsample with its model (or its path scored on the evaluation set)."""
        k = self.c.kernel(g)
        solver = Dual(k) if self.screen_rows is None else Nystrom(k, Basis(rows=self.screen_rows))
        return self.held_out(feats, solver, sub=True)

    def held_out(self, feats, solver, sub=False):
        """``[L]`` NDCG of ``solver``'s hold-out on the candidate's features (every row or
        the subsample; each part's queries predicted through the other parts' map where the
        map learns from labels), or of its path on the evaluation set."""
        return self.scored(*self.predictions(feats, solver, sub))

    def predictions(self, feats, solver, sub=False):
        """``(problem scored, [L, m] predictions)`` of :meth:`held_out`: the hold-out's
        predictions of the training rows, or the path's of the evaluation rows."""
        folds = self.sub_folds if sub else self.folds
        if feats.parts is None:
            p = self.problem(feats.full[1], feats.full[0], sub)
            if self.valid is not None:
                return p.valid, _value_of(p, solver, "path", self.lams).valid_scores
            return p, _value_of(p, solver, "holdout", self.lams, folds).predictions
        part = self.part[self.sub] if sub else self.part
        problems = [self.problem(rows, fm, sub) for fm, rows in feats.parts]
        return problems[0], crossfit_holdout(problems, part, solver, self.lams, folds)

    def scored(self, p, pred, weights=None):
        """``[L]`` NDCG of predictions ``[L, m]`` of ``p``'s rows (``weights``: the values
        the lanes stand for, the λ grid by default)."""
        return self.grid(p).score(pred, self.lams if weights is None else weights)

    def final(self, feats, solver, optimize=True, others=(), states=None):
        """The candidate held out on every row: a :class:`~rankjax.Selection`. A label-free
        map: ``solver``'s exact hold-out over the λ grid (:func:`select_grid`, its model
        kept). A label-derived one: the cross-fitted hold-out of the Nyström model of
        :data:`CROSSFIT_BASIS` uniform rows (Primal for the linear model) chooses λ, then
        the map of every label is fitted with ``solver`` there. ``states``: ``{solver:
        State}`` made on the candidate's problem already (``init`` not called again)."""
        c = self.c
        optimize = optimize and c.optimize
        if feats.parts is None:
            fm, rows = feats.full
            return select_grid(self.problem(rows, fm), [solver, *others], lams=self.lams,
                               folds=self.folds, score_k=c.score_k, optimize=optimize,
                               optimize_steps=c.optimize_steps, ard=c.ard and optimize, seed=c.seed,
                               verbose=c.verbose, extend=c.extend, states=states)
        if optimize:
            warnings.warn("optimize=True refines a label-free candidate: the categorical "
                          "columns' scores are learned from the labels, so the cross-fitted "
                          "grid's point is kept", UserWarning, stacklevel=6)
        k = solver.tuned_kernel()
        cf = (Auto() if k is None else Dual(k) if self.crossfit_rows is None else
              Nystrom(k, Basis(rows=self.crossfit_rows)))
        p, pred = self.predictions(feats, cf)
        scores = self.scored(p, pred)
        i = best_index(scores)
        fm, rows = self.learn(feats.kind, None)
        feats.full = (fm, rows)
        lam = float(self.lams[i])
        model = _value_of(self.problem(rows, fm), solver, "fit", lam)
        info(c.verbose, "%s: cross-fitted hold-out NDCG %.4f at λ %.4g; the map of every "
             "label fitted there", feats.name, scores[i], lam)
        n = self.lams.size
        gam = None if k is None else float(k.gamma)
        rows_ = getattr(model, "basis_rows", None)
        return Selection(self.lams, None if k is None else np.full(n, gam), scores, i, lam,
                         gam, float(scores[i]), model,
                         None if rows_ is None else np.asarray(rows_), None, solver,
                         np.zeros(n, bool), pred[i])


def _value_of(problem, solver, method, lam, *args):
    """``solver.method(problem, λ, ...)``'s value, the solver checked for the problem first
    (λ on the host, in the rows' dtype)."""
    solver = check_call(problem, solver, method, "select")
    lam = lam if method == "fit" else device_array(lam, problem.X.dtype)
    state = solver.init(problem, method, 1 if method == "fit" else lam.shape[0], *args[:1])
    return getattr(solver, method)(problem, lam, *args, state).value


def crossfit_holdout(problems, part, solver, lams, folds):
    r"""``[L, m]`` cross-fitted hold-out predictions: ``problems`` the same rows, labels and
    graph through the map learned on the labels of every part but ``k`` (``problems[k]``),
    ``part`` ``[m]`` each row's part (whole queries); every row of part ``k`` predicted by
    ``solver``'s exact hold-out (``folds``, over ``lams`` ``[L]``) on ``problems[k]``: the
    model that predicts a held-out query never saw its labels, and neither did the map of
    its features."""
    pred = np.full((len(lams), part.shape[0]), np.nan)
    for k, p in enumerate(problems):                    # map k scores part k alone
        mine = part == k
        if mine.any():
            P = np.asarray(_value_of(p, solver, "holdout", lams, folds).predictions)
            pred = np.where(mine[None, :], P, pred)
    return pred


def take_rows(a, rows):
    """The rows ``rows`` of a concrete array: sliced on its host view (no program to
    compile for each subsample's shape), gathered on the device where it has none."""
    v = host_view(a)
    out = device_array(v[rows]) if v is not None else jnp.take(jnp.asarray(a), rows, axis=0)
    return as_float_array(out, DERIVED, finite=True) if out.ndim == 2 else out


def query_parts(seg, k, rng):
    """``[m]`` each row's part of ``min(k, Q)`` parts of the ``Q`` queries drawn at random
    (whole queries; the parts' sizes in queries differ by at most one)."""
    Q = seg.num_queries
    k = min(int(k), Q)
    of_query = np.empty(Q, np.int64)
    of_query[rng.permutation(Q)] = np.arange(Q) * k // Q
    return of_query[seg.seg]


def uniform_rows(rng, m, b):
    """``[b]`` sorted uniform row indices of ``m`` rows, or None (the exact kernel) when
    ``m <= b``."""
    return None if m <= b else np.sort(rng.choice(m, b, replace=False))


def whole_queries(seg, rows, rng):
    """``[u]`` sorted row indices of whole queries drawn at random until at least ``rows``
    rows (every row when there are at most ``rows``)."""
    m = seg.seg.shape[0]
    if m <= rows:
        return np.arange(m)
    order = rng.permutation(seg.num_queries)
    sizes = np.bincount(seg.seg, minlength=seg.num_queries)[order]
    take = order[:int(np.searchsorted(np.cumsum(sizes), rows)) + 1]
    return np.flatnonzero(np.isin(seg.seg, take))


def best_index(scores) -> int:
    """The index of the best finite score."""
    if np.all(np.isnan(scores)):
        raise ValueError(UNDEFINED)
    return int(np.nanargmax(scores))


def best_score(scores) -> float:
    """The best finite score, ``-inf`` when none is."""
    s = np.asarray(scores, np.float64)
    return -np.inf if np.all(np.isnan(s)) else float(np.nanmax(s))


def screen_ranks(f: _Fit, feats):
    """The ranks candidate's screen over the γ ladder: ``(rows, best γ, reference γ)``."""
    gammas, g0 = f.c.ladder(feats.one()[1])
    out = {g: f.screen(feats, g) for g in gammas}
    kind = f.c.kernel(g0).kind
    rows = [Rows(feats.name, kind, g, f.lams, out[g], np.zeros(f.lams.size, bool))
            for g in sorted(out)]
    return rows, max(sorted(out), key=lambda g: best_score(out[g])), g0


def choose(c: Candidates, X, y, seg, graph, valid, lams) -> Choice:
    """The candidates of the module's docstring: the kernel candidates screened, the best
    held out on every row (refined by the gradient with ``optimize``) and compared there with
    the linear model on the ranks (its λ grid). ``X`` ``[m, n]`` the rows as given, ``y``
    ``[m]``, ``seg`` their :class:`~rankjax.Segments`, ``graph`` the training graph,
    ``valid`` ``(X, y, Segments)`` of an evaluation set (rows as given) or None, ``lams``
    ``[L]``. Returns a :class:`Choice`."""
    f = _Fit(c, X, y, seg, graph, valid, lams)
    ranks = f.features("ranks", "rank")
    fm, U = ranks.one()
    route = c.route(c.kernel(c.ladder(U)[1]))
    first = route.init(f.problem(U, fm), "holdout", f.lams.size, f.folds)  # refused up front
    rows, g_best, g0 = screen_ranks(f, ranks)
    kind = rows[0].kernel
    kernels = {ranks.name: (ranks, g_best,
                            best_score(next(r.scores for r in rows if r.gamma == g_best)))}
    if not c.optimize and (f.part is not None or valid is not None):
        weighted = f.features("weighted ranks", "weighted")
        g = g_best * c.ladder(weighted.one()[1])[1] / g0
        scores = f.screen(weighted, g)
        rows.append(Rows(weighted.name, kind, g, f.lams, scores, np.zeros(f.lams.size, bool)))
        kernels[weighted.name] = (weighted, g, best_score(scores))
    for name, (_, g, score) in kernels.items():
        info(c.verbose, "screen: %s γ %.4g, best hold-out NDCG %.4f", name, g, score)
    feats, g, _ = kernels[max(kernels, key=lambda k: kernels[k][2])]
    others = ()
    if c.optimize:                  # the descent starts from the grid's best on every row
        others = [c.route(c.kernel(h)) for h in sorted({r.gamma for r in rows}) if h != g]
    kernel_sel = f.final(feats, c.route(c.kernel(g)), others=others,
                         states=None if feats is not ranks else {first.solver: first})
    linear_sel = f.final(ranks, Auto(), optimize=False)      # the gradient learns kernels
    info(c.verbose, "%s γ %.4g: hold-out NDCG %.4f; the linear model on the ranks: %.4f",
         feats.name, g, kernel_sel.score, linear_sel.score)
    rows += final_rows(kernel_sel, feats.name, kind) + final_rows(linear_sel, ranks.name, "linear")
    mixed = blend(f, feats, ranks, kernel_sel, linear_sel, kind)
    if mixed is not None:
        rows.append(mixed[1])
        info(c.verbose, "the blend of the two, %.3g of the kernel's: hold-out NDCG %.4f",
             float(mixed[0].model.weight), mixed[0].score)
        if mixed[0].score > max(best_score(kernel_sel.score), best_score(linear_sel.score)):
            return Choice(mixed[0], ranks.full[0], mixed[1].features, mixed[1].kernel, rows,
                          {"kernel_weight": float(mixed[0].model.weight),
                           "linear_lam": float(linear_sel.lam)})
    if best_score(linear_sel.score) > best_score(kernel_sel.score):    # the kernel's descent kept
        return Choice(linear_sel._replace(trajectory=kernel_sel.trajectory), ranks.full[0],
                      ranks.name, "linear", rows)
    return Choice(kernel_sel, feats.full[0], feats.name, kind, rows)


def blend(f: _Fit, feats, ranks, kernel_sel, linear_sel, kind):
    r"""``(Selection, Rows)`` of the best blend :math:`w f_K + (1 - w) f_L` of the kernel and
    linear candidates' final models, :math:`w` on the :math:`L - 2` weights strictly inside
    (0, 1) of ``linspace(0, 1, L)`` (``L`` the λ grid's size, at least 3), judged by the
    exact hold-out of the blended held-out predictions (each candidate's at its own λ; a
    blend of two fixed models is held out by blending their held-out predictions). The
    Selection's model is a :class:`~rankjax.BlendModel` of rows through the ranks' map (the
    weighted ranks' kernel as a :class:`~rankjax.ScaledModel` of the ranks). None where a
    candidate kept no held-out predictions, with ``optimize`` (the learned kernel is kept as
    learned, or the grid's point as the grid without blends chose it) or with categorical
    columns under the weighted map (not the ranks times column weights)."""
    if (f.c.optimize or kernel_sel.predictions is None or linear_sel.predictions is None
            or (feats is not ranks and f.c.categorical)):
        return None
    a, b = kernel_sel.predictions, linear_sel.predictions
    views = host_view(a), host_view(b)          # on the CPU no program per shape: numpy
    xp = np if all(v is not None for v in views) else jnp
    a, b = views if xp is np else (jnp.asarray(a), jnp.asarray(b))
    dt = xp.result_type(a, b)
    n = max(f.lams.size, 3)
    w = np.linspace(0.0, 1.0, n)
    P = device_array(xp.asarray(w, dt)[:, None] * a + xp.asarray(1 - w, dt)[:, None] * b)
    scored = f.problem(ranks.full[1], ranks.full[0])
    scores = f.scored(scored if f.valid is None else scored.valid, P, w)[1:-1]
    if np.all(np.isnan(scores)):
        return None
    j = int(np.nanargmax(scores))
    first = kernel_sel.model
    if feats is not ranks:                  # the weighted ranks: the ranks times the weights
        s0, s1 = np.asarray(ranks.full[0].scale), np.asarray(feats.full[0].scale)
        first = ScaledModel(device_array(np.where(s0 != 0, s1 / np.where(s0 != 0, s0, 1), 0)),
                            first)
    weight = device_array(np.asarray(w[1 + j], dt))
    sel = kernel_sel._replace(score=float(scores[j]), predictions=lane(P, 1 + j),
                              model=BlendModel(first, linear_sel.model, weight))
    name = ranks.name if feats is ranks else f"{feats.name} + {ranks.name}"
    return sel, Rows(name, f"{kind} + linear", float(sel.gamma),
                     np.full(n - 2, float(kernel_sel.lam)), scores, np.zeros(n - 2, bool),
                     "final", w[1:-1], float(linear_sel.lam))


def final_rows(sel, features, kernel):
    """The :class:`Rows` of a final :class:`~rankjax.Selection`, a block per run of one γ."""
    n = len(sel.lams)
    gam = np.full(n, np.nan) if sel.gammas is None else np.asarray(sel.gammas, np.float64)
    ext = np.zeros(n, bool) if sel.extended is None else np.asarray(sel.extended, bool)
    same = (gam[1:] == gam[:-1]) | (np.isnan(gam[1:]) & np.isnan(gam[:-1]))
    cuts = np.r_[0, np.flatnonzero(~same) + 1, n]
    return [Rows(features, kernel, float(gam[a]), np.asarray(sel.lams)[a:b],
                 np.asarray(sel.scores)[a:b], ext[a:b], "final") for a, b in zip(cuts, cuts[1:])]
